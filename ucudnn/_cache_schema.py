"""The cache file's format: its schema, and how a file is told to be a good ucudnn cache, an empty database, an
unusable cache of ours (moved aside by the store) or something that is not ours at all (never touched).

The table layout is what :mod:`ucudnn.cache` reads and writes and what the C shim may read directly; it changes only
with ``SCHEMA_VERSION`` (``PRAGMA user_version``).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from ucudnn._cache_rows import SCHEMA_VERSION

# PRAGMA application_id: "ucDN" in ASCII, so `file` and other tools can tell our databases apart.
APPLICATION_ID = 0x7563444E
_SQLITE_MAGIC = b"SQLite format 3\x00"

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
ADDED = (
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
    # Benchmarks in progress (see ucudnn._cache_claims): which process is measuring a kernel at a size, so that the
    # ranks planning the same kernel at once share its sizes instead of each measuring all of them.
    """CREATE TABLE IF NOT EXISTS benchmark_claims (
        key TEXT NOT NULL,
        backend_id TEXT NOT NULL,
        batch INTEGER NOT NULL,
        owner TEXT NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        claimed_at REAL NOT NULL,
        PRIMARY KEY (key, backend_id, batch)
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
        for statement in (*_SCHEMA, *ADDED):
            conn.execute(statement)
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: [(r[1], str(r[2]).upper()) for r in conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    finally:
        conn.close()


_COLUMNS = _reference_columns()


def check_contents(conn: sqlite3.Connection, tables: set[str]) -> None:
    """Raise Unusable unless every table of ours has exactly our columns, every value its declared type, and
    every stored plan the shape of one (a file of ours the planner could not use is moved aside like a corrupt
    one, instead of failing reads later)."""
    for table in sorted(tables & _COLUMNS.keys()):
        expected = _COLUMNS[table]
        found = [(r[1], str(r[2]).upper()) for r in conn.execute(f"PRAGMA table_info({table})")]
        if sorted(found) != sorted(expected):
            extra = sorted({c for c, _ in found} - {c for c, _ in expected})
            what = f"unknown columns {', '.join(extra)}" if extra else "columns missing or of another type"
            raise Unusable(f"its table {table} has {what}")
        for column, declared in expected:
            types = _SQL_TYPES[declared] + (("null",) if (table, column) in _NULLABLE else ())
            marks = ", ".join("?" * len(types))
            bad = conn.execute(f"SELECT 1 FROM {table} WHERE typeof({column}) NOT IN ({marks}) LIMIT 1", types)
            if bad.fetchone():
                raise Unusable(f"its column {table}.{column} holds values that are not {declared.lower()}")
    for table, column in _STEPS_COLUMNS:
        if table in tables:
            for (text,) in conn.execute(f"SELECT {column} FROM {table}"):
                if undecodable(text):
                    continue  # a forged row: its reader skips it, as any row whose text is not UTF-8
                if not _STEPS_RE.fullmatch(text):
                    raise Unusable(
                        f"its column {table}.{column} holds {text[:40]!r}, not [[batch, algo, math_type], ...]"
                    )


class Unusable(Exception):
    """The file at the cache path is a ucudnn cache that cannot be used (damaged, unusable); the message says why."""


class Foreign(Exception):
    """The file at the cache path is not a ucudnn cache at all; the message says why. It is never touched."""


def undecodable(value: object) -> bool:
    """True for text read from a column whose bytes were not UTF-8 (decoded with surrogateescape)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def decode_text(raw: bytes) -> str:
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


def marked_ours(path: Path) -> bool:
    """True when the file's header carries our application id (readable or not by SQLite)."""
    try:
        with path.open("rb") as f:
            head = f.read(100)
    except OSError:
        return False
    return head.startswith(_SQLITE_MAGIC) and len(head) >= 72 and int.from_bytes(head[68:72], "big") == APPLICATION_ID


def classify(conn: sqlite3.Connection) -> bool:
    """True for an empty database, False for a good ucudnn cache; raises Foreign for another application's database
    or an unmarked one, Unusable for a cache of ours that cannot be used."""
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if app_id == 0 and version == 0 and not tables:
        return True
    if app_id != APPLICATION_ID:
        raise Foreign(
            f"it is an SQLite database of another application (application_id {app_id:#x})"
            if app_id
            else "it is an SQLite database that is not marked as a ucudnn cache (PRAGMA application_id 0)"
        )
    if version != SCHEMA_VERSION:
        raise Unusable(f"its schema version {version} is not the supported {SCHEMA_VERSION}")
    if not _TABLES <= tables:
        raise Unusable(f"tables are missing: {', '.join(sorted(_TABLES - tables))}")
    check_contents(conn, tables)
    check = conn.execute("PRAGMA quick_check").fetchone()[0]
    if check != "ok":
        raise Unusable(f"its integrity check failed ({check})")
    return False


def init_schema(conn: sqlite3.Connection) -> None:
    """Create our tables and marks in an empty database (in one transaction; nothing if another made them)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process (or, in memory, nobody) may have created it since we looked.
        if classify(conn):
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
