/*
 * What the framework is told: Get*_v7, Find*, Find*Ex and the workspace-size queries.
 *
 * The real library answers first (its failure is returned unchanged: the shim never succeeds where cuDNN
 * would fail on the arguments). Then the time/workspace front of plans, fastest first (each row: predicted
 * time, the plan's workspace, determinism only if every micro-batch's algorithm is, the math type of the
 * reported micro-batch), so a framework that takes the first entry whose workspace it can allocate (PyTorch's
 * legacy path does) lands on the fastest plan that fits its free memory, and executing with that entry's
 * workspace runs that plan. If any listed plan is not deterministic, the fastest deterministic plan follows, so
 * frameworks that keep only deterministic results still get a plan; then the real rows of algorithms not listed,
 * all within requestedAlgoCount, with *returnedAlgoCount always set.
 */
#include <string.h>

#include "uc_legacy.h"

/* A plan's row, planned at `limit`: its workspace as uc_reported_workspace says (room for the check's rival). */
static ucudnn_perf plan_row(const uc_call *c, const uc_plan *p, size_t limit)
{
    ucudnn_perf row;
    memset(&row, 0, sizeof row);
    row.algo = p->algo0;
    row.status = 0;
    row.time_ms = p->time_ms;
    row.memory = uc_reported_workspace(c, p, limit);
    row.determinism = p->deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
    row.math_type = p->math0;
    return row;
}

/* Most plans of the time/workspace front listed: enough to reach from the fastest to the least workspace in a
 * handful of steps (a powerOfTwo front holds about a dozen). */
#define UC_MAX_FRONT 16

static int same_row(const ucudnn_perf *a, const ucudnn_perf *b)
{
    return a->algo == b->algo && a->memory == b->memory;
}

/* Whether an explicit per-kernel limit shaped this list: the real library's first-ranked algorithm within the
 * caller's own bound (`uncapped`: what the framework can allocate, or the workspace a Find*Ex offers) needs more than
 * `limit`. Counted for the exit summary, so that a limit that never bound is seen to change nothing. */
static void note_limit(size_t limit, size_t uncapped, const ucudnn_perf *real_rows, int nreal)
{
    if (uc_cfg_limit_auto() || uc_cfg_total_workspace() || limit >= uncapped)
        return;
    UC_COUNT(limit_lists, 1);
    for (int i = 0; i < nreal; i++) {
        if (real_rows[i].status != 0 || real_rows[i].memory > uncapped)
            continue;
        if (real_rows[i].memory > limit)
            UC_COUNT(limit_bound_lists, 1);
        break;
    }
}

static cudnnStatus_t answer(const uc_call *c, size_t limit, size_t uncapped, int real_status,
                            const ucudnn_perf *real_rows, int nreal, int requested, int *returned, void *out)
{
    ucudnn_perf rows[UC_MAX_FRONT + 1 + UC_MAX_ROWS];
    int n = 0;
    if (real_status == 0) {
        note_limit(limit, uncapped, real_rows, nreal);
        /* The front: the fastest plan within the limit, then the fastest within one byte less than its
         * workspace, and so on down to the least workspace. Each step is the planner's exact optimum there. */
        ucudnn_perf front[UC_MAX_FRONT];
        int nf = 0, all_det = 1;
        size_t lim = limit;
        while (nf < UC_MAX_FRONT) {
            uc_plan *p = uc_get_plan(c, lim, 0);
            int ok = p && p->count > 0;
            size_t ws = ok ? p->workspace : 0;
            if (ok) {
                front[nf++] = plan_row(c, p, lim);
                all_det = all_det && p->deterministic;
            }
            uc_plan_release(p);
            if (!ok || ws == 0)
                break;
            lim = ws - 1;
        }
        /* Fewer rows asked for than the front holds: the fastest, the least workspace, and evenly between (a
         * framework short of memory must still find the small end); one row kept for a deterministic plan. */
        int room = requested - (all_det ? 0 : 1);
        room = room < 1 ? 1 : room;
        if (nf <= room) {
            memcpy(rows, front, sizeof front[0] * (size_t)nf);
            n = nf;
        } else {
            for (int i = 0; i < room; i++)
                rows[n++] = front[room == 1 ? 0 : (int)((long long)i * (nf - 1) / (room - 1))];
        }
        if (!all_det) {
            uc_plan *pd = uc_get_plan(c, limit, 1);
            if (pd && pd->count > 0) {
                ucudnn_perf row = plan_row(c, pd, limit);
                int listed = 0;
                for (int j = 0; j < n; j++)
                    listed = listed || same_row(&rows[j], &row);
                if (!listed)
                    rows[n++] = row;
            }
            uc_plan_release(pd);
        }
    }
    /* A real row whose algorithm labels a plan is left out: its workspace query answers the plan's workspace. */
    int planned = n;
    for (int j = 0; j < planned; j++)
        uc_cache_note_reported(c->k, rows[j].algo);
    for (int i = 0; i < nreal; i++) {
        int listed = 0;
        for (int j = 0; j < planned; j++)
            listed = listed || rows[j].algo == real_rows[i].algo;
        if (!listed)
            rows[n++] = real_rows[i];
    }
    int m = n < requested ? n : requested;
    memcpy(out, rows, sizeof(ucudnn_perf) * (size_t)m);
    *returned = m;
    return (cudnnStatus_t)real_status;
}

