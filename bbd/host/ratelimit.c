/*
 * ratelimit.c — per (kind, source) log rate limiting with suppression
 * reports (see ratelimit.h). A fixed table searched linearly: 64 slots
 * of short strings, looked at only for lines that are about to be logged.
 */
#include "bbd/host/ratelimit.h"

#include <stdio.h>
#include <string.h>

void bbd_ratelimit_init(bbd_ratelimit *rl, bbd_ratelimit_report_fn report, void *ud)
{
    memset(rl, 0, sizeof *rl);
    rl->report = report;
    rl->ud = ud;
}

/* The window of s ended (or s is being reused): say what it suppressed. */
static void close_window(bbd_ratelimit *rl, bbd_ratelimit_slot *s, uint64_t now_ms)
{
    if (s->suppressed && rl->report) {
        rl->reports++;
        rl->report(rl->ud, s->kind, s->source, s->suppressed, now_ms - s->window_start_ms);
    }
    s->suppressed = 0;
    s->lines = 0;
    s->window_start_ms = now_ms;
}

/* A slot taken for a new pair: what it had suppressed joins the one
 * report for every evicted pair (thousands of forged sources would
 * otherwise buy a report line each). */
static void evict(bbd_ratelimit *rl, bbd_ratelimit_slot *s, uint64_t now_ms)
{
    if (!rl->others_suppressed)
        rl->others_window_start_ms = now_ms;
    rl->others_suppressed += s->suppressed;
}

static bbd_ratelimit_slot *slot_for(bbd_ratelimit *rl, const char *kind, const char *source,
                                    uint64_t now_ms)
{
    bbd_ratelimit_slot *oldest = NULL;
    for (size_t i = 0; i < BBD_RATELIMIT_SLOTS; i++) {
        bbd_ratelimit_slot *s = &rl->slots[i];
        if (s->used && strncmp(s->kind, kind, sizeof s->kind - 1) == 0 &&
            strncmp(s->source, source, sizeof s->source - 1) == 0)
            return s;
        if (!oldest || !s->used || (oldest->used && s->last_ms < oldest->last_ms))
            oldest = s;
    }
    if (oldest->used)
        evict(rl, oldest, now_ms);
    memset(oldest, 0, sizeof *oldest);
    snprintf(oldest->kind, sizeof oldest->kind, "%s", kind);
    snprintf(oldest->source, sizeof oldest->source, "%s", source);
    oldest->used = true;
    oldest->window_start_ms = now_ms;
    return oldest;
}

bool bbd_ratelimit_allow(bbd_ratelimit *rl, const char *kind, const char *source,
                         uint64_t now_ms)
{
    bbd_ratelimit_slot *s = slot_for(rl, kind ? kind : "", source ? source : "", now_ms);
    s->last_ms = now_ms;
    if (now_ms - s->window_start_ms >= BBD_RATELIMIT_WINDOW_MS)
        close_window(rl, s, now_ms);
    if (now_ms - rl->total_window_ms >= BBD_RATELIMIT_WINDOW_MS) {
        rl->total_window_ms = now_ms;
        rl->total_lines = 0;
    }
    if (s->lines >= BBD_RATELIMIT_BURST || rl->total_lines >= BBD_RATELIMIT_TOTAL) {
        s->suppressed++;
        rl->suppressed_total++;
        return false;
    }
    s->lines++;
    rl->total_lines++;
    return true;
}

void bbd_ratelimit_flush(bbd_ratelimit *rl, uint64_t now_ms)
{
    if (rl->others_suppressed && now_ms - rl->others_window_start_ms >= BBD_RATELIMIT_WINDOW_MS) {
        if (rl->report) {
            rl->reports++;
            rl->report(rl->ud, "*", "other sources", rl->others_suppressed,
                       now_ms - rl->others_window_start_ms);
        }
        rl->others_suppressed = 0;
    }
    for (size_t i = 0; i < BBD_RATELIMIT_SLOTS; i++) {
        bbd_ratelimit_slot *s = &rl->slots[i];
        if (s->used && s->suppressed && now_ms - s->window_start_ms >= BBD_RATELIMIT_WINDOW_MS)
            close_window(rl, s, now_ms);
    }
}
