"""The SQLite cache of benchmark results and plans.

Benchmark rows are keyed by (kernel key, micro-batch size b, backend id). The kernel key excludes N, so every
mini-batch size that considers micro-batches of b samples shares the same rows. Every algorithm measured at b
is stored whatever the workspace limit of the request that measured it, and limits are applied when reading:
a later request with a larger limit sees the faster, hungrier algorithms (the original cached only what fitted).

Plans are keyed by (kernel key, backend id, N, batch-size policy, workspace limit, deterministic_only) in the
``plans`` table, whose layout the C shim may read directly::

    plans(key, backend_id, batch, policy, workspace_limit, deterministic_only,
          plan_json,        -- [[micro-batch size, algo, math type], ...] in execution order
          time_ms, workspace_bytes, created_at)

Several processes (data-parallel ranks) share one file: WAL mode, short ``BEGIN IMMEDIATE`` write transactions, a
busy timeout and a retry on ``database is locked``. A damaged or unusable cache of ours (our application id, but
damaged pages, a schema we do not know, values not of their column's type) is renamed aside, never deleted, and a
fresh cache is created. A file that is not ours (not SQLite at all, or another application's database) is never
touched: the Cache refuses it (CacheError naming it), or, as the planner inside a program opens it, plans in
memory and says why. ``Cache(path, read_only=True)`` (what ``ucudnn db stats/list/export`` open) changes nothing
on disk: no journal switch, no added table, no lock file, nothing moved. Text that is not UTF-8 (forged rows) is
skipped by its reader with a warning.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import logging
import math
import os
import random
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ucudnn import config
from ucudnn._cache_rows import (
    EXPORT_FORMAT,
    SCHEMA_VERSION,
    BenchmarkRow,
    CacheError,
    PlanKey,
    Verdict,
    check_key,
    check_positive,
    is_int,
    is_time,
    loads_or_raw,
    parse_steps,
    validate_import,
    validate_plan_row,
)
from ucudnn._cache_rows import steps_json as _steps_json
from ucudnn.log import get_logger
from ucudnn.optimizer import AlgoPerf, MicroBatch, Plan

__all__ = [
    "APPLICATION_ID",
    "EXPORT_FORMAT",
    "SCHEMA_VERSION",
    "BenchmarkRow",
    "Cache",
    "CacheError",
    "PlanKey",
    "Verdict",
]

log = get_logger("cache")

# PRAGMA application_id: "ucDN" in ASCII, so `file` and other tools can tell our databases apart.
APPLICATION_ID = 0x7563444E
_SQLITE_MAGIC = b"SQLite format 3\x00"
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

_SCHEMA = (
    """CREATE TABLE benchmark_runs (
        key TEXT NOT NULL,
        backend_id TEXT NOT NULL,
        batch INTEGER NOT NULL,
        measured_at REAL NOT NULL,
        PRIMARY KEY (key, backend_id, batch)
    ) WITHOUT ROWID""",
    """CREATE TABLE benchmarks (
        key TEXT NOT NULL,
        backend_id TEXT NOT NULL,
        batch INTEGER NOT NULL,
        algo INTEGER NOT NULL,
        math_type INTEGER NOT NULL,
        status INTEGER NOT NULL,
        time_ms REAL,
        workspace_bytes INTEGER NOT NULL,
        deterministic INTEGER NOT NULL,
        PRIMARY KEY (key, backend_id, batch, algo, math_type)
    ) WITHOUT ROWID""",
    """CREATE TABLE plans (
        key TEXT,
        backend_id TEXT,
        batch INTEGER,
        policy TEXT,
        workspace_limit INTEGER,
        deterministic_only INTEGER,
        plan_json TEXT,
        time_ms REAL,
        workspace_bytes INTEGER,
        created_at REAL,
        PRIMARY KEY (key, backend_id, batch, policy, workspace_limit, deterministic_only)
    )""",
)
# Tables added after schema version 1 was released: created where missing (an older cache keeps working), and
# optional to readers (a read-only older cache simply has no verdicts or device facts).
_ADDED = (
    # Checks of micro-batched plans on real executions (see the preload library's uc_verify.c): under a plan key
    # whose limit is the workspace of the executions, the plan checked and the undivided choice it was checked
    # against, their measured medians, and which was kept.
    """CREATE TABLE IF NOT EXISTS verdicts (
        key TEXT NOT NULL,
        backend_id TEXT NOT NULL,
        batch INTEGER NOT NULL,
        policy TEXT NOT NULL,
        workspace_limit INTEGER NOT NULL,
        deterministic_only INTEGER NOT NULL,
        plan_json TEXT NOT NULL,
        undivided_json TEXT NOT NULL,
        kept INTEGER NOT NULL,
        plan_ms REAL NOT NULL,
        undivided_ms REAL NOT NULL,
        samples INTEGER NOT NULL,
        measured_at REAL NOT NULL,
        PRIMARY KEY (key, backend_id, batch, policy, workspace_limit, deterministic_only, plan_json)
    ) WITHOUT ROWID""",
    # Facts measured once per device (backend id), e.g. the host cost of one call.
    """CREATE TABLE IF NOT EXISTS device_facts (
        backend_id TEXT NOT NULL,
        name TEXT NOT NULL,
        value REAL NOT NULL,
        measured_at REAL NOT NULL,
        PRIMARY KEY (backend_id, name)
    ) WITHOUT ROWID""",
)
_TABLES = frozenset({"benchmark_runs", "benchmarks", "plans"})
# Columns that may hold NULL (a failed algorithm has no time); every other column must hold its declared type.
_NULLABLE = frozenset({("benchmarks", "time_ms")})
_SQL_TYPES = {"INTEGER": ("integer",), "REAL": ("real", "integer"), "TEXT": ("text",)}
# Columns holding a plan's steps, [[batch, algo, math_type], ...]: checked by shape, without a recursive parser.
_STEPS_COLUMNS = (("plans", "plan_json"), ("verdicts", "plan_json"), ("verdicts", "undivided_json"))
_STEPS_RE = re.compile(
    r"\s*\[\s*\[\s*[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\](?:\s*,\s*\[\s*[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\])*\s*\]\s*"
)


def _reference_columns() -> dict[str, list[tuple[str, str]]]:
    """{table: [(column, declared type), ...]} of the schema this version writes."""
    conn = sqlite3.connect(":memory:")
    try:
        for statement in (*_SCHEMA, *_ADDED):
            conn.execute(statement)
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: [(r[1], str(r[2]).upper()) for r in conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    finally:
        conn.close()


_COLUMNS = _reference_columns()


def _check_contents(conn: sqlite3.Connection, tables: set[str]) -> None:
    """Raise _Unusable unless every table of ours has exactly our columns, every value its declared type, and
    every stored plan the shape of one (a file of ours the planner could not use is moved aside like a corrupt
    one, instead of failing reads later)."""
    for table in sorted(tables & _COLUMNS.keys()):
        expected = _COLUMNS[table]
        found = [(r[1], str(r[2]).upper()) for r in conn.execute(f"PRAGMA table_info({table})")]
        if sorted(found) != sorted(expected):
            extra = sorted({c for c, _ in found} - {c for c, _ in expected})
            what = f"unknown columns {', '.join(extra)}" if extra else "columns missing or of another type"
            raise _Unusable(f"its table {table} has {what}")
        for column, declared in expected:
            types = _SQL_TYPES[declared] + (("null",) if (table, column) in _NULLABLE else ())
            marks = ", ".join("?" * len(types))
            bad = conn.execute(f"SELECT 1 FROM {table} WHERE typeof({column}) NOT IN ({marks}) LIMIT 1", types)
            if bad.fetchone():
                raise _Unusable(f"its column {table}.{column} holds values that are not {declared.lower()}")
    for table, column in _STEPS_COLUMNS:
        if table in tables:
            for (text,) in conn.execute(f"SELECT {column} FROM {table}"):
                if _undecodable(text):
                    continue  # a forged row: its reader skips it, as any row whose text is not UTF-8
                if not _STEPS_RE.fullmatch(text):
                    raise _Unusable(
                        f"its column {table}.{column} holds {text[:40]!r}, not [[batch, algo, math_type], ...]"
                    )


T = TypeVar("T")


class _Unusable(Exception):
    """The file at the cache path is a ucudnn cache that cannot be used (damaged, unusable); the message says why."""


class _Foreign(Exception):
    """The file at the cache path is not a ucudnn cache at all; the message says why. It is never touched."""


def _undecodable(value: object) -> bool:
    """True for text read from a column whose bytes were not UTF-8 (decoded with surrogateescape)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _text(raw: bytes) -> str:
    """The connections' text factory: invalid UTF-8 (a forged row) is kept readable so its reader can skip it,
    instead of sqlite3 raising for the whole query."""
    return raw.decode("utf-8", "surrogateescape")


