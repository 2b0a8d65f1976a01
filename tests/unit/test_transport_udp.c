/* UDP transport tests on one uv loop over 127.0.0.1: the HELLO handshake,
 * envelopes both ways over one session, envelopes larger than a datagram,
 * choosing between UDP and TCP by address and capability, a peer that
 * never answers, a restarted peer, session expiry and misbehaving senders
 * (garbage, unknown sources, duplicate, partial and malformed fragments). */
#include "test_transport_harness.h"

#include "bbd/host/fragment.h"
#include "bbd/host/handshake.h"

#define UDP0 "/ip4/127.0.0.1/udp/0"

static void test_udp_handshake_and_envelope(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, UDP0);
    node_listen(&a, UDP0);
    bbd_addr aa = node_addr(&a, BB_MA_UDP);
    assert_int_equal(send_to(&a, &b.id, &ba, 100, 7), BB_OK);
    WAIT_FOR(b.n_env == 1 && a.n_connected == 1 && b.n_connected == 1 && a.n_ok == 1, 3000);
    assert_true(bb_peerid_equal(&b.env[0].from, &a.id));
    assert_true(env_is(&b.env[0], 100, 7));
    /* UDP observes the sender's own listening socket. */
    assert_int_equal(b.env[0].obs_len, aa.len);
    assert_memory_equal(b.env[0].obs, aa.data, aa.len);
    assert_true(bb_peerid_equal(&b.conn_peer, &a.id));
    assert_int_equal(b.n_conn_addrs, 1);
    assert_memory_equal(b.conn_addrs[0], aa.data, aa.len);
    assert_string_equal(b.conn_targets[0], "A");
    assert_string_equal(a.conn_targets[0], "B");
    /* The answer needs no address: the session exists. */
    assert_int_equal(send_to(&b, &a.id, NULL, 200, 8), BB_OK);
    WAIT_FOR(a.n_env == 1 && b.n_ok == 1, 3000);
    assert_true(env_is(&a.env[0], 200, 8));
    assert_int_equal(stats_of(&a).connections_open, 0);
    bbd_peer_stats ps;
    assert_true(bbd_transport_peer_stats_at(b.t, 0, &ps));
    assert_string_equal(ps.state, "udp");
    assert_true(ps.connected);
    pair_close(&a, &b);
}

/* Envelopes above the datagram size are fragmented and rebuilt. */
static void test_udp_fragmented(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, UDP0);
    node_listen(&a, UDP0);
    size_t big = 60 * 1024;
    /* sealed datagrams (the default) carry BBD_DGRAM_SEALED_OVERHEAD more */
    size_t room = 1200 - BBD_DGRAM_SEALED_OVERHEAD, one = room - BBD_DGRAM_HEADER;
    assert_int_equal(send_to(&a, &b.id, &ba, big, 3), BB_OK);
    assert_int_equal(send_to(&a, &b.id, &ba, one, 4), BB_OK);     /* exactly one datagram */
    assert_int_equal(send_to(&a, &b.id, &ba, one + 1, 5), BB_OK); /* two fragments */
    WAIT_FOR(b.n_env == 3, 3000);
    assert_true(env_is(&b.env[0], big, 3));
    assert_true(env_is(&b.env[1], one, 4));
    assert_true(env_is(&b.env[2], one + 1, 5));
    size_t chunk = room - BBD_DGRAM_FRAGMENT_HEADER;
    assert_int_equal(stats_of(&b).udp_fragments_in, (big + chunk - 1) / chunk + 2);
    assert_int_equal(stats_of(&b).udp_reassembly_dropped, 0);
    assert_int_equal(a.n_ok, 3);
    /* an envelope in pieces goes out as the same datagrams */
    size_t released = 0;
    assert_int_equal(send_gather_to(&a, &b.id, &ba, 5000, 6, 3, &released), BB_OK);
    assert_int_equal(released, 1); /* copied into datagrams at once */
    WAIT_FOR(b.n_env == 4 && a.n_ok == 4, 3000);
    assert_true(env_is(&b.env[3], 5000, 6));
    pair_close(&a, &b);
}

