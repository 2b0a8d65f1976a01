/*
 * test_secure_noise.c — bbd/host/noise.c against the published test
 * vectors of Noise_XX_25519_ChaChaPoly_SHA256 (testdata/noise/: the
 * cacophony, snow and noise-c vector files' cases of that protocol), then
 * the properties the vectors do not show: a flipped bit anywhere fails,
 * turns are enforced, a failed state stays failed, explicit nonces, and
 * that large messages (sealed and opened by libcrypto, noise.c) are the
 * bytes libsodium's ChaCha20-Poly1305 gives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <sodium.h>

#include "bbd/host/noise.h"

#define VECTORS "testdata/noise/xx_25519_chachapoly_sha256.json"
#define MAX_BYTES 1024

static cJSON *load_vectors(void)
{
    FILE *f = fopen(VECTORS, "rb");
    if (!f)
        fail_msg("cannot open %s (run from the repository root)", VECTORS);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *doc = cJSON_Parse(buf);
    assert_non_null(doc);
    return doc;
}

static size_t unhex(const char *s, uint8_t *out, size_t cap)
{
    size_t n = strlen(s) / 2;
    assert_true(n <= cap && strlen(s) % 2 == 0);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(s + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
    return n;
}

static size_t field(const cJSON *v, const char *k, uint8_t *out, size_t cap)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(v, k);
    assert_true(cJSON_IsString(x));
    return unhex(x->valuestring, out, cap);
}

static void start(bbd_noise_hs *hs, const cJSON *v, bool initiator)
{
    uint8_t prologue[MAX_BYTES], s[32], e[32];
    size_t pl = field(v, "prologue", prologue, sizeof prologue);
    assert_int_equal(field(v, initiator ? "init_static" : "resp_static", s, 32), 32);
    assert_int_equal(field(v, initiator ? "init_ephemeral" : "resp_ephemeral", e, 32), 32);
    assert_int_equal(bbd_noise_hs_init(hs, initiator, prologue, pl, s, e, NULL), BB_OK);
}

/* One vector: the handshake messages byte for byte (writer) and their
 * payloads (reader), the handshake hash, then every transport message. */
static void run_vector(const cJSON *v)
{
    bbd_noise_hs ini, res;
    start(&ini, v, true);
    start(&res, v, false);
    bbd_noise_cipher tx[2], rx[2]; /* [0] initiator, [1] responder */
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(v, "messages");
    size_t i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        uint8_t payload[MAX_BYTES], want[MAX_BYTES], got[MAX_BYTES], back[MAX_BYTES];
        size_t pl = field(m, "payload", payload, sizeof payload);
        size_t wl = field(m, "ciphertext", want, sizeof want), gl = 0, bl = 0;
        bool from_initiator = i % 2 == 0;
        if (i < 3) {
            bbd_noise_hs *w = from_initiator ? &ini : &res, *r = from_initiator ? &res : &ini;
            assert_int_equal(bbd_noise_hs_write(w, payload, pl, got, sizeof got, &gl, NULL), BB_OK);
            assert_int_equal(gl, wl);
            assert_memory_equal(got, want, wl);
            assert_int_equal(bbd_noise_hs_read(r, got, gl, back, sizeof back, &bl, NULL), BB_OK);
        } else {
            if (i == 3) {
                assert_true(bbd_noise_hs_done(&ini) && bbd_noise_hs_done(&res));
                uint8_t hh[32];
                if (cJSON_GetObjectItemCaseSensitive(v, "handshake_hash")) {
                    field(v, "handshake_hash", hh, sizeof hh);
                    assert_memory_equal(bbd_noise_hs_hash(&ini), hh, 32);
                }
                assert_memory_equal(bbd_noise_hs_hash(&ini), bbd_noise_hs_hash(&res), 32);
                assert_int_equal(bbd_noise_hs_split(&ini, &tx[0], &rx[0], NULL), BB_OK);
                assert_int_equal(bbd_noise_hs_split(&res, &tx[1], &rx[1], NULL), BB_OK);
            }
            int s = from_initiator ? 0 : 1;
            assert_int_equal(bbd_noise_encrypt(&tx[s], NULL, 0, payload, pl, got), BB_OK);
            assert_int_equal(pl + BBD_NOISE_TAGLEN, wl);
            assert_memory_equal(got, want, wl);
            assert_int_equal(bbd_noise_decrypt(&rx[1 - s], NULL, 0, got, wl, back), BB_OK);
            bl = wl - BBD_NOISE_TAGLEN;
        }
        assert_int_equal(bl, pl);
        assert_memory_equal(back, payload, pl);
        i++;
    }
    assert_true(i >= 3);
}

