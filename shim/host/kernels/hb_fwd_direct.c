/*
 * Forward IMPLICIT_GEMM: direct loops, no workspace. Each output row is accumulated in a stack chunk while
 * the (input channel, filter tap) pairs are walked; the valid output range of every tap is computed up front so
 * the innermost loop has no bounds test. Slow (no BLAS, the input is re-read for every output channel): the
 * zero-workspace end of the trade-off.
 * 16-bit data is converted on the fly (float accumulation, one rounding per output): still no workspace.
 * Template file: instantiated per storage type by hb_kern_tmpl.h.
 */
#ifndef HB_T
#include "hb_kern.h"

#define HB_TMPL_FILE "hb_fwd_direct.c"
#include "hb_kern_tmpl.h"

static cudnnStatus_t run(const hb_problem *p, const void *x, const void *w, void *y, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws;
    (void)ws_bytes;
    HB_DISPATCH(p->dtype, fwd_direct, p, x, w, y, alpha, beta);
    return CUDNN_STATUS_SUCCESS;
}

const hb_algo hb_fwd_implicit_gemm = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "IMPLICIT_GEMM", 1, 1.0,
                                      hb_no_workspace, run, NULL};

#else

static void HB_F(fwd_direct)(const hb_problem *p, const HB_S *x, const HB_S *w, HB_S *y, double alpha, double beta) {
    hb_geom G;
    hb_geom_init(&G, p);
    HB_T acc[HB_ROW];
    const HB_T a = (HB_T)alpha, b = (HB_T)beta;
    const int64_t xs2 = p->x.stride_sp[2], st2 = p->stride[2];
    for (int64_t n = 0; n < G.n; n++)
        for (int64_t g = 0; g < G.groups; g++)
            for (int64_t kk = 0; kk < G.kg; kk++) {
                const int64_t k = g * G.kg + kk;
                const HB_S *wk = w + k * p->w.stride_k;
                for (int64_t od = 0; od < G.out[0]; od++)
                    for (int64_t oh = 0; oh < G.out[1]; oh++) {
                        HB_S *yr = y + n * p->y.stride_n + k * p->y.stride_c + od * p->y.stride_sp[0] +
                                   oh * p->y.stride_sp[1];
                        for (int64_t q0 = 0; q0 < G.out[2]; q0 += HB_ROW) {
                            const int64_t qn = G.out[2] - q0 < HB_ROW ? G.out[2] - q0 : HB_ROW;
                            for (int64_t j = 0; j < qn; j++) acc[j] = 0;
                            for (int64_t cc = 0; cc < G.cg; cc++) {
                                const HB_S *xc = x + n * p->x.stride_n + (g * G.cg + cc) * p->x.stride_c;
                                const HB_S *wc = wk + cc * p->w.stride_c;
                                for (int64_t t = 0; t < G.f[0]; t++) {
                                    int64_t id = od * p->stride[0] + hb_tap(p, 0, t) * p->dilation[0] - p->pad[0];
                                    if (id < 0 || id >= G.in[0]) continue;
                                    for (int64_t r = 0; r < G.f[1]; r++) {
                                        int64_t ih =
                                            oh * p->stride[1] + hb_tap(p, 1, r) * p->dilation[1] - p->pad[1];
                                        if (ih < 0 || ih >= G.in[1]) continue;
                                        const HB_S *xr = xc + id * p->x.stride_sp[0] + ih * p->x.stride_sp[1];
                                        const HB_S *wr = wc + t * p->w.stride_sp[0] + r * p->w.stride_sp[1];
                                        for (int64_t s = 0; s < G.f[2]; s++) {
                                            const int64_t off = hb_tap(p, 2, s) * p->dilation[2] - p->pad[2];
                                            int64_t qa, qb;
                                            hb_out_range(q0 + qn, st2, off, 0, G.in[2], &qa, &qb);
                                            if (qa < q0) qa = q0;
                                            const HB_T wv = HB_LD(wr[s * p->w.stride_sp[2]]);
                                            if (xs2 == 1 && st2 == 1)
                                                for (int64_t q = qa; q < qb; q++) acc[q - q0] += wv * HB_LD(xr[q + off]);
                                            else
                                                for (int64_t q = qa; q < qb; q++)
                                                    acc[q - q0] += wv * HB_LD(xr[(q * st2 + off) * xs2]);
                                        }
                                    }
                                }
                            }
                            HB_S *yq = yr + q0 * p->y.stride_sp[2];
                            const int64_t ys2 = p->y.stride_sp[2];
                            if (beta == 0.0)
                                for (int64_t j = 0; j < qn; j++) yq[j * ys2] = HB_ST(a * acc[j]);
                            else
                                for (int64_t j = 0; j < qn; j++) yq[j * ys2] = HB_ST(a * acc[j] + b * HB_LD(yq[j * ys2]));
                        }
                    }
            }
}

#endif
