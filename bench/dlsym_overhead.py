"""Cost of the preload library's dlsym, per lookup, against glibc's alone.

``python -m ucudnn.bench.dlsym_overhead [--runs R] [--iters I] [--json]``

Frameworks that dlopen cuDNN look each of its functions up once, but ``dlsym`` is called a lot by everything in a
process (Python's import machinery, CUDA), and under the preload library every call goes through its interposer.
A small C program (compiled here with the system C compiler) dlopens the host backend RTLD_LOCAL and times
``iters`` lookups of each kind: a hooked name on cuDNN's handle (answered with the hook under the preload
library), an unhooked cuDNN name on it, a name on libc's handle, and an ``RTLD_DEFAULT`` lookup. The program runs
``runs`` times alone and ``runs`` times under ``LD_PRELOAD=libucudnn.so``, alternately; alone and preloaded are the
medians over runs of ns per lookup, the difference the median of the paired runs' differences (with their range:
on shared cores single runs move by tens of ns).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from ucudnn import _paths
from ucudnn.bench._cprogram import compile_program

C_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static double per_lookup(void *handle, const char *name, int iters) {
    volatile void *sink = NULL;
    for (int i = 0; i < 1000; i++) sink = dlsym(handle, name); /* warm */
    double t0 = now();
    for (int i = 0; i < iters; i++) sink = dlsym(handle, name);
    double ns = (now() - t0) / iters;
    if (!sink) { fprintf(stderr, "dlsym_overhead: %s not found\n", name); exit(2); }
    return ns;
}
int main(int argc, char **argv) {
    int iters = atoi(argv[2]);
    void *cudnn = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL), *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!cudnn || !libc) { fprintf(stderr, "dlsym_overhead: %s\n", dlerror()); return 2; }
    /* Whether the hooked lookup is answered by the preload library (the object exporting ucudnn_version). */
    Dl_info hook, shim;
    void *version = dlsym(RTLD_DEFAULT, "ucudnn_version");
    int hooked = version && dladdr(dlsym(cudnn, "cudnnConvolutionForward"), &hook) && dladdr(version, &shim) &&
                 hook.dli_fbase == shim.dli_fbase;
    printf("[%.2f,%.2f,%.2f,%.2f,%d]\n", per_lookup(cudnn, "cudnnConvolutionForward", iters),
           per_lookup(cudnn, "cudnnCreate", iters), per_lookup(libc, "malloc", iters),
           per_lookup(RTLD_DEFAULT, "malloc", iters), hooked);
    return 0;
}
"""
KINDS = (
    "cudnnConvolutionForward on cuDNN's handle (hooked)",
    "cudnnCreate on cuDNN's handle (not hooked)",
    "malloc on libc's handle",
    "malloc through RTLD_DEFAULT",
)


def measure(runs: int, iters: int) -> dict[str, object]:
    """Build and run the program; returns per kind the ns per lookup alone and preloaded (medians, and every run)."""
    host = _paths.require(_paths.HOST_CUDNN)
    preload = _paths.require(_paths.PRELOAD)
    env = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_") and k != "LD_PRELOAD"}
    samples: dict[str, list[list[float]]] = {"alone": [], "preloaded": []}
    with tempfile.TemporaryDirectory(prefix="ucudnn-dlsym-") as tmp:
        exe = compile_program("dlsym_overhead", C_SOURCE, Path(tmp), "-ldl")
        for _ in range(runs):
            for side in ("alone", "preloaded"):
                run_env = dict(env, LD_PRELOAD=str(preload)) if side == "preloaded" else env
                out = subprocess.run([str(exe), str(host), str(iters)], env=run_env, check=True,
                                     capture_output=True, text=True).stdout  # fmt: skip
                figures = json.loads(out)
                if figures.pop() != (side == "preloaded"):
                    raise RuntimeError(f"dlsym_overhead: the hooked lookup was {'not ' * (side == 'preloaded')}"
                                       f"answered by the preload library in a run {side}")  # fmt: skip
                samples[side].append(figures)
    result: dict[str, object] = {"runs": runs, "iters": iters}
    for i, kind in enumerate(KINDS):
        pairs = [[a[i], p[i]] for a, p in zip(samples["alone"], samples["preloaded"], strict=True)]
        differences = [p - a for a, p in pairs]
        result[kind] = {
            "alone_ns": statistics.median(a for a, _ in pairs),
            "preloaded_ns": statistics.median(p for _, p in pairs),
            "difference_ns": statistics.median(differences),
            "difference_range_ns": [min(differences), max(differences)],
            "per_run": pairs,
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=11, help="processes on each side (default 11)")
    parser.add_argument("--iters", type=int, default=200_000, help="lookups per figure in a process")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.iters < 1:
        parser.error("--runs and --iters must be at least 1")
    result = measure(args.runs, args.iters)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"ns per dlsym lookup, median of {args.runs} processes each side, {args.iters} lookups per figure")
    print(f"{'lookup':52} {'alone':>7} {'preloaded':>10} {'difference':>11}  range of runs")
    for kind in KINDS:
        row = result[kind]
        assert isinstance(row, dict)
        low, high = row["difference_range_ns"]
        print(f"{kind:52} {row['alone_ns']:7.1f} {row['preloaded_ns']:10.1f} {row['difference_ns']:+11.1f}"
              f"  {low:+.1f} .. {high:+.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
