/* Unit tests for node keys, PeerIds, base58btc and key files (bb/peerid.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bb/peerid.h"

static size_t from_hex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = strlen(hex) / 2;
    assert_true(n <= cap);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
    return n;
}

/* libp2p/specs peer-ids test vector (Ed25519): the PrivateKey Data is
 * seed || pk, the PublicKey protobuf 08 01 12 20 || pk. */
#define SPEC_SEED "7e0830617c4a7de83925dfb2694556b12936c477a0e1feb2e148ec9da60fee7d"
#define SPEC_PK "1ed1e8fae2c4a144b8be8fd4b47bf3d3b34b871c3cacf6010f0e42d474fce27e"
#define SPEC_PUBKEY_PROTO "08011220" SPEC_PK
#define SPEC_PRIVKEY_PROTO "08011240" SPEC_SEED SPEC_PK
#define SPEC_PEER_ID "12D3KooWBtg3aaRMjxwedh83aGiUkwSxDwUZkzuJcfaqUmo7R3pq"
/* The spec's example sha2-256 PeerId. */
#define SPEC_SHA256_ID "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N"

/* ---- base58 -------------------------------------------------------------- */

static void b58_check(const uint8_t *in, size_t n, const char *want)
{
    char out[BB_BASE58_MAX_TEXT + 1];
    size_t len = 999;
    assert_int_equal(bb_base58_encode(in, n, out, sizeof out, &len, NULL), BB_OK);
    assert_string_equal(out, want);
    assert_int_equal(len, strlen(want));
    uint8_t back[BB_BASE58_MAX_BYTES];
    size_t bn = 999;
    assert_int_equal(bb_base58_decode(want, strlen(want), back, sizeof back, &bn, NULL), BB_OK);
    assert_int_equal(bn, n);
    if (n)
        assert_memory_equal(back, in, n);
}

static void test_base58_vectors(void **state)
{
    (void)state;
    b58_check((const uint8_t *)"", 0, "");
    b58_check((const uint8_t *)"hello world", 11, "StV1DL6CwTryKyV");
    const uint8_t z1[] = {0};
    b58_check(z1, 1, "1");
    const uint8_t z3[] = {0, 0, 1};
    b58_check(z3, 3, "112");
    const uint8_t zz[] = {0, 0, 0, 0};
    b58_check(zz, 4, "1111");
    const uint8_t v58[] = {58};
    b58_check(v58, 1, "21");
    const uint8_t ff[] = {0xff, 0xff};
    b58_check(ff, 2, "LUv");
    uint8_t mh[64];
    size_t n = from_hex("12209dff3b17d74cf4d38a50d8b6383e92d181a10395a5e73a726dcccbd21bf6f0b9", mh,
                        sizeof mh);
    b58_check(mh, n, SPEC_SHA256_ID);
}

