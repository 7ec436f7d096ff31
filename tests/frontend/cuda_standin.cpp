// The CUDA runtime and NVRTC functions the real cudnn_frontend headers link, for test programs that run on the
// host backend without a GPU. Memory is host memory, so copies are memcpy and synchronisation is immediate;
// events read the host's monotonic clock, so the frontend's auto-tuning (time_sorted_plan) times the host
// backend's real executions -- or, under UCUDNN_HOST_TIMING=model, the host backend's model clock (the modelled
// time of the executions between two events), so that auto-tuning there is as deterministic as the model. There
// is one device; its properties are those of no GPU in particular but large enough for every filter the
// frontend applies. Runtime compilation is never needed and always fails.
#include <cuda_runtime_api.h>

#include <nvrtc.h>

#include <cstring>
#include <ctime>

#include "client.h"

struct CUevent_st {
    double ms = 0;
};

namespace {

double now_ms() {
    double model = rc::CallTimer::model_now();
    if (model >= 0) return model;
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

thread_local cudaError_t last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
    last_error = e;
    return e;
}

}  // namespace

extern "C" {

cudaError_t cudaEventCreate(cudaEvent_t *event) {
    if (!event) return fail(cudaErrorInvalidValue);
    *event = new CUevent_st;
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int) { return cudaEventCreate(event); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
    if (!event) return fail(cudaErrorInvalidResourceHandle);
    event->ms = now_ms();
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    return event ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms || !start || !end) return fail(cudaErrorInvalidValue);
    *ms = static_cast<float>(end->ms - start->ms);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "stand-in CUDA runtime error"; }
const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorStandIn"; }

cudaError_t cudaGetDevice(int *device) {
    if (!device) return fail(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) return fail(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice); }

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
    if (!value || device != 0) return fail(cudaErrorInvalidValue);
    switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 227 * 1024; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = 228 * 1024; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; break;
    default: *value = 0; break;
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind, cudaStream_t) {
    if (count && (!dst || !src)) return fail(cudaErrorInvalidValue);
    if (count) std::memmove(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind) {
    return cudaMemcpyAsync(dst, src, count, kind, nullptr);
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t count, cudaStream_t) {
    if (count && !dst) return fail(cudaErrorInvalidValue);
    if (count) std::memset(dst, value, count);
    return cudaSuccess;
}

// The driver API is not there: frontend code that needs it reports that and goes on without.
cudaError_t cudaGetDriverEntryPoint(const char *, void **fn, unsigned long long, cudaDriverEntryPointQueryResult *q) {
    if (fn) *fn = nullptr;
    if (q) *q = cudaDriverEntryPointSymbolNotFound;
    return fail(cudaErrorNotSupported);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *, void **fn, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult *q) {
    if (fn) *fn = nullptr;
    if (q) *q = cudaDriverEntryPointSymbolNotFound;
    return fail(cudaErrorNotSupported);
}

// Host memory, described as host memory (the frontend only asks when it logs tensors).
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attributes, const void *ptr) {
    if (!attributes) return fail(cudaErrorInvalidValue);
    std::memset(attributes, 0, sizeof *attributes);
    attributes->type = cudaMemoryTypeHost;
    attributes->hostPointer = const_cast<void *>(ptr);
    return cudaSuccess;
}

// No stream is ever captured into a CUDA graph here.
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t, cudaStreamCaptureStatus *status, unsigned long long *id,
                                     cudaGraph_t *graph, const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                     size_t *ndeps) {
    if (status) *status = cudaStreamCaptureStatusNone;
    if (id) *id = 0;
    if (graph) *graph = nullptr;
    if (deps) *deps = nullptr;
    if (edges) *edges = nullptr;
    if (ndeps) *ndeps = 0;
    return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode *mode) {
    return mode ? cudaSuccess : fail(cudaErrorInvalidValue);
}

// Kernels of the frontend's own (runtime-compiled engines) and CUDA graph objects: not on this machine.
cudaError_t cudaLaunchKernel(const void *, dim3, dim3, void **, size_t, cudaStream_t) {
    return fail(cudaErrorNotSupported);
}
cudaError_t cudaLibraryLoadData(cudaLibrary_t *, const void *, cudaJitOption *, void **, unsigned int,
                                cudaLibraryOption *, void **, unsigned int) {
    return fail(cudaErrorNotSupported);
}
cudaError_t cudaLibraryUnload(cudaLibrary_t) { return fail(cudaErrorNotSupported); }
cudaError_t cudaLibraryGetKernel(cudaKernel_t *, cudaLibrary_t, const char *) { return fail(cudaErrorNotSupported); }
cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t, cudaFuncAttribute, int, int) {
    return fail(cudaErrorNotSupported);
}
cudaError_t cudaUserObjectCreate(cudaUserObject_t *, void *, cudaHostFn_t, unsigned int, unsigned int) {
    return fail(cudaErrorNotSupported);
}
cudaError_t cudaUserObjectRelease(cudaUserObject_t, unsigned int) { return fail(cudaErrorNotSupported); }
cudaError_t cudaGraphRetainUserObject(cudaGraph_t, cudaUserObject_t, unsigned int, unsigned int) {
    return fail(cudaErrorNotSupported);
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram *, const char *, const char *, int, const char *const *,
                               const char *const *) {
    return NVRTC_ERROR_INTERNAL_ERROR;
}
nvrtcResult nvrtcDestroyProgram(nvrtcProgram *) { return NVRTC_ERROR_INTERNAL_ERROR; }
nvrtcResult nvrtcCompileProgram(nvrtcProgram, int, const char *const *) { return NVRTC_ERROR_INTERNAL_ERROR; }
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram, size_t *) { return NVRTC_ERROR_INTERNAL_ERROR; }
nvrtcResult nvrtcGetProgramLog(nvrtcProgram, char *) { return NVRTC_ERROR_INTERNAL_ERROR; }
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram, size_t *) { return NVRTC_ERROR_INTERNAL_ERROR; }
nvrtcResult nvrtcGetCUBIN(nvrtcProgram, char *) { return NVRTC_ERROR_INTERNAL_ERROR; }
nvrtcResult nvrtcGetPTXSize(nvrtcProgram, size_t *) { return NVRTC_ERROR_INTERNAL_ERROR; }
nvrtcResult nvrtcGetPTX(nvrtcProgram, char *) { return NVRTC_ERROR_INTERNAL_ERROR; }
const char *nvrtcGetErrorString(nvrtcResult r) {
    return r == NVRTC_SUCCESS ? "NVRTC_SUCCESS" : "NVRTC stand-in: no runtime compilation";
}

}  // extern "C"
