/*
 * Host backend: tensor descriptors. Accepted values, defaults and getter behaviour mirror the real cuDNN 9
 * library (checked by tests/host/test_realcudnn_status.py): dims must be positive; a stride may be zero or
 * negative only on a dim of extent 1 (negative strides are accepted and the span counts |stride|); packed
 * strides that do not fit an int are BAD_PARAM, a tensor spanning more than INT32_MAX elements is
 * NOT_SUPPORTED.
 */
#include <stdlib.h>

#include "hb_desc.h"

size_t hb_dtype_size(cudnnDataType_t dt) {
    switch ((int)dt) {
    case CUDNN_DATA_FLOAT: return 4;
    case CUDNN_DATA_DOUBLE: return 8;
    case CUDNN_DATA_HALF: return 2;
    case CUDNN_DATA_INT8: return 1;
    case CUDNN_DATA_INT32: return 4;
    case HB_DATA_INT8x4: return 4;
    case CUDNN_DATA_UINT8: return 1;
    case HB_DATA_UINT8x4: return 4;
    case HB_DATA_INT8x32: return 32;
    case CUDNN_DATA_BFLOAT16: return 2;
    default: return 0;
    }
}

/* The real library takes every type up to BFLOAT16 in a tensor descriptor and none after it. */
static int tensor_dtype_ok(int dt) { return dt >= CUDNN_DATA_FLOAT && dt <= CUDNN_DATA_BFLOAT16; }

/*
 * NCHW_VECT_C needs C a multiple of the vector width (32 for INT8x32, else 4); the 4-D setter also needs a
 * vectorised int8 type, the Nd one does not check the type. Returns the width (1 for other formats) or 0.
 */
static int vect_width(int format, int dt, int c, int check_type) {
    if (format != CUDNN_TENSOR_NCHW_VECT_C) return 1;
    int typed = dt == HB_DATA_INT8x32 || dt == HB_DATA_INT8x4 || dt == HB_DATA_UINT8x4;
    if (check_type && !typed) return 0;
    int v = dt == HB_DATA_INT8x32 ? 32 : 4;
    return c % v == 0 ? v : 0;
}

static int64_t span_of(int nb, const int *dim, const int *stride, int vect) {
    int64_t span = 1;
    for (int i = 0; i < nb; i++) {
        int64_t extent = i == 1 ? dim[i] / vect : dim[i];
        int64_t s = stride[i] < 0 ? -(int64_t)stride[i] : stride[i];
        /* Each term is below 2^62, but eight of them can pass INT64_MAX: held there (only a descriptor already
         * refused can be that large). */
        if (__builtin_add_overflow(span, (extent - 1) * s, &span)) return INT64_MAX;
    }
    return span;
}

int64_t hb_tensor_span(const struct cudnnTensorStruct *t) {
    return t->nb ? span_of(t->nb, t->dim, t->stride, t->vect) : 0;
}

/*
 * The real library writes a descriptor field by field and stops at the first bad value, leaving what it
 * already wrote; its getters then show that partial state, and we reproduce it (the order below is the one
 * measured). Type and rank are written first, then dims and strides, and the span limit is checked last,
 * after everything is written.
 */
static void begin(struct cudnnTensorStruct *t, int dt, int nb) {
    t->dtype = (cudnnDataType_t)dt;
    t->nb = nb;
}

static cudnnStatus_t finish(struct cudnnTensorStruct *t, int nb, int vect) {
    for (int i = nb; i < CUDNN_DIM_MAX; i++) t->dim[i] = t->stride[i] = 0;
    t->vect = vect;
    return span_of(nb, t->dim, t->stride, vect) > INT32_MAX ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_SUCCESS;
}

/* Explicit strides, one dim at a time: zero only where the dim is 1; negative ones are accepted anywhere. */
static cudnnStatus_t set_strided(struct cudnnTensorStruct *t, int dt, int nb, const int *dim, const int *stride) {
    begin(t, dt, nb);
    for (int i = 0; i < nb; i++) {
        if (dim[i] <= 0 || (stride[i] == 0 && dim[i] > 1)) return CUDNN_STATUS_BAD_PARAM;
        t->dim[i] = dim[i];
        t->stride[i] = stride[i];
    }
    return finish(t, nb, 1);
}

