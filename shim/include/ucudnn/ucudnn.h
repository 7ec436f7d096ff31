/*
 * ucudnn control API: exported by libucudnn.so (the preload library) next to the hooked cudnn* functions.
 *
 * Callers: the Python bridge (ucudnn._bridge, a cffi API-mode module) registers the planner and calls
 * ucudnn_benchmark from inside it; the embedded planner library does the same in C/C++ hosts; tests and
 * ucudnn-bench use the option/stats/plan calls. Every function is thread-safe and never aborts the host.
 *
 * Memory: every pointer passed in is owned by the caller and only borrowed for the duration of the call.
 */
#ifndef UCUDNN_UCUDNN_H
#define UCUDNN_UCUDNN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define UCUDNN_ABI_VERSION 4

/* Ops of a kernel key. Bias-activation forward is planned as a forward kernel (same algorithms). */
#define UCUDNN_OP_FWD 0
#define UCUDNN_OP_BWD_DATA 1
#define UCUDNN_OP_BWD_FILTER 2

/* One measured algorithm at one micro-batch size (same field layout as cuDNN's perf structs). */
typedef struct {
    int algo;
    int status;         /* cuDNN status of this algorithm; only 0 (success) rows are usable */
    float time_ms;
    size_t memory;      /* workspace bytes */
    int determinism;    /* 1 deterministic */
    int math_type;
    int reserved[3];
} ucudnn_perf;

/* One micro-batch of a plan: `batch` samples run with `algo` under `math_type`, in plan order. */
typedef struct {
    int batch;
    int algo;
    int math_type;
} ucudnn_micro_batch;

/* What the shim asks the planner on a plan-cache miss. */
typedef struct {
    int abi_version;               /* UCUDNN_ABI_VERSION */
    int op;                        /* UCUDNN_OP_* */
    const char *key;               /* canonical kernel key, N excluded (includes op, dtypes, shapes, ...) */
    const char *backend_id;        /* device name + real library version + backend, for the cache */
    int batch;                     /* N of the call */
    size_t workspace_limit_bytes;  /* the plan's workspace must not exceed this */
    const char *policy;            /* "undivided", "powerOfTwo" or "all" */
    int deterministic_only;        /* 1: every micro-batch's algorithm must be deterministic */
    int algo_count;                /* number of valid algorithm enum values of this op (0..algo_count-1) */
    void *bench_ctx;               /* opaque; pass to ucudnn_benchmark during this request only */
    int align_quantum;             /* every micro-batch but the last must be a multiple of this many samples (a
                                    * graph's declared tensor alignment holds only at such offsets); 1: any */
} ucudnn_plan_request;

/* The most micro-batches a plan may have: a plan of more calls than that is never worth their per-call cost, and
 * the shim's storage for a plan never grows with N. ucudnn's planner never proposes more. */
#define UCUDNN_MAX_MICRO_BATCHES 4096

/* The planner's answer: written into caller-provided storage (capacity: at least min(batch,
 * UCUDNN_MAX_MICRO_BATCHES) micro-batches). */
typedef struct {
    int count;                     /* micro-batches written to `micro_batches` */
    int capacity;                  /* set by the shim */
    ucudnn_micro_batch *micro_batches; /* set by the shim; the planner fills [0, count) */
    float time_ms;                 /* predicted plan time */
    size_t workspace_bytes;        /* max over micro-batches */
    int deterministic;             /* 1 if every micro-batch's algorithm is deterministic */
    int verified;                  /* 1: this plan won a check on real executions already (ucudnn_verdict) */
    ucudnn_micro_batch rival;      /* a plan of one call not yet checked: the single call at N it is to be checked
                                    * against (the runner-up Find timed close to it); batch 0: none */
    float rival_ms;                /* the rival's benchmark time */
} ucudnn_plan_reply;

/*
 * The planner callback. Returns 0 with a filled reply, 1 if no plan fits (the shim passes through),
 * UCUDNN_PLAN_INTERRUPTED when the program was interrupted while it planned (the shim passes this call through,
 * caches nothing and asks nothing more for it: the interrupt is the program's, raised when the call returns), or
 * another value on error (the shim passes through and counts it). The shim validates the reply before use.
 */
