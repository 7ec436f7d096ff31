/*
 * Instantiates the kernel template file HB_TMPL_FILE once per storage type. No include guard on purpose: a
 * kernel file includes it once, after defining HB_TMPL_FILE as its own name. Inside the template:
 *   HB_S        the storage type of the caller's tensors and filters: float, double, hb_half, hb_bf16
 *   HB_T        the compute type: double for double, float otherwise. Accumulators and every workspace buffer
 *   HB_F(name)  name suffixed for the storage type (_f, _d, _h, _b): the template's own functions
 *   HB_FC(name) name suffixed for the compute type (_f, _d): the BLAS wrapper and the float-only helpers
 *   HB_LD(v)    storage -> compute; HB_ST(v) compute -> storage, rounded to nearest even (identity if native)
 *   HB_NATIVE   1 when HB_S is HB_T, so the caller's buffers can go to BLAS as they are; 0 for 16-bit data
 */
#ifndef HB_TMPL_FILE
#error "define HB_TMPL_FILE before including hb_kern_tmpl.h"
#endif

#define HB_T float
#define HB_S float
#define HB_F(name) name##_f
#define HB_FC(name) name##_f
#define HB_LD(v) (v)
#define HB_ST(v) (v)
#define HB_NATIVE 1
#include "hb_kern_tmpl_one.h"

#define HB_T double
#define HB_S double
#define HB_F(name) name##_d
#define HB_FC(name) name##_d
#define HB_LD(v) (v)
#define HB_ST(v) (v)
#define HB_NATIVE 1
#include "hb_kern_tmpl_one.h"

#define HB_T float
#define HB_S hb_half
#define HB_F(name) name##_h
#define HB_FC(name) name##_f
#define HB_LD(v) hb_half_to_f(v)
#define HB_ST(v) ((hb_half)(v))
#define HB_NATIVE 0
#include "hb_kern_tmpl_one.h"

#define HB_T float
#define HB_S hb_bf16
#define HB_F(name) name##_b
#define HB_FC(name) name##_f
#define HB_LD(v) hb_bf16_to_f(v)
#define HB_ST(v) hb_f_to_bf16(v)
#define HB_NATIVE 0
#include "hb_kern_tmpl_one.h"

#undef HB_TMPL_FILE
