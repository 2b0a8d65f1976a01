/*
 * notify.h — the systemd notification protocol (sd_notify(3)), written
 * here instead of linking libsystemd: one datagram of newline-separated
 * VAR=value assignments to the AF_UNIX socket named by $NOTIFY_SOCKET
 * (a path, or an abstract socket when it starts with '@').
 *
 * bbd sends READY=1 once it listens and has installed its targets, keeps
 * STATUS= current, sends STOPPING=1 on shutdown and, when the unit sets
 * WatchdogSec= ($WATCHDOG_USEC, and $WATCHDOG_PID naming this process),
 * WATCHDOG=1 at half that interval from the event loop itself, so a stuck
 * loop misses its keep-alives and systemd restarts the service.
 *
 * Without $NOTIFY_SOCKET every call is a no-op that succeeds.
 */
#ifndef BBD_HOST_NOTIFY_H
#define BBD_HOST_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "bb/status.h"

typedef struct bbd_notify {
    int fd;                 /* -1 when not under systemd */
    char path[108];         /* sun_path; path[0] == '\0' for abstract */
    unsigned path_len;      /* bytes of path used in the address */
    uint64_t watchdog_usec; /* 0: no watchdog for us */
} bbd_notify;

/* Read $NOTIFY_SOCKET / $WATCHDOG_USEC / $WATCHDOG_PID. A malformed
 * $NOTIFY_SOCKET is BB_ECONFIG (err names it); an unset one leaves the
 * notifier disabled. */
int bbd_notify_init(bbd_notify *n, bb_error *err);
void bbd_notify_close(bbd_notify *n);
bool bbd_notify_enabled(const bbd_notify *n);

/* Send one state string ("READY=1\nSTATUS=..."). BB_EIO on failure. */
int bbd_notify_send(bbd_notify *n, const char *state);
/* STATUS=<text> (newlines in text are replaced: the protocol is line-based). */
int bbd_notify_status(bbd_notify *n, const char *text);

/* Keep-alive period: half of $WATCHDOG_USEC in milliseconds (at least 1),
 * or 0 when no watchdog applies. */
uint64_t bbd_notify_watchdog_period_ms(const bbd_notify *n);

#endif
