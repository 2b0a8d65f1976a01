/*
 * test_secure_udp.c — secure UDP sessions (udp_secure.c) and the replay
 * window (replay.c): nodes on one uv loop over 127.0.0.1, and a relay
 * socket in the middle that forwards, holds back, replays and alters
 * datagrams. Waits are conditions with deadlines (WAIT_FOR).
 */
#include "test_transport_harness.h"

#include <sodium.h>

#include "bbd/host/fragment.h"
#include "bbd/host/replay.h"

#define UDP0 "/ip4/127.0.0.1/udp/0"

/* ---- the replay window ------------------------------------------------------------------- */

static void test_secure_replay_window(void **state)
{
    (void)state;
    bbd_replay r;
    memset(&r, 0, sizeof r);
    assert_true(bbd_replay_check(&r, 5));
    bbd_replay_mark(&r, 5);
    assert_false(bbd_replay_check(&r, 5));    /* seen */
    assert_true(bbd_replay_check(&r, 3));     /* older, unseen: in the window */
    bbd_replay_mark(&r, 3);
    assert_false(bbd_replay_check(&r, 3));
    assert_true(bbd_replay_check(&r, 4));
    bbd_replay_mark(&r, 5000);                /* a jump: the window slides */
    assert_false(bbd_replay_check(&r, 4));    /* now below the window */
    assert_true(bbd_replay_check(&r, 5000 - BBD_REPLAY_WINDOW + 1));
    assert_false(bbd_replay_check(&r, 5000 - BBD_REPLAY_WINDOW));
    /* the slots the window slid past are cleared: no stale "seen" bits */
    for (uint64_t n = 5001; n < 5001 + BBD_REPLAY_WINDOW; n++)
        assert_true(bbd_replay_check(&r, n));
    bbd_replay_mark(&r, 5000 + BBD_REPLAY_WINDOW - 1);
    assert_true(bbd_replay_check(&r, 5001));
    assert_false(bbd_replay_check(&r, 5000)); /* just fell out */
    assert_true(bbd_replay_check(&r, UINT64_MAX - 1));
}

/* ---- a relay between two nodes --------------------------------------------------------------- */

#define HELD_MAX 16

typedef struct relay {
    int fd;                   /* the relay's socket: A dials it */
    struct sockaddr_in a, b;  /* A's socket (learned), B's listen socket */
    bool know_a;
    uint8_t bytes[64];        /* the relay's address as a multiaddr */
    bbd_addr addr;
    bool hold;                /* keep sealed datagrams from A instead of forwarding */
    uint8_t held[HELD_MAX][2048];
    size_t held_len[HELD_MAX], n_held;
    uint8_t last[2048];       /* the last sealed datagram forwarded from A */
    size_t last_len;
} relay;

static void relay_open(relay *r, const bbd_addr *b_addr)
{
    memset(r, 0, sizeof *r);
    r->fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    assert_int_equal(bind(r->fd, (struct sockaddr *)&sa, sl), 0);
    assert_int_equal(getsockname(r->fd, (struct sockaddr *)&sa, &sl), 0);
    fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) | O_NONBLOCK);
    char text[64];
    size_t len;
    snprintf(text, sizeof text, "/ip4/127.0.0.1/udp/%u", ntohs(sa.sin_port));
    assert_int_equal(bb_multiaddr_parse(text, r->bytes, sizeof r->bytes, &len, NULL), BB_OK);
    r->addr = (bbd_addr){r->bytes, len};
    r->b = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                .sin_port = htons(addr_port(b_addr))};
}

static void relay_to(relay *r, const struct sockaddr_in *to, const uint8_t *d, size_t n)
{
    assert_int_equal(sendto(r->fd, d, n, 0, (const struct sockaddr *)to, sizeof *to), (ssize_t)n);
}

/* Forward what arrived (always true: a WAIT_FOR step). */
static bool relay_pump(relay *r)
{
    uint8_t d[2048];
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    ssize_t n;
    while ((n = recvfrom(r->fd, d, sizeof d, 0, (struct sockaddr *)&from, &fl)) > 0) {
        bool from_b = from.sin_port == r->b.sin_port;
        if (!from_b) {
            r->a = from;
            r->know_a = true;
        }
        bool sealed = n > 1 && d[1] == BBD_DGRAM_SEALED;
        if (!from_b && sealed && r->hold && r->n_held < HELD_MAX) {
            memcpy(r->held[r->n_held], d, (size_t)n);
            r->held_len[r->n_held++] = (size_t)n;
        } else if (from_b) {
            if (r->know_a)
                relay_to(r, &r->a, d, (size_t)n);
        } else {
            if (sealed) {
                memcpy(r->last, d, (size_t)n);
                r->last_len = (size_t)n;
            }
            relay_to(r, &r->b, d, (size_t)n);
        }
        fl = sizeof from;
    }
    return true;
}

