"""Plain convolution calls through the preload library, as a program makes them without asking for an algorithm
list: each op's algorithm 0 with a 16 MiB workspace, once overwriting its output (beta = 0) and once accumulating
onto it (beta = 1, at another N so that it is planned anew). ucudnn plans at the first call; every call's output is
compared with the same call on cuDNN itself. Prints one JSON line per op and beta.

    python -m tests.bench.plain_call_probe --backend host|cuda

With ``--capture`` a forward kernel is planned and run, then both it and a new kernel run inside captures of the
handle's stream (on a GPU each call is captured into a CUDA graph with CuPy, which is then launched; on the host
backend UCUDNN_HOST_STREAM_CAPTURE stands in for the capture), then the new one after them: one JSON line per
phase.

Run in a process of its own (it loads cuDNN and the preload library), with UCUDNN_DATABASE set.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from ucudnn import bridge
from ucudnn.bench.backends import Backend, open_backend
from ucudnn.bench.capi import Descriptors
from ucudnn.bench.problems import Problem
from ucudnn.cudnn import Op

WORKSPACE = 16 << 20
CALLS = 4
PRIOR = 0.25  # the output's contents before each call: what beta = 1 accumulates onto


COUNTERS = ("call_buffer_benchmarks", "planned", "passthrough", "micro_batches", "verify_executions",
            "capture_deferred_plans")  # fmt: skip


def captured(b: Backend, call: Callable[[], None]) -> None:
    """``call`` inside a capture of the handle's stream: on a GPU into a CUDA graph, launched once the capture
    ends; on the host backend under its stand-in for a capture."""
    if b.name == "cuda":
        stream = b.stream  # type: ignore[attr-defined]
        stream.begin_capture()
        try:
            call()
        finally:
            graph = stream.end_capture()
        graph.launch(stream=stream)
        b.synchronize()
        return
    bridge.set_option("UCUDNN_HOST_STREAM_CAPTURE", "1")
    try:
        call()
    finally:
        bridge.set_option("UCUDNN_HOST_STREAM_CAPTURE", "0")


def run_calls(
    b: Backend, op_name: str, n: int, beta: float, calls: int = CALLS, capture: bool = False, **extra: Any
) -> None:
    """``calls`` plain calls of ``op_name``'s algorithm 0 at N = n through the preload library (each in a capture
    of its own with ``capture``), each compared with the same call on cuDNN itself: one JSON line with the worst
    relative error and what the counters did."""
    p = Problem("plain", w=28, h=28, c=64, n=n, k=64, filter_w=3, filter_h=3, pad_w=1, pad_h=1, stride_w=1,
                stride_h=1)  # fmt: skip
    d = Descriptors.make(b.real, p)
    try:
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
        for _ in range(calls):
            b.fill(out, PRIOR)
            if capture:
                captured(b, through)
            else:
                b.issue(through, 1)
            err, scale = b.compare(out, ref)
            worst = max(worst, err / max(scale, 1e-30))
        after = bridge.stats()
        row = {"op": op_name, "beta": beta, "n": n, "rel_err": worst, "tolerance": b.default_tolerance, **extra}
        row |= {k: after[k] - before[k] for k in COUNTERS}
        print(json.dumps(row), flush=True)
    finally:
        d.close()
        b.release()


def probe(backend: str) -> int:
    b = open_backend(backend)
    try:
        for op_name in ("fwd", "bwd-data", "bwd-filter"):
            for beta, n in ((0.0, 16), (1.0, 8)):
                run_calls(b, op_name, n, beta)
    finally:
        b.close()
    return 0


def probe_capture(backend: str) -> int:
    b = open_backend(backend)
    try:
        # The check of a new divided plan takes 2 * (UCUDNN_VERIFY_SAMPLES + 1) executions: 8 at the default.
        run_calls(b, "fwd", 16, 0.0, calls=12, phase="before")
        run_calls(b, "fwd", 16, 0.0, capture=True, phase="planned, captured")
        run_calls(b, "fwd", 8, 0.0, capture=True, phase="new, captured")
        run_calls(b, "fwd", 8, 0.0, phase="new, after")
    finally:
        b.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.plain_call_probe")
    ap.add_argument("--backend", choices=("host", "cuda"), required=True)
    ap.add_argument("--capture", action="store_true", help="the capture scenario")
    args = ap.parse_args(argv)
    return probe_capture(args.backend) if args.capture else probe(args.backend)


if __name__ == "__main__":
    sys.exit(main())
