/*
 * A host that never links libcudnn: with LD_PRELOAD=libucudnn.so its cudnn* symbols come from the shim alone.
 * Every hook must answer with an error status (no real library to forward to) and never crash. Prints the
 * statuses and the shim's stats as JSON.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

typedef int (*fwd_fn)(void *, const void *, void *, const void *, void *, const void *, void *, int, void *, size_t,
                      const void *, void *, void *);
typedef int (*ws_fn)(void *, void *, void *, void *, void *, int, size_t *);
typedef int (*get_fn)(void *, void *, void *, void *, void *, int, int *, void *);

int main(void)
{
    fwd_fn fwd = (fwd_fn)dlsym(RTLD_DEFAULT, "cudnnConvolutionForward");
    ws_fn ws = (ws_fn)dlsym(RTLD_DEFAULT, "cudnnGetConvolutionForwardWorkspaceSize");
    get_fn get = (get_fn)dlsym(RTLD_DEFAULT, "cudnnGetConvolutionForwardAlgorithm_v7");
    size_t (*stats)(char *, size_t) = (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "ucudnn_stats_json");
    if (!fwd || !ws || !get || !stats) {
        printf("{\"error\":\"symbols missing: run with LD_PRELOAD=libucudnn.so\"}\n");
        return 2;
    }
    float one = 1.0f, zero = 0.0f;
    size_t bytes = 0;
    int returned = -1;
    char perf[48 * 4];
    int s1 = fwd(NULL, &one, NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, &zero, NULL, NULL);
    int s2 = ws(NULL, NULL, NULL, NULL, NULL, 0, &bytes);
    int s3 = get(NULL, NULL, NULL, NULL, NULL, 4, &returned, perf);
    char buf[4096];
    stats(buf, sizeof buf);
    printf("{\"forward\":%d,\"workspace\":%d,\"get_v7\":%d,\"stats\":%s}\n", s1, s2, s3, buf);
    return 0;
}
