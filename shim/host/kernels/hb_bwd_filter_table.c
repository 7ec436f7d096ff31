/* The backward-filter algorithm table (see hb_internal.h). Absent enum values are NOT_SUPPORTED. */
#include "hb_kern.h"

const hb_algo *const hb_bwd_filter_algos[] = {&hb_bwd_filter_algo0, &hb_bwd_filter_algo1, &hb_bwd_filter_fft,
                                              &hb_bwd_filter_algo3, &hb_bwd_filter_winograd_nonfused,
                                              &hb_bwd_filter_fft_tiling};
const int hb_bwd_filter_algo_count = (int)(sizeof hb_bwd_filter_algos / sizeof hb_bwd_filter_algos[0]);