static void test_base58_errors(void **state)
{
    (void)state;
    uint8_t out[64];
    size_t n;
    bb_error err;
    const char *bad[] = {"0", "O", "I", "l", "abc+", "ab c", "StV1DL6CwTryKyV\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(bb_base58_decode(bad[i], strlen(bad[i]), out, sizeof out, &n, &err),
                         BB_EPARSE);
        assert_int_equal(err.code, BB_EPARSE);
    }
    assert_int_equal(bb_base58_decode("abc0d", 5, out, sizeof out, &n, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "'0' at offset 3"));
    assert_int_equal(bb_base58_decode("ab\x01", 3, out, sizeof out, &n, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "0x01 at offset 2"));
    /* buffer too small */
    assert_int_equal(bb_base58_decode("StV1DL6CwTryKyV", 15, out, 10, &n, &err), BB_EFULL);
    char small[8];
    assert_int_equal(bb_base58_encode((const uint8_t *)"hello world", 11, small, sizeof small,
                                      NULL, &err),
                     BB_EFULL);
    /* exactly enough: 15 chars + NUL */
    char exact[16];
    assert_int_equal(bb_base58_encode((const uint8_t *)"hello world", 11, exact, sizeof exact,
                                      NULL, &err),
                     BB_OK);
    /* limits */
    static uint8_t big[BB_BASE58_MAX_BYTES + 1];
    static char text[BB_BASE58_MAX_TEXT * 2];
    assert_int_equal(bb_base58_encode(big, sizeof big, text, sizeof text, NULL, &err), BB_ELIMIT);
    memset(text, '2', BB_BASE58_MAX_TEXT + 1);
    static uint8_t dec[1024];
    assert_int_equal(bb_base58_decode(text, BB_BASE58_MAX_TEXT + 1, dec, sizeof dec, &n, &err),
                     BB_ELIMIT);
    /* largest allowed input works: 256 x 0xff */
    memset(big, 0xff, BB_BASE58_MAX_BYTES);
    size_t tl;
    assert_int_equal(bb_base58_encode(big, BB_BASE58_MAX_BYTES, text, sizeof text, &tl, &err),
                     BB_OK);
    assert_true(tl <= BB_BASE58_MAX_TEXT);
    assert_int_equal(bb_base58_decode(text, tl, dec, sizeof dec, &n, &err), BB_OK);
    assert_int_equal(n, BB_BASE58_MAX_BYTES);
    assert_memory_equal(dec, big, n);
    /* the largest text the limit admits ("zzz...") decodes without overflow */
    memset(text, 'z', BB_BASE58_MAX_TEXT);
    assert_int_equal(bb_base58_decode(text, BB_BASE58_MAX_TEXT, dec, sizeof dec, &n, &err), BB_OK);
    assert_true(n <= BB_BASE58_MAX_TEXT * 733 / 1000 + 1);
}

/* ---- spec vector and PeerIds --------------------------------------------- */

static void test_spec_vector(void **state)
{
    (void)state;
    uint8_t seed[32], pk[32], proto[64], priv[128];
    from_hex(SPEC_SEED, seed, sizeof seed);
    from_hex(SPEC_PK, pk, sizeof pk);
    assert_int_equal(from_hex(SPEC_PUBKEY_PROTO, proto, sizeof proto), BB_PUBKEY_PROTO_LEN);
    assert_int_equal(from_hex(SPEC_PRIVKEY_PROTO, priv, sizeof priv), BB_KEYFILE_LEN);

    bb_keypair kp;
    bb_peerid id;
    bb_error err;
    assert_int_equal(bb_peerid_from_seed(seed, &kp, &id, &err), BB_OK);
    assert_memory_equal(kp.pk, pk, 32);          /* libsodium derives the spec's pk */
    assert_memory_equal(kp.sk, priv + 4, 64);    /* sk layout = PrivateKey Data */
    uint8_t enc[BB_PUBKEY_PROTO_LEN];
    bb_pubkey_proto_encode(kp.pk, enc);
    assert_memory_equal(enc, proto, sizeof enc);

    /* identity multihash: 00 24 <protobuf> */
    assert_int_equal(id.len, 38);
    assert_int_equal(id.bytes[0], 0x00);
    assert_int_equal(id.bytes[1], 36);
    assert_memory_equal(id.bytes + 2, proto, 36);

    char text[BB_PEERID_TEXT_MAX];
    assert_int_equal(bb_peerid_to_text(&id, text, sizeof text, &err), BB_OK);
    assert_string_equal(text, SPEC_PEER_ID);

    bb_peerid back;
    assert_int_equal(bb_peerid_from_text(SPEC_PEER_ID, &back, &err), BB_OK);
    assert_true(bb_peerid_equal(&id, &back));
    uint8_t got_pk[32];
    assert_int_equal(bb_peerid_pubkey(&back, got_pk, &err), BB_OK);
    assert_memory_equal(got_pk, pk, 32);
    assert_true(bb_peerid_matches_pubkey(&back, pk));
    /* NULL kp is allowed */
    bb_peerid id2;
    assert_int_equal(bb_peerid_from_seed(seed, NULL, &id2, &err), BB_OK);
    assert_true(bb_peerid_equal(&id, &id2));
    bb_keypair_wipe(&kp);
    uint8_t zero[64] = {0};
    assert_memory_equal(kp.sk, zero, 64);
}

