/*
 * test_secure_channel.c — the transport's secure TCP channel (tcp_secure.c,
 * tcp_read.c's records) between in-process nodes and against a raw Noise
 * peer written here from noise.h and noise_payload.h: a peer that claims
 * another PeerId, signs with the wrong key, dials the wrong node; records
 * tampered with, replayed, reordered; admission refused; security off on
 * one side only. Waits are conditions with deadlines (WAIT_FOR).
 */
#include "test_transport_harness.h"

#include "bbd/host/frame.h"
#include "bbd/host/handshake.h"
#include "bbd/host/noise.h"
#include "bbd/host/noise_payload.h"

#define TCP0 "/ip4/127.0.0.1/tcp/0"

/* ---- a raw Noise peer --------------------------------------------------------------------- */

typedef struct raw_noise {
    int fd;
    bbd_noise_hs hs;
    bbd_noise_cipher tx, rx;
    uint8_t in[1 << 17];
    size_t in_len;
    bool closed;
} raw_noise;

/* Read what is there; true once a whole record is buffered (or closed). */
static bool raw_have_record(raw_noise *r)
{
    for (;;) {
        ssize_t got = recv(r->fd, r->in + r->in_len, sizeof r->in - r->in_len, MSG_DONTWAIT);
        if (got > 0) {
            r->in_len += (size_t)got;
            continue;
        }
        if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            r->closed = true;
        break;
    }
    if (r->in_len >= 2 && r->in_len >= 2 + ((size_t)r->in[0] << 8 | r->in[1]))
        return true;
    return r->closed;
}

/* The next record's message (out gets it); false when the peer closed. */
static bool raw_next(raw_noise *r, uint8_t *out, size_t *n)
{
    WAIT_FOR(raw_have_record(r), 3000);
    size_t len = r->in_len >= 2 ? ((size_t)r->in[0] << 8 | r->in[1]) : 0;
    if (r->in_len < 2 || r->in_len < 2 + len)
        return false;
    memcpy(out, r->in + 2, len);
    memmove(r->in, r->in + 2 + len, r->in_len - 2 - len);
    r->in_len -= 2 + len;
    *n = len;
    return true;
}

static void raw_put(raw_noise *r, const uint8_t *msg, size_t n)
{
    uint8_t hdr[2] = {(uint8_t)(n >> 8), (uint8_t)n};
    raw_send(r->fd, hdr, 2);
    raw_send(r->fd, msg, n);
}

/* A sealed frame of kind with payload, as wire bytes in out; returns size. */
static size_t raw_seal(raw_noise *r, bbd_frame_kind kind, const void *payload, size_t len,
                       uint8_t *out)
{
    uint8_t plain[4096];
    size_t hl = bbd_frame_header_encode(kind, len, plain);
    assert_true(hl + len <= sizeof plain);
    memcpy(plain + hl, payload, len);
    size_t m = hl + len + BBD_NOISE_TAGLEN;
    out[0] = (uint8_t)(m >> 8);
    out[1] = (uint8_t)m;
    assert_int_equal(bbd_noise_encrypt(&r->tx, NULL, 0, plain, hl + len, out + 2), BB_OK);
    return 2 + m;
}

typedef struct raw_opts {
    uint8_t key_seed;     /* the identity key it proves */
    uint8_t claim_seed;   /* the PeerId its Handshake claims (0: its own) */
    uint8_t signer_seed;  /* the key that signs its Noise key (0: its own) */
} raw_opts;

/* Connect to a and run the initiator's side of the handshake; returns the
 * responder's verdict: "" admitted, "closed" when it closed instead, or
 * the refusal it sent. */
