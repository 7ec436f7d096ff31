"""The host backend's descriptor calls answer like the real cuDNN 9 library, bad input included.

Every case runs against both libraries and must give the same status and the same values read back. Only
descriptor-level calls are compared (they work without a GPU); NULL output pointers are left out because the
real library dereferences them and crashes (the host backend returns BAD_PARAM there, tested in test_api_desc).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests._env import real_client_missing
from tests.conftest import REAL_CUDNN_INSTALL
from ucudnn import cudnn as C

pytestmark = pytest.mark.realcudnn


def _real_lib_path() -> Path | None:
    """The real library: $UCUDNN_REAL_LIBCUDNN if set, else the nvidia-cudnn wheel's copy."""
    explicit = os.environ.get("UCUDNN_REAL_LIBCUDNN")
    if explicit:
        return Path(explicit) if Path(explicit).exists() else None
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        candidate = Path(root) / "cudnn" / "lib" / "libcudnn.so.9"
        if candidate.exists():
            return candidate
    return None


@pytest.fixture(scope="module")
def real() -> C.Cudnn:
    path = _real_lib_path()
    if path is None:
        real_client_missing(
            f"the real libcudnn.so.9 is not available: {REAL_CUDNN_INSTALL}, or set UCUDNN_REAL_LIBCUDNN"
        )
    return C.Cudnn(ctypes.CDLL(str(path)))


CInt = ctypes.c_int


def arr(values: Sequence[int]) -> Any:
    return (CInt * max(1, len(values)))(*values)


def new(cd: C.Cudnn, kind: str) -> int:
    p = ctypes.c_void_p()
    assert getattr(cd.raw, f"cudnnCreate{kind}Descriptor")(ctypes.byref(p)) == 0
    assert p.value is not None
    return p.value


def outs(n: int) -> list[ctypes.c_int]:
    return [CInt(-7) for _ in range(n)]


def vals(xs: Sequence[ctypes.c_int]) -> tuple[int, ...]:
    return tuple(x.value for x in xs)


def refs(xs: Sequence[ctypes.c_int]) -> list[Any]:
    return [ctypes.byref(x) for x in xs]


# ---- tensor ----
def get_t4(cd: C.Cudnn, d: int) -> tuple[int, ...]:
    o = outs(9)
    return (cd.raw.cudnnGetTensor4dDescriptor(d, *refs(o)), *vals(o))


def get_tnd(cd: C.Cudnn, d: int, req: int = 8) -> tuple[Any, ...]:
    dt, nb, dims, strides = CInt(-7), CInt(-7), arr([-7] * 8), arr([-7] * 8)
    st = cd.raw.cudnnGetTensorNdDescriptor(d, req, ctypes.byref(dt), ctypes.byref(nb), dims, strides)
    return st, dt.value, nb.value, tuple(dims), tuple(strides)


def t_size(cd: C.Cudnn, d: int) -> tuple[int, int]:
    s = ctypes.c_size_t(77)
    return cd.raw.cudnnGetTensorSizeInBytes(d, ctypes.byref(s)), s.value


def tensor_readback(cd: C.Cudnn, d: int, status: int) -> tuple[Any, ...]:
    return (status, get_t4(cd, d), get_tnd(cd, d), t_size(cd, d)) if status == 0 else (status, get_tnd(cd, d))


def setter(kind: str, readback: Callable[[C.Cudnn, int, int], Any], fn: str, *args: Any) -> Callable[[C.Cudnn], Any]:
    """A case: a new descriptor of ``kind`` given to ``fn(d, *args)``, then read back with the status."""

    def run(cd: C.Cudnn) -> Any:
        d = new(cd, kind)
        return readback(cd, d, getattr(cd.raw, fn)(d, *args))

    return run


def set_t4(fmt: int, dt: int, *dims: int) -> Callable[[C.Cudnn], Any]:
    return setter("Tensor", tensor_readback, "cudnnSetTensor4dDescriptor", fmt, dt, *dims)


def set_t4ex(dt: int, *args: int) -> Callable[[C.Cudnn], Any]:
    return setter("Tensor", tensor_readback, "cudnnSetTensor4dDescriptorEx", dt, *args)


