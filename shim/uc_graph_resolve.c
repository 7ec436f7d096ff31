/*
 * Resolving a finalized plan's graph from the records (uc_graph_rec.c), at the plan's Finalize:
 *   plan --ENGINE_CONFIG--> engine config --ENGINE--> engine --OPERATION_GRAPH--> operation graph --OPS--> ops
 * where an engine config that cuDNN filled itself (a heuristics result) is linked to the operation graph its
 * heuristics descriptor named, and the engine's global index, numerical notes and knob choices are read from the
 * real library. A convolution graph the shim understands (one convolution, optionally followed by elementwise
 * pointwise operations, every tensor per sample or broadcast) gets a key and a snapshot of what rebuilding it at
 * another batch size takes (uc_graph_split.c); anything else gets the reason it passes through.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"
#include "uc_internal.h"

/* ---- reading records ---- */


static int int64s(void *desc, int name, int64_t *out, int cap)
{
    int type = -1;
    int64_t n = uc_grec_get(desc, name, &type, out, sizeof *out * (size_t)cap);
    return type == UC_AT_INT64 && n >= 0 && n <= cap ? (int)n : -1;
}

static int one_int(void *desc, int name, int want_type, int32_t *out)
{
    int type = -1;
    return uc_grec_get(desc, name, &type, out, sizeof *out) == 1 && type == want_type ? 0 : -1;
}

static const char *read_tensor(uc_ggraph *g, void *desc, int64_t *uid_out)
{
    int opaque = 0;
    if (uc_grec_type(desc, &opaque, NULL) != UC_BK_TENSOR)
        return "an operation names a tensor the shim did not see built";
    if (opaque)
        return "a tensor has attributes the shim does not copy";
    gtensor t;
    memset(&t, 0, sizeof t);
    int64_t one = 0;
    if (int64s(desc, UC_A_TENSOR_UNIQUE_ID, &t.uid, 1) != 1)
        return "a tensor without a unique id";
    *uid_out = t.uid;
    for (int i = 0; i < g->ntensors; i++)
        if (g->t[i].uid == t.uid)
            return NULL;
    if (g->ntensors == UC_G_MAX_TENSORS)
        return "too many tensors";
    t.nb = int64s(desc, UC_A_TENSOR_DIMENSIONS, t.dims, UC_G_MAXD);
    if (t.nb < 1 || int64s(desc, UC_A_TENSOR_STRIDES, t.strides, UC_G_MAXD) != t.nb)
        return "a tensor's dimensions and strides are unreadable";
    if (one_int(desc, UC_A_TENSOR_DATA_TYPE, UC_AT_DATA_TYPE, &t.dtype) != 0)
        return "a tensor without a data type";
    t.align = int64s(desc, UC_A_TENSOR_BYTE_ALIGNMENT, &one, 1) == 1 ? one : 0;
    unsigned char flag = 0;
    int type = -1;
    t.virt = uc_grec_get(desc, UC_A_TENSOR_IS_VIRTUAL, &type, &flag, 1) == 1 && flag;
    flag = 0;
    t.by_value = uc_grec_get(desc, UC_A_TENSOR_IS_BY_VALUE, &type, &flag, 1) == 1 && flag;
    if (int64s(desc, UC_A_TENSOR_VECTOR_COUNT, &one, 1) == 1 && one > 1)
        return "a vectorized tensor";
    g->t[g->ntensors++] = t;
    return NULL;
}

static const gtensor *tensor_of(const uc_ggraph *g, int64_t uid)
{
    for (int i = 0; i < g->ntensors; i++)
        if (g->t[i].uid == uid)
            return &g->t[i];
    return NULL;
}

