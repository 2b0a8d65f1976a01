/*
 * bench_bbd_wire.c — the whole wire path between two bbd processes on
 * loopback TCP, engine to engine, next to raw sockets measured in the same
 * run with the same CPU placement.
 *
 * The program is examples/wire_loop (compiled with bbc against the bbd_test
 * plugin): node Source runs target Source, node Sink runs target Sink, each
 * a real bbd with its own state directory, control socket and TCP listener.
 * One invoke of Source puts one request in flight; from then on every
 * response that lands at Source starts the next request, inside bbd, with
 * no client in the loop:
 *
 *   Source engine: the bus event WireResponseLanded starts an execution:
 *   Serialize.Dequeue, Any, Serialize.Enqueue, Sample (bbdtest::Peers), the
 *   compiler's TX gates, SendReqBatched -> TCP transport -> Sink engine:
 *   RecvReq, the RX gates (DedupGateRx, PeerHealthGateRx, BackoffGateRx),
 *   Hold.Stash, Clock, Record("got"), SendResp -> TCP transport -> Source
 *   engine: RecvRespBatched completes the batch, Clock, Record("ack"), and
 *   WireResponseLanded starts the next round trip.
 *
 * The stamps stay in the nodes while the loop runs (their Record rings,
 * caps.record_ring raised to RECORD_RING) and are read in one control
 * request ("records") once enough trips happened: nobody watches, no event
 * is written per trip, and this program only asks for a node's status
 * every POLL_MS meanwhile.
 *
 *   round trip    one 64-byte tensor in flight. Each "ack" record is
 *                 Source's Clock (the time its poll began) when a response
 *                 landed; consecutive stamps are exactly one round trip
 *                 apart. 8 rounds of 5000 trips (after 500 warm-up trips),
 *                 each with fresh nodes, alternating with a raw C TCP
 *                 ping-pong of 64 bytes (bench/support/raw_tcp.c); the
 *                 ratio is the median of the rounds' p50 ratios, each pair
 *                 run back to back (load on this shared machine drifts:
 *                 pooled p50s of single runs swung 1.5-2.5x).
 *   throughput    1 MiB f32 tensors, 8 requests in flight (8 invokes): the
 *                 "got" records are Sink's Clock when each tensor was
 *                 received; 256 MiB measured at Sink once the window is
 *                 full, next to a raw socket stream of 256 MiB in 1 MiB
 *                 write() calls; 5 rounds, each a raw run then a bbd run
 *                 back to back, the ratio the median of the rounds' ratios,
 *                 MiB/s the best round of each.
 *
 * Placements: everything pinned to CPU 0 (every message a context switch on
 * one core), and unpinned; throughput runs unpinned. Pinned, issue 23's
 * target is on security "off" (plaintext like the raw ping-pong: what bbd
 * itself adds): bbd p50 <= 1.2x raw. Beside it, without a verdict of their
 * own, the default channel (security "noise": Noise handshake, every frame
 * sealed; its cost is the security part's target) and the floor under the
 * target, a bare libuv ping-pong (an event loop each side, read callback
 * then uv_try_write, nothing else): a reference no daemon can beat, not a
 * target; an io_uring ping-pong (bench/uring_pingpong.c: one system call
 * a message, submitting the answer and waiting for the next), the floor a
 * daemon built on io_uring instead would have (make bench builds it); and
 * the codec floor (bench/support/codec_pingpong.h): the libuv ping-pong
 * whose messages are the wire loop's envelopes, framed, decoded and
 * encoded by bbd's own code, with no engine — what speaking this wire
 * costs before any of the program runs. Unpinned, with the default
 * channel: <= 1.5x. Throughput: bbd >= 70% of raw, default channel.
 *
 * Security: the same two measurements with security "noise" against
 * "off" side by side, unpinned: each round runs an "off" pair then a
 * "noise" pair back to back (fresh nodes each), the ratio the median of
 * the rounds' ratios (round trip: noise p50 / off p50, target <= 1.15;
 * throughput: noise / off MiB/s, target >= 0.80).
 *
 * Exit 1 only when a run fails (a node does not start, a flow stalls).
 * BENCH_WIRE_ONLY=rtt, =stream or =security runs one part; =off the pinned
 * security-off row alone (to compare two builds quickly).
 */
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "bench/support/bbd_nodes.h"
#include "bench/support/bench_util.h"
#include "bench/support/codec_pingpong.h"
#include "bench/support/raw_tcp.h"

