"""Plain convolution calls (no algorithm list asked for) through the preload library, on the host backend and, with
marker ``gpu``, on a GPU's real cuDNN (``plain_call_probe.py``): planned at the call, on the call's own buffers
where it overwrites its output and on buffers of cuDNN's own where it accumulates, every output equal to cuDNN's
alone. The host backend's figures under a full device: tests/preload/test_search_memory.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests._env import run_json_probe
from tests.conftest import CUPY_INSTALL, cupy_unavailable_reason

SIZES = 5  # N = 16 under powerOfTwo: 16, 8, 4, 2, 1


CALLS = 4  # plain_call_probe.CALLS


def _probe(tmp_path: Path, backend: str, *options: str) -> list[dict[str, Any]]:
    """The probe's JSON lines, run in a process of its own (the host backend on its model clock)."""
    if backend == "cuda" and (reason := cupy_unavailable_reason()):
        pytest.skip(f"{reason}; needs {CUPY_INSTALL}")
    env = {"UCUDNN_DATABASE": str(tmp_path / "cache.sqlite")}
    if backend == "host":
        env["UCUDNN_HOST_TIMING"] = "model"
    rows = run_json_probe("tests.bench.plain_call_probe", "--backend", backend, *options, env=env, timeout=600)
    for r in rows:
        assert r["rel_err"] <= r["tolerance"], r
    return rows


@pytest.mark.parametrize("backend", ["host", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_plain_calls_plan_on_their_own_buffers_and_match_cudnn_alone(backend: str, tmp_path: Path) -> None:
    rows = _probe(tmp_path, backend)
    assert [(r["op"], r["beta"]) for r in rows] == [
        (op, beta) for op in ("fwd", "bwd-data", "bwd-filter") for beta in (0.0, 1.0)
    ], rows  # fmt: skip
    for r in rows:
        assert r["planned"] == CALLS, r  # every call ran ucudnn's plan, none passed through
        if r["beta"] == 0.0:
            assert r["call_buffer_benchmarks"] == SIZES, r
        else:
            assert r["call_buffer_benchmarks"] == 0, r


@pytest.mark.parametrize("backend", ["host", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_captured_stream_runs_the_plans_it_has_and_plans_nothing(backend: str, tmp_path: Path) -> None:
    # While a stream is captured into a CUDA graph a search would be captured too (or invalidate the capture by
    # synchronising): the preload library makes no plan then, as the graph path decides none. A kernel planned
    # before runs its plan, its check waiting; a new one runs as cuDNN alone and is planned after. On a GPU every
    # captured call is launched as a CUDA graph, and its output compared with cuDNN alone's.
    before, planned, new, after = _probe(tmp_path, backend, "--capture")
    assert before["planned"] == 12 and before["verify_executions"] > 0, before
    assert planned["planned"] == CALLS and planned["verify_executions"] == 0, planned
    assert planned["capture_deferred_plans"] == 0 and planned["call_buffer_benchmarks"] == 0, planned
    assert new["passthrough"] == CALLS and new["planned"] == 0 and new["micro_batches"] == 0, new
    assert new["capture_deferred_plans"] == CALLS and new["call_buffer_benchmarks"] == 0, new
    assert after["planned"] == CALLS and after["capture_deferred_plans"] == 0, after
    if backend == "host":  # the timing model: the divided plan wins its check; passed through, bit for bit
        assert before["micro_batches"] > 12 and planned["micro_batches"] > CALLS, (before, planned)
        assert new["rel_err"] == 0.0, new
