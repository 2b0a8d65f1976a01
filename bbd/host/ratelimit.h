/*
 * ratelimit.h — the one rate limiter for log lines that someone outside
 * the node can cause: rejected envelopes and datagrams, refused frames and
 * handshakes, dropped control clients, metrics connections. Each line has
 * a kind (what happened: a short static text) and a source (who caused it:
 * a peer, an address, "control"); each (kind, source) pair may log
 * BBD_RATELIMIT_BURST lines per BBD_RATELIMIT_WINDOW_MS. Past that its
 * lines are counted, not written, and when its window ends one line says
 * how many were suppressed ("N more ... suppressed"). So a flood of junk
 * costs at most a few lines per second per source and kind, while a
 * second source's lines still show.
 *
 * Bounded: BBD_RATELIMIT_SLOTS pairs are tracked; a new pair takes the
 * slot used longest ago, and what that slot had suppressed joins a single
 * report for all such pairs ("other sources"), so thousands of forged
 * sources cost a fixed table and one report line a window. Lines over all
 * pairs are capped too (BBD_RATELIMIT_TOTAL per window): at most that
 * many lines, one report per tracked pair and one for the others each
 * window.
 *
 * Time is passed in (no clock read here), so the limiter is tested alone.
 */
#ifndef BBD_HOST_RATELIMIT_H
#define BBD_HOST_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BBD_RATELIMIT_BURST 5        /* lines per (kind, source) per window */
#define BBD_RATELIMIT_TOTAL 50       /* lines per window over every pair */
#define BBD_RATELIMIT_WINDOW_MS 1000
#define BBD_RATELIMIT_SLOTS 64
#define BBD_RATELIMIT_KIND_MAX 64    /* bytes kept of a kind */
#define BBD_RATELIMIT_SOURCE_MAX 96  /* bytes kept of a source */

/* "N more <kind> lines from <source> suppressed in the last <ms> ms". */
typedef void (*bbd_ratelimit_report_fn)(void *ud, const char *kind, const char *source,
                                        uint64_t suppressed, uint64_t window_ms);

typedef struct bbd_ratelimit_slot {
    char kind[BBD_RATELIMIT_KIND_MAX];
    char source[BBD_RATELIMIT_SOURCE_MAX];
    uint64_t window_start_ms, last_ms;
    unsigned lines;       /* written in this window */
    uint64_t suppressed;  /* not written in this window */
    bool used;
} bbd_ratelimit_slot;

typedef struct bbd_ratelimit {
    bbd_ratelimit_slot slots[BBD_RATELIMIT_SLOTS];
    uint64_t total_window_ms;
    unsigned total_lines;
    uint64_t others_suppressed, others_window_start_ms; /* of evicted pairs */
    uint64_t suppressed_total; /* every line ever suppressed (a counter) */
    uint64_t reports;          /* "suppressed" lines written */
    bbd_ratelimit_report_fn report;
    void *ud;
} bbd_ratelimit;

void bbd_ratelimit_init(bbd_ratelimit *rl, bbd_ratelimit_report_fn report, void *ud);
/* May a line of kind from source (NULL: none) be written at now_ms? When
 * not, it is counted. Reports a window of this pair that ended first. */
bool bbd_ratelimit_allow(bbd_ratelimit *rl, const char *kind, const char *source,
                         uint64_t now_ms);
/* Report every pair whose window ended with lines suppressed (call it
 * about once a window, so the last burst of a flood is reported too). */
void bbd_ratelimit_flush(bbd_ratelimit *rl, uint64_t now_ms);

#endif
