/*
 * The graph-API path of the preload library: what it records of the cuDNN backend descriptors a framework builds
 * (cudnn_frontend, PyTorch's default convolution path), and the graph it resolves at a plan's Finalize.
 *
 * Values of the cuDNN 9 backend enums the shim reads (facts from cudnn_graph.h of the nvidia-cudnn wheel;
 * tests/preload/test_graph_record.py checks each against the header when the wheel is installed).
 */
#ifndef UC_GRAPH_H
#define UC_GRAPH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "uc_core.h"

/* cudnnBackendDescriptorType_t */
enum {
    UC_BK_POINTWISE = 0,
    UC_BK_CONVOLUTION = 1,
    UC_BK_ENGINE = 2,
    UC_BK_ENGINECFG = 3,
    UC_BK_ENGINEHEUR = 4,
    UC_BK_EXECUTION_PLAN = 5,
    UC_BK_KNOB_CHOICE = 7,
    UC_BK_OP_CONV_FWD = 10,
    UC_BK_OP_CONV_BWD_FILTER = 11,
    UC_BK_OP_CONV_BWD_DATA = 12,
    UC_BK_OP_POINTWISE = 13,
    UC_BK_OPERATIONGRAPH = 15,
    UC_BK_VARIANT_PACK = 16,
    UC_BK_TENSOR = 17,
};

/* cudnnBackendAttributeType_t: the element types the shim reads by name (uc_gattr_elem_size lists every type it
 * copies; others make an attribute opaque). */
enum {
    UC_AT_HANDLE = 0,
    UC_AT_DATA_TYPE = 1,
    UC_AT_BOOLEAN = 2,
    UC_AT_INT64 = 3,
    UC_AT_FLOAT = 4,
    UC_AT_DOUBLE = 5,
    UC_AT_VOID_PTR = 6,
    UC_AT_CONVOLUTION_MODE = 7,
    UC_AT_HEUR_MODE = 8,
    UC_AT_KNOB_TYPE = 9,
    UC_AT_NAN_PROPOGATION = 10, /* sic: cuDNN's spelling */
    UC_AT_NUMERICAL_NOTE = 11,
    UC_AT_POINTWISE_MODE = 14,
    UC_AT_BACKEND_DESCRIPTOR = 15,
    UC_AT_INT32 = 23,
    UC_AT_CHAR = 24,
};

/* cudnnBackendAttributeName_t */
enum {
    UC_A_POINTWISE_MODE = 0,
    UC_A_POINTWISE_MATH_PREC = 1,
    UC_A_POINTWISE_NAN_PROPAGATION = 2,
    UC_A_CONV_COMP_TYPE = 100,
    UC_A_CONV_MODE = 101,
    UC_A_CONV_DILATIONS = 102,
    UC_A_CONV_FILTER_STRIDES = 103,
    UC_A_CONV_POST_PADDINGS = 104,
    UC_A_CONV_PRE_PADDINGS = 105,
    UC_A_CONV_SPATIAL_DIMS = 106,
    UC_A_ENGINEHEUR_MODE = 200,
    UC_A_ENGINEHEUR_OPERATION_GRAPH = 201,
    UC_A_ENGINEHEUR_RESULTS = 202,
    UC_A_ENGINECFG_ENGINE = 300,
    UC_A_ENGINECFG_KNOB_CHOICES = 302,
    UC_A_ENGINECFG_WORKSPACE_SIZE = 303,
    UC_A_PLAN_HANDLE = 400,
    UC_A_PLAN_ENGINE_CONFIG = 401,
    UC_A_PLAN_WORKSPACE_SIZE = 402,
    UC_A_OP_FWD_ALPHA = 700, /* then BETA, CONV_DESC, W, X, Y */
    UC_A_OP_BWD_DATA_ALPHA = 706, /* then BETA, CONV_DESC, W, DX, DY */
    UC_A_OP_BWD_FILTER_ALPHA = 712, /* then BETA, CONV_DESC, DW, X, DY */
    UC_A_OP_PW_PW_DESCRIPTOR = 750,
    UC_A_OP_PW_XDESC = 751,
    UC_A_OP_PW_BDESC = 752,
    UC_A_OP_PW_YDESC = 753,
    UC_A_OP_PW_ALPHA1 = 754,
    UC_A_OP_PW_ALPHA2 = 755,
    UC_A_OP_PW_DXDESC = 756,
    UC_A_OP_PW_DYDESC = 757,
    UC_A_OP_PW_TDESC = 758,
    UC_A_KNOB_CHOICE_KNOB_TYPE = 600,
    UC_A_KNOB_CHOICE_KNOB_VALUE = 601,
    UC_A_OPERATIONGRAPH_HANDLE = 800,
    UC_A_OPERATIONGRAPH_OPS = 801,
    UC_A_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT = 802,
    UC_A_TENSOR_BYTE_ALIGNMENT = 900,
    UC_A_TENSOR_DATA_TYPE = 901,
    UC_A_TENSOR_DIMENSIONS = 902,
    UC_A_TENSOR_STRIDES = 903,
    UC_A_TENSOR_VECTOR_COUNT = 904,
    UC_A_TENSOR_VECTORIZED_DIMENSION = 905,
    UC_A_TENSOR_UNIQUE_ID = 906,
    UC_A_TENSOR_IS_VIRTUAL = 907,
    UC_A_TENSOR_IS_BY_VALUE = 908,
    UC_A_VARIANT_PACK_UNIQUE_IDS = 1000,
    UC_A_VARIANT_PACK_DATA_POINTERS = 1001,
    UC_A_VARIANT_PACK_WORKSPACE = 1003,
    UC_A_ENGINE_OPERATION_GRAPH = 1300,
    UC_A_ENGINE_GLOBAL_INDEX = 1301,
    UC_A_ENGINE_NUMERICAL_NOTE = 1303,
};

