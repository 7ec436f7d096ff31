/*
 * A framework that unloads cuDNN and loads it again, as a process does that unloads a provider library and later
 * loads it anew: each of `rounds` rounds dlopens libcudnn.so.9 RTLD_LOCAL (nothing links it), takes the functions
 * of one forward convolution with dlsym(handle, name), runs it at N = 8 (the workspace the first Get_v7 answer
 * asks for, or none), destroys everything and dlcloses the handle. After each dlclose it asks whether the library
 * is still mapped (dlopen RTLD_NOLOAD). Writes out=PATH.<round> and prints one JSON line:
 *   {"rounds": [{"status": s, "mapped_after_close": 0|1}, ...], "failures": n}
 * Statuses are cuDNN's; a function missing from the library exits 1.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucudnn/cudnn_abi.h"

enum { N = 8, C = 8, K = 16, HW = 12, R = 3 };

typedef struct {
    cudnnStatus_t (*create)(cudnnHandle_t *);
    cudnnStatus_t (*destroy)(cudnnHandle_t);
    cudnnStatus_t (*tensor_create)(cudnnTensorDescriptor_t *);
    cudnnStatus_t (*tensor_set)(cudnnTensorDescriptor_t, cudnnTensorFormat_t, cudnnDataType_t, int, int, int, int);
    cudnnStatus_t (*tensor_destroy)(cudnnTensorDescriptor_t);
    cudnnStatus_t (*filter_create)(cudnnFilterDescriptor_t *);
    cudnnStatus_t (*filter_set)(cudnnFilterDescriptor_t, cudnnDataType_t, cudnnTensorFormat_t, int, int, int, int);
    cudnnStatus_t (*filter_destroy)(cudnnFilterDescriptor_t);
    cudnnStatus_t (*conv_create)(cudnnConvolutionDescriptor_t *);
    cudnnStatus_t (*conv_set)(cudnnConvolutionDescriptor_t, int, int, int, int, int, int, cudnnConvolutionMode_t,
                              cudnnDataType_t);
    cudnnStatus_t (*conv_destroy)(cudnnConvolutionDescriptor_t);
    cudnnStatus_t (*get_v7)(cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t,
                            cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, int, int *,
                            cudnnConvolutionFwdAlgoPerf_t *);
    cudnnStatus_t (*forward)(cudnnHandle_t, const void *, cudnnTensorDescriptor_t, const void *,
                             cudnnFilterDescriptor_t, const void *, cudnnConvolutionDescriptor_t,
                             cudnnConvolutionFwdAlgo_t, void *, size_t, const void *, cudnnTensorDescriptor_t, void *);
} api;

static void *take(void *lib, const char *name)
{
    void *fn = dlsym(lib, name);
    if (!fn) {
        fprintf(stderr, "dlclose_reopen: libcudnn.so.9 has no %s\n", name);
        exit(1);
    }
    return fn;
}

#define TAKE(field, name) memcpy(&a.field, &(void *){take(lib, name)}, sizeof a.field)

static int failures;

static cudnnStatus_t check(cudnnStatus_t st)
{
    failures += st != CUDNN_STATUS_SUCCESS;
    return st;
}

/* One round: load, convolve, unload. The convolution's status; *mapped: the library still there after dlclose. */
static cudnnStatus_t round_trip(const char *out, int *mapped)
{
    void *lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlclose_reopen: %s\n", dlerror());
        exit(1);
    }
    api a;
    TAKE(create, "cudnnCreate");
    TAKE(destroy, "cudnnDestroy");
    TAKE(tensor_create, "cudnnCreateTensorDescriptor");
    TAKE(tensor_set, "cudnnSetTensor4dDescriptor");
    TAKE(tensor_destroy, "cudnnDestroyTensorDescriptor");
    TAKE(filter_create, "cudnnCreateFilterDescriptor");
    TAKE(filter_set, "cudnnSetFilter4dDescriptor");
    TAKE(filter_destroy, "cudnnDestroyFilterDescriptor");
    TAKE(conv_create, "cudnnCreateConvolutionDescriptor");
    TAKE(conv_set, "cudnnSetConvolution2dDescriptor");
    TAKE(conv_destroy, "cudnnDestroyConvolutionDescriptor");
    TAKE(get_v7, "cudnnGetConvolutionForwardAlgorithm_v7");
    TAKE(forward, "cudnnConvolutionForward");

    cudnnHandle_t h = NULL;
    cudnnTensorDescriptor_t xd = NULL, yd = NULL;
    cudnnFilterDescriptor_t wd = NULL;
    cudnnConvolutionDescriptor_t cd = NULL;
    check(a.create(&h));
    check(a.tensor_create(&xd));
    check(a.tensor_create(&yd));
    check(a.filter_create(&wd));
    check(a.conv_create(&cd));
    check(a.tensor_set(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, HW, HW));
    check(a.tensor_set(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, HW, HW));
    check(a.filter_set(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, R, R));
    check(a.conv_set(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));

    size_t nx = (size_t)N * C * HW * HW, nw = (size_t)K * C * R * R, ny = (size_t)N * K * HW * HW;
    float *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), *y = malloc(ny * sizeof *y);
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)((i * 7919) % 23) / 23.0f - 0.5f;
    for (size_t i = 0; i < nw; i++)
        w[i] = (float)((i * 104729) % 19) / 19.0f - 0.5f;
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int count = 0;
    check(a.get_v7(h, xd, wd, cd, yd, 8, &count, perf));
    cudnnConvolutionFwdAlgo_t algo = count > 0 ? perf[0].algo : CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    size_t ws_bytes = count > 0 ? perf[0].memory : 0;
    void *ws = ws_bytes ? malloc(ws_bytes) : NULL;
    float one = 1.0f, zero = 0.0f;
    cudnnStatus_t st = check(a.forward(h, &one, xd, x, wd, w, cd, algo, ws, ws_bytes, &zero, yd, y));
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(y, sizeof *y, ny, f) != ny)
        failures++;
    if (f)
        fclose(f);
    free(ws);
    free(x);
    free(w);
    free(y);
    check(a.conv_destroy(cd));
    check(a.filter_destroy(wd));
    check(a.tensor_destroy(yd));
    check(a.tensor_destroy(xd));
    check(a.destroy(h));
    dlclose(lib);
    void *again = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_NOLOAD);
    *mapped = again != NULL;
    if (again)
        dlclose(again);
    return st;
}

int main(int argc, char **argv)
{
    const char *out = "dlclose_reopen.out";
    int rounds = 2;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "out=", 4) == 0)
            out = argv[i] + 4;
        else if (strncmp(argv[i], "rounds=", 7) == 0)
            rounds = atoi(argv[i] + 7);
    }
    printf("{\"rounds\": [");
    for (int r = 0; r < rounds; r++) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%d", out, r);
        int mapped = 0;
        cudnnStatus_t st = round_trip(path, &mapped);
        printf("%s{\"status\": %d, \"mapped_after_close\": %d}", r ? ", " : "", (int)st, mapped);
    }
    printf("], \"failures\": %d}\n", failures);
    return failures ? 1 : 0;
}
