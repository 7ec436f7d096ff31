/*
 * Micro-batched execution of graph-API convolution plans.
 *
 * A plan whose workspace exceeds ucudnn's limit (an explicit UCUDNN_DEFAULT_WORKSPACE_LIMIT, or the Workspace
 * Division budget) is rebuilt at smaller batch sizes b from the graph recorded when it was built: every tensor
 * whose first dimension is N gets b there (same strides, same uids), everything else is replayed as set, and
 * the caller's engine runs it with the caller's knob choices -- so the numerical notes are the caller's own.
 * The plan's workspace query then answers the largest sub-plan's workspace, and only once every sub-plan the
 * decomposition needs has been built and finalized; otherwise the real value stands and execution passes
 * through. Execute runs the parts in sequence in the caller's workspace, each with a variant pack whose
 * pointers are advanced along N; a weight gradient's later parts run a sub-plan built with beta = 1, so they
 * accumulate onto the first part's result.
 *
 * Candidate sizes follow UCUDNN_BATCH_SIZE_POLICY: powerOfTwo tries N/2, N/4, ... (largest first) and takes
 * the largest that fits; `all` then refines between that size and the next power of two; undivided never splits.
 * Under the default (`auto`: the framework's own limit) plans run as the framework built them.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"
#include "uc_internal.h"

/* Bytes of one element of a cudnnDataType_t the shim can offset pointers for; 0 for packed/vector types. */
static size_t dtype_bytes(int dtype)
{
    switch (dtype) {
    case 0: /* FLOAT */
    case 4: /* INT32 */
        return 4;
    case 1:  /* DOUBLE */
    case 10: /* INT64 */
        return 8;
    case 2: /* HALF */
    case 9: /* BFLOAT16 */
        return 2;
    case 3:  /* INT8 */
    case 6:  /* UINT8 */
    case 12: /* FP8_E4M3 */
    case 13: /* FP8_E5M2 */
        return 1;
    default:
        return 0;
    }
}

static int64_t filter_uid(const uc_ggraph *g)
{
    for (int i = 0; i < g->nops; i++)
        if (g->ops[i].type != UC_BK_OP_POINTWISE)
            return g->ops[i].t[1];
    return -1;
}

/* Whether a tensor is split along N: its first dimension is N and it is not the convolution's filter. */
static int split_tensor(const uc_ggraph *g, const gtensor *t)
{
    return t->nb > 0 && t->dims[0] == g->n && t->uid != filter_uid(g);
}

/* Every part starts at a multiple of b samples: each split tensor's offset must keep its byte alignment. */
static int aligned_for(const uc_ggraph *g, int64_t b)
{
    for (int i = 0; i < g->ntensors; i++) {
        const gtensor *t = &g->t[i];
        size_t esz = dtype_bytes(t->dtype);
        if (!split_tensor(g, t))
            continue;
        if (!esz)
            return 0;
        int64_t step = b * t->strides[0] * (int64_t)esz, align = t->align > 0 ? t->align : 1;
        if (step % align != 0)
            return 0;
    }
    return 1;
}

static const uc_gattr *node_attr(const uc_gnode *nd, int name)
{
    for (int i = 0; i < nd->nattr; i++)
        if (nd->attr[i].name == name)
            return &nd->attr[i];
    return NULL;
}

/* Set one recorded attribute on the rebuilt descriptor: descriptors mapped to their rebuilt twins, N -> b in a
 * split tensor's dimensions, and beta = 1 for a weight gradient's later parts. */
