/* TCP transport tests: two or three transports on one uv loop over
 * 127.0.0.1 with free ports — handshake and address exchange, envelopes
 * both ways over one connection, simultaneous connects, an 8 MiB envelope,
 * refused oversize frames, a peer down then up, queue bounds, the receive
 * budget, misbehaving raw peers and a clean close. */
#include "test_transport_harness.h"

#include "bb/uvarint.h"
#include "bbd/host/frame.h"
#include "bbd/host/handshake.h"

#define TCP0 "/ip4/127.0.0.1/tcp/0"

static void test_handshake_and_addresses(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, TCP0);
    node_listen(&a, TCP0);
    assert_int_equal(send_to(&a, &b.id, &ba, 100, 7), BB_OK);
    WAIT_FOR(b.n_env == 1 && a.n_connected == 1 && b.n_connected == 1 && a.n_ok == 1, 3000);

    /* b learned a's PeerId, listen address and target from the handshake. */
    assert_true(bb_peerid_equal(&b.conn_peer, &a.id));
    bbd_addr aa = node_addr(&a, BB_MA_TCP);
    assert_int_equal(b.n_conn_addrs, 1);
    assert_int_equal(b.conn_addr_len[0], aa.len);
    assert_memory_equal(b.conn_addrs[0], aa.data, aa.len);
    assert_int_equal(b.n_conn_targets, 1);
    assert_string_equal(b.conn_targets[0], "A");
    assert_true(bb_peerid_equal(&a.conn_peer, &b.id));
    assert_string_equal(a.conn_targets[0], "B");

    /* The envelope, its sender, and the observed address: the IP it came
     * from with the port a listens on. */
    assert_true(bb_peerid_equal(&b.env[0].from, &a.id));
    assert_true(env_is(&b.env[0], 100, 7));
    assert_int_equal(b.env[0].obs_len, aa.len);
    assert_memory_equal(b.env[0].obs, aa.data, aa.len);

    bbd_peer_stats ps;
    assert_true(bbd_transport_peer_stats_at(b.t, 0, &ps));
    assert_true(ps.connected);
    assert_string_equal(ps.state, "open");
    assert_int_equal(ps.envelopes_in, 1);
    pair_close(&a, &b);
}

/* b answers over the connection a opened; no second connection appears. */
static void test_both_directions_one_connection(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, TCP0);
    node_listen(&a, TCP0);
    bbd_addr aa = node_addr(&a, BB_MA_TCP);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(send_to(&a, &b.id, &ba, 10 + i, (uint8_t)i), BB_OK);
        WAIT_FOR(b.n_env == (size_t)i + 1, 3000);
        assert_int_equal(send_to(&b, &a.id, &aa, 20 + i, (uint8_t)(i + 50)), BB_OK);
        WAIT_FOR(a.n_env == (size_t)i + 1, 3000);
        assert_true(env_is(&a.env[i], 20 + i, (uint8_t)(i + 50)));
    }
    assert_int_equal(stats_of(&a).connections_open, 1);
    assert_int_equal(stats_of(&b).connections_open, 1);
    assert_int_equal(a.n_connected, 1);
    assert_int_equal(b.n_connected, 1);
    /* b can even answer without any address: the connection exists. */
    assert_int_equal(send_to(&b, &a.id, NULL, 5, 9), BB_OK);
    WAIT_FOR(a.n_env == 4, 3000);
    pair_close(&a, &b);
}

/* Both dial at once: one connection survives on both sides, nothing is
 * lost or duplicated, order per direction is kept. */
static void test_simultaneous_connect(void **state)
{
    (void)state;
    for (int round = 0; round < 3; round++) {
        node a, b;
        bbd_addr ba = pair_start(&a, &b, NULL, NULL, TCP0);
        node_listen(&a, TCP0);
        bbd_addr aa = node_addr(&a, BB_MA_TCP);
        enum { N = 20 };
        for (int i = 0; i < N; i++) {
            assert_int_equal(send_to(&a, &b.id, &ba, 64, (uint8_t)i), BB_OK);
            assert_int_equal(send_to(&b, &a.id, &aa, 64, (uint8_t)(100 + i)), BB_OK);
        }
        WAIT_FOR(a.n_env == N && b.n_env == N, 3000);
        WAIT_FOR(stats_of(&a).connections_open == 1 && stats_of(&b).connections_open == 1,
                 3000);
        for (int i = 0; i < N; i++) {
            assert_true(env_is(&b.env[i], 64, (uint8_t)i));
            assert_true(env_is(&a.env[i], 64, (uint8_t)(100 + i)));
        }
        assert_int_equal(a.n_ok, N);
        assert_int_equal(b.n_ok, N);
        /* The survivor carries more traffic both ways. */
        assert_int_equal(send_to(&a, &b.id, &ba, 8, 1), BB_OK);
        assert_int_equal(send_to(&b, &a.id, &aa, 8, 2), BB_OK);
        WAIT_FOR(a.n_env == N + 1 && b.n_env == N + 1, 3000);
        run_for(20);
        assert_int_equal(a.n_env, N + 1);
        assert_int_equal(b.n_env, N + 1);
        assert_int_equal(a.n_disconnected, 0);
        node_close(&a);
        node_close(&b);
    }
    assert_loop_empty();
}

