/*
 * The legacy path of the preload library: the hooks of cuDNN's legacy convolution API (executions, Get*_v7, Find*,
 * Find*Ex, workspace sizes) and what they stand on beside the core.
 *
 * Files, bottom up: uc_key.c (reading descriptors into kernel keys, cache keys, descriptor clones), uc_call.c (the
 * real library's answers about one call, by op), uc_plan.c (the plan object), uc_verify.c (a plan checked against
 * its undivided rival), uc_cache.c (the in-memory plan cache), uc_planning.c (making a plan on a miss),
 * uc_decide.c (the plan decision), uc_exec.c and uc_query.c (the hooks).
 */
#ifndef UC_LEGACY_H
#define UC_LEGACY_H

#include "uc_core.h"

#define UC_MAXD CUDNN_DIM_MAX
/* Most micro-batches a plan may have (the reply's capacity): planning storage never grows with N. */
#define UC_MAX_MICRO UCUDNN_MAX_MICRO_BATCHES

/* ---- kernel keys and descriptors (uc_key.c) ---- */

/* Internal op code of bias-activation forward: a forward kernel whose z is split too. */
#define UC_OP_BIASACT 3

typedef struct {
    int32_t dtype, nb;
    int32_t dims[UC_MAXD];
    int32_t strides[UC_MAXD];
} uc_tensor;

/*
 * Everything the real library reports about one convolution call's descriptors. Zero-filled before reading,
 * so it can be hashed and compared bytewise. x is the input side (dx for BackwardData), y the output side
 * (dy for the backward ops), z the bias-activation addend; N stays in dims[0] (keys mask it).
 */
typedef struct {
    int32_t op;      /* UCUDNN_OP_* */
    int32_t biasact; /* 1: cudnnConvolutionBiasActivationForward (planned as a forward kernel) */
    uc_tensor x, y, z;
    int32_t wdtype, wformat, wnb;
    int32_t wdims[UC_MAXD];
    int32_t cnb;
    int32_t pad[UC_MAXD], stride[UC_MAXD], dil[UC_MAXD];
    int32_t mode, ctype, groups, math;
} uc_kernel;

/*
 * Read the descriptors. Returns NULL on success, else why the call cannot be planned (the caller passes it
 * through): unreadable descriptors, an unsupported data type or layout, N < 2.
 */
const char *uc_kernel_read(uc_kernel *k, int op, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                           cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y,
                           cudnnTensorDescriptor_t z);
/* The canonical text key (N excluded, op included); returns the length needed, like snprintf. */
size_t uc_kernel_text(const uc_kernel *k, char *buf, size_t len);
size_t uc_dtype_size(int dtype);
const char *uc_op_name(int op);
int uc_algo_count(int op);
/* A tensor descriptor like t with N = b and the same strides (nStride unchanged). 0 or a cuDNN status. */
int uc_tensor_clone(const uc_tensor *t, int b, cudnnTensorDescriptor_t *out);
/* A convolution descriptor like k's with math type `math`. 0 or a cuDNN status. */
int uc_conv_clone(const uc_kernel *k, int math, cudnnConvolutionDescriptor_t *out);

/* Cache key: a plan (planned at `limit` with determinism `sel`) or an execution decision (workspace `limit`,
 * default limit `deflimit`, the caller's algorithm `sel`), on the calling thread's class of device (identical
 * GPUs share plans, other models do not: a plan is timed on one). Every byte a field: compared bytewise. */
enum { UC_KEY_PLAN = 1, UC_KEY_EXEC = 2 };
typedef struct {
    int32_t kind, n, policy, sel;
    uint64_t limit, deflimit;
    uc_kernel k;    /* with N masked */
    int64_t device; /* uc_device_class() */
} uc_ckey;

void uc_ckey_init(uc_ckey *key, int kind, const uc_kernel *k, int policy, int sel, uint64_t limit,
                  uint64_t deflimit);
/* For the test-only exports: the kernel key of a call's descriptors (0: not plannable, logged) and a tensor
 * descriptor cloned at N = batch. */
