/* Unit tests for the control socket's plumbing (bbd/host/control.h): JSON
 * lines in and out, bad requests, line and client limits, watchers and
 * their filters, deferred replies, socket mode and stale sockets. A client
 * thread talks to the socket while the test thread runs the loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bbd/host/control.h"

typedef struct fixture {
    uv_loop_t loop;
    uv_async_t stop;
    bbd_control *ctl;
    char path[108];
    int closed_clients;
    bbd_control_client *deferred; /* a client waiting for its reply */
    size_t clients_at_publish, watchers_at_publish;
    void (*client)(struct fixture *f);
    bool done;
    bbd_control_stats stats; /* as "flood" left them */
    uint64_t max_queued;     /* most output queued when a request came in */
} fixture;

/* The handler: "echo" echoes, "watch" subscribes, "later" defers, "publish"
 * streams an event to watchers. */
static cJSON *handle(void *ud, bbd_control_client *c, const cJSON *req, bool *deferred)
{
    fixture *f = ud;
    const char *cmd = cJSON_GetStringValue(cJSON_GetObjectItem(req, "cmd"));
    cJSON *r = cJSON_CreateObject();
    cJSON_AddTrueToObject(r, "ok");
    bbd_control_stats now;
    bbd_control_stats_get(f->ctl, &now);
    if (now.queued_bytes > f->max_queued)
        f->max_queued = now.queued_bytes;
    if (cmd && !strcmp(cmd, "echo")) {
        cJSON_AddItemToObject(r, "req", cJSON_Duplicate(req, true));
    } else if (cmd && !strcmp(cmd, "watch")) {
        const char *topics[] = {"round"};
        bbd_control_watch(c, BBD_WATCH_APP | BBD_WATCH_PEER, topics, 1);
    } else if (cmd && !strcmp(cmd, "later")) {
        f->deferred = c;
        *deferred = true;
        cJSON_Delete(r);
        return NULL;
    } else if (cmd && !strcmp(cmd, "flood")) {
        /* 400 events of 8 KB: 3.2 MB for a watcher that does not read */
        cJSON *ev = cJSON_CreateObject();
        char *pad = calloc(8192, 1);
        memset(pad, 'x', 8191);
        cJSON_AddStringToObject(ev, "pad", pad);
        free(pad);
        for (int i = 0; i < 400; i++)
            bbd_control_publish(f->ctl, BBD_WATCH_APP, "round", ev);
        cJSON_Delete(ev);
        bbd_control_stats st;
        bbd_control_stats_get(f->ctl, &st);
        f->stats = st;
    } else if (cmd && !strcmp(cmd, "publish")) {
        f->clients_at_publish = bbd_control_client_count(f->ctl);
        f->watchers_at_publish = bbd_control_watcher_count(f->ctl);
        cJSON *ev = cJSON_CreateObject();
        cJSON_AddStringToObject(ev, "event", "app");
        cJSON_AddStringToObject(ev, "topic", "other");
        bbd_control_publish(f->ctl, BBD_WATCH_APP, "other", ev); /* filtered out */
        bbd_control_publish(f->ctl, BBD_WATCH_FAILURE, NULL, ev); /* kind not selected */
        cJSON_ReplaceItemInObject(ev, "topic", cJSON_CreateString("round"));
        bbd_control_publish(f->ctl, BBD_WATCH_APP, "round", ev);
        cJSON_Delete(ev);
        if (f->deferred) { /* answer the deferred request now */
            cJSON *late = cJSON_CreateObject();
            cJSON_AddStringToObject(late, "late", "yes");
            bbd_control_reply(f->deferred, late);
            f->deferred = NULL;
        }
    }
    return r;
}

static void client_closed(void *ud, bbd_control_client *c)
{
    fixture *f = ud;
    if (f->deferred == c)
        f->deferred = NULL;
    f->closed_clients++;
}

static void on_stop(uv_async_t *h)
{
    fixture *f = h->data;
    bbd_control_close(f->ctl, NULL, NULL);
    uv_close((uv_handle_t *)&f->stop, NULL);
}

static void *client_main(void *arg)
{
    fixture *f = arg;
    f->client(f);
    f->done = true;
    uv_async_send(&f->stop);
    return NULL;
}

/* ---- client helpers (client thread) ------------------------------------------------ */

static int connect_to(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void send_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* One line (without '\n') into buf, or "" on EOF / 5 s timeout. */
static char *read_line(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5000) <= 0)
            break;
        char c;
        if (recv(fd, &c, 1, 0) != 1)
            break;
        if (c == '\n')
            break;
        buf[n++] = c;
    }
    buf[n] = '\0';
    return buf;
}

