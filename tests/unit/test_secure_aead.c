/*
 * test_secure_aead.c — bbd/host/aead.c: its two implementations (libsodium
 * below BBD_AEAD_SMALL, libcrypto from it) produce libsodium's bytes
 * exactly on either side of the threshold and up to a full Noise message,
 * in place and out of place; a flipped bit fails to open; the per-thread
 * context's key cache follows a change of key (alternating keys must not
 * seal with a stale one).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bbd/host/aead.h"
#include "bbd/host/noise.h"

static const size_t SIZES[] = {0, 1, 63, BBD_AEAD_SMALL - 1, BBD_AEAD_SMALL, BBD_AEAD_SMALL + 1,
                               4096, 65536 - 17, BBD_NOISE_MAX_PLAINTEXT};

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed + i * 31u);
}

/* What libsodium alone makes of pt under key/nonce/ad. */
static void reference(const uint8_t *key, const uint8_t *nonce, const uint8_t *ad, size_t adlen,
                      const uint8_t *pt, size_t n, uint8_t *out)
{
    assert_int_equal(crypto_aead_chacha20poly1305_ietf_encrypt_detached(
                         out, out + n, NULL, pt, n, ad, adlen, NULL, nonce, key),
                     0);
}

static void test_matches_libsodium(void **state)
{
    (void)state;
    assert_true(sodium_init() >= 0);
    size_t cap = BBD_NOISE_MAX_PLAINTEXT + BBD_AEAD_TAGLEN;
    uint8_t *pt = malloc(cap), *got = malloc(cap), *want = malloc(cap);
    assert_non_null(pt);
    assert_non_null(got);
    assert_non_null(want);
    uint8_t key[2][BBD_AEAD_KEYLEN], nonce[BBD_AEAD_NONCELEN], ad[7] = "record";
    fill(key[0], sizeof key[0], 1);
    fill(key[1], sizeof key[1], 2);
    for (size_t s = 0; s < sizeof SIZES / sizeof SIZES[0]; s++) {
        size_t n = SIZES[s];
        for (int k = 0; k < 4; k++) { /* keys 0 1 0 1: the cache must follow */
            fill(pt, n, (uint8_t)(s + k));
            fill(nonce, sizeof nonce, (uint8_t)(7 * s + k));
            size_t adlen = k % 2 ? sizeof ad : 0;
            reference(key[k % 2], nonce, ad, adlen, pt, n, want);
            bbd_aead_seal(key[k % 2], nonce, ad, adlen, pt, n, got);
            assert_memory_equal(got, want, n + BBD_AEAD_TAGLEN);
            memcpy(got, pt, n); /* in place */
            bbd_aead_seal(key[k % 2], nonce, ad, adlen, got, n, got);
            assert_memory_equal(got, want, n + BBD_AEAD_TAGLEN);
            assert_true(bbd_aead_open(key[k % 2], nonce, ad, adlen, want, n, got));
            if (n)
                assert_memory_equal(got, pt, n);
            assert_true(bbd_aead_open(key[k % 2], nonce, ad, adlen, got == want ? got : want, n,
                                      want)); /* in place */
            if (n)
                assert_memory_equal(want, pt, n);
            /* a flipped bit in the data or the tag, or the other key, fails */
            reference(key[k % 2], nonce, ad, adlen, pt, n, want);
            want[n / 2] ^= 0x10;
            assert_false(bbd_aead_open(key[k % 2], nonce, ad, adlen, want, n, got));
            want[n / 2] ^= 0x10;
            assert_false(bbd_aead_open(key[1 - k % 2], nonce, ad, adlen, want, n, got));
            assert_true(bbd_aead_open(key[k % 2], nonce, ad, adlen, want, n, got));
        }
    }
    free(pt);
    free(got);
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_libsodium),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
