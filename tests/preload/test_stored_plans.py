"""A C host whose planner cannot start plans from the SQLite cache: the plans an earlier run (with the embedded
planner) stored there, read by the shim itself and validated like a planner's reply; a bad row or a file that is
not a ucudnn cache falls through to the built-in fallback."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ucudnn import _paths
from ucudnn.cache import APPLICATION_ID

from .conftest import Run, RunDriver, assert_close

# As in test_planner_paths: under this limit the planner splits N=16 into two micro-batches of 8.
LAYER = ["n=16", "c=32", "k=64", "in=16,16", "query=get"]
LIMIT = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "2500KiB"}
LIMIT_BYTES = 2500 * 1024
ANNOUNCED = "running the plans stored in"
UNUSABLE = "not reading plans from"


@pytest.fixture
def lonely(preload_lib: Path, tmp_path: Path) -> Path:
    """A copy of libucudnn.so with no libucudnn_planner.so beside it: no planner can start."""
    path = tmp_path / "lonely" / preload_lib.name
    path.parent.mkdir()
    shutil.copy2(preload_lib, path)
    return path


def populate(run_driver: RunDriver, op: str, env: dict[str, str] | None = None) -> Run:
    """A run with the embedded planner, which stores its plans in the test's cache file."""
    if not _paths.EMBEDDED_PLANNER.exists():
        pytest.fail(f"embedded planner not built at {_paths.EMBEDDED_PLANNER}")
    first = run_driver(f"op={op}", *LAYER, env=LIMIT | (env or {}))
    assert first.returncode == 0, first.stderr
    stats = first.report["stats"]
    assert stats["planner_calls"] >= 1 and stats["fallback_plans"] == 0, stats
    return first


