"""The backends' pieces that need no native library: output comparison on the host and on the cuda path.

The cuda backend runs here on a NumPy stand-in for CuPy (tests/bench/fake_cupy.py) with the host backend's
libcudnn.so.9 as its "real" cuDNN, in a subprocess (loading the native libraries is process-global).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._env import project_pythonpath
from tests.bench import fake_cupy
from ucudnn import _paths
from ucudnn.bench.backends import Backend, CudaBackend, HostBackend


def host_backend() -> Backend:
    return object.__new__(HostBackend)  # compare needs no library


def cuda_backend() -> Backend:
    b = object.__new__(CudaBackend)
    b.cp = fake_cupy
    b.stream = fake_cupy.cuda.Stream(non_blocking=True)
    return b


@pytest.mark.parametrize("make", [host_backend, cuda_backend], ids=["host", "cuda"])
def test_compare_returns_max_error_and_scale(make: Any) -> None:
    b = make()
    as_device = fake_cupy.asarray if isinstance(b, CudaBackend) else np.asarray
    ref = np.linspace(-4.0, 2.0, 24, dtype=np.float32).reshape(2, 3, 4)
    got = ref.copy()
    got[1, 2, 3] += 0.5
    err, scale = b.compare(as_device(got), as_device(ref))
    assert err == pytest.approx(0.5) and scale == 4.0
    assert b.compare(as_device(ref), as_device(ref)) == (0.0, 4.0)
    # A NaN left by a skipped micro-batch, or an infinity, is an infinite error, never a match.
    for bad in (math.nan, math.inf):
        got[0, 0, 0] = bad
        err, _ = b.compare(as_device(got), as_device(ref))
        assert err == math.inf
    empty = np.zeros((0, 3), dtype=np.float32)
    assert b.compare(as_device(empty), as_device(empty)) == (0.0, 0.0)


TINY = """label,w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,stride_w,stride_h
cifar_conv3,8,8,32,8,64,5,5,2,2,1,1
cifar_conv2,16,16,32,6,32,5,5,2,2,1,1
"""


def test_cuda_path_runs_on_a_stand_in(tmp_path: Path) -> None:
    """``--backend cuda`` end to end on fake_cupy: calls per sample sized for a 2 ms sample (10, the most, for
    these microsecond kernels), device-side comparison, outputs that match, micro-batched plans checked before
    timing."""
    problems = tmp_path / "tiny.csv"
    problems.write_text(TINY)
    out_json = tmp_path / "r.json"
    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys\n"
        "from tests.bench import fake_cupy\n"
        "sys.modules['cupy'] = fake_cupy\n"
        "from ucudnn.bench.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = {
        **os.environ,
        "UCUDNN_REAL_LIBCUDNN": str(_paths.HOST_CUDNN),
        "UCUDNN_HOST_TIMING": "model",  # deterministic Find, so the plans below are the same on every machine
        "UCUDNN_DATABASE": str(tmp_path / "cache.sqlite"),
        "PYTHONPATH": project_pythonpath(os.environ),
    }
    args = ["--backend", "cuda", "--problems", str(problems), "--ops", "fwd", "--workspace", "16KiB,2MiB",
            "--repeat", "1", "--json", str(out_json), "--progress", "none", "-v"]  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=root, timeout=240
    )
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out_json.read_text())
    assert doc["meta"]["backend"] == "cuda" and doc["meta"]["calls_per_sample"] == "auto"
    assert doc["meta"]["device"].startswith("fake GPU") and doc["meta"]["timing"] == "cuda-events-gated"
    rows = doc["rows"]
    assert len(rows) == 4 and all(row["status"] == "ok" for row in rows), rows
    for row in rows:
        assert row["output_match"] and row["rel_error"] <= row["tolerance"], row
        assert row["calls_per_sample"] == 10 and row["passthrough_calls"] == 0, row
        assert row["ucudnn_host_us_per_call"] > 0 and row["undivided_host_us_per_call"] > 0, row
    assert any(sum(m["count"] for m in row["micro_batches"]) > 1 and row["verified"] for row in rows), rows
    # Samples sized for 0.02 ms: the modelled kernels take at least 5 us, so 2 to 4 calls (never fewer than 2).
    short = [*args[: args.index("--workspace") + 1], "2MiB", "--repeat", "1", "--json", str(out_json),
             "--sample-ms", "0.02"]  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-c", code, *short], capture_output=True, text=True, env=env, cwd=root, timeout=240
    )
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out_json.read_text())
    assert doc["meta"]["sample_ms"] == 0.02
    assert all(row["status"] == "ok" and 2 <= row["calls_per_sample"] <= 4 for row in doc["rows"]), doc["rows"]


class _Clock:
    """The host's clock as ``sample`` reads it: each call of the sampled function advances it by ``call_s``."""

    def __init__(self, call_s: float) -> None:
        self.now, self.call_s = 0.0, call_s

    def perf_counter(self) -> float:
        return self.now

    def call(self) -> None:
        self.now += self.call_s