/* The first address this node can use wins; a node without a UDP socket
 * reaches the same peer over TCP. */
static void test_either_transport(void **state)
{
    (void)state;
    node a, b, c;
    pair_start(&a, &b, NULL, NULL, "/ip4/127.0.0.1/tcp/0");
    node_listen(&b, UDP0);
    node_listen(&a, UDP0);
    node_start(&c, 3, "C", NULL);
    bbd_addr both[2] = {node_addr(&b, BB_MA_UDP), node_addr(&b, BB_MA_TCP)};
    assert_int_equal(bbd_transport_send(a.t, &b.id, both, 2, pattern(10, 1), 10), BB_OK);
    WAIT_FOR(b.n_env == 1, 3000);
    assert_int_equal(stats_of(&b).connections_open, 0); /* came over UDP */
    assert_int_equal(bbd_transport_send(c.t, &b.id, both, 2, pattern(10, 2), 10), BB_OK);
    WAIT_FOR(b.n_env == 2, 3000);
    assert_int_equal(stats_of(&b).connections_open, 1); /* c has no UDP: TCP */
    assert_true(bb_peerid_equal(&b.env[1].from, &c.id));
    node_close(&c);
    pair_close(&a, &b);
}

/* Nobody answers the HELLO: queued envelopes fail at the handshake timeout. */
static void test_udp_peer_down(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.handshake_timeout_ms = 300;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, &cfg, NULL, UDP0);
    node_listen(&a, UDP0);
    uint8_t saved[64];
    memcpy(saved, ba.data, ba.len);
    bbd_addr gone = {saved, ba.len};
    node_close(&b);
    assert_int_equal(send_to(&a, &b.id, &gone, 10, 1), BB_OK);
    assert_int_equal(send_to(&a, &b.id, &gone, 10, 2), BB_OK);
    WAIT_FOR(a.n_fail == 2, 3000);
    assert_int_equal(a.n_ok, 0);
    assert_non_null(strstr(a.logs, "no handshake answer within 300 ms"));
    node_close(&a);
    assert_loop_empty();
}

/* b restarts on the same port: a's first envelope finds no session there
 * and is dropped, b asks a for its handshake, and later envelopes arrive. */
static void test_udp_peer_restart(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, UDP0);
    node_listen(&a, UDP0);
    char text[64];
    snprintf(text, sizeof text, "/ip4/127.0.0.1/udp/%u", addr_port(&ba));
    uint8_t saved[64];
    memcpy(saved, ba.data, ba.len);
    bbd_addr baddr = {saved, ba.len};
    assert_int_equal(send_to(&a, &b.id, &baddr, 10, 1), BB_OK);
    WAIT_FOR(b.n_env == 1, 3000);
    node_close(&b);
    node_start(&b, 2, "B", NULL);
    node_listen(&b, text);
    assert_int_equal(send_to(&a, &b.id, &baddr, 10, 2), BB_OK);
    WAIT_FOR(b.n_connected == 1, 3000);
    assert_int_equal(b.n_env, 0);
    assert_int_equal(send_to(&a, &b.id, &baddr, 10, 3), BB_OK);
    WAIT_FOR(b.n_env == 1, 3000);
    assert_true(env_is(&b.env[0], 10, 3));
    pair_close(&a, &b);
}

/* A session with nothing received expires: both sides report the peer gone. */
static void test_udp_session_expiry(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.udp_session_timeout_ms = 200;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, &cfg, &cfg, UDP0);
    node_listen(&a, UDP0);
    assert_int_equal(send_to(&a, &b.id, &ba, 10, 1), BB_OK);
    WAIT_FOR(b.n_env == 1 && a.n_connected == 1, 3000);
    WAIT_FOR(a.n_disconnected == 1 && b.n_disconnected == 1, 4000);
    bbd_peer_stats ps;
    assert_true(bbd_transport_peer_stats_at(a.t, 0, &ps));
    assert_string_equal(ps.state, "closed");
    /* Sending again starts a new session. */
    assert_int_equal(send_to(&a, &b.id, &ba, 10, 2), BB_OK);
    WAIT_FOR(b.n_env == 2, 3000);
    pair_close(&a, &b);
}