def set_tnd(dt: int, dims: Sequence[int], strides: Sequence[int]) -> Callable[[C.Cudnn], Any]:
    return setter("Tensor", tensor_readback, "cudnnSetTensorNdDescriptor", dt, len(dims), arr(dims), arr(strides))


def set_tndex(fmt: int, dt: int, dims: Sequence[int]) -> Callable[[C.Cudnn], Any]:
    return setter("Tensor", tensor_readback, "cudnnSetTensorNdDescriptorEx", fmt, dt, len(dims), arr(dims))


def tnd_requested(req: int) -> Callable[[C.Cudnn], Any]:
    def run(cd: C.Cudnn) -> Any:
        d = new(cd, "Tensor")
        cd.raw.cudnnSetTensorNdDescriptor(d, 0, 5, arr([2, 3, 4, 5, 6]), arr([360, 120, 30, 6, 1]))
        return get_tnd(cd, d, req), get_t4(cd, d)

    return run


def failed_set_keeps(cd: C.Cudnn) -> Any:
    d = new(cd, "Tensor")
    cd.raw.cudnnSetTensor4dDescriptor(d, 0, 0, 1, 2, 3, 4)
    return cd.raw.cudnnSetTensor4dDescriptor(d, 0, 0, 0, 2, 3, 4), get_t4(cd, d)


# ---- filter ----
def filter_readback(cd: C.Cudnn, d: int, status: int) -> tuple[Any, ...]:
    o = outs(6)
    g4 = (cd.raw.cudnnGetFilter4dDescriptor(d, *refs(o)), *vals(o))
    dt, fmt, nb, dims = CInt(-7), CInt(-7), CInt(-7), arr([-7] * 8)
    gnd = (
        cd.raw.cudnnGetFilterNdDescriptor(d, 8, ctypes.byref(dt), ctypes.byref(fmt), ctypes.byref(nb), dims),
        dt.value,
        fmt.value,
        nb.value,
        tuple(dims),
    )
    s = ctypes.c_size_t(77)
    size = (cd.raw.cudnnGetFilterSizeInBytes(d, ctypes.byref(s)), s.value)
    return status, g4, gnd, size


def set_f4(dt: int, fmt: int, *dims: int) -> Callable[[C.Cudnn], Any]:
    return setter("Filter", filter_readback, "cudnnSetFilter4dDescriptor", dt, fmt, *dims)


def set_fnd(dt: int, fmt: int, dims: Sequence[int]) -> Callable[[C.Cudnn], Any]:
    return setter("Filter", filter_readback, "cudnnSetFilterNdDescriptor", dt, fmt, len(dims), arr(dims))


def fnd_requested(req: int) -> Callable[[C.Cudnn], Any]:
    def run(cd: C.Cudnn) -> Any:
        d = new(cd, "Filter")
        cd.raw.cudnnSetFilterNdDescriptor(d, 0, 1, 5, arr([2, 3, 4, 5, 6]))
        dt, fmt, nb, dims = CInt(-7), CInt(-7), CInt(-7), arr([-7] * 8)
        st = cd.raw.cudnnGetFilterNdDescriptor(d, req, ctypes.byref(dt), ctypes.byref(fmt), ctypes.byref(nb), dims)
        return st, dt.value, fmt.value, nb.value, tuple(dims)

    return run


# ---- convolution ----
def conv_readback(cd: C.Cudnn, d: int, status: int) -> tuple[Any, ...]:
    o = outs(8)
    g2 = (cd.raw.cudnnGetConvolution2dDescriptor(d, *refs(o)), *vals(o))
    n, mode, ct = CInt(-7), CInt(-7), CInt(-7)
    pad, st, dil = arr([-7] * 6), arr([-7] * 6), arr([-7] * 6)
    gnd = cd.raw.cudnnGetConvolutionNdDescriptor(
        d, 6, ctypes.byref(n), pad, st, dil, ctypes.byref(mode), ctypes.byref(ct)
    )
    m, g = CInt(-7), CInt(-7)
    return (
        status,
        g2,
        (gnd, n.value, tuple(pad), tuple(st), tuple(dil), mode.value, ct.value),
        cd.raw.cudnnGetConvolutionMathType(d, ctypes.byref(m)),
        m.value,
        cd.raw.cudnnGetConvolutionGroupCount(d, ctypes.byref(g)),
        g.value,
    )


