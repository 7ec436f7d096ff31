/*
 * The identity of a loaded library for cache keys: what it is (its GNU build-id, the linker's hash of its
 * contents), not where it is installed. A new virtual environment or a reinstall of the same build finds the
 * benchmarks of the old one.
 */
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "uc_core.h"

typedef struct {
    const char *path;
    char *out;
    size_t len;
    int found;
} build_query;

static size_t align4(size_t n)
{
    return (n + 3) & ~(size_t)3;
}

/* The NT_GNU_BUILD_ID note in one PT_NOTE segment, as hex into q->out. */
static int read_note(const unsigned char *p, size_t size, build_query *q)
{
    size_t off = 0;
    while (off + sizeof(ElfW(Nhdr)) <= size) {
        ElfW(Nhdr) nh;
        memcpy(&nh, p + off, sizeof nh);
        size_t name_at = off + sizeof nh, desc_at = name_at + align4(nh.n_namesz);
        if (desc_at > size || nh.n_descsz > size - desc_at)
            return 0;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(p + name_at, "GNU", 4) == 0 && nh.n_descsz &&
            q->len > 3 + 2 * (size_t)nh.n_descsz) {
            size_t w = (size_t)snprintf(q->out, q->len, "id:");
            for (size_t i = 0; i < nh.n_descsz; i++)
                w += (size_t)snprintf(q->out + w, q->len - w, "%02x", p[desc_at + i]);
            return 1;
        }
        off = desc_at + align4(nh.n_descsz);
    }
    return 0;
}

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    build_query *q = arg;
    if (!info->dlpi_name || strcmp(info->dlpi_name, q->path) != 0)
        return 0;
    for (int i = 0; i < info->dlpi_phnum && !q->found; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_NOTE)
            q->found = read_note((const unsigned char *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz, q);
    }
    return 1;
}

void uc_library_build(const char *path, char *out, size_t len)
{
    if (!len)
        return;
    snprintf(out, len, "unknown");
    if (!path || !path[0])
        return;
    build_query q = {path, out, len, 0};
    dl_iterate_phdr(visit, &q);
    struct stat sb;
    if (!q.found && stat(path, &sb) == 0)
        snprintf(out, len, "size:%lld", (long long)sb.st_size);
}
