"""Plain convolution calls (no algorithm list asked for) through the preload library, on the host backend and, with
marker ``gpu``, on a GPU's real cuDNN (``plain_call_probe.py``): planned at the call, on the call's own buffers
where it overwrites its output and on buffers of cuDNN's own where it accumulates, every output equal to cuDNN's
alone. The host backend's figures under a full device: tests/preload/test_search_memory.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._env import ROOT, project_pythonpath
from tests.conftest import CUPY_INSTALL, cupy_unavailable_reason

SIZES = 5  # N = 16 under powerOfTwo: 16, 8, 4, 2, 1


@pytest.mark.parametrize("backend", ["host", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_plain_calls_plan_on_their_own_buffers_and_match_cudnn_alone(backend: str, tmp_path: Path) -> None:
    if backend == "cuda" and (reason := cupy_unavailable_reason()):
        pytest.skip(f"{reason}; needs {CUPY_INSTALL}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_")}
    env |= {"UCUDNN_DATABASE": str(tmp_path / "cache.sqlite"), "PYTHONPATH": project_pythonpath(os.environ)}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.bench.plain_call_probe", "--backend", backend],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [(r["op"], r["beta"]) for r in rows] == [
        (op, beta) for op in ("fwd", "bwd-data", "bwd-filter") for beta in (0.0, 1.0)
    ], proc.stdout  # fmt: skip
    for r in rows:
        assert r["rel_err"] <= r["tolerance"], r
        assert r["planned"] > 0, r  # the calls ran ucudnn's plan, not cuDNN's call passed through
        if r["beta"] == 0.0:
            assert r["call_buffer_benchmarks"] == SIZES, r
        else:
            assert r["call_buffer_benchmarks"] == 0, r
