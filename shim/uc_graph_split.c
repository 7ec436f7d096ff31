/*
 * Micro-batched execution of graph-API convolution plans: what the shim decides for a plan, and how it runs it.
 *
 * A plan whose workspace exceeds ucudnn's limit (an explicit UCUDNN_DEFAULT_WORKSPACE_LIMIT, or the Workspace
 * Division budget) is taken over at its first workspace query. With a planner (the Python planner in a Python
 * host, the embedded one in a C/C++ host) the graph is a kernel like a legacy one: the planner benchmarks its
 * engines at each candidate size (uc_graph_bench.c) into the SQLite cache and returns the best decomposition
 * within the limit (the same DP as the legacy path), then the best undivided choice for the check. Without one,
 * the fallback keeps the caller's engine at the largest candidate size that fits, beside the first undivided
 * engine of cuDNN's heuristics that fits. Every engine the shim runs is one uc_gb_engines admits at that size:
 * the caller's, or one whose numerical notes add nothing the caller did not accept -- whatever a cache says.
 *
 * The workspace query then answers the largest workspace of the plans built, and only once every one of them
 * is finalized and fits; otherwise the real value stands and the caller's plan runs. Execute runs the parts in
 * sequence in the caller's workspace with pointers advanced along N. A divided plan and its undivided choice are
 * timed against each other on the first executions (uc_trial, the legacy path's rule) and the faster stays.
 * Under the default (`auto`: the framework's own limit) plans run as the framework built them.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"
#include "uc_internal.h"

static void drop_parts(uc_gparts *p)
{
    for (int i = 0; i < p->nowned; i++)
        uc_gb_destroy(p->owned[i]);
    free(p->size);
    free(p->engine);
    free(p->plan);
    free(p->owned);
    memset(p, 0, sizeof *p);
}

/* Whether `engine` may run at size b (see uc_gb_engines), and its determinism. */
static int admitted(const uc_ggraph *g, int64_t b, int64_t engine, int *deterministic)
{
    int64_t engines[UC_G_MAX_CANDIDATES + 1], notes[UC_G_MAX_CANDIDATES + 1];
    int n = uc_gb_engines(g, b, engines, notes, UC_G_MAX_CANDIDATES + 1);
    for (int i = 0; i < n; i++)
        if (engines[i] == engine) {
            *deterministic = !(notes[i] & (1 << 4));
            return 1;
        }
    return 0;
}

/* Build the sub-plans of parts (size[i], engine[i]) in order: 0, or -1 (nothing kept) when a size does not keep
 * the alignment, an engine is not admitted, a plan does not build or its workspace exceeds the limit. */
static int build_parts(const uc_ggraph *g, const int64_t *size, const int64_t *engine, int n, size_t limit,
                       uc_gparts *out)
{
    uc_gparts p = {0};
    int64_t sum = 0, *key_b = calloc((size_t)n, sizeof *key_b), *key_e = calloc((size_t)n, sizeof *key_e);
    int *key_one = calloc((size_t)n, sizeof *key_one), wgrad = uc_gb_is_wgrad(g), ok = 1;
    p.size = calloc((size_t)n, sizeof *p.size);
    p.engine = calloc((size_t)n, sizeof *p.engine);
    p.plan = calloc((size_t)n, sizeof *p.plan);
    p.owned = calloc((size_t)n, sizeof *p.owned);
    ok = key_b && key_e && key_one && p.size && p.engine && p.plan && p.owned && (!wgrad || n == 1 || uc_gb_has_beta(g));
    int caller_det = !(g->notes & (1 << 4));
    for (int i = 0; ok && i < n; i++) {
        int beta_one = wgrad && i > 0, det = 0;
        sum += size[i];
        ok = size[i] >= 1 && sum <= g->n && uc_gb_aligned_for(g, size[i]);
        int j = 0;
        while (ok && j < p.nowned && !(key_b[j] == size[i] && key_e[j] == engine[i] && key_one[j] == beta_one))
            j++;
        if (ok && j == p.nowned) {
            int64_t ws = -1;
            ok = admitted(g, size[i], engine[i], &det) && (det || !caller_det);
            void *plan = ok ? uc_gb_build(g, size[i], beta_one, engine[i], &ws) : NULL;
            ok = plan != NULL;
            if (plan && (uint64_t)ws > limit) {
                uc_gb_destroy(plan);
                ok = 0;
            }
            if (ok) {
                key_b[j] = size[i];
                key_e[j] = engine[i];
                key_one[j] = beta_one;
                p.owned[p.nowned++] = plan;
                p.workspace = ws > p.workspace ? ws : p.workspace;
            }
        }
        if (ok) {
            p.size[i] = size[i];
            p.engine[i] = engine[i];
            p.plan[i] = p.owned[j];
            p.nparts = i + 1;
        }
    }
    ok = ok && sum == g->n;
    free(key_b);
    free(key_e);
    free(key_one);
    if (!ok) {
        drop_parts(&p);
        return -1;
    }
    *out = p;
    return 0;
}

