/*
 * The shim's own symbol lookups: libc's dlsym, found with dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"), else the
 * target's first version of it (older glibc; both exist in 2.34+ at one address), lazily, so lookups made before
 * this library's constructors ran work too. The exported dlsym is the interposer (control/uc_dlsym.c), which
 * would hand the shim its own hooks back. And the first real function an intercepted lookup found in a
 * libcudnn.so* file: how the resolver learns which library a framework that dlopens cuDNN loaded.
 */
#define UC_DLSYM_IMPL /* the one file that names libc's dlsym (where nothing is interposed) */
#include <dlfcn.h>
#include <string.h>

#include "uc_core.h"

/* dlsym's version before glibc 2.34 moved it into libc: the first version of the target's ABI. */
#if defined(__aarch64__)
#define UC_DLSYM_OLD_VERSION "GLIBC_2.17"
#else
#define UC_DLSYM_OLD_VERSION "GLIBC_2.2.5"
#endif

static _Atomic(uc_dlsym_fn) libc_dlsym;

UC_BEFORE_ASAN uc_dlsym_fn uc_dlsym_libc(void)
{
    uc_dlsym_fn f = atomic_load_explicit(&libc_dlsym, memory_order_acquire);
    if (f)
        return f;
#if defined(__x86_64__) || defined(__aarch64__)
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p)
        p = dlvsym(RTLD_NEXT, "dlsym", UC_DLSYM_OLD_VERSION);
    memcpy(&f, &p, sizeof f);
#else
    f = dlsym; /* not exported here: the name binds to libc's */
#endif
    if (f)
        atomic_store_explicit(&libc_dlsym, f, memory_order_release);
    return f;
}

void *uc_dlsym(void *handle, const char *name)
{
    uc_dlsym_fn f = uc_dlsym_libc();
    return f ? f(handle, name) : NULL;
}

static void *_Atomic first_recorded;

void uc_dlsym_record(void *sym)
{
    void *none = NULL;
    atomic_compare_exchange_strong(&first_recorded, &none, sym);
}

void *uc_dlsym_recorded(void)
{
    return atomic_load_explicit(&first_recorded, memory_order_acquire);
}
