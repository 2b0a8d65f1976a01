/*
 * bench_transport.c — the transport's cost on loopback TCP, next to raw
 * sockets measured in the same run with the same CPU placement.
 *
 *   round trip    a 64-byte envelope A -> B -> A: p50 and p99 over 4
 *                 rounds of 5000 (each after 500 warm-up trips), next to a
 *                 minimal blocking C TCP ping-pong of 64 bytes (TCP_NODELAY
 *                 both ends) run in rounds alternating with them; the
 *                 ratio is the median of the rounds' p50 ratios
 *   throughput    256 MiB as 1 MiB envelopes A -> B (up to 8 in flight,
 *                 the next sent on on_send_result), next to a raw socket
 *                 writing the same bytes in 1 MiB write() calls, timed until
 *                 the receiver acknowledges the last byte; 5 rounds, each
 *                 a raw run then a transport run back to back: the ratio is
 *                 the median of the rounds' ratios (load from elsewhere on
 *                 the machine drifts slowly, so a pair sees the same load),
 *                 MiB/s the best round of each
 *
 * Each side is its own process (fork): that is how two bbd meet, each with
 * its own loop, heap and scheduler entity, and the raw baseline uses the
 * same two processes so both pay the same wakeups. Placements: both
 * processes pinned to CPU 0 (sched_setaffinity; every message is a context
 * switch on one core) and unpinned (on these 2-core machines usually one
 * core each: every message is a cross-core wakeup). Throughput runs
 * unpinned. Targets: transport p50 <= 1.5x raw in each placement;
 * transport throughput >= 70% of raw.
 *
 * The sender's envelope buffers are malloc'd per send (the transport takes
 * them) but not filled: producing the bytes is the engine's cost, not the
 * transport's. The transports run with security "off": this measures the
 * framing, queues and loop against raw sockets; what sealing every frame
 * costs is bench_bbd_wire's security part (noise against off, side by
 * side). Exit 1 only when a run fails (timeout, wrong data).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "bbd/host/transport.h"
#include "bench/support/bench_util.h"
#include "bench/support/raw_tcp.h"

#define SMALL 64
#define ROUNDS 4     /* raw and transport runs alternate, so load hits both */
#define TRIPS 5000   /* per round */
#define WARMUP 500   /* per round, not recorded */
#define BIG (1u << 20)
#define STREAM_MIB 256 /* per round; the best round counts */
#define STREAM_ROUNDS 5
#define WINDOW 8

/* ---- the transport ------------------------------------------------------------------------ */

typedef struct side {
    uv_loop_t loop;
    bbd_transport *t;
    bb_peerid self, peer;
    bool echo;        /* B: send every envelope back */
    size_t count_only; /* B: count envelopes, answer after this many */
    size_t got;
    /* A */
    double *lat;
    double t_sent;
    size_t trips, in_flight, sent, to_send;
    bool done, failed;
} side;

static bb_peerid peer_of(uint8_t b)
{
    uint8_t seed[BB_ED25519_SEED_LEN];
    memset(seed, b, sizeof seed);
    bb_peerid id;
    bb_peerid_from_seed(seed, NULL, &id, NULL);
    return id;
}

static void send_bytes(side *s, const bbd_addr *to, size_t len)
{
    uint8_t *b = malloc(len);
    if (!b)
        bench_die("malloc");
    memset(b, 0x5a, len < 64 ? len : 64);
    int rc = bbd_transport_send(s->t, &s->peer, to, to ? 1 : 0, b, len);
    if (rc != BB_OK) {
        fprintf(stderr, "bench_transport: send: status %d\n", rc);
        s->failed = true;
    }
}

static void on_env(void *ud, const bb_peerid *from, const bbd_addr *obs, const uint8_t *bytes,
                   size_t len)
{
    (void)from, (void)obs;
    side *s = ud;
    if (s->echo) {
        uint8_t *b = malloc(len);
        if (!b)
            bench_die("malloc");
        memcpy(b, bytes, len);
        bbd_transport_send(s->t, &s->peer, NULL, 0, b, len);
        return;
    }
    if (s->count_only) {
        if (len != BIG || bytes[0] != 0x5a)
            s->failed = true;
        if (++s->got == s->count_only)
            send_bytes(s, NULL, SMALL);
        return;
    }
    if (s->lat) { /* A, round trips */
        double t = bench_now_ns();
        if (s->trips >= WARMUP)
            s->lat[s->trips - WARMUP] = t - s->t_sent;
        if (++s->trips == WARMUP + TRIPS) {
            s->done = true;
            return;
        }
        s->t_sent = bench_now_ns();
        send_bytes(s, NULL, SMALL);
        return;
    }
    s->done = true; /* A, stream: the receiver's acknowledgement */
}

static void on_result(void *ud, const bb_peerid *peer, bool ok)
{
    (void)peer;
    side *s = ud;
    if (!ok) {
        s->failed = true;
        return;
    }
    if (s->to_send && s->in_flight) { /* A, stream: keep WINDOW in flight */
        s->in_flight--;
        if (s->sent < s->to_send) {
            s->sent++;
            s->in_flight++;
            send_bytes(s, NULL, BIG);
        }
    }
}

static void on_gone(void *ud, const bb_peerid *peer)
{
    (void)peer;
    ((side *)ud)->done = true;
}

