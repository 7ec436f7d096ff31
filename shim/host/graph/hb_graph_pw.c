/*
 * Host backend graph API: the pointwise operations of a fused graph, run after the convolution.
 *
 * One pass over the convolution output's shape (N, C, [D,] H, W); at every element the ops run in the order the
 * graph analysis found (producers first), in double precision: y = op(alpha1 * x) or op(alpha1 * x, alpha2 * b)
 * (alpha1, alpha2 default 1). Values of virtual tensors live only for the element; non-virtual outputs are
 * stored in their data type (16-bit: rounded once). Inputs of extent 1 along a dim are broadcast (stride 0).
 * RELU_FWD: below the lower clip (default 0) v = lower + slope * (v - lower), above the upper clip v = upper; a
 * NaN stays NaN with CUDNN_PROPAGATE_NAN, else becomes the lower clip (as the legacy activation does).
 */
#include <math.h>

#include "hb_graph.h"

#define HB_MAX_TENSORS (3 * HB_GRAPH_MAX_OPS + 1)

typedef struct {
    int64_t uid;
    int in_slot;      /* produced by a pointwise op: read from the element's values */
    char *ptr;        /* memory (inputs; non-virtual outputs are also stored there) */
    int dtype;
    int64_t st[5];    /* element strides over (n, c, d, h, w), 0 where broadcast */
} entry;

typedef struct {
    int n;
    entry e[HB_MAX_TENSORS];
} table;

void *hb_binding_find(const hb_binding *b, int64_t uid) {
    for (int i = 0; i < b->n; i++)
        if (b->uid[i] == uid) return b->ptr[i];
    return NULL;
}

/* The data pointer of every non-virtual tensor the graph reads or writes. */
static void strides5(const hb_gtensor *t, const int64_t *stride, int64_t st[5]) {
    if (t->nb == 4) {
        st[0] = stride[0];
        st[1] = stride[1];
        st[2] = 0;
        st[3] = stride[2];
        st[4] = stride[3];
    } else {
        for (int i = 0; i < 5; i++) st[i] = stride[i];
    }
    int64_t dims[5] = {t->dim[0], t->dim[1], t->nb == 4 ? 1 : t->dim[2], t->dim[t->nb - 2], t->dim[t->nb - 1]};
    for (int i = 0; i < 5; i++)
        if (dims[i] == 1) st[i] = 0;
}

static int find(const table *tb, int64_t uid) {
    for (int i = 0; i < tb->n; i++)
        if (tb->e[i].uid == uid) return i;
    return -1;
}

/* The entry of tensor t, added on first sight: the convolution output at yconv, else a pointwise output (slot),
 * else an input from the binding. */
static int entry_of(table *tb, const hb_graph *g, const hb_gtensor *t, const hb_binding *b, const void *yconv,
                    int produced) {
    int i = find(tb, t->uid);
    if (i >= 0) return i;
    entry *e = &tb->e[tb->n];
    e->uid = t->uid;
    e->dtype = t->dtype;
    e->in_slot = produced;
    e->ptr = t->is_virtual ? NULL : hb_binding_find(b, t->uid);
    const hb_gtensor *yt = &g->ops[g->conv].t[HB_R_Y];
    if (t->uid == yt->uid) {
        e->in_slot = 0;
        e->ptr = (char *)yconv;
        e->dtype = g->wide ? CUDNN_DATA_FLOAT : g->prob.dtype;
        if (yt->is_virtual) { /* packed, as the graph analysis laid it out */
            int64_t packed[HB_GDIMS], s = 1;
            for (int64_t k = yt->nb - 1; k >= 0; k--) {
                packed[k] = s;
                s *= yt->dim[k];
            }
            strides5(yt, packed, e->st);
            return tb->n++;
        }
    }
    strides5(t, t->stride, e->st);
    return tb->n++;
}

static double load(const entry *e, int64_t off) {
    switch (e->dtype) {
    case CUDNN_DATA_DOUBLE: return ((const double *)e->ptr)[off];
    case CUDNN_DATA_HALF: return hb_half_to_f(((const hb_half *)e->ptr)[off]);
    case CUDNN_DATA_BFLOAT16: return hb_bf16_to_f(((const hb_bf16 *)e->ptr)[off]);
    default: return ((const float *)e->ptr)[off];
    }
}

static void store(const entry *e, int64_t off, double v) {
    switch (e->dtype) {
    case CUDNN_DATA_DOUBLE: ((double *)e->ptr)[off] = v; break;
    case CUDNN_DATA_HALF: ((hb_half *)e->ptr)[off] = (hb_half)(float)v; break;
    case CUDNN_DATA_BFLOAT16: ((hb_bf16 *)e->ptr)[off] = hb_f_to_bf16((float)v); break;
    default: ((float *)e->ptr)[off] = (float)v; break;
    }
}

