"""A Python host for the fake shim (run as a script in a child process; prints one JSON object).

Usage: fake_host.py SHIM_SO KEY BATCH LIMIT POLICY [--planner-raises | --no-import] [--repeat N]

The fake shim is loaded RTLD_GLOBAL (where LD_PRELOAD would put the real one), ucudnn._runtime is imported
(registering the planner) and the shim's miss path is driven through ctypes, which releases the GIL like a
framework calling cuDNN does; the callback takes it back.
"""

from __future__ import annotations

import ctypes
import json
import sys


class MicroBatch(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int), ("algo", ctypes.c_int), ("math_type", ctypes.c_int)]


def main(argv: list[str]) -> int:
    shim_path, key, batch, limit, policy = argv[:5]
    flags = argv[5:]
    shim = ctypes.CDLL(shim_path, mode=ctypes.RTLD_GLOBAL)
    registered = False
    if "--no-import" not in flags:
        from ucudnn import _runtime

        registered = _runtime.registered()
        if "--planner-raises" in flags:

            class Broken:
                def plan(self, *args: object, **kwargs: object) -> object:
                    raise RuntimeError("planner exploded on purpose")

            _runtime._planner = Broken()  # type: ignore[assignment]
    repeat = int(flags[flags.index("--repeat") + 1]) if "--repeat" in flags else 1
    results = []
    for _ in range(repeat):
        out = (MicroBatch * 256)()
        count, ws, det = ctypes.c_int(), ctypes.c_size_t(), ctypes.c_int()
        time_ms = ctypes.c_float()
        status = shim.fake_shim_plan(
            key.encode(),
            int(batch),
            ctypes.c_size_t(int(limit)),
            policy.encode(),
            0,
            out,
            256,
            ctypes.byref(count),
            ctypes.byref(time_ms),
            ctypes.byref(ws),
            ctypes.byref(det),
        )
        results.append(
            {
                "status": status,
                "micro_batches": [[out[i].batch, out[i].algo] for i in range(count.value)] if status == 0 else [],
                "time_ms": round(time_ms.value, 3),
                "workspace_bytes": ws.value,
                "deterministic": det.value,
            }
        )
    print(
        json.dumps(
            {
                "registered": registered,
                "results": results,
                "benchmark_calls": shim.fake_shim_benchmark_calls(),
                "set_planner_calls": shim.fake_shim_set_planner_calls(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
