/* Unit tests for the transport's pure codecs: TCP frame headers, the
 * Handshake message, UDP datagram headers and fragment reassembly. Every
 * malformed case must come back as an error naming the problem. */
#include "test_transport_harness.h"

#include "bbd/host/fragment.h"
#include "bbd/host/fragment_reassembly.h"
#include "bbd/host/frame.h"
#include "bbd/host/handshake.h"
#include "bbd/host/noise_payload.h"

static const bbd_frame_limits HS_ONLY = {.max_handshake = BBD_HANDSHAKE_MAX_BYTES};
static const bbd_frame_limits ENV_ONLY = {.max_envelope = 1 << 20};

static size_t parse_addr(const char *text, uint8_t *out)
{
    size_t n;
    assert_int_equal(bb_multiaddr_parse(text, out, BB_MULTIADDR_MAX_LEN, &n, NULL), BB_OK);
    return n;
}

#define expect_error(rc, want, err, needle) expect_error_at(rc, want, err, needle, __LINE__)

static void expect_error_at(int rc, int want, const bb_error *err, const char *needle, int line)
{
    if (rc != want)
        fail_msg("line %d: status %d, want %d (%s)", line, rc, want, err->msg);
    if (!strstr(err->msg, needle))
        fail_msg("line %d: message \"%s\" lacks \"%s\"", line, err->msg, needle);
}

/* ---- frames --------------------------------------------------------------------------- */

static void test_frame_roundtrip(void **state)
{
    (void)state;
    const size_t sizes[] = {0, 1, 127, 128, 16383, 16384, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint8_t hdr[BBD_FRAME_HEADER_MAX];
        size_t hl = bbd_frame_header_encode(BBD_FRAME_ENVELOPE, sizes[i], hdr);
        bbd_frame_header h;
        bb_error err = {0};
        assert_int_equal(bbd_frame_header_decode(hdr, hl, &ENV_ONLY, &h, &err), BB_OK);
        assert_true(h.complete);
        assert_int_equal(h.kind, BBD_FRAME_ENVELOPE);
        assert_int_equal(h.header_len, hl);
        assert_int_equal(h.payload_len, sizes[i]);
        /* Every proper prefix asks for more bytes, never errs. */
        for (size_t k = 0; k < hl; k++) {
            assert_int_equal(bbd_frame_header_decode(hdr, k, &ENV_ONLY, &h, &err), BB_OK);
            assert_false(h.complete);
        }
    }
    uint8_t hdr[BBD_FRAME_HEADER_MAX];
    size_t hl = bbd_frame_header_encode(BBD_FRAME_HANDSHAKE, 40, hdr);
    bbd_frame_header h;
    assert_int_equal(bbd_frame_header_decode(hdr, hl, &HS_ONLY, &h, NULL), BB_OK);
    assert_int_equal(h.kind, BBD_FRAME_HANDSHAKE);
    assert_int_equal(hdr[0], 42); /* 1 tag + 1 length + 40 */
    assert_int_equal(hdr[1], 0x0a);
}

static void test_frame_decode_whole(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t n = bbd_frame_header_encode(BBD_FRAME_ENVELOPE, 3, buf);
    memcpy(buf + n, "abc", 3);
    n += 3;
    size_t n1 = n;
    n += bbd_frame_header_encode(BBD_FRAME_ENVELOPE, 2, buf + n);
    memcpy(buf + n, "de", 2);
    n += 2;
    bbd_frame_header h;
    const uint8_t *payload;
    size_t used;
    bb_error err = {0};
    assert_int_equal(bbd_frame_decode(buf, n, &ENV_ONLY, &h, &payload, &used, &err), BB_OK);
    assert_int_equal(used, n1);
    assert_memory_equal(payload, "abc", 3);
    assert_int_equal(bbd_frame_decode(buf + used, n - used, &ENV_ONLY, &h, &payload, &used, &err),
                     BB_OK);
    assert_memory_equal(payload, "de", 2);
    /* A frame cut short is ETRUNC for the whole-buffer decoder. */
    expect_error(bbd_frame_decode(buf, n1 - 1, &ENV_ONLY, &h, &payload, &used, &err),
                 BB_ETRUNC, &err, "truncated");
    expect_error(bbd_frame_decode(buf, 1, &ENV_ONLY, &h, &payload, &used, &err), BB_ETRUNC,
                 &err, "truncated");
}

