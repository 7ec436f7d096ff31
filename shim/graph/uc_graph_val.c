/*
 * Descriptor values (uc_gval) and the pointer-keyed hash table the graph path keeps them in.
 *
 * cuDNN copies a descriptor by value when it is set on another: an operation keeps its tensors and convolution as
 * they were when set, an engine its graph, a plan its engine configuration, whatever the caller does with the
 * originals afterwards (cudnn_frontend destroys them right away, and the allocator hands their addresses out
 * again). The shim keeps the same: each recorded descriptor has a value; setting it on another takes a counted
 * reference to that value, which is never modified again (the record copies it before its next change). So a
 * plan's graph is resolved from values alone, never from addresses that may name something else by then.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"

size_t uc_gattr_elem_size(int type)
{
    switch (type) {
    case UC_AT_HANDLE:
    case UC_AT_VOID_PTR:
    case UC_AT_BACKEND_DESCRIPTOR:
        return sizeof(void *);
    case UC_AT_INT64:
    case UC_AT_DOUBLE:
        return 8;
    case UC_AT_BOOLEAN:
    case UC_AT_CHAR:
        return 1;
    case UC_AT_DATA_TYPE:
    case UC_AT_FLOAT:
    case UC_AT_CONVOLUTION_MODE:
    case UC_AT_HEUR_MODE:
    case UC_AT_KNOB_TYPE:
    case UC_AT_NAN_PROPOGATION:
    case UC_AT_NUMERICAL_NOTE:
    case UC_AT_POINTWISE_MODE:
    case UC_AT_INT32:
        return 4;
    default:
        return 0;
    }
}

uc_gval *uc_gval_ref(uc_gval *v)
{
    if (v)
        atomic_fetch_add_explicit((_Atomic int *)&v->refs, 1, memory_order_relaxed);
    return v;
}

void uc_gattr_free(uc_gattr *a)
{
    if (a->type == UC_AT_BACKEND_DESCRIPTOR && a->data)
        for (int64_t e = 0; e < a->count; e++) {
            uc_gval *child;
            memcpy(&child, a->data + e * (int64_t)sizeof child, sizeof child);
            uc_gval_unref(child);
        }
    free(a->data);
    a->data = NULL;
}

void uc_gval_unref(uc_gval *v)
{
    /* Values form a DAG a few levels deep (plan, configuration, engine, graph, operations, tensors). */
    if (!v || atomic_fetch_sub_explicit((_Atomic int *)&v->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (int i = 0; i < v->nattr; i++)
        uc_gattr_free(&v->attr[i]);
    free(v);
}

uc_gval *uc_gval_clone(const uc_gval *v)
{
    uc_gval *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    *c = *v;
    c->refs = 1;
    for (int i = 0; i < v->nattr; i++) {
        uc_gattr *a = &c->attr[i];
        a->data = NULL;
        if (!a->bytes)
            continue;
        a->data = malloc(a->bytes);
        if (!a->data) {
            c->nattr = i;
            uc_gval_unref(c);
            return NULL;
        }
        memcpy(a->data, v->attr[i].data, a->bytes);
        if (a->type == UC_AT_BACKEND_DESCRIPTOR)
            for (int64_t e = 0; e < a->count; e++) {
                uc_gval *child;
                memcpy(&child, a->data + e * (int64_t)sizeof child, sizeof child);
                uc_gval_ref(child);
            }
    }
    return c;
}

const uc_gattr *uc_gval_attr(const uc_gval *v, int name)
{
    for (int i = 0; v && i < v->nattr; i++)
        if (v->attr[i].name == name)
            return &v->attr[i];
    return NULL;
}

uc_gval *uc_gval_desc(const uc_gval *v, int name)
{
    const uc_gattr *a = uc_gval_attr(v, name);
    uc_gval *out = NULL;
    if (a && a->type == UC_AT_BACKEND_DESCRIPTOR && a->count == 1)
        memcpy(&out, a->data, sizeof out);
    return out;
}

int uc_gval_int64s(const uc_gval *v, int name, int64_t *out, int cap)
{
    const uc_gattr *a = uc_gval_attr(v, name);
    if (!a || a->type != UC_AT_INT64 || a->count < 0 || a->count > cap)
        return -1;
    if (a->bytes)
        memcpy(out, a->data, a->bytes);
    return (int)a->count;
}

int uc_gval_enum(const uc_gval *v, int name, int type, int32_t *out)
{
    const uc_gattr *a = uc_gval_attr(v, name);
    if (!a || a->type != type || a->count != 1 || a->bytes != sizeof *out)
        return -1;
    memcpy(out, a->data, sizeof *out);
    return 0;
}

/* ---- the hash table ---- */

static size_t slot(const void *key, size_t nb)
{
    uint64_t h = (uint64_t)(uintptr_t)key;
    h ^= h >> 29;
    h *= 0x9E3779B97F4A7C15ULL;
    h ^= h >> 32;
    return (size_t)(h & (nb - 1)); /* nb is a power of two */
}

uc_gmap_ent *uc_gmap_find(const uc_gmap *m, const void *key)
{
    if (!m->nb)
        return NULL;
    for (uc_gmap_ent *e = m->b[slot(key, m->nb)]; e; e = e->next)
        if (e->key == key)
            return e;
    return NULL;
}

/* Double the buckets when entries outnumber them; a failed allocation keeps the table as it is (chains grow,
 * lookups stay correct). */
static void grow(uc_gmap *m)
{
    size_t nb = m->nb ? m->nb * 2 : 256;
    uc_gmap_ent **b = calloc(nb, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < m->nb; i++)
        for (uc_gmap_ent *e = m->b[i], *next; e; e = next) {
            next = e->next;
            size_t s = slot(e->key, nb);
            e->next = b[s];
            b[s] = e;
        }
    free(m->b);
    m->b = b;
    m->nb = nb;
}

int uc_gmap_put(uc_gmap *m, uc_gmap_ent *e)
{
    if (m->n >= m->nb)
        grow(m);
    if (!m->nb)
        return -1;
    size_t s = slot(e->key, m->nb);
    e->next = m->b[s];
    m->b[s] = e;
    m->n++;
    return 0;
}

uc_gmap_ent *uc_gmap_take(uc_gmap *m, const void *key)
{
    if (!m->nb)
        return NULL;
    for (uc_gmap_ent **pp = &m->b[slot(key, m->nb)]; *pp; pp = &(*pp)->next)
        if ((*pp)->key == key) {
            uc_gmap_ent *e = *pp;
            *pp = e->next;
            m->n--;
            return e;
        }
    return NULL;
}
