/*
 * The subset of the cuDNN 9 legacy convolution ABI that ucudnn implements (host backend) and interposes
 * (preload library). Written from the documented facts: 4-byte enums, opaque descriptor pointers, the
 * 48-byte perf-result struct, cuDNN 9 status numbers. Both C artifacts include this one header so their
 * view of the ABI cannot drift apart.
 */
#ifndef UCUDNN_CUDNN_ABI_H
#define UCUDNN_CUDNN_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUDNN_DIM_MAX 8

/* Opaque handle and descriptor types (the struct tags match the real library's, so C++ hosts link). */
typedef struct cudnnContext *cudnnHandle_t;
typedef struct cudnnTensorStruct *cudnnTensorDescriptor_t;
typedef struct cudnnFilterStruct *cudnnFilterDescriptor_t;
typedef struct cudnnConvolutionStruct *cudnnConvolutionDescriptor_t;
typedef struct cudnnActivationStruct *cudnnActivationDescriptor_t;
typedef struct CUstream_st *cudaStream_t;

/* Status numbering of cuDNN 9. cuDNN 8 used 0..9; see UCUDNN_V8_STATUS_* below. */
typedef enum {
    CUDNN_STATUS_SUCCESS = 0,
    CUDNN_STATUS_NOT_INITIALIZED = 1001,
    CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH = 1002,
    CUDNN_STATUS_BAD_PARAM = 2000,
    CUDNN_STATUS_BAD_PARAM_NULL_POINTER = 2002,
    CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER = 2003,
    CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED = 2004,
    CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND = 2005,
    CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT = 2006,
    CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH = 2008,
    CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE = 2010,
    CUDNN_STATUS_NOT_SUPPORTED = 3000,
    CUDNN_STATUS_NOT_SUPPORTED_SHAPE = 3002,
    CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE = 3003,
    CUDNN_STATUS_NOT_SUPPORTED_LAYOUT = 3004,
    CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH = 3007,
    CUDNN_STATUS_INTERNAL_ERROR = 4000,
    CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED = 4003,
    CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED = 4004,
    CUDNN_STATUS_EXECUTION_FAILED = 5000
} cudnnStatus_t;

/* cuDNN 8 status numbers, for code that must answer in the numbering of the library it forwards to. */
enum {
    UCUDNN_V8_STATUS_SUCCESS = 0,
    UCUDNN_V8_STATUS_NOT_INITIALIZED = 1,
    UCUDNN_V8_STATUS_ALLOC_FAILED = 2,
    UCUDNN_V8_STATUS_BAD_PARAM = 3,
    UCUDNN_V8_STATUS_INTERNAL_ERROR = 4,
    UCUDNN_V8_STATUS_INVALID_VALUE = 5,
    UCUDNN_V8_STATUS_ARCH_MISMATCH = 6,
    UCUDNN_V8_STATUS_MAPPING_ERROR = 7,
    UCUDNN_V8_STATUS_EXECUTION_FAILED = 8,
    UCUDNN_V8_STATUS_NOT_SUPPORTED = 9
};

typedef enum {
    CUDNN_DATA_FLOAT = 0,
    CUDNN_DATA_DOUBLE = 1,
    CUDNN_DATA_HALF = 2,
    CUDNN_DATA_INT8 = 3,
    CUDNN_DATA_INT32 = 4,
    CUDNN_DATA_UINT8 = 6,
    CUDNN_DATA_BFLOAT16 = 9,
    CUDNN_DATA_INT64 = 10,
    CUDNN_DATA_BOOLEAN = 11,
    CUDNN_DATA_FP8_E4M3 = 12,
    CUDNN_DATA_FP8_E5M2 = 13
} cudnnDataType_t;

typedef enum {
    CUDNN_TENSOR_NCHW = 0,
    CUDNN_TENSOR_NHWC = 1,
    CUDNN_TENSOR_NCHW_VECT_C = 2
} cudnnTensorFormat_t;

typedef enum {
    CUDNN_CONVOLUTION = 0,
    CUDNN_CROSS_CORRELATION = 1
} cudnnConvolutionMode_t;

typedef enum {
    CUDNN_DEFAULT_MATH = 0,
    CUDNN_TENSOR_OP_MATH = 1,
    CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
    CUDNN_FMA_MATH = 3
} cudnnMathType_t;

typedef enum {
    CUDNN_NON_DETERMINISTIC = 0,
    CUDNN_DETERMINISTIC = 1
} cudnnDeterminism_t;

typedef enum {
    CUDNN_NOT_PROPAGATE_NAN = 0,
    CUDNN_PROPAGATE_NAN = 1
} cudnnNanPropagation_t;

typedef enum {
    CUDNN_ACTIVATION_SIGMOID = 0,
    CUDNN_ACTIVATION_RELU = 1,
    CUDNN_ACTIVATION_TANH = 2,
    CUDNN_ACTIVATION_CLIPPED_RELU = 3,
    CUDNN_ACTIVATION_ELU = 4,
    CUDNN_ACTIVATION_IDENTITY = 5,
    CUDNN_ACTIVATION_SWISH = 6
} cudnnActivationMode_t;

