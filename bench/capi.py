"""The cuDNN calls the benchmark makes, over ctypes, on raw pointers (host memory or device memory alike).

:class:`Cudnn` takes two libraries: descriptor and handle calls always go to the real library, while the calls
the preload library hooks (Find, workspace size, execution) go to ``calls`` -- the real library for the
undivided baseline, the preload library for ucudnn's runs. Pointers are plain integers owned by the caller.
The preload library's control API (``ucudnn.h``) is wrapped by :class:`ShimControl`.
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ucudnn import plan_text
from ucudnn._cudnn_abi import AlgoPerf

OPS: tuple[str, ...] = ("fwd", "bwd-data", "bwd-filter")

CUDNN_DATA_FLOAT = 0
CUDNN_TENSOR_NCHW = 0
CUDNN_CROSS_CORRELATION = 1
SUCCESS = 0

_ALGO_COUNT = {"fwd": 8, "bwd-data": 6, "bwd-filter": 7}

_P = ctypes.c_void_p
_I = ctypes.c_int
_SZ = ctypes.c_size_t
_PI = ctypes.POINTER(ctypes.c_int)
_PSZ = ctypes.POINTER(ctypes.c_size_t)


class CudnnError(RuntimeError):
    """A cuDNN call returned a non-zero status."""

    def __init__(self, call: str, status: int, text: str = "") -> None:
        super().__init__(f"{call} failed with status {status}{f' ({text})' if text else ''}")
        self.call = call
        self.status = status


@dataclass(frozen=True)
class Perf:
    """One row of a Find result. ``time_ms`` is what the library reported; ``memory_bytes`` the workspace."""

    algo: int
    status: int
    time_ms: float
    memory_bytes: int
    deterministic: bool
    math_type: int


def version_text(version: int) -> str:
    """cudnnGetVersion()'s number as a release: 92400 -> ``9.24.0`` (cuDNN 9: MAJOR*10000 + MINOR*100 + PATCH;
    cuDNN 8 and older: MAJOR*1000 + MINOR*100 + PATCH)."""
    major, rest = (version // 10000, version % 10000) if version >= 90000 else (version // 1000, version % 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def algo_name(op: str, algo: int) -> str:
    return plan_text.algo_name(op, algo)


# Symbol name per op of each hooked call, and the role order of the three data pointers of each op:
# fwd (x, w -> y), bwd-data (w, dy -> dx), bwd-filter (x, dy -> dw).
_FIND = {
    "fwd": "cudnnFindConvolutionForwardAlgorithm",
    "bwd-data": "cudnnFindConvolutionBackwardDataAlgorithm",
    "bwd-filter": "cudnnFindConvolutionBackwardFilterAlgorithm",
}
_GET = {
    "fwd": "cudnnGetConvolutionForwardAlgorithm_v7",
    "bwd-data": "cudnnGetConvolutionBackwardDataAlgorithm_v7",
    "bwd-filter": "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
}
_WS = {
    "fwd": "cudnnGetConvolutionForwardWorkspaceSize",
    "bwd-data": "cudnnGetConvolutionBackwardDataWorkspaceSize",
    "bwd-filter": "cudnnGetConvolutionBackwardFilterWorkspaceSize",
}
_EXEC = {
    "fwd": "cudnnConvolutionForward",
    "bwd-data": "cudnnConvolutionBackwardData",
    "bwd-filter": "cudnnConvolutionBackwardFilter",
}
HOOKED_SYMBOLS: tuple[str, ...] = (*_FIND.values(), *_GET.values(), *_WS.values(), *_EXEC.values())


@dataclass
class Descriptors:
    """x (N,C,H,W), w (K,C,R,S), y (N,K,P,Q) float32 NCHW and a cross-correlation descriptor."""

    x: int
    w: int
    y: int
    conv: int
    x_shape: tuple[int, int, int, int]
    w_shape: tuple[int, int, int, int]
    y_shape: tuple[int, int, int, int]

    def operands(self, op: str) -> tuple[int, int, int]:
        """The three descriptors in the argument order of ``op``'s calls (first input, second input, output)."""
        if op == "fwd":
            return self.x, self.w, self.y
        if op == "bwd-data":
            return self.w, self.y, self.x
        return self.x, self.y, self.w

    def operand_shapes(self, op: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        if op == "fwd":
            return self.x_shape, self.w_shape, self.y_shape
        if op == "bwd-data":
            return self.w_shape, self.y_shape, self.x_shape
        return self.x_shape, self.y_shape, self.w_shape


class Cudnn:
    """Typed calls into ``real`` (descriptors, handles) and ``calls`` (the possibly hooked functions)."""

    def __init__(self, real: ctypes.CDLL, calls: ctypes.CDLL | None = None) -> None:
        self.real = real
        self.calls = real if calls is None else calls
        for lib in {id(self.real): self.real, id(self.calls): self.calls}.values():
            _declare(lib)
        self._error_string = getattr(real, "cudnnGetErrorString", None)
        if self._error_string is not None:
            self._error_string.restype = ctypes.c_char_p
            self._error_string.argtypes = (_I,)

    def _check(self, call: str, status: int) -> None:
        if status != SUCCESS:
            text = ""
            if self._error_string is not None:
                raw = self._error_string(status)
                text = raw.decode(errors="replace") if isinstance(raw, bytes) else ""
            raise CudnnError(call, status, text)

    def version(self) -> int:
        fn = self.real.cudnnGetVersion
        fn.restype = _SZ
        fn.argtypes = ()
        return int(fn())

    def create_handle(self) -> int:
        h = _P()
        self._check("cudnnCreate", self.real.cudnnCreate(ctypes.byref(h)))
        return int(h.value or 0)

    def destroy_handle(self, handle: int) -> None:
        self.real.cudnnDestroy(_P(handle))

    def set_stream(self, handle: int, stream: int) -> None:
        self._check("cudnnSetStream", self.real.cudnnSetStream(_P(handle), _P(stream)))

    def make_descriptors(
        self, n: int, c: int, h: int, w: int, k: int, r: int, s: int, pad: tuple[int, int], stride: tuple[int, int]
    ) -> Descriptors:
        """Descriptors for one problem (pad and stride as (h, w)); y's shape comes from the library itself."""
        made: list[tuple[str, int]] = []
        try:
            x = self._create("cudnnCreateTensorDescriptor", made)
            self._check(
                "cudnnSetTensor4dDescriptor",
                self.real.cudnnSetTensor4dDescriptor(_P(x), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w),
            )
            f = self._create("cudnnCreateFilterDescriptor", made)
            self._check(
                "cudnnSetFilter4dDescriptor",
                self.real.cudnnSetFilter4dDescriptor(_P(f), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, r, s),
            )
            conv = self._create("cudnnCreateConvolutionDescriptor", made)
            self._check(
                "cudnnSetConvolution2dDescriptor",
                self.real.cudnnSetConvolution2dDescriptor(
                    _P(conv), pad[0], pad[1], stride[0], stride[1], 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT
                ),
            )
            dims = (ctypes.c_int * 4)()
            self._check(
                "cudnnGetConvolutionNdForwardOutputDim",
                self.real.cudnnGetConvolutionNdForwardOutputDim(_P(conv), _P(x), _P(f), 4, dims),
            )
            y_shape = (dims[0], dims[1], dims[2], dims[3])
            y = self._create("cudnnCreateTensorDescriptor", made)
            self._check(
                "cudnnSetTensor4dDescriptor",
                self.real.cudnnSetTensor4dDescriptor(_P(y), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, *y_shape),
            )
        except BaseException:
            self._destroy(made)
            raise
        return Descriptors(x=x, w=f, y=y, conv=conv, x_shape=(n, c, h, w), w_shape=(k, c, r, s), y_shape=y_shape)

    def destroy_descriptors(self, d: Descriptors) -> None:
        self._destroy(
            [
                ("cudnnCreateTensorDescriptor", d.x),
                ("cudnnCreateFilterDescriptor", d.w),
                ("cudnnCreateConvolutionDescriptor", d.conv),
                ("cudnnCreateTensorDescriptor", d.y),
            ]
        )

    def _create(self, call: str, made: list[tuple[str, int]]) -> int:
        p = _P()
        self._check(call, getattr(self.real, call)(ctypes.byref(p)))
        made.append((call, int(p.value or 0)))
        return int(p.value or 0)

    def _destroy(self, made: list[tuple[str, int]]) -> None:
        for call, ptr in made:
            getattr(self.real, call.replace("Create", "Destroy"))(_P(ptr))

    def find(self, op: str, handle: int, d: Descriptors) -> list[Perf]:
        """All algorithms of ``op`` as the library's Find ranks them (fastest first), failures included."""
        return self._search(_FIND[op], op, handle, d)

    def get_v7(self, op: str, handle: int, d: Descriptors) -> list[Perf]:
        """The library's heuristic ranking (``Get*Algorithm_v7``; through ucudnn: its plan first)."""
        return self._search(_GET[op], op, handle, d)

    def _search(self, call: str, op: str, handle: int, d: Descriptors) -> list[Perf]:
        count = _ALGO_COUNT[op]
        results = (AlgoPerf * count)()
        returned = ctypes.c_int(-1)
        a, b, c = d.operands(op)
        status = getattr(self.calls, call)(
            _P(handle), _P(a), _P(b), _P(d.conv), _P(c), count, ctypes.byref(returned), results
        )
        self._check(call, status)
        if not 0 <= returned.value <= count:
            raise CudnnError(call, -1, f"returnedAlgoCount={returned.value} out of range")
        return [
            Perf(
                algo=r.algo,
                status=r.status,
                time_ms=float(r.time),
                memory_bytes=int(r.memory),
                deterministic=r.determinism == 1,
                math_type=r.mathType,
            )
            for r in results[: returned.value]
        ]

    def workspace_size(self, op: str, handle: int, d: Descriptors, algo: int) -> int:
        size = ctypes.c_size_t(0)
        a, b, c = d.operands(op)
        self._check(
            _WS[op], getattr(self.calls, _WS[op])(_P(handle), _P(a), _P(b), _P(d.conv), _P(c), algo, ctypes.byref(size))
        )
        return int(size.value)

    def execute(
        self,
        op: str,
        handle: int,
        d: Descriptors,
        algo: int,
        in0: int,
        in1: int,
        out: int,
        workspace: int,
        workspace_bytes: int,
        alpha: float = 1.0,
        beta: float = 0.0,
    ) -> None:
        """Run ``op``: fwd y = conv(x, w); bwd-data dx from (w, dy); bwd-filter dw from (x, dy)."""
        self.executor(op, handle, d, algo, in0, in1, out, workspace, workspace_bytes, alpha, beta)()

    def executor(
        self,
        op: str,
        handle: int,
        d: Descriptors,
        algo: int,
        in0: int,
        in1: int,
        out: int,
        workspace: int,
        workspace_bytes: int,
        alpha: float = 1.0,
        beta: float = 0.0,
    ) -> Callable[[], None]:
        """``execute`` with every argument converted once: the returned call costs one ctypes call to issue.

        The timed loops issue calls back to back, as a framework does; converting arguments on every call would
        add the same Python cost to both sides and hide what the calls themselves cost.
        """
        a, b, c = d.operands(op)
        fa, fb = ctypes.c_float(alpha), ctypes.c_float(beta)
        name = _EXEC[op]
        fn = getattr(self.calls, name)
        args = (
            _P(handle),
            ctypes.byref(fa),
            _P(a),
            _P(in0),
            _P(b),
            _P(in1),
            _P(d.conv),
            algo,
            _P(workspace),
            _SZ(workspace_bytes),
            ctypes.byref(fb),
            _P(c),
            _P(out),
        )

        def call() -> None:
            status = fn(*args)  # args holds fa and fb (byref keeps its object alive)
            if status != SUCCESS:
                self._check(name, status)

        return call


def _declare(lib: ctypes.CDLL) -> None:
    """Argument and result types of every call used, so 64-bit pointers and size_t pass intact."""
    sig: dict[str, tuple[Any, ...]] = {
        "cudnnCreate": (_P,),
        "cudnnDestroy": (_P,),
        "cudnnSetStream": (_P, _P),
        "cudnnCreateTensorDescriptor": (_P,),
        "cudnnDestroyTensorDescriptor": (_P,),
        "cudnnCreateFilterDescriptor": (_P,),
        "cudnnDestroyFilterDescriptor": (_P,),
        "cudnnCreateConvolutionDescriptor": (_P,),
        "cudnnDestroyConvolutionDescriptor": (_P,),
        "cudnnSetTensor4dDescriptor": (_P, _I, _I, _I, _I, _I, _I),
        "cudnnSetFilter4dDescriptor": (_P, _I, _I, _I, _I, _I, _I),
        "cudnnSetConvolution2dDescriptor": (_P, _I, _I, _I, _I, _I, _I, _I, _I),
        "cudnnGetConvolutionNdForwardOutputDim": (_P, _P, _P, _I, _PI),
    }
    for op in OPS:
        sig[_FIND[op]] = (_P, _P, _P, _P, _P, _I, _PI, ctypes.POINTER(AlgoPerf))
        sig[_GET[op]] = sig[_FIND[op]]
        sig[_WS[op]] = (_P, _P, _P, _P, _P, _I, _PSZ)
        sig[_EXEC[op]] = (_P, _P, _P, _P, _P, _P, _P, _I, _P, _SZ, _P, _P, _P)
    for name, argtypes in sig.items():
        fn = getattr(lib, name, None)
        if fn is None:
            continue  # the preload library exports only the hooked calls; a missing one fails when used
        fn.argtypes = argtypes
        fn.restype = _I


class ShimControl:
    """The preload library's ``ucudnn_*`` control API (see shim/include/ucudnn/ucudnn.h)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        lib.ucudnn_set_option.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
        lib.ucudnn_set_option.restype = _I
        lib.ucudnn_clear_plans.argtypes = ()
        lib.ucudnn_clear_plans.restype = None
        for name in ("ucudnn_stats_json", "ucudnn_last_plan_json"):
            fn = getattr(lib, name)
            fn.argtypes = (ctypes.c_char_p, _SZ)
            fn.restype = _SZ
        lib.ucudnn_debug_graph_json.argtypes = (ctypes.c_void_p, ctypes.c_char_p, _SZ)
        lib.ucudnn_debug_graph_json.restype = _SZ

    def set_option(self, name: str, value: str) -> None:
        if self.lib.ucudnn_set_option(name.encode(), value.encode()) != 0:
            raise ValueError(f"ucudnn_set_option({name}, {value!r}) was refused by the preload library")

    def clear_plans(self) -> None:
        self.lib.ucudnn_clear_plans()

    def _json(self, name: str, *args: Any) -> dict[str, Any]:
        fn = getattr(self.lib, name)
        size = 4096
        while True:
            buf = ctypes.create_string_buffer(size)
            needed = int(fn(*args, buf, size))
            if needed < size:
                value = json.loads(buf.value.decode() or "{}")
                return value if isinstance(value, dict) else {}
            size = needed + 1

    def stats(self) -> dict[str, Any]:
        return self._json("ucudnn_stats_json")

    def last_plan(self) -> dict[str, Any]:
        return self._json("ucudnn_last_plan_json")

    def graph_plan(self, plan: Any) -> dict[str, Any]:
        """What the shim resolved for a graph-API plan, and its split ({} for a plan it does not know)."""
        return self._json("ucudnn_debug_graph_json", plan)
