/*
 * fault_relay.c — a userspace stand-in for tc netem between bbd nodes (the
 * fault-injection tests: the integration scripts named fault).
 *
 *   fault_relay --proto tcp|udp --listen ADDR:PORT [--listen-again PORT] --to ADDR:PORT
 *               [--drop P] [--dup P] [--reorder P] [--truncate P] [--corrupt P]
 *               [--delay MS] [--jitter MS] [--spare N] [--seed N]
 *
 * It accepts connections (TCP) or datagrams (UDP) on --listen and relays
 * them to --to, applying faults to each unit: for UDP a datagram; for TCP a
 * frame of the stream, re-framed on the way (a frame is a uvarint length
 * and that many bytes: bbd's framing, frame.h). Per unit, with the given
 * probabilities (0..1): drop it, truncate it (a random length; for TCP the
 * stream then desynchronizes and the receiver has to close and reconnect),
 * corrupt its content (for TCP the envelope inside the frame, so the
 * framing holds: a random byte flipped and the first field's tag made
 * invalid, so the receiver can tell), send it twice, or hold it back so later
 * units overtake it (reorder); every unit is delayed by --delay ± --jitter
 * ms, keeping the order of the others. Each fault hits exactly one unit in
 * 1/P (at a random phase: --seed), so a short run sees its rate. The first
 * --spare units of each direction (default 1 for TCP: bbd's handshake
 * frame, which may come only once) pass untouched.
 *
 * Once the traffic is encrypted (issue 20), a frame cannot be damaged or
 * dropped without the channel noticing: the receiver closes and the test
 * sees a reconnect rather than a rejected envelope, which the relay
 * supports the same way.
 *
 * SIGUSR1 cuts the link (every connection closed, new ones and datagrams
 * refused) until SIGUSR2 restores it. On stdout: "listening PORT" once
 * bound, and on SIGTERM / SIGINT one line of counters:
 *   units=N dropped=N duplicated=N reordered=N truncated=N corrupted=N
 *   connections=N refused=N
 * A bounded test tool: at most 64 connections / UDP sources, and at most
 * 64 MiB held in its queues (more input waits). Plain poll(2), one thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_LINKS 64
#define MAX_HELD ((size_t)64 << 20)
#define MAX_UNIT ((size_t)128 << 20)

typedef struct unit {
    uint64_t due_ms;
    size_t len, off; /* off: bytes of it already written */
    uint8_t *data;
} unit;

/* One direction of a link: units waiting for their time, in due order. */
typedef struct pipe_dir {
    int from, to;        /* fds (UDP: -1, see rlink) */
    uint64_t units;      /* seen in this direction (the first --spare pass untouched) */
    uint64_t order_due;  /* due time of the last unit queued in order (not held back) */
    uint8_t *in;         /* TCP: bytes read, not yet a whole frame */
    size_t in_len, in_cap;
    unit *q;
    size_t n, cap;
} pipe_dir;

typedef struct rlink {
    bool used;
    int down, up; /* TCP: accepted and dialed fds; UDP: up is the upstream socket */
    struct sockaddr_in peer; /* UDP: the source this rlink stands for */
    pipe_dir dir[2];         /* 0: down -> up, 1: up -> down */
} rlink;

static struct {
    double drop, dup, reorder, truncate, corrupt;
    uint64_t delay, jitter, spare;
    bool udp;
    struct sockaddr_in listen, to;
} opt;

static struct {
    uint64_t units, dropped, duplicated, reordered, truncated, corrupted, connections, refused;
} st;