def set_c2(*args: int) -> Callable[[C.Cudnn], Any]:
    return setter("Convolution", conv_readback, "cudnnSetConvolution2dDescriptor", *args)


def set_cnd(
    pad: Sequence[int], st: Sequence[int], dil: Sequence[int], mode: int = 1, ct: int = 0
) -> Callable[[C.Cudnn], Any]:
    args = (len(pad), arr(pad), arr(st), arr(dil), mode, ct)
    return setter("Convolution", conv_readback, "cudnnSetConvolutionNdDescriptor", *args)


def cnd_requested(req: int) -> Callable[[C.Cudnn], Any]:
    def run(cd: C.Cudnn) -> Any:
        d = new(cd, "Convolution")
        cd.raw.cudnnSetConvolutionNdDescriptor(d, 3, arr([1, 2, 3]), arr([2, 1, 3]), arr([1, 2, 1]), 0, 1)
        n, mode, ct = CInt(-7), CInt(-7), CInt(-7)
        pad, st, dil = arr([-7] * 6), arr([-7] * 6), arr([-7] * 6)
        s = cd.raw.cudnnGetConvolutionNdDescriptor(
            d, req, ctypes.byref(n), pad, st, dil, ctypes.byref(mode), ctypes.byref(ct)
        )
        return s, n.value, tuple(pad), tuple(st), tuple(dil), mode.value, ct.value

    return run


def conv_setter(fn: str, value: int) -> Callable[[C.Cudnn], Any]:
    return setter("Convolution", conv_readback, fn, value)


# ---- output dims: (conv args, x dims, x dtype, w dims, w dtype, groups) ----
def out_dims(
    conv: tuple[Sequence[int], Sequence[int], Sequence[int]] | None,
    x: Sequence[int] | None,
    w: Sequence[int] | None,
    groups: int = 1,
    xdt: int = 0,
    wdt: int = 0,
    nb: int | None = None,
    wfmt: int = 0,
) -> Callable[[C.Cudnn], Any]:
    def run(cd: C.Cudnn) -> Any:
        c = new(cd, "Convolution")
        if conv is not None:
            p, s, dl = conv
            assert cd.raw.cudnnSetConvolutionNdDescriptor(c, len(p), arr(p), arr(s), arr(dl), 1, 0) == 0
            assert cd.raw.cudnnSetConvolutionGroupCount(c, groups) == 0
        t = new(cd, "Tensor")
        if x is not None:
            assert cd.raw.cudnnSetTensorNdDescriptorEx(t, 0, xdt, len(x), arr(x)) == 0
        f = new(cd, "Filter")
        if w is not None:
            assert cd.raw.cudnnSetFilterNdDescriptor(f, wdt, wfmt, len(w), arr(w)) == 0
        o = outs(4)
        r2 = (cd.raw.cudnnGetConvolution2dForwardOutputDim(c, t, f, *refs(o)), *vals(o))
        req = len(x) if (nb is None and x is not None) else (nb or 4)
        nd = arr([-7] * 8)
        rn = (cd.raw.cudnnGetConvolutionNdForwardOutputDim(c, t, f, req, nd), tuple(nd[:req]))
        return r2, rn

    return run


# ---- activation ----
def set_act(mode: int, nan: int, coef: float) -> Callable[[C.Cudnn], Any]:
    def run(cd: C.Cudnn) -> Any:
        d = new(cd, "Activation")
        st = cd.raw.cudnnSetActivationDescriptor(d, mode, nan, coef)
        m, n, c = CInt(-7), CInt(-7), ctypes.c_double(-7)
        g = cd.raw.cudnnGetActivationDescriptor(d, ctypes.byref(m), ctypes.byref(n), ctypes.byref(c))
        # A fresh descriptor is uninitialised memory in the real library: compare what was read only once set.
        return (st, g, m.value, n.value, c.value) if st == 0 else (st, g)

    return run


