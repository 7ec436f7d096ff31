"""Processes planning one kernel on one cache file share its benchmarks (ucudnn._cache_claims): each size is
measured once between them, every wait is bounded, and a claim whose process died or stopped is taken over."""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ucudnn import config
from ucudnn._planner_sharing import SharedBenchmarks
from ucudnn.cache import Cache, Outcome
from ucudnn.optimizer import AlgoPerf, Status
from ucudnn.planner import Planner

from .test_planner import BACKEND, KEY, MiB, table

RANKS = 4
SIZES = [64, 32, 16, 8, 4, 2, 1]  # powerOfTwo at N = 64
STEP_S = 0.3  # each benchmark takes this long: longer than a rank's start can lag behind the others


def _plan(planner: Planner, bench: object) -> object:
    return planner.plan(
        key=KEY, backend_id=BACKEND, batch=64, workspace_limit_bytes=4 * MiB, policy="powerOfTwo",
        deterministic_only=False, algo_count=8, benchmark=bench,
    )  # fmt: skip


Micro = list[tuple[int, int, int]]


def _rank(path: str, log_path: str, wait_s: float, start: object) -> tuple[Micro, SharedBenchmarks, int]:
    def bench(b: int) -> list[AlgoPerf]:
        time.sleep(STEP_S)
        with open(log_path, "a") as f:  # one short O_APPEND write a line: lines never interleave
            f.write(f"{os.getpid()} {b}\n")
        return table(b)

    planner = Planner(Cache(path), benchmark_wait_s=wait_s)
    start.wait()  # type: ignore[attr-defined]  # every rank plans at once, as data-parallel ranks do
    result = _plan(planner, bench)
    assert result.status is Status.OPTIMAL  # type: ignore[attr-defined]
    micro = [(m.batch, m.algo, m.math_type) for m in result.plan.micro_batches]  # type: ignore[attr-defined]
    return micro, planner.shared, os.getpid()


Ranks = tuple[list[Micro], list[tuple[int, SharedBenchmarks]], list[tuple[int, int]]]


def _ranks(tmp_path: Path, wait_s: float) -> Ranks:
    """RANKS processes plan the kernel at once: (their plans, each one's pid and what sharing did for it, (pid, b)
    of every benchmark any of them ran)."""
    log_path = tmp_path / "benchmarks.log"
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        start = manager.Barrier(RANKS)
        with ctx.Pool(RANKS) as pool:
            args = [(str(tmp_path / "shared.sqlite"), str(log_path), wait_s, start)] * RANKS
            ranks = pool.starmap(_rank, args, chunksize=1)
    runs = [(int(p), int(b)) for p, b in (line.split() for line in log_path.read_text().splitlines())]
    return [plan for plan, _, _ in ranks], [(pid, shared) for _, shared, pid in ranks], runs


@pytest.mark.parametrize("journal", ["wal", "delete"])  # delete: as ranks on several hosts share a cache
def test_ranks_measure_each_size_once_between_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: str
) -> None:
    monkeypatch.setenv("UCUDNN_DATABASE_JOURNAL", journal)  # the spawned ranks inherit it
    plans, shared, runs = _ranks(tmp_path, wait_s=60)
    assert sorted(b for _, b in runs) == sorted(SIZES)  # each size once, by one of the ranks
    assert len({pid for pid, _ in runs}) >= 2  # and the work was shared (each size takes STEP_S)
    assert all(p == plans[0] for p in plans)  # every rank plans from the same measurements
    # What a rank did not measure it read as the others' runs landed, waiting for them; nothing was taken over.
    for pid, tally in shared:
        measured_here = sum(1 for p, _ in runs if p == pid)
        assert tally.read == len(SIZES) - measured_here and tally.taken_over == 0, (pid, tally, runs)
    with Cache(tmp_path / "shared.sqlite") as c:
        assert c.benchmark_progress(KEY, BACKEND, SIZES)[1] == {}  # no claim is left behind
        assert sorted(c.get_benchmarks(KEY, BACKEND, SIZES)) == sorted(SIZES)


def test_without_sharing_every_rank_measures_every_size(tmp_path: Path) -> None:
    # UCUDNN_BENCHMARK_WAIT=0, i.e. before sharing: the ranks read an empty cache at once and all measure all.
    plans, shared, runs = _ranks(tmp_path, wait_s=0)
    assert sorted(b for _, b in runs) == sorted(SIZES * RANKS)
    assert all(p == plans[0] for p in plans)
    assert [tally for _, tally in shared] == [SharedBenchmarks()] * RANKS  # nothing read from another, no wait


class Counted:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, b: int) -> list[AlgoPerf]:
        self.calls.append(b)
        return table(b)