/* ---- a raw UDP peer -------------------------------------------------------------------------- */

static void raw_hello(int fd, uint8_t seed, bbd_dgram_kind kind)
{
    bbd_handshake h = {.peer = peer_of(seed), .version = BBD_HANDSHAKE_VERSION};
    uint8_t d[512];
    size_t n;
    bbd_dgram_header_encode(kind, d);
    assert_int_equal(bbd_handshake_encode(&h, d + 2, sizeof d - 2, &n, NULL), BB_OK);
    raw_send(fd, d, n + 2);
}

static void raw_fragment(int fd, uint32_t id, uint32_t total, uint16_t chunk, uint32_t index,
                         const uint8_t *msg, size_t data_len)
{
    uint8_t d[BBD_DGRAM_FRAGMENT_HEADER + 256];
    bbd_dgram_fragment_header_encode(id, total, chunk, index, d);
    memcpy(d + BBD_DGRAM_FRAGMENT_HEADER, msg + (size_t)index * chunk, data_len);
    raw_send(fd, d, BBD_DGRAM_FRAGMENT_HEADER + data_len);
}

/* The first datagram fd received from the transport has this kind. */
static bool raw_got_kind(int fd, uint8_t kind)
{
    uint8_t buf[2048];
    ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    return r >= 2 && buf[0] == BBD_DGRAM_MAGIC && buf[1] == kind;
}

/* Plaintext datagrams (security off: the raw peer writes them); the
 * secure ones are test_secure_udp's. */
static void test_udp_raw_peer(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.security = BBD_SECURITY_OFF;
    cfg.udp_reassembly_timeout_ms = 100;
    cfg.max_frame_bytes = 4096;
    node b;
    bbd_addr ba = node_serve(&b, 2, "B", &cfg, UDP0, BB_MA_UDP);
    int fd = raw_connect(&ba);

    raw_send(fd, "hello", 5); /* not ours */
    WAIT_FOR(stats_of(&b).frames_refused == 1, 3000);
    assert_non_null(strstr(b.logs, "not a bbd datagram"));

    /* An envelope before any handshake is dropped; b asks who we are. */
    uint8_t env[] = {BBD_DGRAM_MAGIC, BBD_DGRAM_ENVELOPE, 'x'};
    raw_send(fd, env, sizeof env);
    WAIT_FOR(raw_got_kind(fd, BBD_DGRAM_HELLO), 3000);
    assert_int_equal(b.n_env, 0);

    raw_hello(fd, 7, BBD_DGRAM_HELLO);
    WAIT_FOR(raw_got_kind(fd, BBD_DGRAM_HELLO_ACK), 3000);
    assert_int_equal(b.n_connected, 1);
    bb_peerid seven = peer_of(7);
    assert_true(bb_peerid_equal(&b.conn_peer, &seven));

    uint8_t env2[] = {BBD_DGRAM_MAGIC, BBD_DGRAM_ENVELOPE, 'a', 'b', 'c'};
    raw_send(fd, env2, sizeof env2);
    WAIT_FOR(b.n_env == 1, 3000);
    assert_int_equal(b.env[0].len, 3);
    assert_memory_equal(b.env[0].bytes, "abc", 3);
    assert_true(bb_peerid_equal(&b.env[0].from, &seven));

    /* Fragments out of order with a duplicate: delivered once, intact. */
    uint8_t msg[200]; /* room for the out-of-range fragments below */
    for (int i = 0; i < 200; i++)
        msg[i] = (uint8_t)(i * 3);
    raw_fragment(fd, 1, 100, 40, 0, msg, 40);
    raw_fragment(fd, 1, 100, 40, 0, msg, 40);
    raw_fragment(fd, 1, 100, 40, 2, msg, 20);
    raw_fragment(fd, 1, 100, 40, 1, msg, 40);
    raw_fragment(fd, 1, 100, 40, 1, msg, 40); /* late copy of a completed message */
    WAIT_FOR(b.n_env == 2 && stats_of(&b).udp_fragments_in == 5, 3000);
    assert_int_equal(b.env[1].len, 100);
    assert_memory_equal(b.env[1].bytes, msg, 100);
    assert_int_equal(stats_of(&b).udp_fragments_duplicate, 2); /* the copy, the late one */

    /* Malformed fragments are refused and counted. */
    raw_fragment(fd, 2, 100, 40, 0, msg, 39);     /* wrong length */
    raw_fragment(fd, 3, 5000, 40, 0, msg, 40);    /* over max_frame_bytes */
    raw_fragment(fd, 4, 100, 40, 3, msg, 20);     /* index past the end */
    uint8_t bad_hello[] = {BBD_DGRAM_MAGIC, BBD_DGRAM_HELLO, 0x0a, 0x01};
    raw_send(fd, bad_hello, sizeof bad_hello);
    WAIT_FOR(stats_of(&b).frames_refused == 5, 3000);
    assert_non_null(strstr(b.logs, "carries 39 bytes"));
    assert_non_null(strstr(b.logs, "over the cap of 4096"));

    /* A message that never completes is dropped at the reassembly timeout;
     * a fragment that disagrees with its message is refused. */
    raw_fragment(fd, 5, 100, 40, 0, msg, 40);
    raw_fragment(fd, 5, 120, 40, 1, msg, 40);
    WAIT_FOR(stats_of(&b).udp_reassembly_dropped == 2, 3000);
    assert_non_null(strstr(b.logs, "timed out"));
    assert_int_equal(b.n_env, 2);
    close(fd);
    node_close(&b);
    assert_loop_empty();
}

