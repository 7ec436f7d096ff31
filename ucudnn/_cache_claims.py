"""Benchmarks in progress, shared by the processes that plan on one cache file.

Data-parallel ranks start together and plan the same kernels at the same moment; each would measure every
micro-batch size the cache lacks. Instead a process claims a size before it measures it (one short write
transaction), measures the sizes nobody else has claimed, largest first, and then waits for the sizes the others
are measuring, reading their runs from the cache as they land. N ranks on N identical GPUs (one device name, so
one backend id) thus measure a kernel's sizes between them, as the original's ``UCUDNN_BENCHMARK_DEVICES`` dealt the
sizes round-robin to the GPUs of one process.

Every wait is bounded (``UCUDNN_BENCHMARK_WAIT``). A claim is void once its process has died (on this host: its
pid is gone) or once it is older than the bound (a stopped process, or one on another host); a void or released
claim whose size still has no new run is claimed again and measured here. Past the bound the waiter measures what is
still missing itself: the worst case is what happens without sharing, later by the bound.
"""

from __future__ import annotations

import enum
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ucudnn._cache_rows import is_int, is_time

HOST = socket.gethostname()


class Outcome(enum.Enum):
    CLAIMED = "claimed"  # this process measures the size; release the claim when its run is stored
    MEASURED = "measured"  # a run of the size was stored since the caller read the cache: read it
    HELD = "held"  # another live process is measuring it: wait for its run


@dataclass(frozen=True)
class Holder:
    """The process that claimed a size."""

    host: str
    pid: int
    claimed_at: float

    def __str__(self) -> str:
        return f"process {self.pid} on {self.host}"

    def live(self, now: float, stale_after_s: float) -> bool:
        """True while the claim binds: younger than ``stale_after_s`` and, on this host, its process alive."""
        return self.void_because(now, stale_after_s) is None

    def void_because(self, now: float, stale_after_s: float) -> str | None:
        """Why the claim no longer binds (None: it does)."""
        if now - self.claimed_at > stale_after_s:
            return f"claimed more than {stale_after_s:g} s ago"
        if self.host != HOST:
            return None
        if self.pid <= 0:  # never a process (kill(0) would signal our own group)
            return "no process"
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return "its process has ended"
        except PermissionError:  # another user's process: alive
            return None
        return None


@dataclass(frozen=True)
class Claim:
    outcome: Outcome
    token: str = ""  # CLAIMED: what release() takes
    holder: Holder | None = None  # HELD: who measures it; CLAIMED: the void claim this one replaced, if any


def _holder(row: tuple[object, ...] | None) -> Holder | None:
    """A claims row (host, pid, claimed_at) as a Holder; None for no row or one not written by us."""
    if row is None:
        return None
    host, pid, at = row
    if not (isinstance(host, str) and isinstance(pid, int) and is_int(pid) and isinstance(at, (int, float))):
        return None
    return Holder(host, pid, float(at)) if is_time(at) else None


def is_new_run(mark: object, seen: float | None) -> bool:
    """Whether a run stored with ``mark`` (its ``measured_at``) is not the one the reader saw (``seen``, None for
    none). By identity, not by time: a writer stamps its run before it waits for the write lock, so a run stored
    after a reader's read can bear a time before it."""
    return is_time(mark) and (seen is None or float(mark) != seen)  # type: ignore[arg-type]


def claim(
    conn: sqlite3.Connection, key: str, backend_id: str, batch: int, *, seen: float | None, stale_after_s: float
) -> Claim:
    """Inside a write transaction: MEASURED if the run of ``batch`` is not the one the caller read (``seen``: that
    run's ``measured_at``, None where it read none), HELD if a live process claimed it, else a new claim of this
    process's (replacing a void one)."""
    where = (key, backend_id, batch)
    run = conn.execute(
        "SELECT measured_at FROM benchmark_runs WHERE key = ? AND backend_id = ? AND batch = ?", where
    ).fetchone()
    if run is not None and is_new_run(run[0], seen):
        return Claim(Outcome.MEASURED)
    now = time.time()
    holder = _holder(
        conn.execute(
            "SELECT host, pid, claimed_at FROM benchmark_claims WHERE key = ? AND backend_id = ? AND batch = ?", where
        ).fetchone()
    )
    if holder is not None and holder.live(now, stale_after_s):
        return Claim(Outcome.HELD, holder=holder)
    token = uuid.uuid4().hex
    conn.execute(
        "INSERT OR REPLACE INTO benchmark_claims (key, backend_id, batch, owner, host, pid, claimed_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (*where, token, HOST, os.getpid(), now),
    )
    return Claim(Outcome.CLAIMED, token=token, holder=holder)


def release(conn: sqlite3.Connection, key: str, backend_id: str, batch: int, token: str) -> None:
    """Inside a write transaction: drop this process's claim (a claim another process took over stays)."""
    conn.execute(
        "DELETE FROM benchmark_claims WHERE key = ? AND backend_id = ? AND batch = ? AND owner = ?",
        (key, backend_id, batch, token),
    )


def progress_sql(batches: Sequence[int]) -> tuple[str, str]:
    """The two reads of a waiter's poll over ``batches``: runs stored (batch, measured_at) and claims (batch, host,
    pid, claimed_at), each taking (key, backend_id, *batches)."""
    marks = ", ".join("?" * len(batches))
    runs = f"SELECT batch, measured_at FROM benchmark_runs WHERE key = ? AND backend_id = ? AND batch IN ({marks})"
    claims = (
        "SELECT batch, host, pid, claimed_at FROM benchmark_claims "
        f"WHERE key = ? AND backend_id = ? AND batch IN ({marks})"
    )
    return runs, claims


def holders(rows: Iterable[tuple[object, ...]]) -> dict[int, Holder]:
    """{batch: holder} from the claims read of ``progress_sql``."""
    out: dict[int, Holder] = {}
    for b, *rest in rows:
        holder = _holder(tuple(rest))
        if isinstance(b, int) and is_int(b, 1) and holder is not None:
            out[b] = holder
    return out


def void_count(rows: Iterable[tuple[object, ...]], now: float, stale_after_s: float) -> int:
    """How many claims rows (host, pid, claimed_at) no longer bind at ``now`` (a row not written by us counts)."""
    return sum(1 for row in rows if (h := _holder(tuple(row))) is None or not h.live(now, stale_after_s))
