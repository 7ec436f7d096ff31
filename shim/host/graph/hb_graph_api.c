/*
 * Host backend: the exported cudnnBackend* calls (see hb_graph.h). This file owns the descriptor life cycle
 * and the checks every Set/Get shares, driven by one table of attributes per descriptor type.
 *
 * Statuses are the real cuDNN 9 library's, measured on libcudnn.so.9 9.28 without a GPU (stand-in libcuda and
 * libcublasLt let it finalize; tests/realcudnn/test_status_parity.py and test_fuzz_parity.py compare the two
 * libraries), including its per-attribute quirks (a wrong attribute type is BAD_PARAM_ATTRIBUTE_TYPE for tensor
 * and convolution attributes but BAD_PARAM for operation attributes, NOT_SUPPORTED for variant-pack ones and
 * backward data's alpha and beta; a tensor's byte alignment, every pointwise attribute and a pointwise operation's
 * alphas cannot be read back; docs/host-backend.md lists the rest). Where the real library crashes (NULL out
 * pointers, a NULL descriptor to Finalize, an engine configuration finalized without an engine), we answer
 * BAD_PARAM_NULL_POINTER, as it does for a NULL descriptor to Set and Destroy.
 *
 * Order of the Set checks: descriptor (NULL: BAD_PARAM_NULL_POINTER), finalized (BAD_PARAM), attribute known
 * (else the type's status), settable (else NOT_SUPPORTED), no elements where AF_EMPTY_FIRST (BAD_PARAM), attribute
 * type, element count, elements non-NULL
 * (BAD_PARAM), descriptor elements of the right kind (BAD_PARAM). Get: descriptor (NULL: BAD_PARAM), not finalized
 * (NOT_INITIALIZED), attribute known, readable (else NOT_SUPPORTED), type, then counts: a NULL array answers the
 * element count; a single-valued attribute must be asked for exactly 1 element; an array gets min(requested,
 * count) elements and that number back.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hb_graph.h"

#define AF_SET 1u
#define AF_GET 2u
#define AF_EMPTY_FIRST 4u      /* Set: no elements is BAD_PARAM before the type is checked */
#define ANY_OP (-2)            /* desc: any OPERATION_* descriptor */

typedef struct {
    int name;
    int type, type2;           /* accepted attribute types (type2 -1: one only) */
    cudnnStatus_t wrong_type;  /* status for another attribute type */
    int64_t min_count, max_count; /* elements Set accepts; max 0: no bound here */
    unsigned flags;
    int desc;                  /* descriptor-valued: the descriptor type of the elements */
    cudnnStatus_t null_desc;   /* a NULL descriptor element: this status, SUCCESS = leave the attribute unset */
    int get_type;              /* the one type Get accepts where it is not Set's (-1: Set's) */
    cudnnStatus_t get_wrong;   /* Get's status for another type where it is not Set's (SUCCESS: Set's) */
} aspec;

#define BAD CUDNN_STATUS_BAD_PARAM
#define BADTYPE CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE
#define NSUP CUDNN_STATUS_NOT_SUPPORTED
#define OK CUDNN_STATUS_SUCCESS
#define RW (AF_SET | AF_GET)

/* Plain values: name, type, wrong-type status, counts, flags. Descriptor values: also the element kind. */
#define V(n, t, w, lo, hi, f) {n, t, -1, w, lo, hi, f, -1, OK, -1, OK}
#define V2(n, t, t2, w, f) {n, t, t2, w, 1, 1, f, -1, OK, -1, OK}
#define D(n, k, lo, hi, f, nul) {n, CUDNN_TYPE_BACKEND_DESCRIPTOR, -1, BAD, lo, hi, f, k, nul, -1, OK}
/* Values whose Get checks the type otherwise than Set: Get accepts type gt only (-1: Set's), else answers gw. */
#define VG(n, t, w, gt, gw, f) {n, t, -1, w, 1, 1, f, -1, OK, gt, gw}
#define V2G(n, t, t2, w, gw, f) {n, t, t2, w, 1, 1, f, -1, OK, -1, gw}

