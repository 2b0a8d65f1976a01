/*
 * noise.c — Noise_XX_25519_ChaChaPoly_SHA256 on libsodium (see noise.h).
 *
 * The code follows the spec's objects one to one: CipherState
 * (cipher_*), SymmetricState (mix_key, mix_hash, encrypt_and_hash,
 * decrypt_and_hash, HKDF) and HandshakeState (bbd_noise_hs_*), with XX's
 * three message patterns written out in write_msg / read_msg rather than
 * interpreted from a token table: one pattern does not need a general
 * engine, and the tokens read in order next to the spec.
 *
 * ChaCha20-Poly1305 is aead.h's (libcrypto for large messages, libsodium
 * for small ones; docs/DECISIONS.md, "Noise on libsodium and libcrypto").
 * libsodium keeps X25519, SHA-256 and HKDF.
 */
#include "bbd/host/noise.h"

#include <string.h>

#include <sodium.h>

#include "bbd/host/aead.h"

/* ---- CipherState ---------------------------------------------------------------- */

/* ChaChaPoly's nonce: 32 bits of zeros, then n as 64 bits little-endian. */
static void nonce_bytes(uint64_t n, uint8_t out[12])
{
    memset(out, 0, 4);
    for (int i = 0; i < 8; i++)
        out[4 + i] = (uint8_t)(n >> (8 * i));
}

int bbd_noise_encrypt_at(const bbd_noise_cipher *c, uint64_t nonce, const uint8_t *ad,
                         size_t adlen, const uint8_t *pt, size_t n, uint8_t *out)
{
    if (nonce == UINT64_MAX)
        return BB_ELIMIT;
    uint8_t iv[12];
    nonce_bytes(nonce, iv);
    bbd_aead_seal(c->k, iv, ad, adlen, pt, n, out);
    return BB_OK;
}

int bbd_noise_decrypt_at(const bbd_noise_cipher *c, uint64_t nonce, const uint8_t *ad,
                         size_t adlen, const uint8_t *ct, size_t n, uint8_t *out)
{
    if (n < BBD_NOISE_TAGLEN || nonce == UINT64_MAX)
        return BB_EVALIDATE;
    uint8_t iv[12];
    nonce_bytes(nonce, iv);
    size_t m = n - BBD_NOISE_TAGLEN;
    if (!bbd_aead_open(c->k, iv, ad, adlen, ct, m, out)) {
        if (m)
            sodium_memzero(out, m);
        return BB_EVALIDATE;
    }
    return BB_OK;
}

int bbd_noise_encrypt(bbd_noise_cipher *c, const uint8_t *ad, size_t adlen, const uint8_t *pt,
                      size_t n, uint8_t *out)
{
    int rc = bbd_noise_encrypt_at(c, c->n, ad, adlen, pt, n, out);
    if (rc == BB_OK)
        c->n++;
    return rc;
}

int bbd_noise_decrypt(bbd_noise_cipher *c, const uint8_t *ad, size_t adlen, const uint8_t *ct,
                      size_t n, uint8_t *out)
{
    int rc = bbd_noise_decrypt_at(c, c->n, ad, adlen, ct, n, out);
    if (rc == BB_OK)
        c->n++;
    return rc;
}

void bbd_noise_cipher_wipe(bbd_noise_cipher *c)
{
    sodium_memzero(c, sizeof *c);
}

static void cipher_init(bbd_noise_cipher *c, const uint8_t k[32])
{
    memcpy(c->k, k, 32);
    c->n = 0;
    c->has_key = true;
}

/* ---- SymmetricState ------------------------------------------------------------------ */

static void hmac(const uint8_t key[32], const uint8_t *a, size_t alen, const uint8_t *b,
                 size_t blen, uint8_t out[32])
{
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, key, 32);
    crypto_auth_hmacsha256_update(&st, a, alen);
    if (blen)
        crypto_auth_hmacsha256_update(&st, b, blen);
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof st);
}

/* HKDF(chaining_key, ikm) with two outputs (Noise 4.3). */
static void hkdf2(const uint8_t ck[32], const uint8_t *ikm, size_t ikm_len, uint8_t out1[32],
                  uint8_t out2[32])
{
    uint8_t temp[32], one = 0x01, two = 0x02;
    hmac(ck, ikm, ikm_len, NULL, 0, temp);
    hmac(temp, &one, 1, NULL, 0, out1);
    hmac(temp, out1, 32, &two, 1, out2);
    sodium_memzero(temp, sizeof temp);
}

static void mix_hash(bbd_noise_hs *hs, const uint8_t *data, size_t n)
{
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    crypto_hash_sha256_update(&st, hs->h, 32);
    crypto_hash_sha256_update(&st, data, n);
    crypto_hash_sha256_final(&st, hs->h);
}

