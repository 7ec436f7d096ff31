/*
 * Building a recorded convolution graph again, at another batch size, through the real library (for
 * uc_graph_split.c and uc_graph_bench.c).
 *
 * Every tensor split along N (its first dimension is N and it is not the filter) gets b there, with the same
 * strides and uids; every other attribute is replayed as the framework set it, descriptors mapped to their
 * rebuilt twins, except a weight gradient's beta, which is 1 for the parts after the first (they accumulate).
 * The shim's own descriptors are made through the real library's pointers (uc_guard), so they are never
 * recorded, and all but the returned plan are destroyed before returning.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uc_graph.h"

/* Bytes of one element of a cudnnDataType_t the shim can offset pointers for; 0 for packed/vector types. */
size_t uc_gb_dtype_bytes(int dtype)
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
int uc_gb_split_tensor(const uc_ggraph *g, const gtensor *t)
{
    return t->nb > 0 && t->dims[0] == g->n && t->uid != filter_uid(g);
}

/* A part starting at sample b: each split tensor's offset there must keep the byte alignment declared for it. */
int uc_gb_aligned_for(const uc_ggraph *g, int64_t b)
{
    for (int i = 0; i < g->ntensors; i++) {
        const gtensor *t = &g->t[i];
        size_t esz = uc_gb_dtype_bytes(t->dtype);
        if (!uc_gb_split_tensor(g, t))
            continue;
        if (!esz)
            return 0;
        int64_t step = b * t->strides[0] * (int64_t)esz, align = t->align > 0 ? t->align : 1;
        if (step % align != 0)
            return 0;
    }
    return 1;
}

int64_t uc_gb_align_quantum(const uc_ggraph *g)
{
    for (int64_t b = 1; b <= g->n && b <= UC_G_MAX_ALIGN_QUANTUM; b++)
        if (uc_gb_aligned_for(g, b))
            return b;
    return 0;
}

/* Set one recorded attribute on the rebuilt descriptor: descriptors mapped to their rebuilt twins, N -> b in a
 * split tensor's dimensions, and beta = 1 for a weight gradient's later parts. */