static int replay_attr(const uc_ggraph *g, const uc_gnode *nd, const uc_gattr *a, void *d, int64_t b, int beta_one,
                       void *const *old, void *const *made, int nmade)
{
    const uc_real_table *r = uc_real();
    unsigned char buf[UC_GREC_MAX_BYTES];
    if (a->bytes > sizeof buf)
        return -1;
    if (a->bytes)
        memcpy(buf, a->data, a->bytes);
    if (a->type == UC_AT_BACKEND_DESCRIPTOR) {
        void **elems = (void **)buf;
        for (int64_t e = 0; e < a->count; e++) {
            int j = 0;
            while (j < nmade && old[j] != elems[e])
                j++;
            if (j == nmade)
                return -1; /* names a descriptor outside the graph */
            elems[e] = made[j];
        }
    } else if (nd->type == UC_BK_TENSOR && a->name == UC_A_TENSOR_DIMENSIONS && a->type == UC_AT_INT64 &&
               a->count > 0) {
        const uc_gattr *uid = node_attr(nd, UC_A_TENSOR_UNIQUE_ID);
        int64_t dim0, id = -1;
        memcpy(&dim0, buf, sizeof dim0);
        if (uid && uid->bytes == sizeof id)
            memcpy(&id, uid->data, sizeof id);
        if (dim0 == g->n && id != filter_uid(g))
            memcpy(buf, &b, sizeof b);
    } else if (beta_one && nd->type == UC_BK_OP_CONV_BWD_FILTER && a->name == UC_A_OP_BWD_FILTER_ALPHA + 1) {
        if (a->type == UC_AT_DOUBLE && a->bytes == sizeof(double)) {
            double one = 1.0;
            memcpy(buf, &one, sizeof one);
        } else if (a->type == UC_AT_FLOAT && a->bytes == sizeof(float)) {
            float one = 1.0f;
            memcpy(buf, &one, sizeof one);
        } else {
            return -1;
        }
    }
    return r->cudnnBackendSetAttribute(d, a->name, a->type, a->count, a->bytes ? buf : NULL) == 0 ? 0 : -1;
}

#define UC_G_MAX_MADE (UC_G_MAX_NODES + 2 * UC_G_MAX_CANDIDATES + 3 + UC_G_MAX_KNOBS)
#define UC_G_MAX_CANDIDATES 16

typedef struct {
    void *d[UC_G_MAX_MADE];
    int n;
} made_list;

/* Create a descriptor of `type`, owned by the list; NULL on failure or a full list. */
static void *make(made_list *m, int type)
{
    void *d = NULL;
    if (m->n == UC_G_MAX_MADE || uc_real()->cudnnBackendCreateDescriptor(type, &d) != 0 || !d)
        return NULL;
    return m->d[m->n++] = d;
}

static void destroy_made(made_list *m)
{
    for (int i = m->n - 1; i >= 0; i--)
        uc_real()->cudnnBackendDestroyDescriptor(m->d[i]);
    m->n = 0;
}

/* The operation graph rebuilt at batch size b (beta_one: a weight gradient's later parts), every descriptor owned
 * by m; NULL on failure. Under uc_guard. */
static void *rebuild_graph(const uc_ggraph *g, int64_t b, int beta_one, made_list *m)
{
    const uc_real_table *r = uc_real();
    void *old[UC_G_MAX_NODES], *made[UC_G_MAX_NODES];
    for (int i = 0; i < g->nnodes; i++) {
        const uc_gnode *nd = &g->nodes[i];
        void *d = make(m, nd->type);
        if (!d)
            return NULL;
        for (int a = 0; a < nd->nattr; a++)
            if (replay_attr(g, nd, &nd->attr[a], d, b, beta_one, old, made, i) != 0)
                return NULL;
        if (r->cudnnBackendFinalize(d) != 0)
            return NULL;
        old[i] = nd->desc;
        made[i] = d;
    }
    return g->nnodes ? made[g->nnodes - 1] : NULL;
}

