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

/* What the memo keeps of one engine's benchmark. */
typedef struct {
    int status;
    double ms;
    int64_t ws;
} bench_row;

/* Engine `engine` planned at b and timed on scratch tensors, or its row from the process's memo (the graph's shape
 * at b with this engine, built with the same knobs on the same device, measured for another plan): 0 and *out, or
 * the status for which the scratch tensors could not be had. A row is kept when it is a time or the engine does
 * not build; not when memory was short. */
static int measure(const uc_ggraph *g, int64_t b, int64_t engine, int64_t notes, const char *backend, scratch *s,
                   ucudnn_perf *out)
{
    char *key = uc_gmemo_key(g, "bench", b, engine, engine == g->engine, backend);
    bench_row row = {0, 0, 0};
    int reused = uc_gmemo_get(key, &row, sizeof row);
    if (!reused) {
        if (scratch_ready(g, b, s) != 0) {
            free(key);
            return s->status;
        }
        uc_guard++;
        void *plan = uc_gb_build(g, b, 0, engine, &row.ws);
        void *wsbuf = plan && row.ws > 0 ? uc_scratch_alloc((size_t)row.ws) : NULL;
        row.status = !plan ? uc_status(UC_ST_NOT_SUPPORTED)
                     : row.ws > 0 && !wsbuf ? uc_status(UC_ST_ALLOC)
                                            : time_plan(g, plan, s->n, s->uids, s->bufs, wsbuf, &row.ms);
        uc_scratch_free(wsbuf);
        uc_gb_destroy(plan);
        uc_guard--;
        UC_COUNT(graph_benchmarks, 1);
        if (row.status == 0 || !plan)
            uc_gmemo_put(key, &row, sizeof row);
    } else {
        UC_COUNT(graph_benchmarks_reused, 1);
    }
    free(key);
    uc_log(UC_LOG_DEBUG, "graph benchmark at b=%" PRId64 ": engine %" PRId64 " status %d, %.6g ms, %" PRId64
           " bytes%s", b, engine, row.status, row.ms, row.ws, reused ? " (measured before in this process)" : "");
    *out = (ucudnn_perf){.algo = (int)engine, .status = row.status, .time_ms = (float)row.ms,
                         .memory = (size_t)(row.ws > 0 ? row.ws : 0), .determinism = !(notes & (1 << 4)),
                         .math_type = 0};
    return 0;
}

int uc_gbench(const uc_ggraph *g, int64_t b, ucudnn_perf *out, int cap, int *count)
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
        if ((st = measure(g, b, engines[e], notes[e], backend, &s, &out[*count])) == 0)
            (*count)++;
    for (int i = 0; i < s.n; i++)
        uc_scratch_free(s.bufs[i]);
    if (st != 0)
        uc_log(UC_LOG_DEBUG, "graph benchmark at b=%" PRId64 " failed with status %d", b, st);
    return st;
}
