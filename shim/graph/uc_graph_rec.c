/*
 * The record of live backend descriptors, by address, each with its current value (uc_graph_val.c).
 *
 * A finalized execution plan cannot be read back into its graph (the operation graph refuses its operations;
 * variant packs refuse their uids and pointers), and cudnn_frontend destroys the descriptors it built long before
 * the plan runs. So every Create/SetAttribute/Initialize/Finalize/Destroy passing through the shim is mirrored
 * here. A descriptor set on another is taken BY VALUE, as cuDNN takes it: the attribute holds a counted
 * reference to the value the named descriptor had at that moment, never its address. Destroying a descriptor
 * drops its record only; the values other descriptors hold live on, and an address handed out again starts a
 * fresh record. What the shim cannot copy makes a descriptor opaque, and a graph that touches an opaque or
 * unrecorded descriptor is passed through, never guessed.
 *
 * Bounded: attributes per descriptor, bytes per attribute, and UC_GREC_MAX_RECORDS descriptors besides variant
 * packs (past it, new descriptors are not recorded and their graphs pass through, counted). Variant packs are
 * always recorded: a plan the shim took over runs on its pack's uids and pointers, which cuDNN does not give back.
 *
 * One mutex guards the table; lookups are by hash (uc_gmap). Values are immutable once shared, so they are read
 * without the lock by whoever holds a reference.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"

typedef struct {
    uc_gmap_ent e; /* key: the descriptor's address */
    uc_gval *v;    /* refs == 1: the record's own, changed in place; more: shared, copied before a change */
} grec;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uc_gmap table;
static size_t records, packs;

static grec *find(const void *desc)
{
    return (grec *)uc_gmap_find(&table, desc);
}

/* Under lock: unlink and free the record of desc, if any. */
static void drop(const void *desc)
{
    grec *r = (grec *)uc_gmap_take(&table, desc);
    if (!r)
        return;
    if (r->v->type == UC_BK_VARIANT_PACK)
        packs--;
    else
        records--;
    uc_gval_unref(r->v);
    free(r);
}

/* Under lock: the record's value, made its own to change (copied if shared); NULL when memory is short, and then
 * the record is gone (the descriptor counts as unrecorded: its graphs pass through). */
static uc_gval *own(grec *r)
{
    if (atomic_load_explicit((_Atomic int *)&r->v->refs, memory_order_acquire) == 1)
        return r->v;
    uc_gval *c = uc_gval_clone(r->v);
    if (!c) {
        UC_COUNT(graph_unrecorded, 1);
        drop(r->e.key);
        return NULL;
    }
    uc_gval_unref(r->v);
    r->v = c;
    return c;
}

void uc_grec_created(void *desc, int type)
{
    if (!desc)
        return;
    grec *r = calloc(1, sizeof *r);
    uc_gval *v = r ? calloc(1, sizeof *v) : NULL;
    int kept = 0;
    pthread_mutex_lock(&lock);
    drop(desc); /* an address reused after a destroy we did not see */
    int pack = type == UC_BK_VARIANT_PACK;
    if (v && (pack || records < UC_GREC_MAX_RECORDS)) {
        v->refs = 1;
        v->type = type;
        r->v = v;
        r->e.key = desc;
        if (uc_gmap_put(&table, &r->e) == 0) {
            *(pack ? &packs : &records) += 1;
            kept = 1;
        }
    }
    pthread_mutex_unlock(&lock);
    if (!kept) { /* not recorded: the table is full, or memory is short */
        UC_COUNT(graph_unrecorded, 1);
        free(v);
        free(r);
    }
}

void uc_grec_destroyed(void *desc)
{
    pthread_mutex_lock(&lock);
    drop(desc);
    pthread_mutex_unlock(&lock);
}

void uc_grec_initialized(void *desc)
{
    uc_gval *fresh = calloc(1, sizeof *fresh), *old = NULL;
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    if (r && fresh) {
        fresh->refs = 1;
        fresh->type = r->v->type;
        old = r->v;
        r->v = fresh;
        fresh = NULL;
    } else if (r) {
        drop(desc); /* cannot reset it: forget it rather than keep what it no longer holds */
    }
    pthread_mutex_unlock(&lock);
    uc_gval_unref(old);
    free(fresh);
}

/* Under lock: descriptor elements as counted references to their current values (NULL: not recorded; a
 * descriptor named in its own attribute is not taken, which would make a value hold itself). */
static void take_values(const void *self, unsigned char *data, int64_t count)
{
    for (int64_t e = 0; e < count; e++) {
        void *d;
        memcpy(&d, data + e * (int64_t)sizeof d, sizeof d);
        grec *src = d && d != self ? find(d) : NULL;
        uc_gval *v = src ? uc_gval_ref(src->v) : NULL;
        memcpy(data + e * (int64_t)sizeof v, &v, sizeof v);
    }
}

