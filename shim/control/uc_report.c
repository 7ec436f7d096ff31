/*
 * What the preload library reports: the stats as JSON (ucudnn_stats_json), the planner's latest Workspace Division
 * among them, and at exit the summary line and the UCUDNN_STATS_FILE.
 */
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uc_config_gen.h"
#include "uc_control.h"

/* The planner's latest Workspace Division (see ucudnn_note_division); kernels < 0: none yet. */
static pthread_mutex_t division_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int kernels;
    size_t budget, workspace;
    double time_ms;
} division = {-1, 0, 0, 0.0};

int uc_report_division(int kernels, size_t budget_bytes, size_t workspace_bytes, double time_ms)
{
    if (kernels < 0 || !(time_ms >= 0.0) || time_ms > 1e300)
        return -1;
    pthread_mutex_lock(&division_lock);
    division.kernels = kernels;
    division.budget = budget_bytes;
    division.workspace = workspace_bytes;
    division.time_ms = time_ms;
    pthread_mutex_unlock(&division_lock);
    UC_COUNT(divisions, 1);
    uc_log(UC_LOG_DEBUG, "workspace division over %d kernel(s): %zu of %zu bytes, %.6g ms", kernels,
           workspace_bytes, budget_bytes, time_ms);
    return 0;
}

int uc_report_shared_benchmarks(int read, int taken_over, double waited_ms)
{
    if (read < 0 || taken_over < 0 || !(waited_ms >= 0.0) || waited_ms > 1e12) /* 1e12 ms in ns fits a counter */
        return -1;
    UC_COUNT(shared_benchmarks, read);
    UC_COUNT(benchmark_takeovers, taken_over);
    UC_COUNT(benchmark_wait_ns, (unsigned long long)(waited_ms * 1e6));
    return 0;
}

