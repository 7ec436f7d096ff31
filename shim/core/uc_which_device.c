/*
 * Which device a thread works on: its ordinal (the benchmarks' per-device turns, uc_planner.c), its name (the
 * backend id that keys benchmarks and plans in the SQLite cache) and its class (identical GPUs, one name, are one
 * class: the legacy path's plans held in memory are per class, as the cache's rows are per backend id).
 *
 * The driver comes from uc_driver.c. The per-call path (uc_device_class) does not look for it again once a look
 * found none: its calls come with a handle, so CUDA is up by then wherever there is a GPU. Planning-time callers
 * look again while nothing has been found (a backend id asked for before the program started CUDA).
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "uc_core.h"

/* The driver's device functions: NULL without a driver or without cuCtxGetDevice. */
static const uc_driver_api *driver(int again)
{
    const uc_driver_api *d = uc_driver(again);
    return d && d->ctx_get_device ? d : NULL;
}

static int ordinal(const uc_driver_api *d)
{
    int dev = -1;
    return d && d->ctx_get_device(&dev) == 0 && dev >= 0 ? dev : -1;
}

int uc_current_device(void)
{
    return ordinal(driver(1));
}

/* The name of device `dev` (-1: none) into buf: "host" without a driver, "cuda-unknown" where it cannot say. */
static void name_of(int dev, const uc_driver_api *d, char *buf, size_t len)
{
    if (!d)
        snprintf(buf, len, "host");
    else if (dev < 0 || !d->device_get_name || len > INT_MAX || d->device_get_name(buf, (int)len, dev) != 0)
        snprintf(buf, len, "cuda-unknown");
}

void uc_device_name(char *buf, size_t len)
{
    const uc_driver_api *d = driver(1);
    name_of(ordinal(d), d, buf, len);
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
    const uc_driver_api *d = driver(0);
    int dev = ordinal(d);
    if (dev < 0)
        return 0;
    int known = dev < UC_CLASSED_DEVICES ? atomic_load_explicit(&class_of[dev], memory_order_relaxed) : 0;
    if (known)
        return known;
    char name[256];
    name_of(dev, d, name, sizeof name);
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
