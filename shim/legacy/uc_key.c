/*
 * Kernel keys: what the real library reports about a call's descriptors, nothing dropped (the original lost
 * groups and dilation and handled 4-D only), the plan-cache keys made of them, and descriptor clones at another
 * batch size.
 *
 * The binary uc_kernel is what the hot path hashes and compares (no formatting on a cache hit); the canonical
 * text key is made only on a miss, for the planner and the SQLite cache.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uc_legacy.h"

size_t uc_dtype_size(int dtype)
{
    switch (dtype) {
    case CUDNN_DATA_DOUBLE:
    case CUDNN_DATA_INT64:
        return 8;
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_INT32:
        return 4;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16:
        return 2;
    default:
        return 1;
    }
}

static const char *dtype_name(int dtype, char *buf, size_t len)
{
    static const char *const names[] = {"float", "double", "half", "int8", "int32", NULL, "uint8", NULL, NULL,
                                        "bfloat16", "int64", "boolean", "fp8_e4m3", "fp8_e5m2"};
    if (dtype >= 0 && (size_t)dtype < sizeof names / sizeof names[0] && names[dtype])
        return names[dtype];
    snprintf(buf, len, "dtype%d", dtype);
    return buf;
}

const char *uc_op_name(int op)
{
    return op == UCUDNN_OP_FWD ? "fwd" : op == UCUDNN_OP_BWD_DATA ? "bwd_data" : "bwd_filter";
}

int uc_algo_count(int op)
{
    return op == UCUDNN_OP_FWD        ? CUDNN_CONVOLUTION_FWD_ALGO_COUNT
           : op == UCUDNN_OP_BWD_DATA ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT
                                      : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
}

static int read_tensor(const uc_real_table *r, cudnnTensorDescriptor_t d, uc_tensor *t)
{
    cudnnDataType_t dt = 0;
    int nb = 0;
    if (r->cudnnGetTensorNdDescriptor(d, UC_MAXD, &dt, &nb, t->dims, t->strides) != 0 || nb < 3 || nb > UC_MAXD)
        return -1;
    t->dtype = (int32_t)dt;
    t->nb = nb;
    for (int i = 0; i < nb; i++)
        if (t->dims[i] < 1 || t->strides[i] < 0)
            return -1;
    return 0;
}

static int same_shape(const uc_tensor *a, const uc_tensor *b)
{
    return a->dtype == b->dtype && a->nb == b->nb && memcmp(a->dims, b->dims, sizeof(int32_t) * (size_t)a->nb) == 0;
}

const char *uc_kernel_read(uc_kernel *k, int op, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                           cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y,
                           cudnnTensorDescriptor_t z)
{
    const uc_real_table *r = uc_real();
    memset(k, 0, sizeof *k);
    /* Set first: a call that cannot be planned is still forwarded by op. */
    k->biasact = op == UC_OP_BIASACT;
    k->op = k->biasact ? UCUDNN_OP_FWD : op;
    if (!r->descriptors)
        return "the real library lacks descriptor getters";
    if (!x || !w || !conv || !y || (op == UC_OP_BIASACT && !z))
        return "a NULL descriptor";
    if (read_tensor(r, x, &k->x) || read_tensor(r, y, &k->y))
        return "unreadable tensor descriptor";
    if (k->biasact && (read_tensor(r, z, &k->z) || !same_shape(&k->z, &k->y)))
        return "bias-activation z differs from y in type or shape";
    cudnnDataType_t wdt = 0, ct = 0;
    cudnnTensorFormat_t wfmt = 0;
    cudnnConvolutionMode_t mode = 0;
    cudnnMathType_t math = 0;
    int wnb = 0, cnb = 0, groups = 0;
    if (r->cudnnGetFilterNdDescriptor(w, UC_MAXD, &wdt, &wfmt, &wnb, k->wdims) != 0 || wnb < 3 || wnb > UC_MAXD)
        return "unreadable filter descriptor";
    if (r->cudnnGetConvolutionNdDescriptor(conv, UC_MAXD - 2, &cnb, k->pad, k->stride, k->dil, &mode, &ct) != 0 ||
        r->cudnnGetConvolutionGroupCount(conv, &groups) != 0 || r->cudnnGetConvolutionMathType(conv, &math) != 0)
        return "unreadable convolution descriptor";
    k->wdtype = (int32_t)wdt;
    k->wformat = (int32_t)wfmt;
    k->wnb = wnb;
    k->cnb = cnb;
    k->mode = (int32_t)mode;
    k->ctype = (int32_t)ct;
    k->groups = groups;
    k->math = (int32_t)math;
    if (k->x.nb != k->y.nb || k->x.nb != wnb || cnb != wnb - 2)
        return "descriptor ranks disagree";
    /* FLOAT, DOUBLE and the 16-bit HALF and BFLOAT16 (element size 2, float scaling factors). For 16-bit data
     * a micro-batched BackwardFilter rounds dw to 16 bits once per micro-batch (each accumulates onto the
     * previous one's stored result), where one undivided call rounds once: (m + 1) u of the partial sums for m
     * micro-batches, a documented tolerance (tests/preload/test_exec_16bit.py), not a bug. Forward and
     * BackwardData compute samples independently: with the same deterministic kernel they are bitwise equal. */
    if ((k->x.dtype != CUDNN_DATA_FLOAT && k->x.dtype != CUDNN_DATA_DOUBLE && k->x.dtype != CUDNN_DATA_HALF &&
         k->x.dtype != CUDNN_DATA_BFLOAT16) ||
        k->y.dtype != k->x.dtype || k->wdtype != k->x.dtype)
        return "unsupported data type";
    if (k->x.dims[0] != k->y.dims[0])
        return "x and y batch sizes differ";
    if (k->x.dims[0] < 2)
        return "batch size 1 cannot be divided";
    return NULL;
}

