"""The planner's benchmarks when the device's memory is short, as under a framework that holds most of it.

On a GPU the planner's searches at each candidate micro-batch size need memory: ``cudnnFind*`` allocates the
tensors at that size and then each algorithm's workspace. Under memory pressure that fails for the large sizes and
for the workspace-hungry (fast) algorithms, which are exactly what micro-batching is about. The host backend
models it with UCUDNN_HOST_FIND_MEMORY (the device memory Find* may allocate; Find*Ex allocates nothing). Here
4 MiB: the layer's tensors at N = 16 take 6.6 MB. Every run uses the embedded planner and the timing model, so the
times compared are exact.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ucudnn import _paths

from .conftest import RunDriver, assert_close

LAYER = ["n=16", "c=64", "k=64", "in=28,28"]
FULL = {"UCUDNN_HOST_FIND_MEMORY": str(4 << 20)}
CHECK = {"UCUDNN_VERIFY_SAMPLES": "3"}
OFFERED = 16 << 20  # the workspace the caller's Find*Ex offers
UNALLOCATED = -2  # ucudnn.cache.UNALLOCATED


def rows(db: Path, sql: str) -> list[tuple[int, ...]]:
    with sqlite3.connect(db) as conn:
        got = conn.execute(sql).fetchall()
    conn.close()
    return got


# The Find*Ex workspace: PyTorch's (Conv_v7.cpp's getMaxWorkspaceSize: every algorithm's workspace asked first, the
# largest within its largest free block kept, here 27 MiB), or a fixed one of the driver's.
ORDERS = {
    "pytorch": ["findex_ws=pytorch", f"max_block={27 << 20}"],
    "fixed": [f"findex_ws={OFFERED}"],
}


@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("op", ["fwd", "bwd_data", "bwd_filter"])
def test_find_ex_plans_on_the_callers_buffers_when_the_device_is_full(
    run_driver: RunDriver, tmp_path: Path, op: str, order: str
) -> None:
    # PyTorch's legacy benchmark mode: Find*Ex on its own tensors and the workspace it could allocate. The planner
    # measures on those too, so a full device plans exactly as an empty one (before: the searches at N failed and
    # the plan came from small micro-batches only, 0.135 ms instead of 0.033 ms for fwd at 16 MiB; and in PyTorch's
    # order the workspace queries before Find*Ex planned on cuDNN's own buffers already).
    args = [f"op={op}", *LAYER, "query=findex", *ORDERS[order], "ws=entry", "repeat=10"]
    alone = run_driver(*args, preload=False)
    roomy = run_driver(*args, env=CHECK | {"UCUDNN_DATABASE": str(tmp_path / "roomy.sqlite")})
    full_db = tmp_path / "full.sqlite"
    full = run_driver(*args, env=CHECK | FULL | {"UCUDNN_DATABASE": str(full_db)})
    assert full.returncode == 0, full.stderr
    assert full.report["stats"]["find_ex_benchmarks"] >= 5, full.report["stats"]  # N = 16, 8, 4, 2, 1
    assert full.report["stats"]["benchmarks_short_of_memory"] == 0, full.report["stats"]
    assert "not using that size" not in full.stderr and "without memory" not in full.stderr
    assert full.report["last_plan"] == roomy.report["last_plan"]
    assert full.report["model_ms"] == pytest.approx(roomy.report["model_ms"], rel=1e-9)
    assert_close(full.output("float"), alone.output("float"), "float")
    # The runs are complete for the limit (algorithms needing more than the offered workspace are stored as not
    # measured), so the plans made from them are stored.
    assert rows(full_db, "SELECT count(*) FROM plans")[0][0] > 0
    if order == "fixed":
        unmeasured = rows(full_db, f"SELECT workspace_bytes FROM benchmarks WHERE status = {UNALLOCATED}")
        assert unmeasured and all(ws > OFFERED for (ws,) in unmeasured)
        if op != "bwd_filter":  # its ALGO_3, with a workspace that does not grow with N, runs undivided here
            assert len(full.report["last_plan"]["micro_batches"]) > 1, "micro-batched at this workspace"


@pytest.mark.parametrize("op", ["fwd", "bwd_data", "bwd_filter"])
def test_find_ex_below_n_is_offered_no_more_than_the_limit(run_driver: RunDriver, tmp_path: Path, op: str) -> None:
    # An explicit limit below the workspace the caller offers Find*Ex: no plan within it can run an algorithm that
    # needs more, so the searches at the smaller sizes are offered only the limit and do not time those (stored as
    # not measured, with their workspace). The plan is the one a caller offering just the limit gets.
    limit = 4 << 20
    args = [f"op={op}", *LAYER, "query=findex", "ws=entry", "repeat=10"]
    env = CHECK | {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(limit)}
    db = tmp_path / "wide.sqlite"
    wide = run_driver(*args, f"findex_ws={32 << 20}", env=env | {"UCUDNN_DATABASE": str(db)})
    narrow = run_driver(*args, f"findex_ws={limit}", env=env | {"UCUDNN_DATABASE": str(tmp_path / "narrow.sqlite")})
    assert wide.returncode == 0, wide.stderr
    assert wide.report["stats"]["find_ex_benchmarks"] >= 5, wide.report["stats"]
    assert wide.report["last_plan"] == narrow.report["last_plan"]
    assert wide.report["model_ms"] == pytest.approx(narrow.report["model_ms"], rel=1e-9)
    over = f"SELECT count(*) FROM benchmarks WHERE batch < 16 AND status = 0 AND workspace_bytes > {limit}"
    assert rows(db, over) == [(0,)]
    not_timed = rows(db, f"SELECT workspace_bytes FROM benchmarks WHERE batch < 16 AND status = {UNALLOCATED}")
    assert not_timed and all(ws > limit for (ws,) in not_timed)
    # At N the caller's own search is reused as it ran: offered the caller's whole workspace (32 MiB, which the
    # fastest algorithms' 26-29 MB fit).
    at_n = rows(db, f"SELECT count(*) FROM benchmarks WHERE batch = 16 AND status = 0 AND workspace_bytes > {limit}")
    assert at_n[0][0] > 0


@pytest.mark.parametrize("op", ["fwd", "bwd_data", "bwd_filter"])
def test_a_convolution_call_is_planned_on_its_own_buffers_when_the_device_is_full(
    run_driver: RunDriver, tmp_path: Path, op: str
) -> None:
    # A program that runs the convolution without asking for an algorithm list: the plan is made at the call, which
    # has its buffers and workspace. The call overwrites its output (beta = 0), so the planner's searches run with
    # Find*Ex on them (offered the call's workspace), allocating nothing: a full device plans as one with room.
    # Before, they searched on buffers of cuDNN's own, which a full device cannot hold at N = 16, nor beside the
    # fast algorithm's workspace below it: fwd and bwd_data ran 16 x 1 sample at 0.135 ms in the model for 2 x 8 at
    # 0.033 ms, bwd_filter 4 x 4 at 0.066 ms for 1 x 16 at 0.040 ms.
    args = [f"op={op}", *LAYER, "query=none", "algo=0", f"ws={OFFERED}", "repeat=10"]
    alone = run_driver(*args, preload=False)
    roomy = run_driver(*args, env=CHECK | {"UCUDNN_DATABASE": str(tmp_path / "roomy.sqlite")})
    full_db = tmp_path / "full.sqlite"
    full = run_driver(*args, env=CHECK | FULL | {"UCUDNN_DATABASE": str(full_db)})
    assert full.returncode == 0, full.stderr
    stats = full.report["stats"]
    assert stats["call_buffer_benchmarks"] >= 5 and stats["find_ex_benchmarks"] == 0, stats  # N = 16, 8, 4, 2, 1
    assert stats["benchmarks_short_of_memory"] == 0, stats
    assert full.report["last_plan"] == roomy.report["last_plan"]
    assert full.report["model_ms"] == pytest.approx(roomy.report["model_ms"], rel=1e-9)
    assert_close(full.output("float"), alone.output("float"), "float")
    assert rows(full_db, "SELECT count(*) FROM plans")[0][0] > 0, "complete for the call's workspace: stored"
    # Nothing over the call's workspace was timed; what needs more is stored as not measured, with its workspace.
    assert rows(full_db, f"SELECT count(*) FROM benchmarks WHERE status = 0 AND workspace_bytes > {OFFERED}") == [(0,)]
    # A call that accumulates (beta = 1) reads its output, which no search may write first: its plan searches on
    # buffers of cuDNN's own, as before, and the result is the accumulated one.
    acc_alone = run_driver(*args, "beta=1", preload=False)
    acc = run_driver(*args, "beta=1", env=CHECK | FULL | {"UCUDNN_DATABASE": str(tmp_path / "acc.sqlite")})
    assert acc.returncode == 0, acc.stderr
    assert acc.report["stats"]["call_buffer_benchmarks"] == 0, acc.report["stats"]
    assert acc.report["stats"]["benchmarks_short_of_memory"] > 0, acc.report["stats"]
    assert_close(acc.output("float"), acc_alone.output("float"), "float")
    assert acc.report["model_ms"][-1] > 1.5 * full.report["model_ms"][-1]


def test_a_search_short_of_memory_leaves_no_lasting_mark(run_driver: RunDriver, tmp_path: Path) -> None:
    # Get*_v7 gives the planner no buffers: it searches on buffers of cuDNN's own, which a full device cannot hold
    # at N = 16, nor beside the fast algorithm's workspace at 8, 4 and 2 samples. The call that follows, with the
    # listed plan's workspace (1.8 MiB), is planned again for that workspace on its own buffers at N = 16, where the
    # fast algorithms need more than it: they are stored as not measured too.
    get = ["op=fwd", *LAYER, "query=get", "ws=entry", "repeat=10"]
    findex = ["op=fwd", *LAYER, "query=findex", f"findex_ws={OFFERED}", "ws=entry", "repeat=10"]
    fresh = run_driver(*findex, env=CHECK | {"UCUDNN_DATABASE": str(tmp_path / "fresh.sqlite")})
    db = tmp_path / "shared.sqlite"
    starved = run_driver(*get, env=CHECK | FULL | {"UCUDNN_DATABASE": str(db)})
    assert starved.returncode == 0, starved.stderr
    assert starved.report["stats"]["find_ex_benchmarks"] == 0
    # Counted: the searches at N = 16 (no room for its tensors), 8, 4 and 2 (none for the fast algorithm), for the
    # list's plan and the plans the call asks for.
    assert starved.report["stats"]["benchmarks_short_of_memory"] >= 4, starved.report["stats"]
    # The exit summary says so.
    assert "planner benchmark(s) short of device memory" in starved.stderr, starved.stderr
    assert fresh.report["stats"]["benchmarks_short_of_memory"] == 0, fresh.report["stats"]
    assert starved.report["model_ms"][-1] > 3 * fresh.report["model_ms"][-1]
    short = rows(db, f"SELECT DISTINCT batch, algo FROM benchmarks WHERE status = {UNALLOCATED} ORDER BY batch")
    # ALGO_FFT and FFT_TILING (one tile on this layer): their filters' spectra, whatever N, do not fit beside the
    # tensors even at one sample
    fft = (4, 5)
    assert sorted({b for b, a in short if a not in fft}) == [2, 4, 8, 16], short
    assert all((1, a) in short for a in fft), short
    assert starved.report["stats"]["call_buffer_benchmarks"] == 1, starved.report["stats"]
    # The list's plans, made without the fast algorithm, are not kept; those for the call's workspace (and its
    # undivided rival's 2 MiB bucket), which no algorithm left unmeasured fits, are complete and kept.
    kept = rows(db, "SELECT workspace_limit FROM plans")
    assert kept and all(limit <= 2 << 20 for (limit,) in kept), kept
    # Later, with memory free, those sizes are measured again: the same plan as from an empty cache (before, the
    # runs stored without the fast algorithm were reused, and this ran 16 x 1 sample at 0.135 ms for 0.033 ms).
    later = run_driver(*findex, env=CHECK | {"UCUDNN_DATABASE": str(db)})
    assert later.report["last_plan"] == fresh.report["last_plan"]
    assert later.report["model_ms"][-1] == pytest.approx(fresh.report["model_ms"][-1], rel=1e-9)
    within = f"SELECT count(*) FROM benchmarks WHERE status = {UNALLOCATED} AND workspace_bytes <= {OFFERED}"
    assert rows(db, within) == [(0,)]


def test_a_c_host_s_own_framework_allocator_lends_scratch_to_the_searches(
    run_driver: RunDriver, tmp_path: Path
) -> None:
    # A C/C++ framework with a caching allocator registers it (ucudnn_set_framework_allocator) before its first
    # convolution; the embedded planner that starts at the first plan must not replace it. Under
    # UCUDNN_SCRATCH_FROM_FRAMEWORK=1 the Get*_v7 searches cudnnFind leaves short on a full device are made again on
    # scratch it lends: the plan is the one made with room, and every buffer is given back.
    get = ["op=fwd", *LAYER, "query=get", "ws=entry", "repeat=4"]
    roomy = run_driver(*get, env={"UCUDNN_DATABASE": str(tmp_path / "roomy.sqlite")})
    short = run_driver(*get, "borrow=1", env=FULL | {"UCUDNN_DATABASE": str(tmp_path / "short.sqlite")})
    scratch = {"UCUDNN_SCRATCH_FROM_FRAMEWORK": "1", "UCUDNN_DATABASE": str(tmp_path / "lent.sqlite")}
    lent = run_driver(*get, "borrow=1", env=FULL | scratch)
    for run in (roomy, short, lent):
        assert run.returncode == 0, run.stderr
    assert short.report["lent"] == 0 and short.report["stats"]["benchmarks_short_of_memory"] > 0
    assert short.report["last_plan"] != roomy.report["last_plan"]
    stats = lent.report["stats"]
    assert stats["scratch_searches"] > 0 and stats["benchmarks_short_of_memory"] == 0, stats
    assert lent.report["lent"] == lent.report["given_back"] == stats["framework_scratch_allocs"] > 0, lent.report
    assert lent.report["last_plan"] == roomy.report["last_plan"]


def test_what_one_device_refused_is_still_asked_of_another(
    run_driver: RunDriver, standin_driver: Path, tmp_path: Path
) -> None:
    # One thread per device, one after the other (two GPU models: each device plans its own kernel), each making
    # its Get*_v7 query on a full device. The framework lends nothing on the first thread's device (its cache
    # empty there) and lends on the second's. Its allocator lends from the calling thread's device, so what the
    # first device refused says nothing of the second: the second's searches are made again on scratch it lends.
    # (Before, one refusal stopped every device's asks for that size and larger, for the run.)
    args = ["op=fwd", *LAYER, "query=get", "ws=entry", "repeat=2", "thread_query=1", "threads=2", "handles=2"]
    devices = {"LD_PRELOAD": f"{standin_driver} {_paths.PRELOAD}", "STANDIN_DEVICES": "2", "STANDIN_NAMES": "A,B"}
    env = FULL | devices | {"UCUDNN_SCRATCH_FROM_FRAMEWORK": "1", "UCUDNN_DATABASE": str(tmp_path / "c.sqlite")}
    run = run_driver(*args, "borrow=2", "serial=1", env=env)
    assert run.returncode == 0, run.stderr
    stats = run.report["stats"]
    assert stats["framework_scratch_refused"] > 0, stats  # the first device's
    assert stats["benchmarks_short_of_memory"] > 0, stats  # its searches stayed short
    assert stats["scratch_searches"] > 0, stats
    assert run.report["lent"] == run.report["given_back"] == stats["framework_scratch_allocs"] > 0, run.report
