/*
 * log.c — logfmt lines on stderr or a log file (see log.h).
 */
#include "bbd/host/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *const LEVEL_NAMES[] = {"error", "warn", "info", "debug"};
/* sd-daemon(3) priorities: err, warning, info, debug. */
static const char LEVEL_PRIO[] = {'3', '4', '6', '7'};

int bbd_log_level_parse(const char *text, bb_log_level *out, bb_error *err)
{
    for (int i = 0; i <= BB_LOG_DEBUG; i++) {
        if (text && strcmp(text, LEVEL_NAMES[i]) == 0) {
            *out = (bb_log_level)i;
            return BB_OK;
        }
    }
    return bb_error_set(err, BB_EINVAL,
                        "log level '%s' is not one of error, warn, info, debug",
                        text ? text : "");
}

const char *bbd_log_level_name(bb_log_level level)
{
    return level <= BB_LOG_DEBUG ? LEVEL_NAMES[level] : "?";
}

/* $JOURNAL_STREAM is "<dev>:<inode>" of the journal socket when systemd
 * connected our stderr to it (systemd.exec(5)). */
static bool stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    struct stat st;
    unsigned long long dev, ino;
    if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(2, &st) != 0)
        return false;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static FILE *open_append(const char *path, bb_error *err)
{
    FILE *f = fopen(path, "ae");
    if (!f)
        bb_error_set(err, BB_EIO, "log file %s: %s", path, strerror(errno));
    return f;
}

int bbd_log_open(bbd_log *log, bb_log_level level, const char *path, bb_error *err)
{
    memset(log, 0, sizeof *log);
    log->level = level;
    log->out = stderr;
    if (path && *path) {
        if (!(log->out = open_append(path, err)))
            return err ? err->code : BB_EIO;
        if (!(log->path = strdup(path))) {
            fclose(log->out);
            return bb_error_set(err, BB_ENOMEM, "out of memory");
        }
    } else {
        log->journal = stderr_is_journal();
    }
    return BB_OK;
}

int bbd_log_reopen(bbd_log *log, bb_error *err)
{
    if (!log->path)
        return BB_OK;
    FILE *f = open_append(log->path, err);
    if (!f)
        return err ? err->code : BB_EIO;
    fclose(log->out);
    log->out = f;
    return BB_OK;
}

void bbd_log_close(bbd_log *log)
{
    if (log->path && log->out)
        fclose(log->out);
    free(log->path);
    log->path = NULL;
    log->out = NULL;
}

static void put(bbd_logline *l, const char *s, size_t n)
{
    size_t room = sizeof l->buf - 4 - l->len; /* keep space for "...\n" */
    if (n > room) {
        n = room;
        l->cut = true;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void put_c(bbd_logline *l, char c) { put(l, &c, 1); }

static bool needs_quotes(const char *v)
{
    if (!*v)
        return true;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p == 0x7f)
            return true;
    return false;
}

static void put_value(bbd_logline *l, const char *v)
{
    if (!needs_quotes(v)) {
        put(l, v, strlen(v));
        return;
    }
    put_c(l, '"');
    for (const unsigned char *p = (const unsigned char *)v; *p && !l->cut; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            put(l, esc, 2);
        } else if (*p == '\n') {
            put(l, "\\n", 2);
        } else if (*p < ' ' || *p == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", *p);
            put(l, esc, 4);
        } else {
            put_c(l, (char)*p);
        }
    }
    put_c(l, '"');
}

bool bbd_log_begin(bbd_logline *l, bbd_log *log, bb_log_level level, const char *comp,
                   const char *msg)
{
    if (!log || !log->out || level > log->level)
        return false;
    l->log = log;
    l->len = 0;
    l->cut = false;
    if (log->journal) {
        char prio[3] = {'<', LEVEL_PRIO[level], '>'};
        put(l, prio, 3);
    } else {
        struct timespec ts;
        struct tm tm;
        char t[40];
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        size_t n = strftime(t, sizeof t, "ts=%Y-%m-%dT%H:%M:%S", &tm);
        n += (size_t)snprintf(t + n, sizeof t - n, ".%03ldZ ", ts.tv_nsec / 1000000);
        put(l, t, n);
    }
    put(l, "level=", 6);
    put_value(l, LEVEL_NAMES[level]);
    bbd_log_str(l, "comp", comp);
    bbd_log_str(l, "msg", msg);
    return true;
}

void bbd_log_str(bbd_logline *l, const char *key, const char *value)
{
    if (l->len)
        put_c(l, ' ');
    put(l, key, strlen(key));
    put_c(l, '=');
    put_value(l, value ? value : "");
}

void bbd_log_u64(bbd_logline *l, const char *key, uint64_t value)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, value);
    bbd_log_str(l, key, b);
}

void bbd_log_i64(bbd_logline *l, const char *key, int64_t value)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRId64, value);
    bbd_log_str(l, key, b);
}

void bbd_log_end(bbd_logline *l)
{
    if (l->cut)
        memcpy(l->buf + l->len, "...", 3), l->len += 3;
    l->buf[l->len++] = '\n';
    fwrite(l->buf, 1, l->len, l->log->out);
    fflush(l->log->out);
}

void bbd_log_msg(bbd_log *log, bb_log_level level, const char *comp, const char *msg)
{
    bbd_logline l;
    if (bbd_log_begin(&l, log, level, comp, msg))
        bbd_log_end(&l);
}
