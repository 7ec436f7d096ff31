/*
 * Another dlsym interposer, for dlsym_probe.c's chained case: preloaded after libucudnn.so, it must still see the
 * lookups that pass through the preload library (which jumps to the next dlsym after itself, not straight to
 * glibc's). It counts them and forwards to glibc's dlsym. Being a C wrapper, it makes itself the caller of
 * RTLD_NEXT lookups -- the pitfall the preload library's assembly entry avoids -- so the probe's RTLD_NEXT answer
 * is not checked when it is loaded.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>

static atomic_int calls;

void *dlsym(void *handle, const char *name)
{
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    void *(*real)(void *, const char *);
    memcpy(&real, &p, sizeof real);
    atomic_fetch_add(&calls, 1);
    return real ? real(handle, name) : NULL;
}

int dlsym_counter_calls(void)
{
    return atomic_load(&calls);
}
