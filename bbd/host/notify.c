/*
 * notify.c — sd_notify datagrams without libsystemd (see notify.h).
 */
#include "bbd/host/notify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int bbd_notify_init(bbd_notify *n, bb_error *err)
{
    memset(n, 0, sizeof *n);
    n->fd = -1;
    const char *s = getenv("NOTIFY_SOCKET");
    if (!s || !*s)
        return BB_OK;
    size_t len = strlen(s);
    if ((s[0] != '/' && s[0] != '@') || len < 2 || len >= sizeof n->path)
        return bb_error_set(err, BB_ECONFIG,
                            "NOTIFY_SOCKET '%.200s' is not an absolute path or @abstract name "
                            "of at most %zu bytes",
                            s, sizeof n->path - 1);
    memcpy(n->path, s, len);
    if (s[0] == '@')
        n->path[0] = '\0'; /* abstract namespace: no terminating NUL counted */
    n->path_len = (unsigned)len;
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (n->fd < 0)
        return bb_error_set(err, BB_EIO, "NOTIFY_SOCKET: socket: %s", strerror(errno));

    const char *wu = getenv("WATCHDOG_USEC"), *wp = getenv("WATCHDOG_PID");
    if (wu && *wu) {
        char *end;
        errno = 0;
        unsigned long long usec = strtoull(wu, &end, 10);
        bool for_us = true;
        if (wp && *wp) {
            char *pend;
            long pid = strtol(wp, &pend, 10);
            for_us = !*pend && pid == (long)getpid();
        }
        if (!errno && !*end && usec > 0 && for_us)
            n->watchdog_usec = usec;
    }
    return BB_OK;
}

void bbd_notify_close(bbd_notify *n)
{
    if (n->fd >= 0)
        close(n->fd);
    n->fd = -1;
}

bool bbd_notify_enabled(const bbd_notify *n) { return n->fd >= 0; }

int bbd_notify_send(bbd_notify *n, const char *state)
{
    if (n->fd < 0)
        return BB_OK;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, n->path, n->path_len);
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n->path_len);
    ssize_t r;
    do
        r = sendto(n->fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
    while (r < 0 && errno == EINTR);
    return r < 0 ? BB_EIO : BB_OK;
}

int bbd_notify_status(bbd_notify *n, const char *text)
{
    char buf[512];
    int k = snprintf(buf, sizeof buf, "STATUS=%s", text);
    if (k < 0)
        return BB_EINVAL;
    for (char *p = buf; *p; p++)
        if (*p == '\n')
            *p = ' ';
    return bbd_notify_send(n, buf);
}

uint64_t bbd_notify_watchdog_period_ms(const bbd_notify *n)
{
    if (n->fd < 0 || !n->watchdog_usec)
        return 0;
    uint64_t ms = n->watchdog_usec / 2000;
    return ms ? ms : 1;
}
