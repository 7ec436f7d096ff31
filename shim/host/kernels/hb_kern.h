/*
 * Shared helpers of the host backend's compute kernels (hb_fwd*.c, hb_bwd_data*.c, hb_bwd_filter*.c):
 * problem geometry, output-range arithmetic, the BLAS GEMM wrapper over strided matrix views, im2col/col2im,
 * the Winograd F(2x2,3x3) core and the two-thread runner used by the non-deterministic algorithms.
 *
 * Typed helpers exist once per storage type, suffixed _f (float), _d (double), _h (HALF) and _b (BFLOAT16);
 * kernel files are written once as a template instantiated for the four by hb_kern_tmpl.h (see hb_fwd_direct.c)
 * and pick the right helper via HB_F (storage type) or HB_FC (compute type).
 *
 * 16-bit data (HALF, BFLOAT16) is computed in float: every value is converted on load and the result rounded
 * (to nearest even) once on store -- except in the atomics-based ALGO_0s, which round on every atomic add, as
 * GPU half atomics do. Direct algorithms convert on the fly; GEMM-based ones convert into float buffers that are
 * part of their reported workspace. HALF with a HALF compute type ("true half") is computed the
 * same way: the host backend accumulates in float, which is at least as accurate as half accumulation.
 */
#ifndef UCUDNN_HB_KERN_H
#define UCUDNN_HB_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "hb_internal.h"

/* The scipy-openblas32 CBLAS: prefixed symbols, standard argument order, 32-bit integers. */
enum { HB_CBLAS_ROW_MAJOR = 101, HB_CBLAS_COL_MAJOR = 102 };
enum { HB_CBLAS_NO_TRANS = 111, HB_CBLAS_TRANS = 112 };
void scipy_cblas_sgemm(int layout, int transa, int transb, int m, int n, int k, float alpha, const float *a,
                       int lda, const float *b, int ldb, float beta, float *c, int ldc);
void scipy_cblas_dgemm(int layout, int transa, int transb, int m, int n, int k, double alpha, const double *a,
                       int lda, const double *b, int ldb, double beta, double *c, int ldc);

/* Everything a kernel needs about sizes, derived once from the problem. */
typedef struct {
    int64_t n;        /* batch */
    int64_t groups;
    int64_t cg, kg;   /* input / output channels per group */
    int64_t in[HB_SP], f[HB_SP], out[HB_SP];
    int64_t taps;     /* product of filter spatial extents */
    int64_t pin;      /* product of input spatial extents */
    int64_t pout;     /* product of output spatial extents */
    int64_t crs;      /* cg * taps: the GEMM reduction length of forward */
} hb_geom;

void hb_geom_init(hb_geom *g, const hb_problem *p);

/* Filter tap index i of spatial dim d as an input offset multiplier: CONVOLUTION mode flips the filter. */
static inline int64_t hb_tap(const hb_problem *p, int d, int64_t i) {
    return p->cross_correlation ? i : p->w.sp[d] - 1 - i;
}

/* Ceiling division for any sign of a and positive b. */
static inline int64_t hb_ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/*
 * Output positions o in [0, out) whose input coordinate o * st + off lies in [lo, hi): returns [*o0, *o1).
 * This is what lets the direct loops run without a bounds test in the innermost loop.
 */
static inline void hb_out_range(int64_t out, int64_t st, int64_t off, int64_t lo, int64_t hi, int64_t *o0,
                                int64_t *o1) {
    int64_t a = hb_ceil_div(lo - off, st), b = hb_ceil_div(hi - off, st);
    if (a < 0) a = 0;
    if (a > out) a = out; /* no position in range: an empty [out, out), never past the row */
    if (b > out) b = out;
    if (b < a) b = a;
    *o0 = a;
    *o1 = b;
}

/* Offset of filter tap number `tap` (flattened over the 3 spatial dims) from the filter strides. */
static inline int64_t hb_filter_tap_offset(const hb_problem *p, int64_t tap) {
    int64_t s = tap % p->w.sp[2], rest = tap / p->w.sp[2];
    int64_t r = rest % p->w.sp[1], t = rest / p->w.sp[1];
    return t * p->w.stride_sp[0] + r * p->w.stride_sp[1] + s * p->w.stride_sp[2];
}

