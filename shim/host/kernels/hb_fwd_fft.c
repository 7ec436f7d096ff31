/*
 * Forward FFT and FFT_TILING: the padded input's and the filters' spectra, one complex GEMM per frequency bin, the
 * inverse transform of the products (hb_kern_fft.c). The workspace holds the batch's spectra (it grows with N) and
 * the filters' (K x C of them, whatever N): ALGO_FFT's of the whole padded image, FFT_TILING's of one 32 x 32 tile
 * (64 x 64 for filters past 16), so it takes any image size. 2-D, stride 1, no dilation, padding below the filter's
 * extent.
 */
#include "hb_kern.h"

static size_t workspace(const hb_problem *p) { return hb_fft_problem_workspace(p, 0, 0); }
static size_t workspace_tiled(const hb_problem *p) { return hb_fft_problem_workspace(p, 0, 1); }

static cudnnStatus_t run(const hb_problem *p, const void *x, const void *w, void *y, double alpha, double beta,
                         void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    return hb_fft_problem_run(p, 0, 0, x, w, y, alpha, beta, ws);
}
static cudnnStatus_t run_tiled(const hb_problem *p, const void *x, const void *w, void *y, double alpha,
                               double beta, void *ws, size_t ws_bytes) {
    (void)ws_bytes;
    return hb_fft_problem_run(p, 0, 1, x, w, y, alpha, beta, ws);
}

const hb_algo hb_fwd_fft = {CUDNN_CONVOLUTION_FWD_ALGO_FFT, "FFT", 1, HB_FFT_RATE, workspace, run, hb_fft_model_rate};
const hb_algo hb_fwd_fft_tiling = {CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, "FFT_TILING", 1, HB_FFT_RATE,
                                   workspace_tiled, run_tiled, hb_fft_tiling_model_rate};
