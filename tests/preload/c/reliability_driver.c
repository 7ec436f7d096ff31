/*
 * A cuDNN host program for the reliability tests (issue classes: validation first, status parity, bounded
 * memory). Arguments are those of driver_common.h plus:
 *   mode=bad      one execution of the problem with the data pointers given by null=xwy (letters: which of
 *                 x, w, y are NULL; "" none), algo=, ws=BYTES (a workspace of that size, NULL when 0), ybad=1
 *                 (y with one channel too many, 2-D NCHW), dummy=1 (pointers that are not NULL point at a small
 *                 buffer: for calls refused before their data is read); prints the status and the call's wall
 *                 time (ms)
 *   mode=sizes    count= executions, each with a workspace one byte larger than the last (from ws_base=), on
 *                 real data; prints the resident memory (KiB) and wall time of the loop
 * planner=fixed (plan=...) registers a C planner that answers every request with that plan.
 * Prints one JSON object with the statuses, figures and the preload library's stats when it is loaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_common.h"

static int fixed_planner(const ucudnn_plan_request *req, ucudnn_plan_reply *rep)
{
    (void)req;
    return fixed_plan_reply(rep);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * 4;
}

int main(int argc, char **argv)
{
    driver_init(argc, argv, "reliability_driver");
    const char *planner = opt("planner", NULL);
    int (*set_planner)(ucudnn_planner_fn) = (int (*)(ucudnn_planner_fn))shim_fn("ucudnn_set_planner");
    fixed_plan_parse(opt("plan", NULL));
    if (planner && set_planner)
        set_planner(fixed_planner);
    cudnnHandle_t h;
    check("cudnnCreate", cudnnCreate(&h));
    conv_problem P;
    conv_setup(&P, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
    if (opti("ybad", 0)) /* y (dy) with one channel too many: shapes that do not agree */
        check("SetTensor4d", cudnnSetTensor4dDescriptor(P.yD, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, P.n, P.k + 1,
                                                        P.out_sp[0], P.out_sp[1]));
    float alpha = 1.0f, beta = 0.0f, alpha2 = 0.0f;
    int algo = opti("algo", 0);
    const char *mode = opt("mode", "bad");
    conv_choice none;
    memset(&none, 0, sizeof none);
    none.algo = algo;
    none.returned = 0;
    if (!strcmp(mode, "bad")) {
        const char *nulls = opt("null", "xwy");
        size_t ws_bytes = (size_t)strtoull(opt("ws", "0"), NULL, 10);
        /* dummy=1: the pointers not NULL point at a small buffer (a call refused before its data is touched) */
        static double dummy[64];
        int fake = opti("dummy", 0);
        conv_buffers b = {NULL, NULL, NULL, NULL, NULL};
        if (!strchr(nulls, 'x'))
            b.x = fake ? (void *)dummy : calloc(P.x_elems, P.esz);
        if (!strchr(nulls, 'w'))
            b.w = fake ? (void *)dummy : calloc(P.w_elems, P.esz);
        if (!strchr(nulls, 'y'))
            b.y = fake ? (void *)dummy : calloc(P.y_elems, P.esz);
        b.z = b.y;
        b.bias = calloc((size_t)P.k, P.esz);
        void *ws = ws_bytes ? calloc(1, ws_bytes) : NULL;
        double t0 = now_ms();
        int st = conv_run(h, &P, &b, algo, ws, ws_bytes, &alpha, &beta, &alpha2);
        double ms = now_ms() - t0;
        none.ws_bytes = ws_bytes;
        report_begin(&none);
        printf(",\"status\":%d,\"call_ms\":%.3f", st, ms);
        return report_end(0) ? 1 : 0;
    }
    /* mode=sizes */
    int count = opti("count", 100);
    size_t base = (size_t)strtoull(opt("ws_base", "0"), NULL, 10);
    size_t esz = P.esz;
    conv_buffers b = {calloc(P.x_elems, esz), calloc(P.w_elems, esz), calloc(P.y_elems, esz), NULL,
                      calloc((size_t)P.k, esz)};
    b.z = b.y;
    conv_fill(&P, b.x, P.x_elems, 1);
    conv_fill(&P, b.w, P.w_elems, 2);
    conv_fill(&P, b.y, P.y_elems, 3);
    void *ws = calloc(1, base + (size_t)count + 1);
    long rss0 = rss_kib();
    double t0 = now_ms();
    for (int i = 0; i < count; i++)
        check("convolution", conv_run(h, &P, &b, algo, ws, base + (size_t)i, &alpha, &beta, &alpha2));
    double ms = now_ms() - t0;
    none.ws_bytes = base;
    report_begin(&none);
    printf(",\"loop_ms\":%.3f,\"rss_kib\":%ld,\"rss_growth_kib\":%ld", ms, rss_kib(), rss_kib() - rss0);
    return report_end(0);
}
