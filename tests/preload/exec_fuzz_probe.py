"""Run by test_exec_fuzz.py, with or without LD_PRELOAD=libucudnn.so: random convolution calls on the host backend,
good and bad (cases as JSON on stdin), each call's status and output recorded. Usage: python -m
tests.preload.exec_fuzz_probe HOST_LIBCUDNN.

A case: {"op": 0 forward | 1 backward data | 2 backward filter, "n", "c", "k", "size", "filt", "pad", "stride",
"algo", "ws": "null" | "exact" | "short" | "big", "alpha", "beta", "bad": null | "y_shape" | "w_kind" | "x_null" |
"conv_null"}. The library is loaded RTLD_GLOBAL and called through the global scope, so under the preload library
the hooks answer, as for a framework that links cuDNN. Prints one JSON line per case: the status of the call, the
workspace size the library asked for the algorithm, the output (float32, rounded to 5 significant digits) where
the call succeeded, and where it failed with no workspace or half of it and nothing else wrong, the output of the
same call given the workspace asked for ("ref").
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

import numpy as np

from ucudnn import cudnn as C

ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
lib = C.Cudnn(ctypes.CDLL(None))
raw = lib.raw
P = ctypes.c_void_p
SIZE_QUERY = ("cudnnGetConvolutionForwardWorkspaceSize", "cudnnGetConvolutionBackwardDataWorkspaceSize",
              "cudnnGetConvolutionBackwardFilterWorkspaceSize")  # fmt: skip
CALL = ("cudnnConvolutionForward", "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter")


def run(handle: C.Handle, case: dict[str, Any], seed: int) -> dict[str, Any]:
    """The call, and where its only fault may be its workspace (null or short), the same call with the workspace
    the library asked for: the result the call would have with it ("ref")."""
    result = call(handle, case, np.random.default_rng(seed))
    if result["status"] != 0 and case["ws"] in ("null", "short") and case["bad"] is None:
        ref = call(handle, {**case, "ws": "exact"}, np.random.default_rng(seed))
        if ref["status"] == 0:
            result["ref"] = ref["out"]
    return result


def call(handle: C.Handle, case: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    op, n, c, k, s, f = case["op"], case["n"], case["c"], case["k"], case["size"], case["filt"]
    spec = C.ConvSpec((case["pad"],) * 2, (case["stride"],) * 2, (1, 1))
    x = rng.uniform(-1, 1, (n, c, s, s)).astype(np.float32)
    w = rng.uniform(-1, 1, (k, c, f, f)).astype(np.float32)
    y_shape = list(C.conv_output_shape(x.shape, w.shape, spec.pads, spec.strides, spec.dilations))
    if case["bad"] == "y_shape":
        y_shape[2] += 1
    y = rng.uniform(-1, 1, y_shape).astype(np.float32)
    out = (y, x, w)[op]
    with C.TensorDesc.of(lib, x) as xd, C.FilterDesc.of(lib, w) as wd, C.TensorDesc.of(lib, y) as yd, \
         C.ConvDesc(lib, spec) as cd:  # fmt: skip
        descs = [xd.ptr, wd.ptr, yd.ptr]
        if case["bad"] == "w_kind":
            descs[1] = xd.ptr  # a tensor descriptor where the filter's belongs
        conv = None if case["bad"] == "conv_null" else cd.ptr
        first, second, third = {0: (0, 1, 2), 1: (1, 2, 0), 2: (0, 2, 1)}[op]  # the call's descriptor order
        need = ctypes.c_size_t(0)
        st_size = getattr(raw, SIZE_QUERY[op])(handle.ptr, descs[first], descs[second], conv, descs[third],
                                               case["algo"], ctypes.byref(need))  # fmt: skip
        size = {"null": 0, "exact": need.value, "short": max(0, need.value // 2), "big": need.value * 2 + 4096}[
            case["ws"]
        ]
        ws = np.zeros(max(1, size), np.uint8)
        ws_ptr = None if case["ws"] == "null" else ws.ctypes.data
        alpha, beta = ctypes.c_float(case["alpha"]), ctypes.c_float(case["beta"])
        data: list[int | None] = [x.ctypes.data, w.ctypes.data, y.ctypes.data]
        if case["bad"] == "x_null":
            data[0] = None
        st = getattr(raw, CALL[op])(handle.ptr, ctypes.byref(alpha), descs[first], data[first], descs[second],
                                    data[second], conv, case["algo"], ws_ptr, ctypes.c_size_t(size),
                                    ctypes.byref(beta), descs[third], data[third])  # fmt: skip
    result: dict[str, Any] = {"size_status": st_size, "need": need.value if st_size == 0 else None, "status": st}
    if st == 0:
        result["out"] = [float(f"{v:.5g}") for v in out.ravel()]
    return result


cases = json.load(sys.stdin)
with C.Handle(lib) as h:
    for i, case in enumerate(cases):
        print(json.dumps(run(h, case, i)), flush=True)
