"""A private ctypes harness over the host backend's compute kernels, below the cuDNN API layer.

It compiles the kernel files (shim/host/kernels/hb_kern*.c, hb_fwd*.c, hb_bwd_data*.c, hb_bwd_filter*.c) with
tests/host/kernel_driver.c into a throw-away shared library (cached by a hash of the sources) and runs any
algorithm on NumPy arrays of any strides. The arrays' logical shape and strides are the descriptors: tensors are
``(N, C, [D,] H, W)``, filters ``(K, C/groups, [T,] R, S)``, as in ``ucudnn.testing``.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tests._env import ROOT
from ucudnn.testing import ConvParams, element_strides

from ._cbuild import cached_library

HOST = ROOT / "shim" / "host"
KERNELS = HOST / "kernels"
DRIVER = Path(__file__).with_name("kernel_driver.c")

FWD, BWD_DATA, BWD_FILTER = 0, 1, 2
OPS = (FWD, BWD_DATA, BWD_FILTER)
OP_NAMES = {FWD: "fwd", BWD_DATA: "bwd_data", BWD_FILTER: "bwd_filter"}
SIZE_MAX = 2**64 - 1
# cuDNN data types by NumPy dtype; uint16 arrays hold bfloat16 bit patterns (ucudnn.testing.BFLOAT16).
DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.float16): 2, np.dtype(np.uint16): 9}

_I64x10 = ctypes.c_int64 * 10


def _sources() -> list[Path]:
    pats = ("hb_kern*.c", "hb_fwd*.c", "hb_bwd_data*.c", "hb_bwd_filter*.c")
    return [*sorted({p for pat in pats for p in KERNELS.glob(pat)}), DRIVER]


def build() -> Path:
    """Compile the kernels and the driver (once per source state); returns the library path."""
    import scipy_openblas32

    blas_dir = Path(scipy_openblas32.get_lib_dir())
    srcs = _sources()
    headers = sorted(HOST.rglob("*.h")) + sorted((ROOT / "shim" / "include").rglob("*.h"))
    args = ["-O3", "-pthread", "-I", str(ROOT / "shim" / "include"), "-I", str(HOST), "-I", str(KERNELS)]
    args += map(str, srcs)
    args += [f"-L{blas_dir}", f"-Wl,-rpath,{blas_dir}", "-lscipy_openblas", "-lm"]
    return cached_library("hbkern", srcs + headers, args)


@dataclass(frozen=True)
class AlgoInfo:
    op: int
    index: int
    algo: int
    name: str
    deterministic: bool
    model_rate: float


def _desc(a: npt.NDArray[Any]) -> Any:
    """10 int64s: extents (n, c, d, h, w) then element strides; 2-D arrays get D = 1."""
    shape = list(a.shape)
    strides = list(element_strides(a))
    if len(shape) == 4:
        shape.insert(2, 1)
        strides.insert(2, strides[2] * shape[3])
    if len(shape) != 5:
        raise ValueError(f"need a 4-D or 5-D array, got shape {a.shape}")
    return _I64x10(*shape, *strides)


def _conv(params: ConvParams) -> Any:
    pad, stride, dil = list(params.pad), list(params.stride), list(params.dilation)
    if params.nb_spatial == 2:
        pad, stride, dil = [0, *pad], [1, *stride], [1, *dil]
    return _I64x10(*pad, *stride, *dil, params.groups)


class KernelLib:
    """The compiled kernels; every call names the op, the algorithm's table index and the three arrays."""

    def __init__(self, path: Path | None = None) -> None:
        self.lib = ctypes.CDLL(str(path or build()))
        self.lib.hbt_workspace.restype = ctypes.c_size_t
        argtypes: list[Any] = [ctypes.c_int] * 4 + [ctypes.c_void_p] * 4 + [ctypes.c_int]
        argtypes += [ctypes.c_void_p] * 3 + [ctypes.c_double] * 2 + [ctypes.c_void_p, ctypes.c_size_t]
        self.lib.hbt_run.argtypes = argtypes

    def algos(self, op: int) -> list[AlgoInfo]:
        out = []
        for i in range(self.lib.hbt_count(op)):
            algo, det, rate, name = ctypes.c_int(), ctypes.c_int(), ctypes.c_double(), ctypes.c_char_p()
            self.lib.hbt_info(op, i, ctypes.byref(algo), ctypes.byref(det), ctypes.byref(rate), ctypes.byref(name))
            out.append(AlgoInfo(op, i, algo.value, (name.value or b"").decode(), bool(det.value), rate.value))
        return out

    def _common(
        self, x: npt.NDArray[Any], w: npt.NDArray[Any], y: npt.NDArray[Any], params: ConvParams
    ) -> tuple[Any, ...]:
        if not (x.dtype == w.dtype == y.dtype) or x.dtype not in DTYPES:
            raise ValueError(f"dtypes {x.dtype}, {w.dtype}, {y.dtype}: need one of float32/float64/float16/uint16")
        return (DTYPES[x.dtype], params.nb_spatial, _desc(x), _desc(w), _desc(y), _conv(params))

    def workspace(
        self, op: int, index: int, x: npt.NDArray[Any], w: npt.NDArray[Any], y: npt.NDArray[Any], params: ConvParams
    ) -> int | None:
        """Bytes the algorithm needs, None if it does not support the problem."""
        dt, nsp, xd, wd, yd, cd = self._common(x, w, y, params)
        ws = int(self.lib.hbt_workspace(op, index, dt, nsp, xd, wd, yd, cd, int(params.cross_correlation)))
        return None if ws == SIZE_MAX else ws

    def run(
        self,
        op: int,
        index: int,
        x: npt.NDArray[Any],
        w: npt.NDArray[Any],
        y: npt.NDArray[Any],
        params: ConvParams,
        *,
        alpha: float = 1.0,
        beta: float = 0.0,
        workspace: npt.NDArray[np.uint8] | None = None,
    ) -> int:
        """Run in place: fwd writes y, bwd-data writes x (dx), bwd-filter writes w (dw). Returns the status."""
        dt, nsp, xd, wd, yd, cd = self._common(x, w, y, params)
        arrays = {FWD: (x, w, y), BWD_DATA: (w, y, x), BWD_FILTER: (x, y, w)}[op]
        ptrs = [a.__array_interface__["data"][0] for a in arrays]
        ws_ptr = None if workspace is None or workspace.size == 0 else workspace.ctypes.data
        ws_len = 0 if workspace is None else workspace.size
        return int(
            self.lib.hbt_run(
                op, index, dt, nsp, xd, wd, yd, cd, int(params.cross_correlation), *ptrs, alpha, beta, ws_ptr, ws_len
            )
        )
