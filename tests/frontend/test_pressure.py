"""Issue 17: under ucudnn's defaults (no limit of its own), a memory-starved PyTorch gets faster engines, never
slower -- driven by the real cudnn_frontend in PyTorch 2.11's order (both benchmark modes) and the v1 graph API.

The simulated caching allocator holds CAPACITY bytes, and UCUDNN_HOST_DEVICE_MEMORY says the same to the preload
library (on a GPU the driver's free memory would; see shim/core/uc_memory.c). Times are the host backend's model clock
(UCUDNN_HOST_TIMING=model): the same every run, with the host's honest trade-off (workspace-hungry engines faster,
a per-call cost, a small batch below peak rate). ``python -m tests.frontend.pressure`` shows the same on the wall
clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests import _driver

from .conftest import Inputs, Problem, Run, RunClient
from .test_real_clients import check_output, engine_index

pytestmark = pytest.mark.realclient

# 151 M multiply-adds at N = 8: the fast engines (Winograd, GEMM) need 9 to 15 MiB alone and fit 4 MiB at two
# samples a part; PyTorch alone then runs the precomputed-index or direct engine, 2x (fprop) to 4x (dgrad) slower in
# the model. wgrad has a per-sample GEMM engine (1.1 MiB) that fits undivided and, at this size, beats any split of
# the others (the per-call cost outweighs the Winograd engine's gain; see WGRAD_LARGE for a layer where it does not).
SHAPE: dict[str, Any] = {"n": 8, "c": 32, "k": 64, "hw": 32}
CAPACITY = 4 << 20
ROOMY = 1 << 30
CALLS = 16  # beyond the variant's check: 1 + UC_OFFER_UNTIMED (2) + 2 x (1 warm-up + 3 samples)
MODES = [0, 1]
MODE_IDS = ["heuristics", "benchmark"]


def under(capacity: int) -> dict[str, str]:
    return {"UCUDNN_HOST_DEVICE_MEMORY": str(capacity)}


def steady_ms(run: Run) -> float:
    """The modelled time of the last call the kept plan served (after any check)."""
    times = run.report["call_model_ms"]
    assert len(times) == CALLS - 1, run.report
    return float(times[-1])


def pair(
    run_client: RunClient, program: str, op: str, capacity: int, benchmark: int | None, dtype: str = "float"
) -> tuple[Run, Run]:
    """The same op alone and under the preload library's defaults, with an allocator of `capacity` bytes."""
    p = Problem(op, dtype=dtype, **SHAPE)
    inputs = Inputs.make(p)
    extra = ("--calls", str(CALLS)) + (("--benchmark", str(benchmark)) if benchmark is not None else ())
    alone = run_client(program, p, inputs, capacity=capacity, extra=extra)
    ucudnn = run_client(program, p, inputs, capacity=capacity, preload=True, extra=extra, env_extra=under(capacity))
    check_output(alone, p, inputs)
    check_output(ucudnn, p, inputs)
    for run in (alone, ucudnn):
        assert run.report["allocator_peak"] <= capacity, run.report
    return alone, ucudnn


