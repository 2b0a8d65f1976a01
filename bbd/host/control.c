/*
 * control.c — the control socket's plumbing: accept, frame JSON lines,
 * reply, stream to watchers, and the output and slot limits (see
 * control.h).
 *
 * Accounting: every queued write adds its bytes to its client's and the
 * control's queued counts and write_done takes them off (libuv calls it
 * for every write, with UV_ECANCELED when the pipe closes, before the
 * client is freed). A client over its share is "paused": process() leaves
 * the rest of its input unread and reading stops; write_done resumes it
 * once half its share has drained.
 */
#include "bbd/host/control.h"
#include "bbd/host/timer.h"

#include "bb/plugin.h" /* bb_log_level */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define READ_CHUNK ((size_t)64 << 10)
#define MAX_TOPICS 64

struct bbd_control_client {
    uv_pipe_t pipe;
    bbd_control *ctl;
    char *buf;
    size_t len, cap, scanned;
    bool closing;
    bool paused;            /* replies waiting unread: input left alone */
    size_t queued;          /* bytes of writes not done */
    unsigned deferred;      /* replies the handler owes it */
    uint64_t active_ms;     /* loop time of its last read or drained write */
    unsigned watch_kinds;
    char **topics;
    size_t n_topics;
    void *user;
    bbd_control_client *prev, *next;
};

struct bbd_control {
    uv_loop_t *loop;
    uv_pipe_t server;
    bbd_timer idle_tick; /* fd -1: no idle timeout */
    char *path;
    bbd_control_limits lim;
    size_t n_clients;
    bbd_control_stats stats;
    bbd_control_ops ops;
    bbd_control_client *clients;
    bool closing;
    int open_handles;
    void (*done)(void *ud);
    void *done_ud;
};

typedef struct write_req {
    uv_write_t req;
    bbd_control_client *c;
    size_t len;
    char data[];
} write_req;

static void process(bbd_control_client *c);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void ctl_log(bbd_control *ctl, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void ctl_log(bbd_control *ctl, int level, const char *fmt, ...)
{
    if (!ctl->ops.log)
        return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctl->ops.log(ctl->ops.ud, level, msg);
}

static void maybe_done(bbd_control *ctl)
{
    if (ctl->closing && ctl->open_handles == 0) {
        void (*done)(void *) = ctl->done;
        void *ud = ctl->done_ud;
        free(ctl->path);
        free(ctl);
        if (done)
            done(ud);
    }
}

static void client_free(uv_handle_t *h)
{
    bbd_control_client *c = h->data;
    bbd_control *ctl = c->ctl;
    for (size_t i = 0; i < c->n_topics; i++)
        free(c->topics[i]);
    free(c->topics);
    free(c->buf);
    free(c);
    ctl->open_handles--;
    maybe_done(ctl);
}

static void client_close(bbd_control_client *c)
{
    if (c->closing)
        return;
    c->closing = true;
    bbd_control *ctl = c->ctl;
    if (ctl->ops.client_closed)
        ctl->ops.client_closed(ctl->ops.ud, c);
    if (c->prev)
        c->prev->next = c->next;
    else
        ctl->clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    ctl->n_clients--;
    uv_close((uv_handle_t *)&c->pipe, client_free);
}

static void resume(bbd_control_client *c)
{
    c->paused = false;
    process(c);
    if (!c->closing && !c->paused)
        uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}

static void write_done(uv_write_t *req, int status)
{
    (void)status; /* a failed write shows up as a read error / EOF */
    write_req *w = (write_req *)req;
    bbd_control_client *c = w->c;
    c->queued -= w->len;
    c->ctl->stats.queued_bytes -= w->len;
    free(w);
    if (c->closing)
        return;
    c->active_ms = uv_now(c->ctl->loop);
    if (c->paused && c->queued <= c->ctl->lim.client_output_bytes / 2)
        resume(c);
}

/* Queue text + '\n' on the client (its size checked by the caller). */
static void queue_line(bbd_control_client *c, const char *text, size_t n)
{
    write_req *w = malloc(sizeof *w + n + 1);
    if (!w) {
        client_close(c);
        return;
    }
    memcpy(w->data, text, n);
    w->data[n] = '\n';
    w->len = n + 1;
    w->c = c;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
    if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, write_done) != 0) {
        free(w);
        client_close(c);
        return;
    }
    c->queued += w->len;
    c->ctl->stats.queued_bytes += w->len;
}

/* A reply: over the budget for all clients it becomes an error line (a
 * client's own share is kept by not reading its next request: process). */
