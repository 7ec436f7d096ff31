"""Run in a fresh process by test_status_parity.py: the descriptor sequences a real client makes, each call's status
recorded, against whatever library the process resolves cuDNN's symbols from. Usage: status_probe.py LIBCUDNN [local].

LIBCUDNN is loaded RTLD_GLOBAL and every call goes through the global scope, so with LD_PRELOAD set the preload
library's hooks answer, as they would for a framework that links cuDNN (PyTorch). With ``local`` it is loaded
RTLD_LOCAL and every function is looked up on its handle (ctypes dlsyms each name), as JAX/XLA and the other
frameworks that dlopen cuDNN do: the preload library is then reached only through its dlsym. Prints JSON:
{"statuses": {sequence: [status or value, ...]}, "values": {sequence: [...]}}; "values" holds what may differ
between libraries (engine counts), "statuses" what must not; under the preload library also "graph_calls", the
backend calls its hooks saw, and "dlsym_hooked", the lookups its dlsym answered with a hook.
"""

from __future__ import annotations

import ctypes
import json
import sys
from collections.abc import Callable
from typing import Any

from ucudnn import bridge
from ucudnn import graph_api as G
from ucudnn.graph_api import P, i64s

if sys.argv[2:] == ["local"]:
    lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL)
else:
    ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(None)
b = G.Backend(lib)
T_NAN_PROPAGATION, A_PW_NAN = 10, 2
NOT_PROPAGATE_NAN = 0
A_PW_RELU_LOWER = 3


def destroy(*descs: P) -> list[int]:
    out = []
    for d in descs:
        b.made.remove(d)
        out.append(int(lib.cudnnBackendDestroyDescriptor(d)))
    return out


def last_error() -> int:
    """1 when a message was waiting, then 0 after reading (reading clears it)."""
    buf = ctypes.create_string_buffer(512)
    lib.cudnnGetLastErrorString(buf, ctypes.c_size_t(len(buf)))
    return int(bool(buf.value))


def tensors() -> list[int]:
    sts: list[int] = []
    _, s = b.tensor(1, [8, 16, 12, 12])
    sts += s
    _, s = b.tensor(2, [8, 16, 12, 12], virtual=True)
    sts += s
    _, s = b.tensor(3, [8, 16, 12, 12], skip=[G.A_T_ALIGN])  # no alignment
    sts += s
    _, s = b.tensor(4, [8, 16, 0, 12])  # a zero extent
    sts += s
    t = b.create(G.TENSOR)
    sts.append(b.finalize(t))  # nothing set
    sts.append(last_error())
    sts.append(last_error())
    sts.append(b.set(t, G.A_T_UID, G.T_FLOAT, 1, i64s(5)))  # the wrong attribute type
    sts.append(b.set(t, G.A_T_DIMS, G.T_INT64, 0, i64s(1)))  # no elements
    x, _ = b.tensor(6, [2, 3, 4, 5])
    sts.append(b.set(x, G.A_T_UID, G.T_INT64, 1, i64s(7)))  # finalized
    sts.append(b.finalize(x))  # twice
    st, n = b.get(x, G.A_T_DIMS, G.T_INT64, 0, None)  # a count query: NULL array
    sts += [st, n]
    dims = i64s(*[-1] * 4)
    sts += list(b.get(x, G.A_T_DIMS, G.T_INT64, 4, dims)) + list(dims)
    sts.append(b.get(t, G.A_T_DIMS, G.T_INT64, 4, dims)[0])  # not finalized
    return sts


def convolution() -> list[int]:
    sts: list[int] = []
    _, s = b.conv()
    sts += s
    _, s = b.conv(skip=[G.A_CONV_NSP])
    sts += s
    _, s = b.conv(pad=(1, 1, 1))  # three paddings for two spatial dims
    sts += s
    _, s = b.conv(comp=G.DOUBLE, mode=0, stride=(2, 2), dil=(2, 2))
    sts += s
    c, _ = b.conv()
    sts.append(b.set(c, G.A_CONV_NSP, G.T_FLOAT, 1, i64s(2)))
    return sts


def pointwise() -> list[int]:
    """ReLU as cudnn_frontend builds it (NAN_PROPAGATION included), ADD, and wrong values and types."""
    sts: list[int] = []
    for mode, nan_type in ((G.PW_RELU, T_NAN_PROPAGATION), (G.PW_RELU, G.T_INT64), (G.PW_ADD, None)):
        p = b.create(G.POINTWISE)
        sts.append(b.set(p, G.A_PW_MODE, G.T_PW_MODE, 1, ctypes.byref(ctypes.c_int(mode))))
        sts.append(b.set(p, G.A_PW_PREC, G.T_DATA_TYPE, 1, ctypes.byref(ctypes.c_int(G.FLOAT))))
        if nan_type is not None:
            sts.append(b.set(p, A_PW_NAN, nan_type, 1, ctypes.byref(ctypes.c_int(NOT_PROPAGATE_NAN))))
            sts.append(b.set(p, A_PW_RELU_LOWER, G.T_DOUBLE, 1, ctypes.byref(ctypes.c_double(0.0))))
        sts.append(b.finalize(p))
        sts.append(b.get(p, G.A_PW_MODE, G.T_PW_MODE, 1, ctypes.byref(ctypes.c_int(-1)))[0])
    p = b.create(G.POINTWISE)
    sts.append(b.finalize(p))  # no mode
    return sts


