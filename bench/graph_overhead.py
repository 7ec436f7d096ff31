"""Cost of the preload library on the graph-API path, per call, against the direct call.

``python -m ucudnn.bench.graph_overhead [--rounds R] [--iters I] [--live-plans 1,1000,10000] [--json]``

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

The live-plans axis: with 1, 1,000 and 10,000 finalized plans alive in the process (PyTorch's plan cache holds up
to 10,000), the cost beyond the direct call of one ``cudnnBackendExecute`` of a plan passed through, and of one
variant-pack cycle (create, set uids, pointers and workspace, finalize, destroy), side by side.

Under the default with no memory pressure (UCUDNN_HOST_DEVICE_MEMORY set to 1 GiB, as a GPU's free memory would
be, so the shim looks for pressure as it does there): one heuristics query as cudnn_frontend makes it (a heuristics
descriptor on the graph, the count query, that many configurations filled, all destroyed), without a framework
source (a C/C++ host) and with ucudnn's Python one answering for a stand-in ``torch`` module (the GIL and the
callback; real torch's allocator queries add their own cost); and a training-step-like loop: one fprop, dgrad and
wgrad execution of a small layer per step (N=4, 8 channels, 8x8, direct engines), steps through the preload
library and direct alternating one by one; time per step on each side, and their ratio per round.
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
from pathlib import Path
from typing import Any

from ucudnn import _paths

SHAPES = {"x": (2, 1, 4, 4), "w": (1, 1, 3, 3), "y": (2, 1, 4, 4)}


def _per_call_ns(fn: Callable[[], None], iters: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(iters):
        fn()
    return (time.perf_counter_ns() - t0) / iters


def _child(rounds: int, iters: int, live_counts: list[int]) -> dict[str, Any]:
    import ctypes

    import numpy as np

    from ucudnn import bridge
    from ucudnn.cudnn import UnhookedCDLL
    from ucudnn.graph_api import Backend, ConvGraph

    real = UnhookedCDLL(str(_paths.HOST_CUDNN))  # a plain CDLL's lookups would give the hooks
    hooked_api, real_api = Backend(ctypes.CDLL(None)), Backend(real)
    handle = ctypes.c_void_p()
    assert real.cudnnCreate(ctypes.byref(handle)) == 0
    x, w, y = (np.ones(SHAPES[k], np.float32) for k in "xwy")
    ws = np.zeros(1 << 16, np.uint8)
    ptrs = (x.ctypes.data, w.ctypes.data, y.ctypes.data, ws.ctypes.data)
    # The mechanism is what is measured, not a planner's choice: a planner that always declines leaves the shim's
    # fallback (the caller's engine, split at the largest size that fits), as in a C host without a planner.
    bridge.set_planner(lambda request, reply: 2)

    def micro_batches() -> int:
        return int(bridge.stats()["graph_micro_batches"])

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
        bridge.set_option("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "auto")  # plans pass through: recording alone is measured
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
        bridge.set_option("UCUDNN_DEFAULT_WORKSPACE_LIMIT", str(one_sample))
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
    figures: dict[str, Any] = {k: statistics.median(v) for k, v in results.items()}
    bridge.set_option("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "auto")
    figures |= _no_pressure(hooked_api, real_api, handle.value or 0, rounds, iters)
    figures["live"] = _live_axis(hooked_api, real_api, handle.value or 0, ptrs, rounds, iters, live_counts)
    return figures


def _no_pressure(hooked: Any, real: Any, handle: int, rounds: int, iters: int) -> dict[str, float]:
    """Heuristics queries (ns beyond the direct ones, without and with a framework source) and a training-step-like
    loop (us per step through the shim and direct) under the default, with room for every workspace."""
    # _runtime registers its planner and framework source; the declining planner stays in use
    from ucudnn import _runtime, bridge

    bridge.set_planner(lambda request, reply: 2)
    out = _heuristics_overhead(hooked, real, handle, rounds, iters) | _step_overhead(
        hooked, real, handle, rounds, iters
    )
    del _runtime
    return {k: statistics.median(v) for k, v in out.items()}


def _torch_stand_in() -> Any:
    """Just enough of a ``torch`` module for the bridge's framework source: CUDA up, nothing cached or allocated."""
    import types

    stand_in = types.ModuleType("torch")
    stand_in.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        is_initialized=lambda: True, current_device=lambda: 0, memory_reserved=lambda d: 0,
        memory_allocated=lambda d: 0,
    )  # fmt: skip
    stand_in.backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(deterministic=False))  # type: ignore[attr-defined]
    stand_in.are_deterministic_algorithms_enabled = lambda: False  # type: ignore[attr-defined]
    return stand_in


