/*
 * A cuDNN host program for the 16-bit preload tests (a trimmed copy of conv_driver.c, which other tests own):
 * one convolution on HALF or BFLOAT16 data -- or FLOAT, or INT8 for a type the shim passes through -- chosen and
 * run the way a mixed-precision framework would: 16-bit tensors and filter, a FLOAT (or HALF) compute type,
 * float scaling factors. Run with and without LD_PRELOAD=libucudnn.so; the test compares the output files.
 *
 * Arguments are key=value: op=fwd|bwd_data|bwd_filter|biasact, dtype=half|bf16|float|int8, compute=float|half,
 * layout=nchw|nhwc, n, c, k, groups, in=H,W[,D], filt, pad, stride, dil, algo, ws=query|BYTES, query=none|get|
 * find, deterministic, alpha, beta, alpha2, repeat, planner=fixed plan=b:algo[:math],..., out=PATH (the op's
 * output is written to PATH.0 as raw 16-bit values). Prints one JSON object on stdout: statuses, the chosen
 * algorithm and workspace, and, when the preload library is loaded, its stats and the last plan. Exit status 0
 * if every cuDNN call succeeded.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucudnn/cudnn_abi.h"
#include "ucudnn/ucudnn.h"

static int argc_g;
static char **argv_g;

static const char *opt(const char *key, const char *def)
{
    size_t n = strlen(key);
    for (int i = 1; i < argc_g; i++)
        if (strncmp(argv_g[i], key, n) == 0 && argv_g[i][n] == '=')
            return argv_g[i] + n + 1;
    return def;
}

static int opti(const char *key, int def)
{
    const char *v = opt(key, NULL);
    return v ? atoi(v) : def;
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (s && *s && n < max) {
        out[n++] = atoi(s);
        s = strchr(s, ',');
        if (s)
            s++;
    }
    return n;
}

static int failures;
static void check(const char *what, int st)
{
    if (st != 0) {
        fprintf(stderr, "conv16_driver: %s -> status %d\n", what, st);
        failures++;
    }
}

/* ---- problem ---- */
static int op; /* 0 fwd, 1 bwd_data, 2 bwd_filter, 3 bias-activation forward */
static cudnnDataType_t dt;
static int nhwc, nsp, N, C, K, G;
static int in_sp[3], f_sp[3], out_sp[3], pad[3], strd[3], dil[3];
static size_t esz;

/* bfloat16: round to nearest even (the top half of a float). */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static void tensor_desc(cudnnTensorDescriptor_t d, int n, int c, const int *sp)
{
    int nb = nsp + 2, dims[5], strides[5];
    dims[0] = n;
    dims[1] = c;
    for (int i = 0; i < nsp; i++)
        dims[2 + i] = sp[i];
    if (nhwc) { /* C fastest, then spatial, then N */
        strides[1] = 1;
        int s = c;
        for (int i = nsp - 1; i >= 0; i--) {
            strides[2 + i] = s;
            s *= sp[i];
        }
        strides[0] = s;
    } else {
        int s = 1;
        for (int i = nb - 1; i >= 0; i--) {
            strides[i] = s;
            s *= dims[i];
        }
    }
    check("SetTensorNd", cudnnSetTensorNdDescriptor(d, dt, nb, dims, strides));
}

static size_t elems(int n, int c, const int *sp)
{
    size_t e = (size_t)n * (size_t)c;
    for (int i = 0; i < nsp; i++)
        e *= (size_t)sp[i];
    return e;
}

/* Pseudo-random values in [-1, 1), stored in the data type. */
static void fill(void *buf, size_t n, unsigned seed)
{
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        float v = (float)(((double)((s >> 8) & 0xFFFF) / 32768.0) - 1.0);
        switch (dt) {
        case CUDNN_DATA_HALF: ((_Float16 *)buf)[i] = (_Float16)v; break;
        case CUDNN_DATA_BFLOAT16: ((uint16_t *)buf)[i] = to_bf16(v); break;
        case CUDNN_DATA_FLOAT: ((float *)buf)[i] = v; break;
        default: ((int8_t *)buf)[i] = (int8_t)(v * 100); break;
        }
    }
}

/* ---- the preload library's control API, if loaded: a fixed plan ---- */
static int fixed_count;
static ucudnn_micro_batch fixed_mb[64];

static int c_planner(const ucudnn_plan_request *req, ucudnn_plan_reply *rep)
{
    (void)req;
    if (fixed_count > rep->capacity)
        return 2;
    for (int i = 0; i < fixed_count; i++)
        rep->micro_batches[i] = fixed_mb[i];
    rep->count = fixed_count;
    rep->time_ms = 1.0f;
    rep->workspace_bytes = 0;
    rep->deterministic = 1;
    return 0;
}

