/*
 * A cuDNN host program for the preload tests: one float or double convolution (any op, layout, rank, groups,
 * dilation), chosen and run the way a framework would, optionally from several threads and handles. Run with and
 * without LD_PRELOAD=libucudnn.so; the test compares the output files.
 *
 * Arguments are key=value: those of driver_common.h, dtype=float|double, threads, handles, repeat, alpha, beta,
 * alpha2, planner=fixed|fit|det|fail|nofit|huge_ws|bench (a C planner; plan=, fit_below=, clear=self|other,
 * rival=BATCH:ALGO: the runner-up the fixed planner names with its plan),
 * serial=1 (the threads run one after another), thread_query=1 (each thread also makes the query, on its own
 * handle, and runs what it chose in the workspace that choice sized), setopt=NAME:VALUE, borrow=1|2 (registers a
 * framework allocator of its own, as a C/C++ framework with a caching allocator would), out=PATH (thread t's
 * output is written to PATH.t), mark=R (before execution R, calls ucudnn_audit_mark where the driver audit of
 * c/driver_audit.c is loaded: what the preload library does to the driver from then on is counted apart).
 * Prints one JSON object on stdout:
 * statuses, the query's results, the chosen algorithm and workspace, thread 0's modelled time of each execution
 * (model_ms, from the host backend's model clock), and, when the preload library is loaded, its stats and the
 * last plan. Exit status 0 if every cuDNN call succeeded.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_common.h"

#define MAXT 16
#define MAX_REPEAT 64

static conv_problem P;
static const char *planner_kind;

/* borrow=1: the framework allocator the shim may borrow planning scratch from (ucudnn_set_framework_allocator),
 * 256-byte aligned host memory on the host backend, counted. borrow=2: the same, but it lends nothing on the
 * device of the first thread that asks (cuCtxGetDevice, from a stand-in driver): its cache there is empty, as
 * PyTorch's allocator lends from the calling thread's device. */
static int lent, given_back, refusing = -2;

