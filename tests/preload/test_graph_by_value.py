"""The graph path in PyTorch's real order and against adversarial descriptor life cycles, end to end on the host
backend, each run once without and once with LD_PRELOAD=libucudnn.so under an explicit limit.

PyTorch 2.11's order (tests/host/graph_driver.c's run_real): tensors and convolution destroyed once the operation is
built, INSTANT then FALLBACK heuristics, plans without a handle whose workspace is read with a NULL count pointer;
with benchmark=False the operation graph is destroyed before any plan, with benchmark=True every plan is built while
it lives. The shim must micro-batch fprop, dgrad, wgrad and the fused conv + add + bias + relu graph there, and its
counters say so. The adversarial sequences (tests/preload/graph_adversary.py) destroy and re-create descriptors at
the addresses the shim once recorded, re-initialise them in place, and hand it malformed variant packs: the
outputs must be the undivided run's, the statuses cuDNN's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .conftest import run_python_host
from .test_graph_split import FWD, LINEAR_ENGINE, WGRAD, close, run

ADVERSARY = Path(__file__).with_name("graph_adversary.py")
BASE = {"c": 4, "k": 6, "size": 8, "n": 8, "alpha": 0.7, "beta": 0.3, "real_order": True, "no_planner": True}


@pytest.mark.parametrize("benchmark", [False, True], ids=["benchmark-off", "benchmark-on"])
@pytest.mark.parametrize("op", [0, 1, 2], ids=["fwd", "dgrad", "wgrad"])
def test_the_real_order_is_micro_batched(
    host_lib: Path, preload_lib: Path, tmp_path: Path, op: int, benchmark: bool
) -> None:
    spec = {**BASE, "op": op, "engine": LINEAR_ENGINE[op], "benchmark": benchmark}
    expected, plain = run(host_lib, preload_lib, tmp_path, spec, None)
    assert plain["ran"] >= 0 and plain["configs"] > 1
    limit = plain["workspace"] // 3
    got, rep = run(host_lib, preload_lib, tmp_path, spec, {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(limit)})
    close(got, expected, 1e-4 if op == WGRAD else 1e-5)
    stats = rep["stats"]
    assert rep["workspace"] <= limit, rep
    # Every plan built is a convolution graph the shim resolved, though its tensors, convolution (and, with
    # benchmark off, its operation graph) were gone before any plan existed.
    assert stats["graph_conv_plans"] == stats["graph_plans"] == rep["plans"] >= 1, stats
    assert stats["graph_split_plans"] >= 1 and stats["graph_micro_batches"] >= 3, stats


def test_the_real_orders_fused_conv_add_bias_relu(host_lib: Path, preload_lib: Path, tmp_path: Path) -> None:
    """The ReLU sets NAN_PROPAGATION (its own attribute type): the graph is still recognised and split."""
    spec = {**BASE, "op": FWD, "engine": LINEAR_ENGINE[FWD], "fused": True}
    expected, plain = run(host_lib, preload_lib, tmp_path, spec, None)
    limit = plain["workspace"] // 3
    got, rep = run(host_lib, preload_lib, tmp_path, spec, {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(limit)})
    close(got, expected)
    assert rep["workspace"] <= limit and rep["stats"]["graph_split_plans"] == 1, rep


def adversary(host_lib: Path, preload_lib: Path, tmp_path: Path, case: str, env: dict[str, str] | None,
              ) -> tuple[np.ndarray, dict[str, Any]]:  # fmt: skip
    # The host backend recycles destroyed descriptors last in, first out: old addresses come back whatever the
    # heap's layout (which the environment's size and the shim's own allocations change).
    out, report, _ = run_python_host(ADVERSARY, [str(host_lib), case], tmp_path, preload_lib, env)
    return out, report


def under_limit(host_lib: Path, preload_lib: Path, tmp_path: Path, case: str,
                ) -> tuple[np.ndarray, dict[str, Any], np.ndarray, dict[str, Any]]:  # fmt: skip
    expected, plain = adversary(host_lib, preload_lib, tmp_path, case, None)
    limit = {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": str(plain["workspace"] // 3)}
    got, rep = adversary(host_lib, preload_lib, tmp_path, case, limit)
    return expected, plain, got, rep


@pytest.mark.parametrize("case", ["reused_graph", "reused_tensors", "initialized"])
def test_addresses_reused_or_reset_never_resolve_stale_data(
    host_lib: Path, preload_lib: Path, tmp_path: Path, case: str
) -> None:
    expected, plain, got, rep = under_limit(host_lib, preload_lib, tmp_path, case)
    assert plain["status"] == 0 and rep["status"] == 0, (plain, rep)
    # The allocator did hand old addresses out again: the operation graph's always (the case's point), the
    # tensors' and operation's where it would (reported; glibc's coalescing decides).
    assert rep.get("reused", [True])[-1], rep
    close(got, expected)  # all N samples, not the half-batch graph's
    stats = rep["stats"]
    assert stats["graph_split_plans"] == 1 and stats["graph_micro_batches"] >= 3, stats


def test_malformed_variant_packs_get_cudnns_statuses(host_lib: Path, preload_lib: Path, tmp_path: Path) -> None:
    expected, plain, got, rep = under_limit(host_lib, preload_lib, tmp_path, "packs")
    # [Finalize's status (-1: not finalized or not a pack), Execute's]: what cuDNN 9.19 answers on an H100
    # (PyTorch 2.11's wheel, the same packs on an fprop plan): extra uids ignored, a pack never finalized but whole
    # runs, BAD_PARAM (2000) for counts that differ, an empty pack, a missing uid, a NULL data or workspace pointer
    # and a NULL pack. (cuDNN crashes on a descriptor of another kind; the host backend and the shim say 2000.)
    cudnn = [[0, 0], [-1, 0], [2000, 2000], [0, 2000], [0, 2000], [0, 2000], [0, 2000], [-1, 2000], [-1, 2000]]
    assert plain["statuses"] == cudnn
    assert rep["statuses"] == cudnn  # the shim, running its own micro-batched plan
    assert rep["stats"]["graph_split_plans"] == 1
    close(got, expected)


def test_a_full_record_table_never_fails_a_plan_it_took_over(host_lib: Path, preload_lib: Path, tmp_path: Path) -> None:
    expected, _, got, rep = under_limit(host_lib, preload_lib, tmp_path, "full_table")
    assert rep["status"] == 0, rep
    close(got, expected)
    assert rep["stats"]["graph_unrecorded"] > 0 and rep["stats"]["graph_micro_batches"] >= 3, rep["stats"]


def test_a_16_bit_weight_gradient_is_not_split(host_lib: Path, preload_lib: Path, tmp_path: Path) -> None:
    expected, plain, got, rep = under_limit(host_lib, preload_lib, tmp_path, "fp16_wgrad")
    assert plain["status"] == 0 and rep["status"] == 0, (plain, rep)
    stats = rep["stats"]
    assert stats["graph_conv_plans"] == 1 and stats["graph_split_plans"] == 0, stats
    assert stats["graph_micro_batches"] == 0, stats
    close(got.astype(np.float32), expected.astype(np.float32), 2e-2)


def test_engine_configurations_answer_the_micro_batched_workspace(
    host_lib: Path, preload_lib: Path, tmp_path: Path
) -> None:
    """The v1 API filters heuristics configurations by ENGINECFG_WORKSPACE_SIZE before building plans."""
    expected, plain, got, rep = under_limit(host_lib, preload_lib, tmp_path, "config_workspace")
    limit = plain["workspace"] // 3
    assert plain["cfg_workspace"] == plain["workspace"]
    assert 0 < rep["cfg_workspace"] <= limit and rep["workspace"] == rep["cfg_workspace"], rep
    assert rep["status"] == 0
    close(got, expected)


def test_an_offered_variant_reads_one_knob_more_answered_by_the_shim(
    host_lib: Path, preload_lib: Path, tmp_path: Path
) -> None:
    """cudnn_frontend's Python package keeps one configuration per (engine, knobs): the variant offered to a client
    short of memory must differ from its original there. Its knob choices read one more (a knob type it does not
    choose, a value reserved for ucudnn); every other configuration's read as the library's; odd reads of that knob
    get the statuses the library gives for the same knob held by itself, and a knob descriptor its owner resets is
    the library's again."""
    expected, plain = adversary(host_lib, preload_lib, tmp_path, "variant_knob", None)
    # 4 KiB: less than the first engine needs at N = 8 (83 KB), more than its workspace at one sample.
    got, rep = adversary(host_lib, preload_lib, tmp_path, "variant_knob", {"UCUDNN_HOST_DEVICE_MEMORY": "4096"})
    assert rep["stats"]["graph_offers"] == 1, rep["stats"]
    # The host backend's engines have no knobs; the variant, right after the first, reads ucudnn's: [status, type,
    # status, value].
    assert plain["knobs"] == [[]] * len(plain["knobs"]) and len(plain["knobs"]) >= 2, plain
    # A knob type the configuration does not choose (cuDNN's WORKSPACE, 25), a value reserved for ucudnn.
    assert rep["knobs"] == [*plain["knobs"][:1], [[0, 25, 0, 0x75637564]], *plain["knobs"][1:]], rep["knobs"]
    assert rep["odd_reads"] == rep["library_reads"], rep
    assert [r[0] for r in rep["odd_reads"]] == [2010, 2010, 0, 2000, 2002], rep["odd_reads"]
    assert rep["count_query"] == [0, 1], rep
    assert "reset" not in plain and rep["reset"] == rep["fresh"] == plain["fresh"] != 0, (plain, rep)
    assert rep["status"] == plain["status"] == 0
    close(got, expected)
