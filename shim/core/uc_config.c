/*
 * UCUDNN_* variables as the preload library reads them.
 *
 * The table (names, kinds, defaults, choices, size units, boolean spellings) is generated at build time from
 * ucudnn/config.py, the single declaration, so C and Python accept exactly the same values. Every variable the
 * shim reads is parsed here, once, at the first use. A bad value in the environment is reported naming the
 * variable and what it accepts, and then the whole process runs pass-through (UCUDNN_DISABLE semantics): a
 * typo must never change results or crash the host.
 */
#include <ctype.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define UC_CONFIG_TABLES
#include "uc_config_gen.h"
#include "uc_core.h"

static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;
static atomic_ullong num[UC_VAR_COUNT]; /* SIZE bytes, BOOL 0/1, CHOICE index */
static char *str[UC_VAR_COUNT];         /* PATH/STRING values, under str_lock */
static pthread_mutex_t str_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int env_bad;

static int parse_size(const char *text, unsigned long long *out)
{
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    if (!isdigit((unsigned char)*p))
        return -1;
    unsigned long long whole = 0, frac = 0, frac_scale = 1;
    while (isdigit((unsigned char)*p)) {
        if (__builtin_mul_overflow(whole, 10ULL, &whole) || __builtin_add_overflow(whole, (unsigned)(*p - '0'), &whole))
            return -1;
        p++;
    }
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return -1;
        while (isdigit((unsigned char)*p)) {
            if (frac_scale >= 1000000000000000000ULL)
                return -1;
            frac = frac * 10 + (unsigned)(*p - '0');
            frac_scale *= 10;
            p++;
        }
    }
    while (isspace((unsigned char)*p))
        p++;
    char unit[4] = {0};
    size_t u = 0;
    if (*p && strchr("KMGTkmgt", *p))
        unit[u++] = (char)toupper((unsigned char)*p++);
    if (*p == 'i' || *p == 'I')
        unit[u++] = 'I', p++;
    if (*p == 'b' || *p == 'B')
        unit[u++] = 'B', p++;
    while (isspace((unsigned char)*p))
        p++;
    if (*p)
        return -1;
    for (size_t i = 0; i < UC_SIZE_UNIT_COUNT; i++) {
        if (strcmp(unit, uc_size_units[i].unit) != 0)
            continue;
        /* Exact in 128 bits: whole < 2^64 and frac < 10^18 < 2^60, times a scale of at most 2^40. */
        unsigned __int128 scale = uc_size_units[i].scale, part = frac * scale;
        if (part % frac_scale != 0) /* not a whole number of bytes */
            return -1;
        unsigned __int128 value = whole * scale + part / frac_scale;
        if (value > UC_SIZE_MAX_BYTES)
            return -1;
        *out = (unsigned long long)value;
        return 0;
    }
    return -1;
}

/* Digits (at most 9), then for a fraction optionally a point and at most 9 digits, with surrounding blanks: the
 * same rule as ucudnn/config.py's parse_count / parse_fraction. */
static int parse_decimal(const char *text, int fraction, double *out)
{
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    const char *start = p;
    size_t whole = 0, frac = 0;
    while (isdigit((unsigned char)*p))
        p++, whole++;
    if (whole < 1 || whole > 9)
        return -1;
    if (fraction && *p == '.') {
        p++;
        while (isdigit((unsigned char)*p))
            p++, frac++;
        if (frac < 1 || frac > 9)
            return -1;
    }
    const char *end = p;
    while (isspace((unsigned char)*p))
        p++;
    if (*p)
        return -1;
    char buf[32];
    memcpy(buf, start, (size_t)(end - start));
    buf[end - start] = '\0';
    *out = strtod(buf, NULL);
    return 0;
}