/*
 * How the reduction index (c, tap) of one output channel is laid out in the filter, for the GEMM algorithms:
 * HB_ORDER_CT: index c * taps + tap at unit stride (NCHW), HB_ORDER_TC: tap * cg + c at unit stride (NHWC),
 * HB_ORDER_NONE: neither (the GEMM algorithms then report the problem as unsupported).
 */
enum { HB_ORDER_NONE = -1, HB_ORDER_CT = 0, HB_ORDER_TC = 1 };

/*
 * The workspace and run entries of an algorithm whose kernel `kernel` (a template: kernel_f, _d, _h, _b) works
 * from a `plan` that the file's make_plan(p, &plan) fills, its workspace in plan.total: the workspace is what the
 * plan needs, and run makes the plan again and dispatches on the data type.
 */
#define HB_PLANNED_ALGO(kernel)                                                                                    \
    static size_t workspace(const hb_problem *p) {                                                                 \
        plan pl;                                                                                                   \
        return make_plan(p, &pl) ? pl.total : SIZE_MAX;                                                            \
    }                                                                                                              \
    static cudnnStatus_t run(const hb_problem *p, const void *in0, const void *in1, void *out, double alpha,     \
                             double beta, void *ws, size_t ws_bytes) {                                            \
        (void)ws_bytes;                                                                                            \
        plan pl;                                                                                                   \
        if (!make_plan(p, &pl)) return CUDNN_STATUS_INTERNAL_ERROR;                                                \
        HB_DISPATCH(p->dtype, kernel, p, &pl, in0, in1, out, alpha, beta, ws);                                     \
        return CUDNN_STATUS_SUCCESS;                                                                               \
    }

/*
 * One row of an im2col matrix: channel cc's filter tap `tap` (flattened over the 3 spatial dims), its row in
 * `order`, the input offset of the tap in each spatial dim, and the output positions [qa, qb) along the last dim
 * whose input lies inside the tensor (im2col and col2im walk the same rows).
 */
typedef struct {
    int64_t row, off[3], qa, qb;
} hb_col_row;

static inline void hb_col_row_of(const hb_problem *p, const hb_geom *G, int64_t cc, int64_t tap, int order,
                                 hb_col_row *R) {
    const int64_t at[3] = {tap / (G->f[2] * G->f[1]), (tap / G->f[2]) % G->f[1], tap % G->f[2]};
    R->row = order == HB_ORDER_TC ? tap * G->cg + cc : cc * G->taps + tap;
    for (int d = 0; d < 3; d++) R->off[d] = hb_tap(p, d, at[d]) * p->dilation[d] - p->pad[d];
    hb_out_range(G->out[2], p->stride[2], R->off[2], 0, G->in[2], &R->qa, &R->qb);
}
int hb_filter_order(const hb_problem *p);

/* Whether positions over dims ext[0..nd) of strides str[] flatten to one stride; sets *s to it. */
int hb_flat_stride(int nd, const int64_t *ext, const int64_t *str, int64_t *s);

/* The flat stride of a tensor's spatial positions (0 if none), and of (n, spatial) together (0 if none). */
int64_t hb_spatial_stride(const hb_tensor *t);
int64_t hb_batch_spatial_stride(const hb_tensor *t);

/* A strided matrix view: element (i, j) at ptr[i * rs + j * cs]. */
typedef struct {
    int64_t rows, cols, rs, cs;
} hb_mview;

/* A GEMM C = alpha * A * B + beta * C over views, resolved to one CBLAS call (see hb_gemm_plan). */
typedef struct {
    int layout, transa, transb, m, n, k, lda, ldb, ldc, swap;
} hb_gemm_call;

/* Resolve C[m x n] = A[m x k] * B[k x n] over views into one CBLAS call; 0 if the views do not allow it. */
int hb_gemm_plan(hb_mview a, hb_mview b, hb_mview c, hb_gemm_call *call);
void hb_gemm_run_f(const hb_gemm_call *call, float alpha, const float *a, const float *b, float beta, float *c);
void hb_gemm_run_d(const hb_gemm_call *call, double alpha, const double *a, const double *b, double beta,
                   double *c);