def conv_graph(kind: int, *, destroy_early: bool = True) -> tuple[P, list[int]]:
    """One convolution op and its graph, tensors and convolution destroyed once the op holds them (the
    frontend's order)."""
    x, sx = b.tensor(120, [8, 16, 12, 12])
    w, sw = b.tensor(119, [32, 16, 3, 3])
    y, sy = b.tensor(121, [8, 32, 12, 12])
    c, sc = b.conv()
    op, so = b.conv_op(kind, x, w, y, c)
    sts = sx + sw + sy + sc + so
    if destroy_early:
        sts += destroy(x, w, y, c)
    g, sg = b.graph([op])
    sts += sg
    if destroy_early:
        sts += destroy(op)
    return g, sts


def operations() -> list[int]:
    sts: list[int] = []
    for kind in (G.OP_FWD, G.OP_BWD_DATA, G.OP_BWD_FILTER):
        _, s = conv_graph(kind)
        sts += s
    x, _ = b.tensor(120, [8, 16, 12, 12])
    w, _ = b.tensor(119, [32, 16, 3, 3])
    y, _ = b.tensor(121, [8, 32, 12, 12])
    _, s = b.conv_op(G.OP_FWD, x, w, y, None)  # no convolution
    sts += s
    op = b.create(G.OP_FWD)
    sts.append(b.set(op, G.A_FWD + 4, G.T_INT64, 1, i64s(1)))  # a tensor attribute given an integer
    return sts


def fused() -> list[int]:
    """PyTorch's conv + add + bias + relu graph, virtual float intermediates."""
    x, s1 = b.tensor(ord("x"), [8, 16, 12, 12])
    w, s2 = b.tensor(ord("w"), [32, 16, 3, 3])
    conv_out, s3 = b.tensor(ord("C"), [8, 32, 12, 12], virtual=True)
    z, s4 = b.tensor(ord("z"), [8, 32, 12, 12])
    added, s5 = b.tensor(ord("A"), [8, 32, 12, 12], virtual=True)
    bias, s6 = b.tensor(ord("b"), [1, 32, 1, 1])
    biased, s7 = b.tensor(ord("B"), [8, 32, 12, 12], virtual=True)
    y, s8 = b.tensor(ord("y"), [8, 32, 12, 12])
    c, s9 = b.conv()
    sts = s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8 + s9
    conv, s = b.conv_op(G.OP_FWD, x, w, conv_out, c)
    sts += s
    add, relu = b.pointwise(G.PW_ADD), b.create(G.POINTWISE)
    sts.append(b.set(relu, G.A_PW_MODE, G.T_PW_MODE, 1, ctypes.byref(ctypes.c_int(G.PW_RELU))))
    sts.append(b.set(relu, G.A_PW_PREC, G.T_DATA_TYPE, 1, ctypes.byref(ctypes.c_int(G.FLOAT))))
    sts.append(b.set(relu, A_PW_NAN, T_NAN_PROPAGATION, 1, ctypes.byref(ctypes.c_int(NOT_PROPAGATE_NAN))))
    sts.append(b.finalize(relu))
    ops = [conv]
    for pw, src, other, dst in ((add, conv_out, z, added), (add, added, bias, biased), (relu, biased, None, y)):
        op, st = b.pw_op(pw, src, dst, other)
        sts.append(st)
        ops.append(op)
    sts += destroy(x, w, conv_out, z, added, bias, biased, y, c)
    _, s = b.graph(ops)
    return sts + s


