/*
 * test_secure_aead.c — bbd/host/aead.c's per-thread libcrypto contexts keep
 * the last key and re-key only when it changes: messages sealed and opened
 * under alternating keys (two connections served by one thread) must each
 * use their own key, and an open that failed must not leave the context
 * unusable. That large messages are libsodium's bytes, in place, with and
 * without AD, is test_secure_noise's test_bulk_messages_match_libsodium.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include <sodium.h>

#include "bbd/host/aead.h"

enum { N = 4 * BBD_AEAD_SMALL }; /* libcrypto's side of the threshold */

static void test_alternating_keys(void **state)
{
    (void)state;
    assert_true(sodium_init() >= 0);
    static uint8_t pt[N], got[N + BBD_AEAD_TAGLEN], want[N + BBD_AEAD_TAGLEN], back[N];
    uint8_t key[2][BBD_AEAD_KEYLEN], nonce[BBD_AEAD_NONCELEN] = {0};
    randombytes_buf(key, sizeof key);
    randombytes_buf(pt, sizeof pt);
    for (int round = 0; round < 6; round++) {
        int k = round % 2 == 0 || round == 5; /* keys 1 0 1 0 1 1 */
        nonce[4] = (uint8_t)round;
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(want, want + N, NULL, pt, N, NULL, 0,
                                                           NULL, nonce, key[k]);
        bbd_aead_seal(key[k], nonce, NULL, 0, pt, N, got);
        assert_memory_equal(got, want, sizeof got);
        /* the other key fails, and the right one still opens afterwards */
        assert_false(bbd_aead_open(key[1 - k], nonce, NULL, 0, want, N, back));
        assert_true(bbd_aead_open(key[k], nonce, NULL, 0, want, N, back));
        assert_memory_equal(back, pt, N);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alternating_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