static void test_published_vectors(void **state)
{
    (void)state;
    cJSON *doc = load_vectors();
    const cJSON *v;
    size_t n = 0;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(doc, "vectors")) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(v, "protocol_name");
        assert_string_equal(name->valuestring, BBD_NOISE_PROTOCOL);
        run_vector(v);
        n++;
    }
    assert_true(n >= 3); /* cacophony, snow, noise-c */
    cJSON_Delete(doc);
}

/* ---- properties ------------------------------------------------------------------------- */

/* A fresh handshake between random keys, up to (not including) message
 * `stop` (0..3); msgs[k] / lens[k] keep what was written. */
typedef struct pair {
    bbd_noise_hs ini, res;
    uint8_t msgs[3][256];
    size_t lens[3];
} pair;

static void pair_run(pair *p, unsigned stop)
{
    uint8_t s1[32], s2[32], pub[32], buf[256];
    bbd_noise_keypair(s1, pub, true, NULL);
    bbd_noise_keypair(s2, pub, true, NULL);
    assert_int_equal(bbd_noise_hs_init(&p->ini, true, NULL, 0, s1, NULL, NULL), BB_OK);
    assert_int_equal(bbd_noise_hs_init(&p->res, false, NULL, 0, s2, NULL, NULL), BB_OK);
    for (unsigned k = 0; k < stop; k++) {
        bbd_noise_hs *w = k % 2 ? &p->res : &p->ini, *r = k % 2 ? &p->ini : &p->res;
        size_t bl;
        assert_int_equal(bbd_noise_hs_write(w, (const uint8_t *)"hi", 2, p->msgs[k],
                                            sizeof p->msgs[k], &p->lens[k], NULL),
                         BB_OK);
        assert_int_equal(bbd_noise_hs_read(r, p->msgs[k], p->lens[k], buf, sizeof buf, &bl, NULL),
                         BB_OK);
        assert_int_equal(bl, 2);
    }
}

static void test_any_flipped_bit_fails(void **state)
{
    (void)state;
    /* messages 2 and 3 are authenticated: every bit of them counts */
    for (unsigned k = 1; k < 3; k++) {
        pair p;
        pair_run(&p, k + 1);
        for (size_t bit = 0; bit < p.lens[k] * 8; bit++) {
            pair q;
            pair_run(&q, k);
            uint8_t m[256], out[256];
            size_t ol;
            size_t wl;
            bbd_noise_hs *w = k % 2 ? &q.res : &q.ini, *r = k % 2 ? &q.ini : &q.res;
            assert_int_equal(bbd_noise_hs_write(w, (const uint8_t *)"hi", 2, m, sizeof m, &wl, NULL),
                             BB_OK);
            m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            assert_int_not_equal(bbd_noise_hs_read(r, m, wl, out, sizeof out, &ol, NULL), BB_OK);
            /* and stays failed */
            assert_int_equal(bbd_noise_hs_write(r, NULL, 0, out, sizeof out, &ol, NULL), BB_ESTATE);
            bbd_noise_hs_wipe(&q.ini);
            bbd_noise_hs_wipe(&q.res);
            if (bit > 64 && bit % 7) /* every bit of the keys, a sample of the rest */
                bit += 5;
        }
        bbd_noise_hs_wipe(&p.ini);
        bbd_noise_hs_wipe(&p.res);
    }
}

