// The cuDNN functions a real-client program calls itself (the frontend makes all the others), in the two ways
// clients reach cuDNN:
//   - linked (the default build): the calls bind to libcudnn.so.9 at load time, as in PyTorch;
//   - built with NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING: nothing is linked; open() dlopens "libcudnn.so.9"
//     RTLD_LOCAL, as XLA, ONNX Runtime and Paddle do, and hands the handle to the frontend (its
//     cudnn_frontend::cudnn_dlhandle), which takes every function with dlsym on it; the program's own calls go the
//     same way, through the frontend's detail:: wrappers. The CUDA runtime is then dlopened by the frontend too
//     (CUDNN_FRONTEND_CUDART_LIB_NAME names the stand-in).
// Include it after cudnn_frontend.h, from the program's one translation unit (it defines cudnn_dlhandle).
#pragma once

#include <cudnn_frontend.h>

#ifdef NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr;  // declared by the frontend, defined by its client
}
#endif

namespace rc::cudnn {

#ifdef NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
constexpr const char *loading = "dlopen";

inline void open() {
    if (cudnn_frontend::cudnn_dlhandle) return;
    void *h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) throw std::runtime_error(std::string("dlopen libcudnn.so.9: ") + dlerror());
    cudnn_frontend::cudnn_dlhandle = h;
}
inline cudnnStatus_t create(cudnnHandle_t *h) { return cudnn_frontend::detail::create_handle(h); }
inline cudnnStatus_t destroy(cudnnHandle_t h) { return cudnn_frontend::detail::destroy_handle(h); }
inline cudnnStatus_t set_stream(cudnnHandle_t h, cudaStream_t s) { return cudnn_frontend::detail::set_stream(h, s); }
inline cudnnStatus_t execute(cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack) {
    return cudnn_frontend::detail::execute(h, plan, pack);
}
inline const char *error_string(cudnnStatus_t st) { return cudnn_frontend::detail::get_error_string(st); }
#else
constexpr const char *loading = "linked";

inline void open() {}
inline cudnnStatus_t create(cudnnHandle_t *h) { return cudnnCreate(h); }
inline cudnnStatus_t destroy(cudnnHandle_t h) { return cudnnDestroy(h); }
inline cudnnStatus_t set_stream(cudnnHandle_t h, cudaStream_t s) { return cudnnSetStream(h, s); }
inline cudnnStatus_t execute(cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack) {
    return cudnnBackendExecute(h, plan, pack);
}
inline const char *error_string(cudnnStatus_t st) { return cudnnGetErrorString(st); }
#endif

}  // namespace rc::cudnn
