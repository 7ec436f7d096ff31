"""Real clients on the host backend, with and without the preload library (testing tier 5).

The programs are built on NVIDIA's cudnn_frontend headers and call cuDNN exactly as their clients do:
``torch_v0`` replays PyTorch 2.11's Conv_v8.cpp order on the v0.x builders (benchmark=False and True, a caching
allocator whose capacity the test chooses), ``graph_v1`` drives the v1 graph API. Our own drivers
(tests/host/graph_driver.c, tests/preload) keep every descriptor alive and set the plan's handle; these do not,
which is what a library underneath must survive.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests import _driver
from ucudnn import testing as T

from .conftest import Inputs, Problem, Run, RunClient

pytestmark = pytest.mark.realclient

V0_OPS = ("fprop", "dgrad", "wgrad", "fused")
V1_OPS = ("fprop", "dgrad", "wgrad")
# The problem and limit of the tests under a limit: the first INSTANT engine of every op needs 11 to 15 MiB at
# N = 8 on the host backend and fits at N = 2; the layer is large enough (151 M multiply-adds) that the modelled
# cost of a micro-batch (5 us a call) leaves micro-batching the fastest plan within the limit for fprop, dgrad and
# the fused graph. wgrad has an engine whose workspace does not grow with N (per-sample GEMMs, 1.1 MiB) that the
# planner prefers to any split on the host backend: it is taken over undivided.
LIMITED: dict[str, Any] = {"c": 32, "k": 64, "hw": 32}
LIMIT = "4MiB"
LIMIT_BYTES = 4 << 20


def check_output(run: Run, p: Problem, inputs: Inputs) -> None:
    assert run.report["status"] == "ok", run.report
    assert run.output is not None
    as64 = T.as_float64(run.output)
    assert np.all(np.isfinite(as64)), "the op left part of its output unwritten"
    checksum = run.report["checksum"]  # the program's own account of what it wrote
    assert np.isclose(checksum["sum"], as64.sum()) and np.isclose(checksum["abs_sum"], np.abs(as64).sum())
    T.assert_close(run.output, inputs.reference(p), p.np_dtype, f"{p.op} {p.dtype}")


def engine_index(tag: str) -> int:
    m = re.search(r"eng(\d+)", tag)
    assert m, tag
    return int(m.group(1))


# ---- the host backend alone ----


@pytest.mark.parametrize("benchmark", [0, 1], ids=["heuristics", "benchmark"])
@pytest.mark.parametrize("op", V0_OPS)
def test_torch_sequence_matches_the_reference(run_client: RunClient, op: str, benchmark: int) -> None:
    p = Problem(op)
    inputs = Inputs.make(p)
    run = run_client("torch_v0", p, inputs, extra=("--benchmark", str(benchmark), "--calls", "3"))
    check_output(run, p, inputs)
    assert run.report["calls"] == 3
    assert run.report["tried"][-1]["result"] == "ok"
    if not benchmark:  # with room for any workspace, the first INSTANT config runs
        assert len(run.report["tried"]) == 1, run.report["tried"]


def test_torch_sequence_half(run_client: RunClient) -> None:
    p = Problem("fprop", dtype="half")
    inputs = Inputs.make(p)
    check_output(run_client("torch_v0", p, inputs), p, inputs)


@pytest.mark.parametrize("op", ("fprop", "dgrad", "wgrad"))
def test_torch_sequence_starved_allocator_takes_the_next_config(run_client: RunClient, op: str) -> None:
    """No free memory: every config whose workspace cannot be allocated is skipped (PyTorch's out-of-memory
    path), INSTANT then FALLBACK, until one that needs none runs."""
    p = Problem(op)
    inputs = Inputs.make(p)
    run = run_client("torch_v0", p, inputs, capacity=0)
    check_output(run, p, inputs)
    tried = run.report["tried"]
    assert run.report["workspace"] == 0
    assert all(t["result"] == "out of memory" for t in tried[:-1]) and len(tried) > 1, tried
    assert all(t["workspace"] > 0 for t in tried[:-1]), tried


@pytest.mark.parametrize("op", ("fprop", "wgrad"))
def test_torch_benchmark_filters_by_largest_free_block_and_limit(run_client: RunClient, op: str) -> None:
    p = Problem(op)
    inputs = Inputs.make(p)
    roomy = run_client("torch_v0", p, inputs, extra=("--benchmark", "1"))
    check_output(roomy, p, inputs)
    capped = run_client("torch_v0", p, inputs, capacity=200_000, extra=("--benchmark", "1", "--benchmark-limit", "2"))
    check_output(capped, p, inputs)
    assert capped.report["plans_fitting"] < roomy.report["plans_fitting"] <= roomy.report["plans_built"]
    assert capped.report["plans_timed"] == min(2, capped.report["plans_fitting"])
    assert capped.report["workspace"] <= 200_000
    assert capped.report["allocator_peak"] <= 200_000


@pytest.mark.parametrize("op", V1_OPS)
def test_v1_graph_api_matches_the_reference(run_client: RunClient, op: str) -> None:
    p = Problem(op)
    inputs = Inputs.make(p)
    run = run_client("graph_v1", p, inputs, extra=("--calls", "2"))
    check_output(run, p, inputs)
    assert run.report["configs"] > 1


@pytest.mark.parametrize("op", V1_OPS)
def test_v1_graph_api_filters_configs_by_workspace(run_client: RunClient, op: str) -> None:
    """deselect_workspace_greater_than reads ENGINECFG_WORKSPACE_SIZE: the plan built fits the capacity."""
    p = Problem(op)
    inputs = Inputs.make(p)
    roomy = run_client("graph_v1", p, inputs)
    run = run_client("graph_v1", p, inputs, capacity=roomy.report["workspace"] - 1)
    check_output(run, p, inputs)
    assert run.report["workspace"] < roomy.report["workspace"]
    assert engine_index(run.report["engine"]) != engine_index(roomy.report["engine"])


# ---- under the preload library ----


@pytest.mark.parametrize(
    "program,op,benchmark",
    [("torch_v0", op, b) for op in V0_OPS for b in (0, 1)] + [("graph_v1", op, 0) for op in V1_OPS],
)
def test_preload_without_a_limit_changes_nothing(run_client: RunClient, program: str, op: str, benchmark: int) -> None:
    """The default (auto): the framework's workspace decides and graph plans run as built, bit for bit."""
    p = Problem(op)
    inputs = Inputs.make(p)
    extra = ("--benchmark", str(benchmark)) if program == "torch_v0" else ()
    alone = run_client(program, p, inputs, extra=extra)
    under = run_client(program, p, inputs, preload=True, extra=extra)
    check_output(alone, p, inputs)
    check_output(under, p, inputs)
    if not benchmark:  # benchmark mode times the host for real: its winner may differ between runs
        assert under.report["engine"] == alone.report["engine"]
        assert under.output is not None and alone.output is not None
        assert np.array_equal(under.output, alone.output, equal_nan=True)
    assert under.stats["graph_plans"] > 0 and under.stats["graph_split_plans"] == 0, under.stats


