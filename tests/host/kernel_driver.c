/*
 * Test driver for the host backend's compute kernels: flat entry points over the kernel tables, so the Python
 * tests can run every algorithm on any strides directly, below the cuDNN API layer (which validates and
 * normalises descriptors; here the tests build the hb_problem themselves). Built by tests/host/_kernel_harness.py.
 *
 * Tensors and filters are 10 int64s: 5 extents (n/k, c, d, h, w) then 5 element strides.
 * conv is 10 int64s: pad[3], stride[3], dilation[3], groups.
 */
#include "hb_internal.h"

#define DRV_EXPORT __attribute__((visibility("default")))

static const hb_algo *get(int op, int idx) {
    switch (op) {
    case HB_OP_FWD: return idx >= 0 && idx < hb_fwd_algo_count ? hb_fwd_algos[idx] : NULL;
    case HB_OP_BWD_DATA: return idx >= 0 && idx < hb_bwd_data_algo_count ? hb_bwd_data_algos[idx] : NULL;
    case HB_OP_BWD_FILTER: return idx >= 0 && idx < hb_bwd_filter_algo_count ? hb_bwd_filter_algos[idx] : NULL;
    default: return NULL;
    }
}

static void tensor(hb_tensor *t, const int64_t *v) {
    t->n = v[0];
    t->c = v[1];
    t->stride_n = v[5];
    t->stride_c = v[6];
    for (int d = 0; d < HB_SP; d++) {
        t->sp[d] = v[2 + d];
        t->stride_sp[d] = v[7 + d];
    }
}

static void problem(hb_problem *p, int dtype, int nb_spatial, const int64_t *x, const int64_t *w, const int64_t *y,
                    const int64_t *conv, int cross) {
    p->dtype = (cudnnDataType_t)dtype;
    p->nb_spatial = nb_spatial;
    tensor(&p->x, x);
    tensor(&p->y, y);
    p->w.k = w[0];
    p->w.c = w[1];
    p->w.stride_k = w[5];
    p->w.stride_c = w[6];
    for (int d = 0; d < HB_SP; d++) {
        p->w.sp[d] = w[2 + d];
        p->w.stride_sp[d] = w[7 + d];
        p->pad[d] = conv[d];
        p->stride[d] = conv[3 + d];
        p->dilation[d] = conv[6 + d];
    }
    p->groups = conv[9];
    p->cross_correlation = cross;
    p->math_type = CUDNN_DEFAULT_MATH;
}

DRV_EXPORT int hbt_count(int op) {
    switch (op) {
    case HB_OP_FWD: return hb_fwd_algo_count;
    case HB_OP_BWD_DATA: return hb_bwd_data_algo_count;
    case HB_OP_BWD_FILTER: return hb_bwd_filter_algo_count;
    default: return -1;
    }
}

DRV_EXPORT int hbt_info(int op, int idx, int *algo, int *deterministic, double *rate, const char **name) {
    const hb_algo *a = get(op, idx);
    if (!a) return -1;
    *algo = a->algo;
    *deterministic = a->deterministic;
    *rate = a->model_rate;
    *name = a->name;
    return 0;
}

DRV_EXPORT size_t hbt_workspace(int op, int idx, int dtype, int nb_spatial, const int64_t *x, const int64_t *w,
                                const int64_t *y, const int64_t *conv, int cross) {
    hb_problem p;
    problem(&p, dtype, nb_spatial, x, w, y, conv, cross);
    return get(op, idx)->workspace(&p);
}

DRV_EXPORT int hbt_run(int op, int idx, int dtype, int nb_spatial, const int64_t *x, const int64_t *w,
                       const int64_t *y, const int64_t *conv, int cross, const void *in0, const void *in1, void *out,
                       double alpha, double beta, void *ws, size_t ws_bytes) {
    hb_problem p;
    problem(&p, dtype, nb_spatial, x, w, y, conv, cross);
    return (int)get(op, idx)->run(&p, in0, in1, out, alpha, beta, ws, ws_bytes);
}
