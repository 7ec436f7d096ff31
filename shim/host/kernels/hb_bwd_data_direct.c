/*
 * BackwardData ALGO_0: direct loops, no workspace, NON-DETERMINISTIC like cuDNN's atomics-based ALGO_0.
 * The reduction over output channels (within a group) is split into up to HB_PARTS parts run by two threads
 * that take parts in whatever order they get to them; each part accumulates a dx row chunk on the stack and
 * adds it into dx with an atomic add, so the order of the (>= 3) addends of every dx element, and with it the
 * last bits of the result, may change from run to run.
 * 16-bit data: loads are converted, the chunk accumulates in float and each atomic add rounds dx to the 16-bit
 * type (as GPU half atomics do), so dx is rounded up to HB_PARTS + 1 times (beta scaling included).
 * Template file: instantiated per storage type by hb_kern_tmpl.h.
 */
#ifndef HB_T
#include "hb_kern.h"

#define HB_PARTS 4

typedef struct {
    const hb_problem *p;
    const void *w, *dy;
    void *dx;
    double alpha;
    int64_t nparts;
} job;

#define HB_TMPL_FILE "hb_bwd_data_direct.c"
#include "hb_kern_tmpl.h"

static cudnnStatus_t run(const hb_problem *p, const void *w, const void *dy, void *dx, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws;
    (void)ws_bytes;
    int64_t kg = p->w.k / p->groups;
    job j = {p, w, dy, dx, alpha, kg < HB_PARTS ? kg : HB_PARTS};
    HB_DISPATCH(p->dtype, bwd_data_direct, &j, beta);
    return CUDNN_STATUS_SUCCESS;
}

const hb_algo hb_bwd_data_algo0 = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, "ALGO_0", 0, 1.5, hb_no_workspace, run, NULL};

#else

static void HB_F(bwd_data_part)(void *ctx, int64_t part) {
    const job *j = ctx;
    const hb_problem *p = j->p;
    const HB_S *w = j->w, *dy = j->dy;
    HB_S *dx = j->dx;
    hb_geom G;
    hb_geom_init(&G, p);
    const int64_t k0 = part * G.kg / j->nparts, k1 = (part + 1) * G.kg / j->nparts;
    const HB_T a = (HB_T)j->alpha;
    const int64_t ys2 = p->y.stride_sp[2], st2 = p->stride[2];
    HB_T acc[HB_ROW];
    for (int64_t n = 0; n < G.n; n++)
        for (int64_t g = 0; g < G.groups; g++)
            for (int64_t cc = 0; cc < G.cg; cc++) {
                const int64_t c = g * G.cg + cc;
                for (int64_t id = 0; id < G.in[0]; id++)
                    for (int64_t ih = 0; ih < G.in[1]; ih++) {
                        HB_S *xr = dx + n * p->x.stride_n + c * p->x.stride_c + id * p->x.stride_sp[0] +
                                   ih * p->x.stride_sp[1];
                        for (int64_t w0 = 0; w0 < G.in[2]; w0 += HB_ROW) {
                            const int64_t wn = G.in[2] - w0 < HB_ROW ? G.in[2] - w0 : HB_ROW;
                            for (int64_t i = 0; i < wn; i++) acc[i] = 0;
                            for (int64_t kk = k0; kk < k1; kk++) {
                                const int64_t k = g * G.kg + kk;
                                for (int64_t t = 0; t < G.f[0]; t++) {
                                    int64_t nd = id + p->pad[0] - hb_tap(p, 0, t) * p->dilation[0];
                                    if (nd < 0 || nd % p->stride[0]) continue;
                                    int64_t od = nd / p->stride[0];
                                    if (od >= G.out[0]) continue;
                                    for (int64_t r = 0; r < G.f[1]; r++) {
                                        int64_t nh = ih + p->pad[1] - hb_tap(p, 1, r) * p->dilation[1];
                                        if (nh < 0 || nh % p->stride[1]) continue;
                                        int64_t oh = nh / p->stride[1];
                                        if (oh >= G.out[1]) continue;
                                        const HB_S *dyr = dy + n * p->y.stride_n + k * p->y.stride_c +
                                                          od * p->y.stride_sp[0] + oh * p->y.stride_sp[1];
                                        const HB_S *wr = w + k * p->w.stride_k + cc * p->w.stride_c +
                                                         t * p->w.stride_sp[0] + r * p->w.stride_sp[1];
                                        for (int64_t s = 0; s < G.f[2]; s++) {
                                            const int64_t off = hb_tap(p, 2, s) * p->dilation[2] - p->pad[2];
                                            int64_t qa, qb;
                                            hb_out_range(G.out[2], st2, off, w0, w0 + wn, &qa, &qb);
                                            const HB_T wv = HB_LD(wr[s * p->w.stride_sp[2]]);
                                            const int64_t base = off - w0;
                                            if (st2 == 1 && ys2 == 1)
                                                for (int64_t q = qa; q < qb; q++) acc[q + base] += wv * HB_LD(dyr[q]);
                                            else
                                                for (int64_t q = qa; q < qb; q++)
                                                    acc[q * st2 + base] += wv * HB_LD(dyr[q * ys2]);
                                        }
                                    }
                                }
                            }
                            for (int64_t i = 0; i < wn; i++)
                                HB_F(hb_atomic_add)(xr + (w0 + i) * p->x.stride_sp[2], a * acc[i]);
                        }
                    }
            }
}

/* dx scaled by beta, then the parts added into it. */
static void HB_F(bwd_data_direct)(const job *j, double beta) {
    HB_F(hb_scale_tensor)(&j->p->x, j->dx, beta);
    hb_run_parts(HB_F(bwd_data_part), (void *)j, j->nparts);
}

#endif