static void test_big_envelope(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, TCP0);
    size_t big = 8u << 20;
    assert_int_equal(send_to(&a, &b.id, &ba, big, 3), BB_OK);
    assert_int_equal(send_to(&a, &b.id, &ba, 17, 4), BB_OK);
    WAIT_FOR(b.n_env == 2, 10000);
    assert_true(env_is(&b.env[0], big, 3));
    assert_true(env_is(&b.env[1], 17, 4));
    assert_int_equal(a.n_ok, 2);
    pair_close(&a, &b);
}

/* A receiver with on_envelope_owned is handed the buffer of every frame
 * that spanned reads (no copy), and still gets small frames borrowed. */
static void test_large_frames_handed_over(void **state)
{
    (void)state;
    node a, b;
    node_start(&a, 1, "A", NULL);
    node_open(&b, 2, "B", NULL, true);
    node_listen(&b, TCP0);
    bbd_addr ba = node_addr(&b, BB_MA_TCP);
    assert_int_equal(send_to(&a, &b.id, &ba, 17, 1), BB_OK);
    assert_int_equal(send_to(&a, &b.id, &ba, (1u << 20) + 100, 2), BB_OK);
    assert_int_equal(send_to(&a, &b.id, &ba, 3u << 20, 3), BB_OK);
    assert_int_equal(send_to(&a, &b.id, &ba, 5, 4), BB_OK);
    WAIT_FOR(b.n_env == 4, 10000);
    assert_true(env_is(&b.env[0], 17, 1));
    assert_true(env_is(&b.env[1], (1u << 20) + 100, 2));
    assert_true(env_is(&b.env[2], 3u << 20, 3));
    assert_true(env_is(&b.env[3], 5, 4));
    assert_int_equal(b.n_owned, 2);
    pair_close(&a, &b);
}

/* Envelopes in pieces arrive whole and in order with the others, queued
 * behind a dial or written at once, small and large; the transport
 * releases each exactly once, also when it cannot send it. A send the
 * socket takes at once is reported from the loop, not inside the call. */
static void test_gather_send(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, TCP0);
    size_t released = 0;
    assert_int_equal(send_gather_to(&a, &b.id, &ba, 3u << 20, 1, 3, &released), BB_OK);
    assert_int_equal(send_to(&a, &b.id, &ba, 40, 2), BB_OK);
    WAIT_FOR(b.n_env == 2 && a.n_ok == 2 && released == 1, 10000);
    assert_true(env_is(&b.env[0], 3u << 20, 1));
    assert_true(env_is(&b.env[1], 40, 2));
    size_t ok = a.n_ok;
    assert_int_equal(send_gather_to(&a, &b.id, &ba, 500, 3, 5, &released), BB_OK);
    assert_int_equal(a.n_ok, ok); /* not from inside the call */
    assert_int_equal(send_gather_to(&a, &b.id, &ba, 2u << 20, 4, 2, &released), BB_OK);
    assert_int_equal(send_to(&a, &b.id, &ba, 7, 5), BB_OK);
    assert_int_equal(a.n_ok, ok);
    WAIT_FOR(b.n_env == 5 && a.n_ok == ok + 3 && released == 3, 10000);
    assert_true(env_is(&b.env[2], 500, 3));
    assert_true(env_is(&b.env[3], 2u << 20, 4));
    assert_true(env_is(&b.env[4], 7, 5));
    bb_peerid nobody = peer_of(9);
    assert_int_equal(send_gather_to(&a, &nobody, NULL, 100, 6, 2, &released), BB_ENOTFOUND);
    assert_int_equal(send_gather_to(&a, &a.id, NULL, 100, 6, 2, &released), BB_EINVAL);
    assert_int_equal(released, 5);
    pair_close(&a, &b);
}

/* A frame over the receiver's cap is refused from its header: counted,
 * logged, connection closed; the next connection works. */
