"""The SQLite cache: round trips, read-time filtering, plan validation, corrupt files, export/import."""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ucudnn import _cache_store as store_mod
from ucudnn import config
from ucudnn.cache import APPLICATION_ID, SCHEMA_VERSION, BenchmarkRow, Cache, CacheError, PlanKey, Verdict
from ucudnn.optimizer import AlgoPerf, MicroBatch, Plan

KEY = "fwd|float|x=32x64x56x56|w=64x64x3x3|pad=1,1|str=1,1|dil=1,1|g=1"
BACKEND = "Tesla V100-SXM2|cudnn 90100|cuda"
MiB = 1024**2


def perfs(b: int) -> list[AlgoPerf]:
    """Three algorithms at size b: a slow one with no workspace, a fast hungry one, a non-deterministic one."""
    return [
        AlgoPerf(b, 0, 1.0 * b, 0),
        AlgoPerf(b, 1, 0.2 * b, 1 * MiB * b),
        AlgoPerf(b, 2, 0.5 * b, 1024, deterministic=False, math_type=1),
    ]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Cache]:
    with Cache(tmp_path / "c.sqlite") as c:
        yield c


def algos(db: Cache, batch: int, **filters: Any) -> list[int]:
    """The algorithms of the benchmark stored at ``batch``, as read with ``filters`` (it must exist)."""
    rows = db.get_benchmark(KEY, BACKEND, batch, **filters)
    assert rows is not None
    return [p.algo for p in rows]


def test_benchmark_round_trip_and_file_identity(db: Cache, tmp_path: Path) -> None:
    db.put_benchmark(KEY, BACKEND, 8, perfs(8))
    assert db.get_benchmark(KEY, BACKEND, 8) == perfs(8)
    assert db.get_benchmark(KEY, BACKEND, 4) is None  # never benchmarked
    assert db.get_benchmark(KEY, "other backend", 8) is None
    assert db.get_benchmark(KEY + "|g=2", BACKEND, 8) is None
    db.close()
    raw = sqlite3.connect(tmp_path / "c.sqlite")
    assert raw.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()


def test_all_algorithms_stored_and_limit_applied_when_reading(db: Cache) -> None:
    db.put_benchmark(KEY, BACKEND, 8, perfs(8))
    assert algos(db, 8, workspace_limit_bytes=0) == [0]
    assert algos(db, 8, workspace_limit_bytes=4096) == [0, 2]
    assert algos(db, 8, workspace_limit_bytes=1 << 40) == [0, 1, 2]
    assert algos(db, 8, deterministic_only=True) == [0, 1]


def test_failed_algorithms_kept_but_not_returned_as_usable(db: Cache) -> None:
    rows: list[AlgoPerf | BenchmarkRow] = [
        *perfs(4),
        AlgoPerf(4, 3, math.inf, 0),
        BenchmarkRow(4, 4, 9, 0.1, 0, True, 0),
    ]
    db.put_benchmark(KEY, BACKEND, 4, rows)
    assert algos(db, 4) == [0, 1, 2]
    failed = {p.algo: p.time_ms for p in db.get_benchmark(KEY, BACKEND, 4, include_failed=True) or []}
    assert failed[3] == math.inf and failed[4] == math.inf
    statuses = {a["algo"]: a["status"] for a in db.export()["benchmarks"][0]["algos"]}
    assert statuses[3] == -1 and statuses[4] == 9


def test_measured_with_nothing_usable_differs_from_never_measured(db: Cache) -> None:
    db.put_benchmark(KEY, BACKEND, 2, [AlgoPerf(2, 0, math.inf, 0)])
    assert db.get_benchmark(KEY, BACKEND, 2) == []
    assert db.get_benchmarks(KEY, BACKEND, [1, 2]) == {2: []}


def test_rerun_replaces_the_whole_run(db: Cache) -> None:
    db.put_benchmark(KEY, BACKEND, 8, perfs(8))
    db.put_benchmark(KEY, BACKEND, 8, perfs(8)[:1])
    assert db.get_benchmark(KEY, BACKEND, 8) == perfs(8)[:1]


def test_rows_must_match_the_run(db: Cache) -> None:
    with pytest.raises(CacheError, match="batch 4"):
        db.put_benchmark(KEY, BACKEND, 8, perfs(4))
    with pytest.raises(CacheError, match="non-empty"):
        db.put_benchmark("", BACKEND, 8, perfs(8))


def _plan(*steps: tuple[int, int]) -> Plan:
    return Plan(tuple(MicroBatch.from_perf(perfs(b)[a]) for b, a in steps))