static const char *read_conv(void *desc, gop *op)
{
    int opaque = 0;
    if (uc_grec_type(desc, &opaque, NULL) != UC_BK_CONVOLUTION || opaque)
        return "a convolution descriptor the shim did not see built";
    int64_t nsp = 0;
    if (int64s(desc, UC_A_CONV_SPATIAL_DIMS, &nsp, 1) != 1 || nsp < 1 || nsp > UC_G_MAXD - 2)
        return "a convolution without spatial dimensions";
    op->nsp = (int32_t)nsp;
    if (int64s(desc, UC_A_CONV_PRE_PADDINGS, op->pre, UC_G_MAXD) != nsp ||
        int64s(desc, UC_A_CONV_POST_PADDINGS, op->post, UC_G_MAXD) != nsp ||
        int64s(desc, UC_A_CONV_FILTER_STRIDES, op->stride, UC_G_MAXD) != nsp ||
        int64s(desc, UC_A_CONV_DILATIONS, op->dil, UC_G_MAXD) != nsp)
        return "a convolution's paddings, strides or dilations are unreadable";
    if (one_int(desc, UC_A_CONV_MODE, UC_AT_CONVOLUTION_MODE, &op->conv_mode) != 0 ||
        one_int(desc, UC_A_CONV_COMP_TYPE, UC_AT_DATA_TYPE, &op->comp_type) != 0)
        return "a convolution without mode or compute type";
    return NULL;
}

static int elementwise(int mode)
{
    static const int known[] = {UC_PW_ADD,      UC_PW_MUL,         UC_PW_MIN,      UC_PW_MAX,
                                UC_PW_SQRT,     UC_PW_IDENTITY,    UC_PW_RELU_FWD, UC_PW_TANH_FWD,
                                UC_PW_SIGMOID_FWD, UC_PW_ELU_FWD,  UC_PW_GELU_FWD, UC_PW_SOFTPLUS_FWD,
                                UC_PW_SWISH_FWD};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (mode == known[i])
            return 1;
    return 0;
}

static const char *read_op(uc_ggraph *g, void *desc)
{
    int opaque = 0;
    int type = uc_grec_type(desc, &opaque, NULL);
    if (opaque)
        return "an operation has attributes the shim does not copy";
    if (g->nops == UC_G_MAX_OPS)
        return "too many operations";
    gop *op = &g->ops[g->nops];
    memset(op, 0, sizeof *op);
    op->type = type;
    int base;
    switch (type) {
    case UC_BK_OP_CONV_FWD: base = UC_A_OP_FWD_ALPHA; break;
    case UC_BK_OP_CONV_BWD_DATA: base = UC_A_OP_BWD_DATA_ALPHA; break;
    case UC_BK_OP_CONV_BWD_FILTER: base = UC_A_OP_BWD_FILTER_ALPHA; break;
    case UC_BK_OP_POINTWISE: base = -1; break;
    default: return "an operation other than convolution or elementwise pointwise (a reduction, a norm, ...)";
    }
    const char *why = NULL;
    if (base >= 0) {
        /* attribute order after ALPHA, BETA, CONV_DESC: fwd W X Y; dgrad W DX DY; wgrad DW X DY */
        void *conv = uc_grec_desc(desc, base + 2);
        void *a = uc_grec_desc(desc, base + 3), *b = uc_grec_desc(desc, base + 4), *c = uc_grec_desc(desc, base + 5);
        if (!conv || !a || !b || !c)
            return "a convolution operation without its tensors";
        why = read_conv(conv, op);
        /* roles: t[0] the input side (x or dx), t[1] the filter (w or dw), t[2] the output side (y or dy) */
        void *in = b, *filt = a, *out = c;
        if (!why)
            why = read_tensor(g, in, &op->t[0]);
        if (!why)
            why = read_tensor(g, filt, &op->t[1]);
        if (!why)
            why = read_tensor(g, out, &op->t[2]);
    } else {
        void *pw = uc_grec_desc(desc, UC_A_OP_PW_PW_DESCRIPTOR);
        int pw_opaque = 0;
        if (!pw || uc_grec_type(pw, &pw_opaque, NULL) != UC_BK_POINTWISE || pw_opaque ||
            one_int(pw, UC_A_POINTWISE_MODE, UC_AT_POINTWISE_MODE, &op->pw_mode) != 0)
            return "a pointwise operation without a readable mode";
        if (!elementwise(op->pw_mode))
            return "a pointwise mode the shim does not know to be elementwise";
        if (uc_grec_desc(desc, UC_A_OP_PW_DXDESC) || uc_grec_desc(desc, UC_A_OP_PW_DYDESC) ||
            uc_grec_desc(desc, UC_A_OP_PW_TDESC))
            return "a backward or three-input pointwise operation";
        void *x = uc_grec_desc(desc, UC_A_OP_PW_XDESC), *b = uc_grec_desc(desc, UC_A_OP_PW_BDESC),
             *y = uc_grec_desc(desc, UC_A_OP_PW_YDESC);
        if (!x || !y)
            return "a pointwise operation without its tensors";
        why = read_tensor(g, x, &op->t[0]);
        op->t[1] = -1;
        if (!why && b)
            why = read_tensor(g, b, &op->t[1]);
        if (!why)
            why = read_tensor(g, y, &op->t[2]);
    }
    g->nops++;
    return why;
}

