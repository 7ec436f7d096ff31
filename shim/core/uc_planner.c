/*
 * Asking the planner, for either path: the request (uc_request), the planner called with the shim's guard up, and
 * the benchmarks it runs meanwhile through ucudnn_benchmark and ucudnn_measure_call_cost on what the request is
 * about (a legacy call, a graph-API convolution: a uc_bench_subject of that path's). Also what the planner is told
 * afterwards: the verdicts of checks on real executions, to its recorder.
 *
 * The planner gets an opaque token, not a pointer: a stack address is reused by the next request, a token never
 * is, so a stale context is always refused.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "uc_core.h"

typedef struct bench_ctx {
    struct bench_ctx *next;
    const uc_bench_subject *subject;
    uintptr_t token;
    size_t limit; /* the request's workspace limit, which its benchmarks are run under */
} bench_ctx;
static atomic_uintptr_t next_token = 0x5ec0001;

/* Live requests. Held during a benchmark too: benchmarks then never overlap (cleaner timings) and a request
 * cannot end under a benchmark that another thread runs for it. The GIL is not held by ucudnn_benchmark's
 * callers (cffi releases it), so this cannot deadlock against Python. */
static pthread_mutex_t bench_lock = PTHREAD_MUTEX_INITIALIZER;
static bench_ctx *live;

/* The live request of token `ctx`, or NULL. Under bench_lock. */
static const bench_ctx *live_request(void *ctx)
{
    bench_ctx *b = live;
    while (b && b->token != (uintptr_t)ctx)
        b = b->next;
    return b;
}

int uc_bench_short(int st, const ucudnn_perf *rows, int n, size_t limit)
{
    if (uc_status_alloc_failed(st))
        return 1;
    for (int i = 0; st == 0 && i < n; i++)
        if (uc_status_alloc_failed(rows[i].status) && rows[i].memory <= limit)
            return 1;
    return 0;
}

int uc_bench_run(void *ctx, int batch, ucudnn_perf *out, int capacity, int *count)
{
    if (count)
        *count = 0;
    if (!ctx || !out || !count || capacity < 0)
        return uc_status(UC_ST_BAD_PARAM);
    pthread_mutex_lock(&bench_lock);
    const bench_ctx *b = live_request(ctx);
    const uc_bench_subject *s = b ? b->subject : NULL;
    int st = uc_status(UC_ST_BAD_PARAM);
    if (!s) {
        uc_log(UC_LOG_WARNING, "ucudnn_benchmark: bench_ctx is not a request being planned");
    } else if (batch >= 1 && batch <= s->batch) {
        ucudnn_perf rows[UC_MAX_ROWS];
        int n = 0;
        st = s->bench(s->subject, batch, b->limit, rows, UC_MAX_ROWS, &n);
        if (uc_bench_short(st, rows, n, b->limit))
            UC_COUNT(benchmarks_short_of_memory, 1);
        if (st == 0) {
            int m = n < capacity ? n : capacity;
            memcpy(out, rows, sizeof(ucudnn_perf) * (size_t)m);
            *count = m;
        }
    }
    pthread_mutex_unlock(&bench_lock);
    return st;
}

int uc_bench_call_cost(void *ctx, double *ms)
{
    if (!ctx || !ms)
        return uc_status(UC_ST_BAD_PARAM);
    pthread_mutex_lock(&bench_lock);
    const bench_ctx *b = live_request(ctx);
    int st = b ? uc_probe_call_cost(b->subject->handle, ms) : uc_status(UC_ST_BAD_PARAM);
    pthread_mutex_unlock(&bench_lock);
    if (!b)
        uc_log(UC_LOG_WARNING, "ucudnn_measure_call_cost: bench_ctx is not a request being planned");
    return st;
}

void uc_backend_id(char *buf, size_t len)
{
    const uc_real_table *r = uc_real();
    char device[256] = "host";
    void *cuda = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (cuda) {
        int (*ctx_device)(int *) = (int (*)(int *))uc_dlsym(cuda, "cuCtxGetDevice");
        int (*device_name)(char *, int, int) = (int (*)(char *, int, int))uc_dlsym(cuda, "cuDeviceGetName");
        int dev = 0;
        if (!ctx_device || !device_name || ctx_device(&dev) != 0 || device_name(device, sizeof device, dev) != 0)
            snprintf(device, sizeof device, "cuda-unknown");
    }
    snprintf(buf, len, "device=%s;cudnn=%zu;build=%s", device, r->version, r->build);
}

void uc_request_init(uc_request *r, int op, const char *key, int batch, size_t limit, int policy, int det,
                     int algo_count)
{
    uc_backend_id(r->backend, sizeof r->backend);
    r->req = (ucudnn_plan_request){UCUDNN_ABI_VERSION, op, key, r->backend, batch, limit, uc_cfg_policy_name(policy),
                                   det, algo_count, NULL, 1};
}

int uc_planner_ask(ucudnn_planner_fn planner, const uc_bench_subject *subject, uc_request *r, ucudnn_plan_reply *rep)
{
    bench_ctx ctx = {NULL, subject, atomic_fetch_add(&next_token, 2), r->req.workspace_limit_bytes};
    r->req.bench_ctx = (void *)ctx.token;
    pthread_mutex_lock(&bench_lock);
    ctx.next = live;
    live = &ctx;
    pthread_mutex_unlock(&bench_lock);
    UC_COUNT(planner_calls, 1);
    uc_guard++;
    int rc = planner(&r->req, rep);
    uc_guard--;
    pthread_mutex_lock(&bench_lock);
    bench_ctx **pp = &live;
    while (*pp && *pp != &ctx)
        pp = &(*pp)->next;
    if (*pp)
        *pp = ctx.next;
    pthread_mutex_unlock(&bench_lock);
    return rc;
}

void uc_record_verdict(ucudnn_verdict *v)
{
    ucudnn_recorder_fn rec = uc_get_recorder();
    if (!rec || !v->key)
        return;
    char backend[UC_BACKEND_ID_MAX];
    uc_backend_id(backend, sizeof backend);
    v->backend_id = backend;
    uc_guard++;
    rec(v);
    uc_guard--;
    v->backend_id = NULL;
}
