/*
 * BackwardData WINOGRAD_NONFUSED: for stride 1 and no dilation, dx is the forward convolution of dy with the
 * filter transposed (K <-> C within each group), rotated by 180 degrees and with padding 2 - pad, so the forward
 * Winograd F(2x2, 3x3) core does it. Workspace grows with N (the batch's transforms); 2-D 3x3 only.
 */
#include "hb_kern.h"

static hb_wino wino_of(const hb_problem *p) {
    int64_t kg = p->w.k / p->groups;
    hb_wino wp = {
        .n = p->x.n, .groups = p->groups, .cin = kg, .cout = p->w.c,
        .h = p->y.sp[1], .w = p->y.sp[2], .p = p->x.sp[1], .q = p->x.sp[2],
        .pad_h = 2 - p->pad[1], .pad_w = 2 - p->pad[2],
        .xs_n = p->y.stride_n, .xs_c = p->y.stride_c, .xs_h = p->y.stride_sp[1], .xs_w = p->y.stride_sp[2],
        .ys_n = p->x.stride_n, .ys_c = p->x.stride_c, .ys_h = p->x.stride_sp[1], .ys_w = p->x.stride_sp[2],
        .f_group = kg * p->w.stride_k, .f_out = p->w.stride_c, .f_in = p->w.stride_k,
        .f_r = p->w.stride_sp[1], .f_s = p->w.stride_sp[2],
        .flip = p->cross_correlation,
    };
    return wp;
}

static size_t workspace(const hb_problem *p) {
    if (!hb_wino_shape_ok(p)) return SIZE_MAX;
    hb_wino wp = wino_of(p);
    return hb_wino_workspace(&wp, hb_elem_size(p));
}

static cudnnStatus_t run(const hb_problem *p, const void *w, const void *dy, void *dx, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    hb_wino wp = wino_of(p);
    HB_DISPATCH(p->dtype, hb_wino_run, &wp, dy, w, dx, alpha, beta, ws);
    return CUDNN_STATUS_SUCCESS;
}

const hb_algo hb_bwd_data_winograd_nonfused = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED",
                                               1, 25.0, workspace, run};