/* The graph is one convolution, optionally followed by elementwise operations; find N and check that every
 * tensor either has N as its first dimension (split along N) or is a filter or a broadcast operand. */
static const char *classify(uc_ggraph *g)
{
    int convs = 0, conv = -1;
    for (int i = 0; i < g->nops; i++)
        if (g->ops[i].type != UC_BK_OP_POINTWISE)
            convs++, conv = i;
    if (convs != 1)
        return convs ? "more than one convolution" : "no convolution";
    if (g->ops[conv].type != UC_BK_OP_CONV_FWD && g->nops > 1)
        return "pointwise operations fused to a backward convolution";
    const gtensor *x = tensor_of(g, g->ops[conv].t[0]);
    if (!x || x->nb < 3)
        return "the convolution's input is unreadable";
    g->n = x->dims[0];
    if (g->n < 2)
        return "a batch of one";
    const gtensor *y = tensor_of(g, g->ops[conv].t[2]);
    if (!y || y->nb != x->nb || y->dims[0] != g->n)
        return "the convolution's output is unreadable or not of the input's batch";
    for (int i = 0; i < g->ntensors; i++) {
        const gtensor *t = &g->t[i];
        if (t->by_value)
            return "a tensor passed by value";
        if (t->uid == g->ops[conv].t[1])
            continue; /* the filter: never split */
        if (t->dims[0] != g->n && t->dims[0] != 1)
            return "a tensor whose first dimension is neither N nor 1";
        /* Split along N only what is per sample: the shape of the convolution's input or output past dim 0. A
         * per-channel operand that merely has N channels ([K,1,1,1] with K = N) is not. */
        int input_like = t->nb == x->nb, output_like = t->nb == y->nb;
        for (int d = 1; d < t->nb && d < UC_G_MAXD; d++) {
            input_like = input_like && t->dims[d] == x->dims[d];
            output_like = output_like && t->dims[d] == y->dims[d];
        }
        if (t->dims[0] == g->n && !input_like && !output_like)
            return "a tensor with N rows that is not shaped like the convolution's input or output";
    }
    return NULL;
}

static void graph_key(uc_ggraph *g)
{
    uc_sb sb = {0};
    uc_sb_printf(&sb, "graph;engine=%" PRId64 ";notes=%" PRId64, g->engine, g->notes);
    for (int i = 0; i < g->nops; i++) {
        const gop *op = &g->ops[i];
        uc_sb_printf(&sb, ";op%d=%d:%" PRId64 ",%" PRId64 ",%" PRId64, i, op->type, op->t[0], op->t[1], op->t[2]);
        if (op->type == UC_BK_OP_POINTWISE) {
            uc_sb_printf(&sb, ":pw%d", op->pw_mode);
            continue;
        }
        uc_sb_printf(&sb, ":mode%d:comp%d", op->conv_mode, op->comp_type);
        for (int d = 0; d < op->nsp; d++)
            uc_sb_printf(&sb, ":%" PRId64 "/%" PRId64 "/%" PRId64 "/%" PRId64, op->pre[d], op->post[d], op->stride[d],
                         op->dil[d]);
    }
    for (int i = 0; i < g->ntensors; i++) {
        const gtensor *t = &g->t[i];
        uc_sb_printf(&sb, ";t%" PRId64 "=%d,a%" PRId64 "%s:", t->uid, t->dtype, t->align, t->virt ? ",v" : "");
        for (int d = 0; d < t->nb; d++) {
            if (d == 0 && g->n && t->dims[0] == g->n)
                uc_sb_printf(&sb, "*");
            else
                uc_sb_printf(&sb, "%s%" PRId64, d ? "x" : "", t->dims[d]);
        }
        for (int d = 0; d < t->nb; d++)
            uc_sb_printf(&sb, "%s%" PRId64, d ? "," : "/", t->strides[d]);
    }
    g->key = uc_sb_take(&sb);
}

