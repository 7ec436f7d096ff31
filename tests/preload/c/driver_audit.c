/*
 * An auditing libcuda.so.1 (soname) in front of another driver: the stand-in (standin_driver.c) on the host, the
 * real driver on a GPU. It is linked against that driver under the name libucudnn-audited-driver.so (a link beside
 * it), so a dlopen("libcuda.so.1") anywhere in the process finds this library first, and a dlsym on its handle of
 * a name it does not define finds the driver's own: the framework and the CUDA runtime reach the driver as
 * before, unobserved. The thirteen functions the preload library binds (shim/core/uc_driver.c) are defined here:
 * each forwards to the driver's, and a call from the preload library (its return address in libucudnn.so) is
 * recorded. So the invariants the stand-in checks of the preload library's use of the driver can be asserted on
 * the real driver too:
 *
 *   failures  every call that did not succeed, by function and status (a cuEventQuery answering
 *             CUDA_ERROR_NOT_READY is not a failure): a use the driver rejects shows here even when the shim
 *             handles it (a check that cannot time keeps the undivided choice, silently slower);
 *   events    created, destroyed, used without having been created here (or after destruction), recorded on a
 *             stream being captured, read (cuEventElapsedTime) before a query or a synchronisation since their
 *             recording said they had completed;
 *   memory    allocations, frees, bytes still held, frees of memory not allocated here;
 *   syncs     cuCtxSynchronize calls.
 *
 * ucudnn_audit_mark() (exported) snapshots the allocations, synchronisations and records so far, so that a
 * program can show that its calls after planning (steady state) neither allocate nor synchronise. At exit the
 * record is written as JSON to AUDIT_RECORD by a process whose preload library called the driver.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CU_OK 0
#define CU_INVALID_HANDLE 400
#define CU_NOT_READY 600
#define AUDITED "libucudnn-audited-driver.so"

#define FUNCTIONS(X)                                                                                                \
    X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuDeviceGetName) X(cuCtxSynchronize) X(cuMemGetInfo_v2) X(cuMemAlloc_v2) \
        X(cuMemFree_v2) X(cuEventCreate) X(cuEventRecord) X(cuEventQuery) X(cuEventElapsedTime) X(cuEventDestroy_v2)  \
            X(cuStreamIsCapturing)
#define ENUM(name) F_##name,
enum { FUNCTIONS(ENUM) F_COUNT };
#define NAME(name) #name,
static const char *const names[F_COUNT] = {FUNCTIONS(NAME)};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long calls[F_COUNT], others;
static struct {
    long allocs, frees, bad_frees, events_created, events_destroyed, bad_events, records, records_in_capture,
        elapsed_reads, elapsed_early, syncs;
    size_t held;
} seen, at_mark;
static int marked;
#define FAILURES 64
static struct {
    int fn, status;
    long count;
} failures[FAILURES];

/* The driver's definition of function `fn`. */
static void *next(int fn)
{
    static void *table[F_COUNT];
    void *p = __atomic_load_n(&table[fn], __ATOMIC_ACQUIRE);
    if (!p) {
        void *driver = dlopen(AUDITED, RTLD_LAZY | RTLD_NOLOAD);
        p = driver ? dlsym(driver, names[fn]) : NULL;
        if (!p) {
            fprintf(stderr, "driver_audit: %s has no %s\n", AUDITED, names[fn]);
            abort();
        }
        __atomic_store_n(&table[fn], p, __ATOMIC_RELEASE);
    }
    return p;
}

/* 1 when the call returning to `ret` was made by the preload library. */
static int from_shim(void *ret)
{
    Dl_info info;
    if (!dladdr(ret, &info) || !info.dli_fname)
        return 0;
    const char *slash = strrchr(info.dli_fname, '/');
    return strcmp(slash ? slash + 1 : info.dli_fname, "libucudnn.so") == 0;
}

/* Count a call of the shim's and its status; called under the lock. */
static void note(int fn, int status)
{
    calls[fn]++;
    if (status == CU_OK || (fn == F_cuEventQuery && status == CU_NOT_READY))
        return;
    for (int i = 0; i < FAILURES; i++)
        if (!failures[i].count || (failures[i].fn == fn && failures[i].status == status)) {
            failures[i].fn = fn;
            failures[i].status = status;
            failures[i].count++;
            return;
        }
}

