/*
 * envelope.c — a hand-rolled codec for proto/bb_envelope.proto's
 * WireEnvelope (IR_AND_DSL.md Part 8):
 *
 *   message WireCorrelation { CorrelationKind kind = 1; uint64 wire_req_id = 2; }
 *   message SlotFill { bytes dest_suffix = 1; bytes payload = 2; bool trigger_only = 3; }
 *   message WireEnvelope {
 *     repeated bytes dest_peer_addresses = 1; repeated SlotFill fills = 2;
 *     WireCorrelation correlation = 3; fixed64 deadline_ns = 4; fixed64 sent_at_ns = 5;
 *     fixed64 echo_sent_at_ns = 6; uint64 echo_delay_ns = 7;
 *     repeated bytes src_peer_addresses = 8; StreamChunk chunk = 9; }
 *   message StreamChunk { uint64 stream_id = 1; uint64 total = 2; uint64 offset = 3;
 *     bytes data = 4; ChunkKind kind = 5; }
 *
 * Encoding is canonical proto3 (fields in number order, defaults omitted),
 * so bytes match what protobuf-c produces. Decoding is zero-copy (views
 * into the input), bounded by caps on fills and addresses, skips unknown
 * fields and rejects every malformed input with the byte offset. A fill
 * and a correlation in the shape the encoder writes them are read without
 * the general field walk (the rest, and anything malformed, take it). Fields
 * 4-7 are also read as the other integer wire type (varint / fixed64), so
 * envelopes queued in a snapshot from before the stamps became fixed64
 * still decode.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bb/le.h"
#include "bb/uvarint.h"
#include "libbbengine/src/engine_internal.h"

/* ---- decode ------------------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p;
    size_t len, pos;
} rd;

static int get_varint_long(rd *r, uint64_t *v)
{
    size_t used;
    bb_uvarint_rc rc = bb_uvarint_read_u64(r->p + r->pos, r->len - r->pos, v, &used);
    if (rc)
        return rc == BB_UVARINT_TRUNC ? BB_ETRUNC : BB_EDECODE;
    r->pos += used;
    return 0;
}

/* Tags and most lengths are one byte. */
static inline int get_varint(rd *r, uint64_t *v)
{
    if (r->pos < r->len && r->p[r->pos] < 0x80) {
        *v = r->p[r->pos++];
        return 0;
    }
    return get_varint_long(r, v);
}

static inline int get_bytes(rd *r, const uint8_t **data, size_t *n)
{
    uint64_t l;
    int rc = get_varint(r, &l);
    if (rc)
        return rc;
    if (l > r->len - r->pos)
        return BB_ETRUNC;
    *data = r->p + r->pos;
    *n = (size_t)l;
    r->pos += (size_t)l;
    return 0;
}

static int get_fixed64(rd *r, uint64_t *v)
{
    if (r->len - r->pos < 8)
        return BB_ETRUNC;
    *v = bb_le_get(r->p + r->pos, 8);
    r->pos += 8;
    return 0;
}

static int skip_field(rd *r, unsigned wt)
{
    uint64_t v;
    const uint8_t *d;
    size_t n;
    switch (wt) {
    case 0:
        return get_varint(r, &v);
    case 1:
        return get_fixed64(r, &v);
    case 2:
        return get_bytes(r, &d, &n);
    case 5:
        if (r->len - r->pos < 4)
            return BB_ETRUNC;
        r->pos += 4;
        return 0;
    default:
        return BB_EDECODE; /* groups and reserved wire types */
    }
}

/* Inline: get_varint reads a one-byte tag (every tag an encoder writes)
 * without the general varint reader. */
static inline int get_tag(rd *r, uint32_t *field, unsigned *wt)
{
    uint64_t t;
    int rc = get_varint(r, &t);
    if (rc)
        return rc;
    if ((t >> 3) == 0 || (t >> 3) > 0x1fffffff)
        return BB_EDECODE;
    *field = (uint32_t)(t >> 3);
    *wt = (unsigned)(t & 7);
    return 0;
}