/* Index of `text` in `list`, ignoring surrounding whitespace and case; -1 if absent. */
static int word_index(const char *text, const char *const *list, size_t n)
{
    char trimmed[64];
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    size_t len = strlen(p);
    while (len && isspace((unsigned char)p[len - 1]))
        len--;
    if (len >= sizeof trimmed)
        return -1;
    memcpy(trimmed, p, len);
    trimmed[len] = '\0';
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(trimmed, list[i]) == 0)
            return (int)i;
    return -1;
}

/* Empty or only blanks: the variable counts as unset (ucudnn.config.is_blank). */
static int is_blank(const char *text)
{
    while (isspace((unsigned char)*text))
        text++;
    return *text == '\0';
}

/* `text` without its leading and trailing blanks, malloc'd. */
static char *trimmed_copy(const char *text)
{
    while (isspace((unsigned char)*text))
        text++;
    size_t len = strlen(text);
    while (len && isspace((unsigned char)text[len - 1]))
        len--;
    return strndup(text, len);
}

/* Whether the whole of `text`, trimmed, matches the POSIX extended regular expression `pattern`. */
static int matches(const char *pattern, const char *text)
{
    char anchored[256];
    char *trimmed = trimmed_copy(text);
    regex_t re;
    int ok = 0;
    if (trimmed && (size_t)snprintf(anchored, sizeof anchored, "^(%s)$", pattern) < sizeof anchored &&
        regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB) == 0) {
        ok = regexec(&re, trimmed, 0, NULL, 0) == 0;
        regfree(&re);
    }
    free(trimmed);
    return ok;
}

/* Parse `text` for variable v. Returns 0 with *value set (or *s for PATH/STRING, malloc'd), else -1 after a
 * message naming the variable and the accepted values. */
static int parse(int v, const char *text, unsigned long long *value, char **s, const char *consequence)
{
    const uc_var_decl *d = &uc_var_decls[v];
    switch (d->kind) {
    case UC_KIND_SIZE:
        if (parse_size(text, value) == 0)
            return 0;
        uc_log(UC_LOG_WARNING, "%s='%s': expected %s%s", d->name, text, UC_SIZE_RULE, consequence);
        return -1;
    case UC_KIND_LIMIT:
        if (word_index(text, (const char *const[]){"auto"}, 1) == 0) {
            *value = UC_LIMIT_AUTO;
            return 0;
        }
        if (parse_size(text, value) == 0 && *value != UC_LIMIT_AUTO)
            return 0;
        uc_log(UC_LOG_WARNING, "%s='%s': expected auto, %s%s", d->name, text, UC_SIZE_RULE, consequence);
        return -1;
    case UC_KIND_COUNT:
    case UC_KIND_FRACTION: {
        double x = 0;
        if (parse_decimal(text, d->kind == UC_KIND_FRACTION, &x) == 0) {
            if (d->kind == UC_KIND_COUNT)
                *value = (unsigned long long)x;
            else
                memcpy(value, &x, sizeof x);
            return 0;
        }
        uc_log(UC_LOG_WARNING, "%s='%s': expected %s%s", d->name, text,
               d->kind == UC_KIND_COUNT ? "a non-negative integer such as 0 or 3"
                                        : "a non-negative number such as 0 or 0.25",
               consequence);
        return -1;
    }
    case UC_KIND_BOOL:
        if (word_index(text, uc_bool_true, UC_BOOL_TRUE_COUNT) >= 0) {
            *value = 1;
            return 0;
        }
        if (word_index(text, uc_bool_false, UC_BOOL_FALSE_COUNT) >= 0) {
            *value = 0;
            return 0;
        }
        uc_log(UC_LOG_WARNING, "%s='%s': expected 1 or 0 (also true/false, yes/no, on/off)%s", d->name, text,
               consequence);
        return -1;
    case UC_KIND_CHOICE: {
        int idx = word_index(text, d->choices, (size_t)d->nchoices);
        if (idx >= 0) {
            *value = (unsigned long long)idx;
            return 0;
        }
        char accepted[256] = "";
        for (int i = 0; i < d->nchoices; i++) {
            strncat(accepted, i ? ", " : "", sizeof accepted - strlen(accepted) - 1);
            strncat(accepted, d->choices[i], sizeof accepted - strlen(accepted) - 1);
        }
        uc_log(UC_LOG_WARNING, "%s='%s': expected one of %s%s", d->name, text, accepted, consequence);
        return -1;
    }
    default:
        if (is_blank(text)) {
            *s = strdup(""); /* unset */
        } else if (d->pattern[0]) {
            if (!matches(d->pattern, text)) {
                uc_log(UC_LOG_WARNING, "%s='%s': expected %s%s", d->name, text, d->expected, consequence);
                return -1;
            }
            *s = trimmed_copy(text);
        } else {
            *s = strdup(text);
        }
        return *s ? 0 : -1;
    }
}

