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

typedef struct {
    int order, mode; /* mode: HB_Y_* */
    hb_gemm_call call;
    size_t col_bytes, wconv, stage, dxf, total; /* byte offsets of the 16-bit path's float buffers, total size */
} plan;

static int make_plan(const hb_problem *p, plan *pl) {
    hb_geom G;
    hb_geom_init(&G, p);
    const size_t es = hb_elem_size(p);
    const int half = hb_is_16bit(p->dtype);
    pl->order = hb_filter_order(p);
    if (pl->order == HB_ORDER_NONE) return 0;
    /* The filter transposed in place, or for 16-bit data its group's packed float copy. */
    hb_mview a = half ? (hb_mview){G.crs, G.kg, 1, G.crs} : (hb_mview){G.crs, G.kg, 1, p->w.stride_k};
    pl->mode = hb_gemm_plan_y(p, &G, a, 0, half, &pl->call);
    if (pl->mode < 0) return 0;
    pl->col_bytes = hb_align(hb_bytes(G.crs * G.n * G.pout, es));
    pl->wconv = pl->stage = pl->dxf = pl->total = pl->col_bytes;
    if (half) {
        pl->stage = hb_add_bytes(pl->wconv, hb_align(hb_bytes(G.kg * G.crs, es)));
        pl->dxf = hb_add_bytes(pl->stage, hb_align(hb_bytes(G.kg * G.pout, es)));
        pl->total = hb_add_bytes(pl->dxf, hb_bytes(G.n * G.cg * G.pin, es));
    } else if (pl->mode == HB_Y_STAGED) {
        pl->total = hb_add_bytes(pl->stage, hb_bytes(G.kg * G.pout, es));
    }
    return pl->total != SIZE_MAX;
}

#define HB_TMPL_FILE "hb_bwd_data_gemm.c"
#include "hb_kern_tmpl.h"

static size_t workspace(const hb_problem *p) {
    plan pl;
    return make_plan(p, &pl) ? pl.total : SIZE_MAX;
}

static cudnnStatus_t run(const hb_problem *p, const void *w, const void *dy, void *dx, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    plan pl;
    if (!make_plan(p, &pl)) return CUDNN_STATUS_INTERNAL_ERROR;
    HB_DISPATCH(p->dtype, bwd_data_gemm, p, &pl, w, dy, dx, alpha, beta, ws);
    return CUDNN_STATUS_SUCCESS;
}

const hb_algo hb_bwd_data_algo1 = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, "ALGO_1", 1, 20.0, workspace, run};

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
