/* The preload tests' driver programs' shared part: see driver_common.h. */
#include "driver_common.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int argc_g;
static char **argv_g;
static const char *name_g = "driver";

void driver_init(int argc, char **argv, const char *name)
{
    argc_g = argc;
    argv_g = argv;
    name_g = name;
}

const char *opt(const char *key, const char *def)
{
    size_t n = strlen(key);
    for (int i = 1; i < argc_g; i++)
        if (strncmp(argv_g[i], key, n) == 0 && argv_g[i][n] == '=')
            return argv_g[i] + n + 1;
    return def;
}

int opti(const char *key, int def)
{
    const char *v = opt(key, NULL);
    return v ? atoi(v) : def;
}

int parse_list(const char *s, int *out, int max)
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

int failures;

void check(const char *what, int st)
{
    if (st != 0) {
        fprintf(stderr, "%s: %s -> status %d\n", name_g, what, st);
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    }
}

void write_file(const char *path, const void *data, size_t bytes)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, bytes, f) != bytes) {
        fprintf(stderr, "%s: cannot write %s\n", name_g, path);
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    }
    if (f)
        fclose(f);
}

void *shim_fn(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

char *shim_json(const char *name)
{
    size_t (*fn)(char *, size_t) = (size_t(*)(char *, size_t))shim_fn(name);
    if (!fn)
        return NULL;
    size_t need = fn(NULL, 0);
    char *buf = malloc(need + 1);
    if (buf)
        fn(buf, need + 1);
    return buf;
}

static int fixed_count;
static ucudnn_micro_batch fixed_mb[64];

void fixed_plan_parse(const char *spec)
{
    while (spec && *spec && fixed_count < 64) {
        ucudnn_micro_batch m = {0, 0, 0};
        sscanf(spec, "%d:%d:%d", &m.batch, &m.algo, &m.math_type);
        fixed_mb[fixed_count++] = m;
        spec = strchr(spec, ',');
        if (spec)
            spec++;
    }
}

int fixed_plan_reply(ucudnn_plan_reply *rep)
{
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

/* ---- one convolution ---- */

static void tensor_desc(const conv_problem *p, cudnnTensorDescriptor_t d, int n, int c, const int *sp)
{
    int nb = p->nsp + 2, dims[5], strides[5];
    dims[0] = n;
    dims[1] = c;
    for (int i = 0; i < p->nsp; i++)
        dims[2 + i] = sp[i];
    if (p->nhwc) { /* C fastest, then spatial, then N */
        strides[1] = 1;
        int s = c;
        for (int i = p->nsp - 1; i >= 0; i--) {
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
    check("SetTensorNd", cudnnSetTensorNdDescriptor(d, p->dtype, nb, dims, strides));
}

static size_t elems(const conv_problem *p, int n, int c, const int *sp)
{
    size_t e = (size_t)n * (size_t)c;
    for (int i = 0; i < p->nsp; i++)
        e *= (size_t)sp[i];
    return e;
}

void conv_setup(conv_problem *p, cudnnDataType_t dtype, cudnnDataType_t compute)
{
    memset(p, 0, sizeof *p);
    const char *ops = opt("op", "fwd");
    p->op = !strcmp(ops, "fwd")          ? OP_FWD
            : !strcmp(ops, "bwd_data")   ? OP_BWD_DATA
            : !strcmp(ops, "bwd_filter") ? OP_BWD_FILTER
                                         : OP_BIAS_ACT;
    p->dtype = dtype;
    p->esz = dtype == CUDNN_DATA_DOUBLE ? 8 : dtype == CUDNN_DATA_FLOAT ? 4 : dtype == CUDNN_DATA_INT8 ? 1 : 2;
    p->nhwc = !strcmp(opt("layout", "nchw"), "nhwc");
    p->n = opti("n", 8);
    p->c = opti("c", 4);
    p->k = opti("k", 8);
    p->groups = opti("groups", 1);
    p->nsp = parse_list(opt("in", "10,10"), p->in_sp, 3);
    parse_list(opt("filt", "3,3"), p->f_sp, 3);
    for (int i = 0; i < p->nsp; i++) {
        p->pad[i] = opti("pad", 1);
        p->stride[i] = opti("stride", 1);
        p->dil[i] = opti("dil", 1);
        p->out_sp[i] = (p->in_sp[i] + 2 * p->pad[i] - (p->dil[i] * (p->f_sp[i] - 1) + 1)) / p->stride[i] + 1;
    }

    check("create", cudnnCreateTensorDescriptor(&p->xD));
    check("create", cudnnCreateTensorDescriptor(&p->yD));
    check("create", cudnnCreateTensorDescriptor(&p->biasD));
    check("create", cudnnCreateFilterDescriptor(&p->wD));
    check("create", cudnnCreateConvolutionDescriptor(&p->convD));
    check("create", cudnnCreateActivationDescriptor(&p->actD));
    tensor_desc(p, p->xD, p->n, p->c, p->in_sp);
    tensor_desc(p, p->yD, p->n, p->k, p->out_sp);
    int one[3] = {1, 1, 1};
    tensor_desc(p, p->biasD, 1, p->k, one);
    int fdims[5] = {p->k, p->c / p->groups, p->f_sp[0], p->f_sp[1], p->f_sp[2]};
    check("SetFilterNd", cudnnSetFilterNdDescriptor(p->wD, dtype, p->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                                    p->nsp + 2, fdims));
    check("SetConvNd",
          cudnnSetConvolutionNdDescriptor(p->convD, p->nsp, p->pad, p->stride, p->dil, CUDNN_CROSS_CORRELATION, compute));
    if (opti("math", 0))
        check("SetMath", cudnnSetConvolutionMathType(p->convD, (cudnnMathType_t)opti("math", 0)));
    check("SetGroups", cudnnSetConvolutionGroupCount(p->convD, p->groups));
    check("SetAct", cudnnSetActivationDescriptor(p->actD, !strcmp(opt("act", "relu"), "relu")
                                                              ? CUDNN_ACTIVATION_RELU
                                                              : CUDNN_ACTIVATION_IDENTITY,
                                                 CUDNN_NOT_PROPAGATE_NAN, 0.0));
    p->x_elems = elems(p, p->n, p->c, p->in_sp);
    p->y_elems = elems(p, p->n, p->k, p->out_sp);
    p->w_elems = (size_t)p->k * (size_t)(p->c / p->groups) * (size_t)p->f_sp[0] * (size_t)p->f_sp[1] *
                 (p->nsp == 3 ? (size_t)p->f_sp[2] : 1);
}

/* bfloat16: round to nearest even (the top half of a float). */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

void conv_fill(const conv_problem *p, void *buf, size_t count, unsigned seed)
{
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < count; i++) {
        s = s * 1103515245u + 12345u;
        double v = ((double)((s >> 8) & 0xFFFF) / 32768.0) - 1.0;
        switch (p->dtype) {
        case CUDNN_DATA_DOUBLE: ((double *)buf)[i] = v; break;
        case CUDNN_DATA_FLOAT: ((float *)buf)[i] = (float)v; break;
        case CUDNN_DATA_HALF: ((_Float16 *)buf)[i] = (_Float16)(float)v; break;
        case CUDNN_DATA_BFLOAT16: ((uint16_t *)buf)[i] = to_bf16((float)v); break;
        default: ((int8_t *)buf)[i] = (int8_t)((float)v * 100); break;
        }
    }
}

/* The real workspace query of the problem's op for `algo`. */
static int workspace_of(cudnnHandle_t h, const conv_problem *p, int a, size_t *bytes)
{
    return p->op == OP_BWD_DATA ? cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->wD, p->yD, p->convD, p->xD, a, bytes)
           : p->op == OP_BWD_FILTER
               ? cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p->xD, p->yD, p->convD, p->wD, a, bytes)
               : cudnnGetConvolutionForwardWorkspaceSize(h, p->xD, p->wD, p->convD, p->yD, a, bytes);
}

/* The workspace PyTorch's benchmark mode gives its Find*Ex (getMaxWorkspaceSize in Conv_v7.cpp): every algorithm's
 * workspace asked first, the largest that fits its largest free block (max_block=BYTES) kept. */
static size_t pytorch_find_ws(cudnnHandle_t h, const conv_problem *p)
{
    const char *block_opt = opt("max_block", NULL);
    size_t block = block_opt ? (size_t)strtoull(block_opt, NULL, 10) : SIZE_MAX, best = 0;
    int count = p->op == OP_BWD_DATA ? 6 : p->op == OP_BWD_FILTER ? 7 : 8;
    for (int a = 0; a < count; a++) {
        size_t sz = 0;
        if (workspace_of(h, p, a, &sz) == 0 && sz > 0 && sz >= best && sz <= block)
            best = sz;
    }
    return best;
}

/* Get*_v7, Find* or Find*Ex of the problem's op, into ch->perf. */
static int query(cudnnHandle_t h, const conv_problem *p, const char *kind, int requested, conv_choice *ch)
{
    cudnnTensorDescriptor_t xD = p->xD, yD = p->yD;
    cudnnFilterDescriptor_t wD = p->wD;
    cudnnConvolutionDescriptor_t convD = p->convD;
    int *got = &ch->returned;
    if (!strcmp(kind, "get"))
        return p->op == OP_BWD_DATA ? cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                          h, wD, yD, convD, xD, requested, got,
                                          (cudnnConvolutionBwdDataAlgoPerf_t *)ch->perf)
               : p->op == OP_BWD_FILTER ? cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                              h, xD, yD, convD, wD, requested, got,
                                              (cudnnConvolutionBwdFilterAlgoPerf_t *)ch->perf)
                                        : cudnnGetConvolutionForwardAlgorithm_v7(h, xD, wD, convD, yD, requested,
                                                                                 got, ch->perf);
    if (!strcmp(kind, "find"))
        return p->op == OP_BWD_DATA ? cudnnFindConvolutionBackwardDataAlgorithm(
                                          h, wD, yD, convD, xD, requested, got,
                                          (cudnnConvolutionBwdDataAlgoPerf_t *)ch->perf)
               : p->op == OP_BWD_FILTER ? cudnnFindConvolutionBackwardFilterAlgorithm(
                                              h, xD, yD, convD, wD, requested, got,
                                              (cudnnConvolutionBwdFilterAlgoPerf_t *)ch->perf)
                                        : cudnnFindConvolutionForwardAlgorithm(h, xD, wD, convD, yD, requested, got,
                                                                               ch->perf);
    /* findex: on scratch buffers and workspace of our own */
    void *x = calloc(p->x_elems, p->esz), *y = calloc(p->y_elems, p->esz), *w = calloc(p->w_elems, p->esz);
    const char *ws_opt = opt("findex_ws", NULL);
    size_t ws_bytes = ws_opt && !strcmp(ws_opt, "pytorch") ? pytorch_find_ws(h, p) : (size_t)opti("findex_ws", 1 << 20);
    void *ws = calloc(1, ws_bytes);
    int st = p->op == OP_BWD_DATA
                 ? cudnnFindConvolutionBackwardDataAlgorithmEx(h, wD, w, yD, y, convD, xD, x, requested, got,
                                                               (cudnnConvolutionBwdDataAlgoPerf_t *)ch->perf, ws,
                                                               ws_bytes)
             : p->op == OP_BWD_FILTER
                 ? cudnnFindConvolutionBackwardFilterAlgorithmEx(h, xD, x, yD, y, convD, wD, w, requested, got,
                                                                 (cudnnConvolutionBwdFilterAlgoPerf_t *)ch->perf, ws,
                                                                 ws_bytes)
                 : cudnnFindConvolutionForwardAlgorithmEx(h, xD, x, wD, w, convD, yD, y, requested, got, ch->perf,
                                                          ws, ws_bytes);
    free(x), free(y), free(w), free(ws);
    return st;
}