#define SMALL_FLOATS 16 /* a 64-byte payload */
#define ROUNDS 8        /* raw and bbd runs alternate, so load hits both */
#define TRIPS 5000      /* per round */
#define WARMUP 500      /* per round, not measured */
#define BIG_FLOATS (1u << 18) /* 1 MiB */
#define STREAM_MIB 256
#define STREAM_ROUNDS 5
#define WINDOW 8
#define RECORD_RING 16384 /* stamps a node keeps: every one of a round's */
#define POLL_MS 50        /* status requests while the loop runs */
#define FLOW_TIMEOUT_S 60

typedef struct bench {
    char build[PATH_MAX], self[PATH_MAX], bbd[PATH_MAX + 16];
    char tmp[32], plugdir[64], artifact[PATH_MAX], config[64], config_off[64];
    const char *node_config; /* config or config_off: the pair's security */
    int run;                 /* numbers each pair's state directories */
    bench_node source, sink; /* the pair running now */
} bench;

static bench B;

static void cleanup(void)
{
    if (B.source.pid > 0)
        kill(B.source.pid, SIGKILL);
    if (B.sink.pid > 0)
        kill(B.sink.pid, SIGKILL);
    if (B.tmp[0])
        bench_remove_tree(B.tmp);
}

/* ---- the two nodes ----------------------------------------------------------------- */

/* Start node n (target), with peer "ID=ADDR" when given; wait for READY=1. */
static void node_start(bench_node *n, const char *target, const char *peer)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s-%d", B.tmp, target, B.run);
    bench_node_spec spec = {.bbd = B.bbd, .artifact = B.artifact, .target = target,
                            .plugdir = B.plugdir, .config = B.node_config, .peer = peer,
                            .ready_timeout_ms = 10000};
    if (bench_node_start(n, dir, &spec) != 0)
        bench_node_fail(n, "bbd --targets %s did not become ready", target);
}

/* One control request to n; the reply (free it), or the run fails. */
static cJSON *node_request(const bench_node *n, const char *request)
{
    bench_ctl c;
    if (bench_ctl_open(&c, n->sock) != 0)
        bench_node_fail(n, "cannot connect to %s", n->sock);
    cJSON *r = bench_ctl_request(&c, request, 30000);
    bench_ctl_close(&c);
    if (!r)
        bench_node_fail(n, "%s: the request failed", n->sock);
    return r;
}

static uint64_t node_counter(const bench_node *n, const char *name)
{
    cJSON *st = node_request(n, "{\"cmd\":\"status\"}");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(st, "counters"), name);
    uint64_t x = cJSON_IsNumber(v) ? (uint64_t)v->valuedouble : 0;
    cJSON_Delete(st);
    return x;
}

/* Start Sink, then Source knowing Sink's address. */
static void pair_start(void)
{
    B.run++;
    node_start(&B.sink, "Sink", NULL);
    char peer[512];
    if (bench_node_peer(&B.sink, peer, sizeof peer) != 0)
        bench_node_fail(&B.sink, "%s: status has no peer_id or listen address", B.sink.sock);
    node_start(&B.source, "Source", peer);
}

static void pair_stop(void)
{
    bench_node *n[2] = {&B.source, &B.sink};
    for (int i = 0; i < 2; i++) {
        int rc = bench_stop(n[i]->pid);
        n[i]->pid = 0;
        if (rc != 0)
            bench_node_fail(n[i], "%s did not stop cleanly", n[i]->dir);
    }
}

/* Invoke Source once with x = n floats of value 1. */
static void invoke_source(size_t n)
{
    size_t cap = 64 + 2 * n;
    char *req = malloc(cap);
    if (!req)
        bench_die("malloc");
    size_t k = (size_t)snprintf(req, cap, "{\"cmd\":\"invoke\",\"target\":\"Source\","
                                          "\"inputs\":{\"x\":[");
    for (size_t i = 0; i < n; i++) {
        req[k++] = '1';
        req[k++] = i + 1 < n ? ',' : ']';
    }
    snprintf(req + k, cap - k, "}}");
    cJSON_Delete(node_request(&B.source, req));
    free(req);
}

/* Wait until n's engine received at least `envelopes` envelopes (asking
 * for its status every POLL_MS), then read the stamps of its Record ring
 * named `name`: records skip .. skip+n_stamps-1 into stamps[n_stamps]. */