/* Make room for one more element in an array that starts in the
 * envelope's inline storage (inl, BBE__ENV_INLINE of them) and moves to the
 * heap when it outgrows it, doubling from there. */
static int grow(void **arr, size_t n, size_t elem, const void *inl)
{
    if (n < BBE__ENV_INLINE || (n & (n - 1)) != 0)
        return 0;
    void *a = *arr == inl ? malloc(2 * n * elem) : realloc(*arr, 2 * n * elem);
    if (!a)
        return BB_ENOMEM;
    if (*arr == inl)
        memcpy(a, inl, n * elem);
    *arr = a;
    return 0;
}

static int push_addr(bb_engine_addr **arr, size_t *n, size_t max, const uint8_t *d, size_t len,
                     const bb_engine_addr *inl)
{
    if (*n >= max)
        return BB_ELIMIT;
    if (grow((void **)arr, *n, sizeof **arr, inl))
        return BB_ENOMEM;
    (*arr)[*n].data = d;
    (*arr)[*n].len = len;
    (*n)++;
    return 0;
}

/* A sub-message's fields, each handed to field_fn (which reads the value,
 * or returns BB_EDECODE for a known field of the wrong wire type); unknown
 * fields are skipped. On failure *err_off is the offset it broke at. */
typedef int (*field_fn)(rd *r, uint32_t field, unsigned wt, void *out);

static int decode_message(const uint8_t *d, size_t n, field_fn fn, void *out, size_t *err_off)
{
    rd r = {d, n, 0};
    while (r.pos < r.len) {
        uint32_t field;
        unsigned wt;
        int rc = get_tag(&r, &field, &wt);
        if (!rc)
            rc = fn(&r, field, wt, out);
        if (rc) {
            *err_off = r.pos;
            return rc;
        }
    }
    return 0;
}

static int fill_field(rd *r, uint32_t field, unsigned wt, void *out)
{
    bbe__fill *f = out;
    uint64_t v;
    int rc;
    if (field == 1 && wt == 2)
        return get_bytes(r, &f->suffix, &f->suffix_len);
    if (field == 2 && wt == 2)
        return get_bytes(r, &f->payload, &f->payload_len);
    if (field == 3 && wt == 0) {
        rc = get_varint(r, &v);
        f->trigger_only = v != 0;
        return rc;
    }
    return field <= 3 ? BB_EDECODE : skip_field(r, wt); /* known field, wrong wire type */
}

static int corr_field(rd *r, uint32_t field, unsigned wt, void *out)
{
    bbe__envelope *env = out;
    uint64_t v;
    if ((field == 1 || field == 2) && wt == 0) {
        int rc = get_varint(r, &v);
        if (!rc && field == 1)
            env->corr_kind = v <= 2 ? (int)v : -1;
        else if (!rc)
            env->wire_req_id = v;
        return rc;
    }
    return field <= 2 ? BB_EDECODE : skip_field(r, wt);
}

static int chunk_field(rd *r, uint32_t field, unsigned wt, void *out)
{
    bbe__chunk *c = out;
    uint64_t v = 0;
    if (field == 4 && wt == 2)
        return get_bytes(r, &c->data, &c->data_len);
    if (field == 6 && wt == 2)
        return get_bytes(r, &c->tail, &c->tail_len);
    if (field >= 1 && field <= 5 && field != 4 && wt == 0) {
        int rc = get_varint(r, &v);
        if (field == 1)
            c->stream_id = v;
        else if (field == 2)
            c->total = v;
        else if (field == 3)
            c->offset = v;
        else
            c->kind = v <= BBE__CHUNK_REFUSE ? (int)v : -1;
        return rc;
    }
    return field <= 6 ? BB_EDECODE : skip_field(r, wt);
}

/* The sub-messages as the encoder writes them, read without the field
 * dispatch of decode_message; 0 when f (or the envelope) does not have
 * that shape (the general decoder then reads it, and says what is wrong).
 * A fill: suffix (field 1) then payload (field 2), one-byte tags. */
