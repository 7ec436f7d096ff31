/*
 * Forward IMPLICIT_PRECOMP_GEMM: an implicit GEMM (no im2col matrix) driven by a precomputed table.
 * Workspace, independent of N: the input offset of every (filter tap, output position) pair, -1 where the
 * tap lands in the padding ([taps x P*Q] int64), the filter tap offsets ([taps] int64) and an accumulator
 * tile ([K/groups x HB_TILE] elements). Output positions are processed in tiles of HB_TILE: for each
 * (input channel, tap) the tile's inputs are gathered once through the table and used by every output channel
 * as a rank-1 update of the accumulator -- vectorisable, but no BLAS, so between direct loops and GEMM.
 * 16-bit data is converted as it is gathered; the accumulator tile is float (its size counted in the workspace).
 * Template file: instantiated per storage type by hb_kern_tmpl.h.
 */
#ifndef HB_T
#include "hb_kern.h"

#define HB_TILE 64

typedef struct {
    size_t table, woff, acc, total; /* byte offsets of the sections, total size */
} layout;

static layout ws_layout(const hb_problem *p) {
    hb_geom G;
    hb_geom_init(&G, p);
    int64_t tile = G.pout < HB_TILE ? G.pout : HB_TILE;
    layout l;
    l.table = 0;
    l.woff = hb_align(hb_bytes(G.taps * G.pout, sizeof(int64_t)));
    l.acc = hb_add_bytes(l.woff, hb_align(hb_bytes(G.taps, sizeof(int64_t))));
    l.total = hb_add_bytes(l.acc, hb_bytes(G.kg * tile, hb_elem_size(p)));
    return l;
}

static void build_tables(const hb_problem *p, int64_t *table, int64_t *woff) {
    hb_geom G;
    hb_geom_init(&G, p);
    for (int64_t tap = 0; tap < G.taps; tap++) {
        int64_t s = tap % G.f[2], r = (tap / G.f[2]) % G.f[1], t = tap / (G.f[2] * G.f[1]);
        int64_t off0 = hb_tap(p, 0, t) * p->dilation[0] - p->pad[0];
        int64_t off1 = hb_tap(p, 1, r) * p->dilation[1] - p->pad[1];
        int64_t off2 = hb_tap(p, 2, s) * p->dilation[2] - p->pad[2];
        int64_t *row = table + tap * G.pout;
        for (int64_t od = 0; od < G.out[0]; od++)
            for (int64_t oh = 0; oh < G.out[1]; oh++)
                for (int64_t ow = 0; ow < G.out[2]; ow++) {
                    int64_t id = od * p->stride[0] + off0, ih = oh * p->stride[1] + off1,
                            iw = ow * p->stride[2] + off2;
                    int ok = id >= 0 && id < G.in[0] && ih >= 0 && ih < G.in[1] && iw >= 0 && iw < G.in[2];
                    *row++ = ok ? id * p->x.stride_sp[0] + ih * p->x.stride_sp[1] + iw * p->x.stride_sp[2] : -1;
                }
        woff[tap] = hb_filter_tap_offset(p, tap);
    }
}

#define HB_TMPL_FILE "hb_fwd_precomp.c"
#include "hb_kern_tmpl.h"

static size_t workspace(const hb_problem *p) { return ws_layout(p).total; }

static cudnnStatus_t run(const hb_problem *p, const void *x, const void *w, void *y, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    layout l = ws_layout(p);
    build_tables(p, (int64_t *)((char *)ws + l.table), (int64_t *)((char *)ws + l.woff));
    HB_DISPATCH(p->dtype, fwd_precomp, p, x, w, y, alpha, beta, ws, &l);
    return CUDNN_STATUS_SUCCESS;
}

const hb_algo hb_fwd_implicit_precomp_gemm = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                              "IMPLICIT_PRECOMP_GEMM", 1, 3.0, workspace, run, NULL};

#else

static void HB_F(fwd_precomp)(const hb_problem *p, const HB_S *x, const HB_S *w, HB_S *y, double alpha, double beta,
                              void *ws, const layout *l) {
    hb_geom G;
    hb_geom_init(&G, p);
    const int64_t *table = (const int64_t *)((char *)ws + l->table);
    const int64_t *woff = (const int64_t *)((char *)ws + l->woff);
    HB_T *acc = (HB_T *)((char *)ws + l->acc);
    HB_T xv[HB_TILE];
    const HB_T a = (HB_T)alpha, b = (HB_T)beta;
    const int64_t o12 = G.out[1] * G.out[2];
    for (int64_t n = 0; n < G.n; n++)
        for (int64_t g = 0; g < G.groups; g++) {
            const HB_S *xg = x + n * p->x.stride_n + g * G.cg * p->x.stride_c;
            const HB_S *wg = w + g * G.kg * p->w.stride_k;
            for (int64_t pq0 = 0; pq0 < G.pout; pq0 += HB_TILE) {
                const int64_t tq = G.pout - pq0 < HB_TILE ? G.pout - pq0 : HB_TILE;
                for (int64_t i = 0; i < G.kg * tq; i++) acc[i] = 0;
                for (int64_t cc = 0; cc < G.cg; cc++) {
                    const HB_S *xc = xg + cc * p->x.stride_c;
                    const HB_S *wc = wg + cc * p->w.stride_c;
                    for (int64_t tap = 0; tap < G.taps; tap++) {
                        const int64_t *tb = table + tap * G.pout + pq0;
                        for (int64_t j = 0; j < tq; j++) xv[j] = tb[j] >= 0 ? HB_LD(xc[tb[j]]) : (HB_T)0;
                        const HB_S *wt = wc + woff[tap];
                        for (int64_t kk = 0; kk < G.kg; kk++) {
                            const HB_T wv = HB_LD(wt[kk * p->w.stride_k]);
                            HB_T *ak = acc + kk * tq;
                            for (int64_t j = 0; j < tq; j++) ak[j] += wv * xv[j];
                        }
                    }
                }
                for (int64_t kk = 0; kk < G.kg; kk++) {
                    HB_S *yk = y + n * p->y.stride_n + (g * G.kg + kk) * p->y.stride_c;
                    const HB_T *ak = acc + kk * tq;
                    for (int64_t j = 0; j < tq; j++) {
                        int64_t pos = pq0 + j;
                        int64_t od = pos / o12, oh = (pos / G.out[2]) % G.out[1], ow = pos % G.out[2];
                        HB_S *dst = yk + od * p->y.stride_sp[0] + oh * p->y.stride_sp[1] + ow * p->y.stride_sp[2];
                        *dst = HB_ST(beta == 0.0 ? a * ak[j] : a * ak[j] + b * HB_LD(*dst));
                    }
                }
            }
        }
}

#endif
