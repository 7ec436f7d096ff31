/*
 * What the shim learns about the device it runs on: free memory, a clock for executions, and the host cost of
 * one call.
 *
 * Nothing here links against CUDA: the driver API (uc_driver.c) is used only when the process has already
 * loaded it, with a current context, and cuDNN runs on its device (or the host backend stands in for such a cuDNN
 * over a test's stand-in driver, UCUDNN_HOST_DRIVER). Three clocks, and a fourth state:
 *   - model: the host backend under UCUDNN_HOST_TIMING=model exports a per-thread clock that advances by the
 *     modelled time of every execution (deterministic, for tests);
 *   - cuda:  CUDA events recorded on the handle's stream around the calls; read later, when the events have
 *     completed (cuEventQuery), never by synchronising the host with the device;
 *   - wall:  the monotonic clock around the calls (the host backend's calls are synchronous);
 *   - none:  cuDNN runs on a device (the process has loaded the driver) that the shim cannot reach from the
 *     calling thread (no current context, or a driver without the functions it needs): nothing is timed,
 *     allocated or planned, and the calls run as they are (host memory or a host clock would be wrong there:
 *     cuDNN would read the memory as the device's, and its launches return before the work is done).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uc_core.h"

/* ---- the driver API, when the process has it and it is the device's ---- */

#define CU_SUCCESS 0

/* The driver (uc_driver.c) with the ten functions the clocks and scratch need, else NULL. While the process has
 * no driver it is looked for again at each use (a miss costs tens of microseconds; only where cuDNN is not the host
 * backend and no driver is loaded, a CPU process), so a process that asked before it loaded CUDA is served at once
 * when it has. */
static const uc_driver_api *device_driver(void)
{
    const uc_driver_api *d = uc_driver(1);
    if (!d || !d->ctx_get_current || !d->mem_get_info || !d->event_create || !d->event_record || !d->event_query ||
        !d->event_elapsed || !d->event_destroy || !d->mem_alloc || !d->mem_free || !d->ctx_sync)
        return NULL;
    return d;
}

/* Whether the library forwarded to runs on a device: not the host backend (unless a test's stand-in driver stands
 * in for the device, UCUDNN_HOST_DRIVER), in a process that has loaded the CUDA driver. Without the driver no
 * device work can run, so the library works on the host: TensorFlow's stubs in front of the host backend, or
 * NVIDIA's cuDNN without a GPU (which makes no handle). */
static int on_the_device(const uc_real_table *r)
{
    if (r->ucudnn_host_model_clock_ms && !uc_cfg_host_driver())
        return 0;
    return uc_driver(1) != NULL;
}

/* 1 when the driver API is in the process and this thread has a current context. */
static int cuda_ready(void)
{
    const uc_driver_api *d = device_driver();
    void *ctx = NULL;
    return d && d->ctx_get_current(&ctx) == CU_SUCCESS && ctx != NULL;
}

int uc_clock_kind(void)
{
    const uc_real_table *r = uc_real();
    if (on_the_device(r))
        return r->cudnnGetStream && cuda_ready() ? UC_CLOCK_CUDA : UC_CLOCK_NONE;
    if (r->ucudnn_host_timing_model && r->ucudnn_host_model_clock_ms && r->ucudnn_host_timing_model())
        return UC_CLOCK_MODEL;
    return UC_CLOCK_WALL;
}

/* The device's free memory as the driver reports it (*gpu = 1), else UCUDNN_HOST_DEVICE_MEMORY, the host backend's
 * stand-in (*gpu = 0), else 0 (unknown). What a framework can allocate builds on it (uc_memory.c). */
size_t uc_device_free_memory(int *gpu)
{
    size_t free_bytes = 0, total = 0;
    *gpu = 0;
    if (on_the_device(uc_real()) && cuda_ready() && device_driver()->mem_get_info(&free_bytes, &total) == CU_SUCCESS &&
        free_bytes > 0) {
        *gpu = 1;
        return free_bytes;
    }
    size_t stand_in = uc_cfg_host_device_memory();
    return stand_in < UC_UNLIMITED ? stand_in : UC_UNLIMITED;
}