char *uc_stats_text(void)
{
    const uc_real_table *r = uc_real_if_resolved(); /* at exit: never a lookup of its own */
    uc_sb sb = {0};
    uc_sb_printf(&sb, "{");
#define UC_STAT(name, doc) \
    uc_sb_printf(&sb, "\"" #name "\":%llu,", (unsigned long long)atomic_load(&uc_stat.name));
#define UC_STAT_MS(stem, doc) \
    uc_sb_printf(&sb, "\"" #stem "_ms\":%.6f,", (double)atomic_load(&uc_stat.stem##_ns) / 1e6);
#include "uc_stats.def"
#undef UC_STAT
#undef UC_STAT_MS
    uc_sb_printf(&sb, "\"plan_cache_entries\":%d,", uc_cache_entries());
    pthread_mutex_lock(&division_lock);
    if (division.kernels < 0)
        uc_sb_printf(&sb, "\"division\":null,");
    else
        uc_sb_printf(&sb,
                     "\"division\":{\"kernels\":%d,\"budget_bytes\":%zu,\"workspace_bytes\":%zu,\"time_ms\":%.9g},",
                     division.kernels, division.budget, division.workspace, division.time_ms);
    pthread_mutex_unlock(&division_lock);
    uc_sb_printf(&sb, "\"total_workspace_size\":%zu,", uc_cfg_total_workspace());
    uc_sb_printf(&sb, "\"disabled\":%s,\"real_version\":%zu,\"real_library\":", uc_cfg_disabled() ? "true" : "false",
                 r ? r->version : 0);
    uc_sb_json_string(&sb, r ? r->path : "");
    uc_sb_printf(&sb, ",\"pid\":%ld}", (long)getpid());
    return uc_sb_take(&sb);
}

/* "%p" in a UCUDNN_STATS_FILE pattern is the pid. */
static void stats_path(const char *pattern, char *path, size_t len)
{
    size_t o = 0;
    for (const char *s = pattern; *s && o + 24 < len; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            o += (size_t)snprintf(path + o, len - o, "%ld", (long)getpid());
            s++;
        } else {
            path[o++] = *s;
        }
    }
    path[o] = '\0';
}

/*
 * UCUDNN_STATS_FILE at exit, written beside and renamed into place, so a reader never sees half of it. A process
 * that made no hooked call writes its zeros only where no file exists yet: a child that inherited LD_PRELOAD and
 * never touched cuDNN does not overwrite its parent's counts, and a program whose calls the shim never saw still
 * leaves a file that says so.
 */
static void write_stats_file(int saw_calls)
{
    char pattern[PATH_MAX], path[PATH_MAX + 32], tmp[PATH_MAX + 64];
    if (!uc_cfg_string(UC_VAR_UCUDNN_STATS_FILE, pattern, sizeof pattern))
        return;
    stats_path(pattern, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    char *text = uc_stats_text();
    FILE *f = text ? fopen(tmp, "w") : NULL;
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f)
        ok = (fclose(f) == 0) && ok;
    free(text);
    if (ok && (saw_calls ? rename(tmp, path) : link(tmp, path)) == 0) {
        if (!saw_calls)
            unlink(tmp);
        return;
    }
    if (f)
        unlink(tmp);
    if (ok && !saw_calls && errno == EEXIST)
        return; /* another process's counts stand */
    uc_log(UC_LOG_WARNING, "cannot write UCUDNN_STATS_FILE=%s", path);
}

static void say_size(char *buf, size_t len, unsigned long long bytes)
{
    if (bytes >= (1ull << 30))
        snprintf(buf, len, "%.1f GiB", (double)bytes / (double)(1ull << 30));
    else if (bytes >= (1ull << 20))
        snprintf(buf, len, "%.1f MiB", (double)bytes / (double)(1ull << 20));
    else
        snprintf(buf, len, "%.1f KiB", (double)bytes / 1024.0);
}

/* What the executions ran, counted apart, the checks still unfinished and the predictions. */
static void summary_calls(uc_sb *s, unsigned long long kernels, unsigned long long calls)
{
    unsigned long long checking = atomic_load(&uc_stat.verify_executions),
                       checking_divided = atomic_load(&uc_stat.verify_divided_calls),
                       divided = atomic_load(&uc_stat.divided_calls) - checking_divided,
                       passed = atomic_load(&uc_stat.passthrough);
    unsigned long long accounted = checking + divided + passed, undivided = calls > accounted ? calls - accounted : 0;
    uc_sb_printf(s, "%llu kernel(s), %llu convolution call(s), %llu cuDNN call(s) in all: %llu micro-batched, %llu "
                 "undivided, %llu passed through", kernels, calls,
                 (unsigned long long)atomic_load(&uc_stat.micro_batches), divided, undivided, passed);
    if (checking)
        uc_sb_printf(s, ", %llu timing new plans against cuDNN alone (%llu of them micro-batched)", checking,
                     checking_divided);
    unsigned long long started = atomic_load(&uc_stat.checks_started), ended = atomic_load(&uc_stat.verified);
    if (started > ended)
        uc_sb_printf(s, "; %llu new plan(s) still being checked at exit (a check takes %d or more executions of its "
                     "kernel; the next run checks them again)", started - ended, 2 * (uc_cfg_verify_samples() + 1));
    double pred = (double)atomic_load(&uc_stat.predicted_ns) / 1e6,
           base = (double)atomic_load(&uc_stat.undivided_predicted_ns) / 1e6;
    if (pred > 0)
        uc_sb_printf(s, "; predicted %.4g ms in all vs %.4g ms for cuDNN alone in the same workspaces (%.2fx)", pred,
                     base, base / pred);
}

/* The peak workspace, and which limit bound it (an option that never bound is seen to change nothing). */
static void summary_workspace(uc_sb *s, unsigned long long calls)
{
    char size[32];
    say_size(size, sizeof size, atomic_load(&uc_stat.peak_workspace));
    uc_sb_printf(s, "; peak workspace %s", size);
    if (!calls || uc_cfg_total_workspace())
        return;
    char offered[32], limit[32];
    say_size(offered, sizeof offered, atomic_load(&uc_stat.max_offered_workspace));
    unsigned long long bound = atomic_load(&uc_stat.limit_bound_calls), lists = atomic_load(&uc_stat.limit_lists),
                       bound_lists = atomic_load(&uc_stat.limit_bound_lists);
    if (uc_cfg_limit_auto()) {
        uc_sb_printf(s, "; workspace: the program's own (at most %s offered)", offered);
        return;
    }
    say_size(limit, sizeof limit, uc_cfg_default_limit());
    uc_sb_printf(s, "; UCUDNN_DEFAULT_WORKSPACE_LIMIT=%s bound %llu of %llu call(s)", limit, bound, calls);
    if (lists)
        uc_sb_printf(s, " and %llu of %llu algorithm list(s)", bound_lists, lists);
    if (!bound && !bound_lists)
        uc_sb_printf(s, ": it changed nothing, the program's own workspace (at most %s offered) bound every call",
                     offered);
}

/* Planner benchmarks that went short of device memory, and (where it is off) the setting that borrows it. */
static void summary_short(uc_sb *s)
{
    unsigned long long shorts = atomic_load(&uc_stat.benchmarks_short_of_memory);
    if (!shorts)
        return;
    uc_sb_printf(s, "; %llu planner benchmark(s) short of device memory (their plans may lack faster algorithms",
                 shorts);
    if (!uc_cfg_scratch_from_framework())
        uc_sb_printf(s, "; in a PyTorch program UCUDNN_SCRATCH_FROM_FRAMEWORK=1 borrows it from PyTorch's cache");
    uc_sb_printf(s, ")");
}

/* Benchmarks read from other processes planning the same kernels on the same cache (data-parallel ranks). */
static void summary_shared(uc_sb *s)
{
    unsigned long long read = atomic_load(&uc_stat.shared_benchmarks),
                       taken = atomic_load(&uc_stat.benchmark_takeovers),
                       waited_ns = atomic_load(&uc_stat.benchmark_wait_ns);
    if (!read && !taken)
        return;
    uc_sb_printf(s, "; %llu benchmark(s) measured by other processes planning the same kernels"
                    " (%.1f s waited for them)",
                 read, (double)waited_ns / 1e9);
    if (taken)
        uc_sb_printf(s, ", %llu claimed by them measured here after all (UCUDNN_BENCHMARK_WAIT)", taken);
}

/* The graph path's plans, their checks, and those over an explicit limit. */
static void summary_graph(uc_sb *s, unsigned long long gplans)
{
    uc_sb_printf(s, "; graph API: %llu convolution plan(s), %llu micro-batched, %llu execute(s)", gplans,
                 (unsigned long long)atomic_load(&uc_stat.graph_split_plans),
                 (unsigned long long)atomic_load(&uc_stat.graph_executes));
    unsigned long long gstarted = atomic_load(&uc_stat.graph_checks_started),
                       gended = atomic_load(&uc_stat.graph_verified),
                       greplaced = atomic_load(&uc_stat.graph_rejected_by_measurement),
                       grunner = atomic_load(&uc_stat.graph_runner_up_checks),
                       gwon = atomic_load(&uc_stat.graph_runner_up_won);
    if (gstarted) {
        uc_sb_printf(s, ", %llu checked (%llu replaced by the undivided engine", gended,
                     greplaced > gwon ? greplaced - gwon : 0);
        if (grunner)
            uc_sb_printf(s, "; %llu of one engine against its runner-up, %llu replaced by it", grunner, gwon);
        uc_sb_printf(s, ")");
    }
    if (gstarted > gended)
        uc_sb_printf(s, ", %llu still being checked at exit", gstarted - gended);
    unsigned long long gstored = atomic_load(&uc_stat.graph_stored_checks);
    if (gstored)
        uc_sb_printf(s, ", %llu settled by checks stored in the cache", gstored);
    unsigned long long gover = atomic_load(&uc_stat.graph_over_limit);
    if (gover)
        uc_sb_printf(s, ", %llu over the limit run as built (no engine cuDNN lists fits it, divided where it may be)",
                     gover);
}

/*
 * One line on stderr at exit when anything was planned (silenced by UCUDNN_LOG_LEVEL=error): what ran, counted
 * apart -- micro-batched plans, undivided calls, pass-throughs, and the executions that timed new plans against
 * cuDNN alone (a check alternates the two, so those are neither's steady state) -- the checks still unfinished,
 * the predictions, which limit bound the workspace, the benchmarks short of memory, and the graph path's part.
 */
static void say_summary(void)
{
    unsigned long long kernels = atomic_load(&uc_stat.kernels), calls = atomic_load(&uc_stat.calls),
                       gplans = atomic_load(&uc_stat.graph_conv_plans);
    if (!kernels && !gplans)
        return;
    uc_sb s = {0};
    summary_calls(&s, kernels, calls);
    summary_workspace(&s, calls);
    summary_short(&s);
    summary_shared(&s);
    if (gplans)
        summary_graph(&s, gplans);
    char *line = uc_sb_take(&s); /* NULL only where memory ran out: then no line */
    if (line)
        uc_say("%s (UCUDNN_LOG_LEVEL=error silences this line)", line);
    free(line);
}

static unsigned long long calls_seen(void)
{
    return atomic_load(&uc_stat.calls) + atomic_load(&uc_stat.queries) + atomic_load(&uc_stat.graph_calls);
}

/* A fork()ed child inherits its parent's counters: it reports only if it made calls of its own. */
static atomic_int forked;
static atomic_ullong calls_at_fork;

static void in_forked_child(void)
{
    atomic_store(&forked, 1);
    atomic_store(&calls_at_fork, calls_seen());
}

static void at_exit_status(int status, void *arg);

__attribute__((constructor)) static void watch_forks(void)
{
    pthread_atfork(NULL, NULL, in_forked_child);
    /* Registered before the dynamic linker's own exit handler when preloaded, so it runs after the destructors
     * (at_exit below); the library is linked nodelete, so it is still there then. */
    on_exit(at_exit_status, NULL);
}

static int cuda_library(struct dl_phdr_info *info, size_t size, void *found)
{
    (void)size;
    const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    const char *base = slash ? slash + 1 : info->dlpi_name ? info->dlpi_name : "";
    if (!strncmp(base, "libcudnn", 8) || !strncmp(base, "libcuda.so", 10))
        *(int *)found = 1;
    return *(int *)found;
}

/* 1 when a cuDNN library (loaded privately, or never called) or the CUDA driver (a GPU program, maybe with a static
 * cuDNN) is in the process: a program that does convolutions we could have seen. */
static int convolutions_possible(void)
{
    int found = 0;
    dl_iterate_phdr(cuda_library, &found);
    return found;
}

/* At exit: the summary line and the stats file. */
__attribute__((destructor)) static void at_exit(void)
{
    if (atomic_load(&forked) && calls_seen() == atomic_load(&calls_at_fork))
        return; /* its parent's counts, which the parent reports */
    say_summary();
    write_stats_file(calls_seen() != 0);
}

/*
 * In the program `ucudnn run` started (UCUDNN_RUN_PID): a warning when no cuDNN convolution call reached the
 * preload library although the program ended well (exit status 0) with a cuDNN or CUDA library loaded. A program
 * that failed (or failed to start: a missing script, a bad argument) or never loaded one (`true`, a CPU-only run)
 * gets no warning: it had nothing for ucudnn to see, or a message of its own. (A process that calls _exit says
 * nothing, as before.)
 */
static void at_exit_status(int status, void *arg)
{
    (void)arg;
    size_t run_pid = uc_cfg_run_pid();
    if (status == 0 && calls_seen() == 0 && run_pid && run_pid == (size_t)getpid() && convolutions_possible())
        uc_log(UC_LOG_WARNING, "no cuDNN convolution call reached the preload library in this program (pid %ld), "
               "which loaded a cuDNN or CUDA library; child processes report their own. A statically linked cuDNN"
#if !defined(__x86_64__) && !defined(__aarch64__)
               ", a framework that dlopens cuDNN (JAX, TensorFlow, ONNX Runtime, Paddle: reached on x86-64 and AArch64)"
#endif
               " or functions taken with dlvsym cannot be seen: see the README, \"When ucudnn sees nothing\"",
               (long)getpid());
}
