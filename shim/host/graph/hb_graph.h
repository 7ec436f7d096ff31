/*
 * Host backend: the cuDNN graph (backend) API subset cudnn_frontend uses for convolutions, on the backend's own
 * algorithms. Files:
 *   hb_graph_api.c     the exported cudnnBackend* calls: descriptor life cycle, the attribute tables and the
 *                      argument checks every Set/Get shares (statuses as the real library answers them)
 *   hb_graph_exec.c    variant pack and cudnnBackendExecute (the convolution, then fused pointwise ops)
 *   hb_graph_pw.c      the fused pointwise ops after the convolution
 *   hb_graph_build.c   operation graph, engine, heuristics, engine config, execution plan
 *   hb_graph_analyse.c what a finalized operation graph computes (which engines support it)
 *   hb_graph_desc.c    tensor, convolution, pointwise and operation descriptors (set, get, finalize)
 *   hb_graph_obj.c     the shared graph and engines (reference counts), clearing a descriptor
 *
 * Value semantics: a descriptor-valued attribute is copied when it is set (a snapshot of the source, its
 * finalized state included), so a descriptor may be destroyed as soon as it has been used, as cudnn_frontend
 * does. The finalized operation graph is the one large object; engines, configurations and plans share it by
 * reference count (hb_graph).
 *
 * Engines: the graph's convolution op has engine global indices 0 .. (the legacy algorithm count of that op) - 1;
 * index i is legacy algorithm i of the op, with exactly that algorithm's workspace. An index whose algorithm the
 * backend lacks or that does not take the graph's shapes is NOT_SUPPORTED at the engine's Finalize.
 */
#ifndef UCUDNN_HB_GRAPH_H
#define UCUDNN_HB_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "hb_desc.h"
#include "ucudnn/cudnn_graph_abi.h"

#define HB_MAGIC_BACKEND 0x48424231u
#define HB_GDIMS CUDNN_DIM_MAX  /* tensor dims and convolution spatial entries a descriptor holds */
#define HB_GRAPH_MAX_OPS 32     /* operations in one graph */
#define HB_MAX_NOTES 4          /* numerical notes one engine reports */

/* Flag bits of what was set on a descriptor. */
enum {
    HB_T_DIMS = 1 << 0, HB_T_STRIDES = 1 << 1, HB_T_ALIGN = 1 << 2, HB_T_DTYPE = 1 << 3, HB_T_UID = 1 << 4,
    HB_C_NSP = 1 << 0, HB_C_DIL = 1 << 1, HB_C_STR = 1 << 2, HB_C_PRE = 1 << 3, HB_C_POST = 1 << 4,
};

typedef struct {
    int finalized;
    unsigned set;
    int64_t nb, nstrides;              /* counts as set (may exceed HB_GDIMS: refused at Finalize) */
    int64_t dim[HB_GDIMS], stride[HB_GDIMS];
    int dtype;
    int64_t align, uid, vec_count, vec_dim;
    int is_virtual, by_value, reorder;
} hb_gtensor;

typedef struct {
    int finalized;
    unsigned set;
    int64_t nsp, n[4];                 /* n: counts of dilations, strides, pre and post paddings */
    int64_t v[4][HB_GDIMS];            /* [0] dilations, [1] filter strides, [2] pre, [3] post paddings */
    int comp, mode;
} hb_gconv;

typedef struct {
    int finalized;
    int mode, prec, nan;
    double lower_clip, upper_clip, slope, elu_alpha, softplus_beta, swish_beta;
    int64_t axis;
} hb_gpw;

/* A scaling factor as set: its attribute type (0 = unset, else CUDNN_TYPE_FLOAT or _DOUBLE) and value. */
typedef struct {
    int type;
    double v;
} hb_gscale;

/* Tensor roles of an operation. Convolutions: X (x, dx), W (w, dw), Y (y, dy). Pointwise: X, B, Y, T, DX, DY. */
enum { HB_R_X = 0, HB_R_W = 1, HB_R_Y = 2, HB_R_B = 1, HB_R_T = 3, HB_R_DX = 4, HB_R_DY = 5, HB_ROLES = 6 };

