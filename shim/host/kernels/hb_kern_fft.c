/*
 * FFT convolution (cuDNN's ALGO_FFT and FFT_TILING for the three ops), 2-D, stride 1, no dilation, padding below
 * the filter's extent; ALGO_FFT's padded input at most HB_FFT_MAX per dimension (as cuDNN's: 256).
 *
 * Forward is a cross-correlation y[p, q] = sum over c, r, s of xpad[c, p + r, q + s] w[c, r, s]; on transform
 * sizes lh x lw (powers of two covering the padded input) it is exact as circular, so per frequency bin
 * Y[k] = sum over c of conj(W[k, c]) X[c]: one complex GEMM per bin over the batch, with the spectra of the whole
 * batch, of the filters and of the products in the workspace (it grows with N, and the filters' part with K x C:
 * cuDNN's FFT is the workspace-hungriest algorithm too). Real inputs keep lw / 2 + 1 columns of each spectrum,
 * and two real rows share one complex row transform, each way.
 * Backward data is the forward of dy with the filter transposed and rotated (padding R - 1 - pad), as for
 * Winograd; backward filter correlates the padded x with dy: dW[c, k] = sum over n of X[n, c] conj(DY[n, k]),
 * in the same three buffers (products where the filters' spectra are).
 * FFT_TILING (each op's) runs the same steps per tile of the output: tp x tq outputs from their (tp + r - 1) x
 * (tq + s - 1) inputs on lh x lw = 32 x 32 transforms (64 x 64 for filters past 16), exact as circular there too,
 * the filters' spectra computed once; backward filter sums the tiles' products per bin. Its spectra are one
 * tile's, so it takes images of any size in a workspace that does not grow with them, and pays for the tiles'
 * overlap. 16-bit data is transformed in float and rounded once on store. Template file: instantiated per
 * storage type.
 */
#ifndef HB_T
#include "hb_kern.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#define HB_FFT_PI 3.14159265358979323846

void scipy_cblas_cgemm(int layout, int transa, int transb, int m, int n, int k, const void *alpha, const void *a,
                       int lda, const void *b, int ldb, const void *beta, void *c, int ldc);
void scipy_cblas_zgemm(int layout, int transa, int transb, int m, int n, int k, const void *alpha, const void *a,
                       int lda, const void *b, int ldb, const void *beta, void *c, int ldc);
enum { HB_CBLAS_CONJ_TRANS = 113 };

static int64_t pow2_at_least(int64_t v) {
    int64_t l = 1;
    while (l < v) l <<= 1;
    return l;
}

int hb_fft_shape_ok(const hb_problem *p, int tiled) {
    const int64_t r = p->w.sp[1], s = p->w.sp[2];
    if (!(p->w.sp[0] == 1 && p->x.sp[0] == 1 && p->y.sp[0] == 1 && p->stride[1] == 1 && p->stride[2] == 1 &&
          p->dilation[1] == 1 && p->dilation[2] == 1 && p->pad[1] >= 0 && p->pad[2] >= 0 && p->pad[1] < r &&
          p->pad[2] < s))
        return 0;
    if (tiled) return r <= HB_FFT_TILE_FILTER && s <= HB_FFT_TILE_FILTER;
    return p->x.sp[1] + 2 * p->pad[1] <= HB_FFT_MAX && p->x.sp[2] + 2 * p->pad[2] <= HB_FFT_MAX &&
           p->x.sp[1] + r - 1 <= HB_FFT_MAX && p->x.sp[2] + s - 1 <= HB_FFT_MAX;
}

/* One dimension's transform size and tile output extent: the padded input `full` on one transform (ALGO_FFT, or
 * FFT_TILING where it fits a tile's transform), else tiles of the transform's size less the filter's r - 1. */
static void fft_extent(int64_t full, int64_t r, int64_t out, int tiled, int64_t *l, int64_t *t) {
    const int64_t tile = r <= HB_FFT_TILE / 2 ? HB_FFT_TILE : 2 * HB_FFT_TILE;
    *l = tiled && full > tile ? tile : pow2_at_least(full); /* FFT_TILING: no power of two past the image's size */
    *t = *l - r + 1 < out ? *l - r + 1 : out;
}

