/*
 * handshake.c — Handshake protobuf decode/encode (handshake.h). The decoder
 * walks fields with explicit bounds, keeps views into the input, validates
 * every PeerId, multiaddr and target name, and names the field and byte
 * offset of the first problem.
 */
#include "bbd/host/handshake.h"

#include <string.h>

/* libbbir's bounded reader and fixed writer; varints minimal only. */
#include "bb/bytes.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };
enum { F_PEER_ID = 1, F_LISTEN = 2, F_TARGETS = 3, F_VERSION = 4 };

static bool target_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > BBD_HANDSHAKE_TARGET_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return false;
    return true;
}

/* Read one varint; BB_OK or an error naming what and where. */
static int read_varint(bb_reader *r, const char *what, uint64_t *v, bb_error *err)
{
    if (bb_reader_uvarint_minimal(r, v))
        return BB_OK;
    if (r->status == BB_ETRUNC)
        return bb_error_set(err, BB_ETRUNC, "handshake: %s truncated at byte %zu", what,
                            r->fail_at);
    return bb_error_set(err, BB_EPARSE, "handshake: %s at byte %zu: %s", what, r->fail_at,
                        r->why);
}

/* Read a length-delimited value into a view. */
static int read_bytes(bb_reader *r, const char *what, const uint8_t **data, size_t *len,
                      bb_error *err)
{
    uint64_t l;
    size_t start = r->pos;
    *data = NULL; /* set on every path: the compiler cannot see bb_error_set() is never BB_OK */
    *len = 0;
    int rc = read_varint(r, what, &l, err);
    if (rc)
        return rc;
    if (l > bb_reader_left(r))
        return bb_error_set(err, BB_ETRUNC,
                            "handshake: %s at byte %zu claims %llu bytes, %zu remain", what,
                            start, (unsigned long long)l, bb_reader_left(r));
    *len = (size_t)l;
    bb_reader_view(r, *len, data);
    return BB_OK;
}

static int skip_field(bb_reader *r, unsigned wire_type, uint64_t field, bb_error *err)
{
    uint64_t v;
    const uint8_t *d;
    size_t l, at = r->pos;
    switch (wire_type) {
    case WT_VARINT: return read_varint(r, "unknown varint field", &v, err);
    case WT_LEN: return read_bytes(r, "unknown bytes field", &d, &l, err);
    case WT_I64:
    case WT_I32:
        if (!bb_reader_view(r, wire_type == WT_I64 ? 8 : 4, &d))
            return bb_error_set(err, BB_ETRUNC, "handshake: field %llu truncated at byte %zu",
                                (unsigned long long)field, at);
        return BB_OK;
    default:
        return bb_error_set(err, BB_EPARSE,
                            "handshake: field %llu has unsupported wire type %u at byte %zu",
                            (unsigned long long)field, wire_type, at);
    }
}