/* A full session table makes room by dropping the least recently heard
 * session: new peers are never locked out by old (or spoofed) ones. */
static void test_udp_session_table_full(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.security = BBD_SECURITY_OFF; /* raw plaintext HELLOs */
    cfg.max_connections = 2;
    node b;
    bbd_addr ba = node_serve(&b, 2, "B", &cfg, UDP0, BB_MA_UDP);
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = raw_connect(&ba);
        raw_hello(fds[i], (uint8_t)(10 + i), BBD_DGRAM_HELLO);
        WAIT_FOR(raw_got_kind(fds[i], BBD_DGRAM_HELLO_ACK), 3000);
        run_for(2); /* distinct arrival times */
    }
    assert_int_equal(b.n_connected, 3);
    WAIT_FOR(b.n_disconnected == 1, 3000);
    bb_peerid first = peer_of(10); /* heard from least recently: evicted */
    assert_true(bb_peerid_equal(&b.disc_peer, &first));
    /* The newest session still carries envelopes. */
    uint8_t env[] = {BBD_DGRAM_MAGIC, BBD_DGRAM_ENVELOPE, 'z'};
    raw_send(fds[2], env, sizeof env);
    WAIT_FOR(b.n_env == 1, 3000);
    bb_peerid twelve = peer_of(12);
    assert_true(bb_peerid_equal(&b.env[0].from, &twelve));
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    node_close(&b);
    assert_loop_empty();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_udp_handshake_and_envelope),
        cmocka_unit_test(test_udp_fragmented),
        cmocka_unit_test(test_either_transport),
        cmocka_unit_test(test_udp_peer_down),
        cmocka_unit_test(test_udp_peer_restart),
        cmocka_unit_test(test_udp_session_expiry),
        cmocka_unit_test(test_udp_raw_peer),
        cmocka_unit_test(test_udp_session_table_full),
    };
    return cmocka_run_group_tests(tests, harness_setup, harness_teardown);
}