static void test_oversize_frame_refused(void **state)
{
    (void)state;
    bbd_transport_config small;
    bbd_transport_config_init(&small);
    small.max_frame_bytes = 64 * 1024;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, &small, TCP0);
    assert_int_equal(send_to(&a, &b.id, &ba, 100 * 1024, 1), BB_OK);
    WAIT_FOR(stats_of(&b).frames_refused == 1 && a.n_disconnected == 1, 3000);
    assert_int_equal(b.n_env, 0);
    assert_non_null(strstr(b.logs, "over the cap of 65536"));
    assert_int_equal(stats_of(&b).connections_open, 0);
    /* The sender's own cap refuses before sending. */
    assert_int_equal(send_to(&b, &a.id, NULL, 65 * 1024, 1), BB_ELIMIT);
    /* A small envelope goes through on a new connection. */
    assert_int_equal(send_to(&a, &b.id, &ba, 1000, 2), BB_OK);
    WAIT_FOR(b.n_env == 1, 3000);
    assert_true(env_is(&b.env[0], 1000, 2));
    pair_close(&a, &b);
}

/* Peer down: the send fails through on_send_result(false); once the peer
 * listens again (same id, same port) delivery succeeds. */
static void test_peer_down_then_up(void **state)
{
    (void)state;
    node a, b;
    bbd_addr tmp = pair_start(&a, &b, NULL, NULL, TCP0);
    uint8_t baddr[64];
    size_t blen = tmp.len;
    memcpy(baddr, tmp.data, blen);
    bbd_addr ba = {baddr, blen};
    char text[128];
    snprintf(text, sizeof text, "/ip4/127.0.0.1/tcp/%u", addr_port(&ba));
    node_close(&b);

    assert_int_equal(send_to(&a, &b.id, &ba, 50, 1), BB_OK);
    assert_int_equal(send_to(&a, &b.id, &ba, 50, 2), BB_OK); /* queued behind the dial */
    WAIT_FOR(a.n_fail == 2, 3000);
    assert_int_equal(a.n_ok, 0);
    bbd_peer_stats ps;
    assert_true(bbd_transport_peer_stats_at(a.t, 0, &ps));
    assert_int_equal(ps.dropped, 2);
    assert_string_equal(ps.state, "closed");
    bbd_peer_stats by_id;
    assert_true(bbd_transport_peer_stats(a.t, &b.id, &by_id)); /* the same peer by id */
    assert_true(bb_peerid_equal(&by_id.peer, &b.id));
    assert_int_equal(by_id.dropped, 2);
    assert_false(bbd_transport_peer_stats(a.t, &a.id, &by_id)); /* never a peer of itself */
    assert_non_null(strstr(a.logs, "connect failed"));

    node_start(&b, 2, "B", NULL);
    node_listen(&b, text);
    assert_int_equal(send_to(&a, &b.id, &ba, 50, 3), BB_OK);
    WAIT_FOR(b.n_env == 1 && a.n_ok == 1, 3000);
    assert_true(env_is(&b.env[0], 50, 3));

    /* And down again while connected: a notices, later sends fail. */
    node_close(&b);
    WAIT_FOR(a.n_disconnected == 1, 3000);
    assert_int_equal(send_to(&a, &b.id, &ba, 50, 4), BB_OK);
    WAIT_FOR(a.n_fail == 3, 3000);
    node_close(&a);
    assert_loop_empty();
}

/* While connecting, envelopes wait in a bounded queue; over the bound they
 * are dropped, counted and reported at once. */
static void test_queue_bound(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.max_queue_per_peer_bytes = 10 * 1024;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, &cfg, NULL, TCP0);
    assert_int_equal(send_to(&a, &b.id, &ba, 4096, 1), BB_OK);
    assert_int_equal(send_to(&a, &b.id, &ba, 4096, 2), BB_OK);
    assert_int_equal(send_to(&a, &b.id, &ba, 4096, 3), BB_EFULL);
    assert_int_equal(send_to(&a, &b.id, &ba, 4096, 4), BB_EFULL);
    assert_int_equal(send_to(&a, &b.id, &ba, 1024, 5), BB_OK); /* still fits */
    assert_int_equal(stats_of(&a).queue_dropped, 2);
    assert_int_equal(a.n_fail, 2);
    bbd_peer_stats ps;
    assert_true(bbd_transport_peer_stats_at(a.t, 0, &ps));
    assert_int_equal(ps.queued_bytes, 9 * 1024);
    assert_int_equal(ps.dropped, 2);
    assert_string_equal(ps.state, "connecting");
    WAIT_FOR(b.n_env == 3 && a.n_ok == 3, 3000);
    assert_true(env_is(&b.env[0], 4096, 1));
    assert_true(env_is(&b.env[1], 4096, 2));
    assert_true(env_is(&b.env[2], 1024, 5));
    assert_true(bbd_transport_peer_stats_at(a.t, 0, &ps));
    assert_int_equal(ps.queued_bytes, 0);
    /* A single envelope larger than the bound still goes when nothing waits. */
    assert_int_equal(send_to(&a, &b.id, NULL, 20 * 1024, 6), BB_OK);
    WAIT_FOR(b.n_env == 4, 3000);
    pair_close(&a, &b);
}

