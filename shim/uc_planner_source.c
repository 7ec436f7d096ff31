/*
 * Finding the planner, once per process, at the first plan-cache miss (never in a constructor: the framework
 * may not have started its interpreter yet):
 *   1. one registered with ucudnn_set_planner;
 *   2. a running Python interpreter (Py_IsInitialized via RTLD_DEFAULT): take the GIL with its own
 *      PyGILState_Ensure and import ucudnn._runtime, which registers the bridge's planner;
 *   3. no interpreter (a C/C++ host): dlopen libucudnn_planner.so from this library's directory and call
 *      ucudnn_embedded_planner_init, which starts one and registers the planner.
 * libpython is only ever reached through dlsym, so the preload library never depends on one.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "uc_internal.h"

static ucudnn_planner_fn _Atomic registered;
static atomic_int boot_state; /* 0: not tried, 1: in progress, 2: done */

UC_EXPORT int ucudnn_set_planner(ucudnn_planner_fn planner)
{
    ucudnn_planner_fn old = atomic_exchange(&registered, planner);
    if (old != planner)
        uc_cache_clear(); /* plans of another planner, or of the fallback, must not outlive the change */
    return 0;
}

static ucudnn_recorder_fn _Atomic recorder;

UC_EXPORT int ucudnn_set_recorder(ucudnn_recorder_fn fn)
{
    atomic_store(&recorder, fn);
    return 0;
}

ucudnn_recorder_fn uc_get_recorder(void)
{
    return atomic_load(&recorder);
}

static void python_import(void)
{
    int (*finalizing)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
    if (!finalizing)
        finalizing = (int (*)(void))dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
    int (*ensure)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    void (*release)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "PyGILState_Release");
    void *(*import)(const char *) = (void *(*)(const char *))dlsym(RTLD_DEFAULT, "PyImport_ImportModule");
    void (*decref)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "Py_DecRef");
    void (*print_error)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "PyErr_Print");
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
    if (!dladdr((void *)&ucudnn_set_planner, &info) || !info.dli_fname)
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
    int (*init)(void) = handle ? (int (*)(void))dlsym(handle, "ucudnn_embedded_planner_init") : NULL;
    if (!init) {
        uc_log(UC_LOG_WARNING, "cannot use the embedded planner %s: %s", path, dlerror());
        return;
    }
    int rc = init();
    if (rc != 0)
        uc_log(UC_LOG_WARNING, "the embedded planner %s failed to start (%d)", path, rc);
}

static void bootstrap(void)
{
    int (*initialized)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    uc_guard++;
    if (initialized && initialized())
        python_import();
    else
        embedded_planner();
    uc_guard--;
}

ucudnn_planner_fn uc_get_planner(int *transient)
{
    ucudnn_planner_fn fn = atomic_load(&registered);
    if (fn)
        return fn;
    int expected = 0;
    if (atomic_compare_exchange_strong(&boot_state, &expected, 1)) {
        bootstrap();
        atomic_store(&boot_state, 2);
        return atomic_load(&registered);
    }
    if (expected == 1) {
        *transient = 1;
        return NULL;
    }
    return atomic_load(&registered);
}

