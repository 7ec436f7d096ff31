/*
 * Test driver for the host backend's graph (backend) API: builds and runs convolution graphs through the
 * cudnnBackend* calls, so the Python tests can check the results against the NumPy reference. Built by
 * tests/host/_graph.py against ucudnn/_lib/libcudnn.so.9. Two orders: PyTorch 2.11's real one (gd_spec.order = 1,
 * run_real: what cudnn_frontend's v0.x builders do inside Conv_v8.cpp, in both benchmark modes), and the friendly
 * one below, which keeps every descriptor alive until the plan exists.
 *
 * Per graph: tensors (data type, dims, strides, uid, byte alignment, virtual flag, by-value, vector count and
 * dim, finalize), the convolution descriptor, the operation(s) with alpha/beta, the operation graph (handle,
 * ops, ENGINE_GLOBAL_COUNT), then either the heuristics (mode, result count, the configurations) or one engine
 * by global index (knob infos read, engine configuration built, as the frontend's fallback list does), the
 * configuration's engine notes, the plan (handle, configuration, workspace size, configuration read back, knob
 * choices), and -- once the plan is built -- the destruction of every descriptor the plan was built from, as
 * cudnn_frontend does; then the variant pack (pointers, uids, workspace) and the execution.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucudnn/cudnn_graph_abi.h"

#define DRV_EXPORT __attribute__((visibility("default")))

double ucudnn_host_model_clock_ms(void);

/* The uids PyTorch gives a convolution's tensors, and those of its fused conv-add-bias-relu graph. */
enum { UID_X = 120, UID_W = 119, UID_Y = 121, UID_Z = 'z', UID_B = 'b', UID_C = 'C', UID_A = 'A', UID_AB = 'B' };

typedef struct {
    int op;                   /* 0 forward, 1 backward data, 2 backward filter */
    int dtype;                /* cudnnDataType_t of every tensor */
    int nb;                   /* tensor rank, 4 or 5 */
    int64_t xdim[5], xstr[5], wdim[5], wstr[5], ydim[5], ystr[5];
    int64_t pad[3], stride[3], dil[3];
    int mode;                 /* cudnnConvolutionMode_t */
    double alpha, beta;
    int64_t engine;           /* >= 0: this global engine index; -1: the heuristics' result number heur_rank */
    int heur_mode, heur_rank;
    void *x, *w, *y;          /* x/dx, w/dw, y/dy */
    int fused;                /* forward only: y = relu(conv(x, w) + z_alpha * z + bias), conv virtual */
    int64_t zstr[5];
    void *z, *bias;
    double z_alpha;
    int virtual_dtype;        /* data type of the fused graph's virtual tensors */
    int execute;
    int repeat;               /* executions of the plan (0 or 1: one); model_ms is the last one's */
    /* order 1: PyTorch 2.11's real order (see run_real): tensors and convolution destroyed once the operation is
     * built, INSTANT then FALLBACK heuristics, plans without a handle, the workspace read with a NULL count
     * pointer. order 0: the friendly order above (every descriptor alive until the plan exists). */
    int order;
    int benchmark;            /* order 1: PyTorch's benchmark=True (0: benchmark=False) */
    int64_t capacity;         /* order 1: the simulated caching allocator's largest block (-1: unlimited) */
    int bench_limit;          /* order 1, benchmark: plans timed at most (torch.backends.cudnn.benchmark_limit) */
} gd_spec;

typedef struct {
    int status;               /* of the first call that failed, 0 if none */
    int stage;                /* which step failed (GD_* below) */
    int64_t global_count;
    int64_t nheur, heur[16];  /* engine indices of the heuristics' results */
    int64_t engine;           /* the plan's engine, read back */
    int64_t workspace, cfg_workspace;
    int nnotes, notes[8];
    double model_ms;          /* the model clock's advance over the execution */
    int nconfigs, nplans;     /* order 1: configurations the heuristics gave, plans that built */
    int ran;                  /* order 1: the configuration (heuristics order) whose plan ran, -1 none */
} gd_result;

enum { GD_TENSOR = 1, GD_CONV, GD_OP, GD_GRAPH, GD_HEUR, GD_ENGINE, GD_CFG, GD_NOTES, GD_PLAN, GD_PACK, GD_EXECUTE };

