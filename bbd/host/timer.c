/*
 * timer.c — timers on timerfds (timer.h says why not uv timers).
 */
#include "bbd/host/timer.h"

#include <errno.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

static struct timespec timespec_of_ns(uint64_t ns)
{
    return (struct timespec){.tv_sec = (time_t)(ns / 1000000000ull),
                             .tv_nsec = (long)(ns % 1000000000ull)};
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    (void)status, (void)events;
    bbd_timer *t = h->data;
    uint64_t expirations;
    /* clear it so it stops being readable; EAGAIN: nothing to clear */
    if (read(t->fd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        return;
    t->on_expiry(t);
}

static void on_closed(uv_handle_t *h)
{
    bbd_timer *t = h->data;
    if (t->closed)
        t->closed(t->data);
}

int bbd_timer_init(uv_loop_t *loop, bbd_timer *t, int clock, bbd_timer_fn on_expiry, void *data,
                   const char *what, bb_error *err)
{
    *t = (bbd_timer){.fd = timerfd_create(clock, TFD_NONBLOCK | TFD_CLOEXEC),
                     .on_expiry = on_expiry,
                     .data = data};
    if (t->fd < 0)
        return bb_error_set(err, BB_ERUNTIME, "%s: timerfd: %s", what, strerror(errno));
    int rc = uv_poll_init(loop, &t->poll, t->fd);
    if (rc == 0) {
        t->poll.data = t;
        uv_unref((uv_handle_t *)&t->poll);
        /* a timerfd not armed is never readable: watching it costs nothing */
        if ((rc = uv_poll_start(&t->poll, UV_READABLE, on_readable)) == 0)
            return BB_OK;
        uv_close((uv_handle_t *)&t->poll, NULL);
    }
    close(t->fd);
    t->fd = -1;
    return bb_error_set(err, BB_ERUNTIME, "%s: %s", what, uv_strerror(rc));
}

int bbd_timer_every(bbd_timer *t, uint64_t period_ms, const char *what, bb_error *err)
{
    struct timespec ts = timespec_of_ns(period_ms * 1000000ull);
    struct itimerspec its = {.it_interval = ts, .it_value = ts};
    if (period_ms == 0 || timerfd_settime(t->fd, 0, &its, NULL) != 0)
        return bb_error_set(err, BB_ERUNTIME, "%s: arming a %llu ms timer: %s", what,
                            (unsigned long long)period_ms,
                            period_ms ? strerror(errno) : "no period");
    return BB_OK;
}

int bbd_timer_at(bbd_timer *t, uint64_t abs_ns)
{
    /* a zero it_value would disarm it: 1 ns is long past */
    struct itimerspec its = {.it_value = timespec_of_ns(abs_ns ? abs_ns : 1)};
    return timerfd_settime(t->fd, TFD_TIMER_ABSTIME, &its, NULL);
}

void bbd_timer_close(bbd_timer *t, void (*closed)(void *data))
{
    if (t->fd < 0)
        return;
    t->closed = closed;
    /* closing the poll handle takes the fd out of the loop's epoll set at
     * once, so the fd can go now */
    uv_close((uv_handle_t *)&t->poll, on_closed);
    close(t->fd);
    t->fd = -1;
}