static bool fill_canonical(const uint8_t *d, size_t n, bbe__fill *f)
{
    rd r = {d, n, 0};
    if (n < 2 || d[0] != 0x0a)
        return false;
    r.pos = 1;
    if (get_bytes(&r, &f->suffix, &f->suffix_len))
        return false;
    if (r.pos < n && d[r.pos] == 0x12) {
        r.pos++;
        if (get_bytes(&r, &f->payload, &f->payload_len))
            return false;
    }
    return r.pos == n;
}

/* A correlation: kind (field 1, one byte) then wire_req_id (field 2), read
 * in place: `avail` bytes are readable at d (the rest of the envelope), of
 * which n are the sub-message, so the id's varint is read with the
 * unrolled reader and must end within n. */
static bool corr_canonical(const uint8_t *d, size_t n, size_t avail, bbe__envelope *out)
{
    uint64_t id = 0;
    size_t used;
    if (n < 2 || d[0] != 0x08 || d[1] > 2)
        return false;
    if (n > 2 && (d[2] != 0x10 || bb_uvarint_read_u64(d + 3, avail - 3, &id, &used) != BB_UVARINT_OK ||
                  used != n - 3))
        return false;
    out->corr_kind = d[1];
    if (n > 2)
        out->wire_req_id = id;
    return true;
}

void bbe__envelope_release(bbe__envelope *env)
{
    if (env->dest != env->dest_inline)
        free(env->dest);
    if (env->src != env->src_inline)
        free(env->src);
    if (env->fills != env->fills_inline)
        free(env->fills);
    env->dest = env->src = NULL;
    env->fills = NULL;
    env->n_dest = env->n_src = env->n_fills = 0;
}

/* Fields 4-7: the stamps (fixed64, or varint in older snapshots). */
static void set_stamp(bbe__envelope *out, uint32_t field, uint64_t v)
{
    if (field == 4)
        out->deadline_ns = v;
    else if (field == 5)
        out->sent_at_ns = v;
    else if (field == 6)
        out->echo_sent_at_ns = v;
    else
        out->echo_delay_ns = v;
}

/* One field of an envelope whose tag (field, wt) was read; at: its offset. */
static int decode_field(rd *r, uint32_t field, unsigned wt, size_t at, const bbe__env_limits *lim,
                        bbe__envelope *out, bb_error *err)
{
    const uint8_t *d = NULL;
    size_t n = 0, sub_off = 0;
    uint64_t v;
    int rc;
    if ((field == 1 || field == 2 || field == 3 || field == 8 || field == 9) && wt != 2)
        return BB_EDECODE;
    if (field >= 4 && field <= 7 && wt != 0 && wt != 1)
        return BB_EDECODE;
    switch (field) {
    case 1:
    case 8:
        if ((rc = get_bytes(r, &d, &n)))
            return rc;
        rc = field == 1 ? push_addr(&out->dest, &out->n_dest, lim->max_addrs, d, n,
                                    out->dest_inline)
                        : push_addr(&out->src, &out->n_src, lim->max_addrs, d, n, out->src_inline);
        if (rc)
            return bb_error_set(err, rc, "envelope: more than %zu %s addresses at byte %zu",
                                lim->max_addrs, field == 1 ? "destination" : "source", at);
        return 0;
    case 2:
        if ((rc = get_bytes(r, &d, &n)))
            return rc;
        if (out->n_fills >= lim->max_fills)
            return bb_error_set(err, BB_ELIMIT, "envelope: more than %zu fills at byte %zu",
                                lim->max_fills, at);
        if (grow((void **)&out->fills, out->n_fills, sizeof *out->fills, out->fills_inline))
            return bb_error_set(err, BB_ENOMEM, "envelope: out of memory");
        memset(&out->fills[out->n_fills], 0, sizeof out->fills[out->n_fills]);
        if (fill_canonical(d, n, &out->fills[out->n_fills])) {
            out->n_fills++;
            return 0;
        }
        memset(&out->fills[out->n_fills], 0, sizeof out->fills[out->n_fills]);
        if ((rc = decode_message(d, n, fill_field, &out->fills[out->n_fills], &sub_off))) {
            r->pos = (size_t)(d - r->p) + sub_off;
            return rc;
        }
        out->n_fills++;
        return 0;
    case 3:
        if ((rc = get_bytes(r, &d, &n)))
            return rc;
        if (corr_canonical(d, n, r->len - (size_t)(d - r->p), out))
            return 0;
        if ((rc = decode_message(d, n, corr_field, out, &sub_off)))
            r->pos = (size_t)(d - r->p) + sub_off;
        return rc;
    case 4:
    case 5:
    case 6:
    case 7:
        if ((rc = wt == 1 ? get_fixed64(r, &v) : get_varint(r, &v)))
            return rc;
        set_stamp(out, field, v);
        return 0;
    case 9:
        if ((rc = get_bytes(r, &d, &n)))
            return rc;
        memset(&out->chunk, 0, sizeof out->chunk);
        out->chunk.present = true;
        if ((rc = decode_message(d, n, chunk_field, &out->chunk, &sub_off)))
            r->pos = (size_t)(d - r->p) + sub_off;
        return rc;
    default:
        return skip_field(r, wt);
    }
}

