/*
 * dlsym, interposed: the door of frameworks that load cuDNN privately (JAX/XLA, TensorFlow, ONNX Runtime,
 * PaddlePaddle: dlopen(RTLD_LOCAL), then dlsym(handle, name) for every function), which plain LD_PRELOAD never
 * sees. A lookup of a hooked name whose real answer is the very function the shim forwards that hook to (the
 * resolver's table) returns the hook instead, which calls that function. The first answer found in a
 * libcudnn.so* file is recorded: that is how the resolver learns which library the framework loaded. Every other
 * lookup is the real dlsym, entered by a tail jump from the assembly entry below, so the caller's return address
 * -- what dlsym(RTLD_NEXT, ...) is relative to -- is untouched at any optimisation level.
 *
 * Passed through without a look: RTLD_DEFAULT and RTLD_NEXT (they already find the hooks, or must not), names
 * that are not hooked, and every lookup a thread makes while the shim is calling the real library (cuDNN 9's
 * front library dlsyms the same names in its sub-libraries; TensorFlow's stubs dlsym the name they were called
 * for: redirecting those would recurse). Passed through after a look: answers in a sub-library
 * (libcudnn_cnn.so.9) or in another copy of cuDNN than the one the shim forwards to (counted: its calls are not
 * seen, and never mixed with the other copy's descriptors). The intercepted dlsym never waits for a lock.
 *
 * The shim's own lookups go to libc's dlsym (core/uc_lookup.c). Lookups pass through to the next dlsym after this
 * library, which is glibc's unless another interposer was preloaded after us. An unversioned export interposes
 * callers bound to either version. dlvsym itself is not interposed.
 *
 * x86-64 and AArch64 have the assembly entry; elsewhere dlsym is not exported (a C wrapper would make itself the
 * caller of every RTLD_NEXT lookup) and frameworks that dlopen cuDNN are not reached.
 */
#include <dlfcn.h>
#include <string.h>

#include "uc_control.h"

/* The next dlsym after this library, where lookups pass through: glibc's, or another interposer preloaded after us
 * (dlvsym with a version skips unversioned definitions, so libc's alone would jump over such an interposer). */
static _Atomic(uc_dlsym_fn) next_dlsym;

UC_BEFORE_ASAN static uc_dlsym_fn pass_fn(void)
{
    uc_dlsym_fn f = atomic_load_explicit(&next_dlsym, memory_order_acquire), libc;
    if (f || !(libc = uc_dlsym_libc()))
        return f;
    void *p = libc(RTLD_NEXT, "dlsym"); /* the caller is this library: the first definition after it */
    if (p)
        memcpy(&f, &p, sizeof f);
    else
        f = libc;
    atomic_store_explicit(&next_dlsym, f, memory_order_release);
    return f;
}

/* ---- hooks by name ---- */

static const char *const hook_names[] = {
#define UC_NAME(ret, name, params, args) #name,
#define UC_EXEC UC_NAME
#define UC_QUERY UC_NAME
#define UC_BACKEND UC_NAME
#include "hooks.def"
#undef UC_EXEC
#undef UC_QUERY
#undef UC_BACKEND
#undef UC_NAME
};
#define UC_NHOOKS ((int)(sizeof hook_names / sizeof hook_names[0]))

static const size_t hook_fields[] = {
#define UC_FIELD_AT(ret, name, params, args) offsetof(uc_real_table, name),
#define UC_EXEC UC_FIELD_AT
#define UC_QUERY UC_FIELD_AT
#define UC_BACKEND UC_FIELD_AT
#include "hooks.def"
#undef UC_EXEC
#undef UC_QUERY
#undef UC_BACKEND
#undef UC_FIELD_AT
};

static const unsigned char hook_lengths[] = {
#define UC_LENGTH(ret, name, params, args) sizeof #name - 1,
#define UC_EXEC UC_LENGTH
#define UC_QUERY UC_LENGTH
#define UC_BACKEND UC_LENGTH
#include "hooks.def"
#undef UC_EXEC
#undef UC_QUERY
#undef UC_BACKEND
#undef UC_LENGTH
};

