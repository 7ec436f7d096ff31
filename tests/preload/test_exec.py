"""Micro-batched execution against the undivided call: every op, layouts, ranks, groups, dilation, dtypes, beta.

A C planner registered by the driver (ucudnn_set_planner) returns a fixed multi-micro-batch plan, so what is
executed is known exactly; the reference is the same program without LD_PRELOAD.
"""

from __future__ import annotations

import pytest

from .conftest import RunDriver, assert_close

# op, plan (b:algo,... summing to n=8), extra driver arguments
CASES = [
    ("fwd", "3:0,2:1,3:2", []),
    ("fwd", "3:0,2:1,3:2", ["beta=0.5", "layout=nhwc"]),
    ("fwd", "4:2,4:0", ["groups=2", "dil=2", "c=4", "k=6"]),
    ("fwd", "5:1,3:0", ["in=4,6,6", "filt=3,3,3", "beta=0.25"]),
    ("fwd", "3:0,2:1,3:2", ["dtype=double", "stride=2", "beta=1"]),
    ("bwd_data", "3:0,2:1,3:0", []),
    ("bwd_data", "3:1,2:0,3:1", ["beta=0.5", "layout=nhwc", "groups=2"]),
    ("bwd_data", "4:1,4:0", ["in=4,6,6", "filt=3,3,3", "dtype=double", "dil=2", "pad=2"]),
    ("bwd_filter", "3:0,2:1,3:3", []),
    ("bwd_filter", "3:0,2:1,3:3", ["beta=0.5"]),
    ("bwd_filter", "1:1,1:0,6:3", ["beta=1", "layout=nhwc"]),
    ("bwd_filter", "4:1,4:0", ["groups=2", "dil=2", "dtype=double", "beta=0.75"]),
    ("bwd_filter", "5:1,3:3", ["in=4,6,6", "filt=3,3,3", "beta=0"]),
    ("bwd_filter", "3:5,2:3,3:5", ["beta=0.5"]),  # WINOGRAD_NONFUSED: the sum over tiles spans micro-batches
    ("bwd_filter", "4:5,4:5", ["layout=nhwc", "groups=2", "dtype=double", "beta=1"]),
    ("biasact", "3:0,2:1,3:2", ["alpha2=0.5"]),
    ("biasact", "4:1,4:2", ["layout=nhwc", "act=identity", "alpha2=0"]),
]


@pytest.mark.parametrize(("op", "plan", "extra"), CASES, ids=lambda v: v if isinstance(v, str) else ",".join(v))
def test_micro_batched_matches_undivided(run_driver: RunDriver, op: str, plan: str, extra: list[str]) -> None:
    args = [f"op={op}", "n=8", "ws=4000000", *extra]
    dtype = "double" if "dtype=double" in extra else "float"
    ref = run_driver(*args, preload=False)
    assert ref.returncode == 0, ref.stderr
    got = run_driver(*args, "planner=fixed", f"plan={plan}")
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["rejected_plans"] == 0, got.stderr
    assert stats["calls"] == 1 and stats["planned"] == 1
    assert stats["micro_batches"] == plan.count(",") + 1 > stats["planned"]
    plan_json = got.report["last_plan"]
    assert [(m["batch"], m["algo"]) for m in plan_json["micro_batches"]] == [
        tuple(int(v) for v in mb.split(":")) for mb in plan.split(",")
    ]
    assert_close(got.output(dtype), ref.output(dtype), dtype)


def test_four_threads_two_handles(run_driver: RunDriver) -> None:
    args = ["op=bwd_filter", "n=8", "beta=0.5", "repeat=5", "handles=2"]
    ref = run_driver(*args, preload=False)
    # Listed first, as a framework does: the workspace query of the listed algorithm answers the plan's workspace.
    got = run_driver(*args, "planner=fixed", "plan=3:0,2:1,3:3", "query=get", threads=4)
    assert got.returncode == 0, got.stderr
    stats = got.report["stats"]
    assert stats["calls"] == 20 and stats["planned"] == 20 and stats["micro_batches"] == 60
    for t in range(4):
        assert_close(got.output("float", t), ref.output("float"), "float")