@pytest.mark.parametrize(
    "program,op,benchmark",
    [("torch_v0", op, b) for op in V0_OPS for b in (0, 1)] + [("graph_v1", op, 0) for op in V1_OPS],
)
def test_preload_micro_batches_a_real_client_under_a_limit(
    run_client: RunClient, program: str, op: str, benchmark: int
) -> None:
    """Under an explicit limit the preload library plans the real client's graphs and micro-batches them; the
    fused conv + add + bias + relu graph is recognised. Outputs stay those of the undivided op."""
    p = Problem(op, **LIMITED)
    inputs = Inputs.make(p)
    extra = ("--benchmark", str(benchmark), "--calls", "3") if program == "torch_v0" else ("--calls", "3")
    alone = run_client(program, p, inputs, extra=extra)
    run = run_client(program, p, inputs, preload=True, limit=LIMIT, extra=extra)
    check_output(run, p, inputs)
    stats = run.stats
    assert stats["graph_conv_plans"] > 0, stats
    assert run.report["workspace"] <= LIMIT_BYTES, run.report
    if not benchmark:  # alone, the first INSTANT config runs; timing may pick a small one in benchmark mode
        assert alone.report["workspace"] > LIMIT_BYTES, alone.report
    if op != "wgrad":
        assert stats["graph_split_plans"] > 0 and stats["graph_micro_batches"] > 0, stats


