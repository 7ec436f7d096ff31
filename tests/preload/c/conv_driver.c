/*
 * A cuDNN host program for the preload tests: one convolution (any op, layout, rank, dtype, groups, dilation),
 * chosen and run the way a framework would, optionally from several threads and handles. Run with and without
 * LD_PRELOAD=libucudnn.so; the test compares the output files.
 *
 * Arguments are key=value (see `opt` calls in main). Prints one JSON object on stdout: statuses, the query's
 * results, the chosen algorithm and workspace, and, when the preload library is loaded, its stats and the
 * last plan. Exit status 0 if every cuDNN call succeeded.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucudnn/cudnn_abi.h"
#include "ucudnn/ucudnn.h"

#define MAXT 16

static int argc_g;
static char **argv_g;

static const char *opt(const char *key, const char *def)
{
    size_t n = strlen(key);
    for (int i = 1; i < argc_g; i++)
        if (strncmp(argv_g[i], key, n) == 0 && argv_g[i][n] == '=')
            return argv_g[i] + n + 1;
    return def;
}

static int opti(const char *key, int def)
{
    const char *v = opt(key, NULL);
    return v ? atoi(v) : def;
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (s && *s && n < max) {
        out[n++] = atoi(s);
        s = strchr(s, ',');
        if (s)
            s++;
    }
    return n;
}

static int failures;
static void check(const char *what, int st)
{
    if (st != 0) {
        fprintf(stderr, "conv_driver: %s -> status %d\n", what, st);
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    }
}

/* ---- problem ---- */
static int op;  /* 0 fwd, 1 bwd_data, 2 bwd_filter, 3 bias-activation forward */
static int dbl;  /* double data */
static int half; /* half data (the shim passes it through) */
static int nhwc, nsp, N, C, K, G;
static int in_sp[3], f_sp[3], out_sp[3], pad[3], strd[3], dil[3];
static size_t esz;
static cudnnTensorDescriptor_t xD, yD, biasD;
static cudnnFilterDescriptor_t wD;
static cudnnConvolutionDescriptor_t convD;
static cudnnActivationDescriptor_t actD;
static size_t x_elems, y_elems, w_elems;

static cudnnDataType_t dtype(void)
{
    return dbl ? CUDNN_DATA_DOUBLE : half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

static void tensor_desc(cudnnTensorDescriptor_t d, int n, int c, const int *sp)
{
    int nb = nsp + 2, dims[5], strides[5];
    dims[0] = n;
    dims[1] = c;
    for (int i = 0; i < nsp; i++)
        dims[2 + i] = sp[i];
    if (nhwc) { /* C fastest, then spatial, then N */
        strides[1] = 1;
        int s = c;
        for (int i = nsp - 1; i >= 0; i--) {
            strides[2 + i] = s;
            s *= sp[i];
        }
        strides[0] = s;
    } else {
        int s = 1;
        for (int i = nb - 1; i >= 0; i--) {
            strides[i] = s;
            s *= dims[i];
        }
    }
    check("SetTensorNd", cudnnSetTensorNdDescriptor(d, dtype(), nb, dims, strides));
}

static size_t elems(int n, int c, const int *sp)
{
    size_t e = (size_t)n * (size_t)c;
    for (int i = 0; i < nsp; i++)
        e *= (size_t)sp[i];
    return e;
}

static void fill(void *buf, size_t n, unsigned seed)
{
    unsigned s = seed * 2654435761u + 1;
    if (half) {
        memset(buf, 0, n * esz);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        double v = ((double)((s >> 8) & 0xFFFF) / 32768.0) - 1.0;
        if (dbl)
            ((double *)buf)[i] = v;
        else
            ((float *)buf)[i] = (float)v;
    }
}

/* ---- the preload library's control API, if loaded ---- */
static int fixed_count;
static ucudnn_micro_batch fixed_mb[64];
static const char *planner_kind;

/* clear=self|other: the first planner call drops the shim's plans, from its own thread or from another one. */
static void *clear_plans(void *arg)
{
    (void)arg;
    void (*clear)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "ucudnn_clear_plans");
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
    if (fixed_count > rep->capacity)
        return 2;
    for (int i = 0; i < fixed_count; i++)
        rep->micro_batches[i] = fixed_mb[i];
    rep->count = fixed_count;
    rep->time_ms = 1.0f;
    rep->workspace_bytes = 0;
    rep->deterministic = 1;
    if (strcmp(planner_kind, "huge_ws") == 0)
        rep->workspace_bytes = req->workspace_limit_bytes + 1;
    if (strcmp(planner_kind, "bench") == 0) { /* exercise ucudnn_benchmark from a C planner */
        int (*bench)(void *, int, ucudnn_perf *, int, int *) =
            (int (*)(void *, int, ucudnn_perf *, int, int *))dlsym(RTLD_DEFAULT, "ucudnn_benchmark");
        ucudnn_perf rows[32];
        int n = 0;
        if (!bench || bench(req->bench_ctx, 1, rows, 32, &n) != 0 || n < 1)
            return 2;
        for (int i = 0; i < n; i++)
            if (rows[i].algo < 0 || rows[i].algo >= req->algo_count)
                return 2;
        /* A stale context must be refused. */
        static void *stale;
        if (stale && bench(stale, 1, rows, 32, &n) == 0)
            return 2;
        stale = req->bench_ctx;
        rep->deterministic = req->deterministic_only; /* so a query asks again, for a deterministic plan */
    }
    return 0;
}

