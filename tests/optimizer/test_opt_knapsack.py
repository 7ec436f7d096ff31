"""The DP's two knapsacks: the table (any sizes) and the binary one (powers of two and the batch itself), which
needs no memory in the batch size. Same plans, tie-breaks included; a huge batch never allocates a table."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ucudnn.optimizer import AlgoPerf, Status, _dp, best_plan, pareto_front

from .test_opt_reuse import tables


def table_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_dp, "knapsack", lambda batch, sizes: _dp.TableKnapsack(batch))


@settings(max_examples=300, deadline=None)
@given(
    tables(max_batch=40), st.sampled_from([0, 10, 30, 80]), st.booleans(), st.sampled_from(["powerOfTwo", "undivided"])
)
def test_binary_and_table_give_the_same_plans(
    case: tuple[int, list[AlgoPerf]], limit: int, det: bool, policy: str
) -> None:
    batch, perfs = case
    kw: dict[str, Any] = {"batch": batch, "workspace_limit_bytes": limit, "policy": policy, "deterministic_only": det}
    binary = (best_plan(perfs, **kw), pareto_front(perfs, **kw))
    with pytest.MonkeyPatch.context() as mp:
        table_only(mp)
        table = (best_plan(perfs, **kw), pareto_front(perfs, **kw))
    assert binary == table


def test_a_huge_batch_is_planned_without_a_table(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_table(batch: int) -> _dp.FloatArray:
        raise AssertionError(f"a table of {batch + 1} entries")

    monkeypatch.setattr(_dp, "new_table", no_table)
    batch = 1 << 27
    perfs = [
        AlgoPerf(batch=1 << k, algo=k % 3, time_ms=0.04 + (1 << k) * 1e-6, workspace_bytes=k << 10) for k in range(28)
    ]
    perfs.append(AlgoPerf(batch=batch, algo=1, time_ms=1e9, workspace_bytes=0))
    result = best_plan(perfs, batch=batch, workspace_limit_bytes=1 << 40)
    assert result.status is Status.OPTIMAL and result.plan is not None
    assert sum(m.batch for m in result.plan.micro_batches) == batch
    # The front's plans are listed in full, so its sizes start at 2^20 here (at most 129 micro-batches a plan).
    coarse = [p for p in perfs if p.batch >= 1 << 20]
    front = pareto_front(coarse, batch=batch + (1 << 20), workspace_limit_bytes=1 << 40)
    assert len(front) >= 2 and all(sum(m.batch for m in p.micro_batches) == batch + (1 << 20) for p in front)
