/*
 * client.h — bbctl's connection to a bbd control socket: connect, send one
 * JSON request line, read reply lines with a deadline. Replies are
 * untrusted: a line longer than BBCTL_MAX_LINE is an error, never an
 * unbounded buffer.
 */
#ifndef BBCTL_CLIENT_H
#define BBCTL_CLIENT_H

#include <stddef.h>

#include <cJSON.h>

#define BBCTL_MAX_LINE ((size_t)256 << 20)

typedef struct bbctl_conn {
    int fd;
    char *buf;
    size_t len, cap;
    char err[512];
} bbctl_conn;

/* 0, or -1 with c->err naming the path and the problem. */
int bbctl_connect(bbctl_conn *c, const char *path);
void bbctl_close(bbctl_conn *c);
/* Send req as one line. */
int bbctl_send(bbctl_conn *c, const cJSON *req);
/* Next reply line as JSON (*out, caller frees). timeout_ms < 0 waits
 * forever. -1 with c->err on EOF, timeout, overlong line or bad JSON;
 * *timed_out tells a timeout apart (may be NULL). */
int bbctl_recv(bbctl_conn *c, int timeout_ms, cJSON **out, int *timed_out);

#endif
