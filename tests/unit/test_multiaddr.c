/* Unit tests for multiaddr text/binary codecs, suffixes and transports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "bb/le.h"
#include "bb/uvarint.h"

#define ED_ID "12D3KooWBtg3aaRMjxwedh83aGiUkwSxDwUZkzuJcfaqUmo7R3pq"
#define SHA_ID "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N"

static size_t from_hex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = hex; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        unsigned v;
        assert_int_equal(sscanf(p, "%2x", &v), 1);
        assert_true(n < cap);
        out[n++] = (uint8_t)v;
        p += 2;
    }
    return n;
}

static size_t parse_ok(const char *text, uint8_t *out)
{
    size_t n = 0;
    bb_error err = {0};
    int rc = bb_multiaddr_parse(text, out, BB_MULTIADDR_MAX_LEN, &n, &err);
    if (rc != BB_OK)
        fail_msg("parse %s: %s", text, err.msg);
    return n;
}

/* ---- known encodings -------------------------------------------------------- */

static void check_encoding(const char *text, const char *hex)
{
    uint8_t want[BB_MULTIADDR_MAX_LEN], got[BB_MULTIADDR_MAX_LEN];
    size_t wn = from_hex(hex, want, sizeof want);
    size_t gn = parse_ok(text, got);
    assert_int_equal(gn, wn);
    assert_memory_equal(got, want, wn);
    char back[BB_MULTIADDR_TEXT_MAX + 1];
    bb_error err;
    assert_int_equal(bb_multiaddr_format(want, wn, back, sizeof back, NULL, &err), BB_OK);
    assert_string_equal(back, text);
}

static void test_known_encodings(void **state)
{
    (void)state;
    check_encoding("/ip4/127.0.0.1/tcp/7001", "04 7f000001 06 1b59");
    /* multiformats/multiaddr test/multiaddr.feature */
    check_encoding("/ip4/192.0.2.42/tcp/443", "04 c000022a 06 01bb");
    check_encoding("/ip4/127.0.0.1/udp/7001", "04 7f000001 9102 1b59");
    check_encoding("/ip6/::1/tcp/7001", "29 00000000000000000000000000000001 06 1b59");
    check_encoding("/dns4/example.com/tcp/80", "36 0b 6578616d706c652e636f6d 06 0050");
    check_encoding("/dns/h/udp/0", "35 01 68 9102 0000");
    check_encoding("/dns6/h/tcp/65535", "37 01 68 06 ffff");
    /* private-use codes: 0x300001 = varint 81 80 c0 01 */
    check_encoding("/site/5", "8180c001 05");
    check_encoding("/site/300", "8180c001 ac02");
    check_encoding("/component/3/op/Sum", "8280c001 03 8380c001 03 53756d");
    check_encoding("/p2p/" ED_ID,
                   "a503 26 0024 08011220"
                   "1ed1e8fae2c4a144b8be8fd4b47bf3d3b34b871c3cacf6010f0e42d474fce27e");
    check_encoding("/ip4/10.0.0.2/tcp/7001/p2p/" ED_ID "/site/17",
                   "04 0a000002 06 1b59 a503 26 0024 08011220"
                   "1ed1e8fae2c4a144b8be8fd4b47bf3d3b34b871c3cacf6010f0e42d474fce27e"
                   " 8180c001 11");
}

/* ---- text round trips ---------------------------------------------------------- */

static void test_roundtrips(void **state)
{
    (void)state;
    const char *canon[] = {
        "/ip4/0.0.0.0/tcp/0",
        "/ip4/255.255.255.255/udp/65535",
        "/ip6/::/tcp/1",
        "/ip6/::1/udp/7001",
        "/ip6/2001:db8::1/tcp/443",
        "/ip6/fe80::1:2:3:4/udp/9",
        "/ip6/::ffff:1.2.3.4/tcp/5",
        "/ip6/1:2:3:4:5:6:7:8/tcp/5",
        "/dns/example.com/tcp/443",
        "/dns4/a.b-c_d.example/udp/53",
        "/dns6/x/tcp/1",
        "/p2p/" ED_ID,
        "/p2p/" SHA_ID,
        "/ip4/1.2.3.4/tcp/5/p2p/" SHA_ID,
        "/site/0",
        "/site/127",
        "/site/128",
        "/site/18446744073709551615",
        "/component/0/op/a",
        "/component/18446744073709551615/op/Aggregate.v2:x",
        "/ip4/127.0.0.1/tcp/7001/site/42",
        "/ip6/::1/udp/7001/p2p/" ED_ID "/component/7/op/Sample",
        "/ip4/1.1.1.1/tcp/1/ip4/2.2.2.2/udp/2", /* encapsulation is allowed */
    };
    for (size_t i = 0; i < sizeof canon / sizeof canon[0]; i++) {
        uint8_t *bin = NULL;
        size_t n = 0;
        bb_error err = {0};
        if (bb_multiaddr_parse_alloc(canon[i], &bin, &n, &err) != BB_OK)
            fail_msg("parse %s: %s", canon[i], err.msg);
        assert_int_equal(bb_multiaddr_validate(bin, n, &err), BB_OK);
        char *text = NULL;
        assert_int_equal(bb_multiaddr_format_alloc(bin, n, &text, &err), BB_OK);
        assert_string_equal(text, canon[i]);
        /* exact-size buffers work, one byte less does not */
        uint8_t exact[BB_MULTIADDR_MAX_LEN];
        size_t en;
        assert_int_equal(bb_multiaddr_parse(canon[i], exact, n, &en, &err), BB_OK);
        assert_int_equal(en, n);
        assert_int_equal(bb_multiaddr_parse(canon[i], exact, n - 1, &en, &err), BB_EFULL);
        size_t tl = strlen(text);
        char tb[BB_MULTIADDR_TEXT_MAX + 1];
        size_t got;
        assert_int_equal(bb_multiaddr_format(bin, n, tb, tl + 1, &got, &err), BB_OK);
        assert_int_equal(got, tl);
        assert_int_equal(bb_multiaddr_format(bin, n, tb, tl, &got, &err), BB_EFULL);
        free(text);
        free(bin);
    }
    /* non-canonical text forms normalise */
    const char *in[][2] = {
        {"/ip6/0:0:0:0:0:0:0:1/tcp/7001", "/ip6/::1/tcp/7001"},
        {"/ip6/2001:DB8:0:0::1/udp/5", "/ip6/2001:db8::1/udp/5"},
        {"/ip6/0000::0001/tcp/1", "/ip6/::1/tcp/1"},
        {"/ipfs/" SHA_ID, "/p2p/" SHA_ID},
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        uint8_t bin[BB_MULTIADDR_MAX_LEN];
        size_t n = parse_ok(in[i][0], bin);
        char text[BB_MULTIADDR_TEXT_MAX + 1];
        assert_int_equal(bb_multiaddr_format(bin, n, text, sizeof text, NULL, NULL), BB_OK);
        assert_string_equal(text, in[i][1]);
    }
}

