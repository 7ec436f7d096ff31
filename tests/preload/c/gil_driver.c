/*
 * A host that looks like a running Python to the preload library (it exports Py_IsInitialized, the GIL state
 * calls and PyImport_ImportModule; link with -rdynamic), to test the planner start-up against a thread that
 * holds the GIL, deterministically:
 *   1. thread A (not holding the "GIL") executes a convolution: the shim starts the planner, whose
 *      PyGILState_Ensure blocks because the main thread holds the GIL;
 *   2. the main thread, holding the GIL, executes the same convolution: waiting for A's start-up would deadlock,
 *      so it must pass through (counted as startup_passthrough) and return;
 *   3. the main thread releases the GIL: A's start-up "imports ucudnn._runtime", which registers a fixed C
 *      planner (plan=...), and A's call is planned; then the main thread executes once more (planned).
 * Arguments: those of driver_common.h, plan=, algo=, ws=BYTES. Prints the statuses and the shim's stats.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_common.h"

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t gil_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gil_cv = PTHREAD_COND_INITIALIZER;
static int main_holds_gil = 1, ensure_waiting;
static __thread int holds_gil;

EXPORT int Py_IsInitialized(void) { return 1; }
EXPORT int Py_IsFinalizing(void) { return 0; }
EXPORT int PyGILState_Check(void) { return holds_gil; }
EXPORT void Py_DecRef(void *o) { (void)o; }
EXPORT void PyErr_Print(void) {}

/* Wait (at most 30 s) for cond under gil_lock; 0 if it timed out. */
static int wait_until(const int *flag, int value)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    int rc = 0;
    while (*flag != value && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&gil_cv, &gil_lock, &until);
    return *flag == value;
}

EXPORT int PyGILState_Ensure(void)
{
    pthread_mutex_lock(&gil_lock);
    ensure_waiting = 1;
    pthread_cond_broadcast(&gil_cv);
    if (!wait_until(&main_holds_gil, 0))
        fprintf(stderr, "gil_driver: the main thread never released the GIL\n");
    pthread_mutex_unlock(&gil_lock);
    holds_gil = 1;
    return 0;
}

EXPORT void PyGILState_Release(int state)
{
    (void)state;
    holds_gil = 0;
}

static int fixed_planner(const ucudnn_plan_request *req, ucudnn_plan_reply *rep)
{
    (void)req;
    return fixed_plan_reply(rep);
}

EXPORT void *PyImport_ImportModule(const char *name)
{
    static int module;
    int (*set_planner)(ucudnn_planner_fn) = (int (*)(ucudnn_planner_fn))shim_fn("ucudnn_set_planner");
    if (strcmp(name, "ucudnn._runtime") != 0 || !set_planner)
        return NULL;
    set_planner(fixed_planner);
    return &module;
}

static conv_problem P;
static conv_buffers B;
static cudnnHandle_t H;
static void *WS;
static size_t WS_BYTES;

static int run_once(void)
{
    float alpha = 1.0f, beta = 0.0f, alpha2 = 0.0f;
    return conv_run(H, &P, &B, opti("algo", 0), WS, WS_BYTES, &alpha, &beta, &alpha2);
}

static int a_status = -1;

static void *thread_a(void *arg)
{
    (void)arg;
    a_status = run_once();
    return NULL;
}

int main(int argc, char **argv)
{
    driver_init(argc, argv, "gil_driver");
    fixed_plan_parse(opt("plan", NULL));
    check("cudnnCreate", cudnnCreate(&H));
    conv_setup(&P, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
    B = (conv_buffers){calloc(P.x_elems, P.esz), calloc(P.w_elems, P.esz), calloc(P.y_elems, P.esz),
                       calloc(P.y_elems, P.esz), calloc((size_t)P.k, P.esz)};
    conv_fill(&P, B.x, P.x_elems, 1);
    conv_fill(&P, B.w, P.w_elems, 2);
    WS_BYTES = (size_t)strtoull(opt("ws", "0"), NULL, 10);
    WS = calloc(1, WS_BYTES ? WS_BYTES : 1);

    holds_gil = 1; /* the main thread holds the GIL until step 3 */
    pthread_t a;
    pthread_create(&a, NULL, thread_a, NULL);
    pthread_mutex_lock(&gil_lock);
    int started = wait_until(&ensure_waiting, 1);
    pthread_mutex_unlock(&gil_lock);
    int main_status = run_once(); /* step 2: must not wait for A */
    pthread_mutex_lock(&gil_lock);
    main_holds_gil = 0;
    holds_gil = 0;
    pthread_cond_broadcast(&gil_cv);
    pthread_mutex_unlock(&gil_lock);
    pthread_join(a, NULL);
    int after_status = run_once();

    conv_choice none;
    memset(&none, 0, sizeof none);
    report_begin(&none);
    printf(",\"start_seen\":%d,\"a_status\":%d,\"main_status\":%d,\"after_status\":%d", started, a_status,
           main_status, after_status);
    return report_end(0);
}