static void test_frame_malformed(void **state)
{
    (void)state;
    bbd_frame_header h;
    bb_error err = {0};
    static const uint8_t empty_frame[] = {0x00};
    expect_error(bbd_frame_header_decode(empty_frame, 1, &ENV_ONLY, &h, &err), BB_EPARSE, &err,
                 "empty frame");
    static const uint8_t overlong[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                       0x80, 0x80, 0x80, 0x80, 0x01};
    expect_error(bbd_frame_header_decode(overlong, sizeof overlong, &ENV_ONLY, &h, &err),
                 BB_EPARSE, &err, "frame length");
    static const uint8_t nonminimal[] = {0x85, 0x00, 0x12, 0x03};
    expect_error(bbd_frame_header_decode(nonminimal, sizeof nonminimal, &ENV_ONLY, &h, &err),
                 BB_EPARSE, &err, "non-minimal");
    static const uint8_t bad_tag[] = {0x02, 0x22, 0x00};
    expect_error(bbd_frame_header_decode(bad_tag, sizeof bad_tag, &ENV_ONLY, &h, &err),
                 BB_EPARSE, &err, "unknown frame field tag 0x22");
    static const uint8_t varint_tag[] = {0x02, 0x10, 0x00};
    expect_error(bbd_frame_header_decode(varint_tag, sizeof varint_tag, &ENV_ONLY, &h, &err),
                 BB_EPARSE, &err, "unknown frame field tag 0x10");
    static const uint8_t hs[] = {0x02, 0x0a, 0x00};
    expect_error(bbd_frame_header_decode(hs, sizeof hs, &ENV_ONLY, &h, &err), BB_EPARSE, &err,
                 "unexpected handshake frame");
    static const uint8_t env[] = {0x02, 0x12, 0x00};
    expect_error(bbd_frame_header_decode(env, sizeof env, &HS_ONLY, &h, &err), BB_EPARSE, &err,
                 "unexpected envelope frame");
    static const uint8_t mismatch[] = {0x06, 0x12, 0x03};
    expect_error(bbd_frame_header_decode(mismatch, sizeof mismatch, &ENV_ONLY, &h, &err),
                 BB_EPARSE, &err, "does not match");
    static const uint8_t bad_payload_varint[] = {0x03, 0x12, 0x80, 0x00};
    expect_error(bbd_frame_header_decode(bad_payload_varint, sizeof bad_payload_varint,
                                         &ENV_ONLY, &h, &err),
                 BB_EPARSE, &err, "payload length");
}

/* The cap is enforced from the header alone: no body bytes are needed. */
static void test_frame_over_cap(void **state)
{
    (void)state;
    uint8_t hdr[BBD_FRAME_HEADER_MAX];
    size_t hl = bbd_frame_header_encode(BBD_FRAME_ENVELOPE, (1 << 20) + 1, hdr);
    bbd_frame_header h;
    bb_error err = {0};
    expect_error(bbd_frame_header_decode(hdr, hl, &ENV_ONLY, &h, &err), BB_ELIMIT, &err,
                 "over the cap");
    hl = bbd_frame_header_encode(BBD_FRAME_HANDSHAKE, BBD_HANDSHAKE_MAX_BYTES + 1, hdr);
    expect_error(bbd_frame_header_decode(hdr, hl, &HS_ONLY, &h, &err), BB_ELIMIT, &err,
                 "handshake of 65537 bytes");
    /* 2^62 announced: refused, not overflowed. */
    static const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x12,
                                   0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f};
    expect_error(bbd_frame_header_decode(huge, sizeof huge, &ENV_ONLY, &h, &err), BB_ELIMIT,
                 &err, "over the cap");
}

/* ---- handshakes ------------------------------------------------------------------------ */

typedef struct hs_buf {
    uint8_t b[BBD_HANDSHAKE_MAX_BYTES + 64];
    size_t n;
} hs_buf;

