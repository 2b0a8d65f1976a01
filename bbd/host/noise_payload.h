/*
 * noise_payload.h — the libp2p noise handshake payload (libp2p/specs
 * noise/README.md, "The libp2p Handshake Payload"): how a node's identity
 * (its Ed25519 key, whose multihash is its PeerId) vouches for the X25519
 * static key of a Noise handshake. Pure functions over bytes.
 *
 *   message NoiseHandshakePayload {
 *     bytes identity_key = 1;  // libp2p PublicKey protobuf (Ed25519 only here)
 *     bytes identity_sig = 2;  // Ed25519 signature of
 *                              //   "noise-libp2p-static-key:" || static Noise key
 *     bytes data         = 3;  // early data: bbd's Handshake (handshake.h)
 *   }
 *
 * Messages 2 (responder) and 3 (initiator) of XX carry it, encrypted. The
 * early data is bbd's own Handshake message (its PeerId, listen addresses,
 * targets, version) — what a plaintext connection sends as its first
 * frame — so a secure connection needs no extra round trip for it; its
 * peer_id must be the PeerId of identity_key (checked by the transport).
 * Unknown fields are skipped (later revisions of the spec add
 * `extensions = 4`).
 */
#ifndef BBD_HOST_NOISE_PAYLOAD_H
#define BBD_HOST_NOISE_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "bb/peerid.h"
#include "bb/status.h"

#define BBD_NOISE_SIG_PREFIX "noise-libp2p-static-key:"
/* key (2 + 36) + signature (2 + 64) + data (tag + varint) around the data */
#define BBD_NOISE_PAYLOAD_OVERHEAD 112

/* The identity a verified payload proved. data borrows the payload. */
typedef struct bbd_noise_identity {
    bb_peerid peer;           /* PeerId of the identity key */
    uint8_t pk[BB_ED25519_PK_LEN];
    const uint8_t *data;      /* early data (NULL, 0 when absent) */
    size_t data_len;
} bbd_noise_identity;

/* Sign our static Noise public key with the identity key (once per key). */
int bbd_noise_sign_static(const bb_keypair *id, const uint8_t static_pub[32],
                          uint8_t sig[BB_ED25519_SIG_LEN], bb_error *err);

/* Encode the payload into out[cap] (*out_len its size). BB_EFULL when cap
 * is too small. */
int bbd_noise_payload_encode(const uint8_t id_pk[BB_ED25519_PK_LEN],
                             const uint8_t sig[BB_ED25519_SIG_LEN], const uint8_t *data,
                             size_t data_len, uint8_t *out, size_t cap, size_t *out_len,
                             bb_error *err);

/* Decode p[0..n) and check that its identity key signed remote_static
 * (the static key the handshake received). BB_EPARSE / BB_ETRUNC
 * (malformed, a field missing or repeated), BB_EUNSUPPORTED (not an
 * Ed25519 key), BB_EVALIDATE (the signature does not verify); err names
 * the field and byte offset. Borrows p. */
int bbd_noise_payload_verify(const uint8_t *p, size_t n, const uint8_t remote_static[32],
                             bbd_noise_identity *out, bb_error *err);

#endif