size_t uc_kernel_key_of(int op, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                        cudnnTensorDescriptor_t y, char *buf, size_t len);
int uc_tensor_clone_of(cudnnTensorDescriptor_t src, int batch, cudnnTensorDescriptor_t *out);

/* ---- the real library's answers about one call (uc_call.c) ---- */

/* The buffers and workspace planning may search on, in the shim's roles (x is dx for BackwardData, y is dy for the
 * backward ops, w is dw for BackwardFilter; the op's output is the one cuDNN may overwrite): a Find*Ex call's own,
 * with the rows the real Find*Ex measured on them at the call's N; or a convolution call's own where the call
 * overwrites its output (beta = 0), with no rows. */
typedef struct {
    void *x, *w, *y, *ws;
    size_t ws_bytes;
    const ucudnn_perf *rows;
    int nrows;
} uc_found;

/* One hooked call as planning sees it: the handle and the caller's descriptors at the call's N; for a Find*Ex, or a
 * convolution call that overwrites its output, its buffers (planning benchmarks on them: NULL elsewhere). */
typedef struct {
    cudnnHandle_t handle;
    const uc_kernel *k;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    const uc_found *found;
} uc_call;

/* 1 deterministic, 0 not, -1 not reported; several rows per algorithm (math types): any deterministic one counts. */
int uc_row_determinism(const ucudnn_perf *rows, int n, int algo);
/* Determinism of `algo` as the real library reports it at the call's N (unknown counts as deterministic). */
int uc_algo_deterministic(const uc_call *c, int algo);
/* The real Get*_v7 (find 0) or Find* (find 1) of the call's op, with exactly these arguments. */
int uc_real_search(int find, const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, int cap,
                   int *n, void *rows);
/* The same into rows, *n clamped to 0..cap (0 on failure): real Get*_v7 at the call's descriptors, Find at x/y. */
int uc_real_get_v7(const uc_call *c, ucudnn_perf *rows, int cap, int *n);
int uc_real_find(const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, ucudnn_perf *rows,
                 int cap, int *n);
/* The real Find*Ex of the call's op on c->found's buffers and workspace, at descriptors x/y (clones of the call's
 * at a smaller N address the first samples of the same buffers): with exactly these arguments (search_ex), and
 * into rows with *n clamped as above, offered no more of the workspace than `limit` (find_ex: an algorithm needing
 * more is not run, its row an allocation failure, as the planner's benchmark under that limit wants). */
int uc_real_search_ex(const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, int cap, int *n,
                      void *rows);
int uc_real_find_ex(const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, size_t limit,
                    ucudnn_perf *rows, int cap, int *n);
/* The real workspace query of `op` with exactly these arguments (x is dx for BackwardData, y is dy for the
 * backward ops, w is dw for BackwardFilter). */
int uc_real_workspace_size(int op, cudnnHandle_t handle, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                           cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, int algo, size_t *bytes);
/* The same for the call's op and filter, *bytes 0 first. */
int uc_real_ws(const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y,
               cudnnConvolutionDescriptor_t conv, int algo, size_t *bytes);

/* ---- the plan object (uc_plan.c) ---- */

enum { UC_SRC_NONE = 0, UC_SRC_PLANNER = 1, UC_SRC_FALLBACK = 2, UC_SRC_CACHE = 3 };

/* An immutable plan, shared by reference count; count == 0 means "no plan: pass through". */
typedef struct uc_plan {
    atomic_int refs;
    int op, n, count, source;
    size_t limit;       /* the workspace limit it was planned under */
    int policy, det_requested;
    ucudnn_micro_batch *mb;
    float time_ms;
    _Atomic float base_ms; /* predicted time of the undivided choice in the same workspace; 0: not known yet */
    size_t workspace;   /* max over micro-batches, verified with the real workspace queries */
    int deterministic;
    int verified;       /* 1: the planner says it already won a check on real executions (uc_verify.c) */
    int algo0;          /* the algorithm reported for the plan in Get/Find results */
    struct uc_plan *rival; /* owned; a plan of one call not yet checked: the planner's runner-up to check it
                            * against (uc_decide.c), a plan of one call too; NULL: none */
    int math0;          /* its math type */
    /* Per micro-batch descriptors (shared between micro-batches of one size; conv NULL: the caller's). */
    cudnnTensorDescriptor_t *xd, *yd, *zd;
    cudnnConvolutionDescriptor_t *cd;
    int n_owned_t, n_owned_c;
    cudnnTensorDescriptor_t *owned_t;
    cudnnConvolutionDescriptor_t *owned_c;
    char *key_text;
    char *json;
} uc_plan;

