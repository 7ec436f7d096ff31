"""A process that drives several GPUs, one thread per device (PyTorch's DataParallel, TensorFlow's MirroredStrategy,
JAX's devices of one process): the threads planning on different devices benchmark at once, each on its own device,
while those on one device take turns, so that no benchmark's timing is disturbed by another on the same device.

Off the GPU, c/standin_driver.c stands in for the driver (libcuda.so.1; without UCUDNN_HOST_DRIVER the shim asks it
only which device a thread works on): each thread has its own current device, all of one name as identical GPUs
have. c/meeting_searches.c stands in for the real cuDNN behind the shim: its
searches (the shim's benchmarks) record how many ran at once, and each thread's first search waits a while for
another thread's to begin."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ucudnn import _paths

from .conftest import C_DIR, RunDriver, assert_close, compile_c

# One forward convolution, planned by the planner's own benchmarks at N = 32: 6 sizes under powerOfTwo.
CONV = ["op=fwd", "n=32", "c=16", "k=32", "in=12,12", "filt=3,3", "pad=1", "algo=0", "query=none"]


@pytest.fixture(scope="session")
def stand_ins(host_lib: Path, standin_driver: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """LD_PRELOAD for the tests: the stand-in driver, the preload library, then the meeting "real cuDNN"."""
    out = tmp_path_factory.mktemp("standins")
    # Its every other function comes from the host backend: a dependency kept though none of its symbols is used.
    host = (f"-L{_paths.LIB_DIR}", "-Wl,--no-as-needed", "-l:libcudnn.so.9", f"-Wl,-rpath,{_paths.LIB_DIR}")
    meeting = compile_c(
        C_DIR / "meeting_searches.c", output=out / "libmeeting.so", link_cudnn=False, extra=("-shared", "-fPIC", *host)
    )
    cuda = standin_driver
    return f"{cuda} {_paths.PRELOAD} {meeting}"


def run_on_devices(
    run_driver: RunDriver,
    stand_ins: str,
    tmp_path: Path,
    devices: int,
    *args: str,
    timing: str = "model",
    wait_ms: int = 5000,
) -> tuple[dict[str, Any], dict[str, Any], list[np.ndarray]]:
    """Two threads, a handle each, on `devices` stand-in devices, the host backend's timing `timing`: the driver's
    report, the searches' record, and each thread's output."""
    record = tmp_path / f"meeting{devices}.json"
    env = {"LD_PRELOAD": stand_ins, "STANDIN_DEVICES": str(devices), "MEETING_FILE": str(record),
           "MEETING_TIMEOUT_MS": str(wait_ms)}  # fmt: skip
    run = run_driver(*CONV, *args, "handles=2", threads=2, env=env | {"UCUDNN_HOST_TIMING": timing})
    assert run.returncode == 0, run.stderr
    return run.report, json.loads(record.read_text()), [run.output("float", t) for t in range(2)]


@pytest.mark.parametrize(("devices", "timing"), [(2, "model"), (1, "model"), (2, "measure")])
def test_benchmarks_overlap_across_devices_and_take_turns_on_one(
    run_driver: RunDriver, stand_ins: str, tmp_path: Path, devices: int, timing: str
) -> None:
    # A C planner that benchmarks one size per plan: each thread's one search. On two devices they run at once,
    # each meeting the other; on one device the second waits for the first, which waits for company in vain. The
    # host backend timing its algorithms for real (measure) runs every benchmark on this machine's cores, whatever
    # the driver says: they take turns too. (model: the host backend's modelled times, which nothing disturbs.)
    apart = devices == 2 and timing == "model"
    report, searches, _ = run_on_devices(run_driver, stand_ins, tmp_path, devices, "planner=bench", "plan=32:0",
                                         timing=timing, wait_ms=5000 if apart else 500)  # fmt: skip
    assert report["stats"]["legacy_benchmarks"] == 2 and searches["searches"] == 2, (report["stats"], searches)
    if apart:
        assert searches == {"searches": 2, "most_at_once": 2, "met": 2, "alone": 0}
    else:
        assert searches == {"searches": 2, "most_at_once": 1, "met": 0, "alone": 2}


def test_threads_on_two_devices_share_a_kernel_s_sizes_and_measure_at_once(
    run_driver: RunDriver, stand_ins: str, tmp_path: Path
) -> None:
    # The planner's own plans: the two threads plan one kernel at once (identical devices, one backend id). They
    # split its 6 sizes through the cache's claims, each reading what the other measured, and measure at once.
    report, searches, outputs = run_on_devices(run_driver, stand_ins, tmp_path, 2)
    stats = report["stats"]
    assert stats["planner_calls"] == 2 and stats["planned"] == 2, stats
    assert stats["legacy_benchmarks"] == 6 and stats["shared_benchmarks"] == 6, stats  # each size measured once
    assert stats["benchmark_takeovers"] == 0, stats
    assert searches["most_at_once"] == 2 and searches["met"] >= 1, searches
    alone = run_driver(*CONV, "handles=2", preload=False, threads=2)
    assert alone.returncode == 0, alone.stderr
    for t in range(2):
        assert_close(outputs[t], alone.output("float", t), "float")


@pytest.mark.parametrize("names", ["", "model A,model B"])
def test_plans_in_memory_are_per_device_model(
    run_driver: RunDriver, stand_ins: str, tmp_path: Path, names: str
) -> None:
    # Two threads one after the other, on devices 0 and 1. Identical GPUs share the plan the first thread made; a
    # second model plans for itself, as the cache keeps its benchmarks under its own backend id.
    env = {"LD_PRELOAD": stand_ins, "STANDIN_DEVICES": "2", "STANDIN_NAMES": names}
    run = run_driver(*CONV, "handles=2", "serial=1", threads=2, env=env)
    assert run.returncode == 0, run.stderr
    stats = run.report["stats"]
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        backends = {b for (b,) in conn.execute("SELECT DISTINCT backend_id FROM benchmark_runs")}
    conn.close()
    devices = sorted(b.split(";")[0] for b in backends)
    if names:
        assert stats["planner_calls"] == stats["plan_misses"] == 2 and stats["plan_cache_entries"] == 4, stats
        assert devices == ["device=model A", "device=model B"]
    else:
        # the second thread's call finds the first's decision (a plan entry and its call's entry, no miss)
        assert stats["planner_calls"] == stats["plan_misses"] == 1 and stats["plan_cache_entries"] == 2, stats
        assert devices == ["device=stand-in GPU"]
    alone = run_driver(*CONV, "handles=2", "serial=1", preload=False, threads=2)
    for t in range(2):
        assert_close(run.output("float", t), alone.output("float", t), "float")
