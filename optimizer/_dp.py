"""The dynamic programme shared by Workspace Reuse and the Pareto front.

T(n), the least time to run n samples, is an unbounded knapsack over the candidate sizes: each usable
(size b, time t) "coin" may be used any number of times. Adding one coin to a table is a min-plus update
T[n] = min_k T[n - k*b] + k*t, done with doubling shifts (k = 1, 2, 4, ...), so a coin costs
ceil(log2(B / b)) + 1 vectorised numpy operations instead of a Python loop over n. Each entry stays a genuine
sum of non-negative times, so rounding is relative to the value itself.

Coins are added in order of increasing workspace. After the coins with workspace <= w, the table holds the best
times under limit w: this is what both the tie-break on workspace and the Pareto front read.

The table has B + 1 entries, so it is used only where the candidate sizes are that many anyway (policy ``all``).
When every size but B itself is a power of two (``powerOfTwo``, ``undivided``), no table is needed: any multiset
of powers of two summing to n splits into groups summing to the binary digits of n (take the elements in
descending order: every prefix sum is a multiple of the next element, so no digit is skipped), and a group of
2^j is either one micro-batch of 2^j or two groups of 2^(j-1). So with c(0) = t(1) and
c(j) = min(t(2^j), 2 c(j-1)), T(n) is the sum of c(j) over n's binary digits, B's own size aside: O(log B) time
and memory, whatever B is (``BinaryKnapsack``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from .policies import BatchSizePolicy, candidate_batch_sizes, parse_policy
from .types import AlgoPerf, MicroBatch, Plan

FloatArray = npt.NDArray[np.float64]

# Times within this relative distance count as equal, so the documented tie-breaks are not at the mercy of
# float rounding (the DP's own rounding is ~1e-15 relative).
REL_TOL = 1e-9


def validate_common(batch: int, workspace_limit_bytes: int, policy: BatchSizePolicy | str) -> BatchSizePolicy:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive int, not {batch!r}")
    if isinstance(workspace_limit_bytes, bool) or not isinstance(workspace_limit_bytes, int):
        raise ValueError(f"workspace_limit_bytes must be an int, not {workspace_limit_bytes!r}")
    if workspace_limit_bytes < 0:
        raise ValueError(f"workspace_limit_bytes must be >= 0, not {workspace_limit_bytes}")
    return parse_policy(policy)


def _check_perf(i: int, p: object) -> AlgoPerf:
    if not isinstance(p, AlgoPerf):
        raise TypeError(f"perfs[{i}]: expected AlgoPerf, not {type(p).__name__}")
    if isinstance(p.batch, bool) or not isinstance(p.batch, int) or p.batch < 1:
        raise ValueError(f"perfs[{i}].batch: must be a positive int, not {p.batch!r}")
    if isinstance(p.workspace_bytes, bool) or not isinstance(p.workspace_bytes, int) or p.workspace_bytes < 0:
        raise ValueError(f"perfs[{i}].workspace_bytes: must be a non-negative int, not {p.workspace_bytes!r}")
    if not isinstance(p.time_ms, (int, float)) or math.isnan(p.time_ms) or p.time_ms < 0:
        raise ValueError(f"perfs[{i}].time_ms: must be a non-negative number (inf: cannot run), not {p.time_ms!r}")
    return p


def algo_key(p: AlgoPerf) -> tuple[float, int, int, int, bool]:
    """Preference among algorithms at one size: faster, then less workspace, then lower algo and math type,
    then deterministic."""
    return (p.time_ms, p.workspace_bytes, p.algo, p.math_type, not p.deterministic)


def usable_perfs(
    perfs: Iterable[AlgoPerf],
    batch: int,
    workspace_limit_bytes: int,
    policy: BatchSizePolicy,
    deterministic_only: bool,
) -> tuple[tuple[int, ...], dict[int, list[AlgoPerf]]]:
    """The policy's sizes and, per size, the usable measurements sorted by preference (all validated)."""
    sizes = candidate_batch_sizes(batch, policy)
    allowed = set(sizes)
    by_size: dict[int, list[AlgoPerf]] = {}
    for i, raw in enumerate(perfs):
        p = _check_perf(i, raw)
        if (
            p.batch in allowed
            and p.workspace_bytes <= workspace_limit_bytes
            and math.isfinite(p.time_ms)
            and (p.deterministic or not deterministic_only)
        ):
            by_size.setdefault(p.batch, []).append(p)
    for lst in by_size.values():
        lst.sort(key=algo_key)
    return sizes, by_size


def new_table(batch: int) -> FloatArray:
    table = np.full(batch + 1, np.inf)
    table[0] = 0.0
    return table


def add_coin(table: FloatArray, size: int, time_ms: float) -> None:
    """In place: allow any number of micro-batches of ``size`` at ``time_ms`` each."""
    n = table.shape[0] - 1
    shift, cost = size, float(time_ms)
    while shift <= n:
        np.minimum(table[shift:], table[:-shift] + cost, out=table[shift:])
        shift *= 2
        cost *= 2.0


def close_enough(value: float, best: float) -> bool:
    """``value`` (>= best up to rounding) equals ``best`` within REL_TOL."""
    return value <= best + REL_TOL * abs(best)