#define PUMP_UNTIL(r, expr) WAIT_FOR((relay_pump(r), (expr)), 3000)

/* A (seed 1) and B (seed 2) on UDP, A sending to B through the relay. */
static void relay_pair(node *a, node *b, relay *r, const bbd_transport_config *cb)
{
    node_start(a, 1, "A", NULL);
    node_listen(a, UDP0);
    node_start(b, 2, "B", cb);
    node_listen(b, UDP0);
    bbd_addr ba = node_addr(b, BB_MA_UDP);
    relay_open(r, &ba);
}

/* Replayed and altered datagrams are dropped and counted before they are
 * decoded; datagrams reordered within the window are each taken once;
 * traffic goes on. */
static void test_secure_udp_replayed_altered_reordered(void **state)
{
    (void)state;
    node a, b;
    relay r;
    relay_pair(&a, &b, &r, NULL);
    assert_int_equal(send_to(&a, &b.id, &r.addr, 100, 1), BB_OK);
    PUMP_UNTIL(&r, b.n_env == 1 && a.n_connected == 1);
    assert_true(env_is(&b.env[0], 100, 1));
    /* replayed: the datagram B already took */
    relay_to(&r, &r.b, r.last, r.last_len);
    PUMP_UNTIL(&r, stats_of(&b).replayed == 1);
    /* altered: a copy of a fresh datagram with one bit flipped, then the
     * original; reordered: two held back, sent last first */
    r.hold = true;
    assert_int_equal(send_to(&a, &b.id, NULL, 100, 2), BB_OK);
    assert_int_equal(send_to(&a, &b.id, NULL, 100, 3), BB_OK);
    PUMP_UNTIL(&r, r.n_held == 2);
    uint8_t bad[2048];
    memcpy(bad, r.held[0], r.held_len[0]);
    bad[r.held_len[0] - 5] ^= 0x10;
    relay_to(&r, &r.b, bad, r.held_len[0]);
    PUMP_UNTIL(&r, stats_of(&b).auth_failed == 1);
    relay_to(&r, &r.b, r.held[1], r.held_len[1]);
    relay_to(&r, &r.b, r.held[0], r.held_len[0]);
    PUMP_UNTIL(&r, b.n_env == 3);
    assert_true(env_is(&b.env[1], 100, 3));
    assert_true(env_is(&b.env[2], 100, 2));
    relay_to(&r, &r.b, r.held[1], r.held_len[1]); /* and again: replayed */
    PUMP_UNTIL(&r, stats_of(&b).replayed == 2);
    assert_int_equal(b.n_env, 3);
    /* a plaintext envelope datagram is not even decoded */
    uint8_t plain[] = {BBD_DGRAM_MAGIC, BBD_DGRAM_ENVELOPE, 'x'};
    relay_to(&r, &r.b, plain, sizeof plain);
    PUMP_UNTIL(&r, stats_of(&b).unauthenticated == 1);
    assert_int_equal(b.n_env, 3);
    assert_non_null(strstr(b.logs, "replayed datagram"));
    assert_non_null(strstr(b.logs, "failed authentication"));
    r.hold = false;
    assert_int_equal(send_to(&a, &b.id, NULL, 5000, 4), BB_OK); /* fragments */
    PUMP_UNTIL(&r, b.n_env == 4);
    assert_true(env_is(&b.env[3], 5000, 4));
    close(r.fd);
    pair_close(&a, &b);
}

static const char *refuse_all(void *ud, const bb_peerid *peer)
{
    (void)ud, (void)peer;
    return "not on the node's allow list";
}

/* A dial for another PeerId, a refused admission, security off on one
 * side: each fails its handshake, said in the logs, nothing connects. */
static void test_secure_udp_refusals(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, UDP0);
    node_listen(&a, UDP0);
    bb_peerid c = peer_of(3);
    assert_int_equal(send_to(&a, &c, &ba, 10, 1), BB_OK);
    WAIT_FOR(a.n_fail == 1, 3000);
    assert_non_null(strstr(a.logs, "answered (its key proves it)"));
    assert_int_equal(a.n_connected + b.n_connected, 0);
    pair_close(&a, &b);

    node_start(&a, 1, "A", NULL);
    node_listen(&a, UDP0);
    node_open_admit(&b, 2, "B", NULL, false, refuse_all);
    node_listen(&b, UDP0);
    ba = node_addr(&b, BB_MA_UDP);
    assert_int_equal(send_to(&a, &b.id, &ba, 10, 1), BB_OK);
    WAIT_FOR(a.n_fail == 1, 3000);
    assert_non_null(strstr(a.logs, "refused this node: not on the node's allow list"));
    assert_int_equal(stats_of(&b).peers_refused, 1);
    assert_int_equal(a.n_connected + b.n_connected, 0);
    pair_close(&a, &b);

    bbd_transport_config off;
    bbd_transport_config_init(&off);
    off.security = BBD_SECURITY_OFF;
    ba = pair_start(&a, &b, &off, NULL, UDP0);
    node_listen(&a, UDP0);
    assert_int_equal(send_to(&a, &b.id, &ba, 10, 1), BB_OK);
    WAIT_FOR(stats_of(&a).handshakes_failed >= 1 && stats_of(&b).handshakes_failed >= 1, 3000);
    assert_non_null(strstr(b.logs, "runs with security \"off\""));
    assert_non_null(strstr(a.logs, "requires encrypted channels"));
    assert_int_equal(a.n_connected + b.n_connected, 0);
    pair_close(&a, &b);
}

