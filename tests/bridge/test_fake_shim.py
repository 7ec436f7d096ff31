"""The planner callback in a Python host, against a fake shim with a synthetic benchmark (no cuDNN needed).

The synthetic kernel (tests/bridge/c/fake_shim.c): algorithm k at micro-batch b takes t_k * b + 0.5 ms with
t = (1.0, 0.3, 0.1) and needs w_k * b bytes with w = (0, 1024, 4096); algorithm 2 is non-deterministic. At
N = 16 under 20000 bytes the best plan is four micro-batches of 4 with algorithm 2: 4 * 0.9 = 3.6 ms.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from .conftest import HERE, FakeBuild, clean_env, run_cmd, run_python

BEST_16 = [[4, 2]] * 4


def fake_host(
    fake: FakeBuild, db: Path, *args: str, batch: int = 16, limit: int = 20000, env: dict[str, str] | None = None
) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / "fake_host.py"), str(fake.shim), "fwd:synthetic", str(batch), str(limit)]
    proc = run_cmd([*cmd, "powerOfTwo", *args], clean_env({"UCUDNN_DATABASE": str(db), **(env or {})}))
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    result["stderr"] = proc.stderr
    return result


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def test_plan_through_callback_then_from_sqlite(fake_build: FakeBuild, tmp_path: Path) -> None:
    db = tmp_path / "cache.sqlite"
    first = fake_host(fake_build, db, "--repeat", "2")
    assert first["registered"] and first["set_planner_calls"] == 1
    assert first["stderr"] == ""  # silent by default: planning is not worth a warning
    for r in first["results"]:
        assert r == {
            "status": 0,
            "micro_batches": BEST_16,
            "time_ms": 3.6,
            "workspace_bytes": 16384,
            "deterministic": 0,
        }
    # powerOfTwo at N = 16 measures b = 1, 2, 4, 8, 16 once; the repeat is answered from the cache.
    assert first["benchmark_calls"] == 5
    sizes = rows(db, "SELECT DISTINCT batch FROM benchmarks WHERE key = 'fwd:synthetic' ORDER BY batch")
    assert [s for (s,) in sizes] == [1, 2, 4, 8, 16]
    # The failed row (status 3000) the fake reports must not become a usable measurement.
    assert rows(db, "SELECT COUNT(*) FROM benchmarks WHERE status = 0 AND algo = 1 AND math_type = 1") == [(0,)]
    assert rows(db, "SELECT COUNT(*) FROM plans WHERE key = 'fwd:synthetic'") == [(1,)]

    second = fake_host(fake_build, db)
    assert second["benchmark_calls"] == 0
    assert second["results"][0]["micro_batches"] == BEST_16


def test_planner_exception_never_reaches_c(fake_build: FakeBuild, tmp_path: Path) -> None:
    out = fake_host(fake_build, tmp_path / "db.sqlite", "--planner-raises")
    assert out["results"][0]["status"] == 2
    assert "ucudnn: error: planning failed (RuntimeError: planner exploded on purpose)" in out["stderr"]


def test_size_that_cannot_be_benchmarked_is_left_out(fake_build: FakeBuild, tmp_path: Path) -> None:
    out = fake_host(fake_build, tmp_path / "db.sqlite", env={"FAKE_SHIM_BENCH_FAIL": "4"})
    result = out["results"][0]
    # Without b = 4, one undivided run of algorithm 1 (0.3 * 16 + 0.5 = 5.3 ms) beats 8 x (2, algo 2) = 5.6 ms.
    assert result["status"] == 0
    assert result["micro_batches"] == [[16, 1]]
    assert result["time_ms"] == 5.3


def test_nothing_fits_is_status_1(fake_build: FakeBuild, tmp_path: Path) -> None:
    out = fake_host(fake_build, tmp_path / "db.sqlite", limit=0, env={"FAKE_SHIM_NO_ZERO_WS": "1"})
    assert out["results"][0]["status"] == 1


def test_abi_mismatch_is_refused(fake_build: FakeBuild, tmp_path: Path) -> None:
    out = fake_host(fake_build, tmp_path / "db.sqlite", env={"FAKE_SHIM_ABI": "99"})
    assert out["results"][0]["status"] == 2
    assert out["benchmark_calls"] == 0
    assert "control ABI 99" in out["stderr"]


def test_unopenable_cache_plans_in_memory(fake_build: FakeBuild, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache's directory should be")
    out = fake_host(fake_build, blocker / "cache.sqlite", "--repeat", "2")
    assert [r["micro_batches"] for r in out["results"]] == [BEST_16, BEST_16]
    assert out["benchmark_calls"] == 5  # the in-memory cache still serves the repeat
    assert out["stderr"].count("ucudnn: warning: cannot open the cache") == 1


def test_control_helpers_through_the_bridge(fake_build: FakeBuild) -> None:
    code = f"""
import ctypes, json
ctypes.CDLL({str(fake_build.shim)!r}, mode=ctypes.RTLD_GLOBAL)
from ucudnn import bridge
out = {{"loaded": bridge.shim_loaded(), "version": bridge.shim_version()}}
bridge.set_option("UCUDNN_BATCH_SIZE_POLICY", "all")
out["after_set"] = bridge.stats()["last_option"]
try:
    bridge.set_option("NOT_OURS", "1")
except ValueError as exc:
    out["bad"] = str(exc)
bridge.clear_plans()
stats = bridge.stats()
out["after_clear"] = stats["last_option"]
out["pad"] = len(stats["pad"])
out["last_plan"] = bridge.last_plan()
print(json.dumps(out))
"""
    proc = run_python(code, clean_env())
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["loaded"] is True and out["version"] == 900
    assert out["after_set"] == "UCUDNN_BATCH_SIZE_POLICY=all"
    assert "rejected NOT_OURS='1'" in out["bad"]
    assert out["after_clear"] == "cleared"
    assert out["pad"] == 5000  # longer than the first buffer: the grow-and-retry path
    assert out["last_plan"] == {}