/* hooks.def's index of a hooked name, -1 if `name` is not hooked. */
static int hook_index(const char *name)
{
    /* Most lookups in a process are not cuDNN's: one comparison turns them away; most of cuDNN's 240-odd names
     * are not hooked: their length turns them away from all but a few. */
    if (strncmp(name, "cudnn", 5) != 0)
        return -1;
    size_t len = strlen(name);
    for (int i = 0; i < UC_NHOOKS; i++)
        if (hook_lengths[i] == len && memcmp(name + 5, hook_names[i] + 5, len - 5) == 0)
            return i;
    return -1;
}

/* Table r's real function for hook i (NULL if absent). */
static void *real_hook(const uc_real_table *r, int i)
{
    void *fn;
    memcpy(&fn, (const char *)r + hook_fields[i], sizeof fn);
    return fn;
}

/* ---- what the intercepted lookups found ---- */

/* libcudnn.so, libcudnn.so.9, libcudnn.so.9.19.0; not libcudnn_cnn.so.9 (a sub-library), not libucudnn.so. */
static int front_library_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libcudnn.so", 11) == 0 && (base[11] == '\0' || base[11] == '.');
}

/* Where this library is loaded (it stays loaded: nothing here is cached across a reload). */
static void *self_base(void)
{
    static void *_Atomic base;
    void *b = atomic_load_explicit(&base, memory_order_relaxed);
    Dl_info self;
    if (!b && dladdr((void *)&uc_dlsym, &self))
        atomic_store_explicit(&base, b = self.dli_fbase, memory_order_relaxed);
    return b;
}

static atomic_int other_copy_said;

/*
 * Hook i for a lookup whose real answer is `sym`, or NULL to pass the lookup through. The hook calls the real
 * library's function: redirect only when that is exactly the answer. An answer in a libcudnn.so* file is recorded
 * and, if nothing has yet, resolves the real library now (the resolver learns it from the record); an answer in
 * any other file never resolves anything (a sub-library's lookups must not pick the real library early), so it
 * is hooked only if that file is the library already chosen (UCUDNN_REAL_LIBCUDNN under another name).
 */
static void *redirect(int i, void *sym)
{
    const uc_real_table *r = uc_real_found();
    if (r && real_hook(r, i) == sym) /* the common case once resolved: no dladdr (never ours: see fill_from) */
        return uc_hook_address(i);
    Dl_info info;
    if (!dladdr(sym, &info) || info.dli_fbase == self_base() || !info.dli_fname ||
        !front_library_name(info.dli_fname))
        return NULL;
    uc_dlsym_record(sym);
    if (!r) {
        r = uc_real_try();
        if (!r || !r->found)
            return NULL;
        if (real_hook(r, i) == sym)
            return uc_hook_address(i);
    }
    UC_COUNT(dlsym_other_cudnn, 1);
    if (!atomic_exchange(&other_copy_said, 1))
        uc_log(UC_LOG_WARNING, "%s looked up in %s, another cuDNN than the one the shim forwards to (%s): calls "
               "through that library pass by unseen", hook_names[i], info.dli_fname, r->path);
    return NULL;
}

static atomic_int constructed, early_hooked;

__attribute__((constructor)) static void mark_constructed(void)
{
    atomic_store(&constructed, 1);
}

int uc_dlsym_early(void)
{
    return atomic_load(&early_hooked);
}

/*
 * The C half of the exported dlsym (the entry below): NULL when *answer is what dlsym returns (a hook), else the
 * function to jump to with the caller's arguments and return address as they came (the real dlsym).
 */
