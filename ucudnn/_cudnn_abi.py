"""The cuDNN 9 C ABI as ctypes sees it: enums, the perf struct, the prototypes, which functions the preload library
hooks, and the bare functions (``Cudnn.raw``). :mod:`ucudnn.cudnn` builds the typed binding on it and re-exports
the public names.

Every value, prototype and hooked name comes from the C sources through ``ucudnn._abi``, which the build generates
from ``shim/include/ucudnn/cudnn_abi.h``, ``cudnn_graph_abi.h`` and ``shim/hooks.def``; the enums here name the
subset the Python API speaks.
"""

from __future__ import annotations

import ctypes
import enum
from dataclasses import dataclass
from typing import Any, Final

from ucudnn import _abi as H


class Status(enum.IntEnum):
    """cuDNN 9 status codes (any non-zero value is an error; unknown values may occur)."""

    SUCCESS = H.CUDNN_STATUS_SUCCESS
    NOT_INITIALIZED = H.CUDNN_STATUS_NOT_INITIALIZED
    SUBLIBRARY_VERSION_MISMATCH = H.CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH
    BAD_PARAM = H.CUDNN_STATUS_BAD_PARAM
    BAD_PARAM_NULL_POINTER = H.CUDNN_STATUS_BAD_PARAM_NULL_POINTER
    BAD_PARAM_MISALIGNED_POINTER = H.CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER
    BAD_PARAM_OUT_OF_BOUND = H.CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND
    BAD_PARAM_SIZE_INSUFFICIENT = H.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT
    BAD_PARAM_SHAPE_MISMATCH = H.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH
    NOT_SUPPORTED = H.CUDNN_STATUS_NOT_SUPPORTED
    NOT_SUPPORTED_SHAPE = H.CUDNN_STATUS_NOT_SUPPORTED_SHAPE
    NOT_SUPPORTED_DATA_TYPE = H.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE
    NOT_SUPPORTED_LAYOUT = H.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT
    NOT_SUPPORTED_ARCH_MISMATCH = H.CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH
    INTERNAL_ERROR = H.CUDNN_STATUS_INTERNAL_ERROR
    INTERNAL_ERROR_HOST_ALLOCATION_FAILED = H.CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED
    INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED = H.CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
    EXECUTION_FAILED = H.CUDNN_STATUS_EXECUTION_FAILED


class DataType(enum.IntEnum):
    FLOAT = H.CUDNN_DATA_FLOAT
    DOUBLE = H.CUDNN_DATA_DOUBLE
    HALF = H.CUDNN_DATA_HALF
    INT8 = H.CUDNN_DATA_INT8
    INT32 = H.CUDNN_DATA_INT32
    UINT8 = H.CUDNN_DATA_UINT8
    BFLOAT16 = H.CUDNN_DATA_BFLOAT16
    INT64 = H.CUDNN_DATA_INT64


class TensorFormat(enum.IntEnum):
    NCHW = H.CUDNN_TENSOR_NCHW
    NHWC = H.CUDNN_TENSOR_NHWC
    NCHW_VECT_C = H.CUDNN_TENSOR_NCHW_VECT_C


class ConvMode(enum.IntEnum):
    CONVOLUTION = H.CUDNN_CONVOLUTION
    CROSS_CORRELATION = H.CUDNN_CROSS_CORRELATION


class MathType(enum.IntEnum):
    DEFAULT = H.CUDNN_DEFAULT_MATH
    TENSOR_OP = H.CUDNN_TENSOR_OP_MATH
    TENSOR_OP_ALLOW_CONVERSION = H.CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
    FMA = H.CUDNN_FMA_MATH


class Determinism(enum.IntEnum):
    NON_DETERMINISTIC = H.CUDNN_NON_DETERMINISTIC
    DETERMINISTIC = H.CUDNN_DETERMINISTIC


