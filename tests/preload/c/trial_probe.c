/*
 * The check's decision rule (uc_trial in shim/core/uc_trial.c), fed with chosen timings: compiled together with
 * uc_trial.c (-I shim -I shim/core), with stubs for the few shim functions it uses.
 * Usage: trial_probe S MARGIN T0 T1 T2 ...
 * where T<i> is the time of execution i (even: the plan, odd: the undivided choice; 0 and 1 warm up), or "fail"
 * for an execution that failed. Executions are fed until the trial decides; prints one JSON line: how many
 * executions it took and what it kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uc_core.h"

static int samples;
static double margin;

int uc_cfg_verify_samples(void) { return samples; }
double uc_cfg_verify_margin(void) { return margin; }
int uc_mark_read(uc_mark *m, double *ms)
{
    *ms = m->ms;
    return 1;
}
void uc_mark_drop(uc_mark *m) { (void)m; }

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    samples = atoi(argv[1]);
    margin = atof(argv[2]);
    uc_trial t;
    if (uc_trial_init(&t) != 0)
        return 2;
    int fed = 0;
    for (int i = 3; i < argc; i++) {
        double a_ms = 0, b_ms = 0;
        int n = 0, kept = 0;
        if (uc_trial_verdict(&t, &a_ms, &b_ms, &n, &kept)) {
            printf("{\"executions\": %d, \"kept\": %d, \"samples\": %d}\n", fed, kept, n);
            return 0;
        }
        int side_b = 0, slot = uc_trial_begin(&t, &side_b);
        if (slot < 0 || side_b != slot % 2)
            return 3;
        uc_mark m = {0};
        int ok = strcmp(argv[i], "fail") != 0;
        m.ms = ok ? atof(argv[i]) : 0.0;
        uc_trial_end(&t, slot, &m, ok);
        fed++;
    }
    double a_ms = 0, b_ms = 0;
    int n = 0, kept = 0;
    if (uc_trial_verdict(&t, &a_ms, &b_ms, &n, &kept))
        printf("{\"executions\": %d, \"kept\": %d, \"samples\": %d}\n", fed, kept, n);
    else
        printf("{\"executions\": %d, \"kept\": null}\n", fed);
    return 0;
}
