/*
 * A C program (no Python) that runs libfakefw.so's training step on deterministic data and writes y, dx and dw
 * as raw float32 to OUT_PREFIX.{y,dx,dw}. Usage: conv_host OUT_PREFIX N C H W K R S PAD
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int fakefw_train_step(const int *shape, const float *x, const float *w, const float *dy, float *y, float *dx,
                      float *dw, int *algos);

static void fill(float *v, size_t count, uint32_t seed)
{
    for (size_t i = 0; i < count; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
}

static int dump(const char *prefix, const char *name, const float *v, size_t count)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.%s", prefix, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t wrote = fwrite(v, sizeof *v, count, f);
    return fclose(f) == 0 && wrote == count ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 10) {
        fprintf(stderr, "usage: conv_host OUT_PREFIX N C H W K R S PAD\n");
        return 2;
    }
    int shape[8];
    for (int i = 0; i < 8; i++)
        shape[i] = atoi(argv[2 + i]);
    const int n = shape[0], c = shape[1], h = shape[2], w = shape[3], k = shape[4], r = shape[5], s = shape[6];
    const int ho = h + 2 * shape[7] - r + 1, wo = w + 2 * shape[7] - s + 1;
    size_t nx = (size_t)n * c * h * w, nw = (size_t)k * c * r * s, ny = (size_t)n * k * ho * wo;
    float *x = malloc(nx * sizeof *x), *wt = malloc(nw * sizeof *wt), *dy = malloc(ny * sizeof *dy);
    float *y = calloc(ny, sizeof *y), *dx = calloc(nx, sizeof *dx), *dw = malloc(nw * sizeof *dw);
    if (!x || !wt || !dy || !y || !dx || !dw)
        return 3;
    fill(x, nx, 1);
    fill(wt, nw, 2);
    fill(dy, ny, 3);
    fill(dw, nw, 4); /* the prior gradient the step accumulates into */
    int algos[3] = {-1, -1, -1};
    int status = fakefw_train_step(shape, x, wt, dy, y, dx, dw, algos);
    if (status != 0) {
        fprintf(stderr, "conv_host: cuDNN status %d\n", status);
        return 1;
    }
    if (dump(argv[1], "y", y, ny) || dump(argv[1], "dx", dx, nx) || dump(argv[1], "dw", dw, nw))
        return 4;
    printf("algos %d %d %d\n", algos[0], algos[1], algos[2]);
    free(x), free(wt), free(dy), free(y), free(dx), free(dw);
    return 0;
}