typedef enum {
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0,
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
    CUDNN_CONVOLUTION_FWD_ALGO_GEMM = 2,
    CUDNN_CONVOLUTION_FWD_ALGO_DIRECT = 3,
    CUDNN_CONVOLUTION_FWD_ALGO_FFT = 4,
    CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING = 5,
    CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD = 6,
    CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED = 7,
    CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8
} cudnnConvolutionFwdAlgo_t;

typedef enum {
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 = 0,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 = 1,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT = 2,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING = 3,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD = 4,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED = 5,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT = 6
} cudnnConvolutionBwdDataAlgo_t;

typedef enum {
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 = 0,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 = 1,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT = 2,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 = 3,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD = 4,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED = 5,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING = 6,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT = 7
} cudnnConvolutionBwdFilterAlgo_t;

typedef enum {
    MAJOR_VERSION = 0,
    MINOR_VERSION = 1,
    PATCH_LEVEL = 2
} libraryPropertyType;

/* The three perf structs share one layout: sizeof 48, alignment 8 (checked below). */
typedef struct {
    cudnnConvolutionFwdAlgo_t algo;
    cudnnStatus_t status;
    float time;    /* milliseconds */
    size_t memory; /* workspace bytes */
    cudnnDeterminism_t determinism;
    cudnnMathType_t mathType;
    int reserved[3];
} cudnnConvolutionFwdAlgoPerf_t;

typedef struct {
    cudnnConvolutionBwdDataAlgo_t algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t mathType;
    int reserved[3];
} cudnnConvolutionBwdDataAlgoPerf_t;

typedef struct {
    cudnnConvolutionBwdFilterAlgo_t algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t mathType;
    int reserved[3];
} cudnnConvolutionBwdFilterAlgoPerf_t;

#if !defined(__cplusplus)
_Static_assert(sizeof(cudnnConvolutionFwdAlgoPerf_t) == 48, "perf struct layout");
_Static_assert(offsetof(cudnnConvolutionFwdAlgoPerf_t, memory) == 16, "perf struct layout");
_Static_assert(offsetof(cudnnConvolutionFwdAlgoPerf_t, determinism) == 24, "perf struct layout");
_Static_assert(sizeof(cudnnConvolutionBwdDataAlgoPerf_t) == 48, "perf struct layout");
_Static_assert(sizeof(cudnnConvolutionBwdFilterAlgoPerf_t) == 48, "perf struct layout");
#endif

/* ---- Library, handle, errors ---- */
size_t cudnnGetVersion(void);
cudnnStatus_t cudnnGetProperty(libraryPropertyType type, int *value);
const char *cudnnGetErrorString(cudnnStatus_t status);
void cudnnGetLastErrorString(char *message, size_t max_size);
cudnnStatus_t cudnnCreate(cudnnHandle_t *handle);
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle);
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream);
cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *stream);

/* ---- Tensor descriptors ---- */
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *desc);
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc);
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t desc, cudnnTensorFormat_t format,
                                         cudnnDataType_t dataType, int n, int c, int h, int w);
cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t desc, cudnnDataType_t dataType, int n,
                                           int c, int h, int w, int nStride, int cStride, int hStride,
                                           int wStride);
cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t desc, cudnnDataType_t *dataType,
                                         int *n, int *c, int *h, int *w, int *nStride, int *cStride,
                                         int *hStride, int *wStride);
cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t desc, cudnnDataType_t dataType, int nbDims,
                                         const int dimA[], const int strideA[]);
cudnnStatus_t cudnnSetTensorNdDescriptorEx(cudnnTensorDescriptor_t desc, cudnnTensorFormat_t format,
                                           cudnnDataType_t dataType, int nbDims, const int dimA[]);
cudnnStatus_t cudnnGetTensorNdDescriptor(const cudnnTensorDescriptor_t desc, int nbDimsRequested,
                                         cudnnDataType_t *dataType, int *nbDims, int dimA[], int strideA[]);
cudnnStatus_t cudnnGetTensorSizeInBytes(const cudnnTensorDescriptor_t desc, size_t *size);

/* ---- Filter descriptors (data type comes before format) ---- */
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *desc);
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc);
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t dataType,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w);
cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t desc, cudnnDataType_t *dataType,
                                         cudnnTensorFormat_t *format, int *k, int *c, int *h, int *w);
cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t dataType,
                                         cudnnTensorFormat_t format, int nbDims, const int filterDimA[]);
cudnnStatus_t cudnnGetFilterNdDescriptor(const cudnnFilterDescriptor_t desc, int nbDimsRequested,
                                         cudnnDataType_t *dataType, cudnnTensorFormat_t *format, int *nbDims,
                                         int filterDimA[]);
cudnnStatus_t cudnnGetFilterSizeInBytes(const cudnnFilterDescriptor_t desc, size_t *size);

/* ---- Convolution descriptors ---- */
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *desc);
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc);
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t mathType);
cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t *mathType);
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groupCount);
cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int *groupCount);
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t desc, int pad_h, int pad_w, int u,
                                              int v, int dilation_h, int dilation_w,
                                              cudnnConvolutionMode_t mode, cudnnDataType_t computeType);
