/*
 * Finding the real cuDNN: lazily, at the first hooked call or intercepted dlsym that needs it (a constructor would
 * run before the framework has loaded cuDNN). All functions come from one library, so descriptors made by one copy
 * are never handed to another: the first source that has cudnnConvolutionForward wins, in the order
 *   1. dlsym(RTLD_NEXT): the library the program linked against, behind us in the global scope;
 *   2. the library an intercepted dlsym found a hooked name in (recorded in uc_lookup.c): a framework that
 *      dlopens cuDNN RTLD_LOCAL and looks every function up on its handle (JAX/XLA, ONNX Runtime, PaddlePaddle);
 *   3. dlopen(libcudnn.so.9 / .8, RTLD_NOLOAD): a copy already loaded RTLD_LOCAL (torch does this, and then
 *      RTLD_NEXT finds nothing);
 *   4. dlopen(UCUDNN_REAL_LIBCUDNN): an explicit path.
 * Every lookup uses the real dlsym (uc_dlsym), never the exported one, which would answer with our own hooks.
 * Not found: hooks answer NOT_INITIALIZED, which is what cuDNN's own front library answers when it cannot load its
 * sub-libraries, and never call through a NULL pointer -- except where the caller has its own definition of the
 * name (TensorFlow exports stubs that load cuDNN on their first call): that runs, as it would without us. Nothing
 * is cached until a library is found, so a framework that loads cuDNN after its first hooked call is found then.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "uc_config_gen.h"
#include "uc_core.h"

__thread int uc_guard __attribute__((tls_model("initial-exec")));

/* `real` is written only under resolve_lock while `current` does not point to it, and never after it does:
 * readers see &none (not found), &real (found), or NULL (never looked). */
static uc_real_table real;
static const uc_real_table none = {.major = 9};
static const uc_real_table *_Atomic current;
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;

/* A symbol that resolves into this very library (a UCUDNN_REAL_LIBCUDNN pointing at us, a copy of us loaded
 * under a libcudnn name) would recurse forever: reject it. */
static int is_self(void *sym)
{
    Dl_info self, other;
    if (!dladdr((void *)&uc_real, &self) || !dladdr(sym, &other))
        return 0;
    return self.dli_fbase == other.dli_fbase;
}

static void *lookup(void *handle, const char *name)
{
    void *sym = uc_dlsym(handle, name);
    return (sym && !is_self(sym)) ? sym : NULL;
}

