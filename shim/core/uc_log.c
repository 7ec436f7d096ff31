/*
 * What the shim says: its log lines (the format of ucudnn.log), the counters behind the stats and the exit summary,
 * and the small string builder the JSON it writes is made with. The bottom of the preload library: it reads no
 * configuration (the configuration sets the log level here as it parses it) and calls nothing of the shim's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "uc_core.h"

uc_stats uc_stat;

/* Read by uc_log before (and while) the configuration is parsed, so it starts at the documented default. */
static atomic_int log_level = UC_LOG_WARNING;

void uc_log_set_level(int level)
{
    atomic_store(&log_level, level);
}

static void vlog(int level, const char *tag, const char *fmt, va_list ap)
{
    if (level > atomic_load_explicit(&log_level, memory_order_relaxed))
        return;
    char line[1024];
    int off = snprintf(line, sizeof line, "ucudnn: %s", tag);
    int n = vsnprintf(line + off, sizeof line - (size_t)off - 1, fmt, ap);
    size_t len = (size_t)off + (n < 0 ? 0 : (size_t)n);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    /* One write per message, so lines from several threads or processes do not interleave. */
    ssize_t rc = write(2, line, len);
    (void)rc;
}

void uc_log(int level, const char *fmt, ...)
{
    /* The format of ucudnn.log: "ucudnn: warning: ...", info untagged. */
    static const char *const tags[] = {"error: ", "warning: ", "", "debug: "};
    va_list ap;
    va_start(ap, fmt);
    vlog(level, level >= 0 && level <= UC_LOG_DEBUG ? tags[level] : "", fmt, ap);
    va_end(ap);
}

void uc_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(UC_LOG_WARNING, "", fmt, ap);
    va_end(ap);
}

/* ---- string builder ---- */

void uc_sb_printf(uc_sb *sb, const char *fmt, ...)
{
    if (sb->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = sb->cap - sb->len;
        int n = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            sb->failed = 1;
            return;
        }
        if ((size_t)n < room) {
            sb->len += (size_t)n;
            return;
        }
        size_t cap = (sb->cap ? sb->cap * 2 : 256) + (size_t)n;
        char *grown = realloc(sb->buf, cap);
        if (!grown) {
            sb->failed = 1;
            return;
        }
        sb->buf = grown;
        sb->cap = cap;
    }
}

void uc_sb_json_string(uc_sb *sb, const char *s)
{
    uc_sb_printf(sb, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            uc_sb_printf(sb, "\\%c", c);
        else if (c < 0x20)
            uc_sb_printf(sb, "\\u%04x", c);
        else
            uc_sb_printf(sb, "%c", c);
    }
    uc_sb_printf(sb, "\"");
}

char *uc_sb_take(uc_sb *sb)
{
    if (sb->failed || !sb->buf) {
        free(sb->buf);
        sb->buf = NULL;
        return NULL;
    }
    char *s = sb->buf;
    sb->buf = NULL;
    return s;
}
