/* Host backend: algorithm lookup in the kernels' per-op tables. */
#include "hb_internal.h"

const hb_algo *hb_find_algo(hb_op op, int algo) {
    const hb_algo *const *table;
    int count;
    switch (op) {
    case HB_OP_FWD: table = hb_fwd_algos; count = hb_fwd_algo_count; break;
    case HB_OP_BWD_DATA: table = hb_bwd_data_algos; count = hb_bwd_data_algo_count; break;
    case HB_OP_BWD_FILTER: table = hb_bwd_filter_algos; count = hb_bwd_filter_algo_count; break;
    default: return NULL;
    }
    for (int i = 0; i < count; i++)
        if (table[i] && table[i]->algo == algo) return table[i];
    return NULL;
}