/* The plan's reported workspace if `algo` is the algorithm reported for the plan (or for the deterministic plan). */
static int plan_workspace(const uc_call *c, int algo, size_t *bytes)
{
    size_t limit = uc_planning_limit();
    int found = 0;
    uc_plan *p = uc_get_plan(c, limit, 0);
    if (p && p->count > 0 && algo == p->algo0) {
        *bytes = uc_reported_workspace(c, p, limit);
        found = 1;
    } else if (p && p->count > 0 && !p->deterministic) {
        uc_plan *pd = uc_get_plan(c, limit, 1);
        if (pd && pd->count > 0 && algo == pd->algo0) {
            *bytes = uc_reported_workspace(c, pd, limit);
            found = 1;
        }
        uc_plan_release(pd);
    }
    uc_plan_release(p);
    return found;
}

/* ---- workspace size ---- */

/* The plan's workspace when `algo` is the algorithm reported for a plan of the call, else the real library's answer
 * to the caller's exact arguments. An algorithm the shim never listed for a plan of this kernel plans nothing:
 * PyTorch's benchmark mode asks every algorithm's workspace before its Find*Ex, and a plan made then would be
 * measured on buffers of cuDNN's own, not on the tensors and workspace that Find*Ex passes. */
static cudnnStatus_t workspace_size(int op, cudnnHandle_t handle, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                    cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, int algo,
                                    size_t *bytes)
{
    uc_kernel k;
    const char *why = bytes ? uc_kernel_read(&k, op, x, w, conv, y, NULL) : "NULL";
    uc_call c = {handle, &k, x, y, w, conv, NULL};
    if (!why && uc_cache_reported(&k, algo) && plan_workspace(&c, algo, bytes))
        return CUDNN_STATUS_SUCCESS;
    return (cudnnStatus_t)uc_real_workspace_size(op, handle, x, w, conv, y, algo, bytes);
}

/* ---- Get*_v7 and Find* (the library's own buffers) ---- */

typedef enum { Q_GET, Q_FIND } qkind;

static cudnnStatus_t search(qkind kind, int op, cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                            cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y,
                            int requested, int *returned, void *out)
{
    uc_kernel k;
    k.op = op;
    const char *why = (requested < 1 || requested > UC_MAX_ROWS || !returned || !out)
                          ? "arguments the shim leaves to cuDNN"
                          : uc_kernel_read(&k, op, x, w, conv, y, NULL);
    uc_call c = {handle, &k, x, y, w, conv, NULL};
    if (why) /* the caller's exact arguments */
        return (cudnnStatus_t)uc_real_search(kind == Q_FIND, &c, x, y, requested, returned, out);
    ucudnn_perf rows[UC_MAX_ROWS];
    int n = 0;
    int st = kind == Q_GET ? uc_real_get_v7(&c, rows, UC_MAX_ROWS, &n) : uc_real_find(&c, x, y, rows, UC_MAX_ROWS, &n);
    /* The caller's own bound (what the framework can allocate), which only an explicit limit is compared with. */
    size_t mem = uc_cfg_limit_auto() ? 0 : uc_framework_memory();
    return answer(&c, uc_planning_limit(), mem ? mem : UC_UNLIMITED, st, rows, n, requested, returned, out);
}

/* ---- Find*Ex (the caller's buffers and workspace; the limit is capped at that workspace) ---- */