static void collect_stamps(const bench_node *n, uint64_t envelopes, const char *name, size_t skip,
                           size_t n_stamps, uint64_t *stamps)
{
    double deadline = bench_now_ns() + FLOW_TIMEOUT_S * 1e9;
    struct timespec pause = {0, POLL_MS * 1000000L};
    while (node_counter(n, "envelopes.in") < envelopes) {
        if (bench_now_ns() > deadline)
            bench_node_fail(n, "the flow stalled (not enough envelopes before the deadline)");
        nanosleep(&pause, NULL);
    }
    char req[96];
    snprintf(req, sizeof req, "{\"cmd\":\"records\",\"name\":\"%s\"}", name);
    cJSON *r = node_request(n, req);
    const cJSON *recs = cJSON_GetObjectItemCaseSensitive(r, "records");
    if ((size_t)cJSON_GetArraySize(recs) < skip + n_stamps)
        bench_node_fail(n, "%s: fewer records than envelopes received", name);
    size_t i = 0;
    const cJSON *rec;
    cJSON_ArrayForEach(rec, recs)
    {
        if (i >= skip && i < skip + n_stamps) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(rec, "value"), "value");
            if (!cJSON_IsString(v))
                bench_node_fail(n, "%s: a record without a Clock stamp", name);
            stamps[i - skip] = strtoull(v->valuestring, NULL, 10);
        }
        i++;
    }
    cJSON_Delete(r);
}

/* ---- the runs ------------------------------------------------------------------------ */

/* One round of bbd round trips: lat[TRIPS] in ns. */
static void bbd_rtt(double *lat, void *ud)
{
    (void)ud;
    pair_start();
    invoke_source(SMALL_FLOATS);
    uint64_t *stamps = malloc((TRIPS + 1) * sizeof *stamps);
    if (!stamps)
        bench_die("malloc");
    collect_stamps(&B.source, WARMUP + TRIPS + 1, "ack", WARMUP, TRIPS + 1, stamps);
    for (int i = 0; i < TRIPS; i++)
        lat[i] = (double)(stamps[i + 1] - stamps[i]);
    free(stamps);
    pair_stop();
}

/* One round of bbd throughput; MiB/s measured at Sink once the window is
 * full: from one window after the last invoke (an invoke of a 1 MiB JSON
 * array holds Source's loop while bbd parses it). */
static double bbd_stream(void *ud)
{
    (void)ud;
    pair_start();
    for (int i = 0; i < WINDOW; i++)
        invoke_source(BIG_FLOATS);
    size_t seen = (size_t)node_counter(&B.sink, "envelopes.in") + WINDOW;
    uint64_t stamps[STREAM_MIB + 1];
    collect_stamps(&B.sink, seen + STREAM_MIB + 1, "got", seen, STREAM_MIB + 1, stamps);
    pair_stop();
    return STREAM_MIB / ((double)(stamps[STREAM_MIB] - stamps[0]) / 1e9);
}

/* ---- security noise against off ------------------------------------------------------------ */

static void security_row(const char *path, const double *lat, size_t n, double ratio,
                         const char *target)
{
    double *v = malloc(n * sizeof *v);
    if (!v)
        bench_die("malloc");
    memcpy(v, lat, n * sizeof *v);
    printf("%-34s %8.1f %8.1f %8.1f %9.2f %11s\n", path, bench_percentile(v, n, 0.50) / 1e3,
           bench_percentile(v, n, 0.99) / 1e3, bench_mean(v, n) / 1e3, ratio, target);
    free(v);
}

/* Rounds of an "off" pair then a "noise" pair, unpinned: round trips and
 * throughput side by side. Returns whether both targets were met. */