/*
 * The GEMM of forward (y = W_g * col) or backward data (col = W_g^T * dy) for one group, as far as y is
 * concerned: y's [K/groups x P*Q] block of a sample sits beside the column matrix [C/groups * taps x N * P*Q]
 * (leading dimension N * P*Q). HB_Y_FUSED: the whole batch in one call, when y's (n, positions) share one
 * stride (NHWC); HB_Y_PER_SAMPLE: one call a sample, when its positions do (NCHW); HB_Y_STAGED: one call a
 * sample through a packed [K/groups x P*Q] copy of y, for strides BLAS cannot address, and always for 16-bit
 * data (whose y goes through a float copy, and whose filter through its group's packed float copy). The filter
 * is the left operand, in its memory order (*order: HB_ORDER_CT or HB_ORDER_TC, the column matrix's row order);
 * y is the product when y_is_output, else the right operand with the column matrix the product. Returns the
 * mode, -1 if the filter's order or BLAS cannot take even the staged views.
 */
enum { HB_Y_FUSED, HB_Y_PER_SAMPLE, HB_Y_STAGED };
int hb_gemm_plan_y(const hb_problem *p, const hb_geom *G, int y_is_output, int *order, hb_gemm_call *call);

/*
 * The plan of the forward (y_is_output) and backward-data GEMM algorithms: the GEMM on y's side and the byte
 * offsets of what the workspace holds: the column matrix [0, col_bytes), for 16-bit data the group's float filter
 * copy at wconv, the float staging tile at stage (16-bit data or HB_Y_STAGED), and for 16-bit backward data the
 * float dx at dxf; total is the workspace (SIZE_MAX: too large). Returns 0 where the algorithm cannot run.
 */
typedef struct {
    int order, mode; /* mode: HB_Y_* */
    hb_gemm_call call;
    size_t col_bytes, wconv, stage, dxf, total;
} hb_gemm_y_plan;
int hb_gemm_y_plan_make(const hb_problem *p, int y_is_output, hb_gemm_y_plan *pl);

/* Byte size helpers that saturate instead of overflowing (an impossible size becomes SIZE_MAX). */
size_t hb_bytes(int64_t elems, size_t elem_size);
size_t hb_add_bytes(size_t a, size_t b);
/* Bytes of one element of the compute type (workspace buffers): double for DOUBLE, float otherwise. */
static inline size_t hb_elem_size(const hb_problem *p) {
    return p->dtype == CUDNN_DATA_DOUBLE ? sizeof(double) : sizeof(float);
}
/* Workspace offsets are rounded so every section stays 64-byte aligned for the BLAS and vector loops. */
static inline size_t hb_align(size_t b) { return b == SIZE_MAX ? SIZE_MAX : (b + 63) & ~(size_t)63; }

/*
 * im2col of group g, samples [n0, n0 + nb): col is [crs rows x nb * pout cols], row-major with leading
 * dimension ld; rows ordered as `order` (HB_ORDER_CT or HB_ORDER_TC). Padding reads as zero. The tap
 * direction follows the convolution mode, so the filter is always used unflipped. The 16-bit variants write a
 * float col (converting).
 */
void hb_im2col_f(const hb_problem *p, const float *x, int64_t g, int64_t n0, int64_t nb, int order, float *col,
                 int64_t ld);
void hb_im2col_d(const hb_problem *p, const double *x, int64_t g, int64_t n0, int64_t nb, int order, double *col,
                 int64_t ld);
void hb_im2col_h(const hb_problem *p, const hb_half *x, int64_t g, int64_t n0, int64_t nb, int order, float *col,
                 int64_t ld);
void hb_im2col_b(const hb_problem *p, const hb_bf16 *x, int64_t g, int64_t n0, int64_t nb, int order, float *col,
                 int64_t ld);

/* The transpose of im2col: dx[group g, samples n0..] += col (dx already scaled by beta by the caller). */
void hb_col2im_f(const hb_problem *p, const float *col, int64_t g, int64_t n0, int64_t nb, int order, float *dx,
                 int64_t ld);