/* acc * d for positive d, held at INT32_MAX + 1 once past INT32_MAX: a stride only has to be seen to pass it, and
 * eight dims of up to 2^31 - 1 multiplied out would overflow int64 itself. */
static int64_t times(int64_t acc, int d) {
    int64_t p = acc * d; /* acc <= 2^31, d < 2^31: no overflow */
    return p > INT32_MAX ? (int64_t)INT32_MAX + 1 : p;
}

/* Packed strides of a format over nb positive dims (N, C, spatial...), larger than INT32_MAX where they pass it. */
static void packed_strides(int format, int nb, const int *dim, int vect, int64_t *stride) {
    if (format == CUDNN_TENSOR_NHWC && nb > 2) {
        stride[1] = 1;
        int64_t acc = dim[1];
        for (int i = nb - 1; i >= 2; i--) {
            stride[i] = acc;
            acc = times(acc, dim[i]);
        }
        stride[0] = acc;
        return;
    }
    int64_t acc = 1;
    for (int i = nb - 1; i >= 0; i--) {
        stride[i] = acc;
        acc = times(acc, i == 1 ? dim[i] / vect : dim[i]);
    }
}

/*
 * Packed strides of a format. `early_dims` (the 4-D setter): dims and type are checked before anything is
 * written; the NdEx setter writes type and rank first.
 */
static cudnnStatus_t set_formatted(struct cudnnTensorStruct *t, cudnnTensorFormat_t format, cudnnDataType_t dt,
                                   int nb, const int *dim, int early_dims) {
    int f = (int)format;
    if (f < CUDNN_TENSOR_NCHW || f > CUDNN_TENSOR_NCHW_VECT_C) return CUDNN_STATUS_BAD_PARAM;
    if (!tensor_dtype_ok((int)dt)) return CUDNN_STATUS_BAD_PARAM;
    int dims_ok = 1;
    for (int i = 0; i < nb; i++) dims_ok &= dim[i] > 0;
    int vect = dims_ok ? vect_width(f, (int)dt, dim[1], early_dims) : 0;
    if (early_dims && !vect) return CUDNN_STATUS_BAD_PARAM;
    begin(t, (int)dt, nb);
    if (!vect) return CUDNN_STATUS_BAD_PARAM;
    int64_t stride[CUDNN_DIM_MAX];
    packed_strides(f, nb, dim, vect, stride);
    for (int i = 0; i < nb; i++)
        if (stride[i] > INT32_MAX) return CUDNN_STATUS_BAD_PARAM;
    for (int i = 0; i < nb; i++) {
        t->dim[i] = dim[i];
        t->stride[i] = (int)stride[i];
    }
    return finish(t, nb, vect);
}

HB_EXPORT cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *desc) {
    cudnnStatus_t st = hb_object_create(desc, sizeof(struct cudnnTensorStruct), HB_MAGIC_TENSOR);
    if (st == CUDNN_STATUS_SUCCESS) (*desc)->vect = 1;
    return st;
}

HB_EXPORT cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc) {
    return hb_object_destroy(desc, HB_MAGIC_TENSOR);
}

HB_EXPORT cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t desc, cudnnTensorFormat_t format,
                                                   cudnnDataType_t dataType, int n, int c, int h, int w) {
    if (!hb_tensor_ok(desc)) return CUDNN_STATUS_BAD_PARAM;
    int dim[4] = {n, c, h, w};
    return set_formatted(desc, format, dataType, 4, dim, 1);
}

HB_EXPORT cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t desc, cudnnDataType_t dataType, int n,
                                                     int c, int h, int w, int nStride, int cStride, int hStride,
                                                     int wStride) {
    if (!hb_tensor_ok(desc)) return CUDNN_STATUS_BAD_PARAM;
    if (!tensor_dtype_ok((int)dataType)) return CUDNN_STATUS_BAD_PARAM;
    int dim[4] = {n, c, h, w}, stride[4] = {nStride, cStride, hStride, wStride};
    return set_strided(desc, (int)dataType, 4, dim, stride);
}

