/*
 * The four execution hooks: run a call as its plan's micro-batches.
 *
 * Micro-batch i, starting at sample n0, gets the data pointers advanced by n0 * nStride * element size (right for
 * any strides, NCHW or NHWC), the plan's descriptors for its size, and the caller's workspace, handle and stream;
 * nothing synchronises between micro-batches. BackwardFilter sums over samples, so it takes the caller's beta for
 * the first micro-batch and 1 (double for DOUBLE data, float otherwise) for the others.
 *
 * Which plan runs is the plan decision's (uc_decide.c); while a new micro-batched plan is checked against the
 * undivided choice, this file times the side the check gives each execution (uc_verify.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "uc_legacy.h"

typedef struct {
    int op;               /* UCUDNN_OP_*, or UC_OP_BIASACT */
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

/* Byte offset of sample n0 in tensor t. */
static ptrdiff_t sample_offset(const uc_tensor *t, int n0)
{
    return (ptrdiff_t)n0 * (ptrdiff_t)t->strides[0] * (ptrdiff_t)uc_dtype_size(t->dtype);
}

static int call_real(const exec_args *a, cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t yd,
                     cudnnTensorDescriptor_t zd, cudnnConvolutionDescriptor_t cd, int algo, const void *beta, int n0)
{
    const uc_real_table *r = uc_real();
    char *x = a->x ? a->x + sample_offset(&a->k->x, n0) : NULL;
    char *y = a->y ? a->y + sample_offset(&a->k->y, n0) : NULL;
    char *z = a->z ? a->z + sample_offset(&a->k->z, n0) : NULL;
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
    int rest = a->k->x.dims[0] - n0;
    cudnnTensorDescriptor_t xd = NULL, yd = NULL, zd = NULL;
    int st = uc_tensor_clone(&a->k->x, rest, &xd);
    if (st == 0)
        st = uc_tensor_clone(&a->k->y, rest, &yd);
    if (st == 0 && a->k->biasact)
        st = uc_tensor_clone(&a->k->z, rest, &zd);
    if (st == 0)
        st = call_real(a, xd, yd, zd, a->conv, a->algo, beta, n0);
    uc_tensor_destroy(xd);
    uc_tensor_destroy(yd);
    uc_tensor_destroy(zd);
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

/* Run plan *run, or, while a check is in progress (v), the side its trial gives this execution (*run), timed in
 * its slot (*slot, -1: untimed). The status; *issued and *ran_plan as run_plan says. */
static int run_checked(const exec_args *a, uc_verify *v, uc_plan **run, int *slot, int *issued, int *ran_plan)
{
    *slot = v ? uc_verify_begin(v, run) : -1;
    uc_mark mark;
    int timed = *slot >= 0 && uc_mark_start(&mark, a->handle) == 0;
    int st = run_plan(a, *run, issued, ran_plan);
    if (*slot >= 0) {
        UC_COUNT(verify_executions, 1);
        timed = timed && uc_mark_stop(&mark) == 0;
        uc_verify_end(v, *slot, timed ? &mark : NULL, st == 0 && *ran_plan);
    }
    return st;
}

/* The counts of an execution that ran plan `run` (slot >= 0: timed for a check) or fell back to the caller's own
 * call (ran_plan 0). */
static void count_run(const uc_plan *run, int issued, int ran_plan, int slot)
{
    UC_COUNT(micro_batches, issued);
    if (!ran_plan) {
        UC_COUNT(passthrough, 1);
        return;
    }
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
}

/* Whether the call overwrites its output (beta = 0): then a search may write that output before the call does, and
 * planning can measure on the call's own buffers and workspace, allocating nothing (a device short of memory
 * plans as one with room). Never for BiasActivation, whose output may be its addend z. */
static int overwrites_output(const exec_args *a)
{
    if (a->k->biasact)
        return 0;
    if (a->k->x.dtype == CUDNN_DATA_DOUBLE)
        return *(const double *)a->beta == 0.0;
    return *(const float *)a->beta == 0.0f;
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
    uc_found own = {a->x, a->w, a->y, a->ws, a->ws ? a->ws_bytes : 0, NULL, 0};
    uc_call c = {a->handle, a->k, a->xdesc, a->ydesc, a->wdesc, a->conv, overwrites_output(a) ? &own : NULL};
    uc_exec_decision d;
    uc_plan *p = uc_decide_exec(&c, a->algo, a->ws, a->ws_bytes, &d);
    if (!p || p->count == 0) {
        uc_plan_release(p);
        uc_verify_release(d.verify);
        UC_COUNT(passthrough, 1);
        return (cudnnStatus_t)call_original(a);
    }
    /* During a CUDA-graph capture the check waits: no events are recorded or queried, the plan runs. */
    if (d.verify && uc_stream_capturing(a->handle)) {
        uc_verify_release(d.verify);
        d.verify = NULL;
    }
    uc_plan *run = p;
    int issued = 0, ran_plan = 0, slot = -1;
    int st = run_checked(a, d.verify, &run, &slot, &issued, &ran_plan);
    if (d.verify)
        uc_decide_settle(&c, &d);
    count_run(run, issued, ran_plan, slot);
    if (run != p) {
        uc_plan_ref(run);
        uc_plan_release(p);
    }
    set_last_plan(run); /* hands over our reference */
    return (cudnnStatus_t)st;
}

/* A hook's call: its descriptors read into the kernel key, then executed. */
static cudnnStatus_t read_and_execute(exec_args *a)
{
    uc_kernel k;
    const char *why = uc_kernel_read(&k, a->op, a->xdesc, a->wdesc, a->conv, a->ydesc, a->zdesc);
    a->k = &k;
    return execute(a, why);
}

/* ---- the hooks: each execution's parameters, named as in hooks.def, in the roles the shim reads them in ---- */

#define EXEC_cudnnConvolutionForward                                                                           \
    {.op = UCUDNN_OP_FWD, .handle = handle, .alpha = alpha, .beta = beta, .x = (char *)x, .y = (char *)y,       \
     .w = (void *)w, .xdesc = xDesc, .ydesc = yDesc, .wdesc = wDesc, .conv = convDesc, .algo = (int)algo,      \
     .ws = workSpace, .ws_bytes = workSpaceSizeInBytes}
#define EXEC_cudnnConvolutionBackwardData                                                                      \
    {.op = UCUDNN_OP_BWD_DATA, .handle = handle, .alpha = alpha, .beta = beta, .x = (char *)dx, .y = (char *)dy, \
     .w = (void *)w, .xdesc = dxDesc, .ydesc = dyDesc, .wdesc = wDesc, .conv = convDesc, .algo = (int)algo,    \
     .ws = workSpace, .ws_bytes = workSpaceSizeInBytes}
#define EXEC_cudnnConvolutionBackwardFilter                                                                    \
    {.op = UCUDNN_OP_BWD_FILTER, .handle = handle, .alpha = alpha, .beta = beta, .x = (char *)x,               \
     .y = (char *)dy, .w = dw, .xdesc = xDesc, .ydesc = dyDesc, .wdesc = dwDesc, .conv = convDesc,             \
     .algo = (int)algo, .ws = workSpace, .ws_bytes = workSpaceSizeInBytes}
#define EXEC_cudnnConvolutionBiasActivationForward                                                             \
    {.op = UC_OP_BIASACT, .handle = handle, .alpha = alpha1, .alpha2 = alpha2, .x = (char *)x, .y = (char *)y,  \
     .z = (char *)z, .w = (void *)w, .xdesc = xDesc, .ydesc = yDesc, .zdesc = zDesc, .bias_desc = biasDesc,    \
     .wdesc = wDesc, .conv = convDesc, .bias = bias, .act = activationDesc, .algo = (int)algo,                  \
     .ws = workSpace, .ws_bytes = workSpaceSizeInBytes}

#define UC_EXEC(ret, name, params, args)                                                                       \
    ret uc_hook_##name params                                                                                  \
    {                                                                                                          \
        return read_and_execute(&(exec_args)EXEC_##name);                                                      \
    }
#include "hooks.def"
