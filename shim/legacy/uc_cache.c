/*
 * The in-memory plan cache: a chained hash table under one rwlock, holding reference-counted immutable plans.
 *
 * Hits take the read lock for a bucket walk and one atomic increment; nobody ever holds the lock while calling
 * the planner or the real library (the planner takes the GIL, and a Python thread holding the GIL may be
 * waiting for this lock). Plans outlive their entries through their reference counts, so ucudnn_clear_plans
 * never frees a plan another thread is executing.
 *
 * Plan entries of one kernel, N and policy hash to one bucket whatever their limit and determinism, so a miss
 * can find a plan made under a larger limit that is optimal for the smaller one too (see uc_cache_alias).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "uc_legacy.h"

#define UC_BUCKETS 4096
/* Most entries held (plans and execution decisions together): past it, the least recently used go (a clock
 * sweep: a hit marks its entry used, the sweep spares a marked entry once). Memory and the longest bucket walk
 * stay bounded whatever the number of distinct workspace sizes a program passes. */
#ifndef UC_CACHE_MAX
#define UC_CACHE_MAX 2048
#endif

_Static_assert(offsetof(uc_ckey, limit) == 16 && offsetof(uc_ckey, k) == 32, "uc_ckey layout");

typedef struct entry {
    struct entry *next;
    struct entry *older, *newer; /* the clock's order of insertion (under the write lock) */
    atomic_int used;             /* set by a hit (under the read lock), cleared by the sweep */
    uint64_t hash;
    uc_ckey key;
    uc_plan *plan;
    uc_verify *verify; /* exec entries: the check of a new plan in progress, else NULL */
} entry;

typedef struct kentry {
    struct kentry *next;
    int exact_asks;     /* uc_cache_kernel_exact_ask */
    uint64_t reported;  /* algorithms Get/Find listed for a plan of this kernel (bit a), never evicted */
    uc_kernel k;
} kentry;

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static entry *buckets[UC_BUCKETS];
static entry *oldest, *newest; /* the clock: every entry, oldest first */
static int entries;
/* Clears so far (changed under the write lock), and the ones made by this thread: a thread's view is their
 * difference, which only another thread's clear moves (see uc_cache_put). */
static _Atomic uint64_t clears;
static __thread uint64_t own_clears __attribute__((tls_model("initial-exec")));
static pthread_mutex_t kernels_lock = PTHREAD_MUTEX_INITIALIZER;
static kentry *kernels[UC_BUCKETS];

static uint64_t step(uint64_t h, uint64_t w)
{
    return (h ^ w) * 0x9E3779B97F4A7C15ULL;
}

/* Four independent multiply lanes (the hot path hashes a ~400-byte key per call), then a final avalanche so the
 * bucket index depends on every input bit. len is a multiple of 32 (checked where it is called). */
static uint64_t mix(uint64_t seed, const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h0 = seed, h1 = seed ^ 0x243F6A8885A308D3ULL, h2 = seed ^ 0x13198A2E03707344ULL,
             h3 = seed ^ 0xA4093822299F31D0ULL;
    for (size_t i = 0; i + 32 <= len; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, sizeof w);
        h0 = step(h0, w[0]);
        h1 = step(h1, w[1]);
        h2 = step(h2, w[2]);
        h3 = step(h3, w[3]);
    }
    uint64_t r = step(step(step(h0, h1 >> 7 | h1 << 57), h2 >> 13 | h2 << 51), h3 >> 29 | h3 << 35);
    r ^= r >> 32;
    r *= 0x9E3779B97F4A7C15ULL;
    r ^= r >> 29;
    return r;
}

_Static_assert(sizeof(uc_kernel) % 32 == 0, "uc_kernel is hashed in 32-byte blocks");

static uint64_t hash_of(const uc_ckey *key)
{
    /* Plan entries leave out sel and the limits (see the file comment). */
    uint64_t seed = step(step(step(0xcbf29ce484222325ULL, (uint64_t)(uint32_t)key->kind << 32 | (uint32_t)key->n),
                              (uint64_t)(uint32_t)key->policy),
                         (uint64_t)key->device);
    if (key->kind == UC_KEY_EXEC)
        seed = step(step(step(seed, (uint64_t)(uint32_t)key->sel), key->limit), key->deflimit);
    return mix(seed, &key->k, sizeof key->k);
}

uc_plan *uc_cache_get_exec(const uc_ckey *key, uc_verify **verify)
{
    uint64_t h = hash_of(key);
    uc_plan *found = NULL;
    if (verify)
        *verify = NULL;
    pthread_rwlock_rdlock(&lock);
    for (entry *e = buckets[h % UC_BUCKETS]; e; e = e->next) {
        if (e->hash == h && memcmp(&e->key, key, sizeof *key) == 0) {
            found = e->plan;
            uc_plan_ref(found);
            atomic_store_explicit(&e->used, 1, memory_order_relaxed);
            if (verify && e->verify) {
                uc_verify_ref(e->verify);
                *verify = e->verify;
            }
            break;
        }
    }
    pthread_rwlock_unlock(&lock);
    return found;
}

