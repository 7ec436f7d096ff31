/*
 * Host backend: what the cuDNN opaque handle and descriptor pointers point to, and the helpers the API files
 * share (argument checks, problem building, scaling factors). Internal to the API layer (hb_api*.c,
 * hb_desc*.c); kernels only see hb_problem from hb_internal.h.
 *
 * Descriptor behaviour (defaults, which values a setter accepts, what a getter returns for an unset or
 * shorter descriptor) follows the real cuDNN 9 library as measured with tests/host/test_realcudnn_status.py.
 * Where the real library dereferences a NULL output pointer and crashes, we return CUDNN_STATUS_BAD_PARAM.
 */
#ifndef UCUDNN_HB_DESC_H
#define UCUDNN_HB_DESC_H

#include <stddef.h>
#include <stdint.h>

#include "hb_internal.h"

/* cuDNN 9.24.0: MAJOR*10000 + MINOR*100 + PATCH, the numbering frameworks decode for cuDNN 9. */
#define HB_VERSION_MAJOR 9
#define HB_VERSION_MINOR 24
#define HB_VERSION_PATCH 0

/* Tags that catch a descriptor of one kind passed where another is expected (a common caller bug). */
#define HB_MAGIC_HANDLE 0x48424831u
#define HB_MAGIC_TENSOR 0x48425431u
#define HB_MAGIC_FILTER 0x48424631u
#define HB_MAGIC_CONV 0x48424331u
#define HB_MAGIC_ACT 0x48424131u

/* Data types of the real enum that the public header does not name (vectorised int8 layouts). */
#define HB_DATA_INT8x4 5
#define HB_DATA_UINT8x4 7
#define HB_DATA_INT8x32 8

/* Convolution descriptors hold at most CUDNN_DIM_MAX - 2 spatial entries. */
#define HB_CONV_MAX (CUDNN_DIM_MAX - 2)

struct cudnnContext {
    uint32_t magic;
    cudaStream_t stream;
};

struct cudnnTensorStruct {
    uint32_t magic;
    int nb;                      /* 0 until set */
    cudnnDataType_t dtype;
    int vect;                    /* 4 or 32 for NCHW_VECT_C (strides then count vectors), else 1 */
    int dim[CUDNN_DIM_MAX];      /* zero beyond nb, as the real getters show */
    int stride[CUDNN_DIM_MAX];
};

struct cudnnFilterStruct {
    uint32_t magic;
    int nb;
    cudnnDataType_t dtype;
    cudnnTensorFormat_t format;
    int dim[CUDNN_DIM_MAX];
};

struct cudnnConvolutionStruct {
    uint32_t magic;
    int len;                     /* arrayLength: spatial dims described */
    int pad[HB_CONV_MAX], stride[HB_CONV_MAX], dil[HB_CONV_MAX];
    cudnnConvolutionMode_t mode;
    cudnnDataType_t compute;
    cudnnMathType_t math;
    int groups;
};

struct cudnnActivationStruct {
    uint32_t magic;
    cudnnActivationMode_t mode;
    cudnnNanPropagation_t nan;
    double coef;
};

/* Every handle and descriptor struct starts with its magic tag. Create: a zeroed object of `size` bytes tagged
 * `magic` stored at `out` (a pointer to the caller's pointer; NULL: BAD_PARAM). Destroy: NULL is fine, another
 * kind is BAD_PARAM, the tag is cleared before the memory is freed. */
cudnnStatus_t hb_object_create(void *out, size_t size, uint32_t magic);
cudnnStatus_t hb_object_destroy(void *obj, uint32_t magic);

/* Valid (non-NULL, right kind) descriptor checks. */
static inline int hb_tensor_ok(const struct cudnnTensorStruct *t) { return t && t->magic == HB_MAGIC_TENSOR; }
static inline int hb_filter_ok(const struct cudnnFilterStruct *f) { return f && f->magic == HB_MAGIC_FILTER; }
static inline int hb_conv_ok(const struct cudnnConvolutionStruct *c) { return c && c->magic == HB_MAGIC_CONV; }
static inline int hb_act_ok(const struct cudnnActivationStruct *a) { return a && a->magic == HB_MAGIC_ACT; }
static inline int hb_handle_ok(const struct cudnnContext *h) { return h && h->magic == HB_MAGIC_HANDLE; }

