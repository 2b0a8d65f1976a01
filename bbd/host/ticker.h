/*
 * ticker.h — a periodic callback on the loop from a timerfd watched by a
 * uv_poll, for bbd's housekeeping (the idle sweeps, the rate limiter's
 * reports, WATCHDOG=1).
 *
 * Why not a uv timer: with any uv timer pending, libuv passes a timeout to
 * every epoll_wait, and the kernel sets up and cancels an hrtimer per wait.
 * A loop that answers messages waits once per message, so one periodic uv
 * timer anywhere in the daemon costs every round trip ~0.6 us (bench_bbd_wire,
 * pinned: a bare libuv ping-pong 13.4-13.6 us, the same with one idle uv
 * timer pending 14.1-14.3 us). A timerfd is armed once; the loop's waits
 * carry no timeout. DECISIONS.md, "The engine's next deadline arms a
 * timerfd", has the history.
 *
 * A ticker never keeps the loop alive by itself (housekeeping alone is no
 * reason to run).
 */
#ifndef BBD_HOST_TICKER_H
#define BBD_HOST_TICKER_H

#include <stdint.h>

#include <uv.h>

#include "bb/status.h"

typedef struct bbd_ticker bbd_ticker;
typedef void (*bbd_ticker_fn)(bbd_ticker *t);

struct bbd_ticker {
    uv_poll_t poll; /* closed by bbd_ticker_close */
    int fd;         /* the timerfd; -1 when there is none */
    bbd_ticker_fn on_tick;
    void *data; /* the owner's */
};

/* Create t's timerfd (CLOCK_MONOTONIC) and its poll handle on loop, not
 * ticking yet. On error t->fd is -1 and no handle exists. */
int bbd_ticker_init(uv_loop_t *loop, bbd_ticker *t, void *data, const char *what, bb_error *err);

/* Every period_ms (> 0) from now, on_tick on the loop; missed periods run
 * it once. Restarting changes the period. */
int bbd_ticker_start(bbd_ticker *t, uint64_t period_ms, bbd_ticker_fn on_tick, const char *what,
                     bb_error *err);

/* Stop ticking: uv_close the poll handle (closed_cb as uv_close's) and
 * close the timerfd. Nothing when t has none. */
void bbd_ticker_close(bbd_ticker *t, uv_close_cb closed_cb);

#endif