static const aspec tensor_attrs[] = {
    V(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, BADTYPE, 1, 1, AF_SET),
    V(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, BADTYPE, 1, 1, RW),
    V(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, BADTYPE, 1, 0, RW),
    V(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, BADTYPE, 1, 0, RW),
    V(CUDNN_ATTR_TENSOR_VECTOR_COUNT, CUDNN_TYPE_INT64, BADTYPE, 1, 1, RW),
    V(CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION, CUDNN_TYPE_INT64, BADTYPE, 1, 1, RW),
    V(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, BADTYPE, 1, 1, RW),
    V(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, BADTYPE, 1, 1, RW),
    V(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, BADTYPE, 1, 1, RW),
    V(CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, BADTYPE, 1, 1, RW),
};

static const aspec conv_attrs[] = {
    V(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, BADTYPE, 1, 1, RW),
    /* Read back as a DATA_TYPE only, and a wrong type for the spatial dimension count is BAD_PARAM on Set but
     * BAD_PARAM_ATTRIBUTE_TYPE on Get (9.28, tests/realcudnn/test_fuzz_parity.py). */
    VG(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, BADTYPE, CUDNN_TYPE_DATA_TYPE, BADTYPE, RW),
    V(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, BADTYPE, 1, 0, RW),
    V(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, BADTYPE, 1, 0, RW),
    V(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, BADTYPE, 1, 0, RW),
    V(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, BADTYPE, 1, 0, RW),
    VG(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, BAD, CUDNN_TYPE_INT64, BADTYPE, RW),
};

static const aspec pw_attrs[] = {
    V(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, BAD, 1, 1, AF_SET),
    V(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, BAD, 1, 1, AF_SET),
    V(CUDNN_ATTR_POINTWISE_NAN_PROPAGATION, CUDNN_TYPE_NAN_PROPOGATION, BAD, 1, 1, AF_SET),
    V2(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_DOUBLE, CUDNN_TYPE_FLOAT, BAD, AF_SET),
    V2(CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, CUDNN_TYPE_FLOAT, BAD, AF_SET),
    V2(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, CUDNN_TYPE_DOUBLE, CUDNN_TYPE_FLOAT, BAD, AF_SET),
    V2(CUDNN_ATTR_POINTWISE_ELU_ALPHA, CUDNN_TYPE_DOUBLE, CUDNN_TYPE_FLOAT, BAD, AF_SET),
    V2(CUDNN_ATTR_POINTWISE_SOFTPLUS_BETA, CUDNN_TYPE_DOUBLE, CUDNN_TYPE_FLOAT, BAD, AF_SET),
    V2(CUDNN_ATTR_POINTWISE_SWISH_BETA, CUDNN_TYPE_DOUBLE, CUDNN_TYPE_FLOAT, BAD, AF_SET),
    V(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, BAD, 1, 1, AF_SET),
};

/* The three convolution operations share a layout: base + 0 alpha, 1 beta, 2 conv, 3 W, 4 X, 5 Y (forward);
 * backward data: W, DX, DY; backward filter: DW, X, DY. Backward data answers NOT_SUPPORTED for a wrong alpha or
 * beta type at Set (but BAD_PARAM for none at all, before the type), and all three BAD_PARAM at Get (measured). */
#define CONV_OP(base, wrong_scale, scale_flags)                                                                  \
    {                                                                                                            \
        V2G(base, CUDNN_TYPE_FLOAT, CUDNN_TYPE_DOUBLE, wrong_scale, BAD, RW | (scale_flags)),                    \
            V2G(base + 1, CUDNN_TYPE_FLOAT, CUDNN_TYPE_DOUBLE, wrong_scale, BAD, RW | (scale_flags)),            \
            D(base + 2, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, 1, 1, RW, BAD),                                    \
            D(base + 3, CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, RW, OK),                                          \
            D(base + 4, CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, RW, OK),                                          \
            D(base + 5, CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, RW, OK),                                          \
    }
static const aspec fwd_attrs[] = CONV_OP(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, BAD, 0);
static const aspec bwd_data_attrs[] = CONV_OP(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, NSUP, AF_EMPTY_FIRST);
static const aspec bwd_filter_attrs[] = CONV_OP(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, BAD, 0);

static const aspec pwop_attrs[] = {
    D(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, 1, 1, RW, OK), /* optional */
    D(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, RW, OK),
    D(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, RW, OK),
    D(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, RW, OK),
    V2(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, CUDNN_TYPE_DOUBLE, BAD, AF_SET), /* not read back */
    V2(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, CUDNN_TYPE_DOUBLE, BAD, AF_SET),
    D(CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, RW, OK),
    D(CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, RW, OK),
    D(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, RW, OK),
};

