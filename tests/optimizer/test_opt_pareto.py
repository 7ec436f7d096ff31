"""Pareto fronts: invariants, optimality against brute force, consistency with best_plan."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ucudnn.optimizer import (
    AlgoPerf,
    BatchSizePolicy,
    Plan,
    best_plan,
    candidate_batch_sizes,
    keeps_quantum,
    pareto_front,
)

from .opt_brute import all_plans, close, time_of, two_algorithms, ws_of
from .test_opt_reuse import POLICIES, assert_valid, tables, usable


@settings(max_examples=120, deadline=None)
@given(tables(max_batch=8), st.sampled_from(POLICIES), st.sampled_from([0, 20, 50, 100]), st.booleans())
def test_front_against_brute_force(
    table: tuple[int, list[AlgoPerf]], policy: BatchSizePolicy, limit: int, det: bool
) -> None:
    batch, perfs = table
    sizes = candidate_batch_sizes(batch, policy)
    front = pareto_front(perfs, batch=batch, workspace_limit_bytes=limit, policy=policy, deterministic_only=det)
    brute = [(time_of(p), ws_of(p)) for p in all_plans(usable(perfs, limit, det), batch, sizes)]
    if not brute:
        assert front == ()
        return
    assert front
    for a, b in itertools.pairwise(front):
        assert a.workspace_bytes < b.workspace_bytes
        assert a.time_ms > b.time_ms
    for point in front:
        assert_valid(point, perfs, batch, sizes, limit, det)
        # Nothing is at least as good on both axes and strictly better on one.
        for t, ws in brute:
            assert not (ws <= point.workspace_bytes and t < point.time_ms and not close(t, point.time_ms))
            assert not (ws < point.workspace_bytes and (t < point.time_ms or close(t, point.time_ms)))
    # Complete: every plan is matched or beaten by a point needing no more workspace.
    for t, ws in brute:
        assert any(p.workspace_bytes <= ws and (p.time_ms < t or close(p.time_ms, t)) for p in front)
    # The fastest point is best_plan's plan at the same limit.
    best = best_plan(perfs, batch=batch, workspace_limit_bytes=limit, policy=policy, deterministic_only=det)
    assert best.plan == front[-1]


@settings(max_examples=120, deadline=None)
@given(tables(max_batch=10), st.sampled_from(POLICIES), st.sampled_from([0, 20, 50, 100]), st.integers(2, 4))
def test_front_under_a_quantum_against_brute_force(
    table: tuple[int, list[AlgoPerf]], policy: BatchSizePolicy, limit: int, quantum: int
) -> None:
    """Workspace Division's front for a graph whose alignment holds only every ``quantum`` samples: the Pareto set of
    the plans whose micro-batches but one are multiples of ``quantum``, each point such a plan, its last point
    best_plan's at the same limit and quantum."""
    batch, perfs = table
    sizes = candidate_batch_sizes(batch, policy)
    front = pareto_front(perfs, batch=batch, workspace_limit_bytes=limit, policy=policy, quantum=quantum)
    brute = [
        (time_of(p), ws_of(p))
        for p in all_plans(usable(perfs, limit, False), batch, sizes)
        if sum(c.batch % quantum > 0 for c in p) <= 1
    ]
    best = best_plan(perfs, batch=batch, workspace_limit_bytes=limit, policy=policy, quantum=quantum)
    if not brute:
        assert front == () and best.plan is None
        return
    for a, b in itertools.pairwise(front):
        assert a.workspace_bytes < b.workspace_bytes and a.time_ms > b.time_ms
    for point in front:
        assert_valid(point, perfs, batch, sizes, limit, False)
        assert keeps_quantum(point, quantum)
        for t, ws in brute:
            assert not (ws <= point.workspace_bytes and t < point.time_ms and not close(t, point.time_ms))
    for t, ws in brute:
        assert any(p.workspace_bytes <= ws and (p.time_ms < t or close(p.time_ms, t)) for p in front)
    assert best.plan == front[-1]


def test_two_algorithm_front_by_hand() -> None:
    perfs = two_algorithms()
    front = pareto_front(perfs, batch=128, workspace_limit_bytes=32 * 1024)
    # Slow undivided (128 ms), then the fast algorithm in 2, 4, ..., 32-sample micro-batches (size 1 fast is
    # 1.1 ms per sample: slower than 128 ms in total, so not on the front).
    assert [(p.workspace_bytes, p.micro_batches[0].batch) for p in front] == [
        (16, 128),
        (2048, 2),
        (4096, 4),
        (8192, 8),
        (16384, 16),
        (32768, 32),
    ]
    assert front[0].time_ms == 128.0
    assert all(len({mb.batch for mb in p.micro_batches}) == 1 for p in front)


def test_front_is_empty_when_nothing_fits() -> None:
    assert pareto_front([AlgoPerf(1, 0, 1.0, 10)], batch=3, workspace_limit_bytes=9) == ()


def test_single_point_when_one_algorithm() -> None:
    front = pareto_front([AlgoPerf(2, 0, 1.0, 0), AlgoPerf(1, 0, 1.0, 0)], batch=4, workspace_limit_bytes=0)
    assert len(front) == 1 and isinstance(front[0], Plan)
    assert [mb.batch for mb in front[0].micro_batches] == [2, 2]