void hb_col2im_d(const hb_problem *p, const double *col, int64_t g, int64_t n0, int64_t nb, int order, double *dx,
                 int64_t ld);

/* t = beta * t over a whole tensor, exactly 0 when beta == 0 (prior contents, NaN included, ignored). */
void hb_scale_tensor_f(const hb_tensor *t, float *data, double beta);
void hb_scale_tensor_d(const hb_tensor *t, double *data, double beta);
void hb_scale_tensor_h(const hb_tensor *t, hb_half *data, double beta);
void hb_scale_tensor_b(const hb_tensor *t, hb_bf16 *data, double beta);
/* Same for a filter. */
void hb_scale_filter_f(const hb_filter *w, int64_t cg, float *data, double beta);
void hb_scale_filter_d(const hb_filter *w, int64_t cg, double *data, double beta);
void hb_scale_filter_h(const hb_filter *w, int64_t cg, hb_half *data, double beta);
void hb_scale_filter_b(const hb_filter *w, int64_t cg, hb_bf16 *data, double beta);

/*
 * The 16-bit GEMM algorithms' float copies of one group's filter, and back: dst[kk * crs + r] = src[kk * stride_k
 * + r] for kk < kg, r < crs (the reduction index r is at unit stride for HB_ORDER_CT / HB_ORDER_TC filters).
 * The store direction writes dw = f + beta * dw, rounded once (beta == 0: prior contents ignored).
 */
void hb_filter_load_h(const hb_half *src, int64_t stride_k, int64_t kg, int64_t crs, float *dst);
void hb_filter_load_b(const hb_bf16 *src, int64_t stride_k, int64_t kg, int64_t crs, float *dst);
void hb_filter_store_h(const float *f, int64_t kg, int64_t crs, hb_half *dst, int64_t stride_k, double beta);
void hb_filter_store_b(const float *f, int64_t kg, int64_t crs, hb_bf16 *dst, int64_t stride_k, double beta);
/*
 * Samples [0, t->n) and channels [c0, c0 + nc) of a tensor from a packed float buffer f ([n x nc x positions]):
 * data = f + beta * data, rounded once (beta == 0: prior contents ignored).
 */
void hb_tensor_store_h(const float *f, const hb_tensor *t, int64_t c0, int64_t nc, hb_half *data, double beta);
void hb_tensor_store_b(const float *f, const hb_tensor *t, int64_t c0, int64_t nc, hb_bf16 *data, double beta);

/*
 * Winograd F(2x2, 3x3), non-fused: the transforms of the whole batch live in the workspace and the 16
 * element-wise products are batched GEMMs. Used by forward and, with the filter transposed, flipped and the
 * padding mirrored, by backward-data. The filter of output channel o (within group g) and input channel i is
 * at fbase + g * f_group + o * f_out + i * f_in, taps (r, s) at r * f_r + s * f_s; `flip` rotates it by 180.
 * The same geometry serves the FFT algorithms (hb_fft), whose filters may have any extent r x s.
 */
typedef struct {
    int64_t n, groups, cin, cout; /* cin/cout per group */
    int64_t h, w, p, q, r, s;     /* input, output and filter spatial extents */
    int64_t pad_h, pad_w;
    int64_t xs_n, xs_c, xs_h, xs_w, ys_n, ys_c, ys_h, ys_w;
    int64_t f_group, f_out, f_in, f_r, f_s;
    int flip;
} hb_wino;

/* The transform problem of a forward (backward_data 0) or backward-data (1) convolution: backward data is the
 * forward of dy with the filter transposed (K <-> C within each group), rotated, and padded r - 1 - pad. */
hb_wino hb_wino_of(const hb_problem *p, int backward_data);
size_t hb_wino_workspace(const hb_wino *wp, size_t elem_size);
/* Its workspace for problem p, SIZE_MAX when the shape is not one Winograd handles. */
size_t hb_wino_problem_workspace(const hb_problem *p, int backward_data);
/* Run it: data is x (forward) or dy (backward data), out y or dx. */
cudnnStatus_t hb_wino_problem_run(const hb_problem *p, int backward_data, const void *data, const void *filter,
                                  void *out, double alpha, double beta, void *ws);