def test_plan_round_trip_rebuilds_micro_batches_from_benchmarks(db: Cache, tmp_path: Path) -> None:
    for b in (16, 8):
        db.put_benchmark(KEY, BACKEND, b, perfs(b))
    pk = PlanKey(KEY, BACKEND, 24, "powerOfTwo", 16 * MiB, False)
    plan = _plan((16, 1), (8, 0))
    db.put_plan(pk, plan)
    assert db.get_plan(pk) == plan
    assert db.get_plan(PlanKey(KEY, BACKEND, 24, "powerOfTwo", 32 * MiB, False)) is None
    assert db.get_plan(PlanKey(KEY, BACKEND, 24, "all", 16 * MiB, False)) is None
    assert db.get_plan(PlanKey(KEY, BACKEND, 24, "powerOfTwo", 16 * MiB, True)) is None
    # The layout the C shim reads.
    raw = sqlite3.connect(tmp_path / "c.sqlite")
    row = raw.execute("SELECT plan_json, time_ms, workspace_bytes, policy FROM plans").fetchone()
    raw.close()
    assert json.loads(row[0]) == [[16, 1, 0], [8, 0, 0]]
    assert row[1:] == (pytest.approx(plan.time_ms), 16 * MiB, "powerOfTwo")


def test_policy_aliases_share_the_canonical_row(db: Cache) -> None:
    db.put_benchmark(KEY, BACKEND, 4, perfs(4))
    db.put_plan(PlanKey(KEY, BACKEND, 8, "pow2", 0, False), _plan((4, 0), (4, 0)))
    assert db.get_plan(PlanKey(KEY, BACKEND, 8, "powerOfTwo", 0, False)) is not None
    with pytest.raises(CacheError, match="unknown batch-size policy"):
        db.get_plan(PlanKey(KEY, BACKEND, 8, "fibonacci", 0, False))


def test_plan_must_fit_its_key(db: Cache) -> None:
    with pytest.raises(CacheError, match="not batch 16"):
        db.put_plan(PlanKey(KEY, BACKEND, 16, "powerOfTwo", 1 << 30, False), _plan((8, 0)))
    with pytest.raises(CacheError, match="over the limit"):
        db.put_plan(PlanKey(KEY, BACKEND, 8, "powerOfTwo", 0, False), _plan((8, 1)))


@pytest.mark.parametrize(
    ("plan_json", "time_ms", "ws", "match"),
    [
        ("[[8, 0, 0], [4, 0, 0]]", 1.0, 0, "sum to 12, not N=16"),
        ("[[16, 0, 0], [0, 0, 0]]", 1.0, 0, "batch >= 1"),
        ("[[8, -1, 0], [8, 0, 0]]", 1.0, 0, "algo >= 0"),
        ("[[6, 0, 0], [10, 0, 0]]", 1.0, 0, "not allowed by policy powerOfTwo"),
        ("[[16, 7, 0]]", 1.0, 0, "out of range"),
        ("not json", 1.0, 0, "not JSON"),
        ("[]", 1.0, 0, "non-empty"),
        ("[[16, 0, 0]]", -1.0, 0, "time_ms"),
        ("[[16, 0, 0]]", 1.0, 1 << 40, "not within the limit"),
        ("[[16, 1, 0]]", 1.0, 0, "over the limit"),  # the benchmark row says algo 1 needs 16 MiB
        ("[[16, 2, 0]]", 1.0, 0, "did not run at b=16"),  # algo 2 was measured with math type 1 only
        ("[[16, 0, 1]]", 1.0, 0, "did not run at b=16"),  # and algo 0 with math type 0 only
    ],
)
def test_bad_plan_rows_are_ignored_and_reported(
    db: Cache, tmp_path: Path, capsys: pytest.CaptureFixture[str], plan_json: str, time_ms: float, ws: int, match: str
) -> None:
    db.put_benchmark(KEY, BACKEND, 16, perfs(16))
    raw = sqlite3.connect(tmp_path / "c.sqlite")
    raw.execute(
        "INSERT INTO plans VALUES (?, ?, 16, 'powerOfTwo', 1024, 0, ?, ?, ?, 0)", (KEY, BACKEND, plan_json, time_ms, ws)
    )
    raw.commit()
    raw.close()
    assert db.get_plan(PlanKey(KEY, BACKEND, 16, "powerOfTwo", 1024, False), algo_count=3) is None
    err = capsys.readouterr().err
    assert "ucudnn: warning: ignoring a bad cached plan" in err and match in err