/* ---- malformed text --------------------------------------------------------------- */

typedef struct bad_text {
    const char *text;
    int code;
    const char *needle; /* expected in the message */
} bad_text;

static void test_bad_text(void **state)
{
    (void)state;
    const bad_text cases[] = {
        {"", BB_EPARSE, "empty"},
        {"/", BB_EPARSE, "offset 1: empty protocol name"},
        {"//ip4/1.2.3.4", BB_EPARSE, "empty protocol name"},
        {"ip4/1.2.3.4", BB_EPARSE, "offset 0: expected '/'"},
        {"/ip4", BB_EPARSE, "missing value for /ip4"},
        {"/ip4/", BB_EPARSE, "empty value for /ip4"},
        {"/ip4/1.2.3.4/", BB_EPARSE, "offset 13: empty protocol name"},
        {"/foo/1", BB_EUNSUPPORTED, "unknown protocol 'foo'"},
        {"/ip4/1.2.3.4/quic/1", BB_EUNSUPPORTED, "offset 13: unknown protocol 'quic'"},
        {"/IP4/1.2.3.4", BB_EUNSUPPORTED, "unknown protocol"},
        {"/ip4/1.2.3", BB_EPARSE, "offset 5: bad ip4 address '1.2.3'"},
        {"/ip4/256.0.0.1", BB_EPARSE, "bad ip4"},
        {"/ip4/1.2.3.4.5", BB_EPARSE, "bad ip4"},
        {"/ip4/01.2.3.4", BB_EPARSE, "bad ip4"},
        {"/ip4/::1", BB_EPARSE, "bad ip4"},
        {"/ip4/1.2.3.4444444444444444444444444444444444444444444", BB_EPARSE, "too long"},
        {"/ip6/:::", BB_EPARSE, "bad ip6"},
        {"/ip6/1::2::3", BB_EPARSE, "bad ip6"},
        {"/ip6/1.2.3.4", BB_EPARSE, "bad ip6"},
        {"/ip6/fe80::1%eth0", BB_EPARSE, "bad ip6"},
        {"/ip4/1.2.3.4/tcp/65536", BB_EPARSE, "offset 17: /tcp port 65536 > 65535"},
        {"/ip4/1.2.3.4/udp/99999999999999999999999", BB_EPARSE, "bad /udp port"},
        {"/tcp/-1", BB_EPARSE, "bad /tcp port"},
        {"/tcp/+1", BB_EPARSE, "bad /tcp port"},
        {"/tcp/080", BB_EPARSE, "bad /tcp port"},
        {"/tcp/8o", BB_EPARSE, "bad /tcp port"},
        {"/tcp/ 80", BB_EPARSE, "bad /tcp port"},
        {"/site/18446744073709551616", BB_EPARSE, "bad /site id"},
        {"/site/x", BB_EPARSE, "bad /site id"},
        {"/site/01", BB_EPARSE, "bad /site id"},
        {"/component/1", BB_EPARSE, "/component must be followed by /op"},
        {"/component/1/site/2", BB_EPARSE, "/component must be followed by /op"},
        {"/op/x", BB_EPARSE, "offset 0: /op must directly follow /component"},
        {"/site/1/op/x", BB_EPARSE, "/op must directly follow"},
        {"/component/1/op/a b", BB_EPARSE, "byte 0x20"},
        {"/dns/a\x01", BB_EPARSE, "offset 6: /dns name has byte 0x01"},
        {"/dns/\xc3\xa9", BB_EPARSE, "byte 0xc3"},
        {"/p2p/0OIl", BB_EPARSE, "bad /p2p value"},
        {"/p2p/StV1DL6CwTryKyV", BB_EPARSE, "bad /p2p value"},
        {"/p2p/" ED_ID "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", BB_EPARSE,
         "bad /p2p"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t out[BB_MULTIADDR_MAX_LEN];
        size_t n = 12345;
        bb_error err = {0};
        int rc = bb_multiaddr_parse(cases[i].text, out, sizeof out, &n, &err);
        if (rc != cases[i].code || err.code != rc || !strstr(err.msg, cases[i].needle))
            fail_msg("case %zu \"%s\": got %s \"%s\", want %s containing \"%s\"", i,
                     cases[i].text, bb_status_name(rc), err.msg, bb_status_name(cases[i].code),
                     cases[i].needle);
        assert_int_equal(n, 12345); /* untouched on error */
    }
    /* the message names the input */
    bb_error err;
    uint8_t out[64];
    assert_int_equal(bb_multiaddr_parse("/ip4/1.2.3.4/tcp/70000", out, sizeof out, NULL, &err),
                     BB_EPARSE);
    assert_non_null(strstr(err.msg, "\"/ip4/1.2.3.4/tcp/70000\""));
    assert_int_equal(bb_multiaddr_parse(NULL, out, sizeof out, NULL, &err), BB_EINVAL);
    uint8_t *p = (uint8_t *)1;
    assert_int_equal(bb_multiaddr_parse_alloc("/bogus/1", &p, NULL, &err), BB_EUNSUPPORTED);
    assert_null(p);
}

static void test_text_limits(void **state)
{
    (void)state;
    bb_error err;
    uint8_t out[BB_MULTIADDR_MAX_LEN];
    char text[BB_MULTIADDR_TEXT_MAX + 64];
    /* 32 components fine, 33 too many */
    size_t pos = 0;
    for (int i = 0; i < 32; i++)
        pos += (size_t)sprintf(text + pos, "/tcp/%d", i);
    size_t n;
    assert_int_equal(bb_multiaddr_parse(text, out, sizeof out, &n, &err), BB_OK);
    assert_int_equal(n, 32 * 3);
    sprintf(text + pos, "/tcp/32");
    assert_int_equal(bb_multiaddr_parse(text, out, sizeof out, &n, &err), BB_ELIMIT);
    assert_non_null(strstr(err.msg, "more than 32 components"));
    /* binary over 1024 bytes */
    char name[BB_MULTIADDR_NAME_MAX + 1];
    memset(name, 'a', BB_MULTIADDR_NAME_MAX);
    name[BB_MULTIADDR_NAME_MAX] = '\0';
    pos = 0;
    for (int i = 0; i < 5; i++)
        pos += (size_t)sprintf(text + pos, "/dns/%s", name);
    assert_int_equal(bb_multiaddr_parse(text, out, sizeof out, &n, &err), BB_ELIMIT);
    assert_non_null(strstr(err.msg, "exceeds 1024 bytes"));
    /* a 255-byte name is fine, 256 is not */
    sprintf(text, "/dns/%s", name);
    assert_int_equal(bb_multiaddr_parse(text, out, sizeof out, &n, &err), BB_OK);
    assert_int_equal(n, 1 + 2 + 255);
    sprintf(text, "/dns/%sb", name);
    assert_int_equal(bb_multiaddr_parse(text, out, sizeof out, &n, &err), BB_EPARSE);
    /* text over 4096 characters */
    memset(text, '/', BB_MULTIADDR_TEXT_MAX + 1);
    text[BB_MULTIADDR_TEXT_MAX + 1] = '\0';
    assert_int_equal(bb_multiaddr_parse(text, out, sizeof out, &n, &err), BB_ELIMIT);
}

/* ---- malformed binary --------------------------------------------------------------- */

typedef struct bad_bin {
    const char *hex;
    int code;
    const char *needle;
} bad_bin;

static void test_bad_binary(void **state)
{
    (void)state;
    const bad_bin cases[] = {
        {"", BB_EPARSE, "empty"},
        {"05 00", BB_EUNSUPPORTED, "byte 0: unknown protocol code 0x5"},
        {"04 7f000001 07 0000", BB_EUNSUPPORTED, "byte 5: unknown protocol code 0x7"},
        {"04 7f0000", BB_ETRUNC, "byte 1: /ip4 value needs 4 bytes, 3 left"},
        {"04 7f000001 06 1b", BB_ETRUNC, "byte 6: /tcp value needs 2 bytes, 1 left"},
        {"29 0000", BB_ETRUNC, "/ip6 value needs 16 bytes"},
        {"91", BB_ETRUNC, "truncated varint in protocol code"},
        {"84 00 7f000001", BB_EPARSE, "non-minimal varint"},
        {"80 80 80 80 80 80 80 80 80 01", BB_EPARSE, "overlong varint"},
        {"ff ff ff ff ff ff ff ff ff ff ff", BB_EPARSE, "overlong varint"},
        {"35 05 6162", BB_ETRUNC, "/dns value of 5 bytes, 2 left"},
        {"35", BB_ETRUNC, "truncated varint in value length"},
        {"35 00", BB_EPARSE, "/dns name of 0 bytes"},
        {"35 03 612f62", BB_EPARSE, "byte 3: /dns name has byte 0x2f"},
        {"36 ff01", BB_ETRUNC, "/dns4 value of 255 bytes"},
        {"a503 02 1300", BB_EPARSE, "bad /p2p value"},
        {"a503 00", BB_EPARSE, "bad /p2p value"},
        {"a503 03 000161 00", BB_EUNSUPPORTED, "unknown protocol code 0x0"},
        {"8180c001", BB_ETRUNC, "truncated varint in site"},
        {"8180c001 80", BB_ETRUNC, "truncated varint in site"},
        {"8180c001 ffffffffffffffffff7f", BB_EPARSE, "overlong varint in site"},
        {"8180c001 ffffffffffffffffff02", BB_EPARSE, "overlong varint in site"},
        {"8180c001 8000", BB_EPARSE, "non-minimal varint in site"},
        {"8380c001 01 61", BB_EPARSE, "byte 0: /op must directly follow /component"},
        {"8280c001 01", BB_EPARSE, "byte 5: /component must be followed by /op"},
        {"8280c001 01 8180c001 01", BB_EPARSE, "/component must be followed by /op"},
        {"8280c001 01 8380c001 00", BB_EPARSE, "/op name of 0 bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t b[64];
        size_t n = from_hex(cases[i].hex, b, sizeof b);
        bb_error err = {0};
        int rc = bb_multiaddr_validate(b, n, &err);
        if (rc != cases[i].code || err.code != rc || !strstr(err.msg, cases[i].needle))
            fail_msg("case %zu \"%s\": got %s \"%s\", want %s containing \"%s\"", i,
                     cases[i].hex, bb_status_name(rc), err.msg, bb_status_name(cases[i].code),
                     cases[i].needle);
        /* every other entry point reports the same error */
        char text[256];
        assert_int_equal(bb_multiaddr_format(b, n, text, sizeof text, NULL, NULL), rc);
        size_t tl;
        assert_int_equal(bb_multiaddr_split(b, n, &tl, NULL), rc);
    }
    /* the full u64 range of /site fits in 10 bytes */
    uint8_t max[16];
    size_t n = from_hex("8180c001 ffffffffffffffffff01", max, sizeof max);
    bb_suffix s;
    assert_int_equal(bb_suffix_parse(max, n, &s, NULL), BB_OK);
    assert_true(s.site_id == UINT64_MAX);
}

static void test_truncations(void **state)
{
    (void)state;
    /* every strict prefix that cuts inside a component is ETRUNC */
    uint8_t b[BB_MULTIADDR_MAX_LEN];
    size_t n = parse_ok("/ip4/10.0.0.2/tcp/7001/p2p/" ED_ID "/component/9/op/Aggregate", b);
    bb_multiaddr_component comps[BB_MULTIADDR_MAX_COMPONENTS];
    size_t nc;
    assert_int_equal(bb_multiaddr_decode(b, n, comps, BB_MULTIADDR_MAX_COMPONENTS, &nc, NULL),
                     BB_OK);
    assert_int_equal(nc, 5);
    for (size_t cut = 1; cut < n; cut++) {
        bool boundary = false;
        for (size_t k = 0; k < nc; k++)
            boundary |= comps[k].offset == cut;
        bb_error err;
        int rc = bb_multiaddr_validate(b, cut, &err);
        if (boundary) {
            /* ends after /component without /op is a shape error, else fine */
            if (cut == comps[4].offset)
                assert_int_equal(rc, BB_EPARSE);
            else
                assert_int_equal(rc, BB_OK);
        } else {
            /* a cut inside the p2p digest makes a short length prefix, still ETRUNC */
            if (rc != BB_ETRUNC)
                fail_msg("cut %zu: %s %s", cut, bb_status_name(rc), err.msg);
        }
    }
}

static void test_binary_limits(void **state)
{
    (void)state;
    uint8_t b[BB_MULTIADDR_MAX_LEN + 16];
    bb_error err;
    /* 33 tcp components */
    for (int i = 0; i < 33; i++) {
        b[3 * i] = 0x06;
        b[3 * i + 1] = 0;
        b[3 * i + 2] = (uint8_t)i;
    }
    assert_int_equal(bb_multiaddr_validate(b, 32 * 3, &err), BB_OK);
    assert_int_equal(bb_multiaddr_validate(b, 33 * 3, &err), BB_ELIMIT);
    assert_non_null(strstr(err.msg, "byte 96: more than 32 components"));
    /* over 1024 bytes */
    assert_int_equal(bb_multiaddr_validate(b, BB_MULTIADDR_MAX_LEN + 1, &err), BB_ELIMIT);
    assert_int_equal(bb_multiaddr_validate(NULL, 3, &err), BB_EINVAL);
    /* decode into a too-small array */
    bb_multiaddr_component comps[2];
    size_t nc;
    assert_int_equal(bb_multiaddr_decode(b, 9, comps, 2, &nc, &err), BB_EFULL);
    assert_int_equal(bb_multiaddr_decode(b, 6, comps, 2, &nc, &err), BB_OK);
    assert_int_equal(nc, 2);
    /* worst-case text fits BB_MULTIADDR_TEXT_MAX: 32 x /ip4/255.255.255.255 */
    for (int i = 0; i < 32; i++) {
        b[5 * i] = 0x04;
        memset(b + 5 * i + 1, 0xff, 4);
    }
    char *text;
    assert_int_equal(bb_multiaddr_format_alloc(b, 160, &text, &err), BB_OK);
    assert_int_equal(strlen(text), 32 * 20);
    free(text);
}

/* ---- iteration, split, join ---------------------------------------------------------- */

static void test_iterate(void **state)
{
    (void)state;
    uint8_t b[BB_MULTIADDR_MAX_LEN];
    size_t n = parse_ok("/ip4/1.2.3.4/tcp/80/dns/x.y/site/9", b);
    bb_multiaddr_iter it;
    bb_multiaddr_component c;
    bool more;
    const uint64_t codes[] = {BB_MA_IP4, BB_MA_TCP, BB_MA_DNS, BB_MA_SITE};
    const size_t offsets[] = {0, 5, 8, 13};
    const size_t lens[] = {5, 3, 5, 5};
    const uint64_t nums[] = {0, 80, 0, 9};
    bb_multiaddr_iter_init(&it, b, n);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(bb_multiaddr_iter_next(&it, &c, &more, NULL), BB_OK);
        assert_true(more);
        assert_int_equal(c.code, codes[i]);
        assert_int_equal(c.offset, offsets[i]);
        assert_int_equal(c.len, lens[i]);
        assert_int_equal(c.num, nums[i]);
        assert_string_equal(c.name, bb_ma_proto_name(codes[i]));
    }
    assert_int_equal(bb_multiaddr_iter_next(&it, &c, &more, NULL), BB_OK);
    assert_false(more);
    assert_int_equal(bb_multiaddr_iter_next(&it, &c, &more, NULL), BB_OK);
    assert_false(more);
    /* values borrow the buffer */
    bb_multiaddr_component comps[BB_MULTIADDR_MAX_COMPONENTS];
    size_t nc;
    assert_int_equal(bb_multiaddr_decode(b, n, comps, BB_MULTIADDR_MAX_COMPONENTS, &nc, NULL),
                     BB_OK);
    assert_int_equal(nc, 4);
    assert_ptr_equal(comps[0].value, b + 1);
    assert_memory_equal(comps[0].value, "\x01\x02\x03\x04", 4);
    assert_int_equal(comps[2].value_len, 3);
    assert_memory_equal(comps[2].value, "x.y", 3);
    assert_null(bb_ma_proto_name(0x1234));
    assert_string_equal(bb_ma_proto_name(BB_MA_UDP), "udp");
    assert_string_equal(bb_ma_proto_name(BB_MA_P2P), "p2p");
}

static void test_split_join(void **state)
{
    (void)state;
    uint8_t full[BB_MULTIADDR_MAX_LEN], tr[BB_MULTIADDR_MAX_LEN], sfx[64], joined[BB_MULTIADDR_MAX_LEN];
    size_t fn = parse_ok("/ip4/10.0.0.2/tcp/7001/p2p/" ED_ID "/component/3/op/Aggregate", full);
    size_t tn = parse_ok("/ip4/10.0.0.2/tcp/7001/p2p/" ED_ID, tr);
    size_t sn;
    bb_error err;
    assert_int_equal(bb_suffix_component_op(3, "Aggregate", sfx, sizeof sfx, &sn, &err), BB_OK);
    size_t tlen;
    assert_int_equal(bb_multiaddr_split(full, fn, &tlen, &err), BB_OK);
    assert_int_equal(tlen, tn);
    assert_memory_equal(full, tr, tn);
    assert_int_equal(fn - tlen, sn);
    assert_memory_equal(full + tlen, sfx, sn);
    size_t jn;
    assert_int_equal(bb_multiaddr_join(tr, tn, sfx, sn, joined, sizeof joined, &jn, &err), BB_OK);
    assert_int_equal(jn, fn);
    assert_memory_equal(joined, full, fn);
    assert_int_equal(bb_multiaddr_join(tr, tn, sfx, sn, joined, jn - 1, &jn, &err), BB_EFULL);
    /* transport only, suffix only */
    assert_int_equal(bb_multiaddr_split(tr, tn, &tlen, &err), BB_OK);
    assert_int_equal(tlen, tn);
    assert_int_equal(bb_multiaddr_split(sfx, sn, &tlen, &err), BB_OK);
    assert_int_equal(tlen, 0);
    /* transport after the suffix */
    uint8_t bad[BB_MULTIADDR_MAX_LEN];
    size_t bn = parse_ok("/ip4/1.2.3.4/site/1/tcp/5", bad);
    assert_int_equal(bb_multiaddr_split(bad, bn, &tlen, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "byte 10: /tcp after the intra-node suffix"));
    /* joining two suffixes is still a valid address, but not a valid shape for parse */
    uint8_t s1[16];
    size_t s1n;
    assert_int_equal(bb_suffix_site(1, s1, sizeof s1, &s1n, &err), BB_OK);
    assert_int_equal(bb_multiaddr_join(s1, s1n, sfx, sn, joined, sizeof joined, &jn, &err), BB_OK);
    bb_suffix s;
    assert_int_equal(bb_suffix_parse(joined, jn, &s, &err), BB_EPARSE);
    /* join rejects an invalid result and oversize inputs */
    uint8_t comp_only[16];
    size_t cn = from_hex("8280c001 03", comp_only, sizeof comp_only);
    assert_int_equal(bb_multiaddr_join(tr, tn, comp_only, cn, joined, sizeof joined, &jn, &err),
                     BB_EPARSE);
    assert_non_null(strstr(err.msg, "multiaddr join"));
    assert_int_equal(bb_multiaddr_join(full, 1000, full, 100, joined, sizeof joined, &jn, &err),
                     BB_ELIMIT);
}

/* ---- suffixes ---------------------------------------------------------------------- */

static void test_suffix(void **state)
{
    (void)state;
    const uint64_t ids[] = {0, 1, 127, 128, 16383, 16384, 1ull << 32, UINT64_MAX};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        uint8_t b[32];
        size_t n;
        bb_suffix s;
        bb_error err;
        assert_int_equal(bb_suffix_site(ids[i], b, sizeof b, &n, &err), BB_OK);
        assert_true(n <= 14);
        assert_int_equal(bb_suffix_parse(b, n, &s, &err), BB_OK);
        assert_int_equal(s.kind, BB_SUFFIX_SITE);
        assert_true(s.site_id == ids[i]);
        char text[64], want[64];
        assert_int_equal(bb_multiaddr_format(b, n, text, sizeof text, NULL, &err), BB_OK);
        snprintf(want, sizeof want, "/site/%llu", (unsigned long long)ids[i]);
        assert_string_equal(text, want);

        assert_int_equal(bb_suffix_component_op(ids[i], "Train", b, sizeof b, &n, &err), BB_OK);
        assert_int_equal(bb_suffix_parse(b, n, &s, &err), BB_OK);
        assert_int_equal(s.kind, BB_SUFFIX_COMPONENT_OP);
        assert_true(s.cref == ids[i]);
        assert_string_equal(s.op, "Train");
    }
    /* suffix of a full address */
    uint8_t full[BB_MULTIADDR_MAX_LEN];
    size_t fn = parse_ok("/ip6/::1/udp/7001/site/77", full);
    bb_suffix s;
    bb_error err;
    assert_int_equal(bb_suffix_parse(full, fn, &s, &err), BB_OK);
    assert_int_equal(s.kind, BB_SUFFIX_SITE);
    assert_int_equal(s.site_id, 77);
    /* the longest op name */
    char op[BB_MULTIADDR_NAME_MAX + 2];
    memset(op, 'o', BB_MULTIADDR_NAME_MAX);
    op[BB_MULTIADDR_NAME_MAX] = '\0';
    uint8_t b[BB_MULTIADDR_MAX_LEN];
    size_t n;
    assert_int_equal(bb_suffix_component_op(5, op, b, sizeof b, &n, &err), BB_OK);
    assert_int_equal(bb_suffix_parse(b, n, &s, &err), BB_OK);
    assert_string_equal(s.op, op);
    /* errors */
    fn = parse_ok("/ip4/1.2.3.4/tcp/1", full);
    assert_int_equal(bb_suffix_parse(full, fn, &s, &err), BB_ENOTFOUND);
    fn = parse_ok("/site/1/site/2", full);
    assert_int_equal(bb_suffix_parse(full, fn, &s, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "suffix must be /site/<id> or"));
    /* a bare /site (the fast path) with a non-minimal, overlong or cut id */
    uint8_t odd[16];
    size_t on = from_hex("8180c001 8100", odd, sizeof odd);
    assert_int_not_equal(bb_suffix_parse(odd, on, &s, &err), BB_OK);
    on = from_hex("8180c001 ffffffffffffffffff02", odd, sizeof odd);
    assert_int_not_equal(bb_suffix_parse(odd, on, &s, &err), BB_OK);
    on = from_hex("8180c001 ff", odd, sizeof odd);
    assert_int_not_equal(bb_suffix_parse(odd, on, &s, &err), BB_OK);
    on = from_hex("8180c001 05", odd, sizeof odd);
    assert_int_equal(bb_suffix_parse(odd, on, &s, &err), BB_OK);
    assert_int_equal(s.site_id, 5);
    op[BB_MULTIADDR_NAME_MAX] = 'o';
    op[BB_MULTIADDR_NAME_MAX + 1] = '\0';
    assert_int_equal(bb_suffix_component_op(5, op, b, sizeof b, &n, &err), BB_EINVAL);
    assert_int_equal(bb_suffix_component_op(5, "", b, sizeof b, &n, &err), BB_EINVAL);
    assert_int_equal(bb_suffix_component_op(5, "a/b", b, sizeof b, &n, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "offset 1"));
    assert_int_equal(bb_suffix_component_op(5, "tab\t", b, sizeof b, &n, &err), BB_EINVAL);
    assert_int_equal(bb_suffix_component_op(5, NULL, b, sizeof b, &n, &err), BB_EINVAL);
    assert_int_equal(bb_suffix_component_op(5, "Op", b, 5, &n, &err), BB_EFULL);
    assert_int_equal(bb_suffix_site(UINT64_MAX, b, 13, &n, &err), BB_EFULL);
    assert_int_equal(bb_suffix_site(UINT64_MAX, b, 14, &n, &err), BB_OK);
}

