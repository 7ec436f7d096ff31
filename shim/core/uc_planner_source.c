/*
 * Finding the planner, once per process, at the first plan-cache miss (never in a constructor: the framework
 * may not have started its interpreter yet):
 *   1. one registered with ucudnn_set_planner;
 *   2. a running Python interpreter (Py_IsInitialized via RTLD_DEFAULT): take the GIL with its own
 *      PyGILState_Ensure and import ucudnn._runtime, which registers the bridge's planner;
 *   3. no interpreter (a C/C++ host): dlopen libucudnn_planner.so from this library's directory and call
 *      ucudnn_embedded_planner_init, which starts one and registers the planner.
 * libpython is only ever reached through dlsym, so the preload library never depends on one.
 * Other threads that need the planner meanwhile wait for it (at most UC_BOOT_WAIT_S), except a thread that may
 * hold the Python GIL (the start-up takes it): that one passes through, counted as startup_passthrough.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "uc_core.h"

static ucudnn_planner_fn _Atomic registered;
static atomic_int boot_state; /* 0: not tried, 1: in progress, 2: done */
/* Threads that arrive while another one starts the planner wait for it here, at most UC_BOOT_WAIT_S. */
#define UC_BOOT_WAIT_S 60
static pthread_mutex_t boot_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t boot_done = PTHREAD_COND_INITIALIZER;
static atomic_int wait_announced, timeout_announced, gil_announced;
/* When the start-up began (CLOCK_REALTIME seconds): every waiter waits until UC_BOOT_WAIT_S after it, not each a
 * fresh UC_BOOT_WAIT_S -- past it, calls pass through at once. */
static _Atomic long long boot_started_s;

ucudnn_planner_fn uc_planner_set(ucudnn_planner_fn planner)
{
    return atomic_exchange(&registered, planner);
}

static ucudnn_recorder_fn _Atomic recorder;

void uc_recorder_set(ucudnn_recorder_fn fn)
{
    atomic_store(&recorder, fn);
}

ucudnn_recorder_fn uc_get_recorder(void)
{
    return atomic_load(&recorder);
}

static void python_import(void)
{
    int (*finalizing)(void) = (int (*)(void))uc_dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
    if (!finalizing)
        finalizing = (int (*)(void))uc_dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
    int (*ensure)(void) = (int (*)(void))uc_dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    void (*release)(int) = (void (*)(int))uc_dlsym(RTLD_DEFAULT, "PyGILState_Release");
    void *(*import)(const char *) = (void *(*)(const char *))uc_dlsym(RTLD_DEFAULT, "PyImport_ImportModule");
    void (*decref)(void *) = (void (*)(void *))uc_dlsym(RTLD_DEFAULT, "Py_DecRef");
    void (*print_error)(void) = (void (*)(void))uc_dlsym(RTLD_DEFAULT, "PyErr_Print");
    if (finalizing && finalizing())
        return;
    if (!ensure || !release || !import || !decref) {
        uc_log(UC_LOG_WARNING, "a Python interpreter is running but its C API is not visible; no planner");
        return;
    }
    int gil = ensure();
    void *module = import("ucudnn._runtime");
    if (module) {
        decref(module);
    } else {
        uc_log(UC_LOG_WARNING, "cannot import ucudnn._runtime in this Python process (the error follows)");
        if (print_error)
            print_error();
    }
    release(gil);
}

static void embedded_planner(void)
{
    Dl_info info;
    char path[PATH_MAX];
    if (!dladdr((void *)&uc_get_planner, &info) || !info.dli_fname)
        return;
    const char *slash = strrchr(info.dli_fname, '/');
    int dir_len = slash ? (int)(slash - info.dli_fname) : 1;
    snprintf(path, sizeof path, "%.*s/libucudnn_planner.so", dir_len, slash ? info.dli_fname : ".");
    if (access(path, R_OK) != 0) {
        uc_log(UC_LOG_INFO, "no embedded planner at %s", path);
        return;
    }
    /* RTLD_GLOBAL: the interpreter it starts loads extension modules that expect libpython's symbols there. */
    void *handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    int (*init)(void) = handle ? (int (*)(void))uc_dlsym(handle, "ucudnn_embedded_planner_init") : NULL;
    if (!init) {
        uc_log(UC_LOG_WARNING, "cannot use the embedded planner %s: %s", path, dlerror());
        return;
    }
    int rc = init();
    if (rc != 0)
        uc_log(UC_LOG_WARNING, "the embedded planner %s failed to start (%d)", path, rc);
}

int uc_python_host(void)
{
    int (*initialized)(void) = (int (*)(void))uc_dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    return initialized && initialized();
}

static void bootstrap(void)
{
    uc_guard++;
    if (uc_python_host())
        python_import();
    else
        embedded_planner();
    uc_guard--;
}

/* 1 if this thread may hold the GIL of a running interpreter (then it must not wait for a start-up that takes
 * the GIL: the starting thread would wait for it in turn). Unknown counts as held. */
static int may_hold_gil(void)
{
    int (*initialized)(void) = (int (*)(void))uc_dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    int (*check)(void) = (int (*)(void))uc_dlsym(RTLD_DEFAULT, "PyGILState_Check");
    return initialized && initialized() && (!check || check());
}

/* Another thread is starting the planner: wait for it, bounded, unless that could deadlock. 1 when it is done. */
static int wait_for_start(void)
{
    if (may_hold_gil()) {
        if (!atomic_exchange(&gil_announced, 1))
            uc_log(UC_LOG_INFO, "a thread holding the Python GIL passes through while another thread starts the "
                                "planner (waiting could deadlock); counted as startup_passthrough");
        return 0;
    }
    if (!atomic_exchange(&wait_announced, 1))
        uc_log(UC_LOG_INFO, "waiting (at most %d s) for the planner another thread is starting", UC_BOOT_WAIT_S);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long started = atomic_load(&boot_started_s); /* 0: the starting thread has not stored it yet */
    struct timespec until = {(time_t)((started ? started : (long long)now.tv_sec) + UC_BOOT_WAIT_S), 0};
    int rc = now.tv_sec >= until.tv_sec ? ETIMEDOUT : 0; /* the start-up's deadline has passed: no wait */
    pthread_mutex_lock(&boot_lock);
    while (atomic_load(&boot_state) == 1 && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&boot_done, &boot_lock, &until);
    pthread_mutex_unlock(&boot_lock);
    if (atomic_load(&boot_state) == 1) {
        if (!atomic_exchange(&timeout_announced, 1))
            uc_log(UC_LOG_WARNING, "the planner has not started within %d s; calls pass through meanwhile "
                                   "(counted as startup_passthrough)", UC_BOOT_WAIT_S);
        return 0;
    }
    return 1;
}

ucudnn_planner_fn uc_get_planner(int *transient)
{
    ucudnn_planner_fn fn = atomic_load(&registered);
    if (fn)
        return fn;
    int expected = 0;
    if (atomic_compare_exchange_strong(&boot_state, &expected, 1)) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        atomic_store(&boot_started_s, (long long)now.tv_sec);
        bootstrap();
        pthread_mutex_lock(&boot_lock);
        atomic_store(&boot_state, 2);
        pthread_cond_broadcast(&boot_done);
        pthread_mutex_unlock(&boot_lock);
        return atomic_load(&registered);
    }
    if (expected == 1 && !wait_for_start()) {
        *transient = 1;
        return NULL;
    }
    return atomic_load(&registered);
}