def test_non_deterministic_kernel_in_deterministic_plan_is_rejected(db: Cache, tmp_path: Path) -> None:
    db.put_benchmark(KEY, BACKEND, 8, perfs(8))
    pk = PlanKey(KEY, BACKEND, 8, "undivided", 1 << 20, True)
    db.put_plan(pk, _plan((8, 0)))
    assert db.get_plan(pk) is not None
    raw = sqlite3.connect(tmp_path / "c.sqlite")
    raw.execute("UPDATE plans SET plan_json = '[[8, 2, 1]]'")
    raw.commit()
    raw.close()
    assert db.get_plan(pk) is None


def test_sql_injection_in_keys_is_data(db: Cache) -> None:
    evil = "k'); DROP TABLE plans; --\"; DROP TABLE benchmarks; --"
    db.put_benchmark(evil, evil, 2, perfs(2))
    pk = PlanKey(evil, evil, 2, "undivided", 0, False)
    db.put_plan(pk, _plan((2, 0)))
    assert db.get_benchmark(evil, evil, 2) == perfs(2)
    assert db.get_plan(pk) == _plan((2, 0))
    assert db.stats()["plans"] == 1 and db.list_kernels()[0]["key"] == evil


def test_threads_share_one_cache(db: Cache) -> None:
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for b in range(1, 21):
                db.put_benchmark(f"{KEY}|t{t}", BACKEND, b, perfs(b))
                assert db.get_benchmark(f"{KEY}|t{t}", BACKEND, b) == perfs(b)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert db.stats()["benchmark_runs"] == 80


def test_in_memory_cache() -> None:
    with Cache.in_memory() as c:
        c.put_benchmark(KEY, BACKEND, 1, perfs(1))
        assert c.get_benchmark(KEY, BACKEND, 1) == perfs(1)
        assert c.stats()["path"] == ":memory:"


# ------------------------------------------------------------------ corrupt and foreign files


def _aside(path: Path) -> list[Path]:
    return sorted(p for p in path.parent.iterdir() if ".corrupt-" in p.name)


def test_a_file_that_is_not_sqlite_is_never_touched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: renamed to F.corrupt-<time> (a user's notes2.py given as --database). Not SQLite at all: not ours."""
    path = tmp_path / "notes2.py"
    garbage = b"\x00\x01 this is not a database " * 50
    path.write_bytes(garbage)
    Path(f"{path}-wal").write_bytes(b"wal bytes")
    with pytest.raises(CacheError, match="not an SQLite database") as caught:
        Cache(path)
    assert str(path) in str(caught.value) and "left as it is" in str(caught.value)
    # The planner inside a program: memory only, said once, the file still untouched.
    with Cache(path, memory_fallback=True) as c:
        assert c.memory_only and not c.moved_aside
        c.put_benchmark(KEY, BACKEND, 1, perfs(1))
        assert c.get_benchmark(KEY, BACKEND, 1) == perfs(1)
    assert path.read_bytes() == garbage and Path(f"{path}-wal").read_bytes() == b"wal bytes"
    assert not _aside(path) and sorted(p.name for p in tmp_path.iterdir()) == ["notes2.py", "notes2.py-wal"]
    err = capsys.readouterr().err
    assert err.count("ucudnn: warning:") == 1 and str(path) in err and "plans in memory only" in err


def _foreign(path: Path, app_id: int, version: int, table: str) -> bytes:
    raw = sqlite3.connect(path)
    raw.execute(f"CREATE TABLE {table} (x)")
    raw.execute("INSERT INTO " + table + " VALUES ('precious')")
    raw.execute(f"PRAGMA application_id = {app_id}")
    raw.execute(f"PRAGMA user_version = {version}")
    raw.commit()
    raw.close()
    return path.read_bytes()


@pytest.mark.parametrize(
    ("app_id", "version", "table", "reason"),
    [
        (0, 0, "photos", "not marked as a ucudnn cache"),
        (0x12345678, 1, "plans", "another application"),
    ],
)
def test_another_applications_sqlite_file_is_never_touched(
    tmp_path: Path, app_id: int, version: int, table: str, reason: str
) -> None:
    path = tmp_path / "c.sqlite"
    before = _foreign(path, app_id, version, table)
    with pytest.raises(CacheError, match=reason):
        Cache(path)
    with Cache(path, memory_fallback=True) as c:
        assert c.memory_only and reason in c.memory_only and not c.moved_aside
    assert path.read_bytes() == before and not _aside(path)


@pytest.mark.parametrize(
    ("app_id", "version", "table", "reason"),
    [
        (APPLICATION_ID, 99, "plans", "schema version 99"),
        (APPLICATION_ID, SCHEMA_VERSION, "plans", "tables are missing"),
    ],
)
def test_an_unusable_cache_of_ours_is_moved_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], app_id: int, version: int, table: str, reason: str
) -> None:
    path = tmp_path / "c.sqlite"
    before = _foreign(path, app_id, version, table)
    with Cache(path) as c:
        assert c.stats()["benchmark_runs"] == 0
        moved = c.moved_aside[0][1]
    assert moved.read_bytes() == before
    assert reason in capsys.readouterr().err


