/* Stand-in for NVRTC's header, so the real cudnn_frontend headers compile without the NVRTC wheel: the few
 * names they mention, declared here by this project. The test programs never compile kernels at run time;
 * cuda_standin.cpp defines these functions to fail. */
#ifndef UCUDNN_TEST_NVRTC_STANDIN_H
#define UCUDNN_TEST_NVRTC_STANDIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { NVRTC_SUCCESS = 0, NVRTC_ERROR_INTERNAL_ERROR = 11 } nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name, int num_headers,
                               const char *const *headers, const char *const *include_names);
nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog);
nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int num_options, const char *const *options);
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size);
nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log);
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *size);
nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin);
nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *size);
nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx);
const char *nvrtcGetErrorString(nvrtcResult result);

#ifdef __cplusplus
}
#endif

#endif
