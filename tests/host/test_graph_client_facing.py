"""Host backend graph API: what a real client (cudnn_frontend) can tell apart from real cuDNN, answered as cuDNN does.

- cudnnGetLastErrorString: per thread, the latest failure's message, cleared by reading it, left by successes,
  truncated to the caller's buffer (measured on libcudnn.so.9 9.28 without a GPU; the realcudnn tier compares).
- ENGINECFG_SHARED_MEMORY_USED and ENGINECFG_WORKSPACE_SIZE, which the v1 graph API reads with a NULL count.
- Descriptors copied by value, in the frontend's order: tensors and the convolution destroyed as soon as the
  operation is built, the operation graph destroyed as soon as the engine configs are read.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ucudnn import cudnn as C
from ucudnn import testing as T

from . import _graph as G
from ._graph import P, i64s

BADTYPE = 2010
A_CFG_SHARED_MEMORY = 304


def last_error(b: G.Backend, size: int = 512) -> bytes:
    buf = ctypes.create_string_buffer(b"<untouched>", size)
    b.lib.cudnnGetLastErrorString(buf, ctypes.c_size_t(size))
    return buf.raw[: size - 1].split(b"\0")[0] if size else b""


def fail_once(b: G.Backend) -> int:
    t = b.create(G.TENSOR)
    return b.set(t, G.A_T_UID, G.T_FLOAT, 1, i64s(3))  # the wrong attribute type


def test_last_error_string(b: G.Backend) -> None:
    last_error(b)  # what earlier tests on this thread left
    assert last_error(b) == b""
    assert fail_once(b) == BADTYPE
    b.tensor(1, [2, 3, 4, 5])  # a success leaves the message
    msg = last_error(b)
    assert b"cudnnBackendSetAttribute" in msg and b"CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE" in msg, msg
    assert last_error(b) == b""  # reading clears it
    t = b.create(G.TENSOR)
    assert b.finalize(t) == 2000 and fail_once(b) == BADTYPE
    assert b"CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE" in last_error(b)  # the latest failure wins
    fail_once(b)
    small = ctypes.create_string_buffer(b"#" * 8, 8)
    b.lib.cudnnGetLastErrorString(small, ctypes.c_size_t(8))
    assert small.raw == b"cudnnBa\0"
    b.lib.cudnnGetLastErrorString(None, ctypes.c_size_t(0))  # no buffer: nothing written, no crash


def test_last_error_is_per_thread(b: G.Backend) -> None:
    last_error(b)
    fail_once(b)
    seen: list[bytes] = []
    worker = threading.Thread(target=lambda: seen.append(last_error(b)))
    worker.start()
    worker.join()
    assert seen == [b""]
    assert b"BAD_PARAM_ATTRIBUTE_TYPE" in last_error(b)


def fwd_graph(b: G.Backend, handle: C.Handle) -> P:
    """A forward graph built in cudnn_frontend's order: each tensor and the convolution destroyed as soon as the
    operation holds them."""
    x, _ = b.tensor(120, [2, 4, 6, 7])
    w, _ = b.tensor(119, [6, 4, 3, 3])
    y, _ = b.tensor(121, [2, 6, 6, 7])
    conv, _ = b.conv()
    op, sts = b.conv_op(G.OP_FWD, x, w, y, conv)
    assert sts[-1] == 0
    for d in (x, w, y, conv):
        b.made.remove(d)
        assert b.lib.cudnnBackendDestroyDescriptor(d) == 0
    g, sts = b.graph([op], handle.ptr)
    assert sts == [0, 0, 0]
    b.made.remove(op)
    assert b.lib.cudnnBackendDestroyDescriptor(op) == 0
    return g


def configs(b: G.Backend, g: P, mode: int) -> list[P]:
    h = b.create(G.ENGINEHEUR)
    assert b.set_desc(h, G.A_HEUR_GRAPH, g) == 0
    assert b.set(h, G.A_HEUR_MODE, G.T_HEUR_MODE, 1, ctypes.byref(ctypes.c_int(mode))) == 0
    assert b.finalize(h) == 0
    count = ctypes.c_int64(-1)
    assert (
        b.lib.cudnnBackendGetAttribute(h, G.A_HEUR_RESULTS, G.T_DESC, ctypes.c_int64(0), ctypes.byref(count), None) == 0
    )
    cfgs = [b.create(G.ENGINECFG) for _ in range(count.value)]
    assert b.get(h, G.A_HEUR_RESULTS, G.T_DESC, count.value, (P * count.value)(*[c.value for c in cfgs])) == (
        0,
        count.value,
    )
    return cfgs


def test_engine_config_attributes_the_v1_api_reads(b: G.Backend, handle: C.Handle) -> None:
    cfg = configs(b, fwd_graph(b, handle), G.HEUR_INSTANT)[0]
    shared = ctypes.c_int32(-5)
    # As the v1 API asks: one element, no count pointer.
    assert b.lib.cudnnBackendGetAttribute(cfg, A_CFG_SHARED_MEMORY, G.T_INT32, 1, None, ctypes.byref(shared)) == 0
    assert shared.value == 0  # CPU engines use no GPU shared memory
    ws = ctypes.c_int64(-5)
    assert b.lib.cudnnBackendGetAttribute(cfg, G.A_CFG_WS, G.T_INT64, 1, None, ctypes.byref(ws)) == 0
    assert ws.value >= 0
    assert b.get(cfg, A_CFG_SHARED_MEMORY, G.T_INT32, 1, None) == (0, 1)  # a count query
    assert b.get(cfg, A_CFG_SHARED_MEMORY, G.T_INT64, 1, ctypes.byref(ws))[0] == BADTYPE
    assert b.set(cfg, A_CFG_SHARED_MEMORY, G.T_INT32, 1, ctypes.byref(shared)) == 2000  # finalized


def test_the_frontends_destruction_order(b: G.Backend, handle: C.Handle) -> None:
    """benchmark=False in PyTorch: the graph is gone before any plan is built from its configs."""
    g = fwd_graph(b, handle)
    cfgs = configs(b, g, G.HEUR_INSTANT) + configs(b, g, G.HEUR_FALLBACK)
    b.made.remove(g)
    assert b.lib.cudnnBackendDestroyDescriptor(g) == 0
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 6, 7)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    expected = T.conv_forward(x, w, T.ConvParams.make(2, pad=1))
    for cfg in cfgs:
        plan = b.create(G.PLAN)
        assert b.set(plan, G.A_PLAN_HANDLE, G.T_HANDLE, 1, ctypes.byref(P(handle.ptr))) == 0
        assert b.set_desc(plan, G.A_PLAN_CFG, cfg) == 0
        assert b.finalize(plan) == 0
        ws = ctypes.c_int64(-1)
        assert b.lib.cudnnBackendGetAttribute(plan, G.A_PLAN_WS, G.T_INT64, 1, None, ctypes.byref(ws)) == 0
        work = np.zeros(max(ws.value, 1), np.uint8)
        y = np.full((2, 6, 6, 7), np.nan, np.float32)
        vp = b.create(G.VARIANT_PACK)
        ptrs = (P * 3)(x.ctypes.data, w.ctypes.data, y.ctypes.data)
        assert b.set(vp, G.A_VP_UIDS, G.T_INT64, 3, i64s(120, 119, 121)) == 0
        assert b.set(vp, G.A_VP_PTRS, G.T_VOID_PTR, 3, ptrs) == 0
        assert b.set(vp, G.A_VP_WS, G.T_VOID_PTR, 1, ctypes.byref(P(work.ctypes.data))) == 0
        assert b.finalize(vp) == 0
        assert b.lib.cudnnBackendExecute(handle.ptr, plan, vp) == 0
        T.assert_close(y, expected, np.float32)
