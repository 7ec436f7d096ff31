/*
 * The four execution hooks: run a call as its plan's micro-batches.
 *
 * Micro-batch i, starting at sample n0, gets the data pointers advanced by n0 * nStride * element size (right for
 * any strides, NCHW or NHWC), the plan's descriptors for its size, and the caller's workspace, handle and stream;
 * nothing synchronises between micro-batches. BackwardFilter sums over samples, so it takes the caller's beta for
 * the first micro-batch and 1 (double for DOUBLE data, float otherwise) for the others.
 *
 * Which plan: the decision depends on the kernel, N, the workspace the caller passes (capped by an explicit
 * per-kernel limit, or the whole budget under Workspace Division, where the planner caps each kernel at its
 * share; by default nothing caps it), the policy and the caller's algorithm (whose determinism the plan must
 * keep), and is memoised under exactly that, so a steady-state call costs the descriptor reads and one cache
 * lookup. Plans cleared while one was made (a re-division) leave that one uncached (uc_cache_put). A new
 * micro-batched plan is checked on its first executions against the undivided choice (uc_verify.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "uc_internal.h"

typedef struct {
    const uc_kernel *k;
    cudnnHandle_t handle;
    const void *alpha, *beta, *alpha2;
    char *x, *y, *z;      /* split along N: x the input side (dx for BackwardData), y the output side (dy) */
    void *w;              /* unsplit: w, or dw for BackwardFilter */
    cudnnTensorDescriptor_t xdesc, ydesc, zdesc, bias_desc;
    cudnnFilterDescriptor_t wdesc;
    cudnnConvolutionDescriptor_t conv;
    const void *bias;
    cudnnActivationDescriptor_t act;
    int algo;
    void *ws;
    size_t ws_bytes;
} exec_args;

static int call_real(const exec_args *a, cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t yd,
                     cudnnTensorDescriptor_t zd, cudnnConvolutionDescriptor_t cd, int algo, const void *beta, int n0)
{
    const uc_real_table *r = uc_real();
    char *x = a->x ? a->x + uc_sample_offset(&a->k->x, n0) : NULL;
    char *y = a->y ? a->y + uc_sample_offset(&a->k->y, n0) : NULL;
    char *z = a->z ? a->z + uc_sample_offset(&a->k->z, n0) : NULL;
    if (a->k->biasact)
        return r->cudnnConvolutionBiasActivationForward(a->handle, a->alpha, xd, x, a->wdesc, a->w, cd,
                                                        (cudnnConvolutionFwdAlgo_t)algo, a->ws, a->ws_bytes,
                                                        a->alpha2, zd, z, a->bias_desc, a->bias, a->act, yd, y);
    switch (a->k->op) {
    case UCUDNN_OP_FWD:
        return r->cudnnConvolutionForward(a->handle, a->alpha, xd, x, a->wdesc, a->w, cd,
                                          (cudnnConvolutionFwdAlgo_t)algo, a->ws, a->ws_bytes, beta, yd, y);
    case UCUDNN_OP_BWD_DATA:
        return r->cudnnConvolutionBackwardData(a->handle, a->alpha, a->wdesc, a->w, yd, y, cd,
                                               (cudnnConvolutionBwdDataAlgo_t)algo, a->ws, a->ws_bytes, beta, xd, x);
    default:
        return r->cudnnConvolutionBackwardFilter(a->handle, a->alpha, xd, x, yd, y, cd,
                                                 (cudnnConvolutionBwdFilterAlgo_t)algo, a->ws, a->ws_bytes, beta,
                                                 a->wdesc, a->w);
    }
}

static int call_original(const exec_args *a)
{
    uc_guard++;
    int st = call_real(a, a->xdesc, a->ydesc, a->zdesc, a->conv, a->algo, a->beta, 0);
    uc_guard--;
    return st;
}

/*
 * Micro-batch i (from sample n0) was refused for its arguments. Samples are independent (and BackwardFilter's
 * partial sums are already accumulated), so the rest [n0, N) runs as one call with the caller's own algorithm,
 * which fitted the caller's workspace at the full N: the result is still exactly right.
 */