static void send_line(bbd_control_client *c, const char *text)
{
    if (c->closing)
        return;
    bbd_control *ctl = c->ctl;
    size_t n = strlen(text);
    char msg[160];
    if (ctl->stats.queued_bytes + n + 1 > ctl->lim.output_budget_bytes) {
        int m = snprintf(msg, sizeof msg,
                         "{\"ok\":false,\"error\":\"a reply of %zu bytes is over the control "
                         "output budget (%zu bytes queued for all clients)\"}",
                         n, (size_t)ctl->stats.queued_bytes);
        ctl->stats.replies_refused++;
        ctl_log(ctl, BB_LOG_WARN, "control: a reply of %zu bytes is over the output budget "
                "(control_output_budget_bytes %zu); an error was sent instead", n,
                ctl->lim.output_budget_bytes);
        text = msg;
        n = (size_t)m;
    }
    queue_line(c, text, n);
}

/* An event for a watcher: dropped with the watcher when it is not keeping up. */
static void send_event(bbd_control_client *c, const char *text, size_t n)
{
    bbd_control *ctl = c->ctl;
    if (c->queued + n + 1 > ctl->lim.client_output_bytes ||
        ctl->stats.queued_bytes + n + 1 > ctl->lim.output_budget_bytes) {
        ctl->stats.watchers_dropped++;
        ctl_log(ctl, BB_LOG_WARN, "control: watcher dropped: not reading its events (%zu bytes "
                "queued for it, %zu for all clients)", c->queued,
                (size_t)ctl->stats.queued_bytes);
        client_close(c);
        return;
    }
    queue_line(c, text, n);
}

static void send_json(bbd_control_client *c, const cJSON *j)
{
    char *text = cJSON_PrintUnformatted(j);
    if (!text) {
        send_line(c, "{\"ok\":false,\"error\":\"out of memory\"}");
        return;
    }
    send_line(c, text);
    cJSON_free(text);
}

static void send_error(bbd_control_client *c, const char *msg)
{
    cJSON *j = cJSON_CreateObject();
    if (j && cJSON_AddFalseToObject(j, "ok") && cJSON_AddStringToObject(j, "error", msg))
        send_json(c, j);
    else
        send_line(c, "{\"ok\":false,\"error\":\"out of memory\"}");
    cJSON_Delete(j);
}

void bbd_control_reply(bbd_control_client *c, cJSON *reply)
{
    if (c->deferred)
        c->deferred--;
    if (reply)
        send_json(c, reply);
    cJSON_Delete(reply);
}

static void handle_line(bbd_control_client *c, const char *line, size_t n)
{
    cJSON *req = cJSON_ParseWithLength(line, n);
    if (!cJSON_IsObject(req)) {
        cJSON_Delete(req);
        send_error(c, "request is not a JSON object");
        return;
    }
    bool deferred = false;
    cJSON *reply = c->ctl->ops.handle(c->ctl->ops.ud, c, req, &deferred);
    cJSON_Delete(req);
    c->deferred += deferred && !reply;
    if (!deferred && !reply) {
        send_error(c, "out of memory");
    } else if (reply) {
        send_json(c, reply);
        cJSON_Delete(reply);
    }
}

