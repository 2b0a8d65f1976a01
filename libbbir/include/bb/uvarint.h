/*
 * bb/uvarint.h — multiformats unsigned varints: multiaddrs, PeerIds and
 * the TCP frame format share them.
 *
 * LEB128-style: 7 bits per byte, low group first, high bit = "more". The
 * multiformats spec caps a varint at 9 bytes (63 bits) and requires the
 * minimal encoding; a caller may allow 10 bytes where a full u64 is needed
 * (our private /site and /component values).
 */
#ifndef BB_UVARINT_H
#define BB_UVARINT_H

#include <stddef.h>
#include <stdint.h>

#define BB_UVARINT_MAX_SPEC 9 /* multiformats limit: 63 bits */
#define BB_UVARINT_MAX_U64 10 /* full u64 */

typedef enum bb_uvarint_rc {
    BB_UVARINT_OK = 0,
    BB_UVARINT_TRUNC,      /* buffer ended with the continuation bit set */
    BB_UVARINT_OVERLONG,   /* more than max_bytes, or value overflows u64 */
    BB_UVARINT_NONMINIMAL  /* e.g. 0x81 0x00 for 1 */
} bb_uvarint_rc;

/* Decode at most max_bytes from p[0..n). On success *used is the byte count. */
static inline bb_uvarint_rc bb_uvarint_decode(const uint8_t *p, size_t n, size_t max_bytes,
                                                uint64_t *value, size_t *used)
{
    if (n && max_bytes && p[0] < 0x80) { /* most lengths and codes: one byte */
        *value = p[0];
        *used = 1;
        return BB_UVARINT_OK;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < max_bytes; i++) {
        if (i >= n)
            return BB_UVARINT_TRUNC;
        uint8_t b = p[i];
        if (i == 9 && b > 1)
            return BB_UVARINT_OVERLONG; /* would need bit 64 and up */
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (b == 0 && i > 0)
                return BB_UVARINT_NONMINIMAL;
            *value = v;
            *used = i + 1;
            return BB_UVARINT_OK;
        }
    }
    return BB_UVARINT_OVERLONG;
}

/* Protobuf's reading (ONNX fields, envelopes, values): any encoding up to
 * 10 bytes, non-minimal ones too. One-byte values (tags, short lengths) and
 * inputs with 10 bytes left skip the per-byte bounds check: envelopes carry
 * several 9-byte nanosecond stamps. */
static inline bb_uvarint_rc bb_uvarint_read_u64(const uint8_t *p, size_t n, uint64_t *value,
                                                size_t *used)
{
    if (n && p[0] < 0x80) {
        *value = p[0];
        *used = 1;
        return BB_UVARINT_OK;
    }
    uint64_t v = 0, b;
    if (n >= BB_UVARINT_MAX_U64) { /* unrolled: no bounds checks, constant shifts */
#define BB_UVARINT_STEP(i)                   \
    b = p[i];                                \
    v |= (b & 0x7f) << (7 * (i));            \
    if (b < 0x80) {                          \
        *value = v;                          \
        *used = (i) + 1;                     \
        return BB_UVARINT_OK;                \
    }
        BB_UVARINT_STEP(0) BB_UVARINT_STEP(1) BB_UVARINT_STEP(2) BB_UVARINT_STEP(3)
        BB_UVARINT_STEP(4) BB_UVARINT_STEP(5) BB_UVARINT_STEP(6) BB_UVARINT_STEP(7)
        BB_UVARINT_STEP(8)
#undef BB_UVARINT_STEP
        b = p[9];
        if (b > 1)
            return BB_UVARINT_OVERLONG; /* would need bit 64 and up */
        *value = v | b << 63;
        *used = 10;
        return BB_UVARINT_OK;
    }
    for (size_t i = 0; i < n; i++) { /* fewer than 10 bytes left */
        b = p[i];
        v |= (b & 0x7f) << (7 * i);
        if (b < 0x80) {
            *value = v;
            *used = i + 1;
            return BB_UVARINT_OK;
        }
    }
    return BB_UVARINT_TRUNC;
}

/* Encoded size of v (1..10). */
static inline size_t bb_uvarint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Write v to p (room for bb_uvarint_size(v) bytes); returns bytes written. */
static inline size_t bb_uvarint_encode(uint64_t v, uint8_t *p)
{
    size_t i = 0;
    while (v >= 0x80) {
        p[i++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[i++] = (uint8_t)v;
    return i;
}

static inline const char *bb_uvarint_rc_str(bb_uvarint_rc rc)
{
    switch (rc) {
    case BB_UVARINT_OK: return "ok";
    case BB_UVARINT_TRUNC: return "truncated varint";
    case BB_UVARINT_OVERLONG: return "overlong varint";
    case BB_UVARINT_NONMINIMAL: return "non-minimal varint";
    }
    return "bad varint";
}

#endif
