/*
 * A "real cuDNN" for the preload tests that shows whether the preload library's benchmarks overlap. Preloaded
 * after libucudnn.so, it is the library the shim finds behind it (it defines cudnnConvolutionForward, and every
 * other function comes from its dependency, the host backend). Each thread's first forward search
 * (cudnnFindConvolutionForwardAlgorithm[Ex]) waits, up to MEETING_TIMEOUT_MS (2000), for a search of another
 * thread to be under way as well, then runs. At exit it writes to MEETING_FILE: the searches, the most under way
 * at once, and how many first searches met another one or gave up waiting.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ucudnn/cudnn_abi.h"

static atomic_int inside, most, searches, met, alone;
static __thread int waited;

static void *next(const char *name)
{
    void *sym = dlsym(RTLD_NEXT, name);
    if (!sym)
        abort();
    return sym;
}

static void enter(void)
{
    int mine = atomic_fetch_add(&searches, 1) + 1;
    int now = atomic_fetch_add(&inside, 1) + 1;
    for (int m = atomic_load(&most); now > m && !atomic_compare_exchange_weak(&most, &m, now);)
        ;
    if (waited)
        return;
    waited = 1;
    const char *ms = getenv("MEETING_TIMEOUT_MS");
    long left = ms ? atol(ms) : 2000;
    struct timespec tick = {0, 1000000};
    int company = now >= 2; /* another search under way as this one began, or begun while it waits */
    while (!company && left-- > 0) {
        nanosleep(&tick, NULL);
        company = atomic_load(&searches) > mine;
    }
    atomic_fetch_add(company ? &met : &alone, 1);
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, cudnnTensorDescriptor_t xD, const void *x,
                                      cudnnFilterDescriptor_t wD, const void *w, cudnnConvolutionDescriptor_t cD,
                                      cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_bytes, const void *beta,
                                      cudnnTensorDescriptor_t yD, void *y)
{
    cudnnStatus_t (*real)(cudnnHandle_t, const void *, cudnnTensorDescriptor_t, const void *,
                          cudnnFilterDescriptor_t, const void *, cudnnConvolutionDescriptor_t,
                          cudnnConvolutionFwdAlgo_t, void *, size_t, const void *, cudnnTensorDescriptor_t,
                          void *) = next("cudnnConvolutionForward");
    return real(h, alpha, xD, x, wD, w, cD, algo, ws, ws_bytes, beta, yD, y);
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t h, cudnnTensorDescriptor_t xD, const void *x,
                                                     cudnnFilterDescriptor_t wD, const void *w,
                                                     cudnnConvolutionDescriptor_t cD, cudnnTensorDescriptor_t yD,
                                                     void *y, int requested, int *returned,
                                                     cudnnConvolutionFwdAlgoPerf_t *perf, void *ws, size_t ws_bytes)
{
    cudnnStatus_t (*real)(cudnnHandle_t, cudnnTensorDescriptor_t, const void *, cudnnFilterDescriptor_t,
                          const void *, cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, void *, int, int *,
                          cudnnConvolutionFwdAlgoPerf_t *, void *, size_t) =
        next("cudnnFindConvolutionForwardAlgorithmEx");
    enter();
    cudnnStatus_t st = real(h, xD, x, wD, w, cD, yD, y, requested, returned, perf, ws, ws_bytes);
    atomic_fetch_sub(&inside, 1);
    return st;
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t h, cudnnTensorDescriptor_t xD,
                                                   cudnnFilterDescriptor_t wD, cudnnConvolutionDescriptor_t cD,
                                                   cudnnTensorDescriptor_t yD, int requested, int *returned,
                                                   cudnnConvolutionFwdAlgoPerf_t *perf)
{
    cudnnStatus_t (*real)(cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t,
                          cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, int, int *,
                          cudnnConvolutionFwdAlgoPerf_t *) = next("cudnnFindConvolutionForwardAlgorithm");
    enter();
    cudnnStatus_t st = real(h, xD, wD, cD, yD, requested, returned, perf);
    atomic_fetch_sub(&inside, 1);
    return st;
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("MEETING_FILE");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f)
        return;
    fprintf(f, "{\"searches\": %d, \"most_at_once\": %d, \"met\": %d, \"alone\": %d}\n", atomic_load(&searches),
            atomic_load(&most), atomic_load(&met), atomic_load(&alone));
    fclose(f);
}