static void test_keygen_roundtrip(void **state)
{
    (void)state;
    for (int i = 0; i < 50; i++) {
        bb_keypair kp;
        bb_peerid id, back;
        bb_error err;
        assert_int_equal(bb_keypair_generate(&kp, &err), BB_OK);
        bb_peerid_from_pubkey(kp.pk, &id);
        assert_int_equal(bb_peerid_validate(id.bytes, id.len, &err), BB_OK);
        char text[BB_PEERID_TEXT_MAX];
        assert_int_equal(bb_peerid_to_text(&id, text, sizeof text, &err), BB_OK);
        assert_int_equal(strncmp(text, "12D3KooW", 8), 0);
        assert_int_equal(strlen(text), 52);
        assert_int_equal(bb_peerid_from_text(text, &back, &err), BB_OK);
        assert_true(bb_peerid_equal(&id, &back));
        assert_true(bb_peerid_matches_pubkey(&back, kp.pk));
        bb_keypair_wipe(&kp);
    }
}

static void test_seed_determinism(void **state)
{
    (void)state;
    uint8_t s1[32] = {1}, s2[32] = {2};
    bb_peerid a, b, c;
    assert_int_equal(bb_peerid_from_seed(s1, NULL, &a, NULL), BB_OK);
    assert_int_equal(bb_peerid_from_seed(s1, NULL, &b, NULL), BB_OK);
    assert_int_equal(bb_peerid_from_seed(s2, NULL, &c, NULL), BB_OK);
    assert_true(bb_peerid_equal(&a, &b));
    assert_false(bb_peerid_equal(&a, &c));
}

static void test_sha256_peerid(void **state)
{
    (void)state;
    bb_peerid id;
    bb_error err;
    assert_int_equal(bb_peerid_from_text(SPEC_SHA256_ID, &id, &err), BB_OK);
    assert_int_equal(id.len, 34);
    assert_int_equal(id.bytes[0], 0x12);
    assert_int_equal(id.bytes[1], 0x20);
    char text[BB_PEERID_TEXT_MAX];
    assert_int_equal(bb_peerid_to_text(&id, text, sizeof text, &err), BB_OK);
    assert_string_equal(text, SPEC_SHA256_ID);
    uint8_t pk[32];
    assert_int_equal(bb_peerid_pubkey(&id, pk, &err), BB_EUNSUPPORTED);
    uint8_t sig[64] = {0};
    assert_int_equal(bb_peerid_verify(&id, "x", 1, sig, &err), BB_EUNSUPPORTED);
}

static void test_peerid_validate_errors(void **state)
{
    (void)state;
    bb_error err;
    uint8_t b[80] = {0};
    assert_int_equal(bb_peerid_validate(b, 0, &err), BB_ETRUNC);
    /* identity with an empty digest */
    b[0] = 0x00;
    b[1] = 0x00;
    assert_int_equal(bb_peerid_validate(b, 2, &err), BB_EPARSE);
    /* identity longer than 42 */
    b[1] = 43;
    memset(b + 2, 7, 43);
    assert_int_equal(bb_peerid_validate(b, 45, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "identity digest of 43 bytes"));
    /* identity 42 is fine */
    b[1] = 42;
    assert_int_equal(bb_peerid_validate(b, 44, &err), BB_OK);
    /* truncated digest */
    assert_int_equal(bb_peerid_validate(b, 30, &err), BB_ETRUNC);
    /* trailing bytes */
    b[1] = 10;
    assert_int_equal(bb_peerid_validate(b, 13, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "trailing"));
    /* sha2-256 needs a 32-byte digest */
    b[0] = 0x12;
    b[1] = 31;
    assert_int_equal(bb_peerid_validate(b, 33, &err), BB_EPARSE);
    b[1] = 32;
    assert_int_equal(bb_peerid_validate(b, 34, &err), BB_OK);
    /* other hash functions */
    b[0] = 0x13; /* sha2-512 */
    assert_int_equal(bb_peerid_validate(b, 34, &err), BB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "0x13"));
    /* bad varints */
    b[0] = 0x80;
    assert_int_equal(bb_peerid_validate(b, 1, &err), BB_ETRUNC);
    b[0] = 0x80;
    b[1] = 0x00; /* non-minimal zero */
    assert_int_equal(bb_peerid_validate(b, 2, &err), BB_EPARSE);
    memset(b, 0xff, 12);
    assert_int_equal(bb_peerid_validate(b, 12, &err), BB_EPARSE);
    /* from_bytes copies only valid ids */
    bb_peerid id;
    assert_int_equal(bb_peerid_from_bytes(b, 12, &id, &err), BB_EPARSE);
}

