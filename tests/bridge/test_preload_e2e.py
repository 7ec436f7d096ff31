"""End to end with the real preload library and the host backend (no GPU): Python and C hosts plan through
ucudnn's Python planner and micro-batch, with outputs equal to the undivided run.

The layer: N = 16, C = K = 32, 32 x 32, 3 x 3, pad 1, float32. Under the modelled host timings
(UCUDNN_HOST_TIMING=model) the fastest forward algorithms need about 1 MiB of workspace per sample, so a 5 MiB
limit makes micro-batches of 4 beat every algorithm that fits undivided. Tolerance: float32 results of different
algorithms and of a split filter-gradient sum agree to rtol 1e-4 with atol 1e-4 * max|reference|; a passed-through
call must match exactly.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._env import project_pythonpath
from tests._start import start_together
from ucudnn import _paths

from .conftest import C_DIR, HERE, clean_env, compile_c, run_cmd

SHAPE = ["16", "32", "32", "32", "32", "3", "3", "1"]
LIMIT = str(5 * 1024 * 1024)
OUTPUTS = ("y", "dx", "dw")


@dataclass(frozen=True)
class Framework:
    fakefw: Path  # libfakefw.so, DT_NEEDED libcudnn.so.9 (the host backend)
    conv_host: Path  # a C program linked to libfakefw.so


@pytest.fixture(scope="module")
def framework(tmp_path_factory: pytest.TempPathFactory) -> Framework:
    for artifact in (_paths.PRELOAD, _paths.HOST_CUDNN):
        if not artifact.exists():
            pytest.fail(f"{artifact.name} is not built")
    out = tmp_path_factory.mktemp("fakefw")
    lib_dir = _paths.LIB_DIR
    fakefw = out / "libfakefw.so"
    compile_c(
        [
            "-fPIC",
            "-shared",
            "-o",
            str(fakefw),
            str(C_DIR / "fakefw.c"),
            f"-L{lib_dir}",
            "-l:libcudnn.so.9",
            f"-Wl,-rpath,{lib_dir}",
        ]
    )
    host = out / "conv_host"
    compile_c(["-o", str(host), str(C_DIR / "conv_host.c"), f"-L{out}", "-lfakefw", f"-Wl,-rpath,{out}"])
    return Framework(fakefw, host)


def env_for(tmp: Path, *, preload: bool, db: Path | None = None, tag: str = "") -> dict[str, str]:
    extra = {"UCUDNN_HOST_TIMING": "model"}
    if preload:
        extra |= {
            "LD_PRELOAD": str(_paths.PRELOAD),
            "UCUDNN_DEFAULT_WORKSPACE_LIMIT": LIMIT,
            "UCUDNN_DATABASE": str(db or tmp / "cache.sqlite"),
            "UCUDNN_STATS_FILE": str(tmp / f"stats{tag}.json"),
        }
    return clean_env(extra)


def python_host(fw: Framework, prefix: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(HERE / "fw_host.py"), str(fw.fakefw), str(prefix), *SHAPE, *flags]
    return run_cmd(cmd, env, timeout=120)


def c_host(fw: Framework, prefix: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cmd([str(fw.conv_host), str(prefix), *SHAPE], env, timeout=120)


def load(prefix: Path, name: str) -> np.ndarray:
    npy = Path(f"{prefix}.{name}.npy")
    if npy.exists():
        saved: np.ndarray = np.load(npy)
        return saved
    return np.fromfile(f"{prefix}.{name}", dtype=np.float32)


def assert_close(prefix: Path, reference: Path, *, exact: bool = False) -> None:
    for name in OUTPUTS:
        got, want = load(prefix, name), load(reference, name)
        if exact:
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            atol = 1e-4 * float(np.abs(want).max())
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol, err_msg=name)


def stats(tmp: Path, tag: str = "") -> dict[str, Any]:
    result: dict[str, Any] = json.loads((tmp / f"stats{tag}.json").read_text())
    return result


def db_counts(db: Path) -> tuple[int, int, float]:
    with sqlite3.connect(db) as conn:
        (bench,) = conn.execute("SELECT COUNT(*) FROM benchmarks").fetchone()
        (plans,) = conn.execute("SELECT COUNT(*) FROM plans").fetchone()
        (stamp,) = conn.execute("SELECT COALESCE(MAX(measured_at), 0) FROM benchmark_runs").fetchone()
    return int(bench), int(plans), float(stamp)


def test_python_host_with_rtld_local_cudnn(framework: Framework, tmp_path: Path) -> None:
    ref = python_host(framework, tmp_path / "ref", env_for(tmp_path, preload=False))
    assert ref.returncode == 0, ref.stderr
    run = python_host(framework, tmp_path / "shim", env_for(tmp_path, preload=True))
    assert run.returncode == 0, run.stderr
    assert_close(tmp_path / "shim", tmp_path / "ref")
    s = stats(tmp_path)
    assert s["planned"] >= 1 and s["micro_batches"] > s["planned"], s
    assert s.get("planner_errors", 0) == 0 and s.get("fallback_plans", 0) == 0, s
    bench, plans, _ = db_counts(tmp_path / "cache.sqlite")
    assert bench > 0 and plans >= 1  # the Python planner measured and stored


def test_c_host_plans_through_embedded_planner(framework: Framework, tmp_path: Path) -> None:
    if not _paths.EMBEDDED_PLANNER.exists():
        pytest.fail("libucudnn_planner.so is not built")
    ref = c_host(framework, tmp_path / "ref", env_for(tmp_path, preload=False))
    assert ref.returncode == 0, ref.stderr
    first = c_host(framework, tmp_path / "one", env_for(tmp_path, preload=True, tag="1"))
    assert first.returncode == 0, first.stderr
    assert_close(tmp_path / "one", tmp_path / "ref")
    s = stats(tmp_path, "1")
    assert s["micro_batches"] > s["planned"] >= 1 and s.get("fallback_plans", 0) == 0, s
    bench, plans, stamp = db_counts(tmp_path / "cache.sqlite")
    assert bench > 0 and plans >= 1

    second = c_host(framework, tmp_path / "two", env_for(tmp_path, preload=True, tag="2"))
    assert second.returncode == 0, second.stderr
    assert_close(tmp_path / "two", tmp_path / "ref")
    assert stats(tmp_path, "2")["micro_batches"] == s["micro_batches"]
    assert db_counts(tmp_path / "cache.sqlite") == (bench, plans, stamp)  # all from the cache: nothing measured


def test_four_processes_share_one_database(framework: Framework, tmp_path: Path) -> None:
    # Two Python hosts and two C hosts (when the embedded planner exists) race on the same file. The two kinds
    # generate their inputs differently, so each is compared with its own kind's undivided run.
    with_c = _paths.EMBEDDED_PLANNER.exists()
    ref_py = python_host(framework, tmp_path / "ref_py", env_for(tmp_path, preload=False))
    assert ref_py.returncode == 0, ref_py.stderr
    ref_c = c_host(framework, tmp_path / "ref_c", env_for(tmp_path, preload=False))
    assert ref_c.returncode == 0, ref_c.stderr
    db = tmp_path / "shared.sqlite"
    procs = []
    refs = []
    for i in range(4):
        env = env_for(tmp_path, preload=True, db=db, tag=str(i))
        if i % 2 == 0 or not with_c:
            cmd = [sys.executable, str(HERE / "fw_host.py"), str(framework.fakefw), str(tmp_path / f"r{i}"), *SHAPE]
            refs.append(tmp_path / "ref_py")
        else:
            cmd = [str(framework.conv_host), str(tmp_path / f"r{i}"), *SHAPE]
            refs.append(tmp_path / "ref_c")
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for i, p in enumerate(procs):
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, f"process {i}: {err}"
        assert_close(tmp_path / f"r{i}", refs[i])
        s = stats(tmp_path, str(i))
        assert s["micro_batches"] > s["planned"] >= 1, s
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        dup = conn.execute(
            "SELECT COUNT(*) FROM (SELECT key, backend_id, batch, policy, workspace_limit, deterministic_only, "
            "COUNT(*) AS c FROM plans GROUP BY 1, 2, 3, 4, 5, 6 HAVING c > 1)"
        ).fetchone()
        assert dup == (0,)
        kernels = conn.execute("SELECT COUNT(DISTINCT key) FROM plans").fetchone()
        assert kernels == (3,)  # forward, backward data, backward filter of the one layer
        (runs,) = conn.execute("SELECT COUNT(*) FROM benchmark_runs").fetchone()
        assert conn.execute("SELECT COUNT(*) FROM benchmark_claims").fetchone() == (0,)
    # Each size of each kernel was measured once between the four processes (UCUDNN_BENCHMARK_WAIT): whoever
    # claimed it first measured it, the others waited for its run or found it in the cache.
    measured = [stats(tmp_path, str(i))["legacy_benchmarks"] for i in range(4)]
    assert sum(measured) == runs, measured


def measured_env(tmp: Path, db: Path, tag: str) -> dict[str, str]:
    # Find* times the algorithms for real, so each size's benchmark takes a while (the modelled times take none);
    # the checkout on PYTHONPATH for tests/_start.py.
    env = env_for(tmp, preload=True, db=db, tag=tag) | {"UCUDNN_HOST_TIMING": "measure"}
    return env | {"PYTHONPATH": project_pythonpath(env)}


def test_ranks_started_together_measure_each_size_once(framework: Framework, tmp_path: Path) -> None:
    # Four Python hosts plan the same layer at the same moment on one cache, as data-parallel ranks do.
    ref = python_host(framework, tmp_path / "ref", env_for(tmp_path, preload=False))
    assert ref.returncode == 0, ref.stderr
    db, go = tmp_path / "shared.sqlite", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "fw_host.py"),
                str(framework.fakefw),
                str(tmp_path / f"r{i}"),
                *SHAPE,
                "--start-after",
                str(go),
            ],
            env=measured_env(tmp_path, db, str(i)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    start_together(go, 4)
    errs = []
    for i, p in enumerate(procs):
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, f"process {i}: {err}"
        assert_close(tmp_path / f"r{i}", tmp_path / "ref")
        errs.append(err)
    with sqlite3.connect(db) as conn:
        (runs,) = conn.execute("SELECT COUNT(*) FROM benchmark_runs").fetchone()
    assert runs == 3 * 5  # three kernels at b = 16, 8, 4, 2, 1
    counts = [stats(tmp_path, str(i)) for i in range(4)]
    measured = [s["legacy_benchmarks"] for s in counts]
    # Without sharing (UCUDNN_BENCHMARK_WAIT=0) each rank reads an empty cache and measures all 15.
    assert sum(measured) == runs, measured
    assert sum(1 for m in measured if m) >= 2, measured  # the ranks measured side by side
    # What each rank did not measure it read: from the cache before it started (another rank's kernel already
    # planned), or as another rank's benchmark landed while it planned -- counted, and said at exit.
    shared = [s["shared_benchmarks"] for s in counts]
    assert all(m + r <= runs for m, r in zip(measured, shared, strict=True)), (measured, shared)
    assert sum(shared) > 0, (measured, shared)  # the ranks measured side by side, so each read the others' sizes
    assert not any(s["benchmark_takeovers"] for s in counts), counts  # every rank lived: nothing taken over
    for r, s, err in zip(shared, counts, errs, strict=True):
        said = f"{r} benchmark(s) measured by other processes planning the same kernels"
        assert (said in err) == (r > 0), (r, err)
        # A wait ends in a read (nothing was taken over); a read needs no wait where the run landed before the claim.
        assert s["benchmark_wait_ms"] == 0 or r > 0, (r, s)


def test_raising_planner_passes_through(framework: Framework, tmp_path: Path) -> None:
    ref = python_host(framework, tmp_path / "ref", env_for(tmp_path, preload=False))
    assert ref.returncode == 0, ref.stderr
    run = python_host(framework, tmp_path / "shim", env_for(tmp_path, preload=True), "--planner-raises")
    assert run.returncode == 0, run.stderr
    assert "planner exploded on purpose" in run.stderr
    s = stats(tmp_path)
    assert s["passthrough"] >= 3 and s["planned"] == 0 and s["micro_batches"] == 0, s
    assert_close(tmp_path / "shim", tmp_path / "ref", exact=True)


def test_ucudnn_run_end_to_end(framework: Framework, tmp_path: Path) -> None:
    ref = c_host(framework, tmp_path / "ref", env_for(tmp_path, preload=False))
    assert ref.returncode == 0, ref.stderr
    if not _paths.EMBEDDED_PLANNER.exists():
        pytest.fail("libucudnn_planner.so is not built")
    ucudnn = [sys.executable, "-c", "import sys; from ucudnn.cli import main; sys.exit(main())"]
    cmd = [
        *ucudnn,
        "run",
        "--workspace",
        "5MiB",
        "--database",
        str(tmp_path / "db.sqlite"),
        "--stats-file",
        str(tmp_path / "stats.json"),
        "--",
        str(framework.conv_host),
        str(tmp_path / "run"),
        *SHAPE,
    ]
    proc = run_cmd(cmd, clean_env({"UCUDNN_HOST_TIMING": "model"}), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert_close(tmp_path / "run", tmp_path / "ref")
    s = stats(tmp_path)
    assert s["micro_batches"] > s["planned"] >= 1, s
    assert os.path.exists(tmp_path / "db.sqlite")
