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

import ctypes
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal

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
    AlgoPerf,
    ConvMode,
    CudnnError,
    DataType,
    Determinism,
    MathType,
    NanPropagation,
    Op,
    Perf,
    Raw,
    Status,
    TensorFormat,
)

__all__ = [
    "ALGO_COUNT",
    "HOOKED",
    "ActivationDesc",
    "ActivationMode",
    "AlgoPerf",
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
    "Status",
    "TensorDesc",
    "TensorFormat",
    "bf16_from_float",
    "bf16_to_float",
    "conv_output_shape",
    "default_compute_type",
    "dtype_of",
    "load",
]


def _ints(values: Sequence[int]) -> ctypes.Array[ctypes.c_int]:
    return (ctypes.c_int * max(1, len(values)))(*values)


_NP_TO_CUDNN: Final[dict[np.dtype[Any], DataType]] = {
    np.dtype(np.float32): DataType.FLOAT,
    np.dtype(np.float64): DataType.DOUBLE,
    np.dtype(np.float16): DataType.HALF,
    np.dtype(np.uint16): DataType.BFLOAT16,  # bit patterns: see bf16_from_float
}


def dtype_of(arr: npt.NDArray[Any]) -> DataType:
    """The cuDNN data type of a NumPy array (float32, float64, float16, uint16 = bfloat16 bit patterns)."""
    try:
        return _NP_TO_CUDNN[arr.dtype]
    except KeyError:
        raise ValueError(f"no cuDNN data type for NumPy dtype {arr.dtype}") from None


def default_compute_type(data_type: DataType) -> DataType:
    """The compute type a convolution descriptor gets when none is asked for: FLOAT for HALF and BFLOAT16
    (cuDNN's "pseudo half" / "pseudo bfloat16" configurations, what mixed-precision training uses; the setter
    refuses a BFLOAT16 compute type), the data type itself otherwise."""
    return DataType.FLOAT if data_type in (DataType.HALF, DataType.BFLOAT16) else data_type