/* 1 when the handle's stream is being captured into a CUDA graph, or that cannot be ruled out on a device: then
 * no plan is made (its searches would be captured, or would invalidate the capture by synchronising) and the
 * checks on real executions neither record nor query events, which would be captured or, in the global capture
 * mode, invalidate the capture. A device the shim cannot reach (the driver loaded, but no current context in the
 * calling thread or a function missing: UC_CLOCK_NONE) is such a case, counted (driver_unreachable): nothing is
 * planned, timed or allocated for its calls. Off the GPU, UCUDNN_HOST_STREAM_CAPTURE (tests). */
int uc_stream_capturing(cudnnHandle_t handle)
{
    int kind = uc_clock_kind();
    if (kind == UC_CLOCK_NONE) {
        UC_COUNT(driver_unreachable, 1);
        return 1;
    }
    if (kind != UC_CLOCK_CUDA)
        return uc_cfg_host_stream_capture();
    const uc_driver_api *cu = device_driver();
    cudaStream_t stream = NULL;
    int status = 0; /* CU_STREAM_CAPTURE_STATUS_NONE */
    if (!cu || !cu->stream_is_capturing || uc_real()->cudnnGetStream(handle, &stream) != 0 ||
        cu->stream_is_capturing(stream, &status) != CU_SUCCESS)
        return 1;
    return status != 0;
}

/* ---- scratch memory for benchmarks (planning time) ---- */

/* Off the GPU: host memory, 256-byte aligned as cudaMalloc's is (tensors declare byte alignments the library
 * checks), after a 256-byte header holding its size and whether it counts against UCUDNN_HOST_FIND_MEMORY, the
 * stand-in for a device whose memory the framework holds: what the outstanding scratch may not exceed. */
#define HOST_HEADER 256
static _Atomic size_t host_scratch_bytes;
/* The host scratch outstanding, so that a buffer is freed by where it came from whatever the state of the driver
 * by then (at most this many at once: a graph benchmark holds its tensors and a workspace, per planning thread). */
UC_PTRSET(host_live, 256);

typedef struct {
    size_t bytes;
    int counted;
} host_header;

static void *host_scratch_alloc(size_t bytes)
{
    if (bytes > SIZE_MAX - 2 * HOST_HEADER)
        return NULL;
    size_t rounded = bytes ? (bytes + 255) / 256 * 256 : 256;
    size_t bound = uc_cfg_host_find_memory();
    host_header h = {rounded, bound > 0};
    if (h.counted && atomic_fetch_add(&host_scratch_bytes, rounded) + rounded > bound) {
        atomic_fetch_sub(&host_scratch_bytes, rounded);
        return NULL;
    }
    unsigned char *base = aligned_alloc(256, HOST_HEADER + rounded);
    if (!base) {
        if (h.counted)
            atomic_fetch_sub(&host_scratch_bytes, rounded);
        return NULL;
    }
    memcpy(base, &h, sizeof h);
    memset(base + HOST_HEADER, 0, rounded);
    if (uc_ptrset_add(&host_live, base + HOST_HEADER, NULL) != 0) {
        if (h.counted)
            atomic_fetch_sub(&host_scratch_bytes, rounded);
        free(base);
        return NULL;
    }
    return base + HOST_HEADER;
}

static void host_scratch_free(void *p)
{
    unsigned char *base = (unsigned char *)p - HOST_HEADER;
    host_header h;
    memcpy(&h, base, sizeof h);
    if (h.counted)
        atomic_fetch_sub(&host_scratch_bytes, h.bytes);
    free(base);
}

/* Scratch of the shim's own: host memory where cuDNN works on the host, device memory from the driver where it
 * works on a device (never host memory: cuDNN would read it as the device's), none where that device is out of
 * reach; where that gives none and UCUDNN_SCRATCH_FROM_FRAMEWORK is set, borrowed from the framework's allocator.
 * Each buffer is freed by where it came from. */
