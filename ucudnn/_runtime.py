"""The planner the preload library calls on a plan-cache miss; importing this module registers it.

The shim imports this module itself the first time it needs a plan (in a Python host, holding the GIL; in a
C/C++ host, from the embedded planner library's interpreter). Importing it where the shim is not loaded does
nothing. The callback turns the shim's request into :meth:`ucudnn.planner.Planner.plan`, benchmarking through
``ucudnn_benchmark`` while the GIL is released, and writes the plan into the shim's reply. It never lets an
exception reach C: errors are logged and reported as status 2, which makes the shim pass the call through.
Registering also gives the shim the recorder of checks' verdicts and the framework source: what PyTorch's caching
allocator holds unused (the shim adds it to the device's free memory as what the framework can allocate) and
whether PyTorch asks for deterministic algorithms.
"""

from __future__ import annotations

import atexit
import sys
import threading
from typing import TYPE_CHECKING, Any

from ucudnn import bridge, config
from ucudnn.bridge import ffi, lib
from ucudnn.log import get_logger

if TYPE_CHECKING:
    from ucudnn._planner_sharing import SharedBenchmarks
    from ucudnn.network import Division, Network
    from ucudnn.optimizer import AlgoPerf
    from ucudnn.planner import Planner

__all__ = [
    "PLAN_ERROR",
    "PLAN_INFEASIBLE",
    "PLAN_OK",
    "network",
    "planner",
    "register",
    "registered",
    "unregister",
]

PLAN_OK = 0
PLAN_INFEASIBLE = 1
PLAN_ERROR = 2
PLAN_INTERRUPTED = 3  # UCUDNN_PLAN_INTERRUPTED

# Real cuDNN may report an algorithm once per math type, so leave room beyond the enum count.
_ROWS_PER_ALGO = 4
_MIN_BENCH_ROWS = 32

log = get_logger("runtime")

_lock = threading.Lock()
_planner: Planner | None = None
_network: Network | None = None
_registered = False
_memory_only: str | None = None  # why the planner's cache is not its file, when it cannot open it
_deferred: BaseException | None = None  # an interrupt that reached a callback, raised in the program later


def planner() -> Planner:
    """The process-wide planner, on the SQLite cache at the configured path (in memory if that cannot open)."""
    global _planner
    with _lock:
        if _planner is None:
            from ucudnn.cache import Cache
            from ucudnn.planner import Planner

            path = config.database_path()
            try:
                # Bounded waits for other processes; then this process plans in memory (said once by the cache).
                cache = Cache(path, memory_fallback=True)
            except Exception as exc:
                log.warning("cannot open the cache %s (%s); plans of this process are kept in memory only", path, exc)
                global _memory_only
                _memory_only = str(exc)
                cache = Cache.in_memory()
            _planner = Planner(cache, on_shared=_note_shared)
        return _planner


def cache_not_written() -> str | None:
    """Why what this process measures and plans is not kept in its cache file (it cannot be opened, is not a
    ucudnn cache, is read-only, or stayed locked); None when it is, or when nothing has been planned yet."""
    with _lock:
        if _planner is None:
            return None
        return _memory_only or _planner.cache.memory_only


def shared_benchmarks() -> SharedBenchmarks | None:
    """What measuring together with other processes on the same cache did for this process's plans (sizes read
    from them, sizes of theirs measured here after all, seconds waited); None when nothing has been planned."""
    with _lock:
        return None if _planner is None else _planner.shared


def _note_shared(tally: SharedBenchmarks) -> None:
    # Counted in the shim's stats and exit summary; a shim without the call (or none) simply does not count them.
    try:
        bridge.note_shared_benchmarks(tally.read, tally.taken_over, tally.waited_s)
    except ValueError as exc:
        log.debug("%s", exc)


def _note_division(division: Division) -> None:
    # The stats carry a summary; a time the shim cannot show is not worth failing a plan over.
    time_ms = division.total_time_ms if division.total_time_ms < float("inf") else 0.0
    try:
        bridge.note_division(len(division.shares), division.budget_bytes, division.total_workspace_bytes, time_ms)
    except ValueError as exc:
        log.debug("%s", exc)


def network() -> Network:
    """The process-wide Workspace Division state (kernels seen so far and the division of the budget over them),
    on :func:`planner`. ``network().division()`` is the division in force, with every kernel's share."""
    global _network
    plan_with = planner()
    with _lock:
        if _network is None:
            from ucudnn.network import Network

            _network = Network(plan_with, clear_plans=bridge.clear_plans, note=_note_division)
        return _network