/* Under lock: store attribute a (its data now owned by v) in v, or make v opaque when it has no room. */
static void store(uc_gval *v, uc_gattr *a)
{
    int i = 0;
    while (i < v->nattr && v->attr[i].name != a->name)
        i++;
    if (i == UC_GREC_MAX_ATTRS) {
        v->opaque = 1;
        uc_gattr_free(a);
        return;
    }
    if (i == v->nattr)
        v->nattr++;
    else
        uc_gattr_free(&v->attr[i]);
    v->attr[i] = *a;
}

void uc_grec_set(void *desc, int name, int type, int64_t count, const void *elems)
{
    size_t esz = uc_gattr_elem_size(type);
    size_t bytes = count > 0 && esz ? (size_t)count * esz : 0;
    int copyable = esz && count >= 0 && count <= UC_GREC_MAX_BYTES && bytes <= UC_GREC_MAX_BYTES &&
                   (count == 0 || elems);
    uc_gattr a = {name, type, count, (uint32_t)bytes, NULL};
    if (copyable && bytes) {
        a.data = malloc(bytes);
        if (a.data)
            memcpy(a.data, elems, bytes);
        else
            copyable = 0;
    }
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    uc_gval *v = r ? own(r) : NULL;
    if (v && copyable) {
        if (type == UC_AT_BACKEND_DESCRIPTOR)
            take_values(desc, a.data, count);
        store(v, &a);
        a.data = NULL;
    } else if (v) {
        v->opaque = 1;
    }
    pthread_mutex_unlock(&lock);
    free(a.data); /* raw bytes only: descriptor values were never taken for it */
}

void uc_grec_finalized(void *desc)
{
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    uc_gval *v = r ? own(r) : NULL;
    if (v)
        v->finalized = 1;
    pthread_mutex_unlock(&lock);
}

void uc_grec_filled(void *desc, uc_gval *value, uc_gval *graph)
{
    uc_gval *fresh = calloc(1, sizeof *fresh), *old = NULL;
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    if (r && value && value->type == r->v->type) {
        old = r->v;
        r->v = uc_gval_ref(value);
    } else if (r && fresh) {
        fresh->refs = 1;
        fresh->type = r->v->type;
        fresh->finalized = 1;
        fresh->opaque = !graph;
        if (graph) {
            uc_gattr link = {UC_GLINK_GRAPH, UC_AT_BACKEND_DESCRIPTOR, 1, sizeof graph, malloc(sizeof graph)};
            if (link.data) {
                uc_gval *ref = uc_gval_ref(graph);
                memcpy(link.data, &ref, sizeof ref);
                fresh->attr[fresh->nattr++] = link;
            } else {
                fresh->opaque = 1;
            }
        }
        old = r->v;
        r->v = fresh;
        fresh = NULL;
    } else if (r) {
        drop(desc);
    }
    pthread_mutex_unlock(&lock);
    uc_gval_unref(old);
    free(fresh);
}

void uc_grec_mark(void *desc, int name, const int64_t *values, int count)
{
    uc_gattr a = {name, UC_AT_INT64, count, (uint32_t)(count * sizeof *values), malloc(count * sizeof *values)};
    if (!a.data)
        return; /* unmarked: the configuration stays what cuDNN made it */
    memcpy(a.data, values, count * sizeof *values);
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    uc_gval *v = r ? own(r) : NULL;
    if (v) {
        store(v, &a);
        a.data = NULL;
    }
    pthread_mutex_unlock(&lock);
    free(a.data);
}

uc_gval *uc_grec_value(void *desc)
{
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    uc_gval *v = r ? uc_gval_ref(r->v) : NULL;
    pthread_mutex_unlock(&lock);
    return v;
}

int uc_grec_type(void *desc)
{
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    int type = r ? r->v->type : -1;
    pthread_mutex_unlock(&lock);
    return type;
}

int64_t uc_grec_pack(void *desc, int64_t *uids, void **ptrs, int cap, void **ws)
{
    int64_t n = -1;
    *ws = NULL;
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    const uc_gval *v = r ? r->v : NULL;
    if (v && v->type == UC_BK_VARIANT_PACK && !v->opaque) { /* cuDNN runs a pack never finalized */
        const uc_gattr *u = uc_gval_attr(v, UC_A_VARIANT_PACK_UNIQUE_IDS);
        const uc_gattr *p = uc_gval_attr(v, UC_A_VARIANT_PACK_DATA_POINTERS);
        const uc_gattr *w = uc_gval_attr(v, UC_A_VARIANT_PACK_WORKSPACE);
        int64_t nu = u ? u->count : 0, np = p ? p->count : 0;
        if (nu != np || (u && u->type != UC_AT_INT64) || (p && p->type != UC_AT_VOID_PTR))
            n = -2;
        else if (nu > cap)
            n = -3;
        else
            n = nu;
        if (n > 0) {
            memcpy(uids, u->data, u->bytes);
            memcpy(ptrs, p->data, p->bytes);
        }
        if (w && w->type == UC_AT_VOID_PTR && w->count == 1)
            memcpy(ws, w->data, sizeof *ws);
    }
    pthread_mutex_unlock(&lock);
    return n;
}

size_t uc_grec_count(void)
{
    pthread_mutex_lock(&lock);
    size_t n = records + packs;
    pthread_mutex_unlock(&lock);
    return n;
}