static void process(bbd_control_client *c)
{
    size_t start = 0;
    while (!c->closing) {
        if (c->queued >= c->ctl->lim.client_output_bytes) {
            /* replies wait unread: leave the rest until they drain */
            c->paused = true;
            uv_read_stop((uv_stream_t *)&c->pipe);
            break;
        }
        char *nl = memchr(c->buf + c->scanned, '\n', c->len - c->scanned);
        if (!nl)
            break;
        size_t end = (size_t)(nl - c->buf), n = end - start;
        if (n && c->buf[start + n - 1] == '\r')
            n--;
        if (n > c->ctl->lim.max_line) {
            send_error(c, "request line too long");
            client_close(c);
            return;
        }
        if (n)
            handle_line(c, c->buf + start, n);
        start = end + 1;
        c->scanned = start;
    }
    if (c->closing)
        return;
    memmove(c->buf, c->buf + start, c->len - start);
    c->len -= start;
    c->scanned = c->paused ? 0 : c->len; /* paused: whole lines may wait in buf */
    if (!c->paused && c->len > c->ctl->lim.max_line) {
        send_error(c, "request line too long");
        client_close(c);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    bbd_control_client *c = h->data;
    if (c->cap - c->len < READ_CHUNK) {
        size_t ncap = c->cap ? c->cap * 2 : READ_CHUNK * 2;
        while (ncap - c->len < READ_CHUNK)
            ncap *= 2;
        char *nb = realloc(c->buf, ncap);
        if (!nb) {
            *buf = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS */
            return;
        }
        c->buf = nb;
        c->cap = ncap;
    }
    *buf = uv_buf_init(c->buf + c->len, (unsigned)(c->cap - c->len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    bbd_control_client *c = s->data;
    if (n < 0) {
        client_close(c);
        return;
    }
    c->len += (size_t)n;
    if (n > 0)
        c->active_ms = uv_now(c->ctl->loop);
    process(c);
}

/* Waiting for nothing: no reply owed to it. (A half-sent request line
 * does not count: a client trickling one byte now and then is idle.) */
static bool is_idle(const bbd_control_client *c)
{
    return !c->closing && !c->deferred;
}

/* Every slot is taken: close the client idle longest, non-watchers first. */
static void evict_one(bbd_control *ctl)
{
    bbd_control_client *best = NULL;
    for (bbd_control_client *c = ctl->clients; c; c = c->next) {
        if (!is_idle(c))
            continue;
        bool better = !best || (best->watch_kinds && !c->watch_kinds) ||
                      (!best->watch_kinds == !c->watch_kinds && c->active_ms < best->active_ms);
        if (better)
            best = c;
    }
    if (!best)
        return;
    ctl->stats.evicted++;
    ctl_log(ctl, BB_LOG_WARN, "control: %s idle for %llu ms closed: every slot was taken "
            "(control_max_clients %zu)", best->watch_kinds ? "watcher" : "client",
            (unsigned long long)(uv_now(ctl->loop) - best->active_ms), ctl->lim.max_clients);
    client_close(best);
}

/* Clients that sent nothing for idle_timeout_ms and wait for nothing
 * (a timer, not a uv timer: timer.h says why). */
static void on_idle_tick(bbd_timer *t)
{
    bbd_control *ctl = t->data;
    uint64_t now = uv_now(ctl->loop);
    bbd_control_client *next;
    size_t closed = 0;
    for (bbd_control_client *c = ctl->clients; c; c = next) {
        next = c->next;
        if (is_idle(c) && !c->watch_kinds && now - c->active_ms >= ctl->lim.idle_timeout_ms) {
            closed++;
            client_close(c);
        }
    }
    if (closed) {
        ctl->stats.idle_closed += closed;
        ctl_log(ctl, BB_LOG_INFO, "control: %zu idle clients closed after %llu ms "
                "(control_idle_timeout_ms)", closed,
                (unsigned long long)ctl->lim.idle_timeout_ms);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    bbd_control *ctl = server->data;
    if (status < 0 || ctl->closing)
        return;
    bbd_control_client *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->ctl = ctl;
    c->pipe.data = c;
    uv_pipe_init(ctl->loop, &c->pipe, 0);
    ctl->open_handles++;
    if (uv_accept(server, (uv_stream_t *)&c->pipe) != 0) {
        c->closing = true;
        uv_close((uv_handle_t *)&c->pipe, client_free);
        return;
    }
    if (ctl->n_clients >= ctl->lim.max_clients)
        evict_one(ctl);
    c->active_ms = uv_now(ctl->loop);
    c->next = ctl->clients;
    if (ctl->clients)
        ctl->clients->prev = c;
    ctl->clients = c;
    ctl->n_clients++;
    if (ctl->n_clients > ctl->lim.max_clients) {
        ctl->stats.refused++;
        ctl_log(ctl, BB_LOG_WARN, "control: client refused: all %zu slots are waiting for "
                "replies (control_max_clients)", ctl->lim.max_clients);
        send_error(c, "too many control clients");
        client_close(c);
        return;
    }
    uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}

/* The listening pipe and the idle timer. */
static void server_closed(uv_handle_t *h)
{
    bbd_control *ctl = h->data;
    ctl->open_handles--;
    maybe_done(ctl);
}

static void idle_tick_closed(void *ud)
{
    bbd_control *ctl = ud;
    ctl->open_handles--;
    maybe_done(ctl);
}

/* A socket file at path: replace it when nobody answers on it. */
static int clear_stale(const char *path, bb_error *err)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return BB_OK;
    if (!S_ISSOCK(st.st_mode))
        return bb_error_set(err, BB_EEXIST, "control socket %s exists and is not a socket",
                            path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int r = fd >= 0 ? connect(fd, (struct sockaddr *)&sa, sizeof sa) : -1;
    if (fd >= 0)
        close(fd);
    if (r == 0)
        return bb_error_set(err, BB_ESTATE,
                            "control socket %s is in use by another process", path);
    if (unlink(path) != 0)
        return bb_error_set(err, BB_EIO, "control socket %s: %s", path, strerror(errno));
    return BB_OK;
}

int bbd_control_start(uv_loop_t *loop, const char *path, const bbd_control_limits *limits,
                      const bbd_control_ops *ops, bbd_control **out, bb_error *err)
{
    int rc = clear_stale(path, err);
    if (rc)
        return rc;
    bbd_control *ctl = calloc(1, sizeof *ctl);
    if (!ctl || !(ctl->path = strdup(path))) {
        free(ctl);
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    }
    ctl->loop = loop;
    ctl->lim = *limits;
    ctl->ops = *ops;
    ctl->idle_tick.fd = -1;
    uv_pipe_init(loop, &ctl->server, 0);
    ctl->server.data = ctl;
    ctl->open_handles = 1;
    rc = BB_OK;
    if (ctl->lim.idle_timeout_ms) {
        uint64_t tick = ctl->lim.idle_timeout_ms / 4 ? ctl->lim.idle_timeout_ms / 4 : 1;
        rc = bbd_timer_init(loop, &ctl->idle_tick, CLOCK_MONOTONIC, on_idle_tick, ctl,
                            "control: idle timer", err);
        if (rc == BB_OK) {
            ctl->open_handles++;
            rc = bbd_timer_every(&ctl->idle_tick, tick, "control: idle timer", err);
        }
    }
    if (rc == BB_OK) {
        mode_t old = umask(0177); /* the socket file is created 0600 */
        int r = uv_pipe_bind(&ctl->server, path);
        umask(old);
        if (r == 0 && chmod(path, 0600) != 0)
            r = uv_translate_sys_error(errno);
        if (r == 0)
            r = uv_listen((uv_stream_t *)&ctl->server, 64, on_connection);
        if (r != 0)
            rc = bb_error_set(err, BB_EIO, "control socket %s: %s", path, uv_strerror(r));
    }
    if (rc != BB_OK) {
        ctl->path[0] = '\0'; /* not ours to unlink */
        ctl->closing = true;  /* freed by server_closed on the next loop turn */
        uv_close((uv_handle_t *)&ctl->server, server_closed);
        bbd_timer_close(&ctl->idle_tick, idle_tick_closed);
        return rc;
    }
    *out = ctl;
    return BB_OK;
}

void bbd_control_close(bbd_control *ctl, void (*done)(void *ud), void *ud)
{
    if (!ctl) {
        if (done)
            done(ud);
        return;
    }
    ctl->closing = true;
    ctl->done = done;
    ctl->done_ud = ud;
    while (ctl->clients)
        client_close(ctl->clients);
    if (ctl->path[0])
        unlink(ctl->path);
    uv_close((uv_handle_t *)&ctl->server, server_closed);
    bbd_timer_close(&ctl->idle_tick, idle_tick_closed);
}

int bbd_control_watch(bbd_control_client *c, unsigned kinds, const char *const *topics,
                      size_t n_topics)
{
    if (n_topics > MAX_TOPICS)
        return BB_ELIMIT;
    char **t = n_topics ? calloc(n_topics, sizeof *t) : NULL;
    if (n_topics && !t)
        return BB_ENOMEM;
    for (size_t i = 0; i < n_topics; i++) {
        if (!(t[i] = strdup(topics[i]))) {
            for (size_t k = 0; k < i; k++)
                free(t[k]);
            free(t);
            return BB_ENOMEM;
        }
    }
    for (size_t i = 0; i < c->n_topics; i++)
        free(c->topics[i]);
    free(c->topics);
    c->topics = t;
    c->n_topics = n_topics;
    c->watch_kinds = kinds;
    return BB_OK;
}

bool bbd_control_has_watchers(const bbd_control *ctl, unsigned kind)
{
    for (const bbd_control_client *c = ctl ? ctl->clients : NULL; c; c = c->next)
        if (c->watch_kinds & kind)
            return true;
    return false;
}

static bool topic_matches(const bbd_control_client *c, const char *topic)
{
    if (!c->n_topics)
        return true;
    for (size_t i = 0; i < c->n_topics; i++)
        if (topic && strcmp(c->topics[i], topic) == 0)
            return true;
    return false;
}

void bbd_control_publish(bbd_control *ctl, unsigned kind, const char *topic, const cJSON *ev)
{
    char *text = NULL;
    bbd_control_client *next;
    for (bbd_control_client *c = ctl ? ctl->clients : NULL; c; c = next) {
        next = c->next; /* send_line may close c */
        if (!(c->watch_kinds & kind) || (kind == BBD_WATCH_APP && !topic_matches(c, topic)))
            continue;
        if (!text && !(text = cJSON_PrintUnformatted(ev)))
            return;
        send_event(c, text, strlen(text));
    }
    cJSON_free(text);
}

void bbd_control_stats_get(const bbd_control *ctl, bbd_control_stats *out)
{
    if (ctl)
        *out = ctl->stats;
    else
        memset(out, 0, sizeof *out);
}

void bbd_control_client_set_user(bbd_control_client *c, void *user) { c->user = user; }
void *bbd_control_client_user(const bbd_control_client *c) { return c->user; }
size_t bbd_control_client_count(const bbd_control *ctl) { return ctl ? ctl->n_clients : 0; }

size_t bbd_control_watcher_count(const bbd_control *ctl)
{
    size_t n = 0;
    for (const bbd_control_client *c = ctl ? ctl->clients : NULL; c; c = c->next)
        n += c->watch_kinds != 0;
    return n;
}
