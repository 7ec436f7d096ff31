"""The cuDNN 9 C ABI as ctypes sees it: enums, the perf struct, the prototypes of the bound subset, which of
them the preload library hooks, and the bare functions (``Cudnn.raw``). :mod:`ucudnn.cudnn` builds the typed
binding on it and re-exports the public names.
"""

from __future__ import annotations

import ctypes
import enum
from dataclasses import dataclass
from typing import Any, Final


class Status(enum.IntEnum):
    """cuDNN 9 status codes (any non-zero value is an error; unknown values may occur)."""

    SUCCESS = 0
    NOT_INITIALIZED = 1001
    SUBLIBRARY_VERSION_MISMATCH = 1002
    BAD_PARAM = 2000
    BAD_PARAM_NULL_POINTER = 2002
    BAD_PARAM_MISALIGNED_POINTER = 2003
    BAD_PARAM_OUT_OF_BOUND = 2005
    BAD_PARAM_SIZE_INSUFFICIENT = 2006
    BAD_PARAM_SHAPE_MISMATCH = 2008
    NOT_SUPPORTED = 3000
    NOT_SUPPORTED_SHAPE = 3002
    NOT_SUPPORTED_DATA_TYPE = 3003
    NOT_SUPPORTED_LAYOUT = 3004
    NOT_SUPPORTED_ARCH_MISMATCH = 3007
    INTERNAL_ERROR = 4000
    INTERNAL_ERROR_HOST_ALLOCATION_FAILED = 4003
    INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED = 4004
    EXECUTION_FAILED = 5000


class DataType(enum.IntEnum):
    FLOAT = 0
    DOUBLE = 1
    HALF = 2
    INT8 = 3
    INT32 = 4
    UINT8 = 6
    BFLOAT16 = 9
    INT64 = 10


class TensorFormat(enum.IntEnum):
    NCHW = 0
    NHWC = 1
    NCHW_VECT_C = 2


class ConvMode(enum.IntEnum):
    CONVOLUTION = 0
    CROSS_CORRELATION = 1


class MathType(enum.IntEnum):
    DEFAULT = 0
    TENSOR_OP = 1
    TENSOR_OP_ALLOW_CONVERSION = 2
    FMA = 3


class Determinism(enum.IntEnum):
    NON_DETERMINISTIC = 0
    DETERMINISTIC = 1


class NanPropagation(enum.IntEnum):
    NOT_PROPAGATE = 0
    PROPAGATE = 1


class ActivationMode(enum.IntEnum):
    SIGMOID = 0
    RELU = 1
    TANH = 2
    CLIPPED_RELU = 3
    ELU = 4
    IDENTITY = 5
    SWISH = 6


class Op(enum.IntEnum):
    """The three convolution operations (same numbering as the preload library's UCUDNN_OP_*)."""

    FWD = 0
    BWD_DATA = 1
    BWD_FILTER = 2


#: Number of algorithm enum values per op (cuDNN's *_ALGO_COUNT).
ALGO_COUNT: Final[dict[Op, int]] = {Op.FWD: 8, Op.BWD_DATA: 6, Op.BWD_FILTER: 7}


