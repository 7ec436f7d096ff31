"""Where plans come from in a C host: the embedded planner (a real plan, really micro-batched) or, without it,
the built-in fallback (one undivided call with the fastest algorithm that fits)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ucudnn import _paths

from .conftest import RunDriver, assert_close

# Big enough that the modelled GEMM at N=8 beats the implicit algorithms at N=16, with a limit that only fits
# GEMM's workspace at N=8: the planner must split.
LAYER = ["n=16", "c=32", "k=64", "in=16,16", "query=get"]
LIMIT = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "2500KiB"}


@pytest.mark.parametrize("op", ["fwd", "bwd_data"])
def test_embedded_planner_micro_batches(run_driver: RunDriver, op: str) -> None:
    if not _paths.EMBEDDED_PLANNER.exists():
        pytest.fail(f"embedded planner not built at {_paths.EMBEDDED_PLANNER}")
    ref = run_driver(f"op={op}", *LAYER, preload=False)
    got = run_driver(f"op={op}", *LAYER, "repeat=2", env=LIMIT)
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["planner_calls"] >= 1 and stats["fallback_plans"] == 0 and stats["rejected_plans"] == 0
    assert stats["planned"] == 2 and stats["micro_batches"] > stats["planned"]
    plan = got.report["last_plan"]
    assert plan["source"] == "planner" and plan["workspace_bytes"] <= 2500 * 1024
    assert sum(m["batch"] for m in plan["micro_batches"]) == 16
    assert_close(got.output("float"), ref.output("float"), "float")


def test_fallback_without_planner(run_driver: RunDriver, preload_lib: Path, tmp_path: Path) -> None:
    lonely = tmp_path / "lonely" / preload_lib.name  # no libucudnn_planner.so beside it
    lonely.parent.mkdir()
    shutil.copy2(preload_lib, lonely)
    ref = run_driver("op=bwd_filter", *LAYER, "beta=0.5", preload=False)
    got = run_driver("op=bwd_filter", *LAYER, "beta=0.5", "repeat=2", preload=lonely, env=LIMIT)
    assert got.returncode == 0, got.stderr
    assert got.stderr.count("built-in fallback") == 1
    stats = got.report["stats"]
    assert stats["fallback_plans"] >= 1 and stats["cache_plans"] == 0
    assert stats["planned"] == 2 and stats["micro_batches"] == 2
    plan = got.report["last_plan"]
    assert plan["source"] == "fallback" and len(plan["micro_batches"]) == 1
    assert plan["workspace_bytes"] <= 2500 * 1024
    assert_close(got.output("float"), ref.output("float"), "float")
