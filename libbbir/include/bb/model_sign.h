/*
 * model_sign.h — signed artifacts: Ed25519 signatures of a serialized
 * ModelProto, carried in the model itself (bbc sign, bbc compile --sign;
 * bbd's require_signed_by).
 *
 * A signature is a ModelProto.metadata_props entry (field 14) written after
 * every other field of the file:
 *     key   = BB_META_SIGNATURE ("ai.bytesandbrains.signature")
 *     value = "<signer's PeerId> <signature: base64, standard alphabet, padded>"
 * and it signs the file's bytes before the first signature entry: the
 * artifact as it was before anyone signed it. Several signatures may follow
 * one another, each over the same bytes. A verifier needs no
 * re-serialization: it signs exactly what it read, so any change to those
 * bytes — and any field written after a signature, which is where a tool
 * that re-serialized the model would put things — breaks every signature.
 * The signer's key is the one inlined in its PeerId (an Ed25519 PeerId,
 * "12D3KooW..."), so `bbd keygen` keys are signing keys. Protobuf lets
 * fields come in any order and repeats metadata_props, so a signed file is
 * still an ONNX model any tool opens.
 *
 * Pure functions over bytes with explicit limits.
 */
#ifndef BB_MODEL_SIGN_H
#define BB_MODEL_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "bb/peerid.h"
#include "bb/status.h"

#define BB_MODEL_MAX_SIGNATURES 16

typedef struct bb_model_signature {
    bb_peerid signer;
    uint8_t sig[BB_ED25519_SIG_LEN];
    size_t offset, len; /* the entry's bytes in the file */
} bb_model_signature;

/* The signatures at the end of p[0..n) into out[cap] (*count of them) and
 * the length of the bytes they sign (*signed_len; n when there are none).
 * BB_EPARSE (or BB_ETRUNC) when the top-level fields do not parse, when a
 * signature's value is not "<PeerId> <base64 of 64 bytes>", or when any
 * other field follows a signature (the file changed after signing);
 * BB_ELIMIT over BB_MODEL_MAX_SIGNATURES. err names the byte offset. */
int bb_model_signatures(const uint8_t *p, size_t n, bb_model_signature *out, size_t cap,
                        size_t *count, size_t *signed_len, bb_error *err);

/* p[0..n) signed by kp as well: *out (malloc'd) is the signed bytes, the
 * other signers' signatures, then kp's (a signature kp made before is
 * replaced). Errors of bb_model_signatures. */
int bb_model_sign(const uint8_t *p, size_t n, const bb_keypair *kp, uint8_t **out,
                  size_t *out_len, bb_error *err);

/* Is p[0..n) signed by one of signers[0..n_signers)? BB_OK with *who (may
 * be NULL) the signer whose signature verifies; else BB_EVALIDATE naming
 * why: no signature at all, only signers not in the list (named), or a
 * listed signer's signature that does not verify (the bytes changed after
 * it was made); or the errors of bb_model_signatures. */
int bb_model_verify(const uint8_t *p, size_t n, const bb_peerid *signers, size_t n_signers,
                    bb_peerid *who, bb_error *err);

#endif