static void put_varint(hs_buf *h, uint64_t v)
{
    while (v >= 0x80) {
        h->b[h->n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    h->b[h->n++] = (uint8_t)v;
}

static void put_field(hs_buf *h, unsigned field, const void *d, size_t n)
{
    put_varint(h, (uint64_t)field << 3 | 2);
    put_varint(h, n);
    memcpy(h->b + h->n, d, n);
    h->n += n;
}

/* Field 1, the peer id; the copy is bounded by the id's own array so the
 * compiler can see it (at -O3 it cannot bound len otherwise). */
static void put_peer(hs_buf *h, const bb_peerid *id)
{
    put_field(h, 1, id->bytes, id->len < sizeof id->bytes ? id->len : sizeof id->bytes);
}

static void put_version(hs_buf *h, uint64_t v)
{
    put_varint(h, 4 << 3);
    put_varint(h, v);
}

static hs_buf *valid_hs(void)
{
    hs_buf *h = calloc(1, sizeof *h);
    bb_peerid id = peer_of(1);
    put_peer(h, &id);
    uint8_t a[BB_MULTIADDR_MAX_LEN];
    size_t an = parse_addr("/ip4/127.0.0.1/tcp/7001", a);
    put_field(h, 2, a, an);
    put_field(h, 3, "Client", 6);
    put_version(h, BBD_HANDSHAKE_VERSION);
    return h;
}

static void test_handshake_roundtrip(void **state)
{
    (void)state;
    bbd_handshake in = {.peer = peer_of(2), .version = BBD_HANDSHAKE_VERSION};
    uint8_t a1[64], a2[64];
    in.addrs[0] = (bb_multiaddr_ref){a1, parse_addr("/ip4/127.0.0.1/tcp/7001", a1)};
    in.addrs[1] = (bb_multiaddr_ref){a2, parse_addr("/ip6/::1/udp/7002", a2)};
    in.n_addrs = 2;
    in.targets[0] = (bbd_handshake_target){"Server", 6};
    in.targets[1] = (bbd_handshake_target){"Registry", 8};
    in.n_targets = 2;
    uint8_t buf[1024];
    size_t n;
    bb_error err = {0};
    assert_int_equal(bbd_handshake_encode(&in, buf, sizeof buf, &n, &err), BB_OK);
    bbd_handshake out;
    assert_int_equal(bbd_handshake_decode(buf, n, &out, &err), BB_OK);
    assert_true(bb_peerid_equal(&out.peer, &in.peer));
    assert_int_equal(out.version, BBD_HANDSHAKE_VERSION);
    assert_int_equal(out.n_addrs, 2);
    assert_int_equal(out.addrs[1].len, in.addrs[1].len);
    assert_memory_equal(out.addrs[1].data, a2, in.addrs[1].len);
    assert_int_equal(out.n_targets, 2);
    assert_int_equal(out.targets[1].len, 8);
    assert_memory_equal(out.targets[1].name, "Registry", 8);
    /* Every truncation is an error, never a crash or a success. */
    for (size_t k = 0; k < n; k++)
        assert_int_not_equal(bbd_handshake_decode(buf, k, &out, &err), BB_OK);
    /* A short output buffer is EFULL. */
    expect_error(bbd_handshake_encode(&in, buf, 10, &n, &err), BB_EFULL, &err, "does not fit");
}

static void test_handshake_skips_unknown_fields(void **state)
{
    (void)state;
    hs_buf *h = valid_hs();
    put_varint(h, 9 << 3 | 0); /* varint */
    put_varint(h, 300);
    put_field(h, 10, "xyz", 3); /* bytes */
    put_varint(h, 11 << 3 | 1); /* fixed64 */
    memset(h->b + h->n, 0, 8);
    h->n += 8;
    put_varint(h, 12 << 3 | 5); /* fixed32 */
    memset(h->b + h->n, 0, 4);
    h->n += 4;
    bbd_handshake out;
    bb_error err = {0};
    assert_int_equal(bbd_handshake_decode(h->b, h->n, &out, &err), BB_OK);
    assert_int_equal(out.n_targets, 1);
    free(h);
}

static void test_handshake_malformed(void **state)
{
    (void)state;
    bbd_handshake out;
    bb_error err = {0};
    bb_peerid id = peer_of(1);
    hs_buf *h = calloc(1, sizeof *h);

    expect_error(bbd_handshake_decode(h->b, 0, &out, &err), BB_EPARSE, &err, "no peer_id");

    put_peer(h, &id);
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_EUNSUPPORTED, &err,
                 "version 0");
    size_t at = h->n;
    char newer[32];
    snprintf(newer, sizeof newer, "version %d is not", BBD_HANDSHAKE_VERSION + 1);
    put_version(h, BBD_HANDSHAKE_VERSION + 1);
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_EUNSUPPORTED, &err, newer);
    h->n = at; /* version 1 encoded the envelope stamps as varints */
    put_version(h, 1);
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_EUNSUPPORTED, &err,
                 "version 1");

    h->n = 0;
    put_peer(h, &id);
    put_peer(h, &id);
    put_version(h, BBD_HANDSHAKE_VERSION);
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_EPARSE, &err,
                 "peer_id repeated");

    h->n = 0;
    put_field(h, 1, "\x05\x02xy", 4); /* unknown multihash code */
    put_version(h, BBD_HANDSHAKE_VERSION);
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_EUNSUPPORTED, &err,
                 "peer_id at byte 0");

    h->n = 0;
    put_field(h, 1, "\x00\x05xy", 4); /* identity multihash, wrong length */
    put_version(h, BBD_HANDSHAKE_VERSION);
    assert_int_not_equal(bbd_handshake_decode(h->b, h->n, &out, &err), BB_OK);
    assert_non_null(strstr(err.msg, "peer_id at byte 0"));

    h->n = 0;
    put_peer(h, &id);
    put_field(h, 2, "\x04\x7f", 2); /* ip4 cut short */
    put_version(h, BBD_HANDSHAKE_VERSION);
    assert_int_not_equal(bbd_handshake_decode(h->b, h->n, &out, &err), BB_OK);
    assert_non_null(strstr(err.msg, "listen_addresses[0]"));

    h->n = 0;
    put_peer(h, &id);
    put_field(h, 3, "two words", 9);
    put_version(h, BBD_HANDSHAKE_VERSION);
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_EPARSE, &err, "targets[0]");

    h->n = 0;
    put_peer(h, &id);
    put_field(h, 3, "", 0);
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_EPARSE, &err, "targets[0]");

    h->n = 0;
    char long_name[BBD_HANDSHAKE_TARGET_MAX + 1];
    memset(long_name, 'a', sizeof long_name);
    put_peer(h, &id);
    put_field(h, 3, long_name, sizeof long_name);
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_EPARSE, &err, "targets[0]");

    h->n = 0;
    put_varint(h, 1 << 3 | 0); /* peer_id as a varint */
    put_varint(h, 5);
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_EPARSE, &err, "wire type");

    h->n = 0;
    put_varint(h, 0 << 3 | 2); /* field number 0 */
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_EPARSE, &err,
                 "field number 0");

    h->n = 0;
    put_varint(h, 9 << 3 | 3); /* group start */
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_EPARSE, &err,
                 "unsupported wire type 3");

    h->n = 0;
    put_varint(h, 1 << 3 | 2);
    put_varint(h, 1000); /* claims more than remains */
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_ETRUNC, &err,
                 "claims 1000 bytes");

    h->n = 0;
    put_varint(h, 4 << 3);
    put_varint(h, (uint64_t)1 << 40);
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_EPARSE, &err, "32 bits");

    h->n = 0;
    put_varint(h, 12 << 3 | 1); /* fixed64 cut short */
    h->b[h->n++] = 0;
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_ETRUNC, &err, "field 12");
    free(h);
}