typedef struct {
    int kind;                          /* the descriptor type: an OPERATION_* value */
    int finalized;
    hb_gscale alpha, beta;             /* convolutions: alpha, beta; pointwise: alpha1, alpha2 */
    int has_conv, has_pw;
    hb_gconv conv;
    hb_gpw pw;
    int has[HB_ROLES];
    hb_gtensor t[HB_ROLES];
} hb_gop;

/* What a finalized operation graph computes, shared (reference counted) by the descriptors built on it. */
typedef struct {
    int refs;                          /* atomic */
    int nops;
    hb_gop ops[HB_GRAPH_MAX_OPS];
    /* The analysis at Finalize. supported == 0: no engine takes the graph (ENGINE_GLOBAL_COUNT is 0). */
    int supported;
    int conv;                          /* index of the convolution op */
    hb_op op;
    hb_problem prob;                   /* the convolution, ready for the kernels */
    double alpha, beta;                /* of the convolution */
    int y_virtual;                     /* the convolution writes a virtual tensor (kept in the workspace) */
    size_t y_bytes;                    /* bytes of that tensor */
    /* wide: 16-bit x and w, a virtual FLOAT result (PyTorch's fused graphs). The engines convert x and w to float
     * in their workspace and run the float convolution fprob, so the pointwise ops read the result unrounded. */
    int wide;
    hb_problem fprob;
    size_t x_span, w_span;             /* elements from x's (w's) first to last, strides included */
    int npw, pw[HB_GRAPH_MAX_OPS];     /* pointwise ops after the convolution, in an order that computes them */
    int down_convert;                  /* a 16-bit result rounded before wider math (a virtual DOUBLE result) */
} hb_graph;

/* An engine as resolved at its Finalize (shared by engine, configuration and plan descriptors). */
typedef struct {
    hb_graph *g;                       /* counted reference */
    int64_t index;
    const hb_algo *algo;
    size_t algo_ws, ws;                /* the algorithm's workspace; the plan's (plus the virtual tensor) */
    int nnotes, notes[HB_MAX_NOTES];
} hb_gengine;

/* A backend descriptor. */
typedef struct hb_bd {
    uint32_t magic;
    int type;
    int finalized;
    union {
        hb_gtensor tensor;
        hb_gconv conv;
        hb_gpw pw;
        hb_gop op;
        struct {
            hb_gop *ops;               /* pending until Finalize */
            int nops;
            cudnnHandle_t handle;
            hb_graph *g;               /* once finalized */
        } graph;
        struct {
            int has_graph;             /* set: g is the graph if it was finalized, else NULL */
            hb_graph *g;
            int mode;
            int n, idx[CUDNN_CONVOLUTION_FWD_ALGO_COUNT]; /* the results: engine indices, best first */
        } heur;
        struct {
            int has_graph, has_index;
            hb_graph *g;
            int64_t index;
            int32_t sm_count;
            hb_gengine e;              /* once finalized */
        } engine;
        struct {
            int has_engine;            /* set: e.g is non-NULL if the engine was finalized */
            hb_gengine e;
        } cfg;
        struct {
            int has_type, has_value;
            int32_t type;              /* any value: cuDNN 9.28 takes knob types outside its enum too */
            int64_t value;
        } knob;
        struct {
            cudnnHandle_t handle;
            int has_handle, has_cfg;   /* has_cfg: e.g is non-NULL if the configuration was finalized */
            hb_gengine e;
        } plan;
        struct {
            int64_t nuids, nptrs;      /* -1: not set */
            int64_t *uids;
            void **ptrs;
            void *ws;
        } vp;
    } u;
} hb_bd;

static inline int hb_bd_ok(const hb_bd *d) { return d && d->magic == HB_MAGIC_BACKEND; }

/* b rounded up to 64 bytes, saturating: where a plan's workspace puts the convolution's virtual output. */
static inline size_t hb_align64(size_t b) { return b > SIZE_MAX - 64 ? SIZE_MAX : (b + 63) & ~(size_t)63; }

/* ---- attribute plumbing (hb_graph_api.c) ---- */

/* A value a Get answers: `count` elements of `elem_size` bytes at `data` (or in `buf`), or, for descriptor-valued
 * attributes (fill != NULL), `count` descriptors that fill(src, i, arg, dst) writes into the caller's descriptors
 * (dst already checked to be of the attribute's kind). */