def test_smaller_workspace_replans(run_driver: RunDriver) -> None:
    # "fit" plans quarters with algo 0 (no workspace) below 1 MiB, the fixed GEMM plan above. Listed first, as a
    # framework does: the workspace query of the listed algorithm answers the plan's workspace.
    args = ["op=fwd", "n=8", "c=8", "k=8", "in=12,12", "planner=fit", "plan=4:2,4:2"]
    ref = run_driver("op=fwd", "n=8", "c=8", "k=8", "in=12,12", preload=False)
    big = run_driver(*args, "algo=2", "query=get")
    assert [m["algo"] for m in big.report["last_plan"]["micro_batches"]] == [2, 2]
    assert big.report["ws_bytes"] > 0
    small = run_driver(*args, "algo=2", "ws=64")
    stats = small.report["stats"]
    assert small.returncode == 0, small.stderr
    assert stats["replans"] == 1 and stats["planned"] == 1 and stats["micro_batches"] == 4
    assert [m["algo"] for m in small.report["last_plan"]["micro_batches"]] == [0, 0, 0, 0]
    assert small.report["last_plan"]["limit"] == 64
    assert_close(small.output("float"), ref.output("float"), "float")


def test_nothing_fits_passes_through(run_driver: RunDriver) -> None:
    # The fixed GEMM plan needs workspace; with 64 bytes the shim rejects it and runs the caller's call as is.
    args = ["op=fwd", "n=8", "algo=0", "ws=64"]
    ref = run_driver(*args, preload=False)
    got = run_driver(*args, "planner=fixed", "plan=4:2,4:2")
    stats = got.report["stats"]
    assert got.returncode == 0 and stats["planned"] == 0 and stats["passthrough"] == 1
    assert stats["rejected_plans"] == 1
    assert got.output("float").tobytes() == ref.output("float").tobytes()


def test_no_prior_query_plans_on_the_spot(run_driver: RunDriver) -> None:
    args = ["op=bwd_data", "n=8", "ws=0", "algo=0"]
    ref = run_driver(*args, preload=False)
    got = run_driver(*args, "planner=fixed", "plan=4:0,4:0", "repeat=3")
    stats = got.report["stats"]
    assert stats["queries"] == 0 and stats["calls"] == 3 and stats["planned"] == 3
    assert stats["planner_calls"] == 1  # planned once, then the memoised decision
    assert_close(got.output("float"), ref.output("float"), "float")


def test_math_type_per_micro_batch(run_driver: RunDriver) -> None:
    # Micro-batches of another math type run on the plan's clone of the convolution descriptor.
    args = ["op=fwd", "n=8", "ws=4000000"]
    ref = run_driver(*args, preload=False)
    got = run_driver(*args, "planner=fixed", "plan=4:0:1,4:1:0")
    assert got.report["stats"]["planned"] == 1, got.stderr
    assert [m["math_type"] for m in got.report["last_plan"]["micro_batches"]] == [1, 0]
    assert_close(got.output("float"), ref.output("float"), "float")


def test_benchmark_from_a_c_planner(run_driver: RunDriver) -> None:
    # The "bench" planner calls ucudnn_benchmark during each request and checks that the previous request's
    # context is refused afterwards. Its plans claim non-determinism unless asked, so the query makes a second
    # request (for the deterministic entry).
    got = run_driver("op=bwd_filter", "n=8", "query=get", "planner=bench", "plan=4:0,4:1")
    stats = got.report["stats"]
    assert got.returncode == 0, got.stderr
    assert stats["planner_errors"] == 0 and stats["planned"] == 1
    assert stats["planner_calls"] >= 2
    assert "bench_ctx is not a request being planned" in got.stderr