hb_fft hb_fft_of(const hb_problem *p, int backward_data, int tiled) {
    hb_fft f = {.g = hb_wino_of(p, backward_data)};
    fft_extent(f.g.h + 2 * f.g.pad_h, f.g.r, f.g.p, tiled, &f.lh, &f.tp);
    fft_extent(f.g.w + 2 * f.g.pad_w, f.g.s, f.g.q, tiled, &f.lw, &f.tq);
    return f;
}

static int64_t fft_bins(const hb_fft *f) { return f->lh * (f->lw / 2 + 1); }
static int64_t fft_tiles(const hb_fft *f) { return ((f->g.p + f->tp - 1) / f->tp) * ((f->g.q + f->tq - 1) / f->tq); }

/* Planes transformed together, one per vector lane of the butterflies' inner loops. */
#define HB_FFT_LANES 16

/* The workspace, for compute elements of es bytes: the spectra F (bins x cin x cout), X (bins x cin x N) and
 * Y (bins x cout x N), then the scratch of one block of HB_FFT_LANES planes' transforms (the real grids
 * lh x lw, the half planes, a line, each lane-interleaved, and the two twiddle tables). Offsets in *at: X, Y,
 * scratch; returns the total (SIZE_MAX on overflow). */
static size_t fft_layout(const hb_fft *f, size_t es, size_t at[3]) {
    const size_t c = 2 * es;
    const int64_t bins = fft_bins(f), line = f->lh > f->lw ? f->lh : f->lw;
    at[0] = hb_align(hb_bytes(bins * f->g.cin * f->g.cout, c));
    at[1] = hb_add_bytes(at[0], hb_align(hb_bytes(bins * f->g.cin * f->g.n, c)));
    at[2] = hb_add_bytes(at[1], hb_align(hb_bytes(bins * f->g.cout * f->g.n, c)));
    size_t scratch = hb_bytes((f->lh * f->lw + 2 * bins + 2 * line) * HB_FFT_LANES + f->lh + f->lw + 4, es);
    return hb_add_bytes(at[2], scratch);
}

size_t hb_fft_problem_workspace(const hb_problem *p, int backward_data, int tiled) {
    if (!hb_fft_shape_ok(p, tiled)) return SIZE_MAX;
    hb_fft f = hb_fft_of(p, backward_data, tiled);
    const hb_wino *t = &f.g;
    if (t->n > INT_MAX || t->cin > INT_MAX || t->cout > INT_MAX || t->cin * t->cout > INT_MAX ||
        t->n * t->cin > INT_MAX || t->n * t->cout > INT_MAX)
        return SIZE_MAX;
    size_t at[3];
    return fft_layout(&f, hb_elem_size(p), at);
}

/* The model's rate (hb_model.c): the direct multiply-accumulates per real one of the spectra's complex GEMMs
 * (4 per complex, over every tile's bins), times HB_FFT_RATE for the transforms and the complex arithmetic,
 * capped. Large filters gain, 1x1 ones lose; tiles pay for their overlap. */
static double fft_rate(const hb_problem *p, int tiled) {
    if (!hb_fft_shape_ok(p, tiled)) return 1.0;
    hb_fft f = hb_fft_of(p, 0, tiled);
    double ratio = (double)f.g.p * (double)f.g.q * (double)(f.g.r * f.g.s) /
                   (4.0 * (double)fft_bins(&f) * (double)fft_tiles(&f));
    double rate = HB_FFT_RATE * ratio;
    return rate < 0.5 ? 0.5 : rate > 50.0 ? 50.0 : rate;
}
double hb_fft_model_rate(const hb_problem *p) { return fft_rate(p, 0); }
double hb_fft_tiling_model_rate(const hb_problem *p) { return fft_rate(p, 1); }

