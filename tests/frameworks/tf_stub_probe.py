"""Run by test_tensorflow_stubs.py in the interpreter of TensorFlow (a CUDA build) on a machine without a GPU, alone
and under `ucudnn run`: convolutions through the cuDNN functions TensorFlow exports, its stubs.

TensorFlow makes no cuDNN call without a GPU, so this process makes them, as TensorFlow's own code does: through
the global scope (``ctypes.CDLL(None)``), where TensorFlow's library lies (its Python module loads it
RTLD_GLOBAL) and where TensorFlow's calls through its PLT are bound. Alone, each name is TensorFlow's stub, which
loads cuDNN with TensorFlow's own loader at its first call (``dlopen("libcudnn.so.9")``: the host backend, first on
LD_LIBRARY_PATH) and forwards through ``dlsym``. Under the preload library each hooked name is the hook, which
forwards to the next definition, TensorFlow's stub: hook, stub, TensorFlow's loader, cuDNN, the chain a GPU run of
TensorFlow takes.

- First, a hooked call (``cudnnBackendCreateDescriptor``), before any stub has loaded cuDNN.
- Legacy API, the three operations, chosen as a framework chooses: the first ``Get*_v7`` row whose workspace fits
  MEMORY_BYTES, the size ``Get*WorkspaceSize`` gives for it, the call.
- Graph API: a forward convolution with the engine whose workspace grows with N (the host backend's engine 2), its
  plan's workspace as the plan reports it.

Writes the inputs (x, w, dy) and each output to OUT_DIR/<name>.npy and prints one JSON line.
Usage: python -m tests.frameworks.tf_stub_probe OUT_DIR MEMORY_BYTES
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import numpy.typing as npt
import tensorflow as tf  # after its log level; loads TensorFlow's libraries as TensorFlow does

from tests.frameworks._maps import mapped_libcudnn
from ucudnn import cudnn as C
from ucudnn.graph_api import TENSOR, Backend, ConvGraph

N, CH, K, S = 16, 32, 64, 16
GRAPH_ENGINE = 2  # forward im2col + GEMM: its workspace grows with N
DEFINITIONS = ("cudnnCreate", "cudnnConvolutionForward", "cudnnBackendExecute")  # not hooked, hooked, hooked


class DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                ("saddr", ctypes.c_void_p)]  # fmt: skip


def defined_in(scope: ctypes.CDLL, name: str) -> str:
    """The file of the definition ``name`` has in ``scope``."""
    info = DlInfo()
    fn = ctypes.cast(getattr(scope, name), ctypes.c_void_p)
    assert ctypes.CDLL(None).dladdr(fn, ctypes.byref(info)) != 0, name
    return os.path.realpath((info.fname or b"").decode())


def pointer(a: npt.NDArray[Any]) -> int:
    return int(a.ctypes.data)


def main() -> int:
    out, memory = Path(sys.argv[1]), int(sys.argv[2])
    stubs = Path(tf.__file__).parent / "libtensorflow_framework.so.2"
    scope = ctypes.CDLL(None)  # the global scope, as TensorFlow's PLT binds
    lib = C.Cudnn(scope)
    loaded_before = mapped_libcudnn()  # nothing: the stubs load cuDNN at their first call
    # The first call is a hooked one (TensorFlow's is cudnnCreate's or cudnnGetVersion's, which are not): under the
    # preload library its stub runs behind the hook, before any stub has loaded cuDNN.
    api = Backend(scope)
    first_status, first = api.create_status(TENSOR)
    first_loaded = mapped_libcudnn()
    if first_status == 0:
        scope.cudnnBackendDestroyDescriptor(first)
    handle = lib.handle()
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (N, CH, S, S)).astype(np.float32)
    w = rng.uniform(-1, 1, (K, CH, 3, 3)).astype(np.float32)
    dy = rng.uniform(-1, 1, (N, K, S, S)).astype(np.float32)
    for name, a in (("x", x), ("w", w), ("dy", dy)):
        np.save(out / f"{name}.npy", a)
    conv = C.ConvSpec(pads=(1, 1))
    legacy: dict[str, dict[str, int]] = {}
    for op in (C.Op.FWD, C.Op.BWD_DATA, C.Op.BWD_FILTER):
        rows = lib.get_v7(handle, op, x, w, dy, conv)
        algo = next(r.algo for r in rows if r.status == 0 and r.memory_bytes <= memory)
        size = lib.workspace_size(handle, op, x, w, dy, conv, algo)
        scratch = np.zeros(max(size, 1), np.uint8)
        if op == C.Op.FWD:
            result = lib.forward(handle, x, w, conv, algo, scratch, workspace_bytes=size)
        elif op == C.Op.BWD_DATA:
            result = lib.backward_data(handle, w, dy, conv, algo, np.zeros_like(x), scratch, workspace_bytes=size)
        else:
            result = lib.backward_filter(handle, x, dy, conv, algo, np.zeros_like(w), scratch, workspace_bytes=size)
        np.save(out / f"legacy_{op.name.lower()}.npy", result)
        legacy[op.name.lower()] = {"algo": int(algo), "workspace": size}

    graph = ConvGraph(api, handle.ptr or 0, "fwd", x.shape, w.shape, dy.shape, (1, 1), (1, 1), GRAPH_ENGINE)
    y = np.zeros_like(dy)
    scratch = np.zeros(max(graph.workspace_bytes, 1), np.uint8)
    graph.executor(pointer(x), pointer(w), pointer(y), pointer(scratch))()
    graph.close()
    np.save(out / "graph_fwd.npy", y)

    print(
        json.dumps(
            {
                "tensorflow": tf.__version__,
                "stubs": str(stubs.resolve()),
                "definitions": {name: defined_in(scope, name) for name in DEFINITIONS},
                "loaded_before": loaded_before,
                "first_call": {"status": first_status, "loaded": first_loaded},
                "libcudnn": mapped_libcudnn(),
                "version": lib.version(),
                "legacy": legacy,
                "graph_workspace": graph.workspace_bytes,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
