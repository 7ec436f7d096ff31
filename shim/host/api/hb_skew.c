/*
 * Knobs for tests, each read once per process; a bad value is reported naming the variable and ignored. Two of
 * Find* (not Get*_v7), one of the graph API's heuristics.
 *
 * UCUDNN_HOST_FIND_SKEW=<op>:<algo>:<factor>: Find* report `factor` x the true time of one algorithm of one op.
 * A plan can then look faster (or slower) than it runs, which is what the preload library's check of new plans on
 * real executions must catch.
 *
 * UCUDNN_HOST_FIND_MEMORY=<bytes>: the device memory Find* (on buffers of its own) may allocate, as on a GPU
 * whose memory the framework holds. Its tensors come first: when they do not fit the call fails with
 * CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED; an algorithm whose workspace does not fit beside them gets
 * that status in its row, with the workspace it needs. Find*Ex allocates nothing and is not bounded by it.
 *
 * UCUDNN_HOST_INSTANT_TOP=<k>: the graph API's INSTANT (and A, B) heuristics answer only the first k engines of
 * their ranking, as real cuDNN's list on a GPU can lack every engine that fits a small workspace (seen on an H200
 * for ResNet-18's 3x3 fprop at N=128 within 64 MiB). FALLBACK's list is unchanged.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb_desc.h"

static pthread_once_t skew_once = PTHREAD_ONCE_INIT;
static int skew_op = -1, skew_algo = -1;
static double skew_factor = 1.0;

static void read_skew(void) {
    char v[64];
    const char *raw = getenv("UCUDNN_HOST_FIND_SKEW");
    if (hb_env_trimmed(raw, v, sizeof v) != 0) return; /* unset or blank (over-long values are bad: v says so) */
    static const char *const ops[] = {"fwd", "bwd_data", "bwd_filter"};
    char op[16];
    int algo = -1, used = 0;
    double factor = 0;
    if (sscanf(v, "%15[a-z_]:%d:%lf%n", op, &algo, &factor, &used) == 3 && v[used] == '\0' && algo >= 0 &&
        factor > 0 && factor < 1e6) {
        for (int i = 0; i < 3; i++) {
            if (strcmp(op, ops[i]) == 0) {
                skew_op = i;
                skew_algo = algo;
                skew_factor = factor;
                return;
            }
        }
    }
    fprintf(stderr, "ucudnn: warning: UCUDNN_HOST_FIND_SKEW='%s': expected <op>:<algo>:<factor> with op fwd, "
                    "bwd_data or bwd_filter, e.g. bwd_filter:1:0.5; Find reports true times\n", raw);
}

double hb_find_skew(hb_op op, int algo) {
    pthread_once(&skew_once, read_skew);
    return (int)op == skew_op && algo == skew_algo ? skew_factor : 1.0;
}

/* A variable of up to `digits` decimal digits, at least `least`: *out, or unchanged where it is unset, blank or
 * bad (reported, naming the variable and what was `expected`). */
static void read_digits(const char *name, size_t digits, size_t least, const char *expected, size_t *out) {
    char v[32];
    const char *raw = getenv(name);
    int got = hb_env_trimmed(raw, v, sizeof v);
    if (got == 1) return;
    size_t len = strlen(v), value = 0;
    int ok = got == 0 && len >= 1 && len <= digits;
    for (size_t i = 0; ok && i < len; i++) {
        ok = v[i] >= '0' && v[i] <= '9';
        value = value * 10 + (size_t)(v[i] - '0');
    }
    if (ok && value >= least) {
        *out = value;
        return;
    }
    fprintf(stderr, "ucudnn: warning: %s='%s': expected %s\n", name, raw, expected);
}

static pthread_once_t memory_once = PTHREAD_ONCE_INIT, top_once = PTHREAD_ONCE_INIT;
static size_t memory_bytes, instant_top;

static void read_memory(void) {
    read_digits("UCUDNN_HOST_FIND_MEMORY", 15, 0,
                "a number of bytes (up to 15 digits), e.g. 4194304; Find allocates without a bound", &memory_bytes);
}

size_t hb_find_memory(void) {
    pthread_once(&memory_once, read_memory);
    return memory_bytes;
}

static void read_top(void) {
    read_digits("UCUDNN_HOST_INSTANT_TOP", 2, 1,
                "a count of engines from 1 to 99, e.g. 1; the heuristics list every engine", &instant_top);
}

size_t hb_instant_top(void) {
    pthread_once(&top_once, read_top);
    return instant_top;
}
