"""A convolution's backend (graph-API) descriptors built the way cudnn_frontend builds them, through any library
that has the cudnnBackend* functions: the real libcudnn.so.9, the preload library's hooks, or the library a host
process loaded. Every status is kept. No GPU is needed: creating, setting and (for most) finalizing descriptors
work without one. Pure ctypes, so that it runs in any interpreter (tests/frameworks runs it beside PyTorch)."""

from __future__ import annotations

import ctypes
from typing import Any

TENSOR, CONVOLUTION, OP_CONV_FWD, POINTWISE, OP_POINTWISE = 17, 1, 10, 0, 13
T_INT64, T_DATA_TYPE, T_FLOAT, T_BOOLEAN, T_DESC, T_CONV_MODE, T_PW_MODE = 3, 1, 4, 2, 15, 7, 14
FLOAT, CROSS_CORRELATION = 0, 1

P = ctypes.c_void_p


def i64(*values: int) -> Any:
    return (ctypes.c_int64 * len(values))(*values)


def build(lib: Any) -> tuple[list[int], list[P]]:
    """A fprop graph's descriptors (x 120, w 119, y 121 as PyTorch numbers them) plus a fused ReLU, and a few
    bad calls; returns every status and the descriptors created."""
    st: list[int] = []
    made: list[P] = []

    def create(kind: int) -> P:
        d = P()
        st.append(lib.cudnnBackendCreateDescriptor(kind, ctypes.byref(d)))
        made.append(d)
        return d

    def set_attr(d: P, name: int, typ: int, count: int, elems: Any) -> None:
        st.append(lib.cudnnBackendSetAttribute(d, name, typ, ctypes.c_int64(count), elems))

    def tensor(uid: int, dims: list[int], virtual: bool = False) -> P:
        strides = [1] * len(dims)
        for k in range(len(dims) - 2, -1, -1):
            strides[k] = strides[k + 1] * dims[k + 1]
        t = create(TENSOR)
        set_attr(t, 902, T_INT64, len(dims), i64(*dims))
        set_attr(t, 903, T_INT64, len(strides), i64(*strides))
        set_attr(t, 906, T_INT64, 1, i64(uid))
        set_attr(t, 900, T_INT64, 1, i64(32))
        set_attr(t, 901, T_DATA_TYPE, 1, ctypes.byref(ctypes.c_int(FLOAT)))
        if virtual:
            set_attr(t, 907, T_BOOLEAN, 1, ctypes.byref(ctypes.c_bool(True)))
        st.append(lib.cudnnBackendFinalize(t))
        return t

    x, w, y = tensor(120, [8, 16, 12, 12]), tensor(119, [32, 16, 3, 3]), tensor(121, [8, 32, 12, 12], True)
    out = tensor(122, [8, 32, 12, 12])
    conv = create(CONVOLUTION)
    set_attr(conv, 106, T_INT64, 1, i64(2))
    set_attr(conv, 100, T_DATA_TYPE, 1, ctypes.byref(ctypes.c_int(FLOAT)))
    set_attr(conv, 101, T_CONV_MODE, 1, ctypes.byref(ctypes.c_int(CROSS_CORRELATION)))
    for name in (102, 103):
        set_attr(conv, name, T_INT64, 2, i64(1, 1))
    for name in (104, 105):
        set_attr(conv, name, T_INT64, 2, i64(1, 1))
    st.append(lib.cudnnBackendFinalize(conv))
    op = create(OP_CONV_FWD)
    for name, d in ((702, conv), (703, w), (704, x), (705, y)):
        set_attr(op, name, T_DESC, 1, ctypes.byref(d))
    set_attr(op, 700, T_FLOAT, 1, ctypes.byref(ctypes.c_float(1.0)))
    set_attr(op, 701, T_FLOAT, 1, ctypes.byref(ctypes.c_float(0.0)))
    st.append(lib.cudnnBackendFinalize(op))
    relu = create(POINTWISE)
    set_attr(relu, 0, T_PW_MODE, 1, ctypes.byref(ctypes.c_int(100)))
    set_attr(relu, 1, T_DATA_TYPE, 1, ctypes.byref(ctypes.c_int(FLOAT)))
    st.append(lib.cudnnBackendFinalize(relu))
    pw = create(OP_POINTWISE)
    for name, d in ((750, relu), (751, y), (753, out)):
        set_attr(pw, name, T_DESC, 1, ctypes.byref(d))
    st.append(lib.cudnnBackendFinalize(pw))
    # Bad calls: the shim must return what the real library returns, and record nothing of them.
    set_attr(P(), 902, T_INT64, 1, i64(1))  # NULL descriptor
    set_attr(x, 902, T_INT64, 4, i64(1, 2, 3, 4))  # a finalized descriptor
    set_attr(conv, 106, T_FLOAT, 1, ctypes.byref(ctypes.c_float(2.0)))  # the wrong attribute type
    # (Finalize(NULL) and Create(type, NULL) are left out: the real library crashes on them, with or without the
    # shim, which passes them through.)
    return st, made
