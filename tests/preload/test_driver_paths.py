"""The paths the preload library takes on a GPU, run on the host backend through a stand-in CUDA driver.

On a GPU the shim times its benchmarks and the checks of its plans with CUDA events recorded on the caller's stream
and read later (never by synchronising on a call), takes its benchmarks' scratch from cuMemAlloc, reads the free
memory from cuMemGetInfo and asks cuStreamIsCapturing before timing anything. None of that runs where the host
backend keeps the host's clocks. c/standin_driver.c is a libcuda.so.1 over host memory whose events take the host
backend's model clock; with UCUDNN_HOST_DRIVER=1 the shim treats it as the device's. So the same program, under
the same model, must make the same plans, reach the same verdicts and compute the same outputs as under the host's
clocks, while the stand-in records that every event and every allocation was given back, that no event was read
before it completed, and that the calls themselves never synchronised.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._driver import audited, given_back, on_device

from .conftest import Run, RunDriver, assert_close, run_python_host
from .test_graph_split import BIG, FWD, HOST, close, run

# test_never_slower.py's layer: backward-filter ALGO_1 fast with a workspace that grows with N, ALGO_3 constant.
LAYER = ["n=16", "c=64", "k=64", "in=28,28"]
WS_B4 = 8028160
SKEW = {"UCUDNN_HOST_FIND_SKEW": "bwd_filter:1:0.5"}  # Find flatters ALGO_1: its plan runs slower than predicted
CHECK = {"UCUDNN_VERIFY_SAMPLES": "3"}


def counts(run: Run) -> dict[str, int]:
    s = run.report["stats"]
    keys = ("verified", "rejected_by_measurement", "planned", "micro_batches", "passthrough")
    return {k: int(s[k]) for k in keys}


def steps(run: Run) -> list[tuple[int, int]]:
    return [(m["batch"], m["algo"]) for m in run.report["last_plan"]["micro_batches"]]


def against_cudnn(run_driver: RunDriver, args: list[str], env: dict[str, str]) -> tuple[Run, Run]:
    """cuDNN alone, and the run under `env`: it must succeed with cuDNN alone's output."""
    ref = run_driver(*args, preload=False)
    got = run_driver(*args, env=env)
    assert got.returncode == 0, got.stderr
    assert_close(got.output("float"), ref.output("float"), "float")
    return ref, got


# ---- the legacy path: checks of plans on real executions, timed by events ----


@pytest.mark.parametrize(
    ("op", "algo", "env", "kept"),
    [("bwd_filter", 3, SKEW, False), ("fwd", 1, {}, True)],
    ids=["slower-than-predicted", "really-faster"],
)
@pytest.mark.parametrize("lag", [0, 3])
def test_checks_on_real_executions_read_events_when_they_complete(
    run_driver: RunDriver, standin_driver: Path, tmp_path: Path, op: str, algo: int, env: dict[str, str], kept: bool,
    lag: int,
) -> None:  # fmt: skip
    # The plan is timed against the undivided choice on the caller's executions. With lag, every event answers
    # "not ready" three times before it completes, as on a GPU still running the work: the check waits for it on
    # later executions instead of synchronising.
    args = [f"op={op}", *LAYER, f"algo={algo}", f"ws={WS_B4}", "repeat=16"]
    ref = run_driver(*args, preload=False, env=env)
    host = run_driver(*args, env=env | CHECK | {"UCUDNN_DATABASE": str(tmp_path / "host.sqlite")})
    record = tmp_path / "driver.json"
    dev = run_driver(*args, env=env | CHECK | on_device(standin_driver, record, event_lag=str(lag)))
    assert dev.returncode == 0, dev.stderr
    seen = given_back(record)
    assert seen["records"] > 0 and seen["elapsed_reads"] > 0, seen
    assert (seen["not_ready"] > 0) == (lag > 0), seen
    assert counts(dev)["verified"] == 1 and counts(dev)["rejected_by_measurement"] == (0 if kept else 1)
    assert steps(dev) == steps(host) and (len(steps(dev)) > 1) == kept
    if not lag:  # the same executions decide, at the same times
        assert counts(dev) == counts(host)
        assert dev.report["model_ms"] == pytest.approx(host.report["model_ms"])
    assert dev.report["model_ms"][-1] == pytest.approx(host.report["model_ms"][-1])
    assert_close(dev.output("float"), ref.output("float"), "float")


