/*
 * Host backend: algorithm counts, heuristics (Get*_v7), search (Find*, Find*Ex) and workspace queries.
 *
 * Every call answers one row per algorithm enum value of the op: implemented and supporting the problem ->
 * a time and its workspace; otherwise CUDNN_STATUS_NOT_SUPPORTED, time -1, memory 0. Rows are sorted
 * successful first by (time, memory, algo), then the rest by algo, so equal inputs give equal answers.
 * A problem that is well-formed but outside the backend (e.g. INT8 data) gets all rows NOT_SUPPORTED and a
 * successful call, like cuDNN's own answer for a configuration no engine takes.
 *
 * Times: Get*_v7 ranks by the timing model (hb_model.c) and runs nothing. Find* measure each algorithm by
 * default: one warm-up run, then the median of 3 timed runs (a single timed run when the warm-up alone took
 * over a second, to keep searches on large layers bearable). With UCUDNN_HOST_TIMING=model they report the
 * model's times instead and run nothing, so results are identical on every call and machine.
 * Find*Ex: an algorithm needing more workspace than offered gets CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
 * (cuDNN 8 said ALLOC_FAILED) with its memory filled in. Find* on buffers of its own does the same for an algorithm
 * whose workspace does not fit beside its tensors in UCUDNN_HOST_FIND_MEMORY, and fails when the tensors do not
 * (hb_skew.c).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hb_desc.h"

/* The three perf structs share one layout; the fwd one stands for all inside this file. */
typedef cudnnConvolutionFwdAlgoPerf_t hb_perf;

#define HB_TIMED_RUNS 3
#define HB_SLOW_WARMUP_MS 1000.0

typedef enum { HB_SEARCH_V7, HB_SEARCH_FIND, HB_SEARCH_FIND_EX } hb_search_kind;