int bbe__envelope_decode(const uint8_t *data, size_t len, const bbe__env_limits *lim,
                        bbe__envelope *out, bb_error *err)
{
    /* the header; the inline lists are written as they are used */
    memset(out, 0, offsetof(bbe__envelope, dest_inline));
    out->dest = out->dest_inline;
    out->src = out->src_inline;
    out->fills = out->fills_inline;
    rd r = {data, len, 0};
    while (r.pos < r.len) {
        size_t at = r.pos;
        uint32_t field = 0;
        unsigned wt;
        int rc;
        uint8_t tag = r.p[r.pos];
        if (tag >= 0x21 && tag <= 0x31 && (tag & 7) == 1) {
            /* fields 4, 5, 6, fixed64 as the encoder writes them: three
             * in every envelope, read without the field dispatch */
            field = tag >> 3;
            if (r.len - r.pos < 9) {
                r.pos++;
                rc = BB_ETRUNC;
                goto bad;
            }
            set_stamp(out, field, bb_le_get(r.p + r.pos + 1, 8));
            r.pos += 9;
            continue;
        }
        if ((rc = get_tag(&r, &field, &wt)))
            goto bad;
        if ((rc = decode_field(&r, field, wt, at, lim, out, err))) {
            if (rc == BB_ELIMIT || rc == BB_ENOMEM) { /* already described */
                bbe__envelope_release(out);
                return rc;
            }
            goto bad;
        }
        continue;
    bad:
        bbe__envelope_release(out);
        return bb_error_set(err, rc == BB_ETRUNC ? BB_ETRUNC : BB_EDECODE,
                            "envelope: %s at byte %zu (field %u)",
                            rc == BB_ETRUNC ? "truncated" : "malformed", r.pos, field);
    }
    if (out->corr_kind < 0) {
        bbe__envelope_release(out);
        return bb_error_set(err, BB_EDECODE, "envelope: unknown correlation kind");
    }
    if (out->chunk.present && out->chunk.kind < 0) {
        bbe__envelope_release(out);
        return bb_error_set(err, BB_EDECODE, "envelope: unknown chunk kind");
    }
    return BB_OK;
}

/* ---- the dedup key ------------------------------------------------------------- */

#define DEDUP_WHOLE_MAX 4096 /* payloads up to this size are hashed whole */
#define DEDUP_END_SPAN 2048  /* of a larger one, this many bytes at each end */

static uint64_t chain(uint64_t h, const uint8_t *p, size_t n)
{
    return bbe__mix64(h ^ bbe__hash_bytes(p, n));
}