static void test_peerid_text_errors(void **state)
{
    (void)state;
    bb_peerid id;
    bb_error err;
    assert_int_equal(bb_peerid_from_text("", &id, &err), BB_EPARSE);
    assert_int_equal(bb_peerid_from_text("12D3KooW0", &id, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "12D3KooW0"));
    assert_non_null(strstr(err.msg, "offset 8"));
    /* valid base58 that is not a multihash we accept ("hello world") */
    assert_int_equal(bb_peerid_from_text("StV1DL6CwTryKyV", &id, &err), BB_EUNSUPPORTED);
    /* truncated PeerId */
    char cut[40];
    memcpy(cut, SPEC_PEER_ID, 30);
    cut[30] = '\0';
    assert_int_not_equal(bb_peerid_from_text(cut, &id, &err), BB_OK);
    /* too long */
    char longer[200];
    memset(longer, 'z', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_int_equal(bb_peerid_from_text(longer, &id, &err), BB_ELIMIT);
    /* decodes to more bytes than any PeerId */
    memset(longer, 'z', 64);
    longer[64] = '\0';
    assert_int_equal(bb_peerid_from_text(longer, &id, &err), BB_EPARSE);
    /* output buffer too small */
    assert_int_equal(bb_peerid_from_text(SPEC_PEER_ID, &id, &err), BB_OK);
    char small[20];
    assert_int_equal(bb_peerid_to_text(&id, small, sizeof small, &err), BB_EFULL);
    /* an invalid struct is refused */
    id.len = 200;
    char text[BB_PEERID_TEXT_MAX];
    assert_int_equal(bb_peerid_to_text(&id, text, sizeof text, &err), BB_EINVAL);
}

static void test_pubkey_proto(void **state)
{
    (void)state;
    uint8_t proto[64], pk[32];
    bb_error err;
    from_hex(SPEC_PUBKEY_PROTO, proto, sizeof proto);
    assert_int_equal(bb_pubkey_proto_decode(proto, 36, pk, &err), BB_OK);
    assert_int_equal(bb_pubkey_proto_decode(proto, 35, pk, &err), BB_ETRUNC);
    assert_int_equal(bb_pubkey_proto_decode(proto, 2, pk, &err), BB_ETRUNC);
    uint8_t rsa[] = {0x08, 0x00, 0x12, 0x03, 1, 2, 3};
    assert_int_equal(bb_pubkey_proto_decode(rsa, sizeof rsa, pk, &err), BB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "RSA"));
    uint8_t secp[] = {0x08, 0x02, 0x12, 0x01, 1};
    assert_int_equal(bb_pubkey_proto_decode(secp, sizeof secp, pk, &err), BB_EUNSUPPORTED);
    proto[2] = 0x1a; /* wrong field */
    assert_int_equal(bb_pubkey_proto_decode(proto, 36, pk, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "byte 2"));
    assert_int_equal(bb_pubkey_proto_decode(proto, 0, pk, &err), BB_ETRUNC);
    /* a PeerId inlining a non-Ed25519 key has no Ed25519 pubkey */
    bb_peerid id = {.len = 9, .bytes = {0x00, 0x07, 0x08, 0x00, 0x12, 0x03, 1, 2, 3}};
    assert_int_equal(bb_peerid_validate(id.bytes, id.len, &err), BB_OK);
    assert_int_equal(bb_peerid_pubkey(&id, pk, &err), BB_EUNSUPPORTED);
}