static const char *raw_handshake(raw_noise *r, const bbd_addr *a, raw_opts o)
{
    static char verdict[BBD_ADMISSION_REASON_MAX + 1];
    memset(r, 0, sizeof *r);
    r->fd = raw_connect(a);
    uint8_t s[32], pub[32], msg[4096], pl[4096];
    size_t n, pn;
    bbd_noise_keypair(s, pub, true, NULL);
    assert_int_equal(bbd_noise_hs_init(&r->hs, true, NULL, 0, s, NULL, NULL), BB_OK);
    assert_int_equal(bbd_noise_hs_write(&r->hs, NULL, 0, msg, sizeof msg, &n, NULL), BB_OK);
    raw_put(r, msg, n);
    if (!raw_next(r, msg, &n))
        return "closed";
    assert_int_equal(bbd_noise_hs_read(&r->hs, msg, n, pl, sizeof pl, &pn, NULL), BB_OK);
    bbd_noise_identity id;
    assert_int_equal(bbd_noise_payload_verify(pl, pn, bbd_noise_hs_remote_static(&r->hs), &id,
                                              NULL),
                     BB_OK);
    /* our payload: identity key, the signature of our static key, our Handshake */
    bb_keypair kp, signer;
    peer_key(o.key_seed, &kp);
    peer_key(o.signer_seed ? o.signer_seed : o.key_seed, &signer);
    uint8_t sig[64], hsb[512];
    assert_int_equal(bbd_noise_sign_static(&signer, r->hs.s_pub, sig, NULL), BB_OK);
    bbd_handshake h = {.peer = peer_of(o.claim_seed ? o.claim_seed : o.key_seed),
                       .version = BBD_HANDSHAKE_VERSION};
    size_t hsl;
    assert_int_equal(bbd_handshake_encode(&h, hsb, sizeof hsb, &hsl, NULL), BB_OK);
    assert_int_equal(bbd_noise_payload_encode(kp.pk, sig, hsb, hsl, pl, sizeof pl, &pn, NULL),
                     BB_OK);
    assert_int_equal(bbd_noise_hs_write(&r->hs, pl, pn, msg, sizeof msg, &n, NULL), BB_OK);
    raw_put(r, msg, n);
    assert_int_equal(bbd_noise_hs_split(&r->hs, &r->tx, &r->rx, NULL), BB_OK);
    bb_keypair_wipe(&kp);
    bb_keypair_wipe(&signer);
    if (!raw_next(r, msg, &n))
        return "closed";
    assert_int_equal(bbd_noise_decrypt(&r->rx, NULL, 0, msg, n, msg), BB_OK);
    bbd_frame_limits lim = {.max_admission = BBD_ADMISSION_MAX_BYTES};
    bbd_frame_header fh;
    const uint8_t *body;
    size_t used;
    assert_int_equal(bbd_frame_decode(msg, n - BBD_NOISE_TAGLEN, &lim, &fh, &body, &used, NULL),
                     BB_OK);
    assert_int_equal(bbd_admission_decode(body, fh.payload_len, verdict, NULL), BB_OK);
    return verdict;
}

static bool raw_peer_closed(raw_noise *r)
{
    raw_have_record(r);
    return r->closed;
}

/* ---- nodes --------------------------------------------------------------------------------- */

static const char *refuse_seed_9(void *ud, const bb_peerid *peer)
{
    (void)ud;
    bb_peerid nine = peer_of(9);
    return bb_peerid_equal(peer, &nine) ? "not on the node's allow list" : NULL;
}

/* Node n (seed) listening on TCP with admit callback admit (may be NULL). */
static bbd_addr serve(node *n, uint8_t seed, const char *(*admit)(void *, const bb_peerid *),
                      const bbd_transport_config *cfg)
{
    node_open_admit(n, seed, seed == 2 ? "B" : "A", cfg, false, admit);
    node_listen(n, TCP0);
    return node_addr(n, BB_MA_TCP);
}

/* ---- tests -------------------------------------------------------------------------------------- */

/* A raw peer that proves its key and claims its own PeerId is admitted,
 * and its sealed envelope is delivered from that PeerId; one that claims
 * another PeerId, or whose key did not sign its Noise key, is refused. */