/* exp(-2 pi i k / l) for k < l / 2, interleaved. */
static void twiddles_f(float *tw, int64_t l) {
    for (int64_t k = 0; k < l / 2; k++) {
        double a = -2.0 * HB_FFT_PI * (double)k / (double)l;
        tw[2 * k] = (float)cos(a);
        tw[2 * k + 1] = (float)sin(a);
    }
}
static void twiddles_d(double *tw, int64_t l) {
    for (int64_t k = 0; k < l / 2; k++) {
        double a = -2.0 * HB_FFT_PI * (double)k / (double)l;
        tw[2 * k] = cos(a);
        tw[2 * k + 1] = sin(a);
    }
}

/* One complex GEMM per bin, row-major: C = op(A) op(B) (+ C where add), op a conjugate transpose where asked. */
static void fft_gemm_f(int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                       float *c, int ldc, int add) {
    const float one[2] = {1, 0}, beta[2] = {add ? 1.0f : 0.0f, 0};
    scipy_cblas_cgemm(HB_CBLAS_ROW_MAJOR, ta, tb, m, n, k, one, a, lda, b, ldb, beta, c, ldc);
}
static void fft_gemm_d(int ta, int tb, int m, int n, int k, const double *a, int lda, const double *b, int ldb,
                       double *c, int ldc, int add) {
    const double one[2] = {1, 0}, beta[2] = {add ? 1.0 : 0.0, 0};
    scipy_cblas_zgemm(HB_CBLAS_ROW_MAJOR, ta, tb, m, n, k, one, a, lda, b, ldb, beta, c, ldc);
}

/* One dimension of the tile whose outputs start at o0 (t of them at most, of outs): the input it reads, in0 .. in0 +
 * in - 1 (clipped to the image's h), placed at `at` in its transform (the padding before it stays zero). */
typedef struct {
    int64_t out, in0, in, at;
} hb_fft_span;
static hb_fft_span fft_span(int64_t o0, int64_t t, int64_t outs, int64_t pad, int64_t r, int64_t h) {
    hb_fft_span v = {.out = outs - o0 < t ? outs - o0 : t};
    const int64_t first = o0 - pad, last = first + v.out + r - 1;
    const int64_t a = first > 0 ? first : 0, b = last < h ? last : h;
    v.in0 = a;
    v.in = b > a ? b - a : 0;
    v.at = a - first;
    return v;
}

#define HB_TMPL_FILE "hb_kern_fft.c"
#include "hb_kern_tmpl.h"

cudnnStatus_t hb_fft_problem_run(const hb_problem *p, int backward_data, int tiled, const void *data,
                                 const void *filter, void *out, double alpha, double beta, void *ws) {
    hb_fft f = hb_fft_of(p, backward_data, tiled);
    HB_DISPATCH(p->dtype, hb_fft_run, &f, data, filter, out, alpha, beta, ws);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_fft_grad_problem_run(const hb_problem *p, int tiled, const void *x, const void *dy, void *dw,
                                      double alpha, double beta, void *ws) {
    hb_fft f = hb_fft_of(p, 0, tiled);
    HB_DISPATCH(p->dtype, hb_fft_grad_run, &f, x, dy, dw, alpha, beta, ws);
    return CUDNN_STATUS_SUCCESS;
}

#else

/* In-place radix-2 FFTs of l complex values (l a power of two) in `cnt` lanes: value v of lane t at re[v * L + t],
 * im[v * L + t] (L = HB_FFT_LANES), so the butterflies' inner loops run over the lanes. tw from twiddles for l;
 * the inverse is unscaled. */
static void HB_F(fftv)(HB_T *re, HB_T *im, int64_t l, int64_t cnt, const HB_T *tw, int inverse) {
    const int64_t L = HB_FFT_LANES;
    for (int64_t i = 1, j = 0; i < l; i++) {
        int64_t bit = l >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j)
            for (int64_t t = 0; t < cnt; t++) {
                HB_T r = re[i * L + t], m = im[i * L + t];
                re[i * L + t] = re[j * L + t];
                im[i * L + t] = im[j * L + t];
                re[j * L + t] = r;
                im[j * L + t] = m;
            }
    }
    const HB_T sign = inverse ? -1 : 1;
    for (int64_t len = 2; len <= l; len <<= 1) {
        const int64_t half = len / 2, step = l / len;
        for (int64_t i = 0; i < l; i += len)
            for (int64_t k = 0; k < half; k++) {
                const HB_T wr = tw[2 * k * step], wi = sign * tw[2 * k * step + 1];
                HB_T *restrict ur = re + (i + k) * L, *restrict ui = im + (i + k) * L;
                HB_T *restrict vr = re + (i + k + half) * L, *restrict vi = im + (i + k + half) * L;
                for (int64_t t = 0; t < cnt; t++) {
                    const HB_T tr = vr[t] * wr - vi[t] * wi, ti = vr[t] * wi + vi[t] * wr;
                    vr[t] = ur[t] - tr;
                    vi[t] = ui[t] - ti;
                    ur[t] += tr;
                    ui[t] += ti;
                }
            }
    }
}