/* A finalized plan for an engine configuration (owned by the caller) and its workspace, or NULL. Under uc_guard. */
static void *plan_of(const uc_ggraph *g, void *cfg, int64_t *workspace)
{
    const uc_real_table *r = uc_real();
    void *plan = NULL;
    int64_t ws = -1, count = 0;
    if (r->cudnnBackendCreateDescriptor(UC_BK_EXECUTION_PLAN, &plan) != 0 || !plan)
        return NULL;
    if (r->cudnnBackendSetAttribute(plan, UC_A_PLAN_HANDLE, UC_AT_HANDLE, 1, &g->handle) == 0 &&
        r->cudnnBackendSetAttribute(plan, UC_A_PLAN_ENGINE_CONFIG, UC_AT_BACKEND_DESCRIPTOR, 1, &cfg) == 0 &&
        r->cudnnBackendFinalize(plan) == 0 &&
        r->cudnnBackendGetAttribute(plan, UC_A_PLAN_WORKSPACE_SIZE, UC_AT_INT64, 1, &count, &ws) == 0 &&
        count == 1 && ws >= 0) {
        *workspace = ws;
        return plan;
    }
    r->cudnnBackendDestroyDescriptor(plan);
    return NULL;
}

/* The graph rebuilt at batch size b and planned with the caller's engine and knobs: a finalized plan (owned by
 * the caller of this function) and its workspace, or NULL. Everything else built here is destroyed. */
static void *build_at(const uc_ggraph *g, int64_t b, int beta_one, int64_t *workspace)
{
    const uc_real_table *r = uc_real();
    made_list m = {.n = 0};
    void *plan = NULL;
    uc_guard++;
    void *opgraph = rebuild_graph(g, b, beta_one, &m), *engine = opgraph ? make(&m, UC_BK_ENGINE) : NULL;
    int ok = engine &&
             r->cudnnBackendSetAttribute(engine, UC_A_ENGINE_OPERATION_GRAPH, UC_AT_BACKEND_DESCRIPTOR, 1, &opgraph) ==
                 0 &&
             r->cudnnBackendSetAttribute(engine, UC_A_ENGINE_GLOBAL_INDEX, UC_AT_INT64, 1, &g->engine) == 0 &&
             r->cudnnBackendFinalize(engine) == 0;
    void *knobs[UC_G_MAX_KNOBS];
    for (int k = 0; ok && k < g->nknobs; k++) {
        int32_t type = (int32_t)g->knob_type[k];
        knobs[k] = make(&m, UC_BK_KNOB_CHOICE);
        ok = knobs[k] &&
             r->cudnnBackendSetAttribute(knobs[k], UC_A_KNOB_CHOICE_KNOB_TYPE, UC_AT_KNOB_TYPE, 1, &type) == 0 &&
             r->cudnnBackendSetAttribute(knobs[k], UC_A_KNOB_CHOICE_KNOB_VALUE, UC_AT_INT64, 1, &g->knob_value[k]) ==
                 0 &&
             r->cudnnBackendFinalize(knobs[k]) == 0;
    }
    void *cfg = ok ? make(&m, UC_BK_ENGINECFG) : NULL;
    ok = cfg && r->cudnnBackendSetAttribute(cfg, UC_A_ENGINECFG_ENGINE, UC_AT_BACKEND_DESCRIPTOR, 1, &engine) == 0 &&
         (!g->nknobs || r->cudnnBackendSetAttribute(cfg, UC_A_ENGINECFG_KNOB_CHOICES, UC_AT_BACKEND_DESCRIPTOR,
                                                    g->nknobs, knobs) == 0) &&
         r->cudnnBackendFinalize(cfg) == 0;
    if (ok)
        plan = plan_of(g, cfg, workspace);
    destroy_made(&m);
    uc_guard--;
    return plan;
}

/* Numerical notes an alternative engine may not add to the caller's: tensor cores, down-converted inputs,
 * reduced-precision reduction, non-determinism (cudnnBackendNumericalNote_t 0, 1, 2, 4). */
#define UC_G_NOTES_FORBIDDEN ((1 << 0) | (1 << 1) | (1 << 2) | (1 << 4))

/* The undivided alternative: the first of cuDNN's heuristics (INSTANT mode) for the graph at N, other than the
 * caller's engine, whose workspace fits the limit and whose notes add nothing the caller did not accept. */
