/*
 * The parts a graph-API plan the shim takes over runs in: sub-plans of the graph rebuilt at each part's size and
 * engine (uc_graph_build.c), in order, shared between parts of the same size, engine and beta; a weight
 * gradient's parts after the first accumulate with beta = 1. Every engine is one uc_gb_engines admits at that
 * size -- the caller's, or one whose numerical notes add nothing the caller did not accept -- except an offered
 * variant's rival, an engine the framework lists itself. Built for a planner's plan, the fallback's uniform
 * splits and an offered variant's (uc_graph_split.c, uc_graph_offer.c).
 */
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"

ucudnn_micro_batch *uc_gparts_steps(const uc_gparts *p)
{
    ucudnn_micro_batch *steps = p->nparts > 0 ? calloc((size_t)p->nparts, sizeof *steps) : NULL;
    for (int i = 0; steps && i < p->nparts; i++)
        steps[i] = (ucudnn_micro_batch){(int)p->size[i], (int)p->engine[i], 0};
    return steps;
}

void uc_gparts_drop(uc_gparts *p)
{
    for (int i = 0; i < p->nowned; i++)
        uc_gb_destroy(p->owned[i]);
    free(p->size);
    free(p->engine);
    free(p->plan);
    free(p->owned);
    memset(p, 0, sizeof *p);
}

/* Whether `engine` may run at size b (see uc_gb_engines), and its determinism. */
static int admitted(const uc_ggraph *g, int64_t b, int64_t engine, int *deterministic)
{
    int64_t engines[UC_G_MAX_CANDIDATES + 1], notes[UC_G_MAX_CANDIDATES + 1];
    int n = uc_gb_engines(g, b, engines, notes, UC_G_MAX_CANDIDATES + 1);
    for (int i = 0; i < n; i++)
        if (engines[i] == engine) {
            *deterministic = !(notes[i] & (1 << 4));
            return 1;
        }
    return 0;
}

/* Build the sub-plans of parts (size[i], engine[i]) in order: 0, or -1 (nothing kept) when a part does not start
 * where every split tensor keeps its declared alignment, an engine is not admitted, a plan does not build or its
 * workspace exceeds the limit. `listed`: the engines are ones the framework itself would run undivided (an offered
 * variant's rival), not judged by the caller's engine's notes. */
int uc_gparts_build(const uc_ggraph *g, const int64_t *size, const int64_t *engine, int n, size_t limit,
                       uc_gparts *out, int listed)
{
    uc_gparts p = {0};
    int64_t sum = 0, *key_b = calloc((size_t)n, sizeof *key_b), *key_e = calloc((size_t)n, sizeof *key_e);
    int *key_one = calloc((size_t)n, sizeof *key_one), wgrad = uc_gb_is_wgrad(g), ok = 1;
    p.size = calloc((size_t)n, sizeof *p.size);
    p.engine = calloc((size_t)n, sizeof *p.engine);
    p.plan = calloc((size_t)n, sizeof *p.plan);
    p.owned = calloc((size_t)n, sizeof *p.owned);
    /* A weight gradient's parts accumulate into dw (beta = 1), where uc_gb_divisible allows it. */
    ok = key_b && key_e && key_one && p.size && p.engine && p.plan && p.owned && (n == 1 || uc_gb_divisible(g));
    int caller_det = !(g->notes & (1 << 4));
    for (int i = 0; ok && i < n; i++) {
        int beta_one = wgrad && i > 0, det = 0;
        ok = size[i] >= 1 && size[i] <= g->n - sum && uc_gb_aligned_for(g, sum); /* where the part starts */
        sum += ok ? size[i] : 0;
        int j = 0;
        while (ok && j < p.nowned && !(key_b[j] == size[i] && key_e[j] == engine[i] && key_one[j] == beta_one))
            j++;
        if (ok && j == p.nowned) {
            int64_t ws = -1;
            ok = listed || (admitted(g, size[i], engine[i], &det) && (det || !caller_det));
            void *plan = ok ? uc_gb_build(g, size[i], beta_one, engine[i], &ws) : NULL;
            ok = plan != NULL;
            if (plan && (uint64_t)ws > limit) {
                uc_gb_destroy(plan);
                ok = 0;
            }
            if (ok) {
                key_b[j] = size[i];
                key_e[j] = engine[i];
                key_one[j] = beta_one;
                p.owned[p.nowned++] = plan;
                p.workspace = ws > p.workspace ? ws : p.workspace;
            }
        }
        if (ok) {
            p.size[i] = size[i];
            p.engine[i] = engine[i];
            p.plan[i] = p.owned[j];
            p.nparts = i + 1;
        }
    }
    ok = ok && sum == g->n;
    free(key_b);
    free(key_e);
    free(key_one);
    if (!ok) {
        uc_gparts_drop(&p);
        return -1;
    }
    *out = p;
    return 0;
}

void uc_gparts_order(int64_t q, int64_t *size, int64_t *engine, int n)
{
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (q && size[i] % q == 0) { /* stable: the parts that may start anywhere, in their order */
            int64_t s = size[i], e = engine[i];
            memmove(&size[kept + 1], &size[kept], (size_t)(i - kept) * sizeof *size);
            memmove(&engine[kept + 1], &engine[kept], (size_t)(i - kept) * sizeof *engine);
            size[kept] = s;
            engine[kept] = e;
            kept++;
        }
    }
}

int uc_gparts_uniform(const uc_ggraph *g, int64_t engine_index, int64_t b, size_t limit, uc_gparts *out)
{
    int n = (int)((g->n + b - 1) / b);
    int64_t *size = calloc((size_t)n, sizeof *size), *engine = calloc((size_t)n, sizeof *engine);
    int rc = -1;
    if (size && engine) {
        for (int i = 0; i < n; i++) {
            size[i] = i < n - 1 ? b : g->n - b * (n - 1);
            engine[i] = engine_index;
        }
        rc = uc_gparts_build(g, size, engine, n, limit, out, 0);
    }
    free(size);
    free(engine);
    return rc;
}

int uc_gparts_listed(const uc_ggraph *g, int64_t engine, size_t limit, uc_gparts *out)
{
    int64_t whole = g->n;
    return uc_gparts_build(g, &whole, &engine, 1, limit, out, 1);
}

int uc_gparts_largest(const uc_ggraph *g, int64_t engine, size_t limit, int policy, uc_gparts *out)
{
    int64_t p = 1, best = 0;
    while (p * 2 < g->n)
        p *= 2;
    for (int64_t b = p; b >= 1 && !best; b /= 2)
        if (uc_gparts_uniform(g, engine, b, limit, out) == 0)
            best = b;
    if (best && strcmp(uc_cfg_policy_name(policy), "all") == 0) {
        int64_t lo = best, hi = best * 2 < g->n ? best * 2 : g->n;
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            uc_gparts parts;
            if (uc_gparts_uniform(g, engine, mid, limit, &parts) == 0) {
                uc_gparts_drop(out);
                *out = parts;
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    return best ? 0 : -1;
}