static rlink links[MAX_LINKS];
static size_t held;
static volatile sig_atomic_t cut, stop;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static double rand01(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* A fault at rate p: exactly one unit in 1/p, at a random phase (an
 * accumulator per fault, started at a random point), so a short test run
 * sees each fault as often as its rate says, not as luck has it. */
static bool chance(double p, double *acc)
{
    if (p <= 0)
        return false;
    if (*acc < 0)
        *acc = rand01();
    *acc += p;
    if (*acc < 1)
        return false;
    *acc -= 1;
    return true;
}
static double acc_drop = -1, acc_dup = -1, acc_reorder = -1, acc_truncate = -1, acc_corrupt = -1;

static void die(const char *what)
{
    fprintf(stderr, "fault_relay: error: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* ---- queues ------------------------------------------------------------------ */

/* Insert keeping due order (stable: equal times keep arrival order). */
static void enqueue(pipe_dir *d, uint8_t *data, size_t len, uint64_t due)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 16;
        d->q = realloc(d->q, d->cap * sizeof *d->q);
        if (!d->q)
            die("out of memory");
    }
    size_t i = d->n;
    while (i > 0 && d->q[i - 1].due_ms > due && d->q[i - 1].off == 0)
        i--;
    memmove(d->q + i + 1, d->q + i, (d->n - i) * sizeof *d->q);
    d->q[i] = (unit){due, len, 0, data};
    d->n++;
    held += len;
}

/* One unit through the faults into d's queue. hdr: bytes of it that are
 * framing (TCP length), never corrupted. Takes data. */
static void admit(pipe_dir *d, uint8_t *data, size_t len, size_t hdr)
{
    st.units++;
    if (d->units++ < opt.spare) { /* the handshake: on time and intact */
        enqueue(d, data, len, now_ms());
        return;
    }
    if (chance(opt.drop, &acc_drop)) {
        st.dropped++;
        free(data);
        return;
    }
    if (len > 1 && chance(opt.truncate, &acc_truncate)) {
        st.truncated++;
        len = 1 + (size_t)(rand01() * (double)(len - 1));
    }
    if (len > hdr && chance(opt.corrupt, &acc_corrupt)) {
        st.corrupted++;
        /* one byte flipped anywhere, and the first field's tag given wire
         * type 7 (none such): without an integrity check (issue 20 brings
         * one) a flipped byte alone may go unnoticed; this one cannot */
        data[hdr + (size_t)(rand01() * (double)(len - hdr))] ^= (uint8_t)(1 + rand01() * 254);
        data[hdr] |= 7;
    }
    uint64_t t = now_ms(), delay = opt.delay;
    if (opt.jitter) {
        int64_t j = (int64_t)(rand01() * (double)(2 * opt.jitter + 1)) - (int64_t)opt.jitter;
        delay = (int64_t)delay + j > 0 ? (uint64_t)((int64_t)delay + j) : 0;
    }
    /* the others keep their order: not before the last one queued in
     * order; one held back does not hold back those after it */
    uint64_t due = t + delay;
    if (due < d->order_due)
        due = d->order_due;
    if (chance(opt.reorder, &acc_reorder)) {
        st.reordered++;
        due += 2 * (opt.delay + opt.jitter) + 5; /* later ones overtake it */
    } else {
        d->order_due = due;
    }
    if (chance(opt.dup, &acc_dup)) {
        st.duplicated++;
        uint8_t *copy = malloc(len);
        if (!copy)
            die("out of memory");
        memcpy(copy, data, len);
        enqueue(d, copy, len, due);
    }
    enqueue(d, data, len, due);
}

static void dir_free(pipe_dir *d)
{
    for (size_t i = 0; i < d->n; i++) {
        held -= d->q[i].len;
        free(d->q[i].data);
    }
    free(d->q);
    free(d->in);
    memset(d, 0, sizeof *d);
}

static void link_close(rlink *l)
{
    if (l->down >= 0 && !opt.udp)
        close(l->down);
    if (l->up >= 0)
        close(l->up);
    dir_free(&l->dir[0]);
    dir_free(&l->dir[1]);
    memset(l, 0, sizeof *l);
    l->down = l->up = -1;
}

/* ---- TCP ---------------------------------------------------------------------- */

/* Whole frames at the front of d->in into the queue. False: malformed
 * length (the rlink is closed, as bbd would). */
static bool tcp_frames(pipe_dir *d)
{
    size_t off = 0;
    while (off < d->in_len) {
        uint64_t n = 0;
        size_t i = 0;
        int shift = 0;
        for (;; i++, shift += 7) {
            if (off + i >= d->in_len)
                goto partial;
            if (i == 10)
                return false;
            n |= (uint64_t)(d->in[off + i] & 0x7f) << shift;
            if (!(d->in[off + i] & 0x80))
                break;
        }
        size_t hdr = i + 1;
        if (n > MAX_UNIT)
            return false;
        if (d->in_len - off - hdr < n)
            goto partial;
        uint8_t *f = malloc(hdr + n);
        if (!f)
            die("out of memory");
        memcpy(f, d->in + off, hdr + n);
        /* the body is a protobuf Frame: a tag and a length before the
         * envelope; damage goes to the envelope, not to the framing */
        size_t inner = hdr + 1;
        while (inner < hdr + n && inner < hdr + 11 && (f[inner] & 0x80))
            inner++;
        admit(d, f, hdr + n, inner + 1 <= hdr + n ? inner + 1 : hdr);
        off += hdr + n;
    }
partial:
    memmove(d->in, d->in + off, d->in_len - off);
    d->in_len -= off;
    return true;
}

static void tcp_read(rlink *l, int k)
{
    pipe_dir *d = &l->dir[k];
    if (d->in_cap - d->in_len < 65536) {
        d->in_cap = d->in_cap ? 2 * d->in_cap : 1 << 17;
        if (!(d->in = realloc(d->in, d->in_cap)))
            die("out of memory");
    }
    ssize_t r = read(d->from, d->in + d->in_len, d->in_cap - d->in_len);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
        link_close(l);
        return;
    }
    if (r > 0) {
        d->in_len += (size_t)r;
        if (!tcp_frames(d))
            link_close(l);
    }
}

