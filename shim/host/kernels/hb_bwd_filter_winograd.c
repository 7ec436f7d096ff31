/*
 * BackwardFilter WINOGRAD_NONFUSED: the gradient of the forward Winograd F(2x2, 3x3) with respect to its filter,
 * from the same transforms of the whole batch (the workspace grows with N, as the forward's); 2-D 3x3, stride 1,
 * no dilation only (SIZE_MAX otherwise). Deterministic: fixed-order sums. See hb_kern_winograd.c.
 */
#include "hb_kern.h"

static size_t workspace(const hb_problem *p) { return hb_wino_problem_workspace(p, 0); }

static cudnnStatus_t run(const hb_problem *p, const void *x, const void *dy, void *dw, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    return hb_wino_grad_problem_run(p, x, dy, dw, alpha, beta, ws);
}

const hb_algo hb_bwd_filter_winograd_nonfused = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
                                                 "WINOGRAD_NONFUSED", 1, 25.0, workspace, run, NULL};
