/*
 * The graph-API hooks (cudnnBackend*): record the graph as the framework builds it, by value (uc_graph_rec.c),
 * resolve a plan's graph at its Finalize (uc_graph_resolve.c) and keep it, referenced, until the plan is
 * destroyed; Execute looks it up by hash.
 *
 * Every call goes to the real library first and its status is returned unchanged; the shim records what it
 * saw. Two answers change when the shim takes a plan over (uc_graph_split.c): its workspace size, and its
 * execution, which runs the shim's plans instead. Everything else passes through.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"

/* The resolved graphs of live plans (and of engine configurations whose workspace was asked), by descriptor. */
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
static uc_gmap plans;

/* A kept graph freed with its decision (the parts and check uc_graph_split.c made). */
static void free_graph(uc_ggraph *g)
{
    if (!g)
        return;
    uc_gsplit_free(g);
    uc_graph_free(g);
}

/* The graph of a plan, referenced (release with unref_graph), or NULL. */
static uc_ggraph *ref_graph(void *desc)
{
    pthread_mutex_lock(&plans_lock);
    uc_ggraph *g = (uc_ggraph *)uc_gmap_find(&plans, desc);
    if (g)
        g->refs++;
    pthread_mutex_unlock(&plans_lock);
    return g;
}

static void unref_graph(uc_ggraph *g)
{
    pthread_mutex_lock(&plans_lock);
    int last = --g->refs == 0 && g->dead;
    pthread_mutex_unlock(&plans_lock);
    if (last)
        free_graph(g);
}

static void forget_plan(void *desc)
{
    pthread_mutex_lock(&plans_lock);
    uc_ggraph *dead = (uc_ggraph *)uc_gmap_take(&plans, desc);
    if (dead) {
        dead->dead = 1;
        if (dead->refs)
            dead = NULL; /* an execution still holds it: freed at its release */
    }
    pthread_mutex_unlock(&plans_lock);
    free_graph(dead);
}

/* Keep a resolved graph under its descriptor (a re-finalized plan replaces its old one). Graphs that pass
 * through are not kept: their calls need nothing of the shim. */
static void keep_graph(uc_ggraph *g)
{
    forget_plan(g->plan);
    if (g->why_not) {
        free_graph(g);
        return;
    }
    pthread_mutex_lock(&plans_lock);
    int kept = uc_gmap_put(&plans, &g->e) == 0;
    pthread_mutex_unlock(&plans_lock);
    if (!kept)
        free_graph(g);
}

/* ---- the hooks ---- */

cudnnStatus_t uc_hook_cudnnBackendCreateDescriptor(int descriptorType, void **descriptor)
{
    uc_guard++;
    cudnnStatus_t st = uc_real()->cudnnBackendCreateDescriptor(descriptorType, descriptor);
    uc_guard--;
    if (st == 0 && descriptor)
        uc_grec_created(*descriptor, descriptorType);
    return st;
}

cudnnStatus_t uc_hook_cudnnBackendDestroyDescriptor(void *descriptor)
{
    /* Forget first: once destroyed, the address may be handed out again by another thread's Create. */
    uc_grec_destroyed(descriptor);
    forget_plan(descriptor);
    uc_goffer_forget(descriptor);
    uc_guard++;
    cudnnStatus_t st = uc_real()->cudnnBackendDestroyDescriptor(descriptor);
    uc_guard--;
    return st;
}

cudnnStatus_t uc_hook_cudnnBackendInitialize(void *descriptor)
{
    uc_guard++;
    cudnnStatus_t st = uc_real()->cudnnBackendInitialize(descriptor);
    uc_guard--;
    if (st == 0) {
        /* Reset in place: whatever the shim knew of it (its attributes, a plan's graph) is gone. */
        uc_grec_initialized(descriptor);
        forget_plan(descriptor);
        uc_goffer_forget(descriptor);
    }
    return st;
}

cudnnStatus_t uc_hook_cudnnBackendSetAttribute(void *descriptor, int attributeName, int attributeType,
                                               int64_t elementCount, const void *arrayOfElements)
{
    cudnnStatus_t knob_st;
    if (attributeName == UC_A_ENGINECFG_KNOB_CHOICES && attributeType == UC_AT_BACKEND_DESCRIPTOR &&
        uc_grec_type(descriptor) == UC_BK_ENGINECFG &&
        uc_goffer_set_knobs(descriptor, elementCount, (void *const *)arrayOfElements, &knob_st))
        return knob_st; /* a variant's engine and knobs, built again */
    uc_guard++;
    cudnnStatus_t st = uc_real()->cudnnBackendSetAttribute(descriptor, attributeName, attributeType, elementCount,
                                                           arrayOfElements);
    uc_guard--;
    if (st == 0)
        uc_grec_set(descriptor, attributeName, attributeType, elementCount, arrayOfElements);
    return st;
}