void hb_wino_run_f(const hb_wino *wp, const float *x, const float *w, float *y, double alpha, double beta,
                   void *ws);
void hb_wino_run_d(const hb_wino *wp, const double *x, const double *w, double *y, double alpha, double beta,
                   void *ws);
/* 16-bit data: transforms, products and workspace in float (elem_size 4), converted on load and store. */
void hb_wino_run_h(const hb_wino *wp, const hb_half *x, const hb_half *w, hb_half *y, double alpha, double beta,
                   void *ws);
void hb_wino_run_b(const hb_wino *wp, const hb_bf16 *x, const hb_bf16 *w, hb_bf16 *y, double alpha, double beta,
                   void *ws);
/* Backward filter by the same transforms (the forward's hb_wino and workspace): x, dy in, dw out. */
cudnnStatus_t hb_wino_grad_problem_run(const hb_problem *p, const void *x, const void *dy, void *dw, double alpha,
                                       double beta, void *ws);
void hb_wino_grad_run_f(const hb_wino *wp, const float *x, const float *dy, float *dw, double alpha, double beta,
                        void *ws);
void hb_wino_grad_run_d(const hb_wino *wp, const double *x, const double *dy, double *dw, double alpha,
                        double beta, void *ws);
void hb_wino_grad_run_h(const hb_wino *wp, const hb_half *x, const hb_half *dy, hb_half *dw, double alpha,
                        double beta, void *ws);
void hb_wino_grad_run_b(const hb_wino *wp, const hb_bf16 *x, const hb_bf16 *dy, hb_bf16 *dw, double alpha,
                        double beta, void *ws);
/* Whether the problem is one Winograd F(2x2,3x3) handles: 2-D, 3x3, stride 1, no dilation. */
int hb_wino_shape_ok(const hb_problem *p);

/*
 * FFT convolution (hb_kern_fft.c): spectra of the whole batch, of the filters and of the products in the
 * workspace, one complex GEMM per frequency bin. The geometry is Winograd's (hb_wino_of), with the transform sizes
 * lh x lw. ALGO_FFT transforms the whole padded plane at once (one tile); ALGO_FFT_TILING cuts the output into
 * tiles of tp x tq, each computed from its own input region on small transforms (32 x 32, 64 x 64 for filters
 * past 16), so its spectra are those of one tile, whatever the image's size.
 */
#define HB_FFT_MAX 256         /* the padded input's largest extent, as cuDNN's FFT */
#define HB_FFT_TILE 32         /* FFT_TILING's transform size for filters up to HB_FFT_TILE / 2 */
#define HB_FFT_TILE_FILTER 32  /* FFT_TILING's largest filter extent (on 64-point transforms) */
#define HB_FFT_RATE 5.0 /* the model rate per direct MAC saved per complex GEMM MAC (hb_fft_model_rate) */
typedef struct {
    hb_wino g;
    int64_t lh, lw; /* transform sizes (powers of two covering one tile's input) */
    int64_t tp, tq; /* one tile's output extents: the whole output for ALGO_FFT */
} hb_fft;
/* Whether the problem is one the FFT algorithms handle (tiled: FFT_TILING): 2-D, stride 1, no dilation,
 * pad < filter, small enough (ALGO_FFT: the padded input; FFT_TILING: the filter). */
int hb_fft_shape_ok(const hb_problem *p, int tiled);
hb_fft hb_fft_of(const hb_problem *p, int backward_data, int tiled);
/* The workspace (SIZE_MAX: not handled), the timing model's rates, and the runs: data x or dy, out y or dx. */
size_t hb_fft_problem_workspace(const hb_problem *p, int backward_data, int tiled);
double hb_fft_model_rate(const hb_problem *p);
double hb_fft_tiling_model_rate(const hb_problem *p);
cudnnStatus_t hb_fft_problem_run(const hb_problem *p, int backward_data, int tiled, const void *data,
                                 const void *filter, void *out, double alpha, double beta, void *ws);
