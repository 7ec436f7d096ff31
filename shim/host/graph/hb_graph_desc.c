/*
 * Host backend graph API: tensor, convolution, pointwise and operation descriptors. Setters store what they are
 * given (hb_graph_api.c has checked types and counts); Finalize validates as the real cuDNN 9 library does,
 * which accepts more than the backend computes (zero extents and strides, any data type pairing, asymmetric
 * padding, unknown pointwise modes): what no engine runs is found when the operation graph is analysed
 * (hb_graph_build.c), where it leaves the graph without engines.
 */
#include <stdbool.h>
#include <stdint.h>

#include "hb_graph.h"

size_t hb_gdtype_size(int dtype) {
    switch (dtype) {
    case CUDNN_DATA_DOUBLE:
    case CUDNN_DATA_INT64: return 8;
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_INT32: return 4;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return 2;
    case CUDNN_DATA_INT8:
    case CUDNN_DATA_UINT8:
    case CUDNN_DATA_BOOLEAN:
    case CUDNN_DATA_FP8_E4M3:
    case CUDNN_DATA_FP8_E5M2: return 1;
    default: return 0;
    }
}

int64_t hb_gtensor_span(const hb_gtensor *t) {
    int64_t span = 1;
    for (int64_t i = 0; i < t->nb; i++) {
        int64_t reach;
        if (t->dim[i] == 0) return 0;
        if (__builtin_mul_overflow(t->dim[i] - 1, t->stride[i], &reach) || __builtin_add_overflow(span, reach, &span))
            return 0;
    }
    return span;
}

/* ---- tensor ---- */

static double elem_real(int type, const void *e) {
    return type == CUDNN_TYPE_DOUBLE ? *(const double *)e : (double)*(const float *)e;
}

static void set_array(int64_t *dst, int64_t *n, int64_t count, const void *elems) {
    *n = count;
    if (count <= HB_GDIMS) memcpy(dst, elems, (size_t)count * sizeof(int64_t));
}

