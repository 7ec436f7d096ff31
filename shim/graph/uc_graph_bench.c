/*
 * Benchmarking a graph-API convolution for the planner (ucudnn_benchmark on a graph request): the graph's own
 * Find, which cuDNN's backend API does not have.
 *
 * At batch size b: every candidate engine (the caller's own with its knob choices, then cuDNN's INSTANT
 * heuristics whose numerical notes add nothing the caller did not accept: uc_gb_engines) is planned at b,
 * executed on scratch buffers (device memory on a GPU, host memory on the host backend) and timed by the
 * clock of uc_device.c: one warm-up, then UC_GBENCH_RUNS timed executions, the median. This is planning time,
 * like cudnnFind: the device is synchronised between executions. Rows carry the engine's global index as the
 * algorithm, its workspace, and determinism from its notes.
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

int uc_gbench(const uc_ggraph *g, int64_t b, ucudnn_perf *out, int cap, int *count)
{
    *count = 0;
    if (b < 1 || b > g->n || !g->nodes)
        return uc_status(UC_ST_BAD_PARAM);
    int64_t engines[UC_G_MAX_CANDIDATES + 1], notes[UC_G_MAX_CANDIDATES + 1];
    int ne = uc_gb_engines(g, b, engines, notes, UC_G_MAX_CANDIDATES + 1);
    int64_t uids[UC_G_MAX_TENSORS];
    void *bufs[UC_G_MAX_TENSORS];
    int nbuf = 0, st = 0;
    for (int i = 0; i < g->ntensors && st == 0; i++) {
        const gtensor *t = &g->t[i];
        if (t->virt)
            continue;
        size_t bytes = uc_gb_extent(g, t, b);
        void *p = bytes ? uc_scratch_alloc(bytes) : NULL;
        if (!p) {
            st = uc_status(bytes ? UC_ST_ALLOC : UC_ST_NOT_SUPPORTED);
            break;
        }
        uids[nbuf] = t->uid;
        bufs[nbuf++] = p;
    }
    for (int e = 0; st == 0 && e < ne && *count < cap; e++) {
        int64_t ws = 0;
        uc_guard++;
        void *plan = uc_gb_build(g, b, 0, engines[e], &ws);
        void *wsbuf = plan && ws > 0 ? uc_scratch_alloc((size_t)ws) : NULL;
        double ms = 0;
        int rst = !plan ? uc_status(UC_ST_NOT_SUPPORTED)
                  : ws > 0 && !wsbuf ? uc_status(UC_ST_ALLOC)
                                     : time_plan(g, plan, nbuf, uids, bufs, wsbuf, &ms);
        uc_scratch_free(wsbuf);
        uc_gb_destroy(plan);
        uc_guard--;
        uc_log(UC_LOG_DEBUG, "graph benchmark at b=%" PRId64 ": engine %" PRId64 " status %d, %.6g ms, %" PRId64
               " bytes", b, engines[e], rst, ms, ws);
        out[*count] = (ucudnn_perf){.algo = (int)engines[e], .status = rst, .time_ms = (float)ms,
                                    .memory = (size_t)(ws > 0 ? ws : 0),
                                    .determinism = !(notes[e] & (1 << 4)), .math_type = 0};
        (*count)++;
    }
    for (int i = 0; i < nbuf; i++)
        uc_scratch_free(bufs[i]);
    if (st != 0)
        uc_log(UC_LOG_DEBUG, "graph benchmark at b=%" PRId64 " failed with status %d", b, st);
    return st;
}
