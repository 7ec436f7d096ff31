"""Run by test_graph_split.py, with or without LD_PRELOAD=libucudnn.so: one convolution graph built and run by
tests/host/graph_driver.c the way cudnn_frontend builds graphs (the workspace it allocates is what the plan
reports), on seeded data. Writes the array the op computed (out.npy), the plan's outcome and, under the preload
library, the shim's counters (report.json).

Usage: graph_host.py HOST_LIBCUDNN SPEC_JSON OUT_DIR, SPEC_JSON keys: op (0 fwd, 1 dgrad, 2 wgrad), n, c, k,
size, engine, alpha, beta, fused (forward: relu(conv + z_alpha * z + bias)), repeat (executions of the plan;
model_ms is the last one's, on the host backend's model clock), real_order / benchmark / capacity (PyTorch 2.11's
order in either benchmark mode, see graph_driver.c's run_real), no_planner (register a planner that always fails,
so the shim's fallback decides, as in a C host without its embedded planner), start_after (tests/_start.py's go file:
the graph is built once it exists, so ranks started together plan at the same moment), skew ([engine, factor]: the
planner's benchmarks report factor x that engine's measured time, so a plan can look faster than it runs, as
UCUDNN_HOST_FIND_SKEW does for the legacy Find).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tests._start import ready_then_wait
from tests.host import _graph as G
from ucudnn import bridge
from ucudnn import testing as T
from ucudnn.optimizer import AlgoPerf

# Where a framework's buffers start: cudaMalloc returns 256-byte aligned memory (PyTorch's caching allocator 512).
DEVICE_ALIGNMENT = 256


def device_like(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` whose data starts at a DEVICE_ALIGNMENT boundary. A tensor's byte alignment is part of a
    graph's key (as in cudnn_frontend); the heap's alignment of a NumPy buffer follows the process's earlier
    allocations, which change with the environment, so two processes would see two different kernels."""
    raw = np.empty(a.nbytes + DEVICE_ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % DEVICE_ALIGNMENT
    out = raw[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def skew_benchmarks(engine: int, factor: float) -> None:
    """The planner's benchmarks (the shim's timings of the graph's engines) report ``factor`` x ``engine``'s time."""
    measure = bridge.benchmark

    def skewed(bench_ctx: Any, batch: int, capacity: int) -> list[AlgoPerf]:
        return [dataclasses.replace(p, time_ms=p.time_ms * factor) if p.algo == engine and math.isfinite(p.time_ms)
                else p for p in measure(bench_ctx, batch, capacity)]  # fmt: skip

    bridge.benchmark = skewed


def main() -> int:
    spec = json.loads(sys.argv[2])
    out = Path(sys.argv[3])
    if spec.get("no_planner") and bridge.shim_loaded():
        # A planner that always fails: the shim's fallback (a C host without its embedded planner) decides.
        bridge.set_planner(lambda request, reply: 2)
    if spec.get("skew"):
        skew_benchmarks(*spec["skew"])
    if spec.get("start_after"):
        ready_then_wait(spec["start_after"])
    driver = G.Driver(Path(sys.argv[1]))
    n, c, k, s = spec["n"], spec["c"], spec["k"], spec["size"]
    f, groups = spec.get("filt", 3), spec.get("groups", 1)
    rng = np.random.default_rng(spec.get("seed", 0))
    params = T.ConvParams.make(2, pad=spec.get("pad", 1), stride=spec.get("stride", 1), dilation=spec.get("dil", 1),
                               groups=groups)  # fmt: skip
    x = device_like(rng.uniform(-1, 1, (n, c, s, s)).astype(np.float32))
    w = device_like(rng.uniform(-1, 1, (k, c // groups, f, f)).astype(np.float32))
    y_shape = T.output_shape(x.shape, w.shape, params)
    y = device_like(rng.uniform(-1, 1, y_shape).astype(np.float32))
    fused = None
    if spec.get("fused"):
        z = device_like(rng.uniform(-1, 1, (n, k, s, s)).astype(np.float32))
        bias = device_like(rng.uniform(-1, 1, (1, k, 1, 1)).astype(np.float32))
        fused = (z, bias, 0.5)
    outcome = driver.run(
        spec["op"], x, w, y, params, engine=spec.get("engine", -1), alpha=spec.get("alpha", 1.0),
        beta=spec.get("beta", 0.0), fused=fused, repeat=spec.get("repeat", 1),
        real_order=spec.get("real_order", False), benchmark=spec.get("benchmark", False),
        capacity=spec.get("capacity", -1),
    )  # fmt: skip
    np.save(out / "out.npy", (y, x, w)[spec["op"]])
    report: dict[str, object] = {
        "status": outcome.status, "stage": outcome.stage, "workspace": outcome.workspace, "model_ms": outcome.model_ms,
        "configs": outcome.configs, "plans": outcome.plans, "ran": outcome.ran,
        "addresses": [a.ctypes.data for a in (x, w, y, *(fused or ())[:2])],
    }  # fmt: skip
    if bridge.shim_loaded():
        report["stats"] = bridge.stats()
    (out / "report.json").write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