uc_plan *uc_cache_get(const uc_ckey *key)
{
    return uc_cache_get_exec(key, NULL);
}

/*
 * A plan P made under limit L' >= E whose workspace is <= E is optimal under E as well: it is the fastest plan
 * within L', and it fits within E. For determinism the same holds when a plan made without the restriction
 * turns out deterministic. Only real plans qualify: "no plan" under one limit says nothing certain about another
 * when it came from a planner error.
 */
/* An entry planned for the same kernel, N and policy as `key` (any limit and determinism). */
static int same_kernel(const entry *e, const uc_ckey *key, uint64_t h)
{
    return e->hash == h && e->key.kind == UC_KEY_PLAN && e->key.n == key->n && e->key.policy == key->policy &&
           e->key.device == key->device && memcmp(&e->key.k, &key->k, sizeof key->k) == 0;
}

int uc_cache_kernel_planned(const uc_ckey *key)
{
    uint64_t h = hash_of(key);
    int found = 0;
    pthread_rwlock_rdlock(&lock);
    for (entry *e = buckets[h % UC_BUCKETS]; e && !found; e = e->next)
        found = same_kernel(e, key, h);
    pthread_rwlock_unlock(&lock);
    return found;
}

static kentry *kernel_entry(const uc_kernel *k, int *fresh);

void uc_cache_note_reported(const uc_kernel *k, int algo)
{
    if (algo < 0 || algo >= 64)
        return;
    int fresh = 0;
    pthread_mutex_lock(&kernels_lock);
    kentry *e = kernel_entry(k, &fresh);
    if (e)
        e->reported |= (uint64_t)1 << algo;
    pthread_mutex_unlock(&kernels_lock);
}

int uc_cache_reported(const uc_kernel *k, int algo)
{
    if (algo < 0 || algo >= 64)
        return 0;
    int fresh = 0, listed = 0;
    pthread_mutex_lock(&kernels_lock);
    kentry *e = kernel_entry(k, &fresh);
    listed = e && (e->reported >> algo & 1);
    pthread_mutex_unlock(&kernels_lock);
    return listed;
}

uc_plan *uc_cache_alias(const uc_ckey *key)
{
    uint64_t h = hash_of(key);
    uc_plan *found = NULL;
    pthread_rwlock_rdlock(&lock);
    for (entry *e = buckets[h % UC_BUCKETS]; e && !found; e = e->next) {
        const uc_plan *p = e->plan;
        if (!same_kernel(e, key, h))
            continue;
        int det_ok = e->key.sel == key->sel || (key->sel == 1 && p->deterministic);
        if (p->count > 0 && det_ok && e->key.limit >= key->limit && p->workspace <= key->limit) {
            found = e->plan;
            uc_plan_ref(found);
            atomic_store_explicit(&e->used, 1, memory_order_relaxed);
        }
    }
    pthread_rwlock_unlock(&lock);
    return found;
}

/* ---- the clock (all under the write lock) ---- */

static void clock_link(entry *e)
{
    e->older = newest;
    e->newer = NULL;
    if (newest)
        newest->newer = e;
    else
        oldest = e;
    newest = e;
    entries++;
}

static void clock_unlink(entry *e)
{
    if (e->older)
        e->older->newer = e->newer;
    else
        oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        newest = e->older;
    entries--;
}

/* Make room for one entry: unlink the least recently used ones (spared once each if used since the last sweep)
 * onto *gone, for release after the lock is dropped. */
static void evict(entry **gone)
{
    for (int steps = 0; entries >= UC_CACHE_MAX && oldest && steps <= 2 * UC_CACHE_MAX; steps++) {
        entry *e = oldest;
        clock_unlink(e);
        if (atomic_exchange_explicit(&e->used, 0, memory_order_relaxed)) {
            clock_link(e); /* a second chance: to the young end */
            continue;
        }
        entry **pp = &buckets[e->hash % UC_BUCKETS];
        while (*pp && *pp != e)
            pp = &(*pp)->next;
        if (*pp)
            *pp = e->next;
        e->next = *gone;
        *gone = e;
        UC_COUNT(plan_evictions, 1);
    }
}

static void release_entries(entry *all)
{
    while (all) {
        entry *e = all;
        all = e->next;
        uc_plan_release(e->plan);
        uc_verify_release(e->verify);
        free(e);
    }
}

int uc_cache_entries(void)
{
    pthread_rwlock_rdlock(&lock);
    int n = entries;
    pthread_rwlock_unlock(&lock);
    return n;
}

uint64_t uc_cache_view(void)
{
    return atomic_load_explicit(&clears, memory_order_acquire) - own_clears;
}