/* ---- one worker: its own handle (shared by pairs when handles < threads) and output buffer ---- */
typedef struct {
    int id;
    cudnnHandle_t handle;
    void *x, *w, *y, *z, *bias, *out; /* out aliases the op's output buffer */
    size_t out_bytes;
    void *ws;
    size_t ws_bytes;
    int algo, repeat;
    double alpha, beta, alpha2;
} worker;

static void *run_worker(void *arg)
{
    worker *t = arg;
    float af = (float)t->alpha, bf = (float)t->beta, a2f = (float)t->alpha2;
    const void *alpha = dbl ? (const void *)&t->alpha : (const void *)&af;
    const void *beta = dbl ? (const void *)&t->beta : (const void *)&bf;
    const void *alpha2 = dbl ? (const void *)&t->alpha2 : (const void *)&a2f;
    for (int r = 0; r < t->repeat; r++) {
        /* beta != 0 accumulates onto the prior output, so every repeat starts from the same prior contents */
        fill(t->out, t->out_bytes / esz, 99);
        int st;
        if (op == 0)
            st = cudnnConvolutionForward(t->handle, alpha, xD, t->x, wD, t->w, convD, t->algo, t->ws, t->ws_bytes, beta,
                                         yD, t->y);
        else if (op == 1)
            st = cudnnConvolutionBackwardData(t->handle, alpha, wD, t->w, yD, t->y, convD, t->algo, t->ws,
                                              t->ws_bytes, beta, xD, t->x);
        else if (op == 2)
            st = cudnnConvolutionBackwardFilter(t->handle, alpha, xD, t->x, yD, t->y, convD, t->algo, t->ws,
                                                t->ws_bytes, beta, wD, t->w);
        else
            st = cudnnConvolutionBiasActivationForward(t->handle, alpha, xD, t->x, wD, t->w, convD, t->algo, t->ws,
                                                       t->ws_bytes, alpha2, yD, t->z, biasD, t->bias, actD, yD,
                                                       t->y);
        check("convolution", st);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    argc_g = argc;
    argv_g = argv;
    const char *ops = opt("op", "fwd");
    op = !strcmp(ops, "fwd") ? 0 : !strcmp(ops, "bwd_data") ? 1 : !strcmp(ops, "bwd_filter") ? 2 : 3;
    dbl = !strcmp(opt("dtype", "float"), "double");
    half = !strcmp(opt("dtype", "float"), "half");
    esz = dbl ? 8 : half ? 2 : 4;
    nhwc = !strcmp(opt("layout", "nchw"), "nhwc");
    N = opti("n", 8);
    C = opti("c", 4);
    K = opti("k", 8);
    G = opti("groups", 1);
    nsp = parse_list(opt("in", "10,10"), in_sp, 3);
    parse_list(opt("filt", "3,3"), f_sp, 3);
    for (int i = 0; i < nsp; i++) {
        pad[i] = opti("pad", 1);
        strd[i] = opti("stride", 1);
        dil[i] = opti("dil", 1);
        out_sp[i] = (in_sp[i] + 2 * pad[i] - (dil[i] * (f_sp[i] - 1) + 1)) / strd[i] + 1;
    }
    int threads = opti("threads", 1), handles = opti("handles", 1);
    planner_kind = opt("planner", NULL);
    const char *plan_spec = opt("plan", NULL);
    while (plan_spec && *plan_spec && fixed_count < 64) { /* b:algo[:math],... */
        ucudnn_micro_batch m = {0, 0, 0};
        sscanf(plan_spec, "%d:%d:%d", &m.batch, &m.algo, &m.math_type);
        fixed_mb[fixed_count++] = m;
        plan_spec = strchr(plan_spec, ',');
        if (plan_spec)
            plan_spec++;
    }

    int (*set_planner)(ucudnn_planner_fn) = (int (*)(ucudnn_planner_fn))dlsym(RTLD_DEFAULT, "ucudnn_set_planner");
    int (*set_option)(const char *, const char *) =
        (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT, "ucudnn_set_option");
    size_t (*stats_json)(char *, size_t) = (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "ucudnn_stats_json");
    size_t (*last_plan)(char *, size_t) = (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "ucudnn_last_plan_json");
    if (planner_kind && set_planner)
        set_planner(c_planner);
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
    check("create", cudnnCreateTensorDescriptor(&xD));
    check("create", cudnnCreateTensorDescriptor(&yD));
    check("create", cudnnCreateTensorDescriptor(&biasD));
    check("create", cudnnCreateFilterDescriptor(&wD));
    check("create", cudnnCreateConvolutionDescriptor(&convD));
    check("create", cudnnCreateActivationDescriptor(&actD));
    tensor_desc(xD, N, C, in_sp);
    tensor_desc(yD, N, K, out_sp);
    int one[3] = {1, 1, 1};
    tensor_desc(biasD, 1, K, one);
    int fdims[5] = {K, C / G, f_sp[0], f_sp[1], f_sp[2]};
    check("SetFilterNd", cudnnSetFilterNdDescriptor(wD, dtype(),
                                                    nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, nsp + 2, fdims));
    check("SetConvNd", cudnnSetConvolutionNdDescriptor(convD, nsp, pad, strd, dil, CUDNN_CROSS_CORRELATION,
                                                       dbl ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
    if (opti("math", 0))
        check("SetMath", cudnnSetConvolutionMathType(convD, (cudnnMathType_t)opti("math", 0)));
    check("SetGroups", cudnnSetConvolutionGroupCount(convD, G));
    check("SetAct", cudnnSetActivationDescriptor(actD, !strcmp(opt("act", "relu"), "relu") ? CUDNN_ACTIVATION_RELU
                                                                                            : CUDNN_ACTIVATION_IDENTITY,
                                                 CUDNN_NOT_PROPAGATE_NAN, 0.0));
    x_elems = elems(N, C, in_sp);
    y_elems = elems(N, K, out_sp);
    w_elems = (size_t)K * (size_t)(C / G) * (size_t)f_sp[0] * (size_t)f_sp[1] * (nsp == 3 ? (size_t)f_sp[2] : 1);

    /* ---- choose the algorithm and workspace as a framework would ---- */
    const char *query = opt("query", "none");
    int algo = opti("algo", 0), returned = -1, qst = 0, requested = opti("requested", 16);
    cudnnConvolutionFwdAlgoPerf_t perf[64];
    memset(perf, 0xff, sizeof perf);
    void *qx = calloc(x_elems, esz), *qy = calloc(y_elems, esz), *qw = calloc(w_elems, esz);
    size_t qws_bytes = (size_t)opti("findex_ws", 1 << 20);
    void *qws = calloc(1, qws_bytes);
    int qop = op == 3 ? 0 : op;
    if (!strcmp(query, "get") || !strcmp(query, "find") || !strcmp(query, "findex")) {
        int get = !strcmp(query, "get"), find = !strcmp(query, "find");
        if (qop == 0)
            qst = get    ? cudnnGetConvolutionForwardAlgorithm_v7(hs[0], xD, wD, convD, yD, requested, &returned, perf)
                  : find ? cudnnFindConvolutionForwardAlgorithm(hs[0], xD, wD, convD, yD, requested, &returned, perf)
                         : cudnnFindConvolutionForwardAlgorithmEx(hs[0], xD, qx, wD, qw, convD, yD, qy, requested,
                                                                  &returned, perf, qws, qws_bytes);
        else if (qop == 1)
            qst = get ? cudnnGetConvolutionBackwardDataAlgorithm_v7(hs[0], wD, yD, convD, xD, requested, &returned,
                                                                    (cudnnConvolutionBwdDataAlgoPerf_t *)perf)
                  : find ? cudnnFindConvolutionBackwardDataAlgorithm(hs[0], wD, yD, convD, xD, requested, &returned,
                                                                     (cudnnConvolutionBwdDataAlgoPerf_t *)perf)
                         : cudnnFindConvolutionBackwardDataAlgorithmEx(hs[0], wD, qw, yD, qy, convD, xD, qx, requested,
                                                                       &returned,
                                                                       (cudnnConvolutionBwdDataAlgoPerf_t *)perf, qws,
                                                                       qws_bytes);
        else
            qst = get ? cudnnGetConvolutionBackwardFilterAlgorithm_v7(hs[0], xD, yD, convD, wD, requested, &returned,
                                                                      (cudnnConvolutionBwdFilterAlgoPerf_t *)perf)
                  : find ? cudnnFindConvolutionBackwardFilterAlgorithm(hs[0], xD, yD, convD, wD, requested, &returned,
                                                                       (cudnnConvolutionBwdFilterAlgoPerf_t *)perf)
                         : cudnnFindConvolutionBackwardFilterAlgorithmEx(
                               hs[0], xD, qx, yD, qy, convD, wD, qw, requested, &returned,
                               (cudnnConvolutionBwdFilterAlgoPerf_t *)perf, qws, qws_bytes);
        check("query", qst);
        /* Pick like a framework: the first successful row (deterministic only, if asked). */
        int want_det = opti("deterministic", 0);
        for (int i = 0; i < returned; i++) {
            if (perf[i].status == 0 && (!want_det || perf[i].determinism == CUDNN_DETERMINISTIC)) {
                algo = perf[i].algo;
                break;
            }
        }
    }
    size_t ws_bytes = 0;
    const char *ws_opt = opt("ws", "query");
    if (!strcmp(ws_opt, "query")) {
        int st = qop == 0 ? cudnnGetConvolutionForwardWorkspaceSize(hs[0], xD, wD, convD, yD, algo, &ws_bytes)
                 : qop == 1 ? cudnnGetConvolutionBackwardDataWorkspaceSize(hs[0], wD, yD, convD, xD, algo, &ws_bytes)
                            : cudnnGetConvolutionBackwardFilterWorkspaceSize(hs[0], xD, yD, convD, wD, algo, &ws_bytes);
        check("workspace size", st);
    } else {
        ws_bytes = (size_t)strtoull(ws_opt, NULL, 10);
    }

    /* ---- run ---- */
    worker wk[MAXT];
    pthread_t tid[MAXT];
    void *shared_in[3] = {malloc(x_elems * esz), malloc(w_elems * esz), malloc(y_elems * esz)};
    fill(shared_in[0], x_elems, 1);
    fill(shared_in[1], w_elems, 2);
    fill(shared_in[2], y_elems, 3);
    void *z = malloc(y_elems * esz), *bias = malloc((size_t)K * esz);
    fill(z, y_elems, 4);
    fill(bias, (size_t)K, 5);
    for (int t = 0; t < threads; t++) {
        worker *w = &wk[t];
        memset(w, 0, sizeof *w);
        w->id = t;
        w->handle = hs[t % handles];
        w->x = shared_in[0];
        w->w = shared_in[1];
        w->y = shared_in[2];
        w->z = z;
        w->bias = bias;
        size_t out_elems = (op == 1) ? x_elems : (op == 2) ? w_elems : y_elems;
        w->out_bytes = out_elems * esz;
        w->out = malloc(w->out_bytes);
        if (op == 1)
            w->x = w->out;
        else if (op == 2)
            w->w = w->out;
        else
            w->y = w->out;
        w->ws_bytes = ws_bytes;
        w->ws = malloc(ws_bytes ? ws_bytes : 1);
        w->algo = algo;
        w->repeat = opti("repeat", 1);
        w->alpha = atof(opt("alpha", "1"));
        w->beta = atof(opt("beta", "0"));
        w->alpha2 = atof(opt("alpha2", "0.5"));
    }
    if (threads == 1) {
        run_worker(&wk[0]);
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
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(wk[t].out, 1, wk[t].out_bytes, f) != wk[t].out_bytes)
            check("write output", 1);
        if (f)
            fclose(f);
    }

    /* ---- report ---- */
    printf("{\"failures\":%d,\"algo\":%d,\"ws_bytes\":%zu,\"setopt_rc\":%d,\"query_status\":%d,\"returned\":%d,"
           "\"perf\":[",
           failures, algo, ws_bytes, setopt_rc, qst, returned);
    for (int i = 0; i < returned && i < 64; i++)
        printf("%s{\"algo\":%d,\"status\":%d,\"time\":%g,\"memory\":%zu,\"determinism\":%d,\"math\":%d}", i ? "," : "",
               perf[i].algo, perf[i].status, (double)perf[i].time, perf[i].memory, perf[i].determinism,
               perf[i].mathType);
    printf("]");
    static char buf[1 << 16];
    if (stats_json) {
        stats_json(buf, sizeof buf);
        printf(",\"stats\":%s", buf);
    }
    if (last_plan && threads == 1) {
        last_plan(buf, sizeof buf);
        printf(",\"last_plan\":%s", buf);
    }
    printf("}\n");
    return failures ? 1 : 0;
}