int main(int argc, char **argv)
{
    argc_g = argc;
    argv_g = argv;
    const char *ops = opt("op", "fwd");
    op = !strcmp(ops, "fwd") ? 0 : !strcmp(ops, "bwd_data") ? 1 : !strcmp(ops, "bwd_filter") ? 2 : 3;
    const char *dts = opt("dtype", "half");
    dt = !strcmp(dts, "half")   ? CUDNN_DATA_HALF
         : !strcmp(dts, "bf16") ? CUDNN_DATA_BFLOAT16
         : !strcmp(dts, "int8") ? CUDNN_DATA_INT8
                                : CUDNN_DATA_FLOAT;
    esz = dt == CUDNN_DATA_FLOAT ? 4 : dt == CUDNN_DATA_INT8 ? 1 : 2;
    cudnnDataType_t compute = !strcmp(opt("compute", "float"), "half") ? CUDNN_DATA_HALF
                              : dt == CUDNN_DATA_INT8                  ? CUDNN_DATA_INT32
                                                                       : CUDNN_DATA_FLOAT;
    nhwc = !strcmp(opt("layout", "nchw"), "nhwc");
    N = opti("n", 8);
    C = opti("c", 4);
    K = opti("k", 8);
    G = opti("groups", 1);
    nsp = parse_list(opt("in", "10,10"), in_sp, 3);
    parse_list(opt("filt", "3,3"), f_sp, 3);
    for (int i = 0; i < nsp; i++) {
        pad[i] = opti("pad", 1);
        strd[i] = opti("stride", 1);
        dil[i] = opti("dil", 1);
        out_sp[i] = (in_sp[i] + 2 * pad[i] - (dil[i] * (f_sp[i] - 1) + 1)) / strd[i] + 1;
    }
    const char *plan_spec = opt("plan", NULL);
    while (plan_spec && *plan_spec && fixed_count < 64) { /* b:algo[:math],... */
        ucudnn_micro_batch m = {0, 0, 0};
        sscanf(plan_spec, "%d:%d:%d", &m.batch, &m.algo, &m.math_type);
        fixed_mb[fixed_count++] = m;
        plan_spec = strchr(plan_spec, ',');
        if (plan_spec)
            plan_spec++;
    }
    int (*set_planner)(ucudnn_planner_fn) = (int (*)(ucudnn_planner_fn))dlsym(RTLD_DEFAULT, "ucudnn_set_planner");
    size_t (*stats_json)(char *, size_t) = (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "ucudnn_stats_json");
    size_t (*last_plan)(char *, size_t) = (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "ucudnn_last_plan_json");
    if (opt("planner", NULL) && set_planner)
        set_planner(c_planner);

    cudnnHandle_t h;
    cudnnTensorDescriptor_t xD, yD, biasD;
    cudnnFilterDescriptor_t wD;
    cudnnConvolutionDescriptor_t convD;
    cudnnActivationDescriptor_t actD;
    check("cudnnCreate", cudnnCreate(&h));
    check("create", cudnnCreateTensorDescriptor(&xD));
    check("create", cudnnCreateTensorDescriptor(&yD));
    check("create", cudnnCreateTensorDescriptor(&biasD));
    check("create", cudnnCreateFilterDescriptor(&wD));
    check("create", cudnnCreateConvolutionDescriptor(&convD));
    check("create", cudnnCreateActivationDescriptor(&actD));
    tensor_desc(xD, N, C, in_sp);
    tensor_desc(yD, N, K, out_sp);
    int one[3] = {1, 1, 1};
    tensor_desc(biasD, 1, K, one);
    int fdims[5] = {K, C / G, f_sp[0], f_sp[1], f_sp[2]};
    check("SetFilterNd",
          cudnnSetFilterNdDescriptor(wD, dt, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, nsp + 2, fdims));
    check("SetConvNd", cudnnSetConvolutionNdDescriptor(convD, nsp, pad, strd, dil, CUDNN_CROSS_CORRELATION, compute));
    if (opti("math", 0))
        check("SetMath", cudnnSetConvolutionMathType(convD, (cudnnMathType_t)opti("math", 0)));
    check("SetGroups", cudnnSetConvolutionGroupCount(convD, G));
    check("SetAct", cudnnSetActivationDescriptor(actD, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    size_t x_elems = elems(N, C, in_sp), y_elems = elems(N, K, out_sp);
    size_t w_elems = (size_t)K * (size_t)(C / G) * (size_t)f_sp[0] * (size_t)f_sp[1] * (nsp == 3 ? (size_t)f_sp[2] : 1);

    /* ---- choose the algorithm and workspace as a framework would ---- */
    const char *query = opt("query", "none");
    int algo = opti("algo", 0), returned = -1, qst = 0, qop = op == 3 ? 0 : op;
    cudnnConvolutionFwdAlgoPerf_t perf[16];
    memset(perf, 0xff, sizeof perf);
    if (!strcmp(query, "get") || !strcmp(query, "find")) {
        int get = !strcmp(query, "get");
        if (qop == 0)
            qst = get ? cudnnGetConvolutionForwardAlgorithm_v7(h, xD, wD, convD, yD, 16, &returned, perf)
                      : cudnnFindConvolutionForwardAlgorithm(h, xD, wD, convD, yD, 16, &returned, perf);
        else if (qop == 1)
            qst = get ? cudnnGetConvolutionBackwardDataAlgorithm_v7(h, wD, yD, convD, xD, 16, &returned,
                                                                    (cudnnConvolutionBwdDataAlgoPerf_t *)perf)
                      : cudnnFindConvolutionBackwardDataAlgorithm(h, wD, yD, convD, xD, 16, &returned,
                                                                  (cudnnConvolutionBwdDataAlgoPerf_t *)perf);
        else
            qst = get ? cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, xD, yD, convD, wD, 16, &returned,
                                                                      (cudnnConvolutionBwdFilterAlgoPerf_t *)perf)
                      : cudnnFindConvolutionBackwardFilterAlgorithm(h, xD, yD, convD, wD, 16, &returned,
                                                                    (cudnnConvolutionBwdFilterAlgoPerf_t *)perf);
        check("query", qst);
        int want_det = opti("deterministic", 0);
        for (int i = 0; i < returned; i++)
            if (perf[i].status == 0 && (!want_det || perf[i].determinism == CUDNN_DETERMINISTIC)) {
                algo = perf[i].algo;
                break;
            }
    }
    size_t ws_bytes = 0;
    const char *ws_opt = opt("ws", "query");
    if (!strcmp(ws_opt, "query")) {
        int st = qop == 0   ? cudnnGetConvolutionForwardWorkspaceSize(h, xD, wD, convD, yD, algo, &ws_bytes)
                 : qop == 1 ? cudnnGetConvolutionBackwardDataWorkspaceSize(h, wD, yD, convD, xD, algo, &ws_bytes)
                            : cudnnGetConvolutionBackwardFilterWorkspaceSize(h, xD, yD, convD, wD, algo, &ws_bytes);
        check("workspace size", st);
    } else {
        ws_bytes = (size_t)strtoull(ws_opt, NULL, 10);
    }

    /* ---- run ---- */
    void *x = malloc(x_elems * esz), *w = malloc(w_elems * esz), *y = malloc(y_elems * esz);
    void *z = malloc(y_elems * esz), *bias = malloc((size_t)K * esz), *ws = malloc(ws_bytes ? ws_bytes : 1);
    fill(x, x_elems, 1);
    fill(w, w_elems, 2);
    fill(z, y_elems, 4);
    fill(bias, (size_t)K, 5);
    void *out = op == 1 ? x : op == 2 ? w : y;
    size_t out_bytes = (op == 1 ? x_elems : op == 2 ? w_elems : y_elems) * esz;
    /* Scaling factors: float for every data type but DOUBLE (HALF and BFLOAT16 included). */
    float alpha = (float)atof(opt("alpha", "1")), beta = (float)atof(opt("beta", "0"));
    float alpha2 = (float)atof(opt("alpha2", "0.5"));
    for (int r = 0; r < opti("repeat", 1); r++) {
        fill(y, y_elems, 3); /* dy of the backward ops, prior y of forward */
        fill(out, out_bytes / esz, 99);
        int st;
        if (op == 0)
            st = cudnnConvolutionForward(h, &alpha, xD, x, wD, w, convD, algo, ws, ws_bytes, &beta, yD, y);
        else if (op == 1)
            st = cudnnConvolutionBackwardData(h, &alpha, wD, w, yD, y, convD, algo, ws, ws_bytes, &beta, xD, x);
        else if (op == 2)
            st = cudnnConvolutionBackwardFilter(h, &alpha, xD, x, yD, y, convD, algo, ws, ws_bytes, &beta, wD, w);
        else
            st = cudnnConvolutionBiasActivationForward(h, &alpha, xD, x, wD, w, convD, algo, ws, ws_bytes, &alpha2,
                                                       yD, z, biasD, bias, actD, yD, y);
        check("convolution", st);
    }
    const char *outp = opt("out", NULL);
    if (outp) {
        char path[1024];
        snprintf(path, sizeof path, "%s.0", outp);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(out, 1, out_bytes, f) != out_bytes)
            check("write output", 1);
        if (f)
            fclose(f);
    }

    /* ---- report ---- */
    printf("{\"failures\":%d,\"algo\":%d,\"ws_bytes\":%zu,\"query_status\":%d,\"returned\":%d,\"perf\":[", failures,
           algo, ws_bytes, qst, returned);
    for (int i = 0; i < returned && i < 16; i++)
        printf("%s{\"algo\":%d,\"status\":%d,\"time\":%g,\"memory\":%zu,\"determinism\":%d,\"math\":%d}", i ? "," : "",
               perf[i].algo, perf[i].status, (double)perf[i].time, perf[i].memory, perf[i].determinism,
               perf[i].mathType);
    printf("]");
    static char buf[1 << 16];
    if (stats_json) {
        stats_json(buf, sizeof buf);
        printf(",\"stats\":%s", buf);
    }
    if (last_plan) {
        last_plan(buf, sizeof buf);
        printf(",\"last_plan\":%s", buf);
    }
    printf("}\n");
    return failures ? 1 : 0;
}