/* ---- transports ----------------------------------------------------------------------- */

static void test_sockaddr(void **state)
{
    (void)state;
    uint8_t b[BB_MULTIADDR_MAX_LEN];
    size_t n = parse_ok("/ip4/127.0.0.1/tcp/7001/p2p/" ED_ID "/site/3", b);
    struct sockaddr_storage ss;
    socklen_t sl;
    bb_ma_proto proto;
    bb_error err;
    assert_int_equal(bb_multiaddr_to_sockaddr(b, n, &proto, &ss, &sl, &err), BB_OK);
    assert_int_equal(proto, BB_MA_TCP);
    assert_int_equal(sl, sizeof(struct sockaddr_in));
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    assert_int_equal(sin->sin_family, AF_INET);
    assert_int_equal(ntohs(sin->sin_port), 7001);
    assert_int_equal(ntohl(sin->sin_addr.s_addr), 0x7f000001);

    n = parse_ok("/ip6/2001:db8::7/udp/9", b);
    assert_int_equal(bb_multiaddr_to_sockaddr(b, n, &proto, &ss, &sl, &err), BB_OK);
    assert_int_equal(proto, BB_MA_UDP);
    assert_int_equal(sl, sizeof(struct sockaddr_in6));
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    assert_int_equal(sin6->sin6_family, AF_INET6);
    assert_int_equal(ntohs(sin6->sin6_port), 9);
    struct in6_addr want;
    assert_int_equal(inet_pton(AF_INET6, "2001:db8::7", &want), 1);
    assert_memory_equal(&sin6->sin6_addr, &want, 16);
    /* and back */
    uint8_t back[64];
    size_t bn;
    assert_int_equal(bb_multiaddr_from_sockaddr((struct sockaddr *)&ss, sl, BB_MA_UDP, back,
                                                sizeof back, &bn, &err),
                     BB_OK);
    assert_int_equal(bn, n);
    assert_memory_equal(back, b, n);
    assert_int_equal(bb_multiaddr_from_sockaddr((struct sockaddr *)&ss, sl, BB_MA_UDP, back, 20,
                                                &bn, &err),
                     BB_EFULL);

    /* unusable as a transport */
    const char *no[] = {"/dns4/example.com/tcp/80", "/site/1", "/ip4/1.2.3.4",
                        "/ip4/1.2.3.4/site/2", "/tcp/80/ip4/1.2.3.4", "/p2p/" ED_ID};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        n = parse_ok(no[i], b);
        assert_int_equal(bb_multiaddr_to_sockaddr(b, n, &proto, &ss, &sl, &err), BB_EUNSUPPORTED);
    }
    /* bad sockaddrs */
    struct sockaddr_storage un = {0};
    un.ss_family = AF_UNIX;
    assert_int_equal(bb_multiaddr_from_sockaddr((struct sockaddr *)&un, sizeof un, BB_MA_TCP,
                                                back, sizeof back, &bn, &err),
                     BB_EUNSUPPORTED);
    sin->sin_family = AF_INET;
    assert_int_equal(bb_multiaddr_from_sockaddr((struct sockaddr *)&ss, 4, BB_MA_TCP, back,
                                                sizeof back, &bn, &err),
                     BB_EINVAL);
    assert_int_equal(bb_multiaddr_from_sockaddr((struct sockaddr *)&ss, sizeof ss, BB_MA_IP4,
                                                back, sizeof back, &bn, &err),
                     BB_EINVAL);
    bb_ma_transport t = {.proto = BB_MA_TCP, .family = AF_UNIX};
    assert_int_equal(bb_ma_transport_to_sockaddr(&t, &ss, &sl, &err), BB_EINVAL);
    assert_int_equal(bb_ma_transport_encode(&t, back, sizeof back, &bn, &err), BB_EINVAL);

    /* endpoints: an IP transport, or a name to resolve with its family */
    bb_ma_endpoint ep;
    n = parse_ok("/dns4/seed.example/tcp/7000/p2p/" ED_ID, b);
    assert_int_equal(bb_multiaddr_endpoint(b, n, &ep, &err), BB_OK);
    assert_true(ep.is_name);
    assert_string_equal(ep.name, "seed.example");
    assert_int_equal(ep.family, AF_INET);
    assert_int_equal(ep.proto, BB_MA_TCP);
    assert_int_equal(ep.port, 7000);
    n = parse_ok("/dns6/h/udp/9", b);
    assert_int_equal(bb_multiaddr_endpoint(b, n, &ep, &err), BB_OK);
    assert_true(ep.is_name && ep.family == AF_INET6 && ep.proto == BB_MA_UDP && ep.port == 9);
    n = parse_ok("/dns/h/tcp/1", b);
    assert_int_equal(bb_multiaddr_endpoint(b, n, &ep, &err), BB_OK);
    assert_int_equal(ep.family, AF_UNSPEC);
    n = parse_ok("/ip4/10.0.0.2/tcp/7001", b);
    assert_int_equal(bb_multiaddr_endpoint(b, n, &ep, &err), BB_OK);
    assert_false(ep.is_name);
    assert_int_equal(ep.ip.family, AF_INET);
    assert_int_equal(ep.ip.port, 7001);
    assert_int_equal(ep.port, 7001);
    const char *not_endpoints[] = {"/dns4/h", "/site/1", "/tcp/80/dns/h", "/p2p/" ED_ID};
    for (size_t i = 0; i < sizeof not_endpoints / sizeof *not_endpoints; i++) {
        n = parse_ok(not_endpoints[i], b);
        assert_int_equal(bb_multiaddr_endpoint(b, n, &ep, &err), BB_EUNSUPPORTED);
    }
    assert_non_null(strstr(err.msg, "/dns"));
}

