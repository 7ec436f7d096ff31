/*
 * BackwardFilter ALGO_0: direct loops, no workspace, NON-DETERMINISTIC like cuDNN's atomics-based ALGO_0.
 * The reduction over (sample, output row) pairs is split into up to HB_PARTS parts run by two threads in
 * whatever order they get to them; each part's partial sum of a filter element is added into dw (pre-scaled by
 * beta) with an atomic add, so the summation order, and the last bits, may change from run to run.
 * 16-bit data: loads are converted, partial sums are float and each atomic add rounds dw to the 16-bit type (as
 * GPU half atomics do), so dw is rounded up to HB_PARTS + 1 times (beta scaling included).
 * Template file: instantiated per storage type by hb_kern_tmpl.h.
 */
#ifndef HB_T
#include "hb_kern.h"

#define HB_PARTS 8
#define HB_LANES 8

typedef struct {
    const hb_problem *p;
    const void *x, *dy;
    void *dw;
    double alpha;
    int64_t rows, nparts;
} job;

#define HB_TMPL_FILE "hb_bwd_filter_direct.c"
#include "hb_kern_tmpl.h"

static cudnnStatus_t run(const hb_problem *p, const void *x, const void *dy, void *dw, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws;
    (void)ws_bytes;
    int64_t rows = p->y.n * p->y.sp[0] * p->y.sp[1];
    job j = {p, x, dy, dw, alpha, rows, rows < HB_PARTS ? rows : HB_PARTS};
    HB_DISPATCH(p->dtype, bwd_filter_direct, &j, beta);
    return CUDNN_STATUS_SUCCESS;
}

const hb_algo hb_bwd_filter_algo0 = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, "ALGO_0", 0, 1.5, hb_no_workspace, run, NULL};

#else

static void HB_F(bwd_filter_part)(void *ctx, int64_t part) {
    const job *j = ctx;
    const hb_problem *p = j->p;
    const HB_S *x = j->x, *dy = j->dy;
    HB_S *dw = j->dw;
    hb_geom G;
    hb_geom_init(&G, p);
    const int64_t r0 = part * j->rows / j->nparts, r1 = (part + 1) * j->rows / j->nparts;
    const int64_t o01 = G.out[0] * G.out[1];
    const HB_T a = (HB_T)j->alpha;
    const int64_t xs2 = p->x.stride_sp[2], ys2 = p->y.stride_sp[2], st2 = p->stride[2];
    for (int64_t g = 0; g < G.groups; g++)
        for (int64_t kk = 0; kk < G.kg; kk++) {
            const int64_t k = g * G.kg + kk;
            for (int64_t cc = 0; cc < G.cg; cc++) {
                const int64_t c = g * G.cg + cc;
                for (int64_t tap = 0; tap < G.taps; tap++) {
                    int64_t s = tap % G.f[2], r = (tap / G.f[2]) % G.f[1], t = tap / (G.f[2] * G.f[1]);
                    int64_t off0 = hb_tap(p, 0, t) * p->dilation[0] - p->pad[0];
                    int64_t off1 = hb_tap(p, 1, r) * p->dilation[1] - p->pad[1];
                    int64_t off2 = hb_tap(p, 2, s) * p->dilation[2] - p->pad[2];
                    int64_t qa, qb;
                    hb_out_range(G.out[2], st2, off2, 0, G.in[2], &qa, &qb);
                    /* HB_LANES independent partial sums: a single float accumulator is a serial dependency
                     * chain the compiler may not reorder; lanes let it vectorise. */
                    HB_T acc[HB_LANES] = {0};
                    for (int64_t row = r0; row < r1; row++) {
                        int64_t n = row / o01, od = (row / G.out[1]) % G.out[0], oh = row % G.out[1];
                        int64_t id = od * p->stride[0] + off0, ih = oh * p->stride[1] + off1;
                        if (id < 0 || id >= G.in[0] || ih < 0 || ih >= G.in[1]) continue;
                        const HB_S *xr = x + n * p->x.stride_n + c * p->x.stride_c + id * p->x.stride_sp[0] +
                                         ih * p->x.stride_sp[1];
                        const HB_S *dyr = dy + n * p->y.stride_n + k * p->y.stride_c + od * p->y.stride_sp[0] +
                                          oh * p->y.stride_sp[1];
                        int64_t q = qa;
                        if (xs2 == 1 && ys2 == 1 && st2 == 1) {
                            for (; q + HB_LANES <= qb; q += HB_LANES)
                                for (int l = 0; l < HB_LANES; l++) acc[l] += HB_LD(dyr[q + l]) * HB_LD(xr[q + l + off2]);
                            for (; q < qb; q++) acc[0] += HB_LD(dyr[q]) * HB_LD(xr[q + off2]);
                        } else {
                            for (; q < qb; q++) acc[q % HB_LANES] += HB_LD(dyr[q * ys2]) * HB_LD(xr[(q * st2 + off2) * xs2]);
                        }
                    }
                    HB_T sum = 0;
                    for (int l = 0; l < HB_LANES; l++) sum += acc[l];
                    HB_F(hb_atomic_add)(dw + k * p->w.stride_k + cc * p->w.stride_c + hb_filter_tap_offset(p, tap),
                                        a * sum);
                }
            }
        }
}

/* dw scaled by beta, then the parts added into it. */
static void HB_F(bwd_filter_direct)(const job *j, double beta) {
    HB_F(hb_scale_filter)(&j->p->w, j->p->w.c, j->dw, beta);
    hb_run_parts(HB_F(bwd_filter_part), (void *)j, j->nparts);
}

#endif