static void mix_key(bbd_noise_hs *hs, const uint8_t ikm[32])
{
    uint8_t ck[32], k[32];
    hkdf2(hs->ck, ikm, 32, ck, k);
    memcpy(hs->ck, ck, 32);
    cipher_init(&hs->cs, k);
    sodium_memzero(ck, sizeof ck);
    sodium_memzero(k, sizeof k);
}

/* MixKey(DH(priv, pub)); false for an all-zero output (a low-order point:
 * libsodium refuses it, and so do we). */
static bool mix_dh(bbd_noise_hs *hs, const uint8_t priv[32], const uint8_t pub[32])
{
    uint8_t shared[32];
    bool ok = crypto_scalarmult(shared, priv, pub) == 0;
    if (ok)
        mix_key(hs, shared);
    sodium_memzero(shared, sizeof shared);
    return ok;
}

/* EncryptAndHash: out gets n (+16 once a key exists) bytes; returns that. */
static size_t encrypt_and_hash(bbd_noise_hs *hs, const uint8_t *pt, size_t n, uint8_t *out)
{
    size_t len = n;
    if (hs->cs.has_key) {
        bbd_noise_encrypt(&hs->cs, hs->h, 32, pt, n, out);
        len += BBD_NOISE_TAGLEN;
    } else if (n) {
        memmove(out, pt, n);
    }
    mix_hash(hs, out, len);
    return len;
}

/* DecryptAndHash of ct[0..n): out gets the plaintext. */
static bool decrypt_and_hash(bbd_noise_hs *hs, const uint8_t *ct, size_t n, uint8_t *out)
{
    uint8_t h[32];
    memcpy(h, hs->h, 32);
    mix_hash(hs, ct, n); /* the ciphertext is hashed: before out may overwrite it */
    if (!hs->cs.has_key) {
        if (n)
            memmove(out, ct, n);
        return true;
    }
    return bbd_noise_decrypt(&hs->cs, h, 32, ct, n, out) == BB_OK;
}

/* ---- HandshakeState ------------------------------------------------------------------- */

int bbd_noise_keypair(uint8_t priv[32], uint8_t pub[32], bool random, bb_error *err)
{
    if (sodium_init() < 0)
        return bb_error_set(err, BB_ERUNTIME, "noise: libsodium failed to initialise");
    if (random)
        randombytes_buf(priv, 32);
    crypto_scalarmult_base(pub, priv);
    return BB_OK;
}

int bbd_noise_hs_init(bbd_noise_hs *hs, bool initiator, const uint8_t *prologue, size_t plen,
                      const uint8_t s_priv[32], const uint8_t *e_priv, bb_error *err)
{
    memset(hs, 0, sizeof *hs);
    hs->initiator = initiator;
    /* InitializeSymmetric: the name is exactly HASHLEN bytes, so h = name. */
    _Static_assert(sizeof BBD_NOISE_PROTOCOL - 1 == 32, "protocol name is HASHLEN bytes");
    memcpy(hs->h, BBD_NOISE_PROTOCOL, 32);
    memcpy(hs->ck, hs->h, 32);
    mix_hash(hs, prologue, plen);
    memcpy(hs->s_priv, s_priv, 32);
    int rc = bbd_noise_keypair(hs->s_priv, hs->s_pub, false, err);
    if (rc == BB_OK) {
        if (e_priv)
            memcpy(hs->e_priv, e_priv, 32);
        rc = bbd_noise_keypair(hs->e_priv, hs->e_pub, e_priv == NULL, err);
    }
    if (rc)
        bbd_noise_hs_wipe(hs);
    return rc;
}

bool bbd_noise_hs_done(const bbd_noise_hs *hs) { return hs->step == 3 && !hs->failed; }

bool bbd_noise_hs_our_turn(const bbd_noise_hs *hs)
{
    /* the initiator writes messages 1 and 3 (steps 0 and 2) */
    return hs->step < 3 && (hs->step % 2 == 0) == hs->initiator;
}

const uint8_t *bbd_noise_hs_hash(const bbd_noise_hs *hs) { return hs->h; }
const uint8_t *bbd_noise_hs_remote_static(const bbd_noise_hs *hs) { return hs->rs; }

static const size_t OVERHEAD[3] = {BBD_NOISE_MSG1_OVERHEAD, BBD_NOISE_MSG2_OVERHEAD,
                                   BBD_NOISE_MSG3_OVERHEAD};

/* The tokens of the message at hs->step, written to out (room checked). */
static bool write_tokens(bbd_noise_hs *hs, uint8_t *out, size_t *at)
{
    switch (hs->step) {
    case 0: /* -> e */
        memcpy(out, hs->e_pub, 32);
        mix_hash(hs, hs->e_pub, 32);
        *at = 32;
        return true;
    case 1: /* <- e, ee, s, es */
        memcpy(out, hs->e_pub, 32);
        mix_hash(hs, hs->e_pub, 32);
        *at = 32;
        if (!mix_dh(hs, hs->e_priv, hs->re))
            return false;
        *at += encrypt_and_hash(hs, hs->s_pub, 32, out + *at);
        return mix_dh(hs, hs->s_priv, hs->re);
    default: /* -> s, se */
        *at = encrypt_and_hash(hs, hs->s_pub, 32, out);
        return mix_dh(hs, hs->s_priv, hs->re);
    }
}

