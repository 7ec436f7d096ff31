/*
 * cuDNN reached the way JAX/XLA's CUDA plugin, ONNX Runtime and PaddlePaddle reach it: nothing links libcudnn;
 * every cuDNN function a test program calls is a trampoline here that, at its first call, dlopens libcudnn.so.9
 * RTLD_NOW | RTLD_LOCAL (once, by soname, found through the caller's DT_RPATH as XLA's plugin finds the wheel's
 * copy) and takes the function with dlsym(handle, name).
 *
 * Compiled into a program or library in place of -lcudnn. With -fvisibility=hidden the trampolines are private,
 * as in XLA; with default visibility they are exported stubs, as in TensorFlow, whose own calls then go through
 * its PLT -- which the preload library binds -- and whose stubs load cuDNN only when one of them runs.
 * -DCUDNN_DLOPEN_NAME='"libcudnn_cnn.so.9"' -DCUDNN_DLOPEN_EAGER builds the stand-in of cuDNN 9's front library
 * (a dispatcher that dlopens a sub-library and dlsyms the same names in it, all of them when it is first used).
 *
 * cudnn_dlopen_foreign_lookups() counts the lookups whose answer did not lie in the library dlopened (under the
 * preload library: the hooks it answered with); cudnn_dlopen_handle() is that library's handle.
 * A library or function that cannot be found aborts, as a framework fails.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucudnn/cudnn_abi.h"

#ifndef CUDNN_DLOPEN_NAME
#define CUDNN_DLOPEN_NAME "libcudnn.so.9"
#endif
#define EXPORTED __attribute__((visibility("default")))

static void *library;
static const char *library_path = "";
static pthread_once_t library_once = PTHREAD_ONCE_INIT;
static atomic_int foreign;

EXPORTED int cudnn_dlopen_foreign_lookups(void)
{
    return atomic_load(&foreign);
}

EXPORTED void *cudnn_dlopen_handle(void)
{
    return library;
}

static void *lookup(const char *name)
{
    void *fn = dlsym(library, name);
    if (!fn) {
        fprintf(stderr, "cudnn_dlopen: %s has no %s\n", CUDNN_DLOPEN_NAME, name);
        abort();
    }
    Dl_info info;
    if (!dladdr(fn, &info) || !info.dli_fname || strcmp(info.dli_fname, library_path) != 0)
        atomic_fetch_add(&foreign, 1);
    return fn;
}

#ifdef CUDNN_DLOPEN_EAGER
static void resolve_all(void);
#endif

static void open_library(void)
{
    library = dlopen(CUDNN_DLOPEN_NAME, RTLD_NOW | RTLD_LOCAL);
    struct link_map *map = NULL;
    if (!library || dlinfo(library, RTLD_DI_LINKMAP, &map) != 0 || !map) {
        fprintf(stderr, "cudnn_dlopen: %s\n", dlerror());
        abort();
    }
    library_path = map->l_name;
#ifdef CUDNN_DLOPEN_EAGER
    resolve_all();
#endif
}

static void *resolve(const char *name, void *_Atomic *slot)
{
    pthread_once(&library_once, open_library);
    void *fn = atomic_load_explicit(slot, memory_order_acquire); /* the eager look may have filled it */
    if (!fn) {
        fn = lookup(name);
        atomic_store_explicit(slot, fn, memory_order_release);
    }
    return fn;
}

#define TRAMPOLINE(ret, name, params, args)                                                                    \
    static void *_Atomic slot_##name;                                                                          \
    ret name params                                                                                            \
    {                                                                                                          \
        void *p = atomic_load_explicit(&slot_##name, memory_order_acquire);                                    \
        if (!p)                                                                                                \
            p = resolve(#name, &slot_##name);                                                                  \
        ret(*fn) params;                                                                                       \
        memcpy(&fn, &p, sizeof fn);                                                                            \
        return fn args;                                                                                        \
    }

/* Every function the preload library hooks or resolves (shim/hooks.def), and the few more the drivers call. */
#define CUDNN_DLOPEN_FUNCTIONS(X)                                                                              \
    X(cudnnStatus_t, cudnnCreate, (cudnnHandle_t * handle), (handle))                                          \
    X(cudnnStatus_t, cudnnDestroy, (cudnnHandle_t handle), (handle))                                           \
    X(cudnnStatus_t, cudnnCreateActivationDescriptor, (cudnnActivationDescriptor_t * desc), (desc))            \
    X(cudnnStatus_t, cudnnSetActivationDescriptor,                                                             \
      (cudnnActivationDescriptor_t desc, cudnnActivationMode_t mode, cudnnNanPropagation_t reluNanOpt,         \
       double coef),                                                                                           \
      (desc, mode, reluNanOpt, coef))

#define UC_EXEC TRAMPOLINE
#define UC_QUERY TRAMPOLINE
#define UC_BACKEND TRAMPOLINE
#define UC_REAL TRAMPOLINE
#define UC_OPT TRAMPOLINE
#include "hooks.def"
CUDNN_DLOPEN_FUNCTIONS(TRAMPOLINE)

#ifdef CUDNN_DLOPEN_EAGER
#define RESOLVE_ONE(ret, name, params, args) atomic_store(&slot_##name, lookup(#name));
static void resolve_all(void)
{
#define UC_EXEC RESOLVE_ONE
#define UC_QUERY RESOLVE_ONE
#define UC_BACKEND RESOLVE_ONE
#define UC_REAL RESOLVE_ONE
#define UC_OPT RESOLVE_ONE
#include "hooks.def"
    CUDNN_DLOPEN_FUNCTIONS(RESOLVE_ONE)
}
#endif