void conv_choose(cudnnHandle_t h, const conv_problem *p, conv_choice *ch)
{
    const char *kind = opt("query", "none");
    ch->algo = opti("algo", 0);
    ch->returned = -1;
    ch->entry = -1;
    ch->status = 0;
    memset(ch->perf, 0xff, sizeof ch->perf);
    if (!strcmp(kind, "get") || !strcmp(kind, "find") || !strcmp(kind, "findex")) {
        ch->status = query(h, p, kind, opti("requested", 16), ch);
        check("query", ch->status);
        /* Pick like a framework: the first successful row (deterministic only, if asked) whose workspace can be
         * "allocated" (alloc_limit=BYTES stands for the free memory; PyTorch moves to the next row on OOM). */
        int want_det = opti("deterministic", 0);
        const char *limit_opt = opt("alloc_limit", NULL);
        size_t alloc_limit = limit_opt ? (size_t)strtoull(limit_opt, NULL, 10) : SIZE_MAX;
        for (int i = 0; i < ch->returned; i++) {
            if (ch->perf[i].status == 0 && (!want_det || ch->perf[i].determinism == CUDNN_DETERMINISTIC) &&
                ch->perf[i].memory <= alloc_limit) {
                ch->algo = ch->perf[i].algo;
                ch->entry = i;
                break;
            }
        }
    }
    ch->ws_bytes = 0;
    const char *ws_opt = opt("ws", "query");
    if (!strcmp(ws_opt, "entry")) { /* the chosen row's own workspace, as PyTorch allocates it */
        ch->ws_bytes = ch->entry >= 0 ? ch->perf[ch->entry].memory : 0;
    } else if (!strcmp(ws_opt, "query")) {
        check("workspace size", workspace_of(h, p, ch->algo, &ch->ws_bytes));
    } else {
        ch->ws_bytes = (size_t)strtoull(ws_opt, NULL, 10);
    }
}