static void test_real_socket(void **state)
{
    (void)state;
    /* bind from a multiaddr, read the bound address back as a multiaddr */
    uint8_t b[64];
    size_t n = parse_ok("/ip4/127.0.0.1/udp/0", b);
    struct sockaddr_storage ss;
    socklen_t sl;
    bb_ma_proto proto;
    assert_int_equal(bb_multiaddr_to_sockaddr(b, n, &proto, &ss, &sl, NULL), BB_OK);
    int fd = socket(ss.ss_family, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&ss, sl), 0);
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&got, &gl), 0);
    close(fd);
    uint8_t back[64];
    size_t bn;
    assert_int_equal(bb_multiaddr_from_sockaddr((struct sockaddr *)&got, gl, BB_MA_UDP, back,
                                                sizeof back, &bn, NULL),
                     BB_OK);
    char text[128];
    assert_int_equal(bb_multiaddr_format(back, bn, text, sizeof text, NULL, NULL), BB_OK);
    assert_int_equal(strncmp(text, "/ip4/127.0.0.1/udp/", 19), 0);
    bb_ma_transport t;
    assert_int_equal(bb_multiaddr_transport(back, bn, &t, NULL), BB_OK);
    assert_true(t.port != 0);
    char want[64];
    snprintf(want, sizeof want, "/ip4/127.0.0.1/udp/%u", t.port);
    assert_string_equal(text, want);
}

