/*
 * peerid.h — node identity as libp2p defines it (DESIGN.md decision 6).
 *
 * A node's identity is an Ed25519 keypair (libsodium). Its PeerId is the
 * multihash of the libp2p protobuf PublicKey message
 *     message PublicKey { required KeyType Type = 1; required bytes Data = 2; }
 * with Type = Ed25519 (1) and Data = the 32-byte public key, i.e. the 36 bytes
 *     08 01 12 20 <pk[32]>
 * Serialized keys of at most 42 bytes use the identity multihash (code 0x00),
 * so an Ed25519 PeerId is the 38 bytes  00 24 08 01 12 20 <pk>  and its text
 * form (base58btc, no multibase prefix) starts with "12D3KooW". Longer keys
 * (RSA, ...) use sha2-256 (code 0x12, 32-byte digest, "Qm..."); we accept such
 * PeerIds from the wire but only create Ed25519 ones.
 * Spec: libp2p/specs peer-ids/peer-ids.md.
 *
 * Key file (bb_keyfile_*): the libp2p PrivateKey protobuf, 68 bytes
 *     08 01 12 40 <seed[32]> <pk[32]>
 * (Type = Ed25519, Data = libsodium's 64-byte secret key = seed || pk), so
 * a key file is interchangeable with other libp2p implementations. It is
 * created with mode 0600 and refused on load if group or others can access
 * it, if it is not a regular file, or if pk does not match the seed.
 *
 * Every function is thread-safe; libsodium is initialised once, lazily.
 */
#ifndef BB_PEERID_H
#define BB_PEERID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/status.h"

#define BB_ED25519_PK_LEN 32
#define BB_ED25519_SK_LEN 64 /* seed || pk */
#define BB_ED25519_SEED_LEN 32
#define BB_ED25519_SIG_LEN 64

#define BB_MULTIHASH_IDENTITY 0x00
#define BB_MULTIHASH_SHA2_256 0x12
#define BB_PEERID_INLINE_MAX 42  /* longest key kept inline (identity hash) */
#define BB_PEERID_MAX_LEN 44     /* 1-byte code + 1-byte length + 42 */
#define BB_PEERID_TEXT_MAX 64    /* base58 of 44 bytes is <= 61 chars; + NUL */
#define BB_PUBKEY_PROTO_LEN 36   /* protobuf PublicKey of an Ed25519 key */
#define BB_KEYFILE_LEN 68        /* protobuf PrivateKey of an Ed25519 key */

/* base58btc bounds (decoding is quadratic, so it is capped). */
#define BB_BASE58_MAX_BYTES 256
#define BB_BASE58_MAX_TEXT 352 /* >= ceil(256 * log(256)/log(58)) */

/* A PeerId: multihash bytes (a plain value, copy freely). */
typedef struct bb_peerid {
    uint8_t len;
    uint8_t bytes[BB_PEERID_MAX_LEN];
} bb_peerid;

/* An Ed25519 keypair. sk is libsodium's layout (seed || pk). Wipe with
 * bb_keypair_wipe when done. */
typedef struct bb_keypair {
    uint8_t pk[BB_ED25519_PK_LEN];
    uint8_t sk[BB_ED25519_SK_LEN];
} bb_keypair;

/* ---- keys ------------------------------------------------------------------ */

/* Fresh random keypair. BB_ERUNTIME if libsodium cannot initialise. */
int bb_keypair_generate(bb_keypair *kp, bb_error *err);
/* Deterministic keypair from a 32-byte seed (RFC 8032 private key). */
int bb_keypair_from_seed(const uint8_t seed[BB_ED25519_SEED_LEN], bb_keypair *kp,
                         bb_error *err);
/* Zero the secret key (sodium_memzero). */
void bb_keypair_wipe(bb_keypair *kp);

/* Detached Ed25519 signature of msg[0..n) into sig (64 bytes). */
int bb_keypair_sign(const bb_keypair *kp, const void *msg, size_t n,
                    uint8_t sig[BB_ED25519_SIG_LEN], bb_error *err);
/* BB_OK if sig is a valid signature of msg by pk, else BB_EVALIDATE. */
int bb_ed25519_verify(const uint8_t pk[BB_ED25519_PK_LEN], const void *msg, size_t n,
                      const uint8_t sig[BB_ED25519_SIG_LEN], bb_error *err);

/* libp2p PublicKey protobuf of an Ed25519 key: writes exactly 36 bytes. */
void bb_pubkey_proto_encode(const uint8_t pk[BB_ED25519_PK_LEN],
                            uint8_t out[BB_PUBKEY_PROTO_LEN]);
