/*
 * A stand-in libcuda.so.1 for loading NVIDIA's libcudnn.so.9 on a machine without a GPU driver: it defines the
 * driver functions cuDNN's sub-libraries link by name, and each says there is no device. cuDNN looks every other
 * driver function up at run time and copes with its absence. Descriptor calls then work as on a GPU machine;
 * nothing that needs a device (handles, plans, execution) can.
 */
#include <stddef.h>

#define NO_DEVICE 100 /* CUDA_ERROR_NO_DEVICE */

int cuInit(unsigned int flags) {
    (void)flags;
    return NO_DEVICE;
}

int cuDriverGetVersion(int *version) {
    if (!version) return 1; /* CUDA_ERROR_INVALID_VALUE */
    *version = 13000;
    return 0;
}

int cuGetErrorString(int error, const char **text) {
    (void)error;
    if (text) *text = "no CUDA device (stand-in driver)";
    return 0;
}

int cuModuleGetFunction(void *function, void *module, const char *name) {
    (void)function, (void)module, (void)name;
    return NO_DEVICE;
}

int cuModuleLoadData(void *module, const void *image) {
    (void)module, (void)image;
    return NO_DEVICE;
}

int cuModuleUnload(void *module) {
    (void)module;
    return NO_DEVICE;
}

/* Their real parameter lists are long; no caller gets past cuInit, so none of them is ever reached. */
int cuTensorMapEncodeIm2col(void) { return NO_DEVICE; }
int cuTensorMapEncodeTiled(void) { return NO_DEVICE; }
int cuLaunchKernelEx(void) { return NO_DEVICE; }
int cuLaunchCooperativeKernel(void) { return NO_DEVICE; }