static void test_pick(void **state)
{
    (void)state;
    static uint8_t bufs[6][BB_MULTIADDR_MAX_LEN];
    const char *texts[] = {"/dns4/example.com/tcp/80", "/ip4/10.0.0.1/udp/5000",
                           "/ip6/::1/tcp/7001/p2p/" ED_ID, "/ip4/10.0.0.2/tcp/7002/site/4",
                           "/ip6/::2/udp/7003"};
    bb_multiaddr_ref refs[7];
    refs[0].data = (const uint8_t *)"\x05\x05\x05";
    refs[0].len = 3; /* garbage: skipped */
    for (size_t i = 0; i < 5; i++) {
        refs[i + 1].len = parse_ok(texts[i], bufs[i]);
        refs[i + 1].data = bufs[i];
    }
    refs[6].data = NULL;
    refs[6].len = 4;
    size_t idx = 99;
    bb_ma_transport t;
    bb_error err;
    assert_int_equal(bb_multiaddr_pick(refs, 7, BB_MA_TCP, BB_MA_FAMILY_ANY, &idx, &t, &err), BB_OK);
    assert_int_equal(idx, 3);
    assert_int_equal(t.family, AF_INET6);
    assert_int_equal(t.port, 7001);
    assert_int_equal(bb_multiaddr_pick(refs, 7, BB_MA_TCP, BB_MA_FAMILY_IP4, &idx, &t, &err), BB_OK);
    assert_int_equal(idx, 4);
    assert_int_equal(t.port, 7002);
    assert_int_equal(bb_multiaddr_pick(refs, 7, BB_MA_UDP, BB_MA_FAMILY_ANY, &idx, &t, &err), BB_OK);
    assert_int_equal(idx, 2);
    assert_int_equal(bb_multiaddr_pick(refs, 7, BB_MA_UDP, BB_MA_FAMILY_IP6, &idx, NULL, &err),
                     BB_OK);
    assert_int_equal(idx, 5);
    assert_int_equal(bb_multiaddr_pick(refs, 2, BB_MA_TCP, BB_MA_FAMILY_ANY, &idx, &t, &err),
                     BB_ENOTFOUND);
    assert_non_null(strstr(err.msg, "none of 2 addresses"));
    assert_int_equal(bb_multiaddr_pick(refs, 7, BB_MA_TCP, 0, &idx, &t, &err), BB_ENOTFOUND);
    assert_int_equal(bb_multiaddr_pick(NULL, 0, BB_MA_TCP, BB_MA_FAMILY_ANY, &idx, &t, &err),
                     BB_ENOTFOUND);
    assert_int_equal(bb_multiaddr_pick(refs, 7, BB_MA_IP4, BB_MA_FAMILY_ANY, &idx, &t, &err),
                     BB_EINVAL);
}