def test_the_calls_never_synchronise(run_driver: RunDriver, standin_driver: Path, tmp_path: Path) -> None:
    # Planning synchronises (the probe of a call's cost); the calls do not, nor do the checks timed on them: 16
    # calls checked, 64 calls checked and 16 unchecked synchronise as often, the events answering "not ready"
    # twice each. (The checked runs are long enough for the check to end: an event still pending at exit is not
    # given back, and given_back would say so.)
    args = ["op=fwd", *LAYER, "algo=1", f"ws={WS_B4}"]
    syncs = []
    for samples, repeat in ((3, 16), (3, 64), (0, 16)):
        record = tmp_path / f"driver{samples}-{repeat}.json"
        fresh = {"UCUDNN_DATABASE": str(tmp_path / f"cache{samples}-{repeat}.sqlite")}  # each run plans and probes
        env = {"UCUDNN_VERIFY_SAMPLES": str(samples)} | fresh | on_device(standin_driver, record, event_lag="2")
        run = run_driver(*args, f"repeat={repeat}", env=env)
        assert run.returncode == 0, run.stderr
        assert run.report["stats"]["planned"] == repeat and run.report["stats"]["verified"] == (samples > 0)
        syncs.append(given_back(record)["syncs"])
    assert syncs[0] == syncs[1] == syncs[2] > 0, syncs


# ---- memory: the driver's figure is what the framework can allocate ----


def test_the_free_memory_is_the_drivers(run_driver: RunDriver, standin_driver: Path, tmp_path: Path) -> None:
    # PyTorch's legacy choice under the default limit (no limit of ucudnn's own): Get*_v7, then the first entry
    # it can allocate. The shim's bound is the free memory: the driver's on the device, the host backend's
    # stand-in figure (UCUDNN_HOST_DEVICE_MEMORY) otherwise. Equal figures, equal plans.
    args = ["op=fwd", *LAYER, "query=get", "ws=entry", "alloc_limit=4000000", "repeat=4"]
    free = 6_000_000
    host = run_driver(*args, env={"UCUDNN_HOST_DEVICE_MEMORY": str(free), "UCUDNN_DATABASE": str(tmp_path / "h.db")})
    record = tmp_path / "driver.json"
    dev = run_driver(*args, env=on_device(standin_driver, record, memory=str(free)))
    assert dev.returncode == 0 and host.returncode == 0, (dev.stderr, host.stderr)
    assert dev.report["perf"] == host.report["perf"]
    assert dev.report["perf"][0]["memory"] <= free  # the first plan listed is the fastest within the figure
    assert steps(dev) == steps(host)
    given_back(record)
    # The figure is the driver's: with more memory on the device, the first plan listed needs more.
    roomy = run_driver(*args, env=on_device(standin_driver, tmp_path / "roomy.json", memory=str(64 << 20))
                       | {"UCUDNN_DATABASE": str(tmp_path / "r.db")})  # fmt: skip
    assert free < roomy.report["perf"][0]["memory"] <= 64 << 20, roomy.report["perf"][0]


# ---- capture: nothing planned, nothing timed ----


