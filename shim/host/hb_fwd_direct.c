/*
 * Forward IMPLICIT_GEMM: direct loops, no workspace. Each output row is accumulated in a stack chunk while
 * the (input channel, filter tap) pairs are walked; the valid output range of every tap is computed up front so
 * the innermost loop has no bounds test. Slow (no BLAS, the input is re-read for every output channel): the
 * zero-workspace end of the trade-off.
 * Template file: includes itself for float and double (see hb_kern_im2col.c).
 */
#ifndef HB_T
#include "hb_kern.h"

#define HB_T float
#define HB_F(name) name##_f
#include "hb_fwd_direct.c"
#undef HB_T
#undef HB_F
#define HB_T double
#define HB_F(name) name##_d
#include "hb_fwd_direct.c"
#undef HB_T
#undef HB_F

static size_t workspace(const hb_problem *p) {
    (void)p;
    return 0;
}

static cudnnStatus_t run(const hb_problem *p, const void *x, const void *w, void *y, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws;
    (void)ws_bytes;
    if (p->dtype == CUDNN_DATA_DOUBLE)
        fwd_direct_d(p, x, w, y, alpha, beta);
    else
        fwd_direct_f(p, x, w, y, alpha, beta);
    return CUDNN_STATUS_SUCCESS;
}

const hb_algo hb_fwd_implicit_gemm = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "IMPLICIT_GEMM", 1, 1.0, workspace,
                                      run};

#else

static void HB_F(fwd_direct)(const hb_problem *p, const HB_T *x, const HB_T *w, HB_T *y, double alpha, double beta) {
    hb_geom G;
    hb_geom_init(&G, p);
    HB_T acc[HB_ROW];
    const HB_T a = (HB_T)alpha, b = (HB_T)beta;
    const int64_t xs2 = p->x.stride_sp[2], st2 = p->stride[2];
    for (int64_t n = 0; n < G.n; n++)
        for (int64_t g = 0; g < G.groups; g++)
            for (int64_t kk = 0; kk < G.kg; kk++) {
                const int64_t k = g * G.kg + kk;
                const HB_T *wk = w + k * p->w.stride_k;
                for (int64_t od = 0; od < G.out[0]; od++)
                    for (int64_t oh = 0; oh < G.out[1]; oh++) {
                        HB_T *yr = y + n * p->y.stride_n + k * p->y.stride_c + od * p->y.stride_sp[0] +
                                   oh * p->y.stride_sp[1];
                        for (int64_t q0 = 0; q0 < G.out[2]; q0 += HB_ROW) {
                            const int64_t qn = G.out[2] - q0 < HB_ROW ? G.out[2] - q0 : HB_ROW;
                            for (int64_t j = 0; j < qn; j++) acc[j] = 0;
                            for (int64_t cc = 0; cc < G.cg; cc++) {
                                const HB_T *xc = x + n * p->x.stride_n + (g * G.cg + cc) * p->x.stride_c;
                                const HB_T *wc = wk + cc * p->w.stride_c;
                                for (int64_t t = 0; t < G.f[0]; t++) {
                                    int64_t id = od * p->stride[0] + hb_tap(p, 0, t) * p->dilation[0] - p->pad[0];
                                    if (id < 0 || id >= G.in[0]) continue;
                                    for (int64_t r = 0; r < G.f[1]; r++) {
                                        int64_t ih =
                                            oh * p->stride[1] + hb_tap(p, 1, r) * p->dilation[1] - p->pad[1];
                                        if (ih < 0 || ih >= G.in[1]) continue;
                                        const HB_T *xr = xc + id * p->x.stride_sp[0] + ih * p->x.stride_sp[1];
                                        const HB_T *wr = wc + t * p->w.stride_sp[0] + r * p->w.stride_sp[1];
                                        for (int64_t s = 0; s < G.f[2]; s++) {
                                            const int64_t off = hb_tap(p, 2, s) * p->dilation[2] - p->pad[2];
                                            int64_t qa, qb;
                                            hb_out_range(q0 + qn, st2, off, 0, G.in[2], &qa, &qb);
                                            if (qa < q0) qa = q0;
                                            const HB_T wv = wr[s * p->w.stride_sp[2]];
                                            if (xs2 == 1 && st2 == 1)
                                                for (int64_t q = qa; q < qb; q++) acc[q - q0] += wv * xr[q + off];
                                            else
                                                for (int64_t q = qa; q < qb; q++)
                                                    acc[q - q0] += wv * xr[(q * st2 + off) * xs2];
                                        }
                                    }
                                }
                            }
                            HB_T *yq = yr + q0 * p->y.stride_sp[2];
                            const int64_t ys2 = p->y.stride_sp[2];
                            if (beta == 0.0)
                                for (int64_t j = 0; j < qn; j++) yq[j * ys2] = a * acc[j];
                            else
                                for (int64_t j = 0; j < qn; j++) yq[j * ys2] = a * acc[j] + b * yq[j * ys2];
                        }
                    }
            }
}

#endif