/* The engine's global index and numerical notes, from the real library (the engine config may have been filled
 * by cuDNN itself). Best effort: -1 and 0 when unreadable. */
static void read_engine(void *engcfg, uc_ggraph *g)
{
    const uc_real_table *r = uc_real();
    g->engine = -1;
    if (!r->cudnnBackendCreateDescriptor || !r->cudnnBackendGetAttribute || !r->cudnnBackendDestroyDescriptor)
        return;
    void *engine = NULL;
    int64_t n = 0;
    uc_guard++;
    if (r->cudnnBackendCreateDescriptor(UC_BK_ENGINE, &engine) == 0) {
        if (r->cudnnBackendGetAttribute(engcfg, UC_A_ENGINECFG_ENGINE, UC_AT_BACKEND_DESCRIPTOR, 1, &n, &engine) ==
                0 &&
            n == 1) {
            int64_t index = -1;
            if (r->cudnnBackendGetAttribute(engine, UC_A_ENGINE_GLOBAL_INDEX, UC_AT_INT64, 1, &n, &index) == 0)
                g->engine = index;
            int32_t notes[16];
            if (r->cudnnBackendGetAttribute(engine, UC_A_ENGINE_NUMERICAL_NOTE, UC_AT_NUMERICAL_NOTE, 16, &n,
                                            notes) == 0)
                for (int64_t i = 0; i < n && i < 16; i++)
                    if (notes[i] >= 0 && notes[i] < 63)
                        g->notes |= (int64_t)1 << notes[i];
        }
        r->cudnnBackendDestroyDescriptor(engine);
    }
    uc_guard--;
}

/* Copy what rebuilding the graph takes: the handle, and every descriptor of the graph (tensors, convolution and
 * pointwise descriptors, operations, the operation graph last), since the framework destroys them soon. */
static const char *snapshot(uc_ggraph *g, void *plan, void *opgraph, void *const *ops, int nops)
{
    int type = -1;
    if (uc_grec_get(plan, UC_A_PLAN_HANDLE, &type, &g->handle, sizeof g->handle) != 1 || type != UC_AT_HANDLE)
        return "the plan's handle was not seen";
    void *deps[UC_G_MAX_NODES];
    int ndeps = 0;
    for (int i = 0; i < nops; i++) {
        uc_gnode op;
        if (uc_grec_copy(ops[i], &op) != 0)
            return "an operation's record could not be copied";
        for (int a = 0; a < op.nattr; a++) {
            if (op.attr[a].type != UC_AT_BACKEND_DESCRIPTOR)
                continue;
            for (int64_t e = 0; e < op.attr[a].count; e++) {
                void *d;
                memcpy(&d, op.attr[a].data + e * (int64_t)sizeof d, sizeof d);
                int seen = 0;
                for (int j = 0; j < ndeps && !seen; j++)
                    seen = deps[j] == d;
                if (!seen && ndeps < UC_G_MAX_NODES - nops - 1)
                    deps[ndeps++] = d;
                else if (!seen)
                    seen = -1;
                if (seen < 0) {
                    uc_gnode_free(&op);
                    return "too many descriptors in the graph";
                }
            }
        }
        uc_gnode_free(&op);
    }
    g->nodes = calloc((size_t)(ndeps + nops + 1), sizeof *g->nodes);
    if (!g->nodes)
        return "out of memory";
    for (int i = 0; i < ndeps + nops + 1; i++) {
        void *d = i < ndeps ? deps[i] : i < ndeps + nops ? ops[i - ndeps] : opgraph;
        if (uc_grec_copy(d, &g->nodes[i]) != 0)
            return "a descriptor of the graph could not be copied";
        g->nnodes = i + 1;
        int t = g->nodes[i].type;
        if (i < ndeps && t != UC_BK_TENSOR && t != UC_BK_CONVOLUTION && t != UC_BK_POINTWISE)
            return "an operation names a descriptor other than a tensor, convolution or pointwise descriptor";
    }
    return NULL;
}

