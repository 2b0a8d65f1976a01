/*
 * test_secure_sign.c — signed artifacts (libbbir/src/model_sign.c): a
 * signature verifies over exactly the bytes before the first signature
 * entry; any changed byte, any field written after a signature, another
 * signer, no signature at all is refused by name; several signers; the
 * signed file still loads as an ONNX model.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bb/meta.h"
#include "bb/io.h"
#include "bb/model_io.h"
#include "bb/model_sign.h"

#define ARTIFACT "testdata/ping_pong.onnx"

static bb_keypair key(uint8_t seed_byte, bb_peerid *id)
{
    uint8_t seed[BB_ED25519_SEED_LEN];
    memset(seed, seed_byte, sizeof seed);
    bb_keypair kp;
    assert_int_equal(bb_peerid_from_seed(seed, &kp, id, NULL), BB_OK);
    return kp;
}

static uint8_t *artifact(size_t *len)
{
    uint8_t *b = NULL;
    bb_error err = {0};
    if (bb_read_file(ARTIFACT, BB_MODEL_MAX_BYTES, &b, len, &err) != BB_OK)
        fail_msg("%s (run from the repository root)", err.msg);
    return b;
}

static void expect(int rc, int want, const bb_error *err, const char *needle)
{
    if (rc != want || !strstr(err->msg, needle))
        fail_msg("got %d '%s', wanted %d with '%s'", rc, err->msg, want, needle);
}

static void test_secure_sign_and_verify(void **state)
{
    (void)state;
    size_t n, sn, count, signed_len;
    uint8_t *raw = artifact(&n), *s1, *s2;
    bb_peerid a, b, c;
    bb_keypair ka = key(1, &a), kb = key(2, &b);
    key(3, &c);
    bb_error err = {0};
    bb_peerid who;
    /* unsigned */
    expect(bb_model_verify(raw, n, &a, 1, &who, &err), BB_EVALIDATE, &err, "not signed");
    /* signed by a: verifies for a, not for c (named) */
    assert_int_equal(bb_model_sign(raw, n, &ka, &s1, &sn, &err), BB_OK);
    assert_memory_equal(s1, raw, n); /* the original bytes, then the signature */
    assert_int_equal(bb_model_verify(s1, sn, &a, 1, &who, &err), BB_OK);
    assert_true(bb_peerid_equal(&who, &a));
    expect(bb_model_verify(s1, sn, &c, 1, &who, &err), BB_EVALIDATE, &err,
           "signed only by keys not required");
    /* a second signer signs the same bytes; both verify; a re-sign replaces */
    size_t n2;
    assert_int_equal(bb_model_sign(s1, sn, &kb, &s2, &n2, &err), BB_OK);
    bb_model_signature sigs[BB_MODEL_MAX_SIGNATURES];
    assert_int_equal(bb_model_signatures(s2, n2, sigs, BB_MODEL_MAX_SIGNATURES, &count,
                                         &signed_len, &err),
                     BB_OK);
    assert_int_equal(count, 2);
    assert_int_equal(signed_len, n);
    assert_int_equal(bb_model_verify(s2, n2, &b, 1, &who, &err), BB_OK);
    assert_int_equal(bb_model_verify(s2, n2, &a, 1, &who, &err), BB_OK);
    uint8_t *s3;
    size_t n3;
    assert_int_equal(bb_model_sign(s2, n2, &ka, &s3, &n3, &err), BB_OK);
    assert_int_equal(n3, n2);
    assert_int_equal(bb_model_signatures(s3, n3, sigs, BB_MODEL_MAX_SIGNATURES, &count,
                                         &signed_len, &err),
                     BB_OK);
    assert_int_equal(count, 2);
    assert_true(bb_peerid_equal(&sigs[1].signer, &a)); /* moved last, made anew */
    /* written and read back as a file, the bytes are the same: it verifies */
    char path[] = "/tmp/bb-sign-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(bb_model_write_file(path, s1, sn, &err), BB_OK);
    uint8_t *back = NULL;
    size_t bn = 0;
    assert_int_equal(bb_read_file(path, BB_MODEL_MAX_BYTES, &back, &bn, &err), BB_OK);
    unlink(path);
    assert_int_equal(bb_model_verify(back, bn, &a, 1, &who, &err), BB_OK);
    free(back);
    /* the signed file is still a model; the signature shows in its metadata */
    bb_model *m = NULL;
    assert_int_equal(bb_model_load_mem(s1, sn, "signed", &m, &err), BB_OK);
    assert_non_null(bb_kv_get(&m->metadata, BB_META_SIGNATURE));
    bb_model_free(m);
    free(s2);
    free(s3);
    /* any byte of the signed part changed: the signature does not verify */
    for (size_t at = 0; at < n; at += n / 37 + 1) {
        s1[at] ^= 0x40;
        int rc = bb_model_verify(s1, sn, &a, 1, &who, &err);
        if (rc == BB_OK)
            fail_msg("byte %zu changed, still verified", at);
        s1[at] ^= 0x40;
    }
    expect(bb_model_verify(s1, sn - 1, &a, 1, &who, &err), BB_ETRUNC, &err, "signature");
    /* a field after the signature (what a tool re-saving the model does) */
    uint8_t *more = malloc(sn + 3);
    memcpy(more, s1, sn);
    more[sn] = 0x08, more[sn + 1] = 0x07; /* ir_version = 7 */
    expect(bb_model_verify(more, sn + 2, &a, 1, &who, &err), BB_EPARSE, &err,
           "a field follows the signatures");
    expect(bb_model_sign(more, sn + 2, &kb, &s2, &n2, &err), BB_EPARSE, &err, "follows");
    free(more);
    /* a signature entry whose value is not "<PeerId> <base64>" */
    static const char junk[] = "\x72\x25\x0a\x1b" BB_META_SIGNATURE "\x12\x06" "abcdef";
    uint8_t *bad = malloc(n + sizeof junk);
    memcpy(bad, raw, n);
    memcpy(bad + n, junk, sizeof junk - 1);
    expect(bb_model_verify(bad, n + sizeof junk - 1, &a, 1, &who, &err), BB_EPARSE, &err,
           "not \"<PeerId> <base64 signature>\"");
    free(bad);
    bb_keypair_wipe(&ka);
    bb_keypair_wipe(&kb);
    free(s1);
    free(raw);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secure_sign_and_verify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