static void store(int v, unsigned long long value, char *s)
{
    if (uc_var_decls[v].kind == UC_KIND_PATH || uc_var_decls[v].kind == UC_KIND_STRING) {
        pthread_mutex_lock(&str_lock);
        free(str[v]);
        str[v] = s;
        pthread_mutex_unlock(&str_lock);
        return;
    }
    atomic_store(&num[v], value);
    if (v == UC_VAR_UCUDNN_LOG_LEVEL)
        uc_log_set_level((int)value);
}

static void init(void)
{
    static const char *const consequence = "; the preload library passes every call through in this process";
    /* Defaults first, so a bad value below leaves every other variable meaningful. */
    for (int v = 0; v < UC_VAR_COUNT; v++) {
        unsigned long long value = 0;
        char *s = NULL;
        if (parse(v, uc_var_decls[v].def, &value, &s, "") == 0)
            store(v, value, s);
    }
    /* The log level next, so that messages about the other variables obey it. */
    for (int pass = 0; pass < 2; pass++) {
        for (int v = 0; v < UC_VAR_COUNT; v++) {
            if (!uc_var_decls[v].shim || (pass == 0) != (v == UC_VAR_UCUDNN_LOG_LEVEL))
                continue;
            const char *raw = getenv(uc_var_decls[v].name);
            if (!raw || is_blank(raw))
                continue;
            unsigned long long value = 0;
            char *s = NULL;
            if (parse(v, raw, &value, &s, consequence) == 0)
                store(v, value, s);
            else
                atomic_store(&env_bad, 1);
        }
    }
}

static void ensure(void)
{
    pthread_once(&cfg_once, init);
}

int uc_cfg_disabled(void)
{
    ensure();
    return atomic_load_explicit(&env_bad, memory_order_relaxed) ||
           atomic_load_explicit(&num[UC_VAR_UCUDNN_DISABLE], memory_order_relaxed);
}

static unsigned long long num_of(int v)
{
    ensure();
    return atomic_load_explicit(&num[v], memory_order_relaxed);
}

size_t uc_cfg_default_limit(void)
{
    unsigned long long v = num_of(UC_VAR_UCUDNN_DEFAULT_WORKSPACE_LIMIT);
    return v == UC_LIMIT_AUTO ? SIZE_MAX : (size_t)v;
}

int uc_cfg_limit_auto(void)
{
    return num_of(UC_VAR_UCUDNN_DEFAULT_WORKSPACE_LIMIT) == UC_LIMIT_AUTO;
}

int uc_cfg_deterministic(void)
{
    return num_of(UC_VAR_UCUDNN_DETERMINISTIC) != 0;
}

int uc_cfg_verify_samples(void)
{
    return (int)num_of(UC_VAR_UCUDNN_VERIFY_SAMPLES);
}