int conv_run(cudnnHandle_t h, const conv_problem *p, const conv_buffers *b, int algo, void *ws, size_t ws_bytes,
             const void *alpha, const void *beta, const void *alpha2)
{
    switch (p->op) {
    case OP_FWD:
        return cudnnConvolutionForward(h, alpha, p->xD, b->x, p->wD, b->w, p->convD, algo, ws, ws_bytes, beta, p->yD,
                                       b->y);
    case OP_BWD_DATA:
        return cudnnConvolutionBackwardData(h, alpha, p->wD, b->w, p->yD, b->y, p->convD, algo, ws, ws_bytes, beta,
                                            p->xD, b->x);
    case OP_BWD_FILTER:
        return cudnnConvolutionBackwardFilter(h, alpha, p->xD, b->x, p->yD, b->y, p->convD, algo, ws, ws_bytes, beta,
                                              p->wD, b->w);
    default:
        return cudnnConvolutionBiasActivationForward(h, alpha, p->xD, b->x, p->wD, b->w, p->convD, algo, ws, ws_bytes,
                                                     alpha2, p->yD, b->z, p->biasD, b->bias, p->actD, p->yD, b->y);
    }
}

void report_begin(const conv_choice *ch)
{
    printf("{\"failures\":%d,\"algo\":%d,\"ws_bytes\":%zu,\"query_status\":%d,\"returned\":%d,\"entry\":%d,"
           "\"perf\":[",
           failures, ch->algo, ch->ws_bytes, ch->status, ch->returned, ch->entry);
    for (int i = 0; i < ch->returned && i < MAX_ROWS; i++) {
        const cudnnConvolutionFwdAlgoPerf_t *r = &ch->perf[i];
        printf("%s{\"algo\":%d,\"status\":%d,\"time\":%g,\"memory\":%zu,\"determinism\":%d,\"math\":%d}", i ? "," : "",
               r->algo, r->status, (double)r->time, r->memory, r->determinism, r->mathType);
    }
    printf("]");
}

int report_end(int with_last_plan)
{
    char *stats = shim_json("ucudnn_stats_json");
    if (stats)
        printf(",\"stats\":%s", stats);
    char *plan = with_last_plan ? shim_json("ucudnn_last_plan_json") : NULL;
    if (plan)
        printf(",\"last_plan\":%s", plan);
    printf("}\n");
    free(stats);
    free(plan);
    return failures ? 1 : 0;
}
