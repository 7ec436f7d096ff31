/*
 * Micro-batched variants offered in the heuristics results a framework reads, under the default (`auto`: no limit
 * of ucudnn's own, what the framework can allocate is the limit).
 *
 * PyTorch's graph path never asks cuDNN for a plan within a workspace: it reads the heuristics' engine
 * configurations (a count query, then that many caller-created configurations filled), builds their plans and
 * takes the first whose workspace its caching allocator can allocate (benchmark=False), or times those whose
 * workspace fits its largest free block, at most benchmark_limit of them (benchmark=True). Under memory pressure
 * both fall back to slow engines. So where the first configurations need more than the framework can allocate
 * (uc_framework_memory) and the graph is a convolution the shim can split, the shim inserts ONE configuration
 * right after the first of them that the framework would run if it could (no configuration before it fits; a
 * down-converting one, or a nondeterministic one under UCUDNN_DETERMINISTIC=1, is passed over as PyTorch drops
 * it): a second real result of the same engine and knobs, filled by the real library, recorded as a variant
 * (UC_GLINK_VARIANT), whose knob choices read one more, ucudnn's (below). The count query answers the extended
 * count; the fill that follows puts the variant in its slot, each caller descriptor filled once. With nothing under
 * pressure the results are cuDNN's, unchanged: the cost is one memory figure and one scratch result's workspace per
 * count query.
 *
 * A variant's plan answers its workspace query with a micro-batched plan (uc_goffer_plan): the first admitted
 * engine, in heuristics order from its own, whose uniform split at the largest power-of-two size fits the limit
 * the variant was offered under, checked against the first engine that fits undivided, which also ends the
 * search (engines ranked below one that fits are not worth splitting). Nothing fits: it answers the real
 * workspace, and the framework passes over it as over the original. So benchmark=False tries the original (out of
 * memory), then the variant (fits): the fast engine, micro-batched. benchmark=True drops the original and times
 * the variant among the configurations that fit. The variant's first UC_CHECK_UNTIMED executions run it as
 * offered, so the framework's timing sees it; then its check against the undivided engine starts, as on the legacy
 * path, and the faster stays.
 *
 * The frontend applies benchmark_limit after dropping what does not fit: a variant that fits takes one of the
 * timed places, so where benchmark_limit or more configurations fit, the last of them is not timed. One variant per
 * list bounds that to one place, the heuristics' lowest-ranked one (docs/contract.md).
 */
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"

#define UC_OFFER_SCAN 64 /* results examined at most when looking for the variant's place */

/* cudnnBackendNumericalNote_t */
#define NOTE_DOWN_CONVERT (1 << 1)
#define NOTE_NONDETERMINISTIC (1 << 4)

/* The decision of this thread's latest count query, for the fill that follows it (cudnn_frontend asks the count,
 * then fills that many configurations, on one thread): results, the variant's place (-1 none), the limit. */
static __thread struct {
    void *heur;
    int64_t n, at;
    size_t limit;
    int det;
} last __attribute__((tls_model("initial-exec"))); /* as uc_guard: no dependency on the dynamic loader's TLS */

void uc_goffer_forget(void *heur)
{
    if (last.heur == heur)
        last.heur = NULL;
}

int uc_goffer_is_variant(void *cfg)
{
    uc_gval *v = uc_grec_value(cfg);
    int64_t mark[2];
    int yes = v && v->type == UC_BK_ENGINECFG && uc_gval_int64s(v, UC_GLINK_VARIANT, mark, 2) == 2;
    uc_gval_unref(v);
    return yes;
}

/* Offers are made under the default limit, to policies that divide. */
static int offering(void)
{
    return uc_cfg_exec_cap() == UC_UNLIMITED && uc_cfg_policy() != uc_cfg_policy_undivided();
}

/* A graph value with a convolution among its operations. */
static int has_convolution(const uc_gval *graph)
{
    const uc_gattr *ops = uc_gval_attr(graph, UC_A_OPERATIONGRAPH_OPS);
    for (int64_t i = 0; ops && ops->type == UC_AT_BACKEND_DESCRIPTOR && i < ops->count; i++) {
        const uc_gval *op;
        memcpy(&op, ops->data + i * (int64_t)sizeof op, sizeof op);
        if (op && (op->type == UC_BK_OP_CONV_FWD || op->type == UC_BK_OP_CONV_BWD_DATA ||
                   op->type == UC_BK_OP_CONV_BWD_FILTER))
            return 1;
    }
    return 0;
}

/* ---- the real library's results (the shim's own calls: under uc_guard, never recorded) ---- */