def null_calls(cd: C.Cudnn) -> Any:
    r = cd.raw
    i, sz, d = CInt(), ctypes.c_size_t(), ctypes.c_double()
    return (
        [
            r.cudnnCreateTensorDescriptor(None),
            r.cudnnCreateFilterDescriptor(None),
            r.cudnnCreateConvolutionDescriptor(None),
            r.cudnnCreateActivationDescriptor(None),
        ],
        [
            r.cudnnDestroyTensorDescriptor(None),
            r.cudnnDestroyFilterDescriptor(None),
            r.cudnnDestroyConvolutionDescriptor(None),
            r.cudnnDestroyActivationDescriptor(None),
            r.cudnnDestroy(None),
        ],
        r.cudnnCreate(None),
        r.cudnnSetTensor4dDescriptor(None, 0, 0, 1, 1, 1, 1),
        r.cudnnSetTensor4dDescriptorEx(None, 0, 1, 1, 1, 1, 1, 1, 1, 1),
        r.cudnnSetTensorNdDescriptor(None, 0, 4, arr([1] * 4), arr([1] * 4)),
        r.cudnnSetTensorNdDescriptorEx(None, 0, 0, 4, arr([1] * 4)),
        r.cudnnGetTensor4dDescriptor(None, *refs(outs(9))),
        r.cudnnGetTensorNdDescriptor(None, 4, ctypes.byref(i), ctypes.byref(i), arr([0] * 4), arr([0] * 4)),
        r.cudnnGetTensorSizeInBytes(None, ctypes.byref(sz)),
        r.cudnnSetFilter4dDescriptor(None, 0, 0, 1, 1, 1, 1),
        r.cudnnSetFilterNdDescriptor(None, 0, 0, 4, arr([1] * 4)),
        r.cudnnGetFilter4dDescriptor(None, *refs(outs(6))),
        r.cudnnGetFilterNdDescriptor(None, 4, ctypes.byref(i), ctypes.byref(i), ctypes.byref(i), arr([0] * 4)),
        r.cudnnGetFilterSizeInBytes(None, ctypes.byref(sz)),
        r.cudnnSetConvolution2dDescriptor(None, 0, 0, 1, 1, 1, 1, 1, 0),
        r.cudnnSetConvolutionNdDescriptor(None, 2, arr([0, 0]), arr([1, 1]), arr([1, 1]), 1, 0),
        r.cudnnGetConvolution2dDescriptor(None, *refs(outs(8))),
        r.cudnnGetConvolutionNdDescriptor(
            None, 2, ctypes.byref(i), arr([0] * 2), arr([0] * 2), arr([0] * 2), ctypes.byref(i), ctypes.byref(i)
        ),
        r.cudnnSetConvolutionMathType(None, 0),
        r.cudnnGetConvolutionMathType(None, ctypes.byref(i)),
        r.cudnnSetConvolutionGroupCount(None, 1),
        r.cudnnGetConvolutionGroupCount(None, ctypes.byref(i)),
        r.cudnnSetActivationDescriptor(None, 1, 0, 0.0),
        r.cudnnGetActivationDescriptor(None, ctypes.byref(i), ctypes.byref(i), ctypes.byref(d)),
        r.cudnnSetStream(None, None),
        r.cudnnGetStream(None, ctypes.byref(ctypes.c_void_p())),
        r.cudnnGetProperty(0, None),
        r.cudnnGetProperty(3, ctypes.byref(i)),
        r.cudnnGetProperty(-1, ctypes.byref(i)),
        r.cudnnGetConvolutionForwardAlgorithmMaxCount(None, ctypes.byref(i)),
        r.cudnnGetConvolutionBackwardDataAlgorithmMaxCount(None, ctypes.byref(i)),
        r.cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(None, ctypes.byref(i)),
    )


def unset_descriptors(cd: C.Cudnn) -> Any:
    t, f, c = new(cd, "Tensor"), new(cd, "Filter"), new(cd, "Convolution")
    return tensor_readback(cd, t, 0), filter_readback(cd, f, 0), conv_readback(cd, c, 0)


def error_strings(cd: C.Cudnn) -> Any:
    codes = [
        0,
        1001,
        1002,
        1003,
        1008,
        1009,
        *range(1999, 2014),
        *range(2999, 3016),
        *range(3999, 4008),
        *range(4999, 5006),
        1,
        3,
        9,
        -1,
        123456,
    ]
    return [cd.error_string(s) for s in codes]