static void test_handshake_limits(void **state)
{
    (void)state;
    bbd_handshake out;
    bb_error err = {0};
    bb_peerid id = peer_of(1);
    hs_buf *h = calloc(1, sizeof *h);
    uint8_t a[64];
    size_t an = parse_addr("/ip4/10.0.0.1/tcp/1", a);
    put_peer(h, &id);
    for (int i = 0; i <= BBD_HANDSHAKE_MAX_ADDRS; i++)
        put_field(h, 2, a, an);
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_ELIMIT, &err,
                 "more than 32 listen_addresses");

    h->n = 0;
    put_peer(h, &id);
    for (int i = 0; i <= BBD_HANDSHAKE_MAX_TARGETS; i++)
        put_field(h, 3, "T", 1);
    expect_error(bbd_handshake_decode(h->b, h->n, &out, &err), BB_ELIMIT, &err,
                 "more than 64 targets");

    expect_error(bbd_handshake_decode(h->b, BBD_HANDSHAKE_MAX_BYTES + 1, &out, &err), BB_ELIMIT,
                 &err, "over the cap");

    /* The encoder refuses what the decoder would. */
    bbd_handshake in = {.peer = id, .version = 1, .n_targets = 1};
    in.targets[0] = (bbd_handshake_target){"a b", 3};
    uint8_t buf[256];
    size_t n;
    expect_error(bbd_handshake_encode(&in, buf, sizeof buf, &n, &err), BB_EINVAL, &err,
                 "target 0");
    free(h);
}

/* ---- datagrams ------------------------------------------------------------------------------ */

static size_t fragment(uint8_t *out, uint32_t id, uint32_t total, uint16_t chunk, uint32_t index,
                       size_t data_len)
{
    bbd_dgram_fragment_header_encode(id, total, chunk, index, out);
    memset(out + BBD_DGRAM_FRAGMENT_HEADER, (int)(index & 0xff), data_len);
    return BBD_DGRAM_FRAGMENT_HEADER + data_len;
}

