"""Workspace Reuse: the fastest plan for one kernel under a per-kernel workspace limit."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

from . import _dp
from .policies import BatchSizePolicy
from .types import AlgoPerf, MicroBatch, Plan, PlanResult, Status


def best_plan(
    perfs: Iterable[AlgoPerf],
    *,
    batch: int,
    workspace_limit_bytes: int,
    policy: BatchSizePolicy | str = "powerOfTwo",
    deterministic_only: bool = False,
    quantum: int = 1,
) -> PlanResult:
    """The fastest way to run a mini-batch of ``batch`` samples as micro-batches whose sizes ``policy`` allows,
    each with an algorithm needing at most ``workspace_limit_bytes`` (and deterministic if asked).

    Solves T(0) = 0, T(n) = min over sizes b <= n of t*(b) + T(n - b), t*(b) being the fastest usable algorithm
    at size b. Measurements at sizes outside the policy are ignored. Ties (times within a relative 1e-9) are
    broken, in order, by: less plan workspace; larger micro-batches (the descending list of sizes compared
    lexicographically, so fewer micro-batches); per size, the algorithm with less workspace, then the lower algo
    number, then the lower math type, then a deterministic one. The same input always gives the same plan.

    ``quantum`` > 1: every micro-batch but one (which the caller runs last) must be a multiple of ``quantum``
    samples, as where a tensor's declared alignment holds only at such offsets (:func:`keeps_quantum`). The
    plan is then the fastest of: the rest as multiples of ``quantum`` (the same DP in units of ``quantum``) plus
    one last micro-batch of any allowed size; ties go to less workspace, then fewer micro-batches.

    Returns OPTIMAL with the plan, or INFEASIBLE (plan None) with a message naming the sizes that lack a usable
    algorithm. Raises ValueError/TypeError for malformed arguments or measurements (negative or NaN time,
    non-positive batch, negative workspace).
    """
    pol = _dp.validate_common(batch, workspace_limit_bytes, policy)
    check_quantum(quantum)
    sizes, usable = _dp.usable_perfs(perfs, batch, workspace_limit_bytes, pol, deterministic_only)
    fastest = {size: lst[0] for size, lst in usable.items()}
    if quantum > 1:
        plan = quantized_plan(batch, quantum, fastest)
        if plan is not None:
            return PlanResult(
                Status.OPTIMAL,
                plan,
                f"{len(plan.micro_batches)} micro-batch(es), {plan.time_ms:.6g} ms, {plan.workspace_bytes} bytes "
                f"(all but one a multiple of {quantum})",
            )
        return PlanResult(
            Status.INFEASIBLE,
            None,
            _dp.describe_infeasible(batch, sizes, usable, pol, workspace_limit_bytes, deterministic_only)
            + f"; every micro-batch but the last a multiple of {quantum}",
        )

    # Adding the sizes in order of their workspace lets the least plan workspace among the fastest plans be read
    # off as the first stage whose T(batch) is already optimal.
    order = sorted(fastest.values(), key=lambda p: (p.workspace_bytes, p.batch))
    table = _dp.knapsack(batch, fastest)
    stages: list[tuple[int, float, _dp.Knapsack]] = []
    for ws, group in itertools.groupby(order, key=lambda p: p.workspace_bytes):
        for p in group:
            table.add(p.batch, p.time_ms)
        t = table.best()
        # Only a stage that lowers T(batch) can be the first optimal one, so only those need a snapshot.
        if not stages or t < stages[-1][1]:
            stages.append((ws, t, table.snapshot()))

    if not stages or stages[-1][1] == float("inf"):
        return PlanResult(
            Status.INFEASIBLE,
            None,
            _dp.describe_infeasible(batch, sizes, usable, pol, workspace_limit_bytes, deterministic_only),
        )
    best_time = stages[-1][1]
    ws_limit, _, stage_table = next(s for s in stages if _dp.close_enough(s[1], best_time))
    coins = {size: p for size, p in fastest.items() if p.workspace_bytes <= ws_limit}
    plan = stage_table.plan(coins)
    return PlanResult(
        Status.OPTIMAL,
        plan,
        f"{len(plan.micro_batches)} micro-batch(es), {plan.time_ms:.6g} ms, {plan.workspace_bytes} bytes",
    )


def keeps_quantum(plan: Plan, quantum: int) -> bool:
    """Whether ``plan`` can run with every micro-batch but its last a multiple of ``quantum`` samples: at most
    one of its micro-batches is not."""
    return sum(1 for mb in plan.micro_batches if mb.batch % quantum) <= 1


def _ranks_before(a: tuple[float, int, int], b: tuple[float, int, int]) -> bool:
    """(time, workspace, count) ``a`` before ``b``: faster, or as fast (within rounding) and then less."""
    if _dp.close_enough(a[0], b[0]) and _dp.close_enough(b[0], a[0]):
        return a[1:] < b[1:]
    return a[0] < b[0]


def check_quantum(quantum: object) -> None:
    """Raise ValueError unless ``quantum`` is an int >= 1."""
    if isinstance(quantum, bool) or not isinstance(quantum, int) or quantum < 1:
        raise ValueError(f"quantum must be an int >= 1, not {quantum!r}")


def quantized_plan(batch: int, quantum: int, fastest: dict[int, AlgoPerf]) -> Plan | None:
    """best_plan under ``quantum`` > 1 from the fastest algorithm of each usable size; None when nothing fits."""
    coins = {size // quantum: p for size, p in fastest.items() if size % quantum == 0}
    table = _dp.new_table(batch // quantum)
    for units, p in sorted(coins.items()):
        _dp.add_coin(table, units, p.time_ms)
    best: tuple[tuple[float, int, int], Plan] | None = None
    for last, p in sorted(fastest.items(), reverse=True):
        units, rest = divmod(batch - last, quantum)
        if rest or not math.isfinite(table[units]):
            continue
        head = _dp.reconstruct(table[: units + 1], coins).micro_batches if units else ()
        plan = Plan((*head, MicroBatch.from_perf(p)))
        rank = (plan.time_ms, plan.workspace_bytes, len(plan.micro_batches))
        if best is None or _ranks_before(rank, best[0]):
            best = (rank, plan)
    return None if best is None else best[1]
