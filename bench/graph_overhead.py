"""Cost of the preload library on the graph-API path, per call, against the direct call.

``python -m ucudnn.bench.graph_overhead [--rounds R] [--iters I] [--json]``

In a child process with ``LD_PRELOAD=libucudnn.so`` over the host backend, one tiny convolution graph (N=2, 3x3
on 4x4, one channel: 64 bytes a sample, so every part keeps the 16-byte alignment) is built and executed two ways
side by side: through the exported symbols, which the preload library binds (its hooks record every descriptor
call and look the plan up at Execute), and through the host backend's own symbols (no shim). Measured per call:
building the graph's descriptors (create, set, finalize, destroy: what a framework pays once per new shape), and
``cudnnBackendExecute`` of a plan the shim passes through (the default, no limit) and of a plan it runs as
micro-batches (the shim's fallback without a planner, under a limit of one sample's workspace: two parts; per
micro-batch, the time beyond the undivided call's, which includes a variant pack built and one more execution).
Calls are made through ctypes, whose cost is the same on both sides; rounds alternate the order, and each figure
is the median over rounds of the per-call difference. The host backend's convolution itself takes well under a
microsecond here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from ucudnn import _paths

SHAPES = {"x": (2, 1, 4, 4), "w": (1, 1, 3, 3), "y": (2, 1, 4, 4)}


def _per_call_ns(fn: Callable[[], None], iters: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(iters):
        fn()
    return (time.perf_counter_ns() - t0) / iters


def _child(rounds: int, iters: int) -> dict[str, Any]:
    import ctypes

    import numpy as np

    from ucudnn.graph_api import Backend, ConvGraph

    real = ctypes.CDLL(str(_paths.HOST_CUDNN))
    hooked_api, real_api = Backend(ctypes.CDLL(None)), Backend(real)
    handle = ctypes.c_void_p()
    assert real.cudnnCreate(ctypes.byref(handle)) == 0
    x, w, y = (np.ones(SHAPES[k], np.float32) for k in "xwy")
    ws = np.zeros(1 << 16, np.uint8)
    ptrs = (x.ctypes.data, w.ctypes.data, y.ctypes.data, ws.ctypes.data)
    # The mechanism is what is measured, not a planner's choice: a planner that always declines leaves the shim's
    # fallback (the caller's engine, split at the largest size that fits), as in a C host without a planner.
    planner_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    declining = planner_type(lambda request, reply: 2)
    ctypes.CDLL(None).ucudnn_set_planner(declining)
    set_option = ctypes.CDLL(None).ucudnn_set_option
    set_option.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
    stats_json = ctypes.CDLL(None).ucudnn_stats_json
    stats_json.restype = ctypes.c_size_t

    def micro_batches() -> int:
        buf = ctypes.create_string_buffer(1 << 16)
        stats_json(buf, ctypes.c_size_t(len(buf)))
        return int(json.loads(buf.value.decode())["graph_micro_batches"])

    def build(api: Backend, n: int = 2) -> ConvGraph:
        x_shape, y_shape = (n, *SHAPES["x"][1:]), (n, *SHAPES["y"][1:])
        return ConvGraph(api, handle.value or 0, "fwd", x_shape, SHAPES["w"], y_shape, (1, 1), (1, 1), 2)

    def build_and_drop(api: Backend) -> Callable[[], None]:
        def run() -> None:
            build(api).close()

        return run

    for api in (hooked_api, real_api):  # first calls (library set-up) are not what is measured
        build_and_drop(api)()
    results: dict[str, list[float]] = {"build": [], "execute": [], "execute_split_per_part": []}
    for r in range(rounds):
        order = (hooked_api, real_api) if r % 2 == 0 else (real_api, hooked_api)
        set_option(b"UCUDNN_DEFAULT_WORKSPACE_LIMIT", b"auto")  # plans pass through: recording alone is measured
        build_ns = {id(api): _per_call_ns(build_and_drop(api), max(1, iters // 20)) for api in order}
        results["build"].append(build_ns[id(hooked_api)] - build_ns[id(real_api)])
        through, direct = build(hooked_api), build(real_api)
        calls = {"through": through.executor(*ptrs), "direct": direct.executor(*ptrs)}
        sides = ("through", "direct") if r % 2 == 0 else ("direct", "through")
        times = {k: _per_call_ns(calls[k], iters) for k in sides}
        results["execute"].append(times["through"] - times["direct"])
        through.close()
        direct.close()
        # Split: the GEMM engine's workspace grows with N; a limit of one sample's splits N=2 into two parts.
        probe = build(real_api, 1)
        one_sample = probe.workspace_bytes
        probe.close()
        set_option(b"UCUDNN_DEFAULT_WORKSPACE_LIMIT", str(one_sample).encode())
        split = build(hooked_api)
        whole = build(real_api)
        call_split, call_whole = split.executor(*ptrs), whole.executor(*ptrs)
        before = micro_batches()
        t_split, t_whole = _per_call_ns(call_split, iters), _per_call_ns(call_whole, iters)
        if micro_batches() - before != 2 * iters:
            raise RuntimeError(f"the plan did not run as 2 micro-batches ({split.workspace_bytes} B reported)")
        results["execute_split_per_part"].append((t_split - t_whole) / 2)
        split.close()
        whole.close()
    return {k: statistics.median(v) for k, v in results.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ucudnn.bench.graph_overhead", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--iters", type=int, default=20000)
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rounds < 1 or args.iters < 20:
        p.error("--rounds must be >= 1 and --iters >= 20")
    if args.child:
        print(json.dumps(_child(args.rounds, args.iters)))
        return 0
    for path in (_paths.PRELOAD, _paths.HOST_CUDNN):
        if not path.exists():
            print(f"ucudnn: {path} is not built; reinstall with `pip install .`", file=sys.stderr)
            return 2
    env = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_")}
    env["LD_PRELOAD"] = str(_paths.PRELOAD)
    env["UCUDNN_VERIFY_SAMPLES"] = "0"  # the split runs as built: what is measured is its mechanism
    cmd = [sys.executable, "-m", "ucudnn.bench.graph_overhead", "--child", "--rounds", str(args.rounds)]
    proc = subprocess.run([*cmd, "--iters", str(args.iters)], env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        print(f"ucudnn: the measuring process failed: {proc.stderr.strip()}", file=sys.stderr)
        return 1
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"graph-API path, host backend, median of {args.rounds} rounds, ns per call through the preload library "
          "beyond the direct call:")
    rows = (
        ("building one convolution graph (descriptors, plan; recorded)", figures["build"]),
        ("cudnnBackendExecute, a plan passed through", figures["execute"]),
        ("cudnnBackendExecute, a split plan, per micro-batch", figures["execute_split_per_part"]),
    )
    for what, ns in rows:
        print(f"  {what:<62} {ns:10.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