def _total_budget() -> int:
    """UCUDNN_TOTAL_WORKSPACE_SIZE (or an applied policy's total_workspace_bytes); 0: Workspace Division off."""
    from ucudnn import policy

    try:
        return policy.current().total_workspace_bytes or 0
    except config.ConfigError:
        return 0  # the planner says so when it reads the same settings


def _text(ptr: Any, field: str) -> str:
    if ptr == ffi.NULL:
        raise ValueError(f"request.{field} is NULL")
    return str(ffi.string(ptr).decode("utf-8"))


def _plan(request: Any, reply: Any) -> int:
    if request.abi_version != bridge.ABI_VERSION:
        log.error(
            "the preload library speaks control ABI %d but this ucudnn was built for %d; reinstall one ucudnn",
            request.abi_version,
            bridge.ABI_VERSION,
        )
        return PLAN_ERROR
    key = _text(request.key, "key")
    algo_count = int(request.algo_count)
    bench_ctx = request.bench_ctx
    capacity = max(_MIN_BENCH_ROWS, _ROWS_PER_ALGO * algo_count)

    def benchmark(batch: int) -> list[AlgoPerf]:
        try:
            return bridge.benchmark(bench_ctx, batch, capacity)
        except bridge.BridgeError as exc:
            # A size that cannot be benchmarked is a size the plan cannot use, not a failed plan.
            log.info("benchmark of %s at batch %d failed (status %d); not using that size", key, batch, exc.status)
            return []

    backend_id = _text(request.backend_id, "backend_id")
    # Workspace Division when a total budget is set: the kernel is planned under its share of it.
    from ucudnn.planner import PlanRequest

    plan_with: Planner | Network = network() if _total_budget() > 0 else planner()
    result = plan_with.plan(
        PlanRequest(
            key=key,
            backend_id=backend_id,
            batch=int(request.batch),
            workspace_limit_bytes=int(request.workspace_limit_bytes),
            policy=_text(request.policy, "policy"),
            deterministic_only=bool(request.deterministic_only),
            algo_count=algo_count,
            benchmark=benchmark,
            op=int(request.op),
            call_cost=lambda: bridge.measure_call_cost(bench_ctx),
            align_quantum=max(1, int(request.align_quantum)),
        )
    )
    plan = result.plan
    if plan is None:
        if result.status.value == "error":
            log.error("the planner failed for %s at batch %d: %s", key, request.batch, result.message)
            return PLAN_ERROR
        log.info("no plan for %s at batch %d: %s", key, request.batch, result.message)
        return PLAN_INFEASIBLE
    steps = plan.micro_batches
    if len(steps) > reply.capacity or reply.micro_batches == ffi.NULL:
        log.error("plan for %s has %d micro-batches; the reply holds %d", key, len(steps), reply.capacity)
        return PLAN_ERROR
    for i, mb in enumerate(steps):
        out = reply.micro_batches[i]
        out.batch = mb.batch
        out.algo = mb.algo
        out.math_type = mb.math_type
    reply.count = len(steps)
    reply.time_ms = float(plan.time_ms)
    reply.workspace_bytes = int(plan.workspace_bytes)
    reply.deterministic = 1 if plan.deterministic else 0
    reply.verified = 1 if result.verified else 0
    rival = result.rival
    if rival is not None and len(steps) == 1:
        reply.rival.batch = rival.batch
        reply.rival.algo = rival.algo
        reply.rival.math_type = rival.math_type
        reply.rival_ms = float(rival.time_ms)
    return PLAN_OK


def _steps(mbs: Any, count: int) -> tuple[tuple[int, int, int], ...]:
    return tuple((int(mbs[i].batch), int(mbs[i].algo), int(mbs[i].math_type)) for i in range(count))


def _defer(exc: BaseException) -> None:
    """Keep an interrupt (KeyboardInterrupt, SystemExit: anything that is not an error) that reached a callback:
    the bridge raises it in the program's main thread once the cuDNN call returns (shim/bridge/deferred.h). The
    planner never swallows one; every cache write it interrupted has rolled back."""
    global _deferred
    _deferred = exc
    lib.ucudnn_bridge_note_interrupt()


def _raise_deferred() -> None:
    """Called by the bridge's pending call, in the main thread: raise the kept interrupt there."""
    global _deferred
    exc, _deferred = _deferred, None
    if exc is not None:
        raise exc


