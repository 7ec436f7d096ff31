"""Micro-batched graph-API convolutions through the preload library, end to end on the host backend.

Each graph is built and run by tests/host/graph_driver.c exactly as cudnn_frontend does (the workspace it allocates
is the size the plan reports), once without and once with LD_PRELOAD=libucudnn.so, in processes of their own.
Under an explicit per-kernel limit the shim must report a workspace within it, run its plan (micro-batches: its
counters say how many) and compute what the undivided plan computes; where nothing fits, or no limit is set, it
must report the real workspace and run the caller's plan unchanged. Most tests take the fallback path (a planner
that fails: the caller's engine, split); the last ones the planner's (engines benchmarked into the SQLite cache,
the DP).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._start import start_together
from tests.host import _graph as G

from .conftest import base_env, project_pythonpath, run_python_host

HOST = Path(__file__).with_name("graph_host.py")
FWD, DGRAD, WGRAD = 0, 1, 2
# Engines whose workspace grows with N: forward GEMM, backward-data ALGO_1, backward-filter ALGO_1.
LINEAR_ENGINE = {FWD: 2, DGRAD: 1, WGRAD: 1}
# The fallback path (no planner): the caller's engine split at the largest power of two that fits.
BASE = {"c": 4, "k": 6, "size": 8, "no_planner": True}


@pytest.fixture(scope="module", autouse=True)
def _driver_built(host_lib: Path) -> None:
    G.build_driver(host_lib)  # once, before processes race to compile it


def run(host_lib: Path, preload_lib: Path, tmp_path: Path, spec: dict[str, Any], env: dict[str, str] | None,
        ) -> tuple[np.ndarray, dict[str, Any]]:  # fmt: skip
    """env None: without the preload library; else with it and these UCUDNN_* settings."""
    out, report, stderr = run_python_host(HOST, [str(host_lib), json.dumps(spec)], tmp_path, preload_lib, env)
    assert report["status"] == 0, (report, stderr)
    return out, report


def close(a: np.ndarray, b: np.ndarray, tol: float = 1e-5) -> None:
    """Relative to max(1, |b|); a weight gradient summed over more parts rounds more (tol 1e-4 there)."""
    err = np.abs(a.astype(np.float64) - b) / np.maximum(1.0, np.abs(b))
    assert err.max() <= tol, err.max()


@pytest.mark.parametrize("op", [FWD, DGRAD, WGRAD], ids=["fwd", "dgrad", "wgrad"])
@pytest.mark.parametrize("n", [8, 7])
def test_split_under_an_explicit_limit(host_lib: Path, preload_lib: Path, tmp_path: Path, op: int, n: int) -> None:
    spec = {**BASE, "op": op, "n": n, "engine": LINEAR_ENGINE[op], "alpha": 0.7, "beta": 0.3}
    expected, plain = run(host_lib, preload_lib, tmp_path, spec, None)
    full = plain["workspace"]
    assert full > 0
    limit = full // 3
    got, rep = run(host_lib, preload_lib, tmp_path, spec, {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(limit)})
    close(got, expected)
    stats = rep["stats"]
    assert 0 < rep["workspace"] <= limit, rep
    assert stats["graph_conv_plans"] == 1 and stats["graph_split_plans"] == 1, stats
    # powerOfTwo: parts of b <= N/4 (a third of the workspace), one more for a remainder.
    assert stats["graph_micro_batches"] >= 3, stats
    assert stats["graph_executes"] == 1


@pytest.mark.parametrize("op", [FWD, DGRAD, WGRAD], ids=["fwd", "dgrad", "wgrad"])
def test_an_engine_whose_parts_never_fit_gives_way_to_one_whose_parts_do(
    host_lib: Path, preload_lib: Path, tmp_path: Path, op: int
) -> None:
    """The caller's engine is FFT (4 forward, 2 backward), whose filter spectra need more than the limit even at
    one sample, and no engine fits it undivided: the fallback splits the next admitted engine whose parts fit.
    Was: the plan ran as built, over the limit, and counted as fitting nothing even divided."""
    fft = {FWD: 4, DGRAD: 2, WGRAD: 2}[op]
    spec = {**BASE, "op": op, "n": 8, "engine": fft, "alpha": 0.7, "beta": 0.3}
    expected, plain = run(host_lib, preload_lib, tmp_path, spec, None)
    _, linear = run(host_lib, preload_lib, tmp_path, {**spec, "engine": LINEAR_ENGINE[op]}, None)
    _, one = run(host_lib, preload_lib, tmp_path, {**spec, "n": 1}, None)
    limit = linear["workspace"] // 3
    assert one["workspace"] > limit and plain["workspace"] > limit, (one, plain, limit)
    got, rep = run(host_lib, preload_lib, tmp_path, spec, {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(limit)})
    close(got, expected, 1e-4 if op == WGRAD else 1e-5)
    stats = rep["stats"]
    assert 0 < rep["workspace"] <= limit, rep
    assert stats["graph_split_plans"] == 1 and stats["graph_over_limit"] == 0, stats
    assert stats["graph_micro_batches"] >= 3, stats


def test_all_policy_takes_the_largest_size_that_fits(host_lib: Path, preload_lib: Path, tmp_path: Path) -> None:
    spec = {**BASE, "op": FWD, "n": 12, "engine": LINEAR_ENGINE[FWD]}
    expected, plain = run(host_lib, preload_lib, tmp_path, spec, None)
    # A limit between the workspaces of 4 and 8 samples: powerOfTwo runs 3 parts of 4, `all` fewer, larger ones.
    limit = plain["workspace"] * 6 // 12
    env = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(limit)}
    p2, rep2 = run(host_lib, preload_lib, tmp_path, spec, env)
    al, rep_all = run(host_lib, preload_lib, tmp_path, spec, {**env, "UCUDNN_BATCH_SIZE_POLICY": "all"})
    close(p2, expected)
    close(al, expected)
    assert rep2["stats"]["graph_micro_batches"] == 3
    assert rep_all["stats"]["graph_micro_batches"] == 2  # parts of 6
    assert rep2["workspace"] <= rep_all["workspace"] <= limit


def test_fused_conv_add_bias_relu_splits_z_but_not_the_bias(host_lib: Path, preload_lib: Path, tmp_path: Path) -> None:
    spec = {**BASE, "op": FWD, "n": 8, "engine": LINEAR_ENGINE[FWD], "fused": True}
    expected, plain = run(host_lib, preload_lib, tmp_path, spec, None)
    limit = plain["workspace"] // 3
    got, rep = run(host_lib, preload_lib, tmp_path, spec, {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(limit)})
    close(got, expected)
    assert rep["workspace"] <= limit and rep["stats"]["graph_split_plans"] == 1, rep


@pytest.mark.parametrize(
    ("engine", "env"),
    [
        (LINEAR_ENGINE[FWD], {}),  # auto: the framework's workspace, nothing to split for
        # auto with little free device memory: still as built. A variant is offered only among heuristics
        # results (tests/frontend/test_pressure.py); this driver names its engine, and its plan is its limit.
        (LINEAR_ENGINE[FWD], {"UCUDNN_HOST_DEVICE_MEMORY": "1KiB"}),
        (0, {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "1KiB"}),  # no workspace at all: within any limit
    ],
    ids=["auto", "auto-little-free-memory", "zero-workspace"],
)
def test_runs_unchanged_when_it_need_not_split(
    host_lib: Path, preload_lib: Path, tmp_path: Path, engine: int, env: dict[str, str]
) -> None:
    spec = {**BASE, "op": FWD, "n": 8, "engine": engine}
    expected, plain = run(host_lib, preload_lib, tmp_path, spec, None)
    got, rep = run(host_lib, preload_lib, tmp_path, spec, env)
    assert np.array_equal(got, expected)
    # The real workspace, and the caller's own plan runs in it.
    assert rep["workspace"] == plain["workspace"]
    stats = rep["stats"]
    assert stats["graph_conv_plans"] == 1 and stats["graph_split_plans"] == 0 and stats["graph_micro_batches"] == 0
    assert stats["graph_executes"] == 1


@pytest.mark.parametrize("policy", ["powerOfTwo", "undivided"])
def test_an_undivided_engine_that_fits_when_no_split_does(
    host_lib: Path, preload_lib: Path, tmp_path: Path, policy: str
) -> None:
    """Not even one sample of the caller's engine fits 1 byte (or the policy forbids splitting): the shim answers
    the workspace of cuDNN's first heuristic engine that fits (here the zero-workspace direct loops) and runs
    that engine, undivided."""
    spec = {**BASE, "op": FWD, "n": 8, "engine": LINEAR_ENGINE[FWD]}
    expected, _ = run(host_lib, preload_lib, tmp_path, spec, None)
    env = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "1", "UCUDNN_BATCH_SIZE_POLICY": policy}
    got, rep = run(host_lib, preload_lib, tmp_path, spec, env)
    close(got, expected)
    assert rep["workspace"] <= 1
    stats = rep["stats"]
    assert stats["graph_split_plans"] == 0 and stats["graph_micro_batches"] == 0, stats


def test_the_split_is_checked_against_the_undivided_engine_on_real_executions(
    host_lib: Path, preload_lib: Path, tmp_path: Path
) -> None:
    """With both a split of the caller's engine and an undivided engine within the limit, the split runs on the
    first two executions (a framework timing plans times the split), the next 2 x (S + 1) time them against each
    other (model clock) and the faster runs from then on."""
    spec = {**BASE, "op": FWD, "n": 8, "engine": LINEAR_ENGINE[FWD], "repeat": 12}
    expected, plain = run(host_lib, preload_lib, tmp_path, spec, None)
    limit = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(plain["workspace"] // 3)}
    # Each side alone: the split (no check), and the undivided engine (no split allowed).
    _, split_only = run(host_lib, preload_lib, tmp_path, spec, limit)
    _, alt_only = run(host_lib, preload_lib, tmp_path, spec, {**limit, "UCUDNN_BATCH_SIZE_POLICY": "undivided"})
    assert split_only["stats"]["graph_micro_batches"] == 12 * 4  # parts of 2, as before
    assert alt_only["stats"]["graph_micro_batches"] == 0
    checked_out, checked = run(host_lib, preload_lib, tmp_path, spec, {**limit, "UCUDNN_VERIFY_SAMPLES": "3"})
    close(checked_out, expected)
    stats = checked["stats"]
    assert stats["graph_verified"] == 1, stats
    fastest = min(split_only["model_ms"], alt_only["model_ms"])
    assert split_only["model_ms"] != alt_only["model_ms"]
    assert checked["model_ms"] == pytest.approx(fastest, rel=1e-9), (split_only, alt_only, checked)
    split_won = split_only["model_ms"] * 1.02 < alt_only["model_ms"]
    assert stats["graph_rejected_by_measurement"] == (0 if split_won else 1), stats
    assert checked["workspace"] <= int(limit["UCUDNN_DEFAULT_WORKSPACE_LIMIT"])


def test_a_deterministic_callers_graph_that_cannot_run_twice_ends_its_check_undivided(
    host_lib: Path, preload_lib: Path, tmp_path: Path
) -> None:
    """A deterministic caller's check runs the undivided rival first on the caller's data and the plan over it;
    with beta = 1 the graph accumulates into y, so a second run would add twice: the check ends at the rival's
    first turn for the undivided engine, after three executions of the plan (two before the check, one its
    first turn), and y holds exactly what ten undivided accumulations give."""
    spec = {**BASE, "op": FWD, "n": 8, "engine": LINEAR_ENGINE[FWD], "repeat": 10, "beta": 1.0}
    expected, plain = run(host_lib, preload_lib, tmp_path, spec, None)
    limit = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(plain["workspace"] // 3), "UCUDNN_VERIFY_SAMPLES": "3"}
    got, checked = run(host_lib, preload_lib, tmp_path, spec, limit)
    close(got, expected)
    stats = checked["stats"]
    assert stats["graph_verified"] == 1 and stats["graph_rejected_by_measurement"] == 1, stats
    assert stats["graph_micro_batches"] == 3 * 4, stats  # the plan's three executions (parts of 2), then undivided


# ---- the planner's path: the graph is a kernel like a legacy one ----

BIG = {"c": 32, "k": 32, "size": 16, "n": 16, "engine": -1, "repeat": 3}


def benchmark_rows(db: Path) -> list[tuple[str, int, int, int]]:
    import sqlite3

    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT key, batch, algo, status FROM benchmarks WHERE key LIKE 'graph;%'").fetchall()
    return [(str(k), int(b), int(a), int(st)) for k, b, a, st in rows]


@pytest.mark.parametrize("op", [FWD, DGRAD, WGRAD], ids=["fwd", "dgrad", "wgrad"])
def test_the_planner_benchmarks_engines_into_the_cache_and_plans(
    host_lib: Path, preload_lib: Path, tmp_path: Path, op: int
) -> None:
    spec = {**BIG, "op": op}
    expected, plain = run(host_lib, preload_lib, tmp_path, spec, None)
    limit = 300 * 1024
    env = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(limit)}
    got, rep = run(host_lib, preload_lib, tmp_path, spec, env)
    close(got, expected, 1e-4 if op == WGRAD else 1e-5)
    stats = rep["stats"]
    assert rep["workspace"] <= limit < plain["workspace"], (plain, rep)
    assert stats["planner_calls"] >= 1 and stats["planner_errors"] == 0, stats
    rows = benchmark_rows(tmp_path / "cache.sqlite")
    sizes = {b for _, b, _, _ in rows}
    assert {1, 2, 4, 8, 16} <= sizes, sizes  # powerOfTwo: every candidate size benchmarked
    assert len({a for _, _, a, _ in rows}) >= 2  # more than the caller's engine
    # A second process plans from the cache: no benchmark runs.
    _, again = run(host_lib, preload_lib, tmp_path, spec, {**env, "UCUDNN_LOG_LEVEL": "debug"})
    assert again["workspace"] == rep["workspace"]
    assert benchmark_rows(tmp_path / "cache.sqlite") == rows


def test_ranks_planning_one_graph_measure_its_sizes_between_them(
    host_lib: Path, preload_lib: Path, tmp_path: Path
) -> None:
    """Four processes build the same graph at the same moment on one cache, as data-parallel ranks do: each
    micro-batch size is measured by one of them (UCUDNN_BENCHMARK_WAIT), so the engines they time add up to what
    one process alone times, with the same result in each. Find-like timings are real here (the modelled ones take
    no time, so nothing would overlap)."""
    spec = {**BIG, "op": FWD, "repeat": 1}
    expected, _ = run(host_lib, preload_lib, tmp_path, spec, None)
    env = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(300 * 1024), "UCUDNN_HOST_TIMING": "measure"}
    alone_dir = tmp_path / "alone"
    alone_dir.mkdir()
    _, alone = run(host_lib, preload_lib, alone_dir, spec, env)
    timed_alone = alone["stats"]["graph_benchmarks"]
    assert timed_alone > 0
    go = tmp_path / "go"
    full = base_env() | env
    full |= {"PYTHONPATH": project_pythonpath(full), "UCUDNN_DATABASE": str(tmp_path / "shared.sqlite"),
             "LD_PRELOAD": str(preload_lib)}  # fmt: skip
    outs = [tmp_path / f"rank{i}" for i in range(4)]
    procs = []
    for out in outs:
        out.mkdir()
        args = [sys.executable, str(HOST), str(host_lib), json.dumps(spec | {"start_after": str(go)}), str(out)]
        procs.append(subprocess.Popen(args, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    start_together(go, 4)
    timed, shared = [], []
    for proc, out in zip(procs, outs, strict=True):
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        report = json.loads((out / "report.json").read_text())
        assert report["status"] == 0 and report["stats"]["planner_calls"] >= 1, report
        close(np.load(out / "out.npy"), expected)
        timed.append(report["stats"]["graph_benchmarks"])
        shared.append(report["stats"]["shared_benchmarks"])
        assert report["stats"]["benchmark_takeovers"] == 0, report
    assert sum(timed) == timed_alone, (timed, timed_alone)  # four times as many with UCUDNN_BENCHMARK_WAIT=0
    assert sum(1 for t in timed if t) >= 2, timed  # side by side
    assert sum(shared) > 0, shared  # so each read sizes the others measured (counted in its stats)


def test_one_graph_is_one_kernel_whatever_the_environment_of_its_process(
    host_lib: Path, preload_lib: Path, tmp_path: Path
) -> None:
    """The test above once benchmarked again in its second process (20 more rows: a second key). A tensor's byte
    alignment is part of a graph's key, as in cudnn_frontend, and the host's buffers came from the heap, whose
    layout follows the process's environment (the second process adds UCUDNN_LOG_LEVEL): the same graph had
    16-byte aligned tensors in one process and 32-byte aligned ones in the other. The buffers are now aligned as a
    device allocation is, so every process sees one kernel."""
    spec = {**BIG, "op": FWD, "repeat": 1, "fused": True}
    env = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(300 * 1024)}
    # More variables in the environment: another heap layout before the buffers are allocated.
    reports = [run(host_lib, preload_lib, tmp_path, spec, env | {f"PAD{i}": "y" for i in range(extra)})[1]
               for extra in (0, 3, 15, 23)]  # fmt: skip
    keys = {k for k, _, _, _ in benchmark_rows(tmp_path / "cache.sqlite")}
    assert len(keys) == 1, keys
    assert all(a % 256 == 0 for rep in reports for a in rep["addresses"])


def test_the_planner_splits_when_only_a_split_fits_deterministically(
    host_lib: Path, preload_lib: Path, tmp_path: Path
) -> None:
    """dgrad whose caller's engine is deterministic: the only undivided engine within the limit (ALGO_0) is not,
    so the plan is micro-batched (the DP over benchmarked engines), with deterministic engines only."""
    spec = {**BIG, "op": DGRAD}
    expected, _ = run(host_lib, preload_lib, tmp_path, spec, None)
    got, rep = run(host_lib, preload_lib, tmp_path, spec, {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "300KiB"})
    close(got, expected)
    stats = rep["stats"]
    assert stats["graph_split_plans"] == 1 and stats["graph_micro_batches"] >= 2 * spec["repeat"], stats
    assert 0 < rep["workspace"] <= 300 * 1024


def test_the_check_of_a_planned_split_is_stored_and_not_repeated(
    host_lib: Path, preload_lib: Path, tmp_path: Path
) -> None:
    """fwd at 4 MiB: the planner divides (2 x 8 of a Winograd engine, model clock) and the shim times that against
    the planner's undivided choice after its first two executions; the verdict goes to the SQLite cache, and a second
    process takes the checked plan without checking it again."""
    import sqlite3

    spec = {**BIG, "op": FWD, "repeat": 11}  # 2 executions before the check, 8 in it, the verdict at the 11th
    expected, _ = run(host_lib, preload_lib, tmp_path, spec, None)
    env = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "4MiB", "UCUDNN_VERIFY_SAMPLES": "3"}
    got, first = run(host_lib, preload_lib, tmp_path, spec, env)
    close(got, expected)
    assert first["stats"]["graph_verified"] == 1 and first["stats"]["graph_split_plans"] == 1, first["stats"]
    with sqlite3.connect(tmp_path / "cache.sqlite") as con:
        verdicts = con.execute("SELECT COUNT(*) FROM verdicts WHERE key LIKE 'graph;%'").fetchone()[0]
    assert verdicts == 1
    got2, second = run(host_lib, preload_lib, tmp_path, spec, env)
    close(got2, expected)
    assert second["stats"]["graph_verified"] == 0, second["stats"]
    assert second["workspace"] == first["workspace"] and second["model_ms"] == pytest.approx(first["model_ms"])


# ---- a plan of one engine against its runner-up ----

# fwd at N = 16 under 5 MiB, the caller's engine FFT (9 MB): within the limit, engine 7 (FFT_TILING, 4,259,840 B)
# runs 0.00670 ms and engine 2 (GEMM, 4,718,592 B) 0.00712 ms on the model clock, 6% apart. With GEMM's benchmark
# skewed by 0.9 the planner sees GEMM 4.5% ahead: its plan is GEMM, FFT_TILING the runner-up.
RUNNER_UP = {**BIG, "op": FWD, "engine": 4, "repeat": 11}  # 2 executions before the check, 8 in it, then the verdict
RUNNER_UP_ENV = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "5MiB", "UCUDNN_VERIFY_SAMPLES": "3"}
FFT_TILING, GEMM = 7, 2


def engine_times(host_lib: Path, preload_lib: Path, tmp_path: Path) -> dict[int, float]:
    """Each engine's model time at N: the caller's own plan of that engine, without the preload library."""
    times = {}
    for engine in (FFT_TILING, GEMM):
        d = tmp_path / f"alone{engine}"
        d.mkdir()
        _, rep = run(host_lib, preload_lib, d, {**RUNNER_UP, "engine": engine}, None)
        times[engine] = rep["model_ms"]
    return times


def test_a_plan_of_one_engine_misranked_by_its_benchmark_is_replaced_by_its_runner_up(
    host_lib: Path, preload_lib: Path, tmp_path: Path
) -> None:
    """The planner's plan is GEMM (its benchmark skewed), FFT_TILING its runner-up within 10%: the shim times the
    two after the plan's first two executions, FFT_TILING wins every pair and runs from then on, with the results
    of cuDNN's own plan; the verdict goes to the cache and a second process runs FFT_TILING unchecked. With
    UCUDNN_VERIFY_CLOSE=0 GEMM runs every execution."""
    times = engine_times(host_lib, preload_lib, tmp_path)
    assert times[FFT_TILING] * 1.05 < times[GEMM] < times[FFT_TILING] * 1.1, times
    spec = {**RUNNER_UP, "skew": [GEMM, 0.9]}
    expected, plain = run(host_lib, preload_lib, tmp_path, RUNNER_UP, None)
    assert plain["workspace"] > 5 << 20
    got, first = run(host_lib, preload_lib, tmp_path, spec, RUNNER_UP_ENV)
    close(got, expected)
    stats = first["stats"]
    assert stats["graph_checks_started"] == 1 and stats["graph_verified"] == 1, stats
    assert stats["graph_runner_up_checks"] == 1 and stats["graph_runner_up_won"] == 1, stats
    assert stats["graph_rejected_by_measurement"] == 1 and stats["graph_split_plans"] == 0, stats
    assert first["model_ms"] == pytest.approx(times[FFT_TILING], rel=1e-9), (first, times)
    # Room for both: the workspace query answers the larger of the two engines' workspaces, within the limit.
    assert first["workspace"] == 4718592
    import sqlite3

    with sqlite3.connect(tmp_path / "cache.sqlite") as con:
        query = "SELECT plan_json, undivided_json, kept FROM verdicts WHERE key LIKE 'graph;%'"
        verdicts = con.execute(query).fetchall()
    assert verdicts == [("[[16, 2, 0]]", "[[16, 7, 0]]", 0)], verdicts
    got2, second = run(host_lib, preload_lib, tmp_path, spec, RUNNER_UP_ENV)
    close(got2, expected)
    assert second["stats"]["graph_checks_started"] == 0, second["stats"]
    assert second["model_ms"] == pytest.approx(times[FFT_TILING], rel=1e-9)
    off = tmp_path / "off"
    off.mkdir()
    _, unchecked = run(host_lib, preload_lib, off, spec, {**RUNNER_UP_ENV, "UCUDNN_VERIFY_CLOSE": "0"})
    assert unchecked["stats"]["graph_checks_started"] == 0, unchecked["stats"]
    assert unchecked["model_ms"] == pytest.approx(times[GEMM], rel=1e-9)


def test_a_plan_of_one_engine_ranked_right_is_kept_against_its_runner_up(
    host_lib: Path, preload_lib: Path, tmp_path: Path
) -> None:
    """No skew: the plan is FFT_TILING, GEMM its runner-up; the check keeps FFT_TILING and a second process does not
    check it again."""
    times = engine_times(host_lib, preload_lib, tmp_path)
    expected, _ = run(host_lib, preload_lib, tmp_path, RUNNER_UP, None)
    got, first = run(host_lib, preload_lib, tmp_path, RUNNER_UP, RUNNER_UP_ENV)
    close(got, expected)
    stats = first["stats"]
    assert stats["graph_runner_up_checks"] == 1 and stats["graph_runner_up_won"] == 0, stats
    assert stats["graph_rejected_by_measurement"] == 0, stats
    assert first["model_ms"] == pytest.approx(times[FFT_TILING], rel=1e-9)
    _, second = run(host_lib, preload_lib, tmp_path, RUNNER_UP, RUNNER_UP_ENV)
    assert second["stats"]["graph_checks_started"] == 0 and second["workspace"] == 4259840, second


def test_a_deterministic_callers_graph_that_cannot_run_twice_keeps_the_plan_of_one_engine(
    host_lib: Path, preload_lib: Path, tmp_path: Path
) -> None:
    """beta = 1: the runner-up cannot be timed on the caller's data (a second run would accumulate twice), so its
    check ends at the runner-up's first turn for the plan's engine -- never an unchecked change of engine -- and y
    holds what eleven accumulations of the plan's engine give."""
    spec = {**RUNNER_UP, "beta": 1.0, "skew": [GEMM, 0.9]}
    expected, gemm = run(host_lib, preload_lib, tmp_path, {**spec, "engine": GEMM, "skew": None}, None)
    got, rep = run(host_lib, preload_lib, tmp_path, spec, RUNNER_UP_ENV)
    close(got, expected)
    assert rep["model_ms"] == pytest.approx(gemm["model_ms"], rel=1e-9), (rep, gemm)
    stats = rep["stats"]
    assert stats["graph_verified"] == 1 and stats["graph_runner_up_checks"] == 1, stats
    assert stats["graph_runner_up_won"] == 0 and stats["graph_rejected_by_measurement"] == 0, stats