static void test_turns_and_sizes(void **state)
{
    (void)state;
    pair p;
    pair_run(&p, 0);
    uint8_t out[256];
    size_t ol;
    bb_error err = {0};
    /* the responder cannot write first, the initiator cannot read first */
    assert_int_equal(bbd_noise_hs_write(&p.res, NULL, 0, out, sizeof out, &ol, &err), BB_ESTATE);
    assert_int_equal(bbd_noise_hs_read(&p.ini, out, 32, out, sizeof out, &ol, &err), BB_ESTATE);
    /* too short a first message; too small a buffer */
    pair q;
    pair_run(&q, 0);
    assert_int_equal(bbd_noise_hs_read(&q.res, out, 31, out, sizeof out, &ol, &err), BB_EPARSE);
    assert_int_equal(bbd_noise_hs_write(&p.ini, NULL, 0, out, 31, &ol, &err), BB_EFULL);
    assert_false(bbd_noise_hs_done(&p.ini));
    bbd_noise_cipher tx, rx;
    assert_int_equal(bbd_noise_hs_split(&p.ini, &tx, &rx, &err), BB_ESTATE);
    bbd_noise_hs_wipe(&p.ini);
    bbd_noise_hs_wipe(&p.res);
    bbd_noise_hs_wipe(&q.ini);
    bbd_noise_hs_wipe(&q.res);
}

static void test_transport_nonces(void **state)
{
    (void)state;
    pair p;
    pair_run(&p, 3);
    bbd_noise_cipher itx, irx, rtx, rrx;
    assert_int_equal(bbd_noise_hs_split(&p.ini, &itx, &irx, NULL), BB_OK);
    assert_int_equal(bbd_noise_hs_split(&p.res, &rtx, &rrx, NULL), BB_OK);
    uint8_t a[64], b[64], c[64];
    /* in order: counters advance together; a replay fails (nonce moved on) */
    assert_int_equal(bbd_noise_encrypt(&itx, NULL, 0, (const uint8_t *)"one", 3, a), BB_OK);
    assert_int_equal(bbd_noise_encrypt(&itx, NULL, 0, (const uint8_t *)"two", 3, b), BB_OK);
    assert_int_equal(bbd_noise_decrypt(&rrx, NULL, 0, b, 19, c), BB_EVALIDATE); /* reordered */
    assert_int_equal(bbd_noise_decrypt(&rrx, NULL, 0, a, 19, c), BB_OK);
    assert_memory_equal(c, "one", 3);
    assert_int_equal(bbd_noise_decrypt(&rrx, NULL, 0, a, 19, c), BB_EVALIDATE); /* replayed */
    assert_int_equal(bbd_noise_decrypt(&rrx, NULL, 0, b, 19, c), BB_OK);
    /* explicit nonces: any order, the key of the direction only */
    assert_int_equal(bbd_noise_encrypt_at(&rtx, 77, NULL, 0, (const uint8_t *)"x", 1, a), BB_OK);
    assert_int_equal(bbd_noise_decrypt_at(&irx, 76, NULL, 0, a, 17, c), BB_EVALIDATE);
    assert_int_equal(bbd_noise_decrypt_at(&rrx, 77, NULL, 0, a, 17, c), BB_EVALIDATE);
    assert_int_equal(bbd_noise_decrypt_at(&irx, 77, NULL, 0, a, 17, c), BB_OK);
    assert_int_equal(c[0], 'x');
    /* in place, and the associated data counts */
    memcpy(a, "inplace", 7);
    assert_int_equal(bbd_noise_encrypt_at(&rtx, 5, (const uint8_t *)"ad", 2, a, 7, a), BB_OK);
    assert_int_equal(bbd_noise_decrypt_at(&irx, 5, (const uint8_t *)"AD", 2, a, 23, b), BB_EVALIDATE);
    assert_int_equal(bbd_noise_decrypt_at(&irx, 5, (const uint8_t *)"ad", 2, a, 23, a), BB_OK);
    assert_memory_equal(a, "inplace", 7);
    /* the reserved last nonce is never used */
    assert_int_equal(bbd_noise_encrypt_at(&rtx, UINT64_MAX, NULL, 0, a, 1, b), BB_ELIMIT);
    itx.n = UINT64_MAX;
    assert_int_equal(bbd_noise_encrypt(&itx, NULL, 0, a, 1, b), BB_ELIMIT);
    bbd_noise_cipher_wipe(&itx);
    bbd_noise_cipher_wipe(&irx);
    bbd_noise_cipher_wipe(&rtx);
    bbd_noise_cipher_wipe(&rrx);
}