def reconstruct(table: FloatArray, coins: Mapping[int, AlgoPerf]) -> Plan:
    """A plan achieving ``table[-1]`` from ``coins`` (one algorithm per size), the one whose micro-batch sizes,
    in descending order, are lexicographically largest: fewer, larger micro-batches.

    Taking the largest size that still leads to an optimal completion at every step yields exactly that plan,
    and the chosen sizes never increase, so the previous choice is tried first.
    """
    n = table.shape[0] - 1
    desc = sorted(coins, reverse=True)
    chosen: list[MicroBatch] = []
    m = n
    last: int | None = None
    while m > 0:
        pick: int | None = None
        if last is not None and last <= m and close_enough(coins[last].time_ms + table[m - last], table[m]):
            pick = last
        else:
            for s in desc:
                if s <= m and close_enough(coins[s].time_ms + table[m - s], table[m]):
                    pick = s
                    break
        if pick is None:  # pragma: no cover - only reachable through pathological rounding
            pick = min((s for s in desc if s <= m), key=lambda s: (coins[s].time_ms + table[m - s], -s))
        chosen.append(MicroBatch.from_perf(coins[pick]))
        m -= pick
        last = pick
    return Plan(tuple(chosen))


def describe_infeasible(
    batch: int,
    sizes: tuple[int, ...],
    usable: Mapping[int, object],
    policy: BatchSizePolicy,
    workspace_limit_bytes: int,
    deterministic_only: bool,
) -> str:
    have = sorted(usable)
    missing = [s for s in sizes if s not in usable]
    what = "deterministic algorithm" if deterministic_only else "algorithm"
    shown = missing if len(missing) <= 12 else [*missing[:12], "..."]
    return (
        f"no plan for batch {batch} under policy {policy.value} with workspace limit {workspace_limit_bytes} bytes: "
        f"usable micro-batch sizes {have} cannot make {batch}; sizes with no measured {what} fitting the "
        f"limit: {shown}"
    )


class Knapsack:
    """T(batch) as coins are added, and the plan that achieves it (``reconstruct``'s tie-breaks)."""

    def add(self, size: int, time_ms: float) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def best(self) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def snapshot(self) -> Knapsack:  # pragma: no cover - interface
        raise NotImplementedError

    def plan(self, coins: Mapping[int, AlgoPerf]) -> Plan:  # pragma: no cover - interface
        raise NotImplementedError


class TableKnapsack(Knapsack):
    """The general case: a table of batch + 1 best times."""

    def __init__(self, batch: int) -> None:
        self.table = new_table(batch)

    def add(self, size: int, time_ms: float) -> None:
        add_coin(self.table, size, time_ms)

    def best(self) -> float:
        return float(self.table[-1])

    def snapshot(self) -> Knapsack:
        copy = TableKnapsack.__new__(TableKnapsack)
        copy.table = self.table.copy()
        return copy

    def plan(self, coins: Mapping[int, AlgoPerf]) -> Plan:
        return reconstruct(self.table, coins)


class BinaryKnapsack(Knapsack):
    """Sizes that are powers of two, and ``batch`` itself: O(log batch) state (see the module's docstring)."""

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.times: dict[int, float] = {}

    def add(self, size: int, time_ms: float) -> None:
        self.times[size] = min(self.times.get(size, math.inf), float(time_ms))

    def _chunks(self) -> tuple[list[float], list[bool]]:
        """c(j) for 2^j <= batch, and whether one micro-batch of 2^j achieves it (preferred on a tie)."""
        cost: list[float] = []
        single: list[bool] = []
        for j in range(self.batch.bit_length()):
            one = self.times.get(1 << j, math.inf)
            halves = 2.0 * cost[j - 1] if j else math.inf
            best = min(one, halves)
            cost.append(best)
            single.append(one < math.inf and close_enough(one, best))
        return cost, single

    def _split(self) -> tuple[float, float, list[bool]]:
        """(time of batch as powers of two, time of one micro-batch of batch, chunk choices)."""
        cost, single = self._chunks()
        total = 0.0
        for j in range(self.batch.bit_length()):
            if self.batch >> j & 1:
                total += cost[j]
        whole = self.times.get(self.batch, math.inf) if self.batch & (self.batch - 1) else math.inf
        return total, whole, single

    def best(self) -> float:
        total, whole, _ = self._split()
        return min(total, whole)

    def snapshot(self) -> Knapsack:
        copy = BinaryKnapsack(self.batch)
        copy.times = dict(self.times)
        return copy

    def plan(self, coins: Mapping[int, AlgoPerf]) -> Plan:
        total, whole, single = self._split()
        if whole < math.inf and close_enough(whole, min(total, whole)):
            return Plan((MicroBatch.from_perf(coins[self.batch]),))
        sizes: list[int] = []
        for j in reversed(range(self.batch.bit_length())):
            if self.batch >> j & 1:
                sizes += self._chunk_sizes(j, single)
        sizes.sort(reverse=True)
        return Plan(tuple(MicroBatch.from_perf(coins[s]) for s in sizes))

    @staticmethod
    def _chunk_sizes(j: int, single: list[bool]) -> list[int]:
        """The micro-batch sizes of the best group of 2^j: 2^k micro-batches of 2^(j-k), k the fewest halvings."""
        k = j
        while not single[k]:
            k -= 1
        return [1 << k] * (1 << (j - k))


def knapsack(batch: int, sizes: Iterable[int]) -> Knapsack:
    """The cheapest exact knapsack for coins of these sizes (no table when they are powers of two, or batch)."""
    if all(s == batch or s & (s - 1) == 0 for s in sizes):
        return BinaryKnapsack(batch)
    return TableKnapsack(batch)