static void *alternative(const uc_ggraph *g, size_t limit, int64_t *workspace, int64_t *engine_out)
{
    const uc_real_table *r = uc_real();
    made_list m = {.n = 0};
    void *plan = NULL;
    int32_t mode = 0; /* CUDNN_HEUR_MODE_INSTANT */
    int64_t n = 0;
    uc_guard++;
    void *opgraph = rebuild_graph(g, g->n, 0, &m), *heur = opgraph ? make(&m, UC_BK_ENGINEHEUR) : NULL;
    void *cfgs[UC_G_MAX_CANDIDATES];
    int ok = heur &&
             r->cudnnBackendSetAttribute(heur, UC_A_ENGINEHEUR_OPERATION_GRAPH, UC_AT_BACKEND_DESCRIPTOR, 1,
                                         &opgraph) == 0 &&
             r->cudnnBackendSetAttribute(heur, UC_A_ENGINEHEUR_MODE, UC_AT_HEUR_MODE, 1, &mode) == 0 &&
             r->cudnnBackendFinalize(heur) == 0;
    for (int i = 0; ok && i < UC_G_MAX_CANDIDATES; i++)
        ok = (cfgs[i] = make(&m, UC_BK_ENGINECFG)) != NULL;
    ok = ok && r->cudnnBackendGetAttribute(heur, UC_A_ENGINEHEUR_RESULTS, UC_AT_BACKEND_DESCRIPTOR,
                                           UC_G_MAX_CANDIDATES, &n, cfgs) == 0;
    for (int64_t i = 0; ok && !plan && i < n && i < UC_G_MAX_CANDIDATES; i++) {
        void *engine = make(&m, UC_BK_ENGINE);
        int64_t count = 0, index = -1, notes = 0;
        int32_t note[16];
        if (!engine ||
            r->cudnnBackendGetAttribute(cfgs[i], UC_A_ENGINECFG_ENGINE, UC_AT_BACKEND_DESCRIPTOR, 1, &count, &engine) !=
                0 ||
            r->cudnnBackendGetAttribute(engine, UC_A_ENGINE_GLOBAL_INDEX, UC_AT_INT64, 1, &count, &index) != 0 ||
            r->cudnnBackendGetAttribute(engine, UC_A_ENGINE_NUMERICAL_NOTE, UC_AT_NUMERICAL_NOTE, 16, &count, note) !=
                0)
            continue;
        for (int64_t k = 0; k < count && k < 16; k++)
            if (note[k] >= 0 && note[k] < 63)
                notes |= (int64_t)1 << note[k];
        if (index == g->engine || (notes & ~g->notes & UC_G_NOTES_FORBIDDEN))
            continue;
        int64_t ws = -1;
        plan = plan_of(g, cfgs[i], &ws);
        if (plan && (uint64_t)ws > limit) {
            r->cudnnBackendDestroyDescriptor(plan);
            plan = NULL;
        } else if (plan) {
            *workspace = ws;
            *engine_out = index;
        }
    }
    destroy_made(&m);
    uc_guard--;
    return plan;
}

static void destroy_plan(void *plan)
{
    if (!plan)
        return;
    uc_guard++;
    uc_real()->cudnnBackendDestroyDescriptor(plan);
    uc_guard--;
}

static void drop_split(uc_gsplit *s)
{
    if (s->rest != s->first)
        destroy_plan(s->rest);
    destroy_plan(s->first);
    destroy_plan(s->last);
    memset(s, 0, sizeof *s);
}

static int is_wgrad(const uc_ggraph *g)
{
    for (int i = 0; i < g->nops; i++)
        if (g->ops[i].type == UC_BK_OP_CONV_BWD_FILTER)
            return 1;
    return 0;
}

/* Whether the weight-gradient operation's beta was recorded (the later parts replay it as 1). */
static int has_beta(const uc_ggraph *g)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].type == UC_BK_OP_CONV_BWD_FILTER)
            return node_attr(&g->nodes[i], UC_A_OP_BWD_FILTER_ALPHA + 1) != NULL;
    return 0;
}

