/*
 * BackwardFilter by im2col + GEMM, dW_g += dY_g * col^T, in two variants (both deterministic):
 *  ALGO_1: the whole batch at once. Workspace grows linearly with N: the column matrix
 *          [C/groups * taps x N * P*Q], plus a [K/groups x N * P*Q] copy of dy when its (n, positions) do not
 *          share one stride (NCHW), so that the whole reduction is one large BLAS call.
 *  ALGO_3: one sample at a time: a [C/groups * taps x P*Q] column matrix (independent of N), N smaller BLAS
 *          calls accumulating into dw, plus a [K/groups x P*Q] staging copy of dy only for unusual strides.
 * Rows of the column matrix follow the filter's memory order (NCHW or NHWC), so dw is written in place by BLAS
 * with the caller's beta on the first product and 1 on the rest.
 * 16-bit data: col is float (converted by im2col), dy always goes through the float staging copy, and the
 * products accumulate in a float [K/groups x C/groups * taps] buffer that is blended into dw once at the end
 * (one rounding); all are in the workspace. Template file: instantiated per storage type by hb_kern_tmpl.h.
 */
#ifndef HB_T
#include "hb_kern.h"

typedef struct {
    int order, staged;
    int64_t chunk;  /* samples per im2col */
    hb_gemm_call call;
    size_t col_bytes, stage, dwf, total; /* byte offsets of the staging copy and the 16-bit path's float dw */
} plan;

static int make_plan(const hb_problem *p, int whole_batch, plan *pl) {
    hb_geom G;
    hb_geom_init(&G, p);
    const size_t es = hb_elem_size(p);
    pl->order = hb_filter_order(p);
    if (pl->order == HB_ORDER_NONE) return 0;
    pl->chunk = whole_batch ? G.n : 1;
    const int64_t ncol = pl->chunk * G.pout;
    hb_mview b = {ncol, G.crs, 1, ncol}, c = {G.kg, G.crs, p->w.stride_k, 1};
    int64_t s = whole_batch ? hb_batch_spatial_stride(&p->y) : hb_spatial_stride(&p->y);
    pl->col_bytes = hb_align(hb_bytes(G.crs * ncol, es));
    pl->total = pl->col_bytes;
    pl->staged = 0;
    pl->stage = pl->dwf = pl->col_bytes;
    if (hb_is_16bit(p->dtype)) {
        hb_mview a = {G.kg, ncol, ncol, 1}, cf = {G.kg, G.crs, G.crs, 1};
        if (!hb_gemm_plan(a, b, cf, &pl->call)) return 0;
        pl->staged = 1;
        pl->dwf = hb_add_bytes(pl->stage, hb_align(hb_bytes(G.kg * ncol, es)));
        pl->total = hb_add_bytes(pl->dwf, hb_bytes(G.kg * G.crs, es));
        return pl->total != SIZE_MAX;
    }
    if (s) {
        hb_mview a = {G.kg, ncol, p->y.stride_c, s};
        if (hb_gemm_plan(a, b, c, &pl->call)) return pl->total != SIZE_MAX;
    }
    hb_mview a = {G.kg, ncol, ncol, 1};
    if (!hb_gemm_plan(a, b, c, &pl->call)) return 0;
    pl->staged = 1;
    pl->total = hb_add_bytes(pl->total, hb_bytes(G.kg * ncol, es));
    return pl->total != SIZE_MAX;
}

#define HB_TMPL_FILE "hb_bwd_filter_gemm.c"
#include "hb_kern_tmpl.h"

static size_t workspace1(const hb_problem *p) {
    plan pl;
    return make_plan(p, 1, &pl) ? pl.total : SIZE_MAX;
}

static size_t workspace3(const hb_problem *p) {
    plan pl;
    return make_plan(p, 0, &pl) ? pl.total : SIZE_MAX;
}

static cudnnStatus_t run_any(const hb_problem *p, int whole_batch, const void *x, const void *dy, void *dw,
                             double alpha, double beta, void *ws) {
    plan pl;
    if (!make_plan(p, whole_batch, &pl)) return CUDNN_STATUS_INTERNAL_ERROR;
    HB_DISPATCH(p->dtype, bwd_filter_gemm, p, &pl, x, dy, dw, alpha, beta, ws);
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t run1(const hb_problem *p, const void *x, const void *dy, void *dw, double alpha, double beta,
                          void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    return run_any(p, 1, x, dy, dw, alpha, beta, ws);
}

static cudnnStatus_t run3(const hb_problem *p, const void *x, const void *dy, void *dw, double alpha, double beta,
                          void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    return run_any(p, 0, x, dy, dw, alpha, beta, ws);
}

const hb_algo hb_bwd_filter_algo1 = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, "ALGO_1", 1, 20.0, workspace1, run1, NULL};
const hb_algo hb_bwd_filter_algo3 = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, "ALGO_3", 1, 15.0, workspace3, run3, NULL};

#else

static void HB_F(bwd_filter_gemm)(const hb_problem *p, const plan *pl, const HB_S *x, const HB_S *dy, HB_S *dw,
                                  double alpha, double beta, void *ws) {
    hb_geom G;
    hb_geom_init(&G, p);
    HB_T *col = ws;
    HB_T *stage = (HB_T *)((char *)ws + pl->stage);
    for (int64_t g = 0; g < G.groups; g++) {
#if HB_NATIVE
        HB_T *dwg = dw + g * G.kg * p->w.stride_k;
        const HB_T first_beta = (HB_T)beta;
#else
        HB_T *dwg = (HB_T *)((char *)ws + pl->dwf);
        const HB_T first_beta = 0; /* the caller's beta is applied when dw is written, below */
#endif
        for (int64_t n0 = 0; n0 < G.n; n0 += pl->chunk) {
            const int64_t nb = pl->chunk;
            HB_F(hb_im2col)(p, x, g, n0, nb, pl->order, col, nb * G.pout);
            const HB_S *dyg = dy + n0 * p->y.stride_n + g * G.kg * p->y.stride_c;
#if HB_NATIVE
            const HB_T *a = dyg;
#else
            const HB_T *a = stage; /* always staged for 16-bit data */
#endif
            if (pl->staged) {
                for (int64_t kk = 0; kk < G.kg; kk++)
                    for (int64_t nn = 0; nn < nb; nn++)
                        for (int64_t pos = 0; pos < G.pout; pos++) {
                            int64_t od = pos / (G.out[1] * G.out[2]), oh = (pos / G.out[2]) % G.out[1],
                                    ow = pos % G.out[2];
                            stage[(kk * nb + nn) * G.pout + pos] =
                                HB_LD(dyg[nn * p->y.stride_n + kk * p->y.stride_c + od * p->y.stride_sp[0] +
                                          oh * p->y.stride_sp[1] + ow * p->y.stride_sp[2]]);
                        }
                a = stage;
            }
            HB_FC(hb_gemm_run)(&pl->call, (HB_T)alpha, a, col, n0 == 0 ? first_beta : (HB_T)1, dwg);
        }
#if !HB_NATIVE
        HB_F(hb_filter_store)(dwg, G.kg, G.crs, dw + g * G.kg * p->w.stride_k, p->w.stride_k, beta);
#endif
    }
}

#endif