static int replay_attr(const uc_ggraph *g, const uc_gval *nd, const uc_gattr *a, void *d, int64_t b, int beta_one,
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
        const uc_gattr *uid = uc_gval_attr(nd, UC_A_TENSOR_UNIQUE_ID);
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
    /* A descriptor-valued attribute names values; each maps to the descriptor rebuilt from it. */
    void *old[UC_G_MAX_NODES], *made[UC_G_MAX_NODES];
    for (int i = 0; i < g->nnodes; i++) {
        const uc_gval *nd = g->nodes[i];
        void *d = make(m, nd->type);
        if (!d)
            return NULL;
        for (int a = 0; a < nd->nattr; a++)
            if (replay_attr(g, nd, &nd->attr[a], d, b, beta_one, old, made, i) != 0)
                return NULL;
        if (r->cudnnBackendFinalize(d) != 0)
            return NULL;
        old[i] = g->nodes[i];
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
    /* Without a handle where none was seen, as cudnn_frontend >= 1.13 builds plans (the handle comes with
     * Execute). */
    if ((!g->handle || r->cudnnBackendSetAttribute(plan, UC_A_PLAN_HANDLE, UC_AT_HANDLE, 1, &g->handle) == 0) &&
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

/* The graph rebuilt at batch size b and planned with engine `engine` (the caller's knob choices when it is the
 * caller's engine, the engine's defaults otherwise): a finalized plan, owned by the caller of this function, and
 * its workspace; or NULL. Everything else built here is destroyed. */
void *uc_gb_build(const uc_ggraph *g, int64_t b, int beta_one, int64_t engine_index, int64_t *workspace)
{
    const uc_real_table *r = uc_real();
    made_list m = {.n = 0};
    void *plan = NULL;
    int nknobs = engine_index == g->engine ? g->nknobs : 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uc_guard++;
    void *opgraph = rebuild_graph(g, b, beta_one, &m), *engine = opgraph ? make(&m, UC_BK_ENGINE) : NULL;
    int ok = engine &&
             r->cudnnBackendSetAttribute(engine, UC_A_ENGINE_OPERATION_GRAPH, UC_AT_BACKEND_DESCRIPTOR, 1, &opgraph) ==
                 0 &&
             r->cudnnBackendSetAttribute(engine, UC_A_ENGINE_GLOBAL_INDEX, UC_AT_INT64, 1, &engine_index) == 0 &&
             r->cudnnBackendFinalize(engine) == 0;
    void *knobs[UC_G_MAX_KNOBS];
    for (int k = 0; ok && k < nknobs; k++) {
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
         (!nknobs || r->cudnnBackendSetAttribute(cfg, UC_A_ENGINECFG_KNOB_CHOICES, UC_AT_BACKEND_DESCRIPTOR, nknobs,
                                                 knobs) == 0) &&
         r->cudnnBackendFinalize(cfg) == 0;
    if (ok)
        plan = plan_of(g, cfg, workspace);
    destroy_made(&m);
    uc_guard--;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    UC_COUNT(graph_builds, 1);
    UC_COUNT(graph_build_ns, (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
    return plan;
}

/* Numerical notes another engine may not add to the caller's: tensor cores, down-converted inputs,
 * reduced-precision reduction, non-determinism (cudnnBackendNumericalNote_t 0, 1, 2, 4). */
#define UC_G_NOTES_FORBIDDEN ((1 << 0) | (1 << 1) | (1 << 2) | (1 << 4))

/* The heuristics' engines as uc_gb_heuristics lists them, and whether the query succeeded (what the memo keeps). */
typedef struct {
    int ok, n;
    int64_t engines[UC_G_MAX_CANDIDATES], notes[UC_G_MAX_CANDIDATES];
} heur_list;

static heur_list query_heuristics(const uc_ggraph *g, int64_t b, int mode)
{
    const uc_real_table *r = uc_real();
    heur_list out = {.ok = 0, .n = 0};
    made_list m = {.n = 0};
    int32_t heur_mode = mode;
    int64_t n = 0;
    uc_guard++;
    void *opgraph = rebuild_graph(g, b, 0, &m), *heur = opgraph ? make(&m, UC_BK_ENGINEHEUR) : NULL;
    void *cfgs[UC_G_MAX_CANDIDATES];
    int ok = heur &&
             r->cudnnBackendSetAttribute(heur, UC_A_ENGINEHEUR_OPERATION_GRAPH, UC_AT_BACKEND_DESCRIPTOR, 1,
                                         &opgraph) == 0 &&
             r->cudnnBackendSetAttribute(heur, UC_A_ENGINEHEUR_MODE, UC_AT_HEUR_MODE, 1, &heur_mode) == 0 &&
             r->cudnnBackendFinalize(heur) == 0;
    for (int i = 0; ok && i < UC_G_MAX_CANDIDATES; i++)
        ok = (cfgs[i] = make(&m, UC_BK_ENGINECFG)) != NULL;
    ok = ok && r->cudnnBackendGetAttribute(heur, UC_A_ENGINEHEUR_RESULTS, UC_AT_BACKEND_DESCRIPTOR,
                                           UC_G_MAX_CANDIDATES, &n, cfgs) == 0;
    out.ok = ok;
    for (int64_t i = 0; ok && i < n && i < UC_G_MAX_CANDIDATES; i++) {
        void *engine = make(&m, UC_BK_ENGINE);
        int64_t count = 0, index = -1, notes = 0;
        int32_t note[16];
        if (!engine ||
            r->cudnnBackendGetAttribute(cfgs[i], UC_A_ENGINECFG_ENGINE, UC_AT_BACKEND_DESCRIPTOR, 1, &count, &engine) !=
                0 ||
            r->cudnnBackendGetAttribute(engine, UC_A_ENGINE_GLOBAL_INDEX, UC_AT_INT64, 1, &count, &index) != 0 ||
            r->cudnnBackendGetAttribute(engine, UC_A_ENGINE_NUMERICAL_NOTE, UC_AT_NUMERICAL_NOTE, 16, &count, note) !=
                0) {
            out.ok = 0; /* listed as far as it could be read, and not kept */
            continue;
        }
        for (int64_t k = 0; k < count && k < 16; k++)
            if (note[k] >= 0 && note[k] < 63)
                notes |= (int64_t)1 << note[k];
        int seen = index < 0;
        for (int j = 0; j < out.n && !seen; j++)
            seen = out.engines[j] == index;
        if (seen)
            continue;
        out.engines[out.n] = index;
        out.notes[out.n++] = notes;
    }
    destroy_made(&m);
    uc_guard--;
    return out;
}

int uc_gb_heuristics(const uc_ggraph *g, int64_t b, int mode, int64_t *engines, int64_t *notes_out, int cap)
{
    /* The same graph at the same size gets the same answer: asked once per shape and size in the process. */
    char what[32];
    snprintf(what, sizeof what, "heur;mode=%d", mode);
    char backend[UC_BACKEND_ID_MAX];
    uc_backend_id(backend, sizeof backend);
    char *key = uc_gmemo_key(g, what, b, -1, 0, backend);
    heur_list list;
    if (!uc_gmemo_get(key, &list, sizeof list)) {
        list = query_heuristics(g, b, mode);
        if (list.ok)
            uc_gmemo_put(key, &list, sizeof list);
    }
    free(key);
    int found = 0;
    for (; found < cap && found < list.n; found++) {
        engines[found] = list.engines[found];
        notes_out[found] = list.notes[found];
    }
    return found;
}

static int listed_in(const int64_t *engines, int n, int64_t engine)
{
    for (int i = 0; i < n; i++)
        if (engines[i] == engine)
            return 1;
    return 0;
}

/* Whether an engine's numerical notes add nothing the caller did not accept. */
static int admitted(const uc_ggraph *g, int64_t notes)
{
    return !(notes & ~g->notes & UC_G_NOTES_FORBIDDEN);
}

/* Appends the admitted engines of `from` not listed yet, while fewer than `cap` are: how many are listed then. */
static int admit(const uc_ggraph *g, const int64_t *from, const int64_t *from_notes, int n, int64_t *engines,
                 int64_t *notes_out, int found, int cap)
{
    for (int i = 0; i < n && found < cap; i++) {
        if (!admitted(g, from_notes[i]) || listed_in(engines, found, from[i]))
            continue;
        engines[found] = from[i];
        notes_out[found++] = from_notes[i];
    }
    return found;
}

/* The caller's own engine first (it needs nothing the caller did not accept), then the admitted engines of cuDNN's
 * INSTANT heuristics, then at the caller's own N those of its FALLBACK list: the candidates PyTorch reads too.
 * FALLBACK's engines need no workspace (or the least), so they are what runs undivided within a small limit where
 * INSTANT lists nothing that fits (as for ResNet-18's convolutions at N=128 within 64 MiB on an H200), and the
 * undivided rival a divided plan's check needs; room is kept for them. Below N they are not candidates: an
 * engine that needs no workspace gains nothing from parts but their calls' cost, and measuring slow engines at
 * every size would lengthen planning. */
int uc_gb_engines(const uc_ggraph *g, int64_t b, int64_t *engines, int64_t *notes_out, int cap)
{
    int64_t heur[UC_G_MAX_CANDIDATES], heur_notes[UC_G_MAX_CANDIDATES];
    int64_t fb[UC_G_MAX_CANDIDATES], fb_notes[UC_G_MAX_CANDIDATES];
    int n = uc_gb_heuristics(g, b, 0 /* CUDNN_HEUR_MODE_INSTANT */, heur, heur_notes, UC_G_MAX_CANDIDATES);
    int nf = b == g->n ? uc_gb_heuristics(g, b, 2 /* CUDNN_HEUR_MODE_FALLBACK */, fb, fb_notes, UC_G_MAX_CANDIDATES)
                       : 0;
    int found = 0, room = 0;
    if (cap > 0) {
        engines[found] = g->engine;
        notes_out[found++] = g->notes;
    }
    for (int i = 0; i < nf; i++)
        room += fb[i] != g->engine && !listed_in(heur, n, fb[i]) && admitted(g, fb_notes[i]);
    found = admit(g, heur, heur_notes, n, engines, notes_out, found, cap - room > found ? cap - room : found);
    return admit(g, fb, fb_notes, nf, engines, notes_out, found, cap);
}

void uc_gb_destroy(void *plan)
{
    if (!plan)
        return;
    uc_guard++;
    uc_real()->cudnnBackendDestroyDescriptor(plan);
    uc_guard--;
}

int uc_gb_is_wgrad(const uc_ggraph *g)
{
    for (int i = 0; i < g->nops; i++)
        if (g->ops[i].type == UC_BK_OP_CONV_BWD_FILTER)
            return 1;
    return 0;
}

int uc_gb_wide_filter(const uc_ggraph *g)
{
    for (int i = 0; i < g->nops; i++)
        if (g->ops[i].type == UC_BK_OP_CONV_BWD_FILTER)
            for (int j = 0; j < g->ntensors; j++)
                if (g->t[j].uid == g->ops[i].t[1])
                    return g->t[j].dtype == 0 || g->t[j].dtype == 1; /* FLOAT, DOUBLE */
    return 0;
}

/* Bytes a tensor spans at batch size b (b replaces N in a tensor split along N); 0 if unknown. */
size_t uc_gb_extent(const uc_ggraph *g, const gtensor *t, int64_t b)
{
    size_t esz = uc_gb_dtype_bytes(t->dtype);
    int64_t elems = 1;
    for (int d = 0; d < t->nb; d++) {
        int64_t dim = d == 0 && uc_gb_split_tensor(g, t) ? b : t->dims[d];
        if (dim < 1 || t->strides[d] < 0)
            return 0;
        elems += (dim - 1) * t->strides[d];
    }
    return esz ? (size_t)elems * esz : 0;
}

int uc_gb_has_beta(const uc_ggraph *g)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->type == UC_BK_OP_CONV_BWD_FILTER)
            return uc_gval_attr(g->nodes[i], UC_A_OP_BWD_FILTER_ALPHA + 1) != NULL;
    return 0;
}

int uc_gb_divisible(const uc_ggraph *g)
{
    return !uc_gb_is_wgrad(g) || (uc_gb_has_beta(g) && uc_gb_wide_filter(g));
}

int uc_gb_overwrites(const uc_ggraph *g)
{
    static const int beta_of[][2] = {{UC_BK_OP_CONV_FWD, UC_A_OP_FWD_ALPHA + 1},
                                     {UC_BK_OP_CONV_BWD_DATA, UC_A_OP_BWD_DATA_ALPHA + 1},
                                     {UC_BK_OP_CONV_BWD_FILTER, UC_A_OP_BWD_FILTER_ALPHA + 1}};
    for (int i = 0; i < g->nnodes; i++) {
        for (size_t k = 0; k < sizeof beta_of / sizeof beta_of[0]; k++) {
            if (g->nodes[i]->type != beta_of[k][0])
                continue;
            const uc_gattr *a = uc_gval_attr(g->nodes[i], beta_of[k][1]);
            if (!a) /* cuDNN's default beta is 0 */
                continue;
            if (a->count != 1 || !a->data)
                return 0;
            double beta = 1.0;
            if (a->type == UC_AT_FLOAT) {
                float f;
                memcpy(&f, a->data, sizeof f);
                beta = f;
            } else if (a->type == UC_AT_DOUBLE) {
                memcpy(&beta, a->data, sizeof beta);
            }
            if (beta != 0.0)
                return 0;
        }
    }
    return 1;
}

int64_t uc_gb_engine_count(const uc_ggraph *g)
{
    made_list m = {.n = 0};
    int64_t count = -1, n = 0;
    uc_guard++;
    void *opgraph = rebuild_graph(g, g->n, 0, &m);
    if (!opgraph || uc_real()->cudnnBackendGetAttribute(opgraph, UC_A_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                                                        UC_AT_INT64, 1, &n, &count) != 0 || n != 1)
        count = -1;
    destroy_made(&m);
    uc_guard--;
    return count;
}

int uc_gb_variant_pack(int npack, const int64_t *uids, void *const *ptrs, void *ws, void **out)
{
    const uc_real_table *r = uc_real();
    void *vp = NULL;
    int st = r->cudnnBackendCreateDescriptor(UC_BK_VARIANT_PACK, &vp);
    if (st == 0)
        st = r->cudnnBackendSetAttribute(vp, UC_A_VARIANT_PACK_UNIQUE_IDS, UC_AT_INT64, npack, uids);
    if (st == 0)
        st = r->cudnnBackendSetAttribute(vp, UC_A_VARIANT_PACK_DATA_POINTERS, UC_AT_VOID_PTR, npack, ptrs);
    if (st == 0)
        st = r->cudnnBackendSetAttribute(vp, UC_A_VARIANT_PACK_WORKSPACE, UC_AT_VOID_PTR, 1, &ws);
    if (st == 0)
        st = r->cudnnBackendFinalize(vp);
    if (st != 0 && vp) {
        r->cudnnBackendDestroyDescriptor(vp);
        vp = NULL;
    }
    *out = vp;
    return st;
}
