"""One convolution through NVIDIA's cudnn_frontend Python package (the ``cudnn`` module of the
nvidia-cudnn-frontend wheel), written as its users write one: a handle, a ``pygraph`` with one fprop, dgrad or
wgrad node, ``build`` with heuristics mode A, the workspace the graph asks for, ``execute`` on the buffers.

The package reaches cuDNN only through ``dlopen`` + ``dlsym`` on the library it loads (the first libcudnn.so.9 on
LD_LIBRARY_PATH: here the host backend, buffers in host memory), and the CUDA runtime it loads
(CUDNN_FRONTEND_CUDART_LIB_NAME: here the test's stand-in). Writes ``inputs.npz``, ``output.npy`` and
``result.json`` (the workspace size the graph asked for, the execution's time on the host backend's model
clock, and the package's plan list, by name and by engine and knobs, where the client reads it) into the folder
named by the second argument. A third argument, a byte count, makes it a client that can allocate only that much
workspace: it plans step by step and drops the plans that need more (``deselect_workspace_greater_than``) before
building the first that remains. A fourth, ``[engine, {knob type: value}]`` as JSON, makes it build that pair
again (``create_execution_plan``), as a client replays a choice it kept; a pair the library refuses is written as
``{"refused": message}``.
Run by tests/frontend/test_python_frontend.py.
"""

from __future__ import annotations

import ctypes
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


def model_clock() -> Any:
    """The host backend's model clock (ms), which UCUDNN_HOST_TIMING=model advances by the modelled time of what
    it runs; a clock that stands still where the library loaded is not the host backend."""
    lib = ctypes.CDLL("libcudnn.so.9")  # the library the package loaded: the same handle
    clock = getattr(lib, "ucudnn_host_model_clock_ms", None)
    if clock is None:
        return lambda: 0.0
    clock.restype = ctypes.c_double
    return clock


def main(op: str, folder: Path, cap: int | None, replay: Any = None) -> None:
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
    plans: list[str] = []  # the package's plan list, by name, where the client reads it (with a cap)
    pairs: list[Any] = []  # ... and by (engine, {knob type: value}), what create_execution_plan replays
    if cap is None:
        graph.build([cudnn.heur_mode.A])
    else:  # a client that can allocate only `cap` bytes of workspace drops the engines that need more
        graph.validate()
        graph.build_operation_graph()
        if replay is None:
            graph.create_execution_plans([cudnn.heur_mode.A])
            plans = [graph.get_plan_name_at_index(i) for i in range(graph.get_execution_plan_count())]
            for i in range(len(plans)):
                engine, knobs = graph.get_engine_and_knobs_at_index(i)
                pairs.append([engine, {int(k): v for k, v in knobs.items()}])
        else:  # an engine and knobs read earlier, built again
            engine, knobs = replay
            try:
                graph.create_execution_plan(engine, {cudnn.knob_type(int(k)): v for k, v in knobs.items()})
            except Exception as exc:  # the library refused it: say so, as the client would see it
                (folder / "result.json").write_text(json.dumps({"refused": str(exc)}))
                return
        graph.deselect_workspace_greater_than(cap)
        graph.check_support()
        graph.build_plans()
    size = int(graph.get_workspace_size())
    workspace = np.zeros(max(size, 1), np.uint8)
    pointers = {t: data[name].ctypes.data for name, t in ins.items()}
    pointers[node] = out.ctypes.data
    clock = model_clock()
    start = clock()
    graph.execute(pointers, workspace.ctypes.data, handle=handle)
    model_ms = clock() - start
    np.savez(folder / "inputs.npz", x=data["x"], w=data["w"], dy=data["dy"])
    np.save(folder / "output.npy", out)
    result = {"workspace": size, "model_ms": model_ms, "plans": plans, "pairs": pairs}
    (folder / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(
        sys.argv[1],
        Path(sys.argv[2]),
        int(sys.argv[3]) if len(sys.argv) > 3 else None,
        json.loads(sys.argv[4]) if len(sys.argv) > 4 else None,
    )
