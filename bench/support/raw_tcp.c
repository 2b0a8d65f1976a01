/*
 * raw_tcp.c — the raw loopback TCP ping-pong and stream, and the
 * comparison harness of raw_tcp.h.
 */
#include "bench/support/raw_tcp.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "bench/support/bench_util.h"

#define MIB (1u << 20)
#define CHILD_ALARM_S 120 /* a child whose parent died does not linger */

static bool in_peer; /* this process is a forked peer */

/* bench_die, but a forked peer leaves with _exit: the parent's atexit
 * handlers (removing its nodes and files) and stdio buffers are not its. */
_Noreturn static void die(const char *what)
{
    if (!in_peer)
        bench_die(what);
    fprintf(stderr, "%s (peer): %s: %s\n", program_invocation_short_name, what, strerror(errno));
    _exit(1);
}

static void full_io(int fd, void *buf, size_t n, bool writing)
{
    uint8_t *p = buf;
    while (n) {
        ssize_t r = writing ? write(fd, p, n) : read(fd, p, n);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            if (r == 0)
                _exit(0); /* the other side is done (only the child sees EOF) */
            die(writing ? "write" : "read");
        }
        p += r;
        n -= (size_t)r;
    }
}

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sl) != 0 || listen(fd, 4) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)
        bench_die("raw listen");
    *port = ntohs(sa.sin_port);
    return fd;
}

static int dial(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        bench_die("raw connect");
    nodelay(fd);
    return fd;
}

/* Fork the peer: it accepts one connection on a fresh listener and runs
 * serve(fd, arg) until the connection ends. Returns its pid; *fd gets this
 * side's connected socket. */
static pid_t fork_peer(void (*serve)(int fd, int arg), int arg, int *fd)
{
    uint16_t port;
    int lfd = listener(&port);
    pid_t pid = fork();
    if (pid < 0)
        bench_die("fork");
    if (pid == 0) {
        in_peer = true;
        alarm(CHILD_ALARM_S);
        int cfd = accept(lfd, NULL, NULL);
        if (cfd < 0)
            die("accept");
        nodelay(cfd);
        serve(cfd, arg);
        _exit(0);
    }
    close(lfd);
    *fd = dial(port);
    return pid;
}

static void echo(int fd, int size)
{
    uint8_t buf[4096];
    for (;;) {
        full_io(fd, buf, (size_t)size, false);
        full_io(fd, buf, (size_t)size, true);
    }
}

void bench_raw_pingpong(size_t size, int warmup, int n, double *lat)
{
    if (size > 4096)
        size = 4096;
    int fd;
    pid_t pid = fork_peer(echo, (int)size, &fd);
    uint8_t buf[4096] = {0};
    for (int i = 0; i < warmup + n; i++) {
        double t0 = bench_now_ns();
        full_io(fd, buf, size, true);
        full_io(fd, buf, size, false);
        if (i >= warmup)
            lat[i - warmup] = bench_now_ns() - t0;
    }
    close(fd);
    waitpid(pid, NULL, 0);
}

static void drain(int fd, int mib)
{
    uint8_t *buf = malloc(MIB);
    if (!buf)
        die("malloc");
    for (int i = 0; i < mib; i++)
        full_io(fd, buf, MIB, false);
    full_io(fd, buf, 1, true);
    free(buf);
}

double bench_raw_stream(int mib)
{
    int fd;
    pid_t pid = fork_peer(drain, mib, &fd);
    uint8_t *buf = calloc(1, MIB);
    if (!buf)
        bench_die("calloc");
    double t0 = bench_now_ns();
    for (int i = 0; i < mib; i++)
        full_io(fd, buf, MIB, true);
    full_io(fd, buf, 1, false);
    double secs = (bench_now_ns() - t0) / 1e9;
    close(fd);
    free(buf);
    waitpid(pid, NULL, 0);
    return mib / secs;
}

/* ---- the libuv floor: the same ping-pong with an event loop on each side -------------- */

/* One side of a libuv ping-pong on an already connected socket. The
 * answering side echoes every size bytes it has; the measuring side times
 * each round trip and sends the next message. Both write with
 * uv_try_write, as bbd does: a 64-byte message on an idle loopback socket
 * is written whole, and anything else is a benchmark failure. */
typedef struct {
    uv_tcp_t tcp;
    size_t size, have;
    uint8_t in[4096], out[4096];
    const bench_uv_messages *msg; /* NULL: size-byte echoes */
    void *msg_side;
    bool measuring;
    int warmup, n, done; /* measuring side: round trips so far */
    double *lat, t0;
} uv_side;