/* cudnnPointwiseMode_t values the shim knows to be elementwise (no reduction, no randomness). */
enum {
    UC_PW_ADD = 0,
    UC_PW_MUL = 1,
    UC_PW_MIN = 2,
    UC_PW_MAX = 3,
    UC_PW_SQRT = 4,
    UC_PW_RELU_FWD = 100,
    UC_PW_TANH_FWD = 101,
    UC_PW_SIGMOID_FWD = 102,
    UC_PW_ELU_FWD = 103,
    UC_PW_GELU_FWD = 104,
    UC_PW_SOFTPLUS_FWD = 105,
    UC_PW_SWISH_FWD = 106,
    UC_PW_IDENTITY = 21,
};

/* ---- descriptor values and the record of live descriptors (uc_graph_rec.c, uc_graph_val.c) ---- */

/* Bounds: a descriptor's attributes beyond these make it opaque (its graph passes through). */
#define UC_GREC_MAX_ATTRS 24
#define UC_GREC_MAX_BYTES 4096
/* Descriptors recorded at once, variant packs aside; more are not recorded (their graphs pass through, counted).
 * Variant packs are always recorded: a plan the shim took over cannot run without its pack's uids and pointers. */
#define UC_GREC_MAX_RECORDS 65536

/* A pseudo attribute of an engine configuration cuDNN filled itself (a heuristics result): the operation graph
 * its heuristics descriptor held. Not a cuDNN attribute name (those are >= 0). */
#define UC_GLINK_GRAPH (-1)
/* A pseudo attribute of an engine configuration the shim offered in a heuristics result list (uc_graph_offer.c): a
 * micro-batched variant of the configuration before it. INT64s: what the framework could allocate then, and
 * whether it asked for determinism. */
#define UC_GLINK_VARIANT (-2)
/* A pseudo attribute of a knob choice descriptor the shim filled itself, the variant's own knob (uc_graph_offer.c):
 * INT64s, its knob type and value, which the shim answers in place of cuDNN. */
#define UC_GLINK_KNOB (-3)

typedef struct uc_gval uc_gval;

/* One attribute as last set: `count` elements of `type`, copied. A descriptor-valued attribute holds `count`
 * uc_gval pointers, each a counted reference to the value the named descriptor had when it was set (NULL: a
 * descriptor the shim did not record). */
typedef struct {
    int32_t name, type;
    int64_t count;
    uint32_t bytes;
    unsigned char *data;
} uc_gattr;

/* A descriptor's value: its type, whether it was finalized, and its attributes. Shared values are immutable
 * (copy on write); they are what an operation keeps of its tensors, an engine configuration of its graph, a
 * plan of everything, whatever happens to the descriptors (and addresses) afterwards. */
struct uc_gval {
    int refs; /* atomic */
    int type, opaque, finalized, nattr;
    uc_gattr attr[UC_GREC_MAX_ATTRS];
};

