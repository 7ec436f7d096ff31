/*
 * BackwardData FFT and FFT_TILING: for stride 1 and no dilation, dx is the forward convolution of dy with the filter
 * transposed (K <-> C within each group), rotated by 180 degrees and with padding R - 1 - pad, so the forward FFT
 * core does it (hb_kern_fft.c), on the whole plane or by tiles. Workspace grows with N.
 */
#include "hb_kern.h"

static size_t workspace(const hb_problem *p) { return hb_fft_problem_workspace(p, 1, 0); }
static size_t workspace_tiled(const hb_problem *p) { return hb_fft_problem_workspace(p, 1, 1); }

static cudnnStatus_t run(const hb_problem *p, const void *w, const void *dy, void *dx, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    return hb_fft_problem_run(p, 1, 0, dy, w, dx, alpha, beta, ws);
}
static cudnnStatus_t run_tiled(const hb_problem *p, const void *w, const void *dy, void *dx, double alpha,
                               double beta, void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    return hb_fft_problem_run(p, 1, 1, dy, w, dx, alpha, beta, ws);
}

const hb_algo hb_bwd_data_fft = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, "FFT", 1, HB_FFT_RATE, workspace, run,
                                 hb_fft_model_rate};
const hb_algo hb_bwd_data_fft_tiling = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, "FFT_TILING", 1, HB_FFT_RATE,
                                        workspace_tiled, run_tiled, hb_fft_tiling_model_rate};
