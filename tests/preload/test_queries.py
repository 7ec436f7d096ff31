"""What the framework is told by Get*_v7, Find* and Find*Ex, and how determinism is honoured."""

from __future__ import annotations

import pytest

from .conftest import RunDriver, assert_close

ALGO_COUNT = {"fwd": 8, "bwd_data": 6, "bwd_filter": 7}


@pytest.mark.parametrize("query", ["get", "find", "findex"])
@pytest.mark.parametrize("op", ["fwd", "bwd_data", "bwd_filter"])
def test_results_well_formed(run_driver: RunDriver, op: str, query: str) -> None:
    plan = "3:1,5:0"
    got = run_driver(f"op={op}", "n=8", f"query={query}", "planner=fixed", f"plan={plan}")
    assert got.returncode == 0, got.stderr
    rep = got.report
    perf = rep["perf"]
    assert rep["query_status"] == 0 and rep["returned"] == len(perf) >= 2
    assert all(0 <= p["algo"] < ALGO_COUNT[op] for p in perf)
    # Entry 0 is the plan: the largest micro-batch's algorithm, the plan's workspace and predicted time.
    first = perf[0]
    assert first["algo"] == 0 and first["status"] == 0 and first["time"] == pytest.approx(1.0)
    # Determinism is the real library's, whatever the planner said: the backward ops' ALGO_0 is not deterministic.
    assert first["determinism"] == (1 if op == "fwd" else 0) and first["math"] == 0
    assert [p["algo"] for p in perf].count(first["algo"]) == 1
    # The workspace query answers the plan's workspace for that algorithm; execution runs the plan.
    assert rep["ws_bytes"] == first["memory"]
    assert rep["algo"] == first["algo"]
    assert rep["stats"]["planned"] == 1 and rep["stats"]["micro_batches"] == 2
    assert rep["last_plan"]["workspace_bytes"] == first["memory"]


def test_requested_count_respected(run_driver: RunDriver) -> None:
    got = run_driver("op=fwd", "n=8", "query=get", "requested=1", "planner=fixed", "plan=4:1,4:0")
    assert got.report["returned"] == 1 and got.report["perf"][0]["algo"] == 1


def test_unplannable_query_passes_through(run_driver: RunDriver) -> None:
    ref = run_driver("op=fwd", "n=8", "query=get", preload=False)
    got = run_driver("op=fwd", "n=8", "query=get", "planner=nofit")
    assert got.report["perf"] == ref.report["perf"]


@pytest.mark.parametrize("query", ["get", "findex"])
def test_deterministic_callers_get_deterministic_plans(run_driver: RunDriver, query: str) -> None:
    # The "det" planner: two halves of BackwardData algo 0 (non-deterministic) unless determinism is asked
    # for, then one call of algo 1.
    base = ["op=bwd_data", "n=8", f"query={query}", "planner=det"]
    ref = run_driver("op=bwd_data", "n=8", "algo=1", preload=False)
    free = run_driver(*base)
    perf = free.report["perf"]
    assert (perf[0]["algo"], perf[0]["determinism"]) == (0, 0)
    assert (perf[1]["algo"], perf[1]["determinism"]) == (1, 1)
    assert free.report["last_plan"]["deterministic"] is False
    assert free.report["stats"]["micro_batches"] == 2

    det = run_driver(*base, "deterministic=1")
    assert det.report["algo"] == 1
    plan = det.report["last_plan"]
    assert plan["deterministic"] is True and [m["algo"] for m in plan["micro_batches"]] == [1]
    assert_close(det.output("float"), ref.output("float"), "float")