static void test_dgram_kinds(void **state)
{
    (void)state;
    uint8_t d[64] = {0};
    bbd_dgram g;
    bb_error err = {0};
    bbd_dgram_header_encode(BBD_DGRAM_ENVELOPE, d);
    memcpy(d + 2, "env", 3);
    assert_int_equal(bbd_dgram_decode(d, 5, 1024, 1024, &g, &err), BB_OK);
    assert_int_equal(g.kind, BBD_DGRAM_ENVELOPE);
    assert_int_equal(g.body_len, 3);
    assert_memory_equal(g.body, "env", 3);
    bbd_dgram_header_encode(BBD_DGRAM_HELLO_ACK, d);
    assert_int_equal(bbd_dgram_decode(d, 5, 1024, 1024, &g, &err), BB_OK);
    assert_int_equal(g.kind, BBD_DGRAM_HELLO_ACK);

    size_t n = fragment(d, 7, 100, 40, 2, 20);
    assert_int_equal(bbd_dgram_decode(d, n, 1024, 1024, &g, &err), BB_OK);
    assert_int_equal(g.kind, BBD_DGRAM_FRAGMENT);
    assert_int_equal(g.msg_id, 7);
    assert_int_equal(g.total, 100);
    assert_int_equal(g.chunk, 40);
    assert_int_equal(g.index, 2);
    assert_int_equal(g.count, 3);
    assert_int_equal(g.body_len, 20);
}

static void test_dgram_malformed(void **state)
{
    (void)state;
    uint8_t d[128] = {0};
    bbd_dgram g;
    bb_error err = {0};
    expect_error(bbd_dgram_decode(d, 0, 1024, 1024, &g, &err), BB_EPARSE, &err,
                 "not a bbd datagram");
    d[0] = 0x42;
    d[1] = BBD_DGRAM_ENVELOPE;
    expect_error(bbd_dgram_decode(d, 4, 1024, 1024, &g, &err), BB_EPARSE, &err,
                 "not a bbd datagram");
    d[0] = BBD_DGRAM_MAGIC;
    d[1] = 0x0a;
    expect_error(bbd_dgram_decode(d, 4, 1024, 1024, &g, &err), BB_EPARSE, &err,
                 "unknown kind 0x0a");
    /* secure kinds: a NOISE1 not padded, a SEALED too short for its tag */
    d[1] = BBD_DGRAM_NOISE1;
    expect_error(bbd_dgram_decode(d, 40, 1024, 1024, &g, &err), BB_EPARSE, &err,
                 "padded to at least");
    d[1] = BBD_DGRAM_SEALED;
    expect_error(bbd_dgram_decode(d, 2 + 8 + 16, 1024, 1024, &g, &err), BB_EPARSE, &err,
                 "sealed datagram of 26 bytes");
    memset(d + 2, 0, 8);
    d[9] = 7;
    assert_int_equal(bbd_dgram_decode(d, 2 + 8 + 17, 1024, 1024, &g, &err), BB_OK);
    assert_int_equal(g.nonce, 7);
    assert_int_equal(g.body_len, 17);
    bbd_dgram_header_encode(BBD_DGRAM_HELLO, d);
    expect_error(bbd_dgram_decode(d, 2, 1024, 1024, &g, &err), BB_EPARSE, &err,
                 "empty handshake");
    expect_error(bbd_dgram_decode(d, 40, 1024, 16, &g, &err), BB_ELIMIT, &err,
                 "handshake of 38 bytes");
    bbd_dgram_header_encode(BBD_DGRAM_ENVELOPE, d);
    expect_error(bbd_dgram_decode(d, 40, 16, 1024, &g, &err), BB_ELIMIT, &err,
                 "envelope of 38 bytes");
    /* fragments */
    bbd_dgram_header_encode(BBD_DGRAM_FRAGMENT, d);
    expect_error(bbd_dgram_decode(d, 10, 1024, 1024, &g, &err), BB_EPARSE, &err,
                 "header needs 16");
    size_t n = fragment(d, 1, 5000, 40, 0, 40);
    expect_error(bbd_dgram_decode(d, n, 1024, 1024, &g, &err), BB_ELIMIT, &err,
                 "5000 bytes is over the cap");
    n = fragment(d, 1, 100, 31, 0, 31);
    expect_error(bbd_dgram_decode(d, n, 1024, 1024, &g, &err), BB_EPARSE, &err,
                 "under the minimum");
    n = fragment(d, 1, 40, 40, 0, 40);
    expect_error(bbd_dgram_decode(d, n, 1024, 1024, &g, &err), BB_EPARSE, &err,
                 "fragmented into chunks");
    n = fragment(d, 1, 100, 40, 3, 20);
    expect_error(bbd_dgram_decode(d, n, 1024, 1024, &g, &err), BB_EPARSE, &err,
                 "index 3 of 3");
    n = fragment(d, 1, 100, 40, 0, 39);
    expect_error(bbd_dgram_decode(d, n, 1024, 1024, &g, &err), BB_EPARSE, &err,
                 "carries 39 bytes, want 40");
    n = fragment(d, 1, 100, 40, 2, 40);
    expect_error(bbd_dgram_decode(d, n, 1024, 1024, &g, &err), BB_EPARSE, &err,
                 "carries 40 bytes, want 20");
    uint8_t *big = calloc(1, BBD_DGRAM_MAX_BYTES + 1);
    big[0] = BBD_DGRAM_MAGIC;
    big[1] = BBD_DGRAM_ENVELOPE;
    expect_error(bbd_dgram_decode(big, BBD_DGRAM_MAX_BYTES + 1, 1 << 20, 1024, &g, &err),
                 BB_ELIMIT, &err, "over 65507");
    free(big);
}