/* Build the decomposition into parts of b (and one remainder) if every sub-plan builds and fits the limit. */
static int try_split(const uc_ggraph *g, int64_t b, size_t limit, uc_gsplit *out)
{
    uc_gsplit s = {.b = b, .rem = g->n % b};
    int64_t ws = -1;
    int wgrad = is_wgrad(g);
    if (!aligned_for(g, b) || (s.rem && !aligned_for(g, s.rem)))
        return 0;
    if (wgrad && !has_beta(g))
        return 0; /* later parts must accumulate: a beta to set to 1 is needed */
    s.first = build_at(g, b, 0, &ws);
    s.workspace = ws;
    int ok = s.first && (uint64_t)ws <= limit;
    if (ok && wgrad) {
        s.rest = build_at(g, b, 1, &ws);
        ok = s.rest && (uint64_t)ws <= limit;
        s.workspace = ws > s.workspace ? ws : s.workspace;
    } else if (ok) {
        s.rest = s.first;
    }
    if (ok && s.rem) {
        s.last = build_at(g, s.rem, wgrad, &ws);
        ok = s.last && (uint64_t)ws <= limit;
        s.workspace = ws > s.workspace ? ws : s.workspace;
    }
    if (!ok) {
        drop_split(&s);
        return 0;
    }
    *out = s;
    return 1;
}

