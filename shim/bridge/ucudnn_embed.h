/*
 * libucudnn_planner.so: the planner for C/C++ hosts, which have no Python interpreter of their own.
 *
 * libucudnn.so dlopens this library from its own directory on the first plan-cache miss of a process with no
 * running interpreter and calls ucudnn_embedded_planner_init() once. That starts an interpreter (cffi
 * embedding mode) on the install's sys.path and imports ucudnn._runtime, which registers the planner with the
 * shim through ucudnn_set_planner(); afterwards the shim calls the planner like in a Python host.
 */
#ifndef UCUDNN_EMBED_H
#define UCUDNN_EMBED_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Start the embedded interpreter and register the planner. Returns 0 when the planner is registered, non-zero
 * otherwise (the reason is on stderr, prefixed "ucudnn:"). Never aborts the process; calling it again after a
 * success returns 0 at once, after a failure returns the same failure. Must not be called in a process where an
 * interpreter is already running (the shim uses that interpreter instead): that returns non-zero.
 */
int ucudnn_embedded_planner_init(void);

/* Internal, between the C start-up code and the cffi module. */

/* The embedding entry point that runs the start-up Python code: 1 when the planner is registered, else 0. */
int ucudnn_embed_start(void);

/* Absolute path of this library as the dynamic linker loaded it (static storage; never NULL, maybe ""). */
const char *ucudnn_embed_library_path(void);

#ifdef __cplusplus
}
#endif

#endif /* UCUDNN_EMBED_H */