/* The handshake survives loss: the relay drops the first of every
 * handshake datagram and B's first sealed one (the admission);
 * retransmission and the answers to repeats complete it. */
static void test_secure_udp_handshake_loss(void **state)
{
    (void)state;
    node a, b;
    relay r;
    relay_pair(&a, &b, &r, NULL);
    assert_int_equal(send_to(&a, &b.id, &r.addr, 10, 1), BB_OK);
    /* drop the first of each handshake kind in each direction */
    bool dropped[16] = {false};
    uint64_t deadline = uv_now(&loop) + 10000;
    while (b.n_env == 0 && uv_now(&loop) < deadline) {
        uint8_t d[2048];
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n;
        while ((n = recvfrom(r.fd, d, sizeof d, 0, (struct sockaddr *)&from, &fl)) > 0) {
            bool from_b = from.sin_port == r.b.sin_port;
            if (!from_b)
                r.a = from, r.know_a = true;
            unsigned k = (unsigned)d[1] + (from_b ? 8 : 0);
            fl = sizeof from;
            bool handshake = (d[1] >= BBD_DGRAM_NOISE1 && d[1] <= BBD_DGRAM_NOISE3) ||
                             (from_b && d[1] == BBD_DGRAM_SEALED);
            if (handshake && !dropped[k % 16]) {
                dropped[k % 16] = true;
                continue;
            }
            relay_to(&r, from_b ? &r.a : &r.b, d, (size_t)n);
        }
        run_for(5);
    }
    assert_int_equal(b.n_env, 1);
    assert_true(env_is(&b.env[0], 10, 1));
    assert_int_equal(a.n_connected, 1);
    close(r.fd);
    pair_close(&a, &b);
}

/* NOISE1s spoofed on an established peer's address: each would cost two
 * DH operations, so B answers at most one per 250 ms on that session (the
 * bound counted against the time the burst took), keeps the session's
 * keys, and A's traffic goes on. */
static void test_secure_udp_spoofed_handshakes(void **state)
{
    (void)state;
    node a, b;
    relay r;
    relay_pair(&a, &b, &r, NULL);
    assert_int_equal(send_to(&a, &b.id, &r.addr, 10, 1), BB_OK);
    PUMP_UNTIL(&r, b.n_env == 1 && a.n_connected == 1);
    uint64_t started = uv_now(&loop);
    uint8_t msg1[BBD_DGRAM_NOISE1_MIN] = {BBD_DGRAM_MAGIC, BBD_DGRAM_NOISE1};
    size_t answers = 0;
    while (uv_now(&loop) - started < 800) { /* past 250 ms from the handshake */
        randombytes_buf(msg1 + 2, 32); /* a new ephemeral key each time */
        relay_to(&r, &r.b, msg1, sizeof msg1);
        run_for(1);
        uint8_t d[2048];
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n;
        while ((n = recvfrom(r.fd, d, sizeof d, 0, (struct sockaddr *)&from, &fl)) > 0) {
            if (from.sin_port == r.b.sin_port && d[1] == BBD_DGRAM_NOISE2)
                answers++;
            fl = sizeof from;
        }
    }
    uint64_t took = uv_now(&loop) - started;
    assert_true(answers >= 1); /* a restarted peer is still answered */
    assert_true(answers <= 1 + took / 250);
    assert_int_equal(send_to(&a, &b.id, NULL, 10, 2), BB_OK);
    PUMP_UNTIL(&r, b.n_env == 2);
    assert_true(env_is(&b.env[1], 10, 2));
    close(r.fd);
    pair_close(&a, &b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secure_replay_window),
        cmocka_unit_test(test_secure_udp_replayed_altered_reordered),
        cmocka_unit_test(test_secure_udp_refusals),
        cmocka_unit_test(test_secure_udp_handshake_loss),
        cmocka_unit_test(test_secure_udp_spoofed_handshakes),
    };
    return cmocka_run_group_tests(tests, harness_setup, harness_teardown);
}
