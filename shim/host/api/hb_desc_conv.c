/*
 * Host backend: convolution and activation descriptors and the output-dim queries, with the real cuDNN 9
 * library's accepted values and defaults (mode CONVOLUTION, compute FLOAT, DEFAULT_MATH, one group, no
 * spatial dims until set). Compute types FLOAT, DOUBLE, HALF and INT32 are accepted by the setters; whether
 * a compute type suits the data is checked when a problem is built.
 */
#include <stdlib.h>

#include "hb_desc.h"

static int compute_type_ok(int ct) {
    return ct == CUDNN_DATA_FLOAT || ct == CUDNN_DATA_DOUBLE || ct == CUDNN_DATA_HALF || ct == CUDNN_DATA_INT32;
}

/*
 * As in the real library: mode and compute type are checked first; then mode, compute type and length are
 * written, and each entry is written before it is checked, so a bad value stays visible to the getters.
 */
static cudnnStatus_t set_conv(struct cudnnConvolutionStruct *c, int len, const int *pad, const int *stride,
                              const int *dil, cudnnConvolutionMode_t mode, cudnnDataType_t compute) {
    if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) return CUDNN_STATUS_BAD_PARAM;
    if (!compute_type_ok((int)compute)) return CUDNN_STATUS_BAD_PARAM;
    c->mode = mode;
    c->compute = compute;
    c->len = len;
    for (int i = 0; i < len; i++) {
        if ((c->pad[i] = pad[i]) < 0) return CUDNN_STATUS_BAD_PARAM;
        if ((c->stride[i] = stride[i]) <= 0) return CUDNN_STATUS_BAD_PARAM;
        if ((c->dil[i] = dil[i]) <= 0) return CUDNN_STATUS_BAD_PARAM;
    }
    for (int i = len; i < HB_CONV_MAX; i++) c->pad[i] = c->stride[i] = c->dil[i] = 0;
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *desc) {
    cudnnStatus_t st = hb_object_create(desc, sizeof(struct cudnnConvolutionStruct), HB_MAGIC_CONV);
    if (st == CUDNN_STATUS_SUCCESS) (*desc)->groups = 1;
    return st;
}

HB_EXPORT cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc) {
    return hb_object_destroy(desc, HB_MAGIC_CONV);
}

HB_EXPORT cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t mathType) {
    if (!hb_conv_ok(desc)) return CUDNN_STATUS_BAD_PARAM;
    if ((int)mathType < CUDNN_DEFAULT_MATH || (int)mathType > CUDNN_FMA_MATH) return CUDNN_STATUS_BAD_PARAM;
    desc->math = mathType;
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t *mathType) {
    if (!hb_conv_ok(desc) || !mathType) return CUDNN_STATUS_BAD_PARAM;
    *mathType = desc->math;
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groupCount) {
    if (!hb_conv_ok(desc) || groupCount <= 0) return CUDNN_STATUS_BAD_PARAM;
    desc->groups = groupCount;
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int *groupCount) {
    if (!hb_conv_ok(desc) || !groupCount) return CUDNN_STATUS_BAD_PARAM;
    *groupCount = desc->groups;
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t desc, int pad_h, int pad_w,
                                                        int u, int v, int dilation_h, int dilation_w,
                                                        cudnnConvolutionMode_t mode, cudnnDataType_t computeType) {
    if (!hb_conv_ok(desc)) return CUDNN_STATUS_BAD_PARAM;
    int pad[2] = {pad_h, pad_w}, stride[2] = {u, v}, dil[2] = {dilation_h, dilation_w};
    return set_conv(desc, 2, pad, stride, dil, mode, computeType);
}

