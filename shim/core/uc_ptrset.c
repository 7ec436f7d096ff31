/*
 * A locked set of live buffers (uc_core.h): where the shim remembers the buffers it handed out, so that each is
 * given back by where it came from -- host scratch (uc_device.c), buffers borrowed from the framework's allocator
 * (uc_borrow.c). Planning time only; a linear scan of a small table.
 */
#include "uc_core.h"

int uc_ptrset_add(uc_ptrset *s, void *p, uc_release_fn release)
{
    int slot = -1;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->cap && slot < 0; i++)
        if (!s->slots[i].p) {
            s->slots[i] = (uc_ptrslot){p, release};
            slot = i;
        }
    pthread_mutex_unlock(&s->lock);
    return slot < 0 ? -1 : 0;
}

int uc_ptrset_take(uc_ptrset *s, void *p, uc_release_fn *release)
{
    int was = 0;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->cap && !was; i++)
        if (s->slots[i].p == p) {
            if (release)
                *release = s->slots[i].release;
            s->slots[i] = (uc_ptrslot){NULL, NULL};
            was = 1;
        }
    pthread_mutex_unlock(&s->lock);
    return was;
}
