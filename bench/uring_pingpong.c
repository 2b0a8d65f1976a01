/*
 * uring_pingpong.c — bench_bbd_wire's io_uring reference: the raw 64-byte
 * loopback TCP ping-pong of bench/support/raw_tcp.c, but each side makes
 * ONE system call per message (io_uring_enter submitting the send of the
 * answer and waiting for the next receive) where the raw ping-pong makes
 * two (write, then a blocking read) and an epoll loop three (epoll_wait,
 * read, write). It answers whether a daemon built on io_uring instead of
 * epoll would have a lower floor under its round trip on this machine.
 *
 * Usage: uring_pingpong SIZE WARMUP TRIPS
 * Two processes (this one and a forked child, on the CPUs this one may use)
 * on 127.0.0.1 with TCP_NODELAY; after WARMUP round trips, prints TRIPS
 * lines, each one round trip in ns. Exit 1 (with a line on stderr) when a
 * ring or socket fails. Built only by `make bench` (liburing-dev, which
 * scripts/bench-deps installs).
 */
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE 4096
#define CHILD_ALARM_S 120 /* a child whose parent died does not linger */

enum { OP_SEND = 1, OP_RECV = 2 };

static _Noreturn void die(const char *what, int err)
{
    fprintf(stderr, "uring_pingpong: %s: %s\n", what, strerror(err));
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

typedef struct side {
    struct io_uring ring;
    int fd;
    size_t size, have;
    char out[MAX_SIZE], in[MAX_SIZE];
} side;

static void queue(side *s, int op)
{
    struct io_uring_sqe *q = io_uring_get_sqe(&s->ring);
    if (!q)
        die("io_uring_get_sqe", EBUSY);
    if (op == OP_SEND)
        io_uring_prep_send(q, s->fd, s->out, s->size, 0);
    else
        io_uring_prep_recv(q, s->fd, s->in, sizeof s->in, 0);
    io_uring_sqe_set_data64(q, (uint64_t)op);
}

static void side_init(side *s, int fd, size_t size)
{
    s->fd = fd;
    s->size = size;
    struct io_uring_params p = {.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN};
    int rc = io_uring_queue_init_params(8, &s->ring, &p);
    if (rc == -EINVAL) { /* a kernel before 6.1: the plain ring */
        memset(&p, 0, sizeof p);
        rc = io_uring_queue_init_params(8, &s->ring, &p);
    }
    if (rc < 0)
        die("io_uring_queue_init", -rc);
    queue(s, OP_RECV);
}

/* Submit what is queued and wait until a whole message has arrived (one
 * io_uring_enter per message unless a receive returns part of one). */
static void await_message(side *s)
{
    for (;;) {
        int rc = io_uring_submit_and_wait(&s->ring, 1);
        if (rc < 0 && rc != -EINTR)
            die("io_uring_submit_and_wait", -rc);
        struct io_uring_cqe *c;
        unsigned head, seen = 0;
        int received = 0;
        io_uring_for_each_cqe(&s->ring, head, c)
        {
            seen++;
            if (c->res < 0)
                die(io_uring_cqe_get_data64(c) == OP_SEND ? "send" : "recv", -c->res);
            if (io_uring_cqe_get_data64(c) == OP_RECV) {
                if (c->res == 0)
                    exit(0); /* the other side is done */
                received += c->res;
            }
        }
        io_uring_cq_advance(&s->ring, seen);
        if (received) {
            s->have += (size_t)received;
            queue(s, OP_RECV);
            if (s->have >= s->size) {
                s->have -= s->size;
                return;
            }
        }
    }
}

static void connected_pair(int fds[2])
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&a, &len))
        die("listen", errno);
    fds[0] = socket(AF_INET, SOCK_STREAM, 0);
    if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)&a, sizeof a))
        die("connect", errno);
    if ((fds[1] = accept(l, NULL, NULL)) < 0)
        die("accept", errno);
    close(l);
    for (int i = 0; i < 2; i++)
        setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int main(int argc, char **argv)
{
    long size = argc == 4 ? strtol(argv[1], NULL, 10) : 0;
    long warmup = argc == 4 ? strtol(argv[2], NULL, 10) : -1;
    long trips = argc == 4 ? strtol(argv[3], NULL, 10) : 0;
    if (size < 1 || size > MAX_SIZE || warmup < 0 || trips < 1 || trips > 100000000) {
        fprintf(stderr, "uring_pingpong: usage: uring_pingpong SIZE(1-%d) WARMUP TRIPS\n",
                MAX_SIZE);
        return 2;
    }
    int fds[2];
    connected_pair(fds);
    static side s;
    pid_t pid = fork();
    if (pid < 0)
        die("fork", errno);
    if (pid == 0) { /* the echo side: answer every message until EOF */
        alarm(CHILD_ALARM_S);
        close(fds[0]);
        side_init(&s, fds[1], (size_t)size);
        for (;;) {
            await_message(&s);
            queue(&s, OP_SEND); /* submitted with the next wait */
        }
    }
    close(fds[1]);
    side_init(&s, fds[0], (size_t)size);
    uint64_t *lat = malloc((size_t)trips * sizeof *lat);
    if (!lat)
        die("malloc", ENOMEM);
    for (long i = 0; i < warmup + trips; i++) {
        uint64_t t0 = now_ns();
        queue(&s, OP_SEND);
        await_message(&s);
        if (i >= warmup)
            lat[i - warmup] = now_ns() - t0;
    }
    io_uring_queue_exit(&s.ring);
    close(fds[0]); /* the child sees EOF and leaves */
    waitpid(pid, NULL, 0);
    for (long i = 0; i < trips; i++)
        printf("%llu\n", (unsigned long long)lat[i]);
    free(lat);
    return 0;
}
