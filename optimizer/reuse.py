"""Workspace Reuse: the fastest plan for one kernel under a per-kernel workspace limit."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from . import _dp
from .policies import BatchSizePolicy
from .types import AlgoPerf, PlanResult, Status


def best_plan(
    perfs: Iterable[AlgoPerf],
    *,
    batch: int,
    workspace_limit_bytes: int,
    policy: BatchSizePolicy | str = "powerOfTwo",
    deterministic_only: bool = False,
) -> PlanResult:
    """The fastest way to run a mini-batch of ``batch`` samples as micro-batches whose sizes ``policy`` allows,
    each with an algorithm needing at most ``workspace_limit_bytes`` (and deterministic if asked).

    Solves T(0) = 0, T(n) = min over sizes b <= n of t*(b) + T(n - b), t*(b) being the fastest usable algorithm
    at size b. Measurements at sizes outside the policy are ignored. Ties (times within a relative 1e-9) are
    broken, in order, by: less plan workspace; larger micro-batches (the descending list of sizes compared
    lexicographically, so fewer micro-batches); per size, the algorithm with less workspace, then the lower algo
    number, then the lower math type, then a deterministic one. The same input always gives the same plan.

    Returns OPTIMAL with the plan, or INFEASIBLE (plan None) with a message naming the sizes that lack a usable
    algorithm. Raises ValueError/TypeError for malformed arguments or measurements (negative or NaN time,
    non-positive batch, negative workspace).
    """
    pol = _dp.validate_common(batch, workspace_limit_bytes, policy)
    sizes, usable = _dp.usable_perfs(perfs, batch, workspace_limit_bytes, pol, deterministic_only)
    fastest = {size: lst[0] for size, lst in usable.items()}

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
