"""A typed ctypes binding to the cuDNN 9 legacy convolution API of any ``libcudnn.so.9``.

Works with the real library (NVIDIA wheel), the host backend (``ucudnn/_lib/libcudnn.so.9``) and, through
``hooks``, the preload library. Every C call returns a status; :class:`Cudnn` raises :class:`CudnnError` for
a non-zero one, and ``Cudnn.raw.<cudnnFunction>(...)`` gives the bare status for tests that assert it.

Conventions:

* Arrays are NumPy arrays in logical cuDNN order (N, C, [D,] H, W) for tensors and (K, C/groups, [D,] H, W) for
  filters, with any memory layout their strides describe (element strides go to cuDNN). A filter's memory must
  be packed NCHW (C-contiguous) or packed NHWC (``w_khwc.transpose(0, 3, 1, 2)``).
* Memory ownership: the helpers borrow the caller's arrays for the duration of one call; they create and destroy
  their own descriptors. Descriptor objects (:class:`TensorDesc` etc.) own their C descriptor until ``close()``
  or the end of their ``with`` block. Outputs the helpers allocate are returned to the caller.
* Units: times in milliseconds, sizes in bytes. Scaling factors are passed as ``double`` for DOUBLE data and
  ``float`` otherwise (HALF and BFLOAT16 included), as cuDNN requires.
* Data types: float32 -> FLOAT, float64 -> DOUBLE, float16 -> HALF, and uint16 -> BFLOAT16: NumPy has no
  bfloat16, so BFLOAT16 data travels as its bit patterns in uint16 arrays (there is no 16-bit integer cuDNN type
  to confuse it with); :func:`bf16_from_float` and :func:`bf16_to_float` convert.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ucudnn._cudnn_abi import (
    ALGO_COUNT,
    EXECUTE,
    FIND,
    GET_V7,
    HOOKED,
    WORKSPACE_SIZE,
    ActivationMode,
    ConvMode,
    CudnnError,
    DataType,
    Determinism,
    MathType,
    NanPropagation,
    Op,
    Perf,
    PerfStruct,
    Raw,
    Status,
    TensorFormat,
)
from ucudnn._cudnn_desc import (
    ActivationDesc,
    ConvDesc,
    ConvSpec,
    FilterDesc,
    Handle,
    TensorDesc,
    bf16_from_float,
    bf16_to_float,
    conv_output_shape,
    default_compute_type,
    dtype_of,
    element_strides,
    filter_format_of,
)

__all__ = [
    "ALGO_COUNT",
    "HOOKED",
    "ActivationDesc",
    "ActivationMode",
    "ConvDesc",
    "ConvMode",
    "ConvSpec",
    "Cudnn",
    "CudnnError",
    "DataType",
    "Determinism",
    "FilterDesc",
    "Handle",
    "MathType",
    "NanPropagation",
    "Op",
    "Perf",
    "PerfStruct",
    "Status",
    "TensorDesc",
    "TensorFormat",
    "UnhookedCDLL",
    "bf16_from_float",
    "bf16_to_float",
    "conv_output_shape",
    "default_compute_type",
    "dtype_of",
    "element_strides",
    "filter_format_of",
    "load",
    "version_text",
]


def __getattr__(name: str) -> Any:
    # The perf struct's former name, which was also the optimizer's dataclass: kept for callers, deprecated.
    if name == "AlgoPerf":
        warnings.warn("ucudnn.cudnn.AlgoPerf is now PerfStruct", DeprecationWarning, stacklevel=2)
        return PerfStruct
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


TensorLike = npt.NDArray[Any] | TensorDesc
FilterLike = npt.NDArray[Any] | FilterDesc
Workspace = npt.NDArray[Any] | Literal["auto"] | None


def version_text(version: int) -> str:
    """cudnnGetVersion()'s number as a release: 92400 -> ``9.24.0`` (cuDNN 9: MAJOR*10000 + MINOR*100 + PATCH;
    cuDNN 8 and older: MAJOR*1000 + MINOR*100 + PATCH)."""
    major, rest = (version // 10000, version % 10000) if version >= 90000 else (version // 1000, version % 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


@dataclass(frozen=True)
class _Problem:
    """The descriptors of one call of ``op`` (x, w, y in the forward problem's roles) and its data type."""

    op: Op
    x: TensorDesc
    w: FilterDesc
    conv: ConvDesc
    y: TensorDesc
    dtype: DataType

    def args(self) -> tuple[int | None, ...]:
        """The descriptors in the op's C order: its two inputs, the convolution, its output."""
        a, b, out = self.op.operands(self.x.ptr, self.w.ptr, self.y.ptr)
        return a, b, self.conv.ptr, out


def _pointer(a: npt.NDArray[Any] | None) -> int | None:
    """The address of a workspace array; NULL for none or an empty one."""
    return a.ctypes.data if a is not None and a.nbytes else None


def _size(workspace: npt.NDArray[Any] | None, workspace_bytes: int | None) -> int:
    """The workspace size a call passes: ``workspace_bytes`` when given, else the array's size (0 for none)."""
    if workspace_bytes is not None:
        return workspace_bytes
    return workspace.nbytes if workspace is not None else 0


class Cudnn:
    """The convolution API of one libcudnn (``real``), with the hooked functions from ``hooks`` if given.

    The array helpers (``forward``, ``find``, ...) take NumPy arrays or descriptors; ``executor`` works on raw
    pointers (host or device memory alike) for callers that own their buffers, as ucudnn-bench does.
    """

    def __init__(self, real: ctypes.CDLL, hooks: ctypes.CDLL | None = None) -> None:
        self.real = real
        self.hooks = hooks
        self.raw = Raw(real, hooks)

    # ---- library ----
    def version(self) -> int:
        """cudnnGetVersion(): MAJOR*10000 + MINOR*100 + PATCH for cuDNN 9."""
        return int(self.raw.cudnnGetVersion())

    def version_text(self) -> str:
        """The library's version as a release, ``9.24.0``."""
        return version_text(self.version())

    def error_string(self, status: int) -> str:
        """cudnnGetErrorString(status); "" when the library has none."""
        try:
            s: bytes | None = self.raw.cudnnGetErrorString(status)
        except AttributeError:
            return ""
        return s.decode(errors="replace") if s else ""

    def check(self, status: int, what: str) -> None:
        """Raise CudnnError if ``status`` is not SUCCESS."""
        if status != Status.SUCCESS:
            raise CudnnError.failed(what, status, self.error_string(status))

    def call(self, name: str, *args: Any) -> None:
        """Call ``name`` and raise CudnnError on a non-zero status."""
        self.check(getattr(self.raw, name)(*args), name)

    def handle(self) -> Handle:
        return Handle(self)

    def set_stream(self, handle: Handle, stream: int) -> None:
        """cudnnSetStream: ``handle``'s work goes to the CUDA stream ``stream`` (a ``cudaStream_t``)."""
        self.call("cudnnSetStream", handle.ptr, stream)

    # ---- descriptor plumbing for the array helpers ----
    @contextlib.contextmanager
    def _problem(
        self, op: Op, x: TensorLike, w: FilterLike, y: TensorLike, conv: ConvSpec | ConvDesc
    ) -> Iterator[_Problem]:
        """The call's descriptors: the ones given, and for each array one made here and destroyed on exit."""
        owned: list[TensorDesc | FilterDesc | ConvDesc] = []

        def own(d: Any) -> Any:
            owned.append(d)
            return d

        try:
            xd = x if isinstance(x, TensorDesc) else own(TensorDesc.of(self, x))
            dtype = xd.get()[0]
            wd = w if isinstance(w, FilterDesc) else own(FilterDesc.of(self, w))
            cd = conv if isinstance(conv, ConvDesc) else own(ConvDesc(self, conv, dtype))
            yd = y if isinstance(y, TensorDesc) else own(TensorDesc.of(self, y))
            yield _Problem(op, xd, wd, cd, yd, dtype)
        finally:
            for d in owned:
                d.close()

    @staticmethod
    def _scale(value: float, dtype: DataType) -> ctypes.c_double | ctypes.c_float:
        return ctypes.c_double(value) if dtype == DataType.DOUBLE else ctypes.c_float(value)

    @staticmethod
    def _output(x: npt.NDArray[Any], w: npt.NDArray[Any], conv: ConvSpec | ConvDesc) -> npt.NDArray[Any]:
        """A zeroed forward output for input ``x`` and filter ``w``."""
        spec = conv.get() if isinstance(conv, ConvDesc) else conv
        return np.zeros(conv_output_shape(x.shape, w.shape, spec.pads, spec.strides, spec.dilations), x.dtype)

    # ---- queries (x, w, y are the forward problem's input, filter and output for every op) ----
    def workspace_size(
        self, handle: Handle, op: Op, x: TensorLike, w: FilterLike, y: TensorLike, conv: ConvSpec | ConvDesc, algo: int
    ) -> int:
        """Get*WorkspaceSize: bytes of workspace ``algo`` needs for ``op`` on this problem."""
        with self._problem(Op(op), x, w, y, conv) as p:
            size = ctypes.c_size_t()
            self.call(WORKSPACE_SIZE[p.op], handle.ptr, *p.args(), int(algo), ctypes.byref(size))
            return size.value

    def get_v7(
        self,
        handle: Handle,
        op: Op,
        x: TensorLike,
        w: FilterLike,
        y: TensorLike,
        conv: ConvSpec | ConvDesc,
        requested: int | None = None,
    ) -> list[Perf]:
        """Get*Algorithm_v7 heuristics: the returned rows, best first."""
        with self._problem(Op(op), x, w, y, conv) as p:
            return self._search(GET_V7[p.op], handle, p, requested)

    def find(
        self,
        handle: Handle,
        op: Op,
        x: TensorLike,
        w: FilterLike,
        y: TensorLike,
        conv: ConvSpec | ConvDesc,
        requested: int | None = None,
        *,
        ex: bool = False,
        workspace: npt.NDArray[Any] | None = None,
        workspace_bytes: int | None = None,
    ) -> list[Perf]:
        """Find*Algorithm (``ex=False``: the library allocates and runs on its own buffers) or Find*AlgorithmEx
        (``ex=True``: runs on the given arrays, which must be arrays then, and on ``workspace``; the op's output
        array is overwritten). Rows best first."""
        if ex and not all(isinstance(a, np.ndarray) for a in (x, w, y)):
            raise TypeError("find(ex=True) needs arrays for x, w and y")
        with self._problem(Op(op), x, w, y, conv) as p:
            if not ex:
                return self._search(FIND[p.op], handle, p, requested)
            assert isinstance(x, np.ndarray) and isinstance(w, np.ndarray) and isinstance(y, np.ndarray)
            a, b, out = p.op.operands(x.ctypes.data, w.ctypes.data, y.ctypes.data)
            ptr = workspace.ctypes.data if workspace is not None else None
            size = _size(workspace, workspace_bytes)
            return self._search(FIND[p.op] + "Ex", handle, p, requested, (a, b, out, ptr, size))

    def _search(
        self, name: str, handle: Handle, p: _Problem, requested: int | None, ex_data: tuple[Any, ...] | None = None
    ) -> list[Perf]:
        req = ALGO_COUNT[p.op] if requested is None else requested
        rows = (PerfStruct * max(1, req))()
        got = ctypes.c_int(-1)
        d = p.args()
        if ex_data is None:
            self.call(name, handle.ptr, *d, req, ctypes.byref(got), rows)
        else:
            a, b, out, workspace, workspace_bytes = ex_data
            # C order: (desc, data) pairs of the op's inputs, conv, output desc + data, counts, workspace.
            self.call(
                name, handle.ptr, d[0], a, d[1], b, d[2], d[3], out, req, ctypes.byref(got), rows, workspace,
                workspace_bytes,
            )  # fmt: skip
        if not 0 <= got.value <= max(0, req):
            raise CudnnError.failed(name, -1, f"returnedAlgoCount={got.value} out of range")
        return [Perf.from_c(rows[i]) for i in range(got.value)]

    # ---- execution ----
    def executor(
        self,
        handle: Handle,
        op: Op,
        x: TensorDesc,
        w: FilterDesc,
        y: TensorDesc,
        conv: ConvDesc,
        algo: int,
        data: tuple[int | None, int | None, int | None],
        workspace: int | None,
        workspace_bytes: int,
        alpha: float = 1.0,
        beta: float = 0.0,
    ) -> Callable[[], None]:
        """One execution of ``op`` with every argument converted once, so that the returned call costs one ctypes
        call to issue (timed loops issue calls back to back, as a framework does). ``data`` holds the addresses of
        x, w and y (the forward problem's roles, host or device memory); the scaling factors are floats (doubles
        for DOUBLE data). The call raises CudnnError for a non-zero status."""
        op = Op(op)
        dtype = x.get()[0]
        p = _Problem(op, x, w, conv, y, dtype)
        d = p.args()
        a, b, out = op.operands(*data)
        scale_a, scale_b = self._scale(alpha, dtype), self._scale(beta, dtype)
        name = EXECUTE[op]
        fn = getattr(self.raw, name)
        ref_a, ref_b = ctypes.byref(scale_a), ctypes.byref(scale_b)  # each keeps its object alive
        args = (handle.ptr, ref_a, d[0], a, d[1], b, d[2], int(algo), workspace, workspace_bytes, ref_b, d[3], out)

        def call() -> None:
            status = fn(*args)
            if status != 0:
                self.check(status, name)

        return call

    def _workspace(
        self, handle: Handle, p: _Problem, algo: int, workspace: Workspace, workspace_bytes: int | None
    ) -> tuple[npt.NDArray[Any] | None, int]:
        """The workspace array of a call (allocated for "auto") and the size to pass."""
        if isinstance(workspace, str):
            workspace = np.empty(self.workspace_size(handle, p.op, p.x, p.w, p.y, p.conv, algo), np.uint8)
        return workspace, _size(workspace, workspace_bytes)

    def _execute(
        self,
        handle: Handle,
        op: Op,
        xwy: tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]],
        conv: ConvSpec | ConvDesc,
        algo: int,
        workspace: tuple[Workspace, int | None],
        scale: tuple[float, float],
    ) -> None:
        """One of the three convolutions on arrays ``xwy`` (x, w, y in the forward problem's roles), with a
        workspace (array or "auto" or None, and the size to pass) and scaling factors (alpha, beta)."""
        x, w, y = xwy
        with self._problem(op, x, w, y, conv) as p:
            array, size = self._workspace(handle, p, algo, *workspace)
            data = (x.ctypes.data, w.ctypes.data, y.ctypes.data)
            self.executor(handle, op, p.x, p.w, p.y, p.conv, algo, data, _pointer(array), size, *scale)()

    def forward(
        self,
        handle: Handle,
        x: npt.NDArray[Any],
        w: npt.NDArray[Any],
        conv: ConvSpec | ConvDesc,
        algo: int,
        workspace: Workspace = "auto",
        alpha: float = 1.0,
        beta: float = 0.0,
        y: npt.NDArray[Any] | None = None,
        *,
        workspace_bytes: int | None = None,
    ) -> npt.NDArray[Any]:
        """y = alpha * conv(x, w) + beta * y (cudnnConvolutionForward). ``workspace="auto"`` allocates what the
        algorithm needs; None passes NULL (size ``workspace_bytes`` or 0). Returns y (allocated if None)."""
        if y is None:
            y = self._output(x, w, conv)
        self._execute(handle, Op.FWD, (x, w, y), conv, algo, (workspace, workspace_bytes), (alpha, beta))
        return y

    def backward_data(
        self,
        handle: Handle,
        w: npt.NDArray[Any],
        dy: npt.NDArray[Any],
        conv: ConvSpec | ConvDesc,
        algo: int,
        dx: npt.NDArray[Any],
        workspace: Workspace = "auto",
        alpha: float = 1.0,
        beta: float = 0.0,
        *,
        workspace_bytes: int | None = None,
    ) -> npt.NDArray[Any]:
        """dx = alpha * conv^T(dy, w) + beta * dx (cudnnConvolutionBackwardData); returns dx."""
        self._execute(handle, Op.BWD_DATA, (dx, w, dy), conv, algo, (workspace, workspace_bytes), (alpha, beta))
        return dx

    def backward_filter(
        self,
        handle: Handle,
        x: npt.NDArray[Any],
        dy: npt.NDArray[Any],
        conv: ConvSpec | ConvDesc,
        algo: int,
        dw: npt.NDArray[Any],
        workspace: Workspace = "auto",
        alpha: float = 1.0,
        beta: float = 0.0,
        *,
        workspace_bytes: int | None = None,
    ) -> npt.NDArray[Any]:
        """dw = alpha * corr(x, dy) + beta * dw (cudnnConvolutionBackwardFilter); returns dw."""
        self._execute(handle, Op.BWD_FILTER, (x, dw, dy), conv, algo, (workspace, workspace_bytes), (alpha, beta))
        return dw

    def bias_act_forward(
        self,
        handle: Handle,
        x: npt.NDArray[Any],
        w: npt.NDArray[Any],
        conv: ConvSpec | ConvDesc,
        algo: int,
        bias: npt.NDArray[Any],
        activation: ActivationMode | ActivationDesc = ActivationMode.RELU,
        z: npt.NDArray[Any] | None = None,
        alpha1: float = 1.0,
        alpha2: float = 0.0,
        y: npt.NDArray[Any] | None = None,
        workspace: Workspace = "auto",
        *,
        workspace_bytes: int | None = None,
    ) -> npt.NDArray[Any]:
        """y = act(alpha1 * conv(x, w) + alpha2 * z + bias) (cudnnConvolutionBiasActivationForward); ``bias`` has
        shape (1, K, 1, 1[, 1]); ``z`` defaults to y (as frameworks pass it). Returns y (allocated if None)."""
        if y is None:
            y = self._output(x, w, conv)
        zz = y if z is None else z
        with self._problem(Op.FWD, x, w, y, conv) as p, contextlib.ExitStack() as owned:
            zd, bd = (owned.enter_context(TensorDesc.of(self, t)) for t in (zz, bias))
            if isinstance(activation, ActivationDesc):
                ad = activation
            else:
                ad = owned.enter_context(ActivationDesc(self, activation))
            array, size = self._workspace(handle, p, algo, workspace, workspace_bytes)
            a1, a2 = self._scale(alpha1, p.dtype), self._scale(alpha2, p.dtype)
            self.call(
                "cudnnConvolutionBiasActivationForward",
                handle.ptr,
                ctypes.byref(a1),
                p.x.ptr,
                x.ctypes.data,
                p.w.ptr,
                w.ctypes.data,
                p.conv.ptr,
                int(algo),
                _pointer(array),
                size,
                ctypes.byref(a2),
                zd.ptr,
                zz.ctypes.data,
                bd.ptr,
                bias.ctypes.data,
                ad.ptr,
                p.y.ptr,
                y.ctypes.data,
            )
        return y


