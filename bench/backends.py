"""Where the benchmark runs: the CPU host backend, or a GPU with the real cuDNN (CuPy buffers, CUDA events).

Both load the cuDNN library and then the preload library into this process with ``RTLD_GLOBAL``; the preload
library finds the already loaded ``libcudnn.so.9`` through ``dlopen(RTLD_NOLOAD)``, exactly as it does inside a
framework. Undivided runs call the cuDNN library's own symbols, ucudnn runs call the preload library's.

Timing (``Backend.sample``): one sample is ``calls`` back-to-back calls, issued without synchronising between
them (as a framework issues its convolutions); its time is the total divided by ``calls``:

* host, ``UCUDNN_HOST_TIMING=measure`` (default): wall clock (``time.perf_counter``) around the calls, the least
  of ``best_of`` (3) such timings taken back to back: a process that other work preempts only ever takes longer
  (on two busy cores a 4 ms time slice lands on a 4 ms convolution in one call of three), and both sides of every
  comparison are sampled the same way.
* host, ``UCUDNN_HOST_TIMING=model``: the host backend's per-thread model clock
  (``ucudnn_host_model_clock_ms``), read before and after the calls: the modelled time of exactly the
  convolutions that ran, micro-batches included, comparable with the modelled times ``Find`` reports.
* cuda: CUDA events recorded on the handle's stream before the first call and after the last. GPU calls are
  asynchronous: one call between two events would measure the host's latency to issue it, not the kernels. And
  where issuing a call costs the host about as long as the GPU takes to run it (cuDNN 9 spends 50-150 us of host
  time per legacy call; many DeepBench kernels at N = 256 run 70-200 us), the events would time the host issuing
  the calls, not the GPU running them. So each sample is queued behind a gate: a one-thread kernel that waits on
  the GPU's clock longer than the host takes to issue the sample's calls; the start event follows the gate, the
  calls queue up behind it, and the events time the GPU running them back to back. A sample whose calls were
  not all issued before its gate ended is taken again behind a longer gate. Timing ``cuda-events-gated``; where
  the gate cannot be compiled (no NVRTC), ``cuda-events`` as before.

Each sample also reports the host wall time spent issuing its calls (before any synchronisation) per call. Host
backend calls are synchronous, so there that time includes the convolutions themselves.
"""

from __future__ import annotations

import ctypes
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ucudnn import _paths, bridge
from ucudnn.cudnn import HOOKED, Cudnn, Handle
from ucudnn.graph_api import Backend as GraphApi


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run on this machine; the message says why and what to do."""


@dataclass(frozen=True)
class Sample:
    """One timing sample of back-to-back calls, per call: the clock's time (ms) and the host's issue time (us)."""

    ms_per_call: float
    host_us_per_call: float


HOST_BEST_OF = 3  # wall-clock timings per host sample, the least kept


def least_of(tries: int, take: Callable[[], Sample]) -> Sample:
    """The fastest of ``tries`` samples taken one after the other (at least one)."""
    return min((take() for _ in range(max(1, tries))), key=lambda s: s.ms_per_call)


class Backend(ABC):
    """A cuDNN library plus the preload library over it, device buffers and a timer.

    Arrays are the backend's own type (numpy on the host, CuPy on a GPU), float32, C-contiguous; ``ptr`` gives
    the address cuDNN sees. The backend owns every array it returns until ``release`` or ``close``.
    """

    name: str
    timing: str
    real: Cudnn
    hooked: Cudnn
    graph: GraphApi  # the graph-API calls through the preload library's hooks
    handle: Handle
    default_tolerance: float
    preload_path: Path

    @abstractmethod
    def random(self, shape: tuple[int, ...], seed: int) -> Any: ...

    @abstractmethod
    def filled(self, shape: tuple[int, ...], value: float) -> Any: ...

    @abstractmethod
    def fill(self, array: Any, value: float) -> None: ...

    @abstractmethod
    def ptr(self, array: Any) -> int: ...

    @abstractmethod
    def to_numpy(self, array: Any) -> np.ndarray[Any, np.dtype[np.float32]]: ...

    @abstractmethod
    def snapshot(self, array: Any) -> Any:
        """A copy of ``array`` where it lives (on the device for cuda), owned by the backend until ``release``."""

    @abstractmethod
    def compare(self, got: Any, ref: Any) -> tuple[float, float]:
        """``(max |got - ref|, max |ref|)``; the first is inf where ``got - ref`` is NaN (a NaN anywhere)."""

    @abstractmethod
    def workspace(self, workspace_bytes: int) -> int:
        """Address of the workspace buffer, grown to at least ``workspace_bytes`` (0 for none).

        One buffer, sliced by every call that needs less: the address stays valid until a larger size is asked for
        or ``release``. Get it before issuing calls, never inside a timed loop.
        """

    @abstractmethod
    def release(self) -> None:
        """Free every array and the workspace handed out so far (the end of one problem x op)."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait until every call issued so far has completed."""

    def issue(self, fn: Callable[[], None], calls: int) -> None:
        """``calls`` untimed calls of ``fn`` back to back, then ``synchronize`` (warm-up)."""
        for _ in range(calls):
            fn()
        self.synchronize()

    @abstractmethod
    def sample(self, fn: Callable[[], None], calls: int) -> Sample:
        """Time ``calls`` back-to-back calls of ``fn`` (no synchronisation between them); per-call results."""

    @abstractmethod
    def device_name(self) -> str: ...

    def close(self) -> None:
        self.handle.close()
        # The benchmark reports its own figures: the preload library's exit summary of its deliberate calls (both
        # sides of every comparison, the checks' alternations) would read as a second, different speedup.
        bridge.set_option("UCUDNN_LOG_LEVEL", "error")