class NanPropagation(enum.IntEnum):
    NOT_PROPAGATE = H.CUDNN_NOT_PROPAGATE_NAN
    PROPAGATE = H.CUDNN_PROPAGATE_NAN


class ActivationMode(enum.IntEnum):
    SIGMOID = H.CUDNN_ACTIVATION_SIGMOID
    RELU = H.CUDNN_ACTIVATION_RELU
    TANH = H.CUDNN_ACTIVATION_TANH
    CLIPPED_RELU = H.CUDNN_ACTIVATION_CLIPPED_RELU
    ELU = H.CUDNN_ACTIVATION_ELU
    IDENTITY = H.CUDNN_ACTIVATION_IDENTITY
    SWISH = H.CUDNN_ACTIVATION_SWISH


class Op(enum.IntEnum):
    """The three convolution operations (same numbering as the preload library's UCUDNN_OP_*).

    Every op takes the forward problem's three tensors: x (input), w (filter), y (output). In its C calls they
    come as two inputs and an output: ``operands`` puts them in that order and ``roles`` takes them back.
    """

    FWD = 0
    BWD_DATA = 1
    BWD_FILTER = 2

    @property
    def label(self) -> str:
        """The op's name in ucudnn-bench's rows and options: ``fwd``, ``bwd-data``, ``bwd-filter``."""
        return ("fwd", "bwd-data", "bwd-filter")[self]

    @classmethod
    def parse(cls, op: Op | str) -> Op:
        """The op of a label (``bwd-data``), or ``op`` itself."""
        if isinstance(op, Op):
            return op
        for o in cls:
            if o.label == op:
                return o
        raise ValueError(f"unknown op {op!r}: expected fwd, bwd-data or bwd-filter")

    def operands(self, x: Any, w: Any, y: Any) -> tuple[Any, Any, Any]:
        """(first input, second input, output) of this op's C calls: fwd (x, w -> y), bwd-data (w, dy -> dx),
        bwd-filter (x, dy -> dw)."""
        if self == Op.FWD:
            return x, w, y
        if self == Op.BWD_DATA:
            return w, y, x
        return x, y, w

    def roles(self, in0: Any, in1: Any, out: Any) -> tuple[Any, Any, Any]:
        """(x, w, y) of this op's (first input, second input, output): the inverse of ``operands``."""
        if self == Op.FWD:
            return in0, in1, out
        if self == Op.BWD_DATA:
            return out, in0, in1
        return in0, out, in1


#: Number of algorithm enum values per op (cuDNN's *_ALGO_COUNT).
ALGO_COUNT: Final[dict[Op, int]] = {
    Op.FWD: H.CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
    Op.BWD_DATA: H.CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
    Op.BWD_FILTER: H.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
}

# The op's part of its functions' names: cudnnGetConvolution<part>WorkspaceSize, cudnnConvolution<part>, ...
_NAME_PART = {Op.FWD: "Forward", Op.BWD_DATA: "BackwardData", Op.BWD_FILTER: "BackwardFilter"}
GET_V7: Final = {op: f"cudnnGetConvolution{part}Algorithm_v7" for op, part in _NAME_PART.items()}
FIND: Final = {op: f"cudnnFindConvolution{part}Algorithm" for op, part in _NAME_PART.items()}
WORKSPACE_SIZE: Final = {op: f"cudnnGetConvolution{part}WorkspaceSize" for op, part in _NAME_PART.items()}
EXECUTE: Final = {op: f"cudnnConvolution{part}" for op, part in _NAME_PART.items()}


