"""No unbounded wait in the host process: a cache held locked by a second process delays a convolution call by
a bounded time, said once on stderr, after which the process plans in memory (and the call is micro-batched as
usual). The holder is a real second process: an flock on the cache's lock file, or an SQLite write transaction."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ucudnn import _paths
from ucudnn.cache import Cache

from .conftest import RunDriver, assert_close, messages

LAYER = ["n=16", "c=32", "k=64", "in=16,16", "query=get", "op=fwd"]
LIMIT = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "2500KiB"}

# The second process takes the lock, says so on stdout, and keeps it until it is killed.
_FLOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1] + ".lock", os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""
_SQLITE = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
conn.execute("DELETE FROM device_facts")
print("held", flush=True)
time.sleep(600)
"""


# Exclusive locking mode: not even a reader gets in (what the C reader of stored plans meets).
_SQLITE_EXCLUSIVE = _SQLITE.replace(
    'conn.execute("BEGIN', 'conn.execute("PRAGMA locking_mode = EXCLUSIVE")\nconn.execute("BEGIN'
)


@pytest.fixture
def holder(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A cache file at tmp_path/cache.sqlite, locked by a second process for the whole test."""
    path = tmp_path / "cache.sqlite"
    Cache(path).close()
    proc = subprocess.Popen([sys.executable, "-c", request.param, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield path
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("holder", [_FLOCK, _SQLITE], ids=["flock", "sqlite"], indirect=True)
def test_locked_cache_delays_a_call_boundedly_then_plans_in_memory(run_driver: RunDriver, holder: Path) -> None:
    if not _paths.EMBEDDED_PLANNER.exists():
        pytest.fail(f"embedded planner not built at {_paths.EMBEDDED_PLANNER}")
    ref = run_driver(*LAYER, preload=False)
    # The timeout is a guard against the old behaviour (waiting forever), not a measurement.
    got = run_driver(*LAYER, "repeat=2", env=LIMIT | {"UCUDNN_DATABASE": str(holder)})
    assert got.returncode == 0, got.stderr
    # One line says what the call waits for, how long at most, and what happens then; nothing else is said.
    (said,) = messages(got.stderr)  # the exit summary aside
    assert "waiting up to 10 s for the cache" in said and str(holder) in said, got.stderr
    assert said.endswith("then this process plans in memory only")
    stats = got.report["stats"]
    assert stats["planner_calls"] >= 1 and stats["fallback_plans"] == 0
    assert stats["micro_batches"] > stats["planned"]
    assert_close(got.output("float"), ref.output("float"), "float")


@pytest.mark.parametrize("holder", [_SQLITE_EXCLUSIVE], ids=["exclusive"], indirect=True)
def test_the_c_reader_of_stored_plans_waits_boundedly(
    run_driver: RunDriver, holder: Path, preload_lib: Path, tmp_path: Path
) -> None:
    lonely = tmp_path / "lonely" / preload_lib.name  # no embedded planner beside it: stored plans, else fallback
    lonely.parent.mkdir()
    shutil.copy2(preload_lib, lonely)
    ref = run_driver(*LAYER, preload=False)
    got = run_driver(*LAYER, preload=lonely, env=LIMIT | {"UCUDNN_DATABASE": str(holder)})
    assert got.returncode == 0, got.stderr
    waits = [ln for ln in got.stderr.splitlines() if "waited 2 s for the cache" in ln]
    assert len(waits) == 1 and str(holder) in waits[0] and waits[0].endswith("its plans are not used"), got.stderr
    assert got.report["stats"]["fallback_plans"] >= 1
    assert_close(got.output("float"), ref.output("float"), "float")