def _load_preload(explicit: str | None) -> tuple[ctypes.CDLL, Path]:
    path = Path(explicit) if explicit else _paths.PRELOAD
    if not path.exists():
        raise BackendUnavailable(
            f"the preload library is not built ({path} is missing); reinstall with `pip install .` "
            "or pass --preload PATH"
        )
    # In the global scope, where ucudnn.bridge finds its control API.
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    missing = [s for s in (*sorted(HOOKED), "ucudnn_set_option", "ucudnn_last_plan_json") if not hasattr(lib, s)]
    if missing:
        raise BackendUnavailable(f"{path} does not export {', '.join(missing)}: not a ucudnn preload library")
    return lib, path


class HostBackend(Backend):
    """The CPU ``libcudnn.so.9`` stand-in shipped in the package (no GPU needed)."""

    name = "host"
    default_tolerance = 1e-3

    def __init__(
        self,
        *,
        host_timing: str | None = None,
        preload: str | None = None,
        threads: int | None = None,
        best_of: int = HOST_BEST_OF,
    ) -> None:
        self.best_of = best_of
        if threads is not None:
            # The host backend's GEMMs run on OpenBLAS, which reads this once when the library loads. On a shared
            # machine one thread gives far steadier timings than threads competing with other processes.
            os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
        if host_timing is not None:
            # Read by the host library when it loads or times; must be in the environment before either.
            os.environ["UCUDNN_HOST_TIMING"] = host_timing
        self.timing = os.environ.get("UCUDNN_HOST_TIMING", "measure").strip().lower() or "measure"
        if self.timing not in ("measure", "model"):
            raise BackendUnavailable(f"UCUDNN_HOST_TIMING={self.timing!r}: expected measure or model")
        if not _paths.HOST_CUDNN.exists():
            raise BackendUnavailable(
                f"the host backend is not built ({_paths.HOST_CUDNN} is missing); reinstall with `pip install .`"
            )
        self.lib = ctypes.CDLL(str(_paths.HOST_CUDNN), mode=ctypes.RTLD_GLOBAL)
        shim_lib, self.preload_path = _load_preload(preload)
        self.real = Cudnn(self.lib)
        self.hooked = Cudnn(self.lib, shim_lib)
        self.graph = GraphApi(shim_lib)
        self._clock: Callable[[], float] | None = None
        if self.timing == "model":
            clock = getattr(self.lib, "ucudnn_host_model_clock_ms", None)
            if clock is None:
                raise BackendUnavailable(
                    f"{_paths.HOST_CUDNN} does not export ucudnn_host_model_clock_ms, needed to time "
                    "UCUDNN_HOST_TIMING=model runs; rebuild the host backend"
                )
            clock.argtypes = ()
            clock.restype = ctypes.c_double
            self._clock = clock
        self.handle = self.real.handle()
        self._keep: list[np.ndarray[Any, Any]] = []
        self._ws = np.empty(0, dtype=np.uint8)

    def random(self, shape: tuple[int, ...], seed: int) -> np.ndarray[Any, np.dtype[np.float32]]:
        a = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
        self._keep.append(a)
        return a

    def filled(self, shape: tuple[int, ...], value: float) -> np.ndarray[Any, np.dtype[np.float32]]:
        a = np.full(shape, value, dtype=np.float32)
        self._keep.append(a)
        return a

    def fill(self, array: Any, value: float) -> None:
        array.fill(value)

    def ptr(self, array: Any) -> int:
        return int(array.ctypes.data)

    def to_numpy(self, array: Any) -> np.ndarray[Any, np.dtype[np.float32]]:
        return np.array(array, dtype=np.float32, copy=True)

    def snapshot(self, array: Any) -> np.ndarray[Any, np.dtype[np.float32]]:
        a = self.to_numpy(array)
        self._keep.append(a)
        return a

    def compare(self, got: Any, ref: Any) -> tuple[float, float]:
        if ref.size == 0:
            return 0.0, 0.0
        diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        err = float(np.max(np.where(np.isnan(diff), np.inf, diff)))
        return err, float(np.max(np.abs(ref)))

    def workspace(self, workspace_bytes: int) -> int:
        if workspace_bytes <= 0:
            return 0
        if self._ws.nbytes < workspace_bytes:
            self._ws = np.empty(0, dtype=np.uint8)  # free the old one first: workspaces can be large
            self._ws = np.empty(workspace_bytes, dtype=np.uint8)
        return int(self._ws.ctypes.data)

    def release(self) -> None:
        self._keep.clear()
        self._ws = np.empty(0, dtype=np.uint8)

    def synchronize(self) -> None:
        pass  # host backend calls return when their work is done

    def sample(self, fn: Callable[[], None], calls: int) -> Sample:
        def once() -> Sample:
            before = self._clock() if self._clock is not None else 0.0
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            host_s = time.perf_counter() - t0
            ms = self._clock() - before if self._clock is not None else host_s * 1e3
            return Sample(ms / calls, host_s * 1e6 / calls)

        # The model clock is exact: one timing. The wall clock: the least of best_of (see the module's doc).
        return least_of(1 if self._clock is not None else self.best_of, once)

    def device_name(self) -> str:
        threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
        return (
            f"host CPU ({os.cpu_count()} cores, BLAS threads: {threads}), "
            f"host backend implementing cuDNN {self.real.version_text()}"
        )

    def close(self) -> None:
        super().close()
        self.release()


