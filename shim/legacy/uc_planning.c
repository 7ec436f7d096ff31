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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uc_legacy.h"

static atomic_int fallback_announced, store_announced;

/* ---- benchmarking the call for the planner (ucudnn_benchmark) ---- */

/* Rows the search could not give memory to (their workspace, or the search's own tensors): the workspace each
 * needs, where the search did not say, so the planner knows for which limits the benchmark is incomplete. */
static void fill_unallocated(const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y,
                             ucudnn_perf *rows, int n)
{
    for (int i = 0; i < n; i++)
        if (uc_status_alloc_failed(rows[i].status) && rows[i].memory == 0 &&
            uc_real_ws(c, x, y, c->conv, rows[i].algo, &rows[i].memory) != 0)
            rows[i].memory = 0;
}

/* ---- a query-time search again on borrowed scratch (UCUDNN_SCRATCH_FROM_FRAMEWORK) ---- */

/* Bytes a tensor spans at `batch` samples (its strides' reach), and the filter's (packed). */
static size_t tensor_bytes(const uc_tensor *t, int batch)
{
    size_t last = 0;
    for (int i = 0; i < t->nb; i++) {
        size_t d = i == 0 ? (size_t)batch : (size_t)t->dims[i];
        if (d == 0)
            return 0;
        last += (d - 1) * (size_t)t->strides[i];
    }
    return (last + 1) * uc_dtype_size(t->dtype);
}

static size_t filter_bytes(const uc_kernel *k)
{
    size_t n = 1;
    for (int i = 0; i < k->wnb; i++)
        n *= (size_t)k->wdims[i];
    return n * uc_dtype_size(k->wdtype);
}

/* The largest workspace an algorithm of the op needs at x/y within `limit` (0: none needs any). */
static size_t widest_within(const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, size_t limit)
{
    size_t widest = 0;
    for (int a = 0; a < uc_algo_count(c->k->op); a++) {
        size_t bytes = 0;
        if (uc_real_ws(c, x, y, c->conv, a, &bytes) == 0 && bytes <= limit && bytes > widest)
            widest = bytes;
    }
    return widest;
}

/*
 * A search cudnnFind made short of memory (its tensors, or a workspace within the limit, refused: the device is
 * full) made again with Find*Ex on scratch of the shim's (uc_scratch_alloc: the device's, else borrowed from the
 * framework's allocator), its tensors at `batch` samples and the widest workspace within the limit: its rows
 * replace the short ones. 0 and *n set where it ran; else the first search's rows stand. Only under
 * UCUDNN_SCRATCH_FROM_FRAMEWORK, where the framework's cache holds what the device no longer shows as free.
 */
static int find_on_scratch(const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, int batch,
                           size_t limit, ucudnn_perf *rows, int cap, int *n)
{
    const uc_kernel *k = c->k;
    uc_found f = {0};
    f.ws_bytes = widest_within(c, x, y, limit);
    size_t xb = tensor_bytes(&k->x, batch), yb = tensor_bytes(&k->y, batch), wb = filter_bytes(k);
    int st = uc_status(UC_ST_ALLOC);
    if (xb && yb && wb && (f.x = uc_scratch_alloc(xb)) && (f.y = uc_scratch_alloc(yb)) &&
        (f.w = uc_scratch_alloc(wb)) && (!f.ws_bytes || (f.ws = uc_scratch_alloc(f.ws_bytes)))) {
        uc_call on_scratch = *c;
        on_scratch.found = &f;
        ucudnn_perf got[UC_MAX_ROWS];
        int m = 0;
        st = uc_real_find_ex(&on_scratch, x, y, limit, got, UC_MAX_ROWS, &m);
        if (st == 0) {
            *n = m < cap ? m : cap;
            memcpy(rows, got, sizeof *rows * (size_t)*n);
        }
    }
    uc_scratch_free(f.ws);
    uc_scratch_free(f.w);
    uc_scratch_free(f.y);
    uc_scratch_free(f.x);
    return st;
}

