"""Typed access to the preload library's control API through ``ucudnn._bridge``.

Importing this module is safe in any process: the bridge finds libucudnn.so's functions at run time, and every
call here raises :class:`ShimNotLoaded` when the shim is not in the process (run the program under
``ucudnn run`` or ``LD_PRELOAD``). The bridge is compiled for one package version; importing a stale build
fails here with a message saying to rebuild, instead of misbehaving later.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from ucudnn import __version__
from ucudnn._abi import (
    CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
    CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
    UCUDNN_V8_STATUS_ALLOC_FAILED,
)
from ucudnn._cache_rows import Unallocated
from ucudnn.optimizer import AlgoPerf

try:
    from ucudnn._bridge import ffi, lib
except ImportError as exc:  # pragma: no cover - depends on the build
    raise ImportError(
        f"ucudnn: the cffi bridge ucudnn._bridge is not built ({exc}); reinstall with `pip install .` "
        "or, in a development tree, run `python shim/build/bridge.py`"
    ) from exc

__all__ = [
    "NO_SHIM",
    "BridgeError",
    "ShimNotLoaded",
    "benchmark",
    "clear_plans",
    "ffi",
    "graph_plan",
    "last_plan",
    "lib",
    "note_division",
    "note_shared_benchmarks",
    "set_option",
    "set_planner",
    "shim_loaded",
    "shim_version",
    "stats",
]

NO_SHIM: int = lib.UCUDNN_BRIDGE_NO_SHIM
ABI_VERSION: int = lib.UCUDNN_ABI_VERSION


# Statuses of a search row whose memory could not be allocated: cuDNN 9's two, and cuDNN 8's (2 means nothing else
# in cuDNN 9, nor 4003/4004 in cuDNN 8).
_ALLOCATION_FAILED = frozenset(
    {
        CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
        CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
        UCUDNN_V8_STATUS_ALLOC_FAILED,
    }
)


def _check_build() -> None:
    built_for = ffi.string(lib.ucudnn_bridge_package_version()).decode()
    if built_for != __version__:
        raise ImportError(
            f"ucudnn: ucudnn._bridge was built for ucudnn {built_for} but the package is {__version__}; "
            "rebuild it (`pip install .`, or `python shim/build/bridge.py` in a development tree)"
        )


_check_build()


class BridgeError(RuntimeError):
    """A control-API call failed; ``status`` is what the shim returned."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ShimNotLoaded(BridgeError):
    """libucudnn.so is not loaded in this process."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"ucudnn: {what} needs the preload library, which is not loaded in this process; "
            "run the program under `ucudnn run -- ...` or with LD_PRELOAD=<path of libucudnn.so>",
            NO_SHIM,
        )


def _check(status: int, what: str) -> None:
    if status == NO_SHIM:
        raise ShimNotLoaded(what)
    if status != 0:
        raise BridgeError(f"ucudnn: {what} failed with status {status}", status)


def shim_loaded() -> bool:
    """True when libucudnn.so's control API is reachable from this process."""
    return bool(lib.ucudnn_bridge_shim_loaded())


def shim_version() -> int:
    """The preload library's version number (MAJOR*10000 + MINOR*100 + PATCH)."""
    out = ffi.new("int *")
    _check(lib.ucudnn_bridge_version(out), "ucudnn_version")
    return int(out[0])


def set_option(name: str, value: str) -> None:
    """Set a ``UCUDNN_*`` variable in the running shim (parsed like the environment); ValueError if rejected."""
    status = lib.ucudnn_bridge_set_option(name.encode(), value.encode())
    if status == -1:
        raise ValueError(f"ucudnn: the preload library rejected {name}={value!r} (unknown name or bad value)")
    _check(status, "ucudnn_set_option")


_planner: Any = None  # the callback set_planner registered, alive while the shim may call it


def set_planner(planner: Callable[[Any, Any], int] | None) -> None:
    """Register ``planner(request, reply) -> status`` (ucudnn.h's ``ucudnn_planner_fn``; an exception counts as 2,
    an error) in place of ucudnn's own planner; None unregisters. For tools that measure the shim without planning:
    a program's planner is ``ucudnn._runtime``'s, registered when the shim first needs a plan."""
    global _planner
    callback = ffi.NULL if planner is None else ffi.callback("ucudnn_planner_fn", planner, error=2)
    _check(lib.ucudnn_bridge_set_planner(callback), "ucudnn_set_planner")
    _planner = callback


def clear_plans() -> None:
    """Drop the shim's in-memory plans (the SQLite cache is untouched)."""
    _check(lib.ucudnn_bridge_clear_plans(), "ucudnn_clear_plans")


