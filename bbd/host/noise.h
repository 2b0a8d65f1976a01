/*
 * noise.h — the Noise protocol framework (noiseprotocol.org, revision 34),
 * exactly one protocol of it: Noise_XX_25519_ChaChaPoly_SHA256, the one the
 * libp2p noise spec (libp2p/specs noise/README.md) prescribes:
 *
 *     XX:  -> e
 *          <- e, ee, s, es
 *          -> s, se
 *
 * built on libsodium: X25519 (crypto_scalarmult), ChaCha20-Poly1305 IETF
 * (aead.h: libcrypto for large messages, libsodium for small ones)
 * with the nonce as Noise's ChaChaPoly defines it (32 zero bits, then the
 * 64-bit counter little-endian), SHA-256 and HMAC-SHA256 for HASH and HKDF.
 * tests/unit/test_noise.c runs the published test vectors of this protocol
 * name (testdata/noise/).
 *
 * Pure functions over caller memory: no loop, no socket, no allocation.
 * Everything secret (keys, chaining key, ephemeral and static private keys)
 * lives in the structs below and is wiped (sodium_memzero) by
 * bbd_noise_hs_split / bbd_noise_hs_wipe / bbd_noise_cipher_wipe; a failed
 * handshake step leaves the state unusable (every later step fails), and
 * the caller wipes it.
 *
 * Message sizes: a Noise message is at most BBD_NOISE_MAX_MSG bytes (the
 * spec's 65535); callers split larger data into several transport messages.
 */
#ifndef BBD_HOST_NOISE_H
#define BBD_HOST_NOISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/status.h"

#define BBD_NOISE_PROTOCOL "Noise_XX_25519_ChaChaPoly_SHA256"
#define BBD_NOISE_KEYLEN 32   /* DHLEN = HASHLEN = cipher key = 32 */
#define BBD_NOISE_TAGLEN 16
#define BBD_NOISE_MAX_MSG 65535
#define BBD_NOISE_MAX_PLAINTEXT (BBD_NOISE_MAX_MSG - BBD_NOISE_TAGLEN)
/* The plaintext of the transport messages bbd seals (tcp_secure.c says why
 * not the maximum); a peer's may be any size up to the maximum. */
#define BBD_SEAL_RECORD_PLAINTEXT (32 * 1024 - BBD_NOISE_TAGLEN)
/* The handshake messages' fixed parts: msg1 is e (32 bytes) and its
 * payload in clear; msg2 adds e, s encrypted (48) and the payload's tag;
 * msg3 s encrypted and the payload's tag. */
#define BBD_NOISE_MSG1_OVERHEAD 32
#define BBD_NOISE_MSG2_OVERHEAD (32 + 48 + BBD_NOISE_TAGLEN)
#define BBD_NOISE_MSG3_OVERHEAD (48 + BBD_NOISE_TAGLEN)

/* A CipherState: key and next nonce (UINT64_MAX is reserved: a cipher
 * that reached it refuses to work, the spec's "must not be used"). */
typedef struct bbd_noise_cipher {
    uint8_t k[BBD_NOISE_KEYLEN];
    uint64_t n;
    bool has_key;
} bbd_noise_cipher;

/* A HandshakeState for XX (with its SymmetricState). */
typedef struct bbd_noise_hs {
    uint8_t ck[BBD_NOISE_KEYLEN], h[BBD_NOISE_KEYLEN];
    bbd_noise_cipher cs;
    uint8_t s_priv[32], s_pub[32], e_priv[32], e_pub[32];
    uint8_t rs[32], re[32];
    bool initiator;
    bool failed;
    unsigned step; /* messages written or read so far: 0..3 */
} bbd_noise_hs;

/* Start a handshake: initiator or responder, prologue (may be empty), the
 * static private key s_priv, and the ephemeral private key e_priv (NULL:
 * random; the test vectors fix it). BB_ERUNTIME if libsodium cannot start. */
