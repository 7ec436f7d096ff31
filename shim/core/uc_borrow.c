/*
 * Scratch for planner benchmarks borrowed from the framework's allocator (UCUDNN_SCRATCH_FROM_FRAMEWORK): where the
 * device refuses the shim's own allocation (uc_device.c's uc_scratch_alloc), what the framework's caching allocator
 * holds is asked instead -- memory uc_memory.c counts as the framework's, which the device no longer shows as free.
 * The allocator is registered with ucudnn_set_framework_allocator: by ucudnn's Python runtime in a Python host
 * (PyTorch's torch.cuda.caching_allocator_alloc/delete), or by a C/C++ host itself. Every buffer borrowed is
 * remembered with the function that gives it back, and given back when the benchmark frees it.
 *
 * A size the framework could not lend is not asked for again on that device, nor any larger one, until another
 * allocator is registered: the memory that was short stays short for the run (as the planner assumes of searches
 * short of memory), and PyTorch's allocator empties its cache before it refuses, which repeated asks would repeat.
 * Another device's memory is another matter (PyTorch's allocator lends from the calling thread's device): what one
 * device refused is remembered for it alone.
 */
#include <pthread.h>
#include <string.h>

#include "uc_core.h"

/* The buffers borrowed, each with the allocator's own function that gives it back, kept should another allocator
 * be registered meanwhile. At most 64 at once (a graph benchmark holds its tensors and one workspace); past them
 * the framework's buffer is given back at once and the benchmark goes without, as without a framework. */
UC_PTRSET(borrowed, 64);

static pthread_mutex_t borrow_lock = PTHREAD_MUTEX_INITIALIZER;
static ucudnn_framework_alloc_fn borrow_alloc;
static ucudnn_framework_free_fn borrow_free;
/* Per device (the host's at 0, device d at d + 1; devices past the table share its slots): the smallest size the
 * framework refused there (0: none), which and larger are not asked for again there. */
#define UC_BORROW_DEVICES 64
static size_t refused_from[UC_BORROW_DEVICES];

void uc_framework_allocator_set(ucudnn_framework_alloc_fn alloc, ucudnn_framework_free_fn release)
{
    pthread_mutex_lock(&borrow_lock);
    borrow_alloc = alloc && release ? alloc : NULL;
    borrow_free = alloc && release ? release : NULL;
    memset(refused_from, 0, sizeof refused_from);
    pthread_mutex_unlock(&borrow_lock);
}

void *uc_framework_scratch_alloc(size_t bytes)
{
    pthread_mutex_lock(&borrow_lock);
    ucudnn_framework_alloc_fn alloc = borrow_alloc;
    ucudnn_framework_free_fn release = borrow_free;
    pthread_mutex_unlock(&borrow_lock);
    if (!alloc)
        return NULL;
    size_t *refused = &refused_from[(unsigned)(uc_current_device() + 1) % UC_BORROW_DEVICES];
    pthread_mutex_lock(&borrow_lock);
    int refused_before = *refused && bytes >= *refused;
    pthread_mutex_unlock(&borrow_lock);
    if (refused_before)
        return NULL;
    uc_guard++; /* the framework's own calls must not come back here */
    void *p = alloc(bytes);
    uc_guard--;
    if (!p) {
        UC_COUNT(framework_scratch_refused, 1);
        pthread_mutex_lock(&borrow_lock);
        if (alloc == borrow_alloc && (!*refused || bytes < *refused))
            *refused = bytes;
        pthread_mutex_unlock(&borrow_lock);
        return NULL;
    }
    if (uc_ptrset_add(&borrowed, p, release) != 0) {
        uc_guard++;
        release(p);
        uc_guard--;
        return NULL;
    }
    UC_COUNT(framework_scratch_allocs, 1);
    return p;
}

int uc_framework_scratch_free(void *p)
{
    uc_release_fn release = NULL;
    if (!uc_ptrset_take(&borrowed, p, &release) || !release)
        return 0;
    uc_guard++;
    release(p);
    uc_guard--;
    return 1;
}