@pytest.mark.parametrize("op", ["fprop", "dgrad", "wgrad"])
def test_graph_benchmarks_short_of_memory_are_counted(run_client: RunClient, tmp_path: Path, op: str) -> None:
    """The graph path's benchmarks run on scratch memory of the shim's own (device memory on a GPU), which a device
    the framework holds may not have: UCUDNN_HOST_FIND_MEMORY bounds it on the host backend (2 MiB here, where the
    tensors at N = 8 take 3 MiB). The sizes measured short are counted, and the outputs stay right."""
    p = Problem(op, **LIMITED)
    inputs = Inputs.make(p)
    extra = ("--benchmark", "0", "--calls", "3")
    roomy = run_client("torch_v0", p, inputs, preload=True, limit=LIMIT, extra=extra)
    full_env = {"UCUDNN_HOST_FIND_MEMORY": str(2 << 20), "UCUDNN_DATABASE": str(tmp_path / "full.sqlite")}
    full = run_client("torch_v0", p, inputs, preload=True, limit=LIMIT, extra=extra, env_extra=full_env)
    check_output(full, p, inputs)
    assert roomy.stats["benchmarks_short_of_memory"] == 0, roomy.stats
    assert full.stats["benchmarks_short_of_memory"] > 0, full.stats
    assert full.report["workspace"] <= LIMIT_BYTES, full.report


@pytest.mark.parametrize("where", ["host", "device"])
@pytest.mark.parametrize("op", ["fprop", "dgrad"])
def test_a_captured_stream_decides_no_plan(
    run_client: RunClient, standin_driver: Path, tmp_path: Path, op: str, where: str
) -> None:
    """While the stream is being captured into a CUDA graph nothing is built or timed: under the limit that
    micro-batches these graphs otherwise, every plan runs as built, bit for bit as alone. The capture is
    UCUDNN_HOST_STREAM_CAPTURE on the host, or, as on a GPU, the answer of a stand-in driver's cuStreamIsCapturing
    (tests/_driver.py), which then records no event, no allocation and no synchronisation."""
    p = Problem(op, **LIMITED)
    inputs = Inputs.make(p)
    extra = ("--benchmark", "0", "--calls", "3")
    alone = run_client("torch_v0", p, inputs, extra=extra)
    record = tmp_path / "driver.json"
    capture = {"UCUDNN_HOST_STREAM_CAPTURE": "1"}
    if where == "device":
        capture = _driver.on_device(standin_driver, record, capturing="1")
    run = run_client("torch_v0", p, inputs, preload=True, limit=LIMIT, extra=extra, env_extra=capture)
    stats = run.stats
    assert stats["graph_conv_plans"] > 0, stats
    assert stats["graph_split_plans"] == 0 and stats["graph_micro_batches"] == 0, stats
    assert stats["graph_benchmarks"] == 0 and stats["graph_builds"] == 0, stats
    assert run.report["engine"] == alone.report["engine"]
    assert run.output is not None and alone.output is not None
    assert np.array_equal(run.output, alone.output, equal_nan=True)
    if where == "device":
        seen = _driver.given_back(record)
        assert seen["capture_queries"] > 0 and seen["records"] == seen["allocs"] == seen["syncs"] == 0, seen


@pytest.mark.parametrize("op", ["fprop", "dgrad"])
@pytest.mark.parametrize("policy", ["undivided", "powerOfTwo"])
def test_a_limit_holds_where_instant_lists_nothing_that_fits(run_client: RunClient, op: str, policy: str) -> None:
    """On an H200 real cuDNN's INSTANT list held no engine the shim could run within 64 MiB for ResNet-18's 3x3
    convolutions at N=128, and the planner read no other list: under `--policy undivided --workspace 64MiB` 276 of
    PyTorch's 964 plans found no plan and ran as built, over the limit, unreported. The host backend's INSTANT list
    cut to its first engine (UCUDNN_HOST_INSTANT_TOP=1) does the same here. The planner's candidates now include
    cuDNN's FALLBACK list, as PyTorch's do, whose engines need no workspace. Where no admitted engine fits even so
    (the deterministic dgrad undivided: FALLBACK's no-workspace dgrad engine is nondeterministic, as real cuDNN's
    algorithm 0 is), the plan still runs as built, and the exit summary and `graph_over_limit` count it."""
    p = Problem(op, **LIMITED)
    inputs = Inputs.make(p)
    top = {"UCUDNN_HOST_INSTANT_TOP": "1"}
    extra = ("--benchmark", "0", "--calls", "3")
    alone = run_client("torch_v0", p, inputs, extra=extra, env_extra=top)
    assert alone.report["workspace"] > LIMIT_BYTES, alone.report  # INSTANT's one engine, over the limit
    env = top | {"UCUDNN_BATCH_SIZE_POLICY": policy}
    run = run_client("torch_v0", p, inputs, preload=True, limit=LIMIT, extra=extra, env_extra=env)
    check_output(run, p, inputs)
    stats = run.stats
    assert stats["graph_conv_plans"] > 0, stats
    if op == "dgrad" and policy == "undivided":
        assert run.report["workspace"] == alone.report["workspace"] and stats["graph_over_limit"] == 1, stats
        assert "1 over the limit run as built (no engine cuDNN lists fits it, divided where it may be)" in run.stderr
        return
    assert run.report["workspace"] <= LIMIT_BYTES and stats["graph_over_limit"] == 0, (run.report, stats)
    if policy == "undivided":
        assert stats["graph_split_plans"] == 0, stats


