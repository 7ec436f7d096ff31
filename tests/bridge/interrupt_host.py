"""A Python program interrupted while ucudnn plans its first convolution: the interrupt must reach the program.

Usage: interrupt_host.py DATABASE HOW, HOW: ``sigint`` (Ctrl-C: SIGINT to the process) or ``exit`` (a signal handler
of the program's that raises SystemExit(5)). The interrupt arrives in the middle of planning: the preload library
is planning (its Get*_v7 call), one micro-batch size is benchmarked and stored, the next is being measured.
Prints one JSON line per stage; with ``sigint`` catches the KeyboardInterrupt at the cuDNN call and goes on, as a
program may, and plans the same kernel again.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from ucudnn import bridge
from ucudnn.bench.backends import HostBackend
from ucudnn.bench.capi import Descriptors
from ucudnn.bench.problems import Problem
from ucudnn.cudnn import Op
from ucudnn.optimizer import AlgoPerf


def main(database: str, how: str) -> int:
    os.environ["UCUDNN_DATABASE"] = database
    measure = bridge.benchmark
    sizes: list[int] = []

    def interrupted_benchmark(bench_ctx: Any, batch: int, capacity: int) -> list[AlgoPerf]:
        sizes.append(batch)
        if len(sizes) == 2:
            os.kill(os.getpid(), signal.SIGINT if how == "sigint" else signal.SIGUSR1)
        return measure(bench_ctx, batch, capacity)

    def exit_handler(signum: int, frame: object) -> None:
        raise SystemExit(5)

    signal.signal(signal.SIGUSR1, exit_handler)
    # Ctrl-C raises KeyboardInterrupt, as in a program started from a terminal. Python installs that handler only
    # where SIGINT was not ignored at its start, and a background job of a non-interactive shell (a CI runner's
    # `cmd &`) starts with SIGINT ignored: the signal would then do nothing at all, whatever ucudnn does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    bridge.benchmark = interrupted_benchmark
    b = HostBackend(host_timing="model")
    bridge.set_option("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "1MiB")
    problem = Problem("conv", w=16, h=16, c=32, n=32, k=32, filter_w=5, filter_h=5, pad_w=2, pad_h=2, stride_w=1,
                      stride_h=1)  # fmt: skip
    d = Descriptors.make(b.real, problem)
    try:
        b.hooked.get_v7(b.handle, Op.FWD, *d.args())
    except KeyboardInterrupt:
        print(json.dumps({"stage": "interrupted at the cuDNN call", "sizes": sizes}), flush=True)
    else:
        print(json.dumps({"stage": "not interrupted", "sizes": sizes}), flush=True)
        return 0
    sys.stdin.readline()  # the test looks at the cache now, then says go on
    perfs = b.hooked.get_v7(b.handle, Op.FWD, *d.args())
    stats = bridge.stats()
    print(json.dumps({"stage": "planned again", "memory": perfs[0].memory_bytes, "planner_errors":
                      stats["planner_errors"], "sizes": sizes}), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
