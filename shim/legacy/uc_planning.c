/*
 * Planning on a plan-cache miss: find a planner, ask it, validate its answer, and build the plan (descriptor
 * clones per micro-batch size, workspace verified with the real library's own queries).
 *
 * Where the planner comes from (uc_planner_source.c), tried once per process at the first miss:
 *   1. one registered with ucudnn_set_planner (a test driver, or the bridge after step 2 or 3);
 *   2. a running Python interpreter (Py_IsInitialized via RTLD_DEFAULT): take the GIL with its own
 *      PyGILState_Ensure and import ucudnn._runtime, which registers the bridge's planner;
 *   3. no interpreter (a C/C++ host): dlopen libucudnn_planner.so from our own directory and call
 *      ucudnn_embedded_planner_init, which starts one and registers the planner;
 *   4. no planner: the plan stored for the request in the SQLite cache by an earlier run (uc_store.c), validated
 *      like a planner's reply (said once);
 *   5. otherwise the built-in fallback: the fastest single undivided algorithm that fits (said once).
 * No lock is held while any of this runs.
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"
#include "uc_internal.h"

_Static_assert(sizeof(ucudnn_perf) == sizeof(cudnnConvolutionFwdAlgoPerf_t), "perf row layout");
_Static_assert(offsetof(ucudnn_perf, memory) == offsetof(cudnnConvolutionFwdAlgoPerf_t, memory), "perf layout");
_Static_assert(offsetof(ucudnn_perf, determinism) == offsetof(cudnnConvolutionFwdAlgoPerf_t, determinism),
               "perf row layout");

static atomic_int fallback_announced, store_announced;

/* ---- benchmarking for the planner ---- */

/* The planner gets an opaque token, not a pointer: a stack address is reused by the next request, a token never
 * is, so a stale context is always refused. */
typedef struct bench_ctx {
    struct bench_ctx *next;
    const uc_call *call;         /* a legacy call's kernel, or */
    const uc_ggraph *graph;      /* a graph-API plan's convolution */
    uintptr_t token;
} bench_ctx;
static atomic_uintptr_t next_token = 0x5ec0001;

/* Live requests. Held during a benchmark too: benchmarks then never overlap (cleaner timings) and a request
 * cannot end under a benchmark that another thread runs for it. The GIL is not held by ucudnn_benchmark's
 * callers (cffi releases it), so this cannot deadlock against Python. */
static pthread_mutex_t bench_lock = PTHREAD_MUTEX_INITIALIZER;
static bench_ctx *live;

UC_EXPORT int ucudnn_benchmark(void *ctx, int batch, ucudnn_perf *out, int capacity, int *count)
{
    if (count)
        *count = 0;
    if (!ctx || !out || !count || capacity < 0)
        return uc_status(UC_ST_BAD_PARAM);
    pthread_mutex_lock(&bench_lock);
    bench_ctx *b = live;
    while (b && b->token != (uintptr_t)ctx)
        b = b->next;
    int st = uc_status(UC_ST_BAD_PARAM);
    if (!b) {
        uc_log(UC_LOG_WARNING, "ucudnn_benchmark: bench_ctx is not a request being planned");
    } else if (b->graph) {
        ucudnn_perf rows[UC_MAX_ROWS];
        int n = 0;
        st = batch >= 1 && batch <= b->graph->n ? uc_gbench(b->graph, batch, rows, UC_MAX_ROWS, &n) : st;
        if (st == 0) {
            int m = n < capacity ? n : capacity;
            memcpy(out, rows, sizeof(ucudnn_perf) * (size_t)m);
            *count = m;
        }
    } else if (batch >= 1 && batch <= b->call->k->x.dims[0]) {
        const uc_call *c = b->call;
        cudnnTensorDescriptor_t x = NULL, y = NULL;
        ucudnn_perf rows[UC_MAX_ROWS];
        int n = 0;
        st = uc_tensor_clone(&c->k->x, batch, &x);
        if (st == 0)
            st = uc_tensor_clone(&c->k->y, batch, &y);
        if (st == 0)
            st = uc_real_find(c, x, y, rows, UC_MAX_ROWS, &n);
        if (st == 0) {
            int m = n < capacity ? n : capacity;
            memcpy(out, rows, sizeof(ucudnn_perf) * (size_t)m);
            *count = m;
        }
        const uc_real_table *r = uc_real();
        if (x)
            r->cudnnDestroyTensorDescriptor(x);
        if (y)
            r->cudnnDestroyTensorDescriptor(y);
    }
    pthread_mutex_unlock(&bench_lock);
    return st;
}

