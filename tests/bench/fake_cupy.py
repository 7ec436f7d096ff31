"""A NumPy stand-in for the part of CuPy that ``--backend cuda`` uses, so that backend's code runs without a GPU.

Installed as ``cupy`` in a subprocess, with the host backend's ``libcudnn.so.9`` as the "real" cuDNN
(``UCUDNN_REAL_LIBCUDNN``): device memory is host memory, streams are accepted and ignored (as the host backend
does), events read the wall clock, reductions return 0-d arrays as CuPy's do. It checks the backend's and the
runner's logic on the cuda path, not CuPy itself.
"""

from __future__ import annotations

import time
import types
from typing import Any

import numpy as np

float32 = np.float32
uint8 = np.uint8
inf = np.inf


class _Pointer:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class ndarray(np.ndarray):  # CuPy's name
    """A device array: ``.data.ptr`` is its address, ``.get()`` copies it to the host."""

    @property
    def data(self) -> _Pointer:  # type: ignore[override]
        return _Pointer(int(self.ctypes.data))

    def get(self, stream: Any = None) -> np.ndarray[Any, Any]:
        return np.array(self, copy=True)

    def max(self, *args: Any, **kwargs: Any) -> Any:
        return _device(np.asarray(np.ndarray.max(self, *args, **kwargs)))

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        return _device(np.array(self, copy=True))


def _device(a: Any) -> ndarray:
    return np.asarray(a).view(ndarray)


def asarray(a: Any, dtype: Any = None) -> ndarray:
    return _device(np.array(a, dtype=dtype, copy=True))


def full(shape: Any, value: float, dtype: Any = None) -> ndarray:
    return _device(np.full(shape, value, dtype=dtype))


def empty(shape: Any, dtype: Any = None) -> ndarray:
    return _device(np.empty(shape, dtype=dtype))


def asnumpy(a: Any, stream: Any = None) -> np.ndarray[Any, Any]:
    return np.array(a, copy=True)


def abs(a: Any) -> ndarray:  # CuPy's name
    return _device(np.abs(a))


def isnan(a: Any) -> ndarray:
    return _device(np.isnan(a))


def where(cond: Any, x: Any, y: Any) -> ndarray:
    return _device(np.where(cond, x, y))


def stack(arrays: Any) -> ndarray:
    return _device(np.stack([np.asarray(a) for a in arrays]))


class _Pool:
    def free_all_blocks(self) -> None:
        pass


_POOL = _Pool()


def get_default_memory_pool() -> _Pool:
    return _POOL


class _Stream:
    def __init__(self, non_blocking: bool = False) -> None:
        self.ptr = 0  # the host backend accepts any stream and ignores it

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def synchronize(self) -> None:
        pass


class _Event:
    def __init__(self) -> None:
        self.t = 0.0

    def record(self, stream: Any = None) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass


class _Device:
    def __init__(self, device: int = 0) -> None:
        self.id = device

    def use(self) -> None:
        pass


class RawKernel:
    """A kernel from source: compiles when the source reads the GPU's clock (the benchmark's gate); launches are
    recorded in ``launches`` (the gate's duration in ns, its first argument) and do nothing else."""

    launches: list[int] = []  # noqa: RUF012 -- one record for the process, read by tests
    fail_compile = False

    def __init__(self, code: str, name: str) -> None:
        self.code, self.name = code, name

    def compile(self) -> None:
        if RawKernel.fail_compile or "globaltimer" not in self.code or self.name not in self.code:
            raise RuntimeError("fake NVRTC: cannot compile")

    def __call__(self, grid: Any, block: Any, args: Any, stream: Any = None) -> None:
        RawKernel.launches.append(int(args[0]))


class _RandomState:
    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def standard_normal(self, size: Any, dtype: Any = None) -> ndarray:
        return _device(self._rng.standard_normal(size, dtype=dtype or np.float64))


random = types.SimpleNamespace(RandomState=_RandomState)


def _elapsed_ms(start: _Event, end: _Event) -> float:
    return (end.t - start.t) * 1e3


cuda = types.SimpleNamespace(
    runtime=types.SimpleNamespace(
        getDeviceCount=lambda: 1, getDeviceProperties=lambda device: {"name": b"fake GPU (NumPy)"}
    ),
    Device=_Device,
    Stream=_Stream,
    Event=_Event,
    get_elapsed_time=_elapsed_ms,
)
