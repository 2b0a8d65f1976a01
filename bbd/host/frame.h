/*
 * frame.h — the TCP frame codec: pure functions over bytes, no loop, no
 * socket, no allocation (so they can be fuzzed on their own).
 *
 * A stream carries frames (proto/bb_envelope.proto, message Frame):
 *
 *     frame = uvarint(body_len) body
 *     body  = 0x0a uvarint(n) Handshake[n]      Frame.handshake (field 1)
 *           | 0x12 uvarint(n) WireEnvelope[n]   Frame.envelope  (field 2)
 *           | 0x1a uvarint(n) Admission[n]      Frame.admission (field 3)
 *     body_len = 1 + size(uvarint(n)) + n
 *
 * i.e. each frame is a length-delimited protobuf Frame holding exactly one
 * of its fields. The whole header (at most BBD_FRAME_HEADER_MAX bytes)
 * comes before the payload, so a reader knows the kind and size of a frame
 * — and refuses it against its cap — before it allocates anything. The two
 * lengths must agree, varints must be minimal, and each kind has its own
 * cap; a cap of 0 means the kind is not allowed at this point of the
 * stream (a handshake comes first and only once; on a secure channel the
 * handshake travels inside Noise's, and the responder's first frame is
 * its admission verdict, handshake.h).
 */
#ifndef BBD_HOST_FRAME_H
#define BBD_HOST_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/status.h"

#define BBD_FRAME_HEADER_MAX 21 /* 10-byte body length + tag + 10-byte length */

typedef enum bbd_frame_kind {
    BBD_FRAME_HANDSHAKE = 1, /* Frame.handshake */
    BBD_FRAME_ENVELOPE = 2,  /* Frame.envelope */
    BBD_FRAME_ADMISSION = 3  /* Frame.admission */
} bbd_frame_kind;

/* Per-kind payload caps in bytes; 0 refuses the kind. */
typedef struct bbd_frame_limits {
    size_t max_handshake;
    size_t max_envelope;
    size_t max_admission;
} bbd_frame_limits;

typedef struct bbd_frame_header {
    bool complete;       /* false: more bytes are needed to read the header */
    bbd_frame_kind kind;
    size_t header_len;   /* bytes before the payload */
    size_t payload_len;  /* Handshake / WireEnvelope bytes after the header */
} bbd_frame_header;

/* Read the header at the start of p[0..n). BB_OK with out->complete false
 * when p ends inside the header (no error: read more and call again);
 * BB_OK with out->complete true and the kind and sizes; or BB_EPARSE
 * (malformed: bad varint, unknown field, lengths disagree, kind not allowed)
 * / BB_ELIMIT (payload over its cap) with err naming the problem. Borrows p. */
int bbd_frame_header_decode(const uint8_t *p, size_t n, const bbd_frame_limits *lim,
                            bbd_frame_header *out, bb_error *err);

/* Decode one complete frame at the start of p[0..n): the header as above,
 * *payload pointing into p and *consumed the frame's total size. BB_ETRUNC
 * when p does not hold the whole frame. Borrows p. */
int bbd_frame_decode(const uint8_t *p, size_t n, const bbd_frame_limits *lim,
                     bbd_frame_header *hdr, const uint8_t **payload, size_t *consumed,
                     bb_error *err);

/* Write the header of a frame of kind with a payload of payload_len bytes
 * into out; returns its size (<= BBD_FRAME_HEADER_MAX). */
size_t bbd_frame_header_encode(bbd_frame_kind kind, size_t payload_len,
                               uint8_t out[BBD_FRAME_HEADER_MAX]);

#endif
