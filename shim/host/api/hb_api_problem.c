/*
 * Host backend: turning descriptors into a checked hb_problem (the contract with the kernels). Everything a
 * kernel relies on is established here: consistent ranks, types and shapes, groups dividing C and K, the
 * output size matching the convolution arithmetic, and positive strides on every extent-1 dim.
 */
#include "hb_desc.h"

/* Strides of extent-1 dims never address anything; cuDNN accepts any value there, kernels want them sane. */
static void fix_unit_strides(int64_t *extent, int64_t **stride, int count, int64_t fallback) {
    for (int i = 0; i < count; i++)
        if (extent[i] == 1 && *stride[i] <= 0) *stride[i] = fallback;
}

/* The 3 spatial entries of a 4-D or 5-D dims (or strides) array: a 4-D one gets depth 1 in front. */
static void spatial_of(int nb, const int *v, int64_t sp[HB_SP]) {
    sp[0] = 1;
    for (int i = 0; i < nb - 2 && i < HB_SP; i++) sp[HB_SP - (nb - 2) + i] = v[2 + i];
}

void hb_tensor_of(const struct cudnnTensorStruct *d, hb_tensor *t) {
    t->n = d->dim[0];
    t->c = d->dim[1];
    t->stride_n = d->stride[0];
    t->stride_c = d->stride[1];
    spatial_of(d->nb, d->dim, t->sp);
    spatial_of(d->nb, d->stride, t->stride_sp);
    /* A 4-D tensor's depth stride: what a packed 5-D tensor of the same layout would have (keeps layout tests in
     * kernels simple). */
    if (d->nb == 4) t->stride_sp[0] = t->stride_sp[1] * t->sp[1];
    int64_t ext[5] = {t->n, t->c, t->sp[0], t->sp[1], t->sp[2]};
    int64_t *str[5] = {&t->stride_n, &t->stride_c, &t->stride_sp[0], &t->stride_sp[1], &t->stride_sp[2]};
    fix_unit_strides(ext, str, 5, hb_tensor_span(d));
}

static void fill_filter(const struct cudnnFilterStruct *d, hb_filter *f) {
    f->k = d->dim[0];
    f->c = d->dim[1];
    spatial_of(d->nb, d->dim, f->sp);
    int64_t taps = f->sp[0] * f->sp[1] * f->sp[2];
    if (d->format == CUDNN_TENSOR_NHWC) { /* K, D, H, W, C packed */
        f->stride_c = 1;
        f->stride_sp[2] = f->c;
        f->stride_sp[1] = f->c * f->sp[2];
        f->stride_sp[0] = f->c * f->sp[2] * f->sp[1];
    } else { /* K, C, D, H, W packed */
        f->stride_sp[2] = 1;
        f->stride_sp[1] = f->sp[2];
        f->stride_sp[0] = f->sp[2] * f->sp[1];
        f->stride_c = taps;
    }
    f->stride_k = f->c * taps;
}

/* The product of nb extents, held at INT32_MAX + 1 once past INT32_MAX (0 if one is not positive). */
static int64_t elements(int nb, const int *dim) {
    int64_t n = 1;
    for (int i = 0; i < nb && n <= INT32_MAX; i++) {
        if (dim[i] <= 0) return 0;
        n *= dim[i]; /* n <= 2^31 - 1, dim < 2^31: no overflow */
    }
    return n;
}

cudnnStatus_t hb_build_problem(const struct cudnnTensorStruct *x, const struct cudnnFilterStruct *w,
                               const struct cudnnConvolutionStruct *conv, const struct cudnnTensorStruct *y,
                               hb_problem *p) {
    if (!hb_tensor_ok(x) || !hb_filter_ok(w) || !hb_conv_ok(conv) || !hb_tensor_ok(y)) return CUDNN_STATUS_BAD_PARAM;
    int nb = x->nb;
    if (nb < 3 || y->nb != nb || w->nb != nb || conv->len != nb - 2) return CUDNN_STATUS_BAD_PARAM;
    if (y->dtype != x->dtype || w->dtype != x->dtype) return CUDNN_STATUS_BAD_PARAM;
    int64_t groups = conv->groups;
    if (x->dim[1] != (int64_t)w->dim[1] * groups || w->dim[0] % groups != 0) return CUDNN_STATUS_BAD_PARAM;
    if (y->dim[0] != x->dim[0] || y->dim[1] != w->dim[0]) return CUDNN_STATUS_BAD_PARAM;
    for (int i = 0; i < nb - 2; i++) {
        int64_t extent = hb_conv_out_extent(conv, x, w, i);
        if (extent < 0 || y->dim[i + 2] != extent) return CUDNN_STATUS_BAD_PARAM;
    }

    /* Well-formed from here on; what follows is what this backend does not compute. */
    /* 1-D convolutions (rank 3) pass cuDNN's descriptor checks but this backend computes 2-D and 3-D only. */
    if (nb < 4 || nb > 5) return CUDNN_STATUS_NOT_SUPPORTED;
    /* cuDNN's configurations: FLOAT and DOUBLE compute in the data type itself; HALF in FLOAT ("pseudo half")
     * or HALF ("true half"); BFLOAT16 in FLOAT (the descriptor setter refuses a BFLOAT16 compute type). */
    switch (x->dtype) {
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_DOUBLE:
        if (conv->compute != x->dtype) return CUDNN_STATUS_NOT_SUPPORTED;
        break;
    case CUDNN_DATA_HALF:
        if (conv->compute != CUDNN_DATA_FLOAT && conv->compute != CUDNN_DATA_HALF) return CUDNN_STATUS_NOT_SUPPORTED;
        break;
    case CUDNN_DATA_BFLOAT16:
        if (conv->compute != CUDNN_DATA_FLOAT) return CUDNN_STATUS_NOT_SUPPORTED;
        break;
    default: return CUDNN_STATUS_NOT_SUPPORTED;
    }
    if (x->vect != 1 || y->vect != 1 || w->format == CUDNN_TENSOR_NCHW_VECT_C) return CUDNN_STATUS_NOT_SUPPORTED;
    /* At most 2^31 - 1 elements in each operand, as a descriptor the setters took has: one they refused (its
     * fields written before the refusal) or whose strides overlap can have more, and the kernels' sizes (products
     * of two such counts at most) then stay within int64. */
    if (elements(nb, w->dim) > INT32_MAX || elements(nb, x->dim) > INT32_MAX || elements(nb, y->dim) > INT32_MAX)
        return CUDNN_STATUS_NOT_SUPPORTED;

    p->dtype = x->dtype;
    p->nb_spatial = nb - 2;
    hb_tensor_of(x, &p->x);
    hb_tensor_of(y, &p->y);
    fill_filter(w, &p->w);
    int off = nb == 4 ? 1 : 0;
    for (int i = 0; i < HB_SP; i++) {
        p->pad[i] = i < off ? 0 : conv->pad[i - off];
        p->stride[i] = i < off ? 1 : conv->stride[i - off];
        p->dilation[i] = i < off ? 1 : conv->dil[i - off];
    }
    p->groups = groups;
    p->cross_correlation = conv->mode == CUDNN_CROSS_CORRELATION;
    p->math_type = conv->math;
    return CUDNN_STATUS_SUCCESS;
}