@pytest.mark.parametrize("benchmark", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("op", ["fprop", "dgrad", "fused"])
def test_memory_starved_torch_runs_the_fast_engine_micro_batched(
    run_client: RunClient, op: str, benchmark: int
) -> None:
    alone, ucudnn = pair(run_client, "torch_v0", op, CAPACITY, benchmark)
    stats = ucudnn.stats
    # One variant offered in the heuristics list; its plan micro-batched, checked against the undivided engine the
    # framework would have run, and kept.
    assert stats["graph_offers"] >= 1 and stats["graph_split_plans"] >= 1 and stats["graph_micro_batches"] > 0, stats
    assert stats["graph_verified"] == 1 and stats["graph_rejected_by_measurement"] == 0, stats
    chosen = engine_index(ucudnn.report["engine"])
    assert chosen != engine_index(alone.report["engine"]), (alone.report["engine"], ucudnn.report["engine"])
    assert steady_ms(ucudnn) < 0.8 * steady_ms(alone), (steady_ms(ucudnn), steady_ms(alone))
    if not benchmark:
        # First config that allocates: the fast engine's config is out of memory, its variant right after it fits.
        tried = ucudnn.report["tried"]
        assert [t["result"] for t in tried] == ["out of memory", "ok"], tried
        assert engine_index(tried[0]["tag"]) == engine_index(tried[1]["tag"]) == chosen
        # cudnn_frontend names the variant by its knobs: the original's (none on the host backend), then ucudnn's
        # (a knob type the configuration does not choose, cuDNN's WORKSPACE (25), and a value reserved for ucudnn).
        assert tried[1]["tag"] == tried[0]["tag"] + "_k25=1969452388", tried
        assert tried[0]["workspace"] > CAPACITY >= tried[1]["workspace"] > 0, tried
        assert alone.report["tried"][0] == tried[0]  # the same first config, which PyTorch alone cannot allocate
    else:
        # One more plan built (the variant), timed among those that fit; PyTorch's own timing chose it.
        assert ucudnn.report["plans_built"] == alone.report["plans_built"] + 1, (alone.report, ucudnn.report)
        assert ucudnn.report["plans_fitting"] == alone.report["plans_fitting"] + 1
        assert ucudnn.report["workspace"] <= CAPACITY


@pytest.mark.parametrize("dtype", ["half", "bfloat16"])
@pytest.mark.parametrize("op", ["fprop", "dgrad", "fused"])
def test_memory_starved_16bit_torch_runs_the_fast_engine_micro_batched(
    run_client: RunClient, op: str, dtype: str
) -> None:
    """The same in half and bfloat16 (PyTorch's mixed-precision training): the fast engine's configuration is out
    of memory, its variant right after it runs micro-batched, with the reference's output, and faster."""
    alone, ucudnn = pair(run_client, "torch_v0", op, CAPACITY, 0, dtype)
    stats = ucudnn.stats
    assert stats["graph_split_plans"] >= 1 and stats["graph_micro_batches"] > 0, stats
    assert stats["graph_verified"] == 1 and stats["graph_rejected_by_measurement"] == 0, stats
    tried = ucudnn.report["tried"]
    assert [t["result"] for t in tried] == ["out of memory", "ok"], tried
    assert steady_ms(ucudnn) < 0.8 * steady_ms(alone), (steady_ms(ucudnn), steady_ms(alone))


@pytest.mark.parametrize("benchmark", MODES, ids=MODE_IDS)
def test_memory_starved_wgrad_is_never_slower(run_client: RunClient, benchmark: int) -> None:
    """wgrad's per-sample engine fits undivided and is faster than any split: the variant is offered, and the
    check (benchmark=False) or PyTorch's timing (benchmark=True) keeps PyTorch's own choice."""
    alone, ucudnn = pair(run_client, "torch_v0", "wgrad", CAPACITY, benchmark)
    assert ucudnn.stats["graph_offers"] >= 1, ucudnn.stats
    assert steady_ms(ucudnn) <= steady_ms(alone) * (1 + 1e-9), (steady_ms(ucudnn), steady_ms(alone))
    if not benchmark:
        assert ucudnn.stats["graph_verified"] == 1 and ucudnn.stats["graph_rejected_by_measurement"] == 1


# A larger wgrad layer (1.85 G multiply-adds at N = 16, 3x3, 128 -> 128 at 28x28), where the Winograd engine's
# batch transforms (52 MiB at N = 16, 26 MiB at 8) pay for a split: in 40 MiB PyTorch alone runs the per-sample GEMM
# engine, ucudnn 2 x 8 of Winograd, 1.4x faster in the model; in 56 MiB both run Winograd undivided.
WGRAD_LARGE: dict[str, Any] = {"n": 16, "c": 128, "k": 128, "hw": 28}


@pytest.mark.parametrize("benchmark", MODES, ids=MODE_IDS)
def test_memory_starved_wgrad_runs_the_winograd_engine_micro_batched(run_client: RunClient, benchmark: int) -> None:
    p = Problem("wgrad", **WGRAD_LARGE)
    inputs = Inputs.make(p)
    extra = ("--calls", str(CALLS), "--benchmark", str(benchmark))
    for capacity in (40 << 20, 56 << 20):
        alone = run_client("torch_v0", p, inputs, capacity=capacity, extra=extra)
        ucudnn = run_client(
            "torch_v0", p, inputs, capacity=capacity, preload=True, extra=extra, env_extra=under(capacity)
        )
        for run in (alone, ucudnn):
            check_output(run, p, inputs)
            assert run.report["allocator_peak"] <= capacity, run.report
        stats = ucudnn.stats
        if capacity == 56 << 20:  # room for Winograd at N: nothing offered, PyTorch's own engine as alone
            assert stats["graph_offers"] == stats["graph_split_plans"] == 0, stats
            assert ucudnn.report["engine"] == alone.report["engine"], (alone.report, ucudnn.report)
            assert steady_ms(ucudnn) == pytest.approx(steady_ms(alone), rel=1e-9)
            continue
        assert stats["graph_offers"] >= 1 and stats["graph_split_plans"] >= 1 and stats["graph_micro_batches"] > 0, (
            stats
        )
        assert stats["graph_verified"] == 1 and stats["graph_rejected_by_measurement"] == 0, stats
        assert engine_index(ucudnn.report["engine"]) != engine_index(alone.report["engine"]), (
            alone.report,
            ucudnn.report,
        )
        assert steady_ms(ucudnn) < 0.8 * steady_ms(alone), (steady_ms(ucudnn), steady_ms(alone))


def test_memory_starved_half_wgrad_is_offered_nothing(run_client: RunClient) -> None:
    """The memory-starved wgrad above in half: its parts could not accumulate into dw (the shim never divides it),
    so no variant is offered -- an offered one could only fall back to the original engine, after the builds and
    the slot it cost. PyTorch alone's configurations, engine and result, bit for bit. (The offer is decided alike
    in both benchmark modes; heuristics mode keeps the test short: half runs slowly on the host.)"""
    p = Problem("wgrad", **(WGRAD_LARGE | {"dtype": "half"}))
    inputs = Inputs.make(p)
    capacity = 40 << 20
    extra = ("--calls", str(CALLS), "--benchmark", "0")
    alone = run_client("torch_v0", p, inputs, capacity=capacity, extra=extra)
    ucudnn = run_client("torch_v0", p, inputs, capacity=capacity, preload=True, extra=extra, env_extra=under(capacity))
    check_output(ucudnn, p, inputs)
    stats = ucudnn.stats
    assert stats["graph_offers"] == stats["graph_split_plans"] == stats["rejected_plans"] == 0, stats
    assert ucudnn.report["engine"] == alone.report["engine"], (alone.report, ucudnn.report)
    assert ucudnn.report["tried"] == alone.report["tried"], (alone.report, ucudnn.report)
    assert ucudnn.output is not None and alone.output is not None
    assert np.array_equal(ucudnn.output, alone.output)


@pytest.mark.parametrize("dtype", ["float", "half"])
def test_a_limit_divides_a_wgrad_only_where_its_parts_can_accumulate(run_client: RunClient, dtype: str) -> None:
    """Under an explicit limit that only the Winograd engine at one sample fits, a float wgrad runs 8 x 1 of it,
    each part after the first accumulating into dw; a half one cannot (dw would be rounded once per part, which one
    call does not do), so it is planned undivided only and runs as built, over the limit, its log line saying why.
    Was (drawn by the random middle-layer tier): the planner was asked for a divided plan the shim then refused, a
    rejected plan."""
    p = Problem("wgrad", dtype=dtype, n=8, c=64, k=32, size=(36, 36), filt=(3, 3), pad=(1, 1), layout="nhwc")
    inputs = Inputs.make(p)
    env = {"UCUDNN_LOG_LEVEL": "info"}
    run = run_client(
        "torch_v0", p, inputs, capacity=ROOMY, preload=True, limit="2408448", extra=("--calls", "4"), env_extra=env
    )
    check_output(run, p, inputs)
    stats = run.stats
    assert stats["rejected_plans"] == 0 and stats["planner_errors"] == 0, (stats, run.stderr[-2000:])
    if dtype == "float":
        assert stats["graph_split_plans"] == 1 and run.report["workspace"] <= 2408448, (stats, run.report)
    else:
        assert stats["graph_split_plans"] == 0 and stats["graph_over_limit"] == 1, stats
        assert "no admitted engine fits it undivided (a weight gradient whose parts" in run.stderr, run.stderr[-2000:]


@pytest.mark.parametrize("op", ["fprop", "dgrad"])
def test_memory_starved_v1_graph_api_filters_in_the_variant(run_client: RunClient, op: str) -> None:
    """The v1 API drops configs by ENGINECFG_WORKSPACE_SIZE: the variant's reports its micro-batched workspace."""
    alone, ucudnn = pair(run_client, "graph_v1", op, CAPACITY, None)
    assert ucudnn.stats["graph_offers"] >= 1 and ucudnn.stats["graph_split_plans"] >= 1, ucudnn.stats
    assert ucudnn.report["workspace"] <= CAPACITY
    assert steady_ms(ucudnn) < 0.8 * steady_ms(alone), (steady_ms(ucudnn), steady_ms(alone))


@pytest.mark.parametrize("benchmark", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("op", ["fprop", "dgrad", "wgrad", "fused"])
def test_no_pressure_changes_nothing(run_client: RunClient, op: str, benchmark: int) -> None:
    """Room for every workspace (and the preload library told so): nothing offered, nothing split, the same
    configs tried and the same engine as PyTorch alone, bit for bit."""
    alone, ucudnn = pair(run_client, "torch_v0", op, ROOMY, benchmark)
    stats = ucudnn.stats
    assert stats["graph_offers"] == 0 and stats["graph_split_plans"] == 0 and stats["graph_micro_batches"] == 0
    assert ucudnn.report["engine"] == alone.report["engine"]
    assert ucudnn.report["tried"] == alone.report["tried"]
    assert ucudnn.report.get("plans_built") == alone.report.get("plans_built")
    assert ucudnn.output is not None and alone.output is not None
    assert np.array_equal(ucudnn.output, alone.output)
    assert steady_ms(ucudnn) == steady_ms(alone)


def test_deterministic_torch_gets_a_deterministic_variant(run_client: RunClient) -> None:
    """PyTorch asking for determinism drops nondeterministic configs (here: every dgrad engine that fits 4 MiB),
    so alone it finds no engine; told so (UCUDNN_DETERMINISTIC=1 in a C/C++ host, torch's own flags through the
    framework source in a Python host), the shim offers a deterministic variant and checks it against nothing
    nondeterministic: the op runs, micro-batched, with the deterministic engine's result."""
    p = Problem("dgrad", **SHAPE)
    inputs = Inputs.make(p)
    extra = ("--calls", str(CALLS), "--deterministic", "1")
    alone = run_client("torch_v0", p, inputs, capacity=CAPACITY, extra=extra)
    assert alone.report["status"] == "error" and alone.returncode == 1, alone.report
    env = under(CAPACITY) | {"UCUDNN_DETERMINISTIC": "1"}
    ucudnn = run_client("torch_v0", p, inputs, capacity=CAPACITY, preload=True, extra=extra, env_extra=env)
    check_output(ucudnn, p, inputs)
    assert ucudnn.stats["graph_split_plans"] == 1 and ucudnn.stats["graph_verified"] == 0, ucudnn.stats
    roomy = run_client("torch_v0", p, inputs, extra=extra)  # the same engine undivided, with room for it
    assert engine_index(roomy.report["engine"]) == engine_index(ucudnn.report["engine"])
    assert roomy.output is not None and ucudnn.output is not None
    # The same engine's sums, over parts of 2 samples instead of 8: equal up to the BLAS's blocking, which can
    # depend on the matrix sizes (bit for bit on some CPUs, not on others).
    scale = float(np.max(np.abs(roomy.output)))
    np.testing.assert_allclose(ucudnn.output, roomy.output, rtol=1e-6, atol=1e-6 * scale)


@pytest.mark.parametrize("benchmark", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("op", ["fprop", "dgrad"])
def test_memory_that_shrinks_after_the_plans_were_made(run_client: RunClient, op: str, benchmark: int) -> None:
    """Plans made with room for every workspace, then memory shrinks (other tensors took it: torch_train's pressure
    runs size their ballast after a forward pass): the cached plan's workspace cannot be had, PyTorch searches again
    (Conv_v8.cpp catches the out-of-memory error), and under the preload library that search's heuristics carry the
    variant, decided under the memory left then: the fast engine runs micro-batched instead of the slow one."""
    p = Problem(op, **SHAPE)
    inputs = Inputs.make(p)
    extra = ("--calls", str(CALLS), "--benchmark", str(benchmark), "--shrink-after", "2", "--shrink-to", str(CAPACITY))
    alone = run_client("torch_v0", p, inputs, capacity=ROOMY, extra=extra)
    ucudnn = run_client("torch_v0", p, inputs, capacity=ROOMY, preload=True, extra=extra, env_extra=under(ROOMY))
    check_output(alone, p, inputs)
    check_output(ucudnn, p, inputs)
    for run in (alone, ucudnn):
        first = run.report["call_model_ms"][0]  # the fast engine, undivided, while there was room for it
        assert run.report["searched_again"] == 1 and steady_ms(run) > first, run.report
    stats = ucudnn.stats
    assert stats["graph_offers"] == 1 and stats["graph_split_plans"] >= 1 and stats["graph_verified"] == 1, stats
    assert stats["graph_rejected_by_measurement"] == 0, stats
    assert engine_index(ucudnn.report["engine"]) != engine_index(alone.report["engine"])
    assert steady_ms(ucudnn) < 0.8 * steady_ms(alone), (steady_ms(ucudnn), steady_ms(alone))


@pytest.mark.parametrize("op", ["fprop", "wgrad"])
def test_a_stored_check_settles_the_variant_in_the_next_run(run_client: RunClient, op: str) -> None:
    """A variant's check ends in the SQLite cache (the embedded planner's recorder in this C++ host), and the next
    run of the program finds it there: the choice it made runs from the first execution, nothing is checked again.
    fprop's check kept the divided plan; wgrad's kept PyTorch's per-sample engine, which the next run then runs
    undivided in the variant's place."""
    p = Problem(op, **SHAPE)
    inputs = Inputs.make(p)
    extra = ("--calls", str(CALLS), "--benchmark", "0")
    runs = [
        run_client("torch_v0", p, inputs, capacity=CAPACITY, preload=True, extra=extra, env_extra=under(CAPACITY))
        for _ in range(2)
    ]
    for run in runs:
        check_output(run, p, inputs)
    first, second = (run.stats for run in runs)
    assert first["graph_checks_started"] == first["graph_verified"] == 1 and first["graph_stored_checks"] == 0, first
    assert second["graph_checks_started"] == second["graph_verified"] == 0, second
    assert second["graph_stored_checks"] == 1 and second["graph_offers"] == 1, second
    assert first["graph_rejected_by_measurement"] == (op == "wgrad"), first
    assert second["graph_split_plans"] == (op == "fprop"), second
    # Every call of the second run takes what the first run's check settled on (its steady time).
    assert runs[1].report["call_model_ms"] == pytest.approx([steady_ms(runs[0])] * (CALLS - 1), rel=1e-9)
    assert "settled by checks stored in the cache" in runs[1].stderr


@pytest.mark.parametrize("benchmark", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("op", ["fprop", "dgrad"])
def test_on_a_device_the_drivers_memory_and_events_decide_alike(
    run_client: RunClient, standin_driver: Path, tmp_path: Path, op: str, benchmark: int
) -> None:
    """The memory-starved PyTorch above as on a GPU: the free memory from the driver (a stand-in, tests/_driver.py,
    with 4 MiB), the variant's check timed by CUDA events that complete two queries late. The same variant, engine,
    verdict and steady time as with the host backend's stand-in figures (UCUDNN_HOST_DEVICE_MEMORY, and
    UCUDNN_HOST_FIND_MEMORY bounding any scratch as the device's 4 MiB does), and every event given back."""
    p = Problem(op, **SHAPE)
    inputs = Inputs.make(p)
    extra = ("--calls", str(CALLS), "--benchmark", str(benchmark))
    host_env = under(CAPACITY) | {"UCUDNN_HOST_FIND_MEMORY": str(CAPACITY)}
    host = run_client("torch_v0", p, inputs, capacity=CAPACITY, preload=True, extra=extra, env_extra=host_env)
    record = tmp_path / "driver.json"
    device_env = _driver.on_device(standin_driver, record, memory=str(CAPACITY), event_lag="2")
    device_env |= {"UCUDNN_DATABASE": str(tmp_path / "device.sqlite")}
    dev = run_client("torch_v0", p, inputs, capacity=CAPACITY, preload=True, extra=extra, env_extra=device_env)
    for run in (host, dev):
        check_output(run, p, inputs)
    seen = _driver.given_back(record)
    # The variant's plan is the split of an engine, decided by the check: nothing benchmarked, nothing allocated,
    # the check's events read as they completed, and the device never synchronised.
    assert seen["records"] > 0 and seen["not_ready"] > 0 and seen["syncs"] == seen["allocs"] == 0, seen
    keys = ("graph_offers", "graph_split_plans", "graph_verified", "graph_rejected_by_measurement")
    assert {k: dev.stats[k] for k in keys} == {k: host.stats[k] for k in keys}, (host.stats, dev.stats)
    assert dev.stats["graph_offers"] >= 1 and dev.stats["graph_split_plans"] >= 1, dev.stats
    assert dev.report["engine"] == host.report["engine"] and dev.report["tried"] == host.report["tried"]
    assert steady_ms(dev) == pytest.approx(steady_ms(host), rel=1e-9)