static void test_sign_verify(void **state)
{
    (void)state;
    uint8_t seed[32];
    from_hex(SPEC_SEED, seed, sizeof seed);
    bb_keypair kp;
    bb_peerid id;
    bb_error err;
    assert_int_equal(bb_peerid_from_seed(seed, &kp, &id, &err), BB_OK);
    const char msg[] = "noise handshake payload";
    uint8_t sig[64];
    assert_int_equal(bb_keypair_sign(&kp, msg, sizeof msg, sig, &err), BB_OK);
    assert_int_equal(bb_ed25519_verify(kp.pk, msg, sizeof msg, sig, &err), BB_OK);
    assert_int_equal(bb_peerid_verify(&id, msg, sizeof msg, sig, &err), BB_OK);
    /* Ed25519 is deterministic */
    uint8_t sig2[64];
    assert_int_equal(bb_keypair_sign(&kp, msg, sizeof msg, sig2, &err), BB_OK);
    assert_memory_equal(sig, sig2, 64);
    sig[10] ^= 1;
    assert_int_equal(bb_ed25519_verify(kp.pk, msg, sizeof msg, sig, &err), BB_EVALIDATE);
    assert_int_equal(bb_peerid_verify(&id, msg, sizeof msg, sig, &err), BB_EVALIDATE);
    sig[10] ^= 1;
    assert_int_equal(bb_ed25519_verify(kp.pk, msg, sizeof msg - 1, sig, &err), BB_EVALIDATE);
    /* another key does not verify */
    bb_keypair other;
    bb_peerid oid;
    assert_int_equal(bb_keypair_generate(&other, &err), BB_OK);
    bb_peerid_from_pubkey(other.pk, &oid);
    assert_int_equal(bb_peerid_verify(&oid, msg, sizeof msg, sig, &err), BB_EVALIDATE);
    /* empty message */
    assert_int_equal(bb_keypair_sign(&kp, NULL, 0, sig, &err), BB_OK);
    assert_int_equal(bb_ed25519_verify(kp.pk, NULL, 0, sig, &err), BB_OK);
}

/* ---- key files ------------------------------------------------------------ */

static char tmpdir[64];

static int setup_tmpdir(void **state)
{
    (void)state;
    strcpy(tmpdir, "/tmp/bb_test_peerid_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmpdir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const uint8_t *b, size_t n, mode_t mode)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static void test_keyfile(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/node.key", tmpdir);
    bb_keypair kp, back;
    bb_error err;
    assert_int_equal(bb_keypair_generate(&kp, &err), BB_OK);
    assert_int_equal(bb_keyfile_save(path, &kp, &err), BB_OK);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_size, BB_KEYFILE_LEN);
    assert_int_equal(bb_keyfile_load(path, &back, &err), BB_OK);
    assert_memory_equal(&kp, &back, sizeof kp);
    /* never overwrites an identity */
    assert_int_equal(bb_keyfile_save(path, &kp, &err), BB_EEXIST);
    assert_non_null(strstr(err.msg, path));

    /* world- or group-readable files are refused */
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(bb_keyfile_load(path, &back, &err), BB_ECONFIG);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "0644"));
    assert_non_null(strstr(err.msg, "chmod 600"));
    assert_int_equal(chmod(path, 0640), 0);
    assert_int_equal(bb_keyfile_load(path, &back, &err), BB_ECONFIG);
    assert_int_equal(chmod(path, 0604), 0);
    assert_int_equal(bb_keyfile_load(path, &back, &err), BB_ECONFIG);
    assert_int_equal(chmod(path, 0400), 0);
    assert_int_equal(bb_keyfile_load(path, &back, &err), BB_OK);

    /* missing file, directory */
    char missing[160];
    snprintf(missing, sizeof missing, "%s/nope.key", tmpdir);
    assert_int_equal(bb_keyfile_load(missing, &back, &err), BB_ENOTFOUND);
    assert_int_equal(chmod(tmpdir, 0700), 0);
    assert_int_equal(bb_keyfile_load(tmpdir, &back, &err), BB_ECONFIG);
    char nodir[160];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir.key", tmpdir);
    assert_int_equal(bb_keyfile_save(nodir, &kp, &err), BB_EIO);
}