dims: tuple[int, ...]
strides: tuple[int, ...]
CASES: dict[str, Callable[[C.Cudnn], Any]] = {
    "null descriptors and handles": null_calls,
    "unset descriptors": unset_descriptors,
    "error strings": error_strings,
    "tensor failed set keeps old value": failed_set_keeps,
}
for fmt, dt, dims in [
    (0, 0, (1, 2, 3, 4)),
    (1, 0, (1, 2, 3, 4)),
    (1, 1, (2, 3, 5, 7)),
    (0, 2, (1, 2, 3, 4)),
    (3, 0, (1, 2, 3, 4)),
    (-1, 0, (1, 2, 3, 4)),
    (0, 10, (1, 2, 3, 4)),
    (0, 12, (1, 2, 3, 4)),
    (0, -1, (1, 2, 3, 4)),
    (0, 0, (0, 2, 3, 4)),
    (0, 0, (1, 0, 3, 4)),
    (0, 0, (1, 2, -3, 4)),
    (2, 0, (1, 4, 3, 4)),
    (2, 5, (1, 8, 3, 4)),
    (2, 5, (1, 6, 3, 4)),
    (2, 8, (1, 32, 3, 4)),
    (2, 8, (1, 8, 3, 4)),
    (0, 0, (65536, 65536, 65536, 65536)),
    (0, 0, (65536, 65536, 1, 1)),
    (0, 0, (46341, 46341, 1, 1)),
    (0, 0, (46340, 46340, 1, 1)),
    (0, 9, (1, 2, 3, 4)),
    (0, 4, (1, 2, 3, 4)),
]:
    CASES[f"set tensor4d fmt={fmt} dt={dt} {dims}"] = set_t4(fmt, dt, *dims)
for dt, ex in [
    (0, (1, 2, 3, 4, 24, 12, 4, 1)),
    (0, (2, 2, 3, 4, 1, 2, 8, 2)),
    (0, (2, 2, 3, 4, 0, 0, 0, 0)),
    (0, (1, 2, 3, 4, -1, 12, 4, 1)),
    (0, (2, 2, 3, 4, 100, 50, 10, 2)),
    (0, (2, 2, 3, 4, 24, 12, 4, 0)),
    (0, (1, 2, 3, 4, 0, 12, 4, 1)),
    (0, (2, 2, 3, 4, 24, -12, 4, 1)),
    (1, (2, 2, 3, 4, 1, 1, 1, 1)),
    (2, (1, 2, 3, 4, 24, 12, 4, 1)),
    (12, (1, 2, 3, 4, 24, 12, 4, 1)),
    (0, (2, 1, 1, 1, 2**31 - 1, 1, 1, 1)),
    (0, (2, 1, 1, 1, 2**31 - 2, 1, 1, 1)),
    (0, (0, 2, 3, 4, 24, 12, 4, 1)),
]:
    CASES[f"set tensor4dEx dt={dt} {ex}"] = set_t4ex(dt, *ex)
for dims, strides in [
    ((1, 2, 3, 4), (24, 12, 4, 1)),
    ((1, 2, 3, 4, 5), (120, 60, 20, 5, 1)),
    ((2, 3, 4), (12, 4, 1)),
    ((3, 4), (4, 1)),
    ((4,), (1,)),
    ((), ()),
    ((1,) * 8, (1,) * 8),
    ((1,) * 9, (1,) * 9),
    ((2, 2, 3, 4), (24, 0, 4, 1)),
    ((2, 2, 3, 4), (-24, 12, 4, 1)),
    ((2, 2, 1, 4), (8, 4, 0, 1)),
    ((2, 2, 1, 4), (8, 4, -5, 1)),
    ((2, 2, 3, 4), (1, 1, 1, 1)),
    ((1, 1, 1, 1), (0, 0, 0, 0)),
    ((2, 2, 3, 4), (0, 0, 0, 1)),
    ((3, 2, 3, 4), (2**30, 12, 4, 1)),
    ((3, 1, 1, 1), (2**30 - 1, 1, 1, 1)),
    ((2, 2, 1, 1), (2**30, 2**30 - 1, 1, 1)),
    ((2, 2, 1, 1), (2**30, 2**30 - 2, 1, 1)),
    ((-1, 2, 3, 4), (24, 12, 4, 1)),
]:
    CASES[f"set tensorNd {dims} {strides}"] = set_tnd(0, dims, strides)
