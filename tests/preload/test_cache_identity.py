"""The cache survives a reinstall: benchmarks are keyed on the real library's identity (version and GNU
build-id), not on where it is installed, so two copies of one library at different paths share cache rows."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from ucudnn import _paths

from .conftest import RunDriver

LAYER = ["n=16", "c=32", "k=64", "in=16,16", "query=get", "op=fwd"]
LIMIT = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "2500KiB"}


def _runs(db: Path) -> list[tuple[str, int, float]]:
    with sqlite3.connect(db) as conn:
        return sorted(conn.execute("SELECT backend_id, batch, measured_at FROM benchmark_runs"))


def test_two_copies_of_the_library_share_benchmarks(run_driver: RunDriver, host_lib: Path, tmp_path: Path) -> None:
    if not _paths.EMBEDDED_PLANNER.exists():
        pytest.fail(f"embedded planner not built at {_paths.EMBEDDED_PLANNER}")
    db = tmp_path / "shared.sqlite"
    runs = []
    for venv in ("venv-a", "venv-b"):
        # A copy of the host backend (with the BLAS beside it) as a new install would have it.
        lib_dir = tmp_path / venv / "lib"
        lib_dir.mkdir(parents=True)
        for lib in host_lib.parent.glob("lib*.so*"):
            shutil.copy2(lib, lib_dir / lib.name)
        env = LIMIT | {"UCUDNN_DATABASE": str(db), "LD_LIBRARY_PATH": str(lib_dir), "UCUDNN_LOG_LEVEL": "info"}
        got = run_driver(*LAYER, env=env)
        assert got.returncode == 0, got.stderr
        assert f"forwarding to {lib_dir / host_lib.name}" in got.stderr  # really the copy, not the original
        assert got.report["stats"]["micro_batches"] > got.report["stats"]["planned"]
        runs.append(_runs(db))
    first, second = runs
    assert first, "the first run benchmarked nothing"
    assert second == first  # the second install measured nothing again: same rows, same measurement times
    backend_ids = {backend for backend, _, _ in first}
    assert len(backend_ids) == 1
    (backend,) = backend_ids
    assert "build=id:" in backend and str(tmp_path) not in backend