#define UCUDNN_PLAN_INTERRUPTED 3
typedef int (*ucudnn_planner_fn)(const ucudnn_plan_request *request, ucudnn_plan_reply *reply);

/* Register (or with NULL, unregister) the planner. Returns 0. */
int ucudnn_set_planner(ucudnn_planner_fn planner);

/*
 * Benchmark the request's kernel at N = batch: runs the real cudnnFind*Algorithm on descriptors cloned at
 * N = batch, all algorithms requested. Writes up to `capacity` rows, sets *count. Returns 0 or a cuDNN status.
 * Valid only while the request that carried `bench_ctx` is being planned.
 */
int ucudnn_benchmark(void *bench_ctx, int batch, ucudnn_perf *out, int capacity, int *count);

/*
 * The host time of one cuDNN call on the request's handle, in ms (*ms), measured with the smallest convolution
 * there is; the planner charges every micro-batch at least this. Valid only while the request that carried
 * `bench_ctx` is being planned. Returns 0 or a cuDNN status.
 */
int ucudnn_measure_call_cost(void *bench_ctx, double *ms);

/*
 * The outcome of checking a new micro-batched plan on real executions: its first executions alternated with the
 * undivided choice that fits the same workspace, each timed in place on the caller's data, and the faster was
 * kept. A plan of one call with a rival (ucudnn_plan_reply) is checked the same way against that rival, reported as
 * `undivided`. The shim reports it to the recorder (registered by the planner) so later runs skip the check.
 */
typedef struct {
    int abi_version;                     /* UCUDNN_ABI_VERSION */
    int op;                              /* UCUDNN_OP_* */
    const char *key;                     /* as in ucudnn_plan_request */
    const char *backend_id;
    int batch;
    size_t workspace_limit_bytes;        /* the workspace the checked executions had */
    const char *policy;
    int deterministic_only;
    int kept;                            /* 1: the checked plan stays; 0: the undivided choice (or rival) replaces it */
    int plan_count;
    const ucudnn_micro_batch *plan;      /* the micro-batched plan that was checked */
    ucudnn_micro_batch undivided;        /* the undivided choice it was checked against */
    double plan_ms;                      /* median measured time per execution */
    double undivided_ms;
    int samples;                         /* timed executions per side */
} ucudnn_verdict;

typedef void (*ucudnn_recorder_fn)(const ucudnn_verdict *verdict);

/* Register (or with NULL, unregister) the recorder of verdicts. Returns 0. */
int ucudnn_set_recorder(ucudnn_recorder_fn recorder);

/*
 * What the framework that calls cuDNN says of itself, where it can: the bytes its caching allocator holds without
 * using them on the calling thread's current device (it hands them out for a workspace before asking the device
 * for more; PyTorch: reserved - allocated), and whether it asks for deterministic algorithms (its heuristics
 * filter then drops nondeterministic engines).
 */
typedef struct {
    size_t held_bytes;
    int deterministic;
} ucudnn_framework_state;

/*
 * The framework source: 0 with *state filled, non-zero when it does not know (no such framework in the process).
 * The shim asks it where it needs what the framework can allocate (a graph heuristics query, a Get/Find listing
 * under the default limit), never per execution; the source may take the Python GIL.
 */
typedef int (*ucudnn_framework_fn)(ucudnn_framework_state *state);

/* Register (or with NULL, unregister) the framework source. Returns 0. */
int ucudnn_set_framework_source(ucudnn_framework_fn source);

/*
 * The framework's allocator, from which the shim may borrow scratch memory for its planning benchmarks where the
 * device has none left for its own allocation (UCUDNN_SCRATCH_FROM_FRAMEWORK=1): PyTorch's caching allocator holds
 * memory the device no longer shows as free. alloc returns `bytes` of device memory on the calling thread's current
 * device, or NULL; release gives back what alloc returned. Both may take the Python GIL. ucudnn's Python runtime
 * registers PyTorch's in a Python host; a C/C++ host may register its own (the planner it embeds leaves it).
 */