UC_EXPORT int ucudnn_measure_call_cost(void *ctx, double *ms)
{
    if (!ctx || !ms)
        return uc_status(UC_ST_BAD_PARAM);
    pthread_mutex_lock(&bench_lock);
    bench_ctx *b = live;
    while (b && b->token != (uintptr_t)ctx)
        b = b->next;
    int st = !b        ? uc_status(UC_ST_BAD_PARAM)
             : b->graph ? uc_probe_call_cost((cudnnHandle_t)b->graph->handle, ms)
                        : uc_probe_call_cost(b->call->handle, ms);
    pthread_mutex_unlock(&bench_lock);
    if (!b)
        uc_log(UC_LOG_WARNING, "ucudnn_measure_call_cost: bench_ctx is not a request being planned");
    return st;
}

/* Call the planner with `ctx` live (ucudnn_benchmark accepts its token only meanwhile). */
static int ask(ucudnn_planner_fn planner, bench_ctx *ctx, const ucudnn_plan_request *req, ucudnn_plan_reply *rep)
{
    pthread_mutex_lock(&bench_lock);
    ctx->next = live;
    live = ctx;
    pthread_mutex_unlock(&bench_lock);
    UC_COUNT(planner_calls, 1);
    uc_guard++;
    int rc = planner(req, rep);
    uc_guard--;
    pthread_mutex_lock(&bench_lock);
    bench_ctx **pp = &live;
    while (*pp && *pp != ctx)
        pp = &(*pp)->next;
    if (*pp)
        *pp = ctx->next;
    pthread_mutex_unlock(&bench_lock);
    return rc;
}

/* ---- the built-in fallback: one undivided micro-batch ---- */

static int fallback_plan(const uc_call *c, const ucudnn_plan_request *req, ucudnn_plan_reply *rep)
{
    ucudnn_perf rows[UC_MAX_ROWS];
    int n = 0, timed = 1;
    if (uc_real_find(c, c->x, c->y, rows, UC_MAX_ROWS, &n) != 0) {
        /* No measurements: heuristic order, with the real workspace of each candidate. */
        timed = 0;
        if (uc_real_get_v7(c, rows, UC_MAX_ROWS, &n) != 0)
            return 2;
        for (int i = 0; i < n; i++)
            if (rows[i].status == 0 && uc_real_ws(c, c->x, c->y, c->conv, rows[i].algo, &rows[i].memory) != 0)
                rows[i].status = uc_status(UC_ST_NOT_SUPPORTED);
    }
    for (int i = 0; i < n; i++) {
        const ucudnn_perf *row = &rows[i];
        if (row->status != 0 || row->algo < 0 || row->algo >= req->algo_count ||
            row->memory > req->workspace_limit_bytes || (req->deterministic_only && !row->determinism))
            continue;
        rep->count = 1;
        rep->micro_batches[0] = (ucudnn_micro_batch){req->batch, row->algo, row->math_type};
        rep->time_ms = timed && isfinite(row->time_ms) && row->time_ms >= 0 ? row->time_ms : 0.0f;
        rep->workspace_bytes = row->memory;
        rep->deterministic = row->determinism == CUDNN_DETERMINISTIC;
        return 0;
    }
    return 1;
}

/* ---- validating and building ---- */