/* ---- fuzz ------------------------------------------------------------------------------ */

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* Exercise every reader on b[0..n); if valid, text must round-trip exactly. */
static void poke(const uint8_t *b, size_t n)
{
    bb_error err;
    int rc = bb_multiaddr_validate(b, n, &err);
    char text[BB_MULTIADDR_TEXT_MAX + 1];
    size_t tl;
    int frc = bb_multiaddr_format(b, n, text, sizeof text, &tl, NULL);
    assert_int_equal(frc, rc);
    size_t split;
    bb_suffix s;
    bb_ma_transport t;
    (void)bb_multiaddr_split(b, n, &split, NULL);
    (void)bb_suffix_parse(b, n, &s, NULL);
    (void)bb_multiaddr_transport(b, n, &t, NULL);
    bb_multiaddr_iter it;
    bb_multiaddr_component c;
    bool more = true;
    bb_multiaddr_iter_init(&it, b, n);
    for (int i = 0; more && i < 64; i++)
        if (bb_multiaddr_iter_next(&it, &c, &more, NULL) != BB_OK)
            break;
    if (rc == BB_OK) {
        assert_int_equal(strlen(text), tl);
        uint8_t back[BB_MULTIADDR_MAX_LEN];
        size_t bn;
        if (bb_multiaddr_parse(text, back, sizeof back, &bn, &err) != BB_OK)
            fail_msg("re-parse of \"%s\": %s", text, err.msg);
        assert_int_equal(bn, n);
        assert_memory_equal(back, b, n);
    } else {
        assert_int_equal(err.code, rc);
        assert_true(strlen(err.msg) > 0);
    }
}

