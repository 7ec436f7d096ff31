/*
 * The record of backend descriptors as the framework builds them.
 *
 * A finalized execution plan cannot be read back into its graph (the operation graph refuses its operations;
 * variant packs refuse their uids and pointers), and cudnn_frontend destroys the descriptors it built once the
 * plan is finalized. So every Create/SetAttribute/Destroy passing through the shim is mirrored here: each live
 * descriptor's type and a copy of each attribute as last set. The record is bounded (attributes per descriptor,
 * bytes per attribute, descriptors in all): what does not fit makes the descriptor opaque, and a graph that
 * touches an opaque or unrecorded descriptor is passed through, never guessed. A record is dropped when its
 * descriptor is destroyed.
 *
 * One mutex guards the table: graph building is not a hot path (frameworks build a plan once per shape), and
 * a variant pack costs a handful of short critical sections per execution.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "uc_graph.h"
#include "uc_internal.h"

#define UC_GREC_BUCKETS 4096

typedef struct grec {
    struct grec *next;
    void *desc;
    int type, opaque, finalized, nattr;
    void *linked_graph;
    uc_gattr attr[UC_GREC_MAX_ATTRS];
} grec;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static grec *buckets[UC_GREC_BUCKETS];
static size_t records;

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
    case UC_AT_NUMERICAL_NOTE:
    case UC_AT_POINTWISE_MODE:
    case UC_AT_INT32:
        return 4;
    default:
        return 0;
    }
}

static size_t bucket_of(const void *desc)
{
    uintptr_t h = (uintptr_t)desc;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 40) % UC_GREC_BUCKETS;
}

/* Under lock. */
static grec *find(const void *desc)
{
    for (grec *r = buckets[bucket_of(desc)]; r; r = r->next)
        if (r->desc == desc)
            return r;
    return NULL;
}

static void free_record(grec *r)
{
    for (int i = 0; i < r->nattr; i++)
        free(r->attr[i].data);
    free(r);
}

/* Under lock: unlink and free the record of desc, if any. */
static void drop(const void *desc)
{
    grec **pp = &buckets[bucket_of(desc)];
    while (*pp && (*pp)->desc != desc)
        pp = &(*pp)->next;
    if (!*pp)
        return;
    grec *r = *pp;
    *pp = r->next;
    records--;
    free_record(r);
}

void uc_grec_created(void *desc, int type)
{
    if (!desc)
        return;
    pthread_mutex_lock(&lock);
    drop(desc); /* an address reused after a destroy we did not see */
    grec *r = records < UC_GREC_MAX_RECORDS ? calloc(1, sizeof *r) : NULL;
    if (r) {
        r->desc = desc;
        r->type = type;
        size_t b = bucket_of(desc);
        r->next = buckets[b];
        buckets[b] = r;
        records++;
    } else {
        UC_COUNT(graph_unrecorded, 1);
    }
    pthread_mutex_unlock(&lock);
}

void uc_grec_destroyed(void *desc)
{
    pthread_mutex_lock(&lock);
    drop(desc);
    pthread_mutex_unlock(&lock);
}

void uc_grec_set(void *desc, int name, int type, int64_t count, const void *elems)
{
    size_t esz = uc_gattr_elem_size(type);
    size_t bytes = count > 0 && esz ? (size_t)count * esz : 0;
    int copyable = esz && count >= 0 && count <= UC_GREC_MAX_BYTES && bytes <= UC_GREC_MAX_BYTES &&
                   (count == 0 || elems);
    unsigned char *copy = NULL;
    if (copyable && bytes) {
        copy = malloc(bytes);
        if (copy)
            memcpy(copy, elems, bytes);
        else
            copyable = 0;
    }
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    if (r && !copyable)
        r->opaque = 1;
    if (r && copyable) {
        int i = 0;
        while (i < r->nattr && r->attr[i].name != name)
            i++;
        if (i == r->nattr && r->nattr == UC_GREC_MAX_ATTRS) {
            r->opaque = 1;
        } else {
            if (i == r->nattr)
                r->nattr++;
            else
                free(r->attr[i].data);
            r->attr[i] = (uc_gattr){name, type, count, (uint32_t)bytes, copy};
            copy = NULL;
        }
    }
    pthread_mutex_unlock(&lock);
    free(copy);
}

void uc_grec_finalized(void *desc)
{
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    if (r)
        r->finalized = 1;
    pthread_mutex_unlock(&lock);
}

void uc_grec_link_graph(void *desc, void *opgraph)
{
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    if (r)
        r->linked_graph = opgraph;
    pthread_mutex_unlock(&lock);
}

int uc_grec_type(void *desc, int *opaque, int *finalized)
{
    int type = -1;
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    if (r) {
        type = r->type;
        if (opaque)
            *opaque = r->opaque;
        if (finalized)
            *finalized = r->finalized;
    }
    pthread_mutex_unlock(&lock);
    return type;
}

int64_t uc_grec_get(void *desc, int name, int *type, void *buf, size_t cap)
{
    int64_t count = -1;
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    for (int i = 0; r && i < r->nattr; i++) {
        const uc_gattr *a = &r->attr[i];
        if (a->name != name)
            continue;
        if (type)
            *type = a->type;
        if (buf && a->bytes)
            memcpy(buf, a->data, a->bytes < cap ? a->bytes : cap);
        count = a->bytes <= cap ? a->count : (int64_t)(cap / uc_gattr_elem_size(a->type));
        break;
    }
    pthread_mutex_unlock(&lock);
    return count;
}

void *uc_grec_desc(void *desc, int name)
{
    void *out = NULL;
    int type = -1;
    return uc_grec_get(desc, name, &type, &out, sizeof out) == 1 && type == UC_AT_BACKEND_DESCRIPTOR ? out : NULL;
}

void *uc_grec_linked_graph(void *desc)
{
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    void *g = r ? r->linked_graph : NULL;
    pthread_mutex_unlock(&lock);
    return g;
}

size_t uc_grec_count(void)
{
    pthread_mutex_lock(&lock);
    size_t n = records;
    pthread_mutex_unlock(&lock);
    return n;
}

void uc_gnode_free(uc_gnode *n)
{
    for (int i = 0; i < n->nattr; i++)
        free(n->attr[i].data);
    n->nattr = 0;
}

int uc_grec_copy(void *desc, uc_gnode *out)
{
    memset(out, 0, sizeof *out);
    int ok = 0;
    pthread_mutex_lock(&lock);
    grec *r = find(desc);
    if (r && !r->opaque) {
        ok = 1;
        out->desc = desc;
        out->type = r->type;
        for (int i = 0; ok && i < r->nattr; i++) {
            uc_gattr a = r->attr[i];
            if (a.bytes) {
                unsigned char *copy = malloc(a.bytes);
                if (copy)
                    memcpy(copy, a.data, a.bytes);
                else
                    ok = 0;
                a.data = copy;
            }
            if (ok)
                out->attr[out->nattr++] = a;
        }
    }
    pthread_mutex_unlock(&lock);
    if (!ok)
        uc_gnode_free(out);
    return ok ? 0 : -1;
}