HB_EXPORT cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t desc, cudnnDataType_t *dataType,
                                                   int *n, int *c, int *h, int *w, int *nStride, int *cStride,
                                                   int *hStride, int *wStride) {
    if (!hb_tensor_ok(desc) || !dataType || !n || !c || !h || !w || !nStride || !cStride || !hStride || !wStride)
        return CUDNN_STATUS_BAD_PARAM;
    /* A descriptor of any rank answers with its first four entries (zero beyond its rank), as cuDNN does. */
    *dataType = desc->dtype;
    *n = desc->dim[0];
    /* The Nd setter lets NCHW_VECT_C pair with a scalar type; the 4-D getter then gives up after N. */
    int dt = (int)desc->dtype;
    if (desc->vect > 1 && dt != HB_DATA_INT8x4 && dt != HB_DATA_UINT8x4 && dt != HB_DATA_INT8x32)
        return CUDNN_STATUS_BAD_PARAM;
    *c = desc->dim[1];
    *h = desc->dim[2];
    *w = desc->dim[3];
    *nStride = desc->stride[0];
    *cStride = desc->stride[1];
    *hStride = desc->stride[2];
    *wStride = desc->stride[3];
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t desc, cudnnDataType_t dataType,
                                                   int nbDims, const int dimA[], const int strideA[]) {
    if (!hb_tensor_ok(desc)) return CUDNN_STATUS_BAD_PARAM;
    if (!tensor_dtype_ok((int)dataType)) return CUDNN_STATUS_BAD_PARAM; /* before the rank, as cuDNN */
    if (nbDims > CUDNN_DIM_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
    if (nbDims < 2 || !dimA || !strideA) return CUDNN_STATUS_BAD_PARAM;
    return set_strided(desc, (int)dataType, nbDims, dimA, strideA);
}

HB_EXPORT cudnnStatus_t cudnnSetTensorNdDescriptorEx(cudnnTensorDescriptor_t desc, cudnnTensorFormat_t format,
                                                     cudnnDataType_t dataType, int nbDims, const int dimA[]) {
    if (!hb_tensor_ok(desc)) return CUDNN_STATUS_BAD_PARAM;
    /* Before the rank, as cuDNN 9.28: the type, the format, and NCHW_VECT_C's own rank. */
    int f = (int)format;
    if (!tensor_dtype_ok((int)dataType) || f < CUDNN_TENSOR_NCHW || f > CUDNN_TENSOR_NCHW_VECT_C)
        return CUDNN_STATUS_BAD_PARAM;
    if (f == CUDNN_TENSOR_NCHW_VECT_C && nbDims > CUDNN_DIM_MAX && dimA && !vect_width(f, (int)dataType, dimA[1], 0))
        return CUDNN_STATUS_BAD_PARAM; /* channels not a multiple of the vector width */
    if (nbDims > CUDNN_DIM_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
    if (nbDims < 2 || !dimA) return CUDNN_STATUS_BAD_PARAM;
    if (f == CUDNN_TENSOR_NHWC && nbDims == 2 && dimA[0] != 1) return CUDNN_STATUS_BAD_PARAM; /* as cuDNN 9.28 */
    return set_formatted(desc, format, dataType, nbDims, dimA, 0);
}

HB_EXPORT cudnnStatus_t cudnnGetTensorNdDescriptor(const cudnnTensorDescriptor_t desc, int nbDimsRequested,
                                                   cudnnDataType_t *dataType, int *nbDims, int dimA[],
                                                   int strideA[]) {
    if (!hb_tensor_ok(desc) || !dataType || !nbDims) return CUDNN_STATUS_BAD_PARAM;
    int copy = nbDimsRequested < desc->nb ? nbDimsRequested : desc->nb;
    if (copy > 0 && (!dimA || !strideA)) return CUDNN_STATUS_BAD_PARAM;
    *dataType = desc->dtype;
    *nbDims = desc->nb;
    for (int i = 0; i < copy; i++) {
        dimA[i] = desc->dim[i];
        strideA[i] = desc->stride[i];
    }
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnGetTensorSizeInBytes(const cudnnTensorDescriptor_t desc, size_t *size) {
    if (!hb_tensor_ok(desc) || !size) return CUDNN_STATUS_BAD_PARAM;
    *size = (size_t)hb_tensor_span(desc) * hb_dtype_size(desc->dtype);
    return CUDNN_STATUS_SUCCESS;
}