def _hold(path: Path, b: int, *, host: str | None = None, pid: int | None = None, age_s: float = 0.0) -> None:
    """A claim on ``b`` as another process left it."""
    with Cache(path) as c:
        claim = c.claim_benchmark(KEY, BACKEND, b, seen=None, stale_after_s=60)
        assert claim.outcome is Outcome.CLAIMED
        c._store.write(
            lambda conn: conn.execute(
                "UPDATE benchmark_claims SET host = COALESCE(?, host), pid = COALESCE(?, pid), claimed_at = ? "
                "WHERE batch = ?",
                (host, pid, time.time() - age_s, b),
            )
        )


def _dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(child.stdout)


def _backdate_runs(cache: Cache, seconds: float) -> None:
    """As a writer leaves its run when it stamped it, then waited for the write lock: stamped before it was stored."""
    cache._store.write(lambda conn: conn.execute("UPDATE benchmark_runs SET measured_at = measured_at - ?", (seconds,)))


def test_the_claim_of_a_process_that_died_is_taken_over_at_once(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    _hold(path, 64, pid=_dead_pid())
    bench = Counted()
    started = time.monotonic()
    planner = Planner(Cache(path), benchmark_wait_s=60)
    assert _plan(planner, bench).status is Status.OPTIMAL  # type: ignore[attr-defined]
    assert time.monotonic() - started < 10 and bench.calls == SIZES
    assert planner.shared == SharedBenchmarks(read=0, taken_over=1, waited_s=0.0)  # claimed over it, no wait


def test_a_claim_older_than_the_bound_is_void_also_from_another_host(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    _hold(path, 64, host=f"not-{socket.gethostname()}", age_s=120)
    bench = Counted()
    started = time.monotonic()
    _plan(Planner(Cache(path), benchmark_wait_s=60), bench)
    assert time.monotonic() - started < 10 and bench.calls == SIZES


def test_a_live_holder_is_waited_for_within_the_bound_then_measured_here(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.sqlite"
    stuck = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _hold(path, 32, pid=stuck.pid)  # alive, and never stores a run (a stopped process)
        bench = Counted()
        started = time.monotonic()
        planner = Planner(Cache(path), benchmark_wait_s=1)
        result = _plan(planner, bench)
        waited = time.monotonic() - started
    finally:
        stuck.kill()
        stuck.wait()
    assert result.status is Status.OPTIMAL  # type: ignore[attr-defined]
    assert bench.calls == [64, 16, 8, 4, 2, 1, 32]  # the others first, the held size once the bound passed
    assert 1.0 <= waited < 10
    # taken over when its claim grew older than the bound (claimed before this plan began) or the wait ended
    assert planner.shared.read == 0 and planner.shared.taken_over == 1 and 0.5 < planner.shared.waited_s <= waited
    said = [line for line in capsys.readouterr().err.splitlines() if "UCUDNN_BENCHMARK_WAIT" in line]
    assert len(said) == 1 and f"process {stuck.pid} on {socket.gethostname()}" in said[0]


@pytest.mark.parametrize("stamped_before_s", [0.0, 60.0], ids=["stamped-when-stored", "stamped-before-the-read"])
def test_a_run_that_lands_while_waiting_is_read_not_measured(tmp_path: Path, stamped_before_s: float) -> None:
    # stamped-before-the-read: the run bears a time before the waiter's read, as when its writer stamped it, then
    # waited for the write lock (compared by time, the waiter took it for an old run and measured b=64 again).
    path = tmp_path / "c.sqlite"
    other = Cache(path)
    claim = other.claim_benchmark(KEY, BACKEND, 64, seen=None, stale_after_s=60)
    assert claim.outcome is Outcome.CLAIMED

    def finish() -> None:  # the other process: its run of b=64 lands after a while, then its claim goes
        time.sleep(0.5)
        other.put_benchmark(KEY, BACKEND, 64, table(64))
        _backdate_runs(other, stamped_before_s)
        other.release_benchmark(KEY, BACKEND, 64, claim.token)

    thread = threading.Thread(target=finish)
    thread.start()
    bench = Counted()
    reported: list[SharedBenchmarks] = []
    planner = Planner(Cache(path), benchmark_wait_s=60, on_shared=reported.append)
    result = _plan(planner, bench)
    thread.join()
    other.close()
    assert bench.calls == [32, 16, 8, 4, 2, 1]  # never 64
    assert reported == [planner.shared] and planner.shared.read == 1 and planner.shared.taken_over == 0
    assert 0 < planner.shared.waited_s < 10
    assert result.status is Status.OPTIMAL  # type: ignore[attr-defined]
    alone = _plan(Planner(), Counted())
    assert result.plan == alone.plan  # type: ignore[attr-defined]


def test_a_holder_whose_benchmark_failed_leaves_the_size_to_the_waiter(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    other = Cache(path)
    claim = other.claim_benchmark(KEY, BACKEND, 64, seen=None, stale_after_s=60)

    def fail() -> None:  # nothing stored, the claim released
        time.sleep(0.3)
        other.release_benchmark(KEY, BACKEND, 64, claim.token)

    thread = threading.Thread(target=fail)
    thread.start()
    bench = Counted()
    planner = Planner(Cache(path), benchmark_wait_s=60)
    _plan(planner, bench)
    thread.join()
    other.close()
    assert bench.calls == [32, 16, 8, 4, 2, 1, 64]
    assert planner.shared.read == 0 and planner.shared.taken_over == 1 and planner.shared.waited_s > 0


def test_a_claim_answers_measured_for_a_run_stored_since_the_read(tmp_path: Path) -> None:
    with Cache(tmp_path / "c.sqlite") as c:
        seen = c.run_marks(KEY, BACKEND, [8])
        assert seen == {}
        c.put_benchmark(KEY, BACKEND, 8, table(8))
        assert c.claim_benchmark(KEY, BACKEND, 8, seen=seen.get(8), stale_after_s=60).outcome is Outcome.MEASURED
        seen = c.run_marks(KEY, BACKEND, [8])
        later = c.claim_benchmark(KEY, BACKEND, 8, seen=seen[8], stale_after_s=60)
        assert later.outcome is Outcome.CLAIMED  # the run read (short of memory for the reader) is measured again
        # Another claim on it by this very process (a second thread) is held, not claimed twice.
        held = c.claim_benchmark(KEY, BACKEND, 8, seen=seen[8], stale_after_s=60)
        assert held.outcome is Outcome.HELD and held.holder is not None and held.holder.pid == os.getpid()
        c.release_benchmark(KEY, BACKEND, 8, "not-the-token")  # someone else's release drops nothing
        assert list(c.benchmark_progress(KEY, BACKEND, [8])[1]) == [8]
        assert c.stats()["benchmark_claims"] == 1
        c.release_benchmark(KEY, BACKEND, 8, later.token)
        assert c.benchmark_progress(KEY, BACKEND, [8])[1] == {}


def test_a_run_stamped_before_the_read_but_stored_after_it_is_new(tmp_path: Path) -> None:
    # Was: a claim asked whether a run was stored at or after the reader's read, by time; a writer stamps its run
    # before it waits for the write lock, so a run that landed after the read could bear an earlier time, and the
    # reader, its holder's claim released, measured the size again (data-parallel ranks: 13 benchmarks where 11
    # sizes-engines were missing, one run in ten). Runs are now told apart by the mark of the run read.
    with Cache(tmp_path / "c.sqlite") as reader, Cache(tmp_path / "c.sqlite") as writer:
        seen = reader.run_marks(KEY, BACKEND, [8])
        writer.put_benchmark(KEY, BACKEND, 8, table(8))
        _backdate_runs(writer, 5.0)
        assert reader.claim_benchmark(KEY, BACKEND, 8, seen=seen.get(8), stale_after_s=60).outcome is Outcome.MEASURED


def test_a_forged_claim_is_void(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    _hold(path, 64, pid=0)  # pid 0 is no process (and kill(0) would signal our own group)
    bench = Counted()
    _plan(Planner(Cache(path), benchmark_wait_s=60), bench)
    assert bench.calls == SIZES


def test_memory_and_read_only_caches_claim_nothing(tmp_path: Path) -> None:
    bench = Counted()
    _plan(Planner(benchmark_wait_s=60), bench)
    assert bench.calls == SIZES
    path = tmp_path / "c.sqlite"
    Cache(path).close()
    with Cache(path, read_only=True) as ro:
        assert not ro.shared
        bench = Counted()
        _plan(Planner(ro, benchmark_wait_s=60), bench)
        assert bench.calls == SIZES


def test_the_wait_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.get("UCUDNN_BENCHMARK_WAIT", {}) == 60
    assert config.get("UCUDNN_BENCHMARK_WAIT", {"UCUDNN_BENCHMARK_WAIT": "0"}) == 0
    with pytest.raises(config.ConfigError, match=r"UCUDNN_BENCHMARK_WAIT='soon': expected"):
        config.get("UCUDNN_BENCHMARK_WAIT", {"UCUDNN_BENCHMARK_WAIT": "soon"})
    monkeypatch.setenv("UCUDNN_BENCHMARK_WAIT", "soon")
    with pytest.raises(config.ConfigError, match="UCUDNN_BENCHMARK_WAIT"):
        _plan(Planner(), Counted())  # a planner never guesses a setting