/* ---- reassembly ---------------------------------------------------------------------------- */

/* Build fragment i of a total-byte message (content: byte j = j % 251). */
static bbd_dgram frag_of(const uint8_t *msg, uint32_t id, uint32_t total, uint16_t chunk,
                         uint32_t i)
{
    bbd_dgram d = {.kind = BBD_DGRAM_FRAGMENT, .msg_id = id, .total = total, .chunk = chunk,
                   .index = i};
    d.count = (total + chunk - 1u) / chunk;
    size_t off = (size_t)i * chunk;
    d.body = msg + off;
    d.body_len = total - off < chunk ? total - off : chunk;
    return d;
}

static void test_reassembly_orders_and_duplicates(void **state)
{
    (void)state;
    enum { TOTAL = 1000, CHUNK = 64 };
    uint8_t msg[TOTAL];
    for (size_t j = 0; j < TOTAL; j++)
        msg[j] = (uint8_t)(j % 251);
    bbd_reasm_config cfg = {.budget_bytes = 1 << 20, .timeout_ms = 1000, .max_messages = 4};
    bbd_reasm *r = bbd_reasm_new(&cfg);
    uint32_t count = (TOTAL + CHUNK - 1) / CHUNK;
    bbd_reasm_result res;
    uint8_t *out = NULL;
    size_t len = 0;
    bb_error err = {0};
    /* Reverse order, with every fragment sent twice. */
    for (uint32_t k = 0; k < count; k++) {
        uint32_t i = count - 1 - k;
        bbd_dgram d = frag_of(msg, 9, TOTAL, CHUNK, i);
        assert_int_equal(bbd_reasm_add(r, 1, &d, 10, &res, &out, &len, &err), BB_OK);
        if (k + 1 < count) {
            assert_int_equal(res, BBD_REASM_PARTIAL);
            assert_int_equal(bbd_reasm_add(r, 1, &d, 10, &res, &out, &len, &err), BB_OK);
            assert_int_equal(res, BBD_REASM_DUPLICATE);
        }
    }
    assert_int_equal(res, BBD_REASM_COMPLETE);
    assert_int_equal(len, TOTAL);
    assert_memory_equal(out, msg, TOTAL);
    free(out);
    assert_int_equal(bbd_reasm_bytes(r), 0);
    assert_int_equal(bbd_reasm_pending(r), 0);
    /* A late copy of a completed message is a duplicate, not a new one. */
    bbd_dgram d = frag_of(msg, 9, TOTAL, CHUNK, 3);
    assert_int_equal(bbd_reasm_add(r, 1, &d, 11, &res, &out, &len, &err), BB_OK);
    assert_int_equal(res, BBD_REASM_DUPLICATE);
    assert_int_equal(bbd_reasm_pending(r), 0);
    /* The same msg_id from another source is its own message. */
    assert_int_equal(bbd_reasm_add(r, 2, &d, 11, &res, &out, &len, &err), BB_OK);
    assert_int_equal(res, BBD_REASM_PARTIAL);
    assert_int_equal(bbd_reasm_drop_source(r, 2), 1);
    assert_int_equal(bbd_reasm_bytes(r), 0);
    bbd_reasm_free(r);
}

