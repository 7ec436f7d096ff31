/*
 * Host backend graph API: variant packs and execution.
 *
 * cudnnBackendExecute(handle, plan, variantPack), checks in this order (nothing is written before they pass):
 *   - handle, plan and variant pack valid and of their kinds: BAD_PARAM; plan not finalized:
 *     BAD_PARAM_NOT_FINALIZED;
 *   - the pack holds as many uids as pointers, at least one (BAD_PARAM); finalized or not;
 *   - every non-virtual tensor of the graph has a uid in the pack (BAD_PARAM if not; extra and repeated uids are
 *     ignored, the first of a uid counts), a non-NULL pointer (BAD_PARAM) aligned to the tensor's byte alignment
 *     (BAD_PARAM_MISALIGNED_POINTER);
 *   - a plan needing workspace gets a non-NULL workspace pointer (BAD_PARAM).
 * The pack statuses are cuDNN 9.19's, measured on an H100 (PyTorch 2.11's wheel) with the same packs on a plain
 * fprop plan: it executes a pack never finalized whose uids and pointers agree, and answers BAD_PARAM (2000) for
 * a NULL pack or handle, counts that differ, an empty pack, a missing uid, a NULL data or workspace pointer. It
 * crashes on a descriptor of another kind given as the pack; BAD_PARAM here. Misalignment was not measured.
 * The variant pack carries a workspace pointer but no size (cuDNN's ABI): a workspace smaller than the plan's
 * EXECUTION_PLAN_WORKSPACE_SIZE cannot be detected, here or on a GPU; callers allocate what the plan reports.
 * Then the convolution runs with the engine's algorithm (alpha/beta of the operation, the algorithm's share of
 * the workspace), the model clock advances by the algorithm's modelled time (as the legacy calls do), and the
 * pointwise ops of a fused graph run on the CPU (hb_graph_pw.c).
 */
#include <stdlib.h>

#include "hb_graph.h"

/* ---- variant pack ---- */