def _real_cudnn_candidates() -> list[str]:
    explicit = os.environ.get("UCUDNN_REAL_LIBCUDNN", "")
    out = [explicit] if explicit else []
    for module in ("nvidia.cudnn",):
        try:
            mod = __import__(module, fromlist=["__path__"])
        except ImportError:
            continue
        for base in getattr(mod, "__path__", []):
            lib = Path(base) / "lib" / "libcudnn.so.9"
            if lib.exists():
                out.append(str(lib))
    out.append("libcudnn.so.9")  # the system one, through the dynamic linker's search path
    return out


# The gate a GPU sample queues behind (see the module's docstring): one thread reading the GPU's nanosecond clock.
_GATE_SOURCE = r"""
extern "C" __global__ void ucudnn_bench_gate(unsigned long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"""
_GATE_FLOOR_NS = 200_000  # covers the launch of the gate itself and the first call's set-up
_GATE_QUEUED_SHARE = 0.8  # the calls must be issued within this share of the gate to count as queued
_GATE_TRIES = 3


def _compile_gate(cupy: Any) -> Any:
    """The gate kernel, or None where CuPy cannot compile it (no NVRTC): samples are then taken ungated."""
    try:
        kernel = cupy.RawKernel(_GATE_SOURCE, "ucudnn_bench_gate")
        kernel.compile()
    except Exception:  # CuPy's compile errors have no common public base class
        return None
    return kernel