def test_a_stream_being_captured_is_neither_planned_nor_timed(
    run_driver: RunDriver, standin_driver: Path, tmp_path: Path
) -> None:
    args = ["op=fwd", *LAYER, "algo=1", f"ws={WS_B4}", "repeat=6"]
    record = tmp_path / "driver.json"
    ref, dev = against_cudnn(run_driver, args, CHECK | on_device(standin_driver, record, capturing="1"))
    seen = given_back(record)
    assert seen["capture_queries"] > 0 and seen["records"] == 0 and seen["syncs"] == 0, seen
    assert dev.report["stats"]["planned"] == 0 and dev.report["stats"]["passthrough"] == 6, dev.report["stats"]
    assert dev.report["model_ms"] == pytest.approx(ref.report["model_ms"])


# ---- the graph path: benchmarks on device scratch, timed by events ----


@pytest.mark.parametrize("lag", [0, 2])
def test_graph_benchmarks_on_device_scratch_give_the_models_times(
    host_lib: Path, preload_lib: Path, standin_driver: Path, tmp_path: Path, lag: int
) -> None:
    # test_graph_split.py's checked split (fwd at 4 MiB: 2 x 8 of a Winograd engine): its engines benchmarked on
    # scratch from cuMemAlloc, timed by events; the same plan, verdict and times as under the host's clocks. With
    # lag the check's events complete later, and its verdict comes a few executions later.
    spec = {**BIG, "op": FWD, "repeat": 11 + 4 * lag}
    env = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "4MiB", "UCUDNN_VERIFY_SAMPLES": "3"}
    runs: dict[str, tuple[np.ndarray, dict[str, Any]]] = {}
    for where in ("reference", "host", "device"):
        folder = tmp_path / where
        folder.mkdir()
        extra = on_device(standin_driver, tmp_path / "driver.json", event_lag=str(lag)) if where == "device" else {}
        out, report, stderr = run_python_host(HOST, [str(host_lib), json.dumps(spec)], folder, preload_lib,
                                              None if where == "reference" else env | extra)  # fmt: skip
        assert report["status"] == 0, (report, stderr)
        runs[where] = (out, report)
    seen = given_back(tmp_path / "driver.json")
    assert seen["allocs"] > 0 and seen["records"] > 0 and (seen["not_ready"] > 0) == (lag > 0), seen
    (expected, _), (_, host), (got, dev) = runs["reference"], runs["host"], runs["device"]
    close(got, expected)
    for key in ("graph_benchmarks", "graph_split_plans", "graph_verified", "graph_rejected_by_measurement"):
        assert dev["stats"][key] == host["stats"][key], (key, dev["stats"], host["stats"])
    assert dev["stats"]["graph_verified"] == 1 and dev["workspace"] == host["workspace"]
    assert dev["model_ms"] == pytest.approx(host["model_ms"])  # the last execution's, the plan kept


# ---- scratch: the device's, else borrowed from the framework ----