static void test_reassembly_bounds(void **state)
{
    (void)state;
    static uint8_t msg[4096];
    bbd_reasm_config cfg = {.budget_bytes = 5000, .timeout_ms = 100, .max_messages = 2};
    bbd_reasm *r = bbd_reasm_new(&cfg);
    bbd_reasm_result res;
    uint8_t *out = NULL;
    size_t len = 0;
    bb_error err = {0};
    bbd_dgram a = frag_of(msg, 1, 2000, 100, 0);
    assert_int_equal(bbd_reasm_add(r, 1, &a, 0, &res, &out, &len, &err), BB_OK);
    assert_true(bbd_reasm_bytes(r) >= 2000);
    /* Over the byte budget: refused. */
    bbd_dgram b = frag_of(msg, 2, 4000, 100, 0);
    expect_error(bbd_reasm_add(r, 1, &b, 0, &res, &out, &len, &err), BB_EBUDGET, &err,
                 "budget");
    /* Over the message count: refused. */
    bbd_dgram c = frag_of(msg, 3, 500, 100, 0);
    assert_int_equal(bbd_reasm_add(r, 1, &c, 0, &res, &out, &len, &err), BB_OK);
    bbd_dgram e = frag_of(msg, 4, 500, 100, 0);
    expect_error(bbd_reasm_add(r, 1, &e, 0, &res, &out, &len, &err), BB_ELIMIT, &err,
                 "partial envelopes");
    /* A fragment disagreeing with its message's size: refused, message kept. */
    bbd_dgram bad = frag_of(msg, 1, 2100, 100, 1);
    expect_error(bbd_reasm_add(r, 1, &bad, 0, &res, &out, &len, &err), BB_EPARSE, &err,
                 "earlier ones 2000");
    assert_int_equal(bbd_reasm_pending(r), 2);
    /* Timeout: both partial messages dropped, all bytes given back. */
    assert_int_equal(bbd_reasm_expire(r, 99), 0);
    assert_int_equal(bbd_reasm_expire(r, 100), 2);
    assert_int_equal(bbd_reasm_bytes(r), 0);
    bbd_reasm_free(r);
}

/* Random bytes through every decoder: errors, never a crash or an
 * out-of-bounds read (run under ASan / valgrind). Fixed seed. */
static void test_random_inputs(void **state)
{
    (void)state;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    uint8_t buf[512];
    for (int round = 0; round < 50000; round++) {
        size_t n = 0;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        n = (size_t)(x % sizeof buf);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = (uint8_t)x;
        }
        /* Steer some inputs into the interesting paths. */
        if (n > 2 && round % 3 == 0)
            buf[0] = BBD_DGRAM_MAGIC, buf[1] = (uint8_t)(1 + round % 4);
        bbd_frame_header h;
        bbd_handshake hs;
        bbd_dgram d;
        bb_error err;
        const uint8_t *payload;
        size_t used;
        int rc = bbd_frame_decode(buf, n, &ENV_ONLY, &h, &payload, &used, &err);
        if (rc == BB_OK)
            assert_true(used <= n && payload + h.payload_len <= buf + n);
        bbd_handshake_decode(buf, n, &hs, &err);
        if (bbd_dgram_decode(buf, n, 1 << 20, 1024, &d, &err) == BB_OK)
            assert_true(d.body + d.body_len <= buf + n);
        char reason[BBD_ADMISSION_REASON_MAX + 1];
        bbd_admission_decode(buf, n, reason, &err);
        bbd_noise_identity id;
        static const uint8_t key[32] = {9};
        if (bbd_noise_payload_verify(buf, n, key, &id, &err) == BB_OK)
            fail_msg("random bytes verified as a signed payload");
    }
}

