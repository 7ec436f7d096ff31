/*
 * The plan decision of the legacy path, in one place: which plan a call reports (Get*_v7, Find*, the workspace
 * queries) and which plan an execution runs.
 *
 * A query's plan is the planner's for the kernel, N, policy and determinism under a limit: looked up in the plan
 * cache (exactly, or a plan made under a larger limit that fits this one: uc_cache_alias), planned on a miss
 * (uc_planning.c) and cached. An execution's decision depends on the kernel, N, the workspace the caller passes
 * (capped by an explicit per-kernel limit, or the whole budget under Workspace Division, where the planner caps
 * each kernel at its share; by default nothing caps it), the policy and the caller's algorithm (whose determinism
 * the plan must keep), and is memoised under exactly that, so a steady-state call costs the descriptor reads and
 * one cache lookup. Plans cleared while one was made (a re-division) leave that one uncached (uc_cache_put). A new
 * micro-batched plan is checked on its first executions against the undivided choice, and a new plan of one call
 * against the runner-up the planner named for it (uc_verify.c).
 *
 * Names along a call: `ws_bytes` is the workspace the caller passes, `limit` what a plan must fit (the caller's
 * workspace capped, or a query's planning limit), `workspace` what a plan needs.
 */
#include <string.h>

#include "uc_legacy.h"

/* ---- plans under a limit ---- */

static uc_plan *get_plan_as(const uc_call *c, size_t limit, int det, int policy, int *fresh)
{
    det = det || uc_cfg_deterministic(); /* UCUDNN_DETERMINISTIC: every request asks for determinism */
    uint64_t view = uc_cache_view();
    uc_ckey key;
    uc_ckey_init(&key, UC_KEY_PLAN, c->k, policy, det, limit, 0);
    uc_plan *p = uc_cache_get(&key);
    if (p) {
        UC_COUNT(plan_hits, 1);
        return p;
    }
    p = uc_cache_alias(&key);
    if (!p) {
        UC_COUNT(plan_misses, 1);
        if (uc_cache_note_kernel(c->k))
            UC_COUNT(kernels, 1);
        p = uc_plan_make(c, limit, policy, det);
        if (!p)
            return NULL;
        if (fresh)
            *fresh = 1;
    }
    uc_plan *cached = uc_cache_put(&key, p, view);
    uc_plan_release(p);
    return cached;
}

uc_plan *uc_get_plan(const uc_call *c, size_t limit, int det)
{
    return get_plan_as(c, limit, det, uc_cfg_policy(), NULL);
}

/* The smallest m * 2^e >= bytes with m < 8: four workspace buckets an octave, each at most 25% above its sizes. */
static size_t bucket_ceiling(size_t bytes)
{
    if (bytes <= 8 || bytes >= UC_UNLIMITED / 2)
        return bytes;
    size_t unit = (size_t)1 << (63 - __builtin_clzll((unsigned long long)bytes) - 2);
    return (bytes + unit - 1) / unit * unit;
}

/*
 * The plan for an execution with `limit` bytes of workspace: planned at bucket sizes, never a plan that exceeds
 * it. A kernel's first size is planned exactly; later sizes at bucket sizes: the fastest plan under the bucket's
 * ceiling is the fastest under `limit` too when its workspace fits `limit`; else the fastest under one byte less
 * than that workspace, and so on down the time/workspace front, which ends at `limit` itself. So every size of a
 * bucket shares the same few planner calls and cache entries, and a program passing 100,000 distinct workspace
 * sizes costs what a few dozen do.
 */
static uc_plan *get_plan_bucketed(const uc_call *c, size_t limit, int det, int policy, int *fresh)
{
    uc_ckey key;
    uc_ckey_init(&key, UC_KEY_PLAN, c->k, policy, det || uc_cfg_deterministic(), limit, 0);
    uc_plan *p = uc_cache_get(&key);
    if (!p)
        p = uc_cache_alias(&key);
    if (p) {
        UC_COUNT(plan_hits, 1);
        return p;
    }
    size_t ceiling = uc_cache_kernel_planned(&key) ? bucket_ceiling(limit) : limit;
    for (int step = 0; step < 64 && ceiling > limit; step++) {
        p = get_plan_as(c, ceiling, det, policy, fresh);
        if (!p || p->count == 0 || p->workspace <= limit)
            return p; /* no plan under ceiling >= limit: none under limit either */
        ceiling = p->workspace - 1; /* > limit - 1: the front's next step, still >= limit */
        uc_plan_release(p);
    }
    return get_plan_as(c, limit, det, policy, fresh);
}