@pytest.mark.parametrize("api", ["graph", "legacy"])
def test_scratch_the_device_refuses_is_borrowed_and_never_freed_on_the_device(
    standin_driver: Path, tmp_path: Path, api: str
) -> None:
    # tests/bench/test_framework_scratch.py's probe (a stand-in torch with a caching allocator, one forward
    # convolution at N = 16 under 4 MiB), on a full device: 3 MiB left to cuMemAlloc (and to the host backend's own
    # Find, which stands in for cuDNN's allocations), so the tensors at N = 16 (6.4 MB) are refused and benchmarks
    # go short. With UCUDNN_SCRATCH_FROM_FRAMEWORK=1 the shim borrows what the device refused (the graph path's
    # benchmarks, the legacy path's searches made again with Find*Ex), plans as with room, and gives each borrowed
    # buffer back to the framework, never to cuMemFree.
    from tests._env import run_json_probe

    full = {"STANDIN_MEMORY": str(3 << 20), "UCUDNN_HOST_FIND_MEMORY": str(3 << 20)}

    def probe(name: str, extra: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
        record = tmp_path / f"{name}.json"
        env = {"UCUDNN_DATABASE": str(tmp_path / f"{name}.sqlite"), "UCUDNN_HOST_TIMING": "model",
               "UCUDNN_HOST_DRIVER": "1", "LD_PRELOAD": str(standin_driver), "STANDIN_RECORD": str(record),
               **extra}  # fmt: skip
        got = run_json_probe("tests.bench.scratch_probe", "--api", api, env=env, timeout=300)[-1]
        assert got["rel_err"] <= 1e-5, got
        return got, given_back(record)

    roomy, roomy_seen = probe("roomy", {})
    short, short_seen = probe("short", full)
    borrowed, borrowed_seen = probe("borrowed", full | {"UCUDNN_SCRATCH_FROM_FRAMEWORK": "1"})
    assert roomy["stats"]["benchmarks_short_of_memory"] == 0, roomy
    assert (roomy_seen["peak"] > 3 << 20) == (api == "graph"), roomy_seen  # the legacy path searched with cuDNN's
    assert short["stats"]["benchmarks_short_of_memory"] > 0 and short_seen["peak"] <= 3 << 20, (short, short_seen)
    assert borrowed["stats"]["benchmarks_short_of_memory"] == 0, borrowed
    assert borrowed["stats"]["framework_scratch_allocs"] == borrowed["allocator"]["allocs"] > 0, borrowed
    assert borrowed["allocator"]["frees"] == borrowed["allocator"]["allocs"] and borrowed["allocator"]["live"] == 0
    assert borrowed_seen["allocs"] > 0 and borrowed_seen["peak"] <= 3 << 20, borrowed_seen  # the device's part
    assert borrowed["plan"] == roomy["plan"] and borrowed["workspace_bytes"] == roomy["workspace_bytes"]


# ---- a driver that fails: never a crash, never a wrong result, nothing left behind ----

FAULTS = ["cuEventCreate:2", "cuEventRecord:400", "cuEventQuery:700", "cuEventElapsedTime:700", "cuMemAlloc_v2:2",
          "cuCtxSynchronize:700", "cuStreamIsCapturing:1"]  # fmt: skip


@pytest.mark.parametrize("fault", FAULTS)
def test_a_failing_driver_costs_the_check_not_the_result(
    run_driver: RunDriver, standin_driver: Path, tmp_path: Path, fault: str
) -> None:
    # The plan that is really faster (above), each driver function in turn failing on every call: out of
    # resources (2), an invalid handle (400), or a context broken by a fault (700, which CUDA then returns from
    # every call). The calls compute cuDNN's result; a check that cannot time its executions never keeps the plan;
    # every event created and all memory allocated is given back.
    args = ["op=fwd", *LAYER, "algo=1", f"ws={WS_B4}", "repeat=16"]
    record = tmp_path / "driver.json"
    _, dev = against_cudnn(run_driver, args, CHECK | on_device(standin_driver, record, event_lag="1", fail=fault))
    given_back(record)
    stats = dev.report["stats"]
    untimed = fault.split(":")[0] in ("cuEventCreate", "cuEventRecord", "cuEventQuery", "cuEventElapsedTime")
    if untimed:
        assert stats["verified"] == stats["rejected_by_measurement"] == 1, stats
        assert len(steps(dev)) == 1, dev.report["last_plan"]  # the undivided choice runs
    if fault.startswith("cuStreamIsCapturing"):  # a capture cannot be ruled out: nothing planned, as captured
        assert stats["planned"] == 0 and stats["passthrough"] == 16, stats


@pytest.mark.parametrize("fault", ["cuEventCreate:2", "cuEventQuery:700", "cuMemAlloc_v2:2", "cuStreamIsCapturing:1"])
def test_a_failing_driver_costs_graph_benchmarks_not_the_result(
    host_lib: Path, preload_lib: Path, standin_driver: Path, tmp_path: Path, fault: str
) -> None:
    # The graph split under 4 MiB above (2 x 8 of a Winograd engine), its benchmarks untimed (events), without
    # scratch (memory) or not run (a capture that cannot be ruled out): nothing is measured, so nothing is divided;
    # the graph runs as built, with its own result, and nothing is left behind.
    spec = {**BIG, "op": FWD, "repeat": 12}
    expected, plain = run(host_lib, preload_lib, tmp_path, spec, None)
    env = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "4MiB", "UCUDNN_VERIFY_SAMPLES": "3"}
    env |= on_device(standin_driver, tmp_path / "driver.json", event_lag="1", fail=fault)
    got, report, stderr = run_python_host(HOST, [str(host_lib), json.dumps(spec)], tmp_path, preload_lib, env)
    assert report["status"] == 0, (report, stderr)
    close(got, expected)
    given_back(tmp_path / "driver.json")
    assert report["stats"]["graph_split_plans"] == 0 and report["workspace"] == plain["workspace"], report["stats"]


