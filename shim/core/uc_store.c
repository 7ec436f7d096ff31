/*
 * Plans stored in the SQLite cache (the file ucudnn/cache.py writes), read-only: the tier between the embedded
 * planner and the built-in fallback. A C/C++ host whose planner cannot start still runs the plans that an
 * earlier run with a planner (a Python host or the embedded planner) stored for the same kernel and device.
 * Also the checks of plans on real executions stored there (uc_store_verdict), for the graph path's offered
 * variants, which no planner decides.
 *
 * libsqlite3 is not a link dependency of the preload library: it is dlopened (RTLD_LOCAL) at the first lookup
 * and reached through a handful of dlsym'd functions declared here with opaque types. No libsqlite3, no file,
 * a file that is not a ucudnn cache: the tier is unavailable, never an error. One read-only connection per
 * lookup (a lookup only happens on a plan-cache miss), so threads share nothing but the library handle.
 * Parameterised SQL only. What a row holds is parsed strictly here and then validated by the caller
 * (legacy/uc_planning.c) exactly like a planner's reply (sizes, algorithms, the real library's workspace,
 * determinism) before it is ever executed.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uc_config_gen.h"
#include "uc_core.h"

/* ---- the part of the SQLite C API used here (stable since SQLite 3.5) ---- */

typedef struct uc_sqlite3 uc_sqlite3;
typedef struct uc_sqlite3_stmt uc_sqlite3_stmt;
#define UC_SQLITE_OK 0
#define UC_SQLITE_ROW 100
#define UC_SQLITE_DONE 101
#define UC_SQLITE_OPEN_READONLY 0x00000001
#define UC_SQLITE_INTEGER 1
#define UC_SQLITE_FLOAT 2
#define UC_SQLITE_TEXT 3
#define UC_SQLITE_STATIC ((void (*)(void *))0)

/* "ucDN", PRAGMA application_id of ucudnn/cache.py (APPLICATION_ID) and its schema (SCHEMA_VERSION). */
#define UC_CACHE_APPLICATION_ID 0x7563444E
#define UC_CACHE_SCHEMA_VERSION 1
/* The longest a lookup waits for another process holding the cache locked, in steps of UC_CACHE_BUSY_STEP_MS;
 * the first wait of the process that lasts that long is said on stderr (a shorter one is not worth a line), and
 * a lookup that times out finds no stored plan. */
#define UC_CACHE_BUSY_MS 2000
#define UC_CACHE_BUSY_STEP_MS 10
/* SQLite integers are signed 64-bit: cache.py stores larger limits (SIZE_MAX: no limit) as this. */
#define UC_SQLITE_INT_MAX 0x7fffffffffffffffLL

static struct {
    int (*open_v2)(const char *, uc_sqlite3 **, int, const char *);
    int (*close)(uc_sqlite3 *);
    int (*busy_handler)(uc_sqlite3 *, int (*)(void *, int), void *);
    const char *(*errmsg)(uc_sqlite3 *);
    int (*prepare_v2)(uc_sqlite3 *, const char *, int, uc_sqlite3_stmt **, const char **);
    int (*bind_text)(uc_sqlite3_stmt *, int, const char *, int, void (*)(void *));
    int (*bind_int64)(uc_sqlite3_stmt *, int, long long);
    int (*step)(uc_sqlite3_stmt *);
    int (*column_type)(uc_sqlite3_stmt *, int);
    long long (*column_int64)(uc_sqlite3_stmt *, int);
    double (*column_double)(uc_sqlite3_stmt *, int);
    const unsigned char *(*column_text)(uc_sqlite3_stmt *, int);
    int (*column_bytes)(uc_sqlite3_stmt *, int);
    int (*finalize)(uc_sqlite3_stmt *);
} sq;
static int sq_ok;
static pthread_once_t sq_once = PTHREAD_ONCE_INIT;
static atomic_int unusable_warned;
static atomic_int wait_said;