static bbd_control_limits g_limits; /* when set: the limits run() uses */

static void run(fixture *f, void (*client)(fixture *f), size_t max_line, size_t max_clients)
{
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "/tmp/bbd-ctl-%ld.sock", (long)getpid());
    unlink(f->path);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    uv_async_init(&f->loop, &f->stop, on_stop);
    f->stop.data = f;
    bbd_control_ops ops = {handle, client_closed, f, NULL};
    bb_error err = {0};
    bbd_control_limits lim = {max_line, max_clients, 1u << 20, 4u << 20, 0};
    if (g_limits.max_line)
        lim = g_limits;
    assert_int_equal(bbd_control_start(&f->loop, f->path, &lim, &ops, &f->ctl, &err), BB_OK);
    f->client = client;
    pthread_t t;
    pthread_create(&t, NULL, client_main, f);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    pthread_join(t, NULL);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    assert_true(f->done);
}

static const bbd_control_limits LIM = {1024, 4, 1u << 20, 4u << 20, 0};

/* ---- cases ------------------------------------------------------------------------------- */

static char g_results[16][512]; /* what the client thread saw */

static void client_basic(fixture *f)
{
    struct stat st;
    stat(f->path, &st);
    snprintf(g_results[0], sizeof g_results[0], "%o", (unsigned)(st.st_mode & 0777));
    int fd = connect_to(f->path);
    const char *reqs = "{\"cmd\":\"echo\",\"x\":1}\r\n\n[1,2]\nnot json\n{\"cmd\":\"echo\"}\n";
    send_all(fd, reqs, strlen(reqs));
    for (int i = 1; i <= 4; i++)
        read_line(fd, g_results[i], sizeof g_results[i]);
    close(fd);
}

static void test_lines(void **state)
{
    (void)state;
    fixture f;
    run(&f, client_basic, 1024, 4);
    assert_string_equal(g_results[0], "600");
    assert_string_equal(g_results[1], "{\"ok\":true,\"req\":{\"cmd\":\"echo\",\"x\":1}}");
    assert_string_equal(g_results[2], "{\"ok\":false,\"error\":\"request is not a JSON object\"}");
    assert_string_equal(g_results[3], "{\"ok\":false,\"error\":\"request is not a JSON object\"}");
    assert_string_equal(g_results[4], "{\"ok\":true,\"req\":{\"cmd\":\"echo\"}}");
    assert_int_equal(f.closed_clients, 1);
    /* the socket file is removed on close */
    assert_int_equal(access(f.path, F_OK), -1);
}

static void client_long_line(fixture *f)
{
    int fd = connect_to(f->path);
    char *big = malloc(5000);
    memset(big, 'x', 5000);
    send_all(fd, big, 5000); /* no newline: over the 1024-byte cap anyway */
    free(big);
    read_line(fd, g_results[0], sizeof g_results[0]);
    read_line(fd, g_results[1], sizeof g_results[1]); /* then EOF */
    close(fd);
}

static void test_long_line(void **state)
{
    (void)state;
    fixture f;
    run(&f, client_long_line, 1024, 4);
    assert_string_equal(g_results[0], "{\"ok\":false,\"error\":\"request line too long\"}");
    assert_string_equal(g_results[1], "");
}

/* Issue 21: idle clients filling every slot locked the operator out. A
 * new client now evicts the one idle longest... */
static void client_evicts_idle(fixture *f)
{
    int a = connect_to(f->path);
    usleep(20000); /* a is the older */
    int b = connect_to(f->path);
    read_line(a, g_results[0], sizeof g_results[0]); /* EOF: evicted */
    send_all(b, "{\"cmd\":\"echo\"}\n", 15);
    read_line(b, g_results[1], sizeof g_results[1]);
    close(a);
    close(b);
}

static void test_new_client_evicts_the_idle_one(void **state)
{
    (void)state;
    fixture f;
    run(&f, client_evicts_idle, 1024, 1);
    assert_string_equal(g_results[0], "");
    assert_string_equal(g_results[1], "{\"ok\":true,\"req\":{\"cmd\":\"echo\"}}");
}

/* ...and is refused only when every slot waits for a reply. */
static void client_too_many(fixture *f)
{
    int a = connect_to(f->path);
    send_all(a, "{\"cmd\":\"later\"}\n", 16);
    while (!f->deferred) /* the loop thread handled it */
        usleep(1000);
    int b = connect_to(f->path);
    read_line(b, g_results[0], sizeof g_results[0]);
    close(a);
    close(b);
}

