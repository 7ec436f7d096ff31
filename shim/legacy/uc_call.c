/*
 * The real library's answers about one legacy call, op by op: its Get*_v7 and Find* rows and its workspace sizes,
 * at the call's descriptors or at clones of them at another batch size, and the determinism of an algorithm as
 * those rows report it. Always with the guard up: the real library may call its own exports.
 */
#include "uc_legacy.h"

_Static_assert(sizeof(ucudnn_perf) == sizeof(cudnnConvolutionFwdAlgoPerf_t), "perf row layout");
_Static_assert(offsetof(ucudnn_perf, memory) == offsetof(cudnnConvolutionFwdAlgoPerf_t, memory), "perf layout");
_Static_assert(offsetof(ucudnn_perf, determinism) == offsetof(cudnnConvolutionFwdAlgoPerf_t, determinism),
               "perf row layout");

int uc_real_search(int find, const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, int cap,
                   int *n, void *rows)
{
    const uc_real_table *r = uc_real();
    int st = uc_status(UC_ST_NOT_SUPPORTED);
    int op = c->k->op;
    uc_guard++;
    if (!find && op == UCUDNN_OP_FWD && r->cudnnGetConvolutionForwardAlgorithm_v7)
        st = r->cudnnGetConvolutionForwardAlgorithm_v7(c->handle, x, c->w, c->conv, y, cap, n, rows);
    else if (!find && op == UCUDNN_OP_BWD_DATA && r->cudnnGetConvolutionBackwardDataAlgorithm_v7)
        st = r->cudnnGetConvolutionBackwardDataAlgorithm_v7(c->handle, c->w, y, c->conv, x, cap, n, rows);
    else if (!find && op == UCUDNN_OP_BWD_FILTER && r->cudnnGetConvolutionBackwardFilterAlgorithm_v7)
        st = r->cudnnGetConvolutionBackwardFilterAlgorithm_v7(c->handle, x, y, c->conv, c->w, cap, n, rows);
    else if (find && op == UCUDNN_OP_FWD && r->cudnnFindConvolutionForwardAlgorithm)
        st = r->cudnnFindConvolutionForwardAlgorithm(c->handle, x, c->w, c->conv, y, cap, n, rows);
    else if (find && op == UCUDNN_OP_BWD_DATA && r->cudnnFindConvolutionBackwardDataAlgorithm)
        st = r->cudnnFindConvolutionBackwardDataAlgorithm(c->handle, c->w, y, c->conv, x, cap, n, rows);
    else if (find && op == UCUDNN_OP_BWD_FILTER && r->cudnnFindConvolutionBackwardFilterAlgorithm)
        st = r->cudnnFindConvolutionBackwardFilterAlgorithm(c->handle, x, y, c->conv, c->w, cap, n, rows);
    uc_guard--;
    return st;
}

static int clamped(int st, int *n, int cap)
{
    if (st != 0 || *n < 0 || *n > cap)
        *n = 0;
    return st;
}

int uc_real_get_v7(const uc_call *c, ucudnn_perf *rows, int cap, int *n)
{
    *n = 0;
    return clamped(uc_real_search(0, c, c->x, c->y, cap, n, rows), n, cap);
}

int uc_real_find(const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, ucudnn_perf *rows,
                 int cap, int *n)
{
    *n = 0;
    return clamped(uc_real_search(1, c, x, y, cap, n, rows), n, cap);
}

/* The real Find*Ex on the caller's buffers, offered `ws_bytes` of its workspace. */
static int search_ex(const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, size_t ws_bytes,
                     int cap, int *n, void *rows)
{
    const uc_real_table *r = uc_real();
    const uc_found *f = c->found;
    int st = uc_status(UC_ST_NOT_SUPPORTED), op = c->k->op;
    uc_guard++;
    if (op == UCUDNN_OP_FWD && r->cudnnFindConvolutionForwardAlgorithmEx)
        st = r->cudnnFindConvolutionForwardAlgorithmEx(c->handle, x, f->x, c->w, f->w, c->conv, y, f->y, cap, n, rows,
                                                       f->ws, ws_bytes);
    else if (op == UCUDNN_OP_BWD_DATA && r->cudnnFindConvolutionBackwardDataAlgorithmEx)
        st = r->cudnnFindConvolutionBackwardDataAlgorithmEx(c->handle, c->w, f->w, y, f->y, c->conv, x, f->x, cap, n,
                                                            rows, f->ws, ws_bytes);
    else if (op == UCUDNN_OP_BWD_FILTER && r->cudnnFindConvolutionBackwardFilterAlgorithmEx)
        st = r->cudnnFindConvolutionBackwardFilterAlgorithmEx(c->handle, x, f->x, y, f->y, c->conv, c->w, f->w, cap,
                                                              n, rows, f->ws, ws_bytes);
    uc_guard--;
    return st;
}

int uc_real_search_ex(const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, int cap, int *n,
                      void *rows)
{
    return search_ex(c, x, y, c->found->ws_bytes, cap, n, rows);
}

int uc_real_find_ex(const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, size_t limit,
                    ucudnn_perf *rows, int cap, int *n)
{
    *n = 0;
    size_t offered = c->found->ws_bytes < limit ? c->found->ws_bytes : limit;
    return clamped(search_ex(c, x, y, offered, cap, n, rows), n, cap);
}

int uc_real_workspace_size(int op, cudnnHandle_t handle, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                           cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, int algo, size_t *bytes)
{
    const uc_real_table *r = uc_real();
    int st = uc_status(UC_ST_NOT_SUPPORTED);
    uc_guard++;
    if (op == UCUDNN_OP_FWD && r->cudnnGetConvolutionForwardWorkspaceSize)
        st = r->cudnnGetConvolutionForwardWorkspaceSize(handle, x, w, conv, y, (cudnnConvolutionFwdAlgo_t)algo, bytes);
    else if (op == UCUDNN_OP_BWD_DATA && r->cudnnGetConvolutionBackwardDataWorkspaceSize)
        st = r->cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w, y, conv, x, (cudnnConvolutionBwdDataAlgo_t)algo,
                                                             bytes);
    else if (op == UCUDNN_OP_BWD_FILTER && r->cudnnGetConvolutionBackwardFilterWorkspaceSize)
        st = r->cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, x, y, conv, w,
                                                               (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
    uc_guard--;
    return st;
}

int uc_real_ws(const uc_call *c, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y,
               cudnnConvolutionDescriptor_t conv, int algo, size_t *bytes)
{
    *bytes = 0;
    return uc_real_workspace_size(c->k->op, c->handle, x, c->w, conv, y, algo, bytes);
}

int uc_row_determinism(const ucudnn_perf *rows, int n, int algo)
{
    int seen = -1;
    for (int i = 0; i < n; i++) {
        if (rows[i].algo != algo)
            continue;
        if (rows[i].determinism == CUDNN_DETERMINISTIC)
            return 1;
        seen = 0;
    }
    return seen;
}

int uc_algo_deterministic(const uc_call *c, int algo)
{
    ucudnn_perf rows[UC_MAX_ROWS];
    int n = 0;
    if (uc_real_get_v7(c, rows, UC_MAX_ROWS, &n) != 0)
        return 1;
    return uc_row_determinism(rows, n, algo) != 0;
}