/* Two senders of frames larger than the receive budget: one waits while the
 * other's frame completes, then both arrive intact. */
static void test_receive_budget(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.max_rx_buffer_total_bytes = 256 * 1024;
    node a, b, c;
    bbd_addr ba = pair_start(&a, &b, NULL, &cfg, TCP0);
    node_start(&c, 3, "C", NULL);
    size_t big = 3u << 20;
    assert_int_equal(send_to(&a, &b.id, &ba, big, 1), BB_OK);
    assert_int_equal(send_to(&c, &b.id, &ba, big, 2), BB_OK);
    WAIT_FOR(b.n_env == 2, 10000);
    for (int i = 0; i < 2; i++) {
        uint8_t seed = bb_peerid_equal(&b.env[i].from, &a.id) ? 1 : 2;
        assert_true(env_is(&b.env[i], big, seed));
    }
    node_close(&c);
    pair_close(&a, &b);
}

/* Dialing an address where another peer answers fails the send. */
static void test_wrong_peer_at_address(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, TCP0);
    bb_peerid other = peer_of(9);
    assert_int_equal(send_to(&a, &other, &ba, 10, 1), BB_OK);
    WAIT_FOR(a.n_fail == 1, 3000);
    assert_non_null(strstr(a.logs, "answered"));
    assert_int_equal(b.n_env, 0);
    /* Sending to oneself, or with no usable address, is refused at once. */
    assert_int_equal(send_to(&a, &a.id, &ba, 10, 1), BB_EINVAL);
    uint8_t udp[64]; /* a has no UDP socket: it cannot use a /udp address */
    size_t ul;
    assert_int_equal(bb_multiaddr_parse("/ip4/10.0.0.1/udp/1", udp, sizeof udp, &ul, NULL), BB_OK);
    bbd_addr ua = {udp, ul};
    assert_int_equal(send_to(&a, &other, &ua, 10, 1), BB_ENOTFOUND);
    assert_int_equal(send_to(&a, &other, NULL, 10, 1), BB_ENOTFOUND);
    pair_close(&a, &b);
}

/* ---- misbehaving peers (raw sockets) ------------------------------------------------------- */

/* Plaintext framing (security off: a raw peer speaks frames). The secure
 * channel's raw peers are test_secure_channel's. */
static void test_raw_peer_abuse(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.security = BBD_SECURITY_OFF;
    cfg.handshake_timeout_ms = 200;
    cfg.stall_timeout_ms = 200;
    node b;
    bbd_addr ba = node_serve(&b, 2, "B", &cfg, TCP0, BB_MA_TCP);

    /* Silent: closed at the handshake timeout. */
    int silent = raw_connect(&ba);
    /* Garbage first frame. */
    int garbage = raw_connect(&ba);
    raw_send(garbage, "GET / HTTP/1.1\r\n\r\n", 18);
    /* A handshake frame announcing 1 GiB: refused from the header. */
    int huge = raw_connect(&ba);
    uint8_t hdr[BBD_FRAME_HEADER_MAX];
    raw_send(huge, hdr, bbd_frame_header_encode(BBD_FRAME_HANDSHAKE, 1u << 30, hdr));
    /* An envelope before any handshake. */
    int early = raw_connect(&ba);
    raw_send(early, hdr, bbd_frame_header_encode(BBD_FRAME_ENVELOPE, 4, hdr));
    /* Slowloris: a valid handshake, then a partial 1 MiB frame that stalls. */
    int slow = raw_connect(&ba);
    uint8_t hs[600];
    raw_send(slow, hs, handshake_frame(5, hs, sizeof hs));
    size_t hl = bbd_frame_header_encode(BBD_FRAME_ENVELOPE, 1u << 20, hdr);
    raw_send(slow, hdr, hl);
    raw_send(slow, "0123456789", 10);

    WAIT_FOR(raw_closed(garbage) && raw_closed(huge) && raw_closed(early), 3000);
    WAIT_FOR(raw_closed(silent) && raw_closed(slow), 3000);
    bbd_transport_stats s = stats_of(&b);
    assert_int_equal(s.frames_refused, 3);
    assert_int_equal(s.connections_open, 0);
    assert_int_equal(b.n_env, 0);
    assert_non_null(strstr(b.logs, "no handshake within 200 ms"));
    assert_non_null(strstr(b.logs, "unknown frame field tag"));
    assert_non_null(strstr(b.logs, "handshake of 1073741824 bytes is over the cap"));
    assert_non_null(strstr(b.logs, "unexpected envelope frame"));
    assert_non_null(strstr(b.logs, "no progress for 200 ms"));
    /* The slow peer had connected: its departure is reported. */
    assert_int_equal(b.n_connected, 1);
    assert_int_equal(b.n_disconnected, 1);
    close(silent);
    close(garbage);
    close(huge);
    close(early);
    close(slow);

    /* A valid raw peer that sends a whole envelope is delivered. */
    int good = raw_connect(&ba);
    raw_send(good, hs, handshake_frame(6, hs, sizeof hs));
    hl = bbd_frame_header_encode(BBD_FRAME_ENVELOPE, 3, hdr);
    raw_send(good, hdr, hl);
    raw_send(good, "xyz", 3);
    WAIT_FOR(b.n_env == 1, 3000);
    assert_int_equal(b.env[0].len, 3);
    assert_memory_equal(b.env[0].bytes, "xyz", 3);
    bb_peerid six = peer_of(6);
    assert_true(bb_peerid_equal(&b.env[0].from, &six));
    /* ... and a handshake claiming this node's own PeerId is refused. */
    int selfie = raw_connect(&ba);
    raw_send(selfie, hs, handshake_frame(2, hs, sizeof hs));
    WAIT_FOR(raw_closed(selfie), 3000);
    close(selfie);
    close(good);
    node_close(&b);
    assert_loop_empty();
}