static int nonblocking(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void tcp_accept(int lfd)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    rlink *l = NULL;
    for (size_t i = 0; i < MAX_LINKS && !l; i++)
        if (!links[i].used)
            l = &links[i];
    int up = -1;
    if (!cut && l) {
        up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        /* a blocking connect on loopback / the test's bridge: immediate */
        if (up >= 0 && connect(up, (struct sockaddr *)&opt.to, sizeof opt.to) != 0) {
            close(up);
            up = -1;
        }
    }
    if (up < 0) {
        st.refused++;
        close(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    st.connections++;
    memset(l, 0, sizeof *l);
    l->used = true;
    l->down = fd;
    l->up = nonblocking(up);
    l->dir[0].from = fd;
    l->dir[0].to = up;
    l->dir[1].from = up;
    l->dir[1].to = fd;
}

/* ---- UDP ---------------------------------------------------------------------- */

static void udp_from_down(int lfd)
{
    uint8_t buf[65536];
    struct sockaddr_in src;
    socklen_t sl = sizeof src;
    ssize_t r = recvfrom(lfd, buf, sizeof buf, 0, (struct sockaddr *)&src, &sl);
    if (r < 0)
        return;
    if (cut) {
        st.refused++;
        return;
    }
    rlink *l = NULL, *spare = NULL;
    for (size_t i = 0; i < MAX_LINKS && !l; i++) {
        if (links[i].used && links[i].peer.sin_port == src.sin_port &&
            links[i].peer.sin_addr.s_addr == src.sin_addr.s_addr)
            l = &links[i];
        else if (!links[i].used && !spare)
            spare = &links[i];
    }
    if (!l) {
        int up = spare ? socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0) : -1;
        if (up < 0 || connect(up, (struct sockaddr *)&opt.to, sizeof opt.to) != 0) {
            if (up >= 0)
                close(up);
            st.refused++;
            return;
        }
        l = spare;
        memset(l, 0, sizeof *l);
        l->used = true;
        l->peer = src;
        l->down = lfd;
        l->up = up;
        l->dir[0].to = up;
        l->dir[1].to = lfd;
        l->dir[0].from = lfd;
        l->dir[1].from = up;
        st.connections++;
    }
    uint8_t *d = malloc((size_t)r ? (size_t)r : 1);
    if (!d)
        die("out of memory");
    memcpy(d, buf, (size_t)r);
    admit(&l->dir[0], d, (size_t)r, 2); /* the datagram header (magic, kind) stays */
}

static void udp_from_up(rlink *l)
{
    uint8_t buf[65536];
    ssize_t r = recv(l->up, buf, sizeof buf, 0);
    if (r < 0)
        return;
    uint8_t *d = malloc((size_t)r ? (size_t)r : 1);
    if (!d)
        die("out of memory");
    memcpy(d, buf, (size_t)r);
    admit(&l->dir[1], d, (size_t)r, 2);
}

/* ---- writing due units ---------------------------------------------------------- */

static void flush_dir(rlink *l, int k, uint64_t now)
{
    pipe_dir *d = &l->dir[k];
    while (d->n && d->q[0].due_ms <= now) {
        unit *u = &d->q[0];
        if (opt.udp) {
            if (k == 0)
                send(d->to, u->data, u->len, 0);
            else
                sendto(d->to, u->data, u->len, 0, (struct sockaddr *)&l->peer, sizeof l->peer);
        } else {
            ssize_t w = send(d->to, u->data + u->off, u->len - u->off, MSG_NOSIGNAL);
            if (w < 0 && (errno == EAGAIN || errno == EINTR))
                return;
            if (w < 0) {
                link_close(l);
                return;
            }
            u->off += (size_t)w;
            if (u->off < u->len)
                return;
        }
        held -= u->len;
        free(u->data);
        memmove(d->q, d->q + 1, (d->n - 1) * sizeof *d->q);
        d->n--;
    }
}

/* ---- main ------------------------------------------------------------------------- */

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        cut = 1;
    else if (sig == SIGUSR2)
        cut = 0;
    else
        stop = 1;
}

