"""libucudnn_planner.so in a C program with no Python: the interpreter it starts finds the install and plans.

The C host (tests/bridge/c/c_host.c) is linked to the fake shim, which dlopens the embedded planner RTLD_LOCAL on
its first miss exactly as libucudnn.so does in a C/C++ host. See test_fake_shim.py for the synthetic kernel.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from .conftest import FakeBuild, clean_env, run_cmd, run_python

PLAN_16 = "0 4 3.600 16384 0 4:2 4:2 4:2 4:2"


def c_host(
    fake: FakeBuild, planner: Path, db: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    extra = {"FAKE_SHIM_EMBEDDED": str(planner), "UCUDNN_DATABASE": str(db), **(env or {})}
    return run_cmd([str(fake.c_host), "fwd:embedded", *args], clean_env(extra))


def test_c_host_plans_then_hits_sqlite(fake_build: FakeBuild, embedded_planner: Path, tmp_path: Path) -> None:
    db = tmp_path / "cache.sqlite"
    first = c_host(fake_build, embedded_planner, db, "16", "20000", "powerOfTwo")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [PLAN_16, "benchmarks 5"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(DISTINCT batch) FROM benchmarks WHERE key = 'fwd:embedded'").fetchone() == (
            5,
        )
        stamps = conn.execute("SELECT MAX(measured_at) FROM benchmark_runs").fetchone()
    # A second process: the plan comes from the SQLite cache, nothing is benchmarked or rewritten.
    second = c_host(fake_build, embedded_planner, db, "16", "20000", "powerOfTwo")
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines() == [PLAN_16, "benchmarks 0"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT MAX(measured_at) FROM benchmark_runs").fetchone() == stamps
    assert [ln for ln in second.stderr.splitlines() if "silences this line" not in ln] == []  # the exit summary only


def test_c_host_threads_plan_concurrently(fake_build: FakeBuild, embedded_planner: Path, tmp_path: Path) -> None:
    # Four threads miss at once (N = 16..19): one starts the interpreter, all get plans.
    proc = c_host(fake_build, embedded_planner, tmp_path / "db.sqlite", "16", "20000", "powerOfTwo", "4")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 5 and all(line.startswith("0 ") for line in lines[:4])
    for n, line in zip(range(16, 20), lines, strict=False):
        sizes = [int(step.split(":")[0]) for step in line.split()[5:]]
        assert sum(sizes) == n and max(sizes) <= 4


def test_wrong_ucudnn_on_path_fails_cleanly(fake_build: FakeBuild, embedded_planner: Path, tmp_path: Path) -> None:
    impostor = tmp_path / "shadow" / "ucudnn"
    impostor.mkdir(parents=True)
    (impostor / "__init__.py").write_text('__version__ = "0.0.0-impostor"\n')
    proc = c_host(
        fake_build,
        embedded_planner,
        tmp_path / "db.sqlite",
        "16",
        "20000",
        "powerOfTwo",
        env={"PYTHONPATH": str(impostor.parent)},
    )
    assert proc.returncode == 1  # the driver's "no plan" exit, not a signal
    assert proc.stdout.splitlines()[0].startswith("-1 ")
    assert "ucudnn: error: the embedded planner could not start" in proc.stderr
    assert "0.0.0-impostor" in proc.stderr


def test_refuses_a_process_with_a_running_interpreter(embedded_planner: Path) -> None:
    # In a Python host the shim must use the running interpreter; starting cffi's embedding there can hang.
    code = f"""
import ctypes
lib = ctypes.CDLL({str(embedded_planner)!r})
print(lib.ucudnn_embedded_planner_init(), lib.ucudnn_embedded_planner_init())
"""
    proc = run_python(code, clean_env(), timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["-1", "-1"]
    assert "a Python interpreter is already running" in proc.stderr
