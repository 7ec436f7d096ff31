/*
 * What the preload tests' C driver programs share (driver_common.c, compiled into each of them): key=value
 * arguments, counting failed cuDNN calls, writing output files, the preload library's control API when it is
 * loaded, and -- for the one-convolution drivers (conv_driver.c, conv16_driver.c) -- the problem, its
 * descriptors, the algorithm and workspace choice a framework makes, the call and the JSON report.
 */
#ifndef DRIVER_COMMON_H
#define DRIVER_COMMON_H

#include <stddef.h>

#include "ucudnn/cudnn_abi.h"
#include "ucudnn/ucudnn.h"

/* ---- arguments: key=value; `name` prefixes the driver's messages on stderr ---- */
void driver_init(int argc, char **argv, const char *name);
const char *opt(const char *key, const char *def);
int opti(const char *key, int def);
int parse_list(const char *s, int *out, int max); /* "a,b,c" -> out; returns the count */

/* ---- failures: a non-zero status is reported on stderr and counted (thread-safe) ---- */
extern int failures;
void check(const char *what, int st);
void write_file(const char *path, const void *data, size_t bytes); /* a failure if it cannot */

/* ---- the preload library's control API: NULL without it ---- */
void *shim_fn(const char *name);
char *shim_json(const char *name); /* ucudnn_stats_json or ucudnn_last_plan_json into a fresh string */

/* A fixed plan from plan=b:algo[:math],..., for a C planner to return. */
void fixed_plan_parse(const char *spec);
int fixed_plan_reply(ucudnn_plan_reply *rep); /* 0, or 2 when the plan does not fit the reply */

/* ---- one convolution: op=fwd|bwd_data|bwd_filter|biasact, layout, n, c, k, groups, in, filt, pad, stride,
 * dil, math, act ---- */
enum { OP_FWD, OP_BWD_DATA, OP_BWD_FILTER, OP_BIAS_ACT };

typedef struct {
    int op; /* OP_*; the queries of OP_BIAS_ACT are the forward ones */
    cudnnDataType_t dtype;
    size_t esz; /* bytes per element */
    int nhwc, nsp, n, c, k, groups;
    int in_sp[3], f_sp[3], out_sp[3], pad[3], stride[3], dil[3];
    cudnnTensorDescriptor_t xD, yD, biasD;
    cudnnFilterDescriptor_t wD;
    cudnnConvolutionDescriptor_t convD;
    cudnnActivationDescriptor_t actD;
    size_t x_elems, y_elems, w_elems;
} conv_problem;

/* Reads the problem's arguments and creates its descriptors: data of `dtype`, computed in `compute`. */
void conv_setup(conv_problem *p, cudnnDataType_t dtype, cudnnDataType_t compute);

/* Pseudo-random values in [-1, 1) (int8: scaled by 100), stored in the problem's data type. */
void conv_fill(const conv_problem *p, void *buf, size_t count, unsigned seed);

/* The algorithm and workspace, chosen as a framework would: query=none|get|find|findex (requested,
 * findex_ws=BYTES, or findex_ws=pytorch: every algorithm's workspace asked first and the largest within
 * max_block=BYTES given, as PyTorch's benchmark mode does), the first successful row (deterministic only if deterministic=1) whose memory is at most
 * alloc_limit=BYTES (if given), else algo=; ws=query|entry (the chosen row's memory)|BYTES. */
#define MAX_ROWS 64
typedef struct {
    int algo, returned, status, entry;
    size_t ws_bytes;
    cudnnConvolutionFwdAlgoPerf_t perf[MAX_ROWS];
} conv_choice;
void conv_choose(cudnnHandle_t h, const conv_problem *p, conv_choice *ch);

/* The op's buffers by the forward problem's roles (dy is y, dx is x, dw is w); z and bias for OP_BIAS_ACT. */
typedef struct {
    void *x, *w, *y, *z, *bias;
} conv_buffers;
int conv_run(cudnnHandle_t h, const conv_problem *p, const conv_buffers *b, int algo, void *ws, size_t ws_bytes,
             const void *alpha, const void *beta, const void *alpha2);

/* The JSON report: report_begin prints {"failures", "algo", "ws_bytes", "query_status", "returned", "perf";
 * the caller may add fields; report_end adds the shim's "stats" and (with_last_plan) "last_plan", closes it
 * and returns the exit status (0 if every call succeeded). */
void report_begin(const conv_choice *ch);
int report_end(int with_last_plan);

#endif
