/*
 * Host backend internals: the contract between the cuDNN API layer (descriptors, handles, queries, Find/Get,
 * argument checking: hb_api*.c, hb_desc*.c) and the compute kernels (hb_fwd*.c, hb_bwd_data*.c,
 * hb_bwd_filter*.c).
 *
 * The API layer validates everything (NULLs, types, shapes, algo range, workspace size) and hands the kernels
 * a fully checked, normalised problem. Kernels never see a cuDNN descriptor and never return a status for
 * bad input; they return CUDNN_STATUS_SUCCESS, or CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED if a
 * malloc of their own fails (which they avoid: scratch memory belongs in the caller's workspace).
 */
#ifndef UCUDNN_HB_INTERNAL_H
#define UCUDNN_HB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ucudnn/cudnn_abi.h"

#define HB_EXPORT __attribute__((visibility("default")))

/* Spatial dims are always normalised to 3 (D, H, W): a 4-D problem has D = 1, pad 0, stride 1, dilation 1. */
#define HB_SP 3

/* Storage of the 16-bit types: IEEE binary16 through GCC's _Float16 (conversions round to nearest even), and
 * bfloat16 as its bit pattern (the top half of a float). */
typedef _Float16 hb_half;
typedef uint16_t hb_bf16;

static inline float hb_bf16_to_f(hb_bf16 v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* HALF -> float, exact, without a libgcc call (so loops over half data vectorise): the exponent and mantissa
 * moved into float position and rebiased by a multiplication by 2^112 (exact, and right for subnormals too);
 * infinities and NaNs get the all-ones exponent. float -> HALF stays the (_Float16) conversion (round to
 * nearest even), done once per stored result. */
static inline float hb_half_to_f(hb_half h) {
    uint16_t b;
    memcpy(&b, &h, sizeof b);
    uint32_t em = b & 0x7fffu, u = em << 13;
    float f;
    memcpy(&f, &u, sizeof f);
    f *= 0x1p112f;
    memcpy(&u, &f, sizeof u);
    if (em >= 0x7c00u) u = (em << 13) | 0x7f800000u;
    u |= (uint32_t)(b & 0x8000u) << 16;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest, ties to even; NaN stays a (quiet) NaN, overflow rounds to infinity. */
static inline hb_bf16 hb_f_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (hb_bf16)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (hb_bf16)(u >> 16);
}

/* Whether a data type is stored in 16 bits and computed in float. */
static inline int hb_is_16bit(cudnnDataType_t dt) { return dt == CUDNN_DATA_HALF || dt == CUDNN_DATA_BFLOAT16; }

/* Calls the instance of a function written per storage type (name_d, name_h, name_b, name_f: see
 * hb_kern_tmpl.h) for data type `dt`; the arguments' void pointers convert to its typed ones. */
#define HB_DISPATCH(dt, name, ...)                                                                                     \
    do {                                                                                                               \
        switch (dt) {                                                                                                  \
        case CUDNN_DATA_DOUBLE: name##_d(__VA_ARGS__); break;                                                          \
        case CUDNN_DATA_HALF: name##_h(__VA_ARGS__); break;                                                            \
        case CUDNN_DATA_BFLOAT16: name##_b(__VA_ARGS__); break;                                                        \
        default: name##_f(__VA_ARGS__); break;                                                                         \
        }                                                                                                              \
    } while (0)

/*
 * A tensor (x, y, dx, dy): N, C and 3 spatial extents with element strides (any strides, NCHW, NHWC or
 * non-packed). Strides are in elements, not bytes.
 */
typedef struct {
    int64_t n, c, sp[HB_SP];
    int64_t stride_n, stride_c, stride_sp[HB_SP];
} hb_tensor;

/*
 * A filter (w, dw): K output channels, C/groups input channels per group, 3 spatial extents, with element
 * strides derived from its format (NCHW: K,C,D,H,W packed; NHWC: K,D,H,W,C packed).
 */
typedef struct {
    int64_t k, c, sp[HB_SP];
    int64_t stride_k, stride_c, stride_sp[HB_SP];
} hb_filter;

/* One convolution problem, fully checked: y = conv(x, w); sizes agree with the output-dim formula. */
typedef struct {
    cudnnDataType_t dtype;  /* CUDNN_DATA_FLOAT, _DOUBLE, _HALF or _BFLOAT16 (the last two computed in float) */
    int nb_spatial;         /* 2 or 3, as the caller described it (kernels may ignore it) */
    hb_tensor x;            /* input (x for fwd/bwd-filter, dx for bwd-data) */
    hb_filter w;            /* filter (w, or dw for bwd-filter) */
    hb_tensor y;            /* output (y for fwd, dy for the backward ops) */
    int64_t pad[HB_SP], stride[HB_SP], dilation[HB_SP];
    int64_t groups;         /* C = groups * w.c, K divisible by groups */
    int cross_correlation;  /* 1 for CUDNN_CROSS_CORRELATION, 0 for CUDNN_CONVOLUTION (filter flipped) */
    cudnnMathType_t math_type;
} hb_problem;

/* The three operations. */
typedef enum { HB_OP_FWD = 0, HB_OP_BWD_DATA = 1, HB_OP_BWD_FILTER = 2 } hb_op;

/*
 * One algorithm of one op, as implemented by the kernels. `workspace` returns the exact bytes `run` uses,
 * or SIZE_MAX if the algorithm does not support the problem (then `run` is never called). `run` computes
 *   fwd:        y  = alpha * conv(x, w)        + beta * y
 *   bwd-data:   dx = alpha * conv^T(dy, w)      + beta * dx      (x of the problem holds dx)
 *   bwd-filter: dw = alpha * corr(x, dy)        + beta * dw      (w of the problem holds dw)
 * where alpha/beta are already converted to double. beta == 0 must ignore prior output contents (NaN-safe).
 * `in0`/`in1`/`out` are, for fwd: x, w, y; bwd-data: w, dy, dx; bwd-filter: x, dy, dw.
 * `deterministic` is 1 if repeated runs give bitwise-identical results.
 * `model_rate` drives the deterministic timing model (see hb_model_time_ms): relative throughput of the
 * algorithm's inner loop, higher = faster; workspace-hungry algorithms must have the higher rates. `rate_of`,
 * where set, gives it per problem instead (FFT: its gain grows with the filter's extent).
 */
typedef struct {
    int algo;               /* the cuDNN enum value for this op */
    const char *name;
    int deterministic;
    double model_rate;
    size_t (*workspace)(const hb_problem *p);
    cudnnStatus_t (*run)(const hb_problem *p, const void *in0, const void *in1, void *out, double alpha,
                         double beta, void *workspace, size_t workspace_bytes);
    double (*rate_of)(const hb_problem *p);
} hb_algo;

/*
 * The kernel registry, one table per op (defined by the kernel files): every implemented algorithm, in any
 * order. Algorithm numbers of the op that are absent are NOT_SUPPORTED.
 */
extern const hb_algo *const hb_fwd_algos[];
extern const int hb_fwd_algo_count;
extern const hb_algo *const hb_bwd_data_algos[];
extern const int hb_bwd_data_algo_count;
extern const hb_algo *const hb_bwd_filter_algos[];
extern const int hb_bwd_filter_algo_count;

/* Look an algorithm up by op and cuDNN enum value; NULL if not implemented. */
const hb_algo *hb_find_algo(hb_op op, int algo);

/* Multiply-accumulate count of the problem (N * K * P * Q * (C/groups) * R * S, with D), for the model. */
double hb_problem_macs(const hb_problem *p);

/* Modelled time in milliseconds of `a` on `p` (deterministic; used when UCUDNN_HOST_TIMING=model). */
double hb_model_time_ms(const hb_algo *a, const hb_problem *p);

/*
 * Advance the calling thread's model clock (hb_clock.c) by `ms`. The API layer calls it once per successful
 * execution call with hb_model_time_ms of the algorithm run, in both timing modes.
 */
void hb_model_clock_add(double ms);

/*
 * The calling thread's last error message (hb_api_core.c), what cudnnGetLastErrorString hands out: each failing
 * call replaces it (printf-style), reading it clears it, a successful call leaves it. Returns `status`, so a
 * failing path can `return hb_note(status, ...)`.
 */
cudnnStatus_t hb_note(cudnnStatus_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* UCUDNN_HB_INTERNAL_H */
