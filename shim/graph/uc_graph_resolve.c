/*
 * Resolving a finalized plan's graph from its recorded value (uc_graph_rec.c), at the plan's Finalize:
 *   plan --ENGINE_CONFIG--> engine config --ENGINE--> engine --OPERATION_GRAPH--> operation graph --OPS--> ops
 * every arrow a value taken when the attribute was set (never an address looked up now), where an engine config
 * that cuDNN filled itself (a heuristics result) holds the operation graph its heuristics descriptor held
 * (UC_GLINK_GRAPH). The engine's global index, numerical notes and knob choices are read from the real library,
 * through the plan itself. A convolution graph the shim understands (one convolution, optionally followed by
 * elementwise pointwise operations, every tensor per sample or broadcast) gets a key and the values rebuilding it
 * at another batch size takes (uc_graph_split.c); anything else gets the reason it passes through. An engine
 * configuration's workspace query (the v1 API filters by it) resolves the configuration the same way.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"

/* ---- reading values ---- */

static const char *read_tensor(uc_ggraph *g, const uc_gval *v, int64_t *uid_out)
{
    if (!v || v->type != UC_BK_TENSOR)
        return "an operation names a tensor the shim did not see built";
    if (v->opaque)
        return "a tensor has attributes the shim does not copy";
    if (!v->finalized)
        return "a tensor was set on an operation before it was finalized";
    gtensor t;
    memset(&t, 0, sizeof t);
    int64_t one = 0;
    if (uc_gval_int64s(v, UC_A_TENSOR_UNIQUE_ID, &t.uid, 1) != 1)
        return "a tensor without a unique id";
    *uid_out = t.uid;
    t.nb = uc_gval_int64s(v, UC_A_TENSOR_DIMENSIONS, t.dims, UC_G_MAXD);
    if (t.nb < 1 || uc_gval_int64s(v, UC_A_TENSOR_STRIDES, t.strides, UC_G_MAXD) != t.nb)
        return "a tensor's dimensions and strides are unreadable";
    if (uc_gval_enum(v, UC_A_TENSOR_DATA_TYPE, UC_AT_DATA_TYPE, &t.dtype) != 0)
        return "a tensor without a data type";
    t.align = uc_gval_int64s(v, UC_A_TENSOR_BYTE_ALIGNMENT, &one, 1) == 1 ? one : 0;
    const uc_gattr *a = uc_gval_attr(v, UC_A_TENSOR_IS_VIRTUAL);
    t.virt = a && a->type == UC_AT_BOOLEAN && a->count == 1 && a->data[0];
    a = uc_gval_attr(v, UC_A_TENSOR_IS_BY_VALUE);
    t.by_value = a && a->type == UC_AT_BOOLEAN && a->count == 1 && a->data[0];
    if (uc_gval_int64s(v, UC_A_TENSOR_VECTOR_COUNT, &one, 1) == 1 && one > 1)
        return "a vectorized tensor";
    for (int i = 0; i < g->ntensors; i++) {
        const gtensor *o = &g->t[i];
        if (o->uid != t.uid)
            continue;
        int same = o->nb == t.nb && o->dtype == t.dtype && o->virt == t.virt && o->by_value == t.by_value &&
                   memcmp(o->dims, t.dims, sizeof t.dims) == 0 && memcmp(o->strides, t.strides, sizeof t.strides) == 0;
        return same ? NULL : "two different tensors share a unique id";
    }
    if (g->ntensors == UC_G_MAX_TENSORS)
        return "too many tensors";
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

static const char *read_conv(const uc_gval *v, gop *op)
{
    if (!v || v->type != UC_BK_CONVOLUTION || v->opaque)
        return "a convolution descriptor the shim did not see built";
    if (!v->finalized)
        return "a convolution descriptor was set on an operation before it was finalized";
    int64_t nsp = 0;
    if (uc_gval_int64s(v, UC_A_CONV_SPATIAL_DIMS, &nsp, 1) != 1 || nsp < 1 || nsp > UC_G_MAXD - 2)
        return "a convolution without spatial dimensions";
    op->nsp = (int32_t)nsp;
    if (uc_gval_int64s(v, UC_A_CONV_PRE_PADDINGS, op->pre, UC_G_MAXD) != nsp ||
        uc_gval_int64s(v, UC_A_CONV_POST_PADDINGS, op->post, UC_G_MAXD) != nsp ||
        uc_gval_int64s(v, UC_A_CONV_FILTER_STRIDES, op->stride, UC_G_MAXD) != nsp ||
        uc_gval_int64s(v, UC_A_CONV_DILATIONS, op->dil, UC_G_MAXD) != nsp)
        return "a convolution's paddings, strides or dilations are unreadable";
    if (uc_gval_enum(v, UC_A_CONV_MODE, UC_AT_CONVOLUTION_MODE, &op->conv_mode) != 0 ||
        uc_gval_enum(v, UC_A_CONV_COMP_TYPE, UC_AT_DATA_TYPE, &op->comp_type) != 0)
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

static const char *read_op(uc_ggraph *g, const uc_gval *v)
{
    if (!v)
        return "an operation the shim did not see built";
    if (v->opaque)
        return "an operation has attributes the shim does not copy";
    if (!v->finalized)
        return "an operation was set on the graph before it was finalized";
    int type = v->type;
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
        const uc_gval *conv = uc_gval_desc(v, base + 2);
        const uc_gval *a = uc_gval_desc(v, base + 3), *b = uc_gval_desc(v, base + 4), *c = uc_gval_desc(v, base + 5);
        if (!conv || !a || !b || !c)
            return "a convolution operation without its tensors (or they were not seen built)";
        why = read_conv(conv, op);
        /* roles: t[0] the input side (x or dx), t[1] the filter (w or dw), t[2] the output side (y or dy) */
        const uc_gval *in = b, *filt = a, *out = c;
        if (!why)
            why = read_tensor(g, in, &op->t[0]);
        if (!why)
            why = read_tensor(g, filt, &op->t[1]);
        if (!why)
            why = read_tensor(g, out, &op->t[2]);
    } else {
        const uc_gval *pw = uc_gval_desc(v, UC_A_OP_PW_PW_DESCRIPTOR);
        if (!pw || pw->type != UC_BK_POINTWISE || pw->opaque || !pw->finalized ||
            uc_gval_enum(pw, UC_A_POINTWISE_MODE, UC_AT_POINTWISE_MODE, &op->pw_mode) != 0)
            return "a pointwise operation without a readable mode";
        if (!elementwise(op->pw_mode))
            return "a pointwise mode the shim does not know to be elementwise";
        if (uc_gval_attr(v, UC_A_OP_PW_DXDESC) || uc_gval_attr(v, UC_A_OP_PW_DYDESC) ||
            uc_gval_attr(v, UC_A_OP_PW_TDESC))
            return "a backward or three-input pointwise operation";
        const uc_gval *x = uc_gval_desc(v, UC_A_OP_PW_XDESC), *b = uc_gval_desc(v, UC_A_OP_PW_BDESC),
                      *y = uc_gval_desc(v, UC_A_OP_PW_YDESC);
        if (!x || !y)
            return "a pointwise operation without its tensors";
        why = read_tensor(g, x, &op->t[0]);
        op->t[1] = -1;
        if (!why && uc_gval_attr(v, UC_A_OP_PW_BDESC))
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

void uc_graph_knobs_text(uc_sb *sb, const uc_ggraph *g)
{
    for (int k = 0; k < g->nknobs; k++)
        uc_sb_printf(sb, "%s%" PRId64 ":%" PRId64, k ? "," : "", g->knob_type[k], g->knob_value[k]);
}

static void graph_key(uc_ggraph *g)
{
    uc_sb sb = {0};
    uc_sb_printf(&sb, "graph;engine=%" PRId64 ";notes=%" PRId64 ";knobs=", g->engine, g->notes);
    uc_graph_knobs_text(&sb, g);
    g->shape_at = sb.len; /* what follows is the graph's shape, whichever engine runs it */
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
 * by cuDNN itself). Best effort: -1 and 0 when unreadable. Under uc_guard. */
static void read_engine(void *engcfg, uc_ggraph *g)
{
    const uc_real_table *r = uc_real();
    void *engine = NULL;
    int64_t n = 0;
    if (r->cudnnBackendCreateDescriptor(UC_BK_ENGINE, &engine) != 0)
        return;
    if (r->cudnnBackendGetAttribute(engcfg, UC_A_ENGINECFG_ENGINE, UC_AT_BACKEND_DESCRIPTOR, 1, &n, &engine) == 0 &&
        n == 1) {
        int64_t index = -1;
        if (r->cudnnBackendGetAttribute(engine, UC_A_ENGINE_GLOBAL_INDEX, UC_AT_INT64, 1, &n, &index) == 0)
            g->engine = index;
        int32_t notes[16];
        if (r->cudnnBackendGetAttribute(engine, UC_A_ENGINE_NUMERICAL_NOTE, UC_AT_NUMERICAL_NOTE, 16, &n, notes) == 0)
            for (int64_t i = 0; i < n && i < 16; i++)
                if (notes[i] >= 0 && notes[i] < 63)
                    g->notes |= (int64_t)1 << notes[i];
    }
    r->cudnnBackendDestroyDescriptor(engine);
}

/* Add a value to the graph's nodes once (they hold a reference each): 0, or -1 when there is no room. */
static int add_node(uc_ggraph *g, uc_gval *v, int cap)
{
    for (int j = 0; j < g->nnodes; j++)
        if (g->nodes[j] == v)
            return 0;
    if (g->nnodes == cap)
        return -1;
    g->nodes[g->nnodes++] = uc_gval_ref(v);
    return 0;
}

/* Keep what rebuilding the graph takes: the values of every descriptor of the graph (tensors, convolution and
 * pointwise descriptors, then the operations, the operation graph last), and the handle to build with. */
static const char *keep_nodes(uc_ggraph *g, const uc_gval *plan, uc_gval *graph)
{
    void *h = NULL;
    const uc_gattr *ha = uc_gval_attr(graph, UC_A_OPERATIONGRAPH_HANDLE);
    if (!ha || ha->type != UC_AT_HANDLE || ha->count != 1)
        ha = uc_gval_attr(plan, UC_A_PLAN_HANDLE);
    if (ha && ha->type == UC_AT_HANDLE && ha->count == 1)
        memcpy(&h, ha->data, sizeof h);
    g->handle = h;
    const uc_gattr *ops = uc_gval_attr(graph, UC_A_OPERATIONGRAPH_OPS);
    g->nodes = calloc(UC_G_MAX_NODES, sizeof *g->nodes);
    if (!g->nodes)
        return "out of memory";
    for (int pass = 0; pass < 2; pass++) /* the operations' descriptors first, then the operations */
        for (int64_t i = 0; i < ops->count; i++) {
            uc_gval *op;
            memcpy(&op, ops->data + i * (int64_t)sizeof op, sizeof op);
            for (int a = 0; pass == 0 && a < op->nattr; a++) {
                const uc_gattr *at = &op->attr[a];
                for (int64_t e = 0; at->type == UC_AT_BACKEND_DESCRIPTOR && e < at->count; e++) {
                    uc_gval *d;
                    memcpy(&d, at->data + e * (int64_t)sizeof d, sizeof d);
                    if (!d)
                        return "an operation names a descriptor the shim did not see built";
                    if (d->type != UC_BK_TENSOR && d->type != UC_BK_CONVOLUTION && d->type != UC_BK_POINTWISE)
                        return "an operation names a descriptor other than a tensor, convolution or pointwise "
                               "descriptor";
                    if (d->opaque || !d->finalized || add_node(g, d, UC_G_MAX_NODES - UC_G_MAX_OPS - 1) != 0)
                        return "an operation's descriptors cannot be rebuilt (opaque, unfinalized or too many)";
                }
            }
            if (pass == 1 && add_node(g, op, UC_G_MAX_NODES - 1) != 0)
                return "too many descriptors in the graph";
        }
    return add_node(g, graph, UC_G_MAX_NODES) == 0 ? NULL : "too many descriptors in the graph";
}

/* The knob choices of the caller's engine configuration, from the real library (cuDNN may have filled them).
 * Under uc_guard. */
static const char *read_knobs(void *engcfg, uc_ggraph *g)
{
    const uc_real_table *r = uc_real();
    void *kc[UC_G_MAX_KNOBS] = {0};
    const char *why = NULL;
    int made = 0;
    int64_t got = 0;
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
    g->nknobs = why ? 0 : (int)got;
    return why;
}

/* The real library's engine configuration of the plan (read back into a descriptor of the shim's: the caller's
 * may be gone), or the configuration itself; *made: the shim created it. Under uc_guard. */
static void *engine_config_of(const uc_ggraph *g, int *made)
{
    const uc_real_table *r = uc_real();
    *made = 0;
    if (g->is_cfg)
        return g->plan;
    void *cfg = NULL;
    int64_t n = 0;
    if (r->cudnnBackendCreateDescriptor(UC_BK_ENGINECFG, &cfg) != 0 || !cfg)
        return NULL;
    *made = 1;
    if (r->cudnnBackendGetAttribute(g->plan, UC_A_PLAN_ENGINE_CONFIG, UC_AT_BACKEND_DESCRIPTOR, 1, &n, &cfg) == 0 &&
        n == 1)
        return cfg;
    r->cudnnBackendDestroyDescriptor(cfg);
    *made = 0;
    return NULL;
}

/* The operation graph a plan's (or configuration's) value holds, and the configuration's value. */
static uc_gval *graph_of(const uc_gval *v, int is_cfg, const char **why)
{
    const uc_gval *cfg = is_cfg ? v : uc_gval_desc(v, UC_A_PLAN_ENGINE_CONFIG);
    const uc_gval *engine = cfg ? uc_gval_desc(cfg, UC_A_ENGINECFG_ENGINE) : NULL;
    uc_gval *graph = engine ? uc_gval_desc(engine, UC_A_ENGINE_OPERATION_GRAPH) : NULL;
    if (!graph && cfg)
        graph = uc_gval_desc(cfg, UC_GLINK_GRAPH);
    const uc_gattr *ops = graph ? uc_gval_attr(graph, UC_A_OPERATIONGRAPH_OPS) : NULL;
    if (!v)
        *why = is_cfg ? "the engine configuration was not seen built" : "the plan was not seen built";
    else if (!cfg)
        *why = "the plan's engine configuration was not seen";
    else if (!graph)
        *why = "the plan's operation graph was not seen";
    else if (graph->type != UC_BK_OPERATIONGRAPH || graph->opaque || !graph->finalized)
        *why = "the operation graph has attributes the shim does not copy";
    else if (!ops || ops->type != UC_AT_BACKEND_DESCRIPTOR || ops->count < 1 || ops->count > UC_G_MAX_OPS)
        *why = "the operation graph's operations are unreadable or too many";
    return *why ? NULL : graph;
}

int uc_graph_op_code(const uc_ggraph *g)
{
    for (int i = 0; i < g->nops; i++)
        switch (g->ops[i].type) {
        case UC_BK_OP_CONV_FWD: return UCUDNN_OP_FWD;
        case UC_BK_OP_CONV_BWD_DATA: return UCUDNN_OP_BWD_DATA;
        case UC_BK_OP_CONV_BWD_FILTER: return UCUDNN_OP_BWD_FILTER;
        default: break;
        }
    return UCUDNN_OP_FWD;
}

uc_ggraph *uc_graph_resolve(void *desc, int is_cfg)
{
    uc_ggraph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    pthread_mutex_init(&g->lock, NULL);
    g->plan = desc;
    g->e.key = desc;
    g->is_cfg = is_cfg;
    g->engine = -1;
    uc_gval *v = uc_grec_value(desc);
    uc_gval *graph = graph_of(v, is_cfg, &g->why_not);
    /* An offered variant (uc_graph_offer.c) carries the limit it was offered under in its configuration. */
    const uc_gval *cfg_value = is_cfg ? v : uc_gval_desc(v, UC_A_PLAN_ENGINE_CONFIG);
    int64_t offered[2] = {0, 0};
    if (cfg_value && uc_gval_int64s(cfg_value, UC_GLINK_VARIANT, offered, 2) == 2 && offered[0] > 0) {
        g->offer_limit = offered[0];
        g->offer_det = offered[1] != 0;
    }
    const uc_gattr *ops = graph ? uc_gval_attr(graph, UC_A_OPERATIONGRAPH_OPS) : NULL;
    for (int64_t i = 0; !g->why_not && i < ops->count; i++) {
        uc_gval *op;
        memcpy(&op, ops->data + i * (int64_t)sizeof op, sizeof op);
        g->why_not = read_op(g, op);
    }
    if (!g->why_not)
        g->why_not = classify(g);
    if (!g->why_not)
        g->why_not = keep_nodes(g, v, graph);
    int made = 0;
    uc_guard++;
    void *cfg = engine_config_of(g, &made);
    if (cfg)
        read_engine(cfg, g);
    if (!g->why_not)
        g->why_not = cfg ? read_knobs(cfg, g) : "the plan's engine configuration is unreadable";
    if (made)
        uc_real()->cudnnBackendDestroyDescriptor(cfg);
    uc_guard--;
    uc_gval_unref(v);
    if (!g->why_not)
        graph_key(g);
    return g;
}

void uc_graph_free(uc_ggraph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->nnodes; i++)
        uc_gval_unref(g->nodes[i]);
    free(g->nodes);
    free(g->key);
    pthread_mutex_destroy(&g->lock);
    free(g);
}