static void test_too_many_clients(void **state)
{
    (void)state;
    fixture f;
    run(&f, client_too_many, 1024, 1);
    assert_string_equal(g_results[0], "{\"ok\":false,\"error\":\"too many control clients\"}");
}

/* A client that sends nothing is closed after idle_timeout_ms. */
static void client_idle(fixture *f)
{
    int a = connect_to(f->path);
    struct pollfd p = {.fd = a, .events = POLLIN};
    char c;
    /* EOF well before the 10 s deadline (the timeout is 100 ms) */
    int r = poll(&p, 1, 10000);
    snprintf(g_results[0], sizeof g_results[0], "%s",
             r == 1 && recv(a, &c, 1, 0) == 0 ? "closed" : "still open");
    close(a);
    (void)f;
}

static void test_idle_client_closed(void **state)
{
    (void)state;
    fixture f;
    g_limits = (bbd_control_limits){1024, 4, 1u << 20, 4u << 20, 100};
    run(&f, client_idle, 1024, 4);
    g_limits = (bbd_control_limits){0};
    assert_string_equal(g_results[0], "closed");
}

/* Issue 21: watchers that never read took RSS to 4.2 GB. One that does
 * not keep up is dropped once its share is queued, and counted. */
static void client_slow_watcher(fixture *f)
{
    int w = connect_to(f->path), p = connect_to(f->path);
    send_all(w, "{\"cmd\":\"watch\"}\n", 16);
    read_line(w, g_results[0], sizeof g_results[0]);
    send_all(p, "{\"cmd\":\"flood\"}\n", 16);
    read_line(p, g_results[1], sizeof g_results[1]);
    /* w reads what was queued before the drop, then EOF */
    char buf[65536];
    ssize_t n;
    size_t total = 0;
    struct pollfd pf = {.fd = w, .events = POLLIN};
    while (poll(&pf, 1, 10000) == 1 && (n = recv(w, buf, sizeof buf, 0)) > 0)
        total += (size_t)n;
    snprintf(g_results[2], sizeof g_results[2], "%zu", total);
    close(w);
    close(p);
}

static void test_slow_watcher_dropped(void **state)
{
    (void)state;
    fixture f;
    g_limits = (bbd_control_limits){1024, 4, 256u << 10, 4u << 20, 0};
    run(&f, client_slow_watcher, 1024, 4);
    g_limits = (bbd_control_limits){0};
    assert_string_equal(g_results[1], "{\"ok\":true}");
    assert_int_equal(f.stats.watchers_dropped, 1);
    /* what was queued for it stayed within its share */
    assert_true(f.stats.queued_bytes <= 256u << 10);
    assert_true(strtoull(g_results[2], NULL, 10) <= 256u << 10);
}

/* Issue 21: 1 MB of pipelined status requests, never reading, took RSS to
 * 142 MB. The client is not read from while its replies wait: what is
 * queued for it stays near its share, and every reply still comes. */
static void client_pipeline(fixture *f)
{
    (void)f;
    int a = connect_to(f->path);
    char req[600];
    int m = snprintf(req, sizeof req, "{\"cmd\":\"echo\",\"pad\":\"%0500d\"}\n", 0);
    int sent = 0, got = 0;
    /* write without reading until the daemon stops reading (send would
     * block for 300 ms), then read everything while writing the rest */
    struct pollfd pf = {.fd = a, .events = POLLOUT};
    while (sent < 20000 && poll(&pf, 1, 300) == 1) {
        send_all(a, req, (size_t)m);
        sent++;
    }
    snprintf(g_results[0], sizeof g_results[0], "%d", sent);
    char buf[65536];
    size_t partial = 0;
    while (got < 20000) {
        struct pollfd q[1] = {{.fd = a, .events = POLLIN | (sent < 20000 ? POLLOUT : 0)}};
        if (poll(q, 1, 10000) != 1)
            break;
        if ((q[0].revents & POLLOUT) && sent < 20000) {
            send_all(a, req, (size_t)m);
            sent++;
        }
        if (q[0].revents & POLLIN) {
            ssize_t n = recv(a, buf, sizeof buf, 0);
            if (n <= 0)
                break;
            for (ssize_t i = 0; i < n; i++)
                got += buf[i] == '\n';
            partial += (size_t)n;
        }
    }
    snprintf(g_results[1], sizeof g_results[1], "%d", got);
    close(a);
}

