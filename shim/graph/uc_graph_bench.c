/*
 * Benchmarking a graph-API convolution for the planner (ucudnn_benchmark on a graph request): the graph's own
 * Find, which cuDNN's backend API does not have.
 *
 * At batch size b: every candidate engine (the caller's own with its knob choices, then cuDNN's INSTANT
 * heuristics and, at the caller's N, its FALLBACK list, whose numerical notes add nothing the caller did not
 * accept: uc_gb_engines) is planned at b, executed on scratch buffers (device memory on a GPU, host memory on
 * the host backend) and timed by the clock of uc_device.c: one warm-up, then UC_GBENCH_RUNS timed executions,
 * the median. This is planning time, like cudnnFind: the device is synchronised between executions. Rows carry
 * the engine's global index as the algorithm, its workspace, and determinism from its notes. An engine the
 * process already measured on the same shape at b (for another plan of the same convolution: uc_graph_memo.c) is
 * not measured again.
 *
 * An engine whose plan at b needs more workspace than the request's limit is built (its workspace is known only
 * then) but not timed: no plan within the limit can run it at b, and the engines over a limit are the ones that
 * cost most to time, at the largest sizes. Its row says so as a search row does for an algorithm it could not give
 * memory to (an allocation status, with the workspace), which the planner stores as such: a later request under a
 * limit it fits has it timed then. Counter graph_benchmarks_over_limit.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"

#define UC_GBENCH_RUNS 3

/* Time one plan on the scratch variant pack: 0 and the median ms, or a status. */
static int time_plan(const uc_ggraph *g, void *plan, int npack, const int64_t *uids, void *const *ptrs, void *ws,
                     double *ms)
{
    const uc_real_table *r = uc_real();
    cudnnHandle_t handle = (cudnnHandle_t)g->handle;
    void *vp = NULL;
    int st = uc_gb_variant_pack(npack, uids, ptrs, ws, &vp);
    if (st == 0)
        st = r->cudnnBackendExecute(handle, plan, vp); /* warm-up */
    uc_device_sync();
    double t[UC_GBENCH_RUNS];
    for (int i = 0; st == 0 && i < UC_GBENCH_RUNS; i++) {
        uc_mark m;
        if (uc_mark_start(&m, handle) != 0) {
            st = uc_status(UC_ST_NOT_SUPPORTED);
            break;
        }
        st = r->cudnnBackendExecute(handle, plan, vp);
        int stopped = uc_mark_stop(&m) == 0;
        uc_device_sync();
        if (st == 0 && (!stopped || uc_mark_read(&m, &t[i]) != 1))
            st = uc_status(UC_ST_NOT_SUPPORTED);
        uc_mark_drop(&m);
    }
    if (vp)
        r->cudnnBackendDestroyDescriptor(vp);
    if (st == 0) {
        *ms = uc_median(t, UC_GBENCH_RUNS);
    }
    return st;
}

/* The graph's tensors at b on scratch memory, allocated at the first engine the memo cannot answer. */
typedef struct {
    int ready, status, n;
    int64_t uids[UC_G_MAX_TENSORS];
    void *bufs[UC_G_MAX_TENSORS];
} scratch;

static int scratch_ready(const uc_ggraph *g, int64_t b, scratch *s)
{
    for (int i = 0; !s->ready && i < g->ntensors && s->status == 0; i++) {
        const gtensor *t = &g->t[i];
        if (t->virt)
            continue;
        size_t bytes = uc_gb_extent(g, t, b);
        void *p = bytes ? uc_scratch_alloc(bytes) : NULL;
        if (!p) {
            s->status = uc_status(bytes ? UC_ST_ALLOC : UC_ST_NOT_SUPPORTED);
            break;
        }
        s->uids[s->n] = t->uid;
        s->bufs[s->n++] = p;
    }
    s->ready = 1;
    return s->status;
}

/* What the memo keeps of one engine's benchmark: a time, an engine that does not build, or (over = 1) a workspace
 * over the limit of the request that built it, not timed. */
typedef struct {
    int status, over;
    double ms;
    int64_t ws;
} bench_row;

/* Whether a plan needing `ws` bytes is over `limit`. */
static int over_limit(int64_t ws, size_t limit)
{
    return ws > 0 && (uint64_t)ws > (uint64_t)limit;
}

