"""Determinism is checked by the shim with the real library, for every plan from any source: a cache that says an
algorithm is deterministic cannot make a deterministic request run a non-deterministic one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .conftest import RunDriver

LAYER = ["op=bwd_data", "n=16", "c=16", "k=16", "in=12,12"]


def forge_algo0(db: Path) -> None:
    """Forge the cache: ALGO_0 (non-deterministic, atomics) marked deterministic and made the fastest by far."""
    with sqlite3.connect(db) as conn:
        forged = conn.execute("UPDATE benchmarks SET deterministic = 1, time_ms = 1e-6 WHERE algo = 0").rowcount
        conn.execute("DELETE FROM plans")
    conn.close()
    assert forged >= 1


def test_a_forged_determinism_flag_is_not_trusted(run_driver: RunDriver, tmp_path: Path) -> None:
    # A deterministic caller (BackwardData ALGO_1) plans once with the real planner, storing its benchmarks.
    args = [*LAYER, "algo=1", "ws=100000000"]
    first = run_driver(*args)
    assert first.returncode == 0, first.stderr
    assert all(m["algo"] != 0 for m in first.report["last_plan"]["micro_batches"])
    forge_algo0(tmp_path / "cache.sqlite")
    ref = run_driver(*args, preload=False)
    got = run_driver(*args)
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    # The planner believed the forged rows; the shim asked the real library and refused the plan.
    assert stats["rejected_plans"] >= 1 and "a deterministic plan was asked for" in got.stderr
    assert stats["planned"] == 0 and stats["passthrough"] == 1
    assert got.output("float").tobytes() == ref.output("float").tobytes()


def test_the_deterministic_setting_is_checked_by_the_shim_against_forged_benchmarks(
    run_driver: RunDriver, tmp_path: Path
) -> None:
    # UCUDNN_DETERMINISTIC=1 and a caller whose own algorithm (BackwardData ALGO_0) is not deterministic: the
    # request asks for determinism because of the setting alone.
    args = [*LAYER, "algo=0", "ws=100000000"]
    det = {"UCUDNN_DETERMINISTIC": "1"}
    first = run_driver(*args, env=det)
    assert first.returncode == 0, first.stderr
    assert first.report["stats"]["planned"] == 1
    assert all(m["algo"] != 0 for m in first.report["last_plan"]["micro_batches"])
    forge_algo0(tmp_path / "cache.sqlite")
    got = run_driver(*args, env=det)
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["rejected_plans"] >= 1 and "a deterministic plan was asked for" in got.stderr, stats
    assert stats["planned"] == 0, got.report.get("last_plan")


def test_a_forged_stored_plan_cannot_run_a_non_deterministic_algorithm(
    run_driver: RunDriver, preload_lib: Path, tmp_path: Path
) -> None:
    # No planner can start (a copy of the library alone): the shim reads the stored plan itself.
    lonely = tmp_path / "lonely" / preload_lib.name
    lonely.parent.mkdir()
    lonely.write_bytes(preload_lib.read_bytes())
    args = [*LAYER, "algo=1", "ws=100000000"]
    first = run_driver(*args)
    assert first.returncode == 0 and first.report["stats"]["planned"] == 1, first.stderr
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        rows = conn.execute("UPDATE plans SET plan_json = '[[16, 0, 0]]'").rowcount
    conn.close()
    assert rows >= 1
    got = run_driver(*args, preload=lonely)
    assert got.returncode == 0, got.stderr
    plan = got.report.get("last_plan") or {}
    assert all(m["algo"] != 0 for m in plan.get("micro_batches", [])), plan
    assert got.report["stats"]["cache_plans"] == 0
