/*
 * test_transport_harness.h — nodes (a transport plus everything its
 * callbacks reported) on one uv loop in one process, for the transport
 * tests. Waits are conditions with deadlines (WAIT_FOR), never sleeps.
 * Included by test_transport*.c only (each test binary has its own loop).
 */
#ifndef TEST_TRANSPORT_HARNESS_H
#define TEST_TRANSPORT_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "bbd/host/frame.h"
#include "bbd/host/handshake.h"
#include "bbd/host/transport.h"

#define MAX_ENV 256
#define HARNESS static __attribute__((unused))

static uv_loop_t loop;

typedef struct rx_env {
    bb_peerid from;
    uint8_t *bytes;
    size_t len;
    uint8_t obs[64];
    size_t obs_len;
} rx_env;

typedef struct node {
    bbd_transport *t;
    bb_peerid id;
    const char *target;
    rx_env env[MAX_ENV];
    size_t n_env;
    size_t n_owned; /* of those, handed over by on_envelope_owned */
    size_t n_connected, n_disconnected;
    bb_peerid conn_peer, disc_peer; /* the last connected / disconnected */
    uint8_t conn_addrs[8][64];
    size_t conn_addr_len[8], n_conn_addrs;
    char conn_targets[4][64];
    size_t n_conn_targets;
    size_t n_ok, n_fail;
    char logs[8192];
    size_t n_logs;
    bool closed;
} node;

/* ---- deadlines ---------------------------------------------------------------------- */

static uv_timer_t deadline_timer, tick_timer;
static bool deadline_passed;

HARNESS void tick_cb(uv_timer_t *h)
{
    (void)h;
}

HARNESS void deadline_cb(uv_timer_t *h)
{
    (void)h;
    deadline_passed = true;
    /* Timers run before the poll in a loop turn: without this the same
     * turn could block in the poll with no timer left to wake it. */
    uv_stop(&loop);
}

HARNESS void deadline_start(uint64_t ms)
{
    deadline_passed = false;
    uv_timer_init(&loop, &deadline_timer);
    uv_timer_start(&deadline_timer, deadline_cb, ms, 0);
    uv_timer_init(&loop, &tick_timer);
    uv_timer_start(&tick_timer, tick_cb, 1, 1);
}

