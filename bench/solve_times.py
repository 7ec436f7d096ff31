"""Solve times of the optimizer on synthetic but realistic perf tables (``python -m ucudnn.bench.solve_times``).

Not a test: prints a table. Each perf table has 8 algorithms per micro-batch size, cuDNN-like: two with no
workspace (slow, flat cost per sample), six whose workspace grows with the micro-batch size and which are
faster per sample but carry a launch overhead, all with +-15% multiplicative noise (seeded). Times are the
median of repeated runs.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections.abc import Callable
from functools import partial

from ucudnn.cli.plan import native_stdout_to_stderr
from ucudnn.optimizer import (
    AlgoPerf,
    KernelOptions,
    MicroBatch,
    Plan,
    best_plan,
    candidate_batch_sizes,
    divide_workspace,
    divide_workspace_greedy,
    pareto_front,
)

MIB = 1 << 20
# (per-call overhead ms, ms per sample, workspace bytes per sample) for algos 0..7.
_ALGOS = (
    (0.02, 0.050, 0),
    (0.05, 0.040, 0),
    (0.10, 0.030, 64 << 10),
    (0.15, 0.022, 256 << 10),
    (0.20, 0.018, 512 << 10),
    (0.30, 0.014, 1 << 20),
    (0.40, 0.011, 2 << 20),
    (0.60, 0.008, 4 << 20),
)


def synthetic_perfs(batch: int, policy: str, rng: random.Random, scale: float = 1.0) -> list[AlgoPerf]:
    perfs = []
    for b in candidate_batch_sizes(batch, policy):
        for algo, (overhead, per_sample, ws_per_sample) in enumerate(_ALGOS):
            t = (overhead + per_sample * b) * scale * rng.uniform(0.85, 1.15)
            ws = int(ws_per_sample * b * scale * rng.uniform(0.85, 1.15))
            perfs.append(AlgoPerf(b, algo, t, ws, deterministic=algo != 3))
    return perfs


def median_time(fn: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def synthetic_fronts(n: int, rng: random.Random, points: int = 20) -> list[KernelOptions]:
    """``n`` kernels with ``points``-plan Pareto fronts of varied scale: workspace from 0 up to 16 MiB-2 GiB on a
    geometric grid (like power-of-two micro-batches), time falling steeply then flattening, with noise that makes
    the fronts non-convex (where the greedy loses to the ILP)."""
    out = []
    for k in range(n):
        scale = rng.lognormvariate(0.0, 0.8)
        t0 = scale * rng.uniform(0.5, 5.0)
        ws_max = scale * rng.uniform(16 * MIB, 2048 * MIB)
        plans: list[Plan] = []
        for j in range(points):
            ws = 0 if j == 0 else int(ws_max * 2.0 ** (-(points - 1 - j) * 0.5) * rng.uniform(0.9, 1.1))
            t = t0 * (0.35 + 0.65 * math.exp(-3.0 * j / (points - 1))) * rng.uniform(0.97, 1.03)
            if not plans or (ws > plans[-1].workspace_bytes and t < plans[-1].time_ms):
                plans.append(Plan((MicroBatch(256, j % 8, t, ws),)))
        out.append(KernelOptions(f"k{k}", tuple(plans)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ucudnn.bench.solve_times", description=__doc__)
    parser.add_argument("--repeats", type=int, default=15, help="runs per DP measurement (median)")
    parser.add_argument("--seed", type=int, default=2018)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    started = time.perf_counter()
    limit = 64 * MIB

    print(f"{'solver':<34} {'size':>22} {'median':>12}  note")
    for batch in (256, 1024):
        for policy in ("undivided", "powerOfTwo", "all"):
            perfs = synthetic_perfs(batch, policy, rng)
            result = best_plan(perfs, batch=batch, workspace_limit_bytes=limit, policy=policy)
            dt = median_time(
                partial(best_plan, perfs, batch=batch, workspace_limit_bytes=limit, policy=policy), args.repeats
            )
            plan = result.plan
            note = f"{len(plan.micro_batches)} micro-batches, {plan.time_ms:.3f} ms" if plan else "infeasible"
            print(f"{'DP best_plan (64 MiB)':<34} {f'B={batch} {policy}':>22} {dt * 1e3:9.3f} ms  {note}")
    for policy in ("powerOfTwo", "all"):
        perfs = synthetic_perfs(256, policy, rng)
        front = pareto_front(perfs, batch=256, workspace_limit_bytes=1 << 40, policy=policy)
        dt = median_time(
            partial(pareto_front, perfs, batch=256, workspace_limit_bytes=1 << 40, policy=policy),
            max(3, args.repeats // 3),
        )
        print(f"{'DP pareto_front (unlimited)':<34} {f'B=256 {policy}':>22} {dt * 1e3:9.3f} ms  {len(front)} points")

    for n in (50, 150, 500):
        kernels = synthetic_fronts(n, rng)
        points = sum(len(k.plans) for k in kernels)
        least = sum(k.plans[0].workspace_bytes for k in kernels)
        most = sum(k.plans[-1].workspace_bytes for k in kernels)
        budget = least + (most - least) // 4  # a quarter of the way to every kernel's fastest plan
        repeats = 3 if n < 500 else 1
        with native_stdout_to_stderr():  # keep HiGHS diagnostics out of the table
            ilp = divide_workspace(kernels, total_workspace_bytes=budget)
            t_ilp = median_time(partial(divide_workspace, kernels, total_workspace_bytes=budget), repeats)
        greedy = divide_workspace_greedy(kernels, total_workspace_bytes=budget)
        t_greedy = median_time(partial(divide_workspace_greedy, kernels, total_workspace_bytes=budget), repeats)
        size = f"{n} kernels, {points} plans"
        print(
            f"{'ILP divide_workspace':<34} {size:>22} {t_ilp * 1e3:9.1f} ms  {ilp.status.value}, "
            f"{ilp.total_time_ms:.2f} ms total"
        )
        gap = greedy.total_time_ms / ilp.total_time_ms - 1 if ilp.total_time_ms else 0.0
        print(
            f"{'greedy divide_workspace_greedy':<34} {size:>22} {t_greedy * 1e3:9.1f} ms  "
            f"{greedy.total_time_ms:.2f} ms total, {gap * 100:+.1e}% vs ILP"
        )
    print(f"(whole run: {time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