static const aspec graph_attrs[] = {
    V(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, BAD, 1, 1, AF_SET),
    D(CUDNN_ATTR_OPERATIONGRAPH_OPS, ANY_OP, 1, 0, AF_SET, CUDNN_STATUS_BAD_PARAM_NULL_POINTER),
    V(CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, BADTYPE, 1, 1, AF_GET),
};

static const aspec engine_attrs[] = {
    D(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, 1, 1, RW, OK),
    V(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, BADTYPE, 1, 1, RW),
    D(CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, 0, 0, AF_GET, BAD),
    V(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, BADTYPE, 0, 0, AF_GET),
    V(CUDNN_ATTR_ENGINE_LAYOUT_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR, BAD, 1, 1, 0),
    V(CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, BADTYPE, 0, 0, AF_GET),
    V(CUDNN_ATTR_ENGINE_SM_COUNT_TARGET, CUDNN_TYPE_INT32, BADTYPE, 1, 1, RW),
};

static const aspec heur_attrs[] = {
    V(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, BAD, 1, 1, RW),
    D(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, 1, 1, RW, OK),
    D(CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, 0, 0, AF_GET, BAD),
    V(CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET, CUDNN_TYPE_INT32, BAD, 1, 1, AF_SET),
};

static const aspec cfg_attrs[] = {
    D(CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_BACKEND_ENGINE_DESCRIPTOR, 1, 1, RW, OK),
    V(CUDNN_ATTR_ENGINECFG_INTERMEDIATE_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR, BAD, 1, 1, 0),
    D(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, 0, 0, RW, BAD),
    V(CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, BADTYPE, 1, 1, AF_GET),
    V(CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED, CUDNN_TYPE_INT32, BADTYPE, 1, 1, AF_GET),
};

static const aspec knob_attrs[] = {
    V(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, BADTYPE, 1, 1, RW),
    V(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, BADTYPE, 1, 1, RW),
};

static const aspec plan_attrs[] = {
    V(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, BAD, 1, 1, AF_SET),
    D(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, 1, 1, RW, OK),
    V(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, BADTYPE, 1, 1, AF_GET),
    V(CUDNN_ATTR_EXECUTION_PLAN_COMPUTED_INTERMEDIATE_UIDS, CUDNN_TYPE_INT64, BAD, 0, 0, 0),
    V(CUDNN_ATTR_EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS, CUDNN_TYPE_INT64, BAD, 0, 0, 0),
    V(CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, BAD, 0, 0, 0),
};

static const aspec vp_attrs[] = {
    V(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, NSUP, 1, 0, AF_SET),
    V(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, NSUP, 1, 0, AF_SET),
    V(CUDNN_ATTR_VARIANT_PACK_INTERMEDIATES, CUDNN_TYPE_VOID_PTR, NSUP, 0, 0, 0),
    V(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, NSUP, 1, 1, RW),
};

/* Per descriptor type: its attributes, the status for an attribute it does not know, and its behaviour. */
typedef struct {
    int type;
    const aspec *attrs;
    size_t nattrs;
    cudnnStatus_t unknown;
    cudnnStatus_t (*set)(hb_bd *, int, int, int64_t, const void *);
    cudnnStatus_t (*get)(const hb_bd *, int, int, hb_aval *);
    cudnnStatus_t (*finalize)(hb_bd *);
} dkind;

