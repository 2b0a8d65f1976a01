/*
 * client.c — a blocking JSON-lines client for the control socket (see
 * client.h).
 */
#include "client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int bbctl_connect(bbctl_conn *c, const char *path)
{
    memset(c, 0, sizeof *c);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(c->err, sizeof c->err, "control socket path %s is too long", path);
        c->fd = -1;
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        snprintf(c->err, sizeof c->err, "cannot connect to %s: %s%s", path, strerror(e),
                 e == ENOENT || e == ECONNREFUSED ? " (is bbd running?)"
                 : e == EACCES || e == EPERM
                     ? " (the control socket is reachable only by the user bbd runs as: "
                       "run bbctl as that user)"
                     : "");
        if (c->fd >= 0)
            close(c->fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}

void bbctl_close(bbctl_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->buf);
    c->fd = -1;
    c->buf = NULL;
}

int bbctl_send(bbctl_conn *c, const cJSON *req)
{
    char *text = cJSON_PrintUnformatted(req);
    if (!text) {
        snprintf(c->err, sizeof c->err, "out of memory");
        return -1;
    }
    size_t n = strlen(text);
    text[n] = '\n'; /* replaces the NUL: written with its length below */
    const char *p = text;
    size_t left = n + 1;
    while (left) {
        ssize_t w = send(c->fd, p, left, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(c->err, sizeof c->err, "sending the request: %s", strerror(errno));
            cJSON_free(text);
            return -1;
        }
        p += w;
        left -= (size_t)w;
    }
    cJSON_free(text);
    return 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int bbctl_recv(bbctl_conn *c, int timeout_ms, cJSON **out, int *timed_out)
{
    long long deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    if (timed_out)
        *timed_out = 0;
    for (;;) {
        char *nl = c->buf ? memchr(c->buf, '\n', c->len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - c->buf);
            *out = cJSON_ParseWithLength(c->buf, n);
            memmove(c->buf, nl + 1, c->len - n - 1);
            c->len -= n + 1;
            if (!*out) {
                snprintf(c->err, sizeof c->err, "the daemon sent a line that is not JSON");
                return -1;
            }
            return 0;
        }
        if (c->len >= BBCTL_MAX_LINE) {
            snprintf(c->err, sizeof c->err, "reply line over %zu bytes", BBCTL_MAX_LINE);
            return -1;
        }
        int wait = -1;
        if (deadline >= 0) {
            long long left = deadline - now_ms();
            if (left <= 0) {
                if (timed_out)
                    *timed_out = 1;
                snprintf(c->err, sizeof c->err, "timed out after %d ms", timeout_ms);
                return -1;
            }
            wait = left > 1000000000 ? 1000000000 : (int)left;
        }
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int r = poll(&pfd, 1, wait);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            continue; /* the deadline check above reports it */
        if (c->cap - c->len < 65536) {
            size_t nc = c->cap ? c->cap * 2 : 131072;
            char *nb = realloc(c->buf, nc);
            if (!nb) {
                snprintf(c->err, sizeof c->err, "out of memory");
                return -1;
            }
            c->buf = nb;
            c->cap = nc;
        }
        ssize_t got = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            snprintf(c->err, sizeof c->err, "the daemon closed the connection%s%s",
                     got < 0 ? ": " : "", got < 0 ? strerror(errno) : "");
            return -1;
        }
        c->len += (size_t)got;
    }
}