typedef void *(*ucudnn_framework_alloc_fn)(size_t bytes);
typedef void (*ucudnn_framework_free_fn)(void *ptr);

/* Register (or with NULLs, unregister) the framework's allocator. Returns 0. */
int ucudnn_set_framework_allocator(ucudnn_framework_alloc_fn alloc, ucudnn_framework_free_fn release);

/* Library version number (MAJOR*10000 + MINOR*100 + PATCH) of the preload library. */
int ucudnn_version(void);

/*
 * Set a configuration variable at run time, by its UCUDNN_* name (e.g. "UCUDNN_BATCH_SIZE_POLICY",
 * "UCUDNN_DEFAULT_WORKSPACE_LIMIT"), with the same parsing as the environment. Returns 0, or -1 if the name
 * is unknown or the value invalid (the setting is then unchanged and a message is logged).
 */
int ucudnn_set_option(const char *name, const char *value);

/*
 * Drop every cached in-memory plan (the SQLite cache is untouched). Safe at any time, from any thread, including
 * from inside the planner: the shim holds no lock while it calls the planner, and a plan another thread was
 * making meanwhile is used for its call but not cached (it may predate what the clear was for).
 */
void ucudnn_clear_plans(void);

/*
 * For the planner: it (re)divided UCUDNN_TOTAL_WORKSPACE_SIZE over the kernels seen so far (Workspace Division).
 * `kernels` divided, the budget, the sum of their shares (above the budget only when even the least-workspace
 * plans do not fit it) and the predicted total time. The stats show the latest one and count them ("divisions",
 * "division"). Returns 0, or -1 for a negative count or a time that is not finite and >= 0.
 */
int ucudnn_note_division(int kernels, size_t budget_bytes, size_t workspace_bytes, double time_ms);

/*
 * For the planner: of the batch sizes it needed for the kernels it planned, `read` were measured meanwhile by other
 * processes planning the same kernels on the same cache (data-parallel ranks, UCUDNN_BENCHMARK_WAIT) and read from
 * it, `taken_over` had been claimed by another process and were measured here after all (that process ended, or
 * held its claim past the bound), and the planner waited `waited_ms` for them. Added to the stats
 * ("shared_benchmarks", "benchmark_takeovers", "benchmark_wait_ms") and said in the exit summary. Returns 0, or -1
 * (nothing added) for a negative count or a time that is negative, not finite, or over 1e12 ms.
 */
int ucudnn_note_shared_benchmarks(int read, int taken_over, double waited_ms);

/*
 * Write a JSON object with the counters (calls, planned, micro_batches, passthrough, kernels, ..., divisions,
 * clears), the latest workspace division ("division": null or {kernels, budget_bytes, workspace_bytes, time_ms})
 * and "total_workspace_size" into buf.
 * Returns the length it needed (excluding the NUL); writes nothing past len.
 */
size_t ucudnn_stats_json(char *buf, size_t len);

/*
 * Write a JSON object describing the plan of the calling thread's most recent planned call (key, batch, op,
 * limit, policy, time_ms, workspace_bytes, micro_batches) into buf; "{}" if none. Returns the length needed.
 */
size_t ucudnn_last_plan_json(char *buf, size_t len);

/*
 * dlsym(handle, name) as if the preload library did not interpose dlsym: a hooked name looked up on cuDNN's handle
 * gives cuDNN's own function, not the hook (a plain dlsym now gives the hook, as frameworks that dlopen cuDNN get
 * it). For tools that compare with cuDNN alone in one process. `handle` must be a handle from dlopen, not
 * RTLD_DEFAULT or RTLD_NEXT (NULL then). dlvsym is never interposed either.
 */
void *ucudnn_dlsym_unhooked(void *handle, const char *name);

#ifdef __cplusplus
}
#endif

#endif /* UCUDNN_UCUDNN_H */
