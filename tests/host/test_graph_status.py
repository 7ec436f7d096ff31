"""Host backend graph API: statuses of bad input, execution and the descriptor life cycle, through raw ctypes calls.

What the real library also answers without a GPU is compared with it in tests/realcudnn/test_status_parity.py;
these are the calls it cannot answer there (anything that needs a device: engine configurations, plans,
execution) and the cases where it crashes (NULL out pointers, an empty engine configuration), with the statuses
the host backend chose (see hb_graph_api.c, hb_graph_exec.c).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from ucudnn import cudnn as C
from ucudnn import testing as T

from . import _graph as G
from ._graph import P, i64s

BAD, NULLPTR, MISALIGNED, NOT_FINALIZED, NOT_INIT = 2000, 2002, 2003, 2004, 1001
NS = 3000


def fwd_graph(b: G.Backend, handle: C.Handle, w_strides: list[int] | None = None) -> P:
    x, _ = b.tensor(120, [2, 4, 6, 7])
    w, _ = b.tensor(119, [6, 4, 3, 3], w_strides)
    y, _ = b.tensor(121, [2, 6, 6, 7])
    conv, _ = b.conv()
    op, sts = b.conv_op(G.OP_FWD, x, w, y, conv, alpha=0.5)
    assert sts[-1] == 0
    g, sts = b.graph([op], handle.ptr)
    assert sts == [0, 0, 0]
    return g


def plan_for(b: G.Backend, handle: C.Handle, graph: P, engine: int) -> tuple[P, int]:
    e, st = b.engine(graph, engine)
    assert st == 0
    cfg = b.create(G.ENGINECFG)
    assert b.set_desc(cfg, G.A_CFG_ENGINE, e) == 0 and b.finalize(cfg) == 0
    plan = b.create(G.PLAN)
    assert b.set(plan, G.A_PLAN_HANDLE, G.T_HANDLE, 1, ctypes.byref(P(handle.ptr))) == 0
    assert b.set_desc(plan, G.A_PLAN_CFG, cfg) == 0
    assert b.finalize(plan) == 0
    st, ws = b.get_int64(plan, G.A_PLAN_WS)
    assert st == 0
    return plan, ws


def pack(b: G.Backend, uids: Sequence[int], ptrs: Sequence[int | None], ws: int | None, *, finalize: bool = True) -> P:
    vp = b.create(G.VARIANT_PACK)
    assert b.set(vp, G.A_VP_UIDS, G.T_INT64, len(uids), i64s(*uids)) == 0
    assert b.set(vp, G.A_VP_PTRS, G.T_VOID_PTR, len(ptrs), (P * len(ptrs))(*ptrs)) == 0
    assert b.set(vp, G.A_VP_WS, G.T_VOID_PTR, 1, ctypes.byref(P(ws))) == 0
    if finalize:
        assert b.finalize(vp) == 0
    return vp


def data() -> tuple[np.ndarray[Any, Any], ...]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 6, 7)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    return x, w, np.zeros((2, 6, 6, 7), np.float32), np.zeros(1 << 16, np.uint8)


def execute(b: G.Backend, handle: Any, plan: P | None, vp: P | None) -> int:
    return int(b.lib.cudnnBackendExecute(handle, plan, vp))


def test_a_python_built_graph_runs(b: G.Backend, handle: C.Handle) -> None:
    x, w, y, ws = data()
    plan, need = plan_for(b, handle, fwd_graph(b, handle), 2)  # GEMM: needs workspace
    assert 0 < need <= ws.size
    vp = pack(b, [120, 119, 121], [x.ctypes.data, w.ctypes.data, y.ctypes.data], ws.ctypes.data)
    size = ctypes.c_size_t()
    assert b.lib.cudnnGetExecutionPlanWorkspaceSize(P(handle.ptr), plan, vp, ctypes.byref(size)) == 0
    assert size.value == need
    assert execute(b, handle.ptr, plan, vp) == 0
    T.assert_close(y, T.conv_forward(x, w, T.ConvParams.make(2, pad=1), alpha=0.5), np.float32)


def test_execute_checks_its_arguments(b: G.Backend, handle: C.Handle) -> None:
    x, w, y, ws = data()
    plan, _ = plan_for(b, handle, fwd_graph(b, handle), 2)
    ptrs = [x.ctypes.data, w.ctypes.data, y.ctypes.data]
    good = pack(b, [120, 119, 121], ptrs, ws.ctypes.data)
    assert execute(b, None, plan, good) == BAD
    assert execute(b, handle.ptr, None, good) == BAD
    assert execute(b, handle.ptr, plan, None) == BAD
    assert execute(b, handle.ptr, good, plan) == BAD  # swapped kinds
    # Pack statuses as cuDNN 9.19 answers them (measured on an H100; see hb_graph_exec.c): BAD_PARAM throughout.
    assert execute(b, handle.ptr, plan, pack(b, [120, 119], ptrs[:2], ws.ctypes.data)) == BAD  # y's uid missing
    assert execute(b, handle.ptr, plan, pack(b, [120, 119, 121], [None, *ptrs[1:]], ws.ctypes.data)) == BAD
    misaligned = [ptrs[0], ptrs[1], ptrs[2] + 4]  # the tensors say 16-byte alignment
    assert execute(b, handle.ptr, plan, pack(b, [120, 119, 121], misaligned, ws.ctypes.data)) == MISALIGNED
    assert execute(b, handle.ptr, plan, pack(b, [120, 119, 121], ptrs, None)) == BAD  # GEMM needs workspace
    empty = b.create(G.VARIANT_PACK)
    assert b.set(empty, G.A_VP_WS, G.T_VOID_PTR, 1, ctypes.byref(P(ws.ctypes.data))) == 0 and b.finalize(empty) == 0
    assert execute(b, handle.ptr, plan, empty) == BAD
    uneven = b.create(G.VARIANT_PACK)
    assert b.set(uneven, G.A_VP_UIDS, G.T_INT64, 3, i64s(120, 119, 121)) == 0
    assert b.set(uneven, G.A_VP_PTRS, G.T_VOID_PTR, 2, (P * 2)(*ptrs[:2])) == 0
    assert b.finalize(uneven) == BAD and execute(b, handle.ptr, plan, uneven) == BAD
    assert execute(b, handle.ptr, b.create(G.PLAN), good) == NOT_FINALIZED
    assert not y.any()  # nothing ran
    # A pack never finalized runs when its uids and pointers agree, as on cuDNN 9.19.
    unfinalized = pack(b, [120, 119, 121], ptrs, ws.ctypes.data, finalize=False)
    assert execute(b, handle.ptr, plan, unfinalized) == 0
    assert y.any()
    y[...] = 0
    # uids in any order, extra ones ignored; a zero-workspace engine takes a NULL workspace
    plan0, need0 = plan_for(b, handle, fwd_graph(b, handle), 0)
    assert need0 == 0
    assert execute(b, handle.ptr, plan0, pack(b, [7, 121, 119, 120], [ptrs[0], *ptrs[::-1]], None)) == 0
    assert y.any()


def test_engine_finalize(b: G.Backend, handle: C.Handle) -> None:
    g = fwd_graph(b, handle)
    assert b.get_int64(g, G.A_GRAPH_COUNT) == (0, 8)
    for index, want in ((0, 0), (2, 0), (3, NS), (4, 0), (5, 0), (6, NS), (8, NS), (-1, NS), (1 << 40, NS)):
        assert b.engine(g, index)[1] == want, index
    e = b.create(G.ENGINE)
    assert b.set(e, G.A_ENGINE_INDEX, G.T_INT64, 1, i64s(0)) == 0
    assert b.finalize(e) == NULLPTR  # no graph
    e = b.create(G.ENGINE)
    assert b.set_desc(e, G.A_ENGINE_GRAPH, b.create(G.OPGRAPH)) == 0
    assert b.set(e, G.A_ENGINE_INDEX, G.T_INT64, 1, i64s(0)) == 0
    assert b.finalize(e) == NOT_FINALIZED


def test_heuristics_and_configuration_errors(b: G.Backend, handle: C.Handle) -> None:
    g = fwd_graph(b, handle)
    h = b.create(G.ENGINEHEUR)
    assert b.set_desc(h, G.A_HEUR_GRAPH, g) == 0
    assert b.finalize(h) == 0  # no mode: as on the real library, no results and the mode reads as MODES_COUNT
    assert b.get(h, G.A_HEUR_RESULTS, G.T_DESC, 0, None) == (0, 0)
    mode = ctypes.c_int(-1)
    assert b.get(h, G.A_HEUR_MODE, G.T_HEUR_MODE, 1, ctypes.byref(mode)) == (0, 1) and mode.value == 4
    h = b.create(G.ENGINEHEUR)
    assert b.set(h, G.A_HEUR_MODE, G.T_HEUR_MODE, 1, ctypes.byref(ctypes.c_int(G.HEUR_A))) == 0
    assert b.finalize(h) == BAD  # no graph
    h = b.create(G.ENGINEHEUR)
    assert b.set_desc(h, G.A_HEUR_GRAPH, g) == 0
    assert b.set(h, G.A_HEUR_MODE, G.T_HEUR_MODE, 1, ctypes.byref(ctypes.c_int(7))) == 0
    assert b.finalize(h) == 0  # no such mode: no results
    assert b.get(h, G.A_HEUR_RESULTS, G.T_DESC, 0, None) == (0, 0)
    cfg = b.create(G.ENGINECFG)
    assert b.finalize(cfg) == NULLPTR
    e, _ = b.engine(g, 0)
    assert b.set_desc(cfg, G.A_CFG_KNOBS, b.create(G.KNOB_CHOICE)) == NS  # the engines have no knobs
    assert b.set_desc(cfg, G.A_CFG_ENGINE, e) == 0 and b.finalize(cfg) == 0
    plan = b.create(G.PLAN)
    assert b.set_desc(plan, G.A_PLAN_CFG, cfg) == 0
    assert b.finalize(plan) == 0  # no handle: as real cuDNN 9 (cudnn_frontend >= 1.13 sets none)
    plan = b.create(G.PLAN)
    assert b.set_desc(plan, G.A_PLAN_CFG, cfg) == 0
    assert b.set(plan, G.A_PLAN_HANDLE, G.T_HANDLE, 1, ctypes.byref(P(cfg.value))) == 0
    assert b.finalize(plan) == BAD  # not a handle


def heuristic_count(b: G.Backend, g: P) -> int:
    h = b.create(G.ENGINEHEUR)
    assert b.set_desc(h, G.A_HEUR_GRAPH, g) == 0
    assert b.set(h, G.A_HEUR_MODE, G.T_HEUR_MODE, 1, ctypes.byref(ctypes.c_int(G.HEUR_INSTANT))) == 0
    assert b.finalize(h) == 0
    st, n = b.get(h, G.A_HEUR_RESULTS, G.T_DESC, 0, None)
    assert st == 0
    return n


def test_graphs_without_engines_finalize_with_none(b: G.Backend, handle: C.Handle) -> None:
    """As on the real library, graphs the backend cannot run still finalize; they offer no engine."""
    assert heuristic_count(b, fwd_graph(b, handle)) == 6
    relu = b.pointwise(G.PW_RELU)
    x, _ = b.tensor(1, [2, 4, 6, 7])
    y, _ = b.tensor(2, [2, 4, 6, 7])
    only_pointwise, _ = b.pw_op(relu, x, y)
    for g in (
        b.graph([only_pointwise])[0],
        fwd_graph(b, handle, w_strides=[9, 54, 3, 1]),  # a packed filter in C, K, R, S order
    ):
        assert b.get_int64(g, G.A_GRAPH_COUNT) == (0, 0)
        assert heuristic_count(b, g) == 0
        assert b.engine(g, 0)[1] == NS


def test_graph_refuses_two_writers_of_a_tensor(b: G.Backend) -> None:
    x, _ = b.tensor(1, [2, 4, 6, 7])
    y, _ = b.tensor(2, [2, 4, 6, 7])
    relu = b.pointwise(G.PW_RELU)
    op1, _ = b.pw_op(relu, x, y)
    op2, _ = b.pw_op(relu, x, y)
    assert b.graph([op1, op2])[1] == [0, BAD]
    assert b.graph([op1, op1])[1] == [0, BAD]


def test_null_arguments_the_real_library_crashes_on(b: G.Backend) -> None:
    assert b.lib.cudnnBackendCreateDescriptor(G.TENSOR, None) == NULLPTR
    assert b.finalize(None) == NULLPTR
    t, _ = b.tensor(1, [2, 3])
    assert b.lib.cudnnBackendGetAttribute(t, G.A_T_UID, G.T_INT64, 1, None, None) == NULLPTR
    assert b.lib.cudnnGetExecutionPlanWorkspaceSize(None, None, None, None) == NULLPTR
    assert b.create_status(14)[0] == NS  # a descriptor type the backend does not implement


def test_descriptor_life_cycle(b: G.Backend, handle: C.Handle) -> None:
    """Finalized descriptors are read-only and finalize once; what a plan needs outlives what it was built from;
    descriptors read back from an engine are usable descriptors of their own."""
    x, w, y, ws = data()
    g = fwd_graph(b, handle)
    assert b.finalize(g) == BAD
    assert b.set_desc(g, G.A_GRAPH_OPS, b.create(G.OP_FWD)) == BAD
    e, _ = b.engine(g, 1)
    back = b.create(G.OPGRAPH)
    assert b.get(e, G.A_ENGINE_GRAPH, G.T_DESC, 1, (P * 1)(back.value)) == (0, 1)
    assert b.get_int64(back, G.A_GRAPH_COUNT) == (0, 8)
    plan, _ = plan_for(b, handle, back, 1)
    b.made.remove(plan)
    b.destroy_all()  # everything but the plan is gone ...
    b.made.append(plan)
    vp = pack(b, [120, 119, 121], [x.ctypes.data, w.ctypes.data, y.ctypes.data], ws.ctypes.data)
    assert execute(b, handle.ptr, plan, vp) == 0  # ... and the plan still runs
    T.assert_close(y, T.conv_forward(x, w, T.ConvParams.make(2, pad=1), alpha=0.5), np.float32)
    cfg = b.create(G.ENGINECFG)
    assert b.get(plan, G.A_PLAN_CFG, G.T_DESC, 1, (P * 1)(cfg.value)) == (0, 1)
    engine = b.create(G.ENGINE)
    assert b.get(cfg, G.A_CFG_ENGINE, G.T_DESC, 1, (P * 1)(engine.value)) == (0, 1)
    assert b.get_int64(engine, G.A_ENGINE_INDEX) == (0, 1)
    assert b.get(plan, G.A_PLAN_CFG, G.T_DESC, 1, (P * 1)(engine.value))[0] == BAD  # wrong kind to fill
    assert b.lib.cudnnBackendInitialize(engine) == 0
    assert b.get_int64(engine, G.A_ENGINE_INDEX)[0] == NOT_INIT


def test_get_counts(b: G.Backend, handle: C.Handle) -> None:
    t, _ = b.tensor(5, [2, 3, 4, 5])
    buf = i64s(*[-7] * 8)
    assert b.get(t, G.A_T_DIMS, G.T_INT64, 8, None) == (0, 4)
    assert b.get(t, G.A_T_DIMS, G.T_INT64, 2, buf) == (0, 2)
    assert list(buf)[:3] == [2, 3, -7]
    assert b.get(t, G.A_T_DIMS, G.T_INT64, 0, buf) == (0, 0)
    assert b.get(t, G.A_T_DIMS, G.T_INT64, -1, buf)[0] == BAD
    assert b.get(t, G.A_T_UID, G.T_INT64, 2, buf)[0] == BAD
    assert b.get(t, G.A_T_UID, G.T_INT64, 1, buf) == (0, 1) and buf[0] == 5
    h = b.create(G.ENGINEHEUR)
    assert b.set_desc(h, G.A_HEUR_GRAPH, fwd_graph(b, handle)) == 0
    assert b.set(h, G.A_HEUR_MODE, G.T_HEUR_MODE, 1, ctypes.byref(ctypes.c_int(G.HEUR_A))) == 0
    assert b.finalize(h) == 0
    cfgs = [b.create(G.ENGINECFG) for _ in range(2)]
    assert b.get(h, G.A_HEUR_RESULTS, G.T_DESC, 2, (P * 2)(*[c.value for c in cfgs])) == (0, 2)
    assert all(b.get_int64(c, G.A_CFG_WS)[0] == 0 for c in cfgs)