def preloaded_shim() -> ctypes.CDLL | None:
    """The ucudnn preload library when this process runs under it (an ``LD_PRELOAD`` entry already loaded that
    exports ``ucudnn_version``), else None. Nothing is loaded by asking."""
    for entry in os.environ.get("LD_PRELOAD", "").replace(":", " ").split():
        try:
            lib = ctypes.CDLL(entry, mode=os.RTLD_NOLOAD)
        except OSError:
            continue
        if hasattr(lib, "ucudnn_version"):
            return lib
    return None


class UnhookedCDLL(ctypes.CDLL):
    """A ``ctypes.CDLL`` whose functions are the library's own even under the preload library.

    The preload library interposes ``dlsym`` (on x86-64 and AArch64), so
    ``ctypes.CDLL(libcudnn).cudnnConvolutionForward`` is its hook there, as it is for a framework that dlopens cuDNN.
    Lookups on this object go through ``ucudnn_dlsym_unhooked`` instead when the preload library is loaded;
    elsewhere they are plain lookups.
    """

    def __init__(self, name: str, mode: int = ctypes.DEFAULT_MODE) -> None:
        super().__init__(name, mode=mode)
        shim = preloaded_shim()
        self._unhooked: Any = getattr(shim, "ucudnn_dlsym_unhooked", None) if shim is not None else None
        if self._unhooked is not None:
            self._unhooked.restype = ctypes.c_void_p
            self._unhooked.argtypes = (ctypes.c_void_p, ctypes.c_char_p)

    def __getitem__(self, name_or_ordinal: Any) -> Any:
        if self._unhooked is not None and isinstance(name_or_ordinal, str):
            address = self._unhooked(self._handle, name_or_ordinal.encode())
            if address:
                return self._FuncPtr(address)
        return super().__getitem__(name_or_ordinal)


def load(path: str | Path | None = None, hooks: str | Path | None = None, *, through_preload: bool = True) -> Cudnn:
    """A Cudnn over the library at ``path`` (default: the built host backend), hooks from ``hooks`` if given.

    Under the preload library (``ucudnn run``) and without ``hooks``, the hooked calls go to the preload library,
    as a framework's would; ``through_preload=False``: straight to ``path`` (an :class:`UnhookedCDLL`).
    """
    if path is None:
        from ucudnn import _paths

        path = _paths.require(_paths.HOST_CUDNN)
    real = UnhookedCDLL(str(path))
    if hooks is not None:
        return Cudnn(real, ctypes.CDLL(str(hooks)))
    return Cudnn(real, preloaded_shim() if through_preload else None)
