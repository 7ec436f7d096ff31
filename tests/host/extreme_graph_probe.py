"""Run by test_extreme_values.py: random convolution graphs as large as a tensor may be (each operand below 2**31
elements, the workspace far beyond), and some with any 64-bit sizes, built on the host backend through the graph
API with engines 0-7 the way cudnn_frontend builds them, and their plans' workspace read; the INSTANT heuristics of
each graph rank every engine that takes it by its modelled time. Nothing runs. Prints one JSON line: how many plans
were built and refused, the largest workspace, and how many engines the heuristics ranked.
Usage: python -m tests.host.extreme_graph_probe SEED COUNT"""

from __future__ import annotations

import ctypes
import json
import random
import sys

from ucudnn import _paths
from ucudnn.graph_api import (
    A_HEUR_GRAPH,
    A_HEUR_MODE,
    A_HEUR_RESULTS,
    CONV_OPS,
    ENGINEHEUR,
    HEUR_INSTANT,
    T_DESC,
    T_HEUR_MODE,
    Backend,
    ConvGraph,
    GraphApiError,
    conv_graph,
)

# The largest square images a tensor may hold (below 2**31 elements), with filters FFT_TILING takes (stride 1,
# pad < filter, up to 32): tiled by the million, for each op, before the random ones.
EDGES = [
    (op, [1, 1, h, h], [1, 1, f, f], [1, 1, h + 2 * pad - f + 1, h + 2 * pad - f + 1], pad, 1)
    for op in CONV_OPS
    for h, f, pad in ((46340, 3, 1), (46300, 32, 15), (46340, 17, 0))
]


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


def ranked(
    lib: ctypes.CDLL, handle: int, op: str, x: list[int], w: list[int], y: list[int], pad: int, stride: int
) -> int:
    """How many engines the INSTANT heuristics rank for the graph (0 where the graph is refused)."""
    b = Backend(lib)
    try:
        graph = conv_graph(b, handle, op, x, w, y, [pad, pad], [stride, stride])
        heur = b.create(ENGINEHEUR)
        assert b.set_desc(heur, A_HEUR_GRAPH, graph) == 0
        assert b.set(heur, A_HEUR_MODE, T_HEUR_MODE, 1, ctypes.byref(ctypes.c_int(HEUR_INSTANT))) == 0
        assert b.finalize(heur) == 0
        st, n = b.get(heur, A_HEUR_RESULTS, T_DESC, 0, None)
        assert st == 0
        return int(n)
    except GraphApiError:  # the graph refused
        return 0
    finally:
        b.destroy_all()


def main() -> None:
    lib = ctypes.CDLL(str(_paths.HOST_CUDNN))
    api, handle = Backend(lib), ctypes.c_void_p()
    assert lib.cudnnCreate(ctypes.byref(handle)) == 0
    r = random.Random(int(sys.argv[1]))
    built = refused = largest = engines_ranked = 0
    for case in [*EDGES, *(problem(r) for _ in range(int(sys.argv[2])))]:
        op, x, w, y, pad, stride = case
        engines_ranked += ranked(lib, handle.value or 0, op, x, w, y, pad, stride)
        for engine in range(8):
            try:
                graph = ConvGraph(api, handle.value or 0, op, x, w, y, [pad, pad], [stride, stride], engine)
            except GraphApiError:
                refused += 1
                continue
            built += 1
            largest = max(largest, graph.workspace_bytes)
            graph.close()
    print(json.dumps({"built": built, "refused": refused, "largest_workspace": largest, "ranked": engines_ranked}))


if __name__ == "__main__":
    main()
