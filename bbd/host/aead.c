/*
 * aead.c — ChaCha20-Poly1305 IETF on libcrypto and libsodium (see aead.h).
 *
 * A large message is sealed with one Init (the nonce, and the key only
 * when it differs from the context's last one: re-initialising with the
 * cipher and key on every message cost ~270 ns more per call here, a
 * third of a 1 KiB seal), one Update over AD, one over the data, Final
 * and a tag ctrl; libcrypto runs its stitched ChaCha20+Poly1305 code in
 * Update, so every byte is read and written once.
 *
 * Messages under BBD_AEAD_SMALL bytes go to libsodium's implementation of
 * the same cipher: libcrypto's EVP sequence costs more per call than
 * libsodium's whole small seal, while from ~1 KiB libcrypto is faster (2x
 * at 2 KiB, 3x at 16 KiB and up). Both compute RFC 8439 exactly, so which
 * one ran is invisible on the wire (test_secure_aead checks they agree on
 * either side of the threshold); libsodium also stands in when libcrypto
 * cannot run (out of memory).
 *
 * Contexts: one per thread and direction (the transport may run on several
 * threads in tests and tools, each its own), made on first use and freed,
 * with the key they cached wiped, when the thread ends (a pthread key's
 * destructor).
 */
#include "bbd/host/aead.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <sodium.h>

typedef struct aead_ctx {
    EVP_CIPHER_CTX *ctx;
    uint8_t key[BBD_AEAD_KEYLEN];
    bool keyed;
} aead_ctx;

typedef struct aead_ctxs {
    aead_ctx seal, open;
} aead_ctxs;

static pthread_key_t ctxs_key;
static pthread_once_t ctxs_once = PTHREAD_ONCE_INIT;
static bool ctxs_key_ok;

static void ctxs_free(void *p)
{
    aead_ctxs *c = p;
    EVP_CIPHER_CTX_free(c->seal.ctx);
    EVP_CIPHER_CTX_free(c->open.ctx);
    sodium_memzero(c, sizeof *c);
    free(c);
}

static void ctxs_key_init(void)
{
    ctxs_key_ok = pthread_key_create(&ctxs_key, ctxs_free) == 0;
}

/* This thread's context of one direction, set to key and nonce; NULL when
 * libcrypto cannot run (the caller then uses libsodium). */
static EVP_CIPHER_CTX *ready(bool seal, const uint8_t *key, const uint8_t *nonce)
{
    pthread_once(&ctxs_once, ctxs_key_init);
    if (!ctxs_key_ok)
        return NULL;
    aead_ctxs *all = pthread_getspecific(ctxs_key);
    if (!all) {
        if (!(all = calloc(1, sizeof *all)))
            return NULL;
        if (pthread_setspecific(ctxs_key, all) != 0) {
            free(all);
            return NULL;
        }
    }
    aead_ctx *a = seal ? &all->seal : &all->open;
    if (!a->ctx) {
        a->ctx = EVP_CIPHER_CTX_new();
        if (!a->ctx || EVP_CipherInit_ex(a->ctx, EVP_chacha20_poly1305(), NULL, NULL, NULL,
                                         seal ? 1 : 0) != 1) {
            EVP_CIPHER_CTX_free(a->ctx);
            a->ctx = NULL;
            return NULL;
        }
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

/* False only when libcrypto fails to run: the caller seals with libsodium
 * (the same bytes). */
static bool bulk_seal(const uint8_t *key, const uint8_t *nonce, const uint8_t *ad, size_t adlen,
                      const uint8_t *pt, size_t n, uint8_t *out)
{
    int len = 0;
    if (n > INT_MAX || adlen > INT_MAX)
        return false;
    EVP_CIPHER_CTX *x = ready(true, key, nonce);
    return x && (adlen == 0 || EVP_EncryptUpdate(x, NULL, &len, ad, (int)adlen) == 1) &&
           EVP_EncryptUpdate(x, out, &len, pt, (int)n) == 1 &&
           EVP_EncryptFinal_ex(x, out + len, &len) == 1 &&
           EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, BBD_AEAD_TAGLEN, out + n) == 1;
}

/* 1 opened, 0 not (authentication failed, or libcrypto failed after it
 * began writing out, which may be ct), -1 libcrypto could not start (out
 * untouched: the caller opens with libsodium). */
static int bulk_open(const uint8_t *key, const uint8_t *nonce, const uint8_t *ad, size_t adlen,
                     const uint8_t *ct, size_t n, uint8_t *out)
{
    uint8_t tag[BBD_AEAD_TAGLEN];
    int len = 0;
    memcpy(tag, ct + n, sizeof tag); /* out may be ct: the tag must outlive the pass */
    if (n > INT_MAX || adlen > INT_MAX)
        return -1;
    EVP_CIPHER_CTX *x = ready(false, key, nonce);
    if (!x || EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, BBD_AEAD_TAGLEN, tag) != 1 ||
        (adlen && EVP_DecryptUpdate(x, NULL, &len, ad, (int)adlen) != 1))
        return -1;
    return EVP_DecryptUpdate(x, out, &len, ct, (int)n) == 1 &&
           EVP_DecryptFinal_ex(x, out + len, &len) == 1;
}

void bbd_aead_seal(const uint8_t key[BBD_AEAD_KEYLEN], const uint8_t nonce[BBD_AEAD_NONCELEN],
                   const uint8_t *ad, size_t adlen, const uint8_t *pt, size_t n, uint8_t *out)
{
    if (n < BBD_AEAD_SMALL || !bulk_seal(key, nonce, ad, adlen, pt, n, out))
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(out, out + n, NULL, pt, n, ad, adlen,
                                                           NULL, nonce, key);
}

bool bbd_aead_open(const uint8_t key[BBD_AEAD_KEYLEN], const uint8_t nonce[BBD_AEAD_NONCELEN],
                   const uint8_t *ad, size_t adlen, const uint8_t *ct, size_t n, uint8_t *out)
{
    int opened = n < BBD_AEAD_SMALL ? -1 : bulk_open(key, nonce, ad, adlen, ct, n, out);
    if (opened < 0) /* small, or libcrypto could not start */
        opened = crypto_aead_chacha20poly1305_ietf_decrypt_detached(out, NULL, ct, n, ct + n, ad,
                                                                    adlen, nonce, key) == 0;
    return opened == 1;
}