def _report_escape(exc_type: Any, exc: BaseException | None, tb: Any) -> int | None:
    # Only reached if a callback's own handlers failed (e.g. logging itself raised), or the interrupt came before
    # its `try`: cffi then returns what this returns, else `error`.
    if exc is not None and not isinstance(exc, Exception):
        _defer(exc)
        return PLAN_INTERRUPTED
    try:
        log.error("planner callback failed: %r", exc)
    except BaseException:  # the last line of defence must not raise either
        pass
    return None


@ffi.def_extern(error=PLAN_ERROR, onerror=_report_escape)  # type: ignore[untyped-decorator]
def _ucudnn_py_planner(request: Any, reply: Any) -> int:
    """Called by the shim through the bridge (GIL taken by cffi). Returns 0 (reply filled), 1 (nothing fits), 2
    (error) or 3 (interrupted: kept for the program, see _defer)."""
    try:
        return _plan(request, reply)
    except Exception as exc:
        # Nothing may propagate into C; the shim passes the call through and counts it.
        log.error("planning failed (%s: %s); this call runs undivided", type(exc).__name__, exc)
        log.debug("planner traceback", exc_info=True)
        return PLAN_ERROR
    except BaseException as exc:  # the program's interrupt, never the planner's to swallow
        _defer(exc)
        return PLAN_INTERRUPTED


@ffi.def_extern(onerror=_report_escape)  # type: ignore[untyped-decorator]
def _ucudnn_py_recorder(verdict: Any) -> None:
    """Called by the shim through the bridge when a check of a new micro-batched plan on real executions is over
    (GIL taken by cffi): stores the verdict, so later runs skip the check. Never raises into C; an interrupt is kept
    for the program (see _defer)."""
    try:
        if verdict.abi_version != bridge.ABI_VERSION or verdict.plan_count < 1:
            return
        from ucudnn.cache import PlanKey, Verdict

        pk = PlanKey(
            _text(verdict.key, "key"),
            _text(verdict.backend_id, "backend_id"),
            int(verdict.batch),
            _text(verdict.policy, "policy"),
            int(verdict.workspace_limit_bytes),
            bool(verdict.deterministic_only),
        )
        undivided = ((int(verdict.undivided.batch), int(verdict.undivided.algo), int(verdict.undivided.math_type)),)
        planner().record_verdict(
            Verdict(
                pk,
                _steps(verdict.plan, int(verdict.plan_count)),
                undivided,
                bool(verdict.kept),
                float(verdict.plan_ms),
                float(verdict.undivided_ms),
                int(verdict.samples),
            )
        )
    except Exception as exc:
        log.error("recording a verdict failed (%s: %s)", type(exc).__name__, exc)
    except BaseException as exc:
        _defer(exc)


def _torch_cuda() -> Any:
    """``torch.cuda`` where torch is imported and its CUDA state initialized (asking would initialize it), else None."""
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    return cuda if cuda is not None and cuda.is_initialized() else None


def framework_state() -> tuple[int, bool] | None:
    """What PyTorch says of itself in this process, or None where torch is not imported or its CUDA state is not
    initialized (asking would initialize it): bytes its caching allocator reserved but does not use on the current
    device (reserved - allocated: it hands them out for a workspace before asking the driver for more), and whether
    it asks for deterministic convolutions (``torch.backends.cudnn.deterministic`` or
    ``torch.use_deterministic_algorithms``), in which case it drops nondeterministic engines itself."""
    cuda = _torch_cuda()
    if cuda is None:
        return None
    torch = sys.modules["torch"]
    device = cuda.current_device()
    held = int(cuda.memory_reserved(device)) - int(cuda.memory_allocated(device))
    deterministic = bool(torch.backends.cudnn.deterministic) or bool(torch.are_deterministic_algorithms_enabled())
    return max(0, held), deterministic


@ffi.def_extern(error=1, onerror=_report_escape)  # type: ignore[untyped-decorator]
def _ucudnn_py_framework(state: Any) -> int:
    """Called by the shim where it needs what the framework can allocate (GIL taken by cffi): 0 with ``state``
    filled, 1 when unknown. Never raises into C."""
    try:
        found = framework_state()
    except Exception as exc:
        log.debug("reading torch's allocator failed (%s: %s)", type(exc).__name__, exc)
        return 1
    except BaseException as exc:  # the program's interrupt: raised there once the cuDNN call returns
        _defer(exc)
        return 1
    if found is None:
        return 1
    state.held_bytes, state.deterministic = found[0], int(found[1])
    return 0