/* nStride is written as '*' when it is the packed span of one sample: such tensors share benchmarks across N. */
static void tensor_text(uc_sb *sb, const char *name, const uc_tensor *t)
{
    long long span = 1;
    for (int i = 1; i < t->nb; i++)
        span += (long long)(t->dims[i] - 1) * t->strides[i];
    uc_sb_printf(sb, ";%s=", name);
    for (int i = 1; i < t->nb; i++)
        uc_sb_printf(sb, "%s%d", i > 1 ? "," : "", t->dims[i]);
    if (t->strides[0] == span)
        uc_sb_printf(sb, "/*");
    else
        uc_sb_printf(sb, "/%d", t->strides[0]);
    for (int i = 1; i < t->nb; i++)
        uc_sb_printf(sb, ",%d", t->strides[i]);
}

static void ints_text(uc_sb *sb, const char *name, const int32_t *v, int n)
{
    uc_sb_printf(sb, ";%s=", name);
    for (int i = 0; i < n; i++)
        uc_sb_printf(sb, "%s%d", i ? "," : "", v[i]);
}

size_t uc_kernel_text(const uc_kernel *k, char *buf, size_t len)
{
    static const char *const formats[] = {"nchw", "nhwc", "nchw_vect_c"};
    static const char *const maths[] = {"default", "tensor_op", "tensor_op_allow_conversion", "fma"};
    char tmp1[32], tmp2[32];
    uc_sb sb = {0};
    uc_sb_printf(&sb, "op=%s;dtype=%s", uc_op_name(k->op), dtype_name(k->x.dtype, tmp1, sizeof tmp1));
    tensor_text(&sb, "x", &k->x);
    uc_sb_printf(&sb, ";w=%s,", dtype_name(k->wdtype, tmp1, sizeof tmp1));
    if (k->wformat >= 0 && k->wformat < 3)
        uc_sb_printf(&sb, "%s", formats[k->wformat]);
    else
        uc_sb_printf(&sb, "format%d", k->wformat);
    for (int i = 0; i < k->wnb; i++)
        uc_sb_printf(&sb, ",%d", k->wdims[i]);
    tensor_text(&sb, "y", &k->y);
    ints_text(&sb, "pad", k->pad, k->cnb);
    ints_text(&sb, "stride", k->stride, k->cnb);
    ints_text(&sb, "dilation", k->dil, k->cnb);
    uc_sb_printf(&sb, ";mode=%s;compute=%s;groups=%d;math=", k->mode ? "cross_correlation" : "convolution",
                 dtype_name(k->ctype, tmp2, sizeof tmp2), k->groups);
    if (k->math >= 0 && k->math < 4)
        uc_sb_printf(&sb, "%s", maths[k->math]);
    else
        uc_sb_printf(&sb, "%d", k->math);
    size_t need = sb.len;
    if (len) {
        size_t n = sb.failed ? 0 : (need < len ? need : len - 1);
        if (n)
            memcpy(buf, sb.buf, n);
        buf[n] = '\0';
    }
    free(sb.buf);
    return sb.failed ? 0 : need;
}

