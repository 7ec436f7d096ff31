/*
 * Host backend: the deterministic timing model behind UCUDNN_HOST_TIMING=model (and the model clock).
 *
 *   time_ms = HB_LAUNCH_MS + macs / (model_rate * HB_MACS_PER_MS * eff(N)),   eff(N) = N / (N + HB_HALF_BATCH)
 *
 * - macs: the problem's multiply-accumulates, the same for the three ops of one layer.
 * - model_rate: the algorithm's relative throughput from its hb_algo entry (or its rate_of); the kernels give the
 *   workspace-hungry algorithms the higher rates, so (as on a GPU) speed costs memory.
 * - eff(N): a GPU needs many samples in flight to fill its cores, so a small batch runs below peak rate:
 *   half of it at N = HB_HALF_BATCH, a third at N = 1. Together with the fixed per-call launch cost this
 *   makes splitting a batch cost something, so micro-batching pays only when a faster algorithm fits the
 *   smaller workspace -- the trade-off the planner exists to solve.
 * Constants are round numbers of a mid-range GPU: about 1 TMAC/s at rate 1, 5 us per call.
 */
#include "hb_internal.h"

#define HB_LAUNCH_MS 0.005
#define HB_MACS_PER_MS 1.0e9
#define HB_HALF_BATCH 2.0

double hb_problem_macs(const hb_problem *p) {
    double macs = (double)p->y.n * (double)p->w.k * (double)p->w.c;
    for (int i = 0; i < HB_SP; i++) macs *= (double)p->y.sp[i] * (double)p->w.sp[i];
    return macs;
}

double hb_model_time_ms(const hb_algo *a, const hb_problem *p) {
    double n = (double)p->y.n;
    double eff = n / (n + HB_HALF_BATCH);
    double rate = a->rate_of ? a->rate_of(p) : a->model_rate > 0 ? a->model_rate : 1.0;
    return HB_LAUNCH_MS + hb_problem_macs(p) / (rate * HB_MACS_PER_MS * eff);
}