static bool security_compare(void)
{
    bench_place(false);
    size_t n = (size_t)ROUNDS * TRIPS;
    double *off = malloc(n * sizeof *off), *on = malloc(n * sizeof *on), ratios[ROUNDS];
    if (!off || !on)
        bench_die("malloc");
    for (int r = 0; r < ROUNDS; r++) {
        B.node_config = B.config_off;
        bbd_rtt(off + (size_t)r * TRIPS, NULL);
        B.node_config = B.config;
        bbd_rtt(on + (size_t)r * TRIPS, NULL);
        ratios[r] = bench_percentile(on + (size_t)r * TRIPS, TRIPS, 0.50) /
                    bench_percentile(off + (size_t)r * TRIPS, TRIPS, 0.50);
    }
    double rtt_ratio = bench_median(ratios, ROUNDS);
    bool rtt_ok = rtt_ratio <= 1.15;
    printf("\nsecurity \"noise\" (the default) against \"off\", unpinned, %d-byte tensors, "
           "%d rounds of %d round trips each\n",
           SMALL_FLOATS * 4, ROUNDS, TRIPS);
    printf("%-34s %8s %8s %8s %9s %11s\n", "path", "p50 us", "p99 us", "mean us", "p50 ratio",
           "target");
    security_row("bbd -> bbd, security off", off, n, 1, "");
    security_row("bbd -> bbd, security noise", on, n, rtt_ratio,
                 rtt_ok ? "<=1.15 ok" : "<=1.15 MISS");
    free(off);
    free(on);
    double best_off = 0, best_on = 0, sratios[STREAM_ROUNDS];
    for (int r = 0; r < STREAM_ROUNDS; r++) {
        B.node_config = B.config_off;
        double x = bbd_stream(NULL);
        B.node_config = B.config;
        double y = bbd_stream(NULL);
        best_off = x > best_off ? x : best_off;
        best_on = y > best_on ? y : best_on;
        sratios[r] = y / x;
    }
    double sratio = bench_median(sratios, STREAM_ROUNDS);
    bool s_ok = sratio >= 0.80;
    printf("\nthroughput, unpinned, %d MiB as 1 MiB tensors, 8 in flight, %d rounds\n",
           STREAM_MIB, STREAM_ROUNDS);
    printf("%-34s %9s %10s %11s\n", "path", "MiB/s", "ratio", "target");
    printf("%-34s %9.0f %10s %11s\n", "bbd -> bbd, security off", best_off, "1.00", "");
    printf("%-34s %9.0f %10.2f %11s\n", "bbd -> bbd, security noise", best_on, sratio,
           s_ok ? ">=0.80 ok" : ">=0.80 MISS");
    printf("(ratios: the median of the rounds' noise/off, each pair run back to back on fresh\n"
           " nodes; p50/p99/mean over all rounds, MiB/s the best round of each)\n");
    return rtt_ok && s_ok;
}

/* The libuv floor of the pinned round trip (bench_uv_pingpong). */
static void uv_floor_rtt(double *lat, void *ud)
{
    (void)ud;
    bench_uv_pingpong(SMALL_FLOATS * 4, WARMUP, TRIPS, lat);
}

/* The codec floor: the libuv ping-pong of the wire loop's envelopes,
 * framed, decoded and encoded by bbd's own code, no engine
 * (bench/support/codec_pingpong.h). */
static void codec_floor_rtt(double *lat, void *ud)
{
    (void)ud;
    bench_codec_pingpong(WARMUP, TRIPS, lat);
}

/* The io_uring ping-pong (bench/uring_pingpong.c, built by make bench):
 * one system call a message where the epoll floor makes three. */
static void uring_floor_rtt(double *lat, void *ud)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "%s %d %d %d", (const char *)ud, SMALL_FLOATS * 4, WARMUP, TRIPS);
    FILE *p = popen(cmd, "r");
    if (!p)
        bench_die("popen uring_pingpong");
    int n = 0;
    unsigned long long ns;
    while (n < TRIPS && fscanf(p, "%llu", &ns) == 1)
        lat[n++] = (double)ns;
    if (pclose(p) != 0 || n != TRIPS) {
        fprintf(stderr, "bench_bbd_wire: %s failed (%d of %d round trips)\n", cmd, n, TRIPS);
        exit(1);
    }
}

/* ---- report ----------------------------------------------------------------------------- */