def bf16_from_float(a: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """bfloat16 bit patterns of ``a`` (any real array), rounded to nearest even as the host backend and GPUs do;
    NaN stays NaN, overflow gives infinity."""
    bits = np.ascontiguousarray(np.asarray(a, dtype=np.float32)).view(np.uint32)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    rounded = (bits.astype(np.uint64) + 0x7FFF + ((bits >> np.uint32(16)) & np.uint32(1))) >> 16
    out = np.where(nan, (bits >> np.uint32(16)) | np.uint32(0x40), rounded).astype(np.uint16)
    result: npt.NDArray[np.uint16] = out
    return result


def bf16_to_float(a: npt.NDArray[np.uint16]) -> npt.NDArray[np.float32]:
    """The float32 values of bfloat16 bit patterns (exact)."""
    if a.dtype != np.uint16:
        raise ValueError(f"bfloat16 data is held in uint16 arrays, got {a.dtype}")
    out: npt.NDArray[np.float32] = (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return out


def element_strides(arr: npt.NDArray[Any]) -> tuple[int, ...]:
    """Strides in elements (cuDNN's unit) of an array whose byte strides are multiples of its item size."""
    if any(s % arr.itemsize for s in arr.strides):
        raise ValueError(f"strides {arr.strides} are not multiples of the item size {arr.itemsize}")
    return tuple(s // arr.itemsize for s in arr.strides)


def conv_output_shape(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    pads: Sequence[int],
    strides: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
) -> tuple[int, ...]:
    """Forward output shape (N, K, spatial...) by the cuDNN formula; ValueError if a spatial size is < 1."""
    nsp = len(x_shape) - 2
    st = list(strides or [1] * nsp)
    dl = list(dilations or [1] * nsp)
    out = [int(x_shape[0]), int(w_shape[0])]
    for i in range(nsp):
        room = x_shape[2 + i] + 2 * pads[i] - ((w_shape[2 + i] - 1) * dl[i] + 1)
        if room < 0:
            raise ValueError(f"filter larger than padded input in spatial dim {i}")
        out.append(room // st[i] + 1)
    return tuple(out)


class _Desc:
    """Base of the descriptor owners: ``ptr`` is the C descriptor, destroyed by close()."""

    _destroy = ""

    def __init__(self, cudnn: Cudnn, create: str) -> None:
        self._cudnn = cudnn
        p = ctypes.c_void_p()
        cudnn.check(getattr(cudnn.raw, create)(ctypes.byref(p)), create)
        self.ptr: int | None = p.value

    def close(self) -> None:
        if self.ptr is not None:
            getattr(self._cudnn.raw, self._destroy)(self.ptr)
            self.ptr = None

    def __enter__(self) -> Any:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may already be gone
            pass


class TensorDesc(_Desc):
    """A tensor descriptor: packed in ``fmt`` when ``strides`` is None, else explicit element strides."""

    _destroy = "cudnnDestroyTensorDescriptor"

    def __init__(
        self,
        cudnn: Cudnn,
        shape: Sequence[int],
        dtype: DataType = DataType.FLOAT,
        strides: Sequence[int] | None = None,
        fmt: TensorFormat = TensorFormat.NCHW,
    ) -> None:
        super().__init__(cudnn, "cudnnCreateTensorDescriptor")
        try:
            if strides is None:
                st = cudnn.raw.cudnnSetTensorNdDescriptorEx(self.ptr, int(fmt), int(dtype), len(shape), _ints(shape))
            else:
                st = cudnn.raw.cudnnSetTensorNdDescriptor(
                    self.ptr, int(dtype), len(shape), _ints(shape), _ints(strides)
                )
            cudnn.check(st, f"set tensor descriptor {tuple(shape)}")
        except BaseException:
            self.close()
            raise

    @classmethod
    def of(cls, cudnn: Cudnn, arr: npt.NDArray[Any]) -> TensorDesc:
        """The descriptor of an array: its shape, element strides and data type."""
        return cls(cudnn, arr.shape, dtype_of(arr), element_strides(arr))

    def get(self) -> tuple[DataType, tuple[int, ...], tuple[int, ...]]:
        """(data type, dims, strides) from cudnnGetTensorNdDescriptor."""
        dt, nb = ctypes.c_int(), ctypes.c_int()
        dims, strides = _ints([0] * 8), _ints([0] * 8)
        self._cudnn.check(
            self._cudnn.raw.cudnnGetTensorNdDescriptor(self.ptr, 8, ctypes.byref(dt), ctypes.byref(nb), dims, strides),
            "get tensor descriptor",
        )
        return DataType(dt.value), tuple(dims[: nb.value]), tuple(strides[: nb.value])

    def size_in_bytes(self) -> int:
        size = ctypes.c_size_t()
        self._cudnn.check(self._cudnn.raw.cudnnGetTensorSizeInBytes(self.ptr, ctypes.byref(size)), "tensor size")
        return size.value


def filter_format_of(arr: npt.NDArray[Any]) -> TensorFormat:
    """NCHW if the filter array is C-contiguous, NHWC if its memory is packed K, spatial..., C."""
    if arr.flags.c_contiguous:
        return TensorFormat.NCHW
    order = (0, *range(2, arr.ndim), 1)
    if arr.transpose(order).flags.c_contiguous:
        return TensorFormat.NHWC
    raise ValueError("a filter array must be packed NCHW (C-contiguous) or NHWC (K, spatial..., C)")


class FilterDesc(_Desc):
    """A filter descriptor; ``shape`` is always (K, C/groups, spatial...), ``fmt`` the memory order."""

    _destroy = "cudnnDestroyFilterDescriptor"

    def __init__(
        self,
        cudnn: Cudnn,
        shape: Sequence[int],
        dtype: DataType = DataType.FLOAT,
        fmt: TensorFormat = TensorFormat.NCHW,
    ) -> None:
        super().__init__(cudnn, "cudnnCreateFilterDescriptor")
        try:
            st = cudnn.raw.cudnnSetFilterNdDescriptor(self.ptr, int(dtype), int(fmt), len(shape), _ints(shape))
            cudnn.check(st, f"set filter descriptor {tuple(shape)}")
        except BaseException:
            self.close()
            raise

    @classmethod
    def of(cls, cudnn: Cudnn, arr: npt.NDArray[Any]) -> FilterDesc:
        return cls(cudnn, arr.shape, dtype_of(arr), filter_format_of(arr))

    def get(self) -> tuple[DataType, TensorFormat, tuple[int, ...]]:
        """(data type, format, dims) from cudnnGetFilterNdDescriptor."""
        dt, fmt, nb = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        dims = _ints([0] * 8)
        st = self._cudnn.raw.cudnnGetFilterNdDescriptor(
            self.ptr, 8, ctypes.byref(dt), ctypes.byref(fmt), ctypes.byref(nb), dims
        )
        self._cudnn.check(st, "get filter descriptor")
        return DataType(dt.value), TensorFormat(fmt.value), tuple(dims[: nb.value])

    def size_in_bytes(self) -> int:
        size = ctypes.c_size_t()
        self._cudnn.check(self._cudnn.raw.cudnnGetFilterSizeInBytes(self.ptr, ctypes.byref(size)), "filter size")
        return size.value


@dataclass(frozen=True)
class ConvSpec:
    """Convolution parameters; ``compute_type`` None means :func:`default_compute_type` of the call's data type."""

    pads: tuple[int, ...]
    strides: tuple[int, ...] | None = None
    dilations: tuple[int, ...] | None = None
    groups: int = 1
    mode: ConvMode = ConvMode.CROSS_CORRELATION
    math_type: MathType = MathType.DEFAULT
    compute_type: DataType | None = None


class ConvDesc(_Desc):
    """A convolution descriptor (Nd setter, group count, math type)."""

    _destroy = "cudnnDestroyConvolutionDescriptor"

    def __init__(self, cudnn: Cudnn, spec: ConvSpec, data_type: DataType = DataType.FLOAT) -> None:
        super().__init__(cudnn, "cudnnCreateConvolutionDescriptor")
        try:
            n = len(spec.pads)
            ct = spec.compute_type if spec.compute_type is not None else default_compute_type(data_type)
            st = cudnn.raw.cudnnSetConvolutionNdDescriptor(
                self.ptr,
                n,
                _ints(spec.pads),
                _ints(spec.strides or [1] * n),
                _ints(spec.dilations or [1] * n),
                int(spec.mode),
                int(ct),
            )
            cudnn.check(st, "set convolution descriptor")
            cudnn.check(cudnn.raw.cudnnSetConvolutionGroupCount(self.ptr, spec.groups), "set group count")
            cudnn.check(cudnn.raw.cudnnSetConvolutionMathType(self.ptr, int(spec.math_type)), "set math type")
        except BaseException:
            self.close()
            raise

    def get(self) -> ConvSpec:
        """The descriptor's parameters, read back through the library's getters."""
        n, mode, ct, g, m = (ctypes.c_int() for _ in range(5))
        pad, stride, dil = _ints([0] * 6), _ints([0] * 6), _ints([0] * 6)
        raw = self._cudnn.raw
        self._cudnn.check(
            raw.cudnnGetConvolutionNdDescriptor(
                self.ptr, 6, ctypes.byref(n), pad, stride, dil, ctypes.byref(mode), ctypes.byref(ct)
            ),
            "get conv",
        )
        self._cudnn.check(raw.cudnnGetConvolutionGroupCount(self.ptr, ctypes.byref(g)), "get group count")
        self._cudnn.check(raw.cudnnGetConvolutionMathType(self.ptr, ctypes.byref(m)), "get math type")
        k = n.value
        return ConvSpec(
            tuple(pad[:k]),
            tuple(stride[:k]),
            tuple(dil[:k]),
            g.value,
            ConvMode(mode.value),
            MathType(m.value),
            DataType(ct.value),
        )


class ActivationDesc(_Desc):
    """An activation descriptor (for bias-activation forward)."""

    _destroy = "cudnnDestroyActivationDescriptor"

    def __init__(
        self,
        cudnn: Cudnn,
        mode: ActivationMode = ActivationMode.RELU,
        nan: NanPropagation = NanPropagation.NOT_PROPAGATE,
        coef: float = 0.0,
    ) -> None:
        super().__init__(cudnn, "cudnnCreateActivationDescriptor")
        try:
            cudnn.check(cudnn.raw.cudnnSetActivationDescriptor(self.ptr, int(mode), int(nan), coef), "set activation")
        except BaseException:
            self.close()
            raise

    def get(self) -> tuple[ActivationMode, NanPropagation, float]:
        m, n, c = ctypes.c_int(), ctypes.c_int(), ctypes.c_double()
        st = self._cudnn.raw.cudnnGetActivationDescriptor(self.ptr, ctypes.byref(m), ctypes.byref(n), ctypes.byref(c))
        self._cudnn.check(st, "get activation")
        return ActivationMode(m.value), NanPropagation(n.value), c.value


class Handle:
    """A cuDNN handle (cudnnCreate / cudnnDestroy); context-managed."""

    def __init__(self, cudnn: Cudnn) -> None:
        self._cudnn = cudnn
        p = ctypes.c_void_p()
        cudnn.check(cudnn.raw.cudnnCreate(ctypes.byref(p)), "cudnnCreate")
        self.ptr: int | None = p.value

    def close(self) -> None:
        if self.ptr is not None:
            self._cudnn.raw.cudnnDestroy(self.ptr)
            self.ptr = None

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


TensorLike = npt.NDArray[Any] | TensorDesc
FilterLike = npt.NDArray[Any] | FilterDesc
Workspace = npt.NDArray[Any] | Literal["auto"] | None


class Cudnn:
    """The convolution API of one libcudnn (``real``), with the hooked functions from ``hooks`` if given."""

    def __init__(self, real: ctypes.CDLL, hooks: ctypes.CDLL | None = None) -> None:
        self.real = real
        self.hooks = hooks
        self.raw = Raw(real, hooks)

    # ---- library ----
    def version(self) -> int:
        """cudnnGetVersion(): MAJOR*10000 + MINOR*100 + PATCH for cuDNN 9."""
        return int(self.raw.cudnnGetVersion())

    def error_string(self, status: int) -> str:
        s: bytes | None = self.raw.cudnnGetErrorString(status)
        return s.decode() if s else ""

    def check(self, status: int, what: str) -> None:
        """Raise CudnnError if ``status`` is not SUCCESS."""
        if status != 0:
            raise CudnnError(status, f"{what}: {self.error_string(status)} ({status})")

    def call(self, name: str, *args: Any) -> None:
        """Call ``name`` and raise CudnnError on a non-zero status."""
        self.check(getattr(self.raw, name)(*args), name)

    def handle(self) -> Handle:
        return Handle(self)

    # ---- descriptor plumbing for the array helpers ----
    def _tensor(self, t: TensorLike, owned: list[_Desc]) -> TensorDesc:
        if isinstance(t, TensorDesc):
            return t
        d = TensorDesc.of(self, t)
        owned.append(d)
        return d

    def _filter(self, w: FilterLike, owned: list[_Desc]) -> FilterDesc:
        if isinstance(w, FilterDesc):
            return w
        d = FilterDesc.of(self, w)
        owned.append(d)
        return d

    def _conv(self, conv: ConvSpec | ConvDesc, dtype: DataType, owned: list[_Desc]) -> ConvDesc:
        if isinstance(conv, ConvDesc):
            return conv
        d = ConvDesc(self, conv, dtype)
        owned.append(d)
        return d

    @staticmethod
    def _scale(value: float, dtype: DataType) -> ctypes.c_double | ctypes.c_float:
        return ctypes.c_double(value) if dtype == DataType.DOUBLE else ctypes.c_float(value)

    @staticmethod
    def _release(owned: list[_Desc]) -> None:
        for d in owned:
            d.close()

    def _descs(
        self, x: TensorLike, w: FilterLike, y: TensorLike, conv: ConvSpec | ConvDesc, owned: list[_Desc]
    ) -> tuple[TensorDesc, FilterDesc, ConvDesc, TensorDesc, DataType]:
        xd = self._tensor(x, owned)
        dtype = xd.get()[0]
        return xd, self._filter(w, owned), self._conv(conv, dtype, owned), self._tensor(y, owned), dtype

    @staticmethod
    def _data(op: Op, x: npt.NDArray[Any], w: npt.NDArray[Any], y: npt.NDArray[Any]) -> tuple[int, int, int]:
        """Data pointers in the op's C order: its two inputs, then its output."""
        a, b, out = {Op.FWD: (x, w, y), Op.BWD_DATA: (w, y, x), Op.BWD_FILTER: (x, y, w)}[op]
        return a.ctypes.data, b.ctypes.data, out.ctypes.data

    @staticmethod
    def _output(x: npt.NDArray[Any], w: npt.NDArray[Any], conv: ConvSpec | ConvDesc) -> npt.NDArray[Any]:
        """A zeroed forward output for input ``x`` and filter ``w``."""
        spec = conv.get() if isinstance(conv, ConvDesc) else conv
        return np.zeros(conv_output_shape(x.shape, w.shape, spec.pads, spec.strides, spec.dilations), x.dtype)

    @staticmethod
    def _args(op: Op, xd: TensorDesc, wd: FilterDesc, cd: ConvDesc, yd: TensorDesc) -> tuple[int | None, ...]:
        """Descriptor arguments in the op's C order (x, w, y are the forward problem's roles)."""
        if op == Op.FWD:
            return xd.ptr, wd.ptr, cd.ptr, yd.ptr
        if op == Op.BWD_DATA:
            return wd.ptr, yd.ptr, cd.ptr, xd.ptr
        return xd.ptr, yd.ptr, cd.ptr, wd.ptr

    # ---- queries (x, w, y are the forward problem's input, filter and output for every op) ----
    def workspace_size(
        self, handle: Handle, op: Op, x: TensorLike, w: FilterLike, y: TensorLike, conv: ConvSpec | ConvDesc, algo: int
    ) -> int:
        """Get*WorkspaceSize: bytes of workspace ``algo`` needs for ``op`` on this problem."""
        owned: list[_Desc] = []
        try:
            xd, wd, cd, yd, _ = self._descs(x, w, y, conv, owned)
            size = ctypes.c_size_t()
            self.call(WORKSPACE_SIZE[op], handle.ptr, *self._args(op, xd, wd, cd, yd), int(algo), ctypes.byref(size))
            return size.value
        finally:
            self._release(owned)

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
        return self._search(GET_V7[op], handle, op, x, w, y, conv, requested)

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
        if not ex:
            return self._search(FIND[op], handle, op, x, w, y, conv, requested)
        if not all(isinstance(a, np.ndarray) for a in (x, w, y)):
            raise TypeError("find(ex=True) needs arrays for x, w and y")
        ws_ptr = workspace.ctypes.data if workspace is not None else None
        ws_len = workspace_bytes if workspace_bytes is not None else (workspace.nbytes if workspace is not None else 0)
        assert isinstance(x, np.ndarray) and isinstance(w, np.ndarray) and isinstance(y, np.ndarray)
        data = self._data(op, x, w, y)
        return self._search(FIND[op] + "Ex", handle, op, x, w, y, conv, requested, ex_data=(*data, ws_ptr, ws_len))

    def _search(
        self,
        name: str,
        handle: Handle,
        op: Op,
        x: TensorLike,
        w: FilterLike,
        y: TensorLike,
        conv: ConvSpec | ConvDesc,
        requested: int | None,
        ex_data: tuple[Any, ...] | None = None,
    ) -> list[Perf]:
        owned: list[_Desc] = []
        try:
            xd, wd, cd, yd, _ = self._descs(x, w, y, conv, owned)
            req = ALGO_COUNT[op] if requested is None else requested
            rows = (AlgoPerf * max(1, req))()
            got = ctypes.c_int(-1)
            d = self._args(op, xd, wd, cd, yd)
            if ex_data is None:
                self.call(name, handle.ptr, *d, req, ctypes.byref(got), rows)
            else:
                a, b, out, ws, ws_len = ex_data
                # C order: (desc, data) pairs of the op's inputs, conv, output desc + data, counts, workspace.
                self.call(name, handle.ptr, d[0], a, d[1], b, d[2], d[3], out, req, ctypes.byref(got), rows, ws, ws_len)
            return [Perf.from_c(rows[i]) for i in range(got.value)]
        finally:
            self._release(owned)

    # ---- execution ----
    def _workspace(
        self,
        handle: Handle,
        op: Op,
        xd: TensorDesc,
        wd: FilterDesc,
        cd: ConvDesc,
        yd: TensorDesc,
        algo: int,
        workspace: Workspace,
        workspace_bytes: int | None,
    ) -> tuple[int | None, int, npt.NDArray[Any] | None]:
        if isinstance(workspace, str):
            workspace = np.empty(self.workspace_size(handle, op, xd, wd, yd, cd, algo), np.uint8)
        ptr = workspace.ctypes.data if workspace is not None and workspace.nbytes else None
        size = workspace_bytes if workspace_bytes is not None else (workspace.nbytes if workspace is not None else 0)
        return ptr, size, workspace

    def _execute(
        self,
        op: Op,
        handle: Handle,
        x: npt.NDArray[Any],
        w: npt.NDArray[Any],
        y: npt.NDArray[Any],
        conv: ConvSpec | ConvDesc,
        algo: int,
        workspace: Workspace,
        workspace_bytes: int | None,
        alpha: float,
        beta: float,
    ) -> None:
        """One of the three convolutions on arrays (x, w, y in the forward problem's roles)."""
        owned: list[_Desc] = []
        data = self._data(op, x, w, y)
        try:
            xd, wd, cd, yd, dtype = self._descs(x, w, y, conv, owned)
            ws, ws_len, _keep = self._workspace(handle, op, xd, wd, cd, yd, algo, workspace, workspace_bytes)
            d = self._args(op, xd, wd, cd, yd)
            a, b = self._scale(alpha, dtype), self._scale(beta, dtype)
            self.call(
                EXECUTE[op],
                handle.ptr,
                ctypes.byref(a),
                d[0],
                data[0],
                d[1],
                data[1],
                d[2],
                int(algo),
                ws,
                ws_len,
                ctypes.byref(b),
                d[3],
                data[2],
            )
        finally:
            self._release(owned)

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
        self._execute(Op.FWD, handle, x, w, y, conv, algo, workspace, workspace_bytes, alpha, beta)
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
        self._execute(Op.BWD_DATA, handle, dx, w, dy, conv, algo, workspace, workspace_bytes, alpha, beta)
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
        self._execute(Op.BWD_FILTER, handle, x, dw, dy, conv, algo, workspace, workspace_bytes, alpha, beta)
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
        owned: list[_Desc] = []
        try:
            xd, wd, cd, yd, dtype = self._descs(x, w, y, conv, owned)
            zd, bd = self._tensor(zz, owned), self._tensor(bias, owned)
            if isinstance(activation, ActivationDesc):
                ad = activation
            else:
                ad = ActivationDesc(self, activation)
                owned.append(ad)
            ws, ws_len, _keep = self._workspace(handle, Op.FWD, xd, wd, cd, yd, algo, workspace, workspace_bytes)
            a1, a2 = self._scale(alpha1, dtype), self._scale(alpha2, dtype)
            self.call(
                "cudnnConvolutionBiasActivationForward",
                handle.ptr,
                ctypes.byref(a1),
                xd.ptr,
                x.ctypes.data,
                wd.ptr,
                w.ctypes.data,
                cd.ptr,
                int(algo),
                ws,
                ws_len,
                ctypes.byref(a2),
                zd.ptr,
                zz.ctypes.data,
                bd.ptr,
                bias.ctypes.data,
                ad.ptr,
                yd.ptr,
                y.ctypes.data,
            )
        finally:
            self._release(owned)
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

    The preload library interposes ``dlsym`` (on x86-64), so ``ctypes.CDLL(libcudnn).cudnnConvolutionForward``
    is its hook there, as it is for a framework that dlopens cuDNN. Lookups on this object go through
    ``ucudnn_dlsym_unhooked`` instead when the preload library is loaded; elsewhere they are plain lookups.
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