static cudnnStatus_t copy_array(void **dst, int64_t *n, int64_t count, const void *elems, size_t size) {
    void *a = malloc((size_t)count * size);
    if (!a) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    memcpy(a, elems, (size_t)count * size);
    free(*dst);
    *dst = a;
    *n = count;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_vp_set(hb_bd *d, int name, int type, int64_t count, const void *elems) {
    (void)type;
    switch (name) {
    case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS:
        return copy_array((void **)&d->u.vp.uids, &d->u.vp.nuids, count, elems, sizeof(int64_t));
    case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS:
        return copy_array((void **)&d->u.vp.ptrs, &d->u.vp.nptrs, count, elems, sizeof(void *));
    default: d->u.vp.ws = *(void *const *)elems; return CUDNN_STATUS_SUCCESS;
    }
}

/* As measured: an empty pack finalizes; uids and pointers must come in equal numbers. */
cudnnStatus_t hb_vp_finalize(hb_bd *d) {
    return d->u.vp.nuids == d->u.vp.nptrs ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t hb_vp_get(const hb_bd *d, int name, int type, hb_aval *v) {
    (void)name; /* WORKSPACE: the one readable attribute (uids and pointers cannot be read back) */
    (void)type;
    memcpy(v->buf, &d->u.vp.ws, sizeof d->u.vp.ws);
    v->count = 1;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- execution ---- */

static cudnnStatus_t bind(const hb_graph *g, const hb_bd *vp, hb_binding *b) {
    b->n = 0;
    for (int i = 0; i < g->nops; i++) {
        const hb_gop *o = &g->ops[i];
        int roles[4];
        int n = hb_op_inputs(o, roles);
        roles[n++] = hb_op_output(o);
        for (int k = 0; k < n; k++) {
            const hb_gtensor *t = &o->t[roles[k]];
            if (t->is_virtual || hb_binding_find(b, t->uid)) continue;
            int64_t j = 0;
            while (j < vp->u.vp.nuids && vp->u.vp.uids[j] != t->uid) j++;
            if (j >= vp->u.vp.nuids) return CUDNN_STATUS_BAD_PARAM;
            void *p = vp->u.vp.ptrs[j];
            if (!p) return CUDNN_STATUS_BAD_PARAM;
            if ((uintptr_t)p % (uintptr_t)t->align != 0) return CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER;
            b->uid[b->n] = t->uid;
            b->ptr[b->n++] = p;
        }
    }
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t plan_and_pack(cudnnHandle_t handle, const hb_bd *plan, const hb_bd *vp) {
    if (!hb_handle_ok(handle) || !hb_bd_ok(plan) || plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
        return CUDNN_STATUS_BAD_PARAM;
    if (vp && (!hb_bd_ok(vp) || vp->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)) return CUDNN_STATUS_BAD_PARAM;
    if (!plan->finalized) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
    return CUDNN_STATUS_SUCCESS;
}

/* n 16-bit elements of type dtype from src, as floats at dst. */
static void widen(int dtype, const void *src, size_t n, float *dst) {
    if (dtype == CUDNN_DATA_HALF)
        for (size_t i = 0; i < n; i++) dst[i] = hb_half_to_f(((const hb_half *)src)[i]);
    else
        for (size_t i = 0; i < n; i++) dst[i] = hb_bf16_to_f(((const hb_bf16 *)src)[i]);
}

static cudnnStatus_t execute(cudnnHandle_t handle, const hb_bd *plan, const hb_bd *vp) {
    if (!vp) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = plan_and_pack(handle, plan, vp);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    const hb_gengine *e = &plan->u.plan.e;
    const hb_graph *g = e->g;
    if (vp->u.vp.nuids != vp->u.vp.nptrs || vp->u.vp.nuids < 1) return CUDNN_STATUS_BAD_PARAM;
    hb_binding b;
    st = bind(g, vp, &b);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    char *ws = vp->u.vp.ws;
    if (e->ws > 0 && !ws) return CUDNN_STATUS_BAD_PARAM;

    const hb_gop *c = &g->ops[g->conv];
    void *x = hb_binding_find(&b, c->t[HB_R_X].uid), *w = hb_binding_find(&b, c->t[HB_R_W].uid);
    void *y = g->y_virtual ? ws + hb_align64(e->algo_ws) : hb_binding_find(&b, c->t[HB_R_Y].uid);
    const hb_problem *p = &g->prob;
    if (g->wide) { /* x and w in float after the algorithm's share, the result after them */
        float *xf = y, *wf = (float *)((char *)xf + hb_align64(g->x_span * 4));
        widen(p->dtype, x, g->x_span, xf);
        widen(p->dtype, w, g->w_span, wf);
        x = xf;
        w = wf;
        y = (char *)wf + hb_align64(g->w_span * 4);
        p = &g->fprob;
    }
    const void *in0 = x, *in1 = w;
    void *out = y;
    if (g->op == HB_OP_BWD_DATA) {
        in0 = w;
        in1 = y;
        out = x;
    } else if (g->op == HB_OP_BWD_FILTER) {
        in1 = y;
        out = w;
    }
    st = e->algo->run(p, in0, in1, out, g->alpha, g->beta, ws, e->algo_ws);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    hb_model_clock_add(hb_model_time_ms(e->algo, &g->prob));
    if (g->npw > 0) hb_pointwise_run(g, &b, y);
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                                            cudnnBackendDescriptor_t variantPack) {
    cudnnStatus_t st = execute(handle, executionPlan, variantPack);
    return st ? hb_note(st, "cudnnBackendExecute") : st;
}

/* cuDNN 9.23's workspace query per variant pack: the plan's workspace, whatever the pack holds. */
HB_EXPORT cudnnStatus_t cudnnGetExecutionPlanWorkspaceSize(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                                                           cudnnBackendDescriptor_t variantPack,
                                                           size_t *workspaceSizeInBytes) {
    if (!workspaceSizeInBytes) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    cudnnStatus_t st = plan_and_pack(handle, executionPlan, variantPack);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    *workspaceSizeInBytes = ((const hb_bd *)executionPlan)->u.plan.e.ws;
    return CUDNN_STATUS_SUCCESS;
}