static void destroy_all(void **d, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (d[i])
            uc_real()->cudnnBackendDestroyDescriptor(d[i]);
}

/* n fresh engine configurations of the shim's: 0, or -1 (none left behind). */
static int create_cfgs(void **d, int64_t n)
{
    memset(d, 0, (size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++)
        if (uc_real()->cudnnBackendCreateDescriptor(UC_BK_ENGINECFG, &d[i]) != 0 || !d[i]) {
            destroy_all(d, n);
            return -1;
        }
    return 0;
}

/* The first `requested` results into d: how many were filled, or -1. */
static int64_t fill(void *heur, int64_t requested, void **d)
{
    int64_t got = 0;
    int st = uc_real()->cudnnBackendGetAttribute(heur, UC_A_ENGINEHEUR_RESULTS, UC_AT_BACKEND_DESCRIPTOR, requested,
                                                 &got, d);
    return st == 0 && got >= 0 && got <= requested ? got : -1;
}

/* Whether a framework passes over an engine with these numerical notes whatever its workspace: PyTorch drops
 * engines that down-convert their inputs, and nondeterministic ones when it asks for determinism. */
static int passed_over_notes(int64_t mask, int det)
{
    return (mask & NOTE_DOWN_CONVERT) || (det && (mask & NOTE_NONDETERMINISTIC));
}

/* The same for a configuration (unreadable notes count as passed over). */
static int passed_over(void *cfg, int det)
{
    const uc_real_table *r = uc_real();
    void *engine = NULL;
    int64_t n = 0, mask = 0;
    int32_t notes[16];
    int ok = r->cudnnBackendCreateDescriptor(UC_BK_ENGINE, &engine) == 0 && engine &&
             r->cudnnBackendGetAttribute(cfg, UC_A_ENGINECFG_ENGINE, UC_AT_BACKEND_DESCRIPTOR, 1, &n, &engine) == 0 &&
             r->cudnnBackendGetAttribute(engine, UC_A_ENGINE_NUMERICAL_NOTE, UC_AT_NUMERICAL_NOTE, 16, &n, notes) == 0;
    for (int64_t i = 0; ok && i < n && i < 16; i++)
        if (notes[i] >= 0 && notes[i] < 63)
            mask |= (int64_t)1 << notes[i];
    if (engine)
        r->cudnnBackendDestroyDescriptor(engine);
    return !ok || passed_over_notes(mask, det);
}

/* The variant's place among the first n results d (after result `at`), or -1; *more: every one of them was
 * passed over without a decision. A result the framework can allocate ends the search: nothing ranked below it
 * is offered. */
static int64_t place(void *const *d, int64_t n, size_t limit, int det, int *more)
{
    const uc_real_table *r = uc_real();
    *more = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t ws = -1, count = 0;
        if (r->cudnnBackendGetAttribute(d[i], UC_A_ENGINECFG_WORKSPACE_SIZE, UC_AT_INT64, 1, &count, &ws) != 0 ||
            count != 1 || ws < 0 || (uint64_t)ws <= limit)
            return -1;
        if (!passed_over(d[i], det))
            return i;
    }
    *more = 1;
    return -1;
}

/* Whether result `cfg` (the shim's, filled from a heuristics descriptor whose graph is `graph`) is a convolution
 * the shim can micro-batch, into parts it may run (uc_gb_divisible: not a weight gradient whose parts could not
 * accumulate): resolved as a recorded configuration would be, then forgotten. */
static int splittable(void *cfg, uc_gval *graph)
{
    uc_grec_created(cfg, UC_BK_ENGINECFG);
    uc_grec_filled(cfg, NULL, graph);
    uc_ggraph *g = uc_graph_resolve(cfg, 1);
    int ok = g && !g->why_not && g->n >= 2 && g->nodes && uc_gb_divisible(g);
    uc_graph_free(g);
    uc_grec_destroyed(cfg);
    return ok;
}

/* Where a variant goes among the n results of heur (and the limit it is offered under, and whether the framework
 * asks for determinism), or -1. Under uc_guard. */
