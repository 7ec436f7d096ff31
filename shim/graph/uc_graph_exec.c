/*
 * Executing a graph-API plan the shim took over (uc_graph_split.c decided it): the caller's variant pack checked
 * as cuDNN checks it, then the parts run in sequence in the caller's workspace with pointers advanced along N.
 *
 * The caller allocated the workspace the shim reported, so from the first workspace answer on the caller's own
 * plan can never run: a pack the shim cannot read is refused, never passed through. Its statuses are cuDNN's,
 * as measured on cuDNN 9.19 (PyTorch 2.11's wheel, an H100) with the same packs on a plain fprop plan: extra or
 * repeated uids are ignored (the first of a uid counts), a pack never finalized but otherwise whole runs, and
 * BAD_PARAM (2000) answers a NULL pack or handle, uid and pointer counts that differ, an empty pack, a graph
 * tensor's uid missing or its pointer NULL, and a NULL workspace where one is needed. (A descriptor of another
 * kind passed as the pack crashes cuDNN 9.19; the shim answers BAD_PARAM.)
 *
 * The check of a divided plan against the undivided choice (uc_trial) times the two on the executions after its
 * first UC_CHECK_UNTIMED (which run it divided, for a framework that times plans itself). A caller whose engine
 * is nondeterministic accepts either result, so those executions alternate. A deterministic one always gets the
 * plan's result during the check: on the undivided choice's turns that choice runs first, on
 * the caller's own data, timed, and the plan then overwrites what it wrote -- no scratch memory (which under
 * memory pressure would not be there, leaving the rival untimed and the plan kept unchecked) and no host
 * synchronisation. That takes a graph whose second run gives what one run gives: convolutions with beta 0 and no
 * output that is also an input. For any other graph a deterministic caller's check ends at once in favour of the
 * undivided choice (one change of engine, never an unchecked plan).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"

/* The caller's pack as the graph's non-virtual tensors: uid, pointer, bytes per sample (0: not split along N). */
typedef struct {
    int n;
    int64_t uid[UC_G_MAX_TENSORS], step[UC_G_MAX_TENSORS];
    void *ptr[UC_G_MAX_TENSORS];
    void *ws;
} bound_pack;

#define UC_PACK_CAP (UC_GREC_MAX_BYTES / 8)

/* 0, or the status cuDNN gives the pack (see the file comment). */
static int bind_pack(const uc_ggraph *g, void *vp, bound_pack *b)
{
    int64_t *uids = malloc(UC_PACK_CAP * sizeof *uids);
    void **ptrs = malloc(UC_PACK_CAP * sizeof *ptrs);
    int64_t n = uids && ptrs && vp ? uc_grec_pack(vp, uids, ptrs, UC_PACK_CAP, &b->ws) : -1;
    int st = n >= 1 ? 0 : uc_status(UC_ST_BAD_PARAM);
    b->n = 0;
    for (int i = 0; st == 0 && i < g->ntensors; i++) {
        const gtensor *t = &g->t[i];
        if (t->virt)
            continue;
        int64_t j = 0;
        while (j < n && uids[j] != t->uid)
            j++;
        if (j == n || !ptrs[j]) {
            st = uc_status(UC_ST_BAD_PARAM);
            break;
        }
        b->uid[b->n] = t->uid;
        b->ptr[b->n] = ptrs[j];
        b->step[b->n++] = uc_gb_split_tensor(g, t) ? t->strides[0] * (int64_t)uc_gb_dtype_bytes(t->dtype) : 0;
    }
    free(uids);
    free(ptrs);
    return st;
}

/* One part: a variant pack with pointers advanced by n0 samples, executed with plan. Under uc_guard. */
static cudnnStatus_t run_part(cudnnHandle_t handle, void *plan, int64_t n0, const bound_pack *b)
{
    const uc_real_table *r = uc_real();
    void *moved[UC_G_MAX_TENSORS];
    for (int i = 0; i < b->n; i++)
        moved[i] = (char *)b->ptr[i] + n0 * b->step[i];
    void *vp = NULL;
    cudnnStatus_t st = uc_gb_variant_pack(b->n, b->uid, moved, b->ws, &vp);
    if (st == 0)
        st = r->cudnnBackendExecute(handle, plan, vp);
    if (vp)
        r->cudnnBackendDestroyDescriptor(vp);
    return st;
}