/* Engine `engine` planned at b and timed on scratch tensors, or its row from the process's memo (the graph's shape
 * at b with this engine, built with the same knobs on the same device, measured for another plan): 0 and *out, or
 * the status for which the scratch tensors could not be had. A plan over `limit` is not timed (its row: the
 * allocation status and its workspace). A row is kept when it is a time, the engine does not build or it was over
 * the limit (timed later where a limit it fits asks); not when memory was short. */
static int measure(const uc_ggraph *g, int64_t b, int64_t engine, int64_t notes, size_t limit, const char *backend,
                   scratch *s, ucudnn_perf *out)
{
    char *key = uc_gmemo_key(g, "bench", b, engine, engine == g->engine, backend);
    bench_row row = {0, 0, 0, 0};
    int reused = uc_gmemo_get(key, &row, sizeof row) && !(row.over && !over_limit(row.ws, limit));
    if (!reused) {
        uc_guard++;
        void *plan = uc_gb_build(g, b, 0, engine, &row.ws), *wsbuf = NULL;
        row.over = plan && over_limit(row.ws, limit);
        if (plan && !row.over && scratch_ready(g, b, s) != 0) {
            uc_gb_destroy(plan);
            uc_guard--;
            free(key);
            return s->status;
        }
        if (plan && !row.over && row.ws > 0)
            wsbuf = uc_scratch_alloc((size_t)row.ws);
        if (!plan)
            row.status = uc_status(UC_ST_NOT_SUPPORTED);
        else if (row.over || (row.ws > 0 && !wsbuf))
            row.status = uc_status(UC_ST_ALLOC);
        else
            row.status = time_plan(g, plan, s->n, s->uids, s->bufs, wsbuf, &row.ms);
        uc_scratch_free(wsbuf);
        uc_gb_destroy(plan);
        uc_guard--;
        if (row.over)
            UC_COUNT(graph_benchmarks_over_limit, 1);
        else
            UC_COUNT(graph_benchmarks, 1);
        if (row.status == 0 || !plan || row.over)
            uc_gmemo_put(key, &row, sizeof row);
    } else {
        UC_COUNT(graph_benchmarks_reused, 1);
    }
    free(key);
    if (row.over)
        uc_log(UC_LOG_DEBUG, "graph benchmark at b=%" PRId64 ": engine %" PRId64 " needs %" PRId64 " bytes, over the"
               " limit of %zu: not timed%s", b, engine, row.ws, limit, reused ? " (built before in this process)" : "");
    else
        uc_log(UC_LOG_DEBUG, "graph benchmark at b=%" PRId64 ": engine %" PRId64 " status %d, %.6g ms, %" PRId64
               " bytes%s", b, engine, row.status, row.ms, row.ws, reused ? " (measured before in this process)" : "");
    *out = (ucudnn_perf){.algo = (int)engine, .status = row.status, .time_ms = (float)row.ms,
                         .memory = (size_t)(row.ws > 0 ? row.ws : 0), .determinism = !(notes & (1 << 4)),
                         .math_type = 0};
    return 0;
}

int uc_gbench(const uc_ggraph *g, int64_t b, size_t limit, ucudnn_perf *out, int cap, int *count)
{
    *count = 0;
    if (b < 1 || b > g->n || !g->nodes)
        return uc_status(UC_ST_BAD_PARAM);
    int64_t engines[UC_G_MAX_CANDIDATES + 1], notes[UC_G_MAX_CANDIDATES + 1];
    int ne = uc_gb_engines(g, b, engines, notes, UC_G_MAX_CANDIDATES + 1), st = 0;
    scratch s = {.ready = 0, .status = 0, .n = 0};
    char backend[UC_BACKEND_ID_MAX]; /* the device and cuDNN, once for all the engines */
    uc_backend_id(backend, sizeof backend);
    for (int e = 0; st == 0 && e < ne && *count < cap; e++)
        if ((st = measure(g, b, engines[e], notes[e], limit, backend, &s, &out[*count])) == 0)
            (*count)++;
    for (int i = 0; i < s.n; i++)
        uc_scratch_free(s.bufs[i]);
    if (st != 0)
        uc_log(UC_LOG_DEBUG, "graph benchmark at b=%" PRId64 " failed with status %d", b, st);
    return st;
}