/* The planner asked for exactly this limit, past the in-memory cache (which may hold a plan made under a larger
 * limit): its answer knows whether a check on real executions already settled this decision. NULL if no planner
 * answered. */
static uc_plan *plan_exact(const uc_call *c, size_t limit, int det)
{
    int transient = 0;
    if (!uc_get_planner(&transient))
        return NULL; /* only a planner knows what a check settled */
    uc_plan *p = uc_plan_make(c, limit, uc_cfg_policy(), det || uc_cfg_deterministic());
    if (p && p->count == 0) {
        uc_plan_release(p);
        p = NULL;
    }
    return p;
}

/* 1 when executions of plan p get a check on real executions (a new divided plan, or a new plan of one call with a
 * runner-up; checks on, no Division). */
static int gets_checked(const uc_plan *p)
{
    return (p->count > 1 || p->rival) && !p->verified && uc_cfg_verify_samples() > 0 && !uc_cfg_total_workspace();
}

size_t uc_reported_workspace(const uc_call *c, const uc_plan *p, size_t limit)
{
    if (!gets_checked(p))
        return p->workspace;
    if (p->count == 1) { /* room for its runner-up where it fits (a plan made under a larger limit may serve) */
        size_t room = p->rival->workspace;
        return room > p->workspace && room <= limit ? room : p->workspace;
    }
    int det = uc_cfg_deterministic() || uc_algo_deterministic(c, p->algo0); /* what executing algo0 asks for */
    uc_plan *base = get_plan_as(c, limit, det, uc_cfg_policy_undivided(), NULL);
    size_t workspace = p->workspace;
    if (base && base->count == 1 && base->workspace > workspace)
        workspace = base->workspace;
    uc_plan_release(base);
    return workspace;
}

/* ---- an execution's plan ---- */

/* The plan for an execution of `algo` within `limit` bytes, and the determinism it keeps (*det); NULL when the
 * call passes through. */
static uc_plan *exec_plan(const uc_call *c, size_t limit, int algo, int *det)
{
    /* The real library judges the caller's own call first (its algorithm for this problem, the descriptors'
     * agreement): a call it refuses for anything but the workspace gets its status, never a plan in its place.
     * Only on a miss: the answer depends on nothing outside the key. Not cached: nothing is planned for it.
     * Except an algorithm the shim itself reported for a plan of this kernel (Get/Find): executing it runs the
     * plan, even where the real library would not run that algorithm at the full N. */
    size_t need = 0;
    int st = uc_real_ws(c, c->x, c->y, c->conv, algo, &need);
    if (st != 0 && !uc_cache_reported(c->k, algo)) {
        uc_log(UC_LOG_DEBUG, "%s passes through: the real library refuses algorithm %d here (status %d)",
               uc_op_name(c->k->op), algo, st);
        return NULL;
    }
    /* The caller's algorithm says whether it wants determinism: a plan never trades it away. */
    *det = uc_cfg_deterministic() || uc_algo_deterministic(c, algo);
    int fresh = 0;
    uc_plan *p = get_plan_bucketed(c, limit, *det, uc_cfg_policy(), &fresh);
    if (fresh && limit < uc_planning_limit()) /* planned again for a workspace below Get/Find's limit */
        UC_COUNT(replans, 1);
    return p;
}

/* A new divided plan p (check_it: one that gets checked) against the undivided choice for the same workspace:
 * that choice's predicted time goes to the exit summary (what cuDNN alone would take in it), and p gets a check
 * against it when check_it. Not under Division (each request is a re-division) nor with checks off (no second
 * planner call then). A new plan of one call gets a check against its runner-up where that fits the workspace.
 * The check, or NULL. */
static uc_verify *rival_check(const uc_call *c, uc_plan *p, size_t limit, int det, int check_it)
{
    uc_verify *check = NULL;
    if (check_it && p->count == 1 && p->rival->workspace <= limit) /* check_it: a runner-up, not verified */
        return uc_verify_new_rival(p, det, limit);
    if (p->count > 1 && !uc_cfg_total_workspace() && uc_cfg_verify_samples() > 0) {
        uc_plan *base = get_plan_bucketed(c, limit, det, uc_cfg_policy_undivided(), NULL);
        if (base && base->count == 1) {
            float unknown = 0.0f;
            atomic_compare_exchange_strong(&p->base_ms, &unknown, base->time_ms);
            if (check_it)
                check = uc_verify_new(p, base, det, limit);
        }
        uc_plan_release(base);
    }
    return check;
}

