/*
 * One instance of the kernel template file HB_TMPL_FILE, for the storage type whose HB_* macros the includer (only
 * hb_kern_tmpl.h) has just defined; they are undefined after it, ready for the next type. No include guard on
 * purpose.
 */
#include HB_TMPL_FILE
#undef HB_T
#undef HB_S
#undef HB_F
#undef HB_FC
#undef HB_LD
#undef HB_ST
#undef HB_NATIVE