for fmt, dt, dims in [
    (0, 0, (1, 2, 3, 4)),
    (1, 0, (1, 2, 3, 4)),
    (1, 0, (1, 2, 3, 4, 5)),
    (0, 0, (2, 3, 4)),
    (1, 0, (2, 3, 4)),
    (0, 0, (2, 3)),
    (0, 0, (2,)),
    (0, 0, (1,) * 9),
    (2, 5, (1, 4, 3, 4)),
    (2, 0, (1, 4, 3, 4)),
    (3, 0, (1, 2, 3, 4)),
    (0, 2, (1, 2, 3, 4)),
    (1, 1, (1, 2, 3, 4, 5, 6)),
    (1, 0, (2, 0, 3, 4)),
    (0, 11, (1, 2, 3, 4)),
]:
    CASES[f"set tensorNdEx fmt={fmt} dt={dt} {dims}"] = set_tndex(fmt, dt, dims)
for req in (-1, 0, 1, 2, 4, 5, 6):
    CASES[f"get tensorNd requested={req}"] = tnd_requested(req)
for dt, fmt, dims in [
    (0, 0, (2, 3, 4, 5)),
    (0, 1, (2, 3, 4, 5)),
    (1, 0, (2, 3, 4, 5)),
    (2, 0, (2, 3, 4, 5)),
    (4, 0, (2, 3, 4, 5)),
    (10, 0, (2, 3, 4, 5)),
    (-1, 0, (2, 3, 4, 5)),
    (0, 2, (2, 4, 4, 5)),
    (5, 2, (2, 3, 4, 5)),
    (0, 3, (2, 3, 4, 5)),
    (0, 0, (0, 3, 4, 5)),
    (0, 0, (2, 3, 4, -5)),
    (0, 0, (46341, 46341, 1, 1)),
    (0, 0, (65536, 65536, 65536, 65536)),
]:
    CASES[f"set filter4d dt={dt} fmt={fmt} {dims}"] = set_f4(dt, fmt, *dims)
for dt, fmt, dims in [
    (0, 1, (2, 3, 4, 5, 6)),
    (0, 0, (2, 3, 4)),
    (0, 0, (2, 3)),
    (0, 0, (2,)),
    (0, 0, ()),
    (0, 0, (1,) * 8),
    (0, 0, (1,) * 9),
    (0, 0, (2, 3, 4, 0)),
    (1, 1, (2, 3, 4)),
    (0, 0, (2, 3, 4, 5, 6, 7)),
    (4, 0, (2, 3, 4, 5, 6)),
]:
    CASES[f"set filterNd dt={dt} fmt={fmt} {dims}"] = set_fnd(dt, fmt, dims)
for req in (-1, 0, 1, 2, 5, 6, 8):
    CASES[f"get filterNd requested={req}"] = fnd_requested(req)
for a in [
    (0, 0, 1, 1, 1, 1, 1, 0),
    (1, 2, 3, 4, 5, 6, 0, 1),
    (-1, 0, 1, 1, 1, 1, 1, 0),
    (0, 0, 0, 1, 1, 1, 1, 0),
    (0, 0, 1, -1, 1, 1, 1, 0),
    (0, 0, 1, 1, 0, 1, 1, 0),
    (0, 0, 1, 1, 1, -2, 1, 0),
    (0, 0, 1, 1, 1, 1, 2, 0),
    (0, 0, 1, 1, 1, 1, -1, 0),
    *[(0, 0, 1, 1, 1, 1, 1, ct) for ct in (-1, 2, 3, 4, 5, 6, 9, 10, 14)],
]:
    CASES[f"set conv2d {a}"] = set_c2(*a)
for pad, st, dil, mode, ct in [
    ((1, 2), (3, 4), (5, 6), 1, 0),
    ((1, 2, 3), (1, 1, 1), (1, 1, 1), 0, 1),
    ((1,), (1,), (1,), 1, 0),
    ((), (), (), 1, 0),
    ((0,) * 4, (1,) * 4, (1,) * 4, 1, 0),
    ((0,) * 6, (1,) * 6, (1,) * 6, 1, 0),
    ((0,) * 7, (1,) * 7, (1,) * 7, 1, 0),
    ((-1, 0), (1, 1), (1, 1), 1, 0),
    ((0, 0), (0, 1), (1, 1), 1, 0),
    ((0, 0), (1, 1), (1, 0), 1, 0),
    ((0, 0), (1, 1), (1, 1), 3, 0),
    ((0, 0), (1, 1), (1, 1), 1, 12),
    ((0, 0), (1, 1), (1, 1), 1, 2),
]:
    CASES[f"set convNd {pad} {st} {dil} mode={mode} ct={ct}"] = set_cnd(pad, st, dil, mode, ct)
