/*
 * What this process has learnt about a graph's shape, kept for its other plans: cuDNN's heuristics for the graph
 * at a batch size, and the benchmark of one engine at one.
 *
 * A framework that times the plans it may run (PyTorch's benchmark mode) builds a plan for every engine
 * configuration of a convolution, and under a limit each one that exceeds it is planned as a kernel of its own.
 * The planner's key names the caller's engine (its plan and the SQLite rows belong to it), so without this memo
 * every such plan measured every candidate engine at every candidate size again, and rebuilt the graph for
 * cuDNN's heuristics at each size each time it asked which engines may run: the same measurements once per
 * configuration of the same convolution.
 *
 * Keys: what was asked ("heur" with the mode, "bench" with the engine and the knob choices it was built with),
 * the batch size, the device and cuDNN (uc_backend_id, as the SQLite cache keys benchmarks), then the graph's
 * shape (its planner key without the caller's engine, notes and knobs). Values are copied in and out. Chained,
 * under one mutex (held for the lookup and the copy only: nobody calls cuDNN under it). Bounded: past
 * UC_GMEMO_MAX entries nothing more is kept, and the work is simply done again.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"

#define UC_GMEMO_BUCKETS 4096
#define UC_GMEMO_MAX 65536 /* about 350 bytes each for a convolution: at most some 25 MB */

typedef struct memo_ent {
    struct memo_ent *next;
    uint64_t hash;
    size_t len;
    char *key;
    unsigned char val[]; /* len bytes */
} memo_ent;

static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static memo_ent *buckets[UC_GMEMO_BUCKETS];
static size_t entries;

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a, 64 bits */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static memo_ent *find(const char *key, uint64_t h)
{
    for (memo_ent *e = buckets[h % UC_GMEMO_BUCKETS]; e; e = e->next)
        if (e->hash == h && strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

char *uc_gmemo_key(const uc_ggraph *g, const char *what, int64_t b, int64_t engine, int with_knobs,
                   const char *backend)
{
    if (!g->key)
        return NULL;
    uc_sb sb = {0};
    uc_sb_printf(&sb, "%s;b=%" PRId64 ";engine=%" PRId64 ";knobs=", what, b, engine);
    if (with_knobs)
        uc_graph_knobs_text(&sb, g);
    uc_sb_printf(&sb, ";%s%s", backend, g->key + g->shape_at);
    return uc_sb_take(&sb);
}

int uc_gmemo_get(const char *key, void *val, size_t len)
{
    if (!key)
        return 0;
    uint64_t h = fnv1a(key);
    pthread_mutex_lock(&memo_lock);
    memo_ent *e = find(key, h);
    int hit = e && e->len == len;
    if (hit)
        memcpy(val, e->val, len);
    pthread_mutex_unlock(&memo_lock);
    return hit;
}

void uc_gmemo_put(const char *key, const void *val, size_t len)
{
    if (!key)
        return;
    uint64_t h = fnv1a(key);
    pthread_mutex_lock(&memo_lock);
    if (entries < UC_GMEMO_MAX && !find(key, h)) {
        memo_ent *e = malloc(sizeof *e + len);
        char *k = e ? strdup(key) : NULL;
        if (k) {
            *e = (memo_ent){buckets[h % UC_GMEMO_BUCKETS], h, len, k};
            memcpy(e->val, val, len);
            buckets[h % UC_GMEMO_BUCKETS] = e;
            entries++;
        } else {
            free(e);
        }
    }
    pthread_mutex_unlock(&memo_lock);
}