/* ---- the shim's events and allocations ---- */

#define LIVE 4096
static struct {
    void *event;
    int recorded, complete;
} events[LIVE];
static struct {
    unsigned long long p;
    size_t bytes;
} blocks[LIVE];

/* The slot of a live event of the shim's (a misuse, counted, when there is none); under the lock. */
static int event_slot(void *e)
{
    for (int i = 0; e && i < LIVE; i++)
        if (events[i].event == e)
            return i;
    seen.bad_events++;
    return -1;
}

/* ---- the audited functions: forward, and note the shim's calls ---- */

#define AUDIT(fn, call)                                                                                             \
    int st = call;                                                                                                  \
    if (!from_shim(__builtin_return_address(0))) {                                                                  \
        pthread_mutex_lock(&lock);                                                                                  \
        others++;                                                                                                   \
        pthread_mutex_unlock(&lock);                                                                                \
        return st;                                                                                                  \
    }                                                                                                               \
    pthread_mutex_lock(&lock);                                                                                      \
    note(F_##fn, st)
#define FORWARD(fn, ...) ((int (*)())next(F_##fn))(__VA_ARGS__)
#define DONE                                                                                                        \
    pthread_mutex_unlock(&lock);                                                                                    \
    return st

int cuCtxGetCurrent(void **ctx)
{
    AUDIT(cuCtxGetCurrent, FORWARD(cuCtxGetCurrent, ctx));
    DONE;
}

int cuCtxGetDevice(int *dev)
{
    AUDIT(cuCtxGetDevice, FORWARD(cuCtxGetDevice, dev));
    DONE;
}

int cuDeviceGetName(char *name, int len, int dev)
{
    AUDIT(cuDeviceGetName, FORWARD(cuDeviceGetName, name, len, dev));
    DONE;
}

int cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    AUDIT(cuMemGetInfo_v2, FORWARD(cuMemGetInfo_v2, free_bytes, total));
    DONE;
}

int cuStreamIsCapturing(void *stream, int *status)
{
    AUDIT(cuStreamIsCapturing, FORWARD(cuStreamIsCapturing, stream, status));
    DONE;
}

int cuCtxSynchronize(void)
{
    AUDIT(cuCtxSynchronize, FORWARD(cuCtxSynchronize));
    if (st == CU_OK) {
        seen.syncs++;
        for (int i = 0; i < LIVE; i++) /* the work before it has completed, so have the events recorded before */
            events[i].complete = events[i].complete || events[i].recorded;
    }
    DONE;
}

int cuMemAlloc_v2(unsigned long long *out, size_t bytes)
{
    AUDIT(cuMemAlloc_v2, FORWARD(cuMemAlloc_v2, out, bytes));
    int slot = 0;
    while (st == CU_OK && slot < LIVE && blocks[slot].p)
        slot++;
    if (st == CU_OK && slot < LIVE) {
        blocks[slot].p = *out;
        blocks[slot].bytes = bytes;
        seen.allocs++;
        seen.held += bytes;
    }
    DONE;
}

int cuMemFree_v2(unsigned long long p)
{
    AUDIT(cuMemFree_v2, FORWARD(cuMemFree_v2, p));
    int slot = 0;
    while (slot < LIVE && (!p || blocks[slot].p != p))
        slot++;
    if (slot == LIVE) {
        seen.bad_frees++;
    } else {
        seen.frees++;
        seen.held -= blocks[slot].bytes;
        blocks[slot].p = 0;
    }
    DONE;
}

int cuEventCreate(void **out, unsigned flags)
{
    AUDIT(cuEventCreate, FORWARD(cuEventCreate, out, flags));
    int slot = 0;
    while (st == CU_OK && slot < LIVE && events[slot].event)
        slot++;
    if (st == CU_OK && slot < LIVE) {
        events[slot].event = *out;
        events[slot].recorded = events[slot].complete = 0;
        seen.events_created++;
    }
    DONE;
}

