"""The cache's storage: opening its file, locking it, recovering from a damaged one, and short transactions.

Several processes (data-parallel ranks) share one file: WAL mode (the rollback journal where other hosts mount the
file system too, :mod:`ucudnn._cache_fs`), short ``BEGIN IMMEDIATE`` write transactions, a busy timeout and a retry
on ``database is locked``, every wait bounded. A damaged or unusable cache of ours is
renamed aside, never deleted, and a fresh one created; a file that is not ours is never touched
(:mod:`ucudnn._cache_schema` tells them apart). :class:`Store` is one such file (or a private in-memory database);
:class:`ucudnn.cache.Cache` keeps its tables in one.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ucudnn import config
from ucudnn._cache_fs import filesystem_type, shared_across_hosts
from ucudnn._cache_rows import CacheError
from ucudnn._cache_schema import (
    ADDED,
    Foreign,
    Unusable,
    classify,
    decode_text,
    foreign_reason,
    init_schema,
    marked_ours,
    undecodable,
)
from ucudnn.log import get_logger

log = get_logger("cache")

# Every wait for another process is bounded: the busy timeout of one SQLite statement, and LOCK_WAIT_S in all for
# one operation (its retries included) or for the lock that serialises opening. A Cache opened with
# ``memory_fallback=True`` (the planner inside a host program) then says once that it plans in memory only and
# goes on without the file; any other Cache raises CacheError naming the file.
BUSY_TIMEOUT_S = 2.0
LOCK_WAIT_S = 10.0
_LOCK_POLL_S = 0.05
# A wait is said once it has lasted this long: ranks that open one cache at once wait for each other briefly, and
# a line on every rank for that would be noise.
WAIT_NOTICE_S = 2.0

T = TypeVar("T")


class _Busy(Exception):
    """Another process kept the cache locked for longer than the bounded wait; the message says so."""


def _utc_stamp() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _sidecars(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


class Store:
    """One cache file (``path``; None: a private in-memory database), opened at construction.

    Thread-safe: one connection per Store (reopened after ``fork``), used under a lock; planning is rare and short,
    so the lock is not contended in practice. Not to be shared across processes as an object: each process opens
    its own on the same path.
    """

    def __init__(
        self,
        path: Path | None,
        *,
        memory_fallback: bool = False,
        lock_wait_s: float = LOCK_WAIT_S,
        read_only: bool = False,
    ) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._memory_fallback = memory_fallback
        self._lock_wait_s = lock_wait_s
        self._read_only_asked = read_only
        self._wait_said = False
        self._journal: str | None = None
        #: The type of the file system holding the file (``nfs4``, ``ext4``; None: in memory, or cannot be told).
        self.file_system: str | None = None
        if path is not None:
            self.journal()  # a bad UCUDNN_DATABASE_JOURNAL fails before the file is touched
        #: Paths this Store moved aside while opening (for tests and the CLI).
        self.moved_aside: list[tuple[Path, Path]] = []
        #: Why this Store works on a private in-memory copy instead of its file (``memory_fallback`` only).
        self.memory_only: str | None = None
        #: True when the file is read, never written (asked for, or the file is read-only to this process).
        self.read_only = False
        with self._lock:
            self.connection()

    def connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid != os.getpid():
            # A forked child must not touch the parent's connection (SQLite forbids it); abandon, do not close.
            self._conn = None
            self._pid = os.getpid()
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def _connect(self) -> sqlite3.Connection:
        target = ":memory:" if self.path is None else str(self.path)
        conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        conn.text_factory = decode_text
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        return conn

    def _open(self) -> sqlite3.Connection:
        if self.path is None:
            conn = self._connect()
            self._prepare(conn)
            return conn
        if self.path.exists() and not self.path.is_file():
            raise CacheError(f"the cache path {self.path} exists and is not a regular file")
        foreign = foreign_reason(self.path)
        if foreign:
            return self._not_ours(foreign)
        if self._read_only_asked or (
            self.path.exists() and not (os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK))
        ):
            return self._open_read_only()
        self._make_directory(self.path)
        # Serialise check-and-move-aside across processes, so two ranks finding the same bad file do not both
        # rename (the second would move aside the fresh cache the first just created).
        with self._file_lock() as locked:
            if not locked:
                return self._fall_back(f"another process holds its lock for more than {self._lock_wait_s:g} s")
            return self._open_locked(self.path)

    @staticmethod
    def _make_directory(path: Path) -> None:
        try:
            if not path.parent.is_dir():
                path.parent.mkdir(parents=True, exist_ok=True)
                # The default cache's directory is created on first use, as it should be (info); a directory that
                # a UCUDNN_DATABASE or --database named, maybe mistyped, is worth a warning.
                default = path == config.database_path({**os.environ, "UCUDNN_DATABASE": ""})
                log.log(
                    logging.INFO if default else logging.WARNING,
                    "created directory %s for the cache %s",
                    path.parent,
                    path.name,
                )
        except OSError as exc:
            raise CacheError(f"cannot create the directory of the cache {path}: {exc.strerror or exc}") from None

    def _open_locked(self, path: Path) -> sqlite3.Connection:
        """Under the file lock: the file, identified and prepared; when it is a cache of ours that cannot be used,
        moved aside and a fresh one made."""
        try:
            if foreign_reason(path):  # written since we looked
                raise Foreign(str(foreign_reason(path)))
            return self._prepared()
        except Foreign as exc:
            return self._not_ours(str(exc))
        except Unusable as exc:
            reason = str(exc)
        except sqlite3.OperationalError:
            raise  # cannot open, I/O error, locked, read-only: a problem of the file system, not the file
        except sqlite3.DatabaseError as exc:  # SQLITE_CORRUPT, SQLITE_NOTADB
            if not marked_ours(path):
                return self._not_ours(f"SQLite cannot read it ({exc}) and it is not marked as a ucudnn cache")
            reason = f"SQLite cannot read it ({exc})"
        self._move_aside(path, reason)
        return self._prepared()

    def _prepared(self) -> sqlite3.Connection:
        """A connection to the file, identified and prepared with bounded waits; then memory only or CacheError
        when the wait ran out."""
        conn = self._connect()
        try:
            self._retry(lambda: self._prepare(conn))
        except _Busy as exc:
            conn.close()
            return self._fall_back(str(exc))
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_read_only(self) -> sqlite3.Connection:
        """A cache file to read and never write: asked for (``read_only=True``), or one this process may not write.
        Read what it holds (in memory, copied, where the Cache may fall back to memory, so that what this process
        measures is kept too). Nothing on disk changes: a file that cannot be used is left as it is."""
        assert self.path is not None
        if not self.path.exists():
            raise CacheError(f"no cache at {self.path}")
        try:
            uri = self.path.resolve().as_uri()
            # No -wal/-shm beside it: no process has it open in WAL mode, and a read-only connection would create
            # them; read the file as it is instead, so that reading leaves no file behind. A file in the rollback
            # journal (its header says so) may be written by others without sidecars: read it under their locks.
            conn = None
            if any(p.exists() for p in _sidecars(self.path)) or self.file_journal() == "delete":
                ro = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
                try:
                    ro.execute("PRAGMA schema_version").fetchone()
                    conn = ro
                except sqlite3.OperationalError:
                    ro.close()  # a WAL file in a directory this process cannot write (no -shm to share)
            if conn is None:  # nobody else can be writing it in WAL mode: read it as it is
                conn = sqlite3.connect(f"{uri}?immutable=1", uri=True, check_same_thread=False)
            conn.isolation_level = None
            conn.text_factory = decode_text
            try:
                if classify(conn):
                    raise Unusable("it is an empty database")
            except BaseException:
                conn.close()
                raise
        except Foreign as exc:
            raise CacheError(f"{self.path} is not a ucudnn cache: {exc}; it was left as it is") from None
        except (Unusable, sqlite3.DatabaseError) as exc:
            if self._read_only_asked:
                raise CacheError(
                    f"the cache {self.path} cannot be used: {exc}; it was left as it is (the next run that plans "
                    "with it moves it aside and starts a fresh cache)"
                ) from None
            raise CacheError(f"the cache {self.path} is read-only and cannot be used: {exc}") from None
        except OSError as exc:
            raise CacheError(f"cannot read the cache {self.path}: {exc.strerror or exc}") from None
        if not self._memory_fallback:
            self.read_only = True
            return conn
        try:
            memory = self._connect_memory()
            conn.backup(memory)
            self._prepare(memory)
        finally:
            conn.close()
        self.memory_only = "it is read-only to this process"
        log.info("the cache %s is read-only: its plans and benchmarks are used, new ones stay in memory", self.path)
        return memory

    @staticmethod
    def _connect_memory() -> sqlite3.Connection:
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.text_factory = decode_text
        return conn

    def _not_ours(self, why: str) -> sqlite3.Connection:
        """A file that is not a ucudnn cache: never touched. CacheError naming it, or (``memory_fallback``: the
        planner in a program) memory-only planning, said once."""
        message = f"{self.path} is not a ucudnn cache: {why}; it was left as it is"
        if not self._memory_fallback:
            raise CacheError(message)
        conn = self._connect_memory()
        self._prepare(conn)
        self.memory_only = f"{why}; it was left as it is"
        log.warning("%s, and this process plans in memory only (UCUDNN_DATABASE names the cache file)", message)
        return conn

    def _fall_back(self, why: str) -> sqlite3.Connection:
        """After a bounded wait for another process: memory-only planning (said once), or CacheError."""
        if not self._memory_fallback:
            raise CacheError(f"the cache {self.path} is busy: {why}")
        old, self._conn = self._conn, None
        if old is not None and self._pid == os.getpid():
            old.close()
        conn = self._connect_memory()
        self._prepare(conn)
        self._conn = conn
        self.memory_only = why
        log.info("not waiting any longer for the cache %s: %s; this process plans in memory only", self.path, why)
        return conn

    def _say_wait(self, why: str, waited_s: float) -> None:
        """One line, the first time a wait of this Cache for another process has lasted WAIT_NOTICE_S: what for, how
        long at most, and then what (shorter waits, as between ranks starting together, are not worth a line)."""
        if waited_s < WAIT_NOTICE_S or self._wait_said:
            return
        self._wait_said = True
        then = "this process plans in memory only" if self._memory_fallback else "it gives up"
        log.warning("waiting up to %g s for the cache %s (%s); then %s", self._lock_wait_s, self.path, why, then)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[bool]:
        """The lock serialising opening across processes; yields False if another process kept it for
        ``lock_wait_s`` (said once, when the wait starts)."""
        assert self.path is not None
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise CacheError(f"cannot open the cache {self.path}: {exc.strerror or exc}") from None
        try:
            started = time.monotonic()
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    waited = time.monotonic() - started
                    if waited >= self._lock_wait_s:
                        yield False
                        return
                    self._say_wait("another process holds its lock", waited)
                    time.sleep(_LOCK_POLL_S)
                except OSError as exc:  # ENOLCK, ENOSYS, EOPNOTSUPP: e.g. Lustre mounted without flock
                    raise CacheError(
                        f"the file system of the cache {self.path} ({self.file_system or 'unknown'}) refuses file "
                        f"locks ({exc.strerror or exc}), without which processes cannot share the file; give "
                        "UCUDNN_DATABASE a path on a file system with locks (a local one)"
                    ) from None
            yield True
        finally:
            os.close(fd)  # closing releases the flock

    def journal(self) -> str:
        """The journal mode this Store asks for its file: ``wal`` or ``delete`` (``UCUDNN_DATABASE_JOURNAL``;
        ``auto``: ``delete`` on a file system that other hosts mount too, where WAL's shared memory is not shared).
        Decided once per Store, said once at info level where ``auto`` chose ``delete``."""
        if self._journal is None:
            asked = str(config.get("UCUDNN_DATABASE_JOURNAL"))
            fstype = self.file_system = filesystem_type(self.path) if self.path is not None else None
            if asked == "auto" and self.path is not None:
                asked = "delete" if shared_across_hosts(fstype) else "wal"
                if asked == "delete":
                    log.info("the cache %s is on a file system other hosts may mount (%s): it uses the "
                             "rollback journal and file locks, not WAL (UCUDNN_DATABASE_JOURNAL)",
                             self.path, fstype)  # fmt: skip
            self._journal = "wal" if asked == "auto" else asked
        return self._journal

    def file_journal(self) -> str | None:
        """The journal mode the file itself is in (its header's write version: 2 is WAL), whatever this Store
        asked for: ``wal``, ``delete``; None in memory or where the header cannot be read."""
        if self.path is None:
            return None
        try:
            with open(self.path, "rb") as f:
                header = f.read(20)
        except OSError:
            return None
        if len(header) < 20 or not header.startswith(b"SQLite format 3\0"):
            return None
        return "wal" if header[18] == 2 else "delete"

    def _set_journal(self, conn: sqlite3.Connection) -> None:
        """The journal mode asked for; a file another process has open in the other mode keeps it (changing
        needs the file alone), said as a warning where that leaves a file other hosts share in WAL mode."""
        current = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        if current == "memory":  # a private in-memory copy
            return
        want = self.journal()
        try:
            mode = str(conn.execute(f"PRAGMA journal_mode = {want.upper()}").fetchone()[0]).lower()
        except sqlite3.OperationalError as exc:
            if not _is_locked(exc):
                raise
            mode = current
        if mode == want:
            return
        if want == "delete" and mode == "wal":
            log.warning("the cache %s stays in WAL mode while another process on this host has it open that "
                        "way; processes on other hosts must not use it until then (UCUDNN_DATABASE_JOURNAL)",
                        self.path)  # fmt: skip
        else:
            log.debug("%s: journal mode %s, not %s (unavailable on this file system, or the file is in use)",
                      self.path, mode, want)  # fmt: skip

    def _prepare(self, conn: sqlite3.Connection) -> None:
        # Identify the file before changing anything: switching a foreign file to WAL would rewrite its header.
        fresh = classify(conn)
        self._set_journal(conn)
        conn.execute("PRAGMA synchronous = NORMAL")
        if fresh:
            init_schema(conn)
        try:
            for statement in ADDED:
                conn.execute(statement)
        except sqlite3.OperationalError as exc:  # read-only file or directory: read what is there
            log.debug("%s: cannot add tables (%s)", self.path, exc)

    def _move_aside(self, path: Path, reason: str) -> None:
        stamp = _utc_stamp()
        target = path.with_name(f"{path.name}.corrupt-{stamp}")
        n = 1
        while target.exists() or any(p.exists() for p in _sidecars(target)):
            target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
            n += 1
        os.replace(path, target)
        for src, dst in zip(_sidecars(path), _sidecars(target), strict=True):
            if src.exists():
                os.replace(src, dst)
        self.moved_aside.append((path, target))
        log.warning(
            "the cache %s is unusable: %s; moved it aside to %s and started a fresh cache", path, reason, target
        )

    def _retry(self, fn: Callable[[], T]) -> T:
        """``fn`` retried while the file is locked by another process, for at most ``lock_wait_s`` in all (each
        try waits up to the busy timeout); then _Busy."""
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_locked(exc) or self.path is None or self.memory_only:
                    raise
                waited = time.monotonic() - started
                left = self._lock_wait_s - waited
                if left <= 0:
                    break
                self._say_wait("another process holds it locked", waited)
                delay = min(left, 0.5, 0.05 * 2**attempt) * (0.5 + random.random())
                attempt += 1
                time.sleep(delay)
        raise _Busy(f"it stayed locked by another process for {self._lock_wait_s:g} s")

    def _bounded(self, fn: Callable[[], T]) -> T:
        """``_retry``, then memory only (``memory_fallback``) or CacheError when the wait ran out."""
        try:
            return self._retry(fn)
        except _Busy as exc:
            self._fall_back(str(exc))
        return fn()

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one short write transaction, retried as a whole if the file stays locked."""
        if self.read_only:
            raise CacheError(f"the cache {self.path} is read-only")

        def attempt() -> T:
            conn = self.connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
                conn.execute("COMMIT")
                return result
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        with self._lock:
            return self._bounded(attempt)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a query, less those holding text that is not UTF-8 (forged: skipped with a warning)."""
        with self._lock:
            rows = self._bounded(lambda: self.connection().execute(sql, params).fetchall())
        good = [row for row in rows if not any(undecodable(v) for v in row)]
        if len(good) != len(rows):
            log.warning("ignoring %d row(s) in %s whose text is not UTF-8", len(rows) - len(good), self)
        return good

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def vacuum(self) -> None:
        """Give the file's free pages back (after a large delete); nothing for a memory-only store."""
        if self.path is not None:
            with self._lock, contextlib.suppress(sqlite3.OperationalError):
                self.connection().execute("VACUUM")

    def file_bytes(self) -> int:
        """The size of the file and its WAL sidecars (0 in memory)."""
        size = 0
        if self.path is not None:
            for p in (self.path, *_sidecars(self.path)):
                with contextlib.suppress(FileNotFoundError):
                    size += p.stat().st_size
        return size

    def __repr__(self) -> str:
        # Logged as the Cache it holds the tables of.
        return f"Cache({str(self.path) if self.path else ':memory:'!r})"
