/*
 * Host backend graph API: the objects the descriptors share -- the finalized operation graph and the engines
 * resolved on it, reference counted (engines, configurations and plans hold the graph), and clearing what a
 * descriptor holds. Below the descriptor files (hb_graph_desc.c, hb_graph_build.c, hb_graph_exec.c) and the
 * exported calls (hb_graph_api.c), which all release what a descriptor held through hb_bd_clear.
 */
#include <stdlib.h>
#include <string.h>

#include "hb_graph.h"

hb_graph *hb_graph_ref(hb_graph *g) {
    if (g) __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
    return g;
}

void hb_graph_unref(hb_graph *g) {
    if (g && __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) == 0) free(g);
}

void hb_engine_copy(hb_gengine *dst, const hb_gengine *src) {
    *dst = *src;
    hb_graph_ref(dst->g);
}

void hb_engine_unref(hb_gengine *e) {
    hb_graph_unref(e->g);
    memset(e, 0, sizeof *e);
}

void hb_bd_clear(hb_bd *d) {
    switch (d->type) {
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
        free(d->u.graph.ops);
        hb_graph_unref(d->u.graph.g);
        break;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: hb_graph_unref(d->u.heur.g); break;
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
        hb_graph_unref(d->u.engine.g);
        hb_engine_unref(&d->u.engine.e);
        break;
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: hb_engine_unref(&d->u.cfg.e); break;
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: hb_engine_unref(&d->u.plan.e); break;
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
        free(d->u.vp.uids);
        free(d->u.vp.ptrs);
        break;
    default: break;
    }
    memset(&d->u, 0, sizeof d->u);
    d->finalized = 0;
    if (d->type == CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR) d->u.vp.nuids = d->u.vp.nptrs = -1;
}
