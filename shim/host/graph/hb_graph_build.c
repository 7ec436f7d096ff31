/*
 * Host backend graph API: operation graph, engine, engine heuristics, engine configuration, execution plan.
 *
 * The operation graph's Finalize refuses what the real library refuses (no operations, a tensor written by two
 * operations: BAD_PARAM) and analyses the rest once (hb_graph_analyse.c). A graph the backend does not compute
 * finalizes (as on the real library) with ENGINE_GLOBAL_COUNT 0: no engine, heuristics answer nothing, every engine
 * index is NOT_SUPPORTED.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "hb_graph.h"

/* ---- operation graph ---- */

cudnnStatus_t hb_graph_set(hb_bd *d, int name, int type, int64_t count, const void *elems) {
    (void)type;
    if (name == CUDNN_ATTR_OPERATIONGRAPH_HANDLE) {
        cudnnHandle_t h = *(const cudnnHandle_t *)elems;
        if (!h) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
        d->u.graph.handle = h;
        return CUDNN_STATUS_SUCCESS;
    }
    hb_bd *const *e = elems;
    if (count > HB_GRAPH_MAX_OPS) return CUDNN_STATUS_NOT_SUPPORTED;
    for (int64_t i = 0; i < count; i++)
        if (!e[i]->finalized) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
    hb_gop *ops = malloc((size_t)count * sizeof *ops);
    if (!ops) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    for (int64_t i = 0; i < count; i++) ops[i] = e[i]->u.op;
    free(d->u.graph.ops);
    d->u.graph.ops = ops;
    d->u.graph.nops = (int)count;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_graph_finalize(hb_bd *d) {
    const hb_gop *ops = d->u.graph.ops;
    int nops = d->u.graph.nops;
    if (!ops || nops < 1) return CUDNN_STATUS_BAD_PARAM;
    if (d->u.graph.handle && !hb_handle_ok(d->u.graph.handle)) return CUDNN_STATUS_BAD_PARAM;
    for (int i = 0; i < nops; i++) {
        int out = hb_op_output(&ops[i]);
        for (int j = 0; j < i; j++)
            if (ops[i].t[out].uid == ops[j].t[hb_op_output(&ops[j])].uid) return CUDNN_STATUS_BAD_PARAM;
        /* A pointwise operation whose output is one of its other tensors, used by its mode or not: the real library
         * refuses that graph, and takes a convolution that writes its input (9.28). */
        if (ops[i].kind != CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) continue;
        for (int r = 0; r < HB_ROLES; r++)
            if (r != out && ops[i].has[out] && ops[i].has[r] && ops[i].t[r].uid == ops[i].t[out].uid)
                return CUDNN_STATUS_BAD_PARAM;
    }
    hb_graph *g = calloc(1, sizeof *g);
    if (!g) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    g->refs = 1;
    g->nops = nops;
    memcpy(g->ops, ops, (size_t)nops * sizeof *ops);
    g->supported = hb_graph_analyse(g);
    free(d->u.graph.ops);
    d->u.graph.ops = NULL;
    d->u.graph.g = g;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_graph_get(const hb_bd *d, int name, int type, hb_aval *v) {
    (void)name; /* ENGINE_GLOBAL_COUNT, the one readable attribute */
    (void)type;
    const hb_graph *g = d->u.graph.g;
    int64_t n = g->supported ? hb_algo_enum_count(g->op) : 0;
    memcpy(v->buf, &n, sizeof n);
    v->count = 1;
    return CUDNN_STATUS_SUCCESS;
}

/* A caller's graph descriptor made a finalized reference to g. */
static cudnnStatus_t fill_graph(hb_bd *dst, hb_graph *g) {
    hb_bd_clear(dst);
    dst->u.graph.g = hb_graph_ref(g);
    dst->finalized = 1;
    return CUDNN_STATUS_SUCCESS;
}

/* A set OPERATION_GRAPH attribute: *has = set (NULL: unset), *g = the graph when it was finalized. */
static void take_graph(const void *elems, int *has, hb_graph **g) {
    const hb_bd *src = *(hb_bd *const *)elems;
    hb_graph_unref(*g);
    *has = src != NULL;
    *g = src && src->finalized ? hb_graph_ref(src->u.graph.g) : NULL;
}

/* ---- engines ---- */

static size_t add_sat(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

/* Engine `index` of graph g, or NOT_SUPPORTED. */
static cudnnStatus_t resolve(hb_graph *g, int64_t index, hb_gengine *e) {
    if (!g->supported || index < 0 || index >= hb_algo_enum_count(g->op)) return CUDNN_STATUS_NOT_SUPPORTED;
    const hb_algo *a = hb_find_algo(g->op, (int)index);
    size_t need = a ? a->workspace(g->wide ? &g->fprob : &g->prob) : SIZE_MAX;
    if (need == SIZE_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
    memset(e, 0, sizeof *e);
    e->g = hb_graph_ref(g);
    e->index = index;
    e->algo = a;
    e->algo_ws = need;
    e->ws = need;
    if (g->y_virtual) { /* [algorithm | x in float | w in float] (wide graphs) | the convolution's result */
        size_t at = hb_align64(need);
        if (g->wide) at = add_sat(add_sat(at, hb_align64(g->x_span * 4)), hb_align64(g->w_span * 4));
        e->ws = add_sat(at, g->y_bytes);
    }
    if (!a->deterministic) {
        e->notes[e->nnotes++] = CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
        /* The 16-bit atomics round the running sum on every add. */
        if (hb_is_16bit(g->prob.dtype)) e->notes[e->nnotes++] = CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
    }
    if (strstr(a->name, "WINOGRAD")) e->notes[e->nnotes++] = CUDNN_NUMERICAL_NOTE_WINOGRAD;
    if (strncmp(a->name, "FFT", 3) == 0) e->notes[e->nnotes++] = CUDNN_NUMERICAL_NOTE_FFT;
    if (g->down_convert) e->notes[e->nnotes++] = CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_engine_set(hb_bd *d, int name, int type, int64_t count, const void *elems) {
    (void)type;
    (void)count;
    if (name == CUDNN_ATTR_ENGINE_OPERATION_GRAPH) {
        take_graph(elems, &d->u.engine.has_graph, &d->u.engine.g);
    } else if (name == CUDNN_ATTR_ENGINE_GLOBAL_INDEX) {
        d->u.engine.index = hb_elem_i64(elems);
        d->u.engine.has_index = 1;
    } else {
        d->u.engine.sm_count = *(const int32_t *)elems; /* accepted; the host has no SMs to target */
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_engine_finalize(hb_bd *d) {
    if (!d->u.engine.has_graph) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!d->u.engine.g) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
    if (!d->u.engine.has_index) return CUDNN_STATUS_NOT_SUPPORTED;
    return resolve(d->u.engine.g, d->u.engine.index, &d->u.engine.e);
}

static cudnnStatus_t fill_engine_graph(const hb_bd *src, int64_t i, int arg, hb_bd *dst) {
    (void)i;
    (void)arg;
    return fill_graph(dst, src->type == CUDNN_BACKEND_ENGINE_DESCRIPTOR ? src->u.engine.e.g : src->u.heur.g);
}

cudnnStatus_t hb_engine_get(const hb_bd *d, int name, int type, hb_aval *v) {
    (void)type;
    const hb_gengine *e = &d->u.engine.e;
    v->count = 1;
    switch (name) {
    case CUDNN_ATTR_ENGINE_OPERATION_GRAPH: v->fill = fill_engine_graph; break;
    case CUDNN_ATTR_ENGINE_GLOBAL_INDEX: v->data = &e->index; break;
    case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE: v->data = e->notes; v->count = e->nnotes; break;
    case CUDNN_ATTR_ENGINE_SM_COUNT_TARGET: v->data = &d->u.engine.sm_count; break;
    default: v->count = 0; break; /* KNOB_INFO, BEHAVIOR_NOTE: none */
    }
    return CUDNN_STATUS_SUCCESS;
}

/* A caller's engine descriptor made a finalized copy of e. */
static void fill_engine(hb_bd *dst, const hb_gengine *e) {
    hb_bd_clear(dst);
    hb_engine_copy(&dst->u.engine.e, e);
    dst->u.engine.has_graph = dst->u.engine.has_index = 1;
    dst->u.engine.g = hb_graph_ref(e->g);
    dst->u.engine.index = e->index;
    dst->finalized = 1;
}

/* A caller's engine configuration descriptor made a finalized configuration of e. */
static void fill_cfg(hb_bd *dst, const hb_gengine *e) {
    hb_bd_clear(dst);
    hb_engine_copy(&dst->u.cfg.e, e);
    dst->u.cfg.has_engine = 1;
    dst->finalized = 1;
}

/* ---- heuristics: every engine of the graph, fastest first by the timing model (hb_model.c) ---- */

cudnnStatus_t hb_heur_set(hb_bd *d, int name, int type, int64_t count, const void *elems) {
    (void)type;
    (void)count;
    if (name == CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH) {
        take_graph(elems, &d->u.heur.has_graph, &d->u.heur.g);
    } else if (name == CUDNN_ATTR_ENGINEHEUR_MODE) {
        d->u.heur.mode = hb_elem_enum(elems);
    }
    return CUDNN_STATUS_SUCCESS; /* SM_COUNT_TARGET: accepted and ignored */
}

typedef struct {
    int index;
    double time;
    size_t ws, algo_ws;
} ranked;

static int cmp_ranked(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    if (a->time != b->time) return a->time < b->time ? -1 : 1;
    if (a->ws != b->ws) return a->ws < b->ws ? -1 : 1;
    return a->index - b->index;
}

/*
 * INSTANT, A and B answer the same ranking: the model is the host's only heuristic. FALLBACK is what cuDNN's is
 * to a caller, a short fixed list that still runs when memory is short, tried after the heuristics' own: the
 * engines whose algorithm needs no workspace, by global index (where none does, the one that needs the least).
 * The real library's is shorter than its INSTANT list too (4 of 12 engines for the float fprop that
 * tests/realcudnn/test_status_parity.py counts).
 */
static int fallback_list(ranked *r, int n) {
    size_t least = SIZE_MAX;
    for (int i = 0; i < n; i++)
        if (r[i].algo_ws < least) least = r[i].algo_ws;
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (r[i].algo_ws == least) r[kept++] = r[i];
    return kept;
}

static int cmp_index(const void *pa, const void *pb) {
    return ((const ranked *)pa)->index - ((const ranked *)pb)->index;
}

/* As the real library: no graph is BAD_PARAM; a mode left unset (it reads back as HEUR_MODES_COUNT) or out of
 * range finalizes with no results. */
cudnnStatus_t hb_heur_finalize(hb_bd *d) {
    if (!d->u.heur.has_graph) return CUDNN_STATUS_BAD_PARAM;
    hb_graph *g = d->u.heur.g;
    if (!g) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
    int known = d->u.heur.mode >= 0 && d->u.heur.mode < CUDNN_HEUR_MODES_COUNT;
    ranked r[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    for (int i = 0; known && g->supported && i < hb_algo_enum_count(g->op); i++) {
        hb_gengine e;
        if (resolve(g, i, &e) != CUDNN_STATUS_SUCCESS) continue;
        r[n++] = (ranked){i, hb_model_time_ms(e.algo, &g->prob), e.ws, e.algo_ws};
        hb_engine_unref(&e);
    }
    if (d->u.heur.mode == CUDNN_HEUR_MODE_FALLBACK) {
        n = fallback_list(r, n);
        qsort(r, (size_t)n, sizeof r[0], cmp_index);
    } else {
        qsort(r, (size_t)n, sizeof r[0], cmp_ranked);
        size_t top = hb_instant_top();
        if (top && (size_t)n > top) n = (int)top;
    }
    d->u.heur.n = n;
    for (int i = 0; i < n; i++) d->u.heur.idx[i] = r[i].index;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t fill_result(const hb_bd *src, int64_t i, int arg, hb_bd *dst) {
    (void)arg;
    hb_gengine e;
    cudnnStatus_t st = resolve(src->u.heur.g, src->u.heur.idx[i], &e);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    fill_cfg(dst, &e);
    hb_engine_unref(&e);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_heur_get(const hb_bd *d, int name, int type, hb_aval *v) {
    (void)type;
    v->count = 1;
    switch (name) {
    case CUDNN_ATTR_ENGINEHEUR_RESULTS: v->fill = fill_result; v->count = d->u.heur.n; break;
    case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: v->fill = fill_engine_graph; break;
    default: v->data = &d->u.heur.mode; break;
    }
    return CUDNN_STATUS_SUCCESS;
}

/* ---- engine configuration and execution plan ---- */

/* A set ENGINE / ENGINE_CONFIG attribute: the engine it holds if finalized (e->g NULL if not). */
static void take_engine(const void *elems, int *has, hb_gengine *e) {
    const hb_bd *src = *(hb_bd *const *)elems;
    hb_engine_unref(e);
    *has = src != NULL;
    if (src && src->finalized)
        hb_engine_copy(e, src->type == CUDNN_BACKEND_ENGINE_DESCRIPTOR ? &src->u.engine.e : &src->u.cfg.e);
}

cudnnStatus_t hb_cfg_set(hb_bd *d, int name, int type, int64_t count, const void *elems) {
    (void)type;
    if (name == CUDNN_ATTR_ENGINECFG_KNOB_CHOICES) /* the engines have no knobs */
        return count == 0 ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
    take_engine(elems, &d->u.cfg.has_engine, &d->u.cfg.e);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_cfg_finalize(hb_bd *d) {
    if (!d->u.cfg.has_engine) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    return d->u.cfg.e.g ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
}

cudnnStatus_t hb_knob_set(hb_bd *d, int name, int type, int64_t count, const void *elems) {
    (void)type;
    (void)count;
    if (name == CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE) {
        d->u.knob.type = hb_elem_enum(elems);
        d->u.knob.has_type = 1;
    } else {
        d->u.knob.value = hb_elem_i64(elems);
        d->u.knob.has_value = 1;
    }
    return CUDNN_STATUS_SUCCESS;
}

/* Both set. (cuDNN 9.28 without a GPU refuses every knob choice's Finalize, 1008, so this is not its measured
 * status; with neither it could not name a knob.) */
cudnnStatus_t hb_knob_finalize(hb_bd *d) {
    return d->u.knob.has_type && d->u.knob.has_value ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t hb_knob_get(const hb_bd *d, int name, int type, hb_aval *v) {
    (void)type;
    v->count = 1;
    if (name == CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE)
        memcpy(v->buf, &d->u.knob.type, sizeof d->u.knob.type);
    else
        memcpy(v->buf, &d->u.knob.value, sizeof d->u.knob.value);
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t fill_cfg_engine(const hb_bd *src, int64_t i, int arg, hb_bd *dst) {
    (void)i;
    (void)arg;
    fill_engine(dst, &src->u.cfg.e);
    return CUDNN_STATUS_SUCCESS;
}

static void answer_size(hb_aval *v, size_t ws) {
    int64_t n = ws > INT64_MAX ? INT64_MAX : (int64_t)ws;
    memcpy(v->buf, &n, sizeof n);
    v->count = 1;
}

cudnnStatus_t hb_cfg_get(const hb_bd *d, int name, int type, hb_aval *v) {
    (void)type;
    v->count = 1;
    switch (name) {
    case CUDNN_ATTR_ENGINECFG_ENGINE: v->fill = fill_cfg_engine; break;
    case CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE: answer_size(v, d->u.cfg.e.ws); break;
    case CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED: memset(v->buf, 0, sizeof(int32_t)); break; /* CPU engines */
    default: v->count = 0; break; /* KNOB_CHOICES: none */
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_plan_set(hb_bd *d, int name, int type, int64_t count, const void *elems) {
    (void)type;
    (void)count;
    if (name == CUDNN_ATTR_EXECUTION_PLAN_HANDLE) {
        d->u.plan.handle = *(const cudnnHandle_t *)elems;
        d->u.plan.has_handle = 1;
    } else {
        take_engine(elems, &d->u.plan.has_cfg, &d->u.plan.e);
    }
    return CUDNN_STATUS_SUCCESS;
}

/* The configuration first (the real library reports an unfinalized one before a bad handle). No handle at all is
 * fine: cudnn_frontend >= 1.13 builds plans without one, real cuDNN 9 finalizes them, and the handle comes with
 * cudnnBackendExecute. A handle set to NULL is refused. */
cudnnStatus_t hb_plan_finalize(hb_bd *d) {
    if (!d->u.plan.has_cfg) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!d->u.plan.e.g) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
    if (!d->u.plan.has_handle) return CUDNN_STATUS_SUCCESS;
    if (!d->u.plan.handle) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    return hb_handle_ok(d->u.plan.handle) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

static cudnnStatus_t fill_plan_cfg(const hb_bd *src, int64_t i, int arg, hb_bd *dst) {
    (void)i;
    (void)arg;
    fill_cfg(dst, &src->u.plan.e);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_plan_get(const hb_bd *d, int name, int type, hb_aval *v) {
    (void)type;
    v->count = 1;
    if (name == CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG) v->fill = fill_plan_cfg;
    else answer_size(v, d->u.plan.e.ws);
    return CUDNN_STATUS_SUCCESS;
}
