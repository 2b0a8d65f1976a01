/*
 * metrics.c — exposition text and the HTTP endpoint (see metrics.h).
 */
#include "bbd/host/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bb/multiaddr.h"

/* ---- exposition text ---------------------------------------------------------- */

static void put(bbd_mtext *t, const char *s, size_t n)
{
    if (t->oom)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t nc = t->cap ? t->cap : 4096;
        while (nc < t->len + n + 1)
            nc *= 2;
        char *nb = realloc(t->buf, nc);
        if (!nb) {
            t->oom = true;
            return;
        }
        t->buf = nb;
        t->cap = nc;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

static void puts_(bbd_mtext *t, const char *s) { put(t, s, strlen(s)); }

static void putf(bbd_mtext *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(bbd_mtext *t, const char *fmt, ...)
{
    char b[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(t, b, (size_t)n < sizeof b ? (size_t)n : sizeof b - 1);
}

void bbd_mtext_family(bbd_mtext *t, const char *name, const char *type, const char *help)
{
    const char *suffix = !t->openmetrics && strcmp(type, "counter") == 0 ? "_total" : "";
    putf(t, "# HELP %s%s %s\n# TYPE %s%s %s\n", name, suffix, help, name, suffix, type);
}

static void put_label(bbd_mtext *t, const char *k, const char *v)
{
    puts_(t, k);
    puts_(t, "=\"");
    for (const char *p = v ? v : ""; *p; p++) {
        if (*p == '\\')
            puts_(t, "\\\\");
        else if (*p == '"')
            puts_(t, "\\\"");
        else if (*p == '\n')
            puts_(t, "\\n");
        else
            put(t, p, 1);
    }
    puts_(t, "\"");
}

void bbd_mtext_sample(bbd_mtext *t, const char *name, bool counter, uint64_t value,
                      const char *k1, const char *v1, const char *k2, const char *v2)
{
    puts_(t, name);
    if (counter)
        puts_(t, "_total");
    if (k1 || k2) {
        puts_(t, "{");
        if (k1)
            put_label(t, k1, v1);
        if (k2) {
            if (k1)
                puts_(t, ",");
            put_label(t, k2, v2);
        }
        puts_(t, "}");
    }
    putf(t, " %llu\n", (unsigned long long)value);
}

void bbd_mtext_end(bbd_mtext *t)
{
    if (t->openmetrics)
        puts_(t, "# EOF\n");
}

void bbd_mtext_free(bbd_mtext *t)
{
    free(t->buf);
    memset(t, 0, sizeof *t);
}

void bbd_metric_name(const char *prefix, const char *name, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *s = prefix; *s && n + 1 < cap; s++)
        out[n++] = *s;
    for (const char *s = name; *s && n + 1 < cap; s++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (c >= '0' && c <= '9' && n > 0);
        out[n++] = ok ? c : '_';
    }
    out[n] = '\0';
}

/* ---- the HTTP endpoint ---------------------------------------------------------------- */

struct bbd_metrics {
    uv_loop_t *loop;
    uv_tcp_t server;
    bbd_metrics_render render;
    void *ud;
    int open_handles;
    size_t n_conns;
    uint64_t evicted; /* connections closed to make room (metrics_evicted) */
    bool closing;
    void (*done)(void *ud);
    void *done_ud;
    struct conn *conns;
};

typedef struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    bbd_metrics *m;
    struct sockaddr_storage from; /* the source address (port ignored) */
    char buf[BBD_METRICS_MAX_REQUEST];
    size_t len;
    bool responded, closing;
    int handles;
    struct conn *prev, *next;
} conn;

typedef struct resp {
    uv_write_t req;
    conn *c;
    bbd_mtext body;
    char head[256];
} resp;

static void maybe_done(bbd_metrics *m)
{
    if (m->closing && m->open_handles == 0) {
        void (*done)(void *) = m->done;
        void *ud = m->done_ud;
        free(m);
        if (done)
            done(ud);
    }
}

static void conn_handle_closed(uv_handle_t *h)
{
    conn *c = h->data;
    bbd_metrics *m = c->m;
    if (--c->handles == 0) {
        free(c);
        m->open_handles--;
        maybe_done(m);
    }
}

static void conn_close(conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    bbd_metrics *m = c->m;
    if (c->prev)
        c->prev->next = c->next;
    else
        m->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    m->n_conns--;
    uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
    uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
}

static void resp_written(uv_write_t *req, int status)
{
    (void)status;
    resp *r = (resp *)req;
    conn_close(r->c);
    bbd_mtext_free(&r->body);
    free(r);
}

static void respond(conn *c, const char *status, const char *ctype, bbd_mtext *body)
{
    resp *r = calloc(1, sizeof *r);
    c->responded = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (!r) {
        bbd_mtext_free(body);
        conn_close(c);
        return;
    }
    r->c = c;
    r->body = *body;
    int hn = snprintf(r->head, sizeof r->head,
                      "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      status, ctype, r->body.len);
    uv_buf_t bufs[2] = {uv_buf_init(r->head, (unsigned)hn),
                        uv_buf_init(r->body.buf ? r->body.buf : r->head, (unsigned)r->body.len)};
    if (uv_write(&r->req, (uv_stream_t *)&c->tcp, bufs, 2, resp_written) != 0) {
        bbd_mtext_free(&r->body);
        free(r);
        conn_close(c);
    }
}

static void respond_text(conn *c, const char *status, const char *text)
{
    bbd_mtext t = {0};
    put(&t, text, strlen(text));
    respond(c, status, "text/plain; charset=utf-8", &t);
}

/* True when the header block names `value` in header `name`. */
static bool header_has(const char *head, const char *name, const char *value)
{
    size_t nl = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *end = strstr(line, "\r\n");
            size_t n = end ? (size_t)(end - line) : strlen(line);
            char tmp[1024];
            snprintf(tmp, sizeof tmp, "%.*s", (int)(n < sizeof tmp ? n : sizeof tmp - 1), line);
            if (strstr(tmp, value))
                return true;
        }
    }
    return false;
}