/* Scratch of one block's transforms, carved from the workspace: grid (lh x lw values), the half planes' real
 * and imaginary parts (bins each), a line (max(lh, lw) complex values, split), every one lane-interleaved. */
typedef struct {
    HB_T *grid, *pr, *pi, *lr, *li, *tw_h, *tw_w;
} HB_F(fft_scratch);

static HB_F(fft_scratch) HB_F(fft_scratch_of)(const hb_fft *f, char *base) {
    const int64_t bins = fft_bins(f), line = f->lh > f->lw ? f->lh : f->lw, L = HB_FFT_LANES;
    HB_F(fft_scratch) s;
    s.grid = (HB_T *)base;
    s.pr = s.grid + f->lh * f->lw * L;
    s.pi = s.pr + bins * L;
    s.lr = s.pi + bins * L;
    s.li = s.lr + line * L;
    s.tw_h = s.li + line * L;
    s.tw_w = s.tw_h + 2 * (f->lh / 2 + 1);
    HB_FC(twiddles)(s.tw_h, f->lh);
    HB_FC(twiddles)(s.tw_w, f->lw);
    return s;
}

/* Lane t of the grid (lh x lw, zero elsewhere) = the rows x cols plane src[t] at row stride sh and column stride
 * sw, placed at (oh, ow); rotated by 180 degrees where flip. */
static void HB_F(fft_load)(const hb_fft *f, HB_F(fft_scratch) *s, const HB_S *const *src, int64_t cnt,
                           int64_t rows, int64_t cols, int64_t sh, int64_t sw, int64_t oh, int64_t ow, int flip) {
    const int64_t L = HB_FFT_LANES;
    memset(s->grid, 0, (size_t)(f->lh * f->lw * L) * sizeof(HB_T));
    for (int64_t t = 0; t < cnt; t++)
        for (int64_t i = 0; i < rows; i++) {
            const HB_S *row = src[t] + (flip ? rows - 1 - i : i) * sh;
            HB_T *g = s->grid + ((i + oh) * f->lw + ow) * L + t;
            if (flip)
                for (int64_t j = 0; j < cols; j++) g[j * L] = HB_LD(row[(cols - 1 - j) * sw]);
            else
                for (int64_t j = 0; j < cols; j++) g[j * L] = HB_LD(row[j * sw]);
        }
}

/* The half spectra of rows i and i + 1 of the grid's lanes (row i + 1 taken as zero where !two) into the half planes:
 * the two real rows are one complex row a + ib, transformed once and separated by the spectra's symmetry,
 * A[k] = (Z[k] + conj Z[-k]) / 2 and B[k] = (Z[k] - conj Z[-k]) / 2i. */