static int finish_rest(const exec_args *a, int n0, const void *beta)
{
    const uc_real_table *r = uc_real();
    int rest = a->k->x.dims[0] - n0;
    cudnnTensorDescriptor_t xd = NULL, yd = NULL, zd = NULL;
    int st = uc_tensor_clone(&a->k->x, rest, &xd);
    if (st == 0)
        st = uc_tensor_clone(&a->k->y, rest, &yd);
    if (st == 0 && a->k->biasact)
        st = uc_tensor_clone(&a->k->z, rest, &zd);
    if (st == 0)
        st = call_real(a, xd, yd, zd, a->conv, a->algo, beta, n0);
    if (xd)
        r->cudnnDestroyTensorDescriptor(xd);
    if (yd)
        r->cudnnDestroyTensorDescriptor(yd);
    if (zd)
        r->cudnnDestroyTensorDescriptor(zd);
    return st;
}

/* Runs the plan; *issued counts real calls made. Returns the status, *ran_plan 0 if it fell back to the
 * caller's original call before anything was written. */
static int run_plan(const exec_args *a, const uc_plan *p, int *issued, int *ran_plan)
{
    static const float one_f = 1.0f;
    static const double one_d = 1.0;
    const void *one = a->k->x.dtype == CUDNN_DATA_DOUBLE ? (const void *)&one_d : (const void *)&one_f;
    int n0 = 0;
    *ran_plan = 1;
    uc_guard++;
    for (int i = 0; i < p->count; i++) {
        const void *beta = (a->k->op == UCUDNN_OP_BWD_FILTER && i > 0) ? one : a->beta;
        int st = call_real(a, p->xd[i], p->yd[i], p->zd[i], p->cd[i] ? p->cd[i] : a->conv, p->mb[i].algo, beta, n0);
        ++*issued;
        if (st != 0) {
            if (uc_status_refused(st)) {
                UC_COUNT(exec_recoveries, 1);
                uc_log(UC_LOG_INFO, "micro-batch %d (algo %d, %d samples) refused with %d; finishing with algo %d",
                       i, p->mb[i].algo, p->mb[i].batch, st, a->algo);
                ++*issued;
                if (n0 == 0) {
                    *ran_plan = 0;
                    st = call_real(a, a->xdesc, a->ydesc, a->zdesc, a->conv, a->algo, a->beta, 0);
                } else {
                    st = finish_rest(a, n0, beta);
                }
            }
            uc_guard--;
            return st;
        }
        n0 += p->mb[i].batch;
    }
    uc_guard--;
    return 0;
}

/* 1 when executions of plan p get a check on real executions (a new divided plan, checks on, no Division). */
static int gets_checked(const uc_plan *p)
{
    return p->count > 1 && !p->verified && uc_cfg_verify_samples() > 0 && !uc_cfg_total_workspace();
}

size_t uc_reported_workspace(const uc_call *c, const uc_plan *p, size_t limit)
{
    if (!gets_checked(p))
        return p->workspace;
    int det = uc_cfg_deterministic() || uc_algo_deterministic(c, p->algo0); /* what executing algo0 asks for */
    uc_plan *base = uc_get_plan_as(c, limit, det, uc_cfg_policy_undivided(), NULL);
    size_t ws = p->workspace;
    if (base && base->count == 1 && base->workspace > ws)
        ws = base->workspace;
    uc_plan_release(base);
    return ws;
}

/*
 * The plan of an execution decision, and its check in progress (*verify, referenced) when the plan is new and
 * micro-batched. A divided plan the planner does not already know to have won a check gets one: the undivided
 * choice for the same workspace is planned too, and the first executions alternate between the two.
 */
