"""Determinism is checked by the shim with the real library, for every plan from any source: a cache that says an
algorithm is deterministic cannot make a deterministic request run a non-deterministic one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .conftest import RunDriver

LAYER = ["op=bwd_data", "n=16", "c=16", "k=16", "in=12,12"]


def test_a_forged_determinism_flag_is_not_trusted(run_driver: RunDriver, tmp_path: Path) -> None:
    # A deterministic caller (BackwardData ALGO_1) plans once with the real planner, storing its benchmarks.
    args = [*LAYER, "algo=1", "ws=100000000"]
    first = run_driver(*args)
    assert first.returncode == 0, first.stderr
    assert all(m["algo"] != 0 for m in first.report["last_plan"]["micro_batches"])
    # Forge the cache: ALGO_0 (non-deterministic, atomics) marked deterministic and made the fastest by far.
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        forged = conn.execute("UPDATE benchmarks SET deterministic = 1, time_ms = 1e-6 WHERE algo = 0").rowcount
        conn.execute("DELETE FROM plans")
    conn.close()
    assert forged >= 1
    ref = run_driver(*args, preload=False)
    got = run_driver(*args)
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    # The planner believed the forged rows; the shim asked the real library and refused the plan.
    assert stats["rejected_plans"] >= 1 and "a deterministic plan was asked for" in got.stderr
    assert stats["planned"] == 0 and stats["passthrough"] == 1
    assert got.output("float").tobytes() == ref.output("float").tobytes()