typedef struct {
    cudnnBackendDescriptor_t made[128];
    int n;
    gd_result *r;
    int real; /* PyTorch's real order (gd_spec.order) */
} ctx;

/* Destroy one descriptor of the context now (the real order drops them early). */
static void drop(ctx *c, cudnnBackendDescriptor_t d) {
    for (int i = 0; i < c->n; i++)
        if (c->made[i] == d) {
            cudnnBackendDestroyDescriptor(d);
            c->made[i] = c->made[--c->n];
            return;
        }
}

#define CHECK(c, stg, call)                                                                                      \
    do {                                                                                                           \
        cudnnStatus_t st_ = (call);                                                                                \
        if (st_ != CUDNN_STATUS_SUCCESS) {                                                                         \
            (c)->r->status = (int)st_;                                                                             \
            (c)->r->stage = (stg);                                                                                 \
            return NULL;                                                                                           \
        }                                                                                                          \
    } while (0)

static cudnnBackendDescriptor_t make(ctx *c, int stage, cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = NULL;
    CHECK(c, stage, cudnnBackendCreateDescriptor(type, &d));
    c->made[c->n++] = d;
    return d;
}

static void destroy_all(ctx *c) {
    for (int i = 0; i < c->n; i++) cudnnBackendDestroyDescriptor(c->made[i]);
    c->n = 0;
}

static int64_t alignment_of(const void *p, int dtype) {
    int64_t a = 32, es = dtype == CUDNN_DATA_DOUBLE ? 8 : dtype == CUDNN_DATA_FLOAT ? 4 : 2;
    while (a > es && (uintptr_t)p % (uintptr_t)a) a /= 2;
    return a;
}

static cudnnBackendDescriptor_t tensor(ctx *c, int64_t uid, int dtype, int nb, const int64_t *dim,
                                       const int64_t *str, const void *data, bool is_virtual) {
    cudnnBackendDescriptor_t t = make(c, GD_TENSOR, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    if (!t) return NULL;
    int64_t align = is_virtual ? 16 : alignment_of(data, dtype), vcount = 1, vdim = -1;
    bool by_value = false;
    CHECK(c, GD_TENSOR, cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dtype));
    CHECK(c, GD_TENSOR, cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nb, dim));
    CHECK(c, GD_TENSOR, cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nb, str));
    CHECK(c, GD_TENSOR, cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    CHECK(c, GD_TENSOR, cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    CHECK(c, GD_TENSOR, cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual));
    CHECK(c, GD_TENSOR, cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value));
    CHECK(c, GD_TENSOR, cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_VECTOR_COUNT, CUDNN_TYPE_INT64, 1, &vcount));
    CHECK(c, GD_TENSOR,
          cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION, CUDNN_TYPE_INT64, 1, &vdim));
    CHECK(c, GD_TENSOR, cudnnBackendFinalize(t));
    return t;
}

static void packed(int nb, const int64_t *dim, int64_t *str) {
    str[nb - 1] = 1;
    for (int i = nb - 2; i >= 0; i--) str[i] = str[i + 1] * dim[i + 1];
}

static cudnnBackendDescriptor_t conv_desc(ctx *c, const gd_spec *s) {
    cudnnBackendDescriptor_t d = make(c, GD_CONV, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    if (!d) return NULL;
    int64_t nsp = s->nb - 2;
    int comp = s->dtype == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    CHECK(c, GD_CONV, cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    CHECK(c, GD_CONV,
          cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &s->mode));
    CHECK(c, GD_CONV, cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nsp));
    CHECK(c, GD_CONV, cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, nsp, s->pad));
    CHECK(c, GD_CONV, cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, nsp, s->pad));
    CHECK(c, GD_CONV, cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, nsp, s->dil));
    CHECK(c, GD_CONV,
          cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, nsp, s->stride));
    CHECK(c, GD_CONV, cudnnBackendFinalize(d));
    return d;
}

/* Scaling factors as the frontend sets them: double for double data, float otherwise. */
static cudnnStatus_t set_scale(cudnnBackendDescriptor_t d, int name, int dtype, double v) {
    float f = (float)v;
    if (dtype == CUDNN_DATA_DOUBLE) return cudnnBackendSetAttribute(d, name, CUDNN_TYPE_DOUBLE, 1, &v);
    return cudnnBackendSetAttribute(d, name, CUDNN_TYPE_FLOAT, 1, &f);
}