/* The real search at `batch` samples, on descriptors cloned at that size: Find*Ex on the caller's buffers and
 * workspace where the call has them (a Find*Ex: at its own N, the rows its search just measured; below it, and for
 * a convolution call that overwrites its output, offered no more of the workspace than the request's limit, so that
 * algorithms no plan within it can run are not timed), else Find on buffers of the library's own (and, where that
 * went short of memory under UCUDNN_SCRATCH_FROM_FRAMEWORK, Find*Ex on scratch: find_on_scratch). */
static int bench_call(const void *subject, int batch, size_t limit, ucudnn_perf *rows, int cap, int *n)
{
    const uc_call *c = subject;
    const uc_found *f = c->found;
    UC_COUNT(legacy_benchmarks, 1);
    if (f && f->rows)
        UC_COUNT(find_ex_benchmarks, 1);
    else if (f)
        UC_COUNT(call_buffer_benchmarks, 1);
    if (f && f->rows && batch == c->k->x.dims[0]) {
        *n = f->nrows < cap ? f->nrows : cap;
        memcpy(rows, f->rows, sizeof *rows * (size_t)*n);
        fill_unallocated(c, c->x, c->y, rows, *n);
        return 0;
    }
    cudnnTensorDescriptor_t x = NULL, y = NULL;
    int st = uc_tensor_clone(&c->k->x, batch, &x);
    if (st == 0)
        st = uc_tensor_clone(&c->k->y, batch, &y);
    if (st == 0) {
        st = f ? uc_real_find_ex(c, x, y, limit, rows, cap, n) : uc_real_find(c, x, y, rows, cap, n);
        if (st == 0)
            fill_unallocated(c, x, y, rows, *n);
        if (!f && uc_cfg_scratch_from_framework() && uc_bench_short(st, rows, *n, limit) &&
            find_on_scratch(c, x, y, batch, limit, rows, cap, n) == 0) {
            UC_COUNT(scratch_searches, 1);
            st = 0;
            fill_unallocated(c, x, y, rows, *n);
        }
    }
    uc_tensor_destroy(x);
    uc_tensor_destroy(y);
    return st;
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

/* The runner-up a planner named for its plan p of one call (ucudnn_plan_reply.rival), as a plan of its own,
 * validated like a reply: another single call at N within the limit, deterministic where that is asked (by the real
 * library's word), which the real library runs there. Anything else is said and dropped: p is then not checked. */
static void attach_rival(const uc_call *c, const ucudnn_plan_request *req, const ucudnn_plan_reply *rep, uc_plan *p)
{
    if (rep->rival.batch == 0 || p->count != 1 || p->verified)
        return;
    ucudnn_micro_batch one = rep->rival;
    ucudnn_plan_reply r = {.count = 1, .capacity = 1, .micro_batches = &one, .time_ms = rep->rival_ms};
    char why[256];
    r.deterministic = real_deterministic(c, &r);
    const char *bad = validate(req, &r, why, sizeof why);
    if (!bad && one.algo == p->mb[0].algo && one.math_type == p->mb[0].math_type)
        bad = "it is the plan's own call";
    p->rival = bad ? NULL : uc_plan_build(c, req, &r, p->policy, UC_SRC_PLANNER, why, sizeof why);
    if (!p->rival)
        uc_log(UC_LOG_WARNING, "ignored the runner-up the planner named for %s at N=%d: %s", req->key, req->batch,
               bad ? bad : why);
}

/* The answer to request r, as a planner's return code: the planner's, else the plan stored for it (built already:
 * *stored), else the built-in fallback's (*source says which). *starting: another thread is still starting the
 * planner (the call passes through, nothing cached). */
static int answer_request(const uc_call *c, uc_request *r, ucudnn_plan_reply *rep, int policy, int *source,
                          uc_plan **stored, int *starting)
{
    ucudnn_planner_fn planner = uc_get_planner(starting);
    *source = UC_SRC_PLANNER;
    *stored = NULL;
    if (!planner && *starting) {
        UC_COUNT(startup_passthrough, 1);
        return 0;
    }
    if (planner) {
        uc_bench_subject subject = {c, bench_call, c->handle, c->k->x.dims[0]};
        return uc_planner_ask(planner, &subject, r, rep);
    }
    if ((*stored = stored_plan(c, &r->req, rep, policy)))
        return 0;
    if (!atomic_exchange(&fallback_announced, 1))
        uc_log(UC_LOG_WARNING, "no planner could be loaded; each convolution runs undivided with the fastest "
                               "algorithm that fits (built-in fallback)");
    *rep = (ucudnn_plan_reply){.capacity = rep->capacity, .micro_batches = rep->micro_batches};
    *source = UC_SRC_FALLBACK;
    return fallback_plan(c, &r->req, rep);
}

/* The plan for answer rc (a planner's return code) to request r, built from the reply; else "no plan" (count 0,
 * cached: the kernel passes through until ucudnn_clear_plans, without asking again). Counted and said. */
static uc_plan *plan_of_answer(const uc_call *c, const ucudnn_plan_request *req, ucudnn_plan_reply *rep, int rc,
                               int policy, int source)
{
    char why[256];
    uc_plan *p = NULL;
    if (rc == 0) {
        if (rep->count >= 1 && rep->count <= rep->capacity)
            rep->deterministic = real_deterministic(c, rep);
        const char *bad = validate(req, rep, why, sizeof why);
        p = bad ? NULL : uc_plan_build(c, req, rep, policy, source, why, sizeof why);
        if (!p) {
            UC_COUNT(rejected_plans, 1);
            uc_log(UC_LOG_WARNING, "rejected a plan for %s at N=%d: %s; passing the kernel through", req->key,
                   req->batch, why);
        } else if (source == UC_SRC_FALLBACK) {
            UC_COUNT(fallback_plans, 1);
        } else {
            attach_rival(c, req, rep, p);
        }
    } else if (rc == 1) {
        UC_COUNT(no_plan, 1);
        uc_log(UC_LOG_DEBUG, "no plan fits %zu bytes for %s at N=%d", req->workspace_limit_bytes, req->key,
               req->batch);
    } else {
        UC_COUNT(planner_errors, 1);
        uc_log(UC_LOG_INFO, "the planner failed (%d) for %s at N=%d; passing the kernel through", rc, req->key,
               req->batch);
    }
    if (!p) {
        p = uc_plan_new(req->op, req->batch, req->workspace_limit_bytes, policy, req->deterministic_only, 0);
        if (p)
            p->key_text = strdup(req->key);
    }
    return p;
}

uc_plan *uc_plan_make(const uc_call *c, size_t limit, int policy, int det)
{
    const uc_kernel *k = c->k;
    if (uc_stream_capturing(c->handle)) {
        /* The searches would be captured into the program's CUDA graph, or invalidate its capture: nothing is
         * planned or cached now, the call (or query) goes to cuDNN as it is, and a later one plans. */
        UC_COUNT(capture_deferred_plans, 1);
        uc_log(UC_LOG_DEBUG, "%s at N=%d: its stream is being captured into a CUDA graph; planned later",
               uc_op_name(k->op), k->x.dims[0]);
        return NULL;
    }
    int n = k->x.dims[0], cap = n < UC_MAX_MICRO ? n : UC_MAX_MICRO;
    size_t key_len = uc_kernel_text(k, NULL, 0);
    char *key = malloc(key_len + 1);
    ucudnn_micro_batch *mbs = malloc(sizeof *mbs * (size_t)cap);
    uc_request r;
    uc_plan *p = NULL;
    if (key && mbs && key_len) {
        uc_kernel_text(k, key, key_len + 1);
        uc_request_init(&r, k->op, key, n, limit, policy, det, uc_algo_count(k->op));
        ucudnn_plan_reply rep = {.capacity = cap, .micro_batches = mbs};
        int source = UC_SRC_PLANNER, starting = 0;
        int rc = answer_request(c, &r, &rep, policy, &source, &p, &starting);
        if (!p && !starting && rc == UCUDNN_PLAN_INTERRUPTED)
            /* The program was interrupted while it planned: this call runs as cuDNN alone would, nothing is
             * cached (the kernel is planned again if the program goes on) and the interrupt is raised when the
             * call returns. */
            uc_log(UC_LOG_DEBUG, "planning %s at N=%d was interrupted; passing the call through", key, n);
        else if (!p && !starting)
            p = plan_of_answer(c, &r.req, &rep, rc, policy, source);
    }
    free(key);
    free(mbs);
    return p;
}
