/*
 * A framework that dlopens cuDNN (JAX/XLA, ONNX Runtime, PaddlePaddle; TensorFlow with exported stubs): built
 * with cudnn_dlopen.c instead of libcudnn, it reaches cuDNN only through dlsym'd pointers. One convolution problem
 * (driver_common.h's arguments; NCHW, float) runs twice: through the legacy API, its algorithm and workspace
 * chosen as conv_driver.c chooses them, and as a graph built and run in cudnn_frontend's order
 * (tests/host/graph_driver.c, included below), on the same inputs.
 *
 * Arguments beyond driver_common's: out=PREFIX (writes PREFIX.legacy and PREFIX.graph), repeat=R (executions of
 * each), probe_first=1 (the first cuDNN call is a hooked one, cudnnBackendCreateDescriptor then Destroy, before
 * anything has loaded cuDNN: what TensorFlow does when none of its stubs has run yet). Prints one JSON object:
 * driver_common's report plus "probe" (the probe's two statuses), "graph" (status, stage, engine, workspace),
 * "foreign_lookups" (lookups answered from outside the library dlopened: the hooks, under the preload library),
 * "library_foreign_lookups" (the same count kept by the library itself when it is the dispatcher stand-in, else
 * -1) and, under the preload library, its stats. Exit status 0 if every cuDNN call succeeded.
 *
 * Built as a program, or with -DFRAMEWORK_LIBRARY as a library exporting framework_main (loaded RTLD_LOCAL by a
 * Python host, as Python loads XLA's plugin or TensorFlow's extension module).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_common.h"
#include "graph_driver.c"

/* cudnn_dlopen.c */
int cudnn_dlopen_foreign_lookups(void);
void *cudnn_dlopen_handle(void);

static void *alloc_filled(const conv_problem *p, size_t elems, unsigned seed)
{
    void *b = malloc(elems * p->esz);
    if (b)
        conv_fill(p, b, elems, seed);
    return b;
}

/* The legacy call: query, choose, execute `repeat` times (beta 0), as conv_driver.c does with one thread. */
static void run_legacy(cudnnHandle_t h, const conv_problem *p, conv_choice *ch, const conv_buffers *in, void *out,
                       size_t out_bytes)
{
    conv_choose(h, p, ch);
    void *ws = malloc(ch->ws_bytes ? ch->ws_bytes : 1);
    float alpha = 1.0f, beta = 0.0f, alpha2 = 0.5f;
    for (int r = 0; r < opti("repeat", 1); r++) {
        memset(out, 0, out_bytes);
        check("legacy convolution", conv_run(h, p, in, ch->algo, ws, ch->ws_bytes, &alpha, &beta, &alpha2));
    }
    free(ws);
}

/* The graph: graph_driver.c's friendly order, its heuristics' first engine. */
static void run_graph(const conv_problem *p, const conv_buffers *in, gd_result *r)
{
    gd_spec s;
    memset(&s, 0, sizeof s);
    s.op = p->op == OP_BWD_DATA ? 1 : p->op == OP_BWD_FILTER ? 2 : 0;
    s.dtype = CUDNN_DATA_FLOAT;
    s.nb = p->nsp + 2;
    int64_t xd[5] = {p->n, p->c}, wd[5] = {p->k, p->c}, yd[5] = {p->n, p->k};
    for (int i = 0; i < p->nsp; i++) {
        xd[2 + i] = p->in_sp[i];
        wd[2 + i] = p->f_sp[i];
        yd[2 + i] = p->out_sp[i];
        s.pad[i] = p->pad[i];
        s.stride[i] = p->stride[i];
        s.dil[i] = p->dil[i];
    }
    memcpy(s.xdim, xd, sizeof xd);
    memcpy(s.wdim, wd, sizeof wd);
    memcpy(s.ydim, yd, sizeof yd);
    packed(s.nb, s.xdim, s.xstr);
    packed(s.nb, s.wdim, s.wstr);
    packed(s.nb, s.ydim, s.ystr);
    s.mode = CUDNN_CROSS_CORRELATION;
    s.alpha = 1.0;
    s.beta = 0.0;
    s.engine = -1;
    s.heur_mode = CUDNN_HEUR_MODE_INSTANT;
    s.x = in->x;
    s.w = in->w;
    s.y = in->y;
    s.execute = 1;
    s.repeat = opti("repeat", 1);
    check("graph", gd_run(&s, r));
}

#ifdef FRAMEWORK_LIBRARY
__attribute__((visibility("default"))) int framework_main(int argc, char **argv)
#else
int main(int argc, char **argv)
#endif
{
    driver_init(argc, argv, "framework_driver");
    int probe[2] = {-1, -1};
    if (opti("probe_first", 0)) {
        cudnnBackendDescriptor_t d = NULL;
        probe[0] = (int)cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d);
        probe[1] = d ? (int)cudnnBackendDestroyDescriptor(d) : -1;
        check("probe", probe[0] || probe[1]);
    }
    cudnnHandle_t h = NULL;
    check("cudnnCreate", cudnnCreate(&h));
    conv_problem p;
    conv_setup(&p, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
    if (p.nhwc || p.groups != 1 || p.op == OP_BIAS_ACT) {
        fprintf(stderr, "framework_driver: NCHW, one group, fwd/bwd_data/bwd_filter only\n");
        return 2;
    }
    size_t out_elems = p.op == OP_BWD_DATA ? p.x_elems : p.op == OP_BWD_FILTER ? p.w_elems : p.y_elems;
    conv_buffers legacy = {alloc_filled(&p, p.x_elems, 1), alloc_filled(&p, p.w_elems, 2),
                           alloc_filled(&p, p.y_elems, 3), NULL, NULL};
    conv_buffers graph = {alloc_filled(&p, p.x_elems, 1), alloc_filled(&p, p.w_elems, 2),
                          alloc_filled(&p, p.y_elems, 3), NULL, NULL};
    void **legacy_out = p.op == OP_BWD_DATA ? &legacy.x : p.op == OP_BWD_FILTER ? &legacy.w : &legacy.y;
    void **graph_out = p.op == OP_BWD_DATA ? &graph.x : p.op == OP_BWD_FILTER ? &graph.w : &graph.y;
    conv_choice ch;
    run_legacy(h, &p, &ch, &legacy, *legacy_out, out_elems * p.esz);
    gd_result gr;
    run_graph(&p, &graph, &gr);
    const char *out = opt("out", NULL);
    if (out) {
        char path[1024];
        snprintf(path, sizeof path, "%s.legacy", out);
        write_file(path, *legacy_out, out_elems * p.esz);
        snprintf(path, sizeof path, "%s.graph", out);
        write_file(path, *graph_out, out_elems * p.esz);
    }
    /* The dlopened library's own count, when it is a dispatcher that dlsyms in a sub-library (the stand-in). */
    int (*library_foreign)(void) = (int (*)(void))dlsym(cudnn_dlopen_handle(), "cudnn_dlopen_foreign_lookups");
    report_begin(&ch);
    printf(",\"probe\":[%d,%d],\"graph\":{\"status\":%d,\"stage\":%d,\"engine\":%lld,\"workspace\":%lld},"
           "\"foreign_lookups\":%d,\"library_foreign_lookups\":%d",
           probe[0], probe[1], gr.status, gr.stage, (long long)gr.engine, (long long)gr.workspace,
           cudnn_dlopen_foreign_lookups(), library_foreign ? library_foreign() : -1);
    int rc = report_end(1);
    fflush(stdout);
    cudnnDestroy(h);
    return rc;
}
