/*
 * The dlsym interposer's corner cases, run with and without LD_PRELOAD=libucudnn.so (tests/preload/test_dlopen.py).
 * The program links libnext_a.so, libnext_b.so (dlsym_next.c) and libearly.so (dlsym_early.c), and dlopens
 * libcudnn.so.9 RTLD_LOCAL through its DT_RPATH. It reports:
 *   next:     what libnext_a's dlsym(RTLD_NEXT, "probe_where") found ("b" is right: after the caller, libnext_a);
 *   old, v2_34: cudnnConvolutionForward (hooked) and cudnnCreate (not) looked up on cuDNN's handle through
 *             references bound to dlsym's first version (binaries built before glibc 2.34: GLIBC_2.2.5 on x86-64,
 *             GLIBC_2.17 on AArch64) and dlsym@GLIBC_2.34;
 *   threads:  THREADS threads (argument 1, 8) each making ITERS rounds (argument 2, 2000) of those lookups and the
 *             RTLD_NEXT one at once; the answers that differed from the main thread's (0 is right);
 *   early:    what libearly's constructor got before the preload library's constructors ran, the status of a call
 *             through its cudnnConvolutionForward with NULL arguments (the real library's refusal either way), and
 *             the preload library's count of lookups it answered before its constructors (ucudnn_debug_dlsym_early);
 *   chained:  the lookups another dlsym interposer preloaded after this one saw (dlsym_counter.c), -1 without it;
 *   stats:    the preload library's counters, when it is loaded.
 * Answers are "hook" (they lie in the object exporting ucudnn_version: the preload library), "cudnn" (in the
 * dlopened library), "null" or "other". Prints one JSON object. x86-64 or AArch64 with glibc >= 2.34 (the versioned
 * references).
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *probe_next_from_a(void);
void *probe_early(int hooked);

#if defined(__aarch64__)
#define DLSYM_OLD "GLIBC_2.17"
#else
#define DLSYM_OLD "GLIBC_2.2.5"
#endif
void *dlsym_old(void *handle, const char *name);
void *dlsym_v2_34(void *handle, const char *name);
__asm__(".symver dlsym_old, dlsym@" DLSYM_OLD);
__asm__(".symver dlsym_v2_34, dlsym@GLIBC_2.34");

static void *cudnn;
static const char *cudnn_path = "";
static const void *shim_base;

static const char *kind(void *p)
{
    Dl_info info;
    if (!p)
        return "null";
    if (!dladdr(p, &info))
        return "other";
    if (shim_base && info.dli_fbase == shim_base)
        return "hook";
    return info.dli_fname && strcmp(info.dli_fname, cudnn_path) == 0 ? "cudnn" : "other";
}

static void *expect_hooked, *expect_unhooked;
static const char *expect_next;
static int iters;

static void *worker(void *arg)
{
    long bad = 0;
    for (int i = 0; i < iters; i++) {
        bad += dlsym(cudnn, "cudnnConvolutionForward") != expect_hooked;
        bad += dlsym_old(cudnn, "cudnnConvolutionForward") != expect_hooked;
        bad += dlsym(cudnn, "cudnnCreate") != expect_unhooked;
        bad += strcmp(probe_next_from_a(), expect_next) != 0;
    }
    *(long *)arg = bad;
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    iters = argc > 2 ? atoi(argv[2]) : 2000;
    if (threads < 1 || threads > 64)
        return 2;
    void *version = dlsym(RTLD_DEFAULT, "ucudnn_version");
    Dl_info info;
    if (version && dladdr(version, &info))
        shim_base = info.dli_fbase;
    cudnn = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    struct link_map *map = NULL;
    if (!cudnn || dlinfo(cudnn, RTLD_DI_LINKMAP, &map) != 0) {
        fprintf(stderr, "dlsym_probe: %s\n", dlerror());
        return 2;
    }
    cudnn_path = map->l_name;

    expect_next = probe_next_from_a();
    printf("{\"next\":\"%s\"", expect_next);
    printf(",\"old\":[\"%s\",\"%s\"]", kind(dlsym_old(cudnn, "cudnnConvolutionForward")),
           kind(dlsym_old(cudnn, "cudnnCreate")));
    printf(",\"v2_34\":[\"%s\",\"%s\"]", kind(dlsym_v2_34(cudnn, "cudnnConvolutionForward")),
           kind(dlsym_v2_34(cudnn, "cudnnCreate")));

    expect_hooked = dlsym(cudnn, "cudnnConvolutionForward");
    expect_unhooked = dlsym(cudnn, "cudnnCreate");
    pthread_t tid[64];
    long bad[64] = {0}, total = 0;
    for (int t = 0; t < threads; t++)
        pthread_create(&tid[t], NULL, worker, &bad[t]);
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        total += bad[t];
    }
    printf(",\"threads\":{\"answers\":[\"%s\",\"%s\"],\"mismatches\":%ld}", kind(expect_hooked),
           kind(expect_unhooked), total);

    int (*fwd)(void *, const void *, void *, const void *, void *, const void *, void *, int, void *, size_t,
               const void *, void *, void *);
    void *early = probe_early(1);
    memcpy(&fwd, &early, sizeof fwd);
    int (*early_count)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "ucudnn_debug_dlsym_early");
    printf(",\"early\":{\"answers\":[\"%s\",\"%s\"],\"status\":%d,\"before_constructors\":%d}", kind(early),
           kind(probe_early(0)), fwd ? fwd(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, NULL, NULL, NULL) : -1,
           early_count ? early_count() : -1);

    int (*chained)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "dlsym_counter_calls");
    printf(",\"chained\":%d", chained ? chained() : -1);
    size_t (*stats)(char *, size_t) = (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "ucudnn_stats_json");
    static char buf[1 << 16];
    if (stats && stats(buf, sizeof buf) < sizeof buf)
        printf(",\"stats\":%s", buf);
    printf("}\n");
    return 0;
}