int bbd_noise_hs_init(bbd_noise_hs *hs, bool initiator, const uint8_t *prologue, size_t plen,
                      const uint8_t s_priv[32], const uint8_t *e_priv, bb_error *err);

/* Write the next handshake message (it must be ours to write) with
 * payload[0..plen) into out[cap]; *out_len gets its size. BB_ESTATE (not
 * our turn, done or failed), BB_ELIMIT (over BBD_NOISE_MAX_MSG), BB_EFULL
 * (cap too small), BB_EVALIDATE (a DH gave the all-zero output). */
int bbd_noise_hs_write(bbd_noise_hs *hs, const uint8_t *payload, size_t plen, uint8_t *out,
                       size_t cap, size_t *out_len, bb_error *err);

/* Read the peer's next handshake message msg[0..n); its payload goes to
 * payload[cap], *plen its size. BB_ESTATE (not its turn), BB_EPARSE (too
 * short or long), BB_EVALIDATE (authentication failed, bad DH), BB_EFULL
 * (cap too small). Any failure marks hs failed. */
int bbd_noise_hs_read(bbd_noise_hs *hs, const uint8_t *msg, size_t n, uint8_t *payload,
                      size_t cap, size_t *plen, bb_error *err);

/* True once the three messages are through. */
bool bbd_noise_hs_done(const bbd_noise_hs *hs);
/* Whose turn: true when the next message is ours to write. */
bool bbd_noise_hs_our_turn(const bbd_noise_hs *hs);
/* The handshake hash (channel binding; the vectors check it). */
const uint8_t *bbd_noise_hs_hash(const bbd_noise_hs *hs);
/* The peer's static public key, known after message 2 (initiator) or 3
 * (responder). */
const uint8_t *bbd_noise_hs_remote_static(const bbd_noise_hs *hs);

/* Split a finished handshake into our sending and receiving ciphers
 * (Noise's Split: the initiator sends with the first). Wipes the secrets
 * of hs (its hash and the remote static key stay readable). BB_ESTATE if
 * the handshake is not done. */
int bbd_noise_hs_split(bbd_noise_hs *hs, bbd_noise_cipher *tx, bbd_noise_cipher *rx,
                       bb_error *err);
void bbd_noise_hs_wipe(bbd_noise_hs *hs);

/* Transport messages. out holds n + BBD_NOISE_TAGLEN bytes (out == pt is
 * allowed: in place). The cipher's counter is the nonce and advances on
 * success. BB_ELIMIT when the nonces are used up. */
int bbd_noise_encrypt(bbd_noise_cipher *c, const uint8_t *ad, size_t adlen, const uint8_t *pt,
                      size_t n, uint8_t *out);
/* ct[0..n) (n >= BBD_NOISE_TAGLEN) into out (n - 16 bytes; out == ct
 * allowed). BB_EVALIDATE when authentication fails (the counter does not
 * advance, out is zeroed). */
int bbd_noise_decrypt(bbd_noise_cipher *c, const uint8_t *ad, size_t adlen, const uint8_t *ct,
                      size_t n, uint8_t *out);
/* The same with an explicit nonce instead of the counter (datagrams: the
 * counter travels with each one, so loss and reordering are survivable;
 * the replay window is the caller's). The counter is not touched. */
int bbd_noise_encrypt_at(const bbd_noise_cipher *c, uint64_t nonce, const uint8_t *ad,
                         size_t adlen, const uint8_t *pt, size_t n, uint8_t *out);
int bbd_noise_decrypt_at(const bbd_noise_cipher *c, uint64_t nonce, const uint8_t *ad,
                         size_t adlen, const uint8_t *ct, size_t n, uint8_t *out);
void bbd_noise_cipher_wipe(bbd_noise_cipher *c);

/* An X25519 key pair: a fresh random private key (or the given one), and
 * its public key. */
int bbd_noise_keypair(uint8_t priv[32], uint8_t pub[32], bool random, bb_error *err);

#endif