def test_instant_top_cuts_the_list_and_a_bad_value_is_named(run_client: RunClient) -> None:
    """UCUDNN_HOST_INSTANT_TOP (host backend, tests only) as a real client sees it: PyTorch's benchmark=True times
    every configuration it is given, so INSTANT's list cut to one engine leaves it that engine and FALLBACK's; a bad
    value is named on stderr and cuts nothing."""
    p = Problem("fprop", **LIMITED)
    inputs = Inputs.make(p)
    extra = ("--benchmark", "1", "--calls", "1")
    every = run_client("torch_v0", p, inputs, extra=extra)
    one = run_client("torch_v0", p, inputs, extra=extra, env_extra={"UCUDNN_HOST_INSTANT_TOP": "1"})
    bad = run_client("torch_v0", p, inputs, extra=extra, env_extra={"UCUDNN_HOST_INSTANT_TOP": "0"})
    tried = [r.report["plans_built"] for r in (one, every, bad)]
    assert tried[0] < tried[1] == tried[2], (one.report, every.report)
    assert "UCUDNN_HOST_INSTANT_TOP='0': expected a count of engines from 1 to 99" in bad.stderr
    assert one.stderr == every.stderr == ""


@pytest.mark.parametrize("benchmark", [0, 1])
def test_divided_plans_are_timed_divided_then_checked(run_client: RunClient, benchmark: int) -> None:
    """Under a limit, a divided plan runs divided on its first executions, then its check against the undivided
    engine starts, counted as started there and as ended at its verdict. So PyTorch's benchmark=True times the
    divided plan itself (not the check's alternation with the slower undivided engine, which made it pick another
    engine: the divided plans then never ran again and their checks never ended), and a program that stops before
    the verdict says at exit that a check was still running."""
    p = Problem("fprop", **LIMITED)
    inputs = Inputs.make(p)
    divided = {}
    for calls in (3, 12):
        extra = ("--benchmark", str(benchmark), "--calls", str(calls))
        run = run_client("torch_v0", p, inputs, preload=True, limit=LIMIT, extra=extra)
        check_output(run, p, inputs)
        s = run.stats
        started, ended = s["graph_checks_started"], s["graph_verified"]
        divided[calls] = s["graph_micro_batches"]
        summary = next(ln for ln in run.stderr.splitlines() if "graph API:" in ln)
        if calls == 3:
            assert started == 1 and ended == 0, s
            assert "0 checked (0 replaced by the undivided engine), 1 still being checked at exit" in summary, summary
        else:
            assert started == ended == 1, s
            assert "1 checked (" in summary and "still being checked" not in summary, summary
    # the plan PyTorch runs from its choice on is the divided one, in both modes
    assert divided[12] > divided[3], divided


@pytest.mark.parametrize("op", ["fprop", "dgrad", "wgrad"])
def test_engines_over_the_limit_are_built_not_timed(run_client: RunClient, tmp_path: Path, op: str) -> None:
    """Under an explicit limit the planner can use no engine whose plan at a size needs more: the graph benchmark
    builds each (its workspace is known only then) and times only those within the limit. PyTorch's order,
    benchmark=True: the plans are divided as before (the output is the undivided call's), every timed engine fits,
    and the engines over the limit are counted, each once per size (the other plans of the convolution reuse it)."""
    p = Problem(op, **LIMITED)
    inputs = Inputs.make(p)
    env = {"UCUDNN_LOG_LEVEL": "debug", "UCUDNN_DATABASE": str(tmp_path / "cache.sqlite")}
    run = run_client("torch_v0", p, inputs, preload=True, limit=LIMIT, extra=("--benchmark", "1", "--calls", "3"),
                     env_extra=env)  # fmt: skip
    check_output(run, p, inputs)
    s = run.stats
    assert s["planner_calls"] > 0 and (s["graph_micro_batches"] > 0 or op == "wgrad"), s  # wgrad's GEMM fits whole
    timed = re.findall(r"graph benchmark at b=(\d+): engine (-?\d+) status 0, \S+ ms, (\d+) bytes$", run.stderr, re.M)
    over = re.findall(r"graph benchmark at b=(\d+): engine (-?\d+) needs (\d+) bytes, over the limit of (\d+): "
                      r"not timed$", run.stderr, re.M)  # fmt: skip
    assert timed and all(int(ws) <= LIMIT_BYTES for _, _, ws in timed), timed
    assert over and all(int(ws) > int(lim) == LIMIT_BYTES for _, _, ws, lim in over), over
    assert s["graph_benchmarks_over_limit"] == len(over) == len({(b, e) for b, e, _, _ in over}), s
    assert s["graph_benchmarks"] == len(timed), s