static void HB_F(fft_row_pair)(const hb_fft *f, HB_F(fft_scratch) *s, int64_t cnt, int64_t i, int two) {
    const int64_t hw = f->lw / 2 + 1, L = HB_FFT_LANES;
    const size_t row = (size_t)(f->lw * L) * sizeof(HB_T);
    memcpy(s->lr, s->grid + i * f->lw * L, row);
    if (two)
        memcpy(s->li, s->grid + (i + 1) * f->lw * L, row);
    else
        memset(s->li, 0, row);
    HB_F(fftv)(s->lr, s->li, f->lw, cnt, s->tw_w, 0);
    HB_T *restrict ar = s->pr + i * hw * L, *restrict ai = s->pi + i * hw * L;
    HB_T *restrict br = s->pr + (i + 1) * hw * L, *restrict bi = s->pi + (i + 1) * hw * L;
    const HB_T h = (HB_T)0.5;
    for (int64_t k = 0; k < hw; k++) {
        const HB_T *z = s->lr + k * L, *zi = s->li + k * L;
        const int64_t c = (f->lw - k) & (f->lw - 1);
        const HB_T *m = s->lr + c * L, *mi = s->li + c * L;
        for (int64_t t = 0; t < cnt; t++) {
            ar[k * L + t] = h * (z[t] + m[t]);
            ai[k * L + t] = h * (zi[t] - mi[t]);
        }
        if (two)
            for (int64_t t = 0; t < cnt; t++) {
                br[k * L + t] = h * (zi[t] + mi[t]);
                bi[k * L + t] = h * (m[t] - z[t]);
            }
    }
}

/* The half spectra of the grid's cnt lanes (rows [r0, r1) hold data) to dst: bin b of lane t at
 * dst[2 * (b * bs + t)]. */
static void HB_F(fft_forward)(const hb_fft *f, HB_F(fft_scratch) *s, int64_t cnt, int64_t r0, int64_t r1, HB_T *dst,
                              int64_t bs) {
    const int64_t hw = f->lw / 2 + 1, L = HB_FFT_LANES;
    const size_t rowb = (size_t)(hw * L) * sizeof(HB_T);
    for (int64_t i = 0; i < f->lh; i++)
        if (i < r0 || i >= r1) {
            memset(s->pr + i * hw * L, 0, rowb);
            memset(s->pi + i * hw * L, 0, rowb);
        }
    for (int64_t i = r0; i < r1; i += 2) HB_F(fft_row_pair)(f, s, cnt, i, i + 1 < r1);
    for (int64_t j = 0; j < hw; j++) {
        for (int64_t i = 0; i < f->lh; i++) {
            memcpy(s->lr + i * L, s->pr + (i * hw + j) * L, (size_t)L * sizeof(HB_T));
            memcpy(s->li + i * L, s->pi + (i * hw + j) * L, (size_t)L * sizeof(HB_T));
        }
        HB_F(fftv)(s->lr, s->li, f->lh, cnt, s->tw_h, 0);
        for (int64_t i = 0; i < f->lh; i++) {
            HB_T *d = dst + 2 * (i * hw + j) * bs;
            for (int64_t t = 0; t < cnt; t++) {
                d[2 * t] = s->lr[i * L + t];
                d[2 * t + 1] = s->li[i * L + t];
            }
        }
    }
}

/* Rows i and i + 1 of the grid's lanes (first cols values, scaled; row i + 1 only where two) from their half
 * spectra in the half planes: one complex inverse of Z = A + iB over the whole row, the half spectra extended by
 * their symmetry (A[-k] = conj A[k]), the real row a its real part and b its imaginary part. The imaginary parts
 * at bins 0 and lw / 2, which a real row's spectrum lacks, are taken as zero. */
