/*
 * A stand-in libcublasLt.so.13 for loading NVIDIA's libcudnn.so.9 without the CUDA libraries: cuDNN checks the
 * version of cuBLASLt and looks its functions up by name when it builds its engine lists. The version is that of
 * a CUDA 13 cuBLASLt; every other function fails (CUBLAS_STATUS_NOT_INITIALIZED), so no matmul engine is usable.
 */
#include <stddef.h>

size_t cublasLtGetVersion(void) { return 130000; }

#define NOT_INITIALIZED(name) \
    int name(void) { return 1; }

NOT_INITIALIZED(cublasLtCreate)
NOT_INITIALIZED(cublasLtDestroy)
NOT_INITIALIZED(cublasLtGetProperty)
NOT_INITIALIZED(cublasLtGroupedMatrixLayoutCreate)
NOT_INITIALIZED(cublasLtMatmul)
NOT_INITIALIZED(cublasLtMatmulAlgoGetHeuristic)
NOT_INITIALIZED(cublasLtMatmulDescCreate)
NOT_INITIALIZED(cublasLtMatmulDescDestroy)
NOT_INITIALIZED(cublasLtMatmulDescGetAttribute)
NOT_INITIALIZED(cublasLtMatmulDescInit_internal)
NOT_INITIALIZED(cublasLtMatmulDescSetAttribute)
NOT_INITIALIZED(cublasLtMatmulPreferenceCreate)
NOT_INITIALIZED(cublasLtMatmulPreferenceDestroy)
NOT_INITIALIZED(cublasLtMatmulPreferenceInit_internal)
NOT_INITIALIZED(cublasLtMatmulPreferenceSetAttribute)
NOT_INITIALIZED(cublasLtMatrixLayoutCreate)
NOT_INITIALIZED(cublasLtMatrixLayoutDestroy)
NOT_INITIALIZED(cublasLtMatrixLayoutGetAttribute)
NOT_INITIALIZED(cublasLtMatrixLayoutInit_internal)
NOT_INITIALIZED(cublasLtMatrixLayoutSetAttribute)
NOT_INITIALIZED(cublasLtMatrixTransform)
NOT_INITIALIZED(cublasLtMatrixTransformDescCreate)
NOT_INITIALIZED(cublasLtMatrixTransformDescDestroy)
NOT_INITIALIZED(cublasLtMatrixTransformDescGetAttribute)
NOT_INITIALIZED(cublasLtMatrixTransformDescInit_internal)
NOT_INITIALIZED(cublasLtMatrixTransformDescSetAttribute)
