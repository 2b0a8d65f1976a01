/*
 * log.h — bbd's log: one line per event, with a level, a component and
 * key=value fields (logfmt), on stderr or a log file.
 *
 *   ts=2024-05-01T10:00:00.123Z level=warn comp=engine msg="peer down" peer=12D3KooW...
 *
 * Under systemd (stderr is the journal stream named by $JOURNAL_STREAM) the
 * timestamp is left out (the journal adds its own) and each line starts with
 * the sd-daemon priority prefix "<N>", so journalctl shows the right level.
 * Values are quoted when they contain spaces, quotes, '=' or control
 * characters, which are escaped: a value from the network can never break a
 * line in two. A line longer than BBD_LOG_LINE_MAX is cut and marked "...".
 *
 * A line is built in a fixed buffer (no allocation):
 *   bbd_logline l;
 *   if (bbd_log_begin(&l, log, BB_LOG_WARN, "engine", "peer down")) {
 *       bbd_log_str(&l, "peer", text);
 *       bbd_log_end(&l);
 *   }
 * bbd_log_begin returns false when the level is filtered out.
 */
#ifndef BBD_HOST_LOG_H
#define BBD_HOST_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bb/plugin.h" /* bb_log_level */
#include "bb/status.h"

#define BBD_LOG_LINE_MAX 4096

typedef struct bbd_log {
    bb_log_level level; /* lines above it are dropped */
    FILE *out;          /* stderr or the log file */
    char *path;         /* log file, or NULL for stderr */
    bool journal;       /* stderr is the systemd journal */
} bbd_log;

typedef struct bbd_logline {
    bbd_log *log;
    char buf[BBD_LOG_LINE_MAX];
    size_t len;
    bool cut;
} bbd_logline;

/* "error", "warn", "info", "debug" -> level; BB_EINVAL names the text. */
int bbd_log_level_parse(const char *text, bb_log_level *out, bb_error *err);
const char *bbd_log_level_name(bb_log_level level);

/* Log to stderr (path NULL) or append to path. BB_EIO names the file. */
int bbd_log_open(bbd_log *log, bb_log_level level, const char *path, bb_error *err);
/* Reopen the log file (after rotation: SIGHUP). No-op on stderr. On
 * failure the old stream is kept. */
int bbd_log_reopen(bbd_log *log, bb_error *err);
void bbd_log_close(bbd_log *log);

bool bbd_log_begin(bbd_logline *l, bbd_log *log, bb_log_level level, const char *comp,
                   const char *msg);
void bbd_log_str(bbd_logline *l, const char *key, const char *value);
void bbd_log_u64(bbd_logline *l, const char *key, uint64_t value);
void bbd_log_i64(bbd_logline *l, const char *key, int64_t value);
/* Write the line (and flush). */
void bbd_log_end(bbd_logline *l);

/* One-shot: a message with no fields. */
void bbd_log_msg(bbd_log *log, bb_log_level level, const char *comp, const char *msg);

#endif
