"""Several processes (data-parallel ranks) on one cache file: nothing is lost, nobody fails."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ucudnn.cache import WAIT_NOTICE_S, Cache, PlanKey
from ucudnn.optimizer import AlgoPerf, MicroBatch, Plan

RANKS = 4
KERNELS = 12
SIZES = (1, 2, 4, 8)
SHARED = "shared-kernel"


def _perfs(b: int, rank: int) -> list[AlgoPerf]:
    return [AlgoPerf(b, a, 0.1 * (a + 1) * b + rank * 1e-6, a * 1024 * b) for a in range(4)]


def _rank(path: str, rank: int, start: object) -> int:
    start.wait()  # type: ignore[attr-defined]  # all ranks open the (not yet existing) file at once
    checked = 0
    with Cache(path) as c:
        for k in range(KERNELS):
            key = f"conv{k}|rank{rank}"
            for b in SIZES:
                c.put_benchmark(key, "backend", b, _perfs(b, rank))
                # Everyone also measures the shared kernel: the last complete run of each size wins.
                c.put_benchmark(SHARED, "backend", b, _perfs(b, rank))
            plan = Plan(tuple(MicroBatch.from_perf(p) for p in (_perfs(8, rank)[0], _perfs(4, rank)[1])))
            c.put_plan(PlanKey(key, "backend", 12, "all", 1 << 20, False), plan)
            # Reads interleave with the other ranks' writes.
            got = c.get_benchmarks(f"conv{k}|rank{(rank + 1) % RANKS}", "backend", SIZES)
            for b, rows in got.items():
                assert rows == _perfs(b, (rank + 1) % RANKS)
                checked += 1
    return checked


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_four_processes_lose_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: str) -> None:
    # delete: the rollback journal and file locks, as on a file system other hosts share (UCUDNN_DATABASE_JOURNAL)
    monkeypatch.setenv("UCUDNN_DATABASE_JOURNAL", journal)  # the spawned ranks inherit it
    path = tmp_path / "shared.sqlite"
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        start = manager.Barrier(RANKS)
        with ctx.Pool(RANKS) as pool:
            results = pool.starmap(_rank, [(str(path), r, start) for r in range(RANKS)], chunksize=1)
    assert len(results) == RANKS
    with Cache(path) as c:
        assert not c.moved_aside
        stats = c.stats()
        assert stats["benchmark_runs"] == RANKS * KERNELS * len(SIZES) + len(SIZES)
        assert stats["benchmark_rows"] == stats["benchmark_runs"] * 4
        assert stats["plans"] == RANKS * KERNELS
        for rank in range(RANKS):
            for k in range(KERNELS):
                key = f"conv{k}|rank{rank}"
                assert c.get_benchmarks(key, "backend", SIZES) == {b: _perfs(b, rank) for b in SIZES}
                assert c.get_plan(PlanKey(key, "backend", 12, "all", 1 << 20, False)) is not None
        # The shared kernel's runs are each one rank's complete set, never a mixture.
        for b, rows in c.get_benchmarks(SHARED, "backend", SIZES).items():
            assert rows in [_perfs(b, r) for r in range(RANKS)]
        assert c._store.connection().execute("PRAGMA journal_mode").fetchone()[0] == journal
        assert (tmp_path / "shared.sqlite-wal").exists() == (journal == "wal")  # WAL's sidecar, while open
    assert not list(tmp_path.glob("*.corrupt-*"))


_RANK_SCRIPT = """
import sys, time
from pathlib import Path
from ucudnn.cache import Cache
from ucudnn.optimizer import AlgoPerf
path, go, rank = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
while not go.exists():
    time.sleep(0.005)
with Cache(path, memory_fallback=True) as c:  # as the planner in each rank opens it
    for b in (1, 2, 4, 8):
        c.put_benchmark(f"conv|rank{rank}", "backend", b, [AlgoPerf(b, 0, 1.0, 0, True)])
    assert c.memory_only is None
"""


def test_eight_ranks_starting_together_say_nothing_about_waiting(tmp_path: Path) -> None:
    """Was: `waiting up to 10 s for the cache ...` from ranks that waited milliseconds for each other."""
    path, go = tmp_path / "shared.sqlite", tmp_path / "go"
    command = [sys.executable, "-c", _RANK_SCRIPT, str(path), str(go)]
    procs = [subprocess.Popen([*command, str(r)], stderr=subprocess.PIPE, text=True) for r in range(8)]
    time.sleep(1.0)  # every rank started and polls for the go
    go.touch()
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errs
    assert not any("waiting" in e for e in errs), errs
    with Cache(path) as c:
        assert c.stats()["benchmark_runs"] == 8 * 4


def _hold_lock(path: Path, seconds: float) -> subprocess.Popen[str]:
    code = (
        "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); fcntl.flock(fd, "
        "fcntl.LOCK_EX); print('held', flush=True); time.sleep(float(sys.argv[2]))"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, f"{path}.lock", str(seconds)], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize(("hold_s", "said"), [(0.5, False), (WAIT_NOTICE_S + 1.0, True)])
def test_a_wait_is_said_once_it_has_lasted_long_enough(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hold_s: float, said: bool
) -> None:
    path = tmp_path / "cache.sqlite"
    holder = _hold_lock(path, hold_s)
    try:
        t0 = time.monotonic()
        with Cache(path, memory_fallback=True) as c:
            assert c.memory_only is None  # it waited, then opened the file
        waited = time.monotonic() - t0
    finally:
        holder.wait(timeout=60)
    err = capsys.readouterr().err
    if said:
        assert waited >= WAIT_NOTICE_S and err.count("waiting up to 10 s for the cache") == 1, err
    else:
        assert "waiting" not in err, err
