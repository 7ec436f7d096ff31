/*
 * The ucudnn_* control API (include/ucudnn/ucudnn.h): each function a door to the layer that does the work.
 */
#include "uc_internal.h"

UC_EXPORT int ucudnn_benchmark(void *bench_ctx, int batch, ucudnn_perf *out, int capacity, int *count)
{
    return uc_bench_run(bench_ctx, batch, out, capacity, count);
}

UC_EXPORT int ucudnn_measure_call_cost(void *bench_ctx, double *ms)
{
    return uc_bench_call_cost(bench_ctx, ms);
}