/* Size in bytes of one element of an attribute type, 0 if the shim does not copy that type. */
size_t uc_gattr_elem_size(int type);
void uc_gval_unref(uc_gval *v);
uc_gval *uc_gval_ref(uc_gval *v);
const uc_gattr *uc_gval_attr(const uc_gval *v, int name);
/* The one descriptor value an attribute names (borrowed from v), or NULL. */
uc_gval *uc_gval_desc(const uc_gval *v, int name);
/* `cap` int64 elements of an INT64 attribute: its element count, or -1 (absent, another type, too many). */
int uc_gval_int64s(const uc_gval *v, int name, int64_t *out, int cap);
/* One 4-byte enum value of attribute type `type`: 0, or -1. */
int uc_gval_enum(const uc_gval *v, int name, int type, int32_t *out);
/* A deep copy of v (children shared), refs 1, or NULL when memory is short. */
uc_gval *uc_gval_clone(const uc_gval *v);
/* Free an attribute's data (and release the values it names). */
void uc_gattr_free(uc_gattr *a);

void uc_grec_created(void *desc, int type);
void uc_grec_destroyed(void *desc);
/* cudnnBackendInitialize: the descriptor is reset in place (type kept, attributes gone). */
void uc_grec_initialized(void *desc);
/* Copies the attribute (or marks the descriptor opaque when it cannot). */
void uc_grec_set(void *desc, int name, int type, int64_t count, const void *elems);
void uc_grec_finalized(void *desc);
/* cuDNN filled the descriptor in a GetAttribute: its value becomes `value` (a counted reference taken here), or,
 * NULL, opaque; `graph` (may be NULL) is linked as UC_GLINK_GRAPH (a heuristics result). */
void uc_grec_filled(void *desc, uc_gval *value, uc_gval *graph);
/* Set a pseudo attribute (a negative name, UC_GLINK_*) of `count` INT64s on a recorded descriptor's value. */
void uc_grec_mark(void *desc, int name, const int64_t *values, int count);
/* The descriptor's current value, a counted reference (release with uc_gval_unref), or NULL: not recorded. */
uc_gval *uc_grec_value(void *desc);
/* The descriptor's recorded type, or -1. */
int uc_grec_type(void *desc);
/* A variant pack's uids, pointers and workspace as set, finalized or not: the uid count (pointers the same), -1
 * when the pack is not recorded, -2 when uids and pointers differ in number or type, -3 too many. */
int64_t uc_grec_pack(void *desc, int64_t *uids, void **ptrs, int cap, void **ws);
size_t uc_grec_count(void);

/* A pointer-keyed hash table (chained, doubling): lookups by hash, never by scanning. Entries are embedded in the
 * caller's structures; the caller locks. */
typedef struct uc_gmap_ent {
    struct uc_gmap_ent *next;
    const void *key;
} uc_gmap_ent;
typedef struct {
    uc_gmap_ent **b;
    size_t nb, n;
} uc_gmap;
uc_gmap_ent *uc_gmap_find(const uc_gmap *m, const void *key);
int uc_gmap_put(uc_gmap *m, uc_gmap_ent *e); /* e->key set, not present yet: 0, or -1 (memory short) */
uc_gmap_ent *uc_gmap_take(uc_gmap *m, const void *key);

/* ---- a plan's resolved graph (uc_graph_resolve.c) ---- */

#define UC_G_MAX_OPS 8
#define UC_G_MAX_TENSORS 24
#define UC_G_MAXD 8
#define UC_G_MAX_NODES (UC_G_MAX_TENSORS + 2 * UC_G_MAX_OPS + 1)
#define UC_G_MAX_KNOBS 16

typedef struct {
    int64_t uid, align;
    int32_t dtype, nb, virt, by_value;
    int64_t dims[UC_G_MAXD], strides[UC_G_MAXD];
} gtensor;

/* An operation; t[] are uids by role: conv x, w, y (dgrad: dx, w, dy; wgrad: x, dw, dy); pointwise x, b, y. */
typedef struct {
    int32_t type, pw_mode;
    int64_t t[3];
    int32_t nsp, conv_mode, comp_type;
    int64_t pre[UC_G_MAXD], post[UC_G_MAXD], stride[UC_G_MAXD], dil[UC_G_MAXD];
} gop;

/* How the shim runs a plan it took over: parts in order, each `size` samples run by `plan` (sub-plans shared between
 * parts of the same size, engine and beta; a weight gradient's parts after the first accumulate with beta = 1). */
