/*
 * Host backend: the four execution calls. Order of checks (each failure returns before anything is
 * written): handle, descriptors (hb_build_problem), data and scaling pointers, algorithm (outside the op's
 * enum: BAD_PARAM; not implemented or not supporting the problem: NOT_SUPPORTED), workspace (smaller than
 * the algorithm needs, or NULL with a non-zero need: BAD_PARAM).
 */
#include <math.h>

#include "hb_desc.h"

/* Resolve algo on p and check the caller's workspace; *out gets the algorithm on success. */
static cudnnStatus_t pick_algo(hb_op op, int algo, const hb_problem *p, const void *ws, size_t ws_bytes,
                               const hb_algo **out) {
    if (algo < 0 || algo >= hb_algo_enum_count(op)) return CUDNN_STATUS_BAD_PARAM;
    const hb_algo *a = hb_find_algo(op, algo);
    if (!a) return CUDNN_STATUS_NOT_SUPPORTED;
    size_t need = a->workspace(p);
    if (need == SIZE_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
    if (need > ws_bytes || (need > 0 && !ws)) return CUDNN_STATUS_BAD_PARAM;
    *out = a;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t execute(hb_op op, cudnnHandle_t handle, const hb_problem *p, int algo, const void *alpha,
                             const void *beta, const void *in0, const void *in1, void *out, void *ws,
                             size_t ws_bytes) {
    if (!alpha || !beta || !in0 || !in1 || !out) return CUDNN_STATUS_BAD_PARAM;
    const hb_algo *a = NULL;
    cudnnStatus_t st = pick_algo(op, algo, p, ws, ws_bytes, &a);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    (void)handle;
    st = a->run(p, in0, in1, out, hb_scale_value(alpha, p->dtype), hb_scale_value(beta, p->dtype), ws, ws_bytes);
    if (st == CUDNN_STATUS_SUCCESS) hb_model_clock_add(hb_model_time_ms(a, p));
    return st;
}

/* One of the three convolutions: the descriptors into a checked problem, then the algorithm on the caller's data
 * (in0, in1, out as hb_algo takes them). */
static cudnnStatus_t convolution(hb_op op, cudnnHandle_t handle, const struct cudnnTensorStruct *x,
                                 const struct cudnnFilterStruct *w, const struct cudnnConvolutionStruct *conv,
                                 const struct cudnnTensorStruct *y, int algo, const void *alpha, const void *beta,
                                 const void *in0, const void *in1, void *out, void *ws, size_t ws_bytes) {
    if (!hb_handle_ok(handle)) return CUDNN_STATUS_BAD_PARAM;
    hb_problem p;
    cudnnStatus_t st = hb_build_problem(x, w, conv, y, &p);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return execute(op, handle, &p, algo, alpha, beta, in0, in1, out, ws, ws_bytes);
}

/* ---- Bias + activation forward ---- */

/* Same rank, dims and type as y (strides may differ). */
static int same_shape(const struct cudnnTensorStruct *a, const struct cudnnTensorStruct *b) {
    if (a->nb != b->nb || a->dtype != b->dtype || a->vect != b->vect) return 0;
    for (int i = 0; i < a->nb; i++)
        if (a->dim[i] != b->dim[i]) return 0;
    return 1;
}

/* 1 x K x 1 x 1 (x 1) with y's type. */
static int bias_shape_ok(const struct cudnnTensorStruct *bias, const struct cudnnTensorStruct *y) {
    if (bias->nb != y->nb || bias->dtype != y->dtype || bias->dim[1] != y->dim[1]) return 0;
    for (int i = 0; i < bias->nb; i++)
        if (i != 1 && bias->dim[i] != 1) return 0;
    return 1;
}

/* Typed element-wise passes over y (N, C, D, H, W with hb_tensor strides): y = z, then y = act(y + bias).
 * T is the storage type, C the compute type, LD/ST convert between them (16-bit data: float, rounded once). */
#define HB_EPILOGUE(T, C, LD, ST, SUFFIX)                                                                          \
    static void copy_##SUFFIX(const hb_tensor *y, T *yd, const hb_tensor *z, const T *zd) {                        \
        for (int64_t n = 0; n < y->n; n++)                                                                         \
            for (int64_t c = 0; c < y->c; c++)                                                                     \
                for (int64_t d = 0; d < y->sp[0]; d++)                                                             \
                    for (int64_t h = 0; h < y->sp[1]; h++)                                                         \
                        for (int64_t w = 0; w < y->sp[2]; w++)                                                     \
                            yd[n * y->stride_n + c * y->stride_c + d * y->stride_sp[0] + h * y->stride_sp[1] +     \
                               w * y->stride_sp[2]] =                                                              \
                                zd[n * z->stride_n + c * z->stride_c + d * z->stride_sp[0] +                       \
                                   h * z->stride_sp[1] + w * z->stride_sp[2]];                                     \
    }                                                                                                              \
    static void bias_act_##SUFFIX(const hb_tensor *y, T *yd, const T *bias, int64_t bias_stride, int relu,         \
                                  int propagate_nan) {                                                             \
        for (int64_t n = 0; n < y->n; n++)                                                                         \
            for (int64_t c = 0; c < y->c; c++) {                                                                   \
                C b = LD(bias[c * bias_stride]);                                                                   \
                for (int64_t d = 0; d < y->sp[0]; d++)                                                             \
                    for (int64_t h = 0; h < y->sp[1]; h++)                                                         \
                        for (int64_t w = 0; w < y->sp[2]; w++) {                                                   \
                            T *e = yd + n * y->stride_n + c * y->stride_c + d * y->stride_sp[0] +                  \
                                   h * y->stride_sp[1] + w * y->stride_sp[2];                                      \
                            C v = LD(*e) + b;                                                                      \
                            if (relu && !(v > 0)) v = (propagate_nan && isnan(v)) ? v : (C)0;                      \
                            *e = ST(v);                                                                            \
                        }                                                                                          \
            }                                                                                                      \
    }
