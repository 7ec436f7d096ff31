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
 * timed against each other on the first executions after UC_CHECK_UNTIMED divided ones (uc_trial, the legacy
 * path's rule) and the faster stays.
 * Under the default (`auto`: the framework's own limit) plans run as the framework built them, except the
 * micro-batched variants the shim offered in the heuristics results (uc_graph_offer.c), decided under what the
 * framework could allocate when they were offered.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"

/* The graph's benchmark at `batch` samples under the request's limit, for the planner (ucudnn_benchmark). */
static int bench_graph(const void *subject, int batch, size_t limit, ucudnn_perf *rows, int cap, int *n)
{
    return uc_gbench(subject, batch, limit, rows, cap, n);
}

/* The planner's plan for the graph kernel under `limit` into mbs (batch, algo = engine): 0 with *count, *time_ms,
 * *verified and *rival (a plan of one engine's runner-up; batch 0: none), 1 nothing fits, -1 no planner or an
 * error. */
static int ask_planner(const uc_ggraph *g, size_t limit, int policy, int algo_count, int64_t quantum,
                       ucudnn_micro_batch *mbs, int *count, float *time_ms, int *verified, ucudnn_micro_batch *rival)
{
    int transient = 0, cap = (int)g->n;
    ucudnn_planner_fn planner = uc_get_planner(&transient);
    if (!planner || !g->key || g->n > INT_MAX || cap < 1)
        return -1;
    uc_request r;
    uc_request_init(&r, uc_graph_op_code(g), g->key, (int)g->n, limit, policy, !(g->notes & (1 << 4)), algo_count);
    r.req.align_quantum = quantum > 0 ? (int)quantum : (int)g->n; /* none: only the undivided plan keeps it */
    uc_bench_subject subject = {g, bench_graph, (cudnnHandle_t)g->handle, g->n};
    ucudnn_plan_reply rep = {.capacity = cap, .micro_batches = mbs};
    int rc = uc_planner_ask(planner, &subject, &r, &rep);
    if (rc == 1)
        return 1;
    if (rc == UCUDNN_PLAN_INTERRUPTED)
        return -1; /* as on the legacy path: the call runs as built, and the interrupt is the program's */
    if (rc != 0 || rep.count < 1 || rep.count > cap) {
        UC_COUNT(planner_errors, 1);
        return -1;
    }
    *count = rep.count;
    *time_ms = rep.time_ms;
    *verified = rep.verified;
    *rival = rep.count == 1 && !rep.verified ? rep.rival : (ucudnn_micro_batch){0};
    return 0;
}

/* The runner-up the planner named for its plan `main` of one engine, as parts in *out, checked as the legacy path
 * checks a reply: one engine at the full N other than the plan's, one the shim can run within the limit (an
 * engine the caller's notes admit). Anything else is said and ignored: the plan is then not checked. */
static void build_runner_up(const uc_ggraph *g, const uc_gparts *main, const ucudnn_micro_batch *mb, int64_t count,
                            size_t limit, uc_gparts *out)
{
    int64_t whole = g->n, engine = mb->algo;
    if (main->nparts == 1 && mb->batch == g->n && mb->algo >= 0 && mb->algo < count && engine != main->engine[0] &&
        uc_gparts_build(g, &whole, &engine, 1, limit, out, 0) == 0 && out->nparts == 1)
        return;
    uc_gparts_drop(out);
    uc_log(UC_LOG_WARNING, "graph plan %p: the planner's runner-up (%d x engine %d) is not one the shim can run "
           "beside its plan within %zu bytes; the plan is not checked against it", g->plan, mb->batch, mb->algo,
           limit);
}

/* The planner's plan for `policy` as parts: 0, 1 nothing fits, -1 no planner, an error or an unusable reply. For
 * a plan of one engine, the runner-up it is to be checked against as parts in *rival where one is named and the
 * shim can run it within the limit (else none). */
static int planned(const uc_ggraph *g, size_t limit, int policy, uc_gparts *out, int *verified, uc_gparts *rival)
{
    int64_t count = uc_gb_engine_count(g);
    if (count < 1 || count > INT_MAX)
        return -1;
    ucudnn_micro_batch *mbs = calloc((size_t)g->n, sizeof *mbs);
    int64_t *size = calloc((size_t)g->n, sizeof *size), *engine = calloc((size_t)g->n, sizeof *engine);
    int n = 0, rc = -1;
    float time_ms = 0;
    int64_t quantum = uc_gb_align_quantum(g);
    ucudnn_micro_batch second = {0};
    if (mbs && size && engine)
        rc = ask_planner(g, limit, policy, (int)count, quantum, mbs, &n, &time_ms, verified, &second);
    for (int i = 0; rc == 0 && i < n; i++) {
        size[i] = mbs[i].batch;
        engine[i] = mbs[i].algo;
    }
    if (rc == 0)
        uc_gparts_order(quantum, size, engine, n);
    if (rc == 0 && uc_gparts_build(g, size, engine, n, limit, out, 0) != 0) {
        UC_COUNT(rejected_plans, 1);
        uc_log(UC_LOG_WARNING, "graph plan %p: the planner's plan (%d part(s)) is not one the shim can run within "
               "%zu bytes; it is not used", g->plan, n, limit);
        rc = -1;
    }
    if (rc == 0 && rival && second.batch != 0)
        build_runner_up(g, out, &second, count, limit, rival);
    free(mbs);
    free(size);
    free(engine);
    return rc;
}

/* The fallback without a planner: beside it the first undivided admitted engine that fits; the plan is the
 * caller's engine at the largest power-of-two size that fits (under `all`, refined up to the next power of two),
 * or, where its parts do not fit even at one sample (an FFT's filter spectra), the first admitted engine ranked
 * above that undivided one whose parts do. */
static void fallback(const uc_ggraph *g, size_t limit, int policy, uc_gparts *main, uc_gparts *alt)
{
    int64_t engines[UC_G_MAX_CANDIDATES + 1], notes[UC_G_MAX_CANDIDATES + 1];
    int ne = uc_gb_engines(g, g->n, engines, notes, UC_G_MAX_CANDIDATES + 1), fits = ne;
    for (int i = 1; i < ne && !alt->nparts; i++) { /* 0 is the caller's engine, which does not fit at N */
        int64_t whole = g->n;
        if (uc_gparts_build(g, &whole, &engines[i], 1, limit, alt, 0) == 0 && alt->nparts)
            fits = i;
    }
    if (policy == uc_cfg_policy_undivided())
        return;
    uc_gparts_largest(g, g->engine, limit, policy, main);
    for (int i = 1; i < fits && !main->nparts; i++)
        uc_gparts_largest(g, engines[i], limit, policy, main);
}

/* For an offered variant's divided plan: the check an earlier run stored for it (this plan against this undivided
 * engine, at this N on this device), so that it is not checked again -- 0 with *kept, else 1. Its own check's verdict
 * goes to the planner's recorder (uc_gexec_run), so the planner is started here if the process has none yet (a
 * C/C++ host's embedded one), at a workspace query, not at an execution. */
static int stored_check(const uc_ggraph *g, const uc_gparts *main, const uc_gparts *alt, int *kept)
{
    int transient = 0;
    (void)uc_get_planner(&transient);
    ucudnn_micro_batch *mbs = g->key ? uc_gparts_steps(main) : NULL, *undivided = mbs ? uc_gparts_steps(alt) : NULL;
    int rc = 1;
    if (undivided) {
        char backend[UC_BACKEND_ID_MAX];
        uc_backend_id(backend, sizeof backend);
        rc = uc_store_verdict(g->key, backend, (int)g->n, !(g->notes & (1 << 4)), mbs, main->nparts, undivided[0],
                              kept);
    }
    free(mbs);
    free(undivided);
    return rc == 0 ? 0 : 1;
}

/* Decide for the plan, g->lock not held: g->deciding keeps other threads off (their calls run the caller's
 * plan meanwhile, which is correct: nothing was reported to them yet). */
static void decide(uc_ggraph *g, size_t limit, int policy, uc_gparts *main, uc_gparts *alt, const char **source,
                   int64_t *full_out, int *verified, int *runner_up)
{
    const uc_real_table *r = uc_real();
    if (limit == UC_UNLIMITED || g->n < 2 || !g->nodes)
        return;
    int64_t count = 0, full = -1;
    int name = g->is_cfg ? UC_A_ENGINECFG_WORKSPACE_SIZE : UC_A_PLAN_WORKSPACE_SIZE;
    uc_guard++;
    cudnnStatus_t st = r->cudnnBackendGetAttribute(g->plan, name, UC_AT_INT64, 1, &count, &full);
    uc_guard--;
    if (st != 0 || count != 1 || full < 0)
        return;
    *full_out = full;
    if ((uint64_t)full <= limit)
        return;
    if (!uc_gb_divisible(g)) /* its plan is one undivided engine that fits, if any: ask for no other */
        policy = uc_cfg_policy_undivided();
    if (g->offer_limit) { /* an offered variant: its engine (or the next) micro-batched, or nothing */
        *source = "offer";
        uc_goffer_plan(g, limit, policy, main, alt);
        int kept = 0;
        if (main->nparts > 1 && alt->nparts && g->n <= INT_MAX && uc_cfg_verify_samples() > 0 &&
            stored_check(g, main, alt, &kept) == 0) {
            *verified = 1;
            UC_COUNT(graph_stored_checks, 1);
            uc_log(UC_LOG_INFO, "graph plan %p: a check stored in the cache %s its divided plan: not checked again",
                   g->plan, kept ? "kept" : "rejected");
            if (!kept) { /* the undivided engine it lost to is the plan */
                uc_gparts_drop(main);
                *main = *alt;
                memset(alt, 0, sizeof *alt);
            }
        }
        return;
    }
    int rc = planned(g, limit, policy, main, verified, alt), alt_verified = 0;
    if (rc == 0) {
        *source = "planner";
        /* A plan the planner says already won a check (a verdict in the cache) is not checked again. A plan of one
         * engine is checked against the runner-up the planner named (alt), if any. */
        *runner_up = main->nparts == 1 && alt->nparts == 1;
        if (main->nparts > 1 && !*verified &&
            planned(g, limit, uc_cfg_policy_undivided(), alt, &alt_verified, NULL) != 0)
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
        int verified = 0, policy = uc_cfg_policy(), runner_up = 0;
        /* ucudnn's explicit limit; under auto the framework's plan is its limit: it runs as built -- unless it
         * is a variant the shim offered for what the framework could allocate (uc_graph_offer.c). */
        size_t limit = g->offer_limit ? (size_t)g->offer_limit : uc_cfg_exec_cap();
        decide(g, limit, policy, &main, &alt, &source, &full, &verified, &runner_up);
        pthread_mutex_lock(&g->lock);
        g->full_workspace = full;
        g->source = source;
        g->main = main;
        g->alt = alt;
        g->decided = main.nparts ? 1 : -1;
        g->workspace = main.workspace > alt.workspace ? main.workspace : alt.workspace;
        g->limit = limit;
        g->policy = policy;
        g->runner_up = runner_up;
        g->trial_on = (main.nparts > 1 || runner_up) && alt.nparts && !verified && uc_trial_init(&g->trial) == 0;
        /* A framework that times the plans it may run (PyTorch's benchmark=True) times this one as divided: the
         * check's alternation starts after its first UC_CHECK_UNTIMED executions. */
        g->untimed = g->trial_on ? UC_CHECK_UNTIMED : 0;
        int checking = g->trial_on && !g->is_cfg;
        g->deciding = 0;
        pthread_mutex_unlock(&g->lock);
        if (main.nparts > 1 && !g->is_cfg) /* plans, not the configurations whose workspace was asked */
            UC_COUNT(graph_split_plans, 1);
        if (main.nparts)
            uc_log(UC_LOG_INFO, "graph plan %p (N=%" PRId64 ", engine %" PRId64 ", %" PRId64 " bytes): %s plan of "
                   "%d part(s), first %" PRId64 " x engine %" PRId64 ", in %" PRId64 " bytes%s", g->plan, g->n,
                   g->engine, full, source, main.nparts, main.size[0], main.engine[0], g->workspace,
                   !checking ? "" : runner_up ? "; checked against its runner-up after two executions"
                   : "; checked against the undivided choice after two executions");
        else if (full >= 0 && (uint64_t)full > limit && !g->offer_limit) {
            UC_COUNT(graph_over_limit, 1);
            uc_log(UC_LOG_INFO, "graph plan %p (N=%" PRId64 ", %" PRId64 " bytes): runs as built, over the limit of "
                   "%zu bytes: no admitted engine fits it%s", g->plan, g->n, full, limit,
                   uc_gb_divisible(g) ? ", even divided" : " undivided (a weight gradient whose parts could not "
                   "accumulate into dw is not divided)");
        } else if (full >= 0)
            uc_log(UC_LOG_INFO, "graph plan %p (N=%" PRId64 ", %" PRId64 " bytes): runs as built", g->plan, g->n,
                   full);
    }
    pthread_mutex_lock(&g->lock);
    int64_t ws = g->decided == 1 ? g->workspace : -1;
    pthread_mutex_unlock(&g->lock);
    return ws;
}

void uc_gsplit_free(uc_ggraph *g)
{
    uc_gparts_drop(&g->main);
    uc_gparts_drop(&g->alt);
    uc_trial_drop(&g->trial); /* slots never used hold nothing */
}