class CudnnError(RuntimeError):
    """A cuDNN call returned a non-zero status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class AlgoPerf(ctypes.Structure):
    """cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t: one layout, 48 bytes."""

    _fields_ = [
        ("algo", ctypes.c_int),
        ("status", ctypes.c_int),
        ("time", ctypes.c_float),  # milliseconds
        ("memory", ctypes.c_size_t),  # workspace bytes
        ("determinism", ctypes.c_int),
        ("mathType", ctypes.c_int),
        ("reserved", ctypes.c_int * 3),
    ]


assert ctypes.sizeof(AlgoPerf) == 48, "cuDNN perf struct must be 48 bytes"


@dataclass(frozen=True)
class Perf:
    """One row of a Get*_v7 / Find* answer."""

    algo: int
    status: int
    time_ms: float
    memory_bytes: int
    determinism: int
    math_type: int

    @classmethod
    def from_c(cls, p: AlgoPerf) -> Perf:
        return cls(int(p.algo), int(p.status), float(p.time), int(p.memory), int(p.determinism), int(p.mathType))


# ---- Prototypes -------------------------------------------------------------------------------------------

_I = ctypes.c_int
_PI = ctypes.POINTER(ctypes.c_int)
_V = ctypes.c_void_p
_PV = ctypes.POINTER(ctypes.c_void_p)
_SZ = ctypes.c_size_t
_PSZ = ctypes.POINTER(ctypes.c_size_t)
_PERF = ctypes.POINTER(AlgoPerf)
_SEARCH = [_V, _V, _V, _V, _V, _I, _PI, _PERF]
_SEARCH_EX = [_V, _V, _V, _V, _V, _V, _V, _V, _I, _PI, _PERF, _V, _SZ]
_WS = [_V, _V, _V, _V, _V, _I, _PSZ]
_EXEC = [_V, _V, _V, _V, _V, _V, _V, _I, _V, _SZ, _V, _V, _V]

PROTOS: Final[dict[str, tuple[Any, list[Any]]]] = {
    "cudnnGetVersion": (_SZ, []),
    "cudnnGetProperty": (_I, [_I, _PI]),
    "cudnnGetErrorString": (ctypes.c_char_p, [_I]),
    "cudnnCreate": (_I, [_PV]),
    "cudnnDestroy": (_I, [_V]),
    "cudnnSetStream": (_I, [_V, _V]),
    "cudnnGetStream": (_I, [_V, _PV]),
    "cudnnCreateTensorDescriptor": (_I, [_PV]),
    "cudnnDestroyTensorDescriptor": (_I, [_V]),
    "cudnnSetTensor4dDescriptor": (_I, [_V, _I, _I, _I, _I, _I, _I]),
    "cudnnSetTensor4dDescriptorEx": (_I, [_V, _I] + [_I] * 8),
    "cudnnGetTensor4dDescriptor": (_I, [_V] + [_PI] * 9),
    "cudnnSetTensorNdDescriptor": (_I, [_V, _I, _I, _PI, _PI]),
    "cudnnSetTensorNdDescriptorEx": (_I, [_V, _I, _I, _I, _PI]),
    "cudnnGetTensorNdDescriptor": (_I, [_V, _I, _PI, _PI, _PI, _PI]),
    "cudnnGetTensorSizeInBytes": (_I, [_V, _PSZ]),
    "cudnnCreateFilterDescriptor": (_I, [_PV]),
    "cudnnDestroyFilterDescriptor": (_I, [_V]),
    "cudnnSetFilter4dDescriptor": (_I, [_V, _I, _I, _I, _I, _I, _I]),
    "cudnnGetFilter4dDescriptor": (_I, [_V] + [_PI] * 6),
    "cudnnSetFilterNdDescriptor": (_I, [_V, _I, _I, _I, _PI]),
    "cudnnGetFilterNdDescriptor": (_I, [_V, _I, _PI, _PI, _PI, _PI]),
    "cudnnGetFilterSizeInBytes": (_I, [_V, _PSZ]),
    "cudnnCreateConvolutionDescriptor": (_I, [_PV]),
    "cudnnDestroyConvolutionDescriptor": (_I, [_V]),
    "cudnnSetConvolutionMathType": (_I, [_V, _I]),
    "cudnnGetConvolutionMathType": (_I, [_V, _PI]),
    "cudnnSetConvolutionGroupCount": (_I, [_V, _I]),
    "cudnnGetConvolutionGroupCount": (_I, [_V, _PI]),
    "cudnnSetConvolution2dDescriptor": (_I, [_V] + [_I] * 8),
    "cudnnGetConvolution2dDescriptor": (_I, [_V] + [_PI] * 8),
    "cudnnSetConvolutionNdDescriptor": (_I, [_V, _I, _PI, _PI, _PI, _I, _I]),
    "cudnnGetConvolutionNdDescriptor": (_I, [_V, _I, _PI, _PI, _PI, _PI, _PI, _PI]),
    "cudnnGetConvolution2dForwardOutputDim": (_I, [_V, _V, _V, _PI, _PI, _PI, _PI]),
    "cudnnGetConvolutionNdForwardOutputDim": (_I, [_V, _V, _V, _I, _PI]),
    "cudnnCreateActivationDescriptor": (_I, [_PV]),
    "cudnnDestroyActivationDescriptor": (_I, [_V]),
    "cudnnSetActivationDescriptor": (_I, [_V, _I, _I, ctypes.c_double]),
    "cudnnGetActivationDescriptor": (_I, [_V, _PI, _PI, ctypes.POINTER(ctypes.c_double)]),
    "cudnnGetConvolutionForwardAlgorithmMaxCount": (_I, [_V, _PI]),
    "cudnnGetConvolutionBackwardDataAlgorithmMaxCount": (_I, [_V, _PI]),
    "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount": (_I, [_V, _PI]),
    # Hooked by the preload library from here on.
    "cudnnGetConvolutionForwardAlgorithm_v7": (_I, _SEARCH),
    "cudnnFindConvolutionForwardAlgorithm": (_I, _SEARCH),
    "cudnnFindConvolutionForwardAlgorithmEx": (_I, _SEARCH_EX),
    "cudnnGetConvolutionForwardWorkspaceSize": (_I, _WS),
    "cudnnGetConvolutionBackwardDataAlgorithm_v7": (_I, _SEARCH),
    "cudnnFindConvolutionBackwardDataAlgorithm": (_I, _SEARCH),
    "cudnnFindConvolutionBackwardDataAlgorithmEx": (_I, _SEARCH_EX),
    "cudnnGetConvolutionBackwardDataWorkspaceSize": (_I, _WS),
    "cudnnGetConvolutionBackwardFilterAlgorithm_v7": (_I, _SEARCH),
    "cudnnFindConvolutionBackwardFilterAlgorithm": (_I, _SEARCH),
    "cudnnFindConvolutionBackwardFilterAlgorithmEx": (_I, _SEARCH_EX),
    "cudnnGetConvolutionBackwardFilterWorkspaceSize": (_I, _WS),
    "cudnnConvolutionForward": (_I, _EXEC),
    "cudnnConvolutionBackwardData": (_I, _EXEC),
    "cudnnConvolutionBackwardFilter": (_I, _EXEC),
    "cudnnConvolutionBiasActivationForward": (_I, [*_EXEC[:10], _V, _V, _V, _V, _V, _V, _V, _V]),
}

#: The functions the preload library interposes; taken from ``hooks`` when one is given.
_FIRST_HOOKED = list(PROTOS).index("cudnnGetConvolutionForwardAlgorithm_v7")
HOOKED: Final[frozenset[str]] = frozenset(list(PROTOS)[_FIRST_HOOKED:])

GET_V7 = {
    Op.FWD: "cudnnGetConvolutionForwardAlgorithm_v7",
    Op.BWD_DATA: "cudnnGetConvolutionBackwardDataAlgorithm_v7",
    Op.BWD_FILTER: "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
}
FIND = {
    Op.FWD: "cudnnFindConvolutionForwardAlgorithm",
    Op.BWD_DATA: "cudnnFindConvolutionBackwardDataAlgorithm",
    Op.BWD_FILTER: "cudnnFindConvolutionBackwardFilterAlgorithm",
}
WORKSPACE_SIZE = {
    Op.FWD: "cudnnGetConvolutionForwardWorkspaceSize",
    Op.BWD_DATA: "cudnnGetConvolutionBackwardDataWorkspaceSize",
    Op.BWD_FILTER: "cudnnGetConvolutionBackwardFilterWorkspaceSize",
}
EXECUTE = {
    Op.FWD: "cudnnConvolutionForward",
    Op.BWD_DATA: "cudnnConvolutionBackwardData",
    Op.BWD_FILTER: "cudnnConvolutionBackwardFilter",
}


class Raw:
    """``raw.<cudnnFunction>(*args) -> int``: the bare C functions (ctypes prototypes, no status checking)."""

    def __init__(self, real: ctypes.CDLL, hooks: ctypes.CDLL | None) -> None:
        self._real = real
        self._hooks = hooks

    def __getattr__(self, name: str) -> Any:
        if name not in PROTOS:
            raise AttributeError(f"{name} is not part of the bound cuDNN subset")
        restype, argtypes = PROTOS[name]
        lib = self._hooks if (self._hooks is not None and name in HOOKED) else self._real
        # A private function object per binding: setting argtypes on lib.<name> would change it for every user
        # of that CDLL. Its address comes from lib[name], so a CDLL that chooses its symbols (cudnn.UnhookedCDLL)
        # is obeyed.
        address = ctypes.cast(lib[name], ctypes.c_void_p).value
        if address is None:
            raise AttributeError(f"{name} resolves to NULL")
        fn = ctypes.CFUNCTYPE(restype, *argtypes)(address)
        setattr(self, name, fn)
        return fn