static cudnnBackendDescriptor_t conv_op(ctx *c, const gd_spec *s, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t w,
                                        cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t cd) {
    static const int kinds[3] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                 CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                                 CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
    static const int base[3] = {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA};
    cudnnBackendDescriptor_t o = make(c, GD_OP, kinds[s->op]);
    if (!o) return NULL;
    int b = base[s->op];
    /* base + 3, 4, 5: W, X, Y (forward); W, DX, DY; DW, X, DY -- the same roles in the same places. */
    CHECK(c, GD_OP, cudnnBackendSetAttribute(o, b + 4, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    CHECK(c, GD_OP, cudnnBackendSetAttribute(o, b + 3, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w));
    CHECK(c, GD_OP, cudnnBackendSetAttribute(o, b + 2, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd));
    CHECK(c, GD_OP, cudnnBackendSetAttribute(o, b + 5, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    CHECK(c, GD_OP, set_scale(o, b, s->dtype, s->alpha));
    CHECK(c, GD_OP, set_scale(o, b + 1, s->dtype, s->fused ? 0.0 : s->beta));
    CHECK(c, GD_OP, cudnnBackendFinalize(o));
    return o;
}

static cudnnBackendDescriptor_t pw_op(ctx *c, int mode, int prec, cudnnBackendDescriptor_t x,
                                      cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y, double alpha2) {
    cudnnBackendDescriptor_t p = make(c, GD_OP, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    if (!p) return NULL;
    CHECK(c, GD_OP, cudnnBackendSetAttribute(p, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    CHECK(c, GD_OP, cudnnBackendSetAttribute(p, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
    if (mode == CUDNN_POINTWISE_RELU_FWD && c->real) { /* PyTorch's ReLU: NaN propagation, its own enum type */
        int nan = 0; /* CUDNN_NOT_PROPAGATE_NAN */
        CHECK(c, GD_OP, cudnnBackendSetAttribute(p, CUDNN_ATTR_POINTWISE_NAN_PROPAGATION, CUDNN_TYPE_NAN_PROPOGATION,
                                                 1, &nan));
    }
    CHECK(c, GD_OP, cudnnBackendFinalize(p));
    cudnnBackendDescriptor_t o = make(c, GD_OP, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    if (!o) return NULL;
    float a1 = 1.0f, a2 = (float)alpha2;
    CHECK(c, GD_OP, cudnnBackendSetAttribute(o, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p));
    CHECK(c, GD_OP,
          cudnnBackendSetAttribute(o, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    if (b)
        CHECK(c, GD_OP,
              cudnnBackendSetAttribute(o, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
    CHECK(c, GD_OP,
          cudnnBackendSetAttribute(o, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    CHECK(c, GD_OP, cudnnBackendSetAttribute(o, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &a1));
    if (b) CHECK(c, GD_OP, cudnnBackendSetAttribute(o, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &a2));
    CHECK(c, GD_OP, cudnnBackendFinalize(o));
    return o;
}

/* The operation graph: one convolution, or the fused conv + add(z) + add(bias) + relu. */
static cudnnBackendDescriptor_t op_graph(ctx *c, const gd_spec *s, cudnnHandle_t h) {
    cudnnBackendDescriptor_t ops[4];
    int nops = 1, first = c->n;
    cudnnBackendDescriptor_t x = tensor(c, UID_X, s->dtype, s->nb, s->xdim, s->xstr, s->x, false);
    cudnnBackendDescriptor_t w = x ? tensor(c, UID_W, s->dtype, s->nb, s->wdim, s->wstr, s->w, false) : NULL;
    cudnnBackendDescriptor_t cd = w ? conv_desc(c, s) : NULL;
    if (!cd) return NULL;
    if (!s->fused) {
        cudnnBackendDescriptor_t y = tensor(c, UID_Y, s->dtype, s->nb, s->ydim, s->ystr, s->y, false);
        if (!y || !(ops[0] = conv_op(c, s, x, w, y, cd))) return NULL;
    } else {
        int64_t vstr[5], bdim[5] = {1, s->ydim[1], 1, 1, 1}, bstr[5];
        packed(s->nb, s->ydim, vstr);
        packed(s->nb, bdim, bstr);
        int vt = s->virtual_dtype;
        cudnnBackendDescriptor_t cv = tensor(c, UID_C, vt, s->nb, s->ydim, vstr, NULL, true);
        cudnnBackendDescriptor_t av = cv ? tensor(c, UID_A, vt, s->nb, s->ydim, vstr, NULL, true) : NULL;
        cudnnBackendDescriptor_t bv = av ? tensor(c, UID_AB, vt, s->nb, s->ydim, vstr, NULL, true) : NULL;
        cudnnBackendDescriptor_t z = bv ? tensor(c, UID_Z, s->dtype, s->nb, s->ydim, s->zstr, s->z, false) : NULL;
        cudnnBackendDescriptor_t b = z ? tensor(c, UID_B, s->dtype, s->nb, bdim, bstr, s->bias, false) : NULL;
        cudnnBackendDescriptor_t y = b ? tensor(c, UID_Y, s->dtype, s->nb, s->ydim, s->ystr, s->y, false) : NULL;
        if (!y || !(ops[0] = conv_op(c, s, x, w, cv, cd))) return NULL;
        if (!(ops[1] = pw_op(c, CUDNN_POINTWISE_ADD, vt, cv, z, av, s->z_alpha))) return NULL;
        if (!(ops[2] = pw_op(c, CUDNN_POINTWISE_ADD, vt, av, b, bv, 1.0))) return NULL;
        if (!(ops[3] = pw_op(c, CUDNN_POINTWISE_RELU_FWD, vt, bv, NULL, y, 1.0))) return NULL;
        nops = 4;
    }
    /* PyTorch's build_opgraph: the tensor, convolution and pointwise descriptors are locals, gone once the
     * operations are built (before the graph, the heuristics and any plan). */
    for (int i = c->n - 1; c->real && i >= first; i--) {
        int op = 0;
        for (int k = 0; k < nops; k++) op |= c->made[i] == ops[k];
        if (!op) drop(c, c->made[i]);
    }
    cudnnBackendDescriptor_t g = make(c, GD_GRAPH, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    if (!g) return NULL;
    CHECK(c, GD_GRAPH, cudnnBackendSetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
    CHECK(c, GD_GRAPH,
          cudnnBackendSetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops));
    CHECK(c, GD_GRAPH, cudnnBackendFinalize(g));
    int64_t n = 0;
    CHECK(c, GD_GRAPH, cudnnBackendGetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64,
                                                1, &n, &c->r->global_count));
    return g;
}

/* The engine configuration to run: from the heuristics, or from one engine by its global index. */
static cudnnBackendDescriptor_t engine_config(ctx *c, const gd_spec *s, cudnnBackendDescriptor_t g) {
    if (s->engine < 0) {
        cudnnBackendDescriptor_t h = make(c, GD_HEUR, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        if (!h) return NULL;
        CHECK(c, GD_HEUR, cudnnBackendSetAttribute(h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g));
        CHECK(c, GD_HEUR,
              cudnnBackendSetAttribute(h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &s->heur_mode));
        CHECK(c, GD_HEUR, cudnnBackendFinalize(h));
        int64_t count = 0;
        CHECK(c, GD_HEUR, cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                                   &count, NULL));
        cudnnBackendDescriptor_t cfgs[16];
        if (count > 16) count = 16;
        for (int64_t i = 0; i < count; i++)
            if (!(cfgs[i] = make(c, GD_HEUR, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR))) return NULL;
        CHECK(c, GD_HEUR, cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                   count, &c->r->nheur, cfgs));
        for (int64_t i = 0; i < c->r->nheur; i++) {
            cudnnBackendDescriptor_t e = make(c, GD_HEUR, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
            if (!e) return NULL;
            int64_t n;
            CHECK(c, GD_HEUR,
                  cudnnBackendGetAttribute(cfgs[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e));
            CHECK(c, GD_HEUR, cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                                       &c->r->heur[i]));
        }
        if (s->heur_rank >= c->r->nheur) {
            c->r->status = CUDNN_STATUS_NOT_SUPPORTED;
            c->r->stage = GD_HEUR;
            return NULL;
        }
        return cfgs[s->heur_rank];
    }
    cudnnBackendDescriptor_t e = make(c, GD_ENGINE, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    if (!e) return NULL;
    CHECK(c, GD_ENGINE,
          cudnnBackendSetAttribute(e, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g));
    CHECK(c, GD_ENGINE, cudnnBackendSetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &s->engine));
    CHECK(c, GD_ENGINE, cudnnBackendFinalize(e));
    cudnnBackendDescriptor_t knobs[4];
    for (int i = 0; i < 4; i++)
        if (!(knobs[i] = make(c, GD_ENGINE, CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR))) return NULL;
    int64_t nknobs = -1;
    CHECK(c, GD_ENGINE,
          cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR, 4, &nknobs, knobs));
    if (nknobs != 0) {
        c->r->status = CUDNN_STATUS_INTERNAL_ERROR;
        c->r->stage = GD_ENGINE;
        return NULL;
    }
    cudnnBackendDescriptor_t cfg = make(c, GD_CFG, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    if (!cfg) return NULL;
    CHECK(c, GD_CFG, cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &e));
    CHECK(c, GD_CFG, cudnnBackendFinalize(cfg));
    return cfg;
}

/* What cudnn_frontend reads of a configuration before and after the plan: engine, notes, knob choices. */
static cudnnBackendDescriptor_t read_config(ctx *c, cudnnBackendDescriptor_t cfg) {
    cudnnBackendDescriptor_t e = make(c, GD_NOTES, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    if (!e) return NULL;
    int64_t n = 0, behavior[4];
    CHECK(c, GD_NOTES,
          cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e));
    CHECK(c, GD_NOTES, cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &c->r->engine));
    CHECK(c, GD_NOTES, cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, 8, &n,
                                                c->r->notes));
    c->r->nnotes = (int)n;
    CHECK(c, GD_NOTES,
          cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, 4, &n, behavior));
    cudnnBackendDescriptor_t choice = make(c, GD_NOTES, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    if (!choice) return NULL;
    CHECK(c, GD_NOTES, cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                1, &n, &choice));
    CHECK(c, GD_NOTES, cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                                &c->r->cfg_workspace));
    return e;
}

static cudnnBackendDescriptor_t plan_of(ctx *c, cudnnHandle_t h, cudnnBackendDescriptor_t cfg) {
    cudnnBackendDescriptor_t p = NULL;
    CHECK(c, GD_PLAN, cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p));
    CHECK(c, GD_PLAN, cudnnBackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
    CHECK(c, GD_PLAN,
          cudnnBackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg));
    cudnnStatus_t st = cudnnBackendFinalize(p);
    int64_t n;
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendGetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                      &c->r->workspace);
    cudnnBackendDescriptor_t back = NULL;
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &back);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendGetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                      &back);
    if (back) c->made[c->n++] = back;
    if (st != CUDNN_STATUS_SUCCESS) {
        cudnnBackendDestroyDescriptor(p);
        c->r->status = (int)st;
        c->r->stage = GD_PLAN;
        return NULL;
    }
    if (!read_config(c, back)) {
        cudnnBackendDestroyDescriptor(p);
        return NULL;
    }
    return p;
}

/* One variant pack of the spec's buffers and this workspace, executed: the status. */
static cudnnStatus_t execute_once(const gd_spec *s, cudnnHandle_t h, cudnnBackendDescriptor_t plan, void *ws,
                                  cudnnBackendDescriptor_t *keep) {
    int64_t uids[5] = {UID_X, UID_W, UID_Y, UID_Z, UID_B};
    void *ptrs[5] = {s->x, s->w, s->y, s->z, s->bias};
    int64_t n = s->fused ? 5 : 3;
    cudnnBackendDescriptor_t vp = keep ? *keep : NULL;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    if (!vp) {
        st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
        if (st == CUDNN_STATUS_SUCCESS)
            st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
        if (st == CUDNN_STATUS_SUCCESS)
            st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
        if (st == CUDNN_STATUS_SUCCESS)
            st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
        if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(vp);
    }
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(h, plan, vp);
    if (keep && !*keep) *keep = vp;
    else if (!keep && vp) cudnnBackendDestroyDescriptor(vp);
    return st;
}

/* Execute the plan `repeat` times (model_ms: the last one's): 0 or the status. The friendly order reuses one
 * pack; PyTorch builds a new one for every execution. */
static int execute_plan(const gd_spec *s, gd_result *r, cudnnHandle_t h, cudnnBackendDescriptor_t plan, int64_t need) {
    void *ws = need > 0 ? aligned_alloc(64, (size_t)(need + 63) / 64 * 64) : NULL;
    cudnnBackendDescriptor_t vp = NULL;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    for (int k = 0; k < (s->repeat > 1 ? s->repeat : 1) && st == CUDNN_STATUS_SUCCESS; k++) {
        double t0 = ucudnn_host_model_clock_ms();
        st = execute_once(s, h, plan, ws, s->order ? NULL : &vp);
        r->model_ms = ucudnn_host_model_clock_ms() - t0;
    }
    if (vp) cudnnBackendDestroyDescriptor(vp);
    free(ws);
    return (int)st;
}

static int run(const gd_spec *s, gd_result *r, cudnnHandle_t h) {
    ctx c = {.n = 0, .r = r};
    cudnnBackendDescriptor_t g = op_graph(&c, s, h);
    cudnnBackendDescriptor_t cfg = g ? engine_config(&c, s, g) : NULL;
    cudnnBackendDescriptor_t plan = cfg ? plan_of(&c, h, cfg) : NULL;
    destroy_all(&c); /* the plan stands alone, as cudnn_frontend's do */
    if (!plan) return r->status;
    if (s->execute) {
        int st = execute_plan(s, r, h, plan, r->workspace);
        r->stage = st ? GD_EXECUTE : 0;
        r->status = st;
    }
    cudnnBackendDestroyDescriptor(plan);
    return r->status;
}

/* ---- PyTorch 2.11's real order (Conv_v8.cpp over cudnn_frontend's v0.x builders) ---- */

/* The heuristics' configurations, INSTANT then FALLBACK: a count query, then that many caller-created
 * configurations filled. A spec engine >= 0 moves that engine's configurations first (as a device's
 * heuristics might rank it). Returns how many (at most cap). */
static int configs_of(ctx *c, const gd_spec *s, cudnnBackendDescriptor_t g, cudnnBackendDescriptor_t *cfgs, int cap) {
    int n = 0;
    int modes[2] = {CUDNN_HEUR_MODE_INSTANT, CUDNN_HEUR_MODE_FALLBACK};
    for (int m = 0; m < 2; m++) {
        cudnnBackendDescriptor_t heur = make(c, GD_HEUR, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        int64_t count = 0, got = 0;
        if (!heur ||
            cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g) ||
            cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m]) ||
            cudnnBackendFinalize(heur) ||
            cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL))
            continue;
        if (count > cap - n) count = cap - n;
        for (int64_t i = 0; i < count; i++) cfgs[n + i] = make(c, GD_HEUR, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        if (cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                     cfgs + n) == CUDNN_STATUS_SUCCESS)
            n += (int)got;
        drop(c, heur);
    }
    for (int i = 0, front = 0; s->engine >= 0 && i < n; i++) {
        cudnnBackendDescriptor_t e = NULL;
        int64_t k = 0, index = -1;
        if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &e)) continue;
        if (!cudnnBackendGetAttribute(cfgs[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k, &e))
            cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &k, &index);
        cudnnBackendDestroyDescriptor(e);
        if (index == s->engine) {
            cudnnBackendDescriptor_t moved = cfgs[i];
            for (int j = i; j > front; j--) cfgs[j] = cfgs[j - 1];
            cfgs[front++] = moved;
        }
    }
    return n;
}

/* A plan as the frontend >= 1.13 builds it: no handle; its workspace read once with a NULL count pointer. */
static cudnnBackendDescriptor_t real_plan(cudnnBackendDescriptor_t cfg, int64_t *ws) {
    cudnnBackendDescriptor_t p = NULL;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p)) return NULL;
    if (cudnnBackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg) ||
        cudnnBackendFinalize(p) ||
        cudnnBackendGetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, NULL, ws)) {
        cudnnBackendDestroyDescriptor(p);
        return NULL;
    }
    return p;
}