UC_BEFORE_ASAN __attribute__((visibility("hidden"), used)) void *uc_dlsym_route(void *handle, const char *name,
                                                                                void **answer)
{
    *answer = NULL;
    uc_dlsym_fn f = uc_dlsym_libc(), next = pass_fn();
    if (!f || !next)
        return NULL; /* never seen: glibc always has one; dlsym then answers NULL */
    void *jump;
    memcpy(&jump, &next, sizeof jump);
    if (handle == RTLD_DEFAULT || handle == RTLD_NEXT || !name || uc_guard)
        return jump;
    int i = hook_index(name);
    if (i < 0)
        return jump;
    void *sym = f(handle, name), *hook = sym ? redirect(i, sym) : NULL;
    if (!hook)
        return jump; /* the real dlsym looks again, for the caller (and sets dlerror as it would) */
    UC_COUNT(dlsym_hooked, 1);
    if (!atomic_load(&constructed))
        atomic_fetch_add(&early_hooked, 1);
    *answer = hook;
    return NULL;
}

#if defined(__x86_64__)
/*
 * void *dlsym(void *handle, const char *name): saves the arguments, asks uc_dlsym_route, then either returns its
 * answer or restores the arguments and jumps to the real dlsym, whose caller is then the original caller.
 * endbr64: a valid indirect-branch target under CET (a no-op on CPUs without it).
 */
__asm__(".pushsection .text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        ".p2align 4\n"
        "dlsym:\n"
        ".cfi_startproc\n"
        "    endbr64\n"
        "    pushq %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    pushq %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    subq $8, %rsp\n" /* the answer's slot; the stack is 16-byte aligned at the call */
        ".cfi_adjust_cfa_offset 8\n"
        "    movq %rsp, %rdx\n"
        "    call uc_dlsym_route\n"
        "    testq %rax, %rax\n"
        "    jnz 1f\n"
        "    movq (%rsp), %rax\n"
        "    addq $24, %rsp\n"
        ".cfi_adjust_cfa_offset -24\n"
        "    ret\n"
        ".cfi_adjust_cfa_offset 24\n"
        "1:  movq %rax, %r11\n"
        "    addq $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    popq %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    popq %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    jmp *%r11\n"
        ".cfi_endproc\n"
        ".size dlsym, .-dlsym\n"
        ".popsection\n");
#elif defined(__aarch64__)
/*
 * The same on AArch64, where the return address is in x30: the entry saves x29/x30 and the arguments, asks
 * uc_dlsym_route, restores x30 and either returns its answer or restores x0 and x1 and branches to the real dlsym
 * through x16, so that glibc's dlsym reads the original caller in x30. hint #34 is BTI c (a valid target of BLR,
 * and of BR through x16/x17 as a PLT makes); hint #25/#29 are PACIASP/AUTIASP, signing x30 while it is on the
 * stack. Each is a no-op on CPUs without the feature.
 */
__asm__(".pushsection .text\n"
        ".globl dlsym\n"
        ".type dlsym, %function\n"
        ".p2align 4\n"
        "dlsym:\n"
        ".cfi_startproc\n"
        "    hint #34\n"
        "    hint #25\n"
        ".cfi_negate_ra_state\n"
        "    stp x29, x30, [sp, #-48]!\n"
        ".cfi_def_cfa_offset 48\n"
        ".cfi_offset 29, -48\n"
        ".cfi_offset 30, -40\n"
        "    mov x29, sp\n"
        "    stp x0, x1, [sp, #16]\n"
        "    add x2, sp, #32\n" /* the answer's slot */
        "    bl uc_dlsym_route\n"
        "    mov x16, x0\n" /* the real dlsym, or 0: the answer is in its slot */
        "    ldp x0, x1, [sp, #16]\n"
        "    cbnz x16, 1f\n"
        "    ldr x0, [sp, #32]\n"
        "1:  ldp x29, x30, [sp], #48\n"
        ".cfi_def_cfa_offset 0\n"
        ".cfi_restore 29\n"
        ".cfi_restore 30\n"
        "    hint #29\n"
        ".cfi_negate_ra_state\n"
        "    cbz x16, 2f\n"
        "    br x16\n"
        "2:  ret\n"
        ".cfi_endproc\n"
        ".size dlsym, .-dlsym\n"
        ".popsection\n");
#endif