static void test_secure_identity_is_proven(void **state)
{
    (void)state;
    node b;
    bbd_addr ba = serve(&b, 2, NULL, NULL);
    raw_noise r;
    assert_string_equal(raw_handshake(&r, &ba, (raw_opts){.key_seed = 5}), "");
    uint8_t wire[256];
    raw_send(r.fd, wire, raw_seal(&r, BBD_FRAME_ENVELOPE, "xyz", 3, wire));
    WAIT_FOR(b.n_env == 1, 3000);
    bb_peerid five = peer_of(5);
    assert_true(bb_peerid_equal(&b.env[0].from, &five));
    assert_memory_equal(b.env[0].bytes, "xyz", 3);
    close(r.fd);

    raw_noise liar;
    assert_string_equal(raw_handshake(&liar, &ba, (raw_opts){.key_seed = 6, .claim_seed = 5}),
                        "closed");
    raw_noise forger;
    assert_string_equal(raw_handshake(&forger, &ba, (raw_opts){.key_seed = 5, .signer_seed = 6}),
                        "closed");
    WAIT_FOR(stats_of(&b).handshakes_failed == 2, 3000);
    assert_non_null(strstr(b.logs, "the handshake claims PeerId"));
    assert_non_null(strstr(b.logs, "identity_sig does not sign"));
    assert_int_equal(b.n_connected, 1); /* only the honest one */
    close(liar.fd);
    close(forger.fd);
    node_close(&b);
    assert_loop_empty();
}

/* A dial for one PeerId answered by another key is refused: nothing sent. */
static void test_secure_dial_wrong_key_refused(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, TCP0);
    bb_peerid c = peer_of(3); /* B's address, C's PeerId */
    assert_int_equal(send_to(&a, &c, &ba, 10, 1), BB_OK);
    WAIT_FOR(a.n_fail == 1, 3000);
    assert_int_equal(a.n_connected, 0);
    assert_int_equal(b.n_env, 0);
    assert_int_equal(stats_of(&a).handshakes_failed, 1);
    assert_non_null(strstr(a.logs, "answered (its key proves it)"));
    pair_close(&a, &b);
}

/* One flipped bit, a replayed record, records out of order: each closes
 * the connection and is counted; a fresh connection then works. */
static void test_secure_records_tampered_replayed_reordered(void **state)
{
    (void)state;
    node b;
    bbd_addr ba = serve(&b, 2, NULL, NULL);
    uint8_t w1[256], w2[256];
    for (int kind = 0; kind < 3; kind++) {
        raw_noise r;
        assert_string_equal(raw_handshake(&r, &ba, (raw_opts){.key_seed = 5}), "");
        size_t n1 = raw_seal(&r, BBD_FRAME_ENVELOPE, "one", 3, w1);
        size_t n2 = raw_seal(&r, BBD_FRAME_ENVELOPE, "two", 3, w2);
        size_t before = b.n_env;
        if (kind == 0) { /* tampered */
            w1[n1 - 20] ^= 0x01;
            raw_send(r.fd, w1, n1);
        } else if (kind == 1) { /* replayed */
            raw_send(r.fd, w1, n1);
            WAIT_FOR(b.n_env == before + 1, 3000);
            raw_send(r.fd, w1, n1);
        } else { /* reordered */
            raw_send(r.fd, w2, n2);
            raw_send(r.fd, w1, n1);
        }
        WAIT_FOR(raw_peer_closed(&r), 3000);
        assert_int_equal(stats_of(&b).auth_failed, (uint64_t)kind + 1);
        assert_int_equal(b.n_env, before + (kind == 1));
        close(r.fd);
    }
    assert_non_null(strstr(b.logs, "failed authentication"));
    /* legitimate traffic goes on: a new connection is admitted and heard */
    raw_noise ok;
    assert_string_equal(raw_handshake(&ok, &ba, (raw_opts){.key_seed = 5}), "");
    size_t before = b.n_env;
    raw_send(ok.fd, w1, raw_seal(&ok, BBD_FRAME_ENVELOPE, "one", 3, w1));
    WAIT_FOR(b.n_env == before + 1, 3000);
    close(ok.fd);
    node_close(&b);
    assert_loop_empty();
}