/* Every part of `run` in order: the status, and in *parts how many ran. */
static cudnnStatus_t run_parts(cudnnHandle_t handle, const uc_gparts *run, const bound_pack *b, int *parts)
{
    cudnnStatus_t st = 0;
    int64_t n0 = 0;
    *parts = 0;
    uc_guard++;
    for (; st == 0 && *parts < run->nparts; n0 += run->size[*parts], (*parts)++)
        st = run_part(handle, run->plan[*parts], n0, b);
    uc_guard--;
    return st;
}

/* Whether the graph writes tensor `uid` (a convolution's output side, a pointwise op's y). */
static int written(const uc_ggraph *g, int64_t uid)
{
    for (int i = 0; i < g->nops; i++) {
        const gop *op = &g->ops[i];
        int role = op->type == UC_BK_OP_CONV_BWD_DATA ? 0 : op->type == UC_BK_OP_CONV_BWD_FILTER ? 1 : 2;
        if (op->t[role] == uid)
            return 1;
    }
    return 0;
}

typedef struct {
    int done, kept, samples; /* kept: main stays */
    double main_ms, alt_ms;
} verdict;

/* The check is over, main kept or replaced by alt: from now on one of them runs, counted. Under g->lock. */
static void end_check(uc_ggraph *g, int main_kept)
{
    g->trial_on = 0;
    g->use_alt = !main_kept;
    UC_COUNT(graph_verified, 1);
    UC_COUNT(graph_runner_up_checks, g->runner_up);
    UC_COUNT(graph_runner_up_won, !main_kept && g->runner_up);
    UC_COUNT(graph_rejected_by_measurement, !main_kept);
}

/* The trial's verdict as main's and alt's: side a is the side that must win clearly -- a divided plan against the
 * undivided choice, or a runner-up against the plan of one engine it would replace. Under g->lock. */
static void settle(uc_ggraph *g, double a_ms, double b_ms, int samples, int a_won, verdict *v)
{
    int main_kept = g->runner_up ? !a_won : a_won;
    *v = (verdict){1, main_kept, samples, g->runner_up ? b_ms : a_ms, g->runner_up ? a_ms : b_ms};
    end_check(g, main_kept);
    if (g->runner_up)
        uc_log(UC_LOG_INFO, "graph plan %p: engine %" PRId64 " %.4g ms, its runner-up engine %" PRId64 " %.4g ms "
               "(median of %d): the %s from now on", g->plan, g->main.engine[0], v->main_ms, g->alt.engine[0],
               v->alt_ms, samples, main_kept ? "plan's engine" : "runner-up");
    else
        uc_log(UC_LOG_INFO, "graph plan %p: divided %.4g ms, undivided engine %" PRId64 " %.4g ms (median of "
               "%d): the %s from now on", g->plan, v->main_ms, g->alt.engine[0], v->alt_ms, samples,
               main_kept ? "divided plan" : "undivided engine");
}

/* Which plan runs this execution (*use_alt), and the trial slot it fills (-1: untimed); *v the check's outcome
 * when it ended at this call. Under g->lock. */
static int choose(uc_ggraph *g, int *use_alt, verdict *v)
{
    int slot = -1;
    if (g->trial_on && g->untimed > 0) { /* a divided plan runs as divided first (UC_CHECK_UNTIMED) */
        g->untimed--;
        *use_alt = 0;
        return -1;
    }
    if (g->trial_on) {
        int side_b = 0;
        slot = uc_trial_begin(&g->trial, &side_b);
        if (slot == 0) /* a check starts at its plan's first timed execution (plans never run are not counted) */
            UC_COUNT(graph_checks_started, 1);
        double a_ms, b_ms;
        int samples, a_won;
        if (slot < 0 && uc_trial_verdict(&g->trial, &a_ms, &b_ms, &samples, &a_won))
            settle(g, a_ms, b_ms, samples, a_won, v);
        /* side b is alt for a divided plan, main against a runner-up (which must win clearly) */
        *use_alt = slot >= 0 ? side_b != g->runner_up : g->use_alt;
        return slot;
    }
    *use_alt = g->use_alt;
    return -1;
}