static int64_t decide(void *heur, int64_t n, size_t *limit, int *det)
{
    uc_gval *value = uc_grec_value(heur);
    uc_gval *graph = uc_gval_desc(value, UC_A_ENGINEHEUR_OPERATION_GRAPH);
    int64_t at = -1;
    *det = 0;
    *limit = graph && has_convolution(graph) ? uc_framework_state(det) : 0;
    /* At no pressure one result is looked at; all of them (bounded) only when the first ones are passed over. */
    for (int64_t k = 1, more = 1; more && *limit && *limit < UC_UNLIMITED; k = n < UC_OFFER_SCAN ? n : UC_OFFER_SCAN) {
        void *d[UC_OFFER_SCAN];
        int again = 0;
        int64_t got = create_cfgs(d, k) == 0 ? fill(heur, k, d) : -1;
        at = got > 0 ? place(d, got, *limit, *det, &again) : -1;
        if (at >= 0 && !splittable(d[at], graph))
            at = -1;
        if (got >= 0)
            destroy_all(d, k);
        more = again && got == k && k < n && k < UC_OFFER_SCAN;
    }
    uc_gval_unref(value);
    return at;
}

/* The caller's n + 1 configurations: results 0..at, result `at` again (the variant), results at+1..n-1. Each
 * descriptor is filled once (the caller's, and fresh ones of the shim's for the results in between). 0 and in
 * *filled how many are filled, in order (n + 1 unless the real library answers less than it counted), or the
 * real library's status for the caller's own first fill. */
static cudnnStatus_t insert(void *heur, int64_t n, int64_t at, void **elems, int64_t *filled)
{
    const uc_real_table *r = uc_real();
    int64_t got = 0;
    cudnnStatus_t st = r->cudnnBackendGetAttribute(heur, UC_A_ENGINEHEUR_RESULTS, UC_AT_BACKEND_DESCRIPTOR, at + 1,
                                                   &got, elems);
    *filled = st == 0 && got == at + 1 ? at + 1 : 0;
    if (st != 0)
        return st;
    /* scratch: `at` results before the variant, then `at + 1` before results at+1.. */
    void **d = calloc((size_t)(2 * at + 1), sizeof *d), **list = calloc((size_t)n, sizeof *list);
    if (*filled && d && list && create_cfgs(d, 2 * at + 1) == 0) {
        memcpy(list, d, (size_t)at * sizeof *list);
        list[at] = elems[at + 1];
        if (fill(heur, at + 1, list) == at + 1)
            *filled = at + 2;
        memcpy(list, d + at, (size_t)(at + 1) * sizeof *list);
        memcpy(list + at + 1, elems + at + 2, (size_t)(n - at - 1) * sizeof *list);
        if (*filled == at + 2 && fill(heur, n, list) == n)
            *filled = n + 1;
        destroy_all(d, 2 * at + 1);
    }
    free(d);
    free(list);
    if (*filled != n + 1)
        uc_log(UC_LOG_WARNING, "heuristics %p: %lld of %lld results filled with the variant; the list ends there",
               heur, (long long)*filled, (long long)n + 1);
    return 0;
}

cudnnStatus_t uc_goffer_results(void *heur, int64_t requested, int64_t *count, void *elems, int64_t *variant_at,
                                int64_t variant_mark[2])
{
    const uc_real_table *r = uc_real();
    /* A count query's decision serves the one fill that follows it, with room for the variant. */
    int planned = elems && last.heur == heur && last.at >= 0 && requested > last.n, det = last.det;
    int64_t n = last.n, at = last.at;
    size_t limit = last.limit;
    last.heur = NULL;
    *variant_at = -1;
    cudnnStatus_t st;
    uc_guard++;
    if (planned) {
        int64_t filled = 0;
        st = insert(heur, n, at, (void **)elems, &filled);
        if (st == 0 && count)
            *count = filled;
        if (st == 0 && filled == n + 1) {
            *variant_at = at + 1;
            variant_mark[0] = (int64_t)limit;
            variant_mark[1] = det;
        }
    } else {
        st = r->cudnnBackendGetAttribute(heur, UC_A_ENGINEHEUR_RESULTS, UC_AT_BACKEND_DESCRIPTOR, requested, count,
                                         elems);
        if (!elems && st == 0 && count && *count >= 1 && offering()) { /* the count query */
            at = decide(heur, *count, &limit, &det);
            last.heur = heur, last.n = *count, last.at = at, last.limit = limit, last.det = det;
            if (at >= 0)
                *count += 1;
        }
    }
    uc_guard--;
    return st;
}

/* ---- the variant's own knob ---- */

/* A client that keeps one configuration per (engine, knob choices), the first (cudnn_frontend's Python package),
 * would merge a variant into the original it repeats. So a variant's knob choices read one more than cuDNN's: a
 * knob of a type the configuration does not choose, holding a value reserved for ucudnn, which the shim answers in
 * the caller's descriptor. cudnn_frontend names the variant "eng<N>..._k25=1969452388". A configuration that a
 * client builds with such a knob (the package's create_execution_plan(engine, knobs), replaying that pair) reaches
 * the real library without it, as a variant of its engine under what the framework can allocate then. */
