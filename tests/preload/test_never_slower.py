"""Never slower than the framework alone: the framework's workspace by default, plans checked on real executions.

Every run uses the real planner (the embedded one of a C host) on the host backend under the timing model, so
Find reports modelled times and every execution advances the backend's model clock by its modelled time: the
driver reports each execution's modelled time (model_ms), and the comparisons below are exact, not noisy.
UCUDNN_HOST_FIND_SKEW makes Find lie about one algorithm, which is how a plan can look fast and run slow.
"""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from .conftest import Run, RunDriver, assert_close

# A layer whose backward-filter has a fast algorithm (ALGO_1) with a workspace growing with N and a slower one
# (ALGO_3) with a constant workspace. At 8028160 bytes ALGO_1 fits micro-batches of 4 only.
LAYER = ["n=16", "c=64", "k=64", "in=28,28"]
WS_B4 = 8028160
# Find reports ALGO_1 twice as fast as it runs: the planner then prefers 4 x b4 ALGO_1 (0.027 ms predicted) to
# one call of ALGO_3 (0.040 ms), which really takes 0.055 ms.
SKEW = {"UCUDNN_HOST_FIND_SKEW": "bwd_filter:1:0.5"}
CHECK = {"UCUDNN_VERIFY_SAMPLES": "3"}  # 2 x (3 + 1) = 8 executions decide


def _steps(plan: dict[str, Any]) -> list[tuple[int, int]]:
    return [(m["batch"], m["algo"]) for m in plan["micro_batches"]]


def _counts(run: Run) -> dict[str, int]:
    s = run.report["stats"]
    return {k: int(s[k]) for k in ("verified", "rejected_by_measurement", "verify_executions", "planned")}


def test_a_plan_that_runs_slower_than_predicted_is_replaced(run_driver: RunDriver, tmp_path: Path) -> None:
    args = ["op=bwd_filter", *LAYER, "algo=3", f"ws={WS_B4}", "repeat=12"]
    ref = run_driver(*args, preload=False, env=SKEW)
    got = run_driver(*args, env=SKEW | CHECK)
    assert got.returncode == 0, got.stderr
    assert _counts(got) == {"verified": 1, "rejected_by_measurement": 1, "verify_executions": 8, "planned": 12}
    t = got.report["model_ms"]
    undivided = ref.report["model_ms"][-1]  # one call of the caller's ALGO_3
    # Executions 2..7 alternate the micro-batched plan (even) and the undivided choice (odd): the plan is slower.
    assert all(t[i] == pytest.approx(undivided) for i in (3, 5, 7))
    assert all(t[i] > 1.3 * undivided for i in (2, 4, 6))
    # From then on the undivided choice runs, and its result is the caller's (BackwardFilter: beta = 0).
    assert t[8:] == pytest.approx([undivided] * 4)
    assert _steps(got.report["last_plan"]) == [(16, 3)]
    assert_close(got.output("float"), ref.output("float"), "float")
    # The verdict is in the cache: the next run plans the undivided choice at once and checks nothing.
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        rows = conn.execute("SELECT kept, workspace_limit, samples FROM verdicts").fetchall()
    conn.close()
    assert rows == [(0, WS_B4, 3)]
    again = run_driver(*args, env=SKEW | CHECK)
    assert _counts(again) == {"verified": 0, "rejected_by_measurement": 0, "verify_executions": 0, "planned": 12}
    assert again.report["stats"]["micro_batches"] == 12
    assert again.report["model_ms"] == pytest.approx([undivided] * 12)
    assert_close(again.output("float"), ref.output("float"), "float")


def test_a_plan_that_is_really_faster_is_kept(run_driver: RunDriver) -> None:
    # No skew: forward micro-batches of 4 with WINOGRAD_NONFUSED (0.012 ms each, 6.7 MB) beat one call of
    # IMPLICIT_PRECOMP_GEMM (0.178 ms), the best undivided algorithm within 8 MB.
    args = ["op=fwd", *LAYER, "algo=1", f"ws={WS_B4}", "repeat=10"]
    ref = run_driver(*args, preload=False)
    got = run_driver(*args, env=CHECK)
    assert got.returncode == 0, got.stderr
    assert _counts(got) == {"verified": 1, "rejected_by_measurement": 0, "verify_executions": 8, "planned": 10}
    t = got.report["model_ms"]
    assert all(t[i] < t[i + 1] for i in (2, 4, 6))  # plan (even) faster than the undivided choice (odd)
    assert len(got.report["last_plan"]["micro_batches"]) > 1
    assert max(t[8:]) < ref.report["model_ms"][-1]
    assert_close(got.output("float"), ref.output("float"), "float")