static int refuses_here(void)
{
    int (*device)(int *) = (int (*)(int *))dlsym(RTLD_DEFAULT, "cuCtxGetDevice");
    int dev = -1;
    if (opti("borrow", 0) != 2 || !device || device(&dev) != 0)
        return 0;
    int unset = -2;
    __atomic_compare_exchange_n(&refusing, &unset, dev, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return __atomic_load_n(&refusing, __ATOMIC_RELAXED) == dev;
}

static void *own_alloc(size_t bytes)
{
    if (refuses_here())
        return NULL;
    void *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (p)
        __atomic_add_fetch(&lent, 1, __ATOMIC_RELAXED);
    return p;
}

static void own_free(void *p)
{
    free(p);
    __atomic_add_fetch(&given_back, 1, __ATOMIC_RELAXED);
}

static void register_own_allocator(void)
{
    int (*set)(void *(*)(size_t), void (*)(void *)) =
        (int (*)(void *(*)(size_t), void (*)(void *)))shim_fn("ucudnn_set_framework_allocator");
    if (set)
        set(own_alloc, own_free);
}

/* clear=self|other: the first planner call drops the shim's plans, from its own thread or from another one. */
static void *clear_plans(void *arg)
{
    (void)arg;
    void (*clear)(void) = (void (*)(void))shim_fn("ucudnn_clear_plans");
    if (clear)
        clear();
    return NULL;
}

static int c_planner(const ucudnn_plan_request *req, ucudnn_plan_reply *rep)
{
    static int cleared;
    const char *clear = opt("clear", NULL);
    if (clear && !__atomic_exchange_n(&cleared, 1, __ATOMIC_RELAXED)) {
        pthread_t t;
        if (strcmp(clear, "other") == 0 && pthread_create(&t, NULL, clear_plans, NULL) == 0)
            pthread_join(t, NULL);
        else
            clear_plans(NULL);
    }
    if (strcmp(planner_kind, "fail") == 0)
        return 2;
    if (strcmp(planner_kind, "nofit") == 0)
        return 1;
    if (strcmp(planner_kind, "det") == 0) { /* two halves with algo 0 (nondeterministic), or one call of algo 1 */
        if (req->deterministic_only) {
            rep->micro_batches[0] = (ucudnn_micro_batch){req->batch, 1, 0};
            rep->count = 1;
        } else {
            rep->micro_batches[0] = (ucudnn_micro_batch){req->batch / 2, 0, 0};
            rep->micro_batches[1] = (ucudnn_micro_batch){req->batch - req->batch / 2, 0, 0};
            rep->count = 2;
        }
        rep->time_ms = 1.0f;
        rep->workspace_bytes = 0;
        rep->deterministic = req->deterministic_only;
        return 0;
    }
    /* "fit": the fixed plan when the limit is generous, else quarters with algo 0 (no workspace). */
    if (strcmp(planner_kind, "fit") == 0 && req->workspace_limit_bytes < (size_t)opti("fit_below", 1 << 20)) {
        int q = req->batch / 4;
        for (int i = 0; i < 4; i++)
            rep->micro_batches[i] = (ucudnn_micro_batch){i < 3 ? q : req->batch - 3 * q, 0, 0};
        rep->count = 4;
        rep->time_ms = 2.0f;
        rep->workspace_bytes = 0;
        rep->deterministic = 1;
        return 0;
    }
    if (fixed_plan_reply(rep))
        return 2;
    if (opt("rival", NULL))
        sscanf(opt("rival", NULL), "%d:%d", &rep->rival.batch, &rep->rival.algo);
    if (strcmp(planner_kind, "huge_ws") == 0)
        rep->workspace_bytes = req->workspace_limit_bytes + 1;
    if (strcmp(planner_kind, "bench") == 0) { /* exercise ucudnn_benchmark from a C planner */
        int (*bench)(void *, int, ucudnn_perf *, int, int *) =
            (int (*)(void *, int, ucudnn_perf *, int, int *))shim_fn("ucudnn_benchmark");
        ucudnn_perf rows[32];
        int n = 0;
        if (!bench || bench(req->bench_ctx, 1, rows, 32, &n) != 0 || n < 1)
            return 2;
        for (int i = 0; i < n; i++)
            if (rows[i].algo < 0 || rows[i].algo >= req->algo_count)
                return 2;
        /* A stale context must be refused: this thread's previous request's (another thread's may be live). */
        static __thread void *stale;
        if (stale && bench(stale, 1, rows, 32, &n) == 0)
            return 2;
        stale = req->bench_ctx;
        rep->deterministic = req->deterministic_only; /* so a query asks again, for a deterministic plan */
    }
    return 0;
}

/* ---- one worker: its own handle (shared by pairs when handles < threads) and output buffer ---- */
typedef struct {
    cudnnHandle_t handle;
    conv_buffers in;
    void *out; /* aliases the op's output buffer in `in` */
    size_t out_bytes;
    void *ws;
    size_t ws_bytes;
    int algo, repeat, mark;
    double alpha, beta, alpha2;
    double model_ms[MAX_REPEAT]; /* each execution's modelled time (-1 without the host backend's clock) */
} worker;

static void *run_worker(void *arg)
{
    worker *t = arg;
    int dbl = P.dtype == CUDNN_DATA_DOUBLE;
    float af = (float)t->alpha, bf = (float)t->beta, a2f = (float)t->alpha2;
    const void *alpha = dbl ? (const void *)&t->alpha : (const void *)&af;
    const void *beta = dbl ? (const void *)&t->beta : (const void *)&bf;
    const void *alpha2 = dbl ? (const void *)&t->alpha2 : (const void *)&a2f;
    /* The host backend's model clock (UCUDNN_HOST_TIMING=model), when it is the library in use. */
    if (opti("thread_query", 0)) { /* this thread's own query, on its handle, as one thread per device makes */
        conv_choice ch;
        conv_choose(t->handle, &P, &ch);
        t->algo = ch.algo;
        free(t->ws);
        t->ws_bytes = ch.ws_bytes;
        t->ws = malloc(ch.ws_bytes ? ch.ws_bytes : 1);
    }
    double (*clock)(void) = (double (*)(void))dlsym(RTLD_DEFAULT, "ucudnn_host_model_clock_ms");
    void (*mark)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "ucudnn_audit_mark");
    for (int r = 0; r < t->repeat; r++) {
        if (r == t->mark && mark)
            mark();
        /* beta != 0 accumulates onto the prior output, so every repeat starts from the same prior contents */
        conv_fill(&P, t->out, t->out_bytes / P.esz, 99);
        double t0 = clock ? clock() : 0;
        check("convolution", conv_run(t->handle, &P, &t->in, t->algo, t->ws, t->ws_bytes, alpha, beta, alpha2));
        if (r < MAX_REPEAT) /* the first MAX_REPEAT executions are reported */
            t->model_ms[r] = clock ? clock() - t0 : -1;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    driver_init(argc, argv, "conv_driver");
    int threads = opti("threads", 1), handles = opti("handles", 1);
    planner_kind = opt("planner", NULL);
    fixed_plan_parse(opt("plan", NULL));
    int (*set_planner)(ucudnn_planner_fn) = (int (*)(ucudnn_planner_fn))shim_fn("ucudnn_set_planner");
    int (*set_option)(const char *, const char *) = (int (*)(const char *, const char *))shim_fn("ucudnn_set_option");
    if (planner_kind && set_planner)
        set_planner(c_planner);
    if (opti("borrow", 0))
        register_own_allocator();
    const char *setopt = opt("setopt", NULL);
    int setopt_rc = 0;
    if (setopt && set_option) {
        char name[128];
        const char *eq = strchr(setopt, ':');
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - setopt) : 0, setopt);
        setopt_rc = set_option(name, eq ? eq + 1 : "");
    }

    cudnnHandle_t hs[MAXT];
    for (int i = 0; i < handles; i++)
        check("cudnnCreate", cudnnCreate(&hs[i]));
    cudnnDataType_t dt = !strcmp(opt("dtype", "float"), "double") ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    conv_setup(&P, dt, dt);
    conv_choice ch;
    conv_choose(hs[0], &P, &ch);

    /* ---- run ---- */
    worker wk[MAXT];
    pthread_t tid[MAXT];
    size_t esz = P.esz;
    conv_buffers shared = {malloc(P.x_elems * esz), malloc(P.w_elems * esz), malloc(P.y_elems * esz),
                           malloc(P.y_elems * esz), malloc((size_t)P.k * esz)};
    conv_fill(&P, shared.x, P.x_elems, 1);
    conv_fill(&P, shared.w, P.w_elems, 2);
    conv_fill(&P, shared.y, P.y_elems, 3);
    conv_fill(&P, shared.z, P.y_elems, 4);
    conv_fill(&P, shared.bias, (size_t)P.k, 5);
    for (int t = 0; t < threads; t++) {
        worker *w = &wk[t];
        memset(w, 0, sizeof *w);
        w->handle = hs[t % handles];
        w->in = shared;
        size_t out_elems = P.op == OP_BWD_DATA ? P.x_elems : P.op == OP_BWD_FILTER ? P.w_elems : P.y_elems;
        w->out_bytes = out_elems * esz;
        w->out = malloc(w->out_bytes);
        if (P.op == OP_BWD_DATA)
            w->in.x = w->out;
        else if (P.op == OP_BWD_FILTER)
            w->in.w = w->out;
        else
            w->in.y = w->out;
        w->ws_bytes = ch.ws_bytes;
        w->ws = malloc(ch.ws_bytes ? ch.ws_bytes : 1);
        w->algo = ch.algo;
        w->repeat = opti("repeat", 1);
        w->mark = opti("mark", -1);
        w->alpha = atof(opt("alpha", "1"));
        w->beta = atof(opt("beta", "0"));
        w->alpha2 = atof(opt("alpha2", "0.5"));
    }
    if (threads == 1) {
        run_worker(&wk[0]);
    } else if (opti("serial", 0)) { /* a thread of its own each, one after another */
        for (int t = 0; t < threads; t++) {
            pthread_create(&tid[t], NULL, run_worker, &wk[t]);
            pthread_join(tid[t], NULL);
        }
    } else {
        for (int t = 0; t < threads; t++)
            pthread_create(&tid[t], NULL, run_worker, &wk[t]);
        for (int t = 0; t < threads; t++)
            pthread_join(tid[t], NULL);
    }
    const char *out = opt("out", NULL);
    for (int t = 0; out && t < threads; t++) {
        char path[1024];
        snprintf(path, sizeof path, "%s.%d", out, t);
        write_file(path, wk[t].out, wk[t].out_bytes);
    }

    /* ---- report ---- */
    report_begin(&ch);
    printf(",\"setopt_rc\":%d,\"lent\":%d,\"given_back\":%d,\"model_ms\":[", setopt_rc, lent, given_back);
    for (int r = 0; r < wk[0].repeat && r < MAX_REPEAT; r++)
        printf("%s%.9g", r ? "," : "", wk[0].model_ms[r]);
    printf("]");
    return report_end(threads == 1);
}
