/* The forward algorithm table (see hb_internal.h). Absent enum values are NOT_SUPPORTED. */
#include "hb_kern.h"

const hb_algo *const hb_fwd_algos[] = {&hb_fwd_implicit_gemm, &hb_fwd_implicit_precomp_gemm, &hb_fwd_gemm,
                                       &hb_fwd_fft,           &hb_fwd_fft_tiling,           &hb_fwd_winograd_nonfused};
const int hb_fwd_algo_count = (int)(sizeof hb_fwd_algos / sizeof hb_fwd_algos[0]);
