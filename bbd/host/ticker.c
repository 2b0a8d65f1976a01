/*
 * ticker.c — periodic callbacks from a timerfd (ticker.h says why not a
 * uv timer).
 */
#include "bbd/host/ticker.h"

#include <errno.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

static void on_readable(uv_poll_t *h, int status, int events)
{
    (void)status, (void)events;
    bbd_ticker *t = h->data;
    uint64_t expirations;
    /* clear it so it stops being readable; EAGAIN: nothing to clear */
    if (read(t->fd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        return;
    t->on_tick(t);
}

int bbd_ticker_init(uv_loop_t *loop, bbd_ticker *t, void *data, const char *what, bb_error *err)
{
    *t = (bbd_ticker){.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC),
                      .data = data};
    if (t->fd < 0)
        return bb_error_set(err, BB_ERUNTIME, "%s: timerfd: %s", what, strerror(errno));
    int rc = uv_poll_init(loop, &t->poll, t->fd);
    if (rc) {
        close(t->fd);
        t->fd = -1;
        return bb_error_set(err, BB_ERUNTIME, "%s: %s", what, uv_strerror(rc));
    }
    t->poll.data = t;
    uv_unref((uv_handle_t *)&t->poll);
    return BB_OK;
}

int bbd_ticker_start(bbd_ticker *t, uint64_t period_ms, bbd_ticker_fn on_tick, const char *what,
                     bb_error *err)
{
    struct timespec ts = {.tv_sec = (time_t)(period_ms / 1000),
                          .tv_nsec = (long)(period_ms % 1000) * 1000000L};
    struct itimerspec its = {.it_interval = ts, .it_value = ts};
    if (period_ms == 0 || timerfd_settime(t->fd, 0, &its, NULL) != 0)
        return bb_error_set(err, BB_ERUNTIME, "%s: arming a %llu ms timer: %s", what,
                            (unsigned long long)period_ms,
                            period_ms ? strerror(errno) : "no period");
    t->on_tick = on_tick;
    int rc = uv_poll_start(&t->poll, UV_READABLE, on_readable);
    return rc ? bb_error_set(err, BB_ERUNTIME, "%s: %s", what, uv_strerror(rc)) : BB_OK;
}

void bbd_ticker_close(bbd_ticker *t, uv_close_cb closed_cb)
{
    if (t->fd < 0)
        return;
    /* closing the poll handle takes the fd out of the loop's epoll set at
     * once, so the fd can go now */
    uv_close((uv_handle_t *)&t->poll, closed_cb);
    close(t->fd);
    t->fd = -1;
}