/* The shim's events must never be recorded on a stream being captured: asked of the driver first. */
static int capturing(void *ret, void *stream)
{
    int status = 0;
    return from_shim(ret) && FORWARD(cuStreamIsCapturing, stream, &status) == CU_OK && status != 0;
}

int cuEventRecord(void *e, void *stream)
{
    int in_capture = capturing(__builtin_return_address(0), stream);
    AUDIT(cuEventRecord, FORWARD(cuEventRecord, e, stream));
    int slot = event_slot(e);
    if (slot >= 0 && st == CU_OK) {
        events[slot].recorded = 1;
        events[slot].complete = 0;
        seen.records++;
        seen.records_in_capture += in_capture;
    }
    DONE;
}

int cuEventQuery(void *e)
{
    AUDIT(cuEventQuery, FORWARD(cuEventQuery, e));
    int slot = event_slot(e);
    if (slot >= 0 && st == CU_OK)
        events[slot].complete = events[slot].recorded;
    DONE;
}

int cuEventElapsedTime(float *ms, void *start, void *end)
{
    AUDIT(cuEventElapsedTime, FORWARD(cuEventElapsedTime, ms, start, end));
    int a = event_slot(start), b = event_slot(end);
    if (a >= 0 && b >= 0) {
        seen.elapsed_reads++;
        seen.elapsed_early += !events[b].complete; /* the end event read before the shim knew it had completed */
    }
    DONE;
}

int cuEventDestroy_v2(void *e)
{
    AUDIT(cuEventDestroy_v2, FORWARD(cuEventDestroy_v2, e));
    int slot = event_slot(e);
    if (slot >= 0) {
        events[slot].event = NULL;
        seen.events_destroyed++;
    }
    DONE;
}

void ucudnn_audit_mark(void)
{
    pthread_mutex_lock(&lock);
    at_mark = seen;
    marked = 1;
    pthread_mutex_unlock(&lock);
}

static void write_counts(FILE *f, const char *key, long a, long b, int comma)
{
    fprintf(f, "\"%s\": %ld%s", key, a - b, comma ? ", " : "");
}

__attribute__((destructor)) static void write_record(void)
{
    long made = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < F_COUNT; i++)
        made += calls[i];
    pthread_mutex_unlock(&lock);
    /* Only a process whose preload library called the driver writes (not `ucudnn run` itself, say). */
    const char *path = getenv("AUDIT_RECORD");
    FILE *f = path && made ? fopen(path, "w") : NULL;
    if (!f)
        return;
    pthread_mutex_lock(&lock);
    fprintf(f, "{\"calls\": {");
    for (int i = 0; i < F_COUNT; i++)
        fprintf(f, "\"%s\": %ld%s", names[i], calls[i], i + 1 < F_COUNT ? ", " : "");
    fprintf(f, "}, \"failures\": {");
    for (int i = 0; i < FAILURES && failures[i].count; i++)
        fprintf(f, "%s\"%s:%d\": %ld", i ? ", " : "", names[failures[i].fn], failures[i].status, failures[i].count);
    fprintf(f,
            "}, \"others\": %ld, \"allocs\": %ld, \"frees\": %ld, \"bad_frees\": %ld, \"held\": %zu, "
            "\"events_created\": %ld, \"events_destroyed\": %ld, \"bad_events\": %ld, \"records\": %ld, "
            "\"records_in_capture\": %ld, \"elapsed_reads\": %ld, \"elapsed_early\": %ld, \"syncs\": %ld",
            others, seen.allocs, seen.frees, seen.bad_frees, seen.held, seen.events_created, seen.events_destroyed,
            seen.bad_events, seen.records, seen.records_in_capture, seen.elapsed_reads, seen.elapsed_early, seen.syncs);
    if (marked) { /* what the shim did after the mark */
        fprintf(f, ", \"after_mark\": {");
        write_counts(f, "allocs", seen.allocs, at_mark.allocs, 1);
        write_counts(f, "syncs", seen.syncs, at_mark.syncs, 1);
        write_counts(f, "records", seen.records, at_mark.records, 0);
        fprintf(f, "}");
    }
    fprintf(f, "}\n");
    pthread_mutex_unlock(&lock);
    fclose(f);
}
