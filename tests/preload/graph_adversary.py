"""Run by test_graph_by_value.py, with or without LD_PRELOAD=libucudnn.so: one adversarial graph-API sequence on the
host backend (descriptors destroyed, re-created at their old addresses, re-initialised in place; malformed variant
packs; a full record table). Writes the output array (out.npy) and report.json: statuses, whether addresses were
reused, the plan's workspace and, under the preload library, its counters.

Usage: graph_adversary.py HOST_LIBCUDNN CASE OUT_DIR
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ucudnn import bridge
from ucudnn import graph_api as G

N, C, K, S = 8, 4, 6, 8
P = ctypes.c_void_p


def main() -> int:
    host, case, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    real = ctypes.CDLL(host, mode=ctypes.RTLD_GLOBAL)
    api = G.Backend(ctypes.CDLL(None))  # the preload library's hooks when preloaded
    if bridge.shim_loaded():  # a planner that declines: the shim's fallback decides
        bridge.set_planner(lambda request, reply: 2)
    handle = P()
    assert real.cudnnCreate(ctypes.byref(handle)) == 0
    rng = np.random.default_rng(1)
    dt = np.float16 if case == "fp16_wgrad" else np.float32
    x = rng.uniform(-1, 1, (N, C, S, S)).astype(dt)
    w = rng.uniform(-1, 1, (K, C, 3, 3)).astype(dt)
    y = rng.uniform(-1, 1, (N, K, S, S)).astype(dt)
    report: dict[str, Any] = {}
    ctx = Ctx(api, handle.value or 0, x, w, y, report)
    CASES[case](ctx)
    np.save(out / "out.npy", ctx.output())
    if bridge.shim_loaded():
        report["stats"] = bridge.stats()
    (out / "report.json").write_text(json.dumps(report))
    return 0


class Ctx:
    def __init__(self, api: G.Backend, handle: int, x: Any, w: Any, y: Any, report: dict[str, Any]) -> None:
        self.api, self.handle, self.x, self.w, self.y, self.report = api, handle, x, w, y, report
        self.op, self.dtype = G.OP_FWD, G.HALF if x.dtype == np.float16 else G.FLOAT
        self.ws = np.zeros(1 << 22, np.uint8)

    def output(self) -> Any:
        return {G.OP_FWD: self.y, G.OP_BWD_DATA: self.x, G.OP_BWD_FILTER: self.w}[self.op]

    def kill(self, *ds: P) -> None:
        for d in ds:
            self.api.lib.cudnnBackendDestroyDescriptor(d)
            self.api.made = [m for m in self.api.made if m.value != d.value]

    def tensors(self, n: int, into: dict[str, P] | None = None) -> dict[str, P]:
        """x, w, y (and conv) at batch n, finalized; into: descriptors already created (at old addresses)."""
        d = into or {k: self.api.create(G.TENSOR) for k in ("x", "w", "y")} | {"conv": self.api.create(G.CONVOLUTION)}
        for name, uid, dims in (("x", 120, [n, C, S, S]), ("w", 119, [K, C, 3, 3]), ("y", 121, [n, K, S, S])):
            t = d[name]
            for attr, typ, count, elems in (
                (G.A_T_DTYPE, G.T_DATA_TYPE, 1, ctypes.byref(ctypes.c_int(self.dtype))),
                (G.A_T_DIMS, G.T_INT64, 4, G.i64s(*dims)),
                (G.A_T_STRIDES, G.T_INT64, 4, G.i64s(*G.packed_strides(dims))),
                (G.A_T_UID, G.T_INT64, 1, G.i64s(uid)),
                (G.A_T_ALIGN, G.T_INT64, 1, G.i64s(16)),
            ):
                assert self.api.set(t, attr, typ, count, elems) == 0
            assert self.api.finalize(t) == 0
        c = d["conv"]
        for attr, typ, count, elems in (
            (G.A_CONV_NSP, G.T_INT64, 1, G.i64s(2)),
            (G.A_CONV_COMP, G.T_DATA_TYPE, 1, ctypes.byref(ctypes.c_int(G.FLOAT))),
            (G.A_CONV_MODE, G.T_CONV_MODE, 1, ctypes.byref(ctypes.c_int(1))),
            (G.A_CONV_DIL, G.T_INT64, 2, G.i64s(1, 1)),
            (G.A_CONV_STRIDES, G.T_INT64, 2, G.i64s(1, 1)),
            (G.A_CONV_PRE, G.T_INT64, 2, G.i64s(1, 1)),
            (G.A_CONV_POST, G.T_INT64, 2, G.i64s(1, 1)),
        ):
            assert self.api.set(c, attr, typ, count, elems) == 0
        assert self.api.finalize(c) == 0
        return d

    def operation(self, d: dict[str, P], op: P | None = None) -> P:
        o = op or self.api.create(self.op)
        base = G.OP_BASE[self.op]
        for k, name in ((4, "x"), (3, "w"), (5, "y"), (2, "conv")):
            assert self.api.set_desc(o, base + k, d[name]) == 0
        assert self.api.set(o, base, G.T_FLOAT, 1, ctypes.byref(ctypes.c_float(0.7))) == 0
        assert self.api.set(o, base + 1, G.T_FLOAT, 1, ctypes.byref(ctypes.c_float(0.3))) == 0
        assert self.api.finalize(o) == 0
        return o

    def graph(self, op: P, g: P | None = None) -> P:
        g = g or self.api.create(G.OPGRAPH)
        assert self.api.set(g, G.A_GRAPH_HANDLE, G.T_HANDLE, 1, ctypes.byref(P(self.handle))) == 0
        assert self.api.set_desc(g, G.A_GRAPH_OPS, op) == 0
        assert self.api.finalize(g) == 0
        return g

    def plan(self, cfg: P) -> P:
        """As cudnn_frontend >= 1.13: no handle; the workspace read with a NULL count pointer."""
        p = self.api.create(G.PLAN)
        assert self.api.set_desc(p, G.A_PLAN_CFG, cfg) == 0 and self.api.finalize(p) == 0
        ws = G.i64s(-1)
        assert self.api.lib.cudnnBackendGetAttribute(p, G.A_PLAN_WS, G.T_INT64, 1, None, ws) == 0
        self.report["workspace"] = int(ws[0])
        assert 0 <= ws[0] <= self.ws.size
        return p

    def at(self, targets: list[tuple[int, int | None]]) -> list[P]:
        """New descriptors of these (kind, address) pairs, in order, each at its address where the allocator hands
        it out again within 256 creations (those made on the way are destroyed afterwards)."""
        out: list[P] = []
        extra: list[P] = []
        for kind, address in targets:
            for _ in range(256):
                d = self.api.create(kind)
                if d.value == address:
                    break
                extra.append(d)
            else:
                d = extra.pop()
            out.append(d)
        self.kill(*extra)
        return out

    def heuristics(self, g: P) -> P:
        """A finalized INSTANT heuristics descriptor of graph g."""
        heur = self.api.create(G.ENGINEHEUR)
        assert self.api.set_desc(heur, G.A_HEUR_GRAPH, g) == 0
        assert self.api.set(heur, G.A_HEUR_MODE, G.T_HEUR_MODE, 1, ctypes.byref(ctypes.c_int(G.HEUR_INSTANT))) == 0
        assert self.api.finalize(heur) == 0
        return heur

    def config(self, engine: P) -> P:
        cfg = self.api.create(G.ENGINECFG)
        assert self.api.set_desc(cfg, G.A_CFG_ENGINE, engine) == 0 and self.api.finalize(cfg) == 0
        return cfg

    def pack(self, uids: list[int], ptrs: list[int | None], ws: int | None, finalize: bool = True) -> tuple[P, int]:
        vp = self.api.create(G.VARIANT_PACK)
        if uids:
            self.api.set(vp, G.A_VP_UIDS, G.T_INT64, len(uids), G.i64s(*uids))
        if ptrs:
            self.api.set(vp, G.A_VP_PTRS, G.T_VOID_PTR, len(ptrs), (P * len(ptrs))(*ptrs))
        self.api.set(vp, G.A_VP_WS, G.T_VOID_PTR, 1, ctypes.byref(P(ws)))
        return vp, self.api.finalize(vp) if finalize else -1

    def execute(self, plan: P, vp: P | None = None) -> int:
        if vp is None:
            vp, _ = self.pack([120, 119, 121], self.ptrs(), self.ws.ctypes.data)
        return int(self.api.lib.cudnnBackendExecute(P(self.handle), plan, vp))

    def ptrs(self) -> list[int | None]:
        return [self.x.ctypes.data, self.w.ctypes.data, self.y.ctypes.data]


GEMM = 2  # the forward engine whose workspace grows with N


def reused_graph(c: Ctx) -> None:
    """(a) an engine kept, its operation graph destroyed, a half-batch graph created at the same address before the
    plan is finalized: the plan computes all N samples."""
    d = c.tensors(N)
    op = c.operation(d)
    g1 = c.graph(op)
    engine, st = c.api.engine(g1, GEMM)
    assert st == 0
    c.kill(op, g1)
    (g2,) = c.at([(G.OPGRAPH, g1.value)])
    c.report["reused"] = [g2.value == g1.value]
    c.graph(c.operation(c.tensors(N // 2)), g2)
    c.report["status"] = c.execute(c.plan(c.config(engine)))


def reused_tensors(c: Ctx) -> None:
    """(b) the same, the tensors, convolution and operation also re-created at their old addresses."""
    d = c.tensors(N)
    op = c.operation(d)
    g1 = c.graph(op)
    engine, st = c.api.engine(g1, GEMM)
    assert st == 0
    old = [d["x"], d["w"], d["y"], d["conv"], op, g1]
    c.kill(*old)
    kinds = (G.OPGRAPH, c.op, G.CONVOLUTION, G.TENSOR, G.TENSOR, G.TENSOR)  # freed last, handed out first
    g2, op2, conv2, y2, w2, x2 = c.at([(k, d.value) for k, d in zip(kinds, old[::-1], strict=True)])
    new = [x2, w2, y2, conv2, op2, g2]
    c.report["reused"] = [a.value == b.value for a, b in zip(old, new, strict=True)]
    c.graph(c.operation(c.tensors(N // 2, {"x": x2, "w": w2, "y": y2, "conv": conv2}), op2), g2)
    c.report["status"] = c.execute(c.plan(c.config(engine)))


def initialized(c: Ctx) -> None:
    """(c) tensors re-initialised in place (cudnnBackendInitialize) and set to half the batch after the operation
    took them: the operation keeps what it took."""
    d = c.tensors(N)
    op = c.operation(d)
    init = c.api.lib.cudnnBackendInitialize
    init.argtypes = [P]
    assert init(d["x"]) == 0 and init(d["y"]) == 0
    for name, uid, dims in (("x", 120, [N // 2, C, S, S]), ("y", 121, [N // 2, K, S, S])):
        t = d[name]
        assert c.api.set(t, G.A_T_DTYPE, G.T_DATA_TYPE, 1, ctypes.byref(ctypes.c_int(c.dtype))) == 0
        assert c.api.set(t, G.A_T_DIMS, G.T_INT64, 4, G.i64s(*dims)) == 0
        assert c.api.set(t, G.A_T_STRIDES, G.T_INT64, 4, G.i64s(*G.packed_strides(dims))) == 0
        assert c.api.set(t, G.A_T_UID, G.T_INT64, 1, G.i64s(uid)) == 0
        assert c.api.set(t, G.A_T_ALIGN, G.T_INT64, 1, G.i64s(16)) == 0
        assert c.api.finalize(t) == 0
    engine, st = c.api.engine(c.graph(op), GEMM)
    assert st == 0
    c.report["status"] = c.execute(c.plan(c.config(engine)))


def packs(c: Ctx) -> None:
    """Malformed variant packs on a plan the shim takes over: each status, in order (then a good execution)."""
    d = c.tensors(N)
    engine, _ = c.api.engine(c.graph(c.operation(d)), GEMM)
    plan = c.plan(c.config(engine))
    p, ws, u = c.ptrs(), c.ws.ctypes.data, [120, 119, 121]
    cases = [
        c.pack([*u, 7], [*p, p[0]], ws),  # an extra uid: ignored
        c.pack(u, p, ws, finalize=False),  # never finalized, otherwise whole: runs
        c.pack(u, p[:2], ws),  # counts differ (Finalize refuses it too)
        c.pack([], [], ws),  # empty
        c.pack(u[:2], p[:2], ws),  # y's uid missing
        c.pack(u, [None, *p[1:]], ws),  # a NULL data pointer
        c.pack(u, p, None),  # no workspace where one is needed
    ]
    statuses = [[fin, c.execute(plan, vp)] for vp, fin in cases]
    statuses.append([-1, c.execute(plan, P())])  # a NULL pack
    statuses.append([-1, c.execute(plan, d["x"])])  # a descriptor of another kind
    c.report["statuses"] = statuses
    c.report["status"] = c.execute(plan)


def full_table(c: Ctx) -> None:
    """A plan taken over, then the record table filled before its variant pack is made: the pack is still
    recorded, the plan runs as the shim reported it."""
    engine, st = c.api.engine(c.graph(c.operation(c.tensors(N))), GEMM)
    assert st == 0
    plan = c.plan(c.config(engine))
    filler = [c.api.create_status(G.TENSOR)[1] for _ in range(70000)]
    c.report["status"] = c.execute(plan)
    for f in filler:
        c.api.lib.cudnnBackendDestroyDescriptor(f)


def fp16_wgrad(c: Ctx) -> None:
    """A 16-bit weight gradient under a limit: never split (its parts would round dw once each)."""
    c.op = G.OP_BWD_FILTER
    engine, st = c.api.engine(c.graph(c.operation(c.tensors(N))), 1)  # ALGO_1: workspace grows with N
    assert st == 0
    c.report["status"] = c.execute(c.plan(c.config(engine)))


def config_workspace(c: Ctx) -> None:
    """The v1 API's order: heuristics configurations filtered by ENGINECFG_WORKSPACE_SIZE before any plan."""
    g = c.graph(c.operation(c.tensors(N)))
    heur = c.heuristics(g)
    cfgs = [c.api.create(G.ENGINECFG) for _ in range(8)]
    st, n = c.api.get(heur, G.A_HEUR_RESULTS, G.T_DESC, 8, (P * 8)(*[x.value for x in cfgs]))
    assert st == 0
    chosen = None
    for cfg in cfgs[:n]:
        e = c.api.create(G.ENGINE)
        assert c.api.get(cfg, G.A_CFG_ENGINE, G.T_DESC, 1, ctypes.byref(e))[0] == 0
        if c.api.get_int64(e, G.A_ENGINE_INDEX)[1] == GEMM:
            chosen = cfg
    assert chosen is not None
    c.kill(g, heur)
    c.report["cfg_workspace"] = c.api.get_int64(chosen, G.A_CFG_WS)[1]
    c.report["status"] = c.execute(c.plan(chosen))