static void side_init(side *s, uint8_t self, uint8_t peer)
{
    uv_loop_init(&s->loop);
    s->self = peer_of(self);
    s->peer = peer_of(peer);
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.self = s->self;
    cfg.security = BBD_SECURITY_OFF; /* the transport's own cost (see the top) */
    bbd_transport_callbacks cb = {.on_envelope = on_env, .on_peer_disconnected = on_gone,
                                  .on_send_result = on_result, .ud = s};
    bb_error err = {0};
    s->t = bbd_transport_new(&s->loop, &cfg, &cb, &err);
    if (!s->t) {
        fprintf(stderr, "bench_transport: %s\n", err.msg);
        exit(1);
    }
}

static void side_run(side *s)
{
    double deadline = bench_now_ns() + 120e9;
    while (!s->done && !s->failed && bench_now_ns() < deadline)
        uv_run(&s->loop, UV_RUN_ONCE);
    if (!s->done || s->failed) {
        fprintf(stderr, "bench_transport: run %s\n", s->failed ? "failed" : "timed out");
        exit(1);
    }
}

static void side_close(side *s)
{
    bbd_transport_close(s->t, NULL, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
}

/* Fork B: listen on 127.0.0.1, tell the port through a pipe, serve until A
 * goes. Returns B's pid; *addr gets its address. */
static pid_t spawn_b(bool echo, size_t count_only, uint8_t *addr, size_t *addr_len)
{
    int p[2];
    if (pipe(p) != 0)
        bench_die("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        alarm(120);
        close(p[0]);
        side b = {.echo = echo, .count_only = count_only};
        side_init(&b, 2, 1);
        uint8_t ma[64];
        size_t n;
        bb_multiaddr_parse("/ip4/127.0.0.1/tcp/0", ma, sizeof ma, &n, NULL);
        bb_error err = {0};
        if (bbd_transport_listen(b.t, ma, n, &err) != BB_OK) {
            fprintf(stderr, "bench_transport: %s\n", err.msg);
            exit(1);
        }
        const bbd_addr *la;
        bbd_transport_listen_addrs(b.t, &la);
        if (write(p[1], &la[0].len, sizeof la[0].len) < 0 || write(p[1], la[0].data, la[0].len) < 0)
            bench_die("pipe write");
        close(p[1]);
        side_run(&b);
        side_close(&b);
        exit(b.failed ? 1 : 0);
    }
    close(p[1]);
    if (read(p[0], addr_len, sizeof *addr_len) != sizeof *addr_len || *addr_len > 64 ||
        read(p[0], addr, *addr_len) != (ssize_t)*addr_len)
        bench_die("pipe read");
    close(p[0]);
    return pid;
}

static void wait_child(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "bench_transport: the receiving process failed\n");
        exit(1);
    }
}

static void transport_rtt(double *lat, void *ud)
{
    (void)ud;
    uint8_t addr[64];
    size_t alen;
    pid_t pid = spawn_b(true, 0, addr, &alen);
    side a = {.lat = lat};
    side_init(&a, 1, 2);
    bbd_addr to = {addr, alen};
    a.t_sent = bench_now_ns();
    send_bytes(&a, &to, SMALL);
    side_run(&a);
    side_close(&a);
    wait_child(pid);
}

static double transport_stream(void *ud)
{
    (void)ud;
    uint8_t addr[64];
    size_t alen;
    pid_t pid = spawn_b(false, STREAM_MIB, addr, &alen);
    side a = {.to_send = STREAM_MIB};
    side_init(&a, 1, 2);
    bbd_addr to = {addr, alen};
    double t0 = bench_now_ns();
    for (int i = 0; i < WINDOW; i++) {
        a.sent++;
        a.in_flight++;
        send_bytes(&a, &to, BIG);
    }
    side_run(&a);
    double secs = (bench_now_ns() - t0) / 1e9;
    side_close(&a);
    wait_child(pid);
    return STREAM_MIB / secs;
}

/* ---- report ----------------------------------------------------------------------------- */

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0); /* nothing buffered is copied by fork */
    printf("bench_transport: loopback TCP between two processes; %d-byte envelopes, %d round "
           "trips (%d alternating rounds)\n\n",
           SMALL, ROUNDS * TRIPS, ROUNDS);
    bench_rtt_header();
    bool all_ok = true;
    /* BENCH_TRANSPORT_ONLY=stream skips the round trips. */
    const char *only = getenv("BENCH_TRANSPORT_ONLY");
    for (int pinned = 1; pinned >= 0 && !(only && strcmp(only, "stream") == 0); pinned--) {
        bench_place(pinned);
        all_ok &= bench_rtt_compare(pinned ? "same core (cpu 0)" : "unpinned",
                                    "transport envelope", SMALL, ROUNDS, WARMUP, TRIPS, 1.5,
                                    transport_rtt, NULL);
    }
    bench_place(false);
    char title[96];
    snprintf(title, sizeof title, "throughput, unpinned, %d MiB as 1 MiB messages, %d rounds",
             STREAM_MIB, STREAM_ROUNDS);
    bool tok = bench_stream_compare(title, "transport, 1 MiB envelopes, 8 in flight", NULL,
                                    STREAM_MIB, STREAM_ROUNDS, transport_stream, NULL);
    printf("\ntargets: %s\n", all_ok && tok ? "all met" : "NOT all met");
    return 0;
}