void *uc_scratch_alloc(size_t bytes)
{
    void *p = NULL;
    unsigned long long dev = 0;
    if (!on_the_device(uc_real()))
        p = host_scratch_alloc(bytes);
    else if (uc_clock_kind() == UC_CLOCK_CUDA && device_driver()->mem_alloc(&dev, bytes ? bytes : 1) == CU_SUCCESS)
        p = (void *)(uintptr_t)dev;
    if (!p && uc_cfg_scratch_from_framework())
        p = uc_framework_scratch_alloc(bytes ? bytes : 1);
    return p;
}

void uc_scratch_free(void *p)
{
    if (!p || uc_framework_scratch_free(p))
        return;
    const uc_driver_api *cu = NULL;
    if (uc_ptrset_take(&host_live, p, NULL))
        host_scratch_free(p);
    else if ((cu = device_driver()))
        cu->mem_free((unsigned long long)(uintptr_t)p);
}

void uc_device_sync(void)
{
    if (uc_clock_kind() == UC_CLOCK_CUDA)
        device_driver()->ctx_sync();
}

/* ---- clocks ---- */

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int uc_mark_start(uc_mark *m, cudnnHandle_t handle)
{
    memset(m, 0, sizeof *m);
    m->kind = uc_clock_kind();
    if (m->kind == UC_CLOCK_MODEL) {
        m->t0 = uc_real()->ucudnn_host_model_clock_ms();
        return 0;
    }
    if (m->kind == UC_CLOCK_WALL) {
        m->t0 = wall_ms();
        return 0;
    }
    if (m->kind == UC_CLOCK_NONE)
        return -1; /* a device the shim cannot time: untimed */
    const uc_driver_api *cu = device_driver();
    cudaStream_t stream = NULL;
    if (uc_real()->cudnnGetStream(handle, &stream) != 0)
        return -1;
    m->stream = stream;
    if (cu->event_create(&m->ev0, 0) != CU_SUCCESS)
        return -1;
    if (cu->event_create(&m->ev1, 0) != CU_SUCCESS || cu->event_record(m->ev0, m->stream) != CU_SUCCESS) {
        uc_mark_drop(m);
        return -1;
    }
    return 0;
}

int uc_mark_stop(uc_mark *m)
{
    if (m->kind == UC_CLOCK_MODEL) {
        m->ms = uc_real()->ucudnn_host_model_clock_ms() - m->t0;
        m->done = 1;
    } else if (m->kind == UC_CLOCK_WALL) {
        m->ms = wall_ms() - m->t0;
        m->done = 1;
    } else if (device_driver()->event_record(m->ev1, m->stream) != CU_SUCCESS) {
        uc_mark_drop(m);
        return -1;
    }
    return 0;
}

int uc_mark_read(uc_mark *m, double *ms)
{
    if (!m->done && m->kind == UC_CLOCK_CUDA) {
        const uc_driver_api *cu = device_driver();
        if (!m->ev1 || !cu)
            return -1;
        int q = cu->event_query(m->ev1);
        if (q != CU_SUCCESS)
            return q == 600 /* CUDA_ERROR_NOT_READY */ ? 0 : -1;
        float elapsed = 0;
        if (cu->event_elapsed(&elapsed, m->ev0, m->ev1) != CU_SUCCESS)
            return -1;
        m->ms = elapsed;
        m->done = 1;
        uc_mark_drop(m);
    }
    *ms = m->ms;
    return m->done ? 1 : 0;
}

void uc_mark_drop(uc_mark *m)
{
    const uc_driver_api *cu = m->ev0 || m->ev1 ? device_driver() : NULL;
    if (cu && m->ev0)
        cu->event_destroy(m->ev0);
    if (cu && m->ev1)
        cu->event_destroy(m->ev1);
    m->ev0 = m->ev1 = NULL;
}

/* ---- the host cost of one call ---- */

#define PROBE_CALLS 16
#define PROBE_ROUNDS 5