double uc_cfg_verify_margin(void)
{
    unsigned long long bits = num_of(UC_VAR_UCUDNN_VERIFY_MARGIN);
    double x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

size_t uc_cfg_host_device_memory(void)
{
    return (size_t)num_of(UC_VAR_UCUDNN_HOST_DEVICE_MEMORY);
}

size_t uc_cfg_host_find_memory(void)
{
    char text[32];
    if (uc_cfg_string(UC_VAR_UCUDNN_HOST_FIND_MEMORY, text, sizeof text) == 0)
        return 0;
    return (size_t)strtoull(text, NULL, 10); /* digits only: the variable's pattern */
}

int uc_cfg_scratch_from_framework(void)
{
    return num_of(UC_VAR_UCUDNN_SCRATCH_FROM_FRAMEWORK) != 0;
}

int uc_cfg_host_stream_capture(void)
{
    return num_of(UC_VAR_UCUDNN_HOST_STREAM_CAPTURE) != 0;
}

int uc_cfg_host_driver(void)
{
    return num_of(UC_VAR_UCUDNN_HOST_DRIVER) != 0;
}

size_t uc_cfg_run_pid(void)
{
    return (size_t)num_of(UC_VAR_UCUDNN_RUN_PID);
}

size_t uc_cfg_total_workspace(void)
{
    ensure();
    return (size_t)atomic_load_explicit(&num[UC_VAR_UCUDNN_TOTAL_WORKSPACE_SIZE], memory_order_relaxed);
}

size_t uc_cfg_exec_cap(void)
{
    size_t total = uc_cfg_total_workspace();
    return total ? total : uc_cfg_limit_auto() ? UC_UNLIMITED : uc_cfg_default_limit();
}

int uc_cfg_policy(void)
{
    ensure();
    return (int)atomic_load_explicit(&num[UC_VAR_UCUDNN_BATCH_SIZE_POLICY], memory_order_relaxed);
}

const char *uc_cfg_policy_name(int policy)
{
    const uc_var_decl *d = &uc_var_decls[UC_VAR_UCUDNN_BATCH_SIZE_POLICY];
    return policy >= 0 && policy < d->nchoices ? d->choices[policy] : d->def;
}

int uc_cfg_policy_undivided(void)
{
    const uc_var_decl *d = &uc_var_decls[UC_VAR_UCUDNN_BATCH_SIZE_POLICY];
    int i = word_index("undivided", d->choices, (size_t)d->nchoices);
    return i < 0 ? 0 : i;
}

size_t uc_cfg_string(int var, char *buf, size_t len)
{
    ensure();
    if (len == 0)
        return 0;
    pthread_mutex_lock(&str_lock);
    const char *s = (var >= 0 && var < UC_VAR_COUNT && str[var]) ? str[var] : "";
    size_t n = strlen(s);
    snprintf(buf, len, "%s", s);
    pthread_mutex_unlock(&str_lock);
    return n;
}

int uc_cfg_set(const char *name, const char *value)
{
    ensure();
    if (!name || !value) {
        uc_log(UC_LOG_WARNING, "ucudnn_set_option: NULL name or value");
        return -1;
    }
    for (int v = 0; v < UC_VAR_COUNT; v++) {
        if (strcmp(name, uc_var_decls[v].name) != 0)
            continue;
        if (!uc_var_decls[v].shim) {
            uc_log(UC_LOG_WARNING, "ucudnn_set_option: %s is not read by the preload library", name);
            return -1;
        }
        unsigned long long parsed = 0;
        char *s = NULL;
        const char *text = is_blank(value) ? uc_var_decls[v].def : value;
        if (parse(v, text, &parsed, &s, "; the setting is unchanged") != 0)
            return -1;
        store(v, parsed, s);
        if (v == UC_VAR_UCUDNN_REAL_LIBCUDNN)
            uc_log(UC_LOG_INFO, "UCUDNN_REAL_LIBCUDNN only matters before the first cuDNN call");
        return 0;
    }
    uc_log(UC_LOG_WARNING, "ucudnn_set_option: unknown variable '%s'", name);
    return -1;
}