def foreign_reason(path: Path) -> str | None:
    """Why the file at ``path`` is not a ucudnn cache, judged from its header alone (no SQLite, nothing written):
    not an SQLite database, or an SQLite database marked as another application's; None otherwise (a cache of ours,
    an empty file, an unmarked database, or no file)."""
    try:
        with path.open("rb") as f:
            head = f.read(100)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    if not head:
        return None
    if not head.startswith(_SQLITE_MAGIC):
        return "it is not an SQLite database"
    app_id = int.from_bytes(head[68:72], "big") if len(head) >= 72 else 0
    if app_id not in (0, APPLICATION_ID):
        return f"it is an SQLite database of another application (application_id {app_id:#x})"
    return None


def _marked_ours(path: Path) -> bool:
    """True when the file's header carries our application id (readable or not by SQLite)."""
    try:
        with path.open("rb") as f:
            head = f.read(100)
    except OSError:
        return False
    return head.startswith(_SQLITE_MAGIC) and len(head) >= 72 and int.from_bytes(head[68:72], "big") == APPLICATION_ID


class _Busy(Exception):
    """Another process kept the cache locked for longer than the bounded wait; the message says so."""


def _utc_stamp() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _sidecars(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


class Cache:
    """A ucudnn cache file (or, with ``Cache.in_memory()``, a private in-memory one).

    Thread-safe: one connection per Cache (reopened after ``fork``), used under a lock; planning is rare and
    short, so the lock is not contended in practice. Not to be shared across processes as an object: each
    process opens its own ``Cache`` on the same path.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        memory_fallback: bool = False,
        lock_wait_s: float = LOCK_WAIT_S,
        read_only: bool = False,
    ) -> None:
        self.path: Path | None = Path(path) if path is not None else config.database_path()
        if str(self.path) == ":memory:":
            self.path = None
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._memory_fallback = memory_fallback
        self._lock_wait_s = lock_wait_s
        self._read_only_asked = read_only
        self._wait_said = False
        #: Paths this Cache moved aside while opening (for tests and the CLI).
        self.moved_aside: list[tuple[Path, Path]] = []
        #: Why this Cache works on a private in-memory copy instead of its file (``memory_fallback`` only).
        self.memory_only: str | None = None
        #: True when the file is read, never written (asked for, or the file is read-only to this process).
        self.read_only = False
        with self._lock:
            self._connection()

    @classmethod
    def in_memory(cls) -> Cache:
        """A private cache that lives as long as the object (for ``Planner(cache=None)`` and tests)."""
        return cls(":memory:")

    # ---------------------------------------------------------------- opening, corruption, transactions

    def _connection(self) -> sqlite3.Connection:
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
        conn.text_factory = _text
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
        try:
            if not self.path.parent.is_dir():
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # The default cache's directory is created on first use, as it should be (info); a directory that
                # a UCUDNN_DATABASE or --database named, maybe mistyped, is worth a warning.
                default = self.path == config.database_path({**os.environ, "UCUDNN_DATABASE": ""})
                log.log(
                    logging.INFO if default else logging.WARNING,
                    "created directory %s for the cache %s",
                    self.path.parent,
                    self.path.name,
                )
        except OSError as exc:
            raise CacheError(f"cannot create the directory of the cache {self.path}: {exc.strerror or exc}") from None
        # Serialise check-and-move-aside across processes, so two ranks finding the same bad file do not both
        # rename (the second would move aside the fresh cache the first just created).
        with self._file_lock() as locked:
            if not locked:
                return self._fall_back(f"another process holds its lock for more than {self._lock_wait_s:g} s")
            try:
                if foreign_reason(self.path):  # written since we looked
                    raise _Foreign(str(foreign_reason(self.path)))
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
            except _Foreign as exc:
                return self._not_ours(str(exc))
            except _Unusable as exc:
                reason = str(exc)
            except sqlite3.OperationalError:
                raise  # cannot open, I/O error, locked, read-only: a problem of the file system, not the file
            except sqlite3.DatabaseError as exc:  # SQLITE_CORRUPT, SQLITE_NOTADB
                if not _marked_ours(self.path):
                    return self._not_ours(f"SQLite cannot read it ({exc}) and it is not marked as a ucudnn cache")
                reason = f"SQLite cannot read it ({exc})"
            self._move_aside(self.path, reason)
            conn = self._connect()
            try:
                self._retry(lambda: self._prepare(conn))
            except _Busy as exc:
                conn.close()
                return self._fall_back(str(exc))
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
            # them; read the file as it is instead, so that reading leaves no file behind.
            conn = None
            if any(p.exists() for p in _sidecars(self.path)):
                ro = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
                try:
                    ro.execute("PRAGMA schema_version").fetchone()
                    conn = ro
                except sqlite3.OperationalError:
                    ro.close()  # a WAL file in a directory this process cannot write (no -shm to share)
            if conn is None:  # nobody else can be writing it in WAL mode: read it as it is
                conn = sqlite3.connect(f"{uri}?immutable=1", uri=True, check_same_thread=False)
            conn.isolation_level = None
            conn.text_factory = _text
            try:
                if self._classify(conn):
                    raise _Unusable("it is an empty database")
            except BaseException:
                conn.close()
                raise
        except _Foreign as exc:
            raise CacheError(f"{self.path} is not a ucudnn cache: {exc}; it was left as it is") from None
        except (_Unusable, sqlite3.DatabaseError) as exc:
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
        conn.text_factory = _text
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
        log.warning(
            "waiting up to %g s for the cache %s (%s); then %s", self._lock_wait_s, self.path, why, then
        )

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
            yield True
        finally:
            os.close(fd)  # closing releases the flock

    def _prepare(self, conn: sqlite3.Connection) -> None:
        # Identify the file before changing anything: switching a foreign file to WAL would rewrite its header.
        fresh = self._classify(conn)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            log.debug("%s: journal mode %s (WAL unavailable on this file system)", self.path, mode)
        conn.execute("PRAGMA synchronous = NORMAL")
        if fresh:
            self._init_schema(conn)
        try:
            for statement in _ADDED:
                conn.execute(statement)
        except sqlite3.OperationalError as exc:  # read-only file or directory: read what is there
            log.debug("%s: cannot add tables (%s)", self.path, exc)

    @staticmethod
    def _classify(conn: sqlite3.Connection) -> bool:
        """True for an empty database, False for a good ucudnn cache; raises _Unusable for anything else."""
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if app_id == 0 and version == 0 and not tables:
            return True
        if app_id != APPLICATION_ID:
            raise _Foreign(
                f"it is an SQLite database of another application (application_id {app_id:#x})"
                if app_id
                else "it is an SQLite database that is not marked as a ucudnn cache (PRAGMA application_id 0)"
            )
        if version != SCHEMA_VERSION:
            raise _Unusable(f"its schema version {version} is not the supported {SCHEMA_VERSION}")
        if not _TABLES <= tables:
            raise _Unusable(f"tables are missing: {', '.join(sorted(_TABLES - tables))}")
        _check_contents(conn, tables)
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise _Unusable(f"its integrity check failed ({check})")
        return False

    @classmethod
    def _init_schema(cls, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process (or, in memory, nobody) may have created it since we looked.
            if cls._classify(conn):
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

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

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one short write transaction, retried as a whole if the file stays locked."""
        if self.read_only:
            raise CacheError(f"the cache {self.path} is read-only")

        def attempt() -> T:
            conn = self._connection()
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

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a query, less those holding text that is not UTF-8 (forged: skipped with a warning)."""
        with self._lock:
            rows = self._bounded(lambda: self._connection().execute(sql, params).fetchall())
        good = [row for row in rows if not any(_undecodable(v) for v in row)]
        if len(good) != len(rows):
            log.warning("ignoring %d row(s) in %s whose text is not UTF-8", len(rows) - len(good), self)
        return good

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Cache({str(self.path) if self.path else ':memory:'!r})"

    # ---------------------------------------------------------------- benchmark rows

    def put_benchmark(self, key: str, backend_id: str, batch: int, rows: Iterable[AlgoPerf | BenchmarkRow]) -> None:
        """Record one benchmark run at micro-batch size ``batch``: every algorithm measured, usable or not.

        Replaces an earlier run at the same (key, backend, batch): a run is stored whole, so concurrent ranks
        measuring the same size leave one consistent set of rows.
        """
        stored = [r if isinstance(r, BenchmarkRow) else BenchmarkRow.from_perf(r) for r in rows]
        check_key(key, backend_id)
        check_positive("batch", batch)
        for row in stored:
            if row.batch != batch:
                raise CacheError(f"a row for batch {row.batch} in the benchmark run for batch {batch}")
            if row.algo < 0 or row.math_type < 0 or row.workspace_bytes < 0:
                raise CacheError(f"negative algo, math type or workspace in {row}")
        now = time.time()

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO benchmark_runs (key, backend_id, batch, measured_at) VALUES (?, ?, ?, ?)",
                (key, backend_id, batch, now),
            )
            conn.execute(
                "DELETE FROM benchmarks WHERE key = ? AND backend_id = ? AND batch = ?", (key, backend_id, batch)
            )
            conn.executemany(
                "INSERT OR REPLACE INTO benchmarks (key, backend_id, batch, algo, math_type, status, time_ms, "
                "workspace_bytes, deterministic) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        key,
                        backend_id,
                        batch,
                        r.algo,
                        r.math_type,
                        r.status,
                        r.time_ms if r.usable else None,
                        r.workspace_bytes,
                        int(r.deterministic),
                    )
                    for r in stored
                ],
            )

        self._write(write)

    def get_benchmarks(
        self,
        key: str,
        backend_id: str,
        batches: Iterable[int],
        *,
        workspace_limit_bytes: int | None = None,
        deterministic_only: bool = False,
        include_failed: bool = False,
    ) -> dict[int, list[AlgoPerf]]:
        """The stored runs among ``batches``: {b: perfs} for every b benchmarked (an empty list means it was
        measured and nothing qualifies); sizes never benchmarked are absent. Rows are filtered here, at read
        time, by the optional limit and determinism; failed algorithms come back (with ``inf`` time) only
        with ``include_failed``. Rows are ordered by (algo, math type)."""
        wanted = sorted(set(batches))
        out: dict[int, list[AlgoPerf]] = {}
        if not wanted:
            return out
        marks = ", ".join("?" * len(wanted))
        for (b,) in self._read(
            f"SELECT batch FROM benchmark_runs WHERE key = ? AND backend_id = ? AND batch IN ({marks})",
            (key, backend_id, *wanted),
        ):
            if is_int(b, 1):
                out[b] = []
        rows = self._read(
            "SELECT batch, algo, status, time_ms, workspace_bytes, deterministic, math_type FROM benchmarks "
            f"WHERE key = ? AND backend_id = ? AND batch IN ({marks}) ORDER BY batch, algo, math_type",
            (key, backend_id, *wanted),
        )
        for b, algo, status, t, ws, det, mt in rows:
            if not (
                all(is_int(v) for v in (b, algo, ws, mt, det))
                and is_int(status, -(2**31))
                and (t is None or is_time(t))
            ):
                # Written by something else since the file was checked at opening: not a row to plan with.
                log.warning("ignoring a malformed benchmark row in %s for %s: %r", self, key, (b, algo, status, t, ws))
                continue
            row = BenchmarkRow(b, algo, status, math.inf if t is None else float(t), ws, bool(det), mt)
            if b not in out or (not row.usable and not include_failed):
                continue
            if workspace_limit_bytes is not None and row.workspace_bytes > workspace_limit_bytes:
                continue
            if deterministic_only and not row.deterministic:
                continue
            out[b].append(row.to_perf())
        return out

    def get_benchmark(self, key: str, backend_id: str, batch: int, **filters: Any) -> list[AlgoPerf] | None:
        """One size's stored run (see ``get_benchmarks``), or None if ``batch`` was never benchmarked."""
        return self.get_benchmarks(key, backend_id, [batch], **filters).get(batch)

    # ---------------------------------------------------------------- plans

    def put_plan(self, pk: PlanKey, plan: Plan) -> None:
        """Store ``plan`` under ``pk`` (replacing any earlier one)."""
        check_key(pk.key, pk.backend_id)
        check_positive("batch", pk.batch)
        if plan.batch != pk.batch:
            raise CacheError(f"plan covers {plan.batch} samples, not batch {pk.batch}")
        if plan.workspace_bytes > pk.workspace_limit_bytes:
            raise CacheError(f"plan needs {plan.workspace_bytes} B, over the limit {pk.workspace_limit_bytes} B")
        if not is_time(plan.time_ms):
            raise CacheError(f"plan time {plan.time_ms!r} ms is not a finite non-negative number")
        plan_json = _steps_json([(mb.batch, mb.algo, mb.math_type) for mb in plan.micro_batches])
        params = (*pk.params(), plan_json, float(plan.time_ms), int(plan.workspace_bytes), time.time())
        self._write(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO plans (key, backend_id, batch, policy, workspace_limit, deterministic_only, "
                "plan_json, time_ms, workspace_bytes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                params,
            )
        )

    def get_plan(self, pk: PlanKey, *, algo_count: int | None = None) -> Plan | None:
        """The stored plan for ``pk``, validated, or None. A stored row that fails validation (sizes that do not
        sum to N, sizes the policy does not allow, algorithms out of range, a workspace over the limit, a
        non-deterministic kernel in a deterministic plan) is ignored with a warning; planning again replaces it.

        Micro-batch times, workspaces and determinism come from the benchmark rows; a step whose size was
        benchmarked without that algorithm running makes the row bad. A size with no stored run at all (a plan
        imported alone, or written by another tool) gets its time apportioned from the plan's totals."""
        rows = self._read(
            "SELECT plan_json, time_ms, workspace_bytes FROM plans WHERE key = ? AND backend_id = ? AND batch = ? "
            "AND policy = ? AND workspace_limit = ? AND deterministic_only = ?",
            pk.params(),
        )
        if not rows:
            return None
        plan_json, time_ms, workspace_bytes = rows[0]
        try:
            steps = validate_plan_row(pk, plan_json, time_ms, workspace_bytes, algo_count)
            plan = self._rebuild(pk, steps, float(time_ms), int(workspace_bytes))
        except CacheError as exc:
            log.warning("ignoring a bad cached plan in %s for %s at N=%d: %s", self, pk.key, pk.batch, exc)
            return None
        return plan

    def _rebuild(self, pk: PlanKey, steps: list[tuple[int, int, int]], time_ms: float, ws: int) -> Plan:
        measured = self.get_benchmarks(pk.key, pk.backend_id, {b for b, _, _ in steps})
        by_id = {(p.batch, p.algo, p.math_type): p for perfs in measured.values() for p in perfs}
        micro: list[MicroBatch] = []
        for b, algo, mt in steps:
            perf = by_id.get((b, algo, mt))
            if perf is None and b in measured:
                raise CacheError(f"algo {algo} (math type {mt}) did not run at b={b} when it was benchmarked")
            if perf is None:
                micro.append(MicroBatch(b, algo, time_ms * b / pk.batch, ws, pk.deterministic_only, mt))
                continue
            if perf.workspace_bytes > pk.workspace_limit_bytes:
                raise CacheError(f"algo {algo} at b={b} needs {perf.workspace_bytes} B, over the limit")
            if pk.deterministic_only and not perf.deterministic:
                raise CacheError(f"algo {algo} at b={b} is not deterministic")
            micro.append(MicroBatch.from_perf(perf))
        return Plan(tuple(micro))

    # ---------------------------------------------------------------- verdicts and device facts

    def put_verdict(self, v: Verdict) -> None:
        """Store the outcome of a check on real executions (replacing an earlier one for the same plan)."""
        params = (*v.plan_key.params(), _steps_json(v.plan), _steps_json(v.undivided), int(v.kept))
        self._write(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO verdicts (key, backend_id, batch, policy, workspace_limit, deterministic_only, "
                "plan_json, undivided_json, kept, plan_ms, undivided_ms, samples, measured_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*params, float(v.plan_ms), float(v.undivided_ms), int(v.samples), time.time()),
            )
        )

    def get_verdict(self, pk: PlanKey, plan: Sequence[tuple[int, int, int]]) -> Verdict | None:
        """The stored check of ``plan`` (``(batch, algo, math_type)`` steps) under ``pk``, or None. A malformed
        row is ignored with a warning (the plan is then checked again)."""
        try:
            rows = self._read(
                "SELECT undivided_json, kept, plan_ms, undivided_ms, samples FROM verdicts WHERE key = ? AND "
                "backend_id = ? AND batch = ? AND policy = ? AND workspace_limit = ? AND deterministic_only = ? "
                "AND plan_json = ?",
                (*pk.params(), _steps_json(plan)),
            )
        except sqlite3.OperationalError:  # an older read-only cache without the table
            return None
        if not rows:
            return None
        undivided_json, kept, plan_ms, undivided_ms, samples = rows[0]
        try:
            steps = parse_steps(loads_or_raw(undivided_json), pk.batch, "undivided", None)
            if kept not in (0, 1) or not is_time(plan_ms) or not is_time(undivided_ms) or not is_int(samples, 1):
                raise CacheError("kept, times or samples out of range")
        except CacheError as exc:
            log.warning("ignoring a bad verdict in %s for %s at N=%d: %s", self, pk.key, pk.batch, exc)
            return None
        return Verdict(pk, tuple(plan), tuple(steps), bool(kept), float(plan_ms), float(undivided_ms), int(samples))

    def put_fact(self, backend_id: str, name: str, value: float) -> None:
        """Store a fact measured once per device (e.g. ``call_cost_ms``)."""
        check_key(name, backend_id)
        if not is_time(value):
            raise CacheError(f"{name}={value!r} is not a finite non-negative number")
        self._write(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO device_facts (backend_id, name, value, measured_at) VALUES (?, ?, ?, ?)",
                (backend_id, name, float(value), time.time()),
            )
        )

    def get_fact(self, backend_id: str, name: str) -> float | None:
        try:
            rows = self._read("SELECT value FROM device_facts WHERE backend_id = ? AND name = ?", (backend_id, name))
        except sqlite3.OperationalError:
            return None
        return float(rows[0][0]) if rows and is_time(rows[0][0]) else None

    # ---------------------------------------------------------------- maintenance (the `ucudnn db` CLI)

    def stats(self) -> dict[str, Any]:
        """Counts for ``ucudnn db stats``; file sizes include the WAL."""

        def one(sql: str) -> int:
            return int(self._read(sql)[0][0])

        backends: dict[str, dict[str, int]] = {}
        for backend, n in self._read("SELECT backend_id, COUNT(*) FROM benchmark_runs GROUP BY backend_id"):
            backends.setdefault(backend, {"benchmark_runs": 0, "plans": 0})["benchmark_runs"] = int(n)
        for backend, n in self._read("SELECT backend_id, COUNT(*) FROM plans GROUP BY backend_id"):
            backends.setdefault(backend, {"benchmark_runs": 0, "plans": 0})["plans"] = int(n)
        size = 0
        if self.path is not None:
            for p in (self.path, *_sidecars(self.path)):
                with contextlib.suppress(FileNotFoundError):
                    size += p.stat().st_size
        return {
            "path": str(self.path) if self.path else ":memory:",
            "schema_version": SCHEMA_VERSION,
            "kernels": one("SELECT COUNT(*) FROM (SELECT key FROM benchmark_runs UNION SELECT key FROM plans)"),
            "benchmark_runs": one("SELECT COUNT(*) FROM benchmark_runs"),
            "benchmark_rows": one("SELECT COUNT(*) FROM benchmarks"),
            "plans": one("SELECT COUNT(*) FROM plans"),
            "verdicts": self._optional_count("verdicts"),
            "device_facts": self._optional_count("device_facts"),
            "file_bytes": size,
            "backends": dict(sorted(backends.items())),
        }

    def _optional_count(self, table: str) -> int:
        """Rows of a table added after schema version 1 (0 where an older read-only cache lacks it)."""
        try:
            return int(self._read(f"SELECT COUNT(*) FROM {table}")[0][0])
        except sqlite3.OperationalError:
            return 0

    def list_kernels(self) -> list[dict[str, Any]]:
        """Per (kernel key, backend): the micro-batch sizes benchmarked and the stored plans, sorted."""
        kernels: dict[tuple[str, str], dict[str, Any]] = {}

        def entry(key: str, backend: str) -> dict[str, Any]:
            return kernels.setdefault(
                (key, backend), {"key": key, "backend_id": backend, "batches_benchmarked": [], "plans": []}
            )

        for key, backend, b in self._read("SELECT key, backend_id, batch FROM benchmark_runs ORDER BY 1, 2, 3"):
            entry(key, backend)["batches_benchmarked"].append(b)  # as stored: a listing never fails on a row
        for key, backend, b, pol, lim, det, pj, t, ws in self._read(
            "SELECT key, backend_id, batch, policy, workspace_limit, deterministic_only, plan_json, time_ms, "
            "workspace_bytes FROM plans ORDER BY 1, 2, 3, 4, 5, 6"
        ):
            entry(key, backend)["plans"].append(_plan_entry(b, pol, lim, det, pj, t, ws))
        return [kernels[k] for k in sorted(kernels)]

    def export(self) -> dict[str, Any]:
        """Everything, as a JSON-ready object in a stable order (``import_data`` reads it back)."""
        runs: dict[tuple[str, str, int], dict[str, Any]] = {}
        for key, backend, b, at in self._read(
            "SELECT key, backend_id, batch, measured_at FROM benchmark_runs ORDER BY 1, 2, 3"
        ):
            runs[(key, backend, b)] = {"key": key, "backend_id": backend, "batch": b, "measured_at": at, "algos": []}
        for key, backend, b, algo, mt, status, t, ws, det in self._read(
            "SELECT key, backend_id, batch, algo, math_type, status, time_ms, workspace_bytes, deterministic "
            "FROM benchmarks ORDER BY 1, 2, 3, 4, 5"
        ):
            run = runs.get((key, backend, b))
            if run is not None:
                run["algos"].append(
                    {
                        "algo": algo,
                        "math_type": mt,
                        "status": status,
                        "time_ms": t,
                        "workspace_bytes": ws,
                        "deterministic": bool(det),
                    }
                )
        plans = [
            {"key": key, "backend_id": backend, **_plan_entry(b, pol, lim, det, pj, t, ws), "created_at": at}
            for key, backend, b, pol, lim, det, pj, t, ws, at in self._read(
                "SELECT key, backend_id, batch, policy, workspace_limit, deterministic_only, plan_json, time_ms, "
                "workspace_bytes, created_at FROM plans ORDER BY 1, 2, 3, 4, 5, 6"
            )
        ]
        return {"format": EXPORT_FORMAT, "version": SCHEMA_VERSION, "benchmarks": list(runs.values()), "plans": plans}

    def import_data(self, data: Any) -> dict[str, int]:
        """Merge an ``export()`` object: validated as a whole first (CacheError naming the bad element, nothing
        written), then written in one transaction. Imported runs and plans replace stored ones with the same key.
        Returns the counts written."""
        runs, plans = validate_import(data)

        def write(conn: sqlite3.Connection) -> None:
            for run in runs:
                ident = (run["key"], run["backend_id"], run["batch"])
                conn.execute(
                    "INSERT OR REPLACE INTO benchmark_runs (key, backend_id, batch, measured_at) VALUES (?, ?, ?, ?)",
                    (*ident, run["measured_at"]),
                )
                conn.execute("DELETE FROM benchmarks WHERE key = ? AND backend_id = ? AND batch = ?", ident)
                conn.executemany(
                    "INSERT OR REPLACE INTO benchmarks (key, backend_id, batch, algo, math_type, status, time_ms, "
                    "workspace_bytes, deterministic) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            *ident,
                            a["algo"],
                            a["math_type"],
                            a["status"],
                            a["time_ms"],
                            a["workspace_bytes"],
                            int(a["deterministic"]),
                        )
                        for a in run["algos"]
                    ],
                )
            conn.executemany(
                "INSERT OR REPLACE INTO plans (key, backend_id, batch, policy, workspace_limit, deterministic_only, "
                "plan_json, time_ms, workspace_bytes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        p["key"],
                        p["backend_id"],
                        p["batch"],
                        p["policy"],
                        p["workspace_limit"],
                        int(p["deterministic_only"]),
                        json.dumps(p["micro_batches"]),
                        p["time_ms"],
                        p["workspace_bytes"],
                        p["created_at"],
                    )
                    for p in plans
                ],
            )

        self._write(write)
        return {"benchmark_runs": len(runs), "benchmark_rows": sum(len(r["algos"]) for r in runs), "plans": len(plans)}

    def clear(self, *, plans_only: bool = False) -> dict[str, int]:
        """Delete every plan and verdict (checks of plans on real executions), and unless ``plans_only`` every
        benchmark row and device fact too. Returns the counts deleted."""

        def delete(conn: sqlite3.Connection, table: str) -> int:
            try:
                return int(conn.execute(f"DELETE FROM {table}").rowcount)
            except sqlite3.OperationalError:  # an added table an older cache lacks
                return 0

        def write(conn: sqlite3.Connection) -> dict[str, int]:
            counts = {"plans": delete(conn, "plans"), "verdicts": delete(conn, "verdicts")}
            if not plans_only:
                counts["benchmark_rows"] = delete(conn, "benchmarks")
                counts["benchmark_runs"] = delete(conn, "benchmark_runs")
                counts["device_facts"] = delete(conn, "device_facts")
            return counts

        counts = self._write(write)
        if not plans_only and self.path is not None:
            with self._lock, contextlib.suppress(sqlite3.OperationalError):
                self._connection().execute("VACUUM")
        return counts


def _plan_entry(
    batch: int, policy: str, limit: int, deterministic_only: int, plan_json: str, time_ms: float, ws: int
) -> dict[str, Any]:
    """A ``plans`` row as listed and exported (``import_data`` reads it back)."""
    return {
        "batch": batch,
        "policy": policy,
        "workspace_limit": limit,
        "deterministic_only": bool(deterministic_only),
        "micro_batches": loads_or_raw(plan_json),
        "time_ms": time_ms,
        "workspace_bytes": ws,
    }