static void test_fuzz_binary(void **state)
{
    (void)state;
    /* fully random */
    static const uint8_t interesting[] = {0x04, 0x06, 0x29, 0x35, 0x36, 0x37, 0x91, 0x02,
                                          0xa5, 0x03, 0x81, 0x82, 0x83, 0x80, 0xc0, 0x01,
                                          0x00, 0xff, 0x7f, 0x26, 0x24, 0x08, 0x12, 0x20};
    for (int iter = 0; iter < 50000; iter++) {
        uint8_t b[96];
        size_t n = rnd() % sizeof b;
        for (size_t i = 0; i < n; i++)
            b[i] = rnd() % 2 ? (uint8_t)rnd() : interesting[rnd() % sizeof interesting];
        poke(b, n);
    }
    /* mutations of valid addresses */
    const char *seeds[] = {
        "/ip4/127.0.0.1/tcp/7001",
        "/ip6/::1/udp/7001/p2p/" ED_ID "/site/5",
        "/dns/example.com/tcp/443/p2p/" SHA_ID,
        "/ip4/10.0.0.2/udp/1/component/300/op/Aggregate",
        "/site/18446744073709551615",
    };
    for (int iter = 0; iter < 50000; iter++) {
        uint8_t b[BB_MULTIADDR_MAX_LEN + 8];
        size_t n = parse_ok(seeds[rnd() % 5], b);
        int muts = 1 + (int)(rnd() % 3);
        for (int m = 0; m < muts && n > 0; m++) {
            switch (rnd() % 5) {
            case 0: b[rnd() % n] = (uint8_t)rnd(); break;
            case 1: b[rnd() % n] ^= (uint8_t)(1u << (rnd() % 8)); break;
            case 2: n = rnd() % n; break;
            case 3: /* insert */
                if (n < sizeof b - 1) {
                    size_t at = rnd() % (n + 1);
                    memmove(b + at + 1, b + at, n - at);
                    b[at] = interesting[rnd() % sizeof interesting];
                    n++;
                }
                break;
            default: /* delete */ {
                size_t at = rnd() % n;
                memmove(b + at, b + at + 1, n - at - 1);
                n--;
            }
            }
        }
        poke(b, n);
    }
}

static void test_fuzz_text(void **state)
{
    (void)state;
    static const char *tokens[] = {"/", "/", "/", "ip4", "ip6", "tcp", "udp", "dns", "dns4",
                                   "p2p", "ipfs", "site", "component", "op", "1.2.3.4", "::1",
                                   "::", "80", "65535", "65536", "0", "00", "example.com",
                                   ED_ID, SHA_ID, "Sum", "a b", "%", "\x01", "18446744073709551615",
                                   "18446744073709551616", "-", ".", "fe80::1"};
    const size_t nt = sizeof tokens / sizeof tokens[0];
    static const struct shaped {
        const char *name;
        const char *values[3];
    } shapes[] = {
        {"ip4", {"1.2.3.4", "0.0.0.0", "255.255.255.255"}},
        {"ip6", {"::1", "2001:db8::5", "::ffff:10.0.0.1"}},
        {"tcp", {"0", "7001", "65535"}},
        {"udp", {"1", "443", "65535"}},
        {"dns", {"example.com", "a", "x-y.z"}},
        {"dns6", {"h", "host.lan", "q"}},
        {"p2p", {ED_ID, SHA_ID, ED_ID}},
        {"site", {"0", "128", "18446744073709551615"}},
        {"component", {"3", "0", "99"}},
        {"op", {"Sum", "Aggregate", "x.y:z"}},
    };
    const size_t nshapes = sizeof shapes / sizeof shapes[0];
    size_t n_ok = 0;
    for (int iter = 0; iter < 50000; iter++) {
        char text[512];
        size_t pos = 0;
        int parts = (int)(rnd() % 12);
        if (iter % 2) {
            /* structured: /name/value pairs, values mostly of the right kind */
            for (int i = 0; i < parts % 6; i++) {
                const struct shaped *sh = &shapes[rnd() % nshapes];
                const char *v = rnd() % 8 ? sh->values[rnd() % 3] : tokens[rnd() % nt];
                int w = snprintf(text + pos, sizeof text - pos, "/%s/%s", sh->name, v);
                if (w < 0 || (size_t)w >= sizeof text - pos)
                    break;
                pos += (size_t)w;
            }
        } else {
            for (int i = 0; i < parts; i++) {
                const char *tk = tokens[rnd() % nt];
                size_t tlen = strlen(tk);
                if (pos + tlen >= sizeof text)
                    break;
                memcpy(text + pos, tk, tlen);
                pos += tlen;
            }
        }
        text[pos] = '\0';
        uint8_t b[BB_MULTIADDR_MAX_LEN];
        size_t n;
        bb_error err;
        int rc = bb_multiaddr_parse(text, b, sizeof b, &n, &err);
        if (rc == BB_OK) {
            n_ok++;
            poke(b, n);
            /* canonical text parses to the same bytes */
            char canon[BB_MULTIADDR_TEXT_MAX + 1];
            assert_int_equal(bb_multiaddr_format(b, n, canon, sizeof canon, NULL, NULL), BB_OK);
            uint8_t b2[BB_MULTIADDR_MAX_LEN];
            size_t n2;
            assert_int_equal(bb_multiaddr_parse(canon, b2, sizeof b2, &n2, NULL), BB_OK);
            assert_int_equal(n2, n);
            assert_memory_equal(b2, b, n);
        } else {
            assert_int_equal(err.code, rc);
            assert_non_null(strstr(err.msg, "multiaddr"));
        }
    }
    assert_true(n_ok > 5000); /* the round-trip property was really exercised */
}