class CudnnError(RuntimeError):
    """A cuDNN call returned a non-zero status (``call`` names it when known)."""

    def __init__(self, status: int, message: str, call: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.call = call

    @classmethod
    def failed(cls, call: str, status: int, text: str = "") -> CudnnError:
        """``<call> failed with status <status> (<text>)``: what the binding and ucudnn-bench say of a failure."""
        return cls(status, f"{call} failed with status {status}{f' ({text})' if text else ''}", call)


class PerfStruct(ctypes.Structure):
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


assert ctypes.sizeof(PerfStruct) == 48, "cuDNN perf struct must be 48 bytes"


@dataclass(frozen=True)
class Perf:
    """One row of a Get*_v7 / Find* answer: ``time_ms`` as the library reported it, ``memory_bytes`` the
    workspace."""

    algo: int
    status: int
    time_ms: float
    memory_bytes: int
    determinism: int
    math_type: int

    @property
    def deterministic(self) -> bool:
        return self.determinism == Determinism.DETERMINISTIC

    @classmethod
    def from_c(cls, p: PerfStruct) -> Perf:
        return cls(int(p.algo), int(p.status), float(p.time), int(p.memory), int(p.determinism), int(p.mathType))


# ---- Prototypes ---------------------------------------------------------------------------------------------

#: ctypes of each type code of ``ucudnn._abi.PROTOTYPES`` (enums are ints; handles and descriptors pointers).
CTYPES: Final[dict[str, Any]] = {
    "void": None,
    "int": ctypes.c_int,
    "int*": ctypes.POINTER(ctypes.c_int),
    "size_t": ctypes.c_size_t,
    "size_t*": ctypes.POINTER(ctypes.c_size_t),
    "int64_t": ctypes.c_int64,
    "int64_t*": ctypes.POINTER(ctypes.c_int64),
    "double": ctypes.c_double,
    "double*": ctypes.POINTER(ctypes.c_double),
    "char*": ctypes.c_char_p,
    "void*": ctypes.c_void_p,
    "void**": ctypes.POINTER(ctypes.c_void_p),
    "perf*": ctypes.POINTER(PerfStruct),
}


def prototype(name: str) -> Any:
    """The ctypes function type of ``name`` as the headers declare it; AttributeError for a function they do not."""
    try:
        result, params = H.PROTOTYPES[name]
    except KeyError:
        raise AttributeError(f"{name} is not part of the bound cuDNN subset") from None
    return ctypes.CFUNCTYPE(CTYPES[result], *(CTYPES[p] for p in params))


def declare(lib: ctypes.CDLL, name: str) -> None:
    """Give ``lib.<name>`` its prototype's result and argument types, every pointer argument as ``void *``: callers of
    the graph API pass arrays of descriptors, integers or pointers, and counts, through the same parameters."""
    result, params = H.PROTOTYPES[name]
    fn = getattr(lib, name)
    fn.restype = CTYPES[result]
    fn.argtypes = [ctypes.c_void_p if p.endswith("*") else CTYPES[p] for p in params]


#: The functions the preload library interposes (hooks.def's UC_EXEC, UC_QUERY and UC_BACKEND entries).
HOOKED: Final[frozenset[str]] = frozenset(H.HOOKS["EXEC"] + H.HOOKS["QUERY"] + H.HOOKS["BACKEND"])


def bind(lib: ctypes.CDLL, name: str) -> Any:
    """``name`` of ``lib`` as a function of its own prototype (AttributeError when either lacks it).

    A private function object per binding: setting argtypes on lib.<name> would change it for every user of that
    CDLL. Its address comes from lib[name], so a CDLL that chooses its symbols (cudnn.UnhookedCDLL) is obeyed.
    """
    fn_type = prototype(name)
    address = ctypes.cast(lib[name], ctypes.c_void_p).value
    if address is None:
        raise AttributeError(f"{name} resolves to NULL")
    return fn_type(address)


class Raw:
    """``raw.<cudnnFunction>(*args) -> int``: the bare C functions (ctypes prototypes, no status checking); the
    hooked ones from ``hooks`` when given."""

    def __init__(self, real: ctypes.CDLL, hooks: ctypes.CDLL | None) -> None:
        self._real = real
        self._hooks = hooks

    def __getattr__(self, name: str) -> Any:
        lib = self._hooks if (self._hooks is not None and name in HOOKED) else self._real
        fn = bind(lib, name)
        setattr(self, name, fn)
        return fn