int bbd_noise_hs_write(bbd_noise_hs *hs, const uint8_t *payload, size_t plen, uint8_t *out,
                       size_t cap, size_t *out_len, bb_error *err)
{
    if (hs->failed || !bbd_noise_hs_our_turn(hs))
        return bb_error_set(err, BB_ESTATE, "noise: not our handshake message to write");
    size_t need = OVERHEAD[hs->step] + plen;
    if (need > BBD_NOISE_MAX_MSG)
        return bb_error_set(err, BB_ELIMIT, "noise: handshake message of %zu bytes is over %d",
                            need, BBD_NOISE_MAX_MSG);
    if (need > cap)
        return bb_error_set(err, BB_EFULL, "noise: handshake message of %zu bytes, room for %zu",
                            need, cap);
    size_t at = 0;
    if (!write_tokens(hs, out, &at)) {
        hs->failed = true;
        return bb_error_set(err, BB_EVALIDATE, "noise: the peer's key gives no shared secret");
    }
    at += encrypt_and_hash(hs, payload, plen, out + at);
    *out_len = at;
    hs->step++;
    return BB_OK;
}

/* The tokens of the peer's message at hs->step from msg (length checked). */
static bool read_tokens(bbd_noise_hs *hs, const uint8_t *msg, size_t *at)
{
    switch (hs->step) {
    case 0: /* -> e */
        memcpy(hs->re, msg, 32);
        mix_hash(hs, hs->re, 32);
        *at = 32;
        return true;
    case 1: /* <- e, ee, s, es */
        memcpy(hs->re, msg, 32);
        mix_hash(hs, hs->re, 32);
        if (!mix_dh(hs, hs->e_priv, hs->re) || !decrypt_and_hash(hs, msg + 32, 48, hs->rs))
            return false;
        *at = 32 + 48;
        return mix_dh(hs, hs->e_priv, hs->rs);
    default: /* -> s, se */
        if (!decrypt_and_hash(hs, msg, 48, hs->rs))
            return false;
        *at = 48;
        return mix_dh(hs, hs->e_priv, hs->rs);
    }
}

int bbd_noise_hs_read(bbd_noise_hs *hs, const uint8_t *msg, size_t n, uint8_t *payload,
                      size_t cap, size_t *plen, bb_error *err)
{
    if (hs->failed || hs->step >= 3 || bbd_noise_hs_our_turn(hs))
        return bb_error_set(err, BB_ESTATE, "noise: not the peer's handshake message to read");
    size_t over = OVERHEAD[hs->step];
    if (n < over || n > BBD_NOISE_MAX_MSG) {
        hs->failed = true;
        return bb_error_set(err, BB_EPARSE, "noise: handshake message %u of %zu bytes (%s %zu)",
                            hs->step + 1, n, n < over ? "at least" : "at most",
                            n < over ? over : (size_t)BBD_NOISE_MAX_MSG);
    }
    size_t want = n - over, at = 0;
    if (want > cap) {
        hs->failed = true;
        return bb_error_set(err, BB_EFULL, "noise: handshake payload of %zu bytes, room for %zu",
                            want, cap);
    }
    if (!read_tokens(hs, msg, &at) ||
        !decrypt_and_hash(hs, msg + at, n - at, payload)) {
        hs->failed = true;
        return bb_error_set(err, BB_EVALIDATE,
                            "noise: handshake message %u failed authentication", hs->step + 1);
    }
    *plen = want;
    hs->step++;
    return BB_OK;
}

int bbd_noise_hs_split(bbd_noise_hs *hs, bbd_noise_cipher *tx, bbd_noise_cipher *rx,
                       bb_error *err)
{
    if (!bbd_noise_hs_done(hs))
        return bb_error_set(err, BB_ESTATE, "noise: split before the handshake is done");
    uint8_t k1[32], k2[32];
    hkdf2(hs->ck, NULL, 0, k1, k2);
    cipher_init(tx, hs->initiator ? k1 : k2);
    cipher_init(rx, hs->initiator ? k2 : k1);
    sodium_memzero(k1, sizeof k1);
    sodium_memzero(k2, sizeof k2);
    sodium_memzero(hs->ck, sizeof hs->ck);
    sodium_memzero(hs->s_priv, sizeof hs->s_priv);
    sodium_memzero(hs->e_priv, sizeof hs->e_priv);
    bbd_noise_cipher_wipe(&hs->cs);
    return BB_OK;
}

void bbd_noise_hs_wipe(bbd_noise_hs *hs)
{
    sodium_memzero(hs, sizeof *hs);
}