/* The knob choices of the caller's engine configuration, from the real library (cuDNN may have filled them). */
static const char *read_knobs(void *engcfg, uc_ggraph *g)
{
    const uc_real_table *r = uc_real();
    void *kc[UC_G_MAX_KNOBS] = {0};
    const char *why = NULL;
    int made = 0;
    int64_t got = 0;
    uc_guard++;
    for (; made < UC_G_MAX_KNOBS && !why; made++)
        if (r->cudnnBackendCreateDescriptor(UC_BK_KNOB_CHOICE, &kc[made]) != 0)
            why = "cannot create knob-choice descriptors";
    if (!why && r->cudnnBackendGetAttribute(engcfg, UC_A_ENGINECFG_KNOB_CHOICES, UC_AT_BACKEND_DESCRIPTOR,
                                            UC_G_MAX_KNOBS, &got, kc) != 0)
        why = "the engine configuration's knob choices are unreadable";
    if (!why && (got < 0 || got > UC_G_MAX_KNOBS))
        why = "too many knob choices";
    for (int64_t k = 0; !why && k < got; k++) {
        int32_t type = -1;
        int64_t n = 0, value = 0;
        if (r->cudnnBackendGetAttribute(kc[k], UC_A_KNOB_CHOICE_KNOB_TYPE, UC_AT_KNOB_TYPE, 1, &n, &type) != 0 ||
            r->cudnnBackendGetAttribute(kc[k], UC_A_KNOB_CHOICE_KNOB_VALUE, UC_AT_INT64, 1, &n, &value) != 0)
            why = "a knob choice is unreadable";
        g->knob_type[k] = type;
        g->knob_value[k] = value;
    }
    for (int i = 0; i < made; i++)
        if (kc[i])
            r->cudnnBackendDestroyDescriptor(kc[i]);
    uc_guard--;
    g->nknobs = why ? 0 : (int)got;
    return why;
}

/* Resolve a finalized plan's graph from the records. */
uc_ggraph *uc_graph_resolve(void *plan)
{
    uc_ggraph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    pthread_mutex_init(&g->lock, NULL);
    g->plan = plan;
    g->engine = -1;
    void *engcfg = uc_grec_desc(plan, UC_A_PLAN_ENGINE_CONFIG);
    void *engine = engcfg ? uc_grec_desc(engcfg, UC_A_ENGINECFG_ENGINE) : NULL;
    void *opgraph = engine ? uc_grec_desc(engine, UC_A_ENGINE_OPERATION_GRAPH) : NULL;
    if (!opgraph && engcfg)
        opgraph = uc_grec_linked_graph(engcfg);
    void *ops[UC_G_MAX_OPS];
    int type = -1, opaque = 0;
    int64_t nops = opgraph ? uc_grec_get(opgraph, UC_A_OPERATIONGRAPH_OPS, &type, ops, sizeof ops) : -1;
    if (!engcfg)
        g->why_not = "the plan's engine configuration was not seen";
    else if (!opgraph)
        g->why_not = "the plan's operation graph was not seen";
    else if (uc_grec_type(opgraph, &opaque, NULL) != UC_BK_OPERATIONGRAPH || opaque)
        g->why_not = "the operation graph has attributes the shim does not copy";
    else if (nops < 1 || type != UC_AT_BACKEND_DESCRIPTOR || (size_t)nops > UC_G_MAX_OPS)
        g->why_not = "the operation graph's operations are unreadable or too many";
    for (int64_t i = 0; !g->why_not && i < nops; i++)
        g->why_not = read_op(g, ops[i]);
    if (!g->why_not)
        g->why_not = classify(g);
    read_engine(engcfg, g);
    if (!g->why_not)
        g->why_not = snapshot(g, plan, opgraph, ops, (int)nops);
    if (!g->why_not)
        g->why_not = read_knobs(engcfg, g);
    if (!g->why_not)
        graph_key(g);
    return g;
}
