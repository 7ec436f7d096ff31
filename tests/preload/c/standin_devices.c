/*
 * A stand-in libcuda.so.1 (soname) for the preload tests: a process that drives several GPUs, one thread per
 * device, as data-parallel frameworks run. Each thread's current device is given at its first cuCtxGetDevice:
 * 0, 1, 2, ... in the order threads ask, modulo STANDIN_DEVICES (1 by default). Every device has one name, as
 * identical GPUs do, unless STANDIN_NAMES names several models (device d is the (d mod count)th). Only the two
 * functions the preload library asks for its device and backend id are defined: without the rest of the driver API
 * it keeps the host backend's clocks and memory.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int next_device;
static __thread int device = -1;

int cuCtxGetDevice(int *out)
{
    if (!out)
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    if (device < 0) {
        const char *count = getenv("STANDIN_DEVICES");
        int n = count ? atoi(count) : 1;
        device = atomic_fetch_add(&next_device, 1) % (n > 0 ? n : 1);
    }
    *out = device;
    return 0;
}

int cuDeviceGetName(char *name, int len, int dev)
{
    if (!name || len <= 0 || dev < 0)
        return 1;
    const char *names = getenv("STANDIN_NAMES");
    if (!names || !*names) {
        snprintf(name, (size_t)len, "stand-in GPU");
        return 0;
    }
    int count = 1;
    for (const char *c = names; *c; c++)
        count += *c == ',';
    const char *at = names;
    for (int i = dev % count; i > 0; i--)
        at = strchr(at, ',') + 1;
    const char *end = strchr(at, ',');
    snprintf(name, (size_t)len, "%.*s", end ? (int)(end - at) : (int)strlen(at), at);
    return 0;
}
