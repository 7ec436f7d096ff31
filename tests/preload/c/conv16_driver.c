/*
 * A cuDNN host program for the 16-bit preload tests (conv_driver.c's single-threaded sibling, which other tests
 * own): one convolution on HALF or BFLOAT16 data -- or FLOAT, or INT8 for a type the shim passes through --
 * chosen and run the way a mixed-precision framework would: 16-bit tensors and filter, a FLOAT (or HALF) compute
 * type, float scaling factors. Run with and without LD_PRELOAD=libucudnn.so; the test compares the output files.
 *
 * Arguments are key=value: those of driver_common.h, dtype=half|bf16|float|int8, compute=float|half, alpha,
 * beta, alpha2, repeat, planner=fixed plan=b:algo[:math],..., out=PATH (the op's output is written to PATH.0 as
 * raw 16-bit values). Prints one JSON object on stdout: statuses, the chosen algorithm and workspace, and, when
 * the preload library is loaded, its stats and the last plan. Exit status 0 if every cuDNN call succeeded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_common.h"

static int c_planner(const ucudnn_plan_request *req, ucudnn_plan_reply *rep)
{
    (void)req;
    return fixed_plan_reply(rep);
}

int main(int argc, char **argv)
{
    driver_init(argc, argv, "conv16_driver");
    const char *dts = opt("dtype", "half");
    cudnnDataType_t dt = !strcmp(dts, "half")   ? CUDNN_DATA_HALF
                         : !strcmp(dts, "bf16") ? CUDNN_DATA_BFLOAT16
                         : !strcmp(dts, "int8") ? CUDNN_DATA_INT8
                                                : CUDNN_DATA_FLOAT;
    cudnnDataType_t compute = !strcmp(opt("compute", "float"), "half") ? CUDNN_DATA_HALF
                              : dt == CUDNN_DATA_INT8                  ? CUDNN_DATA_INT32
                                                                       : CUDNN_DATA_FLOAT;
    fixed_plan_parse(opt("plan", NULL));
    int (*set_planner)(ucudnn_planner_fn) = (int (*)(ucudnn_planner_fn))shim_fn("ucudnn_set_planner");
    if (opt("planner", NULL) && set_planner)
        set_planner(c_planner);

    cudnnHandle_t h;
    check("cudnnCreate", cudnnCreate(&h));
    conv_problem P;
    conv_setup(&P, dt, compute);
    conv_choice ch;
    conv_choose(h, &P, &ch);

    /* ---- run ---- */
    size_t esz = P.esz;
    conv_buffers b = {malloc(P.x_elems * esz), malloc(P.w_elems * esz), malloc(P.y_elems * esz),
                      malloc(P.y_elems * esz), malloc((size_t)P.k * esz)};
    void *ws = malloc(ch.ws_bytes ? ch.ws_bytes : 1);
    conv_fill(&P, b.x, P.x_elems, 1);
    conv_fill(&P, b.w, P.w_elems, 2);
    conv_fill(&P, b.z, P.y_elems, 4);
    conv_fill(&P, b.bias, (size_t)P.k, 5);
    void *out = P.op == OP_BWD_DATA ? b.x : P.op == OP_BWD_FILTER ? b.w : b.y;
    size_t out_bytes = (P.op == OP_BWD_DATA ? P.x_elems : P.op == OP_BWD_FILTER ? P.w_elems : P.y_elems) * esz;
    /* Scaling factors: float for every data type but DOUBLE (HALF and BFLOAT16 included). */
    float alpha = (float)atof(opt("alpha", "1")), beta = (float)atof(opt("beta", "0"));
    float alpha2 = (float)atof(opt("alpha2", "0.5"));
    for (int r = 0; r < opti("repeat", 1); r++) {
        conv_fill(&P, b.y, P.y_elems, 3); /* dy of the backward ops, prior y of forward */
        conv_fill(&P, out, out_bytes / esz, 99);
        check("convolution", conv_run(h, &P, &b, ch.algo, ws, ch.ws_bytes, &alpha, &beta, &alpha2));
    }
    const char *outp = opt("out", NULL);
    if (outp) {
        char path[1024];
        snprintf(path, sizeof path, "%s.0", outp);
        write_file(path, out, out_bytes);
    }

    /* ---- report ---- */
    report_begin(&ch);
    return report_end(1);
}