uint64_t bbe__envelope_dedup_key(uint64_t src_hash, const uint8_t *bytes, size_t len,
                                const bbe__envelope *env)
{
    uint64_t h = bbe__mix64(0x6465647570ULL ^ src_hash); /* chain() over the PeerId */
    size_t pos = 0;
    /* the envelope's bytes in order, each large payload's middle left out
     * (its length is in the bytes before it); fills are views into bytes,
     * in order */
    for (size_t i = 0; i < env->n_fills; i++) {
        const bbe__fill *f = &env->fills[i];
        if (f->payload_len <= DEDUP_WHOLE_MAX || f->payload < bytes ||
            f->payload + f->payload_len > bytes + len)
            continue;
        size_t start = (size_t)(f->payload - bytes), end = start + f->payload_len;
        if (start < pos)
            continue;
        h = chain(h, bytes + pos, start + DEDUP_END_SPAN - pos);
        pos = end - DEDUP_END_SPAN;
    }
    return chain(h, bytes + pos, len - pos);
}

/* ---- encode -------------------------------------------------------------------- */

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    return p + bb_uvarint_encode(v, p);
}

static uint8_t *put_bytes(uint8_t *p, uint8_t tag, const uint8_t *d, size_t n)
{
    *p++ = tag;
    p = put_varint(p, n);
    if (n)
        memcpy(p, d, n);
    return p + n;
}

static size_t fill_size(const bbe__fill *f)
{
    size_t s = 0;
    if (f->suffix_len)
        s += 1 + bb_uvarint_size(f->suffix_len) + f->suffix_len;
    if (f->payload_len)
        s += 1 + bb_uvarint_size(f->payload_len) + f->payload_len;
    if (f->trigger_only)
        s += 2;
    return s;
}

static size_t corr_size(const bbe__envelope *env)
{
    size_t s = 0;
    if (env->corr_kind)
        s += 1 + bb_uvarint_size((uint64_t)env->corr_kind);
    if (env->wire_req_id)
        s += 1 + bb_uvarint_size(env->wire_req_id);
    return s;
}

static size_t envelope_size(const bbe__envelope *env, size_t *corr)
{
    size_t size = 0;
    for (size_t i = 0; i < env->n_dest; i++)
        size += 1 + bb_uvarint_size(env->dest[i].len) + env->dest[i].len;
    for (size_t i = 0; i < env->n_fills; i++) {
        size_t fs = fill_size(&env->fills[i]);
        size += 1 + bb_uvarint_size(fs) + fs;
    }
    size_t cs = corr_size(env);
    if (cs)
        size += 1 + bb_uvarint_size(cs) + cs;
    const uint64_t stamps[3] = {env->deadline_ns, env->sent_at_ns, env->echo_sent_at_ns};
    for (int i = 0; i < 3; i++)
        if (stamps[i])
            size += 1 + 8;
    if (env->echo_delay_ns)
        size += 1 + bb_uvarint_size(env->echo_delay_ns);
    for (size_t i = 0; i < env->n_src; i++)
        size += 1 + bb_uvarint_size(env->src[i].len) + env->src[i].len;
    *corr = cs;
    return size;
}

#define GATHER_MAX_REFS 64 /* payloads left in place per envelope; more are copied */

/* Where a gather encode puts its pieces (NULL for a contiguous encode). */
typedef struct gather_w {
    size_t min_ref;
    bb_send_iov *iov;
    size_t n_iov, refs_left;
    const uint8_t *piece; /* start of the small part being written */
    size_t ref_bytes;     /* bytes of the pieces left in place so far */
    bb_value **held;
    size_t n_held;
} gather_w;

static void piece_end(gather_w *g, const uint8_t *at)
{
    if (at > g->piece)
        g->iov[g->n_iov++] = (bb_send_iov){g->piece, (size_t)(at - g->piece)};
    g->piece = at;
}

