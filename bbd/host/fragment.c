/*
 * fragment.c — UDP datagram decode/encode (fragment.h): the kind byte, and
 * for fragments a header whose every field is checked against the others
 * and the caps before a reassembly could allocate for it.
 */
#include "bbd/host/fragment.h"

#include <stdbool.h>

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static int decode_fragment(const uint8_t *p, size_t n, size_t max_message, bbd_dgram *out,
                           bb_error *err)
{
    if (n < BBD_DGRAM_FRAGMENT_HEADER)
        return bb_error_set(err, BB_EPARSE, "datagram: fragment of %zu bytes, header needs %d",
                            n, BBD_DGRAM_FRAGMENT_HEADER);
    out->msg_id = get_u32(p + 2);
    out->total = get_u32(p + 6);
    out->chunk = (uint16_t)(p[10] << 8 | p[11]);
    out->index = get_u32(p + 12);
    out->body = p + BBD_DGRAM_FRAGMENT_HEADER;
    out->body_len = n - BBD_DGRAM_FRAGMENT_HEADER;
    if (out->total > max_message)
        return bb_error_set(err, BB_ELIMIT,
                            "datagram: fragmented envelope of %u bytes is over the cap of %zu",
                            out->total, max_message);
    if (out->chunk < BBD_DGRAM_MIN_CHUNK)
        return bb_error_set(err, BB_EPARSE, "datagram: fragment chunk %u under the minimum %d",
                            out->chunk, BBD_DGRAM_MIN_CHUNK);
    if (out->total <= out->chunk)
        return bb_error_set(err, BB_EPARSE,
                            "datagram: envelope of %u bytes fragmented into chunks of %u",
                            out->total, out->chunk);
    out->count = (uint32_t)((out->total + (uint64_t)out->chunk - 1) / out->chunk);
    if (out->index >= out->count)
        return bb_error_set(err, BB_EPARSE, "datagram: fragment index %u of %u", out->index,
                            out->count);
    uint64_t want = out->index + 1 == out->count
                        ? out->total - (uint64_t)out->index * out->chunk
                        : out->chunk;
    if (out->body_len != want)
        return bb_error_set(err, BB_EPARSE,
                            "datagram: fragment %u of %u carries %zu bytes, want %llu",
                            out->index, out->count, out->body_len, (unsigned long long)want);
    return BB_OK;
}

/* NOISE1..3 (the message; NOISE1 without its padding) and ADMISSION. */
static int decode_noise(const uint8_t *p, size_t n, size_t max_handshake, bbd_dgram *out,
                        bb_error *err)
{
    out->kind = (bbd_dgram_kind)p[1];
    if (out->kind == BBD_DGRAM_NOISE1) {
        if (n < BBD_DGRAM_NOISE1_MIN)
            return bb_error_set(err, BB_EPARSE,
                                "datagram: Noise message 1 of %zu bytes, padded to at least %d",
                                n, BBD_DGRAM_NOISE1_MIN);
        out->body_len = 32; /* the message: e; the rest is padding */
        return BB_OK;
    }
    bool empty_ok = out->kind == BBD_DGRAM_ADMISSION; /* admitted */
    if ((out->body_len == 0 && !empty_ok) || out->body_len > max_handshake)
        return bb_error_set(err, out->body_len ? BB_ELIMIT : BB_EPARSE,
                            "datagram: handshake message of %zu bytes (1..%zu)", out->body_len,
                            max_handshake);
    return BB_OK;
}

int bbd_dgram_decode(const uint8_t *p, size_t n, size_t max_message, size_t max_handshake,
                     bbd_dgram *out, bb_error *err)
{
    *out = (bbd_dgram){0};
    if (n < BBD_DGRAM_HEADER || p[0] != BBD_DGRAM_MAGIC)
        return bb_error_set(err, BB_EPARSE, "datagram: not a bbd datagram (%zu bytes)", n);
    if (n > BBD_DGRAM_MAX_BYTES)
        return bb_error_set(err, BB_ELIMIT, "datagram: %zu bytes, over %d", n,
                            BBD_DGRAM_MAX_BYTES);
    out->body = p + BBD_DGRAM_HEADER;
    out->body_len = n - BBD_DGRAM_HEADER;
    switch (p[1]) {
    case BBD_DGRAM_HELLO:
    case BBD_DGRAM_HELLO_ACK:
        out->kind = (bbd_dgram_kind)p[1];
        if (out->body_len == 0)
            return bb_error_set(err, BB_EPARSE, "datagram: empty handshake");
        if (out->body_len > max_handshake)
            return bb_error_set(err, BB_ELIMIT,
                                "datagram: handshake of %zu bytes is over the cap of %zu",
                                out->body_len, max_handshake);
        return BB_OK;
    case BBD_DGRAM_ENVELOPE:
        out->kind = BBD_DGRAM_ENVELOPE;
        if (out->body_len > max_message)
            return bb_error_set(err, BB_ELIMIT,
                                "datagram: envelope of %zu bytes is over the cap of %zu",
                                out->body_len, max_message);
        return BB_OK;
    case BBD_DGRAM_FRAGMENT:
        out->kind = BBD_DGRAM_FRAGMENT;
        return decode_fragment(p, n, max_message, out, err);
    case BBD_DGRAM_NOISE1:
    case BBD_DGRAM_NOISE2:
    case BBD_DGRAM_NOISE3:
    case BBD_DGRAM_ADMISSION:
        return decode_noise(p, n, max_handshake, out, err);
    case BBD_DGRAM_SEALED:
        out->kind = BBD_DGRAM_SEALED;
        if (out->body_len < BBD_DGRAM_NONCE + 16 + 1)
            return bb_error_set(err, BB_EPARSE, "datagram: sealed datagram of %zu bytes", n);
        for (int i = 0; i < BBD_DGRAM_NONCE; i++)
            out->nonce = out->nonce << 8 | out->body[i];
        out->body += BBD_DGRAM_NONCE;
        out->body_len -= BBD_DGRAM_NONCE;
        return BB_OK;
    default:
        return bb_error_set(err, BB_EPARSE, "datagram: unknown kind 0x%02x", p[1]);
    }
}

void bbd_dgram_header_encode(bbd_dgram_kind kind, uint8_t out[BBD_DGRAM_HEADER])
{
    out[0] = BBD_DGRAM_MAGIC;
    out[1] = (uint8_t)kind;
}

void bbd_dgram_fragment_header_encode(uint32_t msg_id, uint32_t total, uint16_t chunk,
                                      uint32_t index, uint8_t out[BBD_DGRAM_FRAGMENT_HEADER])
{
    bbd_dgram_header_encode(BBD_DGRAM_FRAGMENT, out);
    put_u32(out + 2, msg_id);
    put_u32(out + 6, total);
    out[10] = (uint8_t)(chunk >> 8);
    out[11] = (uint8_t)chunk;
    put_u32(out + 12, index);
}
