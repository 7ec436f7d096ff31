/*
 * Forward WINOGRAD_NONFUSED: F(2x2, 3x3) with the whole batch's transforms in the workspace (grows with N);
 * 2-D, 3x3, stride 1, no dilation only (SIZE_MAX otherwise). See hb_kern_winograd.c.
 */
#include "hb_kern.h"

static hb_wino wino_of(const hb_problem *p) {
    hb_wino wp = {
        .n = p->x.n, .groups = p->groups, .cin = p->w.c, .cout = p->w.k / p->groups,
        .h = p->x.sp[1], .w = p->x.sp[2], .p = p->y.sp[1], .q = p->y.sp[2],
        .pad_h = p->pad[1], .pad_w = p->pad[2],
        .xs_n = p->x.stride_n, .xs_c = p->x.stride_c, .xs_h = p->x.stride_sp[1], .xs_w = p->x.stride_sp[2],
        .ys_n = p->y.stride_n, .ys_c = p->y.stride_c, .ys_h = p->y.stride_sp[1], .ys_w = p->y.stride_sp[2],
        .f_group = (p->w.k / p->groups) * p->w.stride_k, .f_out = p->w.stride_k, .f_in = p->w.stride_c,
        .f_r = p->w.stride_sp[1], .f_s = p->w.stride_sp[2],
        .flip = !p->cross_correlation,
    };
    return wp;
}

static size_t workspace(const hb_problem *p) {
    if (!hb_wino_shape_ok(p)) return SIZE_MAX;
    hb_wino wp = wino_of(p);
    return hb_wino_workspace(&wp, hb_elem_size(p));
}

static cudnnStatus_t run(const hb_problem *p, const void *x, const void *w, void *y, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    hb_wino wp = wino_of(p);
    HB_DISPATCH(p->dtype, hb_wino_run, &wp, x, w, y, alpha, beta, ws);
    return CUDNN_STATUS_SUCCESS;
}

const hb_algo hb_fwd_winograd_nonfused = {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED", 1, 25.0,
                                          workspace, run};