/* ---- plan-cache keys ---- */

_Static_assert(sizeof(uc_ckey) == 32 + sizeof(uc_kernel) + 8 && offsetof(uc_ckey, k) == 32, "uc_ckey has no padding");

void uc_ckey_init(uc_ckey *key, int kind, const uc_kernel *k, int policy, int sel, uint64_t limit,
                  uint64_t deflimit)
{
    /* Every byte is a field (no padding: see the assertion above), so the assignments fill the key for bytewise
     * comparison without clearing it first; k was zero-filled when it was read. */
    key->kind = kind;
    key->n = k->x.dims[0];
    key->policy = policy;
    key->sel = sel;
    key->limit = limit;
    key->deflimit = deflimit;
    key->k = *k;
    key->k.x.dims[0] = key->k.y.dims[0] = key->k.z.dims[0] = 0;
    key->device = uc_device_class();
}

int uc_tensor_clone(const uc_tensor *t, int b, cudnnTensorDescriptor_t *out)
{
    const uc_real_table *r = uc_real();
    int dims[UC_MAXD];
    memcpy(dims, t->dims, sizeof dims);
    dims[0] = b;
    *out = NULL;
    int st = r->cudnnCreateTensorDescriptor(out);
    if (st != 0)
        return st;
    st = r->cudnnSetTensorNdDescriptor(*out, (cudnnDataType_t)t->dtype, t->nb, dims, t->strides);
    if (st != 0) {
        r->cudnnDestroyTensorDescriptor(*out);
        *out = NULL;
    }
    return st;
}

int uc_conv_clone(const uc_kernel *k, int math, cudnnConvolutionDescriptor_t *out)
{
    const uc_real_table *r = uc_real();
    *out = NULL;
    int st = r->cudnnCreateConvolutionDescriptor(out);
    if (st != 0)
        return st;
    st = r->cudnnSetConvolutionNdDescriptor(*out, k->cnb, k->pad, k->stride, k->dil, (cudnnConvolutionMode_t)k->mode,
                                            (cudnnDataType_t)k->ctype);
    if (st == 0)
        st = r->cudnnSetConvolutionGroupCount(*out, k->groups);
    if (st == 0)
        st = r->cudnnSetConvolutionMathType(*out, (cudnnMathType_t)math);
    if (st != 0) {
        r->cudnnDestroyConvolutionDescriptor(*out);
        *out = NULL;
    }
    return st;
}

/* ---- for the test-only exports (ucudnn_debug.h) ---- */

size_t uc_kernel_key_of(int op, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                        cudnnTensorDescriptor_t y, char *buf, size_t len)
{
    uc_kernel k;
    if (op < UCUDNN_OP_FWD || op > UCUDNN_OP_BWD_FILTER)
        return 0;
    const char *why = uc_kernel_read(&k, op, x, w, conv, y, NULL);
    if (why) {
        uc_log(UC_LOG_INFO, "ucudnn_debug_kernel_key: %s", why);
        return 0;
    }
    return uc_kernel_text(&k, buf, len);
}

int uc_tensor_clone_of(cudnnTensorDescriptor_t src, int batch, cudnnTensorDescriptor_t *out)
{
    const uc_real_table *r = uc_real();
    uc_tensor t;
    memset(&t, 0, sizeof t);
    if (!out || batch < 1)
        return uc_status(UC_ST_BAD_PARAM);
    if (!r->descriptors)
        return uc_status(UC_ST_NOT_INITIALIZED);
    if (read_tensor(r, src, &t) != 0)
        return uc_status(UC_ST_BAD_PARAM);
    return uc_tensor_clone(&t, batch, out);
}
