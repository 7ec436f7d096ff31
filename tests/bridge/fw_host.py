"""A Python "framework" host: loads libfakefw.so with ctypes (RTLD_LOCAL, as torch loads libtorch_cuda.so and,
through its DT_NEEDED, libcudnn.so.9) and runs one convolution training step on seeded data.

Usage: fw_host.py LIBFAKEFW OUT_PREFIX N C H W K R S PAD [--planner-raises] [--start-after PATH]

Writes OUT_PREFIX.{y,dx,dw}.npy and prints {"algos": [...]} as JSON. With --planner-raises, ucudnn's planner
callback is registered first and its planner replaced by one that raises, before any convolution runs. With
--start-after PATH (the checkout on PYTHONPATH), the step waits for tests/_start.py's go file PATH: ranks started
together then plan at the same moment.
"""

from __future__ import annotations

import ctypes
import json
import sys

import numpy as np


def main(argv: list[str]) -> int:
    libpath, prefix = argv[0], argv[1]
    shape = [int(v) for v in argv[2:10]]
    if "--planner-raises" in argv[10:]:
        from ucudnn import _runtime

        class Broken:
            def plan(self, *args: object, **kwargs: object) -> object:
                raise RuntimeError("planner exploded on purpose")

        _runtime._planner = Broken()  # type: ignore[assignment]
        assert _runtime.registered(), "the shim should be loaded (LD_PRELOAD)"
    if "--start-after" in argv[10:]:
        from tests._start import ready_then_wait

        ready_then_wait(argv[argv.index("--start-after") + 1])
    lib = ctypes.CDLL(libpath)  # RTLD_LOCAL: libcudnn.so.9 stays out of the global scope
    n, c, h, w, k, r, s, pad = shape
    ho, wo = h + 2 * pad - r + 1, w + 2 * pad - s + 1
    rng = np.random.default_rng(1234)
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((k, c, r, s), dtype=np.float32)
    dy = rng.standard_normal((n, k, ho, wo), dtype=np.float32)
    dw = rng.standard_normal((k, c, r, s), dtype=np.float32)  # prior gradient, accumulated into
    y = np.zeros((n, k, ho, wo), dtype=np.float32)
    dx = np.zeros((n, c, h, w), dtype=np.float32)
    algos = (ctypes.c_int * 3)(-1, -1, -1)

    def ptr(a: np.ndarray) -> ctypes.c_void_p:
        return ctypes.c_void_p(a.ctypes.data)

    status = lib.fakefw_train_step(
        (ctypes.c_int * 8)(*shape), ptr(x), ptr(wt), ptr(dy), ptr(y), ptr(dx), ptr(dw), algos
    )
    if status != 0:
        print(f"fw_host: cuDNN status {status}", file=sys.stderr)
        return 1
    for name, arr in (("y", y), ("dx", dx), ("dw", dw)):
        np.save(f"{prefix}.{name}.npy", arr)
    print(json.dumps({"algos": list(algos)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