static void test_pipelining_without_reading_is_held_back(void **state)
{
    (void)state;
    fixture f;
    g_limits = (bbd_control_limits){1024, 4, 64u << 10, 4u << 20, 0};
    run(&f, client_pipeline, 1024, 4);
    g_limits = (bbd_control_limits){0};
    /* the client got ahead of the daemon (it stopped reading)... */
    if (atoi(g_results[0]) >= 20000)
        fail_msg("sent %s, got %s, max queued %llu", g_results[0], g_results[1], (unsigned long long)f.max_queued);
    /* ...every request was answered... */
    assert_string_equal(g_results[1], "20000");
    /* ...and the output queued never went far past the client's share
     * (one reply of ~560 bytes may go over it) */
    if (f.max_queued > (64u << 10) + 1024)
        fail_msg("%llu bytes queued for one client", (unsigned long long)f.max_queued);
}

static void client_watch(fixture *f)
{
    int w = connect_to(f->path), p = connect_to(f->path);
    send_all(w, "{\"cmd\":\"watch\"}\n", 16);
    read_line(w, g_results[0], sizeof g_results[0]);
    /* lines after a deferred request are still served: the echo reply
     * proves "later" was handled before "publish" is sent */
    send_all(p, "{\"cmd\":\"later\"}\n{\"cmd\":\"echo\"}\n", 31);
    read_line(p, g_results[4], sizeof g_results[4]);
    send_all(w, "{\"cmd\":\"publish\"}\n", 18);
    read_line(w, g_results[1], sizeof g_results[1]); /* the round event */
    read_line(w, g_results[2], sizeof g_results[2]); /* publish's own reply */
    read_line(p, g_results[3], sizeof g_results[3]); /* the deferred reply */
    close(w);
    close(p);
}

static void test_watch_and_deferred(void **state)
{
    (void)state;
    fixture f;
    run(&f, client_watch, 1024, 4);
    assert_string_equal(g_results[0], "{\"ok\":true}");
    assert_string_equal(g_results[1], "{\"event\":\"app\",\"topic\":\"round\"}");
    assert_string_equal(g_results[2], "{\"ok\":true}");
    assert_string_equal(g_results[3], "{\"late\":\"yes\"}");
    assert_string_equal(g_results[4], "{\"ok\":true,\"req\":{\"cmd\":\"echo\"}}");
    /* two clients connected, one of them watching */
    assert_int_equal(f.clients_at_publish, 2);
    assert_int_equal(f.watchers_at_publish, 1);
}

static void test_stale_and_busy_socket(void **state)
{
    (void)state;
    char path[108];
    snprintf(path, sizeof path, "/tmp/bbd-ctl-stale-%ld.sock", (long)getpid());
    unlink(path);
    /* a socket file nobody listens on (a crashed bbd's) is replaced */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    close(fd);
    uv_loop_t loop;
    uv_loop_init(&loop);
    bbd_control_ops ops = {handle, client_closed, NULL};
    bbd_control *ctl = NULL, *second = NULL;
    bb_error err = {0};
    assert_int_equal(bbd_control_start(&loop, path, &LIM, &ops, &ctl, &err), BB_OK);
    /* a live one is not */
    assert_int_equal(bbd_control_start(&loop, path, &LIM, &ops, &second, &err), BB_ESTATE);
    assert_non_null(strstr(err.msg, "in use"));
    bbd_control_close(ctl, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    /* a regular file in the way is an error, and left alone */
    FILE *f = fopen(path, "w");
    fclose(f);
    uv_loop_init(&loop);
    assert_int_equal(bbd_control_start(&loop, path, &LIM, &ops, &ctl, &err), BB_EEXIST);
    assert_int_equal(access(path, F_OK), 0);
    uv_loop_close(&loop);
    unlink(path);
    /* a directory that does not exist */
    uv_loop_init(&loop);
    assert_int_equal(bbd_control_start(&loop, "/nonexistent-dir/c.sock", &LIM, &ops, &ctl, &err),
                     BB_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/c.sock"));
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_long_line),
        cmocka_unit_test(test_new_client_evicts_the_idle_one),
        cmocka_unit_test(test_too_many_clients),
        cmocka_unit_test(test_idle_client_closed),
        cmocka_unit_test(test_slow_watcher_dropped),
        cmocka_unit_test(test_pipelining_without_reading_is_held_back),
        cmocka_unit_test(test_watch_and_deferred),
        cmocka_unit_test(test_stale_and_busy_socket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