static void load_sqlite(void)
{
    void *h = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        uc_log(UC_LOG_DEBUG, "no stored plans: cannot load libsqlite3.so.0 (%s)", dlerror());
        return;
    }
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&sq.open_v2, "sqlite3_open_v2"},
        {(void **)&sq.close, "sqlite3_close"},
        {(void **)&sq.busy_handler, "sqlite3_busy_handler"},
        {(void **)&sq.errmsg, "sqlite3_errmsg"},
        {(void **)&sq.prepare_v2, "sqlite3_prepare_v2"},
        {(void **)&sq.bind_text, "sqlite3_bind_text"},
        {(void **)&sq.bind_int64, "sqlite3_bind_int64"},
        {(void **)&sq.step, "sqlite3_step"},
        {(void **)&sq.column_type, "sqlite3_column_type"},
        {(void **)&sq.column_int64, "sqlite3_column_int64"},
        {(void **)&sq.column_double, "sqlite3_column_double"},
        {(void **)&sq.column_text, "sqlite3_column_text"},
        {(void **)&sq.column_bytes, "sqlite3_column_bytes"},
        {(void **)&sq.finalize, "sqlite3_finalize"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = uc_dlsym(h, syms[i].name);
        if (!*syms[i].slot) {
            uc_log(UC_LOG_DEBUG, "no stored plans: libsqlite3.so.0 lacks %s", syms[i].name);
            return; /* the handle stays open: harmless, and never closed under another thread */
        }
    }
    sq_ok = 1;
}

/* ---- where the cache is: ucudnn.config.database_path() ---- */

static const char *home_dir(char *buf, size_t len)
{
    const char *home = getenv("HOME");
    if (home)
        return home;
    struct passwd pw, *found = NULL;
    char scratch[4096];
    if (getpwuid_r(getuid(), &pw, scratch, sizeof scratch, &found) != 0 || !found || !found->pw_dir)
        return NULL;
    snprintf(buf, len, "%s", found->pw_dir);
    return buf;
}

/* UCUDNN_DATABASE (a leading ~ expanded), else $XDG_CACHE_HOME/ucudnn/cache.sqlite, else
 * ~/.cache/ucudnn/cache.sqlite. 0, or -1 when there is no usable path. */
static int database_path(char *out, size_t len)
{
    char explicit[PATH_MAX], home_buf[PATH_MAX];
    const char *home;
    size_t n = uc_cfg_string(UC_VAR_UCUDNN_DATABASE, explicit, sizeof explicit);
    int written;
    if (n >= sizeof explicit)
        return -1;
    if (n) {
        if (explicit[0] != '~' || (explicit[1] != '/' && explicit[1] != '\0')) {
            written = snprintf(out, len, "%s", explicit);
        } else {
            if (!(home = home_dir(home_buf, sizeof home_buf)))
                return -1;
            size_t hl = strlen(home);
            while (hl && home[hl - 1] == '/')
                hl--;
            written = snprintf(out, len, "%.*s%s", (int)hl, home, explicit + 1);
            if (written == 0)
                written = snprintf(out, len, "/");
        }
    } else {
        const char *xdg = getenv("XDG_CACHE_HOME");
        if (xdg && xdg[0]) {
            written = snprintf(out, len, "%s/ucudnn/cache.sqlite", xdg);
        } else {
            if (!(home = home_dir(home_buf, sizeof home_buf)))
                return -1;
            written = snprintf(out, len, "%s/.cache/ucudnn/cache.sqlite", home);
        }
    }
    return written > 0 && (size_t)written < len ? 0 : -1;
}

/* ---- plan_json: [[batch, algo, math_type], ...], strictly ---- */

