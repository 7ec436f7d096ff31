/*
 * Plans meet reality: a new micro-batched plan is checked on its first executions against the undivided choice
 * that fits the same workspace.
 *
 * Find times at N = b are predictions; a sequence of micro-batches can run slower than they say. So the first
 * 2 * (S + 1) executions of an execution decision (kernel, N, workspace, policy, caller's algorithm) alternate
 * between the plan and the undivided choice, S = UCUDNN_VERIFY_SAMPLES: both compute the same result (samples
 * are independent; BackwardFilter accumulates the same way), so the caller's data is the benchmark. The first
 * execution of each side warms up and is not counted. Each execution is timed by the clock of uc_device.c (CUDA
 * events read when complete, never a synchronisation; the host backend's model clock or the wall clock). When
 * every timed execution has been read, each plan execution is compared with the undivided one next to it (a pair
 * sees the same load on a shared machine). The plan is kept only if the median of the pairs' ratios is more than
 * UCUDNN_VERIFY_MARGIN below 1 and the plan was faster in every pair; a tie or worse keeps the undivided choice
 * (one call, no prediction to trust). When the median favours the plan but some pair does not, S timings are too
 * few for the noise: the check takes S more pairs, once, and then keeps the plan only if it was faster in at least
 * 4 pairs out of 5. Until the verdict, executions beyond the trial's run the plan. The verdict is reported to the
 * planner's recorder, which stores it in the SQLite cache, so later runs skip the check.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "uc_internal.h"

/* ---- the trial: alternating timed executions of two sides, "a" (the plan) and "b" (the undivided choice) ---- */

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

/* ---- the legacy path's check: a plan against its undivided choice ---- */

struct uc_verify {
    atomic_int refs;
    pthread_mutex_t mu;
    uc_plan *plan, *base; /* referenced */
    int det;              /* the determinism the decision was planned with */
    size_t workspace;     /* the workspace of the decision */
    uc_trial trial;
};

uc_verify *uc_verify_new(uc_plan *plan, uc_plan *base, int det, size_t workspace)
{
    uc_trial trial;
    if (uc_trial_init(&trial) != 0)
        return NULL;
    uc_verify *v = calloc(1, sizeof *v);
    if (!v || pthread_mutex_init(&v->mu, NULL) != 0) {
        free(v);
        return NULL;
    }
    atomic_init(&v->refs, 1);
    uc_plan_ref(plan);
    uc_plan_ref(base);
    v->plan = plan;
    v->base = base;
    v->det = det;
    v->workspace = workspace;
    v->trial = trial;
    return v;
}

void uc_verify_ref(uc_verify *v)
{
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
}

void uc_verify_release(uc_verify *v)
{
    if (!v || atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) != 1)
        return;
    uc_trial_drop(&v->trial);
    uc_plan_release(v->plan);
    uc_plan_release(v->base);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

int uc_verify_begin(uc_verify *v, uc_plan **run)
{
    int side_b = 0;
    pthread_mutex_lock(&v->mu);
    int slot = uc_trial_begin(&v->trial, &side_b);
    *run = side_b ? v->base : v->plan;
    pthread_mutex_unlock(&v->mu);
    return slot;
}

void uc_verify_end(uc_verify *v, int slot, const uc_mark *m, int ok)
{
    pthread_mutex_lock(&v->mu);
    uc_trial_end(&v->trial, slot, m, ok);
    pthread_mutex_unlock(&v->mu);
}

int uc_verify_verdict(uc_verify *v, uc_verdict_info *out)
{
    pthread_mutex_lock(&v->mu);
    int decided = uc_trial_verdict(&v->trial, &out->plan_ms, &out->base_ms, &out->samples, &out->kept);
    if (decided) {
        out->plan = v->plan;
        out->base = v->base;
        out->det = v->det;
        out->workspace = v->workspace;
    }
    pthread_mutex_unlock(&v->mu);
    return decided;
}
