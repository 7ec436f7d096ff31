/*
 * The core of the preload library (libucudnn.so): what both of its paths, the legacy hooks (legacy/) and the
 * graph-API hooks (graph/), stand on. Nothing here knows either path.
 *
 * Files, bottom up: uc_log.c (the log, the counters, the string builder), uc_config.c (UCUDNN_* variables),
 * uc_lookup.c (the shim's own symbol lookups) and uc_identity.c (a library's build identity), uc_resolve.c (the
 * real library, statuses, the per-thread guard), uc_driver.c (the CUDA driver API, where the process has it),
 * uc_which_device.c (the thread's device: ordinal, name, model), uc_device.c (free memory, clocks, the per-call cost),
 * uc_planner_source.c (finding the planner), uc_memory.c (what the framework can allocate, the planning limit),
 * uc_trial.c (the rule that decides a check on real executions), uc_store.c (plans stored in the SQLite cache),
 * uc_planner.c (asking the planner, its benchmarks, its recorder).
 */
#ifndef UC_CORE_H
#define UC_CORE_H

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ucudnn/cudnn_abi.h"
#include "ucudnn/ucudnn.h"

#define UC_EXPORT __attribute__((visibility("default")))

/* Code that runs before AddressSanitizer's runtime is set up: its interceptors look their functions up with
 * dlsym(RTLD_NEXT), which is ours. Left uninstrumented in the address build (tests only): instrumented, it would
 * touch shadow memory that is not mapped yet. Nothing in other builds. */
#if defined(__SANITIZE_ADDRESS__)
#define UC_BEFORE_ASAN __attribute__((no_sanitize_address))
#else
#define UC_BEFORE_ASAN
#endif

/* Rows asked of the real Find/Get: cuDNN may list an algorithm once per math type, so well over the enum count. */
#define UC_MAX_ROWS 64

/* ---- logging, counters, the string builder (uc_log.c) ---- */

enum { UC_LOG_ERROR = 0, UC_LOG_WARNING = 1, UC_LOG_INFO = 2, UC_LOG_DEBUG = 3 };
void uc_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An untagged line shown unless UCUDNN_LOG_LEVEL=error (the exit summary). */
void uc_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* UCUDNN_LOG_LEVEL as the configuration parsed it (uc_config.c). */
void uc_log_set_level(int level);

/* The counters, one per entry of uc_stats.def (the one list: the stats JSON and the docs' table come from it too). */
typedef struct {
#define UC_STAT(name, doc) atomic_ullong name;
#define UC_STAT_MS(stem, doc) atomic_ullong stem##_ns;
#include "uc_stats.def"
#undef UC_STAT
#undef UC_STAT_MS
} uc_stats;
#define UC_COUNT_MAX(field, v)                                                                                   \
    do {                                                                                                         \
        unsigned long long v_ = (unsigned long long)(v), o_ = atomic_load(&uc_stat.field);                     \
        while (v_ > o_ && !atomic_compare_exchange_weak(&uc_stat.field, &o_, v_)) {                            \
        }                                                                                                        \
    } while (0)
extern uc_stats uc_stat;
#define UC_COUNT(field, v) atomic_fetch_add_explicit(&uc_stat.field, (unsigned long long)(v), memory_order_relaxed)