typedef struct {
    int nparts, nowned;
    int64_t *size, *engine;
    void **plan;
    void **owned;        /* the distinct sub-plans, destroyed with the parts */
    int64_t workspace;   /* the largest of their workspaces */
} uc_gparts;

typedef struct uc_ggraph {
    uc_gmap_ent e;       /* keyed by the plan (or engine configuration) descriptor */
    void *plan;
    int is_cfg;          /* an engine configuration's (ENGINECFG_WORKSPACE_SIZE), not a plan's */
    int refs, dead;      /* references held by executions; dead: unlinked, freed at the last release */
    int nops, ntensors;
    gop ops[UC_G_MAX_OPS];
    gtensor t[UC_G_MAX_TENSORS];
    int64_t engine, notes; /* engine global index (-1 unknown); numerical notes as a bit mask */
    int64_t n;             /* the batch size of the convolution, 0 if none */
    const char *why_not;   /* NULL: a convolution graph the shim understands */
    char *key;           /* the planner's key: the caller's engine, notes and knobs, then the graph's shape */
    size_t shape_at;     /* where the shape begins in key (uc_graph_memo.c keys on it) */
    /* What rebuilding it at another batch size takes (the values held at the plan's Finalize). */
    void *handle;          /* the operation graph's handle as set (else the plan's), for building and timing */
    int nknobs, nnodes;
    int64_t knob_type[UC_G_MAX_KNOBS], knob_value[UC_G_MAX_KNOBS];
    uc_gval **nodes;       /* the graph's descriptor values, dependencies first, the operation graph last */
    /* The decision for this plan, under `lock`: 0 not made yet, 1 taken over by the shim (`main`, and `alt` while
     * they are timed against each other), -1 the caller's plan runs unchanged. */
    pthread_mutex_t lock;
    int decided, deciding;
    const char *source;     /* who chose `main`: "planner" or "fallback" */
    int64_t full_workspace; /* the caller's plan's workspace, from the real library */
    int64_t workspace;      /* what the plan's workspace query answers once decided == 1 */
    uc_gparts main;         /* the plan: micro-batched, or one part */
    uc_gparts alt;          /* the undivided choice it is checked against, or its runner-up (no parts: none) */
    int runner_up;          /* alt is the runner-up of a plan of one engine: alt must win clearly to replace it */
    int trial_on;           /* main and alt are being timed against each other on real executions */
    uc_trial trial;
    int use_alt;            /* the check chose alt */
    size_t limit;           /* what the plan was made under (for the verdict the check reports) */
    int policy;
    int64_t offer_limit;    /* an offered variant's (UC_GLINK_VARIANT): what the framework could allocate; 0 none */
    int offer_det;          /* ... and whether the framework asked for determinism */
    int untimed;            /* executions of the plan left before its check starts (see uc_graph_offer.c) */
} uc_ggraph;

/* A finalized plan's (or engine configuration's, is_cfg) graph, resolved from its recorded value
 * (uc_graph_resolve.c); NULL only when memory is short. why_not says why the shim leaves it alone (NULL: a
 * convolution graph it can split). */
uc_ggraph *uc_graph_resolve(void *desc, int is_cfg);
/* Free a resolved graph (its decision dropped first: uc_gsplit_free). */
void uc_graph_free(uc_ggraph *g);
int uc_graph_op_code(const uc_ggraph *g); /* UCUDNN_OP_* of the graph's convolution */
/* The caller's knob choices as the keys write them (type:value, comma-separated). */
void uc_graph_knobs_text(uc_sb *sb, const uc_ggraph *g);

/* ---- the parts a plan runs in (uc_graph_parts.c) ---- */

/* Build the sub-plans of parts (size[i], engine[i]) in order: 0 and *out, or -1 (nothing kept) when a part does not
 * start where every split tensor keeps its declared alignment, an engine is not admitted, a plan does not build or
 * its workspace exceeds the limit. `listed`: the engines are ones the framework itself would run undivided (an
 * offered variant's rival), not judged by the caller's engine's notes. */
int uc_gparts_build(const uc_ggraph *g, const int64_t *size, const int64_t *engine, int n, size_t limit,
                    uc_gparts *out, int listed);
/* The planner's parts reordered (stably) so that those whose sizes are multiples of the alignment quantum q
 * (uc_gb_align_quantum; 0: none) come first: after them a part of any size starts where alignment holds, so one
 * such part, last, is always runnable. */