/* A plan's or an engine configuration's workspace: the micro-batched plan's, once one is built for it. */
static void answer_workspace(void *descriptor, int is_cfg, int64_t *value)
{
    uc_ggraph *g = ref_graph(descriptor);
    if (!g && is_cfg && (uc_cfg_exec_cap() != UC_UNLIMITED || uc_goffer_is_variant(descriptor))) {
        /* Asked before any plan exists (the v1 API filters configurations by it): resolve it now. */
        uc_ggraph *made = uc_graph_resolve(descriptor, 1);
        if (made)
            keep_graph(made);
        g = ref_graph(descriptor);
    }
    if (!g || g->is_cfg != is_cfg) {
        if (g)
            unref_graph(g);
        return;
    }
    int64_t ws = uc_gsplit_workspace(g);
    if (ws >= 0)
        *value = ws;
    unref_graph(g);
}

/* cuDNN filled caller-created descriptors in a GetAttribute: record what they now hold, by value. */
static void record_filled(void *descriptor, int name, int64_t n, void *const *filled)
{
    uc_gval *from = uc_grec_value(descriptor), *graph = NULL, *value = NULL;
    if (name == UC_A_ENGINEHEUR_RESULTS) /* each result holds the heuristics' graph */
        graph = uc_gval_desc(from, UC_A_ENGINEHEUR_OPERATION_GRAPH);
    else if (name == UC_A_PLAN_ENGINE_CONFIG) /* a copy of the plan's configuration */
        value = uc_gval_desc(from, UC_A_PLAN_ENGINE_CONFIG);
    for (int64_t i = 0; i < n; i++)
        if (filled[i]) {
            uc_grec_filled(filled[i], value, graph);
            forget_plan(filled[i]); /* a configuration whose workspace was asked holds something else now */
        }
    uc_gval_unref(from);
}

cudnnStatus_t uc_hook_cudnnBackendGetAttribute(void *const descriptor, int attributeName, int attributeType,
                                               int64_t requestedElementCount, int64_t *elementCount,
                                               void *arrayOfElements)
{
    int64_t variant_at = -1, variant_mark[2] = {0, 0};
    cudnnStatus_t st;
    if ((attributeName == UC_A_KNOB_CHOICE_KNOB_TYPE || attributeName == UC_A_KNOB_CHOICE_KNOB_VALUE) &&
        uc_goffer_knob_read(descriptor, attributeName, attributeType, requestedElementCount, elementCount,
                            arrayOfElements, &st))
        return st; /* the variant's own knob */
    if (attributeName == UC_A_ENGINEHEUR_RESULTS && attributeType == UC_AT_BACKEND_DESCRIPTOR) {
        /* Heuristics results: where the framework cannot allocate the first engines' workspace, a micro-batched
         * variant may be offered among them (uc_graph_offer.c). */
        st = uc_goffer_results(descriptor, requestedElementCount, elementCount, arrayOfElements, &variant_at,
                               variant_mark);
    } else {
        uc_guard++;
        st = uc_real()->cudnnBackendGetAttribute(descriptor, attributeName, attributeType, requestedElementCount,
                                                 elementCount, arrayOfElements);
        uc_guard--;
    }
    int knobs = st == 0 && attributeName == UC_A_ENGINECFG_KNOB_CHOICES && attributeType == UC_AT_BACKEND_DESCRIPTOR;
    if (knobs && (!arrayOfElements || requestedElementCount < 1))
        uc_goffer_knobs(descriptor, requestedElementCount, elementCount, NULL); /* a count query */
    if (st != 0 || !arrayOfElements || requestedElementCount < 1)
        return st;
    /* cudnn_frontend reads a plan's workspace with a NULL count pointer. */
    int one = !elementCount || *elementCount == 1;
    if ((attributeName == UC_A_PLAN_WORKSPACE_SIZE || attributeName == UC_A_ENGINECFG_WORKSPACE_SIZE) &&
        attributeType == UC_AT_INT64 && one)
        answer_workspace(descriptor, attributeName == UC_A_ENGINECFG_WORKSPACE_SIZE, (int64_t *)arrayOfElements);
    if (attributeType == UC_AT_BACKEND_DESCRIPTOR) {
        int64_t n = elementCount ? *elementCount : 1;
        record_filled(descriptor, attributeName, n < requestedElementCount ? n : requestedElementCount,
                      (void *const *)arrayOfElements);
        if (variant_at >= 0) {
            uc_grec_mark(((void *const *)arrayOfElements)[variant_at], UC_GLINK_VARIANT, variant_mark, 2);
            UC_COUNT(graph_offers, 1);
        }
        if (knobs) /* after record_filled: what cuDNN filled is recorded, the variant's knob then marked */
            uc_goffer_knobs(descriptor, requestedElementCount, elementCount, (void *const *)arrayOfElements);
    }
    return st;
}

