/*
 * Forward GEMM: im2col of the whole batch for one group at a time, then BLAS. Workspace grows linearly with N:
 * the column matrix [C/groups * taps x N * P*Q] elements, plus a [K/groups x P*Q] staging tile only when the
 * output's per-sample positions cannot be addressed as one BLAS matrix (unusual strides). The GEMM writes
 * alpha/beta straight into y: one call for the batch when (n, positions) share one stride (NHWC), one per
 * sample otherwise (NCHW). Rows of the column matrix follow the filter's memory order (NCHW or NHWC) so the
 * filter is used in place.
 * Template file: includes itself for float and double (see hb_kern_im2col.c).
 */
#ifndef HB_T
#include "hb_kern.h"

enum { FUSED = 0, PER_SAMPLE = 1, STAGED = 2 };

typedef struct {
    int order, mode;
    hb_gemm_call call;
    size_t col_bytes, total;
} plan;

static int make_plan(const hb_problem *p, plan *pl) {
    hb_geom G;
    hb_geom_init(&G, p);
    const size_t es = hb_elem_size(p);
    pl->order = hb_filter_order(p);
    if (pl->order == HB_ORDER_NONE) return 0;
    const int64_t ncol = G.n * G.pout;
    hb_mview a = {G.kg, G.crs, p->w.stride_k, 1};
    int64_t bss = hb_batch_spatial_stride(&p->y), ss = hb_spatial_stride(&p->y);
    pl->col_bytes = hb_align(hb_bytes(G.crs * ncol, es));
    pl->total = pl->col_bytes;
    if (bss) {
        hb_mview b = {G.crs, ncol, ncol, 1}, c = {G.kg, ncol, p->y.stride_c, bss};
        if (hb_gemm_plan(a, b, c, &pl->call)) {
            pl->mode = FUSED;
            return pl->total != SIZE_MAX;
        }
    }
    hb_mview b = {G.crs, G.pout, ncol, 1};
    if (ss) {
        hb_mview c = {G.kg, G.pout, p->y.stride_c, ss};
        if (hb_gemm_plan(a, b, c, &pl->call)) {
            pl->mode = PER_SAMPLE;
            return pl->total != SIZE_MAX;
        }
    }
    hb_mview c = {G.kg, G.pout, G.pout, 1};
    if (!hb_gemm_plan(a, b, c, &pl->call)) return 0;
    pl->mode = STAGED;
    pl->total = hb_add_bytes(pl->total, hb_bytes(G.kg * G.pout, es));
    return pl->total != SIZE_MAX;
}

#define HB_T float
#define HB_F(name) name##_f
#include "hb_fwd_gemm.c"
#undef HB_T
#undef HB_F
#define HB_T double
#define HB_F(name) name##_d
#include "hb_fwd_gemm.c"
#undef HB_T
#undef HB_F

static size_t workspace(const hb_problem *p) {
    plan pl;
    return make_plan(p, &pl) ? pl.total : SIZE_MAX;
}

static cudnnStatus_t run(const hb_problem *p, const void *x, const void *w, void *y, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    plan pl;
    if (!make_plan(p, &pl)) return CUDNN_STATUS_INTERNAL_ERROR;
    if (p->dtype == CUDNN_DATA_DOUBLE)
        fwd_gemm_d(p, &pl, x, w, y, alpha, beta, ws);
    else
        fwd_gemm_f(p, &pl, x, w, y, alpha, beta, ws);
    return CUDNN_STATUS_SUCCESS;
}

const hb_algo hb_fwd_gemm = {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "GEMM", 1, 20.0, workspace, run};

#else

static void HB_F(fwd_gemm)(const hb_problem *p, const plan *pl, const HB_T *x, const HB_T *w, HB_T *y, double alpha,
                           double beta, void *ws) {
    hb_geom G;
    hb_geom_init(&G, p);
    HB_T *col = ws;
    HB_T *stage = (HB_T *)((char *)ws + pl->col_bytes);
    const int64_t ncol = G.n * G.pout;
    const HB_T a = (HB_T)alpha, b = (HB_T)beta;
    for (int64_t g = 0; g < G.groups; g++) {
        HB_F(hb_im2col)(p, x, g, 0, G.n, pl->order, col, ncol);
        const HB_T *wg = w + g * G.kg * p->w.stride_k;
        HB_T *yg = y + g * G.kg * p->y.stride_c;
        if (pl->mode == FUSED) {
            HB_F(hb_gemm_run)(&pl->call, a, wg, col, b, yg);
            continue;
        }
        for (int64_t n = 0; n < G.n; n++) {
            HB_T *yn = yg + n * p->y.stride_n;
            if (pl->mode == PER_SAMPLE) {
                HB_F(hb_gemm_run)(&pl->call, a, wg, col + n * G.pout, b, yn);
                continue;
            }
            HB_F(hb_gemm_run)(&pl->call, 1, wg, col + n * G.pout, 0, stage);
            for (int64_t kk = 0; kk < G.kg; kk++)
                for (int64_t pos = 0; pos < G.pout; pos++) {
                    int64_t od = pos / (G.out[1] * G.out[2]), oh = (pos / G.out[2]) % G.out[1], ow = pos % G.out[2];
                    HB_T *dst = yn + kk * p->y.stride_c + od * p->y.stride_sp[0] + oh * p->y.stride_sp[1] +
                                ow * p->y.stride_sp[2];
                    HB_T v = a * stage[kk * G.pout + pos];
                    *dst = beta == 0.0 ? v : v + b * *dst;
                }
        }
    }
}

#endif
