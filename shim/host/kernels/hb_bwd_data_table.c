/* The backward-data algorithm table (see hb_internal.h). Absent enum values are NOT_SUPPORTED. */
#include "hb_kern.h"

const hb_algo *const hb_bwd_data_algos[] = {&hb_bwd_data_algo0, &hb_bwd_data_algo1, &hb_bwd_data_fft,
                                            &hb_bwd_data_fft_tiling, &hb_bwd_data_winograd_nonfused};
const int hb_bwd_data_algo_count = (int)(sizeof hb_bwd_data_algos / sizeof hb_bwd_data_algos[0]);
