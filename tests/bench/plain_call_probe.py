"""Plain convolution calls through the preload library, as a program makes them without asking for an algorithm
list: each op's algorithm 0 with a 16 MiB workspace, once overwriting its output (beta = 0) and once accumulating
onto it (beta = 1, at another N so that it is planned anew). ucudnn plans at the first call; every call's output is
compared with the same call on cuDNN itself. Prints one JSON line per op and beta.

    python -m tests.bench.plain_call_probe --backend host|cuda

Run in a process of its own (it loads cuDNN and the preload library), with UCUDNN_DATABASE set.
"""

from __future__ import annotations

import argparse
import json
import sys

from ucudnn import bridge
from ucudnn.bench.backends import open_backend
from ucudnn.bench.capi import Descriptors
from ucudnn.bench.problems import Problem
from ucudnn.cudnn import Op

WORKSPACE = 16 << 20
CALLS = 4
PRIOR = 0.25  # the output's contents before each call: what beta = 1 accumulates onto


def probe(backend: str) -> int:
    b = open_backend(backend)
    try:
        for op_name in ("fwd", "bwd-data", "bwd-filter"):
            for beta, n in ((0.0, 16), (1.0, 8)):
                p = Problem("plain", w=28, h=28, c=64, n=n, k=64, filter_w=3, filter_h=3, pad_w=1, pad_h=1,
                            stride_w=1, stride_h=1)  # fmt: skip
                d = Descriptors.make(b.real, p)
                op = Op.parse(op_name)
                s0, s1, s2 = d.operand_shapes(op)
                in0, in1, out = b.random(s0, 1), b.random(s1, 2), b.filled(s2, PRIOR)
                ws = b.workspace(WORKSPACE)
                data = op.roles(b.ptr(in0), b.ptr(in1), b.ptr(out))
                alone = b.real.executor(b.handle, op, *d.args(), 0, data, ws, WORKSPACE, beta=beta)
                through = b.hooked.executor(b.handle, op, *d.args(), 0, data, ws, WORKSPACE, beta=beta)
                b.issue(alone, 1)
                ref = b.snapshot(out)
                before = bridge.stats()
                worst = 0.0
                for _ in range(CALLS):
                    b.fill(out, PRIOR)
                    b.issue(through, 1)
                    err, scale = b.compare(out, ref)
                    worst = max(worst, err / max(scale, 1e-30))
                after = bridge.stats()
                print(json.dumps({
                    "op": op_name, "beta": beta, "n": n, "rel_err": worst, "tolerance": b.default_tolerance,
                    "call_buffer_benchmarks": after["call_buffer_benchmarks"] - before["call_buffer_benchmarks"],
                    "planned": after["planned"] - before["planned"],
                }), flush=True)  # fmt: skip
                d.close()
                b.release()
    finally:
        b.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.plain_call_probe")
    ap.add_argument("--backend", choices=("host", "cuda"), required=True)
    return probe(ap.parse_args(argv).backend)


if __name__ == "__main__":
    sys.exit(main())
