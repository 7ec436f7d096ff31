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

HB_EXPORT cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                                const cudnnTensorDescriptor_t xDesc, const void *x,
                                                const cudnnFilterDescriptor_t wDesc, const void *w,
                                                const cudnnConvolutionDescriptor_t convDesc,
                                                cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                                size_t workSpaceSizeInBytes, const void *beta,
                                                const cudnnTensorDescriptor_t yDesc, void *y) {
    if (!hb_handle_ok(handle)) return CUDNN_STATUS_BAD_PARAM;
    hb_problem p;
    cudnnStatus_t st = hb_build_problem(xDesc, wDesc, convDesc, yDesc, &p);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return execute(HB_OP_FWD, handle, &p, (int)algo, alpha, beta, x, w, y, workSpace, workSpaceSizeInBytes);
}

HB_EXPORT cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                                     const cudnnFilterDescriptor_t wDesc, const void *w,
                                                     const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                     const cudnnConvolutionDescriptor_t convDesc,
                                                     cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                                     size_t workSpaceSizeInBytes, const void *beta,
                                                     const cudnnTensorDescriptor_t dxDesc, void *dx) {
    if (!hb_handle_ok(handle)) return CUDNN_STATUS_BAD_PARAM;
    hb_problem p;
    cudnnStatus_t st = hb_build_problem(dxDesc, wDesc, convDesc, dyDesc, &p);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return execute(HB_OP_BWD_DATA, handle, &p, (int)algo, alpha, beta, w, dy, dx, workSpace, workSpaceSizeInBytes);
}

HB_EXPORT cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                                       const cudnnTensorDescriptor_t xDesc, const void *x,
                                                       const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                       const cudnnConvolutionDescriptor_t convDesc,
                                                       cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                                       size_t workSpaceSizeInBytes, const void *beta,
                                                       const cudnnFilterDescriptor_t dwDesc, void *dw) {
    if (!hb_handle_ok(handle)) return CUDNN_STATUS_BAD_PARAM;
    hb_problem p;
    cudnnStatus_t st = hb_build_problem(xDesc, dwDesc, convDesc, dyDesc, &p);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return execute(HB_OP_BWD_FILTER, handle, &p, (int)algo, alpha, beta, x, dy, dw, workSpace,
                   workSpaceSizeInBytes);
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

/* Strides of a descriptor as an hb_tensor (the problem builder's normalisation, for z). */
static void tensor_view(const struct cudnnTensorStruct *t, hb_tensor *v) {
    v->n = t->dim[0];
    v->c = t->dim[1];
    v->stride_n = t->stride[0];
    v->stride_c = t->stride[1];
    if (t->nb == 4) {
        v->sp[0] = 1;
        v->stride_sp[0] = 0;
        for (int i = 1; i < HB_SP; i++) {
            v->sp[i] = t->dim[1 + i];
            v->stride_sp[i] = t->stride[1 + i];
        }
    } else {
        for (int i = 0; i < HB_SP; i++) {
            v->sp[i] = t->dim[2 + i];
            v->stride_sp[i] = t->stride[2 + i];
        }
    }
}

HB_EXPORT cudnnStatus_t cudnnConvolutionBiasActivationForward(
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
        tensor_view(zDesc, &zv);
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
