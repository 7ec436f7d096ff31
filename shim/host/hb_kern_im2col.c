/*
 * Typed data-movement helpers: im2col, col2im, beta scaling. Written once as a template: the file includes
 * itself with HB_T (the element type) and HB_F (name suffixing) set for float and then double.
 */
#ifndef HB_T
#include "hb_kern.h"

#define HB_T float
#define HB_F(name) name##_f
#include "hb_kern_im2col.c"
#undef HB_T
#undef HB_F
#define HB_T double
#define HB_F(name) name##_d
#include "hb_kern_im2col.c"
#undef HB_T
#undef HB_F

#else

void HB_F(hb_im2col)(const hb_problem *p, const HB_T *x, int64_t g, int64_t n0, int64_t nb, int order, HB_T *col,
                     int64_t ld) {
    hb_geom G;
    hb_geom_init(&G, p);
    const int64_t o1 = G.out[1], o2 = G.out[2];
    for (int64_t cc = 0; cc < G.cg; cc++) {
        const HB_T *xc = x + (g * G.cg + cc) * p->x.stride_c;
        for (int64_t tap = 0; tap < G.taps; tap++) {
            int64_t s = tap % G.f[2], r = (tap / G.f[2]) % G.f[1], t = tap / (G.f[2] * G.f[1]);
            int64_t row = order == HB_ORDER_TC ? tap * G.cg + cc : cc * G.taps + tap;
            int64_t off0 = hb_tap(p, 0, t) * p->dilation[0] - p->pad[0];
            int64_t off1 = hb_tap(p, 1, r) * p->dilation[1] - p->pad[1];
            int64_t off2 = hb_tap(p, 2, s) * p->dilation[2] - p->pad[2];
            int64_t qa, qb;
            hb_out_range(o2, p->stride[2], off2, 0, G.in[2], &qa, &qb);
            const int64_t xs2 = p->x.stride_sp[2], st2 = p->stride[2];
            for (int64_t nn = 0; nn < nb; nn++) {
                const HB_T *xn = xc + (n0 + nn) * p->x.stride_n;
                HB_T *dst = col + row * ld + nn * G.pout;
                for (int64_t od = 0; od < G.out[0]; od++) {
                    int64_t id = od * p->stride[0] + off0;
                    for (int64_t oh = 0; oh < o1; oh++, dst += o2) {
                        int64_t ih = oh * p->stride[1] + off1;
                        if (id < 0 || id >= G.in[0] || ih < 0 || ih >= G.in[1]) {
                            for (int64_t q = 0; q < o2; q++) dst[q] = 0;
                            continue;
                        }
                        const HB_T *xr = xn + id * p->x.stride_sp[0] + ih * p->x.stride_sp[1];
                        for (int64_t q = 0; q < qa; q++) dst[q] = 0;
                        if (xs2 == 1 && st2 == 1)
                            for (int64_t q = qa; q < qb; q++) dst[q] = xr[q + off2];
                        else
                            for (int64_t q = qa; q < qb; q++) dst[q] = xr[(q * st2 + off2) * xs2];
                        for (int64_t q = qb; q < o2; q++) dst[q] = 0;
                    }
                }
            }
        }
    }
}

void HB_F(hb_col2im)(const hb_problem *p, const HB_T *col, int64_t g, int64_t n0, int64_t nb, int order, HB_T *dx,
                     int64_t ld) {
    hb_geom G;
    hb_geom_init(&G, p);
    const int64_t o1 = G.out[1], o2 = G.out[2];
    for (int64_t cc = 0; cc < G.cg; cc++) {
        HB_T *xc = dx + (g * G.cg + cc) * p->x.stride_c;
        for (int64_t tap = 0; tap < G.taps; tap++) {
            int64_t s = tap % G.f[2], r = (tap / G.f[2]) % G.f[1], t = tap / (G.f[2] * G.f[1]);
            int64_t row = order == HB_ORDER_TC ? tap * G.cg + cc : cc * G.taps + tap;
            int64_t off0 = hb_tap(p, 0, t) * p->dilation[0] - p->pad[0];
            int64_t off1 = hb_tap(p, 1, r) * p->dilation[1] - p->pad[1];
            int64_t off2 = hb_tap(p, 2, s) * p->dilation[2] - p->pad[2];
            int64_t qa, qb;
            hb_out_range(o2, p->stride[2], off2, 0, G.in[2], &qa, &qb);
            const int64_t xs2 = p->x.stride_sp[2], step = p->stride[2] * xs2;
            for (int64_t nn = 0; nn < nb; nn++) {
                HB_T *xn = xc + (n0 + nn) * p->x.stride_n;
                const HB_T *src = col + row * ld + nn * G.pout;
                for (int64_t od = 0; od < G.out[0]; od++) {
                    int64_t id = od * p->stride[0] + off0;
                    for (int64_t oh = 0; oh < o1; oh++, src += o2) {
                        int64_t ih = oh * p->stride[1] + off1;
                        if (id < 0 || id >= G.in[0] || ih < 0 || ih >= G.in[1]) continue;
                        HB_T *xr = xn + id * p->x.stride_sp[0] + ih * p->x.stride_sp[1];
                        for (int64_t q = qa; q < qb; q++) xr[q * step + off2 * xs2] += src[q];
                    }
                }
            }
        }
    }
}

void HB_F(hb_scale_tensor)(const hb_tensor *t, HB_T *data, double beta) {
    if (beta == 1.0) return;
    const HB_T b = (HB_T)beta;
    for (int64_t n = 0; n < t->n; n++)
        for (int64_t c = 0; c < t->c; c++)
            for (int64_t d = 0; d < t->sp[0]; d++)
                for (int64_t h = 0; h < t->sp[1]; h++) {
                    HB_T *row = data + n * t->stride_n + c * t->stride_c + d * t->stride_sp[0] + h * t->stride_sp[1];
                    if (beta == 0.0)
                        for (int64_t w = 0; w < t->sp[2]; w++) row[w * t->stride_sp[2]] = 0;
                    else
                        for (int64_t w = 0; w < t->sp[2]; w++) row[w * t->stride_sp[2]] *= b;
                }
}

void HB_F(hb_scale_filter)(const hb_filter *f, int64_t cg, HB_T *data, double beta) {
    if (beta == 1.0) return;
    const HB_T b = (HB_T)beta;
    for (int64_t k = 0; k < f->k; k++)
        for (int64_t c = 0; c < cg; c++)
            for (int64_t d = 0; d < f->sp[0]; d++)
                for (int64_t h = 0; h < f->sp[1]; h++) {
                    HB_T *row = data + k * f->stride_k + c * f->stride_c + d * f->stride_sp[0] + h * f->stride_sp[1];
                    if (beta == 0.0)
                        for (int64_t w = 0; w < f->sp[2]; w++) row[w * f->stride_sp[2]] = 0;
                    else
                        for (int64_t w = 0; w < f->sp[2]; w++) row[w * f->stride_sp[2]] *= b;
                }
}

#endif
