"""Overhead of the preload path on a plan-cache hit, per call, against the direct call.

``python -m ucudnn.bench.preload_overhead [--rounds R] [--iters I] [--json]``

A small C program (compiled here with the system C compiler against the host backend) runs one tiny
convolution two ways in one process, side by side: through the exported symbol, which LD_PRELOAD binds to
``libucudnn.so`` (descriptor reads, one cache lookup, one micro-batch with prebuilt descriptors), and through a
pointer to the real function taken with ``dlopen(RTLD_NOLOAD)`` + ``ucudnn_dlsym_unhooked`` (no shim: a plain
``dlsym`` would give the hook). The program registers a
one-micro-batch plan with the same algorithm, so both paths do the same convolution. Rounds alternate the
order; the figure is the median over rounds of the per-call difference, in nanoseconds.
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

# Self-contained (an installed wheel has no headers): opaque pointers, and only the calls the program makes.
C_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef void *H;
typedef struct { int batch, algo, math_type; } mb_t;
typedef struct { int abi_version, op; const char *key, *backend_id; int batch; size_t limit; const char *policy;
                 int det, algo_count; void *ctx; } req_t;
typedef struct { int count, capacity; mb_t *mb; float time_ms; size_t ws; int det; } rep_t;
int cudnnCreate(H *); int cudnnCreateTensorDescriptor(H *); int cudnnCreateFilterDescriptor(H *);
int cudnnCreateConvolutionDescriptor(H *);
int cudnnSetTensorNdDescriptor(H, int, int, const int *, const int *);
int cudnnSetFilterNdDescriptor(H, int, int, int, const int *);
int cudnnSetConvolutionNdDescriptor(H, int, const int *, const int *, const int *, int, int);
int cudnnConvolutionForward(H, const void *, H, const void *, H, const void *, H, int, void *, size_t,
                            const void *, H, void *);
typedef int (*fwd_t)(H, const void *, H, const void *, H, const void *, H, int, void *, size_t, const void *, H,
                     void *);
static int planner(const req_t *q, rep_t *r) {
    r->mb[0].batch = q->batch; r->mb[0].algo = 0; r->mb[0].math_type = 0;
    r->count = 1; r->time_ms = 0.001f; r->ws = 0; r->det = 1; return 0;
}
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
int main(int argc, char **argv) {
    int rounds = atoi(argv[1]), iters = atoi(argv[2]);
    int (*set_planner)(void *) = (int (*)(void *))dlsym(RTLD_DEFAULT, "ucudnn_set_planner");
    if (!set_planner) { fprintf(stderr, "libucudnn.so is not preloaded\n"); return 2; }
    set_planner((void *)planner);
    /* The preload library interposes dlsym: a plain lookup on cuDNN's handle would give its hook. */
    void *(*unhooked)(void *, const char *) =
        (void *(*)(void *, const char *))dlsym(RTLD_DEFAULT, "ucudnn_dlsym_unhooked");
    void *cudnn = dlopen("libcudnn.so.9", RTLD_NOLOAD | RTLD_LAZY);
    fwd_t direct = (fwd_t)(unhooked ? unhooked(cudnn, "cudnnConvolutionForward")
                                    : dlsym(cudnn, "cudnnConvolutionForward"));
    H h, x, y, w, c;
    int dims[4] = {2, 1, 1, 1}, strides[4] = {1, 1, 1, 1}, one[2] = {1, 1}, zero[2] = {0, 0};
    int ok = !cudnnCreate(&h) && !cudnnCreateTensorDescriptor(&x) && !cudnnCreateTensorDescriptor(&y) &&
             !cudnnCreateFilterDescriptor(&w) && !cudnnCreateConvolutionDescriptor(&c) &&
             !cudnnSetTensorNdDescriptor(x, 0, 4, dims, strides) &&
             !cudnnSetTensorNdDescriptor(y, 0, 4, dims, strides) &&
             !cudnnSetFilterNdDescriptor(w, 0, 0, 4, (int[]){1, 1, 1, 1}) &&
             !cudnnSetConvolutionNdDescriptor(c, 2, zero, one, one, 1, 0);
    float xs[2] = {1, 2}, ws[1] = {3}, ys[2], alpha = 1, beta = 0;
    if (!ok || !direct) { fprintf(stderr, "setup failed\n"); return 2; }
    Dl_info d, shim;
    if (dladdr((void *)direct, &d) && dladdr((void *)set_planner, &shim) && d.dli_fbase == shim.dli_fbase) {
        fprintf(stderr, "the direct pointer is the preload library's hook\n");
        return 2;
    }
    for (int i = 0; i < 1000; i++) { /* plans, then warms both paths */
        if (cudnnConvolutionForward(h, &alpha, x, xs, w, ws, c, 0, NULL, 0, &beta, y, ys) ||
            direct(h, &alpha, x, xs, w, ws, c, 0, NULL, 0, &beta, y, ys)) {
            fprintf(stderr, "call failed\n");
            return 2;
        }
    }
    printf("[");
    for (int r = 0; r < rounds; r++) {
        double t[2];
        for (int k = 0; k < 2; k++) {
            int hooked = (k + r) % 2;
            double t0 = now();
            for (int i = 0; i < iters; i++) {
                if (hooked) cudnnConvolutionForward(h, &alpha, x, xs, w, ws, c, 0, NULL, 0, &beta, y, ys);
                else direct(h, &alpha, x, xs, w, ws, c, 0, NULL, 0, &beta, y, ys);
            }
            t[hooked] = (now() - t0) / iters;
        }
        printf("%s[%.2f,%.2f]", r ? "," : "", t[0], t[1]);
    }
    printf("]\n");
    return 0;
}
"""


def measure(rounds: int, iters: int) -> dict[str, object]:
    """Build and run the program; returns per-round (direct_ns, hooked_ns) and the medians."""
    host = _paths.require(_paths.HOST_CUDNN)
    preload = _paths.require(_paths.PRELOAD)
    with tempfile.TemporaryDirectory(prefix="ucudnn-overhead-") as tmp:
        link = (f"-L{host.parent}", "-l:libcudnn.so.9", f"-Wl,-rpath,{host.parent}", "-ldl")
        exe = compile_program("preload_overhead", C_SOURCE, Path(tmp), *link)
        env = {k: v for k, v in os.environ.items() if not k.startswith("UCUDNN_")}
        env["LD_PRELOAD"] = str(preload)
        # The host backend's BLAS threads are idle for this 1x1 convolution but would compete for cores.
        env["OPENBLAS_NUM_THREADS"] = "1"
        out = subprocess.run(
            [str(exe), str(rounds), str(iters)], env=env, check=True, capture_output=True, text=True
        ).stdout
    pairs: list[list[float]] = json.loads(out)
    direct = [p[0] for p in pairs]
    hooked = [p[1] for p in pairs]
    return {
        "rounds": rounds,
        "iters": iters,
        "direct_ns": statistics.median(direct),
        "hooked_ns": statistics.median(hooked),
        "overhead_ns": statistics.median(h - d for d, h in pairs),
        "per_round": pairs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--iters", type=int, default=20000)
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    args = parser.parse_args(argv)
    result = measure(args.rounds, args.iters)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"direct call  {result['direct_ns']:8.1f} ns")
        print(f"through shim {result['hooked_ns']:8.1f} ns")
        print(
            f"overhead     {result['overhead_ns']:8.1f} ns per call on a plan-cache hit "
            f"(median of {args.rounds} rounds x {args.iters} calls)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
