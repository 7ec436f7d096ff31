"""The descriptor side of the cuDNN binding: NumPy data types, descriptors that own their C object, the handle.

:mod:`ucudnn.cudnn` re-exports every public name (see its conventions: logical cuDNN order, element strides,
bfloat16 as uint16 bit patterns). A descriptor is made through a :class:`Library` (a :class:`ucudnn.cudnn.Cudnn`):
its ``raw`` functions and its ``check``, which raises CudnnError for a non-zero status.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ucudnn import _abi as H
from ucudnn._cudnn_abi import ActivationMode, ConvMode, DataType, MathType, NanPropagation, TensorFormat


class Library(Protocol):
    """What a descriptor needs of the binding: the bare functions and the status check."""

    raw: Any

    def check(self, status: int, what: str) -> None: ...


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


_O = TypeVar("_O", bound="_Owner")


# One setter call of a new object: (function, its arguments after the object, what it does for the error message).
Setting = tuple[str, tuple[Any, ...], str]


class _Owner:
    """A C object made by the ``create`` function, then given its ``settings`` in order (destroyed again if one
    fails), and destroyed by ``_destroy`` at close() (or the end of a ``with`` block): ``ptr`` is the object."""

    _destroy = ""

    def __init__(self, cudnn: Library, create: str, *settings: Setting) -> None:
        self._cudnn = cudnn
        p = ctypes.c_void_p()
        cudnn.check(getattr(cudnn.raw, create)(ctypes.byref(p)), create)
        self.ptr: int | None = p.value
        try:
            for function, args, what in settings:
                cudnn.check(getattr(cudnn.raw, function)(self.ptr, *args), what)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.ptr is not None:
            getattr(self._cudnn.raw, self._destroy)(self.ptr)
            self.ptr = None

    def __enter__(self: _O) -> _O:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class _Desc(_Owner):
    """A descriptor: host memory only, so it is also destroyed when garbage-collected."""

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
        cudnn: Library,
        shape: Sequence[int],
        dtype: DataType = DataType.FLOAT,
        strides: Sequence[int] | None = None,
        fmt: TensorFormat = TensorFormat.NCHW,
    ) -> None:
        what = f"set tensor descriptor {tuple(shape)}"
        setting: Setting
        if strides is None:
            setting = ("cudnnSetTensorNdDescriptorEx", (int(fmt), int(dtype), len(shape), _ints(shape)), what)
        else:
            setting = ("cudnnSetTensorNdDescriptor", (int(dtype), len(shape), _ints(shape), _ints(strides)), what)
        super().__init__(cudnn, "cudnnCreateTensorDescriptor", setting)

    @classmethod
    def of(cls, cudnn: Library, arr: npt.NDArray[Any]) -> TensorDesc:
        """The descriptor of an array: its shape, element strides and data type."""
        return cls(cudnn, arr.shape, dtype_of(arr), element_strides(arr))

    def get(self) -> tuple[DataType, tuple[int, ...], tuple[int, ...]]:
        """(data type, dims, strides) from cudnnGetTensorNdDescriptor."""
        dt, nb = ctypes.c_int(), ctypes.c_int()
        dims, strides = _ints([0] * H.CUDNN_DIM_MAX), _ints([0] * H.CUDNN_DIM_MAX)
        self._cudnn.check(
            self._cudnn.raw.cudnnGetTensorNdDescriptor(
                self.ptr, H.CUDNN_DIM_MAX, ctypes.byref(dt), ctypes.byref(nb), dims, strides
            ),
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
        cudnn: Library,
        shape: Sequence[int],
        dtype: DataType = DataType.FLOAT,
        fmt: TensorFormat = TensorFormat.NCHW,
    ) -> None:
        args = (int(dtype), int(fmt), len(shape), _ints(shape))
        setting = ("cudnnSetFilterNdDescriptor", args, f"set filter descriptor {tuple(shape)}")
        super().__init__(cudnn, "cudnnCreateFilterDescriptor", setting)

    @classmethod
    def of(cls, cudnn: Library, arr: npt.NDArray[Any]) -> FilterDesc:
        return cls(cudnn, arr.shape, dtype_of(arr), filter_format_of(arr))

    def get(self) -> tuple[DataType, TensorFormat, tuple[int, ...]]:
        """(data type, format, dims) from cudnnGetFilterNdDescriptor."""
        dt, fmt, nb = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        dims = _ints([0] * H.CUDNN_DIM_MAX)
        st = self._cudnn.raw.cudnnGetFilterNdDescriptor(
            self.ptr, H.CUDNN_DIM_MAX, ctypes.byref(dt), ctypes.byref(fmt), ctypes.byref(nb), dims
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

    def __init__(self, cudnn: Library, spec: ConvSpec, data_type: DataType = DataType.FLOAT) -> None:
        n = len(spec.pads)
        ct = spec.compute_type if spec.compute_type is not None else default_compute_type(data_type)
        nd = (n, _ints(spec.pads), _ints(spec.strides or [1] * n), _ints(spec.dilations or [1] * n), int(spec.mode))
        super().__init__(
            cudnn,
            "cudnnCreateConvolutionDescriptor",
            ("cudnnSetConvolutionNdDescriptor", (*nd, int(ct)), "set convolution descriptor"),
            ("cudnnSetConvolutionGroupCount", (spec.groups,), "set group count"),
            ("cudnnSetConvolutionMathType", (int(spec.math_type),), "set math type"),
        )

    def output_shape(self, x: TensorDesc, w: FilterDesc) -> tuple[int, ...]:
        """The forward output's dims for input ``x`` and filter ``w``, as the library computes them
        (cudnnGetConvolutionNdForwardOutputDim)."""
        nb = len(x.get()[1])
        dims = _ints([0] * nb)
        st = self._cudnn.raw.cudnnGetConvolutionNdForwardOutputDim(self.ptr, x.ptr, w.ptr, nb, dims)
        self._cudnn.check(st, "cudnnGetConvolutionNdForwardOutputDim")
        return tuple(dims[:nb])

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
        cudnn: Library,
        mode: ActivationMode = ActivationMode.RELU,
        nan: NanPropagation = NanPropagation.NOT_PROPAGATE,
        coef: float = 0.0,
    ) -> None:
        setting = ("cudnnSetActivationDescriptor", (int(mode), int(nan), coef), "set activation")
        super().__init__(cudnn, "cudnnCreateActivationDescriptor", setting)

    def get(self) -> tuple[ActivationMode, NanPropagation, float]:
        m, n, c = ctypes.c_int(), ctypes.c_int(), ctypes.c_double()
        st = self._cudnn.raw.cudnnGetActivationDescriptor(self.ptr, ctypes.byref(m), ctypes.byref(n), ctypes.byref(c))
        self._cudnn.check(st, "get activation")
        return ActivationMode(m.value), NanPropagation(n.value), c.value


class Handle(_Owner):
    """A cuDNN handle (cudnnCreate / cudnnDestroy); context-managed. Never destroyed by the garbage collector: at
    interpreter exit the device context it belongs to may be gone."""

    _destroy = "cudnnDestroy"

    def __init__(self, cudnn: Library) -> None:
        super().__init__(cudnn, "cudnnCreate")
