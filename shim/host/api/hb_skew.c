/*
 * UCUDNN_HOST_FIND_SKEW=<op>:<algo>:<factor>: Find* (not Get*_v7) report `factor` x the true time of one
 * algorithm of one op. It exists for tests: a plan can then look faster (or slower) than it runs, which is what
 * the preload library's check of new plans on real executions must catch. Read once per process; a bad value is
 * reported naming the variable and ignored.
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