static void uv_side_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    (void)hint;
    uv_side *u = h->data;
    if (u->msg) /* a message may arrive in pieces: keep what is there */
        *b = uv_buf_init((char *)u->in + u->have, (unsigned)(sizeof u->in - u->have));
    else
        *b = uv_buf_init((char *)u->in, sizeof u->in);
}

static void uv_side_send(uv_side *u)
{
    if (u->msg) {
        if (!u->msg->send(u->msg_side, (uv_stream_t *)&u->tcp))
            die("message send");
        return;
    }
    uv_buf_t b = uv_buf_init((char *)u->out, (unsigned)u->size);
    if (uv_try_write((uv_stream_t *)&u->tcp, &b, 1) != (int)u->size)
        die("uv_try_write");
}

/* One whole message arrived: time the round trip (measuring side) and
 * answer it. false when the measuring side has all its round trips. */
static bool uv_side_answer(uv_side *u, uv_stream_t *s)
{
    if (u->measuring) {
        double t = bench_now_ns();
        if (u->done >= u->warmup)
            u->lat[u->done - u->warmup] = t - u->t0;
        if (++u->done == u->warmup + u->n) {
            uv_stop(s->loop);
            return false;
        }
        u->t0 = t;
    }
    uv_side_send(u);
    return true;
}

static void uv_side_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    (void)b;
    uv_side *u = s->data;
    if (nread < 0) {
        if (nread != UV_EOF)
            die("uv read");
        uv_stop(s->loop); /* the other side is done */
        return;
    }
    u->have += (size_t)nread;
    if (!u->msg) {
        for (; u->have >= u->size; u->have -= u->size)
            if (!uv_side_answer(u, s))
                return;
        return;
    }
    size_t at = 0, used;
    while ((used = u->msg->take(u->msg_side, u->in + at, u->have - at)) > 0) {
        if (used == BENCH_UV_MESSAGE_BAD || used > u->have - at)
            die("bad message");
        at += used;
        if (!uv_side_answer(u, s))
            return;
    }
    if (u->have - at == sizeof u->in)
        die("message larger than the read buffer");
    memmove(u->in, u->in + at, u->have - at);
    u->have -= at;
}

static void uv_side_run(int fd, uv_side *u)
{
    if (u->msg && !(u->msg_side = u->msg->side_new(u->measuring)))
        die("message side");
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0 || uv_tcp_init(&loop, &u->tcp) != 0 ||
        uv_tcp_open(&u->tcp, fd) != 0)
        die("uv setup");
    u->tcp.data = u;
    if (uv_read_start((uv_stream_t *)&u->tcp, uv_side_alloc, uv_side_read) != 0)
        die("uv_read_start");
    if (u->measuring) {
        u->t0 = bench_now_ns();
        uv_side_send(u);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&u->tcp, NULL); /* closes fd */
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    if (u->msg)
        u->msg->side_free(u->msg_side);
}

static const bench_uv_messages *peer_messages; /* what the forked echo side speaks */

static void uv_echo(int fd, int size)
{
    static uv_side u;
    u.size = (size_t)size;
    u.msg = peer_messages;
    uv_side_run(fd, &u);
}

void bench_uv_pingpong(size_t size, int warmup, int n, double *lat)
{
    static uv_side u;
    if (size > sizeof u.out)
        size = sizeof u.out;
    int fd;
    pid_t pid = fork_peer(uv_echo, (int)size, &fd);
    u = (uv_side){.size = size, .measuring = true, .warmup = warmup, .n = n, .lat = lat};
    uv_side_run(fd, &u);
    waitpid(pid, NULL, 0);
}

void bench_uv_pingpong_messages(const bench_uv_messages *m, int warmup, int n, double *lat)
{
    static uv_side u;
    int fd;
    peer_messages = m;
    pid_t pid = fork_peer(uv_echo, 0, &fd);
    peer_messages = NULL;
    u = (uv_side){.msg = m, .measuring = true, .warmup = warmup, .n = n, .lat = lat};
    uv_side_run(fd, &u);
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s: the message ping-pong's peer failed\n", program_invocation_short_name);
        exit(1);
    }
}

/* ---- comparing a path with the baselines ---------------------------------------- */