static int op_code(const uc_ggraph *g)
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

/* The planner's plan for `policy` as parts: 0, 1 nothing fits, -1 no planner, an error or an unusable reply. */
static int planned(const uc_ggraph *g, size_t limit, int policy, uc_gparts *out, int *verified)
{
    int64_t count = uc_gb_engine_count(g);
    if (count < 1 || count > INT_MAX)
        return -1;
    ucudnn_micro_batch *mbs = calloc((size_t)g->n, sizeof *mbs);
    int64_t *size = calloc((size_t)g->n, sizeof *size), *engine = calloc((size_t)g->n, sizeof *engine);
    int n = 0, rc = -1;
    float time_ms = 0;
    if (mbs && size && engine)
        rc = uc_plan_graph(g, op_code(g), (int)count, limit, policy, !(g->notes & (1 << 4)), mbs, (int)g->n, &n,
                           &time_ms, verified);
    for (int i = 0; rc == 0 && i < n; i++) {
        size[i] = mbs[i].batch;
        engine[i] = mbs[i].algo;
    }
    if (rc == 0 && build_parts(g, size, engine, n, limit, out) != 0) {
        UC_COUNT(rejected_plans, 1);
        uc_log(UC_LOG_WARNING, "graph plan %p: the planner's plan (%d part(s)) is not one the shim can run within "
               "%zu bytes; it is not used", g->plan, n, limit);
        rc = -1;
    }
    free(mbs);
    free(size);
    free(engine);
    return rc;
}

/* Parts of b samples of the caller's engine (the last one the remainder): 0 and *out, or -1. */
static int uniform(const uc_ggraph *g, int64_t b, size_t limit, uc_gparts *out)
{
    int n = (int)((g->n + b - 1) / b);
    int64_t *size = calloc((size_t)n, sizeof *size), *engine = calloc((size_t)n, sizeof *engine);
    int rc = -1;
    if (size && engine) {
        for (int i = 0; i < n; i++) {
            size[i] = i < n - 1 ? b : g->n - b * (n - 1);
            engine[i] = g->engine;
        }
        rc = build_parts(g, size, engine, n, limit, out);
    }
    free(size);
    free(engine);
    return rc;
}

/* The fallback without a planner: the caller's engine at the largest power-of-two size that fits (under `all`,
 * refined up to the next power of two), and beside it the first undivided admitted engine that fits. */