/* Around and above the size where noise.c hands ChaCha20-Poly1305 to
 * libcrypto: the same bytes as libsodium's, both ways, in place or not,
 * with and without associated data; any flipped bit fails and zeroes out. */
static void test_bulk_messages_match_libsodium(void **state)
{
    (void)state;
    static const size_t sizes[] = {1, 1023, 1024, 1025, 4096, 65535 - BBD_NOISE_TAGLEN};
    enum { CAP = 65535 + BBD_NOISE_TAGLEN };
    uint8_t *pt = malloc(CAP), *ours = malloc(CAP), *theirs = malloc(CAP), *back = malloc(CAP);
    assert_true(pt && ours && theirs && back);
    bbd_noise_cipher c = {.n = 0, .has_key = true};
    randombytes_buf(c.k, sizeof c.k);
    randombytes_buf(pt, CAP);
    static const uint8_t ad[] = "associated";
    uint8_t iv[12] = {0};
    const uint64_t nonce = 0x0102030405060708u;
    for (int i = 0; i < 8; i++)
        iv[4 + i] = (uint8_t)(nonce >> (8 * i));
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        for (size_t with_ad = 0; with_ad < 2; with_ad++) {
            size_t n = sizes[k], adlen = with_ad ? sizeof ad : 0;
            const uint8_t *a = with_ad ? ad : NULL;
            assert_int_equal(bbd_noise_encrypt_at(&c, nonce, a, adlen, pt, n, ours), BB_OK);
            crypto_aead_chacha20poly1305_ietf_encrypt_detached(theirs, theirs + n, NULL, pt, n, a,
                                                               adlen, NULL, iv, c.k);
            assert_memory_equal(ours, theirs, n + BBD_NOISE_TAGLEN);
            /* opened in place */
            assert_int_equal(bbd_noise_decrypt_at(&c, nonce, a, adlen, theirs,
                                                  n + BBD_NOISE_TAGLEN, theirs), BB_OK);
            assert_memory_equal(theirs, pt, n);
            /* a flipped bit in the text, the tag or the associated data */
            size_t at[3] = {n / 2, n + BBD_NOISE_TAGLEN - 1, 0};
            for (int f = 0; f < 3; f++) {
                memcpy(back, ours, n + BBD_NOISE_TAGLEN);
                uint8_t bad_ad[sizeof ad];
                memcpy(bad_ad, ad, sizeof ad);
                if (f < 2)
                    back[at[f]] ^= 0x10;
                else
                    bad_ad[0] ^= 0x10;
                const uint8_t *use_ad = f < 2 ? a : bad_ad;
                size_t use_len = f < 2 ? adlen : sizeof ad;
                assert_int_equal(bbd_noise_decrypt_at(&c, nonce, use_ad, use_len, back,
                                                      n + BBD_NOISE_TAGLEN, back), BB_EVALIDATE);
                for (size_t j = 0; j < n; j++)
                    assert_int_equal(back[j], 0);
            }
        }
    }
    free(pt);
    free(ours);
    free(theirs);
    free(back);
}

/* A peer's ephemeral key of low order (all zeros) gives no shared secret. */
static void test_low_order_key_refused(void **state)
{
    (void)state;
    pair p;
    pair_run(&p, 0);
    uint8_t zero[32] = {0}, out[256];
    size_t ol;
    assert_int_equal(bbd_noise_hs_read(&p.res, zero, 32, out, sizeof out, &ol, NULL), BB_OK);
    assert_int_equal(bbd_noise_hs_write(&p.res, NULL, 0, out, sizeof out, &ol, NULL), BB_EVALIDATE);
    bbd_noise_hs_wipe(&p.ini);
    bbd_noise_hs_wipe(&p.res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_vectors),
        cmocka_unit_test(test_any_flipped_bit_fails),
        cmocka_unit_test(test_turns_and_sizes),
        cmocka_unit_test(test_transport_nonces),
        cmocka_unit_test(test_bulk_messages_match_libsodium),
        cmocka_unit_test(test_low_order_key_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