/* Node A (queueing up to max_queue bytes per peer) and a raw peer 7 that A
 * dials (A's first envelope: 10 pattern bytes with seed) and that answers
 * with its handshake, then reads only when the test does. */
typedef struct raw_peer {
    node a;
    int fd, lfd;       /* the raw peer's connected socket and its listener */
    uint8_t addr[64];  /* its address, to */
    bbd_addr to;
} raw_peer;

static void raw_peer_connect(raw_peer *r, size_t max_queue, uint8_t seed)
{
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.security = BBD_SECURITY_OFF; /* the raw peer speaks plaintext frames */
    cfg.max_queue_per_peer_bytes = max_queue;
    node_start(&r->a, 1, "A", &cfg);
    r->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    assert_int_equal(bind(r->lfd, (struct sockaddr *)&sa, sl), 0);
    assert_int_equal(listen(r->lfd, 4), 0);
    assert_int_equal(getsockname(r->lfd, (struct sockaddr *)&sa, &sl), 0);
    fcntl(r->lfd, F_SETFL, fcntl(r->lfd, F_GETFL) | O_NONBLOCK);
    size_t alen;
    char text[64];
    snprintf(text, sizeof text, "/ip4/127.0.0.1/tcp/%u", ntohs(sa.sin_port));
    assert_int_equal(bb_multiaddr_parse(text, r->addr, sizeof r->addr, &alen, NULL), BB_OK);
    r->to = (bbd_addr){r->addr, alen};
    bb_peerid seven = peer_of(7);
    assert_int_equal(send_to(&r->a, &seven, &r->to, 10, seed), BB_OK);
    r->fd = -1;
    WAIT_FOR((r->fd = accept(r->lfd, NULL, NULL)) >= 0, 3000);
    uint8_t hs[600];
    raw_send(r->fd, hs, handshake_frame(7, hs, sizeof hs));
    WAIT_FOR(r->a.n_connected == 1 && r->a.n_ok == 1, 3000);
}

/* The raw peer goes away; A sees the disconnect and closes. */
static void raw_peer_close(raw_peer *r)
{
    close(r->fd);
    close(r->lfd);
    WAIT_FOR(r->a.n_disconnected == 1, 3000);
    node_close(&r->a);
    assert_loop_empty();
}

/* A peer that handshakes and then never reads: the sender's memory for it
 * stays within the per-peer bound and further sends are refused. */
static void test_slow_reader_bounded(void **state)
{
    (void)state;
    raw_peer r;
    raw_peer_connect(&r, 4u << 20, 1);
    bb_peerid seven = peer_of(7);
    int sent = 0, rc = BB_OK;
    while (rc == BB_OK && sent < 256) {
        rc = send_to(&r.a, &seven, &r.to, 1u << 20, 2);
        sent += rc == BB_OK;
        run_for(2);
    }
    assert_int_equal(rc, BB_EFULL);
    assert_true(sent < 64); /* the socket buffers plus 4 MiB, not everything */
    bbd_peer_stats ps;
    assert_true(bbd_transport_peer_stats_at(r.a.t, 0, &ps));
    assert_true(ps.queued_bytes <= 4u << 20);
    assert_int_equal(stats_of(&r.a).queue_dropped, 1);
    assert_int_equal(r.a.n_fail, 1);
    raw_peer_close(&r);
}