/* A plan of `count` micro-batches (none filled in yet), refs 1; NULL when memory is short. */
uc_plan *uc_plan_new(int op, int n, size_t limit, int policy, int det, int count);
void uc_plan_ref(uc_plan *p);
void uc_plan_release(uc_plan *p);
void uc_plan_free(uc_plan *p);

/* The plan for a validated reply (uc_plan.c), or NULL with `why` set when the real library disagrees with it. */
uc_plan *uc_plan_build(const uc_call *c, const ucudnn_plan_request *req, const ucudnn_plan_reply *rep, int policy,
                       int source, char *why, size_t why_len);

/* ---- checking a new plan against its undivided rival (uc_verify.c) ---- */

typedef struct uc_verify uc_verify;
/* A check of `plan` against `base` (the undivided choice for the same workspace); NULL when checks are off
 * (UCUDNN_VERIFY_SAMPLES=0) or memory is short. Takes references of its own. */
uc_verify *uc_verify_new(uc_plan *plan, uc_plan *base, int det, size_t limit);
/* A check of `plan`, of one call, against its runner-up (plan->rival), which must win clearly to replace it; NULL
 * as above or without a runner-up. */
uc_verify *uc_verify_new_rival(uc_plan *plan, int det, size_t limit);
void uc_verify_ref(uc_verify *v);
void uc_verify_release(uc_verify *v);
/* Which plan this execution runs (*run) and its slot (>= 0: time it and call uc_verify_end), or -1 (untimed). */
int uc_verify_begin(uc_verify *v, uc_plan **run);
/* The execution of `slot` ended: `m` its stopped mark (NULL if it could not be timed), ok 0 if it failed. */
void uc_verify_end(uc_verify *v, int slot, const uc_mark *m, int ok);
typedef struct {
    int kept, samples, det;
    int rival;            /* 1: a plan of one call checked against its runner-up (base) */
    double plan_ms, base_ms;
    size_t limit;
    uc_plan *plan, *base; /* borrowed from the check */
} uc_verdict_info;
/* 1 (once) when every timed execution has been read: *out says which plan won. Never waits. */
int uc_verify_verdict(uc_verify *v, uc_verdict_info *out);

/* ---- the plan cache (uc_cache.c) ---- */

/* A referenced plan for exactly this key, or NULL. With `verify` (exec keys): also the entry's check in
 * progress, referenced, or NULL when there is none (uc_verify.c). */
uc_plan *uc_cache_get(const uc_ckey *key);
struct uc_verify;
uc_plan *uc_cache_get_exec(const uc_ckey *key, struct uc_verify **verify);
/* A referenced plan planned for the same kernel, N, policy at a limit >= key->limit whose workspace fits
 * key->limit (optimal there too), with compatible determinism; or NULL. key->kind must be UC_KEY_PLAN. */
uc_plan *uc_cache_alias(const uc_ckey *key);
/* 1 if a plan for the same kernel, N and policy as key (a UC_KEY_PLAN key) is held, at any limit. */
int uc_cache_kernel_planned(const uc_ckey *key);
/* Get/Find listed `algo` for a plan of kernel k (any N): remembered for the kernel's lifetime, apart from the
 * plans, which may be evicted or cleared. */
void uc_cache_note_reported(const uc_kernel *k, int algo);
int uc_cache_reported(const uc_kernel *k, int algo);
/*
 * Insert (the cache takes one reference of its own); if the key is already present the first insert wins.
 * Returns a referenced plan for the key (the caller still owns its reference to `p`). `view` is what
 * uc_cache_view() returned before the plan was made: if another thread cleared the plans since, the plan may
 * be stale (made under a workspace division that no longer holds), so it is returned without being cached and
 * the next call plans again.
 */
