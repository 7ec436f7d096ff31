/*
 * The graph-API hooks (cudnnBackend*): record the graph as the framework builds it (uc_graph_rec.c), resolve a
 * plan's graph at its Finalize (uc_graph_resolve.c) and keep it, referenced, until the plan is destroyed.
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
#include "uc_internal.h"

static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
static uc_ggraph *plans;

static void free_graph(uc_ggraph *g)
{
    if (!g)
        return;
    uc_gsplit_free(g);
    for (int i = 0; i < g->nnodes; i++)
        uc_gnode_free(&g->nodes[i]);
    free(g->nodes);
    free(g->key);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* The graph of a plan, referenced (release with unref_graph), or NULL. */
static uc_ggraph *ref_graph(void *plan)
{
    pthread_mutex_lock(&plans_lock);
    uc_ggraph *g = plans;
    while (g && g->plan != plan)
        g = g->next;
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

static void forget_plan(void *plan)
{
    uc_ggraph *dead = NULL;
    pthread_mutex_lock(&plans_lock);
    for (uc_ggraph **pp = &plans; *pp; pp = &(*pp)->next) {
        if ((*pp)->plan == plan) {
            dead = *pp;
            *pp = dead->next;
            dead->dead = 1;
            if (dead->refs)
                dead = NULL; /* an execution still holds it: freed at its release */
            break;
        }
    }
    pthread_mutex_unlock(&plans_lock);
    free_graph(dead);
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
    uc_guard++;
    cudnnStatus_t st = uc_real()->cudnnBackendDestroyDescriptor(descriptor);
    uc_guard--;
    return st;
}

cudnnStatus_t uc_hook_cudnnBackendSetAttribute(void *descriptor, int attributeName, int attributeType,
                                               int64_t elementCount, const void *arrayOfElements)
{
    uc_guard++;
    cudnnStatus_t st = uc_real()->cudnnBackendSetAttribute(descriptor, attributeName, attributeType, elementCount,
                                                           arrayOfElements);
    uc_guard--;
    if (st == 0)
        uc_grec_set(descriptor, attributeName, attributeType, elementCount, arrayOfElements);
    return st;
}

cudnnStatus_t uc_hook_cudnnBackendGetAttribute(void *const descriptor, int attributeName, int attributeType,
                                               int64_t requestedElementCount, int64_t *elementCount,
                                               void *arrayOfElements)
{
    uc_guard++;
    cudnnStatus_t st = uc_real()->cudnnBackendGetAttribute(descriptor, attributeName, attributeType,
                                                           requestedElementCount, elementCount, arrayOfElements);
    uc_guard--;
    /* A plan's workspace: the micro-batched plan's, once one is built for it. */
    if (st == 0 && attributeName == UC_A_PLAN_WORKSPACE_SIZE && attributeType == UC_AT_INT64 && arrayOfElements &&
        requestedElementCount >= 1 && elementCount && *elementCount == 1) {
        uc_ggraph *g = ref_graph(descriptor);
        if (g) {
            int64_t ws = uc_gsplit_workspace(g);
            if (ws >= 0)
                *(int64_t *)arrayOfElements = ws;
            unref_graph(g);
        }
    }
    /* Heuristics results: engine configurations cuDNN filled for the operation graph the heuristics named. */
    if (st == 0 && attributeName == UC_A_ENGINEHEUR_RESULTS && attributeType == UC_AT_BACKEND_DESCRIPTOR &&
        elementCount && arrayOfElements) {
        void *opgraph = uc_grec_desc(descriptor, UC_A_ENGINEHEUR_OPERATION_GRAPH);
        int64_t n = *elementCount < requestedElementCount ? *elementCount : requestedElementCount;
        for (int64_t i = 0; opgraph && i < n; i++)
            uc_grec_link_graph(((void **)arrayOfElements)[i], opgraph);
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
    if (uc_grec_type(descriptor, NULL, NULL) != UC_BK_EXECUTION_PLAN)
        return st;
    UC_COUNT(graph_plans, 1);
    uc_ggraph *g = uc_graph_resolve(descriptor);
    if (!g)
        return st;
    if (g->why_not) {
        uc_log(UC_LOG_DEBUG, "graph plan %p passes through: %s", descriptor, g->why_not);
    } else {
        UC_COUNT(graph_conv_plans, 1);
        uc_log(UC_LOG_DEBUG, "graph plan %p: a convolution graph at N=%" PRId64 " (%s)", descriptor, g->n, g->key);
    }
    forget_plan(descriptor); /* a re-finalized plan */
    pthread_mutex_lock(&plans_lock);
    g->next = plans;
    plans = g;
    pthread_mutex_unlock(&plans_lock);
    return st;
}

cudnnStatus_t uc_hook_cudnnBackendExecute(cudnnHandle_t handle, void *executionPlan, void *variantPack)
{
    UC_COUNT(graph_executes, 1);
    uc_ggraph *g = ref_graph(executionPlan);
    if (g) {
        cudnnStatus_t status = 0;
        int ran = uc_gsplit_execute(g, handle, variantPack, &status);
        unref_graph(g);
        if (ran)
            return status;
    }
    uc_guard++;
    cudnnStatus_t st = uc_real()->cudnnBackendExecute(handle, executionPlan, variantPack);
    uc_guard--;
    return st;
}

/* ---- test support ---- */

UC_EXPORT size_t ucudnn_debug_graph_json(void *plan, char *buf, size_t len)
{
    uc_sb sb = {0};
    pthread_mutex_lock(&plans_lock);
    uc_ggraph *g = plans;
    while (g && g->plan != plan)
        g = g->next;
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
    char *text = uc_sb_take(&sb);
    const char *s = text ? text : "{}";
    size_t need = strlen(s);
    if (buf && len) {
        size_t n = need < len - 1 ? need : len - 1;
        memcpy(buf, s, n);
        buf[n] = '\0';
    }
    free(text);
    return need;
}

UC_EXPORT size_t ucudnn_debug_graph_records(void)
{
    return uc_grec_count();
}
