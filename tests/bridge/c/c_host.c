/*
 * A C program with no Python of its own: plans the fake shim's kernel through the embedded planner and prints
 * one line per plan ("status count time_ms workspace deterministic b:algo ..."), then the benchmark count.
 * Usage: c_host KEY BATCH LIMIT POLICY [THREADS]
 */
#include "ucudnn/ucudnn.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

int fake_shim_plan(const char *key, int batch, size_t limit, const char *policy, int deterministic_only,
                   ucudnn_micro_batch *out, int capacity, int *count, float *time_ms, size_t *workspace,
                   int *deterministic);
int fake_shim_benchmark_calls(void);

struct job {
    const char *key;
    int batch;
    size_t limit;
    const char *policy;
    int status;
    int count;
    float time_ms;
    size_t workspace;
    int deterministic;
    ucudnn_micro_batch mbs[256];
};

static void *run(void *arg)
{
    struct job *j = arg;
    j->status = fake_shim_plan(j->key, j->batch, j->limit, j->policy, 0, j->mbs, 256, &j->count, &j->time_ms,
                               &j->workspace, &j->deterministic);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: c_host KEY BATCH LIMIT POLICY [THREADS]\n");
        return 2;
    }
    int threads = argc > 5 ? atoi(argv[5]) : 1;
    if (threads < 1 || threads > 16)
        return 2;
    struct job jobs[16];
    pthread_t tids[16];
    for (int t = 0; t < threads; t++) {
        jobs[t] = (struct job){.key = argv[1], .batch = atoi(argv[2]) + t, .limit = strtoull(argv[3], NULL, 10),
                               .policy = argv[4]};
        pthread_create(&tids[t], NULL, run, &jobs[t]);
    }
    int worst = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tids[t], NULL);
        struct job *j = &jobs[t];
        printf("%d %d %.3f %zu %d", j->status, j->count, j->time_ms, j->workspace, j->deterministic);
        for (int i = 0; i < j->count && j->status == 0; i++)
            printf(" %d:%d", j->mbs[i].batch, j->mbs[i].algo);
        printf("\n");
        if (j->status != 0)
            worst = 1;
    }
    printf("benchmarks %d\n", fake_shim_benchmark_calls());
    return worst;
}