/*
 * The plan of an execution decision (d->key), and its check in progress (d->verify, referenced) when the plan is
 * new and micro-batched. A divided plan the planner does not already know to have won a check gets one: the
 * undivided choice for the same workspace is planned too, and the first executions alternate between the two.
 */
static uc_plan *decide(const uc_call *c, size_t limit, int algo, uc_exec_decision *d)
{
    uint64_t view = uc_cache_view();
    uc_plan *p = uc_cache_get_exec(&d->key, &d->verify);
    if (p)
        return p;
    int det = 0;
    p = exec_plan(c, limit, algo, &det);
    if (!p)
        return NULL;
    int check_it = gets_checked(p);
    /* Made for another request (a larger limit, or without determinism and found deterministic): ask what is
     * known about exactly this one -- a check may have settled it in an earlier run. At most UC_EXACT_ASKS sizes a
     * kernel: past them a new size is simply checked. */
    if (check_it && (p->limit != limit || p->det_requested != det) && uc_cache_kernel_exact_ask(c->k)) {
        uc_plan *q = plan_exact(c, limit, det);
        if (q && q->verified) {
            uc_plan_release(p);
            p = q;
            check_it = gets_checked(p); /* 0: a verified plan is settled */
        } else {
            uc_plan_release(q);
        }
    }
    uc_verify *check = rival_check(c, p, limit, det, check_it);
    uc_plan *cached = uc_cache_put_exec(&d->key, p, check, view, &d->verify);
    if (check && !d->verify && cached == p) /* a stale view: the plan is used uncached, and so is its check */
        d->verify = check;
    else
        uc_verify_release(check);
    if (check && d->verify == check)
        UC_COUNT(checks_started, 1);
    uc_plan_release(p);
    return cached;
}

uc_plan *uc_decide_exec(const uc_call *c, int algo, const void *ws, size_t ws_bytes, uc_exec_decision *d)
{
    size_t cap = uc_cfg_exec_cap();
    /* All the decision depends on: one entry per value. A NULL workspace offers nothing, whatever its size. */
    size_t limit = !ws ? 0 : ws_bytes < cap ? ws_bytes : cap;
    size_t offered = ws ? ws_bytes : 0;
    UC_COUNT_MAX(max_offered_workspace, offered);
    if (offered > cap)
        UC_COUNT(limit_bound_calls, 1);
    else
        UC_COUNT(caller_bound_calls, 1);
    uc_ckey_init(&d->key, UC_KEY_EXEC, c->k, uc_cfg_policy(), algo, limit, cap);
    d->verify = NULL;
    return decide(c, limit, algo, d);
}

void uc_decide_settle(const uc_call *c, uc_exec_decision *d)
{
    uc_verify *v = d->verify;
    uc_verdict_info info;
    if (!v)
        return;
    d->verify = NULL;
    if (uc_verify_verdict(v, &info)) { /* the check is over: keep the winner, count it, tell the recorder */
        uc_cache_settle(&d->key, v, info.kept ? info.plan : info.base);
        UC_COUNT(verified, 1);
        UC_COUNT(runner_up_checks, info.rival);
        if (!info.kept)
            UC_COUNT(rejected_by_measurement, 1);
        if (!info.kept && info.rival)
            UC_COUNT(runner_up_won, 1);
        uc_log(UC_LOG_INFO, "%s at N=%d, workspace %zu: %d micro-batch(es) measured %.4g ms, %s algo %d %.4g "
               "ms (median of %d): %s", uc_op_name(c->k->op), info.plan->n, info.limit, info.plan->count,
               info.plan_ms, info.rival ? "runner-up" : "undivided", info.base->mb[0].algo, info.base_ms,
               info.samples, !info.kept ? "replaced by it" : "kept");
        ucudnn_verdict out = {UCUDNN_ABI_VERSION, c->k->op, info.plan->key_text, NULL, info.plan->n, info.limit,
                              uc_cfg_policy_name(info.plan->policy), info.det, info.kept, info.plan->count,
                              info.plan->mb, info.base->mb[0], info.plan_ms, info.base_ms, info.samples};
        uc_record_verdict(&out);
    }
    uc_verify_release(v);
}