typedef struct {
    char *buf;
    size_t len, cap;
    int failed;
} uc_sb;
void uc_sb_printf(uc_sb *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void uc_sb_json_string(uc_sb *sb, const char *s);
/* The built string (caller frees), or NULL if an allocation failed. */
char *uc_sb_take(uc_sb *sb);

/* ---- configuration (uc_config.c; the table is generated from ucudnn/config.py) ---- */

/* UCUDNN_DISABLE, or a bad UCUDNN_* value in the environment (that also disables). */
int uc_cfg_disabled(void);
/* UCUDNN_DEFAULT_WORKSPACE_LIMIT: SIZE_MAX when `auto` (uc_cfg_limit_auto). */
size_t uc_cfg_default_limit(void);
int uc_cfg_limit_auto(void);
/* Stored for `auto` (no size parses to it: sizes are checked against it). */
#define UC_LIMIT_AUTO ULLONG_MAX
/* "No limit" as the planner and the SQLite cache see it (signed 64-bit there). */
#define UC_UNLIMITED ((size_t)INT64_MAX)
int uc_cfg_verify_samples(void);   /* UCUDNN_VERIFY_SAMPLES */
int uc_cfg_deterministic(void);    /* UCUDNN_DETERMINISTIC: every request asks for determinism */
double uc_cfg_verify_margin(void); /* UCUDNN_VERIFY_MARGIN */
size_t uc_cfg_host_device_memory(void); /* UCUDNN_HOST_DEVICE_MEMORY, 0 when unset */
int uc_cfg_host_stream_capture(void);   /* UCUDNN_HOST_STREAM_CAPTURE: off the GPU, every stream is captured */
size_t uc_cfg_host_find_memory(void);   /* UCUDNN_HOST_FIND_MEMORY: off the GPU, the scratch bound; 0: none */
int uc_cfg_host_driver(void);           /* UCUDNN_HOST_DRIVER: a driver stands in for a GPU */
int uc_cfg_scratch_from_framework(void); /* UCUDNN_SCRATCH_FROM_FRAMEWORK */
size_t uc_cfg_run_pid(void);            /* UCUDNN_RUN_PID (set by `ucudnn run`), 0 when unset */
/* UCUDNN_TOTAL_WORKSPACE_SIZE: the network-wide budget of Workspace Division, 0 when off. */
size_t uc_cfg_total_workspace(void);
/* The cap on the caller's workspace at execution and Find*Ex: the budget under Workspace Division, an explicit
 * per-kernel limit, else (auto) UC_UNLIMITED -- the caller's workspace is the limit. */
size_t uc_cfg_exec_cap(void);
int uc_cfg_policy(void);                 /* index into the policy choices */
const char *uc_cfg_policy_name(int policy);
int uc_cfg_policy_undivided(void);       /* the index of `undivided` */
/* Copy a PATH/STRING variable's current value into buf (NUL-terminated); returns its length. */
size_t uc_cfg_string(int var, char *buf, size_t len);
int uc_cfg_set(const char *name, const char *value); /* ucudnn_set_option */

/* ---- the shim's own lookups (uc_lookup.c) ---- */

/*
 * The real dlsym (libc's, found with dlvsym(RTLD_NEXT)). Every lookup the shim makes itself goes through it: the
 * exported dlsym would hand the shim its own hooks back. Declared below with an error attribute, so a plain
 * dlsym call in the shim does not compile (uc_lookup.c, which finds libc's, is the one exception).
 */
typedef void *(*uc_dlsym_fn)(void *, const char *);
void *uc_dlsym(void *handle, const char *name);
/* libc's dlsym itself (NULL in a libc without one). */
uc_dlsym_fn uc_dlsym_libc(void);
#ifndef UC_DLSYM_IMPL
void *dlsym(void *handle, const char *name) __attribute__((error("the shim looks symbols up with uc_dlsym")));
#endif
/* A real function an intercepted dlsym found in a libcudnn.so* library (the first recorded), else NULL: where
 * the resolver learns which library a framework that dlopens cuDNN loaded. */
void uc_dlsym_record(void *sym);
void *uc_dlsym_recorded(void);

/* ---- a locked set of live buffers (uc_ptrset.c) ---- */

/* Buffers handed out at planning time that must be given back by where they came from: a fixed table scanned under
 * its own lock (a handful are live at once), each buffer with the function that gives it back (or NULL). */
typedef void (*uc_release_fn)(void *);
typedef struct {
    void *p;
    uc_release_fn release;
} uc_ptrslot;
typedef struct {
    pthread_mutex_t lock;
    int cap;
    uc_ptrslot *slots;
} uc_ptrset;
#define UC_PTRSET(name, capacity)                                                                                   \
    static uc_ptrslot name##_slots[capacity];                                                                       \
    static uc_ptrset name = {PTHREAD_MUTEX_INITIALIZER, capacity, name##_slots}
/* Remember p (not NULL) with its release function: 0, or -1 when the set is full. */
int uc_ptrset_add(uc_ptrset *s, void *p, uc_release_fn release);
/* Forget p: 1 if it was in the set (*release, where asked, its function), else 0. */
int uc_ptrset_take(uc_ptrset *s, void *p, uc_release_fn *release);

/* ---- the real library (uc_resolve.c, uc_identity.c) ---- */

typedef struct {
#define UC_FIELD(ret, name, params, args) ret(*name) params;
#define UC_EXEC UC_FIELD
#define UC_QUERY UC_FIELD
#define UC_BACKEND UC_FIELD
#define UC_REAL UC_FIELD
#define UC_OPT UC_FIELD
#include "hooks.def"
#undef UC_EXEC
#undef UC_QUERY
#undef UC_BACKEND
#undef UC_REAL
#undef UC_OPT
#undef UC_FIELD
    int found;        /* a real library was found (cudnnConvolutionForward resolved) */
    int descriptors;  /* every UC_REAL function resolved: keys can be read and descriptors cloned */
    int major;        /* cuDNN major version of the real library (9 if unknown) */
    size_t version;   /* cudnnGetVersion() of the real library, 0 if unknown */
    char path[PATH_MAX]; /* file of the real library, "" if unknown */
    char build[48];      /* its identity beside the version (uc_library_build), not its path */
} uc_real_table;

/* The identity of the loaded library file `path` for cache keys: "id:<GNU build-id in hex>" read from its loaded
 * image, else "size:<bytes of the file>", else "unknown". Copies of one library at different paths (a new
 * virtual environment, a reinstall) get the same identity. */
void uc_library_build(const char *path, char *out, size_t len);

/* The real functions, resolved at the first call and, while no real library is found, again at later calls (a
 * framework may load cuDNN after its first hooked call: TensorFlow's stubs); once found, never again. Never
 * NULL; fields may be. */
const uc_real_table *uc_real(void);
/* The table when something has already looked the real library up, else NULL (nothing is looked up). */
const uc_real_table *uc_real_if_resolved(void);
/* uc_real() without waiting: NULL while another thread is resolving (the intercepted dlsym never blocks on it). */
const uc_real_table *uc_real_try(void);
/* The table if a real library has been found, else NULL (nothing is looked up). */
const uc_real_table *uc_real_found(void);
/* Say (once) that a call fails for want of a real library, and where it was looked for. */
void uc_real_missing(void);
/* The hooked function `name`'s definition as its caller would have bound it without the preload library (the
 * calling object's own or its dependencies'), when the real library is not found: TensorFlow's exported stubs,
 * which load cuDNN themselves. NULL if none, or if it is ours. `caller`: a return address into the caller. */
void *uc_callers_own(const char *name, const void *caller);

/*
 * Per-thread guard: > 0 while this thread is inside the shim's own calls into the real library or the planner.
 * A hooked entry reached with the guard up goes straight to the real function, so the shim never intercepts
 * itself (the real library calling its own exports through the PLT, a planner calling cuDNN).
 * Initial-exec TLS: no __tls_get_addr on the hot path and no DT_NEEDED on the dynamic loader; 4 bytes fit the
 * static TLS surplus glibc keeps for libraries that are dlopened rather than preloaded.
 */
extern __thread int uc_guard __attribute__((tls_model("initial-exec")));

enum uc_status_kind {
    UC_ST_NOT_INITIALIZED,
    UC_ST_BAD_PARAM,
    UC_ST_BAD_ATTRIBUTE_TYPE,
    UC_ST_BAD_NULL_POINTER,
    UC_ST_NOT_SUPPORTED,
    UC_ST_INTERNAL,
    UC_ST_ALLOC
};
/* Destroy a tensor descriptor of the real library's (NULL: nothing). */
void uc_tensor_destroy(cudnnTensorDescriptor_t desc);
/* A status the shim produces itself, in the numbering of the library it forwards to (cuDNN 8 or 9). */
int uc_status(enum uc_status_kind kind);
/* 1 if `status` says the call was refused for its arguments (bad param / not supported): nothing ran. */
int uc_status_refused(int status);
/* Whether `status` says memory could not be allocated (cuDNN 8's ALLOC_FAILED; cuDNN 9's host or device
 * allocation failures), in the numbering of the library forwarded to. */
int uc_status_alloc_failed(int status);

/* ---- the device: free memory, clocks, the per-call cost (uc_device.c) ---- */

/* The CUDA driver API, where the process has loaded it (uc_driver.c, the one binding): NULL without it. `again`:
 * look again where an earlier look found nothing (a miss costs tens of microseconds: never on a path a GPU process
 * takes per call once CUDA is up). A function the driver lacks is NULL. */
typedef struct {
    int (*ctx_get_current)(void **);
    int (*ctx_get_device)(int *);
    int (*device_get_name)(char *, int, int);
    int (*ctx_sync)(void);
    int (*mem_get_info)(size_t *, size_t *);
    int (*mem_alloc)(unsigned long long *, size_t);
    int (*mem_free)(unsigned long long);
    int (*event_create)(void **, unsigned);
    int (*event_record)(void *, void *);
    int (*event_query)(void *);
    int (*event_elapsed)(float *, void *, void *);
    int (*event_destroy)(void *);
    int (*stream_is_capturing)(void *, int *);
} uc_driver_api;
const uc_driver_api *uc_driver(int again);

/* Which device this thread works on (uc_which_device.c): its ordinal (-1 without a driver or context); its name
 * ("host" without a driver); its class, one per device name (0 without a driver), cheap enough for every call. */
int uc_current_device(void);
void uc_device_name(char *buf, size_t len);
int uc_device_class(void);

/* Free device memory (driver API, *gpu = 1), else UCUDNN_HOST_DEVICE_MEMORY (*gpu = 0), else 0 (unknown). */
size_t uc_device_free_memory(int *gpu);
enum { UC_CLOCK_WALL = 0, UC_CLOCK_MODEL = 1, UC_CLOCK_CUDA = 2, UC_CLOCK_NONE = 3 /* a device out of reach */ };
int uc_clock_kind(void);
/* Scratch memory for benchmarks at planning time: device memory on a GPU, zeroed host memory on the host
 * backend; NULL when short. uc_device_sync waits for the device (planning time only). */
void *uc_scratch_alloc(size_t bytes);
void uc_scratch_free(void *p);
void uc_device_sync(void);
/* 1 when the handle's stream is being captured into a CUDA graph (see uc_device.c). */
int uc_stream_capturing(cudnnHandle_t handle);
/* One timed stretch of calls on a handle's stream. */
typedef struct {
    int kind, done;
    double t0, ms;
    void *ev0, *ev1; /* CUDA events (UC_CLOCK_CUDA) */
    cudaStream_t stream;
} uc_mark;
/* Start and stop a mark around the calls; 0, or -1 when the clock cannot be used (nothing to drop then). */
int uc_mark_start(uc_mark *m, cudnnHandle_t handle);
int uc_mark_stop(uc_mark *m);
/* 1 with *ms when the stretch has completed, 0 not yet (its events are still pending), -1 failed. Never waits. */
int uc_mark_read(uc_mark *m, double *ms);
void uc_mark_drop(uc_mark *m);
/* The host cost of one call, measured on the handle (see uc_device.c). 0 or a cuDNN status. */
int uc_probe_call_cost(cudnnHandle_t handle, double *ms);

/* ---- what the framework can allocate (uc_memory.c) ---- */

/* What the framework can allocate for a workspace (uc_memory.c): the free device memory plus what the framework's
 * caching allocator holds unused (the registered framework source: PyTorch's reserved - allocated), rounded
 * down to 64 MiB on a GPU; 0 when unknown. The one rule of the legacy path's Get/Find bound and the graph path's
 * offers. */
size_t uc_framework_memory(void);
/* ucudnn_set_framework_source. */
void uc_framework_source_set(ucudnn_framework_fn source);
/* ucudnn_set_framework_allocator; and scratch borrowed from it (NULL: none registered, or it had none) and given
 * back (1: p was borrowed, and is returned; 0: not the framework's). */
void uc_framework_allocator_set(ucudnn_framework_alloc_fn alloc, ucudnn_framework_free_fn release);
void *uc_framework_scratch_alloc(size_t bytes);
int uc_framework_scratch_free(void *p);
/* The same, and in *deterministic whether the framework (or UCUDNN_DETERMINISTIC) asks for determinism. */
size_t uc_framework_state(int *deterministic);
/*
 * The limit a kernel is planned under when the caller gives none (Get/Find, workspace queries): the whole budget
 * under Workspace Division (the planner then caps each kernel at its share of it), an explicit per-kernel limit,
 * else (auto) what the framework can allocate when known (uc_framework_memory), else UC_UNLIMITED.
 */
size_t uc_planning_limit(void);

/* ---- checking a new plan on real executions: the rule (uc_trial.c) ---- */

/* A trial: the first 2 * (S + 1) executions alternate between side a (a new plan, even slots) and side b (the
 * undivided choice, odd slots), S = UCUDNN_VERIFY_SAMPLES; each side's first execution warms up. Pairs that
 * disagree add 2 * S slots once (uc_trial.c). Not locked: its owner serialises the calls. */
#define UC_TRIAL_MAX_SAMPLES 32
#define UC_TRIAL_MAX_SLOTS (2 * (UC_TRIAL_MAX_SAMPLES + 1))
typedef struct {
    int slots, issued, settled, samples, extended;
    int state[UC_TRIAL_MAX_SLOTS];
    uc_mark marks[UC_TRIAL_MAX_SLOTS];
    double ms[UC_TRIAL_MAX_SLOTS];
} uc_trial;
/* 0, or -1 when checks are off (UCUDNN_VERIFY_SAMPLES=0). */
int uc_trial_init(uc_trial *t);
/* The median of n >= 1 values (sorts xs in place). */
double uc_median(double *xs, int n);
void uc_trial_drop(uc_trial *t);
/* The slot this execution fills (>= 0: time it, then uc_trial_end) and its side (*side_b), or -1: untimed. */
int uc_trial_begin(uc_trial *t, int *side_b);
/* The execution of `slot` ended: `m` its stopped mark (NULL if it could not be timed), ok 0 if it failed. */
void uc_trial_end(uc_trial *t, int slot, const uc_mark *m, int ok);
/* 1 (once) when every timed execution has been read and the pairs settle it: the medians, the samples per side
 * and whether side a won (see uc_trial.c); 0 while executions are pending or the trial was just extended. Never
 * waits. */
int uc_trial_verdict(uc_trial *t, double *a_ms, double *b_ms, int *samples, int *kept);

/* ---- asking the planner (uc_planner_source.c finds it, uc_planner.c asks it) ---- */

/* The planner to use now (finding it at the first call). While another thread is still looking, waits for it (at
 * most 60 s), except where this thread may hold the Python GIL (that thread may want it): then NULL with
 * *transient set, and the caller passes the call through uncached (counted as startup_passthrough). */
ucudnn_planner_fn uc_get_planner(int *transient);
/* ucudnn_set_planner (the old planner returned) and ucudnn_set_recorder. */
ucudnn_planner_fn uc_planner_set(ucudnn_planner_fn planner);
void uc_recorder_set(ucudnn_recorder_fn recorder);
/* 1 when a Python interpreter runs in this process (a Python host, or the embedded planner's once started). */
int uc_python_host(void);
/* The recorder of verdicts the planner registered (ucudnn_set_recorder), or NULL. */
ucudnn_recorder_fn uc_get_recorder(void);

/* device name + real library version + backend, as the planner's requests carry it */
#define UC_BACKEND_ID_MAX (PATH_MAX + 300)
void uc_backend_id(char *buf, size_t len);
/* A request with the storage its backend id points to (never copied: req.backend_id points into it). */
typedef struct {
    ucudnn_plan_request req;
    char backend[UC_BACKEND_ID_MAX];
} uc_request;
/* Fill a request for kernel `key` (UCUDNN_OP_* op) at N = batch under `limit`; bench_ctx is set when asked. */
void uc_request_init(uc_request *r, int op, const char *key, int batch, size_t limit, int policy, int det,
                     int algo_count);
/* What a request is about, for the benchmarks the planner runs meanwhile: a legacy call or a graph-API
 * convolution, its handle (the call-cost probe), its N, and its path's benchmark at `batch` samples under the
 * request's workspace limit (what needs more is not timed where the path can tell beforehand; 0 or a status, rows
 * in `rows`, at most `cap`). */
typedef struct {
    const void *subject;
    int (*bench)(const void *subject, int batch, size_t limit, ucudnn_perf *rows, int cap, int *n);
    cudnnHandle_t handle;
    int64_t batch;
} uc_bench_subject;
/* Call `planner` on r (its bench_ctx set to a fresh token), with `subject` benchmarkable meanwhile: the planner's
 * return code (see ucudnn_planner_fn). Counted as planner_calls. */
int uc_planner_ask(ucudnn_planner_fn planner, const uc_bench_subject *subject, uc_request *r, ucudnn_plan_reply *rep);
/* ucudnn_benchmark and ucudnn_measure_call_cost: the live request of token `ctx` benchmarked. */
int uc_bench_run(void *ctx, int batch, ucudnn_perf *out, int capacity, int *count);
/* Whether a benchmark (status st, rows) lacked memory it needed within `limit`: for its tensors (it failed so), or
 * for an algorithm's or engine's workspace that fits the limit (a row refused so; one over the limit is not short).
 * uc_bench_run counts those as benchmarks_short_of_memory. */
int uc_bench_short(int st, const ucudnn_perf *rows, int n, size_t limit);
int uc_bench_call_cost(void *ctx, double *ms);

/* Report the outcome of a check (backend_id filled here) to the planner's recorder, which stores it in the
 * SQLite cache so later runs skip the check. */
void uc_record_verdict(ucudnn_verdict *v);

/* ---- plans stored in the SQLite cache (uc_store.c) ---- */

/*
 * The plan ucudnn/cache.py stored for this request (same key, backend id, N and policy; the same determinism,
 * else a deterministic plan for a request that does not ask for one): the row at exactly its limit, else the
 * one planned under the largest smaller limit whose workspace fits this one.
 * Read-only; libsqlite3 is dlopened at the first call. Returns 0 with rep's count, micro_batches, time_ms and
 * workspace_bytes filled (deterministic 0: not stored; the caller asks the real library), 1 if nothing is stored,
 * 2 if the cache cannot be read (no libsqlite3, no file, not a ucudnn cache: said once), 3 if the row is
 * malformed (`why` says how). `where` gets the cache's path ("" if none). Nothing here is validated against the
 * real library: the caller validates the reply like a planner's.
 */
int uc_store_lookup(const ucudnn_plan_request *req, ucudnn_plan_reply *rep, char *where, size_t where_len,
                    char *why, size_t why_len);

/*
 * The latest check stored in the SQLite cache (the verdicts table ucudnn/cache.py writes) of exactly this plan
 * against exactly this undivided choice, for this kernel key, backend id, N and determinism, whatever limit or
 * policy it was planned under: a check measures these two executions, nothing else. 0 with *kept (1: the plan
 * won), 1 none stored, 2 the cache cannot be read. Read-only, like uc_store_lookup.
 */
int uc_store_verdict(const char *key, const char *backend_id, int batch, int deterministic_only,
                     const ucudnn_micro_batch *plan, int count, ucudnn_micro_batch undivided, int *kept);

#endif /* UC_CORE_H */
