/*
 * BackwardData WINOGRAD_NONFUSED: for stride 1 and no dilation, dx is the forward convolution of dy with the
 * filter transposed (K <-> C within each group), rotated by 180 degrees and with padding 2 - pad, so the forward
 * Winograd F(2x2, 3x3) core does it. Workspace grows with N (the batch's transforms); 2-D 3x3 only.
 */
#include "hb_kern.h"

static size_t workspace(const hb_problem *p) { return hb_wino_problem_workspace(p, 1); }

static cudnnStatus_t run(const hb_problem *p, const void *w, const void *dy, void *dx, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    return hb_wino_problem_run(p, 1, dy, w, dx, alpha, beta, ws);
}

const hb_algo hb_bwd_data_winograd_nonfused = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED",
                                               1, 25.0, workspace, run, NULL};
