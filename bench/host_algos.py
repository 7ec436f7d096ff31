"""The host backend's algorithm trade-off, measured: time and workspace of every algorithm of every op.

Run ``python -m ucudnn.bench.host_algos`` (after building the host backend). For a few real layers at several
batch sizes it prints, per op, each algorithm's median wall time over repeats and its workspace, through the
cuDNN API of ``ucudnn/_lib/libcudnn.so.9`` (``ucudnn.cudnn``). The point of the figure: the fast algorithms
need a workspace that grows with N, the zero-workspace ones are much slower -- what makes micro-batching pay.
This is a figure, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ucudnn import cudnn as C
from ucudnn.plan_text import algo_name


@dataclass(frozen=True)
class Layer:
    """A 2-D convolution layer (input H x W, W = H unless given; filter R = S), no groups, stride 1."""

    name: str
    c: int
    hw: int
    k: int
    f: int
    pad: int
    width: int = 0

    @property
    def w(self) -> int:
        return self.width or self.hw


LAYERS: tuple[Layer, ...] = (
    Layer("alexnet-conv2 27x27x96->256 5x5 p2", 96, 27, 256, 5, 2),
    Layer("resnet 56x56x64->64 3x3 p1", 64, 56, 64, 3, 1),
    Layer("resnet 56x56x256->64 1x1", 256, 56, 64, 1, 0),
    Layer("resnet 14x14x256->256 3x3 p1", 256, 14, 256, 3, 1),
    # DeepBench training problems: VGG's conv2_1, and Speaker ID's first 3x3 layer, 350 wide (past ALGO_FFT's 256)
    Layer("vgg conv2_1 112x112x64->128 3x3 p1", 64, 112, 128, 3, 1),
    Layer("speaker-id 80x350x64->64 3x3 p1", 64, 80, 64, 3, 1, width=350),
)
OP_NAMES = {C.Op.FWD: "fwd", C.Op.BWD_DATA: "bwd_data", C.Op.BWD_FILTER: "bwd_filter"}


@dataclass(frozen=True)
class Row:
    layer: str
    n: int
    op: C.Op
    algo: int
    workspace_bytes: int
    time_ms: float
    repeats: int


def _time_one(
    lib: C.Cudnn,
    handle: C.Handle,
    op: C.Op,
    algo: int,
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray],
    spec: C.ConvSpec,
    ws: np.ndarray,
) -> float:
    x, w, y = arrays
    t0 = time.perf_counter()
    if op == C.Op.FWD:
        lib.forward(handle, x, w, spec, algo, workspace=ws, y=y)
    elif op == C.Op.BWD_DATA:
        lib.backward_data(handle, w, y, spec, algo, x, workspace=ws)
    else:
        lib.backward_filter(handle, x, y, spec, algo, w, workspace=ws)
    return (time.perf_counter() - t0) * 1e3


def measure(
    lib: C.Cudnn,
    layer: Layer,
    n: int,
    op: C.Op,
    *,
    max_repeats: int,
    budget_s: float,
) -> list[Row]:
    """Every supported algorithm of ``op`` on ``layer`` at batch ``n``: median of 1 to ``max_repeats`` timed runs
    after a warm-up, fewer when the runs so far already took ``budget_s`` seconds (the slow direct loops)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, layer.c, layer.hw, layer.w)).astype(np.float32)
    w = rng.standard_normal((layer.k, layer.c, layer.f, layer.f)).astype(np.float32)
    spec = C.ConvSpec((layer.pad, layer.pad), (1, 1), (1, 1))
    out_h, out_w = (e + 2 * layer.pad - layer.f + 1 for e in (layer.hw, layer.w))
    y = rng.standard_normal((n, layer.k, out_h, out_w)).astype(np.float32)
    rows = []
    with lib.handle() as handle:
        for algo in range(C.ALGO_COUNT[op]):
            try:
                size = lib.workspace_size(handle, op, x, w, y, spec, algo)
            except C.CudnnError:
                continue  # not implemented, or not for this shape
            ws = np.empty(max(size, 1), np.uint8)
            # The warm-up run (first touch of the workspace and output pages) is never counted.
            spent = _time_one(lib, handle, op, algo, (x, w, y), spec, ws)
            times: list[float] = []
            while not times or (len(times) < max_repeats and spent < budget_s * 1e3):
                times.append(_time_one(lib, handle, op, algo, (x, w, y), spec, ws))
                spent += times[-1]
            rows.append(Row(layer.name, n, op, algo, size, statistics.median(times), len(times)))
    return rows


def format_rows(rows: Sequence[Row]) -> str:
    """One line per algorithm; a blank line between (layer, N, op) groups; '*' marks the fastest."""
    lines = [f"{'layer':<36} {'N':>3} {'op':<10} {'algo':<22} {'workspace MiB':>13} {'time ms':>10} {'reps':>4}"]
    groups: dict[tuple[str, int, C.Op], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.layer, r.n, r.op), []).append(r)
    for (layer, n, op), grp in groups.items():
        best = min(r.time_ms for r in grp)
        for r in sorted(grp, key=lambda r: r.workspace_bytes):
            mark = "*" if r.time_ms == best else " "
            lines.append(
                f"{layer:<36} {n:>3} {OP_NAMES[op]:<10} {algo_name(OP_NAMES[op], r.algo):<22} "
                f"{r.workspace_bytes / 2**20:>13.2f} {r.time_ms:>9.1f}{mark} {r.repeats:>4}"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ucudnn.bench.host_algos", description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32], help="batch sizes (default 1 8 32)")
    ap.add_argument("--layers", type=int, nargs="+", help="layer numbers, 0-based (default: all)")
    ap.add_argument("--repeats", type=int, default=5, help="at most this many timed runs per cell (default 5)")
    ap.add_argument("--budget", type=float, default=1.0, help="stop repeating after this many seconds (default 1)")
    ap.add_argument("--library", help="libcudnn.so.9 to measure (default: the built host backend)")
    ap.add_argument(
        "--blas-threads",
        type=int,
        help="OpenBLAS threads of the backend (sets OPENBLAS_NUM_THREADS before loading it; default: its own)",
    )
    args = ap.parse_args(argv)
    if args.blas_threads is not None:
        os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    lib = C.load(args.library)
    layers = [LAYERS[i] for i in args.layers] if args.layers else list(LAYERS)
    t0 = time.perf_counter()
    rows: list[Row] = []
    for layer in layers:
        for n in args.batch:
            for op in C.Op:
                rows += measure(lib, layer, n, op, max_repeats=args.repeats, budget_s=args.budget)
    print(format_rows(rows))
    print(
        f"float32, median wall time of 1 to {args.repeats} runs after one warm-up run, OpenBLAS threads "
        f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}; "
        f"total {time.perf_counter() - t0:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