def _heuristics_overhead(hooked: Any, real: Any, handle: int, rounds: int, iters: int) -> dict[str, list[float]]:
    """Per round, ns a heuristics query through the shim takes beyond the direct one: without a framework source
    (``heuristics``) and with the bridge's, reading a stand-in torch (``heuristics_torch``)."""
    import ctypes
    import sys

    from ucudnn import bridge
    from ucudnn.bridge import ffi
    from ucudnn.graph_api import (
        A_HEUR_GRAPH,
        A_HEUR_MODE,
        A_HEUR_RESULTS,
        ENGINECFG,
        ENGINEHEUR,
        T_DESC,
        T_HEUR_MODE,
        Backend,
        P,
    )

    graphs = {}
    for name, api in (("through", hooked), ("direct", real)):
        b = Backend(api.lib)
        x, _ = b.tensor(120, (8, 8, 8, 8))
        w, _ = b.tensor(119, (8, 8, 3, 3))
        y, _ = b.tensor(121, (8, 8, 8, 8))
        conv, _ = b.conv(2, pad=(1, 1), stride=(1, 1))
        op, _ = b.conv_op(10, x, w, y, conv)
        graphs[name] = (b, b.graph([op], handle)[0])

    def query(side: str) -> Any:
        lib, graph = graphs[side][0].lib, graphs[side][1]

        def run() -> None:
            heur, count = P(), ctypes.c_int64()
            lib.cudnnBackendCreateDescriptor(ENGINEHEUR, ctypes.byref(heur))
            lib.cudnnBackendSetAttribute(heur, A_HEUR_GRAPH, T_DESC, 1, ctypes.byref(graph))
            lib.cudnnBackendSetAttribute(heur, A_HEUR_MODE, T_HEUR_MODE, 1, ctypes.byref(ctypes.c_int32(0)))
            lib.cudnnBackendFinalize(heur)
            lib.cudnnBackendGetAttribute(heur, A_HEUR_RESULTS, T_DESC, 0, ctypes.byref(count), None)
            cfgs = (P * count.value)()
            for i in range(count.value):
                lib.cudnnBackendCreateDescriptor(ENGINECFG, ctypes.byref(cfgs, i * ctypes.sizeof(P)))
            lib.cudnnBackendGetAttribute(heur, A_HEUR_RESULTS, T_DESC, count, ctypes.byref(count), cfgs)
            for c in cfgs:
                lib.cudnnBackendDestroyDescriptor(P(c))
            lib.cudnnBackendDestroyDescriptor(heur)

        return run

    out: dict[str, list[float]] = {"heuristics": [], "heuristics_torch": []}
    n = max(20, iters // 20)
    for key, source in (("heuristics", ffi.NULL), ("heuristics_torch", bridge.lib._ucudnn_py_framework)):
        bridge.lib.ucudnn_bridge_set_framework_source(source)
        if source != ffi.NULL:
            sys.modules["torch"] = _torch_stand_in()
        for r in range(rounds):
            sides = ("through", "direct") if r % 2 == 0 else ("direct", "through")
            t = {k: _per_call_ns(query(k), n) for k in sides}
            out[key].append(t["through"] - t["direct"])
        sys.modules.pop("torch", None)
    bridge.lib.ucudnn_bridge_set_framework_source(ffi.NULL)
    for b, _ in graphs.values():
        b.destroy_all()
    return out


def _step_overhead(hooked: Any, real: Any, handle: int, rounds: int, iters: int) -> dict[str, list[float]]:
    """Per round, a training-step-like loop (fprop, dgrad, wgrad of one small layer, each plan executed once a
    step): us per step through the shim and direct, and their ratio."""
    import numpy as np

    from ucudnn.graph_api import ConvGraph

    shapes = ((4, 8, 8, 8), (8, 8, 3, 3), (4, 8, 8, 8), (1, 1), (1, 1), 0)
    ops = ("fwd", "bwd-data", "bwd-filter")
    # Each op of each side its own x, w, y: no op's output feeds another (values stay what they were).
    bufs = [[np.full(s, 0.5, np.float32) for s in shapes[:3]] for _ in range(2 * len(ops))]
    sides_api = (("through", hooked), ("direct", real))
    plans = {k: [ConvGraph(api, handle, op, *shapes) for op in ops] for k, api in sides_api}

    def executor(side: str, i: int) -> Any:
        x, w, y = (b.ctypes.data for b in bufs[i + 3 * (side == "direct")])
        return plans[side][i].executor(x, w, y, 0)

    calls = {k: [executor(k, i) for i in range(len(ops))] for k in plans}

    def step(side: str) -> Any:
        ops = calls[side]

        def run() -> None:
            for call in ops:
                call()

        return run

    out: dict[str, list[float]] = {"step_us": [], "step_us_direct": [], "step_ratio": []}
    steps = max(20, iters // 40)
    runs = {k: step(k) for k in plans}
    for r in range(rounds):
        # Steps alternate one by one, so that both sides see the same load of a shared machine.
        t = {"through": 0, "direct": 0}
        for i in range(steps):
            for side in ("through", "direct") if (r + i) % 2 == 0 else ("direct", "through"):
                t0 = time.perf_counter_ns()
                runs[side]()
                t[side] += time.perf_counter_ns() - t0
        out["step_us"].append(t["through"] / steps / 1e3)
        out["step_us_direct"].append(t["direct"] / steps / 1e3)
        out["step_ratio"].append(t["through"] / t["direct"])
    for graph_list in plans.values():
        for g in graph_list:
            g.close()
    return out


def _live_axis(hooked: Any, real: Any, handle: int, ptrs: tuple[int, ...], rounds: int, iters: int,
               counts: list[int]) -> dict[str, dict[str, float]]:  # fmt: skip
    """Per live-plan count: ns per Execute (a plan passed through) and per variant-pack cycle, shim minus direct."""
    import ctypes

    from ucudnn import bridge
    from ucudnn.graph_api import (
        A_PLAN_CFG,
        A_VP_PTRS,
        A_VP_UIDS,
        A_VP_WS,
        PLAN,
        T_INT64,
        T_VOID_PTR,
        VARIANT_PACK,
        ConvGraph,
        P,
        i64s,
    )

    uids, pointers, ws = i64s(120, 119, 121), (P * 3)(*ptrs[:3]), ctypes.byref(P(ptrs[3]))
    bridge.set_option("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "auto")  # plans pass through: the lookups alone are measured

    def cycle(api: Any) -> Any:
        lib = api.lib

        def run() -> None:
            vp = P()
            lib.cudnnBackendCreateDescriptor(VARIANT_PACK, ctypes.byref(vp))
            lib.cudnnBackendSetAttribute(vp, A_VP_UIDS, T_INT64, 3, uids)
            lib.cudnnBackendSetAttribute(vp, A_VP_PTRS, T_VOID_PTR, 3, pointers)
            lib.cudnnBackendSetAttribute(vp, A_VP_WS, T_VOID_PTR, 1, ws)
            lib.cudnnBackendFinalize(vp)
            lib.cudnnBackendDestroyDescriptor(vp)

        return run

    # The live plans: many plans of one engine configuration, finalized through the hooks (each one resolved and
    # kept by the shim, as PyTorch's cached plans are).
    cfg_graph = ConvGraph(hooked, handle, "fwd", SHAPES["x"], SHAPES["w"], SHAPES["y"], (1, 1), (1, 1), 2)
    cfg = P()
    hooked.lib.cudnnBackendCreateDescriptor(3, ctypes.byref(cfg))
    hooked.lib.cudnnBackendGetAttribute(cfg_graph.plan, A_PLAN_CFG, 15, 1, None, ctypes.byref(cfg))
    live: list[Any] = []
    out: dict[str, dict[str, float]] = {}
    for count in sorted(counts):
        # The plan executed is older than the live ones added now: a lookup must not depend on its age.
        through = ConvGraph(hooked, handle, "fwd", SHAPES["x"], SHAPES["w"], SHAPES["y"], (1, 1), (1, 1), 2)
        while len(live) < count - 1:
            plan = P()
            hooked.lib.cudnnBackendCreateDescriptor(PLAN, ctypes.byref(plan))
            hooked.lib.cudnnBackendSetAttribute(plan, A_PLAN_CFG, 15, 1, ctypes.byref(cfg))
            hooked.lib.cudnnBackendFinalize(plan)
            live.append(plan)
        direct = ConvGraph(real, handle, "fwd", SHAPES["x"], SHAPES["w"], SHAPES["y"], (1, 1), (1, 1), 2)
        calls = {"through": through.executor(*ptrs), "direct": direct.executor(*ptrs)}
        cycles = {"through": cycle(hooked), "direct": cycle(real)}
        ex, cy = [], []
        for r in range(rounds):
            sides = ("through", "direct") if r % 2 == 0 else ("direct", "through")
            t = {k: _per_call_ns(calls[k], iters) for k in sides}
            ex.append(t["through"] - t["direct"])
            t = {k: _per_call_ns(cycles[k], max(20, iters // 4)) for k in sides}
            cy.append(t["through"] - t["direct"])
        out[str(count)] = {"execute": statistics.median(ex), "pack_cycle": statistics.median(cy)}
        through.close()
        direct.close()
    for plan in live:
        hooked.lib.cudnnBackendDestroyDescriptor(plan)
    cfg_graph.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ucudnn.bench.graph_overhead", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--iters", type=int, default=20000)
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--live-plans", default="1,1000,10000", help="live-plan counts of the scale axis (comma-separated)")
    p.add_argument("--preload", default=None, help="measure this build of libucudnn.so instead of the installed one")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rounds < 1 or args.iters < 20:
        p.error("--rounds must be >= 1 and --iters >= 20")
    try:
        live_counts = sorted({int(v) for v in args.live_plans.split(",") if v.strip()})
    except ValueError:
        p.error("--live-plans takes comma-separated counts, e.g. 1,1000,10000")
    if not live_counts or live_counts[0] < 1:
        p.error("--live-plans counts must be >= 1")
    if args.child:
        print(json.dumps(_child(args.rounds, args.iters, live_counts)))
        return 0
    preload = Path(args.preload) if args.preload else _paths.PRELOAD
    for path in (preload, _paths.HOST_CUDNN):
        if not path.exists():
            print(f"ucudnn: {path} is not built; reinstall with `pip install .`", file=sys.stderr)
            return 2
    env = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_")}
    env["LD_PRELOAD"] = str(preload)
    env["UCUDNN_VERIFY_SAMPLES"] = "0"  # the split runs as built: what is measured is its mechanism
    env["UCUDNN_HOST_DEVICE_MEMORY"] = "1GiB"  # a free-memory figure, as on a GPU: no pressure, yet looked for
    cmd = [sys.executable, "-m", "ucudnn.bench.graph_overhead", "--child", "--rounds", str(args.rounds)]
    cmd += ["--live-plans", ",".join(map(str, live_counts))]
    proc = subprocess.run([*cmd, "--iters", str(args.iters)], env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        print(f"ucudnn: the measuring process failed: {proc.stderr.strip()}", file=sys.stderr)
        return 1
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(figures))
        return 0
    print(
        f"graph-API path, host backend, median of {args.rounds} rounds, ns per call through the preload library "
        "beyond the direct call:"
    )
    rows = (
        ("building one convolution graph (descriptors, plan; recorded)", figures["build"]),
        ("cudnnBackendExecute, a plan passed through", figures["execute"]),
        ("cudnnBackendExecute, a split plan, per micro-batch", figures["execute_split_per_part"]),
    )
    for what, ns in rows:
        print(f"  {what:<62} {ns:10.0f}")
    print("under the default, no memory pressure:")
    for what, ns in (
        ("one heuristics query (count + fill), no framework source", figures["heuristics"]),
        ("the same, with the Python framework source (stand-in torch)", figures["heuristics_torch"]),
    ):
        print(f"  {what:<62} {ns:10.0f}")
    step, direct, ratio = figures["step_us"], figures["step_us_direct"], figures["step_ratio"]
    print(
        f"  a training-step-like loop (fprop + dgrad + wgrad executions): {step:.2f} us per step through the "
        f"preload library, {direct:.2f} us direct; per round, through / direct: median {(ratio - 1) * 100:+.2f}%"
    )
    live = figures["live"]
    print("live plans in the process, ns per call beyond the direct call (within 2x of one live plan: flat):")
    print(f"  {'live plans':<14}" + "".join(f"{c:>12}" for c in live))
    for key, what in (("execute", "execute"), ("pack_cycle", "pack cycle")):
        print(f"  {what:<14}" + "".join(f"{live[c][key]:12.0f}" for c in live))
    return 0


if __name__ == "__main__":
    sys.exit(main())
