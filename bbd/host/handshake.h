/*
 * handshake.h — the transport handshake codec (proto/bb_envelope.proto,
 * message Handshake): pure functions over bytes with explicit limits, no
 * loop and no allocation, so they can be fuzzed on their own.
 *
 *   message Handshake {
 *     bytes peer_id = 1;                    // binary PeerId of the sender
 *     repeated bytes listen_addresses = 2;  // binary multiaddrs it accepts on
 *     repeated string targets = 3;          // targets (peer classes) it runs
 *     uint32 version = 4;                   // currently 1
 *   }
 *
 * TCP sends it as the first frame of a connection, UDP in HELLO datagrams.
 * Decoding is strict where a correct peer cannot differ (exactly one valid
 * PeerId, every address a valid multiaddr, targets 1..255 printable ASCII
 * bytes, version 1, bounded counts) and lenient only where protobuf asks
 * for it (unknown fields are skipped, so later versions can add some).
 */
#ifndef BBD_HOST_HANDSHAKE_H
#define BBD_HOST_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "bb/status.h"

#define BBD_HANDSHAKE_VERSION 2 /* 2: envelope stamps (fields 4-6) are fixed64 */
#define BBD_HANDSHAKE_MAX_BYTES 65536 /* one encoded Handshake */
#define BBD_HANDSHAKE_MAX_ADDRS 32
#define BBD_HANDSHAKE_MAX_TARGETS 64
#define BBD_HANDSHAKE_TARGET_MAX 255 /* bytes of one target name */

/* A target name (borrowed, not NUL-terminated). */
typedef struct bbd_handshake_target {
    const char *name;
    size_t len;
} bbd_handshake_target;

/* A decoded handshake; addrs and targets borrow the decoded buffer. */
typedef struct bbd_handshake {
    bb_peerid peer;
    uint32_t version;
    size_t n_addrs;
    bb_multiaddr_ref addrs[BBD_HANDSHAKE_MAX_ADDRS];
    size_t n_targets;
    bbd_handshake_target targets[BBD_HANDSHAKE_MAX_TARGETS];
} bbd_handshake;

/* Decode p[0..n) (n <= BBD_HANDSHAKE_MAX_BYTES). BB_EPARSE (malformed,
 * missing or repeated peer_id, bad target name), BB_ETRUNC (ends inside a
 * field), BB_ELIMIT (too many bytes, addresses or targets),
 * BB_EUNSUPPORTED (another version); a bad PeerId or address gives the
 * status of its validator (bb_peerid_validate, bb_multiaddr_validate). err
 * names the field and byte offset. */
int bbd_handshake_decode(const uint8_t *p, size_t n, bbd_handshake *out, bb_error *err);

/* Encode h (the same limits apply; version is written as given) into
 * out[cap]; *out_len gets the size. BB_EFULL when cap is too small,
 * BB_EINVAL / BB_ELIMIT for content the decoder would refuse. */
int bbd_handshake_encode(const bbd_handshake *h, uint8_t *out, size_t cap, size_t *out_len,
                         bb_error *err);

/* The Admission message (bb_envelope.proto): a secure connection's first
 * frame from the responder, `string refused = 1` absent when admitted. */
#define BBD_ADMISSION_MAX_BYTES 512  /* an encoded Admission */
#define BBD_ADMISSION_REASON_MAX 256 /* bytes of a refusal reason */

/* Encode "admitted" (refused NULL) or a refusal (cut at the reason cap)
 * into out[BBD_ADMISSION_MAX_BYTES]; returns the size. */
size_t bbd_admission_encode(const char *refused, uint8_t out[BBD_ADMISSION_MAX_BYTES]);
/* Decode p[0..n): reason gets the refusal as text (bytes outside
 * printable ASCII shown as '?'), "" when admitted. BB_EPARSE / BB_ETRUNC /
 * BB_ELIMIT with err naming the problem. */
int bbd_admission_decode(const uint8_t *p, size_t n, char reason[BBD_ADMISSION_REASON_MAX + 1],
                         bb_error *err);

#endif
