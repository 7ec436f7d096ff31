/*
 * What the framework can allocate for a workspace: the one rule of both paths under the default (`auto`, no limit
 * of ucudnn's own) -- the bound of the plans the legacy path's Get*_v7/Find* list, and the figure below which the
 * graph path offers micro-batched variants in the heuristics results (uc_graph_offer.c).
 *
 *   the device's free memory (the driver API, where the process has a CUDA context; else
 *   UCUDNN_HOST_DEVICE_MEMORY, the host backend's stand-in; else unknown)
 * + what the framework's caching allocator holds without using it: the driver counts that memory as used, yet
 *   the framework hands it out first. PyTorch's is reserved - allocated bytes on the current device, which the
 *   framework source registered by ucudnn's Python runtime reads (ucudnn_set_framework_source); it answers only
 *   where torch is imported and its CUDA state initialized, and also says whether torch asks for deterministic
 *   algorithms (so that an offered variant is never checked against an engine torch would drop).
 *
 * On a GPU the sum is rounded down to 64 MiB, so that plans made under it are shared between calls. The source is
 * asked only where the driver (or the stand-in) gave a figure, once per query that needs one (a heuristics query,
 * a legacy Get/Find or a plan made for it), never per execution. In a Python host the runtime that registers it is
 * imported at the first such query (as at the first plan); a C/C++ host never starts an interpreter for it.
 *
 * What the sum above counts as allocatable, the device alone does not give the shim's benchmark scratch: see
 * uc_borrow.c.
 */
#include <stdatomic.h>

#include "uc_core.h"

static ucudnn_framework_fn _Atomic source;

void uc_framework_source_set(ucudnn_framework_fn fn)
{
    atomic_store(&source, fn);
}

/* The registered source; in a Python host, the runtime is imported first (it registers one). */
static ucudnn_framework_fn framework_source(void)
{
    ucudnn_framework_fn fn = atomic_load(&source);
    if (!fn && uc_python_host()) {
        int transient = 0;
        (void)uc_get_planner(&transient);
        fn = atomic_load(&source);
    }
    return fn;
}

size_t uc_framework_state(int *deterministic)
{
    int gpu = 0;
    size_t bytes = uc_device_free_memory(&gpu);
    ucudnn_framework_state state = {0, 0};
    *deterministic = uc_cfg_deterministic();
    if (!bytes || bytes >= UC_UNLIMITED)
        return bytes >= UC_UNLIMITED ? UC_UNLIMITED : 0;
    ucudnn_framework_fn fn = framework_source();
    uc_guard++; /* the framework's own calls (its driver queries) must not come back here */
    int known = fn && fn(&state) == 0;
    uc_guard--;
    if (known) {
        bytes = state.held_bytes > UC_UNLIMITED - bytes ? UC_UNLIMITED : bytes + state.held_bytes;
        *deterministic = *deterministic || state.deterministic;
    }
    const size_t grain = (size_t)64 << 20;
    if (gpu && bytes > grain)
        bytes = bytes / grain * grain;
    return bytes;
}

size_t uc_framework_memory(void)
{
    int deterministic = 0;
    return uc_framework_state(&deterministic);
}

size_t uc_planning_limit(void)
{
    size_t total = uc_cfg_total_workspace();
    if (total)
        return total;
    if (!uc_cfg_limit_auto())
        return uc_cfg_default_limit();
    size_t mem = uc_framework_memory();
    return mem ? mem : UC_UNLIMITED;
}