def test_each_engine_is_measured_once_per_shape_and_size_in_a_process(run_client: RunClient, tmp_path: Path) -> None:
    """PyTorch's benchmark=True builds a plan for every engine configuration, and under a limit each one over it is
    planned as a kernel of its own (its key names the caller's engine). The graph benchmark of one engine at one
    size is measured once in the process and reused by the other plans of the same convolution: as many
    measurements as benchmark=False's single plan needs, the rest reused, and nothing measured twice."""
    p = Problem("fprop", **LIMITED)
    inputs = Inputs.make(p)
    runs: dict[int, Run] = {}
    for mode in (0, 1):
        env = {"UCUDNN_LOG_LEVEL": "debug", "UCUDNN_DATABASE": str(tmp_path / f"cache{mode}.sqlite")}
        extra = ("--benchmark", str(mode), "--calls", "3")
        runs[mode] = run = run_client("torch_v0", p, inputs, preload=True, limit=LIMIT, extra=extra, env_extra=env)
        check_output(run, p, inputs)
    heuristics, benchmark = runs[0], runs[1]
    # benchmark=True planned more plans of the convolution than benchmark=False's one
    assert benchmark.stats["planner_calls"] > heuristics.stats["planner_calls"] > 0, (benchmark.stats, heuristics.stats)
    measured = re.findall(r"graph benchmark at b=(\d+): engine (-?\d+) status .*bytes$", benchmark.stderr, re.M)
    assert measured and len(measured) == len(set(measured)), measured
    assert benchmark.stats["graph_benchmarks"] == len(measured) == heuristics.stats["graph_benchmarks"]
    assert heuristics.stats["graph_benchmarks_reused"] == 0
    assert benchmark.stats["graph_benchmarks_reused"] >= len(measured)  # each further plan over the limit reused them
    # Every measurement built a plan, and so did every micro-batch of the plans taken over; their time is counted.
    for run in (heuristics, benchmark):
        assert run.stats["graph_builds"] > run.stats["graph_benchmarks"] and run.stats["graph_build_ns"] > 0, run.stats


@pytest.mark.parametrize("benchmark", [0, 1], ids=["heuristics", "benchmark"])
def test_a_plan_of_one_engine_is_checked_against_its_runner_up(run_client: RunClient, benchmark: int) -> None:
    """wgrad N = 16, 8 -> 32 channels at 16x16 under 1,703,936 bytes: PyTorch's first engine needs 2,637,824. Within
    the limit two engines run 3% apart on the model clock (5.53 and 5.71 us) and a split gains nothing (every part
    is a call): the planner's plan is the faster engine at N, with the other as its runner-up. In PyTorch's order
    the shim times the two after the plan's first two executions and keeps the plan; the exit summary says so; a
    second process plans from the stored verdict and checks nothing. Outputs are the undivided op's throughout."""
    p = Problem("wgrad", n=16, c=8, k=32, hw=16)
    inputs = Inputs.make(p)
    limit = "1703936"
    extra = ("--benchmark", str(benchmark), "--calls", "12")
    alone = run_client("torch_v0", p, inputs, extra=extra)
    assert alone.report["workspace"] > int(limit), alone.report
    for process in (1, 2):
        run = run_client("torch_v0", p, inputs, preload=True, limit=limit, extra=extra)
        check_output(run, p, inputs)
        s = run.stats
        assert 0 < run.report["workspace"] <= int(limit) and s["graph_split_plans"] == 0, (run.report, s)
        summary = next(ln for ln in run.stderr.splitlines() if "graph API:" in ln)
        if process == 1:
            assert s["graph_checks_started"] == s["graph_verified"] == s["graph_runner_up_checks"] == 1, s
            assert s["graph_runner_up_won"] == s["graph_rejected_by_measurement"] == 0, s
            assert "1 of one engine against its runner-up, 0 replaced by it" in summary, summary
        else:
            assert s["graph_checks_started"] == s["graph_runner_up_checks"] == 0, s
            assert "runner-up" not in summary, summary