def framework_alloc(nbytes: int) -> int:
    """The address of ``nbytes`` of device memory from PyTorch's caching allocator, on the current device and
    stream (where cuDNN's handle runs in a PyTorch program), or 0 where torch has no CUDA state or no memory: scratch
    for a planner benchmark where the device itself has none left (UCUDNN_SCRATCH_FROM_FRAMEWORK)."""
    cuda = _torch_cuda()
    return int(cuda.caching_allocator_alloc(nbytes)) if cuda is not None else 0


@ffi.def_extern(onerror=_report_escape)  # type: ignore[untyped-decorator]
def _ucudnn_py_alloc(nbytes: int) -> Any:
    """Called by the shim for benchmark scratch (GIL taken by cffi): the memory, or NULL. Never raises into C."""
    try:
        return ffi.cast("void *", framework_alloc(int(nbytes)))
    except Exception as exc:  # torch.OutOfMemoryError among them
        log.debug("borrowing %d bytes from torch's allocator failed (%s: %s)", nbytes, type(exc).__name__, exc)
    except BaseException as exc:  # the program's interrupt: raised there once the cuDNN call returns
        _defer(exc)
    return ffi.NULL


@ffi.def_extern(onerror=_report_escape)  # type: ignore[untyped-decorator]
def _ucudnn_py_free(ptr: Any) -> None:
    """Gives back what _ucudnn_py_alloc lent. Never raises into C."""
    try:
        cuda = _torch_cuda()
        if cuda is not None:
            cuda.caching_allocator_delete(int(ffi.cast("uintptr_t", ptr)))
    except Exception as exc:
        log.error("giving scratch back to torch's allocator failed (%s: %s)", type(exc).__name__, exc)
    except BaseException as exc:
        _defer(exc)


def _python_host() -> bool:
    """Whether this interpreter is the program's own, not the one libucudnn_planner.so embeds for a C/C++ host (its
    cffi module ``_ucudnn_planner`` is loaded there)."""
    return "_ucudnn_planner" not in sys.modules


def register() -> bool:
    """Register the planner with the shim; False (and nothing done) when the shim is not loaded. PyTorch's framework
    source and allocator are registered in a Python host (they answer once torch is imported and has CUDA state),
    not in the interpreter a C/C++ host embeds for the planner: such a host has no Python torch, and keeps those it
    registered itself."""
    global _registered
    if not bridge.shim_loaded():
        return False
    status: int = lib.ucudnn_bridge_set_planner(lib.ucudnn_bridge_planner)
    _registered = status == 0
    if _registered:
        lib.ucudnn_bridge_set_recorder(lib.ucudnn_bridge_recorder)
        if _python_host():
            lib.ucudnn_bridge_set_framework_source(lib.ucudnn_bridge_framework)
            lib.ucudnn_bridge_set_framework_allocator(lib.ucudnn_bridge_alloc, lib.ucudnn_bridge_free)
    if not _registered:
        log.warning("the preload library refused the planner (status %d); calls will run undivided", status)
    else:
        _check_benchmark_devices()
    return _registered


def _check_benchmark_devices() -> None:
    """The original's UCUDNN_BENCHMARK_DEVICES is accepted, but a thread benchmarks on its own device only (threads
    and processes on several devices share their benchmarks through the cache: UCUDNN_BENCHMARK_WAIT)."""
    try:
        devices = config.benchmark_devices()
    except config.ConfigError as exc:
        log.warning("%s; benchmarking on the caller's device", exc)
        return
    if len(devices) > 1:
        log.warning(
            "UCUDNN_BENCHMARK_DEVICES=%s: a thread's benchmarks run on its own device, never sent to other GPUs "
            "(the threads or processes that drive several GPUs share a kernel's benchmarks through the cache instead)",
            ",".join(map(str, devices)),
        )


def unregister() -> None:
    """Withdraw the planner, so the shim never calls into an interpreter that is shutting down."""
    global _registered
    if _registered:
        if _python_host():  # what register() added
            lib.ucudnn_bridge_set_framework_source(ffi.NULL)
            lib.ucudnn_bridge_set_framework_allocator(ffi.NULL, ffi.NULL)
        lib.ucudnn_bridge_set_recorder(ffi.NULL)
        lib.ucudnn_bridge_set_planner(ffi.NULL)
        _registered = False


def registered() -> bool:
    return _registered


if register():
    atexit.register(unregister)
