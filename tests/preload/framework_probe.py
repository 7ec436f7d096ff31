"""A Python host for test_framework_memory.py (run with LD_PRELOAD=libucudnn.so and UCUDNN_HOST_DEVICE_MEMORY set):
a stand-in ``torch`` module in sys.modules, as PyTorch's would be, whose caching allocator reports what the test
passes; prints what the shim reckons the framework can allocate in each state, and the workspace of the first
Get*_v7 entry (the legacy path's bound) with and without the allocator's cached bytes."""

from __future__ import annotations

import ctypes
import json
import sys
import types
from typing import Any

lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)  # the host backend
reserved, allocated = int(sys.argv[2]), int(sys.argv[3])
hooks = ctypes.CDLL(None)
hooks.ucudnn_debug_framework_memory.restype = ctypes.c_size_t
P = ctypes.c_void_p


class Cuda:
    """torch.cuda as far as the runtime reads it."""

    initialized = False

    def is_initialized(self) -> bool:
        return self.initialized

    def current_device(self) -> int:
        return 0

    def memory_reserved(self, device: int) -> int:
        return reserved

    def memory_allocated(self, device: int) -> int:
        return allocated


def figure() -> int:
    return int(hooks.ucudnn_debug_framework_memory())


def first_entry_workspace() -> int:
    """Get*_v7 for a forward convolution whose fast algorithms need megabytes at N = 32: the first entry's memory."""

    def make(fn: str) -> P:
        d = P()
        assert getattr(lib, fn)(ctypes.byref(d)) == 0, fn
        return d

    def ints(*v: int) -> Any:
        return (ctypes.c_int * len(v))(*v)

    handle, x, y = make("cudnnCreate"), make("cudnnCreateTensorDescriptor"), make("cudnnCreateTensorDescriptor")
    w, conv = make("cudnnCreateFilterDescriptor"), make("cudnnCreateConvolutionDescriptor")
    n, c, k, s = 32, 32, 32, 16
    assert lib.cudnnSetTensorNdDescriptor(x, 0, 4, ints(n, c, s, s), ints(c * s * s, s * s, s, 1)) == 0
    assert lib.cudnnSetTensorNdDescriptor(y, 0, 4, ints(n, k, s, s), ints(k * s * s, s * s, s, 1)) == 0
    assert lib.cudnnSetFilterNdDescriptor(w, 0, 0, 4, ints(k, c, 3, 3)) == 0
    assert lib.cudnnSetConvolutionNdDescriptor(conv, 2, ints(1, 1), ints(1, 1), ints(1, 1), 1, 0) == 0
    rows = (ctypes.c_byte * (48 * 16))()
    count = ctypes.c_int()
    assert hooks.cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, conv, y, 16, ctypes.byref(count), rows) == 0
    return int(ctypes.c_size_t.from_buffer(rows, 16).value)  # cudnnConvolutionFwdAlgoPerf_t.memory


report: dict[str, Any] = {"no_torch": figure()}
torch = types.ModuleType("torch")
cuda = Cuda()
torch.cuda = cuda  # type: ignore[attr-defined]
torch.backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(deterministic=False))  # type: ignore[attr-defined]
torch.are_deterministic_algorithms_enabled = lambda: False  # type: ignore[attr-defined]
sys.modules["torch"] = torch
report["cuda_not_initialized"] = figure()
report["entry_without_cache"] = first_entry_workspace()
cuda.initialized = True
report["initialized"] = figure()
report["entry_with_cache"] = first_entry_workspace()
print(json.dumps(report))