static void fill_from(void *handle)
{
    void *sym;
#define UC_ONE(ret, name, params, args)                                                                        \
    sym = lookup(handle, #name);                                                                               \
    memcpy(&real.name, &sym, sizeof sym);
#define UC_EXEC UC_ONE
#define UC_QUERY UC_ONE
#define UC_BACKEND UC_ONE
#define UC_REAL UC_ONE
#define UC_OPT UC_ONE
#include "hooks.def"
#undef UC_EXEC
#undef UC_QUERY
#undef UC_BACKEND
#undef UC_REAL
#undef UC_OPT
#undef UC_ONE
}

static int all_present(void)
{
    int ok = 1;
#define UC_ONE(ret, name, params, args) ok = ok && real.name != NULL;
#define UC_REAL UC_ONE
#include "hooks.def"
#undef UC_REAL
#undef UC_ONE
    return ok;
}

/* The library `sym` lies in, reopened by its file name so every function comes from that copy (NULL if it cannot
 * be reopened). The handle a resolution uses is never closed: that reference keeps the library mapped when its
 * client dlcloses it, so the table's pointers stay valid (tests/preload/c/dlclose_reopen.c). */
static void *library_of(void *sym)
{
    Dl_info info;
    if (!sym || !dladdr(sym, &info) || !info.dli_fname || !info.dli_fname[0])
        return NULL;
    return dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
}

/* Source 1: RTLD_NEXT. */
static int try_next(void)
{
    void *sym = lookup(RTLD_NEXT, "cudnnConvolutionForward");
    if (!sym)
        return 0;
    void *handle = library_of(sym);
    fill_from(handle ? handle : RTLD_NEXT);
    return 1;
}

static int try_handle(void *handle)
{
    if (!handle || !lookup(handle, "cudnnConvolutionForward"))
        return 0;
    fill_from(handle);
    return 1;
}

static atomic_int resolving; /* set as the first resolution starts: the library has been (or is being) looked for */
static atomic_int said_missing, said_explicit;

/* One attempt, under resolve_lock: publishes &real when found, else &none (tried again at the next need). */
static void resolve_locked(void)
{
    atomic_store(&resolving, 1);
    static const char *const sonames[] = {"libcudnn.so.9", "libcudnn.so.8"};
    char explicit_path[PATH_MAX];
    uc_cfg_string(UC_VAR_UCUDNN_REAL_LIBCUDNN, explicit_path, sizeof explicit_path);

    memset(&real, 0, sizeof real);
    int found = try_next();
    if (!found)
        found = try_handle(library_of(uc_dlsym_recorded()));
    for (size_t i = 0; !found && i < sizeof sonames / sizeof sonames[0]; i++)
        found = try_handle(dlopen(sonames[i], RTLD_NOLOAD | RTLD_LAZY));
    if (!found && explicit_path[0]) {
        void *handle = dlopen(explicit_path, RTLD_LAZY | RTLD_LOCAL);
        if (!handle && !atomic_exchange(&said_explicit, 1))
            uc_log(UC_LOG_WARNING, "UCUDNN_REAL_LIBCUDNN=%s cannot be loaded: %s", explicit_path, dlerror());
        found = try_handle(handle);
    }
    if (!found) {
        memset(&real, 0, sizeof real);
        atomic_store_explicit(&current, &none, memory_order_release);
        return;
    }
    real.found = 1;
    real.descriptors = all_present();
    real.version = real.cudnnGetVersion ? real.cudnnGetVersion() : 0;
    /* cuDNN 9 encodes MAJOR*10000+..., cuDNN 8 MAJOR*1000+... */
    real.major = real.version >= 10000 ? (int)(real.version / 10000) : real.version ? (int)(real.version / 1000) : 9;
    Dl_info info;
    void *sym;
    memcpy(&sym, &real.cudnnConvolutionForward, sizeof sym);
    if (sym && dladdr(sym, &info) && info.dli_fname) {
        strncpy(real.path, info.dli_fname, sizeof real.path - 1);
        real.path[sizeof real.path - 1] = '\0';
    }
    uc_library_build(real.path, real.build, sizeof real.build);
    if (!real.descriptors)
        uc_log(UC_LOG_WARNING, "the real cuDNN at %s lacks descriptor functions the shim needs; passing through",
               real.path);
    uc_log(UC_LOG_INFO, "forwarding to %s (cudnnGetVersion %zu)", real.path, real.version);
    atomic_store_explicit(&current, &real, memory_order_release);
}

/*
 * wait: 0 gives up (NULL) when another thread holds the lock. With the guard up (inside the shim's own calls, and
 * so inside a look in progress on this thread: the real library's calls while it is loaded or asked its version)
 * nothing is looked up and nothing waited for: the table as it stands.
 */
static const uc_real_table *resolved(int wait)
{
    const uc_real_table *t = atomic_load_explicit(&current, memory_order_acquire);
    if (t == &real)
        return t;
    if (uc_guard)
        return t ? t : &none;
    if (wait ? pthread_mutex_lock(&resolve_lock) != 0 : pthread_mutex_trylock(&resolve_lock) != 0)
        return wait ? &none : NULL;
    t = atomic_load_explicit(&current, memory_order_acquire);
    if (t != &real) {
        uc_guard++;
        resolve_locked();
        uc_guard--;
        t = atomic_load_explicit(&current, memory_order_acquire);
    }
    pthread_mutex_unlock(&resolve_lock);
    return t;
}

const uc_real_table *uc_real(void)
{
    return resolved(1);
}

const uc_real_table *uc_real_try(void)
{
    return resolved(0);
}

const uc_real_table *uc_real_found(void)
{
    const uc_real_table *t = atomic_load_explicit(&current, memory_order_acquire);
    return t == &real ? t : NULL;
}

void uc_real_missing(void)
{
    if (atomic_exchange(&said_missing, 1))
        return;
    char explicit_path[PATH_MAX];
    uc_cfg_string(UC_VAR_UCUDNN_REAL_LIBCUDNN, explicit_path, sizeof explicit_path);
    uc_log(UC_LOG_WARNING,
           "no real cuDNN found (searched RTLD_NEXT, libraries looked up with dlsym, loaded libcudnn.so.9 and "
           "libcudnn.so.8, UCUDNN_REAL_LIBCUDNN=%s); cuDNN calls fail with CUDNN_STATUS_NOT_INITIALIZED until one "
           "is loaded",
           explicit_path[0] ? explicit_path : "(unset)");
}

const uc_real_table *uc_real_if_resolved(void)
{
    return atomic_load(&resolving) ? atomic_load_explicit(&current, memory_order_acquire) : NULL;
}

void *uc_callers_own(const char *name, const void *caller)
{
    Dl_info info;
    if (!caller || !dladdr(caller, &info) || !info.dli_fname || !info.dli_fname[0] || is_self((void *)caller))
        return NULL;
    void *handle = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
    if (!handle)
        return NULL;
    void *sym = lookup(handle, name);
    dlclose(handle);
    return sym;
}

/* The table as it stands, looking the library up only if nothing has yet (statuses need its major version). */
static const uc_real_table *known(void)
{
    const uc_real_table *t = atomic_load_explicit(&current, memory_order_acquire);
    return t ? t : resolved(1);
}

void uc_tensor_destroy(cudnnTensorDescriptor_t desc)
{
    if (desc)
        uc_real()->cudnnDestroyTensorDescriptor(desc);
}

int uc_status(enum uc_status_kind kind)
{
    int v8 = known()->major == 8;
    switch (kind) {
    case UC_ST_NOT_INITIALIZED:
        return v8 ? UCUDNN_V8_STATUS_NOT_INITIALIZED : CUDNN_STATUS_NOT_INITIALIZED;
    case UC_ST_BAD_PARAM:
        return v8 ? UCUDNN_V8_STATUS_BAD_PARAM : CUDNN_STATUS_BAD_PARAM;
    case UC_ST_BAD_ATTRIBUTE_TYPE:
        return v8 ? UCUDNN_V8_STATUS_BAD_PARAM : CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE;
    case UC_ST_BAD_NULL_POINTER:
        return v8 ? UCUDNN_V8_STATUS_BAD_PARAM : CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    case UC_ST_NOT_SUPPORTED:
        return v8 ? UCUDNN_V8_STATUS_NOT_SUPPORTED : CUDNN_STATUS_NOT_SUPPORTED;
    case UC_ST_ALLOC:
        return v8 ? UCUDNN_V8_STATUS_ALLOC_FAILED : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    case UC_ST_INTERNAL:
    default:
        return v8 ? UCUDNN_V8_STATUS_INTERNAL_ERROR : CUDNN_STATUS_INTERNAL_ERROR;
    }
}

int uc_status_refused(int status)
{
    if (known()->major == 8)
        return status == UCUDNN_V8_STATUS_BAD_PARAM || status == UCUDNN_V8_STATUS_NOT_SUPPORTED ||
               status == UCUDNN_V8_STATUS_INVALID_VALUE;
    return status >= 2000 && status < 4000;
}

int uc_status_alloc_failed(int status)
{
    if (known()->major == 8)
        return status == UCUDNN_V8_STATUS_ALLOC_FAILED;
    return status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
           status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
}