void bench_rtt_header(void)
{
    printf("%-18s %-26s %8s %8s %8s %9s  %-17s\n", "placement", "path", "p50 us", "p99 us",
           "mean us", "p50 ratio", "target");
}

/* One row of the round-trip table (bench_rtt_header). */
static void rtt_row(const char *placement, const char *path, double p50_us, double p99_us,
                    double mean_us, double ratio, const char *target)
{
    printf("%-18s %-26s %8.1f %8.1f %8.1f %9.2f  %-17s\n", placement, path, p50_us, p99_us,
           mean_us, ratio, target ? target : "");
}

/* Runs the rounds and prints the raw row and the path's row, whose target
 * column is `target`; returns the median of the rounds' p50 ratios. */
static double rtt_rounds(const char *placement, const char *path_name, size_t size, int rounds,
                         int warmup, int trips, void (*path)(double *lat, void *ud), void *ud,
                         double target, const char *label)
{
    size_t n = (size_t)rounds * (size_t)trips;
    double *rl = malloc(n * sizeof *rl), *pl = malloc(n * sizeof *pl);
    double *ratios = malloc((size_t)rounds * sizeof *ratios);
    if (!rl || !pl || !ratios)
        bench_die("malloc");
    for (int r = 0; r < rounds; r++) {
        double *rr = rl + (size_t)r * trips, *pr = pl + (size_t)r * trips;
        bench_raw_pingpong(size, warmup, trips, rr);
        path(pr, ud);
        /* each pair ran back to back: its ratio sees one state of the machine */
        ratios[r] = bench_percentile(pr, (size_t)trips, 0.50) /
                    bench_percentile(rr, (size_t)trips, 0.50);
    }
    double ratio = bench_median(ratios, (size_t)rounds);
    free(ratios);
    double rmean = bench_mean(rl, n), pmean = bench_mean(pl, n);
    double r50 = bench_percentile(rl, n, 0.50), r99 = bench_percentile(rl, n, 0.99);
    double p50 = bench_percentile(pl, n, 0.50), p99 = bench_percentile(pl, n, 0.99);
    char verdict[32];
    if (!label) {
        snprintf(verdict, sizeof verdict, "<=%.2g %s", target, ratio <= target ? "ok" : "MISS");
        label = verdict;
    }
    rtt_row(placement, "raw C TCP ping-pong", r50 / 1e3, r99 / 1e3, rmean / 1e3, 1, NULL);
    rtt_row(placement, path_name, p50 / 1e3, p99 / 1e3, pmean / 1e3, ratio, label);
    free(rl);
    free(pl);
    return ratio;
}

bool bench_rtt_compare(const char *placement, const char *path_name, size_t size, int rounds,
                       int warmup, int trips, double target,
                       void (*path)(double *lat, void *ud), void *ud)
{
    return rtt_rounds(placement, path_name, size, rounds, warmup, trips, path, ud, target, NULL) <=
           target;
}

void bench_rtt_reference(const char *placement, const char *path_name, const char *label,
                         size_t size, int rounds, int warmup, int trips,
                         void (*path)(double *lat, void *ud), void *ud)
{
    rtt_rounds(placement, path_name, size, rounds, warmup, trips, path, ud, 0, label);
}

bool bench_stream_compare(const char *title, const char *path_name, const char *note, int mib,
                          int rounds, double (*path)(void *ud), void *ud)
{
    double raw = 0, best = 0, *ratios = malloc((size_t)rounds * sizeof *ratios);
    if (!ratios)
        bench_die("malloc");
    for (int r = 0; r < rounds; r++) {
        double x = bench_raw_stream(mib), y = path(ud);
        raw = x > raw ? x : raw;
        best = y > best ? y : best;
        ratios[r] = y / x;
    }
    double ratio = bench_median(ratios, (size_t)rounds);
    free(ratios);
    bool ok = ratio >= 0.7;
    printf("\n%s\n", title);
    printf("%-49s %9s %10s %11s\n", "path", "MiB/s", "ratio", "target");
    printf("%-49s %9.0f %10s %11s\n", "raw socket stream (1 MiB write calls)", raw, "1.00", "");
    printf("%-49s %9.0f %10.2f %11s\n", path_name, best, ratio, ok ? ">=0.70 ok" : ">=0.70 MISS");
    printf("(MiB/s: the best round of each; ratio: the median of the rounds' path/raw, each\n"
           " pair run back to back)%s%s\n", note ? "\n" : "", note ? note : "");
    return ok;
}
