/*
 * Every ucudnn_* function the preload library exports: the control API (include/ucudnn/ucudnn.h) and the test-only
 * exports (ucudnn_debug.h), each a door to the layer that does the work.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "uc_control.h"
#include "ucudnn_debug.h"

#ifndef UCUDNN_VERSION_NUMBER
#error "UCUDNN_VERSION_NUMBER comes from the build (shim/build/preload.py)"
#endif

/* `text` (NULL: empty) into buf as a NUL-terminated string cut to len; returns the length it needed. */
static size_t copy_out(const char *text, char *buf, size_t len)
{
    size_t need = text ? strlen(text) : 0;
    if (buf && len) {
        size_t n = need < len ? need : len - 1;
        if (n)
            memcpy(buf, text, n);
        buf[n] = '\0';
    }
    return need;
}

/* ---- the planner's side ---- */

UC_EXPORT int ucudnn_set_planner(ucudnn_planner_fn planner)
{
    if (uc_planner_set(planner) != planner)
        uc_cache_clear(); /* plans of another planner, or of the fallback, must not outlive the change */
    return 0;
}

UC_EXPORT int ucudnn_benchmark(void *bench_ctx, int batch, ucudnn_perf *out, int capacity, int *count)
{
    return uc_bench_run(bench_ctx, batch, out, capacity, count);
}

UC_EXPORT int ucudnn_measure_call_cost(void *bench_ctx, double *ms)
{
    return uc_bench_call_cost(bench_ctx, ms);
}

UC_EXPORT int ucudnn_set_recorder(ucudnn_recorder_fn recorder)
{
    uc_recorder_set(recorder);
    return 0;
}

UC_EXPORT int ucudnn_set_framework_source(ucudnn_framework_fn source)
{
    uc_framework_source_set(source);
    return 0;
}

UC_EXPORT int ucudnn_set_framework_allocator(ucudnn_framework_alloc_fn alloc, ucudnn_framework_free_fn release)
{
    uc_framework_allocator_set(alloc, release);
    return 0;
}

UC_EXPORT int ucudnn_note_division(int kernels, size_t budget_bytes, size_t workspace_bytes, double time_ms)
{
    return uc_report_division(kernels, budget_bytes, workspace_bytes, time_ms);
}

UC_EXPORT int ucudnn_note_shared_benchmarks(int read, int taken_over, double waited_ms)
{
    return uc_report_shared_benchmarks(read, taken_over, waited_ms);
}

/* ---- the program's side ---- */

UC_EXPORT int ucudnn_version(void)
{
    return UCUDNN_VERSION_NUMBER;
}

UC_EXPORT int ucudnn_set_option(const char *name, const char *value)
{
    return uc_cfg_set(name, value);
}

UC_EXPORT void ucudnn_clear_plans(void)
{
    UC_COUNT(clears, 1);
    uc_cache_clear();
}

UC_EXPORT size_t ucudnn_stats_json(char *buf, size_t len)
{
    (void)uc_real(); /* asked for: the real library's version and path are part of the answer */
    char *text = uc_stats_text();
    size_t need = copy_out(text ? text : "{}", buf, len);
    free(text);
    return need;
}

UC_EXPORT size_t ucudnn_last_plan_json(char *buf, size_t len)
{
    const uc_plan *p = uc_last_plan();
    return copy_out(p && p->json ? p->json : "{}", buf, len);
}

UC_EXPORT void *ucudnn_dlsym_unhooked(void *handle, const char *name)
{
    if (handle == RTLD_DEFAULT || handle == RTLD_NEXT || !name)
        return NULL; /* relative to the caller, whom a C function cannot pass on */
    return uc_dlsym(handle, name);
}

/* ---- test-only exports ---- */

UC_EXPORT size_t ucudnn_debug_kernel_key(int op, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                         cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, char *buf,
                                         size_t len)
{
    return uc_kernel_key_of(op, x, w, conv, y, buf, len);
}

UC_EXPORT int ucudnn_debug_clone_tensor(cudnnTensorDescriptor_t src, int batch, cudnnTensorDescriptor_t *out)
{
    return uc_tensor_clone_of(src, batch, out);
}

UC_EXPORT size_t ucudnn_debug_graph_json(void *plan, char *buf, size_t len)
{
    char *text = uc_graph_debug_json(plan);
    size_t need = copy_out(text ? text : "{}", buf, len);
    free(text);
    return need;
}

UC_EXPORT size_t ucudnn_debug_graph_records(void)
{
    return uc_grec_count();
}

UC_EXPORT int ucudnn_debug_dlsym_early(void)
{
    return uc_dlsym_early();
}

UC_EXPORT size_t ucudnn_debug_framework_memory(void)
{
    return uc_framework_memory();
}