/* Under g->lock. */
static void decide(uc_ggraph *g)
{
    const uc_real_table *r = uc_real();
    g->decided = -1;
    size_t limit = uc_cfg_exec_cap();
    int policy = uc_cfg_policy();
    if (limit == UC_UNLIMITED || g->n < 2 || !g->nodes || !g->handle)
        return;
    int64_t count = 0, full = -1;
    uc_guard++;
    cudnnStatus_t st = r->cudnnBackendGetAttribute(g->plan, UC_A_PLAN_WORKSPACE_SIZE, UC_AT_INT64, 1, &count, &full);
    uc_guard--;
    if (st != 0 || count != 1 || full < 0)
        return;
    g->full_workspace = full;
    if ((uint64_t)full <= limit)
        return;
    int64_t p = 1;
    while (p * 2 < g->n)
        p *= 2;
    uc_gsplit best = {0};
    int64_t fit = 0;
    for (int64_t b = p; policy != uc_cfg_policy_undivided() && b >= 1 && !fit; b /= 2)
        if (try_split(g, b, limit, &best))
            fit = b;
    if (fit && strcmp(uc_cfg_policy_name(policy), "all") == 0) {
        /* The largest size that fits, between this power of two and the next (which did not fit). */
        int64_t lo = fit, hi = fit * 2 < g->n ? fit * 2 : g->n;
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            uc_gsplit s;
            if (try_split(g, mid, limit, &s)) {
                drop_split(&best);
                best = s;
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    g->alt_engine = -1;
    g->alt = alternative(g, limit, &g->alt_workspace, &g->alt_engine);
    if (!best.first && !g->alt) {
        uc_log(UC_LOG_INFO, "graph plan %p: nothing fits %zu bytes (undivided: %" PRId64 "); it runs as built",
               g->plan, limit, full);
        return;
    }
    g->split = best;
    g->decided = 1;
    g->use_split = best.first != NULL;
    g->workspace = best.first ? best.workspace : 0;
    if (g->alt && g->alt_workspace > g->workspace)
        g->workspace = g->alt_workspace;
    /* Both run in the workspace reported; the split is kept only if it beats the alternative on real runs. */
    g->trial_on = best.first && g->alt && uc_trial_init(&g->trial) == 0;
    if (best.first)
        UC_COUNT(graph_split_plans, 1);
    uc_log(UC_LOG_INFO, "graph plan %p (N=%" PRId64 ", %" PRId64 " bytes) within %zu bytes: split %" PRId64
           " x %" PRId64 " + %" PRId64 " (%" PRId64 " bytes), undivided engine %" PRId64 " (%" PRId64 " bytes)%s",
           g->plan, g->n, full, limit, best.b ? g->n / best.b : 0, best.b, best.rem, best.workspace, g->alt_engine,
           g->alt ? g->alt_workspace : -1, g->trial_on ? "; timing both on the first executions" : "");
}

int64_t uc_gsplit_workspace(uc_ggraph *g)
{
    if (g->why_not)
        return -1;
    /* Nothing is built while the handle's stream is being captured into a CUDA graph: the plan answers its
     * own workspace then, and is decided at a later query. */
    int capturing = uc_stream_capturing((cudnnHandle_t)g->handle);
    pthread_mutex_lock(&g->lock);
    if (!g->decided && !capturing)
        decide(g);
    int64_t ws = g->decided == 1 ? g->workspace : -1;
    pthread_mutex_unlock(&g->lock);
    return ws;
}

/* One part: a variant pack with pointers advanced by n0 samples, executed with plan. */
static cudnnStatus_t run_part(const uc_ggraph *g, cudnnHandle_t handle, void *plan, int64_t n0, int npack,
                              const int64_t *uids, void *const *ptrs, const int64_t *step, void *ws)
{
    const uc_real_table *r = uc_real();
    void *moved[UC_G_MAX_TENSORS];
    for (int i = 0; i < npack; i++)
        moved[i] = ptrs[i] ? (char *)ptrs[i] + n0 * step[i] : NULL;
    void *vp = NULL;
    cudnnStatus_t st = r->cudnnBackendCreateDescriptor(UC_BK_VARIANT_PACK, &vp);
    if (st == 0)
        st = r->cudnnBackendSetAttribute(vp, UC_A_VARIANT_PACK_UNIQUE_IDS, UC_AT_INT64, npack, uids);
    if (st == 0)
        st = r->cudnnBackendSetAttribute(vp, UC_A_VARIANT_PACK_DATA_POINTERS, UC_AT_VOID_PTR, npack, moved);
    if (st == 0)
        st = r->cudnnBackendSetAttribute(vp, UC_A_VARIANT_PACK_WORKSPACE, UC_AT_VOID_PTR, 1, &ws);
    if (st == 0)
        st = r->cudnnBackendFinalize(vp);
    if (st == 0)
        st = r->cudnnBackendExecute(handle, plan, vp);
    if (vp)
        r->cudnnBackendDestroyDescriptor(vp);
    (void)g;
    return st;
}

/* Which side runs this execution (*split), and the trial slot it fills (-1: untimed). Under g->lock. */
static int choose(uc_ggraph *g, int *split)
{
    int slot = -1;
    if (g->trial_on) {
        int side_b = 0;
        slot = uc_trial_begin(&g->trial, &side_b);
        double split_ms, alt_ms;
        int samples, kept;
        if (slot < 0 && uc_trial_verdict(&g->trial, &split_ms, &alt_ms, &samples, &kept)) {
            g->trial_on = 0;
            g->use_split = kept;
            UC_COUNT(graph_verified, 1);
            if (!kept)
                UC_COUNT(graph_rejected_by_measurement, 1);
            uc_log(UC_LOG_INFO, "graph plan %p: split %.4g ms, undivided engine %" PRId64 " %.4g ms (median of %d): "
                   "%s from now on", g->plan, split_ms, g->alt_engine, alt_ms, samples,
                   kept ? "the split" : "the undivided engine");
        }
        *split = slot >= 0 ? !side_b : g->use_split;
        return slot;
    }
    *split = g->use_split;
    return -1;
}

int uc_gsplit_execute(uc_ggraph *g, cudnnHandle_t handle, void *variant_pack, cudnnStatus_t *status)
{
    int capturing = uc_stream_capturing(handle);
    pthread_mutex_lock(&g->lock);
    int mine = g->decided == 1, split = g->use_split;
    /* During a CUDA-graph capture the check waits (no events recorded or queried); the current choice runs. */
    int slot = mine && !capturing ? choose(g, &split) : -1;
    uc_gsplit s = g->split;
    void *alt = g->alt;
    pthread_mutex_unlock(&g->lock);
    if (!mine)
        return 0;
    /* The caller allocated the workspace the shim reported: from here on the caller's plan cannot run. */
    int64_t uids[UC_G_MAX_TENSORS], step[UC_G_MAX_TENSORS];
    void *ptrs[UC_G_MAX_TENSORS], *ws = NULL;
    int t1 = -1, t2 = -1, t3 = -1;
    int64_t nu = uc_grec_get(variant_pack, UC_A_VARIANT_PACK_UNIQUE_IDS, &t1, uids, sizeof uids);
    int64_t np = uc_grec_get(variant_pack, UC_A_VARIANT_PACK_DATA_POINTERS, &t2, ptrs, sizeof ptrs);
    int64_t nw = uc_grec_get(variant_pack, UC_A_VARIANT_PACK_WORKSPACE, &t3, &ws, sizeof ws);
    const char *why = NULL;
    if (nu < 1 || nu != np || nu > UC_G_MAX_TENSORS || t1 != UC_AT_INT64 || t2 != UC_AT_VOID_PTR)
        why = "its variant pack's uids and pointers were not seen";
    else if (nw > 1 || (nw == 1 && t3 != UC_AT_VOID_PTR))
        why = "its variant pack's workspace was not seen";
    for (int64_t i = 0; !why && i < nu; i++) {
        const gtensor *t = NULL;
        for (int j = 0; j < g->ntensors && !t; j++)
            if (g->t[j].uid == uids[i])
                t = &g->t[j];
        if (!t)
            why = "its variant pack names a tensor outside the graph";
        else
            step[i] = split_tensor(g, t) ? t->strides[0] * (int64_t)dtype_bytes(t->dtype) : 0;
    }
    if (why) {
        uc_log(UC_LOG_WARNING, "graph plan %p was given the shim's workspace but %s; the call fails rather than "
               "run the caller's plan in too little workspace", g->plan, why);
        *status = (cudnnStatus_t)uc_status(UC_ST_NOT_SUPPORTED);
        if (slot >= 0) {
            pthread_mutex_lock(&g->lock);
            uc_trial_end(&g->trial, slot, NULL, 0);
            pthread_mutex_unlock(&g->lock);
        }
        return 1;
    }
    uc_mark mark;
    int timed = slot >= 0 && uc_mark_start(&mark, handle) == 0;
    cudnnStatus_t st = 0;
    int parts = 0;
    uc_guard++;
    if (!split) {
        st = run_part(g, handle, alt, 0, (int)nu, uids, ptrs, step, ws);
    } else {
        int64_t n0 = 0;
        for (; st == 0 && n0 + s.b <= g->n; n0 += s.b, parts++)
            st = run_part(g, handle, parts ? s.rest : s.first, n0, (int)nu, uids, ptrs, step, ws);
        if (st == 0 && s.rem) {
            st = run_part(g, handle, s.last, n0, (int)nu, uids, ptrs, step, ws);
            parts++;
        }
    }
    uc_guard--;
    if (timed)
        timed = uc_mark_stop(&mark) == 0;
    if (slot >= 0) {
        pthread_mutex_lock(&g->lock);
        uc_trial_end(&g->trial, slot, timed ? &mark : NULL, st == 0);
        pthread_mutex_unlock(&g->lock);
    }
    UC_COUNT(graph_micro_batches, parts);
    if (st != 0)
        uc_log(UC_LOG_WARNING, "graph plan %p: %s failed with status %d", g->plan,
               split ? "a micro-batch" : "the undivided engine", (int)st);
    *status = st;
    return 1;
}

void uc_gsplit_free(uc_ggraph *g)
{
    drop_split(&g->split);
    destroy_plan(g->alt);
    g->alt = NULL;
    uc_trial_drop(&g->trial); /* slots never used hold nothing */
}