/* Small frames go out as one buffer (header and envelope copied together);
 * when the socket takes only part of one, the rest is queued from the
 * frame's own pieces. A peer that does not read until many are queued must
 * then get every frame whole and in order. */
static void test_small_frames_split_by_a_full_socket(void **state)
{
    (void)state;
    raw_peer r;
    raw_peer_connect(&r, 64u << 20, 0);
    bb_peerid seven = peer_of(7);
    /* envelopes of 1000..1999 bytes until some are queued behind a full socket */
    enum { MAX_SENT = 20000 };
    size_t sent = 0;
    bbd_peer_stats ps = {0};
    while (sent < MAX_SENT) {
        assert_int_equal(send_to(&r.a, &seven, &r.to, 1000 + sent % 1000, (uint8_t)(sent + 1)), BB_OK);
        sent++;
        if (sent % 64 == 0) {
            run_for(1);
            assert_true(bbd_transport_peer_stats_at(r.a.t, 0, &ps));
            if (ps.queued_bytes > (1u << 20))
                break;
        }
    }
    assert_true(ps.queued_bytes > (1u << 20));
    /* read everything: A's handshake, the first 10-byte envelope, then each in order */
    fcntl(r.fd, F_SETFL, fcntl(r.fd, F_GETFL) & ~O_NONBLOCK);
    size_t cap = 64u << 20, have = 0, pos = 0, got = 0;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    while (got <= sent) {
        run_for(1);
        ssize_t got_now = recv(r.fd, buf + have, cap - have, MSG_DONTWAIT);
        if (got_now > 0)
            have += (size_t)got_now;
        for (;;) { /* whole frames: uvarint body length, 0x12, uvarint n, envelope */
            uint64_t body, n;
            size_t u1, u2;
            if (bb_uvarint_read_u64(buf + pos, have - pos, &body, &u1) ||
                have - pos - u1 < body)
                break;
            if (buf[pos + u1] == 0x0a) { /* A's handshake comes first */
                pos += u1 + body;
                continue;
            }
            assert_int_equal(buf[pos + u1], 0x12);
            assert_int_equal(bb_uvarint_read_u64(buf + pos + u1 + 1, body - 1, &n, &u2), 0);
            const uint8_t *env = buf + pos + u1 + 1 + u2;
            size_t want = got == 0 ? 10 : 1000 + (got - 1) % 1000;
            assert_int_equal(n, want);
            for (size_t i = 0; i < n; i++)
                if (env[i] != (uint8_t)(i * 31u + (got == 0 ? 0 : (uint8_t)got)))
                    fail_msg("frame %zu: byte %zu differs", got, i);
            pos += u1 + body;
            got++;
        }
    }
    assert_int_equal(got, sent + 1);
    free(buf);
    raw_peer_close(&r);
}

/* max_connections: a connection over the limit makes room by closing the
 * oldest one still in its handshake (test_flood has the rest). */
static void test_connection_limit(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.max_connections = 2;
    node b;
    bbd_addr ba = node_serve(&b, 2, "B", &cfg, TCP0, BB_MA_TCP);
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = raw_connect(&ba);
        WAIT_FOR(stats_of(&b).connections_open == (uint64_t)(i < 2 ? i + 1 : 2), 3000);
    }
    WAIT_FOR(raw_closed(fds[0]), 3000);
    assert_int_equal(stats_of(&b).connections_open, 2);
    assert_int_equal(stats_of(&b).connections_evicted, 1);
    assert_non_null(strstr(b.logs, "max_connections"));
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    WAIT_FOR(stats_of(&b).connections_open == 0, 3000);
    node_close(&b);
    assert_loop_empty();
}

/* Closing with connections open and envelopes queued and in flight frees
 * everything (checked by ASan/valgrind) and reports nothing afterwards. */
static void test_clean_close(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, TCP0);
    node_listen(&a, TCP0);
    node_listen(&a, "/ip4/127.0.0.1/udp/0");
    assert_int_equal(send_to(&a, &b.id, &ba, 10, 1), BB_OK);
    WAIT_FOR(b.n_env == 1, 3000);
    for (int i = 0; i < 5; i++)
        assert_int_equal(send_to(&a, &b.id, &ba, 1u << 20, (uint8_t)i), BB_OK);
    bb_peerid other = peer_of(9);
    assert_int_equal(send_to(&a, &other, &ba, 100, 1), BB_OK); /* still dialing */
    size_t fails = a.n_fail;
    node_close(&a);
    assert_int_equal(a.n_fail, fails);
    node_close(&b);
    assert_loop_empty();
}