HB_EXPORT cudnnStatus_t cudnnGetConvolution2dDescriptor(const cudnnConvolutionDescriptor_t desc, int *pad_h,
                                                        int *pad_w, int *u, int *v, int *dilation_h,
                                                        int *dilation_w, cudnnConvolutionMode_t *mode,
                                                        cudnnDataType_t *computeType) {
    if (!hb_conv_ok(desc) || !pad_h || !pad_w || !u || !v || !dilation_h || !dilation_w || !mode || !computeType)
        return CUDNN_STATUS_BAD_PARAM;
    /* Any arrayLength answers with its first two entries, as cuDNN does. */
    *pad_h = desc->pad[0];
    *pad_w = desc->pad[1];
    *u = desc->stride[0];
    *v = desc->stride[1];
    *dilation_h = desc->dil[0];
    *dilation_w = desc->dil[1];
    *mode = desc->mode;
    *computeType = desc->compute;
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t desc, int arrayLength,
                                                        const int padA[], const int filterStrideA[],
                                                        const int dilationA[], cudnnConvolutionMode_t mode,
                                                        cudnnDataType_t computeType) {
    if (!hb_conv_ok(desc)) return CUDNN_STATUS_BAD_PARAM;
    if (arrayLength > HB_CONV_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
    if (arrayLength < 0) return CUDNN_STATUS_BAD_PARAM;
    if (arrayLength > 0 && (!padA || !filterStrideA || !dilationA)) return CUDNN_STATUS_BAD_PARAM;
    return set_conv(desc, arrayLength, padA, filterStrideA, dilationA, mode, computeType);
}

HB_EXPORT cudnnStatus_t cudnnGetConvolutionNdDescriptor(const cudnnConvolutionDescriptor_t desc,
                                                        int arrayLengthRequested, int *arrayLength, int padA[],
                                                        int strideA[], int dilationA[], cudnnConvolutionMode_t *mode,
                                                        cudnnDataType_t *computeType) {
    if (!hb_conv_ok(desc) || arrayLengthRequested < 0 || !arrayLength || !mode || !computeType)
        return CUDNN_STATUS_BAD_PARAM;
    if (arrayLengthRequested > HB_CONV_MAX) return CUDNN_STATUS_NOT_SUPPORTED; /* as cuDNN 9.28 */
    /* Every requested entry is filled (zeros past arrayLength). */
    int copy = arrayLengthRequested;
    if (copy > 0 && (!padA || !strideA || !dilationA)) return CUDNN_STATUS_BAD_PARAM;
    *arrayLength = desc->len;
    for (int i = 0; i < copy; i++) {
        padA[i] = desc->pad[i];
        strideA[i] = desc->stride[i];
        dilationA[i] = desc->dil[i];
    }
    *mode = desc->mode;
    *computeType = desc->compute;
    return CUDNN_STATUS_SUCCESS;
}

/*
 * Output dims of conv(x, w) into out[0..nb) (the 2-D query wants rank 4 or more, the Nd one 3);
 * `valid` tells the callers how many leading entries they may write, the way cuDNN leaves its outputs: none when
 * the descriptors do not agree, else N, K and each spatial extent up to the first that fails.
 */
static cudnnStatus_t output_dims(const struct cudnnConvolutionStruct *c, const struct cudnnTensorStruct *x,
                                 const struct cudnnFilterStruct *w, int min_nb, int want, int *nb, int64_t *out,
                                 int *valid) {
    *valid = 0;
    if (!hb_conv_ok(c) || !hb_tensor_ok(x) || !hb_filter_ok(w)) return CUDNN_STATUS_BAD_PARAM;
    if (x->nb < min_nb || w->nb != x->nb || c->len != x->nb - 2) return CUDNN_STATUS_BAD_PARAM;
    /* Channels are compared in vectors where a side is NCHW_VECT_C, as cuDNN 9.28 compares them (an input of 4
     * channels in vectors of 4 matches a plain filter of 1 channel). */
    int64_t w_vect = w->format != CUDNN_TENSOR_NCHW_VECT_C ? 1 : w->dtype == HB_DATA_INT8x32 ? 32 : 4;
    if ((int64_t)x->dim[1] / x->vect != (int64_t)w->dim[1] / w_vect * c->groups) return CUDNN_STATUS_BAD_PARAM;
    *nb = x->nb;
    out[0] = x->dim[0];
    out[1] = w->dim[0];
    *valid = 2;
    /* Only the `want` dimensions asked for are computed, and checked: cuDNN 9.28 answers the first four of a 3-D
     * problem whose last filter extent exceeds its input. */
    for (int i = 0; i < c->len && i + 2 < want; i++) {
        out[i + 2] = hb_conv_out_extent(c, x, w, i);
        if (out[i + 2] < 0) return CUDNN_STATUS_BAD_PARAM;
        *valid = i + 3;
    }
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t desc,
                                                              const cudnnTensorDescriptor_t inputDesc,
                                                              const cudnnFilterDescriptor_t filterDesc, int *n,
                                                              int *c, int *h, int *w) {
    if (!n || !c || !h || !w) return CUDNN_STATUS_BAD_PARAM;
    *n = *c = *h = *w = 0;
    int nb = 0, valid;
    int64_t out[CUDNN_DIM_MAX];
    cudnnStatus_t st = output_dims(desc, inputDesc, filterDesc, 4, 4, &nb, out, &valid);
    int *dst[4] = {n, c, h, w};
    for (int i = 0; i < valid && i < 4; i++) *dst[i] = (int)out[i];
    return st;
}

HB_EXPORT cudnnStatus_t cudnnGetConvolutionNdForwardOutputDim(const cudnnConvolutionDescriptor_t desc,
                                                              const cudnnTensorDescriptor_t inputDesc,
                                                              const cudnnFilterDescriptor_t filterDesc, int nbDims,
                                                              int tensorOuputDimA[]) {
    if (!tensorOuputDimA || !hb_tensor_ok(inputDesc)) return CUDNN_STATUS_BAD_PARAM;
    if (nbDims < 0 || nbDims > inputDesc->nb) return CUDNN_STATUS_BAD_PARAM;
    int nb = 0, valid;
    int64_t out[CUDNN_DIM_MAX];
    cudnnStatus_t st = output_dims(desc, inputDesc, filterDesc, 3, nbDims, &nb, out, &valid);
    for (int i = 0; i < valid && i < nbDims; i++) tensorOuputDimA[i] = (int)out[i];
    return st;
}

HB_EXPORT cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t *desc) {
    return hb_object_create(desc, sizeof(struct cudnnActivationStruct), HB_MAGIC_ACT);
}