static cudnnStatus_t search_ex(int op, cudnnHandle_t handle, cudnnTensorDescriptor_t x, const void *xp,
                               cudnnFilterDescriptor_t w, const void *wp, cudnnConvolutionDescriptor_t conv,
                               cudnnTensorDescriptor_t y, const void *yp, int requested, int *returned, void *out,
                               void *ws, size_t ws_bytes)
{
    uc_kernel k;
    k.op = op;
    const char *why = (requested < 1 || !returned || !out) ? "bad arguments"
                                                           : uc_kernel_read(&k, op, x, w, conv, y, NULL);
    int big = why || requested > UC_MAX_ROWS;
    ucudnn_perf rows[UC_MAX_ROWS];
    int n = 0, cap = big ? requested : UC_MAX_ROWS;
    /* Planning benchmarks on the caller's buffers and workspace, as its own search did: under memory pressure
     * the workspace it could allocate is all there is, and a search on buffers of the library's own would have
     * to allocate every tensor again (at large micro-batches, often more than is free). Roles as uc_found's. */
    uc_found found = {(void *)xp, (void *)wp, (void *)yp, ws, ws_bytes, rows, 0};
    uc_call c = {handle, &k, x, y, w, conv, &found};
    int st = uc_real_search_ex(&c, x, y, cap, big ? returned : &n, big ? out : (void *)rows);
    if (big)
        return (cudnnStatus_t)st;
    if (n < 0 || n > UC_MAX_ROWS)
        n = 0;
    found.nrows = n;
    c.found = st == 0 ? &found : NULL;
    size_t ws_cap = uc_cfg_exec_cap();
    return answer(&c, ws_bytes < ws_cap ? ws_bytes : ws_cap, ws_bytes, st, rows, n, requested, returned, out);
}

/* ---- the hooks: each query's parameters, named as in hooks.def, in the roles the shim reads them in ---- */

#define QUERY_cudnnGetConvolutionForwardWorkspaceSize                                                          \
    workspace_size(UCUDNN_OP_FWD, handle, xDesc, wDesc, convDesc, yDesc, (int)algo, sizeInBytes)
#define QUERY_cudnnGetConvolutionBackwardDataWorkspaceSize                                                     \
    workspace_size(UCUDNN_OP_BWD_DATA, handle, dxDesc, wDesc, convDesc, dyDesc, (int)algo, sizeInBytes)
#define QUERY_cudnnGetConvolutionBackwardFilterWorkspaceSize                                                   \
    workspace_size(UCUDNN_OP_BWD_FILTER, handle, xDesc, gradDesc, convDesc, dyDesc, (int)algo, sizeInBytes)
#define QUERY_cudnnGetConvolutionForwardAlgorithm_v7                                                           \
    search(Q_GET, UCUDNN_OP_FWD, handle, xDesc, wDesc, convDesc, yDesc, requestedAlgoCount, returnedAlgoCount,  \
           perfResults)
#define QUERY_cudnnGetConvolutionBackwardDataAlgorithm_v7                                                      \
    search(Q_GET, UCUDNN_OP_BWD_DATA, handle, dxDesc, wDesc, convDesc, dyDesc, requestedAlgoCount,              \
           returnedAlgoCount, perfResults)
#define QUERY_cudnnGetConvolutionBackwardFilterAlgorithm_v7                                                    \
    search(Q_GET, UCUDNN_OP_BWD_FILTER, handle, srcDesc, gradDesc, convDesc, diffDesc, requestedAlgoCount,      \
           returnedAlgoCount, perfResults)
#define QUERY_cudnnFindConvolutionForwardAlgorithm                                                             \
    search(Q_FIND, UCUDNN_OP_FWD, handle, xDesc, wDesc, convDesc, yDesc, requestedAlgoCount, returnedAlgoCount, \
           perfResults)
#define QUERY_cudnnFindConvolutionBackwardDataAlgorithm                                                        \
    search(Q_FIND, UCUDNN_OP_BWD_DATA, handle, dxDesc, wDesc, convDesc, dyDesc, requestedAlgoCount,             \
           returnedAlgoCount, perfResults)
#define QUERY_cudnnFindConvolutionBackwardFilterAlgorithm                                                      \
    search(Q_FIND, UCUDNN_OP_BWD_FILTER, handle, xDesc, dwDesc, convDesc, dyDesc, requestedAlgoCount,           \
           returnedAlgoCount, perfResults)
#define QUERY_cudnnFindConvolutionForwardAlgorithmEx                                                           \
    search_ex(UCUDNN_OP_FWD, handle, xDesc, x, wDesc, w, convDesc, yDesc, y, requestedAlgoCount,                \
              returnedAlgoCount, perfResults, workSpace, workSpaceSizeInBytes)
#define QUERY_cudnnFindConvolutionBackwardDataAlgorithmEx                                                      \
    search_ex(UCUDNN_OP_BWD_DATA, handle, dxDesc, dx, wDesc, w, convDesc, dyDesc, dy, requestedAlgoCount,       \
              returnedAlgoCount, perfResults, workSpace, workSpaceSizeInBytes)
#define QUERY_cudnnFindConvolutionBackwardFilterAlgorithmEx                                                    \
    search_ex(UCUDNN_OP_BWD_FILTER, handle, xDesc, x, dwDesc, dw, convDesc, dyDesc, y, requestedAlgoCount,      \
              returnedAlgoCount, perfResults, workSpace, workSpaceSizeInBytes)

#define UC_QUERY(ret, name, params, args)                                                                      \
    ret uc_hook_##name params                                                                                  \
    {                                                                                                          \
        return QUERY_##name;                                                                                   \
    }
#include "hooks.def"
