/*
 * Winograd F(2x2, 3x3), non-fused (Lavin & Gray's transforms). 2.25x fewer multiplications than direct 3x3,
 * paid for with transformed copies of the whole batch in the workspace: U (filter, 16 x cout x cin),
 * V (input, 16 x cin x tiles) and M (products, 16 x cout x tiles), tiles = N * ceil(P/2) * ceil(Q/2).
 * Backward filter differentiates the same forward: with Y = A^T [U . V] A per tile and U = G g G^T, the filter's
 * gradient is dg = G^T [sum over tiles of (A dY A^T) . V] G, so it keeps V, holds Z = A dY A^T (16 x cout x
 * tiles) where M was, and its 16 products (cout x cin, a sum over the batch's tiles) where U was: the same
 * workspace.
 * 16-bit data: U, V and M are float (the workspace is sized with elem_size 4), inputs are converted as they are
 * transformed and outputs rounded once. Template file: instantiated per storage type by hb_kern_tmpl.h.
 */
#ifndef HB_T
#include "hb_kern.h"

#include <limits.h>
#include <string.h>

/* Tiles per row processed together by the transforms (stack rows of 2 * HB_WT + 2 elements). */
#define HB_WT 64

int hb_wino_shape_ok(const hb_problem *p) {
    return p->w.sp[0] == 1 && p->x.sp[0] == 1 && p->y.sp[0] == 1 && p->w.sp[1] == 3 && p->w.sp[2] == 3 &&
           p->stride[1] == 1 && p->stride[2] == 1 && p->dilation[1] == 1 && p->dilation[2] == 1;
}

/* Backward data is the forward convolution of dy with the filter transposed (K <-> C within each group), rotated by
 * 180 degrees and with padding r - 1 - pad (2 - pad for Winograd's 3x3). */
hb_wino hb_wino_of(const hb_problem *p, int backward_data) {
    const hb_tensor *in = backward_data ? &p->y : &p->x, *out = backward_data ? &p->x : &p->y;
    const int64_t kg = p->w.k / p->groups, r = p->w.sp[1], s = p->w.sp[2];
    hb_wino wp = {
        .n = p->x.n, .groups = p->groups, .cin = backward_data ? kg : p->w.c, .cout = backward_data ? p->w.c : kg,
        .h = in->sp[1], .w = in->sp[2], .p = out->sp[1], .q = out->sp[2], .r = r, .s = s,
        .pad_h = backward_data ? r - 1 - p->pad[1] : p->pad[1], .pad_w = backward_data ? s - 1 - p->pad[2] : p->pad[2],
        .xs_n = in->stride_n, .xs_c = in->stride_c, .xs_h = in->stride_sp[1], .xs_w = in->stride_sp[2],
        .ys_n = out->stride_n, .ys_c = out->stride_c, .ys_h = out->stride_sp[1], .ys_w = out->stride_sp[2],
        .f_group = kg * p->w.stride_k, .f_out = backward_data ? p->w.stride_c : p->w.stride_k,
        .f_in = backward_data ? p->w.stride_k : p->w.stride_c, .f_r = p->w.stride_sp[1], .f_s = p->w.stride_sp[2],
        .flip = backward_data ? p->cross_correlation : !p->cross_correlation,
    };
    return wp;
}

static int64_t wino_tiles(const hb_wino *wp) { return wp->n * ((wp->p + 1) / 2) * ((wp->q + 1) / 2); }

/* The workspace's three buffers, each aligned, for elements of es bytes: 16 x cout x cin at 0, 16 x cin x tiles at
 * *inputs, 16 x cout x tiles at *outputs; returns the total (SIZE_MAX on overflow). */
static size_t wino_layout(const hb_wino *wp, size_t es, size_t *inputs, size_t *outputs) {
    int64_t t = wino_tiles(wp);
    *inputs = hb_align(hb_bytes(16 * wp->cout * wp->cin, es));
    *outputs = hb_add_bytes(*inputs, hb_align(hb_bytes(16 * wp->cin * t, es)));
    return hb_add_bytes(*outputs, hb_bytes(16 * wp->cout * t, es));
}