for req in (-1, 0, 1, 2, 3, 6):
    CASES[f"get convNd requested={req}"] = cnd_requested(req)
for m in (0, 1, 2, 3, 4, -1):
    CASES[f"set math type {m}"] = conv_setter("cudnnSetConvolutionMathType", m)
for g in (1, 2, 0, -1, 1 << 20):
    CASES[f"set group count {g}"] = conv_setter("cudnnSetConvolutionGroupCount", g)
P2 = ((0, 0), (1, 1), (1, 1))
P3 = ((1, 1, 1), (1, 1, 1), (1, 1, 1))
for name, fn in {
    "basic": out_dims(P2, (2, 3, 8, 8), (4, 3, 3, 3)),
    "pad stride dilation": out_dims(((1, 2), (2, 3), (2, 1)), (2, 3, 9, 10), (4, 3, 3, 3)),
    "C mismatch": out_dims(P2, (2, 3, 8, 8), (4, 2, 3, 3)),
    "filter too big": out_dims(P2, (2, 3, 2, 2), (4, 3, 3, 3)),
    "filter exact": out_dims(P2, (2, 3, 3, 3), (4, 3, 3, 3)),
    "dilation too big": out_dims(((0, 0), (1, 1), (3, 3)), (2, 3, 5, 5), (4, 3, 3, 3)),
    "dtype mismatch": out_dims(P2, (2, 3, 8, 8), (4, 3, 3, 3), xdt=1),
    "half": out_dims(P2, (2, 3, 8, 8), (4, 3, 3, 3), xdt=2, wdt=2),
    "5-D tensor, 2-D conv": out_dims(P2, (2, 3, 4, 8, 8), (4, 3, 3, 3, 3)),
    "5-D": out_dims(((0, 1, 1), (1, 1, 1), (1, 1, 1)), (2, 3, 4, 8, 8), (4, 3, 3, 3, 3)),
    "5-D requested 4": out_dims(((0, 1, 1), (1, 1, 1), (1, 1, 1)), (2, 3, 4, 8, 8), (4, 3, 3, 3, 3), nb=4),
    "4-D tensor, 5-D filter": out_dims(((0, 1, 1), (1, 1, 1), (1, 1, 1)), (2, 3, 8, 8), (4, 3, 3, 3, 3)),
    "4-D with 3-D conv": out_dims(((0, 1, 1), (1, 1, 1), (1, 1, 1)), (2, 3, 8, 8), (4, 3, 3, 3)),
    "unset conv": out_dims(None, (2, 3, 8, 8), (4, 3, 3, 3)),
    "unset tensor": out_dims(P2, None, (4, 3, 3, 3)),
    "unset filter": out_dims(P2, (2, 3, 8, 8), None),
    "3-D tensor": out_dims(((0,), (1,), (1,)), (2, 3, 8), (4, 3, 3)),
    "groups ok": out_dims(P2, (2, 4, 8, 8), (6, 2, 3, 3), groups=2),
    "groups not dividing C": out_dims(P2, (2, 5, 8, 8), (6, 2, 3, 3), groups=2),
    "groups not dividing K": out_dims(P2, (2, 4, 8, 8), (5, 2, 3, 3), groups=2),
    "groups filter C mismatch": out_dims(P2, (2, 4, 8, 8), (6, 4, 3, 3), groups=2),
    "NHWC filter": out_dims(((1, 1), (1, 1), (1, 1)), (2, 3, 8, 8), (4, 3, 3, 3), wfmt=1),
    # Only the dims asked for are checked, and a failure leaves those computed before it (test_fuzz_parity.py).
    "5-D last filter too big, requested 4": out_dims(P3, (2, 4, 8, 8, 8), (8, 4, 1, 8, 100), nb=4),
    "5-D last filter too big": out_dims(P3, (2, 4, 8, 8, 8), (8, 4, 1, 8, 100)),
    "5-D middle filter too big": out_dims(P3, (2, 4, 8, 8, 8), (8, 4, 1, 100, 1)),
    # An INT8x4 (NCHW_VECT_C) filter's channels count in vectors of 4 against a plain input's.
    "vectorized filter, plain input": out_dims(P2, (2, 8, 6, 6), (4, 8, 3, 3), wdt=5, wfmt=2),
    "vectorized filter, 2 channels": out_dims(P2, (2, 2, 6, 6), (4, 8, 3, 3), wdt=5, wfmt=2),
    **{f"requested {nb}": out_dims(P2, (2, 3, 8, 8), (4, 3, 3, 3), nb=nb) for nb in (2, 3, 5, 9, -1)},
}.items():
    CASES[f"output dims {name}"] = fn
