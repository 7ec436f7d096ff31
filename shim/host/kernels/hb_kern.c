/* Untyped kernel helpers: geometry, layout analysis, the GEMM view resolver, sizes, the two-thread runner. */
#include "hb_kern.h"

#include <limits.h>
#include <pthread.h>

void hb_geom_init(hb_geom *g, const hb_problem *p) {
    g->n = p->x.n;
    g->groups = p->groups;
    g->cg = p->w.c;
    g->kg = p->w.k / p->groups;
    g->taps = 1;
    g->pin = 1;
    g->pout = 1;
    for (int d = 0; d < HB_SP; d++) {
        g->in[d] = p->x.sp[d];
        g->f[d] = p->w.sp[d];
        g->out[d] = p->y.sp[d];
        g->taps *= p->w.sp[d];
        g->pin *= p->x.sp[d];
        g->pout *= p->y.sp[d];
    }
    g->crs = g->cg * g->taps;
}

int hb_flat_stride(int nd, const int64_t *ext, const int64_t *str, int64_t *s) {
    int64_t expect = 0;
    int seen = 0;
    *s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        if (ext[i] == 1) continue;
        if (!seen) {
            *s = str[i];
            expect = str[i] * ext[i];
            seen = 1;
        } else {
            if (str[i] != expect) return 0;
            expect *= ext[i];
        }
    }
    return 1;
}

int64_t hb_spatial_stride(const hb_tensor *t) {
    int64_t s;
    return hb_flat_stride(HB_SP, t->sp, t->stride_sp, &s) ? s : 0;
}

int64_t hb_batch_spatial_stride(const hb_tensor *t) {
    int64_t ext[4] = {t->n, t->sp[0], t->sp[1], t->sp[2]};
    int64_t str[4] = {t->stride_n, t->stride_sp[0], t->stride_sp[1], t->stride_sp[2]};
    int64_t s;
    return hb_flat_stride(4, ext, str, &s) ? s : 0;
}

int hb_filter_order(const hb_problem *p) {
    const hb_filter *w = &p->w;
    int64_t s;
    int64_t ct_ext[4] = {w->c, w->sp[0], w->sp[1], w->sp[2]};
    int64_t ct_str[4] = {w->stride_c, w->stride_sp[0], w->stride_sp[1], w->stride_sp[2]};
    if (hb_flat_stride(4, ct_ext, ct_str, &s) && s == 1) return HB_ORDER_CT;
    int64_t tc_ext[4] = {w->sp[0], w->sp[1], w->sp[2], w->c};
    int64_t tc_str[4] = {w->stride_sp[0], w->stride_sp[1], w->stride_sp[2], w->stride_c};
    if (hb_flat_stride(4, tc_ext, tc_str, &s) && s == 1) return HB_ORDER_TC;
    return HB_ORDER_NONE;
}

/* A view as a row-major CBLAS operand: NoTrans with ld = rs, or Trans (the view's transpose is row-major). */
static int as_row_major(hb_mview v, int *trans, int *ld) {
    int64_t l;
    if (v.rows > INT_MAX || v.cols > INT_MAX) return 0;
    if ((v.cols == 1 || v.cs == 1) && (v.rows == 1 || v.rs >= v.cols)) {
        *trans = HB_CBLAS_NO_TRANS;
        l = v.rows == 1 ? v.cols : v.rs;
    } else if ((v.rows == 1 || v.rs == 1) && (v.cols == 1 || v.cs >= v.rows)) {
        *trans = HB_CBLAS_TRANS;
        l = v.cols == 1 ? v.rows : v.cs;
    } else {
        return 0;
    }
    if (l < 1) l = 1;
    if (l > INT_MAX) return 0;
    *ld = (int)l;
    return 1;
}

static hb_mview transposed(hb_mview v) {
    hb_mview t = {v.cols, v.rows, v.cs, v.rs};
    return t;
}

int hb_gemm_plan(hb_mview a, hb_mview b, hb_mview c, hb_gemm_call *call) {
    int tc, ldc;
    if (!as_row_major(c, &tc, &ldc)) return 0;
    call->swap = 0;
    if (tc == HB_CBLAS_TRANS) {
        /* C is column-major: compute C^T = B^T A^T, whose result is row-major. */
        hb_mview na = transposed(b), nb = transposed(a);
        a = na;
        b = nb;
        c = transposed(c);
        call->swap = 1;
        if (!as_row_major(c, &tc, &ldc) || tc != HB_CBLAS_NO_TRANS) return 0;
    }
    if (!as_row_major(a, &call->transa, &call->lda) || !as_row_major(b, &call->transb, &call->ldb)) return 0;
    if (a.cols > INT_MAX) return 0;
    call->layout = HB_CBLAS_ROW_MAJOR;
    call->m = (int)c.rows;
    call->n = (int)c.cols;
    call->k = (int)a.cols;
    call->ldc = ldc;
    return 1;
}