/* Parse a PublicKey protobuf (as carried in a libp2p Noise handshake).
 * Only the canonical Ed25519 encoding is accepted: other key types are
 * BB_EUNSUPPORTED, anything else BB_EPARSE. Borrows buf. */
int bb_pubkey_proto_decode(const uint8_t *buf, size_t n, uint8_t pk[BB_ED25519_PK_LEN],
                           bb_error *err);

/* ---- PeerIds ---------------------------------------------------------------- */

/* PeerId of an Ed25519 public key (identity multihash). Cannot fail. */
void bb_peerid_from_pubkey(const uint8_t pk[BB_ED25519_PK_LEN], bb_peerid *out);
/* Deterministic test identity: keypair (kp may be NULL) and PeerId from a
 * 32-byte seed. */
int bb_peerid_from_seed(const uint8_t seed[BB_ED25519_SEED_LEN], bb_keypair *kp,
                        bb_peerid *out, bb_error *err);

/* Check that b[0..n) is a PeerId multihash: identity (code 0x00) with a
 * 1..42 byte digest, or sha2-256 (code 0x12) with a 32-byte digest; the
 * length varint must match the remaining bytes exactly. BB_EPARSE /
 * BB_ETRUNC / BB_EUNSUPPORTED (other hash codes) otherwise. Borrows b. */
int bb_peerid_validate(const uint8_t *b, size_t n, bb_error *err);
/* Validate and copy. */
int bb_peerid_from_bytes(const uint8_t *b, size_t n, bb_peerid *out, bb_error *err);

/* base58btc text into out[cap] (NUL-terminated; BB_PEERID_TEXT_MAX always
 * suffices). BB_EFULL if cap is too small; BB_EINVAL for an invalid id. */
int bb_peerid_to_text(const bb_peerid *id, char *out, size_t cap, bb_error *err);
/* Parse base58btc text (NUL-terminated) into a validated PeerId. Errors
 * name the text and the offending offset. CIDv1 ("bafz...") text is not
 * accepted. */
int bb_peerid_from_text(const char *text, bb_peerid *out, bb_error *err);

bool bb_peerid_equal(const bb_peerid *a, const bb_peerid *b);
/* The Ed25519 public key inlined in an identity-multihash PeerId.
 * BB_EUNSUPPORTED for sha2-256 ids (the key is not recoverable) or a
 * non-Ed25519 inlined key. */
int bb_peerid_pubkey(const bb_peerid *id, uint8_t pk[BB_ED25519_PK_LEN], bb_error *err);
/* True if id is the PeerId of pk. */
bool bb_peerid_matches_pubkey(const bb_peerid *id, const uint8_t pk[BB_ED25519_PK_LEN]);
/* Verify sig over msg with the key inlined in id (for authenticating a
 * peer whose PeerId is known). BB_OK, BB_EVALIDATE or BB_EUNSUPPORTED. */
int bb_peerid_verify(const bb_peerid *id, const void *msg, size_t n,
                     const uint8_t sig[BB_ED25519_SIG_LEN], bb_error *err);

/* ---- key files -------------------------------------------------------------- */

/* Create path (must not exist: BB_EEXIST) with mode 0600 and write the
 * 68-byte PrivateKey protobuf. On failure nothing is left behind. */
int bb_keyfile_save(const char *path, const bb_keypair *kp, bb_error *err);
/* Load a key file. Refused (BB_ECONFIG, message names path and mode) when
 * group or others have any access; BB_EPARSE when the contents are not an
 * Ed25519 PrivateKey or pk does not match the seed; BB_EIO / BB_ENOTFOUND
 * for system errors. */
int bb_keyfile_load(const char *path, bb_keypair *kp, bb_error *err);
/* Load path, or generate and save a new key if it does not exist.
 * *created (may be NULL) tells which happened. */
int bb_keyfile_load_or_create(const char *path, bb_keypair *kp, bool *created,
                              bb_error *err);

/* ---- base58btc (bitcoin alphabet) ------------------------------------------- */

/* Encode in[0..n) (n <= BB_BASE58_MAX_BYTES) into out[cap], NUL-terminated;
 * *out_len (may be NULL) gets the text length. Leading zero bytes become
 * leading '1's. BB_ELIMIT for too much input, BB_EFULL if cap is short. */
int bb_base58_encode(const uint8_t *in, size_t n, char *out, size_t cap, size_t *out_len,
                     bb_error *err);
/* Decode text[0..n) (n <= BB_BASE58_MAX_TEXT) into out[cap]; *out_len gets
 * the byte count. BB_EPARSE names the first character outside the
 * alphabet and its offset. */
int bb_base58_decode(const char *text, size_t n, uint8_t *out, size_t cap, size_t *out_len,
                     bb_error *err);

#endif
