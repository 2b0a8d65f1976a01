/*
 * noise_payload.c — the libp2p noise handshake payload (noise_payload.h):
 * encode with a signature made once per static key, decode strictly with
 * bounds (each known field at most once, wire types checked, unknown
 * fields skipped), verify the signature against the handshake's key.
 */
#include "bbd/host/noise_payload.h"

#include <string.h>

#include "bb/bytes.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };
enum { F_KEY = 1, F_SIG = 2, F_DATA = 3 };

#define PREFIX_LEN (sizeof BBD_NOISE_SIG_PREFIX - 1)

static void signed_message(const uint8_t static_pub[32], uint8_t out[PREFIX_LEN + 32])
{
    memcpy(out, BBD_NOISE_SIG_PREFIX, PREFIX_LEN);
    memcpy(out + PREFIX_LEN, static_pub, 32);
}

int bbd_noise_sign_static(const bb_keypair *id, const uint8_t static_pub[32],
                          uint8_t sig[BB_ED25519_SIG_LEN], bb_error *err)
{
    uint8_t msg[PREFIX_LEN + 32];
    signed_message(static_pub, msg);
    return bb_keypair_sign(id, msg, sizeof msg, sig, err);
}

static void put_field(bb_writer *w, unsigned field, const void *d, size_t n)
{
    bb_writer_put_uvarint(w, (uint64_t)field << 3 | WT_LEN);
    bb_writer_put_delimited(w, d, n);
}

int bbd_noise_payload_encode(const uint8_t id_pk[BB_ED25519_PK_LEN],
                             const uint8_t sig[BB_ED25519_SIG_LEN], const uint8_t *data,
                             size_t data_len, uint8_t *out, size_t cap, size_t *out_len,
                             bb_error *err)
{
    uint8_t key[BB_PUBKEY_PROTO_LEN];
    bb_pubkey_proto_encode(id_pk, key);
    bb_writer w;
    bb_writer_init_fixed(&w, out, cap);
    put_field(&w, F_KEY, key, sizeof key);
    put_field(&w, F_SIG, sig, BB_ED25519_SIG_LEN);
    if (data_len)
        put_field(&w, F_DATA, data, data_len);
    if (w.failed)
        return bb_error_set(err, BB_EFULL, "noise payload: does not fit in %zu bytes", cap);
    *out_len = w.len;
    return BB_OK;
}

static int reader_error(const bb_reader *r, const char *what, bb_error *err)
{
    return bb_error_set(err, r->status == BB_ETRUNC ? BB_ETRUNC : BB_EPARSE,
                        "noise payload: %s at byte %zu: %s", what, r->fail_at,
                        r->why ? r->why : "malformed");
}

/* Skip a field we do not know (protobuf: later revisions may add some). */
static bool skip(bb_reader *r, unsigned wt)
{
    uint64_t v;
    const uint8_t *d;
    size_t l;
    switch (wt) {
    case WT_VARINT: return bb_reader_uvarint(r, &v);
    case WT_LEN: return bb_reader_delimited(r, &d, &l);
    case WT_I64: return bb_reader_view(r, 8, &d);
    case WT_I32: return bb_reader_view(r, 4, &d);
    default: return bb_reader_fail(r, r->pos, BB_EPARSE, "unsupported wire type");
    }
}

/* The three known fields as views (key and sig required, once each). */
static int decode_fields(const uint8_t *p, size_t n, const uint8_t *f[4], size_t fl[4],
                         bb_error *err)
{
    static const char *const NAMES[4] = {"", "identity_key", "identity_sig", "data"};
    bb_reader r;
    bb_reader_init(&r, p, n);
    while (bb_reader_left(&r)) {
        size_t at = r.pos;
        uint64_t tag;
        if (!bb_reader_uvarint(&r, &tag))
            return reader_error(&r, "field tag", err);
        uint64_t field = tag >> 3;
        unsigned wt = (unsigned)(tag & 7);
        if (field == 0)
            return bb_error_set(err, BB_EPARSE, "noise payload: field number 0 at byte %zu", at);
        if (field > F_DATA) {
            if (!skip(&r, wt))
                return reader_error(&r, "unknown field", err);
            continue;
        }
        if (wt != WT_LEN)
            return bb_error_set(err, BB_EPARSE, "noise payload: %s has wire type %u (byte %zu)",
                                NAMES[field], wt, at);
        if (f[field])
            return bb_error_set(err, BB_EPARSE, "noise payload: %s repeated at byte %zu",
                                NAMES[field], at);
        if (!bb_reader_delimited(&r, &f[field], &fl[field]))
            return reader_error(&r, NAMES[field], err);
    }
    if (!f[F_KEY] || !f[F_SIG])
        return bb_error_set(err, BB_EPARSE, "noise payload: no %s",
                            f[F_KEY] ? "identity_sig" : "identity_key");
    return BB_OK;
}

int bbd_noise_payload_verify(const uint8_t *p, size_t n, const uint8_t remote_static[32],
                             bbd_noise_identity *out, bb_error *err)
{
    memset(out, 0, sizeof *out);
    const uint8_t *f[4] = {0};
    size_t fl[4] = {0};
    int rc = decode_fields(p, n, f, fl, err);
    if (rc)
        return rc;
    if ((rc = bb_pubkey_proto_decode(f[F_KEY], fl[F_KEY], out->pk, err)))
        return bb_error_prefix(err, "noise payload: identity_key");
    if (fl[F_SIG] != BB_ED25519_SIG_LEN)
        return bb_error_set(err, BB_EPARSE, "noise payload: identity_sig of %zu bytes, want %d",
                            fl[F_SIG], BB_ED25519_SIG_LEN);
    uint8_t msg[PREFIX_LEN + 32];
    signed_message(remote_static, msg);
    if (bb_ed25519_verify(out->pk, msg, sizeof msg, f[F_SIG], NULL) != BB_OK)
        return bb_error_set(err, BB_EVALIDATE,
                            "noise payload: identity_sig does not sign the handshake's static "
                            "key with identity_key");
    bb_peerid_from_pubkey(out->pk, &out->peer);
    out->data = f[F_DATA];
    out->data_len = fl[F_DATA];
    return BB_OK;
}
