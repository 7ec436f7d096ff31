/*
 * A small "network" for the Workspace Division tests: several 2-D float NCHW convolution layers, each trained the
 * way a framework does it -- per op, Get*_v7 (first result and its math type), the workspace query for that
 * algorithm, an allocation of that size, the call -- forward for every layer, then backward data and backward
 * filter from the last layer to the first, for `iters` iterations.
 *
 * Arguments (key=value): n=N, layers=CxKxHxRxPAD[,...] (square images and filters, stride 1), iters=I,
 * out=PREFIX. Writes PREFIX.<layer>.{y,dx,dw} (raw float32) from the last iteration. Prints one JSON object:
 * "status" (0 if every cuDNN call succeeded), "kernels" (per call of the last iteration: layer, op, the
 * algorithm and workspace the "framework" used and, under the preload library, the plan the shim ran) and the
 * shim's "stats" (null without it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_common.h"

#define MAXL 8

static void fill(float *v, size_t count, uint32_t seed)
{
    for (size_t i = 0; i < count; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
}

static void dump(const char *prefix, int layer, const char *name, const float *v, size_t count)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.%d.%s", prefix, layer, name);
    write_file(path, v, count * sizeof *v);
}

typedef struct {
    int c, k, h, r, pad, ho;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    float *x, *w, *y, *dy, *dx, *dw;
    size_t nx, nw, ny;
} layer;

static const char *const op_names[3] = {"fwd", "bwd_data", "bwd_filter"};

/* One op of one layer, framework style. Appends its record to the report when `report` is set. */
static void run_op(cudnnHandle_t h, layer *L, int li, int op, int last, FILE *report, int *first_record)
{
    const float one = 1.0f, zero = 0.0f, half = 0.5f;
    int got = 0, algo = -1, math = 0;
    size_t bytes = 0;
    if (op == 0) {
        cudnnConvolutionFwdAlgoPerf_t perf[16];
        check("GetFwd_v7", cudnnGetConvolutionForwardAlgorithm_v7(h, L->xd, L->wd, L->cd, L->yd, 16, &got, perf));
        if (got < 1)
            return;
        algo = (int)perf[0].algo;
        math = (int)perf[0].mathType;
        check("SetMath", cudnnSetConvolutionMathType(L->cd, perf[0].mathType));
        check("FwdWs", cudnnGetConvolutionForwardWorkspaceSize(h, L->xd, L->wd, L->cd, L->yd, perf[0].algo, &bytes));
    } else if (op == 1) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[16];
        check("GetBwdData_v7",
              cudnnGetConvolutionBackwardDataAlgorithm_v7(h, L->wd, L->yd, L->cd, L->xd, 16, &got, perf));
        if (got < 1)
            return;
        algo = (int)perf[0].algo;
        math = (int)perf[0].mathType;
        check("SetMath", cudnnSetConvolutionMathType(L->cd, perf[0].mathType));
        check("BwdDataWs",
              cudnnGetConvolutionBackwardDataWorkspaceSize(h, L->wd, L->yd, L->cd, L->xd, perf[0].algo, &bytes));
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[16];
        check("GetBwdFilter_v7",
              cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, L->xd, L->yd, L->cd, L->wd, 16, &got, perf));
        if (got < 1)
            return;
        algo = (int)perf[0].algo;
        math = (int)perf[0].mathType;
        check("SetMath", cudnnSetConvolutionMathType(L->cd, perf[0].mathType));
        check("BwdFilterWs",
              cudnnGetConvolutionBackwardFilterWorkspaceSize(h, L->xd, L->yd, L->cd, L->wd, perf[0].algo, &bytes));
    }
    void *ws = bytes ? malloc(bytes) : NULL;
    if (op == 0)
        check("Forward", cudnnConvolutionForward(h, &one, L->xd, L->x, L->wd, L->w, L->cd,
                                                 (cudnnConvolutionFwdAlgo_t)algo, ws, bytes, &zero, L->yd, L->y));
    else if (op == 1)
        check("BackwardData",
              cudnnConvolutionBackwardData(h, &one, L->wd, L->w, L->yd, L->dy, L->cd,
                                           (cudnnConvolutionBwdDataAlgo_t)algo, ws, bytes, &zero, L->xd, L->dx));
    else
        check("BackwardFilter",
              cudnnConvolutionBackwardFilter(h, &half, L->xd, L->x, L->yd, L->dy, L->cd,
                                             (cudnnConvolutionBwdFilterAlgo_t)algo, ws, bytes, &one, L->wd, L->dw));
    free(ws);
    if (last && report) {
        char *plan = shim_json("ucudnn_last_plan_json");
        fprintf(report, "%s{\"layer\":%d,\"op\":\"%s\",\"algo\":%d,\"math_type\":%d,\"workspace\":%zu,\"plan\":%s}",
                *first_record ? "" : ",", li, op_names[op], algo, math, bytes, plan ? plan : "null");
        *first_record = 0;
        free(plan);
    }
}

