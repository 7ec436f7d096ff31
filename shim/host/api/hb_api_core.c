/*
 * Host backend: library version, status strings, handles, and the once-read timing configuration.
 * Handles hold nothing but the (ignored) stream: every call works on its arguments only, so independent
 * handles, or one handle shared by threads, need no locking.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hb_desc.h"

HB_EXPORT size_t cudnnGetVersion(void) {
    return (size_t)(HB_VERSION_MAJOR * 10000 + HB_VERSION_MINOR * 100 + HB_VERSION_PATCH);
}

HB_EXPORT cudnnStatus_t cudnnGetProperty(libraryPropertyType type, int *value) {
    if (!value) return CUDNN_STATUS_BAD_PARAM;
    switch (type) {
    case MAJOR_VERSION: *value = HB_VERSION_MAJOR; return CUDNN_STATUS_SUCCESS;
    case MINOR_VERSION: *value = HB_VERSION_MINOR; return CUDNN_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = HB_VERSION_PATCH; return CUDNN_STATUS_SUCCESS;
    default: return CUDNN_STATUS_BAD_PARAM;
    }
}

/* The status names the real cuDNN 9 library reports, every code it knows. */
static const struct {
    int code;
    const char *name;
} status_names[] = {
    {0, "CUDNN_STATUS_SUCCESS"},
    {1001, "CUDNN_STATUS_NOT_INITIALIZED"},
    {1002, "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH"},
    {1003, "CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH"},
    {1004, "CUDNN_STATUS_DEPRECATED"},
    {1005, "CUDNN_STATUS_LICENSE_ERROR"},
    {1006, "CUDNN_STATUS_RUNTIME_IN_PROGRESS"},
    {1007, "CUDNN_STATUS_RUNTIME_FP_OVERFLOW"},
    {1008, "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED"},
    {2000, "CUDNN_STATUS_BAD_PARAM"},
    {2001, "CUDNN_STATUS_INVALID_VALUE"},
    {2002, "CUDNN_STATUS_BAD_PARAM_NULL_POINTER"},
    {2003, "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER"},
    {2004, "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED"},
    {2005, "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND"},
    {2006, "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT"},
    {2007, "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH"},
    {2008, "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH"},
    {2009, "CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES"},
    {2010, "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE"},
    {2011, "CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH"},
    {2012, "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE"},
    {3000, "CUDNN_STATUS_NOT_SUPPORTED"},
    {3001, "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN"},
    {3002, "CUDNN_STATUS_NOT_SUPPORTED_SHAPE"},
    {3003, "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE"},
    {3004, "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT"},
    {3005, "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER"},
    {3006, "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART"},
    {3007, "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH"},
    {3008, "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING"},
    {3009, "CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE"},
    {3010, "CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT"},
    {3011, "CUDNN_STATUS_NOT_SUPPORTED_PADDING"},
    {3012, "CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM"},
    {3013, "CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API"},
    {3014, "CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE"},
    {4000, "CUDNN_STATUS_INTERNAL_ERROR"},
    {4001, "CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED"},
    {4002, "CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE"},
    {4003, "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED"},
    {4004, "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED"},
    {4005, "CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM"},
    {4006, "CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED"},
    {5000, "CUDNN_STATUS_EXECUTION_FAILED"},
    {5001, "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER"},
    {5002, "CUDNN_STATUS_EXECUTION_FAILED_CUBLAS"},
    {5003, "CUDNN_STATUS_EXECUTION_FAILED_CUDART"},
    {5004, "CUDNN_STATUS_EXECUTION_FAILED_CURAND"},
};

HB_EXPORT const char *cudnnGetErrorString(cudnnStatus_t status) {
    for (size_t i = 0; i < sizeof status_names / sizeof status_names[0]; i++)
        if (status_names[i].code == (int)status) return status_names[i].name;
    return "CUDNN_UNKNOWN_STATUS";
}

/* As measured on the real library: per thread, the latest failure wins, a success leaves the message, reading it
 * clears it, and a short buffer gets a NUL-terminated prefix. */
static _Thread_local char last_error[256];

cudnnStatus_t hb_note(cudnnStatus_t status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof last_error - 2)
        snprintf(last_error + n, sizeof last_error - (size_t)n, ": %s", cudnnGetErrorString(status));
    return status;
}

HB_EXPORT void cudnnGetLastErrorString(char *message, size_t max_size) {
    if (!message || !max_size) return;
    size_t n = strlen(last_error);
    if (n > max_size - 1) n = max_size - 1;
    memcpy(message, last_error, n);
    message[n] = '\0';
    last_error[0] = '\0';
}

cudnnStatus_t hb_object_create(void *out, size_t size, uint32_t magic) {
    if (!out) return CUDNN_STATUS_BAD_PARAM;
    uint32_t *obj = calloc(1, size);
    if (!obj) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    *obj = magic;
    memcpy(out, &obj, sizeof obj);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t hb_object_destroy(void *obj, uint32_t magic) {
    /* cuDNN accepts destroying NULL. */
    if (!obj) return CUDNN_STATUS_SUCCESS;
    uint32_t *tag = obj;
    if (*tag != magic) return CUDNN_STATUS_BAD_PARAM;
    *tag = 0; /* a second destroy of the same pointer is then caught instead of double-freed, often */
    free(obj);
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
    return hb_object_create(handle, sizeof(struct cudnnContext), HB_MAGIC_HANDLE);
}

HB_EXPORT cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) { return hb_object_destroy(handle, HB_MAGIC_HANDLE); }

HB_EXPORT cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
    if (!hb_handle_ok(handle)) return CUDNN_STATUS_BAD_PARAM;
    handle->stream = stream;
    return CUDNN_STATUS_SUCCESS;
}

HB_EXPORT cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *stream) {
    if (!hb_handle_ok(handle) || !stream) return CUDNN_STATUS_BAD_PARAM;
    *stream = handle->stream;
    return CUDNN_STATUS_SUCCESS;
}

int hb_algo_enum_count(hb_op op) {
    switch (op) {
    case HB_OP_FWD: return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    case HB_OP_BWD_DATA: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    default: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    }
}

static pthread_once_t timing_once = PTHREAD_ONCE_INIT;
static int timing_model;

/* The value of an environment variable without its surrounding blanks, as ucudnn/config.py reads every
 * UCUDNN_* variable: 1 when unset or blank (the default applies), 0 with the trimmed value in buf, -1 when it
 * does not fit (buf then holds a prefix, which no valid value is). */
int hb_env_trimmed(const char *raw, char *buf, size_t len) {
    if (!raw || !len) return 1;
    while (isspace((unsigned char)*raw)) raw++;
    size_t n = strlen(raw);
    while (n && isspace((unsigned char)raw[n - 1])) n--;
    if (!n) return 1;
    size_t keep = n < len ? n : len - 1;
    memcpy(buf, raw, keep);
    buf[keep] = '\0';
    return n < len ? 0 : -1;
}

static void read_timing(void) {
    char v[16];
    const char *raw = getenv("UCUDNN_HOST_TIMING");
    int got = hb_env_trimmed(raw, v, sizeof v);
    if (got > 0 || (got == 0 && strcasecmp(v, "measure") == 0)) return;
    if (got == 0 && strcasecmp(v, "model") == 0) {
        timing_model = 1;
        return;
    }
    fprintf(stderr, "ucudnn: warning: UCUDNN_HOST_TIMING='%s': expected one of measure, model; using measure\n", raw);
}

int hb_timing_is_model(void) {
    pthread_once(&timing_once, read_timing);
    return timing_model;
}