static void setup(void)
{
    if (bench_build_dir(B.build, B.self, sizeof B.self) != 0)
        bench_die("/proc/self/exe");
    snprintf(B.bbd, sizeof B.bbd, "%s/bin/bbd", B.build);
    snprintf(B.tmp, sizeof B.tmp, "/tmp/bench-wire-XXXXXX");
    if (!mkdtemp(B.tmp))
        bench_die("mkdtemp");
    atexit(cleanup);
    snprintf(B.plugdir, sizeof B.plugdir, "%s/plugins", B.tmp);
    snprintf(B.config, sizeof B.config, "%s/bbd.json", B.tmp);
    snprintf(B.config_off, sizeof B.config_off, "%s/bbd-off.json", B.tmp);
    B.node_config = B.config;
    for (int off = 0; off < 2; off++) {
        const char *path = off ? B.config_off : B.config;
        FILE *f = fopen(path, "w");
        if (!f ||
            fprintf(f, "{\"caps\": {\"record_ring\": %d}%s}\n", RECORD_RING,
                    off ? ", \"security\": \"off\"" : "") < 0 ||
            fclose(f) != 0)
            bench_die(path);
    }
    if (bench_compile_example(B.build, B.tmp, "wire_loop", B.artifact, sizeof B.artifact) != 0)
        exit(1);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    setup();
    printf("bench_bbd_wire: two bbd processes on loopback TCP (examples/wire_loop), engine to "
           "engine;\n%d-byte tensors, %d round trips per placement (%d rounds, fresh nodes "
           "each, alternating with the raw runs)\n\n",
           SMALL_FLOATS * 4, ROUNDS * TRIPS, ROUNDS);
    bench_rtt_header();
    bool all_ok = true;
    /* BENCH_WIRE_ONLY=rtt, =off, =stream or =security runs that part alone
     * (off: the pinned security-off row, issue 23's target, alone) */
    const char *only = getenv("BENCH_WIRE_ONLY");
    bool off_only = only && strcmp(only, "off") == 0;
    bool rtt = !only || strcmp(only, "rtt") == 0 || off_only;
    bool stream = !only || strcmp(only, "stream") == 0;
    bool security = !only || strcmp(only, "security") == 0;
    if (!rtt)
        printf("(round trips against raw TCP skipped: BENCH_WIRE_ONLY=%s)\n", only);
    if (rtt) {
        /* Issue 23's small-message target, pinned: what bbd itself adds,
         * plaintext like the raw ping-pong. Beside it the default channel
         * (its own cost is the security part's <= 1.15x) and the floor: an
         * event loop on each side and nothing else (3 syscalls a hop where
         * the raw ping-pong makes 2), a figure to read the others by; and
         * the same with io_uring (1 system call a hop): whether another
         * event loop would lower that floor. */
        const char *pin = "same core (cpu 0)";
        bench_place(true);
        B.node_config = B.config_off;
        all_ok &= bench_rtt_compare(pin, "bbd -> bbd, security off", SMALL_FLOATS * 4, ROUNDS,
                                    WARMUP, TRIPS, 1.2, bbd_rtt, NULL);
        B.node_config = B.config;
        if (!off_only) {
            bench_rtt_reference(pin, "bbd -> bbd, security noise", "beside off", SMALL_FLOATS * 4,
                                ROUNDS, WARMUP, TRIPS, bbd_rtt, NULL);
            bench_rtt_reference(pin, "bare libuv ping-pong", "floor (reference)",
                                SMALL_FLOATS * 4, ROUNDS, WARMUP, TRIPS, uv_floor_rtt, NULL);
            bench_rtt_reference(pin, "bbd codec, no engine", "codec floor (ref.)",
                                SMALL_FLOATS * 4, ROUNDS, WARMUP, TRIPS, codec_floor_rtt, NULL);
            char uring[PATH_MAX + 32];
            snprintf(uring, sizeof uring, "%s/bench/uring_pingpong", B.build);
            if (access(uring, X_OK) == 0)
                bench_rtt_reference(pin, "io_uring ping-pong", "floor (reference)",
                                    SMALL_FLOATS * 4, ROUNDS, WARMUP, TRIPS, uring_floor_rtt,
                                    uring);
            else
                printf("(no io_uring row: %s is built by make bench, with liburing-dev)\n", uring);
            bench_place(false);
            all_ok &= bench_rtt_compare("unpinned", "bbd -> bbd", SMALL_FLOATS * 4, ROUNDS, WARMUP,
                                        TRIPS, 1.5, bbd_rtt, NULL);
        }
    }
    printf("(bbd: consecutive Clock stamps of Source's \"ack\" records, read from its Record\n"
           " ring after the run; p50/p99/mean over all rounds, the ratio the median of the\n"
           " rounds' p50 ratios, each raw/bbd pair run back to back)\n");
    bench_place(false);
    char title[96];
    snprintf(title, sizeof title, "throughput, unpinned, %d MiB as 1 MiB tensors, %d rounds",
             STREAM_MIB, STREAM_ROUNDS);
    bool tok = !stream ||
               bench_stream_compare(title, "bbd -> bbd, 1 MiB tensors, 8 in flight",
                                    "(bbd's MiB/s measured at Sink, from its \"got\" records)",
                                    STREAM_MIB, STREAM_ROUNDS, bbd_stream, NULL);
    bool sok = !security || security_compare();
    printf("\ntargets: %s\n", all_ok && tok && sok ? "all met" : "NOT all met");
    return 0;
}
