/*
 * Plans of the legacy path: immutable, shared by reference count. One is built from a validated reply (a planner's,
 * a stored plan's or the built-in fallback's): descriptor clones per micro-batch size, its workspace verified with
 * the real library's own queries, the algorithm it reports in Get/Find results, and its JSON for
 * ucudnn_last_plan_json. A plan of count 0 says "no plan: pass through".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uc_legacy.h"

void uc_plan_ref(uc_plan *p)
{
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
}

void uc_plan_release(uc_plan *p)
{
    if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
        uc_plan_free(p);
}

void uc_plan_free(uc_plan *p)
{
    if (!p)
        return;
    const uc_real_table *r = uc_real();
    for (int i = 0; i < p->n_owned_t; i++)
        if (p->owned_t[i] && r->cudnnDestroyTensorDescriptor)
            r->cudnnDestroyTensorDescriptor(p->owned_t[i]);
    for (int i = 0; i < p->n_owned_c; i++)
        if (p->owned_c[i] && r->cudnnDestroyConvolutionDescriptor)
            r->cudnnDestroyConvolutionDescriptor(p->owned_c[i]);
    free(p->owned_t);
    free(p->owned_c);
    free(p->xd);
    free(p->yd);
    free(p->zd);
    free(p->cd);
    free(p->mb);
    free(p->key_text);
    free(p->json);
    uc_plan_release(p->rival);
    free(p);
}

static int own_tensor(uc_plan *p, const uc_tensor *t, int b, cudnnTensorDescriptor_t *out)
{
    int st = uc_tensor_clone(t, b, out);
    if (st == 0)
        p->owned_t[p->n_owned_t++] = *out;
    return st;
}

static const char *source_name(int source)
{
    return source == UC_SRC_FALLBACK ? "fallback" : source == UC_SRC_CACHE ? "cache" : "planner";
}

static void plan_json(uc_plan *p, int biasact)
{
    uc_sb sb = {0};
    uc_sb_printf(&sb, "{\"key\":");
    uc_sb_json_string(&sb, p->key_text);
    uc_sb_printf(&sb,
                 ",\"op\":\"%s\",\"bias_activation\":%s,\"batch\":%d,\"limit\":%zu,\"policy\":\"%s\","
                 "\"deterministic_only\":%s,\"source\":\"%s\",\"time_ms\":%.6g,\"workspace_bytes\":%zu,"
                 "\"deterministic\":%s,\"algo\":%d,\"micro_batches\":[",
                 uc_op_name(p->op), biasact ? "true" : "false", p->n, p->limit, uc_cfg_policy_name(p->policy),
                 p->det_requested ? "true" : "false", source_name(p->source),
                 (double)p->time_ms, p->workspace, p->deterministic ? "true" : "false", p->algo0);
    for (int i = 0; i < p->count; i++)
        uc_sb_printf(&sb, "%s{\"batch\":%d,\"algo\":%d,\"math_type\":%d}", i ? "," : "", p->mb[i].batch,
                     p->mb[i].algo, p->mb[i].math_type);
    uc_sb_printf(&sb, "]}");
    p->json = uc_sb_take(&sb);
}

uc_plan *uc_plan_new(int op, int n, size_t limit, int policy, int det, int count)
{
    uc_plan *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    atomic_init(&p->refs, 1);
    p->op = op;
    p->n = n;
    p->limit = limit;
    p->policy = policy;
    p->det_requested = det;
    p->count = count;
    p->algo0 = -1;
    return p;
}

/* Micro-batch i's descriptors (shared by micro-batches of one size; the caller's convolution descriptor serves
 * those of its math type, others get a clone, one per math type in by_math) and its workspace as the real library
 * reports it (*ws): 0 or a cuDNN status. */