HB_EXPORT cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t desc) {
    return hb_object_destroy(desc, HB_MAGIC_ACT);
}

HB_EXPORT cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t desc, cudnnActivationMode_t mode,
                                                     cudnnNanPropagation_t reluNanOpt, double coef) {
    if (!hb_act_ok(desc)) return CUDNN_STATUS_BAD_PARAM;
    if ((int)mode < CUDNN_ACTIVATION_SIGMOID || (int)mode > CUDNN_ACTIVATION_SWISH) return CUDNN_STATUS_BAD_PARAM;
    if (reluNanOpt != CUDNN_NOT_PROPAGATE_NAN && reluNanOpt != CUDNN_PROPAGATE_NAN) return CUDNN_STATUS_BAD_PARAM;
    desc->mode = mode;
    desc->nan = reluNanOpt;
    desc->coef = coef;
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnGetActivationDescriptor(const cudnnActivationDescriptor_t desc,
                                                     cudnnActivationMode_t *mode, cudnnNanPropagation_t *reluNanOpt,
                                                     double *coef) {
    if (!hb_act_ok(desc) || !mode || !reluNanOpt || !coef) return CUDNN_STATUS_BAD_PARAM;
    *mode = desc->mode;
    *reluNanOpt = desc->nan;
    *coef = desc->coef;
    return CUDNN_STATUS_SUCCESS;
}