/* The Admission frame: admitted (empty), a refusal (text, shown safely). */
static void test_admission_codec(void **state)
{
    (void)state;
    uint8_t buf[BBD_ADMISSION_MAX_BYTES];
    char reason[BBD_ADMISSION_REASON_MAX + 1];
    bb_error err = {0};
    assert_int_equal(bbd_admission_encode(NULL, buf), 0);
    assert_int_equal(bbd_admission_decode(buf, 0, reason, &err), BB_OK);
    assert_string_equal(reason, "");
    size_t n = bbd_admission_encode("not on the allow list", buf);
    assert_int_equal(bbd_admission_decode(buf, n, reason, &err), BB_OK);
    assert_string_equal(reason, "not on the allow list");
    n = bbd_admission_encode("", buf); /* an empty reason still refuses */
    assert_int_equal(bbd_admission_decode(buf, n, reason, &err), BB_OK);
    assert_string_equal(reason, "refused");
    char longr[400];
    memset(longr, 'x', sizeof longr - 1);
    longr[sizeof longr - 1] = '\0';
    n = bbd_admission_encode(longr, buf);
    assert_int_equal(bbd_admission_decode(buf, n, reason, &err), BB_OK);
    assert_int_equal(strlen(reason), BBD_ADMISSION_REASON_MAX);
    static const uint8_t ctl[] = {0x0a, 0x03, 'a', 0x1b, '\n'};
    assert_int_equal(bbd_admission_decode(ctl, sizeof ctl, reason, &err), BB_OK);
    assert_string_equal(reason, "a??");
    static const uint8_t cut[] = {0x0a, 0x09, 'a'};
    assert_int_equal(bbd_admission_decode(cut, sizeof cut, reason, &err), BB_ETRUNC);
    /* an admission frame where none is expected */
    bbd_frame_header h;
    uint8_t hdr[BBD_FRAME_HEADER_MAX];
    size_t hl = bbd_frame_header_encode(BBD_FRAME_ADMISSION, 3, hdr);
    assert_int_equal(hdr[1], 0x1a);
    assert_int_equal(bbd_frame_header_decode(hdr, hl, &ENV_ONLY, &h, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "unexpected admission frame"));
}

/* The libp2p payload: signed, verified; every defect refused by name. */
static void test_noise_payload_codec(void **state)
{
    (void)state;
    bb_keypair kp;
    bb_peerid id = peer_key(4, &kp);
    uint8_t s_pub[32] = {1, 2, 3}, other[32] = {4}, sig[64], p[512];
    size_t n;
    bb_error err = {0};
    assert_int_equal(bbd_noise_sign_static(&kp, s_pub, sig, &err), BB_OK);
    assert_int_equal(bbd_noise_payload_encode(kp.pk, sig, (const uint8_t *)"hs", 2, p, sizeof p, &n,
                                              &err),
                     BB_OK);
    bbd_noise_identity who;
    assert_int_equal(bbd_noise_payload_verify(p, n, s_pub, &who, &err), BB_OK);
    assert_true(bb_peerid_equal(&who.peer, &id));
    assert_int_equal(who.data_len, 2);
    /* another static key: the signature does not cover it */
    assert_int_equal(bbd_noise_payload_verify(p, n, other, &who, &err), BB_EVALIDATE);
    /* an unknown field (a later revision's extensions = 4) is skipped */
    uint8_t q[600];
    memcpy(q, p, n);
    q[n] = 0x22, q[n + 1] = 0x01, q[n + 2] = 0x00;
    assert_int_equal(bbd_noise_payload_verify(q, n + 3, s_pub, &who, &err), BB_OK);
    /* cut short, a field repeated, no signature */
    assert_int_equal(bbd_noise_payload_verify(p, n - 1, s_pub, &who, &err), BB_ETRUNC);
    memcpy(q, p, n);
    memcpy(q + n, p, 38);
    assert_int_equal(bbd_noise_payload_verify(q, n + 38, s_pub, &who, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "identity_key repeated"));
    assert_int_equal(bbd_noise_payload_verify(p, 38, s_pub, &who, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "no identity_sig"));
    assert_int_equal(bbd_noise_payload_encode(kp.pk, sig, NULL, 0, p, 50, &n, &err), BB_EFULL);
    bb_keypair_wipe(&kp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_roundtrip),
        cmocka_unit_test(test_admission_codec),
        cmocka_unit_test(test_noise_payload_codec),
        cmocka_unit_test(test_frame_decode_whole),
        cmocka_unit_test(test_frame_malformed),
        cmocka_unit_test(test_frame_over_cap),
        cmocka_unit_test(test_handshake_roundtrip),
        cmocka_unit_test(test_handshake_skips_unknown_fields),
        cmocka_unit_test(test_handshake_malformed),
        cmocka_unit_test(test_handshake_limits),
        cmocka_unit_test(test_dgram_kinds),
        cmocka_unit_test(test_dgram_malformed),
        cmocka_unit_test(test_reassembly_orders_and_duplicates),
        cmocka_unit_test(test_reassembly_bounds),
        cmocka_unit_test(test_random_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
