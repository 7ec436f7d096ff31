/*
 * Run-time links from ucudnn._bridge to libucudnn.so's control API (see ucudnn_bridge.h).
 *
 * Symbols are looked up in the global scope, where LD_PRELOAD puts the shim. A successful lookup is kept (the
 * shim is never unloaded); a failed one is retried on the next call, because nothing is cached for a process
 * that loads the shim later with RTLD_GLOBAL.
 */
#include "ucudnn_bridge.h"

#include <dlfcn.h>
#include <stdatomic.h>

#ifndef UCUDNN_PACKAGE_VERSION
#error "the build must define UCUDNN_PACKAGE_VERSION (the Python package version)"
#endif

typedef int (*set_planner_fn)(ucudnn_planner_fn);
typedef int (*benchmark_fn)(void *, int, ucudnn_perf *, int, int *);
typedef int (*version_fn)(void);
typedef int (*set_option_fn)(const char *, const char *);
typedef void (*clear_plans_fn)(void);
typedef size_t (*json_fn)(char *, size_t);
typedef int (*note_division_fn)(int, size_t, size_t, double);
typedef int (*note_shared_fn)(int, int, double);
typedef int (*set_recorder_fn)(ucudnn_recorder_fn);
typedef int (*call_cost_fn)(void *, double *);
typedef int (*set_framework_fn)(ucudnn_framework_fn);
typedef size_t (*graph_json_fn)(void *, char *, size_t);
typedef int (*set_allocator_fn)(ucudnn_framework_alloc_fn, ucudnn_framework_free_fn);

static void *lookup(_Atomic(void *) *slot, const char *name)
{
    void *fn = atomic_load_explicit(slot, memory_order_acquire);
    if (fn == NULL) {
        fn = dlsym(RTLD_DEFAULT, name);
        if (fn != NULL)
            atomic_store_explicit(slot, fn, memory_order_release);
    }
    return fn;
}

#define SHIM_FN(type, name)                                                                                    \
    static type shim_##name(void)                                                                              \
    {                                                                                                          \
        static _Atomic(void *) slot;                                                                           \
        return (type)lookup(&slot, "ucudnn_" #name);                                                           \
    }

SHIM_FN(set_planner_fn, set_planner)
SHIM_FN(benchmark_fn, benchmark)
SHIM_FN(version_fn, version)
SHIM_FN(set_option_fn, set_option)
SHIM_FN(clear_plans_fn, clear_plans)
SHIM_FN(json_fn, stats_json)
SHIM_FN(json_fn, last_plan_json)
SHIM_FN(note_division_fn, note_division)
SHIM_FN(note_shared_fn, note_shared_benchmarks)
SHIM_FN(set_recorder_fn, set_recorder)
SHIM_FN(call_cost_fn, measure_call_cost)
SHIM_FN(set_framework_fn, set_framework_source)
SHIM_FN(graph_json_fn, debug_graph_json)
SHIM_FN(set_allocator_fn, set_framework_allocator)

int ucudnn_bridge_shim_loaded(void)
{
    /* The planner hooks are the part the bridge cannot work without. */
    return shim_set_planner() != NULL && shim_benchmark() != NULL;
}

const char *ucudnn_bridge_package_version(void)
{
    return UCUDNN_PACKAGE_VERSION;
}

int ucudnn_bridge_abi_version(void)
{
    return UCUDNN_ABI_VERSION;
}

int ucudnn_bridge_set_planner(ucudnn_planner_fn planner)
{
    set_planner_fn fn = shim_set_planner();
    return fn ? fn(planner) : UCUDNN_BRIDGE_NO_SHIM;
}

int ucudnn_bridge_benchmark(void *bench_ctx, int batch, ucudnn_perf *out, int capacity, int *count)
{
    benchmark_fn fn = shim_benchmark();
    if (fn == NULL) {
        if (count != NULL)
            *count = 0;
        return UCUDNN_BRIDGE_NO_SHIM;
    }
    return fn(bench_ctx, batch, out, capacity, count);
}

int ucudnn_bridge_version(int *version)
{
    version_fn fn = shim_version();
    if (fn == NULL)
        return UCUDNN_BRIDGE_NO_SHIM;
    *version = fn();
    return 0;
}

int ucudnn_bridge_set_option(const char *name, const char *value)
{
    set_option_fn fn = shim_set_option();
    return fn ? fn(name, value) : UCUDNN_BRIDGE_NO_SHIM;
}

int ucudnn_bridge_clear_plans(void)
{
    clear_plans_fn fn = shim_clear_plans();
    if (fn == NULL)
        return UCUDNN_BRIDGE_NO_SHIM;
    fn();
    return 0;
}

int ucudnn_bridge_note_division(int kernels, size_t budget_bytes, size_t workspace_bytes, double time_ms)
{
    note_division_fn fn = shim_note_division();
    return fn ? fn(kernels, budget_bytes, workspace_bytes, time_ms) : UCUDNN_BRIDGE_NO_SHIM;
}

int ucudnn_bridge_note_shared_benchmarks(int read, int taken_over, double waited_ms)
{
    note_shared_fn fn = shim_note_shared_benchmarks();
    return fn ? fn(read, taken_over, waited_ms) : UCUDNN_BRIDGE_NO_SHIM;
}

static int json_call(json_fn fn, char *buf, size_t len, size_t *needed)
{
    if (fn == NULL) {
        *needed = 0;
        return UCUDNN_BRIDGE_NO_SHIM;
    }
    *needed = fn(buf, len);
    return 0;
}

int ucudnn_bridge_stats_json(char *buf, size_t len, size_t *needed)
{
    return json_call(shim_stats_json(), buf, len, needed);
}

int ucudnn_bridge_last_plan_json(char *buf, size_t len, size_t *needed)
{
    return json_call(shim_last_plan_json(), buf, len, needed);
}

int ucudnn_bridge_graph_json(void *plan, char *buf, size_t len, size_t *needed)
{
    graph_json_fn fn = shim_debug_graph_json();
    if (fn == NULL) {
        *needed = 0;
        return UCUDNN_BRIDGE_NO_SHIM;
    }
    *needed = fn(plan, buf, len);
    return 0;
}

int ucudnn_bridge_set_recorder(ucudnn_recorder_fn recorder)
{
    set_recorder_fn fn = shim_set_recorder();
    return fn ? fn(recorder) : UCUDNN_BRIDGE_NO_SHIM;
}

int ucudnn_bridge_measure_call_cost(void *bench_ctx, double *ms)
{
    call_cost_fn fn = shim_measure_call_cost();
    return fn ? fn(bench_ctx, ms) : UCUDNN_BRIDGE_NO_SHIM;
}

int ucudnn_bridge_set_framework_source(ucudnn_framework_fn source)
{
    set_framework_fn fn = shim_set_framework_source();
    return fn ? fn(source) : UCUDNN_BRIDGE_NO_SHIM;
}

int ucudnn_bridge_set_framework_allocator(ucudnn_framework_alloc_fn alloc, ucudnn_framework_free_fn release)
{
    set_allocator_fn fn = shim_set_framework_allocator();
    return fn ? fn(alloc, release) : UCUDNN_BRIDGE_NO_SHIM;
}