#define UC_KNOB_VARIANT_VALUE 0x75637564 /* "ucud" */

/* Knob types for the variant's, in order of preference: the first the configuration does not choose. cuDNN 9's
 * WORKSPACE, KERNEL_CFG, SPECFILT, REDUCTION_MODE, STAGES, TILEK, SPLIT_K_BUF, MULTIPLY, EDGE, TILE_SIZE, SWIZZLE:
 * each one cudnn_frontend converts both ways, so a client can name it and build it again. */
static const int32_t knob_types[] = {25, 24, 23, 15, 14, 13, 12, 11, 4, 2, 1};

/* Whether a knob choice descriptor holds the variant's knob (its type and value in mark): marked by the shim, and
 * nothing set on it by its owner since. */
static int holds_our_knob(void *knob, int64_t mark[2])
{
    uc_gval *v = uc_grec_value(knob);
    int ours = v && v->type == UC_BK_KNOB_CHOICE && uc_gval_int64s(v, UC_GLINK_KNOB, mark, 2) == 2 &&
               !uc_gval_attr(v, UC_A_KNOB_CHOICE_KNOB_TYPE) && !uc_gval_attr(v, UC_A_KNOB_CHOICE_KNOB_VALUE);
    uc_gval_unref(v);
    return ours;
}

/* The first preferred knob type none of the n knob choices cuDNN filled has, or -1. */
static int32_t free_knob_type(void *const *elems, int64_t n)
{
    const uc_real_table *r = uc_real();
    int32_t have[64];
    int64_t m = 0;
    for (int64_t i = 0; i < n && m < 64; i++) {
        int64_t count = 0;
        if (!elems[i] || r->cudnnBackendGetAttribute(elems[i], UC_A_KNOB_CHOICE_KNOB_TYPE, UC_AT_KNOB_TYPE, 1, &count,
                                                     &have[m]) != 0 || count != 1)
            return -1; /* a knob the shim cannot read: no name that surely differs */
        m++;
    }
    for (size_t k = 0; k < sizeof knob_types / sizeof *knob_types; k++) {
        int64_t j = 0;
        while (j < m && have[j] != knob_types[k])
            j++;
        if (j == m)
            return knob_types[k];
    }
    return -1;
}

void uc_goffer_knobs(void *cfg, int64_t requested, int64_t *count, void *const *elems)
{
    if (!count || *count < 0 || !uc_goffer_is_variant(cfg))
        return;
    int64_t n = *count;
    if (!elems || requested < 1) { /* a count query */
        *count = n + 1;
        return;
    }
    if (requested <= n || !elems[n])
        return; /* no room: the real library's answer stands */
    uc_guard++;
    int32_t type = n < 64 ? free_knob_type(elems, n) : -1;
    uc_guard--;
    if (type < 0)
        return;
    const int64_t knob[2] = {type, UC_KNOB_VARIANT_VALUE};
    uc_grec_mark(elems[n], UC_GLINK_KNOB, knob, 2);
    int64_t got[2];
    if (holds_our_knob(elems[n], got))
        *count = n + 1;
}

int uc_goffer_knob_read(void *knob, int name, int type, int64_t requested, int64_t *count, void *elems,
                        cudnnStatus_t *st)
{
    int64_t mark[2];
    if (!holds_our_knob(knob, mark))
        return 0;
    /* As cuDNN answers a finalized knob choice (the host backend's table, hb_graph_api.c): the wrong type, no
     * count or array, an array of other than one element. */
    int is_type = name == UC_A_KNOB_CHOICE_KNOB_TYPE;
    *st = 0;
    if (type != (is_type ? UC_AT_KNOB_TYPE : UC_AT_INT64))
        *st = uc_status(UC_ST_BAD_ATTRIBUTE_TYPE);
    else if (!count && !elems)
        *st = uc_status(UC_ST_BAD_NULL_POINTER);
    else if (elems && requested != 1)
        *st = uc_status(UC_ST_BAD_PARAM);
    if (*st)
        return 1;
    if (elems && is_type) {
        int32_t t = (int32_t)mark[0];
        memcpy(elems, &t, sizeof t);
    } else if (elems) {
        memcpy(elems, &mark[1], sizeof mark[1]);
    }
    if (count)
        *count = 1;
    return 1;
}