static void test_keyfile_spec_and_corrupt(void **state)
{
    (void)state;
    char path[128];
    uint8_t priv[BB_KEYFILE_LEN + 8] = {0};
    bb_keypair kp;
    bb_error err;
    /* a libp2p PrivateKey file from the spec vector loads */
    snprintf(path, sizeof path, "%s/spec.key", tmpdir);
    from_hex(SPEC_PRIVKEY_PROTO, priv, sizeof priv);
    write_file(path, priv, BB_KEYFILE_LEN, 0600);
    assert_int_equal(bb_keyfile_load(path, &kp, &err), BB_OK);
    bb_peerid id;
    bb_peerid_from_pubkey(kp.pk, &id);
    char text[BB_PEERID_TEXT_MAX];
    assert_int_equal(bb_peerid_to_text(&id, text, sizeof text, &err), BB_OK);
    assert_string_equal(text, SPEC_PEER_ID);

    /* wrong length */
    snprintf(path, sizeof path, "%s/short.key", tmpdir);
    write_file(path, priv, 67, 0600);
    assert_int_equal(bb_keyfile_load(path, &kp, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "67 bytes"));
    snprintf(path, sizeof path, "%s/long.key", tmpdir);
    write_file(path, priv, BB_KEYFILE_LEN + 1, 0600);
    assert_int_equal(bb_keyfile_load(path, &kp, &err), BB_EPARSE);
    snprintf(path, sizeof path, "%s/empty.key", tmpdir);
    write_file(path, priv, 0, 0600);
    assert_int_equal(bb_keyfile_load(path, &kp, &err), BB_EPARSE);
    /* wrong key type */
    snprintf(path, sizeof path, "%s/rsa.key", tmpdir);
    uint8_t bad[BB_KEYFILE_LEN];
    memcpy(bad, priv, sizeof bad);
    bad[1] = 0x00;
    write_file(path, bad, sizeof bad, 0600);
    assert_int_equal(bb_keyfile_load(path, &kp, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "byte 1"));
    /* public half does not match the seed */
    snprintf(path, sizeof path, "%s/mismatch.key", tmpdir);
    memcpy(bad, priv, sizeof bad);
    bad[BB_KEYFILE_LEN - 1] ^= 0x01;
    write_file(path, bad, sizeof bad, 0600);
    assert_int_equal(bb_keyfile_load(path, &kp, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "does not match"));
}

static void test_keyfile_load_or_create(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/auto.key", tmpdir);
    bb_keypair a, b;
    bool created = false;
    bb_error err;
    assert_int_equal(bb_keyfile_load_or_create(path, &a, &created, &err), BB_OK);
    assert_true(created);
    assert_int_equal(bb_keyfile_load_or_create(path, &b, &created, &err), BB_OK);
    assert_false(created);
    assert_memory_equal(&a, &b, sizeof a);
    /* a bad existing file is an error, not silently replaced */
    assert_int_equal(chmod(path, 0666), 0);
    assert_int_equal(bb_keyfile_load_or_create(path, &b, &created, &err), BB_ECONFIG);
}

/* ---- concurrency (sodium init once) ---------------------------------------- */

static void *keygen_thread(void *arg)
{
    bb_peerid *out = arg;
    bb_keypair kp;
    if (bb_keypair_generate(&kp, NULL) != BB_OK)
        return NULL;
    bb_peerid_from_pubkey(kp.pk, out);
    return out;
}

static void test_threads(void **state)
{
    (void)state;
    pthread_t th[8];
    bb_peerid ids[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&th[i], NULL, keygen_thread, &ids[i]), 0);
    for (int i = 0; i < 8; i++) {
        void *r;
        assert_int_equal(pthread_join(th[i], &r), 0);
        assert_ptr_equal(r, &ids[i]);
    }
    for (int i = 0; i < 8; i++)
        for (int j = i + 1; j < 8; j++)
            assert_false(bb_peerid_equal(&ids[i], &ids[j]));
}