static void fallback(const uc_ggraph *g, size_t limit, int policy, uc_gparts *main, uc_gparts *alt)
{
    int64_t p = 1, best = 0;
    while (p * 2 < g->n)
        p *= 2;
    for (int64_t b = p; policy != uc_cfg_policy_undivided() && b >= 1 && !best; b /= 2)
        if (uniform(g, b, limit, main) == 0)
            best = b;
    if (best && strcmp(uc_cfg_policy_name(policy), "all") == 0) {
        int64_t lo = best, hi = best * 2 < g->n ? best * 2 : g->n;
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            uc_gparts parts;
            if (uniform(g, mid, limit, &parts) == 0) {
                drop_parts(main);
                *main = parts;
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    int64_t engines[UC_G_MAX_CANDIDATES + 1], notes[UC_G_MAX_CANDIDATES + 1];
    int ne = uc_gb_engines(g, g->n, engines, notes, UC_G_MAX_CANDIDATES + 1);
    for (int i = 1; i < ne && !alt->nparts; i++) { /* 0 is the caller's engine, which does not fit at N */
        int64_t whole = g->n;
        build_parts(g, &whole, &engines[i], 1, limit, alt);
    }
}

/* Decide for the plan, g->lock not held: g->deciding keeps other threads off (their calls run the caller's
 * plan meanwhile, which is correct: nothing was reported to them yet). */
static void decide(uc_ggraph *g, size_t limit, int policy, uc_gparts *main, uc_gparts *alt, const char **source,
                   int64_t *full_out, int *verified)
{
    const uc_real_table *r = uc_real();
    if (limit == UC_UNLIMITED || g->n < 2 || !g->nodes || !g->handle)
        return;
    int64_t count = 0, full = -1;
    uc_guard++;
    cudnnStatus_t st = r->cudnnBackendGetAttribute(g->plan, UC_A_PLAN_WORKSPACE_SIZE, UC_AT_INT64, 1, &count, &full);
    uc_guard--;
    if (st != 0 || count != 1 || full < 0)
        return;
    *full_out = full;
    if ((uint64_t)full <= limit)
        return;
    int rc = planned(g, limit, policy, main, verified), alt_verified = 0;
    if (rc == 0) {
        *source = "planner";
        /* A plan the planner says already won a check (a verdict in the cache) is not checked again. */
        if (main->nparts > 1 && !*verified &&
            planned(g, limit, uc_cfg_policy_undivided(), alt, &alt_verified) != 0)
            memset(alt, 0, sizeof *alt);
    } else if (rc < 0) {
        *source = "fallback";
        fallback(g, limit, policy, main, alt);
        if (!main->nparts && alt->nparts) { /* no split fits: the undivided engine is the plan */
            *main = *alt;
            memset(alt, 0, sizeof *alt);
        }
    }
}

int64_t uc_gsplit_workspace(uc_ggraph *g)
{
    if (g->why_not)
        return -1;
    /* Nothing is built while the handle's stream is being captured into a CUDA graph: the plan answers its
     * own workspace then, and is decided at a later query. */
    int capturing = uc_stream_capturing((cudnnHandle_t)g->handle);
    pthread_mutex_lock(&g->lock);
    int mine = !g->decided && !g->deciding && !capturing;
    if (mine)
        g->deciding = 1;
    pthread_mutex_unlock(&g->lock);
    if (mine) {
        uc_gparts main = {0}, alt = {0};
        const char *source = NULL;
        int64_t full = -1;
        int verified = 0, policy = uc_cfg_policy();
        /* ucudnn's explicit limit; under auto the framework's plan is its limit: it runs as built. (Not the
         * free device memory: a framework's caching allocator can serve a workspace the driver does not count
         * as free, and the caller's own plan could not be the check's baseline once taken over.) */
        size_t limit = uc_cfg_exec_cap();
        decide(g, limit, policy, &main, &alt, &source, &full, &verified);
        pthread_mutex_lock(&g->lock);
        g->full_workspace = full;
        g->source = source;
        g->main = main;
        g->alt = alt;
        g->decided = main.nparts ? 1 : -1;
        g->workspace = main.workspace > alt.workspace ? main.workspace : alt.workspace;
        g->limit = limit;
        g->policy = policy;
        g->trial_on = main.nparts > 1 && alt.nparts && !verified && uc_trial_init(&g->trial) == 0;
        g->deciding = 0;
        pthread_mutex_unlock(&g->lock);
        if (main.nparts > 1)
            UC_COUNT(graph_split_plans, 1);
        if (main.nparts)
            uc_log(UC_LOG_INFO, "graph plan %p (N=%" PRId64 ", %" PRId64 " bytes): %s plan of %d part(s), first "
                   "%" PRId64 " x engine %" PRId64 ", in %" PRId64 " bytes%s", g->plan, g->n, full, source,
                   main.nparts, main.size[0], main.engine[0], g->workspace,
                   g->trial_on ? "; checked against the undivided choice on the first executions" : "");
        else if (full >= 0)
            uc_log(UC_LOG_INFO, "graph plan %p (N=%" PRId64 ", %" PRId64 " bytes): runs as built", g->plan, g->n,
                   full);
    }
    pthread_mutex_lock(&g->lock);
    int64_t ws = g->decided == 1 ? g->workspace : -1;
    pthread_mutex_unlock(&g->lock);
    return ws;
}

/* One part: a variant pack with pointers advanced by n0 samples, executed with plan. */
static cudnnStatus_t run_part(cudnnHandle_t handle, void *plan, int64_t n0, int npack, const int64_t *uids,
                              void *const *ptrs, const int64_t *step, void *ws)
{
    const uc_real_table *r = uc_real();
    void *moved[UC_G_MAX_TENSORS];
    for (int i = 0; i < npack; i++)
        moved[i] = ptrs[i] ? (char *)ptrs[i] + n0 * step[i] : NULL;
    void *vp = NULL;
    cudnnStatus_t st = uc_gb_variant_pack(npack, uids, moved, ws, &vp);
    if (st == 0)
        st = r->cudnnBackendExecute(handle, plan, vp);
    if (vp)
        r->cudnnBackendDestroyDescriptor(vp);
    return st;
}

typedef struct {
    int done, kept, samples;
    double main_ms, alt_ms;
} verdict;

/* Which plan runs this execution (*use_alt), and the trial slot it fills (-1: untimed); *v the check's outcome
 * when it ended at this call. Under g->lock. */
static int choose(uc_ggraph *g, int *use_alt, verdict *v)
{
    int slot = -1;
    if (g->trial_on) {
        int side_b = 0;
        slot = uc_trial_begin(&g->trial, &side_b);
        double main_ms, alt_ms;
        int samples, kept;
        if (slot < 0 && uc_trial_verdict(&g->trial, &main_ms, &alt_ms, &samples, &kept)) {
            *v = (verdict){1, kept, samples, main_ms, alt_ms};
            g->trial_on = 0;
            g->use_alt = !kept;
            UC_COUNT(graph_verified, 1);
            if (!kept)
                UC_COUNT(graph_rejected_by_measurement, 1);
            uc_log(UC_LOG_INFO, "graph plan %p: divided %.4g ms, undivided engine %" PRId64 " %.4g ms (median of "
                   "%d): the %s from now on", g->plan, main_ms, g->alt.engine[0], alt_ms, samples,
                   kept ? "divided plan" : "undivided engine");
        }
        *use_alt = slot >= 0 ? side_b : g->use_alt;
        return slot;
    }
    *use_alt = g->use_alt;
    return -1;
}

/* The check's outcome, to the planner's recorder (parts and the undivided choice as micro-batches). */
static void record(const uc_ggraph *g, const verdict *v)
{
    ucudnn_micro_batch *mbs = calloc((size_t)g->main.nparts, sizeof *mbs);
    if (!mbs || !g->alt.nparts) {
        free(mbs);
        return;
    }
    for (int i = 0; i < g->main.nparts; i++)
        mbs[i] = (ucudnn_micro_batch){(int)g->main.size[i], (int)g->main.engine[i], 0};
    ucudnn_micro_batch undivided = {(int)g->alt.size[0], (int)g->alt.engine[0], 0};
    ucudnn_verdict out = {UCUDNN_ABI_VERSION, op_code(g), g->key, NULL, (int)g->n, g->limit,
                          uc_cfg_policy_name(g->policy), !(g->notes & (1 << 4)), v->kept, g->main.nparts, mbs,
                          undivided, v->main_ms, v->alt_ms, v->samples};
    uc_record_verdict(&out);
    free(mbs);
}

int uc_gsplit_execute(uc_ggraph *g, cudnnHandle_t handle, void *variant_pack, cudnnStatus_t *status)
{
    int capturing = uc_stream_capturing(handle);
    pthread_mutex_lock(&g->lock);
    int mine = g->decided == 1, use_alt = g->use_alt;
    /* During a CUDA-graph capture the check waits (no events recorded or queried); the current choice runs. */
    verdict v = {0};
    int slot = mine && !capturing ? choose(g, &use_alt, &v) : -1;
    const uc_gparts *run = use_alt ? &g->alt : &g->main; /* immutable once decided */
    pthread_mutex_unlock(&g->lock);
    if (!mine)
        return 0;
    if (v.done && g->source && strcmp(g->source, "planner") == 0)
        record(g, &v);
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
            step[i] = uc_gb_split_tensor(g, t) ? t->strides[0] * (int64_t)uc_gb_dtype_bytes(t->dtype) : 0;
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
    int64_t n0 = 0;
    int parts = 0;
    uc_guard++;
    for (; st == 0 && parts < run->nparts; n0 += run->size[parts], parts++)
        st = run_part(handle, run->plan[parts], n0, (int)nu, uids, ptrs, step, ws);
    uc_guard--;
    if (timed)
        timed = uc_mark_stop(&mark) == 0;
    if (slot >= 0) {
        pthread_mutex_lock(&g->lock);
        uc_trial_end(&g->trial, slot, timed ? &mark : NULL, st == 0);
        pthread_mutex_unlock(&g->lock);
    }
    if (run->nparts > 1)
        UC_COUNT(graph_micro_batches, parts);
    if (st != 0)
        uc_log(UC_LOG_WARNING, "graph plan %p: part %d of %d failed with status %d", g->plan, parts, run->nparts,
               (int)st);
    *status = st;
    return 1;
}

void uc_gsplit_free(uc_ggraph *g)
{
    drop_parts(&g->main);
    drop_parts(&g->alt);
    uc_trial_drop(&g->trial); /* slots never used hold nothing */
}
