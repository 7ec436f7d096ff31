/*
 * The C side of ucudnn._bridge: thin wrappers that reach libucudnn.so's control API (ucudnn.h) at run time.
 *
 * The bridge is imported in processes where the preload library is absent (`ucudnn plan`, the test suite), so
 * it must not link against it: each wrapper looks its target up with dlsym(RTLD_DEFAULT) and returns
 * UCUDNN_BRIDGE_NO_SHIM when the shim is not loaded. This header is also the bridge's cffi cdef (the build
 * drops the preprocessor lines), so it holds only declarations cffi can parse.
 *
 * Memory: every pointer is owned by the caller and borrowed for the duration of the call.
 */
#ifndef UCUDNN_BRIDGE_H
#define UCUDNN_BRIDGE_H

#include "ucudnn/ucudnn.h"

/* Returned by every wrapper when libucudnn.so's control API is not in the process. */
#define UCUDNN_BRIDGE_NO_SHIM -10000

/* 1 when libucudnn.so's control API is reachable from this process, else 0. */
int ucudnn_bridge_shim_loaded(void);

/* The package version this module was compiled for (checked against ucudnn.__version__ at import). */
const char *ucudnn_bridge_package_version(void);

/* UCUDNN_ABI_VERSION of the ucudnn.h this module was compiled against. */
int ucudnn_bridge_abi_version(void);

/* ucudnn_set_planner(planner); NULL unregisters. */
int ucudnn_bridge_set_planner(ucudnn_planner_fn planner);

/* The planner, the recorder and the framework source registered with the shim (deferred.h): they call
 * ucudnn/_runtime.py's callbacks, and raise in the program an interrupt that reached them (see
 * ucudnn_bridge_note_interrupt). */
int ucudnn_bridge_planner(const ucudnn_plan_request *request, ucudnn_plan_reply *reply);
void ucudnn_bridge_recorder(const ucudnn_verdict *verdict);
int ucudnn_bridge_framework(ucudnn_framework_state *state);
/* The framework's allocator (PyTorch's caching allocator, through ucudnn/_runtime.py): NULL while an interrupt waits
 * to be raised, or where the framework has none. */
void *ucudnn_bridge_alloc(size_t bytes);
void ucudnn_bridge_free(void *ptr);

/* Called by a callback that keeps an interrupt (KeyboardInterrupt, SystemExit) to raise later in the program: once
 * the callback has returned, its raise is scheduled in the main thread, and no callback enters Python until then. */
void ucudnn_bridge_note_interrupt(void);

/* ucudnn_benchmark(...): 0, a cuDNN status, or UCUDNN_BRIDGE_NO_SHIM. */
int ucudnn_bridge_benchmark(void *bench_ctx, int batch, ucudnn_perf *out, int capacity, int *count);

/* Stores ucudnn_version() in *version; returns 0 or UCUDNN_BRIDGE_NO_SHIM. */
int ucudnn_bridge_version(int *version);

/* ucudnn_set_option(name, value): 0, -1 (unknown name or bad value), or UCUDNN_BRIDGE_NO_SHIM. */
int ucudnn_bridge_set_option(const char *name, const char *value);

/* ucudnn_clear_plans(); returns 0 or UCUDNN_BRIDGE_NO_SHIM. */
int ucudnn_bridge_clear_plans(void);

/* ucudnn_note_division(...): 0, -1 (bad arguments), or UCUDNN_BRIDGE_NO_SHIM (also for a shim without it). */
int ucudnn_bridge_note_division(int kernels, size_t budget_bytes, size_t workspace_bytes, double time_ms);

/* ucudnn_note_shared_benchmarks(...): 0, -1 (bad arguments), or UCUDNN_BRIDGE_NO_SHIM (also for a shim without it). */
int ucudnn_bridge_note_shared_benchmarks(int read, int taken_over, double waited_ms);

/* ucudnn_set_recorder(recorder); NULL unregisters. 0 or UCUDNN_BRIDGE_NO_SHIM (also for a shim without it). */
int ucudnn_bridge_set_recorder(ucudnn_recorder_fn recorder);

/* ucudnn_set_framework_source(source); NULL unregisters. 0 or UCUDNN_BRIDGE_NO_SHIM (also for a shim without it). */
int ucudnn_bridge_set_framework_source(ucudnn_framework_fn source);

/* ucudnn_set_framework_allocator(alloc, release); NULLs unregister. 0 or UCUDNN_BRIDGE_NO_SHIM (also for a shim
 * without it). */
int ucudnn_bridge_set_framework_allocator(ucudnn_framework_alloc_fn alloc, ucudnn_framework_free_fn release);

/* ucudnn_measure_call_cost(...): 0, a cuDNN status, or UCUDNN_BRIDGE_NO_SHIM. */
int ucudnn_bridge_measure_call_cost(void *bench_ctx, double *ms);

/* ucudnn_stats_json / ucudnn_last_plan_json: *needed gets the length without the NUL; 0 or NO_SHIM. */
int ucudnn_bridge_stats_json(char *buf, size_t len, size_t *needed);
int ucudnn_bridge_last_plan_json(char *buf, size_t len, size_t *needed);

/* ucudnn_debug_graph_json(plan, ...) of the shim's debug header: what it resolved for a graph-API execution plan,
 * "{}" for one it does not know; *needed as above. 0 or UCUDNN_BRIDGE_NO_SHIM. */
int ucudnn_bridge_graph_json(void *plan, char *buf, size_t len, size_t *needed);

#endif /* UCUDNN_BRIDGE_H */
