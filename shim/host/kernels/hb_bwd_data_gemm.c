/*
 * BackwardData ALGO_1: GEMM + col2im. For each group, col = W_g^T * dY_g ([C/groups * taps x N * P*Q], the
 * workspace, grows linearly with N) in one BLAS call when dy's (n, positions) share one stride (NHWC), one per
 * sample otherwise, with a [K/groups x P*Q] staging copy of dy only for strides BLAS cannot read; then
 * col2im scatters col into dx (pre-scaled by beta). Deterministic.
 * 16-bit data: the group's filter is converted into a float copy, dy always goes through the float staging copy,
 * and col2im scatters into a float [N x C/groups x positions] buffer that is then blended into dx (rounded once);
 * all are in the workspace. Template file: instantiated per storage type by hb_kern_tmpl.h.
 */
#ifndef HB_T
#include "hb_kern.h"

typedef hb_gemm_y_plan plan;

static int make_plan(const hb_problem *p, plan *pl) { return hb_gemm_y_plan_make(p, 0, pl); }

#define HB_TMPL_FILE "hb_bwd_data_gemm.c"
#include "hb_kern_tmpl.h"

HB_PLANNED_ALGO(bwd_data_gemm)

const hb_algo hb_bwd_data_algo1 = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, "ALGO_1", 1, 20.0, workspace, run, NULL};

#else

static void HB_F(bwd_data_gemm)(const hb_problem *p, const plan *pl, const HB_S *w, const HB_S *dy, HB_S *dx,
                                double alpha, double beta, void *ws) {
    hb_geom G;
    hb_geom_init(&G, p);
    HB_T *col = ws;
    HB_T *stage = (HB_T *)((char *)ws + pl->stage);
    const int64_t ncol = G.n * G.pout;
    const HB_T a = (HB_T)alpha;
#if HB_NATIVE
    HB_F(hb_scale_tensor)(&p->x, dx, beta);
#else
    /* The float dx buffer of one group: packed [N x C/groups x positions], what col2im sees as the tensor. */
    HB_T *dxf = (HB_T *)((char *)ws + pl->dxf);
    hb_problem q = *p;
    q.x.stride_sp[2] = 1;
    q.x.stride_sp[1] = q.x.sp[2];
    q.x.stride_sp[0] = q.x.sp[1] * q.x.sp[2];
    q.x.stride_c = G.pin;
    q.x.stride_n = G.cg * G.pin;
#endif
    for (int64_t g = 0; g < G.groups; g++) {
        const HB_S *dyg = dy + g * G.kg * p->y.stride_c;
#if HB_NATIVE
        const HB_T *wg = w + g * G.kg * p->w.stride_k;
        if (pl->mode == HB_Y_FUSED) {
            HB_FC(hb_gemm_run)(&pl->call, a, wg, dyg, 0, col);
        } else
#else
        HB_T *wg = (HB_T *)((char *)ws + pl->wconv);
        HB_F(hb_filter_load)(w + g * G.kg * p->w.stride_k, p->w.stride_k, G.kg, G.crs, wg);
#endif
        {
            for (int64_t n = 0; n < G.n; n++) {
                const HB_S *dyn = dyg + n * p->y.stride_n;
#if HB_NATIVE
                const HB_T *src = dyn;
#else
                const HB_T *src = stage; /* always staged: mode is HB_Y_STAGED for 16-bit data */
#endif
                if (pl->mode == HB_Y_STAGED) {
                    for (int64_t kk = 0; kk < G.kg; kk++)
                        for (int64_t pos = 0; pos < G.pout; pos++) {
                            int64_t od = pos / (G.out[1] * G.out[2]), oh = (pos / G.out[2]) % G.out[1],
                                    ow = pos % G.out[2];
                            stage[kk * G.pout + pos] = HB_LD(dyn[kk * p->y.stride_c + od * p->y.stride_sp[0] +
                                                                 oh * p->y.stride_sp[1] + ow * p->y.stride_sp[2]]);
                        }
                    src = stage;
                }
                HB_FC(hb_gemm_run)(&pl->call, a, wg, src, 0, col + n * G.pout);
            }
        }
#if HB_NATIVE
        HB_F(hb_col2im)(p, col, g, 0, G.n, pl->order, dx, ncol);
#else
        for (int64_t i = 0; i < G.n * G.cg * G.pin; i++) dxf[i] = 0;
        HB_FC(hb_col2im)(&q, col, 0, 0, G.n, pl->order, dxf, ncol);
        HB_F(hb_tensor_store)(dxf, &p->x, g * G.cg, G.cg, dx, beta);
#endif
    }
}

#endif
