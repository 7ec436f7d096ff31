/*
 * Forward GEMM: im2col of the whole batch for one group at a time, then BLAS. Workspace grows linearly with N:
 * the column matrix [C/groups * taps x N * P*Q] elements, plus a [K/groups x P*Q] staging tile only when the
 * output's per-sample positions cannot be addressed as one BLAS matrix (unusual strides). The GEMM writes
 * alpha/beta straight into y: one call for the batch when (n, positions) share one stride (NHWC), one per
 * sample otherwise (NCHW). Rows of the column matrix follow the filter's memory order (NCHW or NHWC) so the
 * filter is used in place.
 * 16-bit data: the column matrix is float (converted by im2col), the group's filter is converted into a float
 * [K/groups x C/groups * taps] copy and the output always goes through the float staging tile (rounded once);
 * all three are in the workspace.
 * Template file: instantiated per storage type by hb_kern_tmpl.h.
 */
#ifndef HB_T
#include "hb_kern.h"

typedef hb_gemm_y_plan plan;

static int make_plan(const hb_problem *p, plan *pl) { return hb_gemm_y_plan_make(p, 1, pl); }

#define HB_TMPL_FILE "hb_fwd_gemm.c"
#include "hb_kern_tmpl.h"

HB_PLANNED_ALGO(fwd_gemm)

const hb_algo hb_fwd_gemm = {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "GEMM", 1, 20.0, workspace, run, NULL};

#else

static void HB_F(fwd_gemm)(const hb_problem *p, const plan *pl, const HB_S *x, const HB_S *w, HB_S *y, double alpha,
                           double beta, void *ws) {
    hb_geom G;
    hb_geom_init(&G, p);
    HB_T *col = ws;
    HB_T *stage = (HB_T *)((char *)ws + pl->stage);
    const int64_t ncol = G.n * G.pout;
    const HB_T a = (HB_T)alpha, b = (HB_T)beta;
    for (int64_t g = 0; g < G.groups; g++) {
        HB_F(hb_im2col)(p, x, g, 0, G.n, pl->order, col, ncol);
        HB_S *yg = y + g * G.kg * p->y.stride_c;
#if HB_NATIVE
        const HB_T *wg = w + g * G.kg * p->w.stride_k;
        if (pl->mode == HB_Y_FUSED) {
            HB_FC(hb_gemm_run)(&pl->call, a, wg, col, b, yg);
            continue;
        }
#else
        HB_T *wg = (HB_T *)((char *)ws + pl->wconv);
        HB_F(hb_filter_load)(w + g * G.kg * p->w.stride_k, p->w.stride_k, G.kg, G.crs, wg);
#endif
        for (int64_t n = 0; n < G.n; n++) {
            HB_S *yn = yg + n * p->y.stride_n;
#if HB_NATIVE
            if (pl->mode == HB_Y_PER_SAMPLE) {
                HB_FC(hb_gemm_run)(&pl->call, a, wg, col + n * G.pout, b, yn);
                continue;
            }
#endif
            HB_FC(hb_gemm_run)(&pl->call, 1, wg, col + n * G.pout, 0, stage);
            for (int64_t kk = 0; kk < G.kg; kk++)
                for (int64_t pos = 0; pos < G.pout; pos++) {
                    int64_t od = pos / (G.out[1] * G.out[2]), oh = (pos / G.out[2]) % G.out[1], ow = pos % G.out[2];
                    HB_S *dst = yn + kk * p->y.stride_c + od * p->y.stride_sp[0] + oh * p->y.stride_sp[1] +
                                ow * p->y.stride_sp[2];
                    HB_T v = a * stage[kk * G.pout + pos];
                    *dst = HB_ST(beta == 0.0 ? v : v + b * HB_LD(*dst));
                }
        }
    }
}

#endif