static const char *validate(const ucudnn_plan_request *req, const ucudnn_plan_reply *rep, char *why, size_t len)
{
    if (rep->count < 1 || rep->count > rep->capacity)
        return snprintf(why, len, "micro-batch count %d outside 1..%d", rep->count, rep->capacity), why;
    long long sum = 0;
    for (int i = 0; i < rep->count; i++) {
        const ucudnn_micro_batch *m = &rep->micro_batches[i];
        if (m->batch < 1 || m->batch > req->batch)
            return snprintf(why, len, "micro-batch %d has size %d", i, m->batch), why;
        if (m->algo < 0 || m->algo >= req->algo_count)
            return snprintf(why, len, "micro-batch %d has algorithm %d, not in 0..%d", i, m->algo,
                            req->algo_count - 1), why;
        if (m->math_type < CUDNN_DEFAULT_MATH || m->math_type > CUDNN_FMA_MATH)
            return snprintf(why, len, "micro-batch %d has math type %d", i, m->math_type), why;
        sum += m->batch;
    }
    if (sum != req->batch)
        return snprintf(why, len, "micro-batch sizes sum to %lld, not %d", sum, req->batch), why;
    if (rep->workspace_bytes > req->workspace_limit_bytes)
        return snprintf(why, len, "workspace %zu exceeds the limit %zu", rep->workspace_bytes,
                        req->workspace_limit_bytes), why;
    if (!isfinite(rep->time_ms) || rep->time_ms < 0)
        return snprintf(why, len, "predicted time %g", (double)rep->time_ms), why;
    if (req->deterministic_only && !rep->deterministic)
        return snprintf(why, len, "a deterministic plan was asked for"), why;
    return NULL;
}

/* Determinism of a plan from any source (planner reply, stored plan, stored benchmarks, fallback): every
 * micro-batch's algorithm as the real library reports it (the determinism of its Get*_v7 rows at the call's N).
 * Never what the source says: a forged cache row must not make a deterministic request run a non-deterministic
 * algorithm. An algorithm the real library does not report (or no report at all) counts as non-deterministic
 * here: a plan is deterministic only when the real library says so for each of its algorithms. */
static int real_deterministic(const uc_call *c, const ucudnn_plan_reply *rep)
{
    ucudnn_perf rows[UC_MAX_ROWS];
    int n = 0;
    if (uc_real_get_v7(c, rows, UC_MAX_ROWS, &n) != 0)
        n = 0;
    for (int i = 0; i < rep->count; i++)
        if (uc_row_determinism(rows, n, rep->micro_batches[i].algo) != 1)
            return 0;
    return 1;
}

/* The plan stored in the SQLite cache for this request, validated and built, or NULL (none, the cache cannot be
 * read, or the row is bad: rejected and counted, never executed). */