/* A fill's value encoded at p, which is at byte `at` of the envelope (large
 * tensors align from there); with g, its large payloads become pieces of
 * their own. The end, or NULL when the sizes disagree (a bug). */
static uint8_t *put_value(const bbe__fill *f, uint8_t *p, size_t at, gather_w *g)
{
    size_t n, nr = 0, len = f->payload_len - f->wrap_head_len;
    bb_encode_ref refs[GATHER_MAX_REFS];
    memcpy(p, f->wrap_head, f->wrap_head_len);
    p += f->wrap_head_len;
    at += f->wrap_head_len;
    if (!g) /* payload_len is the value's encoded size (build_fills), with its head */
        return bb_value_encode_sized(f->value, len, p, at, NULL) == BB_OK ? p + len : NULL;
    int rc = bb_value_encode_gather(f->value, p, at, len, g->min_ref, refs, g->refs_left, &nr,
                                    &n, NULL);
    if (rc != BB_OK)
        return NULL;
    for (size_t i = 0; i < nr; i++) {
        piece_end(g, p + refs[i].at);
        g->iov[g->n_iov++] = (bb_send_iov){refs[i].data, refs[i].len};
        g->ref_bytes += refs[i].len;
    }
    if (nr) {
        g->refs_left -= nr;
        g->held[g->n_held++] = bb_value_ref((bb_value *)f->value);
    }
    return p + n;
}

/* Write env at buf (room for its size, less what g leaves in place). */
static uint8_t *write_envelope(const bbe__envelope *env, size_t cs, uint8_t *buf, gather_w *g)
{
    uint8_t *p = buf;
    for (size_t i = 0; i < env->n_dest; i++)
        p = put_bytes(p, 0x0a, env->dest[i].data, env->dest[i].len);
    for (size_t i = 0; i < env->n_fills; i++) {
        const bbe__fill *f = &env->fills[i];
        *p++ = 0x12;
        p = put_varint(p, fill_size(f));
        if (f->suffix_len)
            p = put_bytes(p, 0x0a, f->suffix, f->suffix_len);
        if (f->payload_len && f->value) { /* encoded in place: no second copy */
            *p++ = 0x12;
            p = put_varint(p, f->payload_len);
            size_t at = (size_t)(p - buf) + (g ? g->ref_bytes : 0);
            if (!(p = put_value(f, p, at, g)))
                return NULL;
        } else if (f->payload_len) {
            p = put_bytes(p, 0x12, f->payload, f->payload_len);
        }
        if (f->trigger_only) {
            *p++ = 0x18;
            *p++ = 1;
        }
    }
    if (cs) {
        *p++ = 0x1a;
        p = put_varint(p, cs);
        if (env->corr_kind) {
            *p++ = 0x08;
            p = put_varint(p, (uint64_t)env->corr_kind);
        }
        if (env->wire_req_id) {
            *p++ = 0x10;
            p = put_varint(p, env->wire_req_id);
        }
    }
    const uint64_t stamps[3] = {env->deadline_ns, env->sent_at_ns, env->echo_sent_at_ns};
    for (int i = 0; i < 3; i++) {
        if (stamps[i]) {
            *p++ = (uint8_t)((4 + i) << 3 | 1); /* fixed64 */
            bb_le_put(p, stamps[i], 8);
            p += 8;
        }
    }
    if (env->echo_delay_ns) {
        *p++ = 7 << 3;
        p = put_varint(p, env->echo_delay_ns);
    }
    for (size_t i = 0; i < env->n_src; i++)
        p = put_bytes(p, 0x42, env->src[i].data, env->src[i].len);
    return p;
}

int bbe__envelope_encode(const bbe__envelope *env, uint8_t **out, size_t *out_len)
{
    size_t cs, size = envelope_size(env, &cs);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return BB_ENOMEM;
    uint8_t *end = write_envelope(env, cs, buf, NULL);
    if (!end) {
        free(buf);
        return BB_ERUNTIME;
    }
    *out = buf;
    *out_len = (size_t)(end - buf);
    return BB_OK;
}