static uc_plan *exec_plan(const uc_call *c, const uc_ckey *key, size_t usable, int algo, uc_verify **verify)
{
    uint64_t view = uc_cache_view();
    uc_plan *p = uc_cache_get_exec(key, verify);
    if (p)
        return p;
    /* The real library judges the caller's own call first (its algorithm for this problem, the descriptors'
     * agreement): a call it refuses for anything but the workspace gets its status, never a plan in its place.
     * Only on a miss: the answer depends on nothing outside the key. Not cached: nothing is planned for it.
     * Except an algorithm the shim itself reported for a plan of this kernel (Get/Find): executing it runs the
     * plan, even where the real library would not run that algorithm at the full N. */
    size_t need = 0;
    int st = uc_real_ws(c, c->x, c->y, c->conv, algo, &need);
    if (st != 0 && !uc_cache_reported(c->k, algo)) {
        uc_log(UC_LOG_DEBUG, "%s passes through: the real library refuses algorithm %d here (status %d)",
               uc_op_name(c->k->op), algo, st);
        return NULL;
    }
    /* The caller's algorithm says whether it wants determinism: a plan never trades it away. */
    int det = uc_cfg_deterministic() || uc_algo_deterministic(c, algo);
    int fresh = 0;
    p = uc_get_plan_bucketed(c, usable, det, uc_cfg_policy(), &fresh);
    if (fresh && usable < uc_planning_limit()) /* planned again for a workspace below Get/Find's limit */
        UC_COUNT(replans, 1);
    if (!p)
        return NULL;
    int check_it = gets_checked(p);
    /* Made for another request (a larger limit, or without determinism and found deterministic): ask what is
     * known about exactly this one -- a check may have settled it in an earlier run. At most UC_EXACT_ASKS sizes a
     * kernel: past them a new size is simply checked. */
    if (check_it && (p->limit != usable || p->det_requested != det) && uc_cache_kernel_exact_ask(c->k)) {
        uc_plan *q = uc_plan_exact(c, usable, det);
        if (q && q->verified) {
            uc_plan_release(p);
            p = q;
        } else {
            uc_plan_release(q);
        }
    }
    /* The undivided choice for the same workspace: its predicted time goes to the exit summary (what cuDNN
     * alone would take in it), and a new divided plan is checked against it. Not under Division (each request
     * is a re-division) nor with checks off (no second planner call then). */
    uc_verify *check = NULL;
    if (p->count > 1 && !uc_cfg_total_workspace() && uc_cfg_verify_samples() > 0) {
        uc_plan *base = uc_get_plan_bucketed(c, usable, det, uc_cfg_policy_undivided(), NULL);
        if (base && base->count == 1) {
            float unknown = 0.0f;
            atomic_compare_exchange_strong(&p->base_ms, &unknown, base->time_ms);
            if (check_it && !p->verified)
                check = uc_verify_new(p, base, det, usable);
        }
        uc_plan_release(base);
    }
    uc_plan *cached = uc_cache_put_exec(key, p, check, view, verify);
    if (check && !*verify && cached == p) /* a stale view: the plan is used uncached, and so is its check */
        *verify = check;
    else
        uc_verify_release(check);
    if (check && *verify == check)
        UC_COUNT(checks_started, 1);
    uc_plan_release(p);
    return cached;
}

/* The check of this decision is over: keep the winner, count it, and tell the planner's recorder. */
static void settle(const uc_call *c, const uc_ckey *key, uc_verify *v)
{
    uc_verdict_info d;
    if (!uc_verify_verdict(v, &d))
        return;
    uc_cache_settle(key, v, d.kept ? d.plan : d.base);
    UC_COUNT(verified, 1);
    if (!d.kept)
        UC_COUNT(rejected_by_measurement, 1);
    uc_log(UC_LOG_INFO, "%s at N=%d, workspace %zu: %d micro-batches measured %.4g ms, undivided algo %d %.4g ms "
                        "(median of %d): %s", uc_op_name(c->k->op), d.plan->n, d.workspace, d.plan->count,
           d.plan_ms, d.base->mb[0].algo, d.base_ms, d.samples, d.kept ? "kept" : "replaced by the undivided choice");
    ucudnn_verdict out = {UCUDNN_ABI_VERSION, c->k->op, d.plan->key_text, NULL, d.plan->n, d.workspace,
                          uc_cfg_policy_name(d.plan->policy), d.det, d.kept, d.plan->count, d.plan->mb,
                          d.base->mb[0], d.plan_ms, d.base_ms, d.samples};
    uc_record_verdict(&out);
}

/* ---- the calling thread's last plan ---- */

static pthread_key_t last_key;
static pthread_once_t last_once = PTHREAD_ONCE_INIT;
static int last_key_ok;

static void release_last(void *p)
{
    uc_plan_release(p);
}

static void make_last_key(void)
{
    last_key_ok = pthread_key_create(&last_key, release_last) == 0;
}

