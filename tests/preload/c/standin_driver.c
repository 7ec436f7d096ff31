/*
 * A stand-in libcuda.so.1 (soname) for the preload tests: the driver API as the preload library uses it on a GPU
 * (context, device, memory, events, synchronisation, stream capture) over host memory, so that under
 * UCUDNN_HOST_DRIVER=1 the paths the preload library takes on a GPU run on the host backend, and what they did to
 * the driver is recorded. Without that setting the preload library asks it only which device a thread works on
 * (its benchmarks' turns, its plans per device model) and keeps the host backend's clocks and memory.
 *
 *   devices  a thread's device is given at its first cuCtxGetDevice, in turn among STANDIN_DEVICES (1 by default);
 *            all have one name unless STANDIN_NAMES lists several models.
 *   memory   cuMemAlloc_v2 hands out 256-byte aligned host memory (the host backend computes on it) from a device
 *            of STANDIN_MEMORY bytes (unset: unlimited); cuMemGetInfo_v2 reports what is left.
 *   events   a recorded event takes the host backend's model clock (ucudnn_host_model_clock_ms, the library this
 *            one links against) under its timing model, else the monotonic clock: its calls are synchronous, so
 *            the work before the event has ended when it is recorded. cuEventQuery answers CUDA_ERROR_NOT_READY
 *            STANDIN_EVENT_LAG times for each recording (0 by default), as a GPU still running the work would,
 *            unless a cuCtxSynchronize came since or an event recorded after it completed (the work is in order);
 *            cuEventElapsedTime on an event not complete answers the same.
 *   capture  cuStreamIsCapturing says STANDIN_CAPTURING (1: active; 0 by default).
 *   context  cuCtxGetCurrent finds none for its first STANDIN_NO_CONTEXT asks (-1: never finds one; 0 by default).
 *   faults   STANDIN_FAIL=name:status[,name:status...] makes every call of those functions (cuMemAlloc_v2,
 *            cuEventCreate, cuEventRecord, cuEventQuery, cuEventElapsedTime, cuCtxSynchronize, cuStreamIsCapturing)
 *            fail with that status, doing nothing: a driver out of resources, or a context a fault has broken.
 *
 * At exit it writes what it saw as JSON to STANDIN_RECORD: allocations, frees, the bytes still held and the most
 * held at once, events created, destroyed and recorded, queries answered not-ready, elapsed times read (and those
 * asked before the events completed), synchronisations, capture queries, and misuses: a free of memory it did not
 * hand out, an event used after its destruction or never created.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CU_OK 0
#define CU_INVALID_VALUE 1
#define CU_OUT_OF_MEMORY 2
#define CU_INVALID_HANDLE 400
#define CU_NOT_READY 600

double ucudnn_host_model_clock_ms(void);
int ucudnn_host_timing_model(void);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    long allocs, frees, bad_frees, events_created, events_destroyed, records, not_ready, elapsed_reads,
        elapsed_early, syncs, capture_queries, bad_events;
    size_t held, peak;
} seen;
static unsigned long sync_generation, recordings, completed_through;

static long env_long(const char *name, long otherwise)
{
    const char *v = getenv(name);
    return v && *v ? atol(v) : otherwise;
}

/* The status STANDIN_FAIL gives function `fn`, else CU_OK. */
static int injected(const char *fn)
{
    const char *at = getenv("STANDIN_FAIL");
    size_t len = strlen(fn);
    while (at && *at) {
        if (strncmp(at, fn, len) == 0 && at[len] == ':')
            return atoi(at + len + 1);
        at = strchr(at, ',');
        at = at ? at + 1 : NULL;
    }
    return CU_OK;
}

/* ---- memory: a table of the blocks handed out ---- */

#define BLOCKS 4096
static struct {
    void *p;
    size_t bytes;
} blocks[BLOCKS];

int cuMemAlloc_v2(unsigned long long *out, size_t bytes)
{
    int fault = injected("cuMemAlloc_v2");
    if (fault != CU_OK)
        return fault;
    if (!out || !bytes)
        return CU_INVALID_VALUE;
    long limit = env_long("STANDIN_MEMORY", -1);
    size_t rounded = (bytes + 255) / 256 * 256;
    pthread_mutex_lock(&lock);
    int slot = 0;
    while (slot < BLOCKS && blocks[slot].p)
        slot++;
    void *p = NULL;
    if (slot < BLOCKS && (limit < 0 || seen.held + rounded <= (size_t)limit))
        p = aligned_alloc(256, rounded);
    if (p) {
        blocks[slot].p = p;
        blocks[slot].bytes = rounded;
        seen.allocs++;
        seen.held += rounded;
        seen.peak = seen.held > seen.peak ? seen.held : seen.peak;
    }
    pthread_mutex_unlock(&lock);
    if (!p)
        return CU_OUT_OF_MEMORY;
    *out = (unsigned long long)(uintptr_t)p;
    return CU_OK;
}