static int decode_field(bb_reader *r, uint64_t field, unsigned wt, size_t at, bool *have_peer,
                        bbd_handshake *out, bb_error *err)
{
    static const unsigned want_wt[] = {0, WT_LEN, WT_LEN, WT_LEN, WT_VARINT};
    if (wt != want_wt[field])
        return bb_error_set(err, BB_EPARSE,
                            "handshake: field %llu has wire type %u, want %u (byte %zu)",
                            (unsigned long long)field, wt, want_wt[field], at);
    const uint8_t *d;
    size_t l;
    uint64_t v;
    int rc;
    switch (field) {
    case F_PEER_ID:
        if (*have_peer)
            return bb_error_set(err, BB_EPARSE, "handshake: peer_id repeated at byte %zu", at);
        if ((rc = read_bytes(r, "peer_id", &d, &l, err)))
            return rc;
        if ((rc = bb_peerid_from_bytes(d, l, &out->peer, err)))
            return bb_error_prefix(err, "handshake: peer_id at byte %zu", at);
        *have_peer = true;
        return BB_OK;
    case F_LISTEN:
        if ((rc = read_bytes(r, "listen_addresses", &d, &l, err)))
            return rc;
        if (out->n_addrs == BBD_HANDSHAKE_MAX_ADDRS)
            return bb_error_set(err, BB_ELIMIT,
                                "handshake: more than %d listen_addresses (byte %zu)",
                                BBD_HANDSHAKE_MAX_ADDRS, at);
        if ((rc = bb_multiaddr_validate(d, l, err)))
            return bb_error_prefix(err, "handshake: listen_addresses[%zu] at byte %zu",
                                   out->n_addrs, at);
        out->addrs[out->n_addrs++] = (bb_multiaddr_ref){d, l};
        return BB_OK;
    case F_TARGETS:
        if ((rc = read_bytes(r, "targets", &d, &l, err)))
            return rc;
        if (out->n_targets == BBD_HANDSHAKE_MAX_TARGETS)
            return bb_error_set(err, BB_ELIMIT, "handshake: more than %d targets (byte %zu)",
                                BBD_HANDSHAKE_MAX_TARGETS, at);
        if (!target_name_ok((const char *)d, l))
            return bb_error_set(err, BB_EPARSE,
                                "handshake: targets[%zu] at byte %zu is not 1..%d printable "
                                "ASCII characters",
                                out->n_targets, at, BBD_HANDSHAKE_TARGET_MAX);
        out->targets[out->n_targets++] = (bbd_handshake_target){(const char *)d, l};
        return BB_OK;
    default: /* F_VERSION */
        if ((rc = read_varint(r, "version", &v, err)))
            return rc;
        if (v > UINT32_MAX)
            return bb_error_set(err, BB_EPARSE, "handshake: version at byte %zu over 32 bits",
                                at);
        out->version = (uint32_t)v;
        return BB_OK;
    }
}

int bbd_handshake_decode(const uint8_t *p, size_t n, bbd_handshake *out, bb_error *err)
{
    memset(out, 0, sizeof *out);
    if (n > BBD_HANDSHAKE_MAX_BYTES)
        return bb_error_set(err, BB_ELIMIT, "handshake: %zu bytes, over the cap of %d", n,
                            BBD_HANDSHAKE_MAX_BYTES);
    bool have_peer = false;
    bb_reader r;
    bb_reader_init(&r, p, n);
    while (bb_reader_left(&r)) {
        size_t at = r.pos;
        uint64_t tag;
        int rc = read_varint(&r, "field tag", &tag, err);
        if (rc)
            return rc;
        uint64_t field = tag >> 3;
        unsigned wt = (unsigned)(tag & 7);
        if (field == 0)
            return bb_error_set(err, BB_EPARSE, "handshake: field number 0 at byte %zu", at);
        if (field <= F_VERSION)
            rc = decode_field(&r, field, wt, at, &have_peer, out, err);
        else
            rc = skip_field(&r, wt, field, err);
        if (rc)
            return rc;
    }
    if (!have_peer)
        return bb_error_set(err, BB_EPARSE, "handshake: no peer_id");
    if (out->version != BBD_HANDSHAKE_VERSION)
        return bb_error_set(err, BB_EUNSUPPORTED,
                            "handshake: version %u is not supported (this node speaks %d)",
                            out->version, BBD_HANDSHAKE_VERSION);
    return BB_OK;
}

/* ---- encode ---------------------------------------------------------------------- */

static void put_bytes(bb_writer *w, unsigned field, const void *d, size_t n)
{
    bb_writer_put_uvarint(w, (uint64_t)field << 3 | WT_LEN);
    bb_writer_put_delimited(w, d, n);
}