uc_plan *uc_cache_put(const uc_ckey *key, uc_plan *p, uint64_t view);
/* The same for an execution decision with a check in progress (`verify` may be NULL); *verify_out gets the entry's
 * check (referenced) when the returned plan is the entry's. */
uc_plan *uc_cache_put_exec(const uc_ckey *key, uc_plan *p, struct uc_verify *verify, uint64_t view,
                           struct uc_verify **verify_out);
/* The check `verify` of the entry `key` is over: the entry runs `chosen` from now on, without a check. Nothing
 * happens if the entry is gone or has another check (a clear came in between). */
void uc_cache_settle(const uc_ckey *key, struct uc_verify *verify, uc_plan *chosen);
/* Entries held now (bounded: the least recently used go first, counted as plan_evictions). */
int uc_cache_entries(void);
/* This thread's view of the cache's clear count (see uc_cache_put). */
uint64_t uc_cache_view(void);
/* 1 if this kernel (N ignored) was not seen before. */
int uc_cache_note_kernel(const uc_kernel *k);
/* 1 (counted) if this kernel (N ignored) has had fewer than UC_EXACT_ASKS exact questions to the planner about a
 * check's verdict (uc_decide.c): a program passing ever new workspace sizes costs a bounded number of them. */
#define UC_EXACT_ASKS 16
int uc_cache_kernel_exact_ask(const uc_kernel *k);
/*
 * Drop every plan. A plan this same thread is making when it clears is never stale: the clear came from its own
 * planner (which then plans under what it just changed, e.g. a new workspace division) or from registering the
 * planner that is about to be asked; so the clear counts against other threads' views only.
 */
void uc_cache_clear(void);

/* ---- planning on a miss (uc_planning.c) ---- */

/* A plan for the call under `limit` and `policy` (det: deterministic algorithms only) from the planner, the stored
 * plan or the built-in fallback, validated and built; "no plan" (count 0) when none fits or the answer is bad; NULL
 * when none can be had right now (pass through, nothing cached). Never holds a lock while planning. */
uc_plan *uc_plan_make(const uc_call *c, size_t limit, int policy, int det);

/* ---- the plan decision (uc_decide.c) ---- */

/* A query's plan (Get/Find, workspace sizes): referenced, possibly count == 0 (pass through), planned under
 * `limit` (det: the caller asks for determinism); NULL if none can be had right now. */
uc_plan *uc_get_plan(const uc_call *c, size_t limit, int det);
/* One execution's decision: its plan-cache key, and the check of a new plan in progress (referenced, or NULL). */
typedef struct {
    uc_ckey key;
    struct uc_verify *verify;
} uc_exec_decision;
/* The plan an execution of `algo` in the caller's workspace (ws, ws_bytes) runs: referenced, NULL or count == 0 to
 * pass through; fills d. */
uc_plan *uc_decide_exec(const uc_call *c, int algo, const void *ws, size_t ws_bytes, uc_exec_decision *d);
/* After the execution: a check that has its verdict settles the decision (counted, told to the recorder); d's
 * check is released. */
void uc_decide_settle(const uc_call *c, uc_exec_decision *d);
/*
 * The workspace to report for plan p, planned at `limit` (Get*_v7/Find* rows, Get*WorkspaceSize): its own, or --
 * while it is a new divided plan that a check on real executions will time against the undivided choice -- enough
 * for the undivided choice within `limit` too (uc_decide.c). A framework that allocates what it is told then lets
 * the check time the rival cuDNN alone would run under that limit; in the plan's own smaller workspace it could
 * only time a weaker undivided algorithm, and keep a plan slower than cuDNN alone.
 */
size_t uc_reported_workspace(const uc_call *c, const uc_plan *p, size_t limit);

/* ---- the hooks (uc_exec.c, uc_query.c), called by the generated entry points ---- */

#define UC_DECL(ret, name, params, args) ret uc_hook_##name params;
#define UC_EXEC UC_DECL
#define UC_QUERY UC_DECL
#include "hooks.def"
#undef UC_DECL

/* The calling thread's most recent executed plan, or NULL (legacy/uc_exec.c). */
const uc_plan *uc_last_plan(void);

#endif /* UC_LEGACY_H */
