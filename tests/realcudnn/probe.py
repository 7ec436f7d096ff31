"""Run in a fresh process by test_descriptors.py: load the real libcudnn.so.9 (RTLD_GLOBAL) and then the shim,
build descriptors with the real library, and report what the real getters say next to what the shim derives
(its kernel key and its clones). Prints JSON. Usage: probe.py REAL_LIBCUDNN LIBUCUDNN."""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

FLOAT, DOUBLE, HALF = 0, 1, 2
NCHW, NHWC = 0, 1
OPS = {"fwd": 0, "bwd_data": 1, "bwd_filter": 2}

real = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
shim = ctypes.CDLL(sys.argv[2])
shim.ucudnn_debug_kernel_key.restype = ctypes.c_size_t
shim.ucudnn_stats_json.restype = ctypes.c_size_t
real.cudnnGetVersion.restype = ctypes.c_size_t
P = ctypes.c_void_p


def ok(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what}: status {status}")


def ints(values: list[int]) -> Any:
    return (ctypes.c_int * len(values))(*values)


def tensor(dtype: int, dims: list[int], strides: list[int]) -> P:
    d = P()
    ok(real.cudnnCreateTensorDescriptor(ctypes.byref(d)), "create tensor")
    ok(real.cudnnSetTensorNdDescriptor(d, dtype, len(dims), ints(dims), ints(strides)), f"set tensor {dims}")
    return d


def packed(dims: list[int], nhwc: bool) -> list[int]:
    order = [0, *range(2, len(dims)), 1] if nhwc else list(range(len(dims)))
    strides = [0] * len(dims)
    s = 1
    for i in reversed(order):
        strides[i] = s
        s *= dims[i]
    return strides


def read_tensor(d: P) -> dict[str, Any]:
    dt, nb = ctypes.c_int(), ctypes.c_int()
    dims, strides = (ctypes.c_int * 8)(), (ctypes.c_int * 8)()
    ok(real.cudnnGetTensorNdDescriptor(d, 8, ctypes.byref(dt), ctypes.byref(nb), dims, strides), "get tensor")
    return {"dtype": dt.value, "dims": list(dims[: nb.value]), "strides": list(strides[: nb.value])}


def case(spec: dict[str, Any]) -> dict[str, Any]:
    dtype, nhwc, n = spec["dtype"], spec["nhwc"], spec["n"]
    xdims = [n, spec["c"], *spec["spatial"]]
    xstrides = packed(xdims, nhwc)
    xstrides[0] += spec.get("n_pad", 0)
    x = tensor(dtype, xdims, xstrides)
    w = P()
    ok(real.cudnnCreateFilterDescriptor(ctypes.byref(w)), "create filter")
    wdims = [spec["k"], spec["c"] // spec["groups"], *spec["filt"]]
    ok(real.cudnnSetFilterNdDescriptor(w, dtype, NHWC if nhwc else NCHW, len(wdims), ints(wdims)), "set filter")
    conv = P()
    nsp = len(spec["spatial"])
    ok(real.cudnnCreateConvolutionDescriptor(ctypes.byref(conv)), "create conv")
    ok(
        real.cudnnSetConvolutionNdDescriptor(
            conv,
            nsp,
            ints(spec["pad"]),
            ints(spec["stride"]),
            ints(spec["dil"]),
            spec["mode"],
            spec.get("compute", DOUBLE if dtype == DOUBLE else FLOAT),
        ),
        "set conv",
    )
    ok(real.cudnnSetConvolutionGroupCount(conv, spec["groups"]), "groups")
    ok(real.cudnnSetConvolutionMathType(conv, spec["math"]), "math")
    ydims = (ctypes.c_int * (nsp + 2))()
    ok(real.cudnnGetConvolutionNdForwardOutputDim(conv, x, w, nsp + 2, ydims), "output dim")
    y = tensor(dtype, list(ydims), packed(list(ydims), nhwc))

    # What the real getters say, independently of the shim.
    fdt, ffmt, fnb = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    fdims = (ctypes.c_int * 8)()
    ok(real.cudnnGetFilterNdDescriptor(w, 8, ctypes.byref(fdt), ctypes.byref(ffmt), ctypes.byref(fnb), fdims), "gf")
    alen, mode, ctype = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    pad, stride, dil = (ctypes.c_int * 6)(), (ctypes.c_int * 6)(), (ctypes.c_int * 6)()
    ok(
        real.cudnnGetConvolutionNdDescriptor(
            conv, 6, ctypes.byref(alen), pad, stride, dil, ctypes.byref(mode), ctypes.byref(ctype)
        ),
        "gc",
    )
    groups, math = ctypes.c_int(), ctypes.c_int()
    ok(real.cudnnGetConvolutionGroupCount(conv, ctypes.byref(groups)), "gg")
    ok(real.cudnnGetConvolutionMathType(conv, ctypes.byref(math)), "gm")
    reported = {
        "x": read_tensor(x),
        "y": read_tensor(y),
        "w": {"dtype": fdt.value, "format": ffmt.value, "dims": list(fdims[: fnb.value])},
        "pad": list(pad[: alen.value]),
        "stride": list(stride[: alen.value]),
        "dil": list(dil[: alen.value]),
        "mode": mode.value,
        "compute": ctype.value,
        "groups": groups.value,
        "math": math.value,
    }
    buf = ctypes.create_string_buffer(4096)
    xs, ys = (y, x) if spec["op"] == "bwd_data" else (x, y)  # BackwardData: x is dx, y is dy
    need = shim.ucudnn_debug_kernel_key(OPS[spec["op"]], xs, w, conv, ys, buf, ctypes.c_size_t(len(buf)))
    if spec["op"] == "bwd_data":
        reported["x"], reported["y"] = reported["y"], reported["x"]
    clones = {}
    for b in spec["clone_at"]:
        clone = P()
        status = shim.ucudnn_debug_clone_tensor(x, b, ctypes.byref(clone))
        clones[str(b)] = {"status": status, **(read_tensor(clone) if status == 0 else {})}
        if status == 0:
            real.cudnnDestroyTensorDescriptor(clone)
    return {
        "key": buf.value.decode() if need else None,
        "need": need,
        "reported": reported,
        "clones": clones,
        "x": read_tensor(x),
    }


specs = json.loads(sys.stdin.read())
stats = ctypes.create_string_buffer(4096)
results = [case(s) for s in specs]
shim.ucudnn_stats_json(stats, ctypes.c_size_t(len(stats)))
print(json.dumps({"cases": results, "version": real.cudnnGetVersion(), "stats": json.loads(stats.value)}))
