/*
 * fragment.h — the UDP datagram codec: pure functions over bytes with
 * explicit limits, no loop and no allocation (so they can be fuzzed).
 *
 * Every datagram starts with the magic byte 0xBB and a kind byte:
 *
 *   0xBB 0x01 Handshake      HELLO: the sender's handshake; answer with yours
 *   0xBB 0x02 Handshake      HELLO_ACK: the answer to a HELLO
 *   0xBB 0x03 WireEnvelope   ENVELOPE: one whole envelope
 *   0xBB 0x04 hdr data       FRAGMENT of an envelope too big for one datagram
 *
 * and with security on (udp_secure.c) instead of the first four:
 *
 *   0xBB 0x05 msg1 zeros     NOISE1: the Noise XX message 1 (32 bytes), padded
 *                            to at least BBD_DGRAM_NOISE1_MIN bytes so that a
 *                            spoofed one cannot draw a larger answer
 *   0xBB 0x06 msg2           NOISE2
 *   0xBB 0x07 msg3           NOISE3
 *   0xBB 0x08 nonce ct tag   SEALED: nonce (u64, big-endian), then the
 *                            ChaCha20-Poly1305 encryption (with that nonce)
 *                            of an inner datagram without its magic byte:
 *                            0x03 ENVELOPE, 0x04 FRAGMENT, or
 *                            0x09 Admission  ADMISSION (the responder's verdict)
 *
 * A fragment header is 14 bytes, big-endian:
 *   msg_id u32   the sender's id for the envelope (per sender)
 *   total  u32   the envelope's size in bytes
 *   chunk  u16   bytes in every fragment but the last (>= BBD_DGRAM_MIN_CHUNK)
 *   index  u32   this fragment: data = envelope[index*chunk, +chunk)
 * so fragment count = ceil(total / chunk) >= 2, index < count, and the
 * data length is chunk, or the remainder for the last fragment. Anything
 * else is malformed: fragments carry no other state for a peer to abuse.
 */
#ifndef BBD_HOST_FRAGMENT_H
#define BBD_HOST_FRAGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "bb/status.h"

#define BBD_DGRAM_MAGIC 0xBB
#define BBD_DGRAM_HEADER 2           /* magic + kind */
#define BBD_DGRAM_FRAGMENT_HEADER 16 /* magic + kind + 14 */
#define BBD_DGRAM_MIN_CHUNK 32       /* bounds a message's fragment count */
#define BBD_DGRAM_MAX_BYTES 65507    /* largest UDP payload over IPv4 */
#define BBD_DGRAM_NOISE1_MIN 512     /* a NOISE1 datagram, padded */
#define BBD_DGRAM_NONCE 8
/* A sealed datagram's size beyond the plaintext datagram it carries: the
 * outer header and nonce and the tag, less the inner magic byte. */
#define BBD_DGRAM_SEALED_OVERHEAD (BBD_DGRAM_HEADER + BBD_DGRAM_NONCE + 16 - 1)

typedef enum bbd_dgram_kind {
    BBD_DGRAM_HELLO = 1,
    BBD_DGRAM_HELLO_ACK = 2,
    BBD_DGRAM_ENVELOPE = 3,
    BBD_DGRAM_FRAGMENT = 4,
    BBD_DGRAM_NOISE1 = 5,
    BBD_DGRAM_NOISE2 = 6,
    BBD_DGRAM_NOISE3 = 7,
    BBD_DGRAM_SEALED = 8,
    BBD_DGRAM_ADMISSION = 9 /* inside SEALED only */
} bbd_dgram_kind;

typedef struct bbd_dgram {
    bbd_dgram_kind kind;
    const uint8_t *body; /* handshake, envelope, fragment data, Noise message
                          * (NOISE1: without its padding) or the sealed
                          * ciphertext with its tag (borrowed) */
    size_t body_len;
    uint64_t nonce;      /* SEALED only */
    /* FRAGMENT only: */
    uint32_t msg_id, total, index, count;
    uint16_t chunk;
} bbd_dgram;

/* Decode one datagram p[0..n). max_message caps an envelope (whole or
 * reassembled) and max_handshake a handshake body (also a Noise message).
 * BB_EPARSE (not ours, unknown kind, inconsistent fragment, a NOISE1 under
 * its padding, a SEALED too short for its tag) or BB_ELIMIT (over a cap),
 * err naming the field. ADMISSION is decoded too (it is only ever found
 * inside a SEALED one). Borrows p. */
int bbd_dgram_decode(const uint8_t *p, size_t n, size_t max_message, size_t max_handshake,
                     bbd_dgram *out, bb_error *err);

/* Write the 2-byte header of a HELLO, HELLO_ACK or ENVELOPE datagram. */
void bbd_dgram_header_encode(bbd_dgram_kind kind, uint8_t out[BBD_DGRAM_HEADER]);
/* Write the 16-byte header of fragment index of a total-byte message cut
 * into chunk-byte pieces. */
void bbd_dgram_fragment_header_encode(uint32_t msg_id, uint32_t total, uint16_t chunk,
                                      uint32_t index, uint8_t out[BBD_DGRAM_FRAGMENT_HEADER]);

#endif
