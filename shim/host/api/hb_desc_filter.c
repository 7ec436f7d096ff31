/*
 * Host backend: filter descriptors. As in the real cuDNN 9 library: INT32 filters are refused, NCHW_VECT_C
 * needs a vectorised int8 type, 3 to 8 dims, positive dims; the size query is the plain product (no overflow
 * check, like cuDNN). Like the real library, a setter writes type, format and rank once those are valid, then
 * the dims one by one, stopping at the first bad one (getters show that partial state).
 */
#include <stdlib.h>

#include "hb_desc.h"

static int filter_dtype_ok(int dt) {
    return dt >= CUDNN_DATA_FLOAT && dt <= CUDNN_DATA_BFLOAT16 && dt != CUDNN_DATA_INT32;
}

static cudnnStatus_t set_filter(struct cudnnFilterStruct *f, cudnnDataType_t dt, cudnnTensorFormat_t format,
                                int nb, const int *dim) {
    int fmt = (int)format;
    if (!filter_dtype_ok((int)dt)) return CUDNN_STATUS_BAD_PARAM;
    if (fmt < CUDNN_TENSOR_NCHW || fmt > CUDNN_TENSOR_NCHW_VECT_C) return CUDNN_STATUS_BAD_PARAM;
    if (fmt == CUDNN_TENSOR_NCHW_VECT_C && dt != HB_DATA_INT8x4 && dt != HB_DATA_UINT8x4 && dt != HB_DATA_INT8x32)
        return CUDNN_STATUS_BAD_PARAM;
    f->nb = nb;
    f->dtype = dt;
    f->format = format;
    for (int i = 0; i < nb; i++) {
        if (dim[i] <= 0) return CUDNN_STATUS_BAD_PARAM;
        f->dim[i] = dim[i];
    }
    /* The real library keeps only whole vectors of C in a vectorised filter. */
    if (fmt == CUDNN_TENSOR_NCHW_VECT_C) {
        int v = dt == HB_DATA_INT8x32 ? 32 : 4;
        f->dim[1] = f->dim[1] / v * v;
    }
    for (int i = nb; i < CUDNN_DIM_MAX; i++) f->dim[i] = 0;
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *desc) {
    return hb_object_create(desc, sizeof(struct cudnnFilterStruct), HB_MAGIC_FILTER);
}

HB_EXPORT cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc) {
    return hb_object_destroy(desc, HB_MAGIC_FILTER);
}

HB_EXPORT cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t dataType,
                                                   cudnnTensorFormat_t format, int k, int c, int h, int w) {
    if (!hb_filter_ok(desc)) return CUDNN_STATUS_BAD_PARAM;
    int dim[4] = {k, c, h, w};
    return set_filter(desc, dataType, format, 4, dim);
}

HB_EXPORT cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t desc, cudnnDataType_t *dataType,
                                                   cudnnTensorFormat_t *format, int *k, int *c, int *h, int *w) {
    if (!hb_filter_ok(desc) || !dataType || !format || !k || !c || !h || !w) return CUDNN_STATUS_BAD_PARAM;
    *dataType = desc->dtype;
    *format = desc->format;
    *k = desc->dim[0];
    *c = desc->dim[1];
    *h = desc->dim[2];
    *w = desc->dim[3];
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t dataType,
                                                   cudnnTensorFormat_t format, int nbDims, const int filterDimA[]) {
    if (!hb_filter_ok(desc)) return CUDNN_STATUS_BAD_PARAM;
    if (!filter_dtype_ok((int)dataType)) return CUDNN_STATUS_BAD_PARAM; /* before the rank, as cuDNN */
    if (nbDims > CUDNN_DIM_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
    if (nbDims < 3 || !filterDimA) return CUDNN_STATUS_BAD_PARAM;
    return set_filter(desc, dataType, format, nbDims, filterDimA);
}

HB_EXPORT cudnnStatus_t cudnnGetFilterNdDescriptor(const cudnnFilterDescriptor_t desc, int nbDimsRequested,
                                                   cudnnDataType_t *dataType, cudnnTensorFormat_t *format,
                                                   int *nbDims, int filterDimA[]) {
    /* Unlike the tensor getter, cuDNN refuses a request for zero dims here. */
    if (!hb_filter_ok(desc) || nbDimsRequested <= 0) return CUDNN_STATUS_BAD_PARAM;
    if (!dataType || !format || !nbDims || !filterDimA) return CUDNN_STATUS_BAD_PARAM;
    *dataType = desc->dtype;
    *format = desc->format;
    *nbDims = desc->nb;
    /* cuDNN fills every requested entry, zeros past the rank; we stop at CUDNN_DIM_MAX. */
    int copy = nbDimsRequested < CUDNN_DIM_MAX ? nbDimsRequested : CUDNN_DIM_MAX;
    for (int i = 0; i < copy; i++) filterDimA[i] = desc->dim[i];
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnGetFilterSizeInBytes(const cudnnFilterDescriptor_t desc, size_t *size) {
    if (!hb_filter_ok(desc) || !size) return CUDNN_STATUS_BAD_PARAM;
    if (desc->nb == 0) {
        *size = 0;
        return CUDNN_STATUS_SUCCESS;
    }
    /* Vectorised int8 filters count scalars (one byte each), as the real library reports. */
    int dt = (int)desc->dtype;
    int vec = dt == HB_DATA_INT8x4 || dt == HB_DATA_UINT8x4 || dt == HB_DATA_INT8x32;
    size_t es = vec ? 1 : hb_dtype_size(desc->dtype);
    uint64_t bytes = es;
    for (int i = 0; i < desc->nb; i++) bytes *= (uint64_t)desc->dim[i];
    *size = (size_t)bytes;
    return CUDNN_STATUS_SUCCESS;
}
