/*
 * The graph-API path of the preload library: what it records of the cuDNN backend descriptors a framework builds
 * (cudnn_frontend, PyTorch's default convolution path), and the graph it resolves at a plan's Finalize.
 *
 * Values of the cuDNN 9 backend enums the shim reads (facts from cudnn_graph.h of the nvidia-cudnn wheel;
 * tests/preload/test_graph_record.py checks each against the header when the wheel is installed).
 */
#ifndef UC_GRAPH_H
#define UC_GRAPH_H

#include <stddef.h>
#include <stdint.h>

/* cudnnBackendDescriptorType_t */
enum {
    UC_BK_POINTWISE = 0,
    UC_BK_CONVOLUTION = 1,
    UC_BK_ENGINE = 2,
    UC_BK_ENGINECFG = 3,
    UC_BK_ENGINEHEUR = 4,
    UC_BK_EXECUTION_PLAN = 5,
    UC_BK_OP_CONV_FWD = 10,
    UC_BK_OP_CONV_BWD_FILTER = 11,
    UC_BK_OP_CONV_BWD_DATA = 12,
    UC_BK_OP_POINTWISE = 13,
    UC_BK_OPERATIONGRAPH = 15,
    UC_BK_VARIANT_PACK = 16,
    UC_BK_TENSOR = 17,
};

/* cudnnBackendAttributeType_t: the element types the shim copies (others make an attribute opaque). */
enum {
    UC_AT_HANDLE = 0,
    UC_AT_DATA_TYPE = 1,
    UC_AT_BOOLEAN = 2,
    UC_AT_INT64 = 3,
    UC_AT_FLOAT = 4,
    UC_AT_DOUBLE = 5,
    UC_AT_VOID_PTR = 6,
    UC_AT_CONVOLUTION_MODE = 7,
    UC_AT_NUMERICAL_NOTE = 11,
    UC_AT_POINTWISE_MODE = 14,
    UC_AT_BACKEND_DESCRIPTOR = 15,
    UC_AT_INT32 = 23,
    UC_AT_CHAR = 24,
};

/* cudnnBackendAttributeName_t */
enum {
    UC_A_POINTWISE_MODE = 0,
    UC_A_CONV_COMP_TYPE = 100,
    UC_A_CONV_MODE = 101,
    UC_A_CONV_DILATIONS = 102,
    UC_A_CONV_FILTER_STRIDES = 103,
    UC_A_CONV_POST_PADDINGS = 104,
    UC_A_CONV_PRE_PADDINGS = 105,
    UC_A_CONV_SPATIAL_DIMS = 106,
    UC_A_ENGINEHEUR_OPERATION_GRAPH = 201,
    UC_A_ENGINEHEUR_RESULTS = 202,
    UC_A_ENGINECFG_ENGINE = 300,
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
    UC_A_OPERATIONGRAPH_HANDLE = 800,
    UC_A_OPERATIONGRAPH_OPS = 801,
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

/* ---- the record of descriptors as they are built (uc_graph_rec.c) ---- */

/* Bounds: a descriptor's attributes beyond these make it opaque (its graph passes through). */
#define UC_GREC_MAX_ATTRS 24
#define UC_GREC_MAX_BYTES 4096
/* Descriptors recorded at once; more are not recorded (their graphs pass through, counted). */
#define UC_GREC_MAX_RECORDS 65536

/* One attribute as last set: `count` elements of `type`, copied. */
typedef struct {
    int32_t name, type;
    int64_t count;
    uint32_t bytes;
    unsigned char *data;
} uc_gattr;

/* Size in bytes of one element of an attribute type, 0 if the shim does not copy that type. */
size_t uc_gattr_elem_size(int type);

void uc_grec_created(void *desc, int type);
void uc_grec_destroyed(void *desc);
/* Copies the attribute (or marks the descriptor opaque when it cannot). */
void uc_grec_set(void *desc, int name, int type, int64_t count, const void *elems);
void uc_grec_finalized(void *desc);
/* Link a descriptor cuDNN filled itself (a heuristics result) to the operation graph it was made for. */
void uc_grec_link_graph(void *desc, void *opgraph);

/* A snapshot of one record: its type (-1 unknown), whether opaque/finalized, and one attribute (copied into
 * buf, at most cap bytes). Returns the element count, or -1 when the record or the attribute is absent. */
int uc_grec_type(void *desc, int *opaque, int *finalized);
int64_t uc_grec_get(void *desc, int name, int *type, void *buf, size_t cap);
/* The operation graph a descriptor was linked to (uc_grec_link_graph), or NULL. */
void *uc_grec_linked_graph(void *desc);
size_t uc_grec_count(void);

#endif /* UC_GRAPH_H */