/*
 * Time PROBE_CALLS back-to-back forward calls of the smallest convolution there is (1 sample, 1 channel, 1x1) on
 * the caller's handle and report the least time per call over PROBE_ROUNDS rounds: on a GPU the launches are
 * asynchronous and such a kernel takes a few microseconds, so the host time per call is the cost of issuing one
 * (cuDNN 9's legacy calls: ~40 us on an H100); on the host backend it is the fixed cost of a call; under the
 * timing model, the model's own per-call cost. A plan of k micro-batches costs at least k times this.
 */
int uc_probe_call_cost(cudnnHandle_t handle, double *ms_out)
{
    const uc_real_table *r = uc_real();
    if (!r->cudnnCreateFilterDescriptor || !r->cudnnSetFilterNdDescriptor || !r->cudnnDestroyFilterDescriptor ||
        !r->cudnnConvolutionForward)
        return uc_status(UC_ST_NOT_SUPPORTED);
    int kind = uc_clock_kind();
    if (kind == UC_CLOCK_NONE) /* cuDNN on a device whose memory the shim cannot allocate */
        return uc_status(UC_ST_NOT_SUPPORTED);
    cudnnTensorDescriptor_t x = NULL, y = NULL;
    cudnnFilterDescriptor_t w = NULL;
    cudnnConvolutionDescriptor_t conv = NULL;
    static const int dims[4] = {1, 1, 1, 1}, strides[4] = {1, 1, 1, 1}, pad[2] = {0, 0}, one[2] = {1, 1};
    int st = r->cudnnCreateTensorDescriptor(&x);
    if (st == 0)
        st = r->cudnnSetTensorNdDescriptor(x, CUDNN_DATA_FLOAT, 4, dims, strides);
    if (st == 0)
        st = r->cudnnCreateTensorDescriptor(&y);
    if (st == 0)
        st = r->cudnnSetTensorNdDescriptor(y, CUDNN_DATA_FLOAT, 4, dims, strides);
    if (st == 0)
        st = r->cudnnCreateFilterDescriptor(&w);
    if (st == 0)
        st = r->cudnnSetFilterNdDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, dims);
    if (st == 0)
        st = r->cudnnCreateConvolutionDescriptor(&conv);
    if (st == 0)
        st = r->cudnnSetConvolutionNdDescriptor(conv, 2, pad, one, one, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    /* Three floats of device memory (x, w, y), or of host memory for the host backend. */
    unsigned long long dev = 0;
    float host[3] = {1.0f, 1.0f, 0.0f};
    char *buf = (char *)host;
    if (st == 0 && kind == UC_CLOCK_CUDA) {
        if (device_driver()->mem_alloc(&dev, 3 * sizeof(float)) != CU_SUCCESS)
            st = uc_status(UC_ST_ALLOC);
        buf = (char *)(uintptr_t)dev;
    }
    double best = -1;
    const float alpha = 1.0f, beta = 0.0f;
    uc_guard++;
    for (int round = 0; st == 0 && round <= PROBE_ROUNDS; round++) {
        double t0 = kind == UC_CLOCK_MODEL ? r->ucudnn_host_model_clock_ms() : wall_ms();
        for (int i = 0; i < PROBE_CALLS && st == 0; i++)
            st = r->cudnnConvolutionForward(handle, &alpha, x, buf, w, buf + sizeof(float), conv,
                                            CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &beta, y,
                                            buf + 2 * sizeof(float));
        double t = ((kind == UC_CLOCK_MODEL ? r->ucudnn_host_model_clock_ms() : wall_ms()) - t0) / PROBE_CALLS;
        if (kind == UC_CLOCK_CUDA)
            device_driver()->ctx_sync(); /* planning time, not a call: rounds must not queue behind each other */
        if (round > 0 && (best < 0 || t < best)) /* round 0 warms up */
            best = t;
    }
    uc_guard--;
    if (dev)
        device_driver()->mem_free(dev);
    if (conv)
        r->cudnnDestroyConvolutionDescriptor(conv);
    if (w)
        r->cudnnDestroyFilterDescriptor(w);
    uc_tensor_destroy(y);
    uc_tensor_destroy(x);
    if (st == 0)
        *ms_out = best;
    return st;
}