/* ---- fuzz ----------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static void test_fuzz(void **state)
{
    (void)state;
    static const char alpha[] = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0OIl+/ \x80";
    for (int iter = 0; iter < 20000; iter++) {
        /* random bytes: base58 round trip, PeerId validation never crashes */
        uint8_t b[80];
        size_t n = rnd() % sizeof b;
        for (size_t i = 0; i < n; i++)
            b[i] = (uint8_t)rnd();
        if (rnd() % 4 == 0 && n > 0)
            b[0] = 0; /* leading zeros */
        char text[BB_BASE58_MAX_TEXT + 1];
        size_t tl;
        assert_int_equal(bb_base58_encode(b, n, text, sizeof text, &tl, NULL), BB_OK);
        uint8_t back[128];
        size_t bn;
        assert_int_equal(bb_base58_decode(text, tl, back, sizeof back, &bn, NULL), BB_OK);
        assert_int_equal(bn, n);
        if (n)
            assert_memory_equal(back, b, n);
        bb_peerid id;
        bb_error err;
        int rc = bb_peerid_from_bytes(b, n, &id, &err);
        if (rc == BB_OK) {
            char t2[BB_PEERID_TEXT_MAX];
            bb_peerid id2;
            assert_int_equal(bb_peerid_to_text(&id, t2, sizeof t2, NULL), BB_OK);
            assert_int_equal(bb_peerid_from_text(t2, &id2, NULL), BB_OK);
            assert_true(bb_peerid_equal(&id, &id2));
        } else {
            assert_int_equal(err.code, rc);
        }

        /* random text: decode either fails cleanly or re-encodes to itself */
        char s[72];
        size_t sn = rnd() % (sizeof s - 1);
        for (size_t i = 0; i < sn; i++)
            s[i] = alpha[rnd() % (sizeof alpha - 1)];
        s[sn] = '\0';
        rc = bb_base58_decode(s, sn, back, sizeof back, &bn, NULL);
        if (rc == BB_OK) {
            assert_int_equal(bb_base58_encode(back, bn, text, sizeof text, &tl, NULL), BB_OK);
            assert_string_equal(text, s);
        }
        (void)bb_peerid_from_text(s, &id, NULL);
    }
    /* mutated valid PeerIds */
    uint8_t seed[32] = {9};
    bb_peerid good;
    assert_int_equal(bb_peerid_from_seed(seed, NULL, &good, NULL), BB_OK);
    char gtext[BB_PEERID_TEXT_MAX];
    assert_int_equal(bb_peerid_to_text(&good, gtext, sizeof gtext, NULL), BB_OK);
    for (int iter = 0; iter < 20000; iter++) {
        uint8_t m[BB_PEERID_MAX_LEN];
        memcpy(m, good.bytes, good.len);
        size_t n = good.len;
        int k = (int)(rnd() % 3);
        if (k == 0)
            m[rnd() % n] = (uint8_t)rnd();
        else if (k == 1)
            n = rnd() % n;
        else
            m[rnd() % 2] ^= (uint8_t)(1u << (rnd() % 8));
        bb_peerid id;
        (void)bb_peerid_from_bytes(m, n, &id, NULL);
        char t[BB_PEERID_TEXT_MAX];
        memcpy(t, gtext, sizeof t);
        t[rnd() % strlen(gtext)] = alpha[rnd() % (sizeof alpha - 1)];
        (void)bb_peerid_from_text(t, &id, NULL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base58_vectors),
        cmocka_unit_test(test_base58_errors),
        cmocka_unit_test(test_spec_vector),
        cmocka_unit_test(test_keygen_roundtrip),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_sha256_peerid),
        cmocka_unit_test(test_peerid_validate_errors),
        cmocka_unit_test(test_peerid_text_errors),
        cmocka_unit_test(test_pubkey_proto),
        cmocka_unit_test(test_sign_verify),
        cmocka_unit_test(test_keyfile),
        cmocka_unit_test(test_keyfile_spec_and_corrupt),
        cmocka_unit_test(test_keyfile_load_or_create),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_fuzz),
    };
    return cmocka_run_group_tests(tests, setup_tmpdir, teardown_tmpdir);
}