for mode, nan, coef in [
    (1, 0, 0.0),
    (5, 1, 2.5),
    (7, 0, 0.0),
    (-1, 0, 0.0),
    (1, 2, 0.0),
    (1, -1, 0.0),
    (3, 0, -1.0),
    (0, 0, 0.0),
    (6, 1, 1.5),
]:
    CASES[f"set activation mode={mode} nan={nan} coef={coef}"] = set_act(mode, nan, coef)


# HALF (2) and BFLOAT16 (9): every setter and getter path, both filter formats, the vectorised format (refused for
# 16-bit filters), the compute types of a convolution (HALF accepted, BFLOAT16 refused: BFLOAT16 data computes in
# FLOAT), and output dims with 16-bit and mixed data types (not checked there: the execution calls check them).
for dt in (2, 9):
    CASES[f"16-bit dt={dt} tensor4d NCHW"] = set_t4(0, dt, 2, 3, 4, 5)
    CASES[f"16-bit dt={dt} tensor4d NHWC"] = set_t4(1, dt, 2, 3, 4, 5)
    CASES[f"16-bit dt={dt} tensor4dEx"] = set_t4ex(dt, 2, 3, 4, 5, 61, 20, 5, 1)
    CASES[f"16-bit dt={dt} tensorNd 5-D"] = set_tnd(dt, (2, 3, 4, 5, 6), (360, 120, 30, 6, 1))
    CASES[f"16-bit dt={dt} tensorNdEx NHWC"] = set_tndex(1, dt, (2, 3, 4, 5))
    CASES[f"16-bit dt={dt} tensorNdEx VECT_C"] = set_tndex(2, dt, (2, 4, 4, 5))
    CASES[f"16-bit dt={dt} filter4d NCHW"] = set_f4(dt, 0, 2, 3, 4, 5)
    CASES[f"16-bit dt={dt} filter4d NHWC"] = set_f4(dt, 1, 2, 3, 4, 5)
    CASES[f"16-bit dt={dt} filter4d VECT_C"] = set_f4(dt, 2, 2, 4, 4, 5)
    CASES[f"16-bit dt={dt} filterNd 5-D NHWC"] = set_fnd(dt, 1, (2, 3, 4, 5, 6))
    CASES[f"16-bit dt={dt} output dims"] = out_dims(P2, (2, 3, 8, 8), (4, 3, 3, 3), xdt=dt, wdt=dt)
    CASES[f"16-bit dt={dt} output dims, float filter"] = out_dims(P2, (2, 3, 8, 8), (4, 3, 3, 3), xdt=dt)
for ct in (2, 9):
    CASES[f"16-bit convNd 3-D compute={ct}"] = set_cnd((0, 1, 1), (1, 1, 1), (1, 1, 1), 1, ct)
    CASES[f"16-bit convNd 2-D compute={ct}"] = set_cnd((1, 1), (1, 1), (1, 1), 0, ct)
CASES["16-bit output dims half x, bfloat16 w"] = out_dims(P2, (2, 3, 8, 8), (4, 3, 3, 3), xdt=2, wdt=9)


@pytest.mark.parametrize("name", list(CASES))
def test_same_answer_as_real_cudnn(name: str, cudnn: C.Cudnn, real: C.Cudnn) -> None:
    expected = CASES[name](real)
    actual = CASES[name](cudnn)
    assert actual == expected


def test_the_table_exercises_failures(cudnn: C.Cudnn) -> None:
    """Guard against a table that only compares successes: many cases must fail, with both status classes."""
    statuses = set()
    for fn in CASES.values():
        result = fn(cudnn)
        first = result[0] if isinstance(result, tuple) else None
        if isinstance(first, int):
            statuses.add(first)
    assert {0, 2000, 3000} <= statuses
