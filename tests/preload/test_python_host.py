"""A Python host: at the first miss the shim takes the GIL with the running interpreter's PyGILState_Ensure and
imports ucudnn._runtime, whose planner then plans every call, from any thread."""

from __future__ import annotations

from pathlib import Path

from .conftest import TOLERANCE, base_env, run_probe


def test_python_host_plans_through_runtime(preload_lib: Path, host_lib: Path, tmp_path: Path) -> None:
    env = base_env() | {
        "LD_PRELOAD": str(preload_lib),
        "UCUDNN_DEFAULT_WORKSPACE_LIMIT": "2500KiB",
        "UCUDNN_DATABASE": str(tmp_path / "cache.sqlite"),
    }
    report = run_probe("pyhost_probe.py", str(host_lib), env=env)
    stats = report["stats"]
    assert report["outputs"] == 9 and stats["calls"] == 9
    # The main thread's call planned through the imported runtime; the threads then hit the cached plan.
    assert stats["planner_calls"] >= 1 and stats["fallback_plans"] == 0
    assert stats["planned"] == 9 and stats["micro_batches"] > stats["planned"]
    assert report["max_rel_error"] <= TOLERANCE["float"]
