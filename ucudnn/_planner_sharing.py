"""The missing batch sizes of one kernel measured together with the other processes planning it on the same cache.

Data-parallel ranks (one process per GPU, one cache file) start together and miss on the same kernels at the same
moment. :class:`SharedMeasure` claims each size in the cache (:mod:`ucudnn._cache_claims`) before measuring it,
measures the sizes nobody else has claimed, largest first, then waits for the others' sizes and reads their runs as
they land -- every wait bounded by ``UCUDNN_BENCHMARK_WAIT``. What it did for one kernel is a
:class:`SharedBenchmarks`, which the planner adds up and reports (the preload library's stats and exit summary).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ucudnn.cache import Cache, CacheError, Holder, Outcome
from ucudnn.log import get_logger

log = get_logger("planner")

# How often a waiter reads the cache for the runs of sizes other processes are measuring.
POLL_S = 0.05


@dataclass(frozen=True)
class SharedBenchmarks:
    """What measuring together did: sizes another process measured meanwhile, read from the cache (``read``);
    sizes another process had claimed that were measured here after all (``taken_over``: its process ended, or it
    held the claim past the bound); and the seconds spent waiting for them (``waited_s``)."""

    read: int = 0
    taken_over: int = 0
    waited_s: float = 0.0

    def __add__(self, other: SharedBenchmarks) -> SharedBenchmarks:
        return SharedBenchmarks(
            self.read + other.read, self.taken_over + other.taken_over, self.waited_s + other.waited_s
        )

    def __bool__(self) -> bool:
        return bool(self.read or self.taken_over or self.waited_s)


class SharedMeasure:
    """The missing sizes of one kernel: claimed sizes measured here (``measure_here``), largest first; sizes others
    hold waited for, within ``wait_s``; their runs read from the cache into ``stored``. Never fails a plan: a cache
    error measures here."""

    def __init__(
        self,
        cache: Cache,
        key: str,
        backend_id: str,
        limit: int,
        wait_s: float,
        seen: dict[int, float],
        measure_here: Callable[[int], None],
        stored: dict[int, Any],
    ) -> None:
        self.cache, self.key, self.backend_id, self.limit = cache, key, backend_id, limit
        self.wait_s, self.seen = wait_s, seen  # seen: the marks of the runs the planner read (Cache.run_marks)
        self.measure_here, self.stored = measure_here, stored
        self._read_count = self._taken_over = 0

    def run(self, missing: Sequence[int]) -> SharedBenchmarks:
        held: dict[int, Holder] = {}
        for b in missing:
            holder = self._take(b)
            if holder is not None:
                held[b] = holder
        if not held:
            return self._tally(0.0)
        log.info("waiting up to %g s for the benchmarks of %s at b=%s that %s", self.wait_s, self.key,
                 ",".join(map(str, held)), "; ".join(sorted({str(h) for h in held.values()})))  # fmt: skip
        started = time.monotonic()
        try:
            self._wait(held, started + self.wait_s)
        finally:
            waited = time.monotonic() - started
        return self._tally(waited)

    def _wait(self, held: dict[int, Holder], deadline: float) -> None:
        while held and time.monotonic() < deadline:
            time.sleep(POLL_S)
            try:
                runs, holders = self.cache.benchmark_progress(self.key, self.backend_id, sorted(held))
            except (sqlite3.Error, CacheError) as exc:
                log.debug("cannot read %s (%s); measuring %s at b=%s here", self.cache, exc, self.key, list(held))
                self._measure_instead(sorted(held, reverse=True))
                return
            now = time.time()
            for b in sorted(held, reverse=True):
                if b in runs and runs[b] != self.seen.get(b):  # a run stored since the read
                    self._read(b)
                    del held[b]
                elif b not in holders or not holders[b].live(now, self.wait_s):
                    if b in holders:  # void: its process ended, or it has measured for longer than the bound
                        why = holders[b].void_because(now, self.wait_s)
                        log.warning("taking over the benchmark of %s at b=%d from %s (%s; UCUDNN_BENCHMARK_WAIT)",
                                    self.key, b, holders[b], why)  # fmt: skip
                    holder = self._take(b, after_other=True)  # released or void: claim it again
                    if holder is None:
                        del held[b]
                    else:
                        held[b] = holder
        for b in sorted(held, reverse=True):
            log.warning("%s has measured %s at b=%d for more than %g s (UCUDNN_BENCHMARK_WAIT); measuring it here",
                        held[b], self.key, b, self.wait_s)  # fmt: skip
        self._measure_instead(sorted(held, reverse=True))

    def _measure_instead(self, sizes: Sequence[int]) -> None:
        """Sizes another process holds, measured here after all (the wait ended, or the cache cannot be read)."""
        for b in sizes:
            self._taken_over += 1
            self.measure_here(b)

    def _take(self, b: int, after_other: bool = False) -> Holder | None:
        """Claim ``b`` and measure it here, or read the run that landed; the holder when another process has it.
        ``after_other``: another process had claimed it (a size measured here then counts as taken over)."""
        try:
            claim = self.cache.claim_benchmark(
                self.key, self.backend_id, b, seen=self.seen.get(b), stale_after_s=self.wait_s
            )
        except (sqlite3.Error, CacheError) as exc:
            log.debug("cannot claim %s at b=%d in %s (%s); measuring it here", self.key, b, self.cache, exc)
            self._taken_over += int(after_other)
            self.measure_here(b)
            return None
        if claim.outcome is Outcome.HELD:
            return claim.holder
        if claim.outcome is Outcome.MEASURED:
            self._read(b)
            return None
        if after_other or claim.holder is not None:  # another process's claim, void or released: taken over
            self._taken_over += 1
        try:
            self.measure_here(b)
        finally:
            try:
                self.cache.release_benchmark(self.key, self.backend_id, b, claim.token)
            except (sqlite3.Error, CacheError) as exc:  # void once this process ends or the wait bound passes
                log.debug("cannot release the claim on %s at b=%d (%s)", self.key, b, exc)
        return None

    def _read(self, b: int) -> None:
        """The run another process stored for ``b``; measured here when it is not usable within the limit (short
        of memory for an algorithm that fits) or cannot be read."""
        try:
            got = self.cache.get_benchmarks(self.key, self.backend_id, [b], complete_within=self.limit)
        except (sqlite3.Error, CacheError):
            got = {}
        if b in got:
            self.stored[b] = got[b]
            self._read_count += 1
        else:
            self.measure_here(b)

    def _tally(self, waited_s: float) -> SharedBenchmarks:
        return SharedBenchmarks(self._read_count, self._taken_over, waited_s)