int cuMemFree_v2(unsigned long long dev)
{
    void *p = (void *)(uintptr_t)dev;
    pthread_mutex_lock(&lock);
    int slot = 0;
    while (slot < BLOCKS && (!p || blocks[slot].p != p))
        slot++;
    if (slot == BLOCKS) {
        seen.bad_frees++;
        pthread_mutex_unlock(&lock);
        return CU_INVALID_VALUE;
    }
    seen.frees++;
    seen.held -= blocks[slot].bytes;
    blocks[slot].p = NULL;
    pthread_mutex_unlock(&lock);
    free(p);
    return CU_OK;
}

int cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    if (!free_bytes || !total)
        return CU_INVALID_VALUE;
    long limit = env_long("STANDIN_MEMORY", -1);
    pthread_mutex_lock(&lock);
    *total = limit < 0 ? (size_t)1 << 40 : (size_t)limit;
    *free_bytes = *total > seen.held ? *total - seen.held : 0;
    pthread_mutex_unlock(&lock);
    return CU_OK;
}

/* ---- events ---- */

#define LIVE 0x6576656eu /* "even" */
#define DEAD 0x64656164u /* "dead" */
typedef struct {
    unsigned magic;
    int recorded;
    long lag; /* not-ready answers left for this recording */
    unsigned long generation, order; /* the synchronisations before its recording; its recording's number */
    double ms;
} event;