/* Bytes the op's output buffer spans (what benchmark mode saves and restores around its timing runs). */
static size_t out_bytes(const gd_spec *s, void **out) {
    const int64_t *dim = s->op == 0 ? s->ydim : s->op == 1 ? s->xdim : s->wdim;
    const int64_t *str = s->op == 0 ? s->ystr : s->op == 1 ? s->xstr : s->wstr;
    *out = s->op == 0 ? s->y : s->op == 1 ? s->x : s->w;
    int64_t span = 1;
    for (int d = 0; d < s->nb; d++) span += (dim[d] - 1) * str[d];
    return (size_t)span * (s->dtype == CUDNN_DATA_DOUBLE ? 8 : s->dtype == CUDNN_DATA_FLOAT ? 4 : 2);
}

static int fits(const gd_spec *s, int64_t ws) { return s->capacity < 0 || ws <= s->capacity; }

/* benchmark=True: every plan built while the graph is alive; those that fit timed (at most bench_limit, the
 * model clock), the fastest kept; the output restored, then the kept plan runs. */
static int pick_benchmarked(const gd_spec *s, gd_result *r, cudnnHandle_t h, cudnnBackendDescriptor_t *plans,
                            const int64_t *ws, int n) {
    void *out = NULL;
    size_t bytes = out_bytes(s, &out);
    void *saved = malloc(bytes);
    if (!saved) return -1;
    memcpy(saved, out, bytes);
    int best = -1, timed = 0;
    double best_ms = 0;
    gd_spec once = *s;
    once.repeat = 1;
    for (int i = 0; i < n && timed < (s->bench_limit > 0 ? s->bench_limit : 10); i++) {
        if (!plans[i] || !fits(s, ws[i])) continue;
        timed++;
        if (execute_plan(&once, r, h, plans[i], ws[i]) == 0 && (best < 0 || r->model_ms < best_ms))
            best = i, best_ms = r->model_ms;
        memcpy(out, saved, bytes);
    }
    free(saved);
    return best;
}

