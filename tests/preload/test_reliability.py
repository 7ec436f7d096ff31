"""Issue 10's shim-side classes, adversarially: no planning before validation (huge N with NULL pointers), status
parity with the real library, bounded memory over many distinct workspace sizes, and threads that wait for the
planner another thread is starting (determinism whatever the cache says: test_determinism.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import RunDriver, assert_close, base_env, compile_driver

HUGE = ["n=134217728", "c=1", "k=1", "in=2,2", "filt=1,1", "pad=0"]  # N = 2^27: 2 GiB per tensor, never allocated


@pytest.fixture(scope="session")
def reliability_driver(host_lib: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_driver("reliability_driver", tmp_path_factory)


def run_rel(driver: Path, lib: Path | None, db: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    full_env = base_env() | {"UCUDNN_DATABASE": str(db)} | (env or {})
    if lib:
        full_env["LD_PRELOAD"] = str(lib)
    proc = subprocess.run([str(driver), *args], env=full_env, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no report; rc={proc.returncode} stderr={proc.stderr}"
    report: dict[str, Any] = json.loads(lines[-1])
    report["stderr"] = proc.stderr
    return report


# ---- 2. no work before validation ----


@pytest.mark.parametrize("nulls", ["x", "w", "y", "xwy"])
@pytest.mark.parametrize("op", ["fwd", "bwd_data", "bwd_filter", "biasact"])
def test_null_pointers_at_huge_n_are_answered_before_any_planning(
    reliability_driver: Path, preload_lib: Path, tmp_path: Path, nulls: str, op: str
) -> None:
    args = ["mode=bad", f"op={op}", f"null={nulls}", *HUGE, "planner=fixed", "plan=134217728:0"]
    ref = run_rel(reliability_driver, None, tmp_path / "c.sqlite", *args)
    got = run_rel(reliability_driver, preload_lib, tmp_path / "c.sqlite", *args)
    assert ref["status"] != 0
    assert got["status"] == ref["status"]
    stats = got["stats"]
    # The real library answered: nothing was planned, no planner asked, no plan cached.
    assert stats["planner_calls"] == 0 and stats["plan_misses"] == 0 and stats["planned"] == 0, stats
    assert stats["passthrough"] == 1 and stats["plan_cache_entries"] == 0, stats


def test_an_unsupported_algorithm_at_huge_n_is_answered_before_any_planning(
    reliability_driver: Path, preload_lib: Path, tmp_path: Path
) -> None:
    # Valid-looking pointers (never read: the real library refuses the algorithm first) and N = 2^27.
    args = ["mode=bad", "null=", "dummy=1", "op=fwd", "algo=6", "stride=2", *HUGE, "planner=fixed", "plan=134217728:0"]
    ref = run_rel(reliability_driver, None, tmp_path / "c.sqlite", *args)
    got = run_rel(reliability_driver, preload_lib, tmp_path / "c.sqlite", *args)
    assert ref["status"] != 0 and got["status"] == ref["status"]
    assert got["stats"]["planner_calls"] == 0 and got["stats"]["plan_misses"] == 0, got["stats"]


# ---- 4. status parity ----

REFUSED = {
    # Winograd forward at stride 2: not supported for this problem (NOT_SUPPORTED).
    "unsupported-algorithm": ["op=fwd", "algo=6", "stride=2"],
    "unsupported-bwd-data": ["op=bwd_data", "algo=4", "stride=2"],
    "never-implemented": ["op=bwd_filter", "algo=4"],
    "shape-mismatch-fwd": ["op=fwd", "algo=0", "ybad=1"],
    "shape-mismatch-bwd-filter": ["op=bwd_filter", "algo=0", "ybad=1"],
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_call_gets_the_real_status_not_a_plan(
    reliability_driver: Path, preload_lib: Path, tmp_path: Path, case: str
) -> None:
    args = [*REFUSED[case], "mode=bad", "null=", "n=8", "ws=1000000", "planner=fixed", "plan=4:0,4:0"]
    ref = run_rel(reliability_driver, None, tmp_path / "c.sqlite", *args)
    got = run_rel(reliability_driver, preload_lib, tmp_path / "c.sqlite", *args)
    assert ref["status"] != 0, ref
    assert got["status"] == ref["status"], got["stderr"]
    assert got["stats"]["planned"] == 0 and got["stats"]["passthrough"] == 1, got["stats"]


def test_a_workspace_too_small_for_the_callers_algorithm_is_served_by_a_plan(run_driver: RunDriver) -> None:
    # Forward GEMM (algo 2) needs workspace at N=8; the caller passes none. cuDNN alone refuses (BAD_PARAM);
    # the shim runs a plan that fits (the contract: a call whose only fault is the workspace is served).
    args = ["op=fwd", "n=8", "algo=2", "ws=0"]
    refused = run_driver(*args, preload=False)
    assert refused.returncode != 0 and "2000" in refused.stderr
    ref = run_driver("op=fwd", "n=8", "algo=0", "ws=0", preload=False)
    got = run_driver(*args, "planner=fixed", "plan=4:0,4:0")
    assert got.returncode == 0, got.stderr
    assert got.report["stats"]["planned"] == 1
    assert_close(got.output("float"), ref.output("float"), "float")


def test_a_workspace_too_small_with_no_plan_that_fits_gets_the_real_status(
    reliability_driver: Path, preload_lib: Path, tmp_path: Path
) -> None:
    args = ["mode=bad", "null=", "op=fwd", "n=8", "algo=2", "ws=0", "planner=fixed", "plan=8:2"]
    ref = run_rel(reliability_driver, None, tmp_path / "c.sqlite", *args)
    got = run_rel(reliability_driver, preload_lib, tmp_path / "c.sqlite", *args)
    assert ref["status"] != 0 and got["status"] == ref["status"]
    assert got["stats"]["planned"] == 0 and got["stats"]["rejected_plans"] >= 1


# ---- 6. bounded memory ----


@pytest.mark.parametrize("samples", ["0", "3"])  # checks on real executions off / on (their exact questions)
def test_many_distinct_workspace_sizes_keep_the_plan_cache_bounded(
    reliability_driver: Path, preload_lib: Path, tmp_path: Path, samples: str
) -> None:
    args = ["mode=sizes", "op=fwd", "n=8", "c=2", "k=2", "in=4,4", "planner=fixed", "plan=4:0,4:0"]
    env = {"UCUDNN_VERIFY_SAMPLES": samples}
    small = run_rel(reliability_driver, preload_lib, tmp_path / "c.sqlite", *args, "count=100", env=env)
    big = run_rel(reliability_driver, preload_lib, tmp_path / "c.sqlite", *args, "count=6000", env=env)
    assert small["failures"] == 0 and big["failures"] == 0
    s, b = small["stats"], big["stats"]
    assert b["planned"] == 6000 and b["micro_batches"] == 12000
    # Sizes share bucket plans: planner calls grow with the log of the sizes, not with their number.
    assert b["planner_calls"] <= 2 * s["planner_calls"] + 32, (s["planner_calls"], b["planner_calls"])
    # At most 2,048 entries are held; the least recently used went.
    assert b["plan_cache_entries"] <= 2048 and b["plan_evictions"] >= 6000 - 2048, b
    assert big["rss_growth_kib"] < 8 * 1024, big["rss_growth_kib"]


# ---- 7. threads ----


def test_threads_wait_for_the_planner_another_thread_is_starting(run_driver: RunDriver) -> None:
    # The embedded planner starts at the first execution (ws= given: no query starts it earlier); the other
    # eleven threads arrive while it starts. They wait for it instead of passing through.
    args = ["op=fwd", "n=8", "algo=1", "ws=100000", "handles=12"]
    ref = run_driver(*args, preload=False, threads=12)
    got = run_driver(*args, threads=12)
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["planned"] == 12 and stats["passthrough"] == 0 and stats["startup_passthrough"] == 0, stats
    for t in range(12):
        assert_close(got.output("float", t), ref.output("float", t), "float")


@pytest.fixture(scope="session")
def gil_driver(host_lib: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_driver("gil_driver", tmp_path_factory, extra=("-rdynamic",))


def test_a_thread_holding_the_gil_passes_through_while_the_planner_starts(
    gil_driver: Path, preload_lib: Path, tmp_path: Path
) -> None:
    # A host that looks like Python to the shim (c/gil_driver.c): thread A starts the planner, whose
    # PyGILState_Ensure waits for the main thread; the main thread, holding the GIL, executes meanwhile. Waiting
    # for A would deadlock (until a bound), so it passes through, counted, and A's start-up then completes.
    got = run_rel(gil_driver, preload_lib, tmp_path / "c.sqlite", "op=fwd", "n=8", "algo=0", "plan=4:0,4:0")
    assert "never released the GIL" not in got["stderr"], got["stderr"]
    assert got["start_seen"] == 1 and got["failures"] == 0, got
    assert got["a_status"] == 0 and got["main_status"] == 0 and got["after_status"] == 0
    stats = got["stats"]
    assert stats["startup_passthrough"] == 1 and stats["passthrough"] == 1, stats
    assert stats["planned"] == 2 and stats["planner_calls"] >= 1, stats