def note_division(kernels: int, budget_bytes: int, workspace_bytes: int, time_ms: float) -> bool:
    """Tell the shim about a new Workspace Division (its stats show it). False when the loaded shim has no
    ``ucudnn_note_division`` (or is not loaded); ValueError for arguments it refuses."""
    status = lib.ucudnn_bridge_note_division(kernels, budget_bytes, workspace_bytes, time_ms)
    return _noted(status, f"the division ({kernels}, {time_ms!r} ms)")


def note_shared_benchmarks(read: int, taken_over: int, waited_s: float) -> bool:
    """Tell the shim what sharing benchmarks with other processes did for the kernels planned (its stats and exit
    summary count them): sizes read from the cache that another process measured meanwhile, sizes another process
    had claimed and this one measured after all, and the seconds waited. False when the loaded shim has no
    ``ucudnn_note_shared_benchmarks`` (or is not loaded); ValueError for arguments it refuses."""
    status = lib.ucudnn_bridge_note_shared_benchmarks(read, taken_over, waited_s * 1e3)
    return _noted(status, f"the counts ({read}, {taken_over}, {waited_s!r} s)")


def _noted(status: int, what: str) -> bool:
    """A ``ucudnn_note_*`` call's status: True taken, False no shim (or one without it), ValueError refused."""
    if status == NO_SHIM:
        return False
    if status != 0:
        raise ValueError(f"ucudnn: the preload library refused {what}")
    return True


def _json_call(fn: Any, what: str, *args: Any) -> Any:
    needed = ffi.new("size_t *")
    size = 4096
    while True:
        buf = ffi.new("char[]", size)
        _check(fn(*args, buf, size, needed), what)
        if needed[0] < size:
            return json.loads(ffi.string(buf).decode())
        size = int(needed[0]) + 1


def stats() -> dict[str, Any]:
    """The shim's counters (calls, planned, micro_batches, passthrough, ...) as a dict."""
    result: dict[str, Any] = _json_call(lib.ucudnn_bridge_stats_json, "ucudnn_stats_json")
    return result


def last_plan() -> dict[str, Any]:
    """The plan of this thread's most recent planned call (empty dict if none)."""
    result: dict[str, Any] = _json_call(lib.ucudnn_bridge_last_plan_json, "ucudnn_last_plan_json")
    return result


def graph_plan(plan: Any) -> dict[str, Any]:
    """What the shim resolved for a graph-API execution plan (a ``cudnnBackendDescriptor_t``: a ctypes pointer or an
    address) and how it splits it; {} for a plan it does not know (``ucudnn_debug_graph_json``)."""
    address = getattr(plan, "value", plan)
    result: dict[str, Any] = _json_call(
        lib.ucudnn_bridge_graph_json, "ucudnn_debug_graph_json", ffi.cast("void *", address or 0)
    )
    return result


def measure_call_cost(bench_ctx: Any) -> float:
    """The host time of one cuDNN call on the handle of the request being planned, in ms (ucudnn.h)."""
    out = ffi.new("double *")
    _check(lib.ucudnn_bridge_measure_call_cost(bench_ctx, out), "ucudnn_measure_call_cost")
    return float(out[0])


def benchmark(bench_ctx: Any, batch: int, capacity: int) -> list[AlgoPerf]:
    """Benchmark the kernel of the request being planned at N = ``batch`` (all algorithms, GIL released).

    ``bench_ctx`` is the request's ``bench_ctx`` pointer, valid only while that request is being planned.
    Returns the algorithms that ran (status 0, finite non-negative time), fastest first as the shim reports
    them, then those the search could not allocate memory for (``Unallocated``: time ``inf``, the workspace they
    need). Raises BridgeError if the benchmark itself failed.
    """
    out = ffi.new("ucudnn_perf[]", capacity)
    count = ffi.new("int *")
    _check(lib.ucudnn_bridge_benchmark(bench_ctx, batch, out, capacity, count), f"ucudnn_benchmark(batch={batch})")
    rows: list[AlgoPerf] = []
    for i in range(min(int(count[0]), capacity)):
        row = out[i]
        time_ms = float(row.time_ms)
        unallocated = row.status in _ALLOCATION_FAILED
        if unallocated:
            time_ms = math.inf
        elif row.status != 0 or not (time_ms >= 0.0) or time_ms == math.inf:
            continue
        rows.append(
            (Unallocated if unallocated else AlgoPerf)(
                batch=batch,
                algo=int(row.algo),
                time_ms=time_ms,
                workspace_bytes=int(row.memory),
                deterministic=row.determinism == 1,
                math_type=int(row.math_type),
            )
        )
    rows.sort(key=lambda p: isinstance(p, Unallocated))  # stable: measured rows first, in the shim's order
    return rows