int bbd_handshake_encode(const bbd_handshake *h, uint8_t *out, size_t cap, size_t *out_len,
                         bb_error *err)
{
    int rc;
    if ((rc = bb_peerid_validate(h->peer.bytes, h->peer.len, err)))
        return bb_error_prefix(err, "handshake: own peer_id");
    if (h->n_addrs > BBD_HANDSHAKE_MAX_ADDRS || h->n_targets > BBD_HANDSHAKE_MAX_TARGETS)
        return bb_error_set(err, BB_ELIMIT,
                            "handshake: %zu addresses and %zu targets, caps are %d and %d",
                            h->n_addrs, h->n_targets, BBD_HANDSHAKE_MAX_ADDRS,
                            BBD_HANDSHAKE_MAX_TARGETS);
    for (size_t i = 0; i < h->n_addrs; i++)
        if ((rc = bb_multiaddr_validate(h->addrs[i].data, h->addrs[i].len, err)))
            return bb_error_prefix(err, "handshake: listen address %zu", i);
    for (size_t i = 0; i < h->n_targets; i++)
        if (!target_name_ok(h->targets[i].name, h->targets[i].len))
            return bb_error_set(err, BB_EINVAL,
                                "handshake: target %zu is not 1..%d printable ASCII characters",
                                i, BBD_HANDSHAKE_TARGET_MAX);
    if (cap > BBD_HANDSHAKE_MAX_BYTES)
        cap = BBD_HANDSHAKE_MAX_BYTES; /* never write what a peer would refuse */
    bb_writer w;
    bb_writer_init_fixed(&w, out, cap);
    put_bytes(&w, F_PEER_ID, h->peer.bytes, h->peer.len);
    for (size_t i = 0; i < h->n_addrs; i++)
        put_bytes(&w, F_LISTEN, h->addrs[i].data, h->addrs[i].len);
    for (size_t i = 0; i < h->n_targets; i++)
        put_bytes(&w, F_TARGETS, h->targets[i].name, h->targets[i].len);
    if (h->version) {
        bb_writer_put_uvarint(&w, (uint64_t)F_VERSION << 3 | WT_VARINT);
        bb_writer_put_uvarint(&w, h->version);
    }
    if (w.failed)
        return bb_error_set(err, BB_EFULL, "handshake: does not fit in %zu bytes", cap);
    *out_len = w.len;
    return BB_OK;
}

/* ---- admission -------------------------------------------------------------------- */

size_t bbd_admission_encode(const char *refused, uint8_t out[BBD_ADMISSION_MAX_BYTES])
{
    if (!refused)
        return 0;
    if (!*refused)
        refused = "refused"; /* an empty reason would read as admitted */
    size_t n = strlen(refused);
    bb_writer w;
    bb_writer_init_fixed(&w, out, BBD_ADMISSION_MAX_BYTES);
    put_bytes(&w, 1, refused, n < BBD_ADMISSION_REASON_MAX ? n : BBD_ADMISSION_REASON_MAX);
    return w.len;
}

int bbd_admission_decode(const uint8_t *p, size_t n, char reason[BBD_ADMISSION_REASON_MAX + 1],
                         bb_error *err)
{
    reason[0] = '\0';
    if (n > BBD_ADMISSION_MAX_BYTES)
        return bb_error_set(err, BB_ELIMIT, "admission: %zu bytes, over the cap of %d", n,
                            BBD_ADMISSION_MAX_BYTES);
    bb_reader r;
    bb_reader_init(&r, p, n);
    while (bb_reader_left(&r)) {
        size_t at = r.pos;
        uint64_t tag;
        int rc = read_varint(&r, "admission field tag", &tag, err);
        if (rc)
            return rc;
        if (tag >> 3 == 0)
            return bb_error_set(err, BB_EPARSE, "admission: field number 0 at byte %zu", at);
        if (tag != (1u << 3 | WT_LEN)) {
            if ((rc = skip_field(&r, (unsigned)(tag & 7), tag >> 3, err)))
                return rc;
            continue;
        }
        const uint8_t *d;
        size_t l;
        if ((rc = read_bytes(&r, "admission refused", &d, &l, err)))
            return rc;
        if (!l) {
            d = (const uint8_t *)"refused";
            l = 7;
        }
        if (l > BBD_ADMISSION_REASON_MAX)
            l = BBD_ADMISSION_REASON_MAX;
        for (size_t i = 0; i < l; i++)
            reason[i] = d[i] >= 0x20 && d[i] < 0x7f ? (char)d[i] : '?';
        reason[l] = '\0';
    }
    return BB_OK;
}