/* The calling thread's most recent executed plan is p (a reference handed over; released when replaced). */
static void set_last_plan(uc_plan *p)
{
    pthread_once(&last_once, make_last_key);
    if (!last_key_ok) {
        uc_plan_release(p);
        return;
    }
    uc_plan *old = pthread_getspecific(last_key);
    if (old == p) { /* the common steady state: keep one reference */
        uc_plan_release(p);
        return;
    }
    if (pthread_setspecific(last_key, p) != 0) {
        uc_plan_release(p);
        return;
    }
    uc_plan_release(old);
}

const uc_plan *uc_last_plan(void)
{
    pthread_once(&last_once, make_last_key);
    return last_key_ok ? pthread_getspecific(last_key) : NULL;
}

/* Arguments the real library refuses before it looks at anything else: nothing is planned for them. */
static const char *bad_arguments(const exec_args *a)
{
    if (!a->handle || !a->alpha || !a->x || !a->y || !a->w)
        return "a NULL handle, scaling factor or data pointer";
    if (a->k->biasact ? !a->alpha2 || !a->bias || !a->z || !a->bias_desc || !a->act : !a->beta)
        return "a NULL scaling factor, addend, bias or activation";
    if (a->algo < 0 || a->algo >= uc_algo_count(a->k->op))
        return "the caller's algorithm is not one of the op's";
    return NULL;
}

static cudnnStatus_t execute(const exec_args *a, const char *why)
{
    if (!why) /* validation first: cuDNN's own answer, not a plan's, and no planning for it */
        why = bad_arguments(a);
    if (why) {
        UC_COUNT(passthrough, 1);
        uc_log(UC_LOG_DEBUG, "%s passes through: %s", uc_op_name(a->k->op), why);
        return (cudnnStatus_t)call_original(a);
    }
    uc_call c = {a->handle, a->k, a->xdesc, a->ydesc, a->wdesc, a->conv};
    size_t cap = uc_cfg_exec_cap();
    /* All the decision depends on: one entry per value. A NULL workspace offers nothing, whatever its size. */
    size_t usable = !a->ws ? 0 : a->ws_bytes < cap ? a->ws_bytes : cap;
    size_t offered = a->ws ? a->ws_bytes : 0;
    UC_COUNT_MAX(max_offered_workspace, offered);
    if (offered > cap)
        UC_COUNT(limit_bound_calls, 1);
    else
        UC_COUNT(caller_bound_calls, 1);
    uc_ckey key;
    uc_ckey_init(&key, UC_KEY_EXEC, a->k, uc_cfg_policy(), a->algo, usable, cap);
    uc_verify *v = NULL;
    uc_plan *p = exec_plan(&c, &key, usable, a->algo, &v);
    if (!p || p->count == 0) {
        uc_plan_release(p);
        uc_verify_release(v);
        UC_COUNT(passthrough, 1);
        return (cudnnStatus_t)call_original(a);
    }
    uc_plan *run = p;
    /* During a CUDA-graph capture the check waits: no events are recorded or queried, the plan runs. */
    if (v && uc_stream_capturing(a->handle)) {
        uc_verify_release(v);
        v = NULL;
    }
    int slot = v ? uc_verify_begin(v, &run) : -1;
    uc_mark mark;
    int timed = slot >= 0 && uc_mark_start(&mark, a->handle) == 0;
    int issued = 0, ran_plan = 0;
    int st = run_plan(a, run, &issued, &ran_plan);
    if (slot >= 0) {
        UC_COUNT(verify_executions, 1);
        timed = timed && uc_mark_stop(&mark) == 0;
        uc_verify_end(v, slot, timed ? &mark : NULL, st == 0 && ran_plan);
    }
    if (v) {
        settle(&c, &key, v);
        uc_verify_release(v);
    }
    UC_COUNT(micro_batches, issued);
    if (ran_plan) {
        UC_COUNT(planned, 1);
        float base_ms = atomic_load(&run->base_ms);
        if (run->count > 1)
            UC_COUNT(divided_calls, 1);
        if (run->count > 1 && slot >= 0)
            UC_COUNT(verify_divided_calls, 1);
        if (run->time_ms > 0) {
            UC_COUNT(predicted_ns, run->time_ms * 1e6);
            UC_COUNT(undivided_predicted_ns, (run->count > 1 && base_ms > 0 ? base_ms : run->time_ms) * 1e6);
        }
        UC_COUNT_MAX(peak_workspace, run->workspace);
    } else {
        UC_COUNT(passthrough, 1);
    }
    if (run != p) {
        uc_plan_ref(run);
        uc_plan_release(p);
    }
    set_last_plan(run); /* hands over our reference */
    return (cudnnStatus_t)st;
}

