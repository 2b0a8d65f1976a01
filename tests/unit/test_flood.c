/*
 * test_flood.c — what anonymous connections can hold of a node (issue 21,
 * items 3 and 4), with raw sockets against a transport on one uv loop:
 * the handshake deadline applies to every connection, whatever it sent;
 * one address gets at most its share of the connection table; a full
 * table makes room by closing a connection still in its handshake, never
 * one that proved its peer; an open connection idle too long closes; a
 * frame trickling in under the minimum rate closes its connection; one
 * connection cannot hold more than its share of the receive budget while
 * another grows. Waits are conditions with deadlines (WAIT_FOR).
 */
#include "test_transport_harness.h"

#include "bbd/host/frame.h"
#include "bbd/host/handshake.h"

#define TCP0 "/ip4/127.0.0.1/tcp/0"

/* Every connection that has not finished its handshake by the deadline
 * closes: silent ones, ones that sent half a Noise length, half a frame
 * header, a whole header and part of a handshake. */
static void test_flood_handshake_deadline_always(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.handshake_timeout_ms = 300;
    node b;
    bbd_addr ba = node_serve(&b, 2, "B", &cfg, TCP0, BB_MA_TCP);
    int fds[40];
    for (int i = 0; i < 40; i++) {
        fds[i] = raw_connect(&ba);
        static const uint8_t part[] = {0x00, 0x20, 1, 2, 3};
        if (i % 4)
            raw_send(fds[i], part, (size_t)(i % 4)); /* 1..3 bytes of msg1 */
    }
    WAIT_FOR(stats_of(&b).connections_open == 40, 3000);
    for (int i = 0; i < 40; i++)
        WAIT_FOR(raw_closed(fds[i]), 3000);
    assert_int_equal(stats_of(&b).connections_open, 0);
    assert_non_null(strstr(b.logs, "no handshake within 300 ms"));
    for (int i = 0; i < 40; i++)
        close(fds[i]);
    node_close(&b);
    assert_loop_empty();
}

/* One address holds at most max_connections_per_source connections. */
static void test_flood_per_source_share(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.max_connections_per_source = 3;
    node b;
    bbd_addr ba = node_serve(&b, 2, "B", &cfg, TCP0, BB_MA_TCP);
    int fds[5];
    for (int i = 0; i < 5; i++)
        fds[i] = raw_connect(&ba);
    WAIT_FOR(stats_of(&b).connections_refused == 2, 3000);
    WAIT_FOR(raw_closed(fds[3]) && raw_closed(fds[4]), 3000);
    assert_int_equal(stats_of(&b).connections_open, 3);
    assert_non_null(strstr(b.logs, "max_connections_per_source"));
    close(fds[0]); /* a slot of this address is free again */
    WAIT_FOR(stats_of(&b).connections_open == 2, 3000);
    int again = raw_connect(&ba);
    WAIT_FOR(stats_of(&b).connections_open == 3, 3000);
    assert_int_equal(stats_of(&b).connections_refused, 2);
    close(again);
    for (int i = 1; i < 5; i++)
        close(fds[i]);
    node_close(&b);
    assert_loop_empty();
}

/* A table full of anonymous connections: a peer that proves itself still
 * gets in (the oldest anonymous one makes room), and proven peers are
 * never the ones evicted. */
static void test_flood_unauthenticated_evicted_first(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.max_connections = 3;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, &cfg, TCP0);
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = raw_connect(&ba);
        WAIT_FOR(stats_of(&b).connections_open == (uint64_t)(i + 1), 3000);
    }
    assert_int_equal(send_to(&a, &b.id, &ba, 10, 1), BB_OK); /* a 4th: a real peer */
    WAIT_FOR(b.n_env == 1 && b.n_connected == 1, 3000);
    assert_int_equal(stats_of(&b).connections_evicted, 1);
    WAIT_FOR(raw_closed(fds[0]), 3000); /* the oldest anonymous one */
    /* more anonymous ones evict each other, never the proven peer */
    int more[4];
    for (int i = 0; i < 4; i++) {
        more[i] = raw_connect(&ba);
        WAIT_FOR(stats_of(&b).connections_evicted == (uint64_t)(2 + i), 3000);
    }
    for (int i = 0; i < 4; i++)
        close(more[i]);
    assert_int_equal(b.n_disconnected, 0);
    assert_int_equal(send_to(&a, &b.id, &ba, 10, 2), BB_OK);
    WAIT_FOR(b.n_env == 2, 3000);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    pair_close(&a, &b);
}