/* The caller's or our own buffers of one search, in the kernel's in0/in1/out roles. */
typedef struct {
    const void *in0, *in1;
    void *out;
    void *ws;
    size_t ws_bytes;
} hb_buffers;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Time one algorithm on the given buffers; fills row status/time. */
static void measure(const hb_algo *a, const hb_problem *p, const hb_buffers *b, void *ws, size_t ws_bytes,
                    hb_perf *row) {
    double t[HB_TIMED_RUNS];
    double t0 = now_ms();
    cudnnStatus_t st = a->run(p, b->in0, b->in1, b->out, 1.0, 0.0, ws, ws_bytes);
    double warm = now_ms() - t0;
    int runs = warm > HB_SLOW_WARMUP_MS ? 1 : HB_TIMED_RUNS;
    for (int i = 0; i < runs && st == CUDNN_STATUS_SUCCESS; i++) {
        t0 = now_ms();
        st = a->run(p, b->in0, b->in1, b->out, 1.0, 0.0, ws, ws_bytes);
        t[i] = now_ms() - t0;
    }
    if (st != CUDNN_STATUS_SUCCESS) {
        row->status = st;
        row->time = -1.0f;
        return;
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    row->status = CUDNN_STATUS_SUCCESS;
    row->time = (float)t[runs / 2];
}

static int cmp_rows(const void *pa, const void *pb) {
    const hb_perf *a = pa, *b = pb;
    int oka = a->status == CUDNN_STATUS_SUCCESS, okb = b->status == CUDNN_STATUS_SUCCESS;
    if (oka != okb) return okb - oka;
    if (oka) {
        if (a->time != b->time) return a->time < b->time ? -1 : 1;
        if (a->memory != b->memory) return a->memory < b->memory ? -1 : 1;
    }
    return (int)a->algo - (int)b->algo;
}

/* A deterministic, denormal-free fill so measured times do not depend on leftover memory contents. */
static void fill(void *buf, size_t elems, cudnnDataType_t dtype) {
    for (size_t i = 0; i < elems; i++) {
        double v = (double)((i * 2654435761u) % 2001u) / 1000.0 - 1.0;
        switch (dtype) {
        case CUDNN_DATA_DOUBLE: ((double *)buf)[i] = v; break;
        case CUDNN_DATA_HALF: ((hb_half *)buf)[i] = (hb_half)(float)v; break;
        case CUDNN_DATA_BFLOAT16: ((hb_bf16 *)buf)[i] = hb_f_to_bf16((float)v); break;
        default: ((float *)buf)[i] = (float)v; break;
        }
    }
}

/* Elements a tensor's buffer spans, and the offset of element (0,...,0) within it for negative strides. */
static void tensor_extent(const hb_tensor *t, size_t *elems, size_t *origin) {
    int64_t ext[5] = {t->n, t->c, t->sp[0], t->sp[1], t->sp[2]};
    int64_t str[5] = {t->stride_n, t->stride_c, t->stride_sp[0], t->stride_sp[1], t->stride_sp[2]};
    int64_t span = 1, neg = 0;
    for (int i = 0; i < 5; i++) {
        int64_t reach = (ext[i] - 1) * (str[i] < 0 ? -str[i] : str[i]);
        span += reach;
        if (str[i] < 0) neg += reach;
    }
    *elems = (size_t)span;
    *origin = (size_t)neg;
}

/* Elements and origin of each of the op's buffers, in the kernel's in0/in1/out roles; the bytes of all three. */
static size_t buffer_extents(hb_op op, const hb_problem *p, size_t elems[3], size_t origin[3]) {
    size_t es = hb_dtype_size(p->dtype);
    size_t xe, xo, ye, yo;
    tensor_extent(&p->x, &xe, &xo);
    tensor_extent(&p->y, &ye, &yo);
    size_t we = (size_t)(p->w.k * p->w.stride_k);
    /* Roles in0, in1, out of each op (see hb_algo.run). */
    size_t x_role[2] = {xe, xo}, y_role[2] = {ye, yo}, w_role[2] = {we, 0};
    const size_t *role[3];
    switch (op) {
    case HB_OP_FWD: role[0] = x_role; role[1] = w_role; role[2] = y_role; break;
    case HB_OP_BWD_DATA: role[0] = w_role; role[1] = y_role; role[2] = x_role; break;
    default: role[0] = x_role; role[1] = y_role; role[2] = w_role; break;
    }
    for (int i = 0; i < 3; i++) {
        elems[i] = role[i][0];
        origin[i] = role[i][1];
    }
    return (elems[0] + elems[1] + elems[2]) * es;
}

/* Own buffers for Find: one allocation per role. Returns 0 on allocation failure (all freed). */
static int alloc_buffers(hb_op op, const hb_problem *p, void *mem[3], hb_buffers *b) {
    size_t es = hb_dtype_size(p->dtype), elems[3], origin[3];
    buffer_extents(op, p, elems, origin);
    for (int i = 0; i < 3; i++) {
        mem[i] = malloc(elems[i] * es);
        if (!mem[i]) {
            for (int j = 0; j < i; j++) free(mem[j]);
            return 0;
        }
        fill(mem[i], elems[i], p->dtype);
    }
    b->in0 = (const char *)mem[0] + origin[0] * es;
    b->in1 = (const char *)mem[1] + origin[1] * es;
    b->out = (char *)mem[2] + origin[2] * es;
    return 1;
}

static cudnnStatus_t search(hb_op op, hb_search_kind kind, cudnnHandle_t handle, const struct cudnnTensorStruct *x,
                            const struct cudnnFilterStruct *w, const struct cudnnConvolutionStruct *conv,
                            const struct cudnnTensorStruct *y, int requested, int *returned, hb_perf *out,
                            const hb_buffers *caller) {
    if (returned) *returned = 0;
    if (!hb_handle_ok(handle) || !returned || !out || requested <= 0) return CUDNN_STATUS_BAD_PARAM;
    hb_problem p;
    cudnnStatus_t st = hb_build_problem(x, w, conv, y, &p);
    if (st != CUDNN_STATUS_SUCCESS && st != CUDNN_STATUS_NOT_SUPPORTED) return st;
    int supported = st == CUDNN_STATUS_SUCCESS;
    if (kind == HB_SEARCH_FIND_EX) {
        if (!caller->in0 || !caller->in1 || !caller->out) return CUDNN_STATUS_BAD_PARAM;
        if (!caller->ws && caller->ws_bytes > 0) return CUDNN_STATUS_BAD_PARAM;
    }
    int model = kind == HB_SEARCH_V7 || hb_timing_is_model();
    /* Find on buffers of its own, on a device with UCUDNN_HOST_FIND_MEMORY free: its tensors, then each workspace. */
    size_t device = kind == HB_SEARCH_FIND && supported ? hb_find_memory() : 0, tensors = 0;
    if (device) {
        size_t elems[3], origin[3];
        tensors = buffer_extents(op, &p, elems, origin);
        if (tensors > device) return CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
    }
    void *own[3] = {NULL, NULL, NULL};
    hb_buffers bufs = {0};
    if (kind == HB_SEARCH_FIND_EX) bufs = *caller;

    int count = hb_algo_enum_count(op);
    hb_perf rows[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    for (int i = 0; i < count; i++) {
        hb_perf *r = &rows[i];
        memset(r, 0, sizeof *r);
        r->algo = (cudnnConvolutionFwdAlgo_t)i;
        r->mathType = conv->math;
        const hb_algo *a = hb_find_algo(op, i);
        r->determinism = a && a->deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
        size_t need = supported && a ? a->workspace(&p) : SIZE_MAX;
        if (need == SIZE_MAX) {
            r->status = CUDNN_STATUS_NOT_SUPPORTED;
            r->time = -1.0f;
            continue;
        }
        r->memory = need;
        if ((kind == HB_SEARCH_FIND_EX && need > caller->ws_bytes) || (device && need > device - tensors)) {
            r->status = CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
            r->time = -1.0f;
            continue;
        }
        if (model) {
            r->status = CUDNN_STATUS_SUCCESS;
            r->time = (float)hb_model_time_ms(a, &p);
            continue;
        }
        if (kind == HB_SEARCH_FIND) {
            if (!own[0] && !alloc_buffers(op, &p, own, &bufs))
                return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
            void *ws = need ? malloc(need) : NULL;
            if (need && !ws) {
                r->status = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
                r->time = -1.0f;
                continue;
            }
            measure(a, &p, &bufs, ws, need, r);
            free(ws);
        } else {
            measure(a, &p, &bufs, caller->ws, caller->ws_bytes, r);
        }
    }
    for (int i = 0; i < 3; i++) free(own[i]);
    if (kind != HB_SEARCH_V7)
        for (int i = 0; i < count; i++)
            if (rows[i].status == CUDNN_STATUS_SUCCESS) rows[i].time *= (float)hb_find_skew(op, (int)rows[i].algo);

    qsort(rows, (size_t)count, sizeof rows[0], cmp_rows);
    int n = requested < count ? requested : count;
    memcpy(out, rows, (size_t)n * sizeof rows[0]);
    *returned = n;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t workspace_size(hb_op op, cudnnHandle_t handle, const struct cudnnTensorStruct *x,
                                    const struct cudnnFilterStruct *w, const struct cudnnConvolutionStruct *conv,
                                    const struct cudnnTensorStruct *y, int algo, size_t *size) {
    if (!hb_handle_ok(handle) || !size) return CUDNN_STATUS_BAD_PARAM;
    hb_problem p;
    cudnnStatus_t st = hb_build_problem(x, w, conv, y, &p);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (algo < 0 || algo >= hb_algo_enum_count(op)) return CUDNN_STATUS_BAD_PARAM;
    const hb_algo *a = hb_find_algo(op, algo);
    size_t need = a ? a->workspace(&p) : SIZE_MAX;
    if (need == SIZE_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
    *size = need;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t max_count(cudnnHandle_t handle, int *count, hb_op op) {
    if (!hb_handle_ok(handle) || !count) return CUDNN_STATUS_BAD_PARAM;
    *count = hb_algo_enum_count(op);
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int *count) {
    return max_count(handle, count, HB_OP_FWD);
}
HB_EXPORT cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int *count) {
    return max_count(handle, count, HB_OP_BWD_DATA);
}
HB_EXPORT cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle, int *count) {
    return max_count(handle, count, HB_OP_BWD_FILTER);
}

/* ---- the exported calls, from the shim's list of them (shim/hooks.def): each query's parameters, named as there,
 * in the roles the backend reads them in. Backward data: the problem's x is dx, y is dy; backward filter: w is dw,
 * y is dy. ---- */

#define HB_cudnnGetConvolutionForwardWorkspaceSize                                                             \
    workspace_size(HB_OP_FWD, handle, xDesc, wDesc, convDesc, yDesc, (int)algo, sizeInBytes)
#define HB_cudnnGetConvolutionBackwardDataWorkspaceSize                                                        \
    workspace_size(HB_OP_BWD_DATA, handle, dxDesc, wDesc, convDesc, dyDesc, (int)algo, sizeInBytes)
#define HB_cudnnGetConvolutionBackwardFilterWorkspaceSize                                                      \
    workspace_size(HB_OP_BWD_FILTER, handle, xDesc, gradDesc, convDesc, dyDesc, (int)algo, sizeInBytes)
#define HB_cudnnGetConvolutionForwardAlgorithm_v7                                                              \
    search(HB_OP_FWD, HB_SEARCH_V7, handle, xDesc, wDesc, convDesc, yDesc, requestedAlgoCount, returnedAlgoCount, \
           perfResults, NULL)
#define HB_cudnnGetConvolutionBackwardDataAlgorithm_v7                                                         \
    search(HB_OP_BWD_DATA, HB_SEARCH_V7, handle, dxDesc, wDesc, convDesc, dyDesc, requestedAlgoCount,           \
           returnedAlgoCount, (hb_perf *)(void *)perfResults, NULL)
#define HB_cudnnGetConvolutionBackwardFilterAlgorithm_v7                                                       \
    search(HB_OP_BWD_FILTER, HB_SEARCH_V7, handle, srcDesc, gradDesc, convDesc, diffDesc, requestedAlgoCount,   \
           returnedAlgoCount, (hb_perf *)(void *)perfResults, NULL)
#define HB_cudnnFindConvolutionForwardAlgorithm                                                                \
    search(HB_OP_FWD, HB_SEARCH_FIND, handle, xDesc, wDesc, convDesc, yDesc, requestedAlgoCount,                \
           returnedAlgoCount, perfResults, NULL)
#define HB_cudnnFindConvolutionBackwardDataAlgorithm                                                           \
    search(HB_OP_BWD_DATA, HB_SEARCH_FIND, handle, dxDesc, wDesc, convDesc, dyDesc, requestedAlgoCount,         \
           returnedAlgoCount, (hb_perf *)(void *)perfResults, NULL)
#define HB_cudnnFindConvolutionBackwardFilterAlgorithm                                                         \
    search(HB_OP_BWD_FILTER, HB_SEARCH_FIND, handle, xDesc, dwDesc, convDesc, dyDesc, requestedAlgoCount,       \
           returnedAlgoCount, (hb_perf *)(void *)perfResults, NULL)
#define HB_cudnnFindConvolutionForwardAlgorithmEx                                                              \
    search(HB_OP_FWD, HB_SEARCH_FIND_EX, handle, xDesc, wDesc, convDesc, yDesc, requestedAlgoCount,             \
           returnedAlgoCount, perfResults, &(hb_buffers){x, w, y, workSpace, workSpaceSizeInBytes})
#define HB_cudnnFindConvolutionBackwardDataAlgorithmEx                                                         \
    search(HB_OP_BWD_DATA, HB_SEARCH_FIND_EX, handle, dxDesc, wDesc, convDesc, dyDesc, requestedAlgoCount,      \
           returnedAlgoCount, (hb_perf *)(void *)perfResults, &(hb_buffers){w, dy, dx, workSpace, workSpaceSizeInBytes})
#define HB_cudnnFindConvolutionBackwardFilterAlgorithmEx                                                       \
    search(HB_OP_BWD_FILTER, HB_SEARCH_FIND_EX, handle, xDesc, dwDesc, convDesc, dyDesc, requestedAlgoCount,    \
           returnedAlgoCount, (hb_perf *)(void *)perfResults, &(hb_buffers){x, y, dw, workSpace, workSpaceSizeInBytes})

#define UC_QUERY(ret, name, params, args)                                                                          \
    HB_EXPORT ret name params { return HB_##name; }
#include "hooks.def"