static void HB_F(fft_row_pair_inverse)(const hb_fft *f, HB_F(fft_scratch) *s, int64_t cnt, int64_t i, int two,
                                       int64_t cols, HB_T scale) {
    const int64_t hw = f->lw / 2 + 1, L = HB_FFT_LANES;
    const HB_T *ar = s->pr + i * hw * L, *ai = s->pi + i * hw * L;
    const HB_T *br = two ? ar + hw * L : NULL, *bi = two ? ai + hw * L : NULL;
    for (int64_t k = 0; k < hw; k++) {
        const int real = k == 0 || 2 * k == f->lw;
        HB_T *zr = s->lr + k * L, *zi = s->li + k * L;
        for (int64_t t = 0; t < cnt; t++) {
            const HB_T a_i = real ? 0 : ai[k * L + t];
            const HB_T b_r = two ? br[k * L + t] : 0, b_i = two && !real ? bi[k * L + t] : 0;
            zr[t] = ar[k * L + t] - b_i;
            zi[t] = a_i + b_r;
        }
    }
    for (int64_t j = 1; j < f->lw - hw + 1; j++) { /* bins past lw / 2: Z[-j] = conj A[j] + i conj B[j] */
        HB_T *zr = s->lr + (f->lw - j) * L, *zi = s->li + (f->lw - j) * L;
        for (int64_t t = 0; t < cnt; t++) {
            const HB_T b_r = two ? br[j * L + t] : 0, b_i = two ? bi[j * L + t] : 0;
            zr[t] = ar[j * L + t] + b_i;
            zi[t] = b_r - ai[j * L + t];
        }
    }
    HB_F(fftv)(s->lr, s->li, f->lw, cnt, s->tw_w, 1);
    HB_T *g = s->grid + i * f->lw * L;
    for (int64_t q = 0; q < cols * L; q++) g[q] = s->lr[q] * scale;
    if (two) {
        g += f->lw * L;
        for (int64_t q = 0; q < cols * L; q++) g[q] = s->li[q] * scale;
    }
}

/* The real planes whose half spectra are at src (lane t's bin b at src[2 * (b * bs + t)]), their first rows x cols
 * values into the grid's lanes, scaled by 1 / (lh lw). */
static void HB_F(fft_inverse)(const hb_fft *f, HB_F(fft_scratch) *s, int64_t cnt, const HB_T *src, int64_t bs,
                              int64_t rows, int64_t cols) {
    const int64_t hw = f->lw / 2 + 1, L = HB_FFT_LANES;
    for (int64_t j = 0; j < hw; j++) {
        for (int64_t i = 0; i < f->lh; i++) {
            const HB_T *v = src + 2 * (i * hw + j) * bs;
            for (int64_t t = 0; t < cnt; t++) {
                s->lr[i * L + t] = v[2 * t];
                s->li[i * L + t] = v[2 * t + 1];
            }
        }
        HB_F(fftv)(s->lr, s->li, f->lh, cnt, s->tw_h, 1);
        for (int64_t i = 0; i < rows; i++) {
            memcpy(s->pr + (i * hw + j) * L, s->lr + i * L, (size_t)L * sizeof(HB_T));
            memcpy(s->pi + (i * hw + j) * L, s->li + i * L, (size_t)L * sizeof(HB_T));
        }
    }
    const HB_T scale = (HB_T)1 / (HB_T)(f->lh * f->lw);
    for (int64_t i = 0; i < rows; i += 2) HB_F(fft_row_pair_inverse)(f, s, cnt, i, i + 1 < rows, cols, scale);
}

/* The rows x cols plane dst[t] (strides sh, sw; rotated where flip) = alpha * lane t of the grid + beta * it,
 * rounded once. */
static void HB_F(fft_store)(const hb_fft *f, const HB_F(fft_scratch) *s, HB_S *const *dst, int64_t cnt,
                            int64_t rows, int64_t cols, int64_t sh, int64_t sw, int flip, double alpha, double beta) {
    const HB_T a = (HB_T)alpha, b = (HB_T)beta;
    const int64_t L = HB_FFT_LANES;
    for (int64_t t = 0; t < cnt; t++)
        for (int64_t i = 0; i < rows; i++) {
            const HB_T *g = s->grid + i * f->lw * L + t;
            HB_S *row = dst[t] + (flip ? rows - 1 - i : i) * sh;
            for (int64_t j = 0; j < cols; j++) {
                HB_S *d = row + (flip ? cols - 1 - j : j) * sw;
                *d = beta == 0.0 ? HB_ST(a * g[j * L]) : HB_ST(a * g[j * L] + b * HB_LD(*d));
            }
        }
}