/* The admit callback refuses a peer: it is told why, counted, never
 * connected on either side; an admitted one gets through. */
static void test_secure_admission_refused(void **state)
{
    (void)state;
    node b, a9, a1;
    bbd_addr ba = serve(&b, 2, refuse_seed_9, NULL);
    node_start(&a9, 9, "A9", NULL);
    bb_peerid two = peer_of(2);
    assert_int_equal(send_to(&a9, &two, &ba, 10, 1), BB_OK);
    WAIT_FOR(a9.n_fail == 1, 3000);
    assert_int_equal(a9.n_connected, 0);
    assert_int_equal(b.n_connected, 0);
    assert_int_equal(stats_of(&b).peers_refused, 1);
    assert_non_null(strstr(a9.logs, "refused this node: not on the node's allow list"));
    assert_non_null(strstr(b.logs, "not on the node's allow list"));
    /* a raw peer 9 learns the verdict in the admission frame */
    raw_noise r;
    assert_string_equal(raw_handshake(&r, &ba, (raw_opts){.key_seed = 9}),
                        "not on the node's allow list");
    close(r.fd);
    node_start(&a1, 1, "A1", NULL);
    assert_int_equal(send_to(&a1, &two, &ba, 10, 1), BB_OK);
    WAIT_FOR(b.n_env == 1 && a1.n_connected == 1, 3000);
    node_close(&a9);
    node_close(&a1);
    node_close(&b);
    assert_loop_empty();
}

/* Security off on one side: both sides fail the handshake saying so. */
static void test_secure_mode_mismatch(void **state)
{
    (void)state;
    bbd_transport_config off;
    bbd_transport_config_init(&off);
    off.security = BBD_SECURITY_OFF;
    for (int dir = 0; dir < 2; dir++) {
        node a, b;
        bbd_addr ba = pair_start(&a, &b, dir ? &off : NULL, dir ? NULL : &off, TCP0);
        bb_peerid two = peer_of(2);
        assert_int_equal(send_to(&a, &two, &ba, 10, 1), BB_OK);
        WAIT_FOR(a.n_fail == 1 && stats_of(&b).handshakes_failed == 1, 3000);
        assert_int_equal(stats_of(&a).handshakes_failed, 1);
        node *secure = dir ? &b : &a, *plain = dir ? &a : &b;
        assert_non_null(strstr(secure->logs, "runs with security \"off\""));
        assert_non_null(strstr(plain->logs, "requires encrypted channels"));
        assert_int_equal(a.n_connected + b.n_connected, 0);
        pair_close(&a, &b);
    }
}

/* What crosses the socket is not the envelope: a large envelope in odd
 * pieces (records spanning pieces, records straight into the frame) comes
 * out whole, and its bytes are never seen in the clear on the wire. */
static void test_secure_large_envelope_sealed(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, TCP0);
    bb_peerid two = peer_of(2);
    size_t released = 0, len = 3 * 1024 * 1024 + 12345;
    assert_int_equal(send_gather_to(&a, &two, &ba, len, 7, 5, &released), BB_OK);
    assert_int_equal(send_to(&a, &two, &ba, 100, 8), BB_OK);
    WAIT_FOR(b.n_env == 2, 10000);
    assert_true(env_is(&b.env[0], len, 7));
    assert_true(env_is(&b.env[1], 100, 8));
    assert_int_equal(released, 1);
    bbd_transport_stats s = stats_of(&b);
    /* one record per BBD_SEAL_RECORD_PLAINTEXT bytes: 18 bytes each, and the handshake */
    assert_true(s.bytes_in > len + (len / BBD_SEAL_RECORD_PLAINTEXT) * 18);
    assert_int_equal(s.auth_failed, 0);
    pair_close(&a, &b);
}

