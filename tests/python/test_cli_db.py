"""``ucudnn db`` as a user runs it: a separate process, exit statuses, one-line errors."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ucudnn._cache_fs import shared_across_hosts
from ucudnn.cache import UNALLOCATED, BenchmarkRow, Cache, PlanKey
from ucudnn.optimizer import AlgoPerf, MicroBatch, Plan

KEY = "bwdf|half|x=?x256x14x14|w=256x256x3x3|g=1"


def ucudnn(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import sys; from ucudnn.cli import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "c.sqlite"
    with Cache(path) as c:
        for b in (1, 2, 4):
            c.put_benchmark(KEY, "gpu", b, [AlgoPerf(b, 0, 1.0 * b, 0), AlgoPerf(b, 1, 0.1 * b, 1024 * b)])
        c.put_plan(PlanKey(KEY, "gpu", 4, "powerOfTwo", 4096, False), Plan((MicroBatch(4, 1, 0.4, 4096),)))
    return path


def test_stats_list_export_import_clear(db: Path, tmp_path: Path) -> None:
    stats = ucudnn("db", "--database", str(db), "stats", "--json")
    assert stats.returncode == 0, stats.stderr
    counts = json.loads(stats.stdout)
    assert (counts["kernels"], counts["benchmark_runs"], counts["benchmark_rows"], counts["plans"]) == (1, 3, 6, 1)
    assert counts["backends"] == {"gpu": {"benchmark_runs": 3, "plans": 1}}

    listing = ucudnn("db", "--database", str(db), "list")
    assert listing.returncode == 0 and "[0] " in listing.stdout and "1 x 4 ALGO_1" in listing.stdout

    exported = ucudnn("db", "--database", str(db), "export")
    assert exported.returncode == 0 and json.loads(exported.stdout)["format"] == "ucudnn-cache"
    # Into a new file through the environment's UCUDNN_DATABASE, from stdin.
    other = tmp_path / "other.sqlite"
    imported = ucudnn("db", "import", "-", stdin=exported.stdout, env={"UCUDNN_DATABASE": str(other)})
    assert imported.returncode == 0, imported.stderr
    assert "3 benchmark runs, 6 benchmark rows, 1 plans" in imported.stdout
    out = tmp_path / "again.json"
    assert ucudnn("db", "--database", str(other), "export", str(out)).returncode == 0
    assert json.loads(out.read_text()) == json.loads(exported.stdout)

    refused = ucudnn("db", "--database", str(db), "clear", stdin="")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    cleared = ucudnn("db", "--database", str(db), "clear", "--plans-only", "--yes")
    assert cleared.returncode == 0 and "1 plans" in cleared.stdout
    with Cache(db) as c:
        assert c.stats()["plans"] == 0 and c.stats()["benchmark_runs"] == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ('{"format": "ucudnn-cache", "version": 1, "plans": [{"key": 3}]}', "plans[0]: 'key'"),
        ('["a list"]', "top level must be a JSON object"),
    ],
)
def test_bad_import_is_one_line_and_status_2(db: Path, tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    result = ucudnn("db", "--database", str(db), "import", str(bad))
    assert result.returncode == 2
    assert result.stderr.startswith("ucudnn db: ") and message in result.stderr
    assert result.stderr.count("\n") == 1


def test_missing_import_file(tmp_path: Path) -> None:
    result = ucudnn("db", "--database", str(tmp_path / "c.sqlite"), "import", str(tmp_path / "nope.json"))
    assert result.returncode == 2 and "cannot read" in result.stderr and "nope.json" in result.stderr
    assert not (tmp_path / "c.sqlite").exists()  # a failed import creates nothing


def test_export_perf_table_feeds_ucudnn_plan(db: Path, tmp_path: Path) -> None:
    table = tmp_path / "table.json"
    r = ucudnn("db", "--database", str(db), "export", "--perf-table", str(table))
    assert r.returncode == 0, r.stderr
    doc = json.loads(table.read_text())
    [kernel] = doc["kernels"]
    assert kernel["name"] == KEY and kernel["batch"] == 4  # the largest size measured
    measured = sorted((m["batch"], m["algo"]) for m in kernel["measurements"])
    assert measured == [(b, a) for b in (1, 2, 4) for a in (0, 1)]
    # Algo 1 costs 0.1 ms and 1 KiB per sample, algo 0 1 ms and nothing. Under 2 KiB, 2 x b2 and 4 x b1 of
    # algo 1 both take 0.4 ms; the tie goes to less workspace.
    r = ucudnn("plan", "--table", str(table), "--workspace", "2KiB", "--json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["workspace_bytes"] == 1024 and plan["time_ms"] == pytest.approx(0.4)
    assert [(m["batch"], m["algo"]) for m in plan["micro_batches"]] == [(1, 1)] * 4


def test_export_perf_table_names_runs_short_of_memory(db: Path, tmp_path: Path) -> None:
    with Cache(db) as c:  # at b = 8 the search could not give algo 1 its workspace
        c.put_benchmark(
            KEY, "gpu", 8, [AlgoPerf(8, 0, 8.0, 0), BenchmarkRow(8, 1, UNALLOCATED, math.inf, 8192, True, 0)]
        )
    table = tmp_path / "table.json"
    r = ucudnn("db", "--database", str(db), "export", "--perf-table", str(table))
    assert r.returncode == 0, r.stderr
    assert "1 benchmark run(s) could not allocate memory for some algorithms" in r.stderr and "b=8" in r.stderr
    [kernel] = json.loads(table.read_text())["kernels"]
    assert (8, 1) not in {(m["batch"], m["algo"]) for m in kernel["measurements"]}
    assert "could not allocate" not in ucudnn("db", "--database", str(db), "export").stderr


def test_export_perf_table_needs_one_backend(db: Path, tmp_path: Path) -> None:
    with Cache(db) as c:
        c.put_benchmark(KEY, "other-gpu", 4, [AlgoPerf(4, 0, 1.0, 0)])
    r = ucudnn("db", "--database", str(db), "export", "--perf-table")
    assert r.returncode == 2 and "--backend-id" in r.stderr and "gpu, other-gpu" in r.stderr
    r = ucudnn("db", "--database", str(db), "export", "--perf-table", "--backend-id", "other-gpu", "--batch", "8")
    assert r.returncode == 0, r.stderr
    [kernel] = json.loads(r.stdout)["kernels"]
    assert kernel["batch"] == 8 and len(kernel["measurements"]) == 1
    r = ucudnn("db", "--database", str(db), "export", "--batch", "8")
    assert r.returncode == 2 and "--perf-table" in r.stderr


def test_database_goes_before_or_after_the_action(db: Path) -> None:
    before = ucudnn("db", "--database", str(db), "stats", "--json")
    after = ucudnn("db", "stats", "--database", str(db), "--json")
    assert before.returncode == after.returncode == 0, before.stderr + after.stderr
    assert json.loads(before.stdout) == json.loads(after.stdout)
    assert ucudnn("db", "list", "--database", str(db)).returncode == 0


@pytest.mark.parametrize("action", [["stats"], ["list"], ["export"], ["clear", "--yes"]])
def test_read_only_actions_never_create_a_cache(tmp_path: Path, action: list[str]) -> None:
    typo = tmp_path / "typo" / "x.sqlite"
    r = ucudnn("db", "--database", str(typo), *action)
    assert (
        r.returncode == 2
        and r.stderr
        == f"ucudnn db: no cache at {typo} (its directory does not exist either; "
        "--database or UCUDNN_DATABASE names the file)\n"
    )
    assert not typo.parent.exists()
    (tmp_path / "typo").mkdir()
    r = ucudnn("db", *action, "--database", str(typo))
    assert r.returncode == 2 and str(typo) in r.stderr and "nothing has been cached there" in r.stderr
    assert list((tmp_path / "typo").iterdir()) == []


def test_import_creates_the_directory_and_says_so(db: Path, tmp_path: Path) -> None:
    exported = ucudnn("db", "--database", str(db), "export")
    target = tmp_path / "new" / "dir" / "c.sqlite"
    r = ucudnn("db", "import", "-", "--database", str(target), stdin=exported.stdout)
    assert r.returncode == 0, r.stderr
    assert r.stderr == f"ucudnn db: created directory {target.parent}\n" and target.is_file()
    again = ucudnn("db", "import", "-", "--database", str(target), stdin=exported.stdout)
    assert again.returncode == 0 and again.stderr == ""


def test_list_fits_in_120_columns_with_short_names(tmp_path: Path) -> None:
    key = (
        "op=fwd;dtype=float;x=32,16,16/*,256,16,1;w=float,nchw,64,32,5,5;y=64,16,16/*,256,16,1;pad=2,2;"
        "stride=1,1;dilation=1,1;mode=cross_correlation;compute=float;groups=1;math=default"
    )
    path = tmp_path / "c.sqlite"
    with Cache(path) as c:
        c.put_benchmark(key, "host", 32, [AlgoPerf(32, 2, 1.0, 1 << 20), AlgoPerf(32, 4, 2.0, 0)])
        steps = (*[MicroBatch(8, 2, 0.2, 1 << 18)] * 3, MicroBatch(4, 4, 0.1, 0), MicroBatch(4, 4, 0.1, 0))
        c.put_plan(PlanKey(key, "host", 32, "powerOfTwo", 1 << 20, False), Plan(steps))
    r = ucudnn("db", "list", "--database", str(path))
    assert r.returncode == 0, r.stderr
    assert "[0] fwd x32x16x16 w64x32x5x5 pad2,2" in r.stdout and key not in r.stdout
    assert "3 x 8 GEMM + 2 x 4 FFT" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 120


def test_stats_say_benchmarks_in_progress(db: Path) -> None:
    plain = ucudnn("db", "--database", str(db), "stats")
    assert plain.returncode == 0 and "in progress" not in plain.stdout
    with Cache(db) as c:
        c.claim_benchmark(KEY, "gpu", 8, seen=None, stale_after_s=60)  # a rank measuring b=8 right now
    busy = ucudnn("db", "--database", str(db), "stats")
    assert busy.returncode == 0 and "in progress:     1 benchmark(s) claimed" in busy.stdout
    assert "void claims" not in busy.stdout
    # A claim whose process was killed while it measured (no such pid) and one held past the bound are void: not
    # in progress, counted apart.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with Cache(db) as c:
        c.claim_benchmark(KEY, "gpu", 16, seen=None, stale_after_s=60)
        c.claim_benchmark(KEY, "gpu", 32, seen=None, stale_after_s=60)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE benchmark_claims SET pid = ? WHERE batch = 16", (int(dead.stdout),))
        conn.execute("UPDATE benchmark_claims SET claimed_at = claimed_at - 120 WHERE batch = 32")
    conn.close()
    mixed = ucudnn("db", "--database", str(db), "stats")
    assert mixed.returncode == 0, mixed.stderr
    assert "in progress:     1 benchmark(s) claimed" in mixed.stdout and "void claims:     2 (" in mixed.stdout
    as_json = json.loads(ucudnn("db", "--database", str(db), "stats", "--json").stdout)
    assert (as_json["benchmark_claims"], as_json["void_claims"]) == (3, 2)
    # The bound is UCUDNN_BENCHMARK_WAIT's: under a longer one the old claim binds again.
    longer = ucudnn("db", "--database", str(db), "stats", env={"UCUDNN_BENCHMARK_WAIT": "600"})
    assert "in progress:     2 benchmark(s) claimed" in longer.stdout and "void claims:     1 (" in longer.stdout
    # Clearing the plans keeps the claims; clearing everything drops them too.
    assert "claims" not in ucudnn("db", "--database", str(db), "clear", "--plans-only", "--yes").stdout
    cleared = ucudnn("db", "--database", str(db), "clear", "--yes")
    assert cleared.returncode == 0 and "3 benchmark claims" in cleared.stdout, cleared.stdout
    assert "in progress" not in ucudnn("db", "--database", str(db), "stats").stdout


def test_stats_say_how_processes_share_the_file(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The fixture's cache was written on a local file system: WAL. Opened alone with the rollback journal asked
    # for (as on a file system other hosts mount), the file changes mode, and `db stats` reads it from the file.
    wal = ucudnn("db", "--database", str(db), "stats", "--json")
    assert wal.returncode == 0 and json.loads(wal.stdout)["journal"] == "wal", wal.stderr
    assert json.loads(wal.stdout)["file_system"] not in (None, "")
    assert "sharing:         write-ahead log (" in ucudnn("db", "--database", str(db), "stats").stdout
    with monkeypatch.context() as m:
        m.setenv("UCUDNN_DATABASE_JOURNAL", "delete")
        with Cache(db) as c:
            c.put_benchmark(KEY, "gpu", 8, [AlgoPerf(8, 0, 8.0, 0)])
    delete = ucudnn("db", "--database", str(db), "stats")  # a reader, under the default (auto), changes nothing
    assert delete.returncode == 0 and "sharing:         rollback journal and file locks (" in delete.stdout
    fs = json.loads(ucudnn("db", "--database", str(db), "stats", "--json").stdout)
    assert fs["journal"] == "delete"
    # The line says who may share the file from where it lies, not from its mode alone.
    who = "processes on several hosts may share it" if shared_across_hosts(fs["file_system"]) else "on this host;"
    assert who in delete.stdout, delete.stdout