cudnnStatus_t hb_fft_grad_problem_run(const hb_problem *p, int tiled, const void *x, const void *dy, void *dw,
                                      double alpha, double beta, void *ws);
void hb_fft_run_f(const hb_fft *f, const float *x, const float *w, float *y, double alpha, double beta, void *ws);
void hb_fft_run_d(const hb_fft *f, const double *x, const double *w, double *y, double alpha, double beta, void *ws);
void hb_fft_run_h(const hb_fft *f, const hb_half *x, const hb_half *w, hb_half *y, double alpha, double beta,
                  void *ws);
void hb_fft_run_b(const hb_fft *f, const hb_bf16 *x, const hb_bf16 *w, hb_bf16 *y, double alpha, double beta,
                  void *ws);
void hb_fft_grad_run_f(const hb_fft *f, const float *x, const float *dy, float *dw, double alpha, double beta,
                       void *ws);
void hb_fft_grad_run_d(const hb_fft *f, const double *x, const double *dy, double *dw, double alpha, double beta,
                       void *ws);
void hb_fft_grad_run_h(const hb_fft *f, const hb_half *x, const hb_half *dy, hb_half *dw, double alpha,
                       double beta, void *ws);
void hb_fft_grad_run_b(const hb_fft *f, const hb_bf16 *x, const hb_bf16 *dy, hb_bf16 *dw, double alpha,
                       double beta, void *ws);

/*
 * Runs fn(ctx, part) for part in [0, nparts) on the calling thread and one helper thread, parts handed out in
 * the order the threads ask for them. Falls back to the calling thread alone if no thread can be started.
 */
typedef void (*hb_part_fn)(void *ctx, int64_t part);
void hb_run_parts(hb_part_fn fn, void *ctx, int64_t nparts);

/* The workspace of an algorithm that needs none: 0 for every problem. */
size_t hb_no_workspace(const hb_problem *p);

/* Atomic x += v on one element (compare-and-swap on its bit pattern): the non-deterministic algorithms. */
#define HB_ATOMIC_ADD(SUFFIX, T, V, SUM)                                                                         \
    static inline void hb_atomic_add_##SUFFIX(T *x, V v) {                                                        \
        T old, upd;                                                                                               \
        __atomic_load(x, &old, __ATOMIC_RELAXED);                                                                 \
        do {                                                                                                      \
            upd = SUM;                                                                                            \
        } while (!__atomic_compare_exchange(x, &old, &upd, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));               \
    }
HB_ATOMIC_ADD(f, float, float, old + v)
HB_ATOMIC_ADD(d, double, double, old + v)
/* 16-bit elements: the sum is computed in float and rounded to the element type on every add, as GPU atomics
 * on half do; a result accumulated by k adds is rounded k times. */
HB_ATOMIC_ADD(h, hb_half, float, (hb_half)((float)old + v))
HB_ATOMIC_ADD(b, hb_bf16, float, hb_f_to_bf16(hb_bf16_to_f(old) + v))
#undef HB_ATOMIC_ADD

/* The algorithms, gathered into the per-op tables by hb_fwd_table.c, hb_bwd_data_table.c, hb_bwd_filter_table.c. */
extern const hb_algo hb_fwd_implicit_gemm, hb_fwd_implicit_precomp_gemm, hb_fwd_gemm, hb_fwd_fft, hb_fwd_fft_tiling,
    hb_fwd_winograd_nonfused;
extern const hb_algo hb_bwd_data_algo0, hb_bwd_data_algo1, hb_bwd_data_fft, hb_bwd_data_fft_tiling,
    hb_bwd_data_winograd_nonfused;
extern const hb_algo hb_bwd_filter_algo0, hb_bwd_filter_algo1, hb_bwd_filter_fft, hb_bwd_filter_algo3,
    hb_bwd_filter_winograd_nonfused, hb_bwd_filter_fft_tiling;

/* Scratch rows on the stack of the direct loops: one output row is processed in chunks of this many. */
#define HB_ROW 256

#endif /* UCUDNN_HB_KERN_H */
