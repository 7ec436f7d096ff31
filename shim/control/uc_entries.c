/*
 * The exported cuDNN entry points, generated from hooks.def: the hooked cudnn* functions of both paths.
 *
 * Every hook goes through the same gate: the real function resolved (else the caller's own definition of the name,
 * which is what it would have called without us -- TensorFlow's stubs, which load cuDNN themselves -- else the
 * status cuDNN gives without its libraries), the per-thread guard (the shim's own calls into the real library or
 * the planner are never intercepted), UCUDNN_DISABLE and readable descriptors; only then the hook proper: the legacy
 * path's (legacy/uc_exec.c, legacy/uc_query.c) or the graph path's (graph/uc_graph_hooks.c). The entries are also
 * what an intercepted dlsym answers (uc_dlsym.c), through hidden aliases.
 */
#include <string.h>

#include "uc_control.h"

/* kind: 1 an execution, 0 a query, 2 a graph-API call (counted apart: a graph is built from many of them) */
#define UC_GATE(kind, ret, name, params, args)                                                               \
    UC_EXPORT ret name params                                                                                   \
    {                                                                                                           \
        const uc_real_table *r = uc_real();                                                                     \
        if (uc_guard) {                                                                                         \
            if (!r->name)                                                                                       \
                return (ret)uc_status(r->found ? UC_ST_NOT_SUPPORTED : UC_ST_NOT_INITIALIZED);                  \
            return r->name args;                                                                                \
        }                                                                                                       \
        if (kind == 1)                                                                                          \
            UC_COUNT(calls, 1);                                                                                 \
        else if (kind == 0)                                                                                     \
            UC_COUNT(queries, 1);                                                                               \
        else                                                                                                    \
            UC_COUNT(graph_calls, 1);                                                                           \
        if (!r->name) {                                                                                         \
            UC_COUNT(missing_real, 1);                                                                          \
            if (kind == 1)                                                                                      \
                UC_COUNT(passthrough, 1);                                                                       \
            void *own = uc_callers_own(#name, __builtin_return_address(0));                                     \
            if (!own) {                                                                                         \
                if (!r->found)                                                                                  \
                    uc_real_missing();                                                                          \
                return (ret)uc_status(r->found ? UC_ST_NOT_SUPPORTED : UC_ST_NOT_INITIALIZED);                  \
            }                                                                                                   \
            ret(*fn) params;                                                                                    \
            memcpy(&fn, &own, sizeof fn);                                                                       \
            uc_guard++;                                                                                         \
            ret rv = fn args;                                                                                   \
            uc_guard--;                                                                                         \
            return rv;                                                                                          \
        }                                                                                                       \
        if (!r->descriptors || uc_cfg_disabled()) {                                                             \
            if (kind == 1)                                                                                      \
                UC_COUNT(passthrough, 1);                                                                       \
            uc_guard++;                                                                                         \
            ret rv = r->name args;                                                                              \
            uc_guard--;                                                                                         \
            return rv;                                                                                          \
        }                                                                                                       \
        return uc_hook_##name args;                                                                             \
    }                                                                                                           \
    ret uc_self_##name params __attribute__((alias(#name), visibility("hidden")));
#define UC_EXEC(ret, name, params, args) UC_GATE(1, ret, name, params, args)
#define UC_QUERY(ret, name, params, args) UC_GATE(0, ret, name, params, args)
#define UC_BACKEND(ret, name, params, args) UC_GATE(2, ret, name, params, args)
#include "hooks.def"
#undef UC_GATE

/* What an intercepted dlsym answers for hook i: our own entry, by a hidden alias (taking the exported name's
 * address would go through the GOT, which another object defining the name could own). */
void *uc_hook_address(int i)
{
    typedef void (*entry)(void);
    static const entry entries[] = {
#define UC_ENTRY(ret, name, params, args) (entry)uc_self_##name,
#define UC_EXEC UC_ENTRY
#define UC_QUERY UC_ENTRY
#define UC_BACKEND UC_ENTRY
#include "hooks.def"
#undef UC_EXEC
#undef UC_QUERY
#undef UC_BACKEND
#undef UC_ENTRY
    };
    void *p = NULL;
    if (i >= 0 && i < (int)(sizeof entries / sizeof entries[0]))
        memcpy(&p, &entries[i], sizeof p);
    return p;
}