static int run_real(const gd_spec *s, gd_result *r, cudnnHandle_t h) {
    ctx c = {.n = 0, .r = r, .real = 1};
    cudnnBackendDescriptor_t g = op_graph(&c, s, h), cfgs[32], plans[32] = {0};
    int64_t ws[32] = {0};
    int n = g ? configs_of(&c, s, g, cfgs, 32) : 0;
    r->nconfigs = n;
    r->ran = -1;
    for (int i = 0; s->benchmark && i < n; i++)
        if ((plans[i] = real_plan(cfgs[i], &ws[i]))) r->nplans++;
    /* The graph and its operations go: get_configs_from_heuristics returns the configurations alone. */
    for (int i = c.n - 1; i >= 0; i--) {
        int cfg = 0;
        for (int k = 0; k < n; k++) cfg |= c.made[i] == cfgs[k];
        if (!cfg) drop(&c, c.made[i]);
    }
    int chosen = s->benchmark ? pick_benchmarked(s, r, h, plans, ws, n) : -1;
    for (int i = 0; !s->benchmark && i < n && r->ran < 0; i++) {
        if (!(plans[i] = real_plan(cfgs[i], &ws[i]))) continue;
        r->nplans++;
        if (fits(s, ws[i]) && (!s->execute || execute_plan(s, r, h, plans[i], ws[i]) == 0)) r->ran = i;
    }
    if (chosen >= 0 && (!s->execute || execute_plan(s, r, h, plans[chosen], ws[chosen]) == 0)) r->ran = chosen;
    if (r->ran >= 0) r->workspace = ws[r->ran];
    for (int i = 0; i < n; i++)
        if (plans[i]) cudnnBackendDestroyDescriptor(plans[i]);
    destroy_all(&c);
    if (r->ran < 0 && !r->status) r->status = CUDNN_STATUS_NOT_SUPPORTED, r->stage = GD_PLAN;
    return r->status;
}

DRV_EXPORT int gd_run(const gd_spec *s, gd_result *r) {
    memset(r, 0, sizeof *r);
    r->engine = -1;
    cudnnHandle_t h = NULL;
    cudnnStatus_t st = cudnnCreate(&h);
    if (st != CUDNN_STATUS_SUCCESS) return r->status = (int)st;
    if (s->order) run_real(s, r, h);
    else run(s, r, h);
    cudnnDestroy(h);
    return r->status;
}

DRV_EXPORT size_t gd_spec_size(void) { return sizeof(gd_spec); }
DRV_EXPORT size_t gd_result_size(void) { return sizeof(gd_result); }