int main(int argc, char **argv)
{
    driver_init(argc, argv, "net_driver");
    int n = atoi(opt("n", "16")), iters = atoi(opt("iters", "2"));
    const char *spec = opt("layers", "32x32x32x3x1");
    const char *prefix = opt("out", NULL);
    layer L[MAXL];
    int nl = 0;
    for (const char *s = spec; s && *s && nl < MAXL; nl++) {
        layer *l = &L[nl];
        memset(l, 0, sizeof *l);
        if (sscanf(s, "%dx%dx%dx%dx%d", &l->c, &l->k, &l->h, &l->r, &l->pad) != 5) {
            fprintf(stderr, "net_driver: bad layer spec at '%s'\n", s);
            return 2;
        }
        s = strchr(s, ',');
        if (s)
            s++;
    }
    cudnnHandle_t h = NULL;
    check("Create", cudnnCreate(&h));
    for (int i = 0; i < nl; i++) {
        layer *l = &L[i];
        l->ho = l->h + 2 * l->pad - l->r + 1;
        l->nx = (size_t)n * l->c * l->h * l->h;
        l->nw = (size_t)l->k * l->c * l->r * l->r;
        l->ny = (size_t)n * l->k * l->ho * l->ho;
        check("CreateX", cudnnCreateTensorDescriptor(&l->xd));
        check("CreateY", cudnnCreateTensorDescriptor(&l->yd));
        check("CreateW", cudnnCreateFilterDescriptor(&l->wd));
        check("CreateConv", cudnnCreateConvolutionDescriptor(&l->cd));
        int xdims[4] = {n, l->c, l->h, l->h}, xstr[4] = {l->c * l->h * l->h, l->h * l->h, l->h, 1};
        int ydims[4] = {n, l->k, l->ho, l->ho}, ystr[4] = {l->k * l->ho * l->ho, l->ho * l->ho, l->ho, 1};
        int wdims[4] = {l->k, l->c, l->r, l->r};
        int pads[2] = {l->pad, l->pad}, strides[2] = {1, 1}, dil[2] = {1, 1};
        check("SetX", cudnnSetTensorNdDescriptor(l->xd, CUDNN_DATA_FLOAT, 4, xdims, xstr));
        check("SetY", cudnnSetTensorNdDescriptor(l->yd, CUDNN_DATA_FLOAT, 4, ydims, ystr));
        check("SetW", cudnnSetFilterNdDescriptor(l->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, wdims));
        check("SetConv", cudnnSetConvolutionNdDescriptor(l->cd, 2, pads, strides, dil, CUDNN_CROSS_CORRELATION,
                                                         CUDNN_DATA_FLOAT));
        l->x = malloc(l->nx * sizeof(float));
        l->dx = calloc(l->nx, sizeof(float));
        l->w = malloc(l->nw * sizeof(float));
        l->dw = malloc(l->nw * sizeof(float));
        l->y = calloc(l->ny, sizeof(float));
        l->dy = malloc(l->ny * sizeof(float));
        if (!l->x || !l->dx || !l->w || !l->dw || !l->y || !l->dy)
            return 3;
        fill(l->x, l->nx, 10u + (uint32_t)i);
        fill(l->w, l->nw, 20u + (uint32_t)i);
        fill(l->dy, l->ny, 30u + (uint32_t)i);
    }
    if (failures)
        return 1;
    size_t cap = 1 << 16;
    char *records = NULL;
    FILE *report = open_memstream(&records, &cap);
    int first_record = 1;
    for (int it = 0; it < iters; it++) {
        int last = it == iters - 1;
        for (int i = 0; i < nl; i++) {
            fill(L[i].dw, L[i].nw, 40u + (uint32_t)i); /* the prior gradient the step accumulates into */
            run_op(h, &L[i], i, 0, last, report, &first_record);
        }
        for (int i = nl - 1; i >= 0; i--) {
            run_op(h, &L[i], i, 1, last, report, &first_record);
            run_op(h, &L[i], i, 2, last, report, &first_record);
        }
    }
    if (report)
        fclose(report);
    if (prefix)
        for (int i = 0; i < nl; i++) {
            dump(prefix, i, "y", L[i].y, L[i].ny);
            dump(prefix, i, "dx", L[i].dx, L[i].nx);
            dump(prefix, i, "dw", L[i].dw, L[i].nw);
        }
    char *stats = shim_json("ucudnn_stats_json");
    printf("{\"status\":%d,\"kernels\":[%s],\"stats\":%s}\n", failures ? 1 : 0, records ? records : "",
           stats ? stats : "null");
    free(stats);
    free(records);
    for (int i = 0; i < nl; i++) {
        cudnnDestroyTensorDescriptor(L[i].xd);
        cudnnDestroyTensorDescriptor(L[i].yd);
        cudnnDestroyFilterDescriptor(L[i].wd);
        cudnnDestroyConvolutionDescriptor(L[i].cd);
        free(L[i].x), free(L[i].dx), free(L[i].w), free(L[i].dw), free(L[i].y), free(L[i].dy);
    }
    cudnnDestroy(h);
    return failures ? 1 : 0;
}
