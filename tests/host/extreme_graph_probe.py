"""Run by test_extreme_values.py: random convolution graphs as large as a tensor may be (each operand below 2**31
elements, the workspace far beyond), and some with any 64-bit sizes, built on the host backend through the graph
API with engines 0-7 the way cudnn_frontend builds them, and their plans' workspace read. Nothing runs. Prints one
JSON line: how many plans were built and refused, and the largest workspace.
Usage: python -m tests.host.extreme_graph_probe SEED COUNT"""

from __future__ import annotations

import ctypes
import json
import random
import sys

from ucudnn import _paths
from ucudnn.graph_api import CONV_OPS, Backend, ConvGraph, GraphApiError


def problem(r: random.Random) -> tuple[str, list[int], list[int], list[int], int, int]:
    if r.random() < 0.3:  # any 64-bit sizes: refused, without overflowing on the way
        n, c, k = (r.choice([1, 64, 2**20, 2**31, 2**40]) for _ in range(3))
        h, pad, stride = r.choice([1, 32, 2**20, 2**31]), r.choice([0, 1, 2**30]), r.choice([1, 2**20])
        f = max(1, min(h + 2 * pad, r.choice([1, 3, h + 2 * pad])))
        p = (h + 2 * pad - f) // stride + 1
        return r.choice(list(CONV_OPS)), [n, c, h, h], [k, c, f, f], [n, k, p, p], pad, stride
    while True:
        n, c, k = r.choice([1, 3, 2**10, 2**20]), r.choice([1, 3, 64, 2**12]), r.choice([1, 64, 2**16])
        h, pad, stride = r.choice([1, 7, 32, 1024, 46340]), r.choice([0, 1, 2**10]), r.choice([1, 2, 2**10])
        f = max(1, min(h + 2 * pad, r.choice([1, 3, 2**10, h + 2 * pad])))
        p = (h + 2 * pad - f) // stride + 1
        if max(n * c * h * h, n * k * p * p, k * c * f * f) < 2**31:
            return r.choice(list(CONV_OPS)), [n, c, h, h], [k, c, f, f], [n, k, p, p], pad, stride


def main() -> None:
    lib = ctypes.CDLL(str(_paths.HOST_CUDNN))
    api, handle = Backend(lib), ctypes.c_void_p()
    assert lib.cudnnCreate(ctypes.byref(handle)) == 0
    r = random.Random(int(sys.argv[1]))
    built = refused = largest = 0
    for _ in range(int(sys.argv[2])):
        op, x, w, y, pad, stride = problem(r)
        for engine in range(8):
            try:
                graph = ConvGraph(api, handle.value or 0, op, x, w, y, [pad, pad], [stride, stride], engine)
            except GraphApiError:
                refused += 1
                continue
            built += 1
            largest = max(largest, graph.workspace_bytes)
            graph.close()
    print(json.dumps({"built": built, "refused": refused, "largest_workspace": largest}))


if __name__ == "__main__":
    main()
