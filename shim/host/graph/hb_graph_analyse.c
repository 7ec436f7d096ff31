/*
 * Host backend graph API: what a finalized operation graph computes. A graph the backend computes:
 *   - one convolution (forward, backward data or backward filter) on non-virtual inputs, 2-D or 3-D, with what
 *     the legacy API takes (hb_build_problem): equal data types, symmetric padding, a packed NCHW or NHWC (KRSC)
 *     filter, any tensor strides;
 *   - after a forward convolution, any number of pointwise operations (hb_pw_supported modes) whose tensors have
 *     the convolution output's shape, inputs possibly broadcast (a dim of 1, e.g. a [1,K,1,1] bias); virtual
 *     tensors must be produced and consumed inside the graph. The convolution's output, when virtual, lives in
 *     the workspace (that is what the plan's workspace adds to the algorithm's). A virtual FLOAT output of 16-bit
 *     data is computed in float, as cuDNN's fused engines keep it: the engine converts x and w to float in its
 *     workspace too and runs the float convolution, and the result is never rounded to 16 bits.
 * Any other graph finalizes (as on the real library) with ENGINE_GLOBAL_COUNT 0 (hb_graph_build.c), among them a
 * pointwise operation without its pointwise descriptor or with parts that were never finalized.
 */
#include <limits.h>
#include <string.h>

#include "hb_graph.h"

static int is_pointwise(const hb_gop *o) { return o->kind == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR; }

int hb_pw_supported(int mode) {
    switch (mode) {
    case CUDNN_POINTWISE_ADD:
    case CUDNN_POINTWISE_SUB:
    case CUDNN_POINTWISE_MUL:
    case CUDNN_POINTWISE_DIV:
    case CUDNN_POINTWISE_MIN:
    case CUDNN_POINTWISE_MAX:
    case CUDNN_POINTWISE_IDENTITY:
    case CUDNN_POINTWISE_RELU_FWD:
    case CUDNN_POINTWISE_TANH_FWD:
    case CUDNN_POINTWISE_SIGMOID_FWD: return 1;
    default: return 0;
    }
}

static int same_tensor(const hb_gtensor *a, const hb_gtensor *b) {
    if (a->nb != b->nb || a->dtype != b->dtype || a->is_virtual != b->is_virtual) return 0;
    for (int64_t i = 0; i < a->nb; i++)
        if (a->dim[i] != b->dim[i] || a->stride[i] != b->stride[i]) return 0;
    return 1;
}

/* The operation writing `uid`, -1 if none. */
static int producer(const hb_graph *g, int64_t uid) {
    for (int i = 0; i < g->nops; i++)
        if (g->ops[i].t[hb_op_output(&g->ops[i])].uid == uid) return i;
    return -1;
}

static int consumed(const hb_graph *g, int64_t uid) {
    for (int i = 0; i < g->nops; i++) {
        int in[3];
        int n = hb_op_inputs(&g->ops[i], in);
        for (int k = 0; k < n; k++)
            if (g->ops[i].t[in[k]].uid == uid) return 1;
    }
    return 0;
}

/* Every tensor: plain (no vectors, by-value scalars or reordering), one description per uid, virtual ones
 * produced and consumed inside the graph. */
static int tensors_ok(const hb_graph *g) {
    const hb_gtensor *seen[3 * HB_GRAPH_MAX_OPS];
    int nseen = 0;
    for (int i = 0; i < g->nops; i++) {
        const hb_gop *o = &g->ops[i];
        if (is_pointwise(o) && (o->has[HB_R_T] || o->has[HB_R_DX] || o->has[HB_R_DY])) return 0;
        int roles[4];
        int n = hb_op_inputs(o, roles);
        roles[n++] = hb_op_output(o);
        for (int k = 0; k < n; k++) {
            const hb_gtensor *t = &o->t[roles[k]];
            if (t->vec_count != 1 || t->by_value || t->reorder != CUDNN_TENSOR_REORDERING_NONE) return 0;
            for (int j = 0; j < nseen; j++)
                if (seen[j]->uid == t->uid && !same_tensor(seen[j], t)) return 0;
            seen[nseen++] = t;
            if (t->is_virtual) {
                int p = producer(g, t->uid);
                if (p < 0 || (k < n - 1 && p == i) || !consumed(g, t->uid)) return 0;
            }
        }
    }
    return 1;
}

