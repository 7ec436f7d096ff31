"""One convolution through NVIDIA's cudnn_frontend Python package (the ``cudnn`` module of the
nvidia-cudnn-frontend wheel), written as its users write one: a handle, a ``pygraph`` with one fprop, dgrad or
wgrad node, ``build`` with heuristics mode A, the workspace the graph asks for, ``execute`` on the buffers.

The package reaches cuDNN only through ``dlopen`` + ``dlsym`` on the library it loads (the first libcudnn.so.9 on
LD_LIBRARY_PATH: here the host backend, buffers in host memory), and the CUDA runtime it loads
(CUDNN_FRONTEND_CUDART_LIB_NAME: here the test's stand-in). Writes ``inputs.npz``, ``output.npy`` and
``result.json`` (the workspace size the graph asked for) into the folder named by the second argument.
Run by tests/frontend/test_python_frontend.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import cudnn
import numpy as np

# N, C, K, H = W; 3x3 filters, padding 1, stride 1
N, C, K, HW = 8, 32, 64, 32
CONV = {"padding": [1, 1], "stride": [1, 1], "dilation": [1, 1]}
FLOAT = cudnn.data_type.FLOAT


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "x": rng.uniform(-1, 1, (N, C, HW, HW)).astype(np.float32),
        "w": (rng.uniform(-1, 1, (K, C, 3, 3)) * 0.1).astype(np.float32),
        "dy": rng.uniform(-1, 1, (N, K, HW, HW)).astype(np.float32),
    }


def strides(a: np.ndarray) -> list[int]:
    return [s // a.itemsize for s in a.strides]


def main(op: str, folder: Path) -> None:
    data = inputs()
    handle = cudnn.create_handle()
    graph = cudnn.pygraph(handle=handle, io_data_type=FLOAT, compute_data_type=FLOAT)

    def tensor(name: str) -> Any:
        a = data[name]
        return graph.tensor(name=name, dim=list(a.shape), stride=strides(a), data_type=FLOAT)

    if op == "fprop":
        ins = {"x": tensor("x"), "w": tensor("w")}
        out = np.full((N, K, HW, HW), np.nan, np.float32)
        node = graph.conv_fprop(image=ins["x"], weight=ins["w"], **CONV)
    elif op == "dgrad":
        ins = {"dy": tensor("dy"), "w": tensor("w")}
        out = np.full((N, C, HW, HW), np.nan, np.float32)
        node = graph.conv_dgrad(loss=ins["dy"], filter=ins["w"], **CONV)
    else:
        ins = {"x": tensor("x"), "dy": tensor("dy")}
        out = np.full((K, C, 3, 3), np.nan, np.float32)
        node = graph.conv_wgrad(image=ins["x"], loss=ins["dy"], **CONV)
    node.set_output(True).set_data_type(FLOAT).set_dim(list(out.shape)).set_stride(strides(out))
    graph.build([cudnn.heur_mode.A])
    size = int(graph.get_workspace_size())
    workspace = np.zeros(max(size, 1), np.uint8)
    pointers = {t: data[name].ctypes.data for name, t in ins.items()}
    pointers[node] = out.ctypes.data
    graph.execute(pointers, workspace.ctypes.data, handle=handle)
    np.savez(folder / "inputs.npz", x=data["x"], w=data["w"], dy=data["dy"])
    np.save(folder / "output.npy", out)
    (folder / "result.json").write_text(json.dumps({"workspace": size}))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