/* ---- unsigned varints ----------------------------------------------------- */

static void test_uvarint_roundtrip(void **state)
{
    (void)state;
    const uint64_t values[] = {0, 1, 127, 128, 300, 16383, 16384, (1ull << 35) + 7,
                               (1ull << 63) - 1, UINT64_MAX};
    const size_t sizes[] = {1, 1, 1, 2, 2, 2, 3, 6, 9, 10};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        uint8_t buf[BB_UVARINT_MAX_U64];
        assert_int_equal(bb_uvarint_size(values[i]), sizes[i]);
        size_t n = bb_uvarint_encode(values[i], buf);
        assert_int_equal(n, sizes[i]);
        uint64_t v = 0;
        size_t used = 0;
        assert_int_equal(bb_uvarint_decode(buf, n, BB_UVARINT_MAX_U64, &v, &used), BB_UVARINT_OK);
        assert_true(v == values[i]);
        assert_int_equal(used, n);
        /* one byte short is truncated, never a value */
        assert_int_equal(bb_uvarint_decode(buf, n - 1, BB_UVARINT_MAX_U64, &v, &used),
                         BB_UVARINT_TRUNC);
    }
    /* 300 is ac 02 (the multiformats example) */
    uint8_t b[2];
    assert_int_equal(bb_uvarint_encode(300, b), 2);
    assert_int_equal(b[0], 0xac);
    assert_int_equal(b[1], 0x02);
}

static void test_uvarint_rejects(void **state)
{
    (void)state;
    uint64_t v = 42;
    size_t used = 0;
    const uint8_t nonminimal[] = {0x81, 0x00};
    assert_int_equal(bb_uvarint_decode(nonminimal, 2, BB_UVARINT_MAX_SPEC, &v, &used),
                     BB_UVARINT_NONMINIMAL);
    const uint8_t ten[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    /* a full u64 needs 10 bytes: over the multiformats 9-byte cap, fine as u64 */
    assert_int_equal(bb_uvarint_decode(ten, 10, BB_UVARINT_MAX_SPEC, &v, &used),
                     BB_UVARINT_OVERLONG);
    assert_int_equal(bb_uvarint_decode(ten, 10, BB_UVARINT_MAX_U64, &v, &used), BB_UVARINT_OK);
    assert_true(v == UINT64_MAX);
    const uint8_t overflow[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    assert_int_equal(bb_uvarint_decode(overflow, 10, BB_UVARINT_MAX_U64, &v, &used),
                     BB_UVARINT_OVERLONG);
    assert_int_equal(bb_uvarint_decode(ten, 0, BB_UVARINT_MAX_U64, &v, &used), BB_UVARINT_TRUNC);
    assert_string_equal(bb_uvarint_rc_str(BB_UVARINT_OK), "ok");
    assert_string_equal(bb_uvarint_rc_str(BB_UVARINT_TRUNC), "truncated varint");
    assert_string_equal(bb_uvarint_rc_str(BB_UVARINT_OVERLONG), "overlong varint");
    assert_string_equal(bb_uvarint_rc_str(BB_UVARINT_NONMINIMAL), "non-minimal varint");
}

/* Fixed-width little-endian integers: byte order, width, any alignment. */
static void test_le_roundtrip(void **state)
{
    (void)state;
    uint8_t b[11] = {0};
    bb_le_put(b + 1, 0x0102030405060708ull, 8); /* odd address on purpose */
    assert_int_equal(b[1], 0x08);
    assert_int_equal(b[8], 0x01);
    assert_true(bb_le_get(b + 1, 8) == 0x0102030405060708ull);
    assert_true(bb_le_get(b + 1, 4) == 0x05060708u);
    bb_le_put(b, 0xaabbccddu, 2); /* only the low bytes */
    assert_int_equal(b[0], 0xdd);
    assert_int_equal(b[1], 0xcc);
    assert_int_equal(b[2], 0x07); /* untouched: the third byte of the first put */
    assert_true(bb_le_get(b, 0) == 0);
}

/* Protobuf reading: non-minimal is fine, 10 bytes at most, and the fast
 * paths (one byte; 10 bytes left) agree with the checked one. */
static void test_uvarint_read_u64(void **state)
{
    (void)state;
    uint64_t v = 0;
    size_t used = 0;
    const uint8_t nonminimal[] = {0x81, 0x00};
    assert_int_equal(bb_uvarint_read_u64(nonminimal, 2, &v, &used), BB_UVARINT_OK);
    assert_true(v == 1 && used == 2);
    const uint8_t stamp[] = {0x80, 0xe0, 0xb1, 0xc8, 0xbd, 0xf6, 0xa1, 0xc5, 0x18, 0x07, 0x07};
    uint64_t want = 0;
    size_t want_used = 0;
    assert_int_equal(bb_uvarint_decode(stamp, sizeof stamp, BB_UVARINT_MAX_U64, &want, &want_used),
                     BB_UVARINT_OK);
    for (size_t n = 0; n <= sizeof stamp; n++) { /* every buffer length, both paths */
        bb_uvarint_rc rc = bb_uvarint_read_u64(stamp, n, &v, &used);
        if (n < want_used) {
            assert_int_equal(rc, BB_UVARINT_TRUNC);
        } else {
            assert_int_equal(rc, BB_UVARINT_OK);
            assert_true(v == want && used == want_used);
        }
    }
    const uint8_t eleven[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
    assert_int_equal(bb_uvarint_read_u64(eleven, sizeof eleven, &v, &used), BB_UVARINT_OVERLONG);
    assert_int_equal(bb_uvarint_read_u64(eleven, 9, &v, &used), BB_UVARINT_TRUNC);
    const uint8_t bit64[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    assert_int_equal(bb_uvarint_read_u64(bit64, sizeof bit64, &v, &used), BB_UVARINT_OVERLONG);
    const uint8_t one[] = {0x05};
    assert_int_equal(bb_uvarint_read_u64(one, 1, &v, &used), BB_UVARINT_OK);
    assert_true(v == 5 && used == 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uvarint_roundtrip),
        cmocka_unit_test(test_uvarint_rejects),
        cmocka_unit_test(test_uvarint_read_u64),
        cmocka_unit_test(test_le_roundtrip),
        cmocka_unit_test(test_known_encodings),
        cmocka_unit_test(test_roundtrips),
        cmocka_unit_test(test_bad_text),
        cmocka_unit_test(test_text_limits),
        cmocka_unit_test(test_bad_binary),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_binary_limits),
        cmocka_unit_test(test_iterate),
        cmocka_unit_test(test_split_join),
        cmocka_unit_test(test_suffix),
        cmocka_unit_test(test_sockaddr),
        cmocka_unit_test(test_real_socket),
        cmocka_unit_test(test_pick),
        cmocka_unit_test(test_fuzz_binary),
        cmocka_unit_test(test_fuzz_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
