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
 * every timed execution has been read, the plan is kept only if its median is more than UCUDNN_VERIFY_MARGIN
 * below the undivided choice's; a tie or worse keeps the undivided choice (one call, no prediction to trust).
 * Until then, executions beyond the 2 * (S + 1) run the plan. The verdict is reported to the planner's recorder,
 * which stores it in the SQLite cache, so later runs skip the check.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "uc_internal.h"

#define UC_VERIFY_MAX_SAMPLES 32
#define UC_VERIFY_MAX_SLOTS (2 * (UC_VERIFY_MAX_SAMPLES + 1))

enum { SLOT_FREE = 0, SLOT_RUNNING, SLOT_PENDING, SLOT_READ, SLOT_FAILED };

struct uc_verify {
    atomic_int refs;
    pthread_mutex_t mu;
    uc_plan *plan, *base; /* referenced */
    int det;              /* the determinism the decision was planned with */
    size_t workspace;     /* the workspace of the decision */
    int slots, issued, settled;
    int state[UC_VERIFY_MAX_SLOTS];
    uc_mark marks[UC_VERIFY_MAX_SLOTS];
    double ms[UC_VERIFY_MAX_SLOTS];
};

uc_verify *uc_verify_new(uc_plan *plan, uc_plan *base, int det, size_t workspace)
{
    int samples = uc_cfg_verify_samples();
    if (samples <= 0)
        return NULL;
    if (samples > UC_VERIFY_MAX_SAMPLES)
        samples = UC_VERIFY_MAX_SAMPLES;
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
    v->slots = 2 * (samples + 1);
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
    for (int i = 0; i < v->slots; i++)
        uc_mark_drop(&v->marks[i]);
    uc_plan_release(v->plan);
    uc_plan_release(v->base);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

/* Read whatever pending marks have completed. Under v->mu. */
static void poll(uc_verify *v)
{
    for (int i = 0; i < v->issued; i++) {
        if (v->state[i] != SLOT_PENDING)
            continue;
        double ms = 0;
        int rc = uc_mark_read(&v->marks[i], &ms);
        if (rc == 1) {
            v->state[i] = SLOT_READ;
            v->ms[i] = ms;
        } else if (rc < 0) {
            v->state[i] = SLOT_FAILED;
        }
    }
}

int uc_verify_begin(uc_verify *v, uc_plan **run)
{
    int slot = -1;
    pthread_mutex_lock(&v->mu);
    poll(v);
    *run = v->plan;
    if (!v->settled && v->issued < v->slots) {
        slot = v->issued++;
        v->state[slot] = SLOT_RUNNING;
        *run = slot % 2 ? v->base : v->plan; /* even slots the plan, odd ones the undivided choice */
    }
    pthread_mutex_unlock(&v->mu);
    return slot;
}

void uc_verify_end(uc_verify *v, int slot, const uc_mark *m, int ok)
{
    pthread_mutex_lock(&v->mu);
    if (ok && m) {
        v->marks[slot] = *m;
        v->state[slot] = SLOT_PENDING;
    } else {
        if (m) {
            uc_mark copy = *m;
            uc_mark_drop(&copy);
        }
        v->state[slot] = SLOT_FAILED; /* counted as infinitely slow: a side that fails does not win */
    }
    pthread_mutex_unlock(&v->mu);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *xs, int n)
{
    qsort(xs, (size_t)n, sizeof *xs, cmp_double);
    return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

int uc_verify_verdict(uc_verify *v, uc_verdict_info *out)
{
    int decided = 0;
    pthread_mutex_lock(&v->mu);
    poll(v);
    int complete = !v->settled && v->issued == v->slots;
    for (int i = 0; complete && i < v->slots; i++)
        complete = v->state[i] == SLOT_READ || v->state[i] == SLOT_FAILED;
    if (complete) {
        double tp[UC_VERIFY_MAX_SLOTS], tb[UC_VERIFY_MAX_SLOTS];
        int np = 0, nb = 0;
        for (int i = 2; i < v->slots; i++) { /* slots 0 and 1 warmed up */
            double t = v->state[i] == SLOT_READ ? v->ms[i] : INFINITY;
            if (i % 2)
                tb[nb++] = t;
            else
                tp[np++] = t;
        }
        out->plan_ms = median(tp, np);
        out->base_ms = median(tb, nb);
        out->samples = np;
        /* NaN-safe: anything but a clear win keeps the undivided choice. */
        out->kept = out->plan_ms < out->base_ms * (1.0 - uc_cfg_verify_margin());
        out->plan = v->plan;
        out->base = v->base;
        out->det = v->det;
        out->workspace = v->workspace;
        v->settled = decided = 1;
    }
    pthread_mutex_unlock(&v->mu);
    return decided;
}