def test_without_the_check_a_lying_find_costs_time(run_driver: RunDriver) -> None:
    # The control: with the check off, the plan Find flattered runs on every call.
    args = ["op=bwd_filter", *LAYER, "algo=3", f"ws={WS_B4}", "repeat=4"]
    ref = run_driver(*args, preload=False, env=SKEW)
    got = run_driver(*args, env=SKEW | {"UCUDNN_VERIFY_SAMPLES": "0"})
    assert _counts(got)["verified"] == 0 and len(got.report["last_plan"]["micro_batches"]) > 1
    assert min(got.report["model_ms"]) > 1.3 * ref.report["model_ms"][-1]


def _undivided_best(run_driver: RunDriver, args: list[str], ws: int) -> float:
    """What cuDNN alone does with `ws` bytes: the fastest algorithm at the full N whose workspace fits (model)."""
    found = run_driver(*args, "query=find", preload=False).report["perf"]
    times = [p["time"] for p in found if p["status"] == 0 and p["memory"] <= ws]
    assert times, "no undivided algorithm fits"
    return float(min(times))


@pytest.mark.parametrize("op", ["fwd", "bwd_data", "bwd_filter"])
def test_pytorch_like_choice_lands_on_the_fastest_plan_within_free_memory(run_driver: RunDriver, op: str) -> None:
    # PyTorch's legacy path: Get*_v7, then the first entry whose workspace it can allocate (here: at most
    # `free` bytes), executed with that entry's workspace. No limit is set: the framework's memory decides.
    args = [f"op={op}", *LAYER]
    ref = run_driver(*args, preload=False, env=CHECK)
    for free in (0, 2_000_000, WS_B4, 64 << 20):
        got = run_driver(*args, "query=get", "ws=entry", f"alloc_limit={free}", "repeat=10", env=CHECK)
        assert got.returncode == 0, got.stderr
        perf = got.report["perf"]
        entry = perf[got.report["entry"]]
        assert entry["memory"] <= free
        # The plans come first as a time/workspace front: fastest first, each next one needs less workspace, down
        # to the least (every op has an algorithm that needs none, so the front ends at the first row of 0 bytes).
        plans = perf[: next(i for i, p in enumerate(perf) if p["memory"] == 0) + 1]
        assert len(plans) > 1, (free, perf)
        assert all(a["time"] <= b["time"] and a["memory"] > b["memory"] for a, b in itertools.pairwise(plans)), perf
        # The entry chosen is the fastest plan within `free`: the planner's own optimum under that limit.
        capped = run_driver(*args, "query=get", env=CHECK | {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(free)})
        assert entry["time"] == pytest.approx(capped.report["perf"][0]["time"], rel=1e-6)
        assert got.report["last_plan"]["workspace_bytes"] <= free
        # ... and never slower than cuDNN alone with that memory (steady state, after any check).
        assert got.report["model_ms"][-1] <= _undivided_best(run_driver, args, free) * (1 + 1e-5)
        alone = run_driver(*args, f"algo={ref.report['algo']}", preload=False)
        assert_close(got.output("float"), alone.output("float"), "float")


def test_device_memory_bounds_the_list(run_driver: RunDriver) -> None:
    # UCUDNN_HOST_DEVICE_MEMORY stands in for the free device memory on the host backend: Get*_v7 lists no plan
    # that would not fit it, and the first entry is the fastest plan that does.
    args = ["op=fwd", *LAYER, "query=get", "ws=entry"]
    unbounded = run_driver(*args, env=CHECK).report["perf"]
    bounded = run_driver(*args, env=CHECK | {"UCUDNN_HOST_DEVICE_MEMORY": "4MiB"})
    first = bounded.report["perf"][0]
    assert unbounded[0]["memory"] > 4 << 20 >= first["memory"]
    assert first["time"] > unbounded[0]["time"]
    assert bounded.report["last_plan"]["workspace_bytes"] <= 4 << 20