typedef struct {
    const void *data;
    int64_t count;
    size_t elem_size;
    unsigned char buf[64];
    int arg;
    cudnnStatus_t (*fill)(const hb_bd *src, int64_t i, int arg, hb_bd *dst);
} hb_aval;

/* Element size of an attribute type, 0 for types the backend does not take. */
size_t hb_attr_elem_size(int type);
/* ---- the shared objects (hb_graph_obj.c) ---- */

/* Reset a descriptor's contents (references released, memory freed), keeping its type. */
void hb_bd_clear(hb_bd *d);
/* Reference counting of the shared graph (NULL is ignored); engines hold one reference each. */
hb_graph *hb_graph_ref(hb_graph *g);
void hb_graph_unref(hb_graph *g);
void hb_engine_copy(hb_gengine *dst, const hb_gengine *src);
void hb_engine_unref(hb_gengine *e);

/* Scalar readers for the element types (elems already checked non-NULL). */
static inline int64_t hb_elem_i64(const void *e) { return *(const int64_t *)e; }
static inline int hb_elem_enum(const void *e) { return *(const int32_t *)e; }

/* ---- per-descriptor-type behaviour (hb_graph_desc.c, hb_graph_build.c, hb_graph_exec.c) ---- */
/* set: the attribute's name, type and elements already checked against its table entry (type accepted, count in
 * range, elements non-NULL, descriptor elements of the right kind). get: fill *v. */
#define HB_DESC_BEHAVIOUR(kind)                                                                              \
    cudnnStatus_t hb_##kind##_set(hb_bd *d, int name, int type, int64_t count, const void *elems);              \
    cudnnStatus_t hb_##kind##_get(const hb_bd *d, int name, int type, hb_aval *v);                              \
    cudnnStatus_t hb_##kind##_finalize(hb_bd *d);
HB_DESC_BEHAVIOUR(tensor)
HB_DESC_BEHAVIOUR(conv)
HB_DESC_BEHAVIOUR(op)
HB_DESC_BEHAVIOUR(graph)
HB_DESC_BEHAVIOUR(engine)
HB_DESC_BEHAVIOUR(heur)
HB_DESC_BEHAVIOUR(cfg)
HB_DESC_BEHAVIOUR(knob)
HB_DESC_BEHAVIOUR(plan)
HB_DESC_BEHAVIOUR(vp)
#undef HB_DESC_BEHAVIOUR
/* A pointwise descriptor cannot be read back. */
cudnnStatus_t hb_pw_set(hb_bd *d, int name, int type, int64_t count, const void *elems);
cudnnStatus_t hb_pw_finalize(hb_bd *d);

/* ---- shared by the graph files ---- */

/* Byte size of a tensor element (0 for data types the backend cannot hold). */
size_t hb_gdtype_size(int dtype);
/* Whether a pointwise mode takes a second input (B). */
int hb_pw_binary(int mode);
/* Whether the backend computes a pointwise mode (hb_graph_analyse.c). */
int hb_pw_supported(int mode);
/* What a finalized operation graph computes (g->conv, prob, pw order...): 1 when the backend computes it. */
int hb_graph_analyse(hb_graph *g);
/* Elements a tensor's buffer spans (1 + sum (dim - 1) * stride; 0 if a dim is 0 or the sum overflows). */
int64_t hb_gtensor_span(const hb_gtensor *t);
/* The tensors an op reads and the one it writes (roles, -1 past the end); pointwise ops read B only when binary. */
int hb_op_inputs(const hb_gop *o, int roles[3]);
int hb_op_output(const hb_gop *o);

/* Data pointers of a graph's tensors at execution: uid and pointer of each non-virtual tensor. */
typedef struct {
    int n;
    int64_t uid[3 * HB_GRAPH_MAX_OPS];
    void *ptr[3 * HB_GRAPH_MAX_OPS];
} hb_binding;
/* The pointwise ops after the convolution (hb_graph_pw.c): the convolution's result is at `yconv`; a tensor's
 * pointer by its uid (NULL if not bound). */
void *hb_binding_find(const hb_binding *b, int64_t uid);
void hb_pointwise_run(const hb_graph *g, const hb_binding *b, const void *yconv);

#endif /* UCUDNN_HB_GRAPH_H */