cudnnStatus_t uc_hook_cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                              const cudnnTensorDescriptor_t xDesc, const void *x,
                                              const cudnnFilterDescriptor_t wDesc, const void *w,
                                              const cudnnConvolutionDescriptor_t convDesc,
                                              cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                              size_t workSpaceSizeInBytes, const void *beta,
                                              const cudnnTensorDescriptor_t yDesc, void *y)
{
    uc_kernel k;
    const char *why = uc_kernel_read(&k, UCUDNN_OP_FWD, xDesc, wDesc, convDesc, yDesc, NULL);
    exec_args a = {&k, handle, alpha, beta, NULL, (char *)x, (char *)y, NULL, (void *)w, xDesc, yDesc, NULL,
                   NULL, wDesc, convDesc, NULL, NULL, (int)algo, workSpace, workSpaceSizeInBytes};
    return execute(&a, why);
}

cudnnStatus_t uc_hook_cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                                   const cudnnFilterDescriptor_t wDesc, const void *w,
                                                   const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                   const cudnnConvolutionDescriptor_t convDesc,
                                                   cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                                   size_t workSpaceSizeInBytes, const void *beta,
                                                   const cudnnTensorDescriptor_t dxDesc, void *dx)
{
    uc_kernel k;
    const char *why = uc_kernel_read(&k, UCUDNN_OP_BWD_DATA, dxDesc, wDesc, convDesc, dyDesc, NULL);
    exec_args a = {&k, handle, alpha, beta, NULL, (char *)dx, (char *)dy, NULL, (void *)w, dxDesc, dyDesc, NULL,
                   NULL, wDesc, convDesc, NULL, NULL, (int)algo, workSpace, workSpaceSizeInBytes};
    return execute(&a, why);
}

cudnnStatus_t uc_hook_cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                                     const cudnnTensorDescriptor_t xDesc, const void *x,
                                                     const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                     const cudnnConvolutionDescriptor_t convDesc,
                                                     cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                                     size_t workSpaceSizeInBytes, const void *beta,
                                                     const cudnnFilterDescriptor_t dwDesc, void *dw)
{
    uc_kernel k;
    const char *why = uc_kernel_read(&k, UCUDNN_OP_BWD_FILTER, xDesc, dwDesc, convDesc, dyDesc, NULL);
    exec_args a = {&k, handle, alpha, beta, NULL, (char *)x, (char *)dy, NULL, dw, xDesc, dyDesc, NULL,
                   NULL, dwDesc, convDesc, NULL, NULL, (int)algo, workSpace, workSpaceSizeInBytes};
    return execute(&a, why);
}

cudnnStatus_t uc_hook_cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void *alpha1, const cudnnTensorDescriptor_t xDesc, const void *x,
    const cudnnFilterDescriptor_t wDesc, const void *w, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionFwdAlgo_t algo, void *workSpace, size_t workSpaceSizeInBytes, const void *alpha2,
    const cudnnTensorDescriptor_t zDesc, const void *z, const cudnnTensorDescriptor_t biasDesc, const void *bias,
    const cudnnActivationDescriptor_t activationDesc, const cudnnTensorDescriptor_t yDesc, void *y)
{
    uc_kernel k;
    const char *why = uc_kernel_read(&k, UC_OP_BIASACT, xDesc, wDesc, convDesc, yDesc, zDesc);
    exec_args a = {&k, handle, alpha1, NULL, alpha2, (char *)x, (char *)y, (char *)z, (void *)w, xDesc, yDesc,
                   zDesc, biasDesc, wDesc, convDesc, bias, activationDesc, (int)algo, workSpace,
                   workSpaceSizeInBytes};
    return execute(&a, why);
}
