"""Several processes (data-parallel ranks) on one cache file: nothing is lost, nobody fails."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from ucudnn.cache import Cache, PlanKey
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


def test_four_processes_lose_nothing(tmp_path: Path) -> None:
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
    assert not list(tmp_path.glob("*.corrupt-*"))
