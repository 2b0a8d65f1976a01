/*
 * timer.h — bbd's timers: a timerfd watched by a uv_poll, ticking
 * periodically (the idle sweeps, the rate limiter's reports, WATCHDOG=1)
 * or expiring once at a time on its clock (the engine's next deadline).
 *
 * Why not uv timers: with any uv timer pending, libuv passes a timeout to
 * every epoll_wait, and the kernel sets up and cancels an hrtimer per wait.
 * A loop that answers messages waits once per message, so one uv timer
 * pending anywhere in the daemon costs every round trip ~0.6 us
 * (bench_bbd_wire, pinned: a bare libuv ping-pong 13.4-13.6 us, the same
 * with one idle uv timer pending 14.1-14.3 us). A timerfd is armed when
 * its time changes; the loop's waits carry no timeout
 * (tests/integration/bbd_loop_waits.sh). DECISIONS.md, "The engine's next
 * deadline arms a timerfd", has the history.
 *
 * A timer never keeps the loop alive by itself (housekeeping alone is no
 * reason to run).
 */
#ifndef BBD_HOST_TIMER_H
#define BBD_HOST_TIMER_H

#include <stdint.h>
#include <time.h> /* the clocks */

#include <uv.h>

#include "bb/status.h"

typedef struct bbd_timer bbd_timer;
typedef void (*bbd_timer_fn)(bbd_timer *t);

struct bbd_timer {
    uv_poll_t poll;
    int fd; /* the timerfd; -1 when there is none */
    bbd_timer_fn on_expiry;
    void (*closed)(void *data);
    void *data; /* the owner's */
};

/* Create t on clock (CLOCK_MONOTONIC, CLOCK_REALTIME) watched by loop,
 * not armed: on_expiry(t) runs on the loop each time it expires. On error
 * t->fd is -1 and no handle exists. */
int bbd_timer_init(uv_loop_t *loop, bbd_timer *t, int clock, bbd_timer_fn on_expiry, void *data,
                   const char *what, bb_error *err);

/* Expire every period_ms (> 0) from now; missed periods expire once. */
int bbd_timer_every(bbd_timer *t, uint64_t period_ms, const char *what, bb_error *err);

/* Expire once at abs_ns on t's clock (at once when it has passed),
 * replacing what t was armed for. -1 with errno when the kernel refuses. */
int bbd_timer_at(bbd_timer *t, uint64_t abs_ns);

/* Close t: its handle goes, then closed(data) runs on the loop (closed may
 * be NULL). Nothing when t has none. */
void bbd_timer_close(bbd_timer *t, void (*closed)(void *data));

#endif