static int fits_int(const hb_gtensor *t, int *dim, int *stride) {
    for (int64_t i = 0; i < t->nb; i++) {
        if (t->dim[i] > INT_MAX || t->stride[i] > INT_MAX) return 0;
        dim[i] = (int)t->dim[i];
        stride[i] = (int)t->stride[i];
    }
    return 1;
}

/* Whether the strides are those of a packed tensor whose dims lie in memory in `order` (outermost first);
 * dims of extent 1 may have any stride. Not where the elements outnumber int64. */
static int packed_in(const hb_gtensor *t, const int *order) {
    int64_t expect = 1;
    for (int64_t k = t->nb - 1; k >= 0; k--) {
        int i = order[k];
        if ((t->dim[i] > 1 && t->stride[i] != expect) || __builtin_mul_overflow(expect, t->dim[i], &expect)) return 0;
    }
    return 1;
}

/* The legacy filter format of w's strides, -1 if neither packed NCHW nor packed NHWC (K, spatial..., C). */
static int filter_format(const hb_gtensor *w) {
    int nchw[HB_GDIMS], nhwc[HB_GDIMS];
    for (int i = 0; i < w->nb; i++) nchw[i] = i;
    nhwc[0] = 0;
    for (int i = 1; i < w->nb - 1; i++) nhwc[i] = i + 1;
    nhwc[w->nb - 1] = 1;
    if (packed_in(w, nchw)) return CUDNN_TENSOR_NCHW;
    if (packed_in(w, nhwc)) return CUDNN_TENSOR_NHWC;
    return -1;
}

/* A 16-bit convolution with a virtual FLOAT result: the float problem the engines run, and the spans of x and w
 * they convert (0: too large to convert). */
static int widen(hb_graph *g, const hb_gtensor *x, const hb_gtensor *w) {
    int64_t xs = hb_gtensor_span(x), ws = hb_gtensor_span(w);
    if (xs < 1 || ws < 1 || (uint64_t)xs >= SIZE_MAX / 8 || (uint64_t)ws >= SIZE_MAX / 8) return 0;
    g->x_span = (size_t)xs;
    g->w_span = (size_t)ws;
    g->fprob = g->prob;
    g->fprob.dtype = CUDNN_DATA_FLOAT;
    g->wide = 1;
    return 1;
}

/* The convolution as a checked hb_problem (through the legacy descriptors, so both APIs accept the same). */
static int conv_problem(hb_graph *g, const hb_gop *o) {
    const hb_gtensor *x = &o->t[HB_R_X], *w = &o->t[HB_R_W], *y = &o->t[HB_R_Y];
    int out = hb_op_output(o);
    if (x->is_virtual || w->is_virtual || (y->is_virtual && out != HB_R_Y)) return 0;
    int dt = x->dtype;
    if (w->dtype != dt || (!y->is_virtual && y->dtype != dt)) return 0;
    const hb_gconv *c = &o->conv;
    if (c->mode != CUDNN_CONVOLUTION && c->mode != CUDNN_CROSS_CORRELATION) return 0;
    for (int64_t i = 0; i < c->nsp; i++)
        if (c->v[2][i] != c->v[3][i] || c->v[2][i] > INT_MAX || c->v[1][i] > INT_MAX || c->v[0][i] > INT_MAX)
            return 0;
    int format = filter_format(w);
    if (format < 0) return 0;

    struct cudnnTensorStruct lx = {.magic = HB_MAGIC_TENSOR, .nb = (int)x->nb, .dtype = dt, .vect = 1};
    struct cudnnTensorStruct ly = {.magic = HB_MAGIC_TENSOR, .nb = (int)y->nb, .dtype = dt, .vect = 1};
    struct cudnnFilterStruct lw = {.magic = HB_MAGIC_FILTER, .nb = (int)w->nb, .dtype = dt, .format = format};
    int wstride[HB_GDIMS];
    if (!fits_int(x, lx.dim, lx.stride) || !fits_int(y, ly.dim, ly.stride) || !fits_int(w, lw.dim, wstride))
        return 0;
    if (y->is_virtual) { /* the backend's own buffer: packed */
        int64_t s = 1;
        for (int i = ly.nb - 1; i >= 0; i--) {
            if (s > INT_MAX) return 0;
            ly.stride[i] = (int)s;
            s *= ly.dim[i];
        }
    }
    struct cudnnConvolutionStruct lc = {.magic = HB_MAGIC_CONV, .len = (int)c->nsp, .mode = c->mode,
                                        .compute = c->comp, .math = CUDNN_DEFAULT_MATH,
                                        .groups = (int)(x->dim[1] / w->dim[1])};
    for (int64_t i = 0; i < c->nsp; i++) {
        lc.pad[i] = (int)c->v[2][i];
        lc.stride[i] = (int)c->v[1][i];
        lc.dil[i] = (int)c->v[0][i];
    }
    if (hb_build_problem(&lx, &lw, &lc, &ly, &g->prob) != CUDNN_STATUS_SUCCESS) return 0;
    g->op = o->kind == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR       ? HB_OP_FWD
            : o->kind == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR ? HB_OP_BWD_DATA
                                                                                    : HB_OP_BWD_FILTER;
    g->alpha = o->alpha.type ? o->alpha.v : 1.0;
    g->beta = o->beta.type ? o->beta.v : 0.0;
    g->y_virtual = y->is_virtual;
    g->wide = 0;
    if (g->y_virtual) {
        if (g->beta != 0.0) return 0; /* nothing to blend with */
        if (hb_is_16bit(dt) && y->dtype == CUDNN_DATA_FLOAT && !widen(g, x, w)) return 0;
        size_t bytes = hb_dtype_size(g->wide ? CUDNN_DATA_FLOAT : dt);
        for (int i = 0; i < ly.nb; i++) {
            if (ly.dim[i] && bytes > SIZE_MAX / 2 / (size_t)ly.dim[i]) return 0;
            bytes *= (size_t)ly.dim[i];
        }
        g->y_bytes = bytes;
    }
    return 1;
}