#define HB_SAME(v) (v)
#define HB_F2H(v) ((hb_half)(v))
HB_EPILOGUE(float, float, HB_SAME, HB_SAME, f)
HB_EPILOGUE(double, double, HB_SAME, HB_SAME, d)
HB_EPILOGUE(hb_half, float, hb_half_to_f, HB_F2H, h)
HB_EPILOGUE(hb_bf16, float, hb_bf16_to_f, hb_f_to_bf16, b)

static cudnnStatus_t bias_activation_forward(
    cudnnHandle_t handle, const void *alpha1, const cudnnTensorDescriptor_t xDesc, const void *x,
    const cudnnFilterDescriptor_t wDesc, const void *w, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionFwdAlgo_t algo, void *workSpace, size_t workSpaceSizeInBytes, const void *alpha2,
    const cudnnTensorDescriptor_t zDesc, const void *z, const cudnnTensorDescriptor_t biasDesc, const void *bias,
    const cudnnActivationDescriptor_t activationDesc, const cudnnTensorDescriptor_t yDesc, void *y) {
    if (!hb_handle_ok(handle)) return CUDNN_STATUS_BAD_PARAM;
    hb_problem p;
    cudnnStatus_t st = hb_build_problem(xDesc, wDesc, convDesc, yDesc, &p);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!hb_tensor_ok(zDesc) || !hb_tensor_ok(biasDesc) || !hb_act_ok(activationDesc)) return CUDNN_STATUS_BAD_PARAM;
    if (!same_shape(zDesc, yDesc) || !bias_shape_ok(biasDesc, yDesc)) return CUDNN_STATUS_BAD_PARAM;
    if (!alpha1 || !alpha2 || !x || !w || !y || !bias) return CUDNN_STATUS_BAD_PARAM;
    int mode = (int)activationDesc->mode;
    if (mode != CUDNN_ACTIVATION_RELU && mode != CUDNN_ACTIVATION_IDENTITY) return CUDNN_STATUS_NOT_SUPPORTED;
    double a2 = hb_scale_value(alpha2, p.dtype);
    if (a2 != 0 && !z) return CUDNN_STATUS_BAD_PARAM;
    const hb_algo *a = NULL;
    st = pick_algo(HB_OP_FWD, (int)algo, &p, workSpace, workSpaceSizeInBytes, &a);
    if (st != CUDNN_STATUS_SUCCESS) return st;

    /* y = alpha1 * conv + alpha2 * z: the kernel's beta term reads y, so z is first placed in y. 16-bit data is
     * rounded twice: by the convolution, then after adding the bias. */
    if (a2 != 0 && z != y) {
        hb_tensor zv;
        hb_tensor_of(zDesc, &zv);
        HB_DISPATCH(p.dtype, copy, &p.y, y, &zv, z);
    }
    st = a->run(&p, x, w, y, hb_scale_value(alpha1, p.dtype), a2, workSpace, workSpaceSizeInBytes);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    int relu = mode == CUDNN_ACTIVATION_RELU;
    int prop = activationDesc->nan == CUDNN_PROPAGATE_NAN;
    int64_t bs = biasDesc->stride[1];
    HB_DISPATCH(p.dtype, bias_act, &p.y, y, bias, bs, relu, prop);
    hb_model_clock_add(hb_model_time_ms(a, &p));
    return CUDNN_STATUS_SUCCESS;
}

/* ---- the exported calls, from the shim's list of them (shim/hooks.def): each execution's parameters, named as
 * there, in the roles the backend reads them in ---- */

#define HB_cudnnConvolutionForward                                                                             \
    convolution(HB_OP_FWD, handle, xDesc, wDesc, convDesc, yDesc, (int)algo, alpha, beta, x, w, y, workSpace,    \
                workSpaceSizeInBytes)
#define HB_cudnnConvolutionBackwardData                                                                        \
    convolution(HB_OP_BWD_DATA, handle, dxDesc, wDesc, convDesc, dyDesc, (int)algo, alpha, beta, w, dy, dx,     \
                workSpace, workSpaceSizeInBytes)
#define HB_cudnnConvolutionBackwardFilter                                                                      \
    convolution(HB_OP_BWD_FILTER, handle, xDesc, dwDesc, convDesc, dyDesc, (int)algo, alpha, beta, x, dy, dw,   \
                workSpace, workSpaceSizeInBytes)
#define HB_cudnnConvolutionBiasActivationForward                                                               \
    bias_activation_forward(handle, alpha1, xDesc, x, wDesc, w, convDesc, algo, workSpace, workSpaceSizeInBytes,  \
                            alpha2, zDesc, z, biasDesc, bias, activationDesc, yDesc, y)

#define UC_EXEC(ret, name, params, args)                                                                           \
    HB_EXPORT ret name params { return HB_##name; }
#include "hooks.def"
