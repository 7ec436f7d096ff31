/*
 * The model clock: in UCUDNN_HOST_TIMING=model mode the backend's Find* reports modelled times, and wall-clock
 * execution times on a shared CPU cannot be compared with them. So every executed convolution also advances a
 * per-thread clock by its modelled time; a benchmark reads the clock before and after the calls it times and
 * gets the time the model assigns to exactly the calls that really ran (micro-batches included).
 */
#include "hb_desc.h"

static _Thread_local double hb_clock_ms;

void hb_model_clock_add(double ms) { hb_clock_ms += ms; }

/* Exported (host backend only, not part of cuDNN): the calling thread's accumulated modelled time in ms. */
HB_EXPORT double ucudnn_host_model_clock_ms(void) { return hb_clock_ms; }

/* Exported (host backend only): 1 when UCUDNN_HOST_TIMING=model, so a caller timing executions (the preload
 * library's check of new plans) reads the model clock above instead of the wall clock. */
HB_EXPORT int ucudnn_host_timing_model(void) { return hb_timing_is_model(); }
