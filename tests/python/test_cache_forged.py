"""Cache files the planner cannot use, forged with SQLite directly: a file of ours with unknown columns, a plan
nested 100,000 brackets deep, text where numbers belong. Each is moved aside like a corrupt file (never deleted)
and a fresh cache is used; rows written by something else after opening never raise past their reader; `ucudnn
db` answers one line, never a traceback; a cache file this process may not write is read and used."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ucudnn.cache import Cache, CacheError, PlanKey
from ucudnn.optimizer import AlgoPerf, MicroBatch, Plan
from ucudnn.planner import Planner

KEY = "fwd|float|x=?x8x8x8|w=8x8x3x3|g=1"
BACKEND = "device=host;cudnn=1;build=id:00"
DEEP = "[" * 100_000 + "]" * 100_000


def _good(path: Path) -> None:
    with Cache(path) as c:
        for b in (1, 2, 4):
            c.put_benchmark(KEY, BACKEND, b, [AlgoPerf(b, 0, 1.0 * b, 0, True), AlgoPerf(b, 1, 0.1 * b, 64 * b, True)])
        c.put_plan(PlanKey(KEY, BACKEND, 4, "powerOfTwo", 256, False), Plan((MicroBatch(4, 1, 0.4, 256, True),)))


def _sql(*statements: str, params: tuple[object, ...] = ()) -> Callable[[sqlite3.Connection], None]:
    def run(conn: sqlite3.Connection) -> None:
        for statement in statements:
            conn.execute(statement, params if "?" in statement else ())

    return run


FORGERIES = {
    "unknown column": _sql("ALTER TABLE plans ADD COLUMN priority INTEGER"),
    "unknown column in an added table": _sql("ALTER TABLE verdicts ADD COLUMN note TEXT"),
    "plan nested 100,000 deep": _sql("UPDATE plans SET plan_json = ?", params=(DEEP,)),
    "verdict nested 100,000 deep": _sql(
        "INSERT INTO verdicts VALUES ('k', 'b', 4, 'powerOfTwo', 0, 0, '[[4, 1, 0]]', ?, 1, 1.0, 2.0, 3, 0)",
        params=(DEEP,),
    ),
    "text for a time": _sql("UPDATE benchmarks SET time_ms = 'fast' WHERE algo = 1"),
    "text for a batch": _sql("UPDATE benchmark_runs SET batch = 'four' WHERE batch = 4"),
    "text for a limit": _sql("UPDATE plans SET workspace_limit = 'lots'"),
    "real for an algorithm": _sql("UPDATE benchmarks SET algo = 0.5 WHERE algo = 1 AND batch = 1"),
    "NULL for a plan": _sql("UPDATE plans SET plan_json = NULL"),
    "blob for a fact": _sql("INSERT INTO device_facts VALUES ('b', 'call_cost_ms', x'00', 0)"),
}


@pytest.fixture(params=sorted(FORGERIES))
def forged(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / "cache.sqlite"
    _good(path)
    with sqlite3.connect(path) as conn:
        FORGERIES[request.param](conn)
    conn.close()
    return path


def test_a_forged_cache_is_moved_aside_and_a_fresh_one_used(forged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = forged.read_bytes()
    with Cache(forged) as cache:
        ((original, aside),) = cache.moved_aside
        assert original == forged and aside.exists() and aside.read_bytes() == before  # kept, never deleted
        assert cache.stats()["benchmark_runs"] == 0
        result = Planner(cache).plan(
            key=KEY, backend_id=BACKEND, batch=4, workspace_limit_bytes=256, policy="powerOfTwo",
            deterministic_only=False, algo_count=2,
            benchmark=lambda b: [AlgoPerf(b, 0, 1.0 * b, 0, True), AlgoPerf(b, 1, 0.1 * b, 64 * b, True)],
        )  # fmt: skip
        assert result.plan is not None
    err = capsys.readouterr().err
    assert err.count("moved it aside") == 1 and str(aside) in err


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.mark.parametrize("action", ["stats", "list", "export"])
def test_ucudnn_db_on_a_forged_cache_changes_nothing_and_says_so_in_one_line(forged: Path, action: str) -> None:
    """Read-only commands never rename or change a file (was: the cache moved aside by `ucudnn db stats`)."""
    before = _files(forged.parent)
    proc = subprocess.run(
        [sys.executable, "-m", "ucudnn.cli", "db", "--database", str(forged), action],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert str(forged) in proc.stderr and "left as it is" in proc.stderr, proc.stderr
    assert _files(forged.parent) == before


@pytest.mark.parametrize("action", ["stats", "list", "export"])
def test_read_only_commands_change_no_file_of_a_good_cache(tmp_path: Path, action: str) -> None:
    path = tmp_path / "cache.sqlite"
    _good(path)
    raw = sqlite3.connect(path)  # a cache left in rollback-journal mode, e.g. copied without its -wal
    raw.execute("PRAGMA journal_mode = DELETE")
    raw.close()
    before = _files(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "ucudnn.cli", "db", "--database", str(path), action],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert _files(tmp_path) == before  # no WAL switch, no -wal/-shm, no lock file


@pytest.mark.parametrize("action", ["stats", "list", "export", "clear", "import"])
def test_a_file_that_is_not_sqlite_is_never_touched_by_ucudnn_db(tmp_path: Path, action: str) -> None:
    notes = tmp_path / "notes2.py"
    notes.write_text("print('my notes')\n")
    export = tmp_path / "export.json"
    export.write_text('{"format": "ucudnn-cache", "version": 1, "benchmarks": [], "plans": []}')
    extra = {"clear": ["--yes"], "import": [str(export)]}.get(action, [])
    before = _files(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "ucudnn.cli", "db", action, "--database", str(notes), *extra],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert str(notes) in proc.stderr and "not an SQLite database" in proc.stderr, proc.stderr
    assert _files(tmp_path) == before


def test_a_row_whose_text_is_not_utf8_is_skipped_not_the_whole_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: sqlite3 raised at opening ("Could not decode to UTF-8"), so the planner planned in memory for the whole
    process; and `ucudnn db list/export` failed."""
    path = tmp_path / "cache.sqlite"
    _good(path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO plans VALUES (?, ?, 2, 'powerOfTwo', 256, 0, CAST(X'5bff5d' AS TEXT), 1, 0, 0)",
                     (KEY, BACKEND))  # fmt: skip
        conn.execute("INSERT INTO benchmark_runs VALUES (CAST(X'ff41' AS TEXT), ?, 1, 0)", (BACKEND,))
        conn.execute(
            "INSERT INTO verdicts VALUES (?, ?, 4, 'powerOfTwo', 256, 0, '[[4, 1, 0]]', CAST(X'ff' AS TEXT), 1, 1, 2, "
            "3, 0)", (KEY, BACKEND),
        )  # fmt: skip
    conn.close()
    with Cache(path, memory_fallback=True) as cache:
        assert cache.memory_only is None and not cache.moved_aside
        assert cache.get_plan(PlanKey(KEY, BACKEND, 4, "powerOfTwo", 256, False), algo_count=2) is not None
        assert cache.get_plan(PlanKey(KEY, BACKEND, 2, "powerOfTwo", 256, False), algo_count=2) is None
        assert cache.get_verdict(PlanKey(KEY, BACKEND, 4, "powerOfTwo", 256, False), [(4, 1, 0)]) is None
        assert [k["key"] for k in cache.list_kernels()] == [KEY]
        assert len(cache.export()["plans"]) == 1
    assert "not UTF-8" in capsys.readouterr().err
    for action in ("list", "export"):
        proc = subprocess.run(
            [sys.executable, "-m", "ucudnn.cli", "db", action, "--database", str(path)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_rows_forged_after_opening_never_raise_past_their_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cache.sqlite"
    _good(path)
    cache = Cache(path)
    with sqlite3.connect(path) as conn:  # another writer, after the file was checked
        conn.execute("UPDATE benchmarks SET time_ms = 'fast' WHERE algo = 1 AND batch = 2")
        conn.execute("UPDATE benchmark_runs SET batch = 'four' WHERE batch = 4")
        conn.execute("UPDATE plans SET plan_json = ?", (DEEP,))
        conn.execute(
            "INSERT INTO verdicts VALUES (?, ?, 4, 'powerOfTwo', 256, 0, '[[4, 1, 0]]', ?, 1, 1.0, 2.0, 3, 0)",
            (KEY, BACKEND, DEEP),
        )
    conn.close()
    got = cache.get_benchmarks(KEY, BACKEND, [1, 2, 4])
    assert sorted(got) == [1, 2] and [p.algo for p in got[2]] == [0]
    pk = PlanKey(KEY, BACKEND, 4, "powerOfTwo", 256, False)
    assert cache.get_plan(pk, algo_count=2) is None
    assert cache.get_verdict(pk, [(4, 1, 0)]) is None
    assert cache.list_kernels() and cache.export()["plans"]
    err = capsys.readouterr().err
    assert "malformed benchmark row" in err and "ignoring a bad cached plan" in err and "bad verdict" in err
    cache.close()


def test_ucudnn_db_answers_one_line_for_any_failure(tmp_path: Path) -> None:
    # An import file nested too deeply for the JSON parser, and a cache path that is a directory.
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    for args in (["import", str(deep)], ["stats"]):
        database = tmp_path if args == ["stats"] else tmp_path / "c.sqlite"
        proc = subprocess.run(
            [sys.executable, "-m", "ucudnn.cli", "db", "--database", str(database), *args],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


@pytest.fixture
def read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A good cache file this process may not write (as root, permissions do not bind: the check is faked)."""
    path = tmp_path / "ro" / "cache.sqlite"
    path.parent.mkdir()
    _good(path)
    path.chmod(0o444)
    path.parent.chmod(0o555)
    if os.geteuid() == 0:
        real_access = os.access

        def access(p: object, mode: int, **kw: object) -> bool:
            if mode & os.W_OK and Path(str(p)).resolve() in (path.resolve(), path.parent.resolve()):
                return False
            return real_access(p, mode, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "access", access)
    yield path
    path.parent.chmod(0o755)


def test_a_read_only_cache_is_read_and_used(read_only: Path) -> None:
    before = read_only.read_bytes()
    pk = PlanKey(KEY, BACKEND, 4, "powerOfTwo", 256, False)
    with Cache(read_only) as cache:  # as `ucudnn db` opens it: read, writes refused with a clear error
        assert cache.read_only and cache.stats()["plans"] == 1
        assert cache.get_plan(pk, algo_count=2) is not None
        with pytest.raises(CacheError, match="read-only"):
            cache.put_fact(BACKEND, "call_cost_ms", 0.1)
    with Cache(read_only, memory_fallback=True) as cache:  # as the planner in a host opens it
        assert cache.memory_only and cache.get_plan(pk, algo_count=2) is not None
        cache.put_fact(BACKEND, "call_cost_ms", 0.1)  # kept in memory
        assert cache.get_fact(BACKEND, "call_cost_ms") == 0.1
    assert read_only.read_bytes() == before and not cache.moved_aside


def test_errors_name_the_path_the_user_gave_not_the_lock_file(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    (tmp_path / "cache.sqlite.lock").mkdir()  # the internal lock file cannot be opened
    with pytest.raises(CacheError) as caught:
        Cache(path)
    assert str(path) in str(caught.value) and ".lock" not in str(caught.value)
    proc = subprocess.run(
        [sys.executable, "-m", "ucudnn.cli", "db", "--database", str(path), "stats"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and ".lock" not in proc.stderr and str(path) in proc.stderr


def test_ucudnn_plan_on_a_table_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    proc = subprocess.run(
        [sys.executable, "-m", "ucudnn.cli", "plan", "--table", str(deep), "--batch", "4", "--workspace", "1MiB"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert "nested too deeply" in proc.stderr