def test_damaged_pages_are_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with Cache(path) as c:
        c.put_benchmark(KEY, BACKEND, 1, perfs(1))
    data = bytearray(path.read_bytes())
    data[100:3000] = b"\xff" * 2900
    path.write_bytes(bytes(data))
    with Cache(path) as c:
        assert c.moved_aside and c.moved_aside[0][1].read_bytes() == bytes(data)
        assert c.get_benchmark(KEY, BACKEND, 1) is None


def test_move_aside_never_overwrites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_mod, "_utc_stamp", lambda: "20250101T000000Z")
    path = tmp_path / "c.sqlite"
    damaged = []
    for i in range(3):
        with Cache(path) as c:
            c.put_benchmark(KEY, BACKEND, 1, perfs(1))
        data = bytearray(path.read_bytes())
        data[100:3000] = bytes([i]) * 2900  # damaged pages; the header still says it is ours
        path.write_bytes(bytes(data))
        damaged.append(bytes(data))
        Cache(path).close()
    names = [p.name for p in _aside(path)]
    assert names == [
        "c.sqlite.corrupt-20250101T000000Z",
        "c.sqlite.corrupt-20250101T000000Z-1",
        "c.sqlite.corrupt-20250101T000000Z-2",
    ]
    assert [(tmp_path / n).read_bytes() for n in names] == damaged


def test_a_directory_is_an_error_not_moved_aside(tmp_path: Path) -> None:
    with pytest.raises(CacheError, match="not a regular file"):
        Cache(tmp_path)
    assert not _aside(tmp_path / "x")


def test_a_good_cache_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "dir" / "c.sqlite"  # parent directories are created
    with Cache(path) as c:
        c.put_benchmark(KEY, BACKEND, 1, perfs(1))
    with Cache(path) as c:
        assert not c.moved_aside and c.get_benchmark(KEY, BACKEND, 1) == perfs(1)


# ------------------------------------------------------------------ maintenance


def _populate(c: Cache) -> None:
    for key in (KEY, KEY + "|g=2"):
        for b in (1, 2, 4):
            c.put_benchmark(key, BACKEND, b, [*perfs(b), AlgoPerf(b, 5, math.inf, 0)])
        c.put_plan(PlanKey(key, BACKEND, 4, "powerOfTwo", 8 * MiB, False), _plan((4, 1)))
    c.put_benchmark(KEY, "cpu host", 1, perfs(1))


def test_stats_and_list(db: Cache) -> None:
    _populate(db)
    s = db.stats()
    assert (s["kernels"], s["benchmark_runs"], s["benchmark_rows"], s["plans"]) == (2, 7, 27, 2)
    assert s["backends"] == {BACKEND: {"benchmark_runs": 6, "plans": 2}, "cpu host": {"benchmark_runs": 1, "plans": 0}}
    assert s["file_bytes"] > 0
    listing = db.list_kernels()
    assert [(k["key"], k["backend_id"]) for k in listing] == [
        (KEY, BACKEND),
        (KEY, "cpu host"),
        (KEY + "|g=2", BACKEND),
    ]
    assert listing[0]["batches_benchmarked"] == [1, 2, 4]
    assert listing[0]["plans"][0]["micro_batches"] == [[4, 1, 0]]


def test_export_import_round_trip_is_stable(tmp_path: Path) -> None:
    with Cache(tmp_path / "a.sqlite") as a, Cache(tmp_path / "b.sqlite") as b:
        _populate(a)
        exported = a.export()
        text = json.dumps(exported, sort_keys=True)
        assert json.dumps(a.export(), sort_keys=True) == text
        counts = b.import_data(json.loads(text))
        assert counts == {"benchmark_runs": 7, "benchmark_rows": 27, "plans": 2}
        assert json.dumps(b.export(), sort_keys=True) == text
        pk = PlanKey(KEY, BACKEND, 4, "powerOfTwo", 8 * MiB, False)
        assert b.get_plan(pk) == a.get_plan(pk) == _plan((4, 1))