cudnnStatus_t cudnnGetConvolution2dDescriptor(const cudnnConvolutionDescriptor_t desc, int *pad_h, int *pad_w,
                                              int *u, int *v, int *dilation_h, int *dilation_w,
                                              cudnnConvolutionMode_t *mode, cudnnDataType_t *computeType);
cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t desc, int arrayLength,
                                              const int padA[], const int filterStrideA[],
                                              const int dilationA[], cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType);
cudnnStatus_t cudnnGetConvolutionNdDescriptor(const cudnnConvolutionDescriptor_t desc, int arrayLengthRequested,
                                              int *arrayLength, int padA[], int strideA[], int dilationA[],
                                              cudnnConvolutionMode_t *mode, cudnnDataType_t *computeType);
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t desc,
                                                    const cudnnTensorDescriptor_t inputDesc,
                                                    const cudnnFilterDescriptor_t filterDesc, int *n, int *c,
                                                    int *h, int *w);
cudnnStatus_t cudnnGetConvolutionNdForwardOutputDim(const cudnnConvolutionDescriptor_t desc,
                                                    const cudnnTensorDescriptor_t inputDesc,
                                                    const cudnnFilterDescriptor_t filterDesc, int nbDims,
                                                    int tensorOuputDimA[]);

/* ---- Activation descriptors (for bias-activation forward) ---- */
cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t *desc);
cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t desc);
cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t desc, cudnnActivationMode_t mode,
                                           cudnnNanPropagation_t reluNanOpt, double coef);
cudnnStatus_t cudnnGetActivationDescriptor(const cudnnActivationDescriptor_t desc, cudnnActivationMode_t *mode,
                                           cudnnNanPropagation_t *reluNanOpt, double *coef);

/* ---- Algorithm counts, heuristics, search, workspace ---- */
cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int *count);
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int *count);
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle, int *count);

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                     const cudnnFilterDescriptor_t wDesc,
                                                     const cudnnConvolutionDescriptor_t convDesc,
                                                     const cudnnTensorDescriptor_t yDesc, int requestedAlgoCount,
                                                     int *returnedAlgoCount,
                                                     cudnnConvolutionFwdAlgoPerf_t *perfResults);
cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                   const cudnnFilterDescriptor_t wDesc,
                                                   const cudnnConvolutionDescriptor_t convDesc,
                                                   const cudnnTensorDescriptor_t yDesc, int requestedAlgoCount,
                                                   int *returnedAlgoCount,
                                                   cudnnConvolutionFwdAlgoPerf_t *perfResults);
cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnFilterDescriptor_t wDesc,
    const void *w, const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc, void *y,
    int requestedAlgoCount, int *returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t *perfResults, void *workSpace,
    size_t workSpaceSizeInBytes);
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                      const cudnnFilterDescriptor_t wDesc,
                                                      const cudnnConvolutionDescriptor_t convDesc,
                                                      const cudnnTensorDescriptor_t yDesc,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes);

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc, int requestedAlgoCount,
    int *returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t *perfResults);
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc, int requestedAlgoCount,
    int *returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t *perfResults);
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const void *w, const cudnnTensorDescriptor_t dyDesc,
    const void *dy, const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc, void *dx,
    int requestedAlgoCount, int *returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t *perfResults,
    void *workSpace, size_t workSpaceSizeInBytes);
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle,
                                                           const cudnnFilterDescriptor_t wDesc,
                                                           const cudnnTensorDescriptor_t dyDesc,
                                                           const cudnnConvolutionDescriptor_t convDesc,
                                                           const cudnnTensorDescriptor_t dxDesc,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t *sizeInBytes);

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc, const cudnnTensorDescriptor_t diffDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc, int requestedAlgoCount,
    int *returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t *perfResults);
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t dwDesc, int requestedAlgoCount,
    int *returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t *perfResults);
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t dyDesc,
    const void *y, const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t dwDesc, void *dw,
    int requestedAlgoCount, int *returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t *perfResults,
    void *workSpace, size_t workSpaceSizeInBytes);
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t *sizeInBytes);

/* ---- Execution ---- */
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t xDesc,
                                      const void *x, const cudnnFilterDescriptor_t wDesc, const void *w,
                                      const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo,
                                      void *workSpace, size_t workSpaceSizeInBytes, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y);
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void *w,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                           size_t workSpaceSizeInBytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxDesc, void *dx);
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void *x,
                                             const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                             size_t workSpaceSizeInBytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwDesc, void *dw);
cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void *alpha1, const cudnnTensorDescriptor_t xDesc, const void *x,
    const cudnnFilterDescriptor_t wDesc, const void *w, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionFwdAlgo_t algo, void *workSpace, size_t workSpaceSizeInBytes, const void *alpha2,
    const cudnnTensorDescriptor_t zDesc, const void *z, const cudnnTensorDescriptor_t biasDesc, const void *bias,
    const cudnnActivationDescriptor_t activationDesc, const cudnnTensorDescriptor_t yDesc, void *y);

#ifdef __cplusplus
}
#endif

#endif /* UCUDNN_CUDNN_ABI_H */
