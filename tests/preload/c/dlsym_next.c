/*
 * Two libraries for the RTLD_NEXT check of dlsym_probe.c, built from this file with -DWHO='"a"' and -DWHO='"b"' and
 * linked in that order: both define probe_where(); a's probe_next_from_a() looks it up with dlsym(RTLD_NEXT),
 * which must find b's -- "after the caller", the caller being a, whatever dlsym interposer is in between.
 */
#include <dlfcn.h>

#ifndef WHO
#error "build with -DWHO='\"a\"' or -DWHO='\"b\"'"
#endif

const char *probe_where(void)
{
    return WHO;
}

const char *probe_next_from_a(void)
{
    const char *(*next)(void) = (const char *(*)(void))dlsym(RTLD_NEXT, "probe_where");
    return next ? next() : "none";
}