static double now_ms(void)
{
    if (ucudnn_host_timing_model())
        return ucudnn_host_model_clock_ms();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The event, if live (counted as a misuse otherwise); called under the lock. Destroyed events are kept as DEAD,
 * never freed, so that a use after destruction is seen. */
static event *live(void *e)
{
    event *ev = e;
    if (!ev || ev->magic != LIVE) {
        seen.bad_events++;
        return NULL;
    }
    return ev;
}

static int complete(event *ev)
{
    if (!ev->recorded)
        return 0;
    int done = ev->lag <= 0 || sync_generation != ev->generation || ev->order <= completed_through;
    if (done && ev->order > completed_through)
        completed_through = ev->order;
    return done;
}

int cuEventCreate(void **out, unsigned flags)
{
    int fault = injected("cuEventCreate");
    if (fault != CU_OK)
        return fault;
    (void)flags;
    event *ev = calloc(1, sizeof *ev);
    if (!out || !ev) {
        free(ev);
        return CU_INVALID_VALUE;
    }
    ev->magic = LIVE;
    pthread_mutex_lock(&lock);
    seen.events_created++;
    pthread_mutex_unlock(&lock);
    *out = ev;
    return CU_OK;
}

int cuEventRecord(void *e, void *stream)
{
    int fault = injected("cuEventRecord");
    if (fault != CU_OK)
        return fault;
    (void)stream;
    double t = now_ms();
    pthread_mutex_lock(&lock);
    event *ev = live(e);
    if (ev) {
        ev->recorded = 1;
        ev->ms = t;
        ev->lag = env_long("STANDIN_EVENT_LAG", 0);
        ev->generation = sync_generation;
        ev->order = ++recordings;
        seen.records++;
    }
    pthread_mutex_unlock(&lock);
    return ev ? CU_OK : CU_INVALID_HANDLE;
}

int cuEventQuery(void *e)
{
    int fault = injected("cuEventQuery");
    if (fault != CU_OK)
        return fault;
    pthread_mutex_lock(&lock);
    event *ev = live(e);
    int st = !ev ? CU_INVALID_HANDLE : complete(ev) ? CU_OK : CU_NOT_READY;
    if (st == CU_NOT_READY) {
        ev->lag--;
        seen.not_ready++;
    }
    pthread_mutex_unlock(&lock);
    return st;
}

int cuEventElapsedTime(float *ms, void *start, void *end)
{
    int fault = injected("cuEventElapsedTime");
    if (fault != CU_OK)
        return fault;
    pthread_mutex_lock(&lock);
    event *a = live(start), *b = live(end);
    int st = !ms || !a || !b ? CU_INVALID_HANDLE : complete(b) && complete(a) ? CU_OK : CU_NOT_READY;
    if (st == CU_OK) {
        *ms = (float)(b->ms - a->ms);
        seen.elapsed_reads++;
    } else if (st == CU_NOT_READY) {
        seen.elapsed_early++;
    }
    pthread_mutex_unlock(&lock);
    return st;
}

int cuEventDestroy_v2(void *e)
{
    pthread_mutex_lock(&lock);
    event *ev = live(e);
    if (ev) {
        ev->magic = DEAD;
        seen.events_destroyed++;
    }
    pthread_mutex_unlock(&lock);
    return ev ? CU_OK : CU_INVALID_HANDLE;
}

/* ---- context, device, synchronisation, capture ---- */

static int context; /* its address is the one context */

/* STANDIN_NO_CONTEXT=n: the first n asks find no current context (-1: every ask), as in a thread that has not
 * yet made a CUDA call. */
static atomic_long context_asks;

int cuCtxGetCurrent(void **ctx)
{
    if (!ctx)
        return CU_INVALID_VALUE;
    long none = env_long("STANDIN_NO_CONTEXT", 0);
    *ctx = none < 0 || atomic_fetch_add(&context_asks, 1) < none ? NULL : &context;
    return CU_OK;
}

/* Each thread's current device, given at its first cuCtxGetDevice: 0, 1, 2, ... in the order threads ask, modulo
 * STANDIN_DEVICES (1 by default), as a process that drives several GPUs runs one thread per device. */
static atomic_int next_device;
static __thread int device = -1;

int cuCtxGetDevice(int *dev)
{
    if (!dev)
        return CU_INVALID_VALUE;
    if (device < 0) {
        long n = env_long("STANDIN_DEVICES", 1);
        device = atomic_fetch_add(&next_device, 1) % (int)(n > 0 ? n : 1);
    }
    *dev = device;
    return CU_OK;
}

/* Every device has one name, as identical GPUs do, unless STANDIN_NAMES names several models (comma-separated:
 * device d is the (d mod count)th). */
int cuDeviceGetName(char *name, int len, int dev)
{
    if (!name || len <= 0 || dev < 0)
        return CU_INVALID_VALUE;
    const char *names = getenv("STANDIN_NAMES");
    if (!names || !*names) {
        snprintf(name, (size_t)len, "stand-in GPU");
        return CU_OK;
    }
    int count = 1;
    for (const char *c = names; *c; c++)
        count += *c == ',';
    const char *at = names;
    for (int i = dev % count; i > 0; i--)
        at = strchr(at, ',') + 1;
    const char *end = strchr(at, ',');
    snprintf(name, (size_t)len, "%.*s", end ? (int)(end - at) : (int)strlen(at), at);
    return CU_OK;
}

int cuCtxSynchronize(void)
{
    int fault = injected("cuCtxSynchronize");
    if (fault != CU_OK)
        return fault;
    pthread_mutex_lock(&lock);
    sync_generation++;
    seen.syncs++;
    pthread_mutex_unlock(&lock);
    return CU_OK;
}

int cuStreamIsCapturing(void *stream, int *status)
{
    int fault = injected("cuStreamIsCapturing");
    if (fault != CU_OK)
        return fault;
    (void)stream;
    if (!status)
        return CU_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    seen.capture_queries++;
    pthread_mutex_unlock(&lock);
    *status = env_long("STANDIN_CAPTURING", 0) ? 1 : 0; /* CU_STREAM_CAPTURE_STATUS_ACTIVE : _NONE */
    return CU_OK;
}

__attribute__((destructor)) static void write_record(void)
{
    const char *path = getenv("STANDIN_RECORD");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f)
        return;
    pthread_mutex_lock(&lock);
    fprintf(f,
            "{\"allocs\": %ld, \"frees\": %ld, \"bad_frees\": %ld, \"held\": %zu, \"peak\": %zu, "
            "\"events_created\": %ld, \"events_destroyed\": %ld, \"records\": %ld, \"not_ready\": %ld, "
            "\"elapsed_reads\": %ld, \"elapsed_early\": %ld, \"syncs\": %ld, \"capture_queries\": %ld, "
            "\"bad_events\": %ld}\n",
            seen.allocs, seen.frees, seen.bad_frees, seen.held, seen.peak, seen.events_created,
            seen.events_destroyed, seen.records, seen.not_ready, seen.elapsed_reads, seen.elapsed_early, seen.syncs,
            seen.capture_queries, seen.bad_events);
    pthread_mutex_unlock(&lock);
    fclose(f);
}
