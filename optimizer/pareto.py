"""The time/workspace trade-off curve of one kernel (its Pareto, or "desirable", set of plans)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from . import _dp
from .policies import BatchSizePolicy
from .reuse import check_quantum, quantized_plan
from .types import AlgoPerf, Plan


def pareto_front(
    perfs: Iterable[AlgoPerf],
    *,
    batch: int,
    workspace_limit_bytes: int,
    policy: BatchSizePolicy | str = "powerOfTwo",
    deterministic_only: bool = False,
    quantum: int = 1,
) -> tuple[Plan, ...]:
    """Every plan worth having for a mini-batch of ``batch``: sorted by increasing workspace with strictly
    decreasing time, each the fastest plan within its workspace; empty when nothing fits.

    A plan's workspace is one of the measured workspaces, so the front is the set of best plans under each
    distinct measured workspace w <= ``workspace_limit_bytes``, kept where the time drops (by more than a
    relative 1e-9). Equivalent to a DP carrying Pareto sets per n, but it reuses one table: measurements are
    added in order of workspace, each a vectorised knapsack update, and the table after the measurements with
    workspace <= w is the best-time table under limit w. Each point's plan follows ``best_plan``'s tie-breaks,
    so the last point is ``best_plan``'s plan at the same limit.

    ``quantum`` > 1: only plans whose micro-batches but one are multiples of ``quantum`` (``best_plan``'s
    ``quantum``); each point is then ``best_plan(quantum=...)``'s plan under its workspace.
    """
    pol = _dp.validate_common(batch, workspace_limit_bytes, policy)
    check_quantum(quantum)
    _, usable = _dp.usable_perfs(perfs, batch, workspace_limit_bytes, pol, deterministic_only)

    # Per size, only algorithms faster than every one needing no more workspace can ever be chosen.
    coins: list[AlgoPerf] = []
    for lst in usable.values():
        by_ws = sorted(lst, key=lambda p: (p.workspace_bytes, *_dp.algo_key(p)))
        best = float("inf")
        for p in by_ws:
            if p.time_ms < best:
                coins.append(p)
                best = p.time_ms
    coins.sort(key=lambda p: (p.workspace_bytes, p.batch, *_dp.algo_key(p)))
    if quantum > 1:
        return _quantized_front(batch, quantum, coins)

    table = _dp.knapsack(batch, usable)
    current: dict[int, AlgoPerf] = {}
    front: list[Plan] = []
    best_time = float("inf")
    for _, group in itertools.groupby(coins, key=lambda p: p.workspace_bytes):
        for p in group:
            table.add(p.batch, p.time_ms)
            current[p.batch] = p
        t = table.best()
        if t < best_time and not _dp.close_enough(best_time, t):
            plan = table.plan(dict(current))
            if not front or plan.time_ms < front[-1].time_ms:
                front.append(plan)
            best_time = t
    return tuple(front)


def _quantized_front(batch: int, quantum: int, coins: list[AlgoPerf]) -> tuple[Plan, ...]:
    """pareto_front under ``quantum`` > 1: ``best_plan``'s quantized plan under each distinct workspace of the
    ``coins`` (by increasing workspace; per size, each faster than the one before), kept where the time drops."""
    fastest: dict[int, AlgoPerf] = {}
    front: list[Plan] = []
    for _, group in itertools.groupby(coins, key=lambda p: p.workspace_bytes):
        for p in group:
            fastest[p.batch] = p  # a size's later coin is faster than its earlier ones
        plan = quantized_plan(batch, quantum, fastest)
        if plan is None:
            continue
        if not front or (plan.time_ms < front[-1].time_ms and not _dp.close_enough(front[-1].time_ms, plan.time_ms)):
            front.append(plan)
    return tuple(front)