static int micro_batch_descriptors(const uc_call *c, uc_plan *p, int i, cudnnConvolutionDescriptor_t by_math[4],
                                   size_t *ws)
{
    const uc_kernel *k = c->k;
    const ucudnn_micro_batch *m = &p->mb[i];
    int j = 0;
    while (j < i && p->mb[j].batch != m->batch)
        j++;
    int st = 0;
    if (j < i) {
        p->xd[i] = p->xd[j];
        p->yd[i] = p->yd[j];
        p->zd[i] = p->zd[j];
    } else {
        st = own_tensor(p, &k->x, m->batch, &p->xd[i]);
        if (st == 0)
            st = own_tensor(p, &k->y, m->batch, &p->yd[i]);
        if (st == 0 && k->biasact)
            st = own_tensor(p, &k->z, m->batch, &p->zd[i]);
    }
    if (st == 0 && m->math_type != k->math && !by_math[m->math_type]) {
        st = uc_conv_clone(k, m->math_type, &by_math[m->math_type]);
        if (st == 0)
            p->owned_c[p->n_owned_c++] = by_math[m->math_type];
    }
    p->cd[i] = m->math_type != k->math ? by_math[m->math_type] : NULL;
    *ws = 0;
    if (st == 0)
        st = uc_real_ws(c, p->xd[i], p->yd[i], p->cd[i] ? p->cd[i] : c->conv, m->algo, ws);
    return st;
}

/* The algorithm the plan reports in Get/Find results: the largest micro-batch's. A non-deterministic plan reports,
 * where it can, one of its non-deterministic algorithms, so a caller executing it is recognised as not asking for
 * determinism. */
static void reported_algorithm(const uc_call *c, uc_plan *p)
{
    ucudnn_perf rows[UC_MAX_ROWS];
    int nrows = 0;
    if (!p->deterministic && uc_real_get_v7(c, rows, UC_MAX_ROWS, &nrows) != 0)
        nrows = 0;
    int best = -1, best_nd = -1;
    for (int i = 0; i < p->count; i++) {
        if (best < 0 || p->mb[i].batch > p->mb[best].batch)
            best = i;
        if (!p->deterministic && uc_row_determinism(rows, nrows, p->mb[i].algo) == 0 &&
            (best_nd < 0 || p->mb[i].batch > p->mb[best_nd].batch))
            best_nd = i;
    }
    best = best_nd >= 0 ? best_nd : best;
    p->algo0 = p->mb[best].algo;
    p->math0 = p->mb[best].math_type;
}

/* The plan for a validated reply, or NULL with `why` set when the real library disagrees with it. */
uc_plan *uc_plan_build(const uc_call *c, const ucudnn_plan_request *req, const ucudnn_plan_reply *rep, int policy,
                       int source, char *why, size_t why_len)
{
    int cnt = rep->count;
    uc_plan *p = uc_plan_new(c->k->op, req->batch, req->workspace_limit_bytes, policy, req->deterministic_only, cnt);
    if (!p)
        return snprintf(why, why_len, "out of memory"), NULL;
    p->source = source;
    p->mb = malloc(sizeof *p->mb * (size_t)cnt);
    p->xd = calloc((size_t)cnt, sizeof *p->xd);
    p->yd = calloc((size_t)cnt, sizeof *p->yd);
    p->zd = calloc((size_t)cnt, sizeof *p->zd);
    p->cd = calloc((size_t)cnt, sizeof *p->cd);
    p->owned_t = calloc((size_t)cnt * 3, sizeof *p->owned_t);
    p->owned_c = calloc(4, sizeof *p->owned_c);
    p->key_text = strdup(req->key);
    if (!p->mb || !p->xd || !p->yd || !p->zd || !p->cd || !p->owned_t || !p->owned_c || !p->key_text) {
        uc_plan_free(p);
        return snprintf(why, why_len, "out of memory"), NULL;
    }
    memcpy(p->mb, rep->micro_batches, sizeof *p->mb * (size_t)cnt);
    cudnnConvolutionDescriptor_t by_math[4] = {0};
    size_t ws_max = 0;
    for (int i = 0; i < cnt; i++) {
        size_t ws = 0;
        int st = micro_batch_descriptors(c, p, i, by_math, &ws);
        if (st != 0) {
            snprintf(why, why_len, "the real library refuses algorithm %d at batch %d (status %d)", p->mb[i].algo,
                     p->mb[i].batch, st);
            uc_plan_free(p);
            return NULL;
        }
        ws_max = ws > ws_max ? ws : ws_max;
    }
    if (ws_max > req->workspace_limit_bytes) {
        snprintf(why, why_len, "the real workspace %zu exceeds the limit %zu", ws_max, req->workspace_limit_bytes);
        uc_plan_free(p);
        return NULL;
    }
    p->workspace = ws_max > rep->workspace_bytes ? ws_max : rep->workspace_bytes;
    p->time_ms = rep->time_ms;
    p->deterministic = rep->deterministic != 0;
    p->verified = rep->verified == 1;
    reported_algorithm(c, p);
    plan_json(p, c->k->biasact);
    return p;
}