static void parse_addr(const char *s, struct sockaddr_in *out)
{
    char host[64];
    unsigned port;
    if (sscanf(s, "%63[^:]:%u", host, &port) != 2 || port > 65535 ||
        inet_pton(AF_INET, host, &out->sin_addr) != 1) {
        fprintf(stderr, "fault_relay: error: '%s' is not IPV4:PORT\n", s);
        exit(2);
    }
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
}

static void parse_args(int argc, char **argv)
{
    bool have_listen = false, have_to = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "fault_relay: error: %s needs a value\n", a);
            exit(2);
        }
        i++;
        if (!strcmp(a, "--proto"))
            opt.udp = !strcmp(v, "udp");
        else if (!strcmp(a, "--listen"))
            parse_addr(v, &opt.listen), have_listen = true;
        else if (!strcmp(a, "--listen-again")) /* the port of a relay before this one */
            opt.listen.sin_port = htons((uint16_t)atoi(v)), have_listen = true;
        else if (!strcmp(a, "--to"))
            parse_addr(v, &opt.to), have_to = true;
        else if (!strcmp(a, "--drop"))
            opt.drop = atof(v);
        else if (!strcmp(a, "--dup"))
            opt.dup = atof(v);
        else if (!strcmp(a, "--reorder"))
            opt.reorder = atof(v);
        else if (!strcmp(a, "--truncate"))
            opt.truncate = atof(v);
        else if (!strcmp(a, "--corrupt"))
            opt.corrupt = atof(v);
        else if (!strcmp(a, "--delay"))
            opt.delay = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--jitter"))
            opt.jitter = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--spare"))
            opt.spare = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--seed"))
            rng = strtoull(v, NULL, 10) * 0x9e3779b97f4a7c15ull | 1;
        else {
            fprintf(stderr, "fault_relay: error: unknown option %s\n", a);
            exit(2);
        }
    }
    if (!have_listen || !have_to) {
        fprintf(stderr, "usage: fault_relay --proto tcp|udp --listen IP:PORT --to IP:PORT "
                        "[--drop P] [--dup P] [--reorder P] [--truncate P] [--corrupt P] "
                        "[--delay MS] [--jitter MS] [--seed N]\n");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    opt.spare = 1; /* TCP: bbd's handshake frame */
    parse_args(argc, argv);
    if (opt.udp && opt.spare == 1)
        opt.spare = 0; /* a lost HELLO is retried: no datagram is spared */
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    for (size_t i = 0; i < MAX_LINKS; i++)
        links[i].down = links[i].up = -1;
    int lfd = socket(AF_INET, (opt.udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&opt.listen, sizeof opt.listen) != 0 ||
        (!opt.udp && listen(lfd, 64) != 0))
        die("listen");
    struct sockaddr_in bound;
    socklen_t bl = sizeof bound;
    getsockname(lfd, (struct sockaddr *)&bound, &bl);
    printf("listening %u\n", ntohs(bound.sin_port));
    fflush(stdout);
    bool was_cut = false;
    while (!stop) {
        if (cut && !was_cut) /* a cut drops every rlink and what it held */
            for (size_t i = 0; i < MAX_LINKS; i++)
                if (links[i].used)
                    link_close(&links[i]);
        was_cut = cut;
        struct pollfd pf[1 + 2 * MAX_LINKS];
        rlink *who[1 + 2 * MAX_LINKS];
        int side[1 + 2 * MAX_LINKS];
        nfds_t n = 0;
        pf[n] = (struct pollfd){.fd = lfd, .events = held < MAX_HELD ? POLLIN : 0};
        who[n++] = NULL;
        uint64_t now = now_ms(), next = now + 1000;
        for (size_t i = 0; i < MAX_LINKS; i++) {
            rlink *l = &links[i];
            if (!l->used)
                continue;
            for (int k = 0; k < 2; k++) {
                pipe_dir *d = &l->dir[k];
                if (d->n && d->q[0].due_ms < next)
                    next = d->q[0].due_ms;
                int fd = opt.udp ? (k == 0 ? -1 : l->up) : d->from;
                bool want_out = !opt.udp && l->dir[1 - k].n && l->dir[1 - k].q[0].due_ms <= now;
                if (fd < 0 && !want_out)
                    continue;
                pf[n] = (struct pollfd){.fd = fd >= 0 ? fd : d->to,
                                        .events = (short)((fd >= 0 && held < MAX_HELD ? POLLIN : 0) |
                                                          (want_out ? POLLOUT : 0))};
                who[n] = l;
                side[n++] = k;
            }
        }
        int timeout = next > now ? (int)(next - now) : 0;
        if (poll(pf, n, timeout) < 0 && errno != EINTR)
            die("poll");
        if (pf[0].revents & POLLIN) {
            if (opt.udp)
                udp_from_down(lfd);
            else
                tcp_accept(lfd);
        }
        for (nfds_t i = 1; i < n; i++) {
            rlink *l = who[i];
            if (!l->used || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (opt.udp)
                udp_from_up(l);
            else
                tcp_read(l, side[i]);
        }
        now = now_ms();
        for (size_t i = 0; i < MAX_LINKS; i++)
            for (int k = 0; k < 2 && links[i].used; k++)
                flush_dir(&links[i], k, now);
    }
    printf("units=%llu dropped=%llu duplicated=%llu reordered=%llu truncated=%llu corrupted=%llu "
           "connections=%llu refused=%llu\n",
           (unsigned long long)st.units, (unsigned long long)st.dropped,
           (unsigned long long)st.duplicated, (unsigned long long)st.reordered,
           (unsigned long long)st.truncated, (unsigned long long)st.corrupted,
           (unsigned long long)st.connections, (unsigned long long)st.refused);
    return 0;
}