def odd_reads(c: Ctx, k: P) -> list[list[int]]:
    """[status, count] of reads of a knob choice: the wrong type (twice), a count query, two elements, NULL both."""
    return [
        list(c.api.get(k, G.A_KNOB_VALUE, G.T_KNOB_TYPE, 1, ctypes.byref(ctypes.c_int()))),
        list(c.api.get(k, G.A_KNOB_TYPE, G.T_INT64, 1, G.i64s(0))),
        list(c.api.get(k, G.A_KNOB_VALUE, G.T_INT64, 0, None)),
        list(c.api.get(k, G.A_KNOB_VALUE, G.T_INT64, 2, G.i64s(0, 0))),
        [int(c.api.lib.cudnnBackendGetAttribute(k, G.A_KNOB_TYPE, G.T_KNOB_TYPE, 1, None, None)), -7],
    ]


def variant_knob(c: Ctx) -> None:
    """A client short of memory (the test's UCUDNN_HOST_DEVICE_MEMORY) reads the heuristics results and every
    configuration's knob choices, as cudnn_frontend names them: the offered variant reads one knob more, ucudnn's,
    answered by the shim; odd reads of it get what the library answers of the same knob held by itself, and once
    its owner resets the descriptor the library answers."""
    g = c.graph(c.operation(c.tensors(N)))
    heur = c.heuristics(g)
    count = ctypes.c_int64(-1)
    assert c.api.lib.cudnnBackendGetAttribute(heur, G.A_HEUR_RESULTS, G.T_DESC, 0, ctypes.byref(count), None) == 0
    cfgs = [c.api.create(G.ENGINECFG) for _ in range(count.value)]
    st, n = c.api.get(heur, G.A_HEUR_RESULTS, G.T_DESC, len(cfgs), (P * len(cfgs))(*[x.value for x in cfgs]))
    assert st == 0 and n == len(cfgs)
    knobs: list[list[list[int]]] = []
    for cfg in cfgs:  # as cudnn_frontend's get_engine_tag: fresh knob descriptors, room for every knob type
        kc = [c.api.create(G.KNOB_CHOICE) for _ in range(8)]
        st, got = c.api.get(cfg, G.A_CFG_KNOBS, G.T_DESC, len(kc), (P * len(kc))(*[x.value for x in kc]))
        assert st == 0
        read = []
        for k in kc[:got]:
            t, v = ctypes.c_int(-1), ctypes.c_int64(-1)
            read.append([c.api.get(k, G.A_KNOB_TYPE, G.T_KNOB_TYPE, 1, ctypes.byref(t))[0], t.value,
                         c.api.get(k, G.A_KNOB_VALUE, G.T_INT64, 1, ctypes.byref(v))[0], v.value])  # fmt: skip
        knobs.append(read)
        if got:  # the variant's knob: odd reads, as the library answers them of a knob it holds; then reset
            k = kc[got - 1]
            c.report["odd_reads"] = odd_reads(c, k)
            own = c.api.create(G.KNOB_CHOICE)  # the same knob, set by its owner: the library's
            assert c.api.set(own, G.A_KNOB_TYPE, G.T_KNOB_TYPE, 1, ctypes.byref(ctypes.c_int(read[-1][1]))) == 0
            assert c.api.set(own, G.A_KNOB_VALUE, G.T_INT64, 1, G.i64s(read[-1][3])) == 0
            assert c.api.finalize(own) == 0
            c.report["library_reads"] = odd_reads(c, own)
            one = ctypes.c_int64(-1)
            c.report["count_query"] = [
                c.api.lib.cudnnBackendGetAttribute(cfg, G.A_CFG_KNOBS, G.T_DESC, 0, ctypes.byref(one), None),
                one.value,
            ]
            c.api.lib.cudnnBackendInitialize(k)
            c.report["reset"] = c.api.get(k, G.A_KNOB_VALUE, G.T_INT64, 1, G.i64s(-1))[0]
    c.report["fresh"] = c.api.get(c.api.create(G.KNOB_CHOICE), G.A_KNOB_VALUE, G.T_INT64, 1, G.i64s(-1))[0]
    c.report["knobs"] = knobs
    c.report["status"] = c.execute(c.plan(cfgs[0]))


CASES = {f.__name__: f for f in (reused_graph, reused_tensors, initialized, packs, full_table, fp16_wgrad,
                                 config_workspace, variant_knob)}  # fmt: skip

if __name__ == "__main__":
    sys.exit(main())
