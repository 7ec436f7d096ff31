/*
 * libfakefw.so: a tiny stand-in for a framework's cuDNN layer (think libtorch_cuda.so). It has DT_NEEDED on
 * libcudnn.so.9 and is itself loaded RTLD_LOCAL by its host (ctypes.CDLL), so libcudnn.so.9 is not in the
 * global scope -- the situation in which dlsym(RTLD_NEXT) finds no cuDNN inside torch. Like PyTorch's legacy
 * path it uses Nd descriptor setters, asks Get*_v7 for the algorithm (taking the first result and its math
 * type), queries the workspace for it, allocates that much and runs the convolution.
 */
#include "ucudnn/cudnn_abi.h"

#include <stdlib.h>

#define CHECK(call)                                                                                            \
    do {                                                                                                       \
        cudnnStatus_t s_ = (call);                                                                             \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                                      \
            status = (int)s_;                                                                                  \
            goto done;                                                                                         \
        }                                                                                                      \
    } while (0)

/*
 * One training step of a 2-D convolution layer, float NCHW. shape = {n, c, h, w, k, r, s, pad}; y, dx and dw
 * are written (y = conv(x, w); dx = conv_bwd_data(w, dy); dw = 0.5 * conv_bwd_filter(x, dy) + 1 * dw_prior, so
 * the filter gradient's beta accumulation across micro-batches is exercised). algos[3] gets the algorithms the
 * library recommended. Returns 0 or the first failing cuDNN status.
 */
int fakefw_train_step(const int *shape, const float *x, const float *w, const float *dy, float *y, float *dx,
                      float *dw, int *algos)
{
    int status = 0;
    cudnnHandle_t handle = NULL;
    cudnnTensorDescriptor_t xd = NULL, yd = NULL;
    cudnnFilterDescriptor_t wd = NULL;
    cudnnConvolutionDescriptor_t cd = NULL;
    void *ws = NULL;
    const int n = shape[0], c = shape[1], h = shape[2], wi = shape[3], k = shape[4], r = shape[5], s = shape[6];
    const int pad = shape[7];
    const int ho = h + 2 * pad - r + 1, wo = wi + 2 * pad - s + 1;

    CHECK(cudnnCreate(&handle));
    CHECK(cudnnCreateTensorDescriptor(&xd));
    CHECK(cudnnCreateTensorDescriptor(&yd));
    CHECK(cudnnCreateFilterDescriptor(&wd));
    CHECK(cudnnCreateConvolutionDescriptor(&cd));
    int xdims[4] = {n, c, h, wi}, xstr[4] = {c * h * wi, h * wi, wi, 1};
    int ydims[4] = {n, k, ho, wo}, ystr[4] = {k * ho * wo, ho * wo, wo, 1};
    int wdims[4] = {k, c, r, s};
    int pads[2] = {pad, pad}, strides[2] = {1, 1}, dil[2] = {1, 1};
    CHECK(cudnnSetTensorNdDescriptor(xd, CUDNN_DATA_FLOAT, 4, xdims, xstr));
    CHECK(cudnnSetTensorNdDescriptor(yd, CUDNN_DATA_FLOAT, 4, ydims, ystr));
    CHECK(cudnnSetFilterNdDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, wdims));
    CHECK(cudnnSetConvolutionNdDescriptor(cd, 2, pads, strides, dil, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));

    const float one = 1.0f, zero = 0.0f, half = 0.5f;
    int got = 0;
    size_t bytes = 0;

    cudnnConvolutionFwdAlgoPerf_t fwd[16];
    CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, xd, wd, cd, yd, 16, &got, fwd));
    if (got < 1)
        return -1;
    algos[0] = (int)fwd[0].algo;
    CHECK(cudnnSetConvolutionMathType(cd, fwd[0].mathType));
    CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, xd, wd, cd, yd, fwd[0].algo, &bytes));
    ws = bytes ? malloc(bytes) : NULL;
    CHECK(cudnnConvolutionForward(handle, &one, xd, x, wd, w, cd, fwd[0].algo, ws, bytes, &zero, yd, y));
    free(ws);
    ws = NULL;

    cudnnConvolutionBwdDataAlgoPerf_t bd[16];
    CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, wd, yd, cd, xd, 16, &got, bd));
    if (got < 1)
        return -1;
    algos[1] = (int)bd[0].algo;
    CHECK(cudnnSetConvolutionMathType(cd, bd[0].mathType));
    CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, wd, yd, cd, xd, bd[0].algo, &bytes));
    ws = bytes ? malloc(bytes) : NULL;
    CHECK(cudnnConvolutionBackwardData(handle, &one, wd, w, yd, dy, cd, bd[0].algo, ws, bytes, &zero, xd, dx));
    free(ws);
    ws = NULL;

    cudnnConvolutionBwdFilterAlgoPerf_t bf[16];
    CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, xd, yd, cd, wd, 16, &got, bf));
    if (got < 1)
        return -1;
    algos[2] = (int)bf[0].algo;
    CHECK(cudnnSetConvolutionMathType(cd, bf[0].mathType));
    CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, xd, yd, cd, wd, bf[0].algo, &bytes));
    ws = bytes ? malloc(bytes) : NULL;
    CHECK(cudnnConvolutionBackwardFilter(handle, &half, xd, x, yd, dy, cd, bf[0].algo, ws, bytes, &one, wd, dw));

done:
    free(ws);
    if (cd)
        cudnnDestroyConvolutionDescriptor(cd);
    if (wd)
        cudnnDestroyFilterDescriptor(wd);
    if (yd)
        cudnnDestroyTensorDescriptor(yd);
    if (xd)
        cudnnDestroyTensorDescriptor(xd);
    if (handle)
        cudnnDestroy(handle);
    return status;
}