def test_import_merges(db: Cache) -> None:
    db.put_benchmark("other", BACKEND, 1, perfs(1))
    with Cache.in_memory() as src:
        _populate(src)
        db.import_data(src.export())
    assert db.stats()["benchmark_runs"] == 8 and db.get_benchmark("other", BACKEND, 1) == perfs(1)


def _export_with(mutate: object) -> dict[str, object]:
    with Cache.in_memory() as c:
        _populate(c)
        data = c.export()
    mutate(data)  # type: ignore[operator]
    return data


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.update(format="sqlite"), "'format'"),
        (lambda d: d.update(version=7), "'version'"),
        (lambda d: d["benchmarks"][1].update(batch=0), r"benchmarks\[1\]: 'batch'"),
        (lambda d: d["benchmarks"][0]["algos"][2].update(time_ms=-3.0), r"benchmarks\[0\].algos\[2\]: 'time_ms'"),
        (lambda d: d["benchmarks"][0]["algos"][0].update(deterministic=1), "'deterministic'"),
        (lambda d: d["plans"][1].update(micro_batches=[[3, 1, 0]]), r"plans\[1\]: micro-batch sizes sum to 3"),
        (lambda d: d["plans"][0].update(policy="fast"), r"plans\[0\]: 'policy'"),
        (lambda d: d["plans"][0].update(workspace_bytes=10**12), r"plans\[0\]: workspace"),
    ],
)
def test_import_validates_everything_before_writing(db: Cache, mutate: object, match: str) -> None:
    with pytest.raises(CacheError, match=match):
        db.import_data(_export_with(mutate))
    assert db.stats()["benchmark_runs"] == 0 and db.stats()["plans"] == 0


def test_clear(db: Cache) -> None:
    _populate(db)
    pk = PlanKey("k", "b", 4, "powerOfTwo", 1024, False)
    db.put_verdict(Verdict(pk, ((2, 1, 0), (2, 1, 0)), ((4, 0, 0),), False, 2.0, 1.0, 3))
    db.put_fact("b", "call_cost_ms", 0.04)
    assert db.stats()["verdicts"] == 1 and db.stats()["device_facts"] == 1
    assert db.clear(plans_only=True) == {"plans": 2, "verdicts": 1}
    assert db.stats()["plans"] == 0 and db.stats()["benchmark_runs"] == 7 and db.get_fact("b", "call_cost_ms") == 0.04
    assert db.clear() == {
        "plans": 0,
        "verdicts": 0,
        "benchmark_rows": 27,
        "benchmark_runs": 7,
        "device_facts": 1,
        "benchmark_claims": 0,
    }
    assert db.stats()["kernels"] == 0 and db.get_fact("b", "call_cost_ms") is None


def test_an_older_cache_gains_the_added_tables(tmp_path: Path) -> None:
    # A cache written before verdicts and device facts existed (same schema version) keeps working: the tables
    # are added on open, nothing is moved aside.
    path = tmp_path / "old.sqlite"
    with Cache(path) as db:
        _populate(db)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE verdicts")
        conn.execute("DROP TABLE device_facts")
    conn.close()
    db = Cache(path)
    assert db.stats()["plans"] == 2 and db.stats()["verdicts"] == 0
    db.put_fact("b", "call_cost_ms", 0.5)
    assert db.get_fact("b", "call_cost_ms") == 0.5
    assert not list(tmp_path.glob("*.corrupt-*"))


def test_creating_the_caches_directory_is_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "new" / "dir" / "cache.sqlite"
    with caplog.at_level("WARNING", logger="ucudnn"):
        Cache(path).close()
        Cache(path).close()  # the directory is there now: nothing to say
    said = [r.getMessage() for r in caplog.records if "created directory" in r.getMessage()]
    assert said == [f"created directory {path.parent} for the cache cache.sqlite"], said
    assert path.is_file()


def test_the_default_caches_directory_is_created_without_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: `ucudnn: warning: created directory ...` the first time any program used the default cache."""
    monkeypatch.delenv("UCUDNN_DATABASE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    default = tmp_path / "xdg" / "ucudnn" / "cache.sqlite"
    assert config.database_path() == default
    Cache(default, memory_fallback=True).close()  # as the planner in a program opens it
    assert default.is_file() and "warning" not in capsys.readouterr().err