#define N(a) a, sizeof a / sizeof a[0]
static const dkind kinds[] = {
    {CUDNN_BACKEND_POINTWISE_DESCRIPTOR, N(pw_attrs), BAD, hb_pw_set, NULL, hb_pw_finalize},
    {CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, N(conv_attrs), BAD, hb_conv_set, hb_conv_get, hb_conv_finalize},
    {CUDNN_BACKEND_ENGINE_DESCRIPTOR, N(engine_attrs), BAD, hb_engine_set, hb_engine_get, hb_engine_finalize},
    {CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, N(cfg_attrs), BAD, hb_cfg_set, hb_cfg_get, hb_cfg_finalize},
    {CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, N(heur_attrs), BAD, hb_heur_set, hb_heur_get, hb_heur_finalize},
    {CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, N(plan_attrs), BAD, hb_plan_set, hb_plan_get, hb_plan_finalize},
    /* A knob choice is set and finalized as cuDNN's (cudnn_frontend's create_execution_plan(engine, knobs) makes
     * them); no engine here has knobs, so a configuration refuses any. Knob infos and layout infos exist so
     * cudnn_frontend can create them to read an engine's (empty) lists: nothing is set on them, they never
     * finalize. */
    {CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, N(knob_attrs), BAD, hb_knob_set, hb_knob_get, hb_knob_finalize},
    {CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, NULL, 0, BAD, NULL, NULL, NULL},
    {CUDNN_BACKEND_LAYOUT_INFO_DESCRIPTOR, NULL, 0, BAD, NULL, NULL, NULL},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, N(fwd_attrs), BAD, hb_op_set, hb_op_get, hb_op_finalize},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, N(bwd_filter_attrs), NSUP, hb_op_set, hb_op_get,
     hb_op_finalize},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, N(bwd_data_attrs), BAD, hb_op_set, hb_op_get,
     hb_op_finalize},
    {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, N(pwop_attrs), BAD, hb_op_set, hb_op_get, hb_op_finalize},
    {CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, N(graph_attrs), BAD, hb_graph_set, hb_graph_get, hb_graph_finalize},
    {CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, N(vp_attrs), NSUP, hb_vp_set, hb_vp_get, hb_vp_finalize},
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, N(tensor_attrs), BAD, hb_tensor_set, hb_tensor_get, hb_tensor_finalize},
};

/* The last descriptor type value of the cuDNN 9.28 header; larger (or negative) values are not types at all. */
#define HB_LAST_BACKEND_TYPE 50

static const dkind *kind_of(int type) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].type == type) return &kinds[i];
    return NULL;
}

static const aspec *spec_of(const dkind *k, int name) {
    for (size_t i = 0; i < k->nattrs; i++)
        if (k->attrs[i].name == name) return &k->attrs[i];
    return NULL;
}

static int is_op_type(int type) {
    return type == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR ||
           type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR ||
           type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR ||
           type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR;
}

size_t hb_attr_elem_size(int type) {
    switch (type) {
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_VOID_PTR:
    case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(void *);
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_CHAR: return 1;
    case CUDNN_TYPE_INT64:
    case CUDNN_TYPE_DOUBLE: return 8;
    case CUDNN_TYPE_FLOAT:
    case CUDNN_TYPE_INT32: return 4;
    default: return type >= 0 && type <= CUDNN_TYPE_CHAR ? 4 : 0; /* the enum-valued types */
    }
}

static void init_defaults(hb_bd *d) {
    switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
        d->u.tensor.uid = -1;
        d->u.tensor.vec_count = 1;
        d->u.tensor.vec_dim = -1;
        break;
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: d->u.conv.mode = CUDNN_CONVOLUTION; break;
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
        d->u.pw.upper_clip = 3.4028234663852886e38; /* FLT_MAX, the documented default */
        d->u.pw.elu_alpha = d->u.pw.softplus_beta = d->u.pw.swish_beta = 1.0;
        d->u.pw.axis = -1;
        break;
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: d->u.engine.index = -1; break;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: d->u.heur.mode = CUDNN_HEUR_MODES_COUNT; break;
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: d->u.vp.nuids = d->u.vp.nptrs = -1; break;
    default:
        if (is_op_type(d->type)) d->u.op.kind = d->type;
        break;
    }
}

/*
 * Destroyed descriptors are recycled last in, first out (a bounded list), as a caching allocator hands a freed
 * block out again: a framework that destroys and re-creates descriptors gets old addresses back, the condition a
 * library underneath must survive (tests/preload/test_graph_by_value.py), whatever malloc would have done.
 */
#define HB_RECYCLED_MAX 64
static pthread_mutex_t recycled_mu = PTHREAD_MUTEX_INITIALIZER;
static hb_bd *recycled[HB_RECYCLED_MAX];
static int nrecycled;

static hb_bd *bd_alloc(void) {
    hb_bd *d = NULL;
    pthread_mutex_lock(&recycled_mu);
    if (nrecycled > 0) d = recycled[--nrecycled];
    pthread_mutex_unlock(&recycled_mu);
    if (!d) return calloc(1, sizeof *d);
    memset(d, 0, sizeof *d);
    return d;
}

