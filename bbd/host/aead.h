/*
 * aead.h — ChaCha20-Poly1305 IETF (RFC 8439), the one AEAD every sealed
 * byte of bbd goes through: Noise's handshake and transport messages
 * (noise.c) and therefore the TCP records and the sealed UDP datagrams.
 *
 * On OpenSSL's libcrypto (EVP_chacha20_poly1305), not libsodium: on this
 * project's reference machine libcrypto's AVX-512 code runs the cipher at
 * ~5 GB/s per core against libsodium's ~1.5 GB/s, and the cipher was most
 * of the encrypted channel's cost (figures: docs/DECISIONS.md); messages
 * under BBD_AEAD_SMALL bytes stay on libsodium's, cheaper per call. X25519,
 * Ed25519 and the hashes stay on libsodium.
 *
 * Each thread keeps one sealing and one opening EVP context, made on first
 * use and freed (its cached key wiped) when the thread ends; a call sets
 * the key only when it differs from the context's last one, then the
 * nonce, so a connection's stream of records costs no allocation and no
 * context set-up per record.
 */
#ifndef BBD_HOST_AEAD_H
#define BBD_HOST_AEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BBD_AEAD_KEYLEN 32
#define BBD_AEAD_NONCELEN 12
#define BBD_AEAD_TAGLEN 16
/* Below this many bytes libsodium seals and opens (faster per call), from
 * it libcrypto (faster per byte); see aead.c. */
#define BBD_AEAD_SMALL 1024

/* Seal pt[0..n) with ad into out[0..n) and the tag into out[n..n+16).
 * out == pt is allowed (in place). Cannot fail (libsodium stands in when
 * libcrypto cannot run). */
void bbd_aead_seal(const uint8_t key[BBD_AEAD_KEYLEN], const uint8_t nonce[BBD_AEAD_NONCELEN],
                   const uint8_t *ad, size_t adlen, const uint8_t *pt, size_t n, uint8_t *out);

/* Open ct[0..n) with its tag ct[n..n+16) and ad into out[0..n) (out == ct
 * allowed). False when authentication fails (out may hold garbage: the
 * caller zeroes or drops it). */
bool bbd_aead_open(const uint8_t key[BBD_AEAD_KEYLEN], const uint8_t nonce[BBD_AEAD_NONCELEN],
                   const uint8_t *ad, size_t adlen, const uint8_t *ct, size_t n, uint8_t *out);

#endif
