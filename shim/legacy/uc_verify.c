/*
 * Plans meet reality: a new micro-batched plan is checked on its first executions against the undivided choice
 * that fits the same workspace.
 *
 * Find times at N = b are predictions; a sequence of micro-batches can run slower than they say. So the first
 * executions of an execution decision (kernel, N, workspace, policy, caller's algorithm) alternate between the plan
 * and the undivided choice: both compute the same result (samples are independent; BackwardFilter accumulates the
 * same way), so the caller's data is the benchmark. The rule that times and decides them is the trial of
 * core/uc_trial.c. Until the verdict, executions beyond the trial's run the plan. The verdict is reported to the
 * planner's recorder, which stores it in the SQLite cache, so later runs skip the check.
 *
 * A new plan of one call is checked the same way against the planner's runner-up (a single call Find timed close
 * to it), with the sides turned round: the runner-up is the trial's plan, which must win clearly to replace the
 * plan of one call (the incumbent, which runs beyond the trial's executions). The verdict is told the right way
 * round: the plan of one call kept, or replaced by its runner-up.
 */
#include <pthread.h>
#include <stdlib.h>

#include "uc_legacy.h"

struct uc_verify {
    atomic_int refs;
    pthread_mutex_t mu;
    uc_plan *plan, *base; /* referenced */
    int det;              /* the determinism the decision was planned with */
    int rival;            /* 1: `plan` is the runner-up of `base`, a plan of one call (see above) */
    size_t limit;         /* the workspace of the decision */
    uc_trial trial;
};

uc_verify *uc_verify_new(uc_plan *plan, uc_plan *base, int det, size_t limit)
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
    v->limit = limit;
    v->trial = trial;
    return v;
}

uc_verify *uc_verify_new_rival(uc_plan *plan, int det, size_t limit)
{
    uc_verify *v = plan->rival ? uc_verify_new(plan->rival, plan, det, limit) : NULL;
    if (v)
        v->rival = 1;
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
    *run = side_b || (slot < 0 && v->rival) ? v->base : v->plan;
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
        out->limit = v->limit;
        out->rival = v->rival;
    }
    if (decided && v->rival) { /* told the right way round: the plan of one call kept, or its runner-up won */
        double runner_up_ms = out->plan_ms;
        out->plan = v->base;
        out->base = v->plan;
        out->plan_ms = out->base_ms;
        out->base_ms = runner_up_ms;
        out->kept = !out->kept;
    }
    pthread_mutex_unlock(&v->mu);
    return decided;
}