static void skip_ws(const char **p, const char *end)
{
    while (*p < end && (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r'))
        (*p)++;
}

static int take(const char **p, const char *end, char c)
{
    skip_ws(p, end);
    if (*p < end && **p == c) {
        (*p)++;
        return 1;
    }
    return 0;
}

/* A JSON non-negative integer (no sign, no leading zero, no fraction or exponent) up to INT_MAX. */
static int take_int(const char **p, const char *end, int *out)
{
    skip_ws(p, end);
    const char *s = *p;
    if (s >= end || *s < '0' || *s > '9')
        return 0;
    if (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9')
        return 0;
    long long v = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        v = v * 10 + (*s - '0');
        if (v > INT_MAX)
            return 0;
        s++;
    }
    *p = s;
    *out = (int)v;
    return 1;
}

/* 0 with rep->count set, else -1 with `why`. At most rep->capacity micro-batches. */
static int parse_plan_json(const char *text, size_t len, ucudnn_plan_reply *rep, char *why, size_t why_len)
{
    const char *p = text, *end = text + len;
    int count = 0;
    if (!take(&p, end, '['))
        goto bad;
    for (;;) {
        ucudnn_micro_batch m;
        if (count >= rep->capacity) {
            snprintf(why, why_len, "plan_json has more than %d micro-batches", rep->capacity);
            return -1;
        }
        if (!take(&p, end, '[') || !take_int(&p, end, &m.batch) || !take(&p, end, ',') ||
            !take_int(&p, end, &m.algo) || !take(&p, end, ',') || !take_int(&p, end, &m.math_type) ||
            !take(&p, end, ']'))
            goto bad;
        rep->micro_batches[count++] = m;
        if (take(&p, end, ','))
            continue;
        if (take(&p, end, ']'))
            break;
        goto bad;
    }
    skip_ws(&p, end);
    if (p != end)
        goto bad;
    rep->count = count;
    return 0;
bad:
    snprintf(why, why_len, "plan_json is not [[batch, algo, math_type], ...] (at offset %ld)", (long)(p - text));
    return -1;
}

/* The micro-batch sizes the policy allows (optimizer.candidate_batch_sizes): N only, powers of two and N, any. */
static int policy_allows(const char *policy, int b, int n)
{
    if (strcmp(policy, "undivided") == 0)
        return b == n;
    if (strcmp(policy, "powerOfTwo") == 0)
        return b == n || (b & (b - 1)) == 0;
    return 1;
}

/* ---- the lookup ---- */

static void unusable(const char *path, const char *what, const char *detail)
{
    if (!atomic_exchange(&unusable_warned, 1))
        uc_log(UC_LOG_WARNING, "not reading plans from %s: %s%s%s", path, what, detail ? ": " : "",
               detail ? detail : "");
    else
        uc_log(UC_LOG_DEBUG, "not reading plans from %s: %s", path, what);
}

/* A one-integer PRAGMA; 0 or -1 (the statement failed: not a database, damaged, locked). */
static int pragma_int(uc_sqlite3 *db, const char *sql, long long *out)
{
    uc_sqlite3_stmt *st = NULL;
    int rc = sq.prepare_v2(db, sql, -1, &st, NULL);
    if (rc == UC_SQLITE_OK && st)
        rc = sq.step(st);
    if (rc == UC_SQLITE_ROW)
        *out = sq.column_int64(st, 0);
    if (st)
        sq.finalize(st);
    return rc == UC_SQLITE_ROW ? 0 : -1;
}

/* SQLite's busy handler: wait in short steps up to UC_CACHE_BUSY_MS in all (then the statement fails with
 * SQLITE_BUSY), saying so once per process when a wait has lasted that long. */
static int busy_wait(void *path, int count)
{
    if ((long long)count * UC_CACHE_BUSY_STEP_MS >= UC_CACHE_BUSY_MS) {
        if (!atomic_exchange(&wait_said, 1))
            uc_log(UC_LOG_WARNING, "waited %g s for the cache %s (another process holds it locked); its plans are "
                   "not used", UC_CACHE_BUSY_MS / 1000.0, (const char *)path);
        return 0;
    }
    struct timespec step = {0, UC_CACHE_BUSY_STEP_MS * 1000000L};
    nanosleep(&step, NULL);
    return 1;
}

/* 0: a ucudnn cache of the supported schema. 1: an empty database (nothing stored). -1: anything else (warned). */
static int check_file(uc_sqlite3 *db, const char *path)
{
    long long app = 0, version = 0, tables = 0;
    if (pragma_int(db, "PRAGMA application_id", &app) != 0 || pragma_int(db, "PRAGMA user_version", &version) != 0) {
        unusable(path, "SQLite cannot read it", sq.errmsg(db));
        return -1;
    }
    if (app == 0 && version == 0) {
        if (pragma_int(db, "SELECT count(*) FROM sqlite_master", &tables) != 0) {
            unusable(path, "SQLite cannot read it", sq.errmsg(db));
            return -1;
        }
        if (tables == 0) {
            uc_log(UC_LOG_DEBUG, "no stored plans: %s is an empty database", path);
            return 1;
        }
    }
    char what[128];
    if (app != UC_CACHE_APPLICATION_ID) {
        snprintf(what, sizeof what, "it belongs to another application (application_id %#llx)",
                 (unsigned long long)app);
        unusable(path, what, NULL);
        return -1;
    }
    if (version != UC_CACHE_SCHEMA_VERSION) {
        snprintf(what, sizeof what, "its schema version %lld is not the supported %d", version,
                 UC_CACHE_SCHEMA_VERSION);
        unusable(path, what, NULL);
        return -1;
    }
    return 0;
}

/* The row for the request's own determinism if there is one, else (for a request that does not ask for
 * determinism) a deterministic one, e.g. stored by a run under UCUDNN_DETERMINISTIC=1; among those, the one at
 * exactly the request's limit, else the one planned under the largest smaller limit whose workspace fits. */
static const char lookup_sql[] =
    "SELECT plan_json, time_ms, workspace_bytes, workspace_limit FROM plans"
    " WHERE key = ?1 AND backend_id = ?2 AND batch = ?3 AND policy = ?4 AND deterministic_only >= ?5"
    " AND workspace_limit <= ?6 AND (workspace_limit = ?6 OR workspace_bytes <= ?6)"
    " ORDER BY deterministic_only ASC, workspace_limit DESC LIMIT 1";

/* Read the selected row into rep. 0, or 3 with `why`. */
static int read_row(uc_sqlite3_stmt *st, const ucudnn_plan_request *req, ucudnn_plan_reply *rep, char *why,
                    size_t why_len)
{
    if (sq.column_type(st, 0) != UC_SQLITE_TEXT) {
        snprintf(why, why_len, "plan_json is not text");
        return 3;
    }
    const char *text = (const char *)sq.column_text(st, 0);
    int bytes = sq.column_bytes(st, 0);
    if (!text || bytes < 0 || strlen(text) != (size_t)bytes) {
        snprintf(why, why_len, "plan_json is not readable text");
        return 3;
    }
    if (parse_plan_json(text, (size_t)bytes, rep, why, why_len) != 0)
        return 3;
    for (int i = 0; i < rep->count; i++) {
        if (!policy_allows(req->policy, rep->micro_batches[i].batch, req->batch)) {
            snprintf(why, why_len, "micro-batch size %d is not allowed by policy %s", rep->micro_batches[i].batch,
                     req->policy);
            return 3;
        }
    }
    int tt = sq.column_type(st, 1);
    if (tt != UC_SQLITE_FLOAT && tt != UC_SQLITE_INTEGER) {
        snprintf(why, why_len, "time_ms is not a number");
        return 3;
    }
    double t = sq.column_double(st, 1);
    long long ws = sq.column_int64(st, 2);
    if (sq.column_type(st, 2) != UC_SQLITE_INTEGER || ws < 0) {
        snprintf(why, why_len, "workspace_bytes is not a non-negative integer");
        return 3;
    }
    /* validate() rejects a negative, infinite or NaN time; keep what the row says as far as a float can. */
    rep->time_ms = t > 3.0e38 ? 3.0e38f : (float)t;
    rep->workspace_bytes = (unsigned long long)ws > (unsigned long long)SIZE_MAX ? SIZE_MAX : (size_t)ws;
    rep->deterministic = 0; /* the caller asks the real library */
    return 0;
}

/* The cache opened read-only into *db, its path in `path` (PATH_MAX): 0 a ucudnn cache of the supported schema,
 * 1 an empty database (nothing stored; closed), 2 none or unusable (closed; said once). */
static int open_cache(char *path, uc_sqlite3 **db)
{
    *db = NULL;
    path[0] = '\0';
    pthread_once(&sq_once, load_sqlite);
    if (!sq_ok)
        return 2;
    if (database_path(path, PATH_MAX) != 0) {
        path[0] = '\0';
        uc_log(UC_LOG_DEBUG, "no stored plans: no cache path (UCUDNN_DATABASE, XDG_CACHE_HOME and HOME unset)");
        return 2;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || access(path, R_OK) != 0) {
        uc_log(UC_LOG_DEBUG, "no stored plans: no readable cache at %s", path);
        return 2;
    }
    if (!S_ISREG(sb.st_mode)) {
        unusable(path, "it is not a regular file", NULL);
        return 2;
    }
    int rc = sq.open_v2(path, db, UC_SQLITE_OPEN_READONLY, NULL);
    if (rc != UC_SQLITE_OK) {
        unusable(path, "SQLite cannot open it", *db ? sq.errmsg(*db) : NULL);
        if (*db)
            sq.close(*db);
        *db = NULL;
        return 2;
    }
    sq.busy_handler(*db, busy_wait, path);
    int checked = check_file(*db, path);
    if (checked != 0) {
        sq.close(*db);
        *db = NULL;
        return checked > 0 ? 1 : 2;
    }
    return 0;
}

int uc_store_lookup(const ucudnn_plan_request *req, ucudnn_plan_reply *rep, char *where, size_t where_len,
                    char *why, size_t why_len)
{
    if (where_len)
        where[0] = '\0';
    snprintf(why, why_len, "no stored plan");
    char path[PATH_MAX]; /* the busy handler's argument: it outlives the connection */
    uc_sqlite3 *db = NULL;
    int opened = open_cache(path, &db);
    if (path[0])
        snprintf(where, where_len, "%s", path);
    if (opened != 0)
        return opened;
    int result = 2, rc;
    uc_sqlite3_stmt *st = NULL;
    rc = sq.prepare_v2(db, lookup_sql, (int)sizeof lookup_sql, &st, NULL);
    if (rc != UC_SQLITE_OK || !st) {
        unusable(path, "it has no readable plans table", sq.errmsg(db));
        goto done;
    }
    size_t limit = req->workspace_limit_bytes;
    long long lim = limit > (size_t)UC_SQLITE_INT_MAX ? UC_SQLITE_INT_MAX : (long long)limit;
    if (sq.bind_text(st, 1, req->key, -1, UC_SQLITE_STATIC) != UC_SQLITE_OK ||
        sq.bind_text(st, 2, req->backend_id, -1, UC_SQLITE_STATIC) != UC_SQLITE_OK ||
        sq.bind_int64(st, 3, req->batch) != UC_SQLITE_OK ||
        sq.bind_text(st, 4, req->policy, -1, UC_SQLITE_STATIC) != UC_SQLITE_OK ||
        sq.bind_int64(st, 5, req->deterministic_only ? 1 : 0) != UC_SQLITE_OK ||
        sq.bind_int64(st, 6, lim) != UC_SQLITE_OK) {
        uc_log(UC_LOG_INFO, "no stored plans: cannot bind the lookup in %s (%s)", path, sq.errmsg(db));
        goto done;
    }
    rc = sq.step(st);
    if (rc == UC_SQLITE_DONE) {
        result = 1;
        uc_log(UC_LOG_DEBUG, "no stored plan in %s for %s at N=%d within %zu bytes", path, req->key, req->batch,
               limit);
    } else if (rc == UC_SQLITE_ROW) {
        long long stored_limit = sq.column_int64(st, 3);
        result = read_row(st, req, rep, why, why_len);
        if (result == 0)
            uc_log(UC_LOG_DEBUG, "stored plan in %s for %s at N=%d (planned under %lld bytes): %d micro-batch(es)",
                   path, req->key, req->batch, stored_limit, rep->count);
    } else {
        unusable(path, "reading it failed", sq.errmsg(db));
    }
done:
    if (st)
        sq.finalize(st);
    sq.close(db);
    return result;
}

/* ---- verdicts: checks of plans on real executions ---- */

static const char verdict_sql[] =
    "SELECT plan_json, undivided_json, kept FROM verdicts"
    " WHERE key = ?1 AND backend_id = ?2 AND batch = ?3 AND deterministic_only = ?4 ORDER BY measured_at DESC";

/* Whether the steps text in column `col` of the current row is exactly `want` (n steps). */
static int same_steps(uc_sqlite3_stmt *st, int col, const ucudnn_micro_batch *want, int n, ucudnn_micro_batch *buf)
{
    const char *text = (const char *)sq.column_text(st, col);
    int bytes = sq.column_bytes(st, col);
    char why[128];
    ucudnn_plan_reply got = {.capacity = n, .micro_batches = buf};
    if (sq.column_type(st, col) != UC_SQLITE_TEXT || !text || bytes < 0 ||
        parse_plan_json(text, (size_t)bytes, &got, why, sizeof why) != 0 || got.count != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (buf[i].batch != want[i].batch || buf[i].algo != want[i].algo || buf[i].math_type != want[i].math_type)
            return 0;
    return 1;
}

int uc_store_verdict(const char *key, const char *backend_id, int batch, int deterministic_only,
                     const ucudnn_micro_batch *plan, int count, ucudnn_micro_batch undivided, int *kept)
{
    char path[PATH_MAX]; /* the busy handler's argument: it outlives the connection */
    uc_sqlite3 *db = NULL;
    int opened = open_cache(path, &db);
    if (opened != 0)
        return opened;
    ucudnn_micro_batch *buf = count >= 1 ? calloc((size_t)count, sizeof *buf) : NULL;
    uc_sqlite3_stmt *st = NULL;
    int result = 1, rc = buf ? sq.prepare_v2(db, verdict_sql, (int)sizeof verdict_sql, &st, NULL) : -1;
    /* No verdicts table (a cache of an older version, read-only): nothing stored, not an unusable cache. */
    if (rc != UC_SQLITE_OK || !st || sq.bind_text(st, 1, key, -1, UC_SQLITE_STATIC) != UC_SQLITE_OK ||
        sq.bind_text(st, 2, backend_id, -1, UC_SQLITE_STATIC) != UC_SQLITE_OK ||
        sq.bind_int64(st, 3, batch) != UC_SQLITE_OK ||
        sq.bind_int64(st, 4, deterministic_only ? 1 : 0) != UC_SQLITE_OK) {
        uc_log(UC_LOG_DEBUG, "no stored checks in %s: %s", path, sq.errmsg(db));
        goto done;
    }
    while ((rc = sq.step(st)) == UC_SQLITE_ROW) {
        long long k = sq.column_int64(st, 2);
        if ((k == 0 || k == 1) && sq.column_type(st, 2) == UC_SQLITE_INTEGER && same_steps(st, 0, plan, count, buf) &&
            same_steps(st, 1, &undivided, 1, buf)) {
            *kept = (int)k;
            result = 0;
            break;
        }
    }
    if (rc != UC_SQLITE_ROW && rc != UC_SQLITE_DONE)
        uc_log(UC_LOG_DEBUG, "reading the stored checks in %s failed: %s", path, sq.errmsg(db));
done:
    if (st)
        sq.finalize(st);
    sq.close(db);
    free(buf);
    return result;
}