def copy_cache(src: Path, dst: Path) -> Path:
    """A consistent copy of a (WAL-mode) cache file, through SQLite's backup API."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()
    return dst


def steps(plan: dict[str, Any]) -> list[tuple[int, int, int]]:
    return [(m["batch"], m["algo"], m["math_type"]) for m in plan["micro_batches"]]


@pytest.mark.parametrize("op", ["fwd", "bwd_data", "bwd_filter"])
def test_stored_plans_without_planner(run_driver: RunDriver, lonely: Path, tmp_path: Path, op: str) -> None:
    first = populate(run_driver, op)
    # BackwardFilter's plan here is one micro-batch: the planner found no split that pays.
    split = op != "bwd_filter"
    assert (first.report["stats"]["micro_batches"] > first.report["stats"]["planned"]) == split
    ref = run_driver(f"op={op}", *LAYER, preload=False)
    got = run_driver(f"op={op}", *LAYER, "repeat=2", preload=lonely, env=LIMIT)
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["cache_plans"] >= 1 and stats["fallback_plans"] == 0 and stats["rejected_plans"] == 0, stats
    assert stats["planner_calls"] == 0 and (stats["micro_batches"] > stats["planned"]) == split, stats
    plan = got.report["last_plan"]
    assert plan["source"] == "cache" and steps(plan) == steps(first.report["last_plan"])
    assert plan["workspace_bytes"] <= 2500 * 1024
    assert got.stderr.count(ANNOUNCED) == 1 and str(tmp_path / "cache.sqlite") in got.stderr
    assert "built-in fallback" not in got.stderr and "ucudnn: warning: no planner could be loaded" in got.stderr
    assert_close(got.output("float"), ref.output("float"), "float")


def test_stored_plans_from_several_threads(run_driver: RunDriver, lonely: Path) -> None:
    populate(run_driver, "fwd")
    ref = run_driver("op=fwd", *LAYER, preload=False, threads=4)
    got = run_driver("op=fwd", *LAYER, "repeat=3", "handles=2", preload=lonely, env=LIMIT, threads=4)
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["cache_plans"] >= 1 and stats["fallback_plans"] == 0 and stats["rejected_plans"] == 0, stats
    assert stats["micro_batches"] > stats["planned"] and got.stderr.count(ANNOUNCED) == 1
    for t in range(4):
        assert_close(got.output("float", t), ref.output("float", t), "float")


def test_a_plan_for_a_smaller_limit_serves_a_larger_one(run_driver: RunDriver, lonely: Path) -> None:
    first = populate(run_driver, "fwd")
    ref = run_driver("op=fwd", *LAYER, preload=False)
    got = run_driver("op=fwd", *LAYER, preload=lonely, env={"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "4MiB"})
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["cache_plans"] >= 1 and stats["fallback_plans"] == 0 and stats["rejected_plans"] == 0, stats
    plan = got.report["last_plan"]
    assert plan["source"] == "cache" and plan["limit"] == 4 * 1024 * 1024
    assert steps(plan) == steps(first.report["last_plan"]) and stats["micro_batches"] > stats["planned"]
    assert_close(got.output("float"), ref.output("float"), "float")


def test_a_plan_for_a_larger_limit_is_not_used_under_a_smaller_one(
    run_driver: RunDriver, lonely: Path, tmp_path: Path
) -> None:
    populate(run_driver, "fwd")
    # Get_v7 also stored the smaller plans of the front (planned under smaller limits, usable at 2 MiB): keep only
    # the plans made under the populating run's limit, which all need more than 2 MiB.
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        conn.execute("DELETE FROM plans WHERE workspace_limit < ?", (LIMIT_BYTES,))
    conn.close()
    got = run_driver("op=fwd", *LAYER, preload=lonely, env={"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "2MiB"})
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["cache_plans"] == 0 and stats["fallback_plans"] >= 1 and stats["rejected_plans"] == 0, stats
    assert ANNOUNCED not in got.stderr and UNUSABLE not in got.stderr


def test_default_cache_path_is_shared_with_python(run_driver: RunDriver, lonely: Path, tmp_path: Path) -> None:
    # UCUDNN_DATABASE empty: both sides use $XDG_CACHE_HOME/ucudnn/cache.sqlite.
    env = {"UCUDNN_DATABASE": "", "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    populate(run_driver, "fwd", env)
    assert (tmp_path / "xdg" / "ucudnn" / "cache.sqlite").is_file()
    got = run_driver("op=fwd", *LAYER, preload=lonely, env=LIMIT | env)
    assert got.returncode == 0, got.stderr
    assert got.report["stats"]["cache_plans"] >= 1 and got.report["stats"]["fallback_plans"] == 0


def test_deterministic_rows_serve_requests_that_do_not_ask(run_driver: RunDriver, lonely: Path, tmp_path: Path) -> None:
    # Under UCUDNN_DETERMINISTIC=1 (read by the Python planner) every plan is stored as a deterministic one.
    first = populate(run_driver, "fwd", {"UCUDNN_DETERMINISTIC": "1"})
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        assert {r[0] for r in conn.execute("SELECT deterministic_only FROM plans")} == {1}
    conn.close()
    got = run_driver("op=fwd", *LAYER, preload=lonely, env=LIMIT)
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["cache_plans"] >= 1 and stats["fallback_plans"] == 0 and stats["rejected_plans"] == 0, stats
    plan = got.report["last_plan"]
    assert plan["deterministic"] is True and steps(plan) == steps(first.report["last_plan"])


# (plan_json, workspace_bytes) written over every stored plan; None keeps the stored value.
BAD_ROWS = {
    "not-json": ("[[8, 2, 0], [8, 2, 0]", None),
    "not-integers": ('[[8, 2, 0], [8, "2", 0]]', None),
    "negative": ("[[8, 2, 0], [8, -2, 0]]", None),
    "float": ("[[8, 2, 0], [8.0, 2, 0]]", None),
    "empty": ("[]", None),
    "trailing": ("[[8, 2, 0], [8, 2, 0]] x", None),
    "null": (None, None),
    "sum": ("[[8, 2, 0], [4, 2, 0]]", None),
    "too-many": ("[" + ", ".join(["[1, 2, 0]"] * 17) + "]", None),
    "algo-range": ("[[8, 2, 0], [8, 99, 0]]", None),
    "math-type": ("[[8, 2, 0], [8, 2, 7]]", None),
    "policy": ("[[3, 2, 0], [13, 2, 0]]", None),
    "huge-number": ("[[8, 2, 0], [8, 99999999999999999999, 0]]", None),
    "leading-zero": ("[[8, 2, 0], [08, 2, 0]]", None),
    "object": ('{"micro_batches": [[8, 2, 0], [8, 2, 0]]}', None),
    "workspace-column": (None, 10**12),
    # The row claims no workspace, but the real library says GEMM at N=16 needs more than the limit.
    "real-workspace": ("[[16, 2, 0]]", 0),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_bad_rows_are_rejected(run_driver: RunDriver, lonely: Path, tmp_path: Path, case: str) -> None:
    populate(run_driver, "fwd")
    bad = copy_cache(tmp_path / "cache.sqlite", tmp_path / "bad.sqlite")
    plan_json, workspace = BAD_ROWS[case]
    with sqlite3.connect(bad) as conn:
        if case == "null":
            conn.execute("UPDATE plans SET plan_json = NULL")
        elif plan_json is not None:
            conn.execute("UPDATE plans SET plan_json = ?", (plan_json,))
        if workspace is not None:
            conn.execute("UPDATE plans SET workspace_bytes = ?", (workspace,))
    conn.close()
    ref = run_driver("op=fwd", *LAYER, preload=False)
    got = run_driver("op=fwd", *LAYER, "repeat=2", preload=lonely, env=LIMIT | {"UCUDNN_DATABASE": str(bad)})
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["rejected_plans"] >= 1 and stats["cache_plans"] == 0 and stats["fallback_plans"] >= 1, stats
    assert "rejected the plan stored in" in got.stderr and got.stderr.count("built-in fallback") == 1
    plan = got.report["last_plan"]
    assert plan["source"] == "fallback" and plan["workspace_bytes"] <= 2500 * 1024
    assert_close(got.output("float"), ref.output("float"), "float")


def test_any_json_whitespace_is_accepted(run_driver: RunDriver, lonely: Path, tmp_path: Path) -> None:
    populate(run_driver, "fwd")
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        spaced = "\n[ [8,2,0] ,\t[ 8 , 2 , 0 ]\r\n]  "
        conn.execute("UPDATE plans SET plan_json = ? WHERE workspace_limit = ?", (spaced, LIMIT_BYTES))
    conn.close()
    got = run_driver("op=fwd", *LAYER, preload=lonely, env=LIMIT)
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["cache_plans"] >= 1 and stats["rejected_plans"] == 0 and stats["fallback_plans"] == 0, stats
    assert steps(got.report["last_plan"]) == [(8, 2, 0), (8, 2, 0)]


def _sqlite(*statements: str) -> Callable[[Path], None]:
    """A maker of an SQLite file holding what ``statements`` write."""

    def make(path: Path) -> None:
        with sqlite3.connect(path) as conn:
            for statement in statements:
                conn.execute(statement)
        conn.close()

    return make


FOREIGN: dict[str, Callable[[Path], Any]] = {
    "text": lambda p: p.write_text("this is not a database\n" * 200),
    "truncated-sqlite": lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\x10\x00\x01\x01" + b"\xff" * 200),
    "foreign-sqlite": _sqlite(
        "CREATE TABLE plans (key TEXT, plan_json TEXT)", "INSERT INTO plans VALUES ('x', '[[16, 0, 0]]')"
    ),
    "other-version": _sqlite(
        f"PRAGMA application_id = {APPLICATION_ID}", "PRAGMA user_version = 99", "CREATE TABLE plans (key TEXT)"
    ),
    "other-application": _sqlite("PRAGMA application_id = 1234", "CREATE TABLE t (x)"),
    "no-plans-table": _sqlite(
        f"PRAGMA application_id = {APPLICATION_ID}", "PRAGMA user_version = 1", "CREATE TABLE benchmarks (key TEXT)"
    ),
    "directory": lambda p: p.mkdir(),
}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_a_file_that_is_not_a_ucudnn_cache(run_driver: RunDriver, lonely: Path, tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"{kind}.db"
    FOREIGN[kind](path)
    before = path.read_bytes() if path.is_file() else b""
    ref = run_driver("op=fwd", *LAYER, preload=False)
    got = run_driver("op=fwd", *LAYER, "repeat=2", preload=lonely, env=LIMIT | {"UCUDNN_DATABASE": str(path)})
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["cache_plans"] == 0 and stats["fallback_plans"] >= 1 and stats["rejected_plans"] == 0, stats
    assert got.stderr.count(UNUSABLE) == 1 and str(path) in got.stderr
    assert got.stderr.count("built-in fallback") == 1
    assert path.is_dir() or path.read_bytes() == before  # read-only: the file is left exactly as it was
    assert_close(got.output("float"), ref.output("float"), "float")


@pytest.mark.parametrize("kind", ["missing", "empty-file"])
def test_no_cache_is_quiet(run_driver: RunDriver, lonely: Path, tmp_path: Path, kind: str) -> None:
    path = tmp_path / "nothing.db"
    if kind == "empty-file":
        path.write_bytes(b"")
    got = run_driver("op=fwd", *LAYER, preload=lonely, env=LIMIT | {"UCUDNN_DATABASE": str(path)})
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["cache_plans"] == 0 and stats["fallback_plans"] >= 1 and stats["rejected_plans"] == 0, stats
    assert UNUSABLE not in got.stderr and ANNOUNCED not in got.stderr
    assert path.exists() == (kind != "missing")  # never created