HARNESS void deadline_stop(void)
{
    uv_close((uv_handle_t *)&deadline_timer, NULL);
    uv_close((uv_handle_t *)&tick_timer, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
}

/* Run the loop until expr holds; fail the test after ms. expr is evaluated
 * once per loop turn (it may consume, e.g. read a socket). A tick timer
 * ends a turn at least every millisecond: callbacks the loop runs before
 * it waits (the transport reports a send the socket took at once from its
 * prepare phase) are seen without an unrelated event to wake it. */
#define WAIT_FOR(expr, ms)                                                          \
    do {                                                                            \
        bool wait_ok_;                                                              \
        deadline_start(ms);                                                         \
        while (!(wait_ok_ = (expr)) && !deadline_passed)                            \
            uv_run(&loop, UV_RUN_ONCE);                                             \
        deadline_stop();                                                            \
        if (!wait_ok_)                                                              \
            fail_msg("line %d: timed out after %d ms waiting for %s", __LINE__,     \
                     (int)(ms), #expr);                                             \
    } while (0)

/* Run the loop for ms (to check that something does NOT happen). */
HARNESS void run_for(uint64_t ms)
{
    deadline_start(ms);
    while (!deadline_passed)
        uv_run(&loop, UV_RUN_ONCE);
    deadline_stop();
}

/* ---- callbacks ------------------------------------------------------------------------ */

/* The next received envelope's record, with its sender and observed address. */
HARNESS rx_env *env_add(node *n, const bb_peerid *from, const bbd_addr *observed, size_t len)
{
    assert_true(n->n_env < MAX_ENV);
    rx_env *e = &n->env[n->n_env++];
    e->from = *from;
    e->len = len;
    e->obs_len = 0;
    if (observed) {
        assert_true(observed->len <= sizeof e->obs);
        memcpy(e->obs, observed->data, observed->len);
        e->obs_len = observed->len;
    }
    return e;
}

HARNESS void cb_envelope(void *ud, const bb_peerid *from, const bbd_addr *observed,
                        const uint8_t *bytes, size_t len)
{
    rx_env *e = env_add(ud, from, observed, len);
    e->bytes = malloc(len ? len : 1);
    assert_non_null(e->bytes);
    if (len)
        memcpy(e->bytes, bytes, len);
}

/* Keeps the bytes it is given (freed with the node's other envelopes). */
HARNESS void cb_envelope_owned(void *ud, const bb_peerid *from, const bbd_addr *observed,
                              uint8_t *bytes, size_t len)
{
    ((node *)ud)->n_owned++;
    env_add(ud, from, observed, len)->bytes = bytes;
}

HARNESS void cb_connected(void *ud, const bb_peerid *peer, const bbd_addr *addrs, size_t n_addrs,
                         const char *const *targets, size_t n_targets)
{
    node *n = ud;
    n->n_connected++;
    n->conn_peer = *peer;
    n->n_conn_addrs = n_addrs < 8 ? n_addrs : 8;
    for (size_t i = 0; i < n->n_conn_addrs; i++) {
        assert_true(addrs[i].len <= 64);
        memcpy(n->conn_addrs[i], addrs[i].data, addrs[i].len);
        n->conn_addr_len[i] = addrs[i].len;
    }
    n->n_conn_targets = n_targets < 4 ? n_targets : 4;
    for (size_t i = 0; i < n->n_conn_targets; i++)
        snprintf(n->conn_targets[i], sizeof n->conn_targets[i], "%s", targets[i]);
}

HARNESS void cb_disconnected(void *ud, const bb_peerid *peer)
{
    node *n = ud;
    n->n_disconnected++;
    n->disc_peer = *peer;
}

HARNESS void cb_send_result(void *ud, const bb_peerid *peer, bool ok)
{
    (void)peer;
    node *n = ud;
    if (ok)
        n->n_ok++;
    else
        n->n_fail++;
}

HARNESS void cb_log(void *ud, int level, const char *msg)
{
    (void)level;
    node *n = ud;
    n->n_logs++;
    size_t used = strlen(n->logs);
    snprintf(n->logs + used, sizeof n->logs - used, "%s\n", msg);
    if (getenv("TRANSPORT_TEST_LOG"))
        fprintf(stderr, "[%s] %s\n", n->target, msg);
}

/* ---- nodes -------------------------------------------------------------------------------- */

HARNESS bb_peerid peer_key(uint8_t seed_byte, bb_keypair *kp)
{
    uint8_t seed[BB_ED25519_SEED_LEN];
    memset(seed, seed_byte, sizeof seed);
    bb_peerid id;
    assert_int_equal(bb_peerid_from_seed(seed, kp, &id, NULL), BB_OK);
    return id;
}

HARNESS bb_peerid peer_of(uint8_t seed_byte)
{
    return peer_key(seed_byte, NULL);
}

/* A node with identity seed, announcing target; cfg NULL = defaults.
 * take_owned: it takes large frames' buffers (on_envelope_owned); admit:
 * its admit callback (NULL: admits everyone). */
HARNESS void node_open_admit(node *n, uint8_t seed, const char *target,
                             const bbd_transport_config *cfg, bool take_owned,
                             const char *(*admit)(void *ud, const bb_peerid *peer))
{
    memset(n, 0, sizeof *n);
    bb_keypair kp;
    n->id = peer_key(seed, &kp);
    n->target = target;
    bbd_transport_config c;
    if (cfg)
        c = *cfg;
    else
        bbd_transport_config_init(&c);
    c.self = n->id;
    c.identity = &kp; /* the node's key signs its Noise key (the default security) */
    c.targets = &n->target;
    c.n_targets = 1;
    bbd_transport_callbacks cb = {cb_envelope, cb_connected, cb_disconnected, cb_send_result,
                                  cb_log, n, take_owned ? cb_envelope_owned : NULL, admit};
    bb_error err = {0};
    n->t = bbd_transport_new(&loop, &c, &cb, &err);
    bb_keypair_wipe(&kp);
    if (!n->t)
        fail_msg("bbd_transport_new: %s", err.msg);
}

HARNESS void node_open(node *n, uint8_t seed, const char *target, const bbd_transport_config *cfg,
                       bool take_owned)
{
    node_open_admit(n, seed, target, cfg, take_owned, NULL);
}

HARNESS void node_start(node *n, uint8_t seed, const char *target, const bbd_transport_config *cfg)
{
    node_open(n, seed, target, cfg, false);
}

HARNESS void node_listen(node *n, const char *text)
{
    uint8_t a[BB_MULTIADDR_MAX_LEN];
    size_t len;
    bb_error err = {0};
    assert_int_equal(bb_multiaddr_parse(text, a, sizeof a, &len, &err), BB_OK);
    if (bbd_transport_listen(n->t, a, len, &err) != BB_OK)
        fail_msg("listen %s: %s", text, err.msg);
}

/* n's bound listen address of proto (BB_MA_TCP / BB_MA_UDP). */
HARNESS bbd_addr node_addr(node *n, bb_ma_proto proto)
{
    const bbd_addr *addrs;
    size_t k = bbd_transport_listen_addrs(n->t, &addrs);
    for (size_t i = 0; i < k; i++) {
        bb_ma_transport ma;
        assert_int_equal(bb_multiaddr_transport(addrs[i].data, addrs[i].len, &ma, NULL), BB_OK);
        if (ma.proto == proto && ma.port != 0)
            return addrs[i];
    }
    fail_msg("node has no bound %s address", proto == BB_MA_TCP ? "tcp" : "udp");
    return addrs[0];
}

/* node_start, then listen on text; returns the bound address of proto. */
HARNESS bbd_addr node_serve(node *n, uint8_t seed, const char *target,
                            const bbd_transport_config *cfg, const char *text, bb_ma_proto proto)
{
    node_start(n, seed, target, cfg);
    node_listen(n, text);
    return node_addr(n, proto);
}

HARNESS uint16_t addr_port(const bbd_addr *a)
{
    bb_ma_transport ma;
    assert_int_equal(bb_multiaddr_transport(a->data, a->len, &ma, NULL), BB_OK);
    return ma.port;
}

HARNESS uint8_t *pattern(size_t len, uint8_t seed)
{
    uint8_t *b = malloc(len ? len : 1);
    assert_non_null(b);
    for (size_t i = 0; i < len; i++)
        b[i] = (uint8_t)(i * 31u + seed);
    return b;
}

HARNESS bool env_is(const rx_env *e, size_t len, uint8_t seed)
{
    if (e->len != len)
        return false;
    for (size_t i = 0; i < len; i++)
        if (e->bytes[i] != (uint8_t)(i * 31u + seed))
            return false;
    return true;
}

/* Send len pattern bytes from a to peer over addr (may be NULL: no address). */
HARNESS int send_to(node *a, const bb_peerid *peer, const bbd_addr *addr, size_t len, uint8_t seed)
{
    return bbd_transport_send(a->t, peer, addr, addr ? 1 : 0, pattern(len, seed), len);
}

/* An envelope sent in pieces: the pattern's bytes, the pieces and the
 * count of releases, freed by the transport's release call. */
typedef struct gathered {
    uint8_t *bytes;
    bbd_iov iov[8];
    size_t *released;
} gathered;

HARNESS void gathered_release(void *ud)
{
    gathered *g = ud;
    ++*g->released;
    free(g->bytes);
    free(g);
}

/* Send len pattern bytes from a to peer in n_pieces pieces (<= 8, uneven:
 * each half of what is left, the last one the rest); *released counts the
 * transport's release calls. */
HARNESS int send_gather_to(node *a, const bb_peerid *peer, const bbd_addr *addr, size_t len,
                           uint8_t seed, size_t n_pieces, size_t *released)
{
    gathered *g = malloc(sizeof *g);
    assert_non_null(g);
    assert_true(n_pieces >= 1 && n_pieces <= 8);
    g->bytes = pattern(len, seed);
    g->released = released;
    size_t at = 0;
    for (size_t i = 0; i < n_pieces; i++) {
        size_t n = i + 1 == n_pieces ? len - at : (len - at) / 2;
        g->iov[i] = (bbd_iov){g->bytes + at, n};
        at += n;
    }
    return bbd_transport_send_gather(a->t, peer, addr, addr ? 1 : 0, g->iov, n_pieces, len,
                                     gathered_release, g);
}

HARNESS bbd_transport_stats stats_of(node *n)
{
    bbd_transport_stats s;
    bbd_transport_stats_get(n->t, &s);
    return s;
}

HARNESS void on_closed(void *ud)
{
    ((node *)ud)->closed = true;
}

HARNESS void node_free_env(node *n)
{
    for (size_t i = 0; i < n->n_env; i++)
        free(n->env[i].bytes);
    n->n_env = 0;
}

HARNESS void node_close(node *n)
{
    if (!n->t)
        return;
    bbd_transport_close(n->t, on_closed, n);
    WAIT_FOR(n->closed, 3000);
    n->t = NULL;
    node_free_env(n);
}

HARNESS void count_handle(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        ++*(int *)arg;
}

/* Every handle the tests made is closed. */
HARNESS void assert_loop_empty(void)
{
    uv_run(&loop, UV_RUN_NOWAIT);
    int n = 0;
    uv_walk(&loop, count_handle, &n);
    assert_int_equal(n, 0);
}

/* a ("A", seed 1) and b ("B", seed 2) listening on b_listen; returns b's
 * bound address (valid until b listens again). */
HARNESS bbd_addr pair_start(node *a, node *b, const bbd_transport_config *ca,
                            const bbd_transport_config *cb, const char *b_listen)
{
    node_start(a, 1, "A", ca);
    node_start(b, 2, "B", cb);
    node_listen(b, b_listen);
    const bbd_addr *addrs;
    size_t n = bbd_transport_listen_addrs(b->t, &addrs);
    return addrs[n - 1];
}

HARNESS void pair_close(node *a, node *b)
{
    node_close(a);
    node_close(b);
    assert_loop_empty();
}

HARNESS int harness_setup(void **state)
{
    (void)state;
    return uv_loop_init(&loop);
}

HARNESS int harness_teardown(void **state)
{
    (void)state;
    uv_run(&loop, UV_RUN_NOWAIT);
    return uv_loop_close(&loop) == 0 ? 0 : -1;
}

/* ---- raw sockets (a misbehaving peer) ------------------------------------------------------ */

HARNESS int raw_connect(const bbd_addr *a)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    bb_ma_proto proto;
    assert_int_equal(bb_multiaddr_to_sockaddr(a->data, a->len, &proto, &ss, &sl, NULL), BB_OK);
    int fd = socket(ss.ss_family, proto == BB_MA_TCP ? SOCK_STREAM : SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&ss, sl), 0);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

HARNESS void raw_send(int fd, const void *p, size_t n)
{
    assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* A plaintext handshake frame for identity seed (a raw peer of a node
 * with security off); returns its size. */
HARNESS size_t handshake_frame(uint8_t seed, uint8_t *out, size_t cap)
{
    bbd_handshake h = {.peer = peer_of(seed), .version = BBD_HANDSHAKE_VERSION};
    uint8_t body[512];
    size_t n;
    assert_int_equal(bbd_handshake_encode(&h, body, sizeof body, &n, NULL), BB_OK);
    size_t hl = bbd_frame_header_encode(BBD_FRAME_HANDSHAKE, n, out);
    assert_true(hl + n <= cap);
    memcpy(out + hl, body, n);
    return hl + n;
}

/* The other side closed (EOF or reset); drains what it sent before. */
HARNESS bool raw_closed(int fd)
{
    char buf[4096];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r == 0)
            return true;
        if (r < 0)
            return errno != EAGAIN && errno != EWOULDBLOCK;
    }
}

#endif