uc_plan *uc_cache_put(const uc_ckey *key, uc_plan *p, uint64_t view)
{
    return uc_cache_put_exec(key, p, NULL, view, NULL);
}

uc_plan *uc_cache_put_exec(const uc_ckey *key, uc_plan *p, uc_verify *verify, uint64_t view, uc_verify **verify_out)
{
    uint64_t h = hash_of(key);
    entry *fresh = malloc(sizeof *fresh), *gone = NULL;
    uc_plan *result = NULL;
    if (verify_out)
        *verify_out = NULL;
    pthread_rwlock_wrlock(&lock);
    if (atomic_load_explicit(&clears, memory_order_relaxed) - own_clears != view) {
        /* Cleared by another thread while this plan was made: use it for this call only. */
        pthread_rwlock_unlock(&lock);
        free(fresh);
        uc_plan_ref(p);
        return p;
    }
    entry **head = &buckets[h % UC_BUCKETS];
    entry *owner = NULL;
    for (entry *e = *head; e; e = e->next) {
        if (e->hash == h && memcmp(&e->key, key, sizeof *key) == 0) {
            result = e->plan; /* the first insert wins */
            owner = e;
            break;
        }
    }
    if (!result && fresh) {
        evict(&gone);
        head = &buckets[h % UC_BUCKETS];
        atomic_init(&fresh->used, 0);
        clock_link(fresh);
        fresh->hash = h;
        fresh->key = *key;
        fresh->plan = p;
        fresh->verify = verify;
        if (verify)
            uc_verify_ref(verify);
        fresh->next = *head;
        uc_plan_ref(p); /* the cache's own reference */
        *head = fresh;
        owner = fresh;
        fresh = NULL;
        result = p;
    }
    if (owner && verify_out && owner->verify) {
        uc_verify_ref(owner->verify);
        *verify_out = owner->verify;
    }
    if (!result)
        result = p; /* no memory for an entry: use the plan uncached */
    uc_plan_ref(result);
    pthread_rwlock_unlock(&lock);
    free(fresh);
    release_entries(gone);
    return result;
}

void uc_cache_settle(const uc_ckey *key, uc_verify *verify, uc_plan *chosen)
{
    uint64_t h = hash_of(key);
    uc_plan *old = NULL;
    pthread_rwlock_wrlock(&lock);
    for (entry *e = buckets[h % UC_BUCKETS]; e; e = e->next) {
        if (e->hash == h && e->verify == verify && memcmp(&e->key, key, sizeof *key) == 0) {
            old = e->plan;
            uc_plan_ref(chosen);
            e->plan = chosen;
            e->verify = NULL;
            break;
        }
    }
    pthread_rwlock_unlock(&lock);
    if (old) {
        uc_plan_release(old);
        uc_verify_release(verify); /* the entry's reference */
    }
}

/* The kernel's entry (N ignored), added if new (*fresh = 1); NULL if memory is short. Under kernels_lock. */
static kentry *kernel_entry(const uc_kernel *k, int *fresh)
{
    uc_kernel masked = *k;
    masked.x.dims[0] = masked.y.dims[0] = masked.z.dims[0] = 0;
    uint64_t h = mix(0x84222325cbf29ce4ULL, &masked, sizeof masked);
    kentry **head = &kernels[h % UC_BUCKETS];
    *fresh = 0;
    for (kentry *e = *head; e; e = e->next)
        if (memcmp(&e->k, &masked, sizeof masked) == 0)
            return e;
    *fresh = 1;
    kentry *e = calloc(1, sizeof *e);
    if (e) {
        e->k = masked;
        e->next = *head;
        *head = e;
    }
    return e;
}

int uc_cache_note_kernel(const uc_kernel *k)
{
    int fresh = 0;
    pthread_mutex_lock(&kernels_lock);
    kernel_entry(k, &fresh);
    pthread_mutex_unlock(&kernels_lock);
    return fresh;
}

int uc_cache_kernel_exact_ask(const uc_kernel *k)
{
    int fresh = 0, ok = 0;
    pthread_mutex_lock(&kernels_lock);
    kentry *e = kernel_entry(k, &fresh);
    if (e && e->exact_asks < UC_EXACT_ASKS) {
        e->exact_asks++;
        ok = 1;
    }
    pthread_mutex_unlock(&kernels_lock);
    return ok;
}

void uc_cache_clear(void)
{
    entry *all = NULL;
    pthread_rwlock_wrlock(&lock);
    atomic_fetch_add_explicit(&clears, 1, memory_order_release);
    own_clears++;
    for (size_t i = 0; i < UC_BUCKETS; i++) {
        while (buckets[i]) {
            entry *e = buckets[i];
            buckets[i] = e->next;
            e->next = all;
            all = e;
        }
    }
    oldest = newest = NULL;
    entries = 0;
    pthread_rwlock_unlock(&lock);
    release_entries(all);
}