static void handle_request(conn *c)
{
    char *head = c->buf;
    if (strncmp(head, "GET ", 4) != 0 && strncmp(head, "HEAD ", 5) != 0) {
        respond_text(c, "405 Method Not Allowed", "only GET /metrics is served\n");
        return;
    }
    const char *path = strchr(head, ' ') + 1;
    size_t plen = strcspn(path, " \r\n");
    bool metrics = (plen == 8 && strncmp(path, "/metrics", 8) == 0) ||
                   (plen > 8 && strncmp(path, "/metrics?", 9) == 0);
    if (!metrics) {
        respond_text(c, "404 Not Found", "not found: try /metrics\n");
        return;
    }
    bbd_mtext t = {0};
    t.openmetrics = header_has(head, "Accept", "application/openmetrics-text");
    c->m->render(c->m->ud, &t);
    bbd_mtext_end(&t);
    if (t.oom) {
        bbd_mtext_free(&t);
        respond_text(c, "500 Internal Server Error", "out of memory\n");
        return;
    }
    respond(c, "200 OK",
            t.openmetrics ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                          : "text/plain; version=0.0.4; charset=utf-8",
            &t);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn *c = h->data;
    /* keep one byte for the terminating NUL */
    *buf = uv_buf_init(c->buf + c->len, (unsigned)(sizeof c->buf - 1 - c->len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    conn *c = s->data;
    if (c->responded)
        return;
    if (n < 0) {
        conn_close(c);
        return;
    }
    c->len += (size_t)n;
    c->buf[c->len] = '\0';
    if (strstr(c->buf, "\r\n\r\n") || strstr(c->buf, "\n\n"))
        handle_request(c);
    else if (c->len >= sizeof c->buf - 1)
        respond_text(c, "431 Request Header Fields Too Large", "request head too large\n");
}

static void on_timeout(uv_timer_t *t)
{
    conn_close(t->data);
}

static bool same_source(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
    return true;
}

/* Make room for c: a source holding BBD_METRICS_MAX_PER_SOURCE connections
 * loses its oldest one still waiting for its request; when all slots are
 * taken the oldest such connection of any source goes. A connection being
 * answered is never closed for another. So idle connections cannot keep a
 * scraper out, and one address cannot hold more than its share. */
static void make_room(bbd_metrics *m, conn *c)
{
    size_t from_source = 0;
    conn *oldest_same = NULL, *oldest = NULL; /* the list is newest first */
    for (conn *o = m->conns; o; o = o->next) {
        if (o == c || o->responded)
            continue;
        oldest = o;
        if (same_source(&o->from, &c->from)) {
            from_source++;
            oldest_same = o;
        }
    }
    conn *victim = from_source >= BBD_METRICS_MAX_PER_SOURCE ? oldest_same
                   : m->n_conns > BBD_METRICS_MAX_CONNS     ? oldest
                                                            : NULL;
    if (victim) {
        m->evicted++;
        conn_close(victim);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    bbd_metrics *m = server->data;
    if (status < 0 || m->closing)
        return;
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->m = m;
    c->tcp.data = c->timer.data = c;
    uv_tcp_init(m->loop, &c->tcp);
    uv_timer_init(m->loop, &c->timer);
    c->handles = 2;
    m->open_handles++;
    c->next = m->conns;
    if (m->conns)
        m->conns->prev = c;
    m->conns = c;
    m->n_conns++;
    int len = sizeof c->from;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 ||
        uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->from, &len) != 0) {
        conn_close(c);
        return;
    }
    make_room(m, c);
    if (m->n_conns > BBD_METRICS_MAX_CONNS) { /* every slot is being answered */
        conn_close(c);
        return;
    }
    uv_timer_start(&c->timer, on_timeout, BBD_METRICS_TIMEOUT_MS, 0);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

uint64_t bbd_metrics_evicted(const bbd_metrics *m) { return m ? m->evicted : 0; }

static void server_closed(uv_handle_t *h)
{
    bbd_metrics *m = h->data;
    m->open_handles--;
    maybe_done(m);
}

int bbd_metrics_start(uv_loop_t *loop, const uint8_t *maddr, size_t len,
                      bbd_metrics_render render, void *ud, bbd_metrics **out, bb_error *err)
{
    bb_ma_proto proto;
    struct sockaddr_storage ss;
    socklen_t sl;
    char text[BB_MULTIADDR_TEXT_MAX + 1] = "?";
    bb_multiaddr_format(maddr, len, text, sizeof text, NULL, NULL);
    if (bb_multiaddr_to_sockaddr(maddr, len, &proto, &ss, &sl, err))
        return bb_error_prefix(err, "metrics address %s", text);
    if (proto != BB_MA_TCP)
        return bb_error_set(err, BB_EINVAL, "metrics address %s is not a /tcp address", text);
    bbd_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    m->loop = loop;
    m->render = render;
    m->ud = ud;
    uv_tcp_init(loop, &m->server);
    m->server.data = m;
    m->open_handles = 1;
    int r = uv_tcp_bind(&m->server, (struct sockaddr *)&ss, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&m->server, 16, on_connection);
    if (r != 0) {
        m->closing = true;
        uv_close((uv_handle_t *)&m->server, server_closed);
        return bb_error_set(err, BB_EIO, "metrics address %s: %s", text, uv_strerror(r));
    }
    *out = m;
    return BB_OK;
}

int bbd_metrics_addr(const bbd_metrics *m, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    int sl = sizeof ss;
    uint8_t a[64];
    size_t n;
    if (uv_tcp_getsockname(&m->server, (struct sockaddr *)&ss, &sl) != 0 ||
        bb_multiaddr_from_sockaddr((struct sockaddr *)&ss, (socklen_t)sl, BB_MA_TCP, a, sizeof a,
                                   &n, NULL) != BB_OK)
        return BB_EIO;
    return bb_multiaddr_format(a, n, out, cap, NULL, NULL);
}

void bbd_metrics_close(bbd_metrics *m, void (*done)(void *ud), void *ud)
{
    if (!m) {
        if (done)
            done(ud);
        return;
    }
    m->closing = true;
    m->done = done;
    m->done_ud = ud;
    while (m->conns)
        conn_close(m->conns);
    uv_close((uv_handle_t *)&m->server, server_closed);
}
