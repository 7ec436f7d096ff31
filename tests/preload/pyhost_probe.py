"""A Python host for test_python_host.py (run with LD_PRELOAD=libucudnn.so): convolutions through the hooked
symbols (looked up with RTLD_DEFAULT, as a framework's linked calls are), first from the main thread, then from
four threads at once. Prints the shim's stats and the largest difference from the direct undivided call."""

from __future__ import annotations

import ctypes
import json
import sys
import threading
from typing import Any

import numpy as np

from ucudnn import bridge
from ucudnn.cudnn import UnhookedCDLL

# The host backend; calls on it bypass the shim (the preload library interposes dlsym, so a plain CDLL's
# cudnnConvolutionForward would be the hook).
lib = UnhookedCDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
hooks = ctypes.CDLL(None)
P = ctypes.c_void_p
N, C, K, S = 16, 32, 64, 16


def ints(*v: int) -> Any:
    return (ctypes.c_int * len(v))(*v)


def make(fn: str) -> P:
    d = P()
    assert getattr(lib, fn)(ctypes.byref(d)) == 0, fn
    return d


handle, x, y = make("cudnnCreate"), make("cudnnCreateTensorDescriptor"), make("cudnnCreateTensorDescriptor")
w, conv = make("cudnnCreateFilterDescriptor"), make("cudnnCreateConvolutionDescriptor")
assert lib.cudnnSetTensorNdDescriptor(x, 0, 4, ints(N, C, S, S), ints(C * S * S, S * S, S, 1)) == 0
assert lib.cudnnSetTensorNdDescriptor(y, 0, 4, ints(N, K, S, S), ints(K * S * S, S * S, S, 1)) == 0
assert lib.cudnnSetFilterNdDescriptor(w, 0, 0, 4, ints(K, C, 3, 3)) == 0
assert lib.cudnnSetConvolutionNdDescriptor(conv, 2, ints(1, 1), ints(1, 1), ints(1, 1), 1, 0) == 0
rng = np.random.default_rng(0)
xs = rng.standard_normal(N * C * S * S).astype(np.float32)
ws = rng.standard_normal(K * C * 9).astype(np.float32)
WORKSPACE = 2500 * 1024


def forward(fn: Any) -> np.ndarray:
    out = np.zeros(N * K * S * S, np.float32)
    scratch = np.zeros(WORKSPACE, np.uint8)
    alpha, beta = ctypes.c_float(1), ctypes.c_float(0)
    status = fn(
        handle,
        ctypes.byref(alpha),
        x,
        xs.ctypes.data_as(P),
        w,
        ws.ctypes.data_as(P),
        conv,
        0,
        scratch.ctypes.data_as(P),
        ctypes.c_size_t(WORKSPACE),
        ctypes.byref(beta),
        y,
        out.ctypes.data_as(P),
    )
    assert status == 0, status
    return out


reference = forward(lib.cudnnConvolutionForward)
outputs = [forward(hooks.cudnnConvolutionForward)]
threads = [
    threading.Thread(target=lambda: outputs.extend(forward(hooks.cudnnConvolutionForward) for _ in range(2)))
    for _ in range(4)
]
for t in threads:
    t.start()
for t in threads:
    t.join()
error = max(float(np.max(np.abs(o - reference) / np.maximum(1.0, np.abs(reference)))) for o in outputs)
print(json.dumps({"stats": bridge.stats(), "outputs": len(outputs), "max_rel_error": error}))