def heuristics() -> tuple[list[int], list[int]]:
    """Statuses of the INSTANT, FALLBACK and A heuristics of a graph whose descriptors are gone, and their
    engine counts (the value: each library has its own engines)."""
    sts: list[int] = []
    counts: list[int] = []
    for kind in (G.OP_FWD, G.OP_BWD_DATA, G.OP_BWD_FILTER):
        g, _ = conv_graph(kind)
        st, n = b.get_int64(g, G.A_GRAPH_COUNT)
        sts.append(st)
        counts.append(n)
        for mode in (G.HEUR_INSTANT, G.HEUR_FALLBACK, G.HEUR_A):
            h = b.create(G.ENGINEHEUR)
            sts.append(b.set_desc(h, G.A_HEUR_GRAPH, g))
            sts.append(b.set(h, G.A_HEUR_MODE, G.T_HEUR_MODE, 1, ctypes.byref(ctypes.c_int(mode))))
            sts.append(b.finalize(h))
            st, n = b.get(h, G.A_HEUR_RESULTS, G.T_DESC, 0, None)
            sts.append(st)
            counts.append(n)
    g, _ = conv_graph(G.OP_FWD)
    for bad_mode in (None, 4, 9, -1):  # unset (it reads back as MODES_COUNT) and out of range: no results
        h = b.create(G.ENGINEHEUR)
        sts.append(b.set_desc(h, G.A_HEUR_GRAPH, g))
        if bad_mode is not None:
            sts.append(b.set(h, G.A_HEUR_MODE, G.T_HEUR_MODE, 1, ctypes.byref(ctypes.c_int(bad_mode))))
        sts.append(b.finalize(h))
        sts += list(b.get(h, G.A_HEUR_RESULTS, G.T_DESC, 0, None))
        read = ctypes.c_int(-7)
        sts += [b.get(h, G.A_HEUR_MODE, G.T_HEUR_MODE, 1, ctypes.byref(read))[0], read.value]
    h = b.create(G.ENGINEHEUR)
    sts.append(b.set(h, G.A_HEUR_MODE, G.T_HEUR_MODE, 1, ctypes.byref(ctypes.c_int(G.HEUR_INSTANT))))
    sts.append(b.finalize(h))  # no graph
    sts.append(b.set_desc(h := b.create(G.ENGINEHEUR), G.A_HEUR_GRAPH, b.create(G.OPGRAPH)))
    sts.append(b.finalize(h))  # the graph not finalized
    return sts, counts


def engines() -> list[int]:
    """Engine descriptors of a graph whose ops are gone (their finalize needs no device); engine configs and plans
    are left out: without a device the real library cannot finalize them (and crashes on an empty config)."""
    g, sts = conv_graph(G.OP_FWD)
    for graph, index in ((None, None), (g, None), (None, 0), (g, 0), (g, 1 << 20), (g, -1)):
        e = b.create(G.ENGINE)
        if graph is not None:
            sts.append(b.set_desc(e, G.A_ENGINE_GRAPH, graph))
        if index is not None:
            sts.append(b.set(e, G.A_ENGINE_INDEX, G.T_INT64, 1, i64s(index)))
        sts.append(b.finalize(e))
    return sts


def knob_choices() -> list[int]:
    """Knob choices as cudnn_frontend's create_execution_plan(engine, knobs) makes them, and odd ones; Finalize is
    left out: without a device the real library refuses every knob choice's (1008)."""
    sts = []
    for attr, typ, count, elems in (
        (G.A_KNOB_TYPE, G.T_KNOB_TYPE, 1, ctypes.byref(ctypes.c_int(25))),
        (G.A_KNOB_TYPE, G.T_KNOB_TYPE, 1, ctypes.byref(ctypes.c_int(1000))),  # a type past cuDNN's enum
        (G.A_KNOB_TYPE, G.T_KNOB_TYPE, 1, ctypes.byref(ctypes.c_int(-1))),
        (G.A_KNOB_TYPE, G.T_INT64, 1, i64s(25)),
        (G.A_KNOB_VALUE, G.T_INT64, 1, i64s(0x75637564)),
        (G.A_KNOB_VALUE, G.T_INT64, 1, i64s(-5)),
        (G.A_KNOB_VALUE, G.T_KNOB_TYPE, 1, ctypes.byref(ctypes.c_int(1))),
        (G.A_KNOB_VALUE, G.T_INT64, 2, i64s(1, 2)),
        (G.A_CFG_WS, G.T_INT64, 1, i64s(1)),  # not a knob choice's attribute
    ):
        sts.append(b.set(b.create(G.KNOB_CHOICE), attr, typ, count, elems))
    k = b.create(G.KNOB_CHOICE)
    sts.append(b.set(k, G.A_KNOB_TYPE, G.T_KNOB_TYPE, 1, ctypes.byref(ctypes.c_int(25))))
    sts.append(b.set(k, G.A_KNOB_VALUE, G.T_INT64, 1, i64s(3)))
    sts.append(b.get(k, G.A_KNOB_VALUE, G.T_INT64, 1, i64s(0))[0])  # not finalized
    sts.append(int(lib.cudnnBackendInitialize(k)))
    return sts


SEQUENCES: dict[str, Callable[[], Any]] = {
    "tensors": tensors,
    "convolution": convolution,
    "pointwise": pointwise,
    "operations": operations,
    "fused": fused,
    "engines": engines,
    "knob_choices": knob_choices,
}
statuses = {name: fn() for name, fn in SEQUENCES.items()}
statuses["heuristics"], counts = heuristics()
b.destroy_all()
report: dict[str, Any] = {"statuses": statuses, "values": {"heuristics": counts}}
if bridge.shim_loaded():  # the preload library answered: say how many calls it saw
    stats = bridge.stats()
    report["graph_calls"] = stats["graph_calls"]
    report["dlsym_hooked"] = stats["dlsym_hooked"]
print(json.dumps(report))