/* An open connection with no traffic for idle_timeout_ms closes. */
static void test_flood_idle_timeout(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.idle_timeout_ms = 300;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, &cfg, TCP0);
    assert_int_equal(send_to(&a, &b.id, &ba, 10, 1), BB_OK);
    WAIT_FOR(b.n_env == 1, 3000);
    WAIT_FOR(b.n_disconnected == 1 && a.n_disconnected == 1, 3000);
    assert_int_equal(stats_of(&b).slow_closed, 1);
    assert_non_null(strstr(b.logs, "idle for 300 ms"));
    pair_close(&a, &b);
}

/* A frame that trickles in under min_rx_bytes_per_s closes its
 * connection once its first second is over; one at a good rate does not. */
static void test_flood_slow_frame(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.security = BBD_SECURITY_OFF; /* a raw peer writes the frames */
    cfg.min_rx_bytes_per_s = 64 * 1024;
    node b;
    bbd_addr ba = node_serve(&b, 2, "B", &cfg, TCP0, BB_MA_TCP);
    int fd = raw_connect(&ba);
    uint8_t hs[600], hdr[BBD_FRAME_HEADER_MAX], chunk[256];
    raw_send(fd, hs, handshake_frame(5, hs, sizeof hs));
    raw_send(fd, hdr, bbd_frame_header_encode(BBD_FRAME_ENVELOPE, 1u << 20, hdr));
    memset(chunk, 7, sizeof chunk);
    for (int i = 0; i < 100 && !raw_closed(fd); i++) { /* 256 bytes every 20 ms: ~12 KiB/s */
        raw_send(fd, chunk, sizeof chunk);
        run_for(20);
    }
    WAIT_FOR(raw_closed(fd), 3000);
    assert_int_equal(stats_of(&b).slow_closed, 1);
    assert_non_null(strstr(b.logs, "under min_rx_bytes_per_s 65536"));
    close(fd);
    node_close(&b);
    assert_loop_empty();
}

/* Connections that announce large frames and send part of them: one may
 * grow past its share (an eighth of the budget) at a time, the others
 * stop reading at it, so a few connections cannot hold the budget between
 * them; once they go, the memory is back. */
static void test_flood_receive_budget_share(void **state)
{
    (void)state;
    bbd_transport_config cfg;
    bbd_transport_config_init(&cfg);
    cfg.security = BBD_SECURITY_OFF;
    cfg.max_rx_buffer_total_bytes = 16u << 20; /* share: 2 MiB */
    node b;
    bbd_addr ba = node_serve(&b, 2, "B", &cfg, TCP0, BB_MA_TCP);
    enum { N = 3, PART = 4 << 20 };
    int fds[N];
    uint8_t hs[600], hdr[BBD_FRAME_HEADER_MAX];
    uint8_t *junk = calloc(1, PART);
    assert_non_null(junk);
    for (int i = 0; i < N; i++) {
        fds[i] = raw_connect(&ba);
        raw_send(fds[i], hs, handshake_frame((uint8_t)(10 + i), hs, sizeof hs));
        raw_send(fds[i], hdr, bbd_frame_header_encode(BBD_FRAME_ENVELOPE, 8u << 20, hdr));
    }
    WAIT_FOR(b.n_connected == N, 3000);
    /* each sends 4 MiB of its 8 MiB frame, as far as its socket takes it:
     * without shares all three would fit in the budget (12 of 16 MiB) */
    size_t sent[N] = {0};
    for (int round = 0; round < 300; round++) {
        for (int i = 0; i < N; i++) {
            ssize_t w = send(fds[i], junk + sent[i], PART - sent[i], MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w > 0)
                sent[i] += (size_t)w;
        }
        run_for(3);
    }
    uint64_t held = stats_of(&b).rx_buffered_bytes;
    /* the owner's 4 MiB (its buffer 4.25), the others about one eager
     * buffer (1.06 MiB) and a read past it */
    if (held < (4u << 20) || held > (9u << 20))
        fail_msg("%llu bytes buffered, want 4..9 MiB", (unsigned long long)held);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    WAIT_FOR(stats_of(&b).rx_buffered_bytes == 0, 3000);
    free(junk);
    node_close(&b);
    assert_loop_empty();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flood_handshake_deadline_always),
        cmocka_unit_test(test_flood_per_source_share),
        cmocka_unit_test(test_flood_unauthenticated_evicted_first),
        cmocka_unit_test(test_flood_idle_timeout),
        cmocka_unit_test(test_flood_slow_frame),
        cmocka_unit_test(test_flood_receive_budget_share),
    };
    return cmocka_run_group_tests(tests, harness_setup, harness_teardown);
}