/* The pointwise ops: supported modes and types, shapes of the convolution output (inputs may broadcast), and an
 * order in which every op comes after the producers of its inputs. */
static int pointwise_plan(hb_graph *g) {
    const hb_gtensor *shape = &g->ops[g->conv].t[HB_R_Y];
    int done[HB_GRAPH_MAX_OPS] = {0};
    done[g->conv] = 1;
    g->npw = 0;
    for (int i = 0; i < g->nops; i++) {
        const hb_gop *o = &g->ops[i];
        if (i == g->conv) continue;
        if (!o->has_pw || !o->pw.finalized || !hb_pw_supported(o->pw.mode)) return 0;
        int roles[4];
        int n = hb_op_inputs(o, roles);
        roles[n++] = HB_R_Y;
        for (int k = 0; k < n; k++) {
            const hb_gtensor *t = &o->t[roles[k]];
            if (!t->finalized) return 0; /* the operation took it unfinalized, as the real library lets it */
            int dt = t->dtype;
            if (dt != CUDNN_DATA_FLOAT && dt != CUDNN_DATA_DOUBLE && !hb_is_16bit(dt)) return 0;
            if (t->nb != shape->nb) return 0;
            for (int64_t d = 0; d < t->nb; d++) {
                int broadcast = k < n - 1 && t->dim[d] == 1;
                if (t->dim[d] != shape->dim[d] && !broadcast) return 0;
                if (t->dim[d] > 1 && t->stride[d] < 1) return 0;
            }
            if (t->is_virtual && roles[k] != HB_R_Y) {
                for (int64_t d = 0; d < t->nb; d++)
                    if (t->dim[d] != shape->dim[d]) return 0;
            }
        }
    }
    while (g->npw < g->nops - 1) {
        int progress = 0;
        for (int i = 0; i < g->nops; i++) {
            if (done[i]) continue;
            int in[3], ready = 1;
            int n = hb_op_inputs(&g->ops[i], in);
            for (int k = 0; k < n; k++) {
                int p = producer(g, g->ops[i].t[in[k]].uid);
                if (p >= 0 && !done[p]) ready = 0;
            }
            if (ready) {
                done[i] = progress = 1;
                g->pw[g->npw++] = i;
            }
        }
        if (!progress) return 0; /* a cycle */
    }
    g->down_convert = g->npw > 0 && g->y_virtual && !g->wide && hb_is_16bit(g->prob.dtype) &&
                      hb_gdtype_size(shape->dtype) > hb_dtype_size(g->prob.dtype);
    return 1;
}

int hb_graph_analyse(hb_graph *g) {
    g->conv = -1;
    for (int i = 0; i < g->nops; i++) {
        if (is_pointwise(&g->ops[i])) continue;
        if (g->conv >= 0) return 0;
        g->conv = i;
    }
    if (g->conv < 0) return 0;
    const hb_gop *c = &g->ops[g->conv];
    if (c->kind != CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR && g->nops > 1) return 0;
    return tensors_ok(g) && conv_problem(g, c) && pointwise_plan(g);
}
