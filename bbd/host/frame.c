/*
 * frame.c — the TCP frame codec (frame.h): header decode against per-kind
 * caps before any allocation, whole-frame decode for buffers that hold a
 * frame, and header encode.
 */
#include "bbd/host/frame.h"

/* libbbir's varint codec: minimal encodings only, never reads past the
 * buffer. */
#include "bb/uvarint.h"

static int bad_varint(bb_error *err, const char *what, bb_uvarint_rc rc)
{
    return bb_error_set(err, BB_EPARSE, "frame: %s: %s", what, bb_uvarint_rc_str(rc));
}

int bbd_frame_header_decode(const uint8_t *p, size_t n, const bbd_frame_limits *lim,
                            bbd_frame_header *out, bb_error *err)
{
    *out = (bbd_frame_header){0};
    uint64_t body_len, payload_len;
    size_t used_body, used_payload;

    bb_uvarint_rc rc = bb_uvarint_decode(p, n, BB_UVARINT_MAX_U64, &body_len, &used_body);
    if (rc == BB_UVARINT_TRUNC)
        return BB_OK;
    if (rc != BB_UVARINT_OK)
        return bad_varint(err, "frame length", rc);
    if (body_len == 0)
        return bb_error_set(err, BB_EPARSE, "frame: empty frame");
    if (used_body >= n)
        return BB_OK;

    uint8_t tag = p[used_body];
    bbd_frame_kind kind;
    size_t cap;
    const char *kind_name;
    if (tag == 0x0a) {
        kind = BBD_FRAME_HANDSHAKE;
        cap = lim->max_handshake;
        kind_name = "handshake";
    } else if (tag == 0x12) {
        kind = BBD_FRAME_ENVELOPE;
        cap = lim->max_envelope;
        kind_name = "envelope";
    } else if (tag == 0x1a) {
        kind = BBD_FRAME_ADMISSION;
        cap = lim->max_admission;
        kind_name = "admission";
    } else {
        return bb_error_set(err, BB_EPARSE,
                            "frame: unknown frame field tag 0x%02x (want 0x0a handshake, "
                            "0x12 envelope or 0x1a admission)",
                            tag);
    }
    if (cap == 0)
        return bb_error_set(err, BB_EPARSE, "frame: unexpected %s frame at this point",
                            kind_name);

    rc = bb_uvarint_decode(p + used_body + 1, n - used_body - 1, BB_UVARINT_MAX_U64,
                            &payload_len, &used_payload);
    if (rc == BB_UVARINT_TRUNC)
        return BB_OK;
    if (rc != BB_UVARINT_OK)
        return bad_varint(err, "payload length", rc);
    /* The caps are checked before the consistency test so that a huge
     * length is always reported as what it is. */
    if (payload_len > cap)
        return bb_error_set(err, BB_ELIMIT,
                            "frame: %s of %llu bytes is over the cap of %zu bytes", kind_name,
                            (unsigned long long)payload_len, cap);
    if (body_len != 1 + (uint64_t)used_payload + payload_len)
        return bb_error_set(err, BB_EPARSE,
                            "frame: frame length %llu does not match its %s length %llu",
                            (unsigned long long)body_len, kind_name,
                            (unsigned long long)payload_len);
    out->complete = true;
    out->kind = kind;
    out->header_len = used_body + 1 + used_payload;
    out->payload_len = (size_t)payload_len;
    return BB_OK;
}

int bbd_frame_decode(const uint8_t *p, size_t n, const bbd_frame_limits *lim,
                     bbd_frame_header *hdr, const uint8_t **payload, size_t *consumed,
                     bb_error *err)
{
    int rc = bbd_frame_header_decode(p, n, lim, hdr, err);
    if (rc != BB_OK)
        return rc;
    if (!hdr->complete || n - hdr->header_len < hdr->payload_len)
        return bb_error_set(err, BB_ETRUNC, "frame: truncated (%zu bytes available)", n);
    *payload = p + hdr->header_len;
    *consumed = hdr->header_len + hdr->payload_len;
    return BB_OK;
}

size_t bbd_frame_header_encode(bbd_frame_kind kind, size_t payload_len,
                               uint8_t out[BBD_FRAME_HEADER_MAX])
{
    uint64_t body_len = 1 + bb_uvarint_size(payload_len) + (uint64_t)payload_len;
    size_t n = bb_uvarint_encode(body_len, out);
    out[n++] = (uint8_t)(kind << 3 | 2); /* field number, wire type 2 */
    n += bb_uvarint_encode(payload_len, out + n);
    return n;
}