# ---- a device out of reach: everything runs as it is ----


def test_a_device_whose_driver_is_out_of_reach_is_left_alone(
    run_driver: RunDriver, standin_driver: Path, tmp_path: Path
) -> None:
    # cuDNN on a device (the driver is loaded), but no current context in the calling thread: the shim can neither
    # time the device nor allocate on it, and host memory or the host's clock would be wrong there. So even under
    # an explicit limit nothing is planned, timed or allocated: every call runs as it is (driver_unreachable).
    args = ["op=fwd", *LAYER, "algo=1", f"ws={WS_B4}", "repeat=6"]
    record = tmp_path / "driver.json"
    env = on_device(standin_driver, record, no_context="-1") | {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "1MiB"}
    ref, dev = against_cudnn(run_driver, args, CHECK | env)
    stats = dev.report["stats"]
    assert stats["planned"] == 0 and stats["passthrough"] == 6 and stats["driver_unreachable"] >= 6, stats
    assert dev.report["model_ms"] == pytest.approx(ref.report["model_ms"])
    seen = given_back(record)
    assert seen["records"] == seen["allocs"] == seen["syncs"] == 0, seen


def test_without_a_driver_in_the_process_the_library_works_on_the_host(run_driver: RunDriver, tmp_path: Path) -> None:
    # No CUDA driver loaded: no device work can run, whatever library cuDNN is (TensorFlow's stubs in front of the
    # host backend, NVIDIA's cuDNN without a GPU). With UCUDNN_HOST_DRIVER and no driver, the host backend is such
    # a library: planned and checked on the host's clocks and memory, as without the setting.
    args = ["op=fwd", *LAYER, "algo=1", f"ws={WS_B4}", "repeat=16"]
    _, host = against_cudnn(run_driver, args, CHECK | {"UCUDNN_DATABASE": str(tmp_path / "host.sqlite")})
    _, dev = against_cudnn(run_driver, args, CHECK | {"UCUDNN_HOST_DRIVER": "1"})
    assert dev.report["stats"]["driver_unreachable"] == 0 and dev.report["stats"]["verified"] == 1
    assert steps(dev) == steps(host) and dev.report["model_ms"] == pytest.approx(host.report["model_ms"])


def test_a_context_that_comes_later_is_served_from_then_on(
    run_driver: RunDriver, standin_driver: Path, tmp_path: Path
) -> None:
    # The first asks find no context (a thread's first calls, before it made one current): those calls run as they
    # are; once the context is there, the calls are planned and checked as on a device all along.
    args = ["op=fwd", *LAYER, "algo=1", f"ws={WS_B4}", "repeat=20"]
    record = tmp_path / "driver.json"
    _, dev = against_cudnn(run_driver, args, CHECK | on_device(standin_driver, record, no_context="4"))
    stats = dev.report["stats"]
    assert stats["driver_unreachable"] > 0 and stats["passthrough"] > 0, stats
    assert stats["planned"] > 0 and stats["verified"] == 1, stats
    assert len(steps(dev)) > 1  # the plan that is really faster, kept
    given_back(record)


# ---- the audit of the driver: what the GPU tier asserts on the real driver, checked here on the stand-in ----


