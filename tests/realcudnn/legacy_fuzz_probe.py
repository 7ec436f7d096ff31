"""Run in a fresh process by test_fuzz_parity.py: random legacy descriptor calls (read as JSON from stdin) on one
tensor, one filter and one convolution descriptor per case, each call's status and what the getters read back
recorded, against whatever library the process resolves cuDNN's symbols from. No call needs a handle, so no GPU.
Usage: python -m tests.realcudnn.legacy_fuzz_probe LIBCUDNN [all].

What a descriptor holds after a refused Set is each library's own (cuDNN writes some fields before it refuses), and
the real library's getters can then crash (SIGFPE): so after a refused Set a case's reads are not made and report
null, unless "all" is given (the host backend must survive them all).

A case is a list of calls, each [name, *arguments]:
  ["tensor_nd", dtype, dims, strides], ["tensor_nd_ex", format, dtype, dims], ["tensor_4d", format, dtype, n, c,
  h, w], ["tensor_4d_ex", dtype, n, c, h, w, ns, cs, hs, ws], ["filter_nd", dtype, format, dims], ["filter_4d",
  dtype, format, k, c, h, w], ["conv_nd", pads, strides, dilations, mode, compute], ["conv_2d", ph, pw, u, v, dh,
  dw, mode, compute], ["groups", count], ["math", type], ["read"] (every getter, and the forward output
  dimensions), ["sizes"] (the tensor's and the filter's size in bytes), ["queries"] (workspace sizes and
  Get*_v7 of the three operations, on a handle: only in cases the host backend alone runs).
Arrays are passed with at least 8 elements, whatever the count given, so that no call reads past them. Prints
one JSON list per case: per call its status, or for "read" and "sizes" the statuses and values.
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

from tests.realcudnn._fuzz_cases import clamped, packed

ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
lib = ctypes.CDLL(None)
P = ctypes.c_void_p
Int = ctypes.c_int
MAX = 8


def ints(values: list[int]) -> Any:
    return (Int * max(MAX, len(values)))(*values)


def out_ints() -> Any:
    return (Int * MAX)(*[-7] * MAX)


def read(t: P, f: P, c: P) -> list[Any]:
    got: list[Any] = []
    dtype, nb, dims, strides = Int(-7), Int(-7), out_ints(), out_ints()
    st = lib.cudnnGetTensorNdDescriptor(t, MAX, ctypes.byref(dtype), ctypes.byref(nb), dims, strides)
    got.append([st, dtype.value, nb.value, list(dims[: max(0, min(nb.value, MAX))]),
                list(strides[: max(0, min(nb.value, MAX))])] if st == 0 else [st])  # fmt: skip
    fmt = Int(-7)
    dims = out_ints()
    st = lib.cudnnGetFilterNdDescriptor(f, MAX, ctypes.byref(dtype), ctypes.byref(fmt), ctypes.byref(nb), dims)
    got.append([st, dtype.value, fmt.value, nb.value, list(dims[: max(0, min(nb.value, MAX))])] if st == 0 else [st])
    n, pads, strides, dils, mode, comp = Int(-7), out_ints(), out_ints(), out_ints(), Int(-7), Int(-7)
    st = lib.cudnnGetConvolutionNdDescriptor(c, MAX - 2, ctypes.byref(n), pads, strides, dils, ctypes.byref(mode),
                                             ctypes.byref(comp))  # fmt: skip
    k = max(0, min(n.value, MAX - 2))
    got.append([st, n.value, list(pads[:k]), list(strides[:k]), list(dils[:k]), mode.value, comp.value]
               if st == 0 else [st])  # fmt: skip
    got.append(
        lib.cudnnGetConvolutionNdDescriptor(
            c, MAX, ctypes.byref(n), pads, strides, dils, ctypes.byref(mode), ctypes.byref(comp)
        )
    )  # more than the 6 spatial dims it can hold
    g, m = Int(-7), Int(-7)
    got.append([lib.cudnnGetConvolutionGroupCount(c, ctypes.byref(g)), g.value])
    got.append([lib.cudnnGetConvolutionMathType(c, ctypes.byref(m)), m.value])
    for nb_out in (4, 5):
        out = out_ints()
        st = lib.cudnnGetConvolutionNdForwardOutputDim(c, t, f, nb_out, out)
        got.append([st, list(out[:nb_out])] if st == 0 else [st])
    return got


def sizes(t: P, f: P) -> list[Any]:
    size = ctypes.c_size_t(7)
    st_t = lib.cudnnGetTensorSizeInBytes(t, ctypes.byref(size))
    t_size = size.value
    st_f = lib.cudnnGetFilterSizeInBytes(f, ctypes.byref(size))
    return [[st_t, t_size if st_t == 0 else None], [st_f, size.value if st_f == 0 else None]]


PERF = ctypes.c_byte * 48  # cudnnConvolution*AlgoPerf_t
_handle: list[P] = []


def queries(t: P, f: P, c: P) -> list[Any]:
    """The forward output's descriptor (packed), then each op's workspace size for algorithms 0-7 and its Get*_v7:
    their statuses and answers. Needs a handle (made at the first such call): the host backend's cases only."""
    if not _handle:
        _handle.append(P())
        assert lib.cudnnCreate(ctypes.byref(_handle[0])) == 0
    h = _handle[0]
    dims = out_ints()
    nb = Int(-7)
    dtype, nbf, fdims, fmt = Int(-7), Int(-7), out_ints(), Int(-7)
    if lib.cudnnGetTensorNdDescriptor(t, MAX, ctypes.byref(dtype), ctypes.byref(nb), out_ints(), out_ints()) != 0:
        return ["no tensor"]
    st = lib.cudnnGetFilterNdDescriptor(f, MAX, ctypes.byref(Int()), ctypes.byref(fmt), ctypes.byref(nbf), fdims)
    if st != 0 or lib.cudnnGetConvolutionNdForwardOutputDim(c, t, f, nb.value, dims) != 0:
        return ["no output"]
    y = P()
    lib.cudnnCreateTensorDescriptor(ctypes.byref(y))
    ydims = list(dims[: nb.value])
    strides = clamped(packed(ydims))
    got: list[Any] = [lib.cudnnSetTensorNdDescriptor(y, dtype.value, nb.value, ints(ydims), ints(strides))]
    size, count, perfs = ctypes.c_size_t(7), Int(-7), PERF * 8
    for fn, v7, args in (("cudnnGetConvolutionForwardWorkspaceSize", "cudnnGetConvolutionForwardAlgorithm_v7",
                          (t, f, c, y)),
                         ("cudnnGetConvolutionBackwardDataWorkspaceSize",
                          "cudnnGetConvolutionBackwardDataAlgorithm_v7", (f, y, c, t)),
                         ("cudnnGetConvolutionBackwardFilterWorkspaceSize",
                          "cudnnGetConvolutionBackwardFilterAlgorithm_v7", (t, y, c, f))):  # fmt: skip
        for algo in range(8):
            st = getattr(lib, fn)(h, *args, algo, ctypes.byref(size))
            got.append([st, size.value if st == 0 else None])
        got.append(getattr(lib, v7)(h, *args, 8, ctypes.byref(count), perfs()))
    lib.cudnnDestroyTensorDescriptor(y)
    return got