/* IPv6 loopback, both carriers (skipped when the machine has no ::1). */
static void test_ipv6(void **state)
{
    (void)state;
    int probe = socket(AF_INET6, SOCK_DGRAM, 0);
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool have_v6 = probe >= 0 && bind(probe, (struct sockaddr *)&sa, sizeof sa) == 0;
    if (probe >= 0)
        close(probe);
    if (!have_v6)
        skip();
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, "/ip6/::1/tcp/0");
    node_listen(&a, "/ip6/::1/udp/0");
    node_listen(&b, "/ip6/::1/udp/0");
    assert_int_equal(send_to(&a, &b.id, &ba, 3000, 1), BB_OK);
    WAIT_FOR(b.n_env == 1, 3000);
    assert_true(env_is(&b.env[0], 3000, 1));
    assert_int_equal(send_to(&b, &a.id, NULL, 10, 2), BB_OK);
    WAIT_FOR(a.n_env == 1, 3000);
    node c;
    node_start(&c, 3, "C", NULL);
    node_listen(&c, "/ip6/::1/udp/0");
    bbd_addr bu = node_addr(&b, BB_MA_UDP);
    assert_int_equal(send_to(&c, &b.id, &bu, 3000, 3), BB_OK); /* fragmented */
    WAIT_FOR(b.n_env == 2, 3000);
    assert_true(env_is(&b.env[1], 3000, 3));
    assert_true(bb_peerid_equal(&b.env[1].from, &c.id));
    node_close(&c);
    pair_close(&a, &b);
}

/* A peer given by host name (/dns4/localhost/tcp/PORT)
 * is resolved with the loop's resolver and dialed; a reconnect resolves
 * again; a name that does not resolve fails the send like a refused
 * connection, with a log line naming it. */
static void test_dns_names(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, TCP0);
    char text[96];
    snprintf(text, sizeof text, "/dns4/localhost/tcp/%u", addr_port(&ba));
    uint8_t dns[128];
    size_t dl;
    assert_int_equal(bb_multiaddr_parse(text, dns, sizeof dns, &dl, NULL), BB_OK);
    bbd_addr by_name = {dns, dl};
    assert_int_equal(send_to(&a, &b.id, &by_name, 100, 7), BB_OK);
    bbd_peer_stats ps;
    assert_true(bbd_transport_peer_stats(a.t, &b.id, &ps));
    assert_string_equal(ps.state, "resolving"); /* sends queue behind the resolution */
    assert_int_equal(send_to(&a, &b.id, &by_name, 50, 8), BB_OK);
    WAIT_FOR(b.n_env == 2 && a.n_ok == 2, 5000);
    assert_true(env_is(&b.env[0], 100, 7));
    assert_true(env_is(&b.env[1], 50, 8));

    /* b restarts on the same port: a's next send resolves and dials again */
    uint16_t port = addr_port(&ba);
    node_close(&b);
    WAIT_FOR(a.n_disconnected == 1, 5000);
    char listen[64];
    snprintf(listen, sizeof listen, "/ip4/127.0.0.1/tcp/%u", port);
    node_start(&b, 2, "B", NULL);
    node_listen(&b, listen);
    snprintf(text, sizeof text, "/dns4/localhost/tcp/%u", port);
    assert_int_equal(bb_multiaddr_parse(text, dns, sizeof dns, &dl, NULL), BB_OK);
    by_name.len = dl;
    assert_int_equal(send_to(&a, &b.id, &by_name, 30, 9), BB_OK);
    WAIT_FOR(b.n_env == 1, 5000);
    assert_true(env_is(&b.env[0], 30, 9));

    /* a name that does not resolve (.invalid never does, RFC 6761) */
    node c;
    node_start(&c, 3, "C", NULL);
    assert_int_equal(bb_multiaddr_parse("/dns4/no-such-host.invalid/tcp/7", dns, sizeof dns, &dl,
                                        NULL),
                     BB_OK);
    bbd_addr bad = {dns, dl};
    size_t fails = a.n_fail;
    assert_int_equal(send_to(&a, &c.id, &bad, 10, 1), BB_OK);
    WAIT_FOR(a.n_fail == fails + 1, 10000);
    assert_non_null(strstr(a.logs, "no-such-host.invalid"));
    node_close(&c);
    pair_close(&a, &b);
}

/* The dial rules (dial_allow, dial_deny) judge every address a node would
 * dial, given as an IP address or as a host name (then each address it
 * resolves to): a refused one is never dialed, the refusal is counted
 * (dials_refused) and logged; an allowed one is dialed as usual. */
