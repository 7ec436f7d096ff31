/*
 * For the AddressSanitizer tier only (tests/_sanitizer.py). ASan's runtime intercepts dlopen, which makes it the
 * caller glibc sees, so a bare name is no longer searched in the calling object's DT_RPATH or DT_RUNPATH: cuDNN's
 * front library then cannot find its sub-libraries beside it ($ORIGIN), nor a framework library the cuDNN its
 * RPATH names. Preloaded before the runtime, this dlopen gives a bare name the caller's own search: an object
 * already loaded under that name first (as glibc matches), else the first file of that name in the caller's
 * search path (dlinfo's RTLD_DI_SERINFO on the caller's object), opened by its path; else the name as it came.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void *(*dlopen_fn)(const char *, int);

static dlopen_fn next_dlopen(void)
{
    static dlopen_fn next;
    if (!next) {
        void *p = dlsym(RTLD_NEXT, "dlopen");
        memcpy(&next, &p, sizeof next);
    }
    return next;
}

/* The first file `name` in the search path of the object holding `caller`, into path: 1 if found. */
static int search(const void *caller, const char *name, char *path, size_t size)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1(caller, &info, (void **)&map, RTLD_DL_LINKMAP) || !map)
        return 0;
    Dl_serinfo probe;
    if (dlinfo(map, RTLD_DI_SERINFOSIZE, &probe) != 0)
        return 0;
    Dl_serinfo *paths = malloc(probe.dls_size);
    if (!paths)
        return 0;
    paths->dls_size = probe.dls_size;
    paths->dls_cnt = probe.dls_cnt;
    int found = 0;
    if (dlinfo(map, RTLD_DI_SERINFO, paths) == 0)
        for (unsigned int i = 0; i < paths->dls_cnt && !found; i++) {
            int n = snprintf(path, size, "%s/%s", paths->dls_serpath[i].dls_name, name);
            found = n > 0 && (size_t)n < size && access(path, F_OK) == 0;
        }
    free(paths);
    return found;
}

void *dlopen(const char *name, int flags)
{
    dlopen_fn next = next_dlopen();
    if (!next)
        return NULL;
    if (!name || strchr(name, '/'))
        return next(name, flags);
    void *loaded = next(name, flags | RTLD_NOLOAD);
    if (loaded)
        return loaded;
    char path[4096];
    if (search(__builtin_return_address(0), name, path, sizeof path))
        return next(path, flags);
    return next(name, flags);
}