static void bd_free(hb_bd *d) {
    pthread_mutex_lock(&recycled_mu);
    if (nrecycled < HB_RECYCLED_MAX) {
        recycled[nrecycled++] = d;
        d = NULL;
    }
    pthread_mutex_unlock(&recycled_mu);
    free(d);
}

static cudnnStatus_t create_desc(int type, cudnnBackendDescriptor_t *descriptor) {
    /* Not a descriptor type at all: what the real library answers (it fails to allocate one). */
    if (type < 0 || type > HB_LAST_BACKEND_TYPE) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    if (!descriptor) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!kind_of(type)) return CUDNN_STATUS_NOT_SUPPORTED;
    hb_bd *d = bd_alloc();
    if (!d) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    d->magic = HB_MAGIC_BACKEND;
    d->type = type;
    init_defaults(d);
    *descriptor = d;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t destroy_desc(hb_bd *d) {
    if (!d) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!hb_bd_ok(d)) return CUDNN_STATUS_BAD_PARAM;
    hb_bd_clear(d);
    d->magic = 0;
    bd_free(d);
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t initialize_desc(hb_bd *d) {
    if (!d) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!hb_bd_ok(d)) return CUDNN_STATUS_BAD_PARAM;
    hb_bd_clear(d);
    init_defaults(d);
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t finalize_desc(hb_bd *d) {
    if (!d) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!hb_bd_ok(d) || d->finalized) return CUDNN_STATUS_BAD_PARAM;
    const dkind *k = kind_of(d->type);
    if (!k->finalize) return CUDNN_STATUS_BAD_PARAM; /* knob infos and layout infos are filled, not finalized */
    cudnnStatus_t st = k->finalize(d);
    if (st == CUDNN_STATUS_SUCCESS) d->finalized = 1;
    return st;
}

/* Descriptor elements: each non-NULL one of the kind the attribute takes. */
static cudnnStatus_t check_desc_elems(const aspec *s, int64_t count, const void *elems) {
    hb_bd *const *e = elems;
    for (int64_t i = 0; i < count; i++) {
        if (!e[i]) {
            if (s->null_desc != CUDNN_STATUS_SUCCESS) return s->null_desc;
            continue;
        }
        if (!hb_bd_ok(e[i])) return CUDNN_STATUS_BAD_PARAM;
        if (s->desc == ANY_OP ? !is_op_type(e[i]->type) : e[i]->type != s->desc) return CUDNN_STATUS_BAD_PARAM;
    }
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t set_attribute(hb_bd *d, cudnnBackendAttributeName_t attributeName,
                                  cudnnBackendAttributeType_t attributeType, int64_t elementCount,
                                  const void *arrayOfElements) {
    if (!d) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!hb_bd_ok(d) || d->finalized) return CUDNN_STATUS_BAD_PARAM;
    const dkind *k = kind_of(d->type);
    const aspec *s = spec_of(k, (int)attributeName);
    if (!s) return k->unknown;
    if (!(s->flags & AF_SET)) return CUDNN_STATUS_NOT_SUPPORTED;
    int type = (int)attributeType;
    if ((s->flags & AF_EMPTY_FIRST) && elementCount < 1) return CUDNN_STATUS_BAD_PARAM;
    if (type != s->type && type != s->type2) return s->wrong_type;
    if (elementCount < s->min_count || (s->max_count && elementCount > s->max_count)) return CUDNN_STATUS_BAD_PARAM;
    if (!arrayOfElements && elementCount > 0) return CUDNN_STATUS_BAD_PARAM;
    if (s->desc != -1) {
        cudnnStatus_t st = check_desc_elems(s, elementCount, arrayOfElements);
        if (st != CUDNN_STATUS_SUCCESS) return st;
    }
    return k->set(d, s->name, type, elementCount, arrayOfElements);
}

