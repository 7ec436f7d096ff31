/*
 * BackwardFilter FFT and FFT_TILING: dw is the cross-correlation of the padded x with dy, summed over the batch per
 * frequency bin (one complex GEMM per bin; FFT_TILING sums over the tiles too), from the forward's spectra and
 * workspace (hb_kern_fft.c). Deterministic.
 */
#include "hb_kern.h"

static size_t workspace(const hb_problem *p) { return hb_fft_problem_workspace(p, 0, 0); }
static size_t workspace_tiled(const hb_problem *p) { return hb_fft_problem_workspace(p, 0, 1); }

static cudnnStatus_t run(const hb_problem *p, const void *x, const void *dy, void *dw, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    return hb_fft_grad_problem_run(p, 0, x, dy, dw, alpha, beta, ws);
}
static cudnnStatus_t run_tiled(const hb_problem *p, const void *x, const void *dy, void *dw, double alpha,
                               double beta, void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    return hb_fft_grad_problem_run(p, 1, x, dy, dw, alpha, beta, ws);
}

const hb_algo hb_bwd_filter_fft = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, "FFT", 1, HB_FFT_RATE, workspace, run,
                                   hb_fft_model_rate};
const hb_algo hb_bwd_filter_fft_tiling = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, "FFT_TILING", 1,
                                          HB_FFT_RATE, workspace_tiled, run_tiled, hb_fft_tiling_model_rate};