cudnnStatus_t hb_tensor_set(hb_bd *d, int name, int type, int64_t count, const void *elems) {
    (void)type;
    hb_gtensor *t = &d->u.tensor;
    switch (name) {
    case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT: t->align = hb_elem_i64(elems); t->set |= HB_T_ALIGN; break;
    case CUDNN_ATTR_TENSOR_DATA_TYPE: t->dtype = hb_elem_enum(elems); t->set |= HB_T_DTYPE; break;
    case CUDNN_ATTR_TENSOR_DIMENSIONS: set_array(t->dim, &t->nb, count, elems); t->set |= HB_T_DIMS; break;
    case CUDNN_ATTR_TENSOR_STRIDES: set_array(t->stride, &t->nstrides, count, elems); t->set |= HB_T_STRIDES; break;
    case CUDNN_ATTR_TENSOR_VECTOR_COUNT: t->vec_count = hb_elem_i64(elems); break;
    case CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION: t->vec_dim = hb_elem_i64(elems); break;
    case CUDNN_ATTR_TENSOR_UNIQUE_ID: t->uid = hb_elem_i64(elems); t->set |= HB_T_UID; break;
    case CUDNN_ATTR_TENSOR_IS_VIRTUAL: t->is_virtual = *(const bool *)elems; break;
    case CUDNN_ATTR_TENSOR_IS_BY_VALUE: t->by_value = *(const bool *)elems; break;
    default: t->reorder = hb_elem_enum(elems); break; /* REORDERING_MODE */
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_tensor_get(const hb_bd *d, int name, int type, hb_aval *v) {
    (void)type;
    const hb_gtensor *t = &d->u.tensor;
    v->count = 1;
    switch (name) {
    case CUDNN_ATTR_TENSOR_DATA_TYPE: v->data = &t->dtype; break;
    case CUDNN_ATTR_TENSOR_DIMENSIONS: v->data = t->dim; v->count = t->nb; break;
    case CUDNN_ATTR_TENSOR_STRIDES: v->data = t->stride; v->count = t->nb; break;
    case CUDNN_ATTR_TENSOR_VECTOR_COUNT: v->data = &t->vec_count; break;
    case CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION: v->data = &t->vec_dim; break;
    case CUDNN_ATTR_TENSOR_UNIQUE_ID: v->data = &t->uid; break;
    case CUDNN_ATTR_TENSOR_IS_VIRTUAL: *(bool *)v->buf = t->is_virtual; break;
    case CUDNN_ATTR_TENSOR_IS_BY_VALUE: *(bool *)v->buf = t->by_value; break;
    default: v->data = &t->reorder; break;
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_tensor_finalize(hb_bd *d) {
    hb_gtensor *t = &d->u.tensor;
    unsigned need = HB_T_DIMS | HB_T_STRIDES;
    if ((t->set & need) != need || t->nb != t->nstrides || t->nb < 1 || t->nb > HB_GDIMS)
        return CUDNN_STATUS_BAD_PARAM;
    int64_t wide = 0; /* dimensions of extent above 1 */
    for (int64_t i = 0; i < t->nb; i++) {
        if (t->dim[i] < 0 || t->stride[i] < 0) return CUDNN_STATUS_BAD_PARAM;
        wide += t->dim[i] > 1;
    }
    /* As the real library (9.28): a vectorized dimension beyond the count of dimensions (that count itself passes),
     * or a by-value tensor that is not a vector (more than one dimension above 1), is refused. */
    if (t->vec_dim > t->nb || (t->by_value && wide > 1)) return CUDNN_STATUS_BAD_PARAM;
    if (t->dtype == CUDNN_DATA_INT8x4 || t->dtype == CUDNN_DATA_UINT8x4 || t->dtype == CUDNN_DATA_INT8x32)
        return CUDNN_STATUS_NOT_SUPPORTED;
    /* Vectors of INT8 come in 4 or 32, of UINT8 in 4 (other types take any count, as the real library does). */
    if (t->vec_count != 1 && ((t->dtype == CUDNN_DATA_INT8 && t->vec_count != 4 && t->vec_count != 32) ||
                              (t->dtype == CUDNN_DATA_UINT8 && t->vec_count != 4)))
        return CUDNN_STATUS_NOT_SUPPORTED;
    size_t es = hb_gdtype_size(t->dtype);
    if (t->dtype < 0 || t->dtype > CUDNN_DATA_FP8_E5M2) return CUDNN_STATUS_BAD_PARAM;
    if (es == 0) return CUDNN_STATUS_NOT_SUPPORTED;
    /* As the real library (9.28): an alignment never set counts as 1 byte, enough for 1-byte elements (INT8, UINT8,
     * BOOLEAN, FP8) and too little for wider ones; one set to 0 or below is refused. */
    int64_t align = (t->set & HB_T_ALIGN) ? t->align : 1;
    if (align <= 0 || align % (int64_t)es != 0) return CUDNN_STATUS_BAD_PARAM;
    t->align = align; /* what execution checks pointers against (hb_graph_exec.c) */
    t->finalized = 1;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- convolution ---- */

static int conv_slot(int name) {
    switch (name) {
    case CUDNN_ATTR_CONVOLUTION_DILATIONS: return 0;
    case CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES: return 1;
    case CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS: return 2;
    default: return 3; /* POST_PADDINGS */
    }
}

cudnnStatus_t hb_conv_set(hb_bd *d, int name, int type, int64_t count, const void *elems) {
    (void)type;
    hb_gconv *c = &d->u.conv;
    switch (name) {
    case CUDNN_ATTR_CONVOLUTION_COMP_TYPE: c->comp = hb_elem_enum(elems); break;
    case CUDNN_ATTR_CONVOLUTION_CONV_MODE: c->mode = hb_elem_enum(elems); break;
    case CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS:
        if (hb_elem_i64(elems) > INT32_MAX) return CUDNN_STATUS_BAD_PARAM; /* as the real library (9.28) */
        c->nsp = hb_elem_i64(elems);
        c->set |= HB_C_NSP;
        break;
    default: {
        int s = conv_slot(name);
        set_array(c->v[s], &c->n[s], count, elems);
        c->set |= (unsigned)(HB_C_DIL << s);
        break;
    }
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_conv_get(const hb_bd *d, int name, int type, hb_aval *v) {
    (void)type;
    const hb_gconv *c = &d->u.conv;
    v->count = 1;
    switch (name) {
    case CUDNN_ATTR_CONVOLUTION_COMP_TYPE: v->data = &c->comp; break;
    case CUDNN_ATTR_CONVOLUTION_CONV_MODE: v->data = &c->mode; break;
    case CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS: v->data = &c->nsp; break;
    default: v->data = c->v[conv_slot(name)]; v->count = c->nsp; break;
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_conv_finalize(hb_bd *d) {
    hb_gconv *c = &d->u.conv;
    unsigned need = HB_C_NSP | HB_C_DIL | HB_C_STR;
    if ((c->set & need) != need || c->nsp < 1 || c->nsp > HB_GDIMS - 2) return CUDNN_STATUS_BAD_PARAM;
    for (int s = 0; s < 4; s++) {
        if (!(c->set & (unsigned)(HB_C_DIL << s))) { /* paddings default to zero */
            c->n[s] = c->nsp;
            memset(c->v[s], 0, sizeof c->v[s]);
        }
        if (c->n[s] != c->nsp) return CUDNN_STATUS_BAD_PARAM;
        for (int64_t i = 0; i < c->nsp; i++)
            if (c->v[s][i] < (s < 2 ? 1 : 0)) return CUDNN_STATUS_BAD_PARAM;
    }
    c->finalized = 1;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- pointwise ---- */

int hb_pw_binary(int mode) {
    switch (mode) {
    case CUDNN_POINTWISE_ADD:
    case CUDNN_POINTWISE_MUL:
    case CUDNN_POINTWISE_MIN:
    case CUDNN_POINTWISE_MAX:
    case CUDNN_POINTWISE_ADD_SQUARE:
    case CUDNN_POINTWISE_DIV:
    case CUDNN_POINTWISE_MOD:
    case CUDNN_POINTWISE_POW:
    case CUDNN_POINTWISE_SUB:
    case CUDNN_POINTWISE_ATAN2:
    case CUDNN_POINTWISE_FLOOR_MOD:
    case CUDNN_POINTWISE_LOGICAL_AND:
    case CUDNN_POINTWISE_LOGICAL_OR: return 1;
    default: return mode >= CUDNN_POINTWISE_CMP_EQ && mode <= CUDNN_POINTWISE_CMP_LE;
    }
}

cudnnStatus_t hb_pw_set(hb_bd *d, int name, int type, int64_t count, const void *elems) {
    (void)count;
    hb_gpw *p = &d->u.pw;
    switch (name) {
    case CUDNN_ATTR_POINTWISE_MODE: p->mode = hb_elem_enum(elems); break;
    case CUDNN_ATTR_POINTWISE_MATH_PREC: p->prec = hb_elem_enum(elems); break;
    case CUDNN_ATTR_POINTWISE_NAN_PROPAGATION: p->nan = hb_elem_enum(elems); break;
    case CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP: p->lower_clip = elem_real(type, elems); break;
    case CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP: p->upper_clip = elem_real(type, elems); break;
    case CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE: p->slope = elem_real(type, elems); break;
    case CUDNN_ATTR_POINTWISE_ELU_ALPHA: p->elu_alpha = elem_real(type, elems); break;
    case CUDNN_ATTR_POINTWISE_SOFTPLUS_BETA: p->softplus_beta = elem_real(type, elems); break;
    case CUDNN_ATTR_POINTWISE_SWISH_BETA: p->swish_beta = elem_real(type, elems); break;
    default: p->axis = hb_elem_i64(elems); break;
    }
    return CUDNN_STATUS_SUCCESS;
}

/* The real library finalizes any pointwise descriptor, mode or precision set or not. */
cudnnStatus_t hb_pw_finalize(hb_bd *d) {
    d->u.pw.finalized = 1;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- operations ---- */

static int is_conv_op(int kind) { return kind != CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR; }

/* The tensor role an operation attribute names, -1 for other attributes. */
static int role_of(int kind, int name) {
    if (is_conv_op(kind)) {
        int first = kind == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
                        ? CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA
                    : kind == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
                        ? CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA
                        : CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA;
        int off = name - first;
        return off == 3 ? HB_R_W : off == 4 ? HB_R_X : off == 5 ? HB_R_Y : -1 - off; /* -1 alpha, -2 beta, -3 conv */
    }
    switch (name) {
    case CUDNN_ATTR_OPERATION_POINTWISE_XDESC: return HB_R_X;
    case CUDNN_ATTR_OPERATION_POINTWISE_BDESC: return HB_R_B;
    case CUDNN_ATTR_OPERATION_POINTWISE_YDESC: return HB_R_Y;
    case CUDNN_ATTR_OPERATION_POINTWISE_TDESC: return HB_R_T;
    case CUDNN_ATTR_OPERATION_POINTWISE_DXDESC: return HB_R_DX;
    case CUDNN_ATTR_OPERATION_POINTWISE_DYDESC: return HB_R_DY;
    case CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1: return -1;
    case CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2: return -2;
    default: return -3; /* PW_DESCRIPTOR */
    }
}

cudnnStatus_t hb_op_set(hb_bd *d, int name, int type, int64_t count, const void *elems) {
    (void)count;
    hb_gop *o = &d->u.op;
    int r = role_of(o->kind, name);
    if (r == -1 || r == -2) {
        hb_gscale *s = r == -1 ? &o->alpha : &o->beta;
        s->type = type;
        s->v = elem_real(type, elems);
        return CUDNN_STATUS_SUCCESS;
    }
    const hb_bd *src = *(hb_bd *const *)elems;
    if (r >= 0) {
        o->has[r] = src != NULL;
        if (src) o->t[r] = src->u.tensor;
        else memset(&o->t[r], 0, sizeof o->t[r]);
    } else if (is_conv_op(o->kind)) {
        o->has_conv = 1;
        o->conv = src->u.conv;
    } else {
        o->has_pw = src != NULL;
        if (src) o->pw = src->u.pw;
        else memset(&o->pw, 0, sizeof o->pw);
    }
    return CUDNN_STATUS_SUCCESS;
}

/* Get answers: a convolution's scaling factors (see hb_op_get); copies of the descriptors (arg: the role). */
static cudnnStatus_t fill_part(const hb_bd *src, int64_t i, int arg, hb_bd *dst) {
    (void)i;
    const hb_gop *o = &src->u.op;
    hb_bd_clear(dst);
    if (arg >= 0) dst->u.tensor = o->t[arg];
    else if (is_conv_op(o->kind)) dst->u.conv = o->conv;
    else dst->u.pw = o->pw;
    dst->finalized = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_op_get(const hb_bd *d, int name, int type, hb_aval *v) {
    const hb_gop *o = &d->u.op;
    int r = role_of(o->kind, name);
    v->count = 1;
    if (r == -1 || r == -2) { /* a convolution's: the pointwise operation's are not read back */
        /* Never set, they read back as the real library keeps them: doubles, alpha 1 and beta 0 (9.28). */
        hb_gscale s = r == -1 ? o->alpha : o->beta;
        if (!s.type) s = (hb_gscale){CUDNN_TYPE_DOUBLE, r == -1 ? 1.0 : 0.0};
        /* ... and a backward filter's alpha in the type its beta has. */
        if (r == -1 && o->kind == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR)
            s.type = o->beta.type ? o->beta.type : CUDNN_TYPE_DOUBLE;
        if (s.type != type) return CUDNN_STATUS_BAD_PARAM; /* set with the other type */
        if (type == CUDNN_TYPE_DOUBLE) memcpy(v->buf, &s.v, sizeof s.v);
        else *(float *)v->buf = (float)s.v;
        return CUDNN_STATUS_SUCCESS;
    }
    if (r >= 0 && !o->has[r]) return CUDNN_STATUS_BAD_PARAM;
    v->arg = r;
    v->fill = fill_part;
    return CUDNN_STATUS_SUCCESS;
}

int hb_op_output(const hb_gop *o) {
    switch (o->kind) {
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR: return HB_R_X;
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR: return HB_R_W;
    default: return HB_R_Y;
    }
}

int hb_op_inputs(const hb_gop *o, int roles[3]) {
    int n = 0;
    if (is_conv_op(o->kind)) {
        for (int r = HB_R_X; r <= HB_R_Y; r++)
            if (r != hb_op_output(o)) roles[n++] = r;
    } else {
        roles[n++] = HB_R_X;
        if (hb_pw_binary(o->pw.mode)) roles[n++] = HB_R_B;
    }
    for (int i = n; i < 3; i++) roles[i] = -1;
    return n;
}

/* How a convolution's tensor lies in memory, as the real library (9.28) checks it: the dimensions of extent above
 * 1, in decreasing stride, each step at least the extent times the stride of the next (no two elements at one
 * address; a zero stride broadcasts and is left out) for the data tensors; exactly that step, down to a stride of
 * 1 and with no zero stride, for the filter (packed, in any order of its dimensions). */
static int laid_out(const hb_gtensor *t, int packed) {
    int order[HB_GDIMS], n = 0;
    for (int i = 0; i < (int)t->nb && i < HB_GDIMS; i++) {
        if (t->dim[i] <= 1) continue;
        if (t->stride[i] == 0) {
            if (packed) return 0;
            continue;
        }
        int k = n++;
        for (; k > 0 && t->stride[order[k - 1]] < t->stride[i]; k--) order[k] = order[k - 1];
        order[k] = i;
    }
    for (int k = 0; k + 1 < n; k++) {
        int64_t outer = t->stride[order[k]], inner = t->stride[order[k + 1]], d = t->dim[order[k + 1]], step;
        if (packed ? __builtin_mul_overflow(inner, d, &step) || outer != step : outer / d < inner) return 0;
    }
    return !packed || n == 0 || t->stride[order[n - 1]] == 1;
}

/* x [N, G*C, ...], w [G*K, C, ...], y [N, G*K, ...] with y's spatial extents what the convolution gives. */
static int conv_shapes_ok(const hb_gop *o) {
    const hb_gtensor *x = &o->t[HB_R_X], *w = &o->t[HB_R_W], *y = &o->t[HB_R_Y];
    const hb_gconv *c = &o->conv;
    int64_t nb = c->nsp + 2;
    if (x->nb != nb || w->nb != nb || y->nb != nb) return 0;
    if (w->dim[1] <= 0 || x->dim[1] % w->dim[1] != 0) return 0;
    int64_t groups = x->dim[1] / w->dim[1];
    if (groups < 1 || w->dim[0] % groups != 0) return 0;
    if (y->dim[0] != x->dim[0] || y->dim[1] != w->dim[0]) return 0;
    for (int64_t i = 0; i < c->nsp; i++) { /* v: dilations, strides, pre- and post-paddings */
        int64_t pads;
        if (__builtin_add_overflow(c->v[2][i], c->v[3][i], &pads)) return 0;
        int64_t extent = hb_out_extent(x->dim[i + 2], w->dim[i + 2], pads, c->v[1][i], c->v[0][i]);
        if (extent < 0 || y->dim[i + 2] != extent) return 0;
    }
    return 1;
}

cudnnStatus_t hb_op_finalize(hb_bd *d) {
    hb_gop *o = &d->u.op;
    if (is_conv_op(o->kind)) {
        if (!o->has_conv || !o->conv.finalized) return CUDNN_STATUS_BAD_PARAM;
        for (int r = HB_R_X; r <= HB_R_Y; r++)
            if (!o->has[r] || !o->t[r].finalized) return CUDNN_STATUS_BAD_PARAM;
        if (!conv_shapes_ok(o)) return CUDNN_STATUS_BAD_PARAM;
        for (int r = HB_R_X; r <= HB_R_Y; r++) {
            if (!laid_out(&o->t[r], r == HB_R_W)) return CUDNN_STATUS_BAD_PARAM;
            for (int64_t i = 0; i < o->t[r].nb; i++) /* no empty tensor either (the real library, 9.28) */
                if (o->t[r].dim[i] < 1) return CUDNN_STATUS_BAD_PARAM;
        }
    } else {
        /* As the real library (9.28): the pointwise descriptor may be missing (the mode then is ADD's, which takes
         * B) and its parts unfinalized; only the tensors' presence and ranks count, and an operation given
         * none of the tensors its mode uses passes. Such an operation finalizes, and a graph of it has no engine here
         * (hb_graph_analyse.c). */
        int binary = hb_pw_binary(o->pw.mode);
        int any = o->has[HB_R_X] || o->has[HB_R_Y] || (binary && o->has[HB_R_B]); /* of the tensors the mode uses */
        if (any && (!o->has[HB_R_X] || !o->has[HB_R_Y] || (binary && !o->has[HB_R_B]))) return CUDNN_STATUS_BAD_PARAM;
        for (int r = 0; any && r < HB_ROLES; r++) {
            if (!o->has[r]) continue;
            if (o->t[r].nb != o->t[HB_R_X].nb) return CUDNN_STATUS_BAD_PARAM;
        }
    }
    o->finalized = 1;
    return CUDNN_STATUS_SUCCESS;
}
