/*
 * Forward WINOGRAD_NONFUSED: F(2x2, 3x3) with the whole batch's transforms in the workspace (grows with N);
 * 2-D, 3x3, stride 1, no dilation only (SIZE_MAX otherwise). See hb_kern_winograd.c.
 */
#include "hb_kern.h"

static size_t workspace(const hb_problem *p) { return hb_wino_problem_workspace(p, 0); }

static cudnnStatus_t run(const hb_problem *p, const void *x, const void *w, void *y, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    return hb_wino_problem_run(p, 0, x, w, y, alpha, beta, ws);
}

const hb_algo hb_fwd_winograd_nonfused = {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED", 1, 25.0,
                                          workspace, run, NULL};
