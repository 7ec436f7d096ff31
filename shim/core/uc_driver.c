/*
 * The CUDA driver API (libcuda.so.1): the shim's one binding of it. Nothing links against CUDA; the driver is used
 * only where the process has loaded it, found with dlopen RTLD_NOLOAD (kept open: the pointers stay valid), which
 * costs tens of microseconds a miss. A look that finds it is final; one that does not is repeated only for callers
 * that ask again: uc_device.c at each use while no driver is loaded (only a CPU process pays), uc_which_device.c at
 * planning time (a backend id asked for before the program started CUDA), never its per-call device class. Every
 * function is looked up on its own: each caller checks the ones it needs (uc_device.c wants the clocks' and
 * memory's ten, uc_which_device.c the device's two).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "uc_core.h"

static uc_driver_api api;
static const uc_driver_api *_Atomic found;
static atomic_int looked;
static pthread_mutex_t look_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct {
    size_t at;
    const char *name;
} functions[] = {
    {offsetof(uc_driver_api, ctx_get_current), "cuCtxGetCurrent"},
    {offsetof(uc_driver_api, ctx_get_device), "cuCtxGetDevice"},
    {offsetof(uc_driver_api, device_get_name), "cuDeviceGetName"},
    {offsetof(uc_driver_api, ctx_sync), "cuCtxSynchronize"},
    {offsetof(uc_driver_api, mem_get_info), "cuMemGetInfo_v2"},
    {offsetof(uc_driver_api, mem_alloc), "cuMemAlloc_v2"},
    {offsetof(uc_driver_api, mem_free), "cuMemFree_v2"},
    {offsetof(uc_driver_api, event_create), "cuEventCreate"},
    {offsetof(uc_driver_api, event_record), "cuEventRecord"},
    {offsetof(uc_driver_api, event_query), "cuEventQuery"},
    {offsetof(uc_driver_api, event_elapsed), "cuEventElapsedTime"},
    {offsetof(uc_driver_api, event_destroy), "cuEventDestroy_v2"},
    {offsetof(uc_driver_api, stream_is_capturing), "cuStreamIsCapturing"},
};

const uc_driver_api *uc_driver(int again)
{
    const uc_driver_api *d = atomic_load(&found);
    if (d || (!again && atomic_load(&looked)))
        return d;
    pthread_mutex_lock(&look_lock);
    d = atomic_load(&found);
    void *cuda = d ? NULL : dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (cuda) {
        for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {
            void *fn = uc_dlsym(cuda, functions[i].name);
            memcpy((char *)&api + functions[i].at, &fn, sizeof fn);
        }
        d = &api;
        atomic_store(&found, d);
    }
    atomic_store(&looked, 1);
    pthread_mutex_unlock(&look_lock);
    return d;
}