static void test_dial_rules(void **state)
{
    (void)state;
    node b;
    bbd_addr ba = node_serve(&b, 2, "B", NULL, TCP0, BB_MA_TCP);
    char text[96];
    snprintf(text, sizeof text, "/dns4/localhost/tcp/%u", addr_port(&ba));
    uint8_t dns[128];
    size_t dl;
    assert_int_equal(bb_multiaddr_parse(text, dns, sizeof dns, &dl, NULL), BB_OK);
    bbd_addr by_name = {dns, dl};
    bbd_cidr loopback, ten;
    assert_int_equal(bbd_cidr_parse("127.0.0.0/8", &loopback, NULL), BB_OK);
    assert_int_equal(bbd_cidr_parse("10.0.0.0/8", &ten, NULL), BB_OK);

    /* denied: by address at once, by name once resolved */
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.dial_deny = &loopback;
    cfg.n_dial_deny = 1;
    node a;
    node_start(&a, 1, "A", &cfg);
    assert_int_equal(send_to(&a, &b.id, &ba, 10, 1), BB_ENOTFOUND);
    assert_int_equal(stats_of(&a).dials_refused, 1);
    assert_non_null(strstr(a.logs, "refused by the dial rules"));
    assert_int_equal(send_to(&a, &b.id, &by_name, 10, 2), BB_OK);
    WAIT_FOR(a.n_fail == 1, 10000);
    assert_int_equal(stats_of(&a).dials_refused, 2);
    assert_non_null(strstr(a.logs, "no usable IPv4 address the dial rules allow"));
    assert_int_equal(stats_of(&b).connections_open, 0);
    node_close(&a);

    /* an allow list without the address refuses it; with it, the dial goes */
    cfg.dial_deny = NULL;
    cfg.n_dial_deny = 0;
    cfg.dial_allow = &ten;
    cfg.n_dial_allow = 1;
    node_start(&a, 1, "A", &cfg);
    assert_int_equal(send_to(&a, &b.id, &ba, 10, 3), BB_ENOTFOUND);
    assert_int_equal(stats_of(&a).dials_refused, 1);
    node_close(&a);
    cfg.dial_allow = &loopback;
    node_start(&a, 1, "A", &cfg);
    assert_int_equal(send_to(&a, &b.id, &by_name, 10, 4), BB_OK);
    WAIT_FOR(b.n_env == 1 && a.n_ok == 1, 5000);
    assert_true(env_is(&b.env[0], 10, 4));
    assert_int_equal(stats_of(&a).dials_refused, 0);
    pair_close(&a, &b);
}

static void test_listen_errors(void **state)
{
    (void)state;
    node a, b;
    bbd_addr aa = pair_start(&b, &a, NULL, NULL, TCP0);
    bb_error err = {0};
    assert_int_equal(bbd_transport_listen(b.t, aa.data, aa.len, &err), BB_EIO);
    assert_non_null(strstr(err.msg, "address already in use"));
    assert_non_null(strstr(err.msg, "/ip4/127.0.0.1/tcp/"));
    uint8_t dns[64];
    size_t dl;
    assert_int_equal(bb_multiaddr_parse("/dns4/example.com/tcp/1", dns, sizeof dns, &dl, NULL),
                     BB_OK);
    assert_int_not_equal(bbd_transport_listen(b.t, dns, dl, &err), BB_OK);
    assert_non_null(strstr(err.msg, "listen /dns4/example.com/tcp/1"));
    const bbd_addr *addrs;
    assert_int_equal(bbd_transport_listen_addrs(b.t, &addrs), 0);
    pair_close(&a, &b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_and_addresses),
        cmocka_unit_test(test_both_directions_one_connection),
        cmocka_unit_test(test_simultaneous_connect),
        cmocka_unit_test(test_big_envelope),
        cmocka_unit_test(test_large_frames_handed_over),
        cmocka_unit_test(test_gather_send),
        cmocka_unit_test(test_oversize_frame_refused),
        cmocka_unit_test(test_peer_down_then_up),
        cmocka_unit_test(test_queue_bound),
        cmocka_unit_test(test_receive_budget),
        cmocka_unit_test(test_wrong_peer_at_address),
        cmocka_unit_test(test_raw_peer_abuse),
        cmocka_unit_test(test_slow_reader_bounded),
        cmocka_unit_test(test_small_frames_split_by_a_full_socket),
        cmocka_unit_test(test_connection_limit),
        cmocka_unit_test(test_clean_close),
        cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_dns_names),
        cmocka_unit_test(test_dial_rules),
        cmocka_unit_test(test_listen_errors),
    };
    return cmocka_run_group_tests(tests, harness_setup, harness_teardown);
}
