/*
 * Asking the planner, for either path: the request (uc_request), the planner called with the shim's guard up, and
 * the benchmarks it runs meanwhile through ucudnn_benchmark and ucudnn_measure_call_cost on what the request is
 * about (a legacy call, a graph-API convolution: a uc_bench_subject of that path's). Also what the planner is told
 * afterwards: the verdicts of checks on real executions, to its recorder.
 *
 * The planner gets an opaque token, not a pointer: a stack address is reused by the next request, a token never
 * is, so a stale context is always refused.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "uc_core.h"

typedef struct bench_ctx {
    struct bench_ctx *next;
    const uc_bench_subject *subject;
    uintptr_t token;
    size_t limit; /* the request's workspace limit, which its benchmarks are run under */
    int busy;     /* benchmarks running for it now: the request does not end under them (under live_lock) */
} bench_ctx;
static atomic_uintptr_t next_token = 0x5ec0001;

/* Live requests, under live_lock; a request ends (uc_planner_ask) once no benchmark runs for it. The GIL is not
 * held by ucudnn_benchmark's callers (cffi releases it), so these locks cannot deadlock against Python. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;
static bench_ctx *live;

/* One benchmark at a time per device, for clean timings: threads planning on one device take turns, and those of
 * a process that drives several GPUs (one thread per device, as data-parallel frameworks run) measure at once,
 * each on its own. The device is the thread's current one (cuCtxGetDevice). Without a driver, and wherever the
 * host's clock times the benchmarks (the host backend measuring for real: they all run on this machine's cores),
 * every benchmark takes the one lock. Devices past UC_DEVICE_LOCKS share locks, which only serialises them. */
#define UC_DEVICE_LOCKS 32
static pthread_mutex_t device_locks[UC_DEVICE_LOCKS];
static pthread_once_t device_locks_once = PTHREAD_ONCE_INIT;

static void init_device_locks(void)
{
    for (int i = 0; i < UC_DEVICE_LOCKS; i++)
        pthread_mutex_init(&device_locks[i], NULL);
}

static pthread_mutex_t *device_lock(void)
{
    pthread_once(&device_locks_once, init_device_locks);
    int dev = uc_clock_kind() == UC_CLOCK_WALL ? -1 : uc_current_device();
    return &device_locks[(unsigned)(dev + 1) % UC_DEVICE_LOCKS];
}

/* The live request of token `ctx`, now busy with one more benchmark (end_benchmark ends it), or NULL. */
static bench_ctx *begin_benchmark(void *ctx)
{
    pthread_mutex_lock(&live_lock);
    bench_ctx *b = live;
    while (b && b->token != (uintptr_t)ctx)
        b = b->next;
    if (b)
        b->busy++;
    pthread_mutex_unlock(&live_lock);
    return b;
}

static void end_benchmark(bench_ctx *b)
{
    pthread_mutex_lock(&live_lock);
    if (--b->busy == 0)
        pthread_cond_broadcast(&idle);
    pthread_mutex_unlock(&live_lock);
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
    bench_ctx *b = begin_benchmark(ctx);
    if (!b) {
        uc_log(UC_LOG_WARNING, "ucudnn_benchmark: bench_ctx is not a request being planned");
        return uc_status(UC_ST_BAD_PARAM);
    }
    const uc_bench_subject *s = b->subject;
    int st = uc_status(UC_ST_BAD_PARAM);
    if (batch >= 1 && batch <= s->batch) {
        ucudnn_perf rows[UC_MAX_ROWS];
        int n = 0;
        pthread_mutex_t *lock = device_lock();
        pthread_mutex_lock(lock);
        st = s->bench(s->subject, batch, b->limit, rows, UC_MAX_ROWS, &n);
        pthread_mutex_unlock(lock);
        if (uc_bench_short(st, rows, n, b->limit))
            UC_COUNT(benchmarks_short_of_memory, 1);
        if (st == 0) {
            int m = n < capacity ? n : capacity;
            memcpy(out, rows, sizeof(ucudnn_perf) * (size_t)m);
            *count = m;
        }
    }
    end_benchmark(b);
    return st;
}

int uc_bench_call_cost(void *ctx, double *ms)
{
    if (!ctx || !ms)
        return uc_status(UC_ST_BAD_PARAM);
    bench_ctx *b = begin_benchmark(ctx);
    if (!b) {
        uc_log(UC_LOG_WARNING, "ucudnn_measure_call_cost: bench_ctx is not a request being planned");
        return uc_status(UC_ST_BAD_PARAM);
    }
    pthread_mutex_t *lock = device_lock();
    pthread_mutex_lock(lock);
    int st = uc_probe_call_cost(b->subject->handle, ms);
    pthread_mutex_unlock(lock);
    end_benchmark(b);
    return st;
}

void uc_backend_id(char *buf, size_t len)
{
    const uc_real_table *r = uc_real();
    char device[256];
    uc_device_name(device, sizeof device);
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
    bench_ctx ctx = {NULL, subject, atomic_fetch_add(&next_token, 2), r->req.workspace_limit_bytes, 0};
    r->req.bench_ctx = (void *)ctx.token;
    pthread_mutex_lock(&live_lock);
    ctx.next = live;
    live = &ctx;
    pthread_mutex_unlock(&live_lock);
    UC_COUNT(planner_calls, 1);
    uc_guard++;
    int rc = planner(&r->req, rep);
    uc_guard--;
    pthread_mutex_lock(&live_lock);
    bench_ctx **pp = &live;
    while (*pp && *pp != &ctx)
        pp = &(*pp)->next;
    if (*pp)
        *pp = ctx.next;
    while (ctx.busy > 0) /* another thread benchmarking with this request's token: it still reads the request */
        pthread_cond_wait(&idle, &live_lock);
    pthread_mutex_unlock(&live_lock);
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