/* The check's outcome, to the planner's recorder (parts and the undivided choice as micro-batches). */
static void record(const uc_ggraph *g, const verdict *v)
{
    ucudnn_micro_batch *mbs = uc_gparts_steps(&g->main), *alt = uc_gparts_steps(&g->alt);
    if (!mbs || !alt) {
        free(mbs);
        free(alt);
        return;
    }
    ucudnn_micro_batch undivided = alt[0];
    free(alt);
    ucudnn_verdict out = {UCUDNN_ABI_VERSION, uc_graph_op_code(g), g->key, NULL, (int)g->n, g->limit,
                          uc_cfg_policy_name(g->policy), !(g->notes & (1 << 4)), v->kept, g->main.nparts, mbs,
                          undivided, v->main_ms, v->alt_ms, v->samples};
    uc_record_verdict(&out);
    free(mbs);
}

/* Whether running the graph twice on this pack leaves what one run leaves (see the file comment). */
static int rerunnable(const uc_ggraph *g, const bound_pack *b)
{
    if (!uc_gb_overwrites(g))
        return 0;
    for (int i = 0; i < b->n; i++)
        for (int j = 0; written(g, b->uid[i]) && j < b->n; j++)
            if (!written(g, b->uid[j]) && b->ptr[j] == b->ptr[i])
                return 0;
    return 1;
}

/* A deterministic caller's check cannot time alt: it ends now, for the undivided choice against a divided plan
 * (never an unchecked split), for the plan against a runner-up (never an unchecked change of engine). Under
 * g->lock. */
static void end_check_untimed(uc_ggraph *g, int slot)
{
    uc_trial_end(&g->trial, slot, NULL, 0);
    end_check(g, g->runner_up);
    uc_log(UC_LOG_INFO, "graph plan %p: a deterministic caller's graph cannot run twice on its data (beta != 0 or an "
           "output that is also an input), so %s from now on", g->plan, g->runner_up ? "the plan cannot be checked "
           "against its runner-up: the plan's engine" : "the divided plan cannot be checked: the undivided engine");
}

int uc_gexec_run(uc_ggraph *g, cudnnHandle_t handle, void *variant_pack, cudnnStatus_t *status)
{
    pthread_mutex_lock(&g->lock);
    int mine = g->decided == 1;
    pthread_mutex_unlock(&g->lock);
    if (!mine)
        return 0;
    bound_pack b;
    int st = handle ? bind_pack(g, variant_pack, &b) : uc_status(UC_ST_BAD_PARAM);
    if (st == 0 && !b.ws && g->workspace > 0)
        st = uc_status(UC_ST_BAD_PARAM);
    if (st != 0) {
        uc_log(UC_LOG_DEBUG, "graph plan %p: its variant pack is refused with status %d, as cuDNN refuses it", g->plan,
               st);
        *status = (cudnnStatus_t)st;
        return 1;
    }
    int capturing = uc_stream_capturing(handle), use_alt = 0;
    verdict v = {0};
    pthread_mutex_lock(&g->lock);
    /* During a CUDA-graph capture the check waits (no events recorded or queried); the current choice runs. */
    int slot = !capturing ? choose(g, &use_alt, &v) : (use_alt = g->use_alt, -1);
    /* A deterministic caller's results always come from the plan: its undivided rival runs first, then the plan. */
    int first = slot >= 0 && use_alt && !(g->notes & (1 << 4));
    if (first && !rerunnable(g, &b)) {
        end_check_untimed(g, slot);
        slot = -1;
        first = 0;
    }
    pthread_mutex_unlock(&g->lock);
    if (v.done && g->source && (strcmp(g->source, "planner") == 0 || strcmp(g->source, "offer") == 0))
        record(g, &v);
    const uc_gparts *run = use_alt && !first ? &g->alt : &g->main; /* immutable once decided */
    uc_mark mark;
    int timed = slot >= 0 && uc_mark_start(&mark, handle) == 0, parts = 0;
    cudnnStatus_t ast = first ? run_parts(handle, &g->alt, &b, &parts) : 0;
    if (first && timed)
        timed = uc_mark_stop(&mark) == 0;
    cudnnStatus_t rst = run_parts(handle, run, &b, &parts);
    if (!first) {
        if (timed)
            timed = uc_mark_stop(&mark) == 0;
        ast = rst;
    }
    if (slot >= 0) {
        pthread_mutex_lock(&g->lock);
        uc_trial_end(&g->trial, slot, timed ? &mark : NULL, ast == 0);
        pthread_mutex_unlock(&g->lock);
    }
    if (run->nparts > 1)
        UC_COUNT(graph_micro_batches, parts);
    if (rst != 0)
        uc_log(UC_LOG_WARNING, "graph plan %p: part %d of %d failed with status %d", g->plan, parts, run->nparts,
               (int)rst);
    *status = rst;
    return 1;
}
