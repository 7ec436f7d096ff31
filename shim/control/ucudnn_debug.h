/*
 * Test-only exports of libucudnn.so (in the version script like the control API): they let tests check the
 * shim's descriptor reading and cloning against a real libcudnn without a GPU. Not part of the stable API.
 */
#ifndef UCUDNN_DEBUG_H
#define UCUDNN_DEBUG_H

#include <stddef.h>

#include "ucudnn/cudnn_abi.h"

/*
 * The canonical kernel key of a call with these descriptors (op: UCUDNN_OP_*; x is dx for BackwardData, y is
 * dy for the backward ops) written into buf. Returns the length needed, or 0 if the shim would not plan the
 * call (the reason is logged at info level).
 */
size_t ucudnn_debug_kernel_key(int op, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                               cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, char *buf, size_t len);

/*
 * Clone tensor descriptor `src` at N = batch exactly as plans do (same strides, nStride unchanged), into a new
 * descriptor of the real library (the caller destroys it with cudnnDestroyTensorDescriptor). 0 or a status.
 */
int ucudnn_debug_clone_tensor(cudnnTensorDescriptor_t src, int batch, cudnnTensorDescriptor_t *out);

/*
 * The graph the shim resolved for a finalized execution plan (graph/uc_graph_hooks.c), as JSON: {"convolution": bool,
 * "why_not": reason or null, "n", "engine", "notes", "ops", "tensors", "key", "parts" and "alternative" (the plan
 * the shim runs and the undivided choice it is checked against, as runs of {"batch", "engine", "count"}; empty
 * lists when none), "decided" (0 not yet, 1 the shim's, -1 the caller's plan), "source" ("planner", "fallback" or
 * null), "runs" ("caller", "plan" or "alternative"), "checking" (the two still timed against each other),
 * "workspace" (the answer to the plan's workspace query), "full_workspace"}; "{}" for a plan it does not know.
 * Returns the length needed.
 */
size_t ucudnn_debug_graph_json(void *plan, char *buf, size_t len);

/* Backend descriptors recorded now (each dropped when its descriptor is destroyed). */
size_t ucudnn_debug_graph_records(void);

/* dlsym lookups answered with a hook before the preload library's constructors ran (uc_dlsym.c). */
int ucudnn_debug_dlsym_early(void);

/* What the framework can allocate, as the shim reckons it now (uc_memory.c); 0 when unknown. */
size_t ucudnn_debug_framework_memory(void);

#endif /* UCUDNN_DEBUG_H */
