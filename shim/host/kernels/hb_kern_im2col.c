/*
 * Typed data-movement helpers: im2col, col2im, beta scaling, and the 16-bit conversions of whole filters and
 * tensors. Written once as a template instantiated per storage type by hb_kern_tmpl.h (col2im and the
 * conversions only where they are used: col2im for float/double, conversions for the 16-bit types).
 */
#ifndef HB_T
#include "hb_kern.h"

#define HB_TMPL_FILE "hb_kern_im2col.c"
#include "hb_kern_tmpl.h"

#else

void HB_F(hb_im2col)(const hb_problem *p, const HB_S *x, int64_t g, int64_t n0, int64_t nb, int order, HB_T *col,
                     int64_t ld) {
    hb_geom G;
    hb_geom_init(&G, p);
    const int64_t o1 = G.out[1], o2 = G.out[2];
    for (int64_t cc = 0; cc < G.cg; cc++) {
        const HB_S *xc = x + (g * G.cg + cc) * p->x.stride_c;
        for (int64_t tap = 0; tap < G.taps; tap++) {
            hb_col_row R;
            hb_col_row_of(p, &G, cc, tap, order, &R);
            const int64_t row = R.row, off0 = R.off[0], off1 = R.off[1], off2 = R.off[2], qa = R.qa, qb = R.qb;
            const int64_t xs2 = p->x.stride_sp[2], st2 = p->stride[2];
            for (int64_t nn = 0; nn < nb; nn++) {
                const HB_S *xn = xc + (n0 + nn) * p->x.stride_n;
                HB_T *dst = col + row * ld + nn * G.pout;
                for (int64_t od = 0; od < G.out[0]; od++) {
                    int64_t id = od * p->stride[0] + off0;
                    for (int64_t oh = 0; oh < o1; oh++, dst += o2) {
                        int64_t ih = oh * p->stride[1] + off1;
                        if (id < 0 || id >= G.in[0] || ih < 0 || ih >= G.in[1]) {
                            for (int64_t q = 0; q < o2; q++) dst[q] = 0;
                            continue;
                        }
                        const HB_S *xr = xn + id * p->x.stride_sp[0] + ih * p->x.stride_sp[1];
                        for (int64_t q = 0; q < qa; q++) dst[q] = 0;
                        if (xs2 == 1 && st2 == 1)
                            for (int64_t q = qa; q < qb; q++) dst[q] = HB_LD(xr[q + off2]);
                        else
                            for (int64_t q = qa; q < qb; q++) dst[q] = HB_LD(xr[(q * st2 + off2) * xs2]);
                        for (int64_t q = qb; q < o2; q++) dst[q] = 0;
                    }
                }
            }
        }
    }
}

#if HB_NATIVE
void HB_F(hb_col2im)(const hb_problem *p, const HB_T *col, int64_t g, int64_t n0, int64_t nb, int order, HB_T *dx,
                     int64_t ld) {
    hb_geom G;
    hb_geom_init(&G, p);
    const int64_t o1 = G.out[1], o2 = G.out[2];
    for (int64_t cc = 0; cc < G.cg; cc++) {
        HB_T *xc = dx + (g * G.cg + cc) * p->x.stride_c;
        for (int64_t tap = 0; tap < G.taps; tap++) {
            hb_col_row R;
            hb_col_row_of(p, &G, cc, tap, order, &R);
            const int64_t row = R.row, off0 = R.off[0], off1 = R.off[1], off2 = R.off[2], qa = R.qa, qb = R.qb;
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

#endif

void HB_F(hb_scale_tensor)(const hb_tensor *t, HB_S *data, double beta) {
    if (beta == 1.0) return;
    const HB_T b = (HB_T)beta;
    for (int64_t n = 0; n < t->n; n++)
        for (int64_t c = 0; c < t->c; c++)
            for (int64_t d = 0; d < t->sp[0]; d++)
                for (int64_t h = 0; h < t->sp[1]; h++) {
                    HB_S *row = data + n * t->stride_n + c * t->stride_c + d * t->stride_sp[0] + h * t->stride_sp[1];
                    if (beta == 0.0)
                        for (int64_t w = 0; w < t->sp[2]; w++) row[w * t->stride_sp[2]] = HB_ST(0.0f);
                    else
                        for (int64_t w = 0; w < t->sp[2]; w++)
                            row[w * t->stride_sp[2]] = HB_ST(HB_LD(row[w * t->stride_sp[2]]) * b);
                }
}

void HB_F(hb_scale_filter)(const hb_filter *f, int64_t cg, HB_S *data, double beta) {
    if (beta == 1.0) return;
    const HB_T b = (HB_T)beta;
    for (int64_t k = 0; k < f->k; k++)
        for (int64_t c = 0; c < cg; c++)
            for (int64_t d = 0; d < f->sp[0]; d++)
                for (int64_t h = 0; h < f->sp[1]; h++) {
                    HB_S *row = data + k * f->stride_k + c * f->stride_c + d * f->stride_sp[0] + h * f->stride_sp[1];
                    if (beta == 0.0)
                        for (int64_t w = 0; w < f->sp[2]; w++) row[w * f->stride_sp[2]] = HB_ST(0.0f);
                    else
                        for (int64_t w = 0; w < f->sp[2]; w++)
                            row[w * f->stride_sp[2]] = HB_ST(HB_LD(row[w * f->stride_sp[2]]) * b);
                }
}

#if !HB_NATIVE
void HB_F(hb_filter_load)(const HB_S *src, int64_t stride_k, int64_t kg, int64_t crs, float *dst) {
    for (int64_t kk = 0; kk < kg; kk++)
        for (int64_t r = 0; r < crs; r++) dst[kk * crs + r] = HB_LD(src[kk * stride_k + r]);
}

void HB_F(hb_filter_store)(const float *f, int64_t kg, int64_t crs, HB_S *dst, int64_t stride_k, double beta) {
    const float b = (float)beta;
    for (int64_t kk = 0; kk < kg; kk++)
        for (int64_t r = 0; r < crs; r++) {
            HB_S *d = dst + kk * stride_k + r;
            *d = HB_ST(beta == 0.0 ? f[kk * crs + r] : f[kk * crs + r] + b * HB_LD(*d));
        }
}

void HB_F(hb_tensor_store)(const float *f, const hb_tensor *t, int64_t c0, int64_t nc, HB_S *data, double beta) {
    const float b = (float)beta;
    for (int64_t n = 0; n < t->n; n++)
        for (int64_t c = 0; c < nc; c++)
            for (int64_t d = 0; d < t->sp[0]; d++)
                for (int64_t h = 0; h < t->sp[1]; h++) {
                    HB_S *row = data + n * t->stride_n + (c0 + c) * t->stride_c + d * t->stride_sp[0] +
                                h * t->stride_sp[1];
                    const float *src = f + ((n * nc + c) * t->sp[0] + d) * t->sp[1] * t->sp[2] + h * t->sp[2];
                    for (int64_t w = 0; w < t->sp[2]; w++) {
                        HB_S *e = row + w * t->stride_sp[2];
                        *e = HB_ST(beta == 0.0 ? src[w] : src[w] + b * HB_LD(*e));
                    }
                }
}
#endif

#endif