/* Copy a Get's answer out (see the file comment for the counting rules). */
static cudnnStatus_t answer(const aspec *s, const hb_aval *v, int64_t requested, int64_t *count, void *elems,
                            const hb_bd *src) {
    if (!elems) {
        if (count) *count = v->count;
        return CUDNN_STATUS_SUCCESS;
    }
    if (requested < 0 || (s->max_count == 1 && requested != 1)) return CUDNN_STATUS_BAD_PARAM;
    int64_t n = requested < v->count ? requested : v->count;
    if (v->fill) {
        hb_bd **out = elems;
        for (int64_t i = 0; i < n; i++)
            if (!hb_bd_ok(out[i]) || (s->desc != ANY_OP && out[i]->type != s->desc)) return CUDNN_STATUS_BAD_PARAM;
        for (int64_t i = 0; i < n; i++) {
            cudnnStatus_t st = v->fill(src, i, v->arg, out[i]);
            if (st != CUDNN_STATUS_SUCCESS) return st;
        }
    } else if (n > 0) {
        memcpy(elems, v->data ? v->data : v->buf, (size_t)n * v->elem_size);
    }
    if (count) *count = n;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t get_attribute(const hb_bd *d, cudnnBackendAttributeName_t attributeName,
                                  cudnnBackendAttributeType_t attributeType, int64_t requestedElementCount,
                                  int64_t *elementCount, void *arrayOfElements) {
    if (!hb_bd_ok(d)) return CUDNN_STATUS_BAD_PARAM;
    if (!d->finalized) return CUDNN_STATUS_NOT_INITIALIZED;
    const dkind *k = kind_of(d->type);
    const aspec *s = spec_of(k, (int)attributeName);
    if (!s) return k->unknown;
    if (!(s->flags & AF_GET) || !k->get) return CUDNN_STATUS_NOT_SUPPORTED;
    int type = (int)attributeType;
    if (s->get_type >= 0 ? type != s->get_type : type != s->type && type != s->type2)
        return s->get_wrong != OK ? s->get_wrong : s->wrong_type;
    if (!elementCount && !arrayOfElements) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    hb_aval v;
    memset(&v, 0, sizeof v);
    v.elem_size = hb_attr_elem_size(type);
    cudnnStatus_t st = k->get(d, s->name, type, &v);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return answer(s, &v, requestedElementCount, elementCount, arrayOfElements, d);
}

/* ---- the exported calls: each failure leaves its message for cudnnGetLastErrorString ---- */

/* The descriptor's type for a message, -1 when it is not a descriptor of this library. */
static int type_of(const hb_bd *d) { return hb_bd_ok(d) ? d->type : -1; }

HB_EXPORT cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t descriptorType,
                                                     cudnnBackendDescriptor_t *descriptor) {
    cudnnStatus_t st = create_desc((int)descriptorType, descriptor);
    return st ? hb_note(st, "cudnnBackendCreateDescriptor: descriptor type %d", (int)descriptorType) : st;
}

HB_EXPORT cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
    int type = type_of(descriptor);
    cudnnStatus_t st = destroy_desc(descriptor);
    return st ? hb_note(st, "cudnnBackendDestroyDescriptor: descriptor type %d", type) : st;
}

HB_EXPORT cudnnStatus_t cudnnBackendInitialize(cudnnBackendDescriptor_t descriptor) {
    cudnnStatus_t st = initialize_desc(descriptor);
    return st ? hb_note(st, "cudnnBackendInitialize: descriptor type %d", type_of(descriptor)) : st;
}

HB_EXPORT cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
    cudnnStatus_t st = finalize_desc(descriptor);
    return st ? hb_note(st, "cudnnBackendFinalize: descriptor type %d", type_of(descriptor)) : st;
}

HB_EXPORT cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                                 cudnnBackendAttributeName_t attributeName,
                                                 cudnnBackendAttributeType_t attributeType, int64_t elementCount,
                                                 const void *arrayOfElements) {
    cudnnStatus_t st = set_attribute(descriptor, attributeName, attributeType, elementCount, arrayOfElements);
    if (st == CUDNN_STATUS_SUCCESS) return st;
    return hb_note(st, "cudnnBackendSetAttribute: attribute %d (type %d, %lld elements) of descriptor type %d",
                   (int)attributeName, (int)attributeType, (long long)elementCount, type_of(descriptor));
}

HB_EXPORT cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                                 cudnnBackendAttributeName_t attributeName,
                                                 cudnnBackendAttributeType_t attributeType,
                                                 int64_t requestedElementCount, int64_t *elementCount,
                                                 void *arrayOfElements) {
    cudnnStatus_t st =
        get_attribute(descriptor, attributeName, attributeType, requestedElementCount, elementCount, arrayOfElements);
    if (st == CUDNN_STATUS_SUCCESS) return st;
    return hb_note(st, "cudnnBackendGetAttribute: attribute %d (type %d) of descriptor type %d", (int)attributeName,
                   (int)attributeType, type_of(descriptor));
}