/* The BLAS call (swap: the operands exchanged, see hb_gemm_plan), for float and double. */
#define HB_GEMM_RUN(SUFFIX, T, GEMM)                                                                             \
    void hb_gemm_run_##SUFFIX(const hb_gemm_call *k, T alpha, const T *a, const T *b, T beta, T *c) {           \
        if (k->swap) {                                                                                            \
            const T *t = a;                                                                                       \
            a = b;                                                                                                \
            b = t;                                                                                                \
        }                                                                                                         \
        GEMM(k->layout, k->transa, k->transb, k->m, k->n, k->k, alpha, a, k->lda, b, k->ldb, beta, c, k->ldc);   \
    }
HB_GEMM_RUN(f, float, scipy_cblas_sgemm)
HB_GEMM_RUN(d, double, scipy_cblas_dgemm)
#undef HB_GEMM_RUN

static int plan_with_y(hb_mview a, hb_mview col, hb_mview y, int y_is_output, hb_gemm_call *call) {
    return y_is_output ? hb_gemm_plan(a, col, y, call) : hb_gemm_plan(a, y, col, call);
}

int hb_gemm_plan_y(const hb_problem *p, const hb_geom *G, int y_is_output, int *order, hb_gemm_call *call) {
    *order = hb_filter_order(p);
    if (*order == HB_ORDER_NONE) return -1;
    /* The filter operand: in place (transposed as the right operand for backward data), or for 16-bit data its
     * group's packed float copy; 16-bit data always goes through the staged y. */
    const int staged_only = hb_is_16bit(p->dtype);
    const int64_t ld = staged_only ? G->crs : p->w.stride_k;
    const hb_mview a = y_is_output ? (hb_mview){G->kg, G->crs, ld, 1} : (hb_mview){G->crs, G->kg, 1, ld};
    const int64_t ncol = G->n * G->pout;
    const hb_mview col_sample = {G->crs, G->pout, ncol, 1};
    if (!staged_only) {
        int64_t bss = hb_batch_spatial_stride(&p->y), ss = hb_spatial_stride(&p->y);
        hb_mview col = {G->crs, ncol, ncol, 1}, y = {G->kg, ncol, p->y.stride_c, bss};
        if (bss && plan_with_y(a, col, y, y_is_output, call)) return HB_Y_FUSED;
        hb_mview y_sample = {G->kg, G->pout, p->y.stride_c, ss};
        if (ss && plan_with_y(a, col_sample, y_sample, y_is_output, call)) return HB_Y_PER_SAMPLE;
    }
    hb_mview stage = {G->kg, G->pout, G->pout, 1};
    return plan_with_y(a, col_sample, stage, y_is_output, call) ? HB_Y_STAGED : -1;
}

int hb_gemm_y_plan_make(const hb_problem *p, int y_is_output, hb_gemm_y_plan *pl) {
    hb_geom G;
    hb_geom_init(&G, p);
    const size_t es = hb_elem_size(p);
    const int half = hb_is_16bit(p->dtype);
    pl->mode = hb_gemm_plan_y(p, &G, y_is_output, &pl->order, &pl->call);
    if (pl->mode < 0) return 0;
    pl->col_bytes = hb_align(hb_bytes(G.crs * G.n * G.pout, es));
    pl->wconv = pl->stage = pl->dxf = pl->total = pl->col_bytes;
    if (half) pl->stage = hb_add_bytes(pl->wconv, hb_align(hb_bytes(G.kg * G.crs, es)));
    if (half && !y_is_output) {
        pl->dxf = hb_add_bytes(pl->stage, hb_align(hb_bytes(G.kg * G.pout, es)));
        pl->total = hb_add_bytes(pl->dxf, hb_bytes(G.n * G.cg * G.pin, es));
    } else if (pl->mode == HB_Y_STAGED) {
        pl->total = hb_add_bytes(pl->stage, hb_bytes(G.kg * G.pout, es));
    }
    return pl->total != SIZE_MAX;
}

size_t hb_bytes(int64_t elems, size_t elem_size) {
    if (elems < 0 || (uint64_t)elems > SIZE_MAX / 2 / elem_size) return SIZE_MAX;
    return (size_t)elems * elem_size;
}

size_t hb_add_bytes(size_t a, size_t b) {
    if (a == SIZE_MAX || b == SIZE_MAX || a > SIZE_MAX / 2 - b) return SIZE_MAX;
    return a + b;
}

typedef struct {
    hb_part_fn fn;
    void *ctx;
    int64_t nparts;
    int64_t next;
} hb_runner;

static void drain(hb_runner *r) {
    int64_t j;
    while ((j = __atomic_fetch_add(&r->next, 1, __ATOMIC_RELAXED)) < r->nparts) r->fn(r->ctx, j);
}

static void *helper_main(void *arg) {
    drain(arg);
    return NULL;
}

void hb_run_parts(hb_part_fn fn, void *ctx, int64_t nparts) {
    hb_runner r = {fn, ctx, nparts, 0};
    pthread_t th;
    int started = nparts > 1 && pthread_create(&th, NULL, helper_main, &r) == 0;
    drain(&r);
    if (started) pthread_join(th, NULL);
}

size_t hb_no_workspace(const hb_problem *p) {
    (void)p;
    return 0;
}
