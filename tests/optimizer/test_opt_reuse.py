"""Workspace Reuse DP (best_plan) against brute-force enumeration of every plan."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ucudnn.optimizer import (
    AlgoPerf,
    BatchSizePolicy,
    MicroBatch,
    Plan,
    Status,
    best_plan,
    candidate_batch_sizes,
    keeps_quantum,
)

from .opt_brute import all_plans, close, time_of, two_algorithms, ws_of

POLICIES = list(BatchSizePolicy)


@st.composite
def tables(draw: st.DrawFn, max_batch: int = 9, exact: bool = True) -> tuple[int, list[AlgoPerf]]:
    """A mini-batch size and measurements at every size up to it (also sizes the policy will ignore).

    With ``exact`` the times are multiples of 1/4 ms, so sums are exact and ties (which the tie-break rules are
    about) are frequent; otherwise arbitrary floats."""
    batch = draw(st.integers(1, max_batch))
    n_algos = draw(st.integers(1, 3))
    time = st.integers(0, 40).map(lambda q: q / 4) if exact else st.floats(0.01, 100.0)
    perfs = []
    for b in range(1, batch + 1):
        for a in range(n_algos):
            if draw(st.booleans()) or b == 1:
                perfs.append(
                    AlgoPerf(
                        batch=b,
                        algo=a,
                        time_ms=draw(time),
                        workspace_bytes=draw(st.sampled_from([0, 10, 20, 30, 50, 80])),
                        deterministic=draw(st.booleans()),
                        math_type=draw(st.sampled_from([0, 0, 1])),
                    )
                )
    return batch, perfs


def usable(perfs: Sequence[AlgoPerf], limit: int, det: bool) -> list[AlgoPerf]:
    return [p for p in perfs if p.workspace_bytes <= limit and (p.deterministic or not det)]


def assert_valid(
    plan: Plan, perfs: Sequence[AlgoPerf], batch: int, sizes: Sequence[int], limit: int, det: bool
) -> None:
    """Every micro-batch is one of the measurements, allowed by policy, limit and determinism."""
    assert plan.batch == batch
    measured = {(p.batch, p.algo, p.time_ms, p.workspace_bytes, p.deterministic, p.math_type) for p in perfs}
    for mb in plan.micro_batches:
        assert (mb.batch, mb.algo, mb.time_ms, mb.workspace_bytes, mb.deterministic, mb.math_type) in measured
        assert mb.batch in sizes
        assert mb.workspace_bytes <= limit
        assert mb.deterministic or not det
    assert plan.workspace_bytes == max(mb.workspace_bytes for mb in plan.micro_batches)


@settings(max_examples=150, deadline=None)
@given(tables(), st.sampled_from(POLICIES), st.sampled_from([0, 10, 25, 50, 100]), st.booleans())
def test_best_plan_is_optimal_and_follows_tie_rules(
    table: tuple[int, list[AlgoPerf]], policy: BatchSizePolicy, limit: int, det: bool
) -> None:
    batch, perfs = table
    sizes = candidate_batch_sizes(batch, policy)
    result = best_plan(perfs, batch=batch, workspace_limit_bytes=limit, policy=policy, deterministic_only=det)
    brute = all_plans(usable(perfs, limit, det), batch, sizes)
    if not brute:
        assert result.status is Status.INFEASIBLE and result.plan is None
        assert str(batch) in result.message
        return
    assert result.status is Status.OPTIMAL and result.plan is not None
    plan = result.plan
    assert_valid(plan, perfs, batch, sizes, limit, det)
    best_t = min(time_of(p) for p in brute)
    assert close(plan.time_ms, best_t)
    # Tie rule 1: least workspace among the fastest plans.
    fastest = [p for p in brute if close(time_of(p), best_t)]
    best_ws = min(ws_of(p) for p in fastest)
    assert plan.workspace_bytes == best_ws
    # Tie rule 2: the descending micro-batch sizes are lexicographically largest.
    contenders = [sorted((c.batch for c in p), reverse=True) for p in fastest if ws_of(p) == best_ws]
    assert [mb.batch for mb in plan.micro_batches] == max(contenders)


@settings(max_examples=60, deadline=None)
@given(tables(max_batch=8, exact=False), st.sampled_from(POLICIES), st.sampled_from([0, 30, 100]))
def test_best_plan_optimal_with_arbitrary_times(
    table: tuple[int, list[AlgoPerf]], policy: BatchSizePolicy, limit: int
) -> None:
    batch, perfs = table
    sizes = candidate_batch_sizes(batch, policy)
    result = best_plan(perfs, batch=batch, workspace_limit_bytes=limit, policy=policy)
    brute = all_plans(usable(perfs, limit, False), batch, sizes)
    assert (result.plan is None) == (not brute)
    if result.plan is not None:
        assert_valid(result.plan, perfs, batch, sizes, limit, False)
        assert math.isclose(result.plan.time_ms, min(time_of(p) for p in brute), rel_tol=1e-9)


@settings(max_examples=40, deadline=None)
@given(tables(), st.sampled_from(POLICIES), st.randoms(use_true_random=False))
def test_same_input_same_plan_whatever_the_order(
    table: tuple[int, list[AlgoPerf]], policy: BatchSizePolicy, rnd: random.Random
) -> None:
    batch, perfs = table
    shuffled = list(perfs)
    rnd.shuffle(shuffled)
    a = best_plan(perfs, batch=batch, workspace_limit_bytes=50, policy=policy)
    b = best_plan(shuffled, batch=batch, workspace_limit_bytes=50, policy=policy)
    assert a == b


def test_two_algorithm_hand_computed_case() -> None:
    # Fast: 1 ms launch cost + 0.1 ms per sample, 1 KiB of workspace per sample. Slow: 1 ms per sample, 16 bytes.
    perfs = two_algorithms()
    result = best_plan(perfs, batch=128, workspace_limit_bytes=32 * 1024)
    assert result.status is Status.OPTIMAL and result.plan is not None
    assert [(mb.batch, mb.algo) for mb in result.plan.micro_batches] == [(32, 1)] * 4
    assert result.plan.time_ms == pytest.approx(4 * (1.0 + 3.2))
    assert result.plan.workspace_bytes == 32 * 1024
    # Undivided, only the slow algorithm fits: 128 ms.
    undivided = best_plan(perfs, batch=128, workspace_limit_bytes=32 * 1024, policy="undivided")
    assert undivided.plan is not None
    assert [(mb.batch, mb.algo) for mb in undivided.plan.micro_batches] == [(128, 0)]
    assert undivided.plan.time_ms == 128.0
    # Unlimited: one undivided fast call.
    free = best_plan(perfs, batch=128, workspace_limit_bytes=1 << 30)
    assert free.plan is not None and [(mb.batch, mb.algo) for mb in free.plan.micro_batches] == [(128, 1)]


def test_batch_one() -> None:
    perfs = [AlgoPerf(1, 0, 2.0, 0), AlgoPerf(1, 1, 1.0, 100)]
    assert best_plan(perfs, batch=1, workspace_limit_bytes=99).plan == Plan((MicroBatch.from_perf(perfs[0]),))
    assert best_plan(perfs, batch=1, workspace_limit_bytes=100).plan == Plan((MicroBatch.from_perf(perfs[1]),))


def test_prime_batch_under_power_of_two_uses_the_whole_batch_or_powers() -> None:
    # 13 = 8 + 4 + 1 with powers of two, or 13 undivided.
    perfs = [AlgoPerf(b, 0, 1.0, 0) for b in (1, 2, 4, 8)] + [AlgoPerf(13, 0, 5.0, 0)]
    plan = best_plan(perfs, batch=13, workspace_limit_bytes=0).plan
    assert plan is not None and [mb.batch for mb in plan.micro_batches] == [8, 4, 1]
    perfs[-1] = AlgoPerf(13, 0, 2.5, 0)
    plan = best_plan(perfs, batch=13, workspace_limit_bytes=0).plan
    assert plan is not None and [mb.batch for mb in plan.micro_batches] == [13]


def test_nothing_fits_is_infeasible_with_a_message() -> None:
    perfs = [AlgoPerf(b, 0, 1.0, 1000) for b in (1, 2, 4)]
    result = best_plan(perfs, batch=4, workspace_limit_bytes=999)
    assert result.status is Status.INFEASIBLE and result.plan is None
    assert "limit 999" in result.message and "[1, 2, 4]" in result.message


def test_deterministic_only_can_make_it_infeasible() -> None:
    perfs = [AlgoPerf(2, 0, 1.0, 0, deterministic=False), AlgoPerf(1, 1, 5.0, 0, deterministic=False)]
    assert best_plan(perfs, batch=2, workspace_limit_bytes=0).status is Status.OPTIMAL
    result = best_plan(perfs, batch=2, workspace_limit_bytes=0, deterministic_only=True)
    assert result.status is Status.INFEASIBLE and "deterministic" in result.message


def test_sizes_outside_the_policy_are_ignored() -> None:
    # 3 is not a power of two: its (very fast) measurement must not be used for B = 6.
    perfs = [AlgoPerf(3, 0, 0.1, 0), AlgoPerf(2, 0, 1.0, 0), AlgoPerf(1, 0, 1.0, 0)]
    plan = best_plan(perfs, batch=6, workspace_limit_bytes=0).plan
    assert plan is not None and [mb.batch for mb in plan.micro_batches] == [2, 2, 2]
    plan = best_plan(perfs, batch=6, workspace_limit_bytes=0, policy="all").plan
    assert plan is not None and [mb.batch for mb in plan.micro_batches] == [3, 3]


def test_everything_fits_gives_the_unconstrained_optimum() -> None:
    perfs = [AlgoPerf(b, a, 10.0 / (a + 1) + b, (a + 1) * b * 100) for b in (1, 2, 4) for a in range(3)]
    plan = best_plan(perfs, batch=4, workspace_limit_bytes=1 << 40).plan
    assert plan is not None and [(mb.batch, mb.algo) for mb in plan.micro_batches] == [(4, 2)]


def test_ties_are_broken_deterministically() -> None:
    # Equal times everywhere: the least workspace wins, then the larger micro-batches, then the lower algo.
    perfs = [
        AlgoPerf(2, 5, 2.0, 10),
        AlgoPerf(2, 3, 2.0, 10),
        AlgoPerf(2, 4, 2.0, 5),  # same time, less workspace: preferred over algos 3 and 5
        AlgoPerf(1, 7, 1.0, 5),
        AlgoPerf(1, 6, 1.0, 5),
    ]
    plan = best_plan(perfs, batch=4, workspace_limit_bytes=10).plan
    assert plan is not None and [(mb.batch, mb.algo) for mb in plan.micro_batches] == [(2, 4), (2, 4)]
    # If size 2 needs more workspace than size 1, the less-workspace plan (four 1s) wins the tie.
    perfs2 = [AlgoPerf(2, 0, 2.0, 10), AlgoPerf(1, 7, 1.0, 5), AlgoPerf(1, 6, 1.0, 5)]
    plan = best_plan(perfs2, batch=4, workspace_limit_bytes=10).plan
    assert plan is not None and [(mb.batch, mb.algo) for mb in plan.micro_batches] == [(1, 6)] * 4


def test_bad_measurements_and_arguments_raise() -> None:
    good = [AlgoPerf(1, 0, 1.0, 0)]
    with pytest.raises(ValueError, match="time_ms"):
        best_plan([AlgoPerf(1, 0, -1.0, 0)], batch=1, workspace_limit_bytes=0)
    with pytest.raises(ValueError, match="time_ms"):
        best_plan([AlgoPerf(1, 0, math.nan, 0)], batch=1, workspace_limit_bytes=0)
    with pytest.raises(ValueError, match="workspace_bytes"):
        best_plan([AlgoPerf(1, 0, 1.0, -1)], batch=1, workspace_limit_bytes=0)
    with pytest.raises(ValueError, match="batch"):
        best_plan(good, batch=0, workspace_limit_bytes=0)
    with pytest.raises(ValueError, match="workspace_limit_bytes"):
        best_plan(good, batch=1, workspace_limit_bytes=-5)
    with pytest.raises(ValueError, match="policy"):
        best_plan(good, batch=1, workspace_limit_bytes=0, policy="everything")


def test_infinite_time_means_cannot_run() -> None:
    perfs = [AlgoPerf(2, 0, math.inf, 0), AlgoPerf(1, 0, 1.0, 0)]
    plan = best_plan(perfs, batch=2, workspace_limit_bytes=0).plan
    assert plan is not None and [mb.batch for mb in plan.micro_batches] == [1, 1]


def test_large_batch_all_policy_matches_power_of_two_when_only_powers_are_measured() -> None:
    perfs = [AlgoPerf(b, 0, 1.0 + 0.01 * b, 100 * b) for b in candidate_batch_sizes(1024, "powerOfTwo")]
    a = best_plan(perfs, batch=1024, workspace_limit_bytes=100 * 64, policy="all")
    b = best_plan(perfs, batch=1024, workspace_limit_bytes=100 * 64, policy="powerOfTwo")
    assert a.plan is not None and a.plan == b.plan
    assert [mb.batch for mb in a.plan.micro_batches] == [64] * 16


@settings(max_examples=150, deadline=None)
@given(tables(max_batch=12), st.sampled_from(POLICIES), st.sampled_from([0, 25, 100]), st.integers(1, 5))
def test_best_plan_under_a_quantum_is_the_fastest_plan_that_keeps_it(
    table: tuple[int, list[AlgoPerf]], policy: BatchSizePolicy, limit: int, quantum: int
) -> None:
    """Every micro-batch but one a multiple of ``quantum`` (a graph whose declared alignment holds only at such
    offsets): the fastest such plan, found by enumerating every plan; ties to less workspace, then fewer parts."""
    batch, perfs = table
    sizes = candidate_batch_sizes(batch, policy)
    result = best_plan(perfs, batch=batch, workspace_limit_bytes=limit, policy=policy, quantum=quantum)
    brute = [
        p for p in all_plans(usable(perfs, limit, False), batch, sizes) if sum(c.batch % quantum > 0 for c in p) <= 1
    ]
    assert (result.plan is None) == (not brute), (result, brute[:3])
    if result.plan is None:
        assert f"a multiple of {quantum}" in result.message or quantum == 1
        return
    assert_valid(result.plan, perfs, batch, sizes, limit, False)
    assert keeps_quantum(result.plan, quantum)
    best_t = min(time_of(p) for p in brute)
    assert close(result.plan.time_ms, best_t)
    fastest = [p for p in brute if close(time_of(p), best_t)]
    if quantum > 1:
        assert result.plan.workspace_bytes == min(ws_of(p) for p in fastest)
        least = min(len(p) for p in fastest if ws_of(p) == result.plan.workspace_bytes)
        assert len(result.plan.micro_batches) == least


def test_a_quantum_of_one_changes_nothing_and_a_bad_one_raises() -> None:
    perfs = two_algorithms(64)
    plain = best_plan(perfs, batch=64, workspace_limit_bytes=8 << 10)
    assert best_plan(perfs, batch=64, workspace_limit_bytes=8 << 10, quantum=1) == plain
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="quantum"):
            best_plan(perfs, batch=64, workspace_limit_bytes=8 << 10, quantum=bad)  # type: ignore[arg-type]