/* A convolution's output extent along one spatial dimension (`pads`: both sides together), or -1 where there is
 * none: a filter wider than the padded input, a stride at zero or below (a refused legacy Set leaves one written,
 * and cuDNN's own output-dimension query then divides by it: SIGFPE, 9.28), or 64-bit graph values whose arithmetic
 * would overflow. */
static inline int64_t hb_out_extent(int64_t in, int64_t filt, int64_t pads, int64_t stride, int64_t dil) {
    int64_t span, padded, room;
    if (stride <= 0 || __builtin_sub_overflow(filt, 1, &span) || __builtin_mul_overflow(span, dil, &span) ||
        __builtin_add_overflow(span, 1, &span) || __builtin_add_overflow(in, pads, &padded) ||
        __builtin_sub_overflow(padded, span, &room) || room < 0)
        return -1;
    int64_t steps = room / stride;
    return steps == INT64_MAX ? -1 : steps + 1;
}

/* hb_out_extent of spatial dimension i of conv(x, w) on the legacy descriptors (symmetric padding). */
static inline int64_t hb_conv_out_extent(const struct cudnnConvolutionStruct *c, const struct cudnnTensorStruct *x,
                                         const struct cudnnFilterStruct *w, int i) {
    return hb_out_extent(x->dim[i + 2], w->dim[i + 2], 2 * (int64_t)c->pad[i], c->stride[i], c->dil[i]);
}

/*
 * Build the checked problem of `op` from the descriptors. Malformed input (NULL or unset descriptors,
 * mismatched types or shapes, groups not dividing C/K) -> CUDNN_STATUS_BAD_PARAM; well-formed but outside
 * what the backend computes (data types other than FLOAT/DOUBLE/HALF/BFLOAT16, a compute type cuDNN does not
 * pair with the data type, more than 3 spatial dims) -> CUDNN_STATUS_NOT_SUPPORTED. x is dx for bwd-data, w is dw for
 * bwd-filter, y is dy for both backward ops.
 */
cudnnStatus_t hb_build_problem(const struct cudnnTensorStruct *x, const struct cudnnFilterStruct *w,
                               const struct cudnnConvolutionStruct *conv, const struct cudnnTensorStruct *y,
                               hb_problem *p);

/* A tensor descriptor's extents and element strides as the kernels take them (4-D: D = 1; extent-1 dims get
 * positive strides). */
void hb_tensor_of(const struct cudnnTensorStruct *d, hb_tensor *t);

/* Convert a caller's scaling factor: *(double *) for DOUBLE data, *(float *) otherwise. */
static inline double hb_scale_value(const void *v, cudnnDataType_t dtype) {
    return dtype == CUDNN_DATA_DOUBLE ? *(const double *)v : (double)*(const float *)v;
}

/* Tensor element span (1 + sum (dim-1)*|stride|), the number of elements a buffer must cover. */
int64_t hb_tensor_span(const struct cudnnTensorStruct *t);

/* Byte size of one element of a data type (0 for an unknown type). */
size_t hb_dtype_size(cudnnDataType_t dt);

/* The number of algorithm enum values of an op (cuDNN's *_ALGO_COUNT). */
int hb_algo_enum_count(hb_op op);

/* Timing mode from UCUDNN_HOST_TIMING, read once per process: 1 = model, 0 = measure. */
int hb_timing_is_model(void);
/* An environment value trimmed of blanks (hb_api_core.c): 1 unset or blank, 0 in buf, -1 too long for buf. */
int hb_env_trimmed(const char *raw, char *buf, size_t len);
/* UCUDNN_HOST_FIND_SKEW: the factor Find* applies to this algorithm's time (1 unless the variable names it). */
double hb_find_skew(hb_op op, int algo);
/* UCUDNN_HOST_FIND_MEMORY: the device memory Find* on buffers of its own may allocate (0: no bound). */
size_t hb_find_memory(void);
/* UCUDNN_HOST_INSTANT_TOP: how many engines the graph API's INSTANT/A/B heuristics answer (0: all). */
size_t hb_instant_top(void);

#endif /* UCUDNN_HB_DESC_H */
