/*
 * A stand-in for libucudnn.so's control API, so the bridge, the runtime planner callback and the embedded
 * planner can be tested without the real shim or a cuDNN. It benchmarks a synthetic kernel (algorithm k at
 * micro-batch b: time and workspace grow with b, faster algorithms need more workspace) and counts calls.
 *
 * fake_shim_plan() plays the shim's miss path: with no planner registered it dlopens the embedded planner
 * (FAKE_SHIM_EMBEDDED names it) RTLD_LOCAL, as the real shim does in a C host, and then asks the planner.
 */
#include "ucudnn/ucudnn.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_ALGOS 3

static _Atomic(ucudnn_planner_fn) planner;
static atomic_int benchmark_calls;
static atomic_int set_planner_calls;
static char last_option[256];

int ucudnn_set_planner(ucudnn_planner_fn fn)
{
    atomic_store(&planner, fn);
    atomic_fetch_add(&set_planner_calls, 1);
    return 0;
}

int ucudnn_benchmark(void *bench_ctx, int batch, ucudnn_perf *out, int capacity, int *count)
{
    *count = 0;
    if (bench_ctx == NULL || strcmp((const char *)bench_ctx, "fake-ctx") != 0)
        return 2000;
    atomic_fetch_add(&benchmark_calls, 1);
    const char *fail = getenv("FAKE_SHIM_BENCH_FAIL");
    if (fail != NULL && atoi(fail) == batch)
        return 4000;
    static const float per_sample_ms[FAKE_ALGOS] = {1.0f, 0.3f, 0.1f};
    size_t ws_per_sample[FAKE_ALGOS] = {0, 1024, 4096};
    if (getenv("FAKE_SHIM_NO_ZERO_WS") != NULL) /* then a zero limit fits nothing */
        ws_per_sample[0] = 64;
    int n = 0;
    for (int k = FAKE_ALGOS - 1; k >= 0 && n < capacity; k--) {
        ucudnn_perf *p = &out[n++];
        memset(p, 0, sizeof *p);
        p->algo = k;
        p->time_ms = per_sample_ms[k] * (float)batch + 0.5f;
        p->memory = ws_per_sample[k] * (size_t)batch;
        p->determinism = k == 2 ? 0 : 1;
    }
    if (n < capacity) { /* a row that failed to run: the bridge must drop it */
        ucudnn_perf *p = &out[n++];
        memset(p, 0, sizeof *p);
        p->algo = 1;
        p->status = 3000;
        p->time_ms = 0.0f;
        p->math_type = 1;
    }
    *count = n;
    return 0;
}

/* The fake device's host cost of a call: below every fake time, so it changes no plan. */
int ucudnn_measure_call_cost(void *bench_ctx, double *ms)
{
    if (bench_ctx == NULL || strcmp((const char *)bench_ctx, "fake-ctx") != 0 || ms == NULL)
        return 2000;
    *ms = 0.01;
    return 0;
}

int ucudnn_version(void) { return 900; }

int ucudnn_set_option(const char *name, const char *value)
{
    if (strncmp(name, "UCUDNN_", 7) != 0)
        return -1;
    snprintf(last_option, sizeof last_option, "%s=%s", name, value);
    return 0;
}

void ucudnn_clear_plans(void) { snprintf(last_option, sizeof last_option, "cleared"); }

size_t ucudnn_stats_json(char *buf, size_t len)
{
    /* Padded beyond the bridge's first buffer, so its grow-and-retry path runs. */
    char text[6000];
    int n = snprintf(text, sizeof text, "{\"benchmark_calls\": %d, \"last_option\": \"%s\", \"pad\": \"%*s\"}",
                     atomic_load(&benchmark_calls), last_option, 5000, "");
    if (len > 0)
        snprintf(buf, len, "%s", text);
    return (size_t)n;
}

size_t ucudnn_last_plan_json(char *buf, size_t len)
{
    if (len > 0)
        snprintf(buf, len, "{}");
    return 2;
}

int fake_shim_benchmark_calls(void) { return atomic_load(&benchmark_calls); }
int fake_shim_set_planner_calls(void) { return atomic_load(&set_planner_calls); }

static int load_embedded(void)
{
    const char *path = getenv("FAKE_SHIM_EMBEDDED");
    if (path == NULL)
        return -1;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "fake_shim: %s\n", dlerror());
        return -1;
    }
    int (*init)(void) = (int (*)(void))dlsym(lib, "ucudnn_embedded_planner_init");
    return init ? init() : -1;
}

/*
 * Plan a synthetic kernel: returns the planner's status (or -1 when there is no planner), with the plan in
 * out[0..*count) and its time/workspace/determinism in the out-parameters.
 */
int fake_shim_plan(const char *key, int batch, size_t limit, const char *policy, int deterministic_only,
                   ucudnn_micro_batch *out, int capacity, int *count, float *time_ms, size_t *workspace,
                   int *deterministic)
{
    if (atomic_load(&planner) == NULL && load_embedded() != 0)
        return -1;
    ucudnn_planner_fn fn = atomic_load(&planner);
    if (fn == NULL)
        return -1;
    static char ctx[] = "fake-ctx";
    ucudnn_plan_request req = {
        .abi_version = UCUDNN_ABI_VERSION,
        .op = UCUDNN_OP_FWD,
        .key = key,
        .backend_id = "fake-device/fake-backend",
        .batch = batch,
        .workspace_limit_bytes = limit,
        .policy = policy,
        .deterministic_only = deterministic_only,
        .algo_count = FAKE_ALGOS,
        .bench_ctx = ctx,
        .align_quantum = 1,
    };
    const char *abi = getenv("FAKE_SHIM_ABI");
    if (abi != NULL)
        req.abi_version = atoi(abi);
    ucudnn_plan_reply reply = {.capacity = capacity, .micro_batches = out};
    int status = fn(&req, &reply);
    *count = reply.count;
    *time_ms = reply.time_ms;
    *workspace = reply.workspace_bytes;
    *deterministic = reply.deterministic;
    return status;
}