static double apply(const hb_gpw *pw, double a, double b) {
    switch (pw->mode) {
    case CUDNN_POINTWISE_ADD: return a + b;
    case CUDNN_POINTWISE_SUB: return a - b;
    case CUDNN_POINTWISE_MUL: return a * b;
    case CUDNN_POINTWISE_DIV: return a / b;
    case CUDNN_POINTWISE_MIN: return fmin(a, b);
    case CUDNN_POINTWISE_MAX: return fmax(a, b);
    case CUDNN_POINTWISE_TANH_FWD: return tanh(a);
    case CUDNN_POINTWISE_SIGMOID_FWD: return 1.0 / (1.0 + exp(-a));
    case CUDNN_POINTWISE_RELU_FWD:
        if (isnan(a)) return pw->nan == CUDNN_PROPAGATE_NAN ? a : pw->lower_clip;
        if (a < pw->lower_clip) a = pw->lower_clip + pw->slope * (a - pw->lower_clip);
        return a > pw->upper_clip ? pw->upper_clip : a;
    default: return a; /* IDENTITY */
    }
}

void hb_pointwise_run(const hb_graph *g, const hb_binding *b, const void *yconv) {
    table tb;
    tb.n = 0;
    int ex[HB_GRAPH_MAX_OPS], eb[HB_GRAPH_MAX_OPS], ey[HB_GRAPH_MAX_OPS];
    double a1[HB_GRAPH_MAX_OPS], a2[HB_GRAPH_MAX_OPS];
    for (int k = 0; k < g->npw; k++) {
        const hb_gop *o = &g->ops[g->pw[k]];
        ex[k] = entry_of(&tb, g, &o->t[HB_R_X], b, yconv, 0);
        eb[k] = hb_pw_binary(o->pw.mode) ? entry_of(&tb, g, &o->t[HB_R_B], b, yconv, 0) : -1;
        a1[k] = o->alpha.type ? o->alpha.v : 1.0;
        a2[k] = o->beta.type ? o->beta.v : 1.0;
    }
    /* Outputs after inputs: an output seen earlier as an input (of a later op in the list) becomes a slot. */
    for (int k = 0; k < g->npw; k++) {
        const hb_gtensor *t = &g->ops[g->pw[k]].t[HB_R_Y];
        ey[k] = entry_of(&tb, g, t, b, yconv, 1);
        tb.e[ey[k]].in_slot = 1;
        tb.e[ey[k]].ptr = t->is_virtual ? NULL : hb_binding_find(b, t->uid);
        tb.e[ey[k]].dtype = t->dtype;
        strides5(t, t->stride, tb.e[ey[k]].st);
    }

    const hb_gtensor *shape = &g->ops[g->conv].t[HB_R_Y];
    int64_t dims[5] = {shape->dim[0], shape->dim[1], shape->nb == 4 ? 1 : shape->dim[2], shape->dim[shape->nb - 2],
                       shape->dim[shape->nb - 1]};
    double val[HB_MAX_TENSORS];
    int64_t idx[5];
    for (idx[0] = 0; idx[0] < dims[0]; idx[0]++)
        for (idx[1] = 0; idx[1] < dims[1]; idx[1]++)
            for (idx[2] = 0; idx[2] < dims[2]; idx[2]++)
                for (idx[3] = 0; idx[3] < dims[3]; idx[3]++)
                    for (idx[4] = 0; idx[4] < dims[4]; idx[4]++) {
                        for (int k = 0; k < g->npw; k++) {
                            int ids[2] = {ex[k], eb[k]};
                            double in[2] = {0, 0};
                            for (int j = 0; j < 2 && ids[j] >= 0; j++) {
                                const entry *e = &tb.e[ids[j]];
                                if (e->in_slot) {
                                    in[j] = val[ids[j]];
                                } else {
                                    int64_t off = 0;
                                    for (int d = 0; d < 5; d++) off += idx[d] * e->st[d];
                                    in[j] = load(e, off);
                                }
                            }
                            const hb_gop *o = &g->ops[g->pw[k]];
                            double r = apply(&o->pw, a1[k] * in[0], a2[k] * in[1]);
                            const entry *e = &tb.e[ey[k]];
                            val[ey[k]] = r;
                            if (e->ptr) {
                                int64_t off = 0;
                                for (int d = 0; d < 5; d++) off += idx[d] * e->st[d];
                                store(e, off, r);
                            }
                        }
                    }
}