size_t bbe__chunk_head(const bbe__chunk *c, const bb_engine_addr *src, size_t n_src,
                       uint8_t *out)
{
    uint8_t *p = out;
    for (size_t i = 0; i < n_src; i++)
        p = put_bytes(p, 0x42, src[i].data, src[i].len);
    uint8_t body[BBE__CHUNK_HEAD_MAX];
    uint8_t *b = body;
    *b++ = 0x08;
    b = put_varint(b, c->stream_id);
    *b++ = 0x10;
    b = put_varint(b, c->total);
    if (c->offset) {
        *b++ = 0x18;
        b = put_varint(b, c->offset);
    }
    if (c->kind) {
        *b++ = 0x28;
        b = put_varint(b, (uint64_t)c->kind);
    }
    size_t data_head = 0;
    if (c->data_len) { /* field 4's tag and length; the data itself follows the head */
        b[0] = 0x22;
        data_head = 1 + bb_uvarint_encode(c->data_len, b + 1);
    }
    size_t tail_field = c->tail_len ? 1 + bb_uvarint_size(c->tail_len) + c->tail_len : 0;
    size_t body_len = (size_t)(b - body) + tail_field + data_head + c->data_len;
    *p++ = 0x4a;
    p = put_varint(p, body_len);
    memcpy(p, body, (size_t)(b - body));
    p += b - body;
    if (c->tail_len) /* before the data, which must come last */
        p = put_bytes(p, 0x32, c->tail, c->tail_len);
    memcpy(p, b, data_head);
    return (size_t)(p - out) + data_head;
}

int bbe__envelope_encode_gather(const bbe__envelope *env, size_t min_ref, bb_send_gather **out)
{
    *out = NULL;
    /* what stays in the values: none of it in a payload under min_ref */
    size_t in_place = 0, n_refs = 0, n_held = 0;
    for (size_t i = 0; i < env->n_fills && n_refs < GATHER_MAX_REFS; i++) {
        const bbe__fill *f = &env->fills[i];
        size_t copied, nr;
        if (!f->value || !f->payload_len || f->payload_len < min_ref)
            continue;
        if (bb_value_gather_size(f->value, min_ref, GATHER_MAX_REFS - n_refs, &copied, &nr,
                                 NULL) != BB_OK)
            return BB_ERUNTIME;
        in_place += f->payload_len - f->wrap_head_len - copied;
        n_refs += nr;
        n_held += nr > 0;
    }
    if (!n_refs)
        return BB_OK; /* nothing to leave in place: the caller encodes contiguously */
    size_t cs, size = envelope_size(env, &cs), small = size - in_place;
    /* one block: the gather, its pieces, the values it holds, the small parts */
    size_t max_iov = 2 * n_refs + 1;
    size_t head = sizeof(bb_send_gather) + max_iov * sizeof(bb_send_iov) +
                  n_held * sizeof(bb_value *);
    bb_send_gather *gs = malloc(head + small);
    if (!gs)
        return BB_ENOMEM;
    bb_send_iov *iov = (bb_send_iov *)(gs + 1);
    bb_value **held = (bb_value **)(iov + max_iov);
    uint8_t *buf = (uint8_t *)(held + n_held);
    gather_w g = {.min_ref = min_ref, .iov = iov, .refs_left = GATHER_MAX_REFS, .piece = buf,
                  .held = held};
    uint8_t *end = write_envelope(env, cs, buf, &g);
    *gs = (bb_send_gather){.iov = iov, .held = held, .n_held = g.n_held, .len = size};
    if (!end || (size_t)(end - buf) != small) {
        gs->n_iov = 0;
        bb_send_gather_free(gs);
        return BB_ERUNTIME;
    }
    piece_end(&g, end);
    gs->n_iov = g.n_iov;
    *out = gs;
    return BB_OK;
}

void bb_send_gather_free(bb_send_gather *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_held; i++)
        bb_value_unref(g->held[i]);
    free(g);
}
