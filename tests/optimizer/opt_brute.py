"""Brute-force references for the optimizer tests: enumerate every plan instead of solving a DP or an ILP."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ucudnn.optimizer import AlgoPerf, KernelOptions, Plan, candidate_batch_sizes

REL = 1e-9


def two_algorithms(batch: int = 128) -> list[AlgoPerf]:
    """The hand-computed case at each powerOfTwo size b: fast (algo 1) 1 ms launch cost + 0.1 ms per sample and
    1 KiB of workspace per sample; slow (algo 0) 1 ms per sample and 16 bytes."""
    perfs = []
    for b in candidate_batch_sizes(batch, "powerOfTwo"):
        perfs.append(AlgoPerf(b, 1, 1.0 + 0.1 * b, 1024 * b))
        perfs.append(AlgoPerf(b, 0, 1.0 * b, 16))
    return perfs


def close(a: float, b: float) -> bool:
    return abs(a - b) <= REL * max(1.0, abs(a), abs(b))


def all_plans(perfs: Sequence[AlgoPerf], batch: int, sizes: Sequence[int]) -> list[tuple[AlgoPerf, ...]]:
    """Every multiset of measurements (any algorithm, sizes in ``sizes``) whose batches sum to ``batch``."""
    coins = sorted(
        {p for p in perfs if p.batch in set(sizes)}, key=lambda p: (p.batch, p.algo, p.time_ms, p.workspace_bytes)
    )
    out: list[tuple[AlgoPerf, ...]] = []

    def rec(start: int, left: int, acc: list[AlgoPerf]) -> None:
        if left == 0:
            out.append(tuple(acc))
            return
        for i in range(start, len(coins)):
            c = coins[i]
            if c.batch <= left:
                acc.append(c)
                rec(i, left - c.batch, acc)
                acc.pop()

    rec(0, batch, [])
    return out


def time_of(plan: tuple[AlgoPerf, ...]) -> float:
    return sum(sorted(p.time_ms for p in plan))


def ws_of(plan: tuple[AlgoPerf, ...]) -> int:
    return max(p.workspace_bytes for p in plan)


def best_division(kernels: Sequence[KernelOptions], budget: int) -> float | None:
    """The least total time of one plan per kernel within ``budget`` (None if impossible)."""
    best: float | None = None
    for combo in itertools.product(*(k.plans for k in kernels)):
        combo_plans: tuple[Plan, ...] = combo
        if sum(p.workspace_bytes for p in combo_plans) <= budget:
            t = sum(p.time_ms for p in combo_plans)
            if best is None or t < best:
                best = t
    return best