/* Whether a knob choice its owner set holds the variant's value. */
static int names_a_variant(void *knob)
{
    uc_gval *v = uc_grec_value(knob);
    int64_t value = 0;
    int yes = v && v->type == UC_BK_KNOB_CHOICE && uc_gval_int64s(v, UC_A_KNOB_CHOICE_KNOB_VALUE, &value, 1) == 1 &&
              value == UC_KNOB_VARIANT_VALUE;
    uc_gval_unref(v);
    return yes;
}

int uc_goffer_set_knobs(void *cfg, int64_t n, void *const *knobs, cudnnStatus_t *st)
{
    void *kept[64];
    int64_t k = 0;
    if (n < 1 || n > 64 || !knobs)
        return 0;
    for (int64_t i = 0; i < n; i++)
        if (!knobs[i] || !names_a_variant(knobs[i]))
            kept[k++] = knobs[i];
    if (k == n)
        return 0; /* no variant named: the real library's */
    *st = 0;
    if (k > 0) {
        uc_guard++;
        *st = uc_real()->cudnnBackendSetAttribute(cfg, UC_A_ENGINECFG_KNOB_CHOICES, UC_AT_BACKEND_DESCRIPTOR, k, kept);
        uc_guard--;
    }
    if (*st != 0)
        return 1;
    uc_grec_set(cfg, UC_A_ENGINECFG_KNOB_CHOICES, UC_AT_BACKEND_DESCRIPTOR, k, kept);
    int det = 0;
    size_t limit = offering() ? uc_framework_state(&det) : 0;
    if (limit > 0 && limit < UC_UNLIMITED) { /* else the configuration is its engine's, undivided */
        const int64_t mark[2] = {(int64_t)limit, det};
        uc_grec_mark(cfg, UC_GLINK_VARIANT, mark, 2);
        UC_COUNT(graph_variants_rebuilt, 1);
    }
    return 1;
}

/* ---- the variant's plan ---- */

/* The least workspace `engine` needs (at one sample): -1 when it does not build there. */
static int64_t least_workspace(const uc_ggraph *g, int64_t engine)
{
    int64_t ws = -1;
    void *plan = uc_gb_build(g, 1, 0, engine, &ws);
    uc_gb_destroy(plan);
    return plan ? ws : -1;
}

/* The engines the framework lists at N (INSTANT, then FALLBACK heuristics, as PyTorch reads them): how many. */
static int listed_engines(const uc_ggraph *g, int64_t *engines, int64_t *notes, int cap)
{
    int n = uc_gb_heuristics(g, g->n, 0 /* INSTANT */, engines, notes, cap);
    return n + uc_gb_heuristics(g, g->n, 2 /* FALLBACK */, engines + n, notes + n, cap - n);
}

void uc_goffer_plan(const uc_ggraph *g, size_t limit, int policy, uc_gparts *main, uc_gparts *alt)
{
    /* The rival: what the framework runs without the variant, the first engine it lists, would run, and can
     * allocate undivided. */
    int64_t listed[2 * UC_G_MAX_CANDIDATES], listed_notes[2 * UC_G_MAX_CANDIDATES];
    int nl = listed_engines(g, listed, listed_notes, 2 * UC_G_MAX_CANDIDATES), rival = nl;
    for (int i = 0; i < nl && rival == nl; i++)
        if (!passed_over_notes(listed_notes[i], g->offer_det) && uc_gparts_listed(g, listed[i], limit, alt) == 0)
            rival = i;
    /* The plan: the variant's own engine, then the admitted engines the framework ranks above its rival,
     * micro-batched at the largest size whose parts fit. */
    int64_t engines[UC_G_MAX_CANDIDATES + 1], notes[UC_G_MAX_CANDIDATES + 1];
    int ne = uc_gb_engines(g, g->n, engines, notes, UC_G_MAX_CANDIDATES + 1);
    for (int i = 0; i < ne && !main->nparts; i++) {
        int rank = 0;
        while (rank < nl && listed[rank] != engines[i])
            rank++;
        if (i > 0 && rank >= rival)
            continue;
        int64_t least = least_workspace(g, engines[i]);
        uc_log(UC_LOG_DEBUG, "graph plan %p: offered variant, engine %lld (ranked %d, rival at %d) needs %lld bytes "
               "at one sample, %zu allowed", g->plan, (long long)engines[i], rank, rival, (long long)least, limit);
        if (least >= 0 && (uint64_t)least <= limit)
            uc_gparts_largest(g, engines[i], limit, policy, main);
    }
    if (!main->nparts) /* nothing micro-batched fits: the variant is no more than its original */
        uc_gparts_drop(alt);
}