void uc_gparts_order(int64_t q, int64_t *size, int64_t *engine, int n);
/* The uniform split of `engine` at the largest power-of-two size below N whose parts all fit `limit` (under the
 * `all` policy, refined up to the next power of two): 0 and *out, or -1. */
int uc_gparts_largest(const uc_ggraph *g, int64_t engine, size_t limit, int policy, uc_gparts *out);
/* Parts of b samples of `engine` (the last one the remainder): 0 and *out, or -1. */
int uc_gparts_uniform(const uc_ggraph *g, int64_t engine, int64_t b, size_t limit, uc_gparts *out);
/* One undivided part of an engine the framework lists itself (an offered variant's rival: not judged by the
 * notes of the variant's engine): 0 and *out, or -1. */
int uc_gparts_listed(const uc_ggraph *g, int64_t engine, size_t limit, uc_gparts *out);
void uc_gparts_drop(uc_gparts *p);
/* The parts as micro-batches (size, engine as the algorithm, math type 0), as the planner and the stored checks
 * speak of them: p->nparts of them (the caller frees), or NULL when there are none or memory is short. */
ucudnn_micro_batch *uc_gparts_steps(const uc_gparts *p);

/* ---- the decision for a plan (uc_graph_split.c) and running it (uc_graph_exec.c) ---- */

/* The workspace to report for a plan (deciding on first use); -1 when the plan is not the shim's concern (the
 * real value stands). */
int64_t uc_gsplit_workspace(uc_ggraph *g);
/* Drop the decision: its parts and its check. */
void uc_gsplit_free(uc_ggraph *g);
/* Run the plan as the shim decided: 1 and *status when it did, 0 when the caller's call should run unchanged. */
int uc_gexec_run(uc_ggraph *g, cudnnHandle_t handle, void *variant_pack, cudnnStatus_t *status);
/* Executions a divided plan (taken over under a limit, or an offered variant) runs divided before its check
 * starts: a framework that times plans itself (PyTorch's benchmark mode: one warm-up, one timed run) then times
 * the divided plan, not the check's alternation with the undivided engine. */
#define UC_CHECK_UNTIMED 2

/* ---- micro-batched variants offered in heuristics results under the default limit (uc_graph_offer.c) ---- */

/* The heuristics results query (ENGINEHEUR_RESULTS), through the real library: the count query answers one more
 * where a variant is offered, the fill that follows fills it; *variant_at is then its index (-1: none) and
 * variant_mark its UC_GLINK_VARIANT values. */
cudnnStatus_t uc_goffer_results(void *heur, int64_t requested, int64_t *count, void *elems, int64_t *variant_at,
                                int64_t variant_mark[2]);
/* A heuristics descriptor destroyed or reset: a count query's decision for it is forgotten. */
void uc_goffer_forget(void *heur);
/* Whether a recorded engine configuration is an offered variant. */
int uc_goffer_is_variant(void *cfg);
/* A variant's knob choices (ENGINECFG_KNOB_CHOICES) as the real library answered them: one more, the variant's own
 * knob, in the next caller descriptor where there is room (and in a count query). */
void uc_goffer_knobs(void *cfg, int64_t requested, int64_t *count, void *const *elems);
/* A read of a knob choice descriptor: 1 where it holds the variant's own knob (answered here, *st its status),
 * else 0 (the real library answers). */
int uc_goffer_knob_read(void *knob, int name, int type, int64_t requested, int64_t *count, void *elems,
                        cudnnStatus_t *st);
/* A client sets an engine configuration's knob choices: where one holds the variant's value (a pair read from a
 * variant, built again), 1: the others set through the real library (*st its status), the configuration recorded
 * and marked a variant under what the framework can allocate now. Else 0: the caller passes the call through. */
int uc_goffer_set_knobs(void *cfg, int64_t n, void *const *knobs, cudnnStatus_t *st);
/* An offered variant's plan within `limit`: the rival (alt), the first engine the framework lists (INSTANT, then
 * FALLBACK heuristics) and would run that fits undivided; and the first admitted engine, the variant's own, then
 * those ranked above the rival, whose uniform split fits (main). No main: both empty. */
void uc_goffer_plan(const uc_ggraph *g, size_t limit, int policy, uc_gparts *main, uc_gparts *alt);

/* ---- rebuilding a graph at another batch size (uc_graph_build.c) ---- */