@pytest.fixture(scope="module")
def audit(standin_driver: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/preload/c/driver_audit.c in front of the stand-in (on a GPU it stands in front of the real driver:
    tests/gpu/test_driver_calls.py)."""
    from tests._driver import build_audit

    return build_audit(standin_driver, tmp_path_factory.mktemp("audit"))


def through_audit(audit: Path, record: Path, audit_record: Path, **standin: str) -> dict[str, str]:
    """A run on the stand-in device, the audit in front of the driver: the stand-in is loaded as its dependency."""
    return on_device(audit, record, **standin) | {"AUDIT_RECORD": str(audit_record)}


@pytest.mark.parametrize("lag", [0, 2])
def test_the_audit_sees_the_calls_the_driver_saw(run_driver: RunDriver, audit: Path, tmp_path: Path, lag: int) -> None:
    # The checked plan of the legacy path (events read when complete, one probe of the call's cost that
    # synchronises): every driver call the stand-in saw came through the audit from the preload library, none
    # failed, and the calls after planning (the mark, after the first call, which planned) neither allocated nor
    # synchronised while the check recorded its events.
    args = ["op=fwd", *LAYER, "algo=1", f"ws={WS_B4}", "repeat=16", "mark=1"]
    record, audit_record = tmp_path / "driver.json", tmp_path / "audit.json"
    _, dev = against_cudnn(run_driver, args, CHECK | through_audit(audit, record, audit_record, event_lag=str(lag)))
    assert dev.report["stats"]["verified"] == 1 and len(steps(dev)) > 1, dev.report["stats"]
    seen, saw = given_back(record), audited(audit_record)
    for key in ("allocs", "frees", "events_created", "events_destroyed", "records", "syncs", "elapsed_reads"):
        assert seen[key] == saw[key], (key, seen, saw)
    assert saw["calls"]["cuEventQuery"] == seen["not_ready"] + saw["elapsed_reads"] and saw["others"] == 0, saw
    assert saw["after_mark"]["allocs"] == saw["after_mark"]["syncs"] == 0 < saw["after_mark"]["records"], saw


def test_the_audit_sees_graph_benchmarks_on_device_scratch(
    host_lib: Path, preload_lib: Path, audit: Path, tmp_path: Path
) -> None:
    spec = {**BIG, "op": FWD, "repeat": 15}
    env = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "4MiB", "UCUDNN_VERIFY_SAMPLES": "3"}
    env |= through_audit(audit, tmp_path / "driver.json", tmp_path / "audit.json", event_lag="2")
    _, report, stderr = run_python_host(HOST, [str(host_lib), json.dumps(spec)], tmp_path, preload_lib, env)
    assert report["status"] == 0 and report["stats"]["graph_verified"] == 1, (report, stderr)
    seen, saw = given_back(tmp_path / "driver.json"), audited(tmp_path / "audit.json")
    for key in ("allocs", "frees", "events_created", "records", "syncs", "elapsed_reads"):
        assert seen[key] == saw[key] > 0, (key, seen, saw)


@pytest.mark.parametrize("fault", ["cuEventRecord:400", "cuMemAlloc_v2:2"])
def test_the_audit_names_the_calls_the_driver_refused(
    run_driver: RunDriver, audit: Path, tmp_path: Path, fault: str
) -> None:
    # The shim copes with a refusal (the check goes untimed, the probe of a call's cost without device memory), so
    # only the audit shows it: on a GPU, such a refusal of the real driver would leave ucudnn silently slower.
    args = ["op=fwd", *LAYER, "algo=1", f"ws={WS_B4}", "repeat=16"]
    against_cudnn(run_driver, args, CHECK | through_audit(audit, tmp_path / "driver.json", tmp_path / "audit.json",
                                                          fail=fault))  # fmt: skip
    given_back(tmp_path / "driver.json")
    audited(tmp_path / "audit.json", failures={fault: 1})
