"""Workspace Division from a Python host (the planner runs in the host's own interpreter), and the control calls
the planner reports through: divisions (``ucudnn_note_division``) and what sharing benchmarks with other processes
did (``ucudnn_note_shared_benchmarks``; the ranks that produce those counts are in test_preload_e2e.py and
tests/preload/test_graph_split.py). The layer and tolerances are test_preload_e2e's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ucudnn import _paths

from .conftest import clean_env, run_python
from .test_preload_e2e import Framework, assert_close, env_for, framework, python_host, stats

__all__ = ["framework"]  # the module fixture, shared with test_preload_e2e

BUDGET = 2 * 1024 * 1024


def test_python_host_divides_the_budget(framework: Framework, tmp_path: Path) -> None:
    ref = python_host(framework, tmp_path / "ref", env_for(tmp_path, preload=False))
    assert ref.returncode == 0, ref.stderr
    env = env_for(tmp_path, preload=True) | {"UCUDNN_TOTAL_WORKSPACE_SIZE": str(BUDGET), "UCUDNN_LOG_LEVEL": "info"}
    run = python_host(framework, tmp_path / "shim", env)
    assert run.returncode == 0, run.stderr
    assert_close(tmp_path / "shim", tmp_path / "ref")
    s = stats(tmp_path)
    assert s["passthrough"] == 0 and s["micro_batches"] > s["planned"] >= 3, s
    assert s["divisions"] == 3 and s["division"]["kernels"] == 3, s
    assert s["division"]["budget_bytes"] == BUDGET >= s["division"]["workspace_bytes"]
    assert run.stderr.count("workspace division over") == 3


def stats_after(calls: str) -> dict[str, Any]:
    """The stats of a Python process under the preload library once it has run ``calls`` (bridge imported)."""
    if not _paths.PRELOAD.exists():
        pytest.fail("libucudnn.so is not built")
    code = f"import json\nfrom ucudnn import bridge\n{calls}print(json.dumps(bridge.stats()))\n"
    proc = run_python(code, clean_env({"LD_PRELOAD": str(_paths.PRELOAD)}))
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_note_division_shows_in_the_stats() -> None:
    s = stats_after(
        "assert bridge.stats()['division'] is None\n"
        "try:\n"
        "    bridge.note_division(-1, 10, 5, 1.0)\n"
        "except ValueError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('a negative kernel count was accepted')\n"
        "assert bridge.note_division(4, 1000, 900, 2.5)\n"
    )
    assert s["divisions"] == 1
    assert s["division"] == {"kernels": 4, "budget_bytes": 1000, "workspace_bytes": 900, "time_ms": 2.5}


def test_shared_benchmarks_add_up_in_the_stats() -> None:
    s = stats_after(
        "for bad in ((-1, 0, 0.0), (0, -1, 0.0), (1, 0, -0.5), (1, 0, float('nan')), (1, 0, float('inf'))):\n"
        "    try:\n"
        "        bridge.note_shared_benchmarks(*bad)\n"
        "    except ValueError:\n"
        "        continue\n"
        "    raise SystemExit(f'{bad} was accepted')\n"
        "assert bridge.note_shared_benchmarks(3, 0, 1.25)\n"
        "assert bridge.note_shared_benchmarks(2, 1, 0.5)\n"
    )
    assert s["shared_benchmarks"] == 5 and s["benchmark_takeovers"] == 1, s
    assert s["benchmark_wait_ms"] == pytest.approx(1750.0), s  # the refused calls added nothing


@pytest.mark.parametrize("call", ["note_division(1, 1, 1, 1.0)", "note_shared_benchmarks(1, 0, 0.1)"])
def test_reports_without_the_shim(call: str) -> None:
    code = f"from ucudnn import bridge\nassert bridge.{call} is False\n"
    proc = run_python(code, clean_env())
    assert proc.returncode == 0, proc.stderr