/* Where planes p0 .. p0 + cnt - 1 start, of planes numbered u * inner + v, plane (u, v) at offset u * su + v * sv. */
static void HB_F(fft_planes)(int64_t p0, int64_t cnt, int64_t inner, int64_t su, int64_t sv, int64_t *at) {
    for (int64_t t = 0; t < cnt; t++) at[t] = ((p0 + t) / inner) * su + ((p0 + t) % inner) * sv;
}

/* The spectra of the planes numbered u * inner + v (plane (u, v) at base + u * su + v * sv, rows x cols placed
 * at (oh, ow), rotated where flip) into buf: plane id p at buf[2 * p], bin stride `total` planes. */
static void HB_F(fft_spectra)(const hb_fft *f, HB_F(fft_scratch) *s, const HB_S *base, int64_t total,
                              int64_t inner, int64_t su, int64_t sv, int64_t rows, int64_t cols, int64_t sh,
                              int64_t sw, int64_t oh, int64_t ow, int flip, HB_T *buf) {
    for (int64_t p0 = 0; p0 < total; p0 += HB_FFT_LANES) {
        const int64_t cnt = total - p0 < HB_FFT_LANES ? total - p0 : HB_FFT_LANES;
        int64_t at[HB_FFT_LANES];
        const HB_S *src[HB_FFT_LANES];
        HB_F(fft_planes)(p0, cnt, inner, su, sv, at);
        for (int64_t t = 0; t < cnt; t++) src[t] = base + at[t];
        HB_F(fft_load)(f, s, src, cnt, rows, cols, sh, sw, oh, ow, flip);
        HB_F(fft_forward)(f, s, cnt, oh, oh + rows, buf + 2 * p0, total);
    }
}

/* The planes numbered u * inner + v from their spectra in buf (as fft_spectra writes them) to plane (u, v) at
 * base + u * su + v * sv: rows x cols, rotated where flip, with alpha and beta. */
static void HB_F(fft_outputs)(const hb_fft *f, HB_F(fft_scratch) *s, const HB_T *buf, int64_t total, int64_t inner,
                              HB_S *base, int64_t su, int64_t sv, int64_t rows, int64_t cols, int64_t sh,
                              int64_t sw, int flip, double alpha, double beta) {
    for (int64_t p0 = 0; p0 < total; p0 += HB_FFT_LANES) {
        const int64_t cnt = total - p0 < HB_FFT_LANES ? total - p0 : HB_FFT_LANES;
        int64_t at[HB_FFT_LANES];
        HB_S *dst[HB_FFT_LANES];
        HB_F(fft_planes)(p0, cnt, inner, su, sv, at);
        for (int64_t t = 0; t < cnt; t++) dst[t] = base + at[t];
        HB_F(fft_inverse)(f, s, cnt, buf + 2 * p0, total, rows, cols);
        HB_F(fft_store)(f, s, dst, cnt, rows, cols, sh, sw, flip, alpha, beta);
    }
}

static void HB_F(fft_buffers)(const hb_fft *f, void *ws, HB_T **fs, HB_T **xs, HB_T **ys, HB_F(fft_scratch) *s) {
    size_t at[3];
    fft_layout(f, sizeof(HB_T), at);
    *fs = ws;
    *xs = (HB_T *)((char *)ws + at[0]);
    *ys = (HB_T *)((char *)ws + at[1]);
    *s = HB_F(fft_scratch_of)(f, (char *)ws + at[2]);
}