class CudaBackend(Backend):
    """The real cuDNN on an NVIDIA GPU: CuPy device buffers, CUDA events on a dedicated stream."""

    name = "cuda"
    timing = "cuda-events"
    # cuDNN may use TF32 tensor cores for FP32 convolutions by default (10-bit mantissa).
    default_tolerance = 1e-2

    def __init__(self, *, preload: str | None = None, device: int = 0) -> None:
        try:
            import cupy
        except ImportError as exc:
            raise BackendUnavailable(
                f"--backend cuda needs CuPy ({exc}); install it with `pip install 'ucudnn[cuda]'` "
                "(cupy-cuda13x; for a CUDA 12 driver, cupy-cuda12x) on a machine with an NVIDIA GPU, or use "
                "--backend host"
            ) from None
        try:
            count = int(cupy.cuda.runtime.getDeviceCount())
        except Exception as exc:  # CUDARuntimeError without a driver; its type lives in CuPy
            raise BackendUnavailable(f"--backend cuda: no usable NVIDIA GPU ({exc}); use --backend host") from None
        if count <= device:
            raise BackendUnavailable(f"--backend cuda: no GPU {device} ({count} visible); use --backend host")
        self.cp = cupy
        cupy.cuda.Device(device).use()
        errors: list[str] = []
        lib: ctypes.CDLL | None = None
        for candidate in _real_cudnn_candidates():
            try:
                lib = ctypes.CDLL(candidate, mode=ctypes.RTLD_GLOBAL)
                break
            except OSError as exc:
                errors.append(f"{candidate}: {exc}")
        if lib is None:
            raise BackendUnavailable(
                "--backend cuda: cannot load the real libcudnn.so.9 (install nvidia-cudnn-cu12 or -cu13, or set "
                "UCUDNN_REAL_LIBCUDNN): " + "; ".join(errors)
            )
        self.lib = lib
        shim_lib, self.preload_path = _load_preload(preload)
        self.real = Cudnn(lib)
        self.hooked = Cudnn(lib, shim_lib)
        self.graph = GraphApi(shim_lib)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.handle = self.real.handle()
        self.real.set_stream(self.handle, int(self.stream.ptr))
        self._keep: list[Any] = []
        self._ws: Any = None
        # Reused by every sample: each is synchronised on before the next records them again.
        self._start = cupy.cuda.Event()
        self._end = cupy.cuda.Event()
        self._host_us = 200.0  # the host's issue time per call, learnt from each sample
        self._gate = _compile_gate(cupy)
        self.timing = "cuda-events-gated" if self._gate is not None else "cuda-events"

    def random(self, shape: tuple[int, ...], seed: int) -> Any:
        # Generated on the device: DeepBench operands at N = 256 reach 1.8 GB, which NumPy takes seconds to draw
        # (most of a DeepBench run's time went there). Outputs are compared with cuDNN's own undivided result on
        # the same inputs, so they need not match the host backend's draws.
        # Our stream is non-blocking: work on the legacy default stream would not be ordered before cuDNN's.
        with self.stream:
            a = self.cp.random.RandomState(seed).standard_normal(shape, dtype=self.cp.float32)
        self.stream.synchronize()
        self._keep.append(a)
        return a

    def filled(self, shape: tuple[int, ...], value: float) -> Any:
        with self.stream:
            a = self.cp.full(shape, value, dtype=self.cp.float32)
        self.stream.synchronize()
        self._keep.append(a)
        return a

    def fill(self, array: Any, value: float) -> None:
        with self.stream:
            array.fill(value)
        self.stream.synchronize()

    def ptr(self, array: Any) -> int:
        return int(array.data.ptr)

    def to_numpy(self, array: Any) -> np.ndarray[Any, np.dtype[np.float32]]:
        host = self.cp.asnumpy(array, stream=self.stream)  # ordered after our stream's work
        self.stream.synchronize()  # CuPy < 13 copies asynchronously when given a stream
        return np.asarray(host, dtype=np.float32)

    def snapshot(self, array: Any) -> Any:
        with self.stream:  # ordered after the cuDNN calls that wrote ``array``
            a = array.copy()
        self._keep.append(a)
        return a

    def compare(self, got: Any, ref: Any) -> tuple[float, float]:
        # Reduced on the device, on our stream (after the calls that wrote ``got``): two scalars come back.
        cp = self.cp
        if int(ref.size) == 0:
            return 0.0, 0.0
        with self.stream:
            diff = cp.abs(got - ref)
            err = cp.where(cp.isnan(diff), cp.inf, diff).max()
            pair = cp.stack((err, cp.abs(ref).max()))
        host = pair.get(stream=self.stream)
        self.stream.synchronize()  # CuPy < 13 copies asynchronously when given a stream
        return float(host[0]), float(host[1])

    def workspace(self, workspace_bytes: int) -> int:
        if workspace_bytes <= 0:
            return 0
        if self._ws is None or int(self._ws.nbytes) < workspace_bytes:
            self.stream.synchronize()  # calls in flight may still use the old buffer
            self._ws = None
            self.cp.get_default_memory_pool().free_all_blocks()
            self._ws = self.cp.empty(workspace_bytes, dtype=self.cp.uint8)
        return int(self._ws.data.ptr)

    def release(self) -> None:
        self.stream.synchronize()
        self._keep.clear()
        self._ws = None
        self.cp.get_default_memory_pool().free_all_blocks()  # cuDNN's own allocations need the memory back

    def synchronize(self) -> None:
        self.stream.synchronize()

    def sample(self, fn: Callable[[], None], calls: int) -> Sample:
        for _ in range(_GATE_TRIES):
            gate_ns = self._gate_ns(calls)
            if gate_ns:
                self._gate((1,), (1,), (np.uint64(gate_ns),), stream=self.stream)
            self._start.record(self.stream)
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            host_s = time.perf_counter() - t0
            self._end.record(self.stream)
            self._end.synchronize()
            ms = float(self.cp.cuda.get_elapsed_time(self._start, self._end))
            host_us = host_s * 1e6 / calls
            self._host_us = max(host_us, 1.0)
            # Queued: every call was issued while the gate still held the GPU (with a margin for the launch).
            if not gate_ns or host_s * 1e9 < gate_ns * _GATE_QUEUED_SHARE:
                break
        return Sample(ms / calls, host_us)

    def _gate_ns(self, calls: int) -> int:
        """How long the next sample's gate holds the GPU: twice the host's last issue time per call, times the
        calls, plus a floor; 0 without a gate."""
        if self._gate is None:
            return 0
        return int(_GATE_FLOOR_NS + 2.0 * self._host_us * 1e3 * calls)

    def device_name(self) -> str:
        props = self.cp.cuda.runtime.getDeviceProperties(self.cp.cuda.Device().id)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        return f"{name}, cuDNN {self.real.version_text()}"

    def close(self) -> None:
        super().close()
        self.release()


def open_backend(
    name: str,
    *,
    host_timing: str | None = None,
    preload: str | None = None,
    threads: int | None = None,
    best_of: int | None = None,
) -> Backend:
    """Open ``host`` or ``cuda``; raises BackendUnavailable with the reason and the remedy."""
    if name == "host":
        return HostBackend(host_timing=host_timing, preload=preload, threads=threads,
                           best_of=HOST_BEST_OF if best_of is None else best_of)  # fmt: skip
    if name == "cuda":
        if host_timing is not None or threads is not None or best_of is not None:
            raise BackendUnavailable("--host-timing, --threads and --best-of apply to --backend host only")
        return CudaBackend(preload=preload)
    raise BackendUnavailable(f"unknown backend {name!r}; expected host or cuda")