def _gated_backend(monkeypatch: pytest.MonkeyPatch, clock: _Clock) -> Backend:
    from ucudnn.bench import backends

    monkeypatch.setattr("ucudnn.bench.backends.time.perf_counter", clock.perf_counter)
    b = cuda_backend()
    b._start, b._end = fake_cupy.cuda.Event(), fake_cupy.cuda.Event()  # type: ignore[attr-defined]
    b._host_us = 200.0  # type: ignore[attr-defined]
    b._gate = fake_cupy.RawKernel(backends._GATE_SOURCE, "ucudnn_bench_gate")  # type: ignore[attr-defined]
    fake_cupy.RawKernel.launches.clear()
    return b


def test_a_gpu_sample_queues_its_calls_behind_a_gate_longer_than_their_issue(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each sample launches the gate first, sized from the host's last issue time per call (twice it, times the
    calls, plus 0.2 ms), so the calls queue up and the events time the GPU running them back to back."""
    clock = _Clock(call_s=50e-6)  # the host spends 50 us issuing each call
    b = _gated_backend(monkeypatch, clock)
    first = b.sample(clock.call, 10)
    second = b.sample(clock.call, 10)
    assert first.host_us_per_call == pytest.approx(50.0) and second.host_us_per_call == pytest.approx(50.0)
    # First gate from the initial guess (200 us a call), then from what was measured (50 us a call).
    assert fake_cupy.RawKernel.launches == [200_000 + 2 * 200_000 * 10, 200_000 + 2 * 50_000 * 10]


def test_a_sample_issued_slower_than_its_gate_is_taken_again_behind_a_longer_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _Clock(call_s=2e-3)  # 2 ms a call: 20 ms for the sample, past the first gate's 4.2 ms
    b = _gated_backend(monkeypatch, clock)
    b.sample(clock.call, 10)
    assert fake_cupy.RawKernel.launches == [4_200_000, 200_000 + 2 * 2_000_000 * 10]


def test_without_a_compiler_for_the_gate_samples_are_taken_ungated(monkeypatch: pytest.MonkeyPatch) -> None:
    from ucudnn.bench import backends

    monkeypatch.setattr(fake_cupy.RawKernel, "fail_compile", True)
    assert backends._compile_gate(fake_cupy) is None
    clock = _Clock(call_s=50e-6)
    b = _gated_backend(monkeypatch, clock)
    b._gate = None  # type: ignore[attr-defined]
    sample = b.sample(clock.call, 4)
    assert fake_cupy.RawKernel.launches == [] and sample.host_us_per_call == pytest.approx(50.0)


def test_a_host_sample_is_the_least_of_its_timings() -> None:
    """On busy shared cores a time slice of other work lands on one call in a few: it only ever adds time, so a
    wall-clock sample keeps the least of its timings (both sides of a comparison alike)."""
    from ucudnn.bench.backends import Sample, least_of

    taken = iter([Sample(7.6, 7600.0), Sample(3.6, 3600.0), Sample(7.7, 7700.0)])
    assert least_of(3, lambda: next(taken)) == Sample(3.6, 3600.0)
    single = iter([Sample(7.6, 7600.0), Sample(1.0, 1.0)])
    assert least_of(1, lambda: next(single)) == Sample(7.6, 7600.0)
