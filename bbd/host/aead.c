/*
 * aead.c — ChaCha20-Poly1305 IETF on OpenSSL libcrypto (see aead.h).
 *
 * A record is sealed with one Init (nonce, and the key when it changed),
 * one Update over AD, one over the data, Final and a tag ctrl: libcrypto
 * runs its stitched ChaCha20+Poly1305 code in Update, so every byte is
 * read and written once.
 *
 * Messages under BBD_AEAD_SMALL bytes go to libsodium's implementation of
 * the same cipher instead: libcrypto's EVP calls cost ~100 ns more per
 * message than libsodium's one call, which is what a 64-byte round trip
 * (four messages) notices, while from ~1 KiB libcrypto is faster (it is 2x
 * at 2 KiB, 3x at 16 KiB). Both compute RFC 8439 exactly, so which one
 * ran is invisible on the wire; test_secure_aead checks they agree on
 * either side of the threshold.
 */
#include "bbd/host/aead.h"

#include <limits.h>
#include <string.h>

#include <openssl/evp.h>
#include <sodium.h>

typedef struct aead_ctx {
    EVP_CIPHER_CTX *ctx;
    uint8_t key[BBD_AEAD_KEYLEN];
    bool keyed;
} aead_ctx;

static _Thread_local aead_ctx sealer, opener;

/* The context of one direction, keyed with key and set to nonce. */
static EVP_CIPHER_CTX *ready(aead_ctx *a, bool seal, const uint8_t *key, const uint8_t *nonce)
{
    if (!a->ctx) {
        a->ctx = EVP_CIPHER_CTX_new();
        if (!a->ctx || EVP_CipherInit_ex(a->ctx, EVP_chacha20_poly1305(), NULL, NULL, NULL,
                                         seal ? 1 : 0) != 1) {
            EVP_CIPHER_CTX_free(a->ctx);
            a->ctx = NULL;
            return NULL;
        }
        a->keyed = false;
    }
    bool same = a->keyed && sodium_memcmp(a->key, key, BBD_AEAD_KEYLEN) == 0;
    if (EVP_CipherInit_ex(a->ctx, NULL, NULL, same ? NULL : key, nonce, seal ? 1 : 0) != 1) {
        a->keyed = false;
        return NULL;
    }
    if (!same) {
        memcpy(a->key, key, BBD_AEAD_KEYLEN);
        a->keyed = true;
    }
    return a->ctx;
}

/* Run data[0..n) through ctx into out (n may exceed INT_MAX in principle:
 * the EVP interface takes int lengths, so in pieces). */
static bool update(EVP_CIPHER_CTX *ctx, uint8_t *out, const uint8_t *data, size_t n)
{
    while (n) {
        int piece = n > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)n, got = 0;
        if (EVP_CipherUpdate(ctx, out, &got, data, piece) != 1 || got != piece)
            return false;
        out += piece;
        data += piece;
        n -= (size_t)piece;
    }
    return true;
}

static bool add_ad(EVP_CIPHER_CTX *ctx, const uint8_t *ad, size_t adlen)
{
    int got = 0;
    return adlen == 0 || (adlen <= INT_MAX &&
                          EVP_CipherUpdate(ctx, NULL, &got, ad, (int)adlen) == 1);
}

bool bbd_aead_seal(const uint8_t key[BBD_AEAD_KEYLEN], const uint8_t nonce[BBD_AEAD_NONCELEN],
                   const uint8_t *ad, size_t adlen, const uint8_t *pt, size_t n, uint8_t *out)
{
    if (n < BBD_AEAD_SMALL)
        return crypto_aead_chacha20poly1305_ietf_encrypt_detached(out, out + n, NULL, pt, n, ad,
                                                                  adlen, NULL, nonce, key) == 0;
    EVP_CIPHER_CTX *ctx = ready(&sealer, true, key, nonce);
    int fin = 0;
    return ctx && add_ad(ctx, ad, adlen) && update(ctx, out, pt, n) &&
           EVP_EncryptFinal_ex(ctx, out + n, &fin) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, BBD_AEAD_TAGLEN, out + n) == 1;
}

bool bbd_aead_open(const uint8_t key[BBD_AEAD_KEYLEN], const uint8_t nonce[BBD_AEAD_NONCELEN],
                   const uint8_t *ad, size_t adlen, const uint8_t *ct, size_t n, uint8_t *out)
{
    /* the tag is read before out (which may be ct) is written over */
    if (n < BBD_AEAD_SMALL)
        return crypto_aead_chacha20poly1305_ietf_decrypt_detached(out, NULL, ct, n, ct + n, ad,
                                                                  adlen, nonce, key) == 0;
    uint8_t tag[BBD_AEAD_TAGLEN];
    memcpy(tag, ct + n, sizeof tag);
    EVP_CIPHER_CTX *ctx = ready(&opener, false, key, nonce);
    int fin = 0;
    return ctx && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, BBD_AEAD_TAGLEN, tag) == 1 &&
           add_ad(ctx, ad, adlen) && update(ctx, out, ct, n) &&
           EVP_DecryptFinal_ex(ctx, out + n, &fin) == 1;
}

void bbd_aead_thread_wipe(void)
{
    aead_ctx *both[2] = {&sealer, &opener};
    for (int i = 0; i < 2; i++) {
        EVP_CIPHER_CTX_free(both[i]->ctx);
        sodium_memzero(both[i], sizeof *both[i]);
    }
}