@pytest.mark.parametrize("op", ["fwd", "bwd_data", "bwd_filter"])
@pytest.mark.parametrize("shape", [["n=16", "c=64", "k=64", "in=28,28"], ["n=32", "c=16", "k=32", "in=14,14"]])
def test_no_limit_set_every_plan_is_at_least_as_fast_as_cudnn_alone(
    run_driver: RunDriver, op: str, shape: list[str]
) -> None:
    # With no limit set, a framework executing with any workspace gets a plan at least as fast (modelled, after
    # the check settles) as the best undivided algorithm that fits that workspace.
    args = [f"op={op}", *shape]
    for ws in (0, 1 << 20, 4 << 20, 16 << 20, 1 << 30):
        got = run_driver(*args, "algo=0", f"ws={ws}", "repeat=10", env=CHECK)
        assert got.returncode == 0, got.stderr
        assert got.report["last_plan"]["workspace_bytes"] <= ws
        assert got.report["model_ms"][-1] <= _undivided_best(run_driver, args, ws) * (1 + 1e-5), (op, ws)


def test_findex_plans_for_the_workspace_the_caller_offers(run_driver: RunDriver) -> None:
    # Find*Ex with no limit set: the caller's workspace is the limit (no cap of ucudnn's own).
    args = ["op=fwd", *LAYER]
    for offered in (2_000_000, 16 << 20, 256 << 20):
        got = run_driver(*args, "query=findex", f"findex_ws={offered}", "ws=entry", "repeat=10", env=CHECK)
        assert got.returncode == 0, got.stderr
        first = got.report["perf"][0]
        capped = run_driver(*args, "query=get", env=CHECK | {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(offered)})
        assert first["memory"] <= offered
        assert first["time"] == pytest.approx(capped.report["perf"][0]["time"], rel=1e-6)
        assert got.report["model_ms"][-1] <= _undivided_best(run_driver, args, offered) * (1 + 1e-5)


def test_few_rows_asked_for_keep_both_ends_of_the_front(run_driver: RunDriver) -> None:
    args = ["op=fwd", *LAYER, "query=get", "ws=entry"]
    full = [p for p in run_driver(*args, env=CHECK).report["perf"] if p["time"] >= 0]
    few = run_driver(*args, "requested=3", env=CHECK).report["perf"]
    assert len(few) == 3
    # The fastest plan first and the least-workspace plan last, whatever lies between.
    assert few[0] == full[0]
    least = min(p["memory"] for p in full)
    assert few[-1]["memory"] == least and few[1]["memory"] < few[0]["memory"]


def test_the_check_runs_on_the_wall_clock_too(run_driver: RunDriver) -> None:
    # UCUDNN_HOST_TIMING=measure: executions are timed with the wall clock. Which side wins depends on this
    # machine; that the check completes, counts, keeps one of the two and computes the right result does not.
    args = ["op=fwd", "n=8", "c=16", "k=16", "in=12,12", "algo=1", "ws=300000", "repeat=10"]
    measure = {"UCUDNN_HOST_TIMING": "measure"}
    ref = run_driver(*args, preload=False, env=measure)
    got = run_driver(*args, env=CHECK | measure)
    assert got.returncode == 0, got.stderr
    counts = _counts(got)
    if counts["verified"] == 0:  # the plan happened to be undivided here: nothing to check
        assert len(got.report["last_plan"]["micro_batches"]) == 1
    else:
        # 2 x (3 + 1) executions, or 6 more when the wall clock's pairs disagreed (see test_check_rule.py)
        assert counts["verified"] == 1 and counts["verify_executions"] in (8, 14)
    assert_close(got.output("float"), ref.output("float"), "float")


def test_a_verdict_reached_after_get_v7_is_remembered(run_driver: RunDriver) -> None:
    # PyTorch-like with an explicit cap: Get*_v7 plans without determinism, the caller then executes entry 0's
    # (deterministic) algorithm, so the execution asks for a deterministic plan. The verdict is stored for that
    # request, and the next run must find it rather than check the same plan again.
    args = ["op=bwd_filter", *LAYER, "query=get", "repeat=10"]
    env = SKEW | CHECK | {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(WS_B4)}
    first = run_driver(*args, env=env)
    assert _counts(first)["verified"] == 1 and _counts(first)["rejected_by_measurement"] == 1
    again = run_driver(*args, env=env)
    assert _counts(again)["verify_executions"] == 0 and _counts(again)["verified"] == 0
    assert _steps(again.report["last_plan"]) == [(16, 3)]
