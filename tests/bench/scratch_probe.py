"""Planner benchmarks in a Python host whose ``torch`` (a stand-in, no GPU) has a caching allocator, on the host
backend, under a 4 MiB limit that makes the preload library split one forward convolution (N = 16):

- ``--api graph``: a graph with the fastest engine, planned (its workspace asked) and executed once;
- ``--api legacy``: ``cudnnGetConvolutionForwardAlgorithm_v7`` asked (the query plans), then the convolution run with
  the first algorithm and workspace listed, as PyTorch's legacy path does.

Prints one JSON line: the shim's counters, the stand-in allocator's, the plan the shim made, and the output's
largest difference from the undivided call on cuDNN itself.

    python -m tests.bench.scratch_probe --api graph|legacy [--summary]

Run in a process of its own with UCUDNN_DATABASE set; UCUDNN_HOST_FIND_MEMORY and UCUDNN_SCRATCH_FROM_FRAMEWORK
as the test wants them.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from typing import Any

import numpy as np

LIMIT = 4 << 20
ENGINE = 7  # the host backend's fastest forward algorithm at this size (engine i is algorithm i)
COUNTERS = ("planned", "legacy_benchmarks", "graph_split_plans", "graph_benchmarks", "benchmarks_short_of_memory",
            "framework_scratch_allocs", "framework_scratch_refused", "scratch_searches")  # fmt: skip


class StandInAllocator:
    """PyTorch's ``caching_allocator_alloc``/``caching_allocator_delete`` on host memory (256-byte aligned); with
    ``lend_max``, larger asks are refused as PyTorch's are when it runs out (torch.OutOfMemoryError)."""

    def __init__(self, lend_max: int | None = None) -> None:
        self.live: dict[int, Any] = {}
        self.allocs = self.frees = 0
        self.sizes: list[int] = []  # of every allocation, in order
        self.lend_max, self.refused = lend_max, 0

    def alloc(self, nbytes: int, device: Any = None, stream: Any = None) -> int:
        if self.lend_max is not None and nbytes > self.lend_max:
            self.refused += 1
            raise MemoryError(f"stand-in: {nbytes} bytes refused")
        block = np.zeros(nbytes + 256, dtype=np.uint8)
        address = (block.ctypes.data + 255) // 256 * 256
        self.live[address] = block
        self.allocs += 1
        self.sizes.append(nbytes)
        return address

    def delete(self, address: int) -> None:
        del self.live[address]
        self.frees += 1


def install_torch(allocator: StandInAllocator) -> None:
    """A ``torch`` whose CUDA state is up, with nothing cached and the stand-in allocator."""
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        is_initialized=lambda: True, current_device=lambda: 0, memory_reserved=lambda device=None: 0,
        memory_allocated=lambda device=None: 0, caching_allocator_alloc=allocator.alloc,
        caching_allocator_delete=allocator.delete,
    )  # fmt: skip
    torch.backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(deterministic=False))  # type: ignore[attr-defined]
    torch.are_deterministic_algorithms_enabled = lambda: False  # type: ignore[attr-defined]
    sys.modules["torch"] = torch


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--api", choices=("graph", "legacy"), required=True)
    parser.add_argument(
        "--summary", action="store_true", help="the exit summary line on (the backend silences it as it closes)"
    )
    parser.add_argument("--lend-max", type=int, help="the stand-in allocator refuses larger asks")
    args = parser.parse_args()
    api = args.api
    allocator = StandInAllocator(args.lend_max)
    install_torch(allocator)
    from ucudnn import bridge
    from ucudnn.bench.backends import open_backend
    from ucudnn.bench.capi import Descriptors
    from ucudnn.bench.problems import Problem
    from ucudnn.cudnn import Op
    from ucudnn.graph_api import ConvGraph

    b = open_backend("host")
    try:
        p = Problem("scratch", w=28, h=28, c=64, n=16, k=64, filter_w=3, filter_h=3, pad_w=1, pad_h=1, stride_w=1,
                    stride_h=1)  # fmt: skip
        d = Descriptors.make(b.real, p)
        op = Op.parse("fwd")
        s0, s1, s2 = d.operand_shapes(op)
        in0, in1, out = b.random(s0, 1), b.random(s1, 2), b.filled(s2, 0.0)
        x, w, y = op.roles(b.ptr(in0), b.ptr(in1), b.ptr(out))
        full_ws = 64 << 20
        ws = b.workspace(full_ws)
        b.issue(b.real.executor(b.handle, op, *d.args(), ENGINE, (x, w, y), ws, full_ws), 1)
        ref = b.snapshot(out)
        bridge.set_option("UCUDNN_DEFAULT_WORKSPACE_LIMIT", str(LIMIT))
        b.fill(out, float("nan"))
        try:
            if api == "graph":
                graph = ConvGraph(b.graph, b.handle.ptr or 0, "fwd", d.x_shape, d.w_shape, d.y_shape, (1, 1), (1, 1),
                                  ENGINE)  # fmt: skip
                try:
                    b.issue(graph.executor(x, w, y, ws), 1)
                    plan = bridge.graph_plan(graph.plan)
                    workspace = graph.workspace_bytes
                finally:
                    graph.close()
                plan = plan.get("main") or plan
            else:
                first = b.hooked.get_v7(b.handle, op, *d.args())[0]
                workspace = first.memory_bytes
                b.issue(b.hooked.executor(b.handle, op, *d.args(), first.algo, (x, w, y), ws, workspace), 1)
                plan = bridge.last_plan()
            err, scale = b.compare(out, ref)
            stats = bridge.stats()
            print(json.dumps({
                "workspace_bytes": workspace, "rel_err": err / max(scale, 1e-30),
                "stats": {k: stats[k] for k in COUNTERS},
                "allocator": {"allocs": allocator.allocs, "frees": allocator.frees, "live": len(allocator.live),
                              "sizes": allocator.sizes, "refused": allocator.refused},
                "plan": plan,
            }), flush=True)  # fmt: skip
        finally:
            d.close()
    finally:
        b.close()
    if args.summary:  # the backend silenced it as it closed
        bridge.set_option("UCUDNN_LOG_LEVEL", "warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
