/*
 * The rule that decides a check of a new micro-batched plan on real executions, shared by the legacy path
 * (legacy/uc_verify.c) and the graph path (graph/uc_graph_exec.c).
 *
 * The first 2 * (S + 1) executions alternate between side a (the plan, even slots) and side b (the undivided
 * choice, odd slots), S = UCUDNN_VERIFY_SAMPLES; each side's first execution warms up and is not counted. Each
 * execution is timed by the clock of uc_device.c (CUDA events read when complete, never a synchronisation; the
 * host backend's model clock or the wall clock). When every timed execution has been read, each plan execution is
 * compared with the undivided one next to it (a pair sees the same load on a shared machine). The plan is kept
 * only if the median of the pairs' ratios is more than UCUDNN_VERIFY_MARGIN below 1 and the plan was faster in
 * every pair; a tie or worse keeps the undivided choice (one call, no prediction to trust). When the median
 * favours the plan but some pair does not, S timings are too few for the noise: the check takes S more pairs,
 * once, and then keeps the plan only if it was faster in at least 4 pairs out of 5.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "uc_core.h"

enum { SLOT_FREE = 0, SLOT_RUNNING, SLOT_PENDING, SLOT_READ, SLOT_FAILED };

int uc_trial_init(uc_trial *t)
{
    int samples = uc_cfg_verify_samples();
    memset(t, 0, sizeof *t);
    if (samples <= 0)
        return -1;
    if (samples > UC_TRIAL_MAX_SAMPLES)
        samples = UC_TRIAL_MAX_SAMPLES;
    t->samples = samples;
    t->slots = 2 * (samples + 1);
    return 0;
}

void uc_trial_drop(uc_trial *t)
{
    for (int i = 0; i < t->slots; i++)
        uc_mark_drop(&t->marks[i]);
}

/* Read whatever pending marks have completed. */
static void poll(uc_trial *t)
{
    for (int i = 0; i < t->issued; i++) {
        if (t->state[i] != SLOT_PENDING)
            continue;
        double ms = 0;
        int rc = uc_mark_read(&t->marks[i], &ms);
        if (rc == 1) {
            t->state[i] = SLOT_READ;
            t->ms[i] = ms;
        } else if (rc < 0) {
            t->state[i] = SLOT_FAILED;
        }
    }
}

int uc_trial_begin(uc_trial *t, int *side_b)
{
    int slot = -1;
    poll(t);
    *side_b = 0;
    if (!t->settled && t->issued < t->slots) {
        slot = t->issued++;
        t->state[slot] = SLOT_RUNNING;
        *side_b = slot % 2; /* even slots the plan, odd ones the undivided choice */
    }
    return slot;
}

void uc_trial_end(uc_trial *t, int slot, const uc_mark *m, int ok)
{
    if (ok && m) {
        t->marks[slot] = *m;
        t->state[slot] = SLOT_PENDING;
    } else {
        if (m) {
            uc_mark copy = *m;
            uc_mark_drop(&copy);
        }
        t->state[slot] = SLOT_FAILED; /* counted as infinitely slow: a side that fails does not win */
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double uc_median(double *xs, int n)
{
    qsort(xs, (size_t)n, sizeof *xs, cmp_double);
    return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

/* Plan time over undivided time of one pair (a side that failed took INFINITY): never a NaN. */
static double pair_ratio(double a, double b)
{
    if (isnan(a) || isnan(b) || a == INFINITY)
        return INFINITY; /* the plan failed, or a clock misread: no win */
    if (b == INFINITY)
        return 0.0; /* the undivided choice failed: the plan wins the pair */
    if (b <= 0)
        return a <= 0 ? 1.0 : INFINITY;
    return a / b;
}

int uc_trial_verdict(uc_trial *t, double *a_ms, double *b_ms, int *samples, int *kept)
{
    poll(t);
    int complete = !t->settled && t->issued == t->slots;
    for (int i = 0; complete && i < t->slots; i++)
        complete = t->state[i] == SLOT_READ || t->state[i] == SLOT_FAILED;
    if (!complete)
        return 0;
    double ta[UC_TRIAL_MAX_SLOTS], tb[UC_TRIAL_MAX_SLOTS], ratio[UC_TRIAL_MAX_SLOTS];
    int pairs = 0, wins = 0;
    for (int i = 2; i + 1 < t->slots; i += 2) { /* slots 0 and 1 warmed up; then (plan, undivided) pairs */
        ta[pairs] = t->state[i] == SLOT_READ ? t->ms[i] : INFINITY;
        tb[pairs] = t->state[i + 1] == SLOT_READ ? t->ms[i + 1] : INFINITY;
        ratio[pairs] = pair_ratio(ta[pairs], tb[pairs]);
        wins += ratio[pairs] < 1.0;
        pairs++;
    }
    double median_ratio = uc_median(ratio, pairs);
    if (median_ratio < 1.0 - uc_cfg_verify_margin() && wins < pairs && !t->extended &&
        t->slots + 2 * t->samples <= UC_TRIAL_MAX_SLOTS) {
        t->extended = 1; /* the pairs disagree: S more of them before anything is decided */
        t->slots += 2 * t->samples;
        return 0;
    }
    *a_ms = uc_median(ta, pairs);
    *b_ms = uc_median(tb, pairs);
    *samples = pairs;
    /* NaN-safe: anything but a clear win keeps the undivided choice. */
    *kept = median_ratio < 1.0 - uc_cfg_verify_margin() && (wins == pairs || (t->extended && 5 * wins >= 4 * pairs));
    t->settled = 1;
    return 1;
}