static uc_plan *stored_plan(const uc_call *c, const ucudnn_plan_request *req, ucudnn_plan_reply *rep, int policy)
{
    char where[PATH_MAX], why[256];
    int rc = uc_store_lookup(req, rep, where, sizeof where, why, sizeof why);
    if (rc == 1 || rc == 2)
        return NULL;
    uc_plan *p = NULL;
    if (rc == 0) {
        rep->deterministic = real_deterministic(c, rep);
        const char *bad = validate(req, rep, why, sizeof why);
        p = bad ? NULL : uc_plan_build(c, req, rep, policy, UC_SRC_CACHE, why, sizeof why);
    }
    if (!p) {
        UC_COUNT(rejected_plans, 1);
        uc_log(UC_LOG_WARNING, "rejected the plan stored in %s for %s at N=%d: %s", where, req->key, req->batch,
               why);
        return NULL;
    }
    UC_COUNT(cache_plans, 1);
    if (!atomic_exchange(&store_announced, 1))
        uc_log(UC_LOG_WARNING, "no planner could be loaded; running the plans stored in %s (a kernel without one "
                               "runs undivided)", where);
    return p;
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

static uc_plan *make_plan(const uc_call *c, size_t limit, int policy, int det)
{
    const uc_kernel *k = c->k;
    int n = k->x.dims[0], cap = n < UC_MAX_MICRO ? n : UC_MAX_MICRO;
    size_t key_len = uc_kernel_text(k, NULL, 0);
    char *key = malloc(key_len + 1);
    ucudnn_micro_batch *mbs = malloc(sizeof *mbs * (size_t)cap);
    if (!key || !mbs || key_len == 0) {
        free(key);
        free(mbs);
        return NULL;
    }
    uc_kernel_text(k, key, key_len + 1);
    char backend[PATH_MAX + 300];
    uc_backend_id(backend, sizeof backend);
    bench_ctx ctx = {NULL, c, NULL, atomic_fetch_add(&next_token, 2)};
    ucudnn_plan_request req = {UCUDNN_ABI_VERSION, k->op, key, backend, n, limit, uc_cfg_policy_name(policy),
                               det, uc_algo_count(k->op), (void *)ctx.token};
    ucudnn_plan_reply rep = {0, cap, mbs, 0.0f, 0, 0, 0};

    int transient = 0, source = UC_SRC_PLANNER, rc = 0;
    uc_plan *p = NULL;
    ucudnn_planner_fn planner = uc_get_planner(&transient);
    if (!planner && transient) {
        UC_COUNT(startup_passthrough, 1);
        free(key);
        free(mbs);
        return NULL;
    }
    if (planner) {
        rc = ask(planner, &ctx, &req, &rep);
    } else if (!(p = stored_plan(c, &req, &rep, policy))) {
        if (!atomic_exchange(&fallback_announced, 1))
            uc_log(UC_LOG_WARNING, "no planner could be loaded; each convolution runs undivided with the fastest "
                                   "algorithm that fits (built-in fallback)");
        rep = (ucudnn_plan_reply){0, cap, mbs, 0.0f, 0, 0, 0};
        source = UC_SRC_FALLBACK;
        rc = fallback_plan(c, &req, &rep);
    }

    char why[256];
    if (rc == UCUDNN_PLAN_INTERRUPTED && !p) {
        /* The program was interrupted while it planned: this call runs as cuDNN alone would, nothing is cached
         * (the kernel is planned again if the program goes on) and the interrupt is raised when the call returns. */
        uc_log(UC_LOG_DEBUG, "planning %s at N=%d was interrupted; passing the call through", key, n);
        free(key);
        free(mbs);
        return NULL;
    }
    if (p) {
        /* a stored plan, validated and built by stored_plan */
    } else if (rc == 0) {
        if (rep.count >= 1 && rep.count <= rep.capacity)
            rep.deterministic = real_deterministic(c, &rep);
        const char *bad = validate(&req, &rep, why, sizeof why);
        p = bad ? NULL : uc_plan_build(c, &req, &rep, policy, source, why, sizeof why);
        if (!p) {
            UC_COUNT(rejected_plans, 1);
            uc_log(UC_LOG_WARNING, "rejected a plan for %s at N=%d: %s; passing the kernel through", key, n, why);
        } else if (source == UC_SRC_FALLBACK) {
            UC_COUNT(fallback_plans, 1);
        }
    } else if (rc == 1) {
        UC_COUNT(no_plan, 1);
        uc_log(UC_LOG_DEBUG, "no plan fits %zu bytes for %s at N=%d", limit, key, n);
    } else {
        UC_COUNT(planner_errors, 1);
        uc_log(UC_LOG_INFO, "the planner failed (%d) for %s at N=%d; passing the kernel through", rc, key, n);
    }
    if (!p) {
        /* Cached "no plan": the kernel passes through until ucudnn_clear_plans, without asking again. */
        p = uc_plan_new(k->op, n, limit, policy, det, 0);
        if (p)
            p->key_text = strdup(key);
    }
    free(key);
    free(mbs);
    return p;
}

uc_plan *uc_plan_exact(const uc_call *c, size_t limit, int det)
{
    int transient = 0;
    if (!uc_get_planner(&transient))
        return NULL; /* only a planner knows what a check settled */
    uc_plan *p = make_plan(c, limit, uc_cfg_policy(), det || uc_cfg_deterministic());
    if (p && p->count == 0) {
        uc_plan_release(p);
        p = NULL;
    }
    return p;
}

uc_plan *uc_get_plan(const uc_call *c, size_t limit, int det, int *fresh)
{
    return uc_get_plan_as(c, limit, det, uc_cfg_policy(), fresh);
}

uc_plan *uc_get_plan_as(const uc_call *c, size_t limit, int det, int policy, int *fresh)
{
    det = det || uc_cfg_deterministic(); /* UCUDNN_DETERMINISTIC: every request asks for determinism */
    uint64_t view = uc_cache_view();
    uc_ckey key;
    uc_ckey_init(&key, UC_KEY_PLAN, c->k, policy, det, limit, 0);
    uc_plan *p = uc_cache_get(&key);
    if (p) {
        UC_COUNT(plan_hits, 1);
        return p;
    }
    p = uc_cache_alias(&key);
    if (!p) {
        UC_COUNT(plan_misses, 1);
        if (uc_cache_note_kernel(c->k))
            UC_COUNT(kernels, 1);
        p = make_plan(c, limit, policy, det);
        if (!p)
            return NULL;
        if (fresh)
            *fresh = 1;
    }
    uc_plan *cached = uc_cache_put(&key, p, view);
    uc_plan_release(p);
    return cached;
}

/* The smallest m * 2^e >= bytes with m < 8: four workspace buckets an octave, each at most 25% above its sizes. */
static size_t bucket_ceiling(size_t bytes)
{
    if (bytes <= 8 || bytes >= UC_UNLIMITED / 2)
        return bytes;
    size_t unit = (size_t)1 << (63 - __builtin_clzll((unsigned long long)bytes) - 2);
    return (bytes + unit - 1) / unit * unit;
}

/*
 * The plan for an execution with `limit` bytes of workspace. A kernel's first size is planned exactly; later
 * sizes at bucket sizes: the fastest plan under the bucket's ceiling L is the fastest under `limit` too when its
 * workspace fits `limit`; else the fastest under one byte less than that workspace, and so on down the
 * time/workspace front, which ends at `limit` itself. So every size of a bucket shares the same few planner calls
 * and cache entries, and a program passing 100,000 distinct workspace sizes costs what a few dozen do.
 */
uc_plan *uc_get_plan_bucketed(const uc_call *c, size_t limit, int det, int policy, int *fresh)
{
    uc_ckey key;
    uc_ckey_init(&key, UC_KEY_PLAN, c->k, policy, det || uc_cfg_deterministic(), limit, 0);
    uc_plan *p = uc_cache_get(&key);
    if (!p)
        p = uc_cache_alias(&key);
    if (p) {
        UC_COUNT(plan_hits, 1);
        return p;
    }
    size_t lim = uc_cache_kernel_planned(&key) ? bucket_ceiling(limit) : limit;
    for (int step = 0; step < 64 && lim > limit; step++) {
        p = uc_get_plan_as(c, lim, det, policy, fresh);
        if (!p || p->count == 0 || p->workspace <= limit)
            return p; /* no plan under lim >= limit: none under limit either */
        lim = p->workspace - 1; /* > limit - 1: the front's next step, still >= limit */
        uc_plan_release(p);
    }
    return uc_get_plan_as(c, limit, det, policy, fresh);
}

/* ---- graph-API kernels (uc_graph_split.c) ---- */

int uc_plan_graph(const uc_ggraph *g, int op, int algo_count, size_t limit, int policy, int det,
                  ucudnn_micro_batch *mbs, int cap, int *count, float *time_ms, int *verified)
{
    int transient = 0;
    ucudnn_planner_fn planner = uc_get_planner(&transient);
    if (!planner || !g->key || g->n > INT_MAX || cap < 1)
        return -1;
    char backend[PATH_MAX + 300];
    uc_backend_id(backend, sizeof backend);
    bench_ctx ctx = {NULL, NULL, g, atomic_fetch_add(&next_token, 2)};
    ucudnn_plan_request req = {UCUDNN_ABI_VERSION, op, g->key, backend, (int)g->n, limit,
                               uc_cfg_policy_name(policy), det, algo_count, (void *)ctx.token};
    ucudnn_plan_reply rep = {0, cap, mbs, 0.0f, 0, 0, 0};
    int rc = ask(planner, &ctx, &req, &rep);
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
    return 0;
}

void uc_record_verdict(ucudnn_verdict *v)
{
    ucudnn_recorder_fn rec = uc_get_recorder();
    if (!rec || !v->key)
        return;
    char backend[PATH_MAX + 300];
    uc_backend_id(backend, sizeof backend);
    v->backend_id = backend;
    uc_guard++;
    rec(v);
    uc_guard--;
    v->backend_id = NULL;
}