cudnnStatus_t uc_hook_cudnnBackendFinalize(void *descriptor)
{
    uc_guard++;
    cudnnStatus_t st = uc_real()->cudnnBackendFinalize(descriptor);
    uc_guard--;
    if (st != 0)
        return st;
    uc_grec_finalized(descriptor);
    if (uc_grec_type(descriptor) != UC_BK_EXECUTION_PLAN)
        return st;
    UC_COUNT(graph_plans, 1);
    uc_ggraph *g = uc_graph_resolve(descriptor, 0);
    if (!g)
        return st;
    if (g->why_not) {
        uc_log(UC_LOG_DEBUG, "graph plan %p passes through: %s", descriptor, g->why_not);
    } else {
        UC_COUNT(graph_conv_plans, 1);
        uc_log(UC_LOG_DEBUG, "graph plan %p: a convolution graph at N=%" PRId64 " (%s)", descriptor, g->n, g->key);
    }
    keep_graph(g);
    return st;
}

cudnnStatus_t uc_hook_cudnnBackendExecute(cudnnHandle_t handle, void *executionPlan, void *variantPack)
{
    UC_COUNT(graph_executes, 1);
    uc_ggraph *g = ref_graph(executionPlan);
    if (g) {
        cudnnStatus_t status = 0;
        int ran = !g->is_cfg && uc_gexec_run(g, handle, variantPack, &status);
        unref_graph(g);
        if (ran)
            return status;
    }
    uc_guard++;
    cudnnStatus_t st = uc_real()->cudnnBackendExecute(handle, executionPlan, variantPack);
    uc_guard--;
    return st;
}

/* ---- for the test-only exports (ucudnn_debug.h) ---- */

char *uc_graph_debug_json(void *plan)
{
    uc_sb sb = {0};
    pthread_mutex_lock(&plans_lock);
    uc_ggraph *g = (uc_ggraph *)uc_gmap_find(&plans, plan);
    if (!g) {
        uc_sb_printf(&sb, "{}");
    } else {
        uc_sb_printf(&sb, "{\"convolution\":%s,\"why_not\":", g->why_not ? "false" : "true");
        if (g->why_not)
            uc_sb_json_string(&sb, g->why_not);
        else
            uc_sb_printf(&sb, "null");
        uc_sb_printf(&sb, ",\"n\":%" PRId64 ",\"engine\":%" PRId64 ",\"notes\":%" PRId64 ",\"ops\":%d,\"tensors\":%d,"
                     "\"key\":", g->n, g->engine, g->notes, g->nops, g->ntensors);
        if (g->key)
            uc_sb_json_string(&sb, g->key);
        else
            uc_sb_printf(&sb, "null");
        pthread_mutex_lock(&g->lock);
        const uc_gparts *parts[2] = {&g->main, &g->alt};
        for (int k = 0; k < 2; k++) {
            uc_sb_printf(&sb, ",\"%s\":[", k ? "alternative" : "parts");
            /* runs of equal parts: {"batch", "engine", "count"} */
            for (int i = 0, first = 1; g->decided == 1 && i < parts[k]->nparts; first = 0) {
                int j = i;
                while (j < parts[k]->nparts && parts[k]->size[j] == parts[k]->size[i] &&
                       parts[k]->engine[j] == parts[k]->engine[i])
                    j++;
                uc_sb_printf(&sb, "%s{\"batch\":%" PRId64 ",\"engine\":%" PRId64 ",\"count\":%d}", first ? "" : ",",
                             parts[k]->size[i], parts[k]->engine[i], j - i);
                i = j;
            }
            uc_sb_printf(&sb, "]");
        }
        uc_sb_printf(&sb, ",\"decided\":%d,\"source\":", g->decided);
        if (g->source)
            uc_sb_json_string(&sb, g->source);
        else
            uc_sb_printf(&sb, "null");
        uc_sb_printf(&sb, ",\"runs\":\"%s\",\"checking\":%s,\"workspace\":%" PRId64 ",\"full_workspace\":%" PRId64,
                     g->decided != 1 ? "caller" : g->use_alt ? "alternative" : "plan", g->trial_on ? "true" : "false",
                     g->decided == 1 ? g->workspace : g->full_workspace, g->full_workspace);
        pthread_mutex_unlock(&g->lock);
        uc_sb_printf(&sb, "}");
    }
    pthread_mutex_unlock(&plans_lock);
    return uc_sb_take(&sb);
}