SETTERS = {"tensor_nd", "tensor_nd_ex", "tensor_4d", "tensor_4d_ex", "filter_nd", "filter_4d", "conv_nd", "conv_2d",
           "groups", "math"}  # fmt: skip
READ_ALL = sys.argv[2:] == ["all"]


def run(case: list[list[Any]]) -> list[Any]:
    t, f, c = P(), P(), P()
    out: list[Any] = [lib.cudnnCreateTensorDescriptor(ctypes.byref(t)),
                      lib.cudnnCreateFilterDescriptor(ctypes.byref(f)),
                      lib.cudnnCreateConvolutionDescriptor(ctypes.byref(c))]  # fmt: skip
    refused = False
    for name, *a in case:
        if name not in SETTERS and refused and not READ_ALL:
            out.append(None)
            continue
        if name == "tensor_nd":
            out.append(lib.cudnnSetTensorNdDescriptor(t, a[0], len(a[1]), ints(a[1]), ints(a[2])))
        elif name == "tensor_nd_ex":
            out.append(lib.cudnnSetTensorNdDescriptorEx(t, a[0], a[1], len(a[2]), ints(a[2])))
        elif name == "tensor_4d":
            out.append(lib.cudnnSetTensor4dDescriptor(t, *a))
        elif name == "tensor_4d_ex":
            out.append(lib.cudnnSetTensor4dDescriptorEx(t, *a))
        elif name == "filter_nd":
            out.append(lib.cudnnSetFilterNdDescriptor(f, a[0], a[1], len(a[2]), ints(a[2])))
        elif name == "filter_4d":
            out.append(lib.cudnnSetFilter4dDescriptor(f, *a))
        elif name == "conv_nd":
            out.append(lib.cudnnSetConvolutionNdDescriptor(c, len(a[0]), ints(a[0]), ints(a[1]), ints(a[2]), a[3],
                                                           a[4]))  # fmt: skip
        elif name == "conv_2d":
            out.append(lib.cudnnSetConvolution2dDescriptor(c, *a))
        elif name == "groups":
            out.append(lib.cudnnSetConvolutionGroupCount(c, a[0]))
        elif name == "math":
            out.append(lib.cudnnSetConvolutionMathType(c, a[0]))
        elif name == "read":
            out.append(read(t, f, c))
        elif name == "queries":
            out.append(queries(t, f, c))
        else:
            out.append(sizes(t, f))
        refused |= name in SETTERS and out[-1] != 0
    for destroy, d in ((lib.cudnnDestroyTensorDescriptor, t), (lib.cudnnDestroyFilterDescriptor, f),
                       (lib.cudnnDestroyConvolutionDescriptor, c)):  # fmt: skip
        destroy(d)
    return out


for case in json.load(sys.stdin):
    print(json.dumps(run(case)), flush=True)