void HB_F(hb_fft_run)(const hb_fft *f, const HB_S *x, const HB_S *w, HB_S *y, double alpha, double beta, void *ws) {
    HB_T *F, *X, *Y;
    HB_F(fft_scratch) s;
    HB_F(fft_buffers)(f, ws, &F, &X, &Y, &s);
    const hb_wino *t = &f->g;
    const int64_t cin = t->cin, cout = t->cout, n = t->n, bins = fft_bins(f);
    for (int64_t g = 0; g < t->groups; g++) {
        /* Filter (i, o) is plane i * cout + o; sample n's channel c is plane c * N + n. */
        HB_F(fft_spectra)(f, &s, w + g * t->f_group, cin * cout, cout, t->f_in, t->f_out, t->r, t->s, t->f_r,
                          t->f_s, 0, 0, t->flip, F);
        for (int64_t i0 = 0; i0 < t->p; i0 += f->tp)
            for (int64_t j0 = 0; j0 < t->q; j0 += f->tq) {
                const hb_fft_span a = fft_span(i0, f->tp, t->p, t->pad_h, t->r, t->h);
                const hb_fft_span b = fft_span(j0, f->tq, t->q, t->pad_w, t->s, t->w);
                HB_F(fft_spectra)(f, &s, x + g * cin * t->xs_c + a.in0 * t->xs_h + b.in0 * t->xs_w, cin * n, n,
                                  t->xs_c, t->xs_n, a.in, b.in, t->xs_h, t->xs_w, a.at, b.at, 0, X);
                /* Per bin: Y_b (cout x N) = F_b^H X_b, F_b being cin x cout: the correlation's conjugate. */
                for (int64_t k = 0; k < bins; k++)
                    HB_FC(fft_gemm)(HB_CBLAS_CONJ_TRANS, HB_CBLAS_NO_TRANS, (int)cout, (int)n, (int)cin,
                                    F + 2 * k * cin * cout, (int)cout, X + 2 * k * cin * n, (int)n,
                                    Y + 2 * k * cout * n, (int)n, 0);
                HB_F(fft_outputs)(f, &s, Y, cout * n, n, y + g * cout * t->ys_c + i0 * t->ys_h + j0 * t->ys_w,
                                  t->ys_c, t->ys_n, a.out, b.out, t->ys_h, t->ys_w, 0, alpha, beta);
            }
    }
}

void HB_F(hb_fft_grad_run)(const hb_fft *f, const HB_S *x, const HB_S *dy, HB_S *dw, double alpha, double beta,
                           void *ws) {
    HB_T *F, *X, *Y;
    HB_F(fft_scratch) s;
    HB_F(fft_buffers)(f, ws, &F, &X, &Y, &s);
    const hb_wino *t = &f->g;
    const int64_t cin = t->cin, cout = t->cout, n = t->n, bins = fft_bins(f);
    for (int64_t g = 0; g < t->groups; g++) {
        int add = 0;
        for (int64_t i0 = 0; i0 < t->p; i0 += f->tp)
            for (int64_t j0 = 0; j0 < t->q; j0 += f->tq, add = 1) {
                const hb_fft_span a = fft_span(i0, f->tp, t->p, t->pad_h, t->r, t->h);
                const hb_fft_span b = fft_span(j0, f->tq, t->q, t->pad_w, t->s, t->w);
                HB_F(fft_spectra)(f, &s, x + g * cin * t->xs_c + a.in0 * t->xs_h + b.in0 * t->xs_w, cin * n, n,
                                  t->xs_c, t->xs_n, a.in, b.in, t->xs_h, t->xs_w, a.at, b.at, 0, X);
                HB_F(fft_spectra)(f, &s, dy + g * cout * t->ys_c + i0 * t->ys_h + j0 * t->ys_w, cout * n, n,
                                  t->ys_c, t->ys_n, a.out, b.out, t->ys_h, t->ys_w, 0, 0, 0, Y);
                /* Per bin: F_b (cin x cout) += X_b DY_b^H, a sum over the batch and the tiles. */
                for (int64_t k = 0; k < bins; k++)
                    HB_FC(fft_gemm)(HB_CBLAS_NO_TRANS, HB_CBLAS_CONJ_TRANS, (int)cin, (int)cout, (int)n,
                                    X + 2 * k * cin * n, (int)n, Y + 2 * k * cout * n, (int)n,
                                    F + 2 * k * cin * cout, (int)cout, add);
            }
        HB_F(fft_outputs)(f, &s, F, cin * cout, cout, dw + g * t->f_group, t->f_in, t->f_out, t->r, t->s, t->f_r,
                          t->f_s, t->flip, alpha, beta);
    }
}

#endif