#define UC_G_MAX_CANDIDATES 16
#define UC_G_MAX_ALIGN_QUANTUM 4096 /* samples: a larger alignment quantum counts as none */
size_t uc_gb_dtype_bytes(int dtype); /* bytes of an element the shim can offset pointers for, else 0 */
int uc_gb_split_tensor(const uc_ggraph *g, const gtensor *t);
/* Whether a part starting at sample b keeps every split tensor's alignment; the least such b > 0 (parts of its
 * multiples can go anywhere), 0 if none. */
int uc_gb_aligned_for(const uc_ggraph *g, int64_t b);
int64_t uc_gb_align_quantum(const uc_ggraph *g);
/* A finalized plan of the graph at b run by `engine` (the caller's knobs for the caller's engine), and its
 * workspace; NULL on failure. The caller owns it (uc_gb_destroy). */
void *uc_gb_build(const uc_ggraph *g, int64_t b, int beta_one, int64_t engine, int64_t *workspace);
void uc_gb_destroy(void *plan);
/* The engines the shim may run at b: the caller's first, then cuDNN's INSTANT heuristics, then (at b = N only) its
 * FALLBACK list, those whose numerical notes add no tensor cores, down-conversion, reduced-precision reduction or
 * non-determinism to the caller's. */
int uc_gb_engines(const uc_ggraph *g, int64_t b, int64_t *engines, int64_t *notes, int cap);
int64_t uc_gb_engine_count(const uc_ggraph *g); /* the operation graph's ENGINE_GLOBAL_COUNT, -1 unknown */
/* cuDNN's heuristics of `mode` (cudnnBackendHeurMode_t) for the graph at b, as listed (each engine once), with
 * their numerical notes as bit masks: how many. Asked of cuDNN once per shape, size and mode in a process (the
 * memo below). */
int uc_gb_heuristics(const uc_ggraph *g, int64_t b, int mode, int64_t *engines, int64_t *notes, int cap);
/* A finalized variant pack of these uids, pointers and workspace (the caller destroys it): 0 or a status. */
int uc_gb_variant_pack(int npack, const int64_t *uids, void *const *ptrs, void *ws, void **out);
int uc_gb_is_wgrad(const uc_ggraph *g);
int uc_gb_has_beta(const uc_ggraph *g);
/* Every convolution of the graph overwrites its output (beta absent or 0): its result does not depend on what
 * the output held before. */
int uc_gb_overwrites(const uc_ggraph *g);
int uc_gb_wide_filter(const uc_ggraph *g); /* a weight gradient's dw is 32 or 64 bits wide */
/* Whether the graph's batch may be divided: not a weight gradient, or one whose parts can accumulate into dw
 * (beta set, dw 32 or 64 bits wide: a 16-bit one would be rounded once per part, which one call does not do). */
int uc_gb_divisible(const uc_ggraph *g);
size_t uc_gb_extent(const uc_ggraph *g, const gtensor *t, int64_t b); /* bytes t spans at b; 0 unknown */

/* The graph the shim resolved for a finalized plan, as ucudnn_debug_graph_json describes it (malloc'd; NULL when
 * memory is short). */
char *uc_graph_debug_json(void *plan);

/* ---- what the process learnt about a graph's shape, for its other plans (uc_graph_memo.c) ---- */

/* The memo's key for `what` ("heur;mode=M", "bench") of the graph's shape at b with `engine` (and the caller's knob
 * choices when with_knobs), on `backend` (uc_backend_id: this device and cuDNN); NULL when memory is short
 * (nothing is then kept). */
char *uc_gmemo_key(const uc_ggraph *g, const char *what, int64_t b, int64_t engine, int with_knobs,
                   const char *backend);
/* 1 and *val (len bytes) when key is held with a value of that size, else 0. */
int uc_gmemo_get(const char *key, void *val, size_t len);
void uc_gmemo_put(const char *key, const void *val, size_t len); /* kept unless the memo is full */

/* ---- benchmarking for the planner (uc_graph_bench.c) ---- */

/* Every engine uc_gb_engines admits at b, planned and timed on scratch tensors (or answered by the memo where
 * the process measured it before), those whose plan needs more than `limit` built but not timed: rows into out,
 * 0 or the status that stopped it. */
int uc_gbench(const uc_ggraph *g, int64_t b, size_t limit, ucudnn_perf *out, int cap, int *count);

/* ---- the hooks (uc_graph_hooks.c), called by the generated entry points ---- */

#define UC_DECL(ret, name, params, args) ret uc_hook_##name params;
#define UC_BACKEND UC_DECL
#include "hooks.def"
#undef UC_DECL

#endif /* UC_GRAPH_H */