size_t hb_wino_workspace(const hb_wino *wp, size_t es) {
    if (wino_tiles(wp) > INT_MAX || wp->cin > INT_MAX || wp->cout > INT_MAX) return SIZE_MAX;
    size_t inputs, outputs;
    return wino_layout(wp, es, &inputs, &outputs);
}

size_t hb_wino_problem_workspace(const hb_problem *p, int backward_data) {
    if (!hb_wino_shape_ok(p)) return SIZE_MAX;
    hb_wino wp = hb_wino_of(p, backward_data);
    return hb_wino_workspace(&wp, hb_elem_size(p));
}

#define HB_TMPL_FILE "hb_kern_winograd.c"
#include "hb_kern_tmpl.h"

cudnnStatus_t hb_wino_problem_run(const hb_problem *p, int backward_data, const void *data, const void *filter,
                                  void *out, double alpha, double beta, void *ws) {
    hb_wino wp = hb_wino_of(p, backward_data);
    HB_DISPATCH(p->dtype, hb_wino_run, &wp, data, filter, out, alpha, beta, ws);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_wino_grad_problem_run(const hb_problem *p, const void *x, const void *dy, void *dw, double alpha,
                                       double beta, void *ws) {
    hb_wino wp = hb_wino_of(p, 0);
    HB_DISPATCH(p->dtype, hb_wino_grad_run, &wp, x, dy, dw, alpha, beta, ws);
    return CUDNN_STATUS_SUCCESS;
}

#else

/* U = G g G^T per (out, in) channel pair of group g. */
static void HB_F(wino_filter)(const hb_wino *wp, const HB_S *w, int64_t g, HB_T *U) {
    const int64_t cin = wp->cin, cout = wp->cout;
    for (int64_t o = 0; o < cout; o++)
        for (int64_t i = 0; i < cin; i++) {
            const HB_S *f = w + g * wp->f_group + o * wp->f_out + i * wp->f_in;
            HB_T k[3][3], t[4][3];
            for (int r = 0; r < 3; r++)
                for (int s = 0; s < 3; s++) {
                    int rr = wp->flip ? 2 - r : r, ss = wp->flip ? 2 - s : s;
                    k[r][s] = HB_LD(f[rr * wp->f_r + ss * wp->f_s]);
                }
            for (int s = 0; s < 3; s++) {
                t[0][s] = k[0][s];
                t[1][s] = (HB_T)0.5 * (k[0][s] + k[1][s] + k[2][s]);
                t[2][s] = (HB_T)0.5 * (k[0][s] - k[1][s] + k[2][s]);
                t[3][s] = k[2][s];
            }
            for (int r = 0; r < 4; r++) {
                HB_T *u = U + (r * 4) * cout * cin + o * cin + i;
                const int64_t e = cout * cin;
                u[0] = t[r][0];
                u[e] = (HB_T)0.5 * (t[r][0] + t[r][1] + t[r][2]);
                u[2 * e] = (HB_T)0.5 * (t[r][0] - t[r][1] + t[r][2]);
                u[3 * e] = t[r][2];
            }
        }
}

/* The 4 input rows of tile row ty starting at column tile tx0, zero-padded, as nx tiles need them. */
static void HB_F(wino_rows)(const hb_wino *wp, const HB_S *xc, int64_t ty, int64_t tx0, int64_t nx,
                            HB_T rows[4][2 * HB_WT + 2]) {
    const int64_t w0 = 2 * tx0 - wp->pad_w;
    const int64_t len = 2 * nx + 2;
    int64_t ja = -w0 > 0 ? -w0 : 0, jb = wp->w - w0 < len ? wp->w - w0 : len;
    if (jb < ja) jb = ja;
    for (int r = 0; r < 4; r++) {
        int64_t hh = 2 * ty - wp->pad_h + r;
        if (hh < 0 || hh >= wp->h) {
            for (int64_t j = 0; j < len; j++) rows[r][j] = 0;
            continue;
        }
        const HB_S *xr = xc + hh * wp->xs_h;
        for (int64_t j = 0; j < ja; j++) rows[r][j] = 0;
        for (int64_t j = ja; j < jb; j++) rows[r][j] = HB_LD(xr[(w0 + j) * wp->xs_w]);
        for (int64_t j = jb; j < len; j++) rows[r][j] = 0;
    }
}

/* V = B^T d B per input channel of group g and 4x4 input tile (stride 2, overlapping by 2). A row of up to HB_WT
 * tiles is done at once from 4 zero-padded copies of the input rows, so the loops over tiles have no bounds tests
 * and vectorise. */
static void HB_F(wino_input)(const hb_wino *wp, const HB_S *x, int64_t g, HB_T *V) {
    const int64_t th = (wp->p + 1) / 2, tw = (wp->q + 1) / 2, nt = wp->n * th * tw, cin = wp->cin;
    for (int64_t i = 0; i < cin; i++)
        for (int64_t n = 0; n < wp->n; n++) {
            const HB_S *xc = x + n * wp->xs_n + (g * cin + i) * wp->xs_c;
            for (int64_t ty = 0; ty < th; ty++)
                for (int64_t tx0 = 0; tx0 < tw; tx0 += HB_WT) {
                    const int64_t nx = tw - tx0 < HB_WT ? tw - tx0 : HB_WT;
                    HB_T rows[4][2 * HB_WT + 2];
                    HB_F(wino_rows)(wp, xc, ty, tx0, nx, rows);
                    HB_T vt[16][HB_WT]; /* staged on the stack: 16 output streams defeat the vectoriser */
                    for (int64_t j = 0; j < nx; j++) {
                        HB_T t[4][4];
                        for (int s = 0; s < 4; s++) {
                            HB_T d0 = rows[0][2 * j + s], d1 = rows[1][2 * j + s];
                            HB_T d2 = rows[2][2 * j + s], d3 = rows[3][2 * j + s];
                            t[0][s] = d0 - d2;
                            t[1][s] = d1 + d2;
                            t[2][s] = d2 - d1;
                            t[3][s] = d1 - d3;
                        }
                        for (int r = 0; r < 4; r++) {
                            vt[r * 4 + 0][j] = t[r][0] - t[r][2];
                            vt[r * 4 + 1][j] = t[r][1] + t[r][2];
                            vt[r * 4 + 2][j] = t[r][2] - t[r][1];
                            vt[r * 4 + 3][j] = t[r][1] - t[r][3];
                        }
                    }
                    HB_T *v = V + i * nt + (n * th + ty) * tw + tx0;
                    for (int el = 0; el < 16; el++) memcpy(v + el * cin * nt, vt[el], (size_t)nx * sizeof(HB_T));
                }
        }
}

/* Y = A^T m A of group g for a row of tiles at a time into two stack output rows, then written with alpha/beta;
 * edge tiles drop their outputs past P or Q. */
static void HB_F(wino_output)(const hb_wino *wp, const HB_T *M, int64_t g, HB_S *y, double alpha, double beta) {
    const int64_t th = (wp->p + 1) / 2, tw = (wp->q + 1) / 2, nt = wp->n * th * tw, cout = wp->cout;
    const HB_T a = (HB_T)alpha, b = (HB_T)beta;
    for (int64_t o = 0; o < cout; o++)
        for (int64_t n = 0; n < wp->n; n++) {
            HB_S *yc = y + n * wp->ys_n + (g * cout + o) * wp->ys_c;
            for (int64_t ty = 0; ty < th; ty++)
                for (int64_t tx0 = 0; tx0 < tw; tx0 += HB_WT) {
                    const int64_t nx = tw - tx0 < HB_WT ? tw - tx0 : HB_WT;
                    const int64_t e = cout * nt;
                    const HB_T *m = M + o * nt + (n * th + ty) * tw + tx0;
                    HB_T out[2][2 * HB_WT];
                    for (int64_t j = 0; j < nx; j++) {
                        HB_T t[2][4];
                        for (int s = 0; s < 4; s++) {
                            t[0][s] = m[s * e + j] + m[(4 + s) * e + j] + m[(8 + s) * e + j];
                            t[1][s] = m[(4 + s) * e + j] - m[(8 + s) * e + j] - m[(12 + s) * e + j];
                        }
                        for (int r = 0; r < 2; r++) {
                            out[r][2 * j] = t[r][0] + t[r][1] + t[r][2];
                            out[r][2 * j + 1] = t[r][1] - t[r][2] - t[r][3];
                        }
                    }
                    const int64_t q0 = 2 * tx0, nq = wp->q - q0 < 2 * nx ? wp->q - q0 : 2 * nx;
                    for (int r = 0; r < 2 && 2 * ty + r < wp->p; r++) {
                        HB_S *dst = yc + (2 * ty + r) * wp->ys_h + q0 * wp->ys_w;
                        if (beta == 0.0)
                            for (int64_t j = 0; j < nq; j++) dst[j * wp->ys_w] = HB_ST(a * out[r][j]);
                        else
                            for (int64_t j = 0; j < nq; j++)
                                dst[j * wp->ys_w] = HB_ST(a * out[r][j] + b * HB_LD(dst[j * wp->ys_w]));
                    }
                }
        }
}

/* The workspace's three buffers (wino_layout) as arrays of the compute type. */
static void HB_F(wino_buffers)(const hb_wino *wp, void *ws, HB_T **filters, HB_T **inputs, HB_T **outputs) {
    size_t in, out;
    wino_layout(wp, sizeof(HB_T), &in, &out);
    *filters = ws;
    *inputs = (HB_T *)((char *)ws + in);
    *outputs = (HB_T *)((char *)ws + out);
}

void HB_F(hb_wino_run)(const hb_wino *wp, const HB_S *x, const HB_S *w, HB_S *y, double alpha, double beta,
                       void *ws) {
    const int64_t nt = wino_tiles(wp);
    const int64_t cin = wp->cin, cout = wp->cout;
    HB_T *U, *V, *M;
    HB_F(wino_buffers)(wp, ws, &U, &V, &M);
    for (int64_t g = 0; g < wp->groups; g++) {
        HB_F(wino_filter)(wp, w, g, U);
        HB_F(wino_input)(wp, x, g, V);
        /* The 16 independent products M_e = U_e V_e. */
        hb_mview mu = {cout, cin, cin, 1}, mv = {cin, nt, nt, 1}, mm = {cout, nt, nt, 1};
        hb_gemm_call call;
        if (!hb_gemm_plan(mu, mv, mm, &call)) return; /* excluded by hb_wino_workspace's limits */
        for (int e = 0; e < 16; e++)
            HB_FC(hb_gemm_run)(&call, 1, U + e * cout * cin, V + e * cin * nt, 0, M + e * cout * nt);
        HB_F(wino_output)(wp, M, g, y, alpha, beta);
    }
}

/* Z = A dY A^T per output channel of group g and 2x2 tile of dy (outputs past P or Q are zero: the forward drops
 * them), laid out as V is: element e, then channel, then tile. A row of up to HB_WT tiles at a time, as
 * wino_input does, from two zero-padded copies of the dy rows. */
static void HB_F(wino_grad_dy)(const hb_wino *wp, const HB_S *dy, int64_t g, HB_T *Z) {
    const int64_t th = (wp->p + 1) / 2, tw = (wp->q + 1) / 2, nt = wp->n * th * tw, cout = wp->cout;
    for (int64_t o = 0; o < cout; o++)
        for (int64_t n = 0; n < wp->n; n++) {
            const HB_S *yc = dy + n * wp->ys_n + (g * cout + o) * wp->ys_c;
            for (int64_t ty = 0; ty < th; ty++)
                for (int64_t tx0 = 0; tx0 < tw; tx0 += HB_WT) {
                    const int64_t nx = tw - tx0 < HB_WT ? tw - tx0 : HB_WT;
                    const int64_t q0 = 2 * tx0, nq = wp->q - q0 < 2 * nx ? wp->q - q0 : 2 * nx;
                    HB_T rows[2][2 * HB_WT];
                    for (int r = 0; r < 2; r++) {
                        int64_t j = 0;
                        if (2 * ty + r < wp->p) {
                            const HB_S *src = yc + (2 * ty + r) * wp->ys_h + q0 * wp->ys_w;
                            for (; j < nq; j++) rows[r][j] = HB_LD(src[j * wp->ys_w]);
                        }
                        for (; j < 2 * nx; j++) rows[r][j] = 0;
                    }
                    HB_T zt[16][HB_WT]; /* staged on the stack, as in wino_input */
                    for (int64_t j = 0; j < nx; j++) {
                        const HB_T d00 = rows[0][2 * j], d01 = rows[0][2 * j + 1];
                        const HB_T d10 = rows[1][2 * j], d11 = rows[1][2 * j + 1];
                        const HB_T t[4][2] = {{d00, d01}, {d00 + d10, d01 + d11}, {d00 - d10, d01 - d11}, {-d10, -d11}};
                        for (int a = 0; a < 4; a++) {
                            zt[4 * a + 0][j] = t[a][0];
                            zt[4 * a + 1][j] = t[a][0] + t[a][1];
                            zt[4 * a + 2][j] = t[a][0] - t[a][1];
                            zt[4 * a + 3][j] = -t[a][1];
                        }
                    }
                    HB_T *z = Z + o * nt + (n * th + ty) * tw + tx0;
                    for (int el = 0; el < 16; el++) memcpy(z + el * cout * nt, zt[el], (size_t)nx * sizeof(HB_T));
                }
        }
}

/* dw = alpha * G^T m G + beta * dw per (out, in) channel pair of group g, m the 16 summed products. */
static void HB_F(wino_grad_filter)(const hb_wino *wp, const HB_T *M, int64_t g, HB_S *dw, double alpha,
                                   double beta) {
    const int64_t cin = wp->cin, cout = wp->cout, e = cout * cin;
    const HB_T a = (HB_T)alpha, b = (HB_T)beta;
    for (int64_t o = 0; o < cout; o++)
        for (int64_t i = 0; i < cin; i++) {
            const HB_T *m = M + o * cin + i;
            HB_T t[3][4], k[3][3];
            for (int c = 0; c < 4; c++) {
                HB_T m0 = m[c * e], m1 = m[(4 + c) * e], m2 = m[(8 + c) * e], m3 = m[(12 + c) * e];
                t[0][c] = m0 + (HB_T)0.5 * (m1 + m2);
                t[1][c] = (HB_T)0.5 * (m1 - m2);
                t[2][c] = (HB_T)0.5 * (m1 + m2) + m3;
            }
            for (int r = 0; r < 3; r++) {
                k[r][0] = t[r][0] + (HB_T)0.5 * (t[r][1] + t[r][2]);
                k[r][1] = (HB_T)0.5 * (t[r][1] - t[r][2]);
                k[r][2] = (HB_T)0.5 * (t[r][1] + t[r][2]) + t[r][3];
            }
            HB_S *f = dw + g * wp->f_group + o * wp->f_out + i * wp->f_in;
            for (int r = 0; r < 3; r++)
                for (int s = 0; s < 3; s++) {
                    int rr = wp->flip ? 2 - r : r, ss = wp->flip ? 2 - s : s;
                    HB_S *dst = f + rr * wp->f_r + ss * wp->f_s;
                    *dst = beta == 0.0 ? HB_ST(a * k[r][s]) : HB_ST(a * k[r][s] + b * HB_LD(*dst));
                }
        }
}

void HB_F(hb_wino_grad_run)(const hb_wino *wp, const HB_S *x, const HB_S *dy, HB_S *dw, double alpha, double beta,
                            void *ws) {
    const int64_t nt = wino_tiles(wp);
    const int64_t cin = wp->cin, cout = wp->cout;
    HB_T *M, *V, *Z; /* the products where the forward keeps U, dy's transforms where it keeps its products */
    HB_F(wino_buffers)(wp, ws, &M, &V, &Z);
    for (int64_t g = 0; g < wp->groups; g++) {
        HB_F(wino_input)(wp, x, g, V);
        HB_F(wino_grad_dy)(wp, dy, g, Z);
        /* The 16 independent products M_e = Z_e V_e^T, each a sum over the batch's tiles. */
        hb_mview mz = {cout, nt, nt, 1}, mv = {nt, cin, 1, nt}, mm = {cout, cin, cin, 1};
        hb_gemm_call call;
        if (!hb_gemm_plan(mz, mv, mm, &call)) return; /* excluded by hb_wino_workspace's limits */
        for (int e = 0; e < 16; e++)
            HB_FC(hb_gemm_run)(&call, 1, Z + e * cout * nt, V + e * cin * nt, 0, M + e * cout * cin);
        HB_F(wino_grad_filter)(wp, M, g, dw, alpha, beta);
    }
}

#endif
