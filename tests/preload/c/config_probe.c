/*
 * The preload library's reading of UCUDNN_* settings, observed from a host: run with LD_PRELOAD=libucudnn.so.
 * Each argument NAME=VALUE is handed to ucudnn_set_option; one JSON line per argument gives its status and the
 * shim's stats after it (which carry total_workspace_size, the parsed UCUDNN_TOTAL_WORKSPACE_SIZE, and whether
 * the shim passes everything through). With no argument: one line with the stats as the environment left them.
 * With `--host LIB`: LIB (the host backend) is loaded and asked whether it reads UCUDNN_HOST_TIMING as model.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned char)*s);
        else
            putchar(*s);
    }
    putchar('"');
}

int main(int argc, char **argv)
{
    int (*set)(const char *, const char *) = (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT,
                                                                                          "ucudnn_set_option");
    size_t (*stats)(char *, size_t) = (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "ucudnn_stats_json");
    if (!set || !stats) {
        printf("{\"error\":\"symbols missing: run with LD_PRELOAD=libucudnn.so\"}\n");
        return 2;
    }
    if (argc == 3 && strcmp(argv[1], "--host") == 0) {
        void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        int (*model)(void) = lib ? (int (*)(void))dlsym(lib, "ucudnn_host_timing_model") : NULL;
        if (!model)
            return 2;
        printf("{\"host_timing_model\":%d}\n", model());
        return 0;
    }
    static char buf[1 << 16];
    if (argc < 2) {
        stats(buf, sizeof buf);
        printf("{\"stats\":%s}\n", buf);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq)
            return 2;
        *eq = '\0';
        int rc = set(argv[i], eq + 1);
        stats(buf, sizeof buf);
        printf("{\"name\":");
        json_string(argv[i]);
        printf(",\"value\":");
        json_string(eq + 1);
        printf(",\"rc\":%d,\"stats\":%s}\n", rc, buf);
        fflush(stdout);
    }
    return 0;
}
