/*
 * An interrupt that arrives while Python plans is raised where the program called cuDNN, not swallowed.
 *
 * The planner, the recorder and the framework source run as callbacks inside a cuDNN call: an exception cannot
 * cross C back to the program. So when a KeyboardInterrupt (Ctrl-C), SystemExit or another exception that is not
 * an error reaches them, ucudnn/_runtime.py keeps it (every cache write it interrupted has rolled back) and calls
 * ucudnn_bridge_note_interrupt; the callback then answers UCUDNN_PLAN_INTERRUPTED, the shim runs the call as
 * cuDNN alone would and plans nothing more for it, and the wrappers below schedule a pending call that raises the
 * exception in the program's main thread as soon as it runs Python again -- right after the cuDNN call returns,
 * as if the signal had arrived during the call without ucudnn. Until it is raised, no planner callback enters
 * Python (each answers UCUDNN_PLAN_INTERRUPTED at once).
 *
 * Included once, by the cffi-generated module source (Python.h already included, the extern "Python" callbacks
 * defined further down in the same file): not a header of general use.
 */
#ifndef UCUDNN_BRIDGE_DEFERRED_H
#define UCUDNN_BRIDGE_DEFERRED_H

#include <stdatomic.h>

static int _ucudnn_py_planner(const ucudnn_plan_request *, ucudnn_plan_reply *);
static void _ucudnn_py_recorder(const ucudnn_verdict *);
static int _ucudnn_py_framework(ucudnn_framework_state *);
static void *_ucudnn_py_alloc(size_t);
static void _ucudnn_py_free(void *);

/* 0: nothing kept; 1: an exception is kept, its raise not yet scheduled; 2: scheduled. */
static atomic_int ucudnn_deferred;

void ucudnn_bridge_note_interrupt(void)
{
    int none = 0;
    atomic_compare_exchange_strong(&ucudnn_deferred, &none, 1);
}

/* Runs in the main thread, with the GIL, at its next check for pending work. -1 with the exception set raises it
 * there. */
static int ucudnn_raise_deferred(void *arg)
{
    (void)arg;
    atomic_store(&ucudnn_deferred, 0);
    PyObject *runtime = PyImport_ImportModule("ucudnn._runtime");
    if (runtime == NULL)
        return -1;
    PyObject *result = PyObject_CallMethod(runtime, "_raise_deferred", NULL);
    Py_DECREF(runtime);
    if (result == NULL)
        return -1;
    Py_DECREF(result);
    return 0;
}

/* After a callback has returned (no Python frame of ours left): schedule the raise of a kept exception, once. */
static void ucudnn_schedule_raise(void)
{
    int kept = 1;
    if (atomic_compare_exchange_strong(&ucudnn_deferred, &kept, 2) && Py_AddPendingCall(ucudnn_raise_deferred, NULL))
        atomic_store(&ucudnn_deferred, 1); /* the queue was full: the next callback tries again */
}

int ucudnn_bridge_planner(const ucudnn_plan_request *request, ucudnn_plan_reply *reply)
{
    int rc = atomic_load(&ucudnn_deferred) ? UCUDNN_PLAN_INTERRUPTED : _ucudnn_py_planner(request, reply);
    ucudnn_schedule_raise();
    return rc;
}

void ucudnn_bridge_recorder(const ucudnn_verdict *verdict)
{
    if (!atomic_load(&ucudnn_deferred))
        _ucudnn_py_recorder(verdict);
    ucudnn_schedule_raise();
}

/* What the framework can allocate: unknown (1) while an interrupt waits to be raised. */
int ucudnn_bridge_framework(ucudnn_framework_state *state)
{
    int rc = atomic_load(&ucudnn_deferred) ? 1 : _ucudnn_py_framework(state);
    ucudnn_schedule_raise();
    return rc;
}

/* The framework's allocator: nothing while an interrupt waits to be raised; what was borrowed is always given back. */
void *ucudnn_bridge_alloc(size_t bytes)
{
    void *p = atomic_load(&ucudnn_deferred) ? NULL : _ucudnn_py_alloc(bytes);
    ucudnn_schedule_raise();
    return p;
}

void ucudnn_bridge_free(void *ptr)
{
    _ucudnn_py_free(ptr);
    ucudnn_schedule_raise();
}

#endif /* UCUDNN_BRIDGE_DEFERRED_H */
