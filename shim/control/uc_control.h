/*
 * The exported side of the preload library, over both paths: the generated cuDNN entry points (uc_entries.c), the
 * interposed dlsym (uc_dlsym.c), the ucudnn_* functions (uc_api.c), the stats and the exit summary (uc_report.c).
 */
#ifndef UC_CONTROL_H
#define UC_CONTROL_H

#include "uc_graph.h"
#include "uc_legacy.h"

/* Hook i's own entry point, i in hooks.def's order of its UC_EXEC, UC_QUERY and UC_BACKEND entries (a hidden
 * alias: never another object's definition of the name). uc_entries.c */
void *uc_hook_address(int i);
/* Stats as JSON (malloc'd, NULL when memory is short) and the planner's latest division (uc_report.c). */
char *uc_stats_text(void);
int uc_report_division(int kernels, size_t budget_bytes, size_t workspace_bytes, double time_ms);
int uc_report_shared_benchmarks(int read, int taken_over, double waited_ms);
/* dlsym lookups answered with a hook before the library's constructors ran (uc_dlsym.c). */
int uc_dlsym_early(void);

#endif /* UC_CONTROL_H */