/* Large frames are sealed a piece at a time as the socket takes them
 * (tcp.c): two 6 MiB envelopes in pieces with small ones sent between and
 * after them arrive whole and in the order sent, each payload released
 * once, every send reported, and the sealed bytes in flight never more
 * than two pieces of 32 records (tx_sealed_peak), none left at the end. */
static void test_secure_seal_large_frames_as_socket_drains(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, TCP0);
    bb_peerid two = peer_of(2);
    size_t released = 0, len = 6 * 1024 * 1024 + 777;
    assert_int_equal(send_to(&a, &two, &ba, 100, 1), BB_OK);
    WAIT_FOR(b.n_env == 1, 10000); /* the connection is open */
    assert_int_equal(send_gather_to(&a, &two, &ba, len, 2, 3, &released), BB_OK);
    assert_true(stats_of(&a).tx_sealed_bytes > 0); /* the first pieces are on their way */
    assert_int_equal(released, 0);                 /* the payload is held, not copied */
    assert_int_equal(send_to(&a, &two, &ba, 200, 3), BB_OK);
    assert_int_equal(send_gather_to(&a, &two, &ba, len, 4, 5, &released), BB_OK);
    assert_int_equal(send_to(&a, &two, &ba, 300, 5), BB_OK);
    WAIT_FOR(b.n_env == 5, 20000);
    assert_true(env_is(&b.env[1], len, 2));
    assert_true(env_is(&b.env[2], 200, 3));
    assert_true(env_is(&b.env[3], len, 4));
    assert_true(env_is(&b.env[4], 300, 5));
    WAIT_FOR(a.n_ok == 5, 3000);
    assert_int_equal(released, 2);
    bbd_transport_stats s = stats_of(&a);
    /* a piece: 32 records, each a 2-byte length, the plaintext and the tag */
    size_t piece = 32 * (BBD_SEAL_RECORD_PLAINTEXT + 2 + BBD_NOISE_TAGLEN);
    assert_true(s.tx_sealed_peak > 0 && s.tx_sealed_peak <= 2 * piece);
    assert_int_equal(s.tx_sealed_bytes, 0);
    assert_int_equal(stats_of(&b).auth_failed, 0);
    pair_close(&a, &b);
}

/* A connection closed while a large frame is half sealed and frames wait
 * behind it: every payload released once, nothing left (ASan checks the
 * rest). */
static void test_secure_seal_closed_mid_frame(void **state)
{
    (void)state;
    node a, b;
    bbd_addr ba = pair_start(&a, &b, NULL, NULL, TCP0);
    bb_peerid two = peer_of(2);
    size_t released = 0, len = 6 * 1024 * 1024;
    assert_int_equal(send_to(&a, &two, &ba, 100, 1), BB_OK);
    WAIT_FOR(b.n_env == 1, 10000);
    assert_int_equal(send_gather_to(&a, &two, &ba, len, 2, 4, &released), BB_OK);
    assert_int_equal(send_gather_to(&a, &two, &ba, len, 3, 2, &released), BB_OK);
    assert_int_equal(send_to(&a, &two, &ba, 100, 4), BB_OK);
    assert_true(stats_of(&a).tx_sealed_bytes > 0);
    pair_close(&a, &b);
    assert_int_equal(released, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secure_identity_is_proven),
        cmocka_unit_test(test_secure_dial_wrong_key_refused),
        cmocka_unit_test(test_secure_records_tampered_replayed_reordered),
        cmocka_unit_test(test_secure_admission_refused),
        cmocka_unit_test(test_secure_mode_mismatch),
        cmocka_unit_test(test_secure_large_envelope_sealed),
        cmocka_unit_test(test_secure_seal_large_frames_as_socket_drains),
        cmocka_unit_test(test_secure_seal_closed_mid_frame),
    };
    return cmocka_run_group_tests(tests, harness_setup, harness_teardown);
}
