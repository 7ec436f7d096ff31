/*
 * Which device a thread works on: its ordinal (the benchmarks' per-device turns, uc_planner.c), its name (the
 * backend id that keys benchmarks and plans in the SQLite cache) and its class (identical GPUs, one name, are one
 * class: the legacy path's plans held in memory are per class, as the cache's rows are per backend id).
 *
 * The driver API (libcuda.so.1) is used only when the process has loaded it: looked for with dlopen RTLD_NOLOAD,
 * which costs tens of microseconds a miss. The per-call path (uc_device_class) looks once and then keeps what it
 * found: its calls come with a handle, so CUDA is up by then wherever there is a GPU. Planning-time callers look
 * again while nothing has been found (a backend id asked for before the program started CUDA).
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "uc_core.h"

typedef int (*cu_ctx_get_device_fn)(int *);
typedef int (*cu_device_get_name_fn)(char *, int, int);

static _Atomic(cu_ctx_get_device_fn) get_device;
static _Atomic(cu_device_get_name_fn) get_name;
static atomic_int looked;

/* The two driver functions, when the process has the driver. `again`: look even if an earlier look found none. */
static cu_ctx_get_device_fn driver(int again)
{
    cu_ctx_get_device_fn f = atomic_load(&get_device);
    if (f || (!again && atomic_load(&looked)))
        return f;
    void *cuda = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY); /* kept open: the pointers stay valid */
    if (cuda) {
        void *dev = uc_dlsym(cuda, "cuCtxGetDevice"), *name = uc_dlsym(cuda, "cuDeviceGetName");
        cu_device_get_name_fn n;
        memcpy(&f, &dev, sizeof dev);
        memcpy(&n, &name, sizeof name);
        atomic_store(&get_name, n);
        atomic_store(&get_device, f);
    }
    atomic_store(&looked, 1);
    return f;
}

static int ordinal(cu_ctx_get_device_fn f)
{
    int dev = -1;
    return f && f(&dev) == 0 && dev >= 0 ? dev : -1;
}

int uc_current_device(void)
{
    return ordinal(driver(1));
}

/* The name of device `dev` (-1: none) into buf: "host" without a driver, "cuda-unknown" where it cannot say. */
static void name_of(int dev, int have_driver, char *buf, size_t len)
{
    cu_device_get_name_fn n = atomic_load(&get_name);
    if (!have_driver)
        snprintf(buf, len, "host");
    else if (dev < 0 || !n || len > INT_MAX || n(buf, (int)len, dev) != 0)
        snprintf(buf, len, "cuda-unknown");
}

void uc_device_name(char *buf, size_t len)
{
    cu_ctx_get_device_fn f = driver(1);
    name_of(ordinal(f), f != NULL, buf, len);
}

/* Classes: one per distinct device name, numbered from 1 as first seen; a device's class is kept once known. */
#define UC_CLASSED_DEVICES 64
#define UC_CLASSES 16
static atomic_int class_of[UC_CLASSED_DEVICES]; /* 0: not yet known */
static char class_names[UC_CLASSES][256];
static int classes;
static pthread_mutex_t class_lock = PTHREAD_MUTEX_INITIALIZER;

int uc_device_class(void)
{
    cu_ctx_get_device_fn f = driver(0);
    int dev = ordinal(f);
    if (dev < 0)
        return 0;
    int known = dev < UC_CLASSED_DEVICES ? atomic_load_explicit(&class_of[dev], memory_order_relaxed) : 0;
    if (known)
        return known;
    char name[256];
    name_of(dev, 1, name, sizeof name);
    pthread_mutex_lock(&class_lock);
    int c = 0;
    while (c < classes && strcmp(class_names[c], name) != 0)
        c++;
    if (c == classes && classes < UC_CLASSES)
        snprintf(class_names[classes++], sizeof class_names[0], "%s", name);
    pthread_mutex_unlock(&class_lock);
    int cls = c < UC_CLASSES ? c + 1 : UC_CLASSES + 1 + dev; /* past UC_CLASSES names: a class per device */
    if (dev < UC_CLASSED_DEVICES)
        atomic_store_explicit(&class_of[dev], cls, memory_order_relaxed);
    return cls;
}
