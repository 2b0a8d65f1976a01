/*
 * value_wire.c — the wire codec of runtime values (the table in value.h):
 * encoded size, encode, and a bounded decoder selected by the type's wire
 * hash (varints: bb/uvarint.h).
 *
 * Tensors are ONNX TensorProto bytes; the protobuf subset is hand-rolled
 * (no protobuf-c) because fills are on the hot path. The decoder treats
 * every byte as hostile: each count is checked against the bytes that
 * remain BEFORE anything is allocated, every limit in bb_decode_limits is
 * enforced, and every error names the absolute byte offset it found.
 */
#include "bb/value.h"
#include "bb/le.h"
#include "bb/uvarint.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "value_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "value_wire.c assumes a little-endian host (raw_data is little-endian)"
#endif

const bb_decode_limits BB_DECODE_LIMITS_DEFAULT = {
    .max_bytes = (size_t)256 << 20,
    .max_items = 65536,
    .max_depth = 16,
};

/* Bytes payloads at least this large share the source buffer instead of
 * being copied (bb_value_decode_buf); small ones (PeerIds) are copied so
 * they do not pin a large frame. */
#define SHARE_MIN_BYTES 4096u

/* TensorProto field numbers used here. */
enum {
    TP_DIMS = 1,
    TP_DATA_TYPE = 2,
    TP_FLOAT_DATA = 4,
    TP_INT32_DATA = 5,
    TP_INT64_DATA = 7,
    TP_RAW_DATA = 9,
    TP_DOUBLE_DATA = 10,
    TP_UINT64_DATA = 11,
    TP_DOC_STRING = 12,
};

/* Large raw_data is aligned (value.h): a doc_string of k spaces before it
 * and one of ALIGN_SLACK - k after, so the tensor's size does not depend
 * on where it lands and raw_data starts at a multiple of BB_VALUE_ALIGN
 * from the start of the message. */
#define ALIGN_SLACK (BB_VALUE_ALIGN - 1)
#define ALIGN_PAD (2 + 2 + ALIGN_SLACK) /* two tags, two one-byte lengths, the spaces */

static bool tensor_aligned(const bb_tensor_view *t)
{
    return t->nbytes >= BB_VALUE_ALIGN_MIN;
}

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };

/* ---- varints ------------------------------------------------------------- */

/* bb_uvarint_read_u64 (protobuf's reading) at *pos: BB_OK, BB_ETRUNC or
 * BB_EDECODE (more than 64 bits). */
static inline int varint_at(const uint8_t *data, size_t len, size_t *pos, uint64_t *out)
{
    size_t used;
    if (*pos > len)
        return BB_ETRUNC;
    bb_uvarint_rc rc = bb_uvarint_read_u64(data + *pos, len - *pos, out, &used);
    if (rc == BB_UVARINT_TRUNC)
        return BB_ETRUNC;
    if (rc)
        return BB_EDECODE;
    *pos += used;
    return BB_OK;
}

/* ---- encoded size ----------------------------------------------------------- */

static bool add_sz(size_t *acc, size_t x)
{
    if (x > SIZE_MAX - *acc)
        return false;
    *acc += x;
    return true;
}

static size_t dims_payload_len(const bb_tensor_view *t)
{
    size_t n = 0;
    for (uint32_t i = 0; i < t->ndim; i++)
        n += bb_uvarint_size((uint64_t)t->dims[i]);
    return n;
}

static bool tensor_size(const bb_tensor_view *t, size_t *out)
{
    size_t n = 0;
    if (t->ndim) {
        size_t dl = dims_payload_len(t);
        n += 1 + bb_uvarint_size(dl) + dl;
    }
    n += 1 + bb_uvarint_size((uint64_t)(uint32_t)t->dtype);
    n += 1 + bb_uvarint_size(t->nbytes);
    if (tensor_aligned(t))
        n += ALIGN_PAD;
    if (!add_sz(&n, t->nbytes))
        return false;
    *out = n;
    return true;
}

/* Size of v's encoding; false on size_t overflow (absurdly shared graphs). */
static bool enc_size(const bb_value *v, size_t *out)
{
    size_t n = 0, c;
    switch (v->type->kind) {
    case BB_VK_TRIGGER:
        break;
    case BB_VK_U64:
        n = 8;
        break;
    case BB_VK_TENSOR:
        return tensor_size(&v->u.tensor, out);
    case BB_VK_BYTES:
    case BB_VK_PEER_ID:
    case BB_VK_ADDRESS:
        n = v->u.bytes.len;
        break;
    case BB_VK_PEER_ID_VEC:
    case BB_VK_ADDRESS_VEC:
        n = bb_uvarint_size(v->u.list.n);
        for (size_t i = 0; i < v->u.list.n; i++) {
            size_t l = v->u.list.items[i]->u.bytes.len;
            if (!add_sz(&n, bb_uvarint_size(l)) || !add_sz(&n, l))
                return false;
        }
        break;
    case BB_VK_COMPOSITE:
        n = bb_uvarint_size(v->u.list.n);
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (!enc_size(v->u.list.items[i], &c) || !add_sz(&n, 8 + bb_uvarint_size(c)) ||
                !add_sz(&n, c))
                return false;
        }
        break;
    case BB_VK_RESPONSE_BATCH:
        n = bb_uvarint_size(v->u.batch.n);
        for (size_t i = 0; i < v->u.batch.n; i++) {
            size_t pl = v->u.batch.peers[i]->u.bytes.len;
            if (!add_sz(&n, bb_uvarint_size(pl)) || !add_sz(&n, pl))
                return false;
            if (!enc_size(v->u.batch.items[i], &c) || !add_sz(&n, 8 + bb_uvarint_size(c)) ||
                !add_sz(&n, c))
                return false;
        }
        break;
    default:
        return false;
    }
    *out = n;
    return true;
}

int bb_value_encoded_size(const bb_value *v, size_t *out, bb_error *err)
{
    if (!v || !out)
        return bb_error_set(err, BB_EINVAL, "encoded size: NULL argument");
    if (v->type->kind == BB_VK_ABSTRACT)
        return bb_error_set(err, BB_EINVAL, "encoded size: abstract type %s", v->type->name);
    if (!enc_size(v, out))
        return bb_error_set(err, BB_ELIMIT, "encoded size of a %s value overflows",
                            v->type->name);
    return BB_OK;
}

/* ---- encode -------------------------------------------------------------- */

/* Where an encode writes: the output buffer, where it sits in the message
 * (`at`: aligned payloads count from the message's start), and where large
 * payloads go (bb_value_encode_gather): listed as refs instead of copied,
 * none for a plain encode (max_refs 0). */
typedef struct enc_refs {
    const uint8_t *base; /* the output buffer: a ref's `at` counts from here */
    size_t at;           /* base's offset in the message */
    size_t min_ref;
    bb_encode_ref *refs;
    size_t max_refs, n_refs, ref_bytes;
} enc_refs;

static enc_refs enc_refs_init(size_t min_ref, bb_encode_ref *refs, size_t max_refs)
{
    /* an empty payload is never worth a ref */
    return (enc_refs){.min_ref = min_ref ? min_ref : 1, .refs = refs, .max_refs = max_refs};
}

/* Whether an n-byte payload becomes the next ref; counts it if so. The one
 * rule for both the sizing walk (count_refs) and the writer (put_payload). */
static bool take_ref(enc_refs *g, size_t n)
{
    if (n < g->min_ref || g->n_refs >= g->max_refs)
        return false;
    g->n_refs++;
    g->ref_bytes += n;
    return true;
}

/* n payload bytes at w: copied, or listed as a ref (w does not move). */
static uint8_t *put_payload(enc_refs *g, uint8_t *w, const uint8_t *data, size_t n)
{
    if (take_ref(g, n)) {
        g->refs[g->n_refs - 1] = (bb_encode_ref){(size_t)(w - g->base), data, n};
        return w;
    }
    if (n)
        memcpy(w, data, n);
    return w + n;
}

/* Writes v at w (room for its encoded size, checked by the caller);
 * returns the end. Child sizes are recomputed per level: nesting is shallow. */
/* A Composite child's record before its encoding: its wire hash (u64 LE)
 * and its length. */
static uint8_t *child_head(const bb_value *child, size_t len, uint8_t *w)
{
    bb_le_put(w, child->type->wire_hash, 8);
    w += 8;
    return w + bb_uvarint_encode(len, w);
}

size_t bb_value_wrap_head(const bb_value *child, size_t child_len, uint8_t *out)
{
    uint8_t *w = out + bb_uvarint_encode(1, out);
    return (size_t)(child_head(child, child_len, w) - out);
}

static uint8_t *enc_write(const bb_value *v, uint8_t *w, enc_refs *g)
{
    size_t c;
    switch (v->type->kind) {
    case BB_VK_TRIGGER:
        break;
    case BB_VK_U64:
        bb_le_put(w, v->u.u64, 8);
        w += 8;
        break;
    case BB_VK_TENSOR: {
        const bb_tensor_view *t = &v->u.tensor;
        if (t->ndim) {
            *w++ = (TP_DIMS << 3) | WT_LEN;
            w += bb_uvarint_encode(dims_payload_len(t), w);
            for (uint32_t i = 0; i < t->ndim; i++)
                w += bb_uvarint_encode((uint64_t)t->dims[i], w);
        }
        *w++ = (TP_DATA_TYPE << 3) | WT_VARINT;
        w += bb_uvarint_encode((uint64_t)(uint32_t)t->dtype, w);
        size_t k = 0;
        if (tensor_aligned(t)) { /* raw_data's first byte lands at a multiple of ALIGN */
            size_t raw_at = g->at + (size_t)(w - g->base) + g->ref_bytes + 2 + 1 +
                            bb_uvarint_size(t->nbytes);
            k = (BB_VALUE_ALIGN - raw_at % BB_VALUE_ALIGN) % BB_VALUE_ALIGN;
            *w++ = (TP_DOC_STRING << 3) | WT_LEN;
            *w++ = (uint8_t)k;
            memset(w, ' ', k);
            w += k;
        }
        *w++ = (TP_RAW_DATA << 3) | WT_LEN;
        w += bb_uvarint_encode(t->nbytes, w);
        w = put_payload(g, w, t->data, t->nbytes);
        if (tensor_aligned(t)) {
            *w++ = (TP_DOC_STRING << 3) | WT_LEN;
            *w++ = (uint8_t)(ALIGN_SLACK - k);
            memset(w, ' ', ALIGN_SLACK - k);
            w += ALIGN_SLACK - k;
        }
        break;
    }
    case BB_VK_BYTES:
    case BB_VK_PEER_ID:
    case BB_VK_ADDRESS:
        w = put_payload(g, w, v->u.bytes.data, v->u.bytes.len);
        break;
    case BB_VK_PEER_ID_VEC:
    case BB_VK_ADDRESS_VEC:
        w += bb_uvarint_encode(v->u.list.n, w);
        for (size_t i = 0; i < v->u.list.n; i++)
            w = enc_write(v->u.list.items[i],
                          w + bb_uvarint_encode(v->u.list.items[i]->u.bytes.len, w), g);
        break;
    case BB_VK_COMPOSITE:
        w += bb_uvarint_encode(v->u.list.n, w);
        for (size_t i = 0; i < v->u.list.n; i++) {
            const bb_value *ch = v->u.list.items[i];
            enc_size(ch, &c); /* cannot fail: the whole value's size was computed */
            w = child_head(ch, c, w);
            w = enc_write(ch, w, g);
        }
        break;
    case BB_VK_RESPONSE_BATCH:
        w += bb_uvarint_encode(v->u.batch.n, w);
        for (size_t i = 0; i < v->u.batch.n; i++) {
            const bb_value *peer = v->u.batch.peers[i], *it = v->u.batch.items[i];
            w += bb_uvarint_encode(peer->u.bytes.len, w);
            w = enc_write(peer, w, g);
            enc_size(it, &c);
            w = child_head(it, c, w);
            w = enc_write(it, w, g);
        }
        break;
    default:
        break;
    }
    return w;
}

/* Visit v's payloads in encoding order as enc_write does, counting into g
 * the ones that become refs. */
static void count_refs(const bb_value *v, enc_refs *g)
{
    switch (v->type->kind) {
    case BB_VK_TENSOR:
        take_ref(g, v->u.tensor.nbytes);
        break;
    case BB_VK_BYTES:
    case BB_VK_PEER_ID:
    case BB_VK_ADDRESS:
        take_ref(g, v->u.bytes.len);
        break;
    case BB_VK_PEER_ID_VEC:
    case BB_VK_ADDRESS_VEC:
    case BB_VK_COMPOSITE:
        for (size_t i = 0; i < v->u.list.n; i++)
            count_refs(v->u.list.items[i], g);
        break;
    case BB_VK_RESPONSE_BATCH:
        for (size_t i = 0; i < v->u.batch.n; i++) {
            count_refs(v->u.batch.peers[i], g);
            count_refs(v->u.batch.items[i], g);
        }
        break;
    default:
        break;
    }
}

/* The encoding of v, whose encoded size is n, into out (at offset g->at
 * of its message), the large payloads g takes as refs (out then holds the
 * copied part only). */
static int encode_sized(const bb_value *v, size_t n, uint8_t *out, size_t cap, enc_refs *g,
                        size_t *len, bb_error *err)
{
    size_t ref_bytes = 0;
    if (g->max_refs) { /* a plain encode takes no refs: nothing to count */
        enc_refs sizing = *g; /* counted on a copy: enc_write counts into g */
        count_refs(v, &sizing);
        ref_bytes = sizing.ref_bytes - g->ref_bytes;
    }
    g->base = out;
    size_t copied = n - ref_bytes;
    if (copied > cap)
        return bb_error_set(err, BB_ELIMIT, "encode: a %s value needs %zu bytes, %zu given",
                            v->type->name, copied, cap);
    uint8_t *end = enc_write(v, out, g);
    size_t wrote = (size_t)(end - out) + ref_bytes;
    if (wrote != n) /* a bug, not an input: sizes must agree */
        return bb_error_set(err, BB_ERUNTIME, "encode: %s wrote %zu bytes, sized %zu",
                            v->type->name, wrote, n);
    *len = (size_t)(end - out);
    return BB_OK;
}

static int encode_to(const bb_value *v, uint8_t *out, size_t cap, enc_refs *g, size_t *len,
                     bb_error *err)
{
    if (!out || !len)
        return bb_error_set(err, BB_EINVAL, "encode: NULL output");
    size_t n;
    int rc = bb_value_encoded_size(v, &n, err);
    return rc ? rc : encode_sized(v, n, out, cap, g, len, err);
}

int bb_value_encode_into(const bb_value *v, uint8_t *out, size_t cap, size_t *len,
                         bb_error *err)
{
    enc_refs g = enc_refs_init(0, NULL, 0);
    return encode_to(v, out, cap, &g, len, err);
}

int bb_value_encode_sized(const bb_value *v, size_t n, uint8_t *out, size_t at, bb_error *err)
{
    size_t len;
    if (!v || (n && !out))
        return bb_error_set(err, BB_EINVAL, "encode: NULL %s", v ? "output" : "value");
    enc_refs g = enc_refs_init(0, NULL, 0);
    g.at = at;
    return encode_sized(v, n, out, n, &g, &len, err);
}

int bb_value_gather_size(const bb_value *v, size_t min_ref, size_t max_refs, size_t *copied,
                         size_t *n_refs, bb_error *err)
{
    if (!copied || !n_refs)
        return bb_error_set(err, BB_EINVAL, "encode: NULL output");
    size_t n;
    int rc = bb_value_encoded_size(v, &n, err);
    if (rc)
        return rc;
    enc_refs g = enc_refs_init(min_ref, NULL, max_refs);
    count_refs(v, &g);
    *n_refs = g.n_refs;
    *copied = n - g.ref_bytes;
    return BB_OK;
}

int bb_value_encode_gather(const bb_value *v, uint8_t *out, size_t at, size_t cap,
                           size_t min_ref, bb_encode_ref *refs, size_t max_refs, size_t *n_refs,
                           size_t *len, bb_error *err)
{
    if (!n_refs || (max_refs && !refs))
        return bb_error_set(err, BB_EINVAL, "encode: NULL refs");
    enc_refs g = enc_refs_init(min_ref, refs, max_refs);
    g.at = at;
    *n_refs = 0;
    int rc = encode_to(v, out, cap, &g, len, err);
    if (rc == BB_OK)
        *n_refs = g.n_refs;
    return rc;
}

int bb_value_encode(const bb_value *v, uint8_t **out, size_t *out_len, bb_error *err)
{
    if (!out || !out_len)
        return bb_error_set(err, BB_EINVAL, "encode: NULL output");
    *out = NULL;
    *out_len = 0;
    size_t n;
    int rc = bb_value_encoded_size(v, &n, err);
    if (rc)
        return rc;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return bb_error_set(err, BB_ENOMEM, "encode: out of memory for %zu bytes of a %s value",
                            n, v->type->name);
    enc_refs g = enc_refs_init(0, NULL, 0);
    if ((rc = encode_sized(v, n, buf, n, &g, out_len, err))) {
        free(buf);
        return rc;
    }
    *out = buf;
    return BB_OK;
}

/* ---- decode ----------------------------------------------------------------- */

typedef struct dec {
    const uint8_t *p; /* the whole input; offsets below are into it */
    const bb_decode_limits *lim;
    bb_error *err;
    bb_buffer *src; /* buffer holding p, when sharing is allowed */
} dec;

static int dfail(dec *d, int code, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), cold));

static int dfail(dec *d, int code, size_t off, const char *fmt, ...)
{
    if (d->err) {
        char msg[BB_ERROR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (code == BB_ENOMEM)
            bb_error_set(d->err, code, "byte %zu: out of memory for %s", off, msg);
        else
            bb_error_set(d->err, code, "byte %zu: %s", off, msg);
    }
    return code;
}

/* Both readers zero their output first: callers read it only on BB_OK, but
 * the compiler cannot see that dfail() never returns BB_OK. */
static int get_varint_long(dec *d, size_t *pos, size_t end, uint64_t *v, const char *what)
{
    size_t at = *pos;
    *v = 0;
    int rc = varint_at(d->p, end, pos, v);
    if (rc == BB_ETRUNC)
        return dfail(d, BB_EDECODE, at, "%s: truncated varint", what);
    if (rc)
        return dfail(d, BB_EDECODE, at, "%s: varint longer than 64 bits", what);
    return BB_OK;
}

/* Counts, tags and short lengths are one byte: read inline, the general
 * reader (and its messages) only for the rest. */
static inline int get_varint(dec *d, size_t *pos, size_t end, uint64_t *v, const char *what)
{
    if (*pos < end && d->p[*pos] < 0x80) {
        *v = d->p[(*pos)++];
        return BB_OK;
    }
    return get_varint_long(d, pos, end, v, what);
}

/* A length prefix that must fit in what remains of [pos, end). */
static int get_len(dec *d, size_t *pos, size_t end, size_t *len, const char *what)
{
    uint64_t v;
    size_t at = *pos;
    *len = 0;
    int rc = get_varint(d, pos, end, &v, what);
    if (rc)
        return rc;
    if (v > (uint64_t)(end - *pos))
        return dfail(d, BB_EDECODE, at, "%s: length %" PRIu64 " exceeds the %zu bytes left",
                     what, v, end - *pos);
    *len = (size_t)v;
    return BB_OK;
}

/* ---- TensorProto ---- */

typedef struct pbfield {
    uint32_t num;
    uint32_t wt;
    size_t tag_off;
    uint64_t v;       /* WT_VARINT value, or the fixed-width value */
    size_t off, len;  /* WT_LEN payload */
} pbfield;

static int pb_next(dec *d, size_t *pos, size_t end, pbfield *f)
{
    uint64_t tag;
    f->tag_off = *pos;
    int rc = get_varint(d, pos, end, &tag, "tensor field tag");
    if (rc)
        return rc;
    if ((tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
        return dfail(d, BB_EDECODE, f->tag_off, "tensor: invalid field number %" PRIu64,
                     tag >> 3);
    f->num = (uint32_t)(tag >> 3);
    f->wt = (uint32_t)(tag & 7);
    switch (f->wt) {
    case WT_VARINT:
        return get_varint(d, pos, end, &f->v, "tensor field value");
    case WT_I64:
    case WT_I32: {
        size_t w = f->wt == WT_I64 ? 8 : 4;
        if (end - *pos < w)
            return dfail(d, BB_EDECODE, *pos, "tensor field %u: truncated fixed%zu", f->num,
                         w * 8);
        f->v = bb_le_get(d->p + *pos, w);
        *pos += w;
        return BB_OK;
    }
    case WT_LEN:
        rc = get_len(d, pos, end, &f->len, "tensor field length");
        if (rc)
            return rc;
        f->off = *pos;
        *pos += f->len;
        return BB_OK;
    case WT_SGROUP:
    case WT_EGROUP:
        return dfail(d, BB_EDECODE, f->tag_off, "tensor field %u: groups are not supported",
                     f->num);
    default:
        return dfail(d, BB_EDECODE, f->tag_off, "tensor field %u: invalid wire type %u",
                     f->num, f->wt);
    }
}

/* How the elements of a typed data field are encoded on the wire. */
static uint32_t typed_elem_wt(uint32_t field)
{
    switch (field) {
    case TP_FLOAT_DATA: return WT_I32;
    case TP_DOUBLE_DATA: return WT_I64;
    default: return WT_VARINT; /* int32_data, int64_data, uint64_data */
    }
}

static bool is_typed_field(uint32_t f)
{
    return f == TP_FLOAT_DATA || f == TP_INT32_DATA || f == TP_INT64_DATA ||
           f == TP_DOUBLE_DATA || f == TP_UINT64_DATA;
}

/* The typed field ONNX uses for a dtype (onnx.proto TensorProto comments). */
static uint32_t typed_field_for(int32_t dtype)
{
    switch (dtype) {
    case BB_DT_FLOAT: return TP_FLOAT_DATA;
    case BB_DT_DOUBLE: return TP_DOUBLE_DATA;
    case BB_DT_INT64: return TP_INT64_DATA;
    case BB_DT_UINT32:
    case BB_DT_UINT64: return TP_UINT64_DATA;
    default: return TP_INT32_DATA; /* int8/16/32, uint8/16, bool, float16, bfloat16 */
    }
}

static const char *typed_field_name(uint32_t f)
{
    switch (f) {
    case TP_FLOAT_DATA: return "float_data";
    case TP_INT32_DATA: return "int32_data";
    case TP_INT64_DATA: return "int64_data";
    case TP_DOUBLE_DATA: return "double_data";
    default: return "uint64_data";
    }
}

/* Counts the elements of one typed-field occurrence into *n and, when out
 * is given, stores each as es little-endian bytes at out[*idx++]. */
static int typed_elems(dec *d, const pbfield *f, size_t *n, uint8_t *out, size_t es, size_t *idx)
{
    uint32_t ewt = typed_elem_wt(f->num);
    *n = 0; /* see get_varint */
    if (f->wt != WT_LEN) { /* one unpacked element */
        if (f->wt != ewt)
            return dfail(d, BB_EDECODE, f->tag_off, "tensor %s: wrong wire type %u",
                         typed_field_name(f->num), f->wt);
        if (out)
            bb_le_put(out + (*idx)++ * es, f->v, es);
        *n = 1;
        return BB_OK;
    }
    size_t pos = f->off, end = f->off + f->len, cnt = 0;
    if (ewt != WT_VARINT) {
        size_t w = ewt == WT_I64 ? 8 : 4;
        if (f->len % w)
            return dfail(d, BB_EDECODE, f->off, "tensor %s: packed length %zu is not a multiple of %zu",
                         typed_field_name(f->num), f->len, w);
        cnt = f->len / w;
        if (out)
            for (; pos < end; pos += w)
                bb_le_put(out + (*idx)++ * es, bb_le_get(d->p + pos, w), es);
    } else {
        while (pos < end) {
            uint64_t v;
            int rc = get_varint(d, &pos, end, &v, typed_field_name(f->num));
            if (rc)
                return rc;
            if (out)
                bb_le_put(out + (*idx)++ * es, v, es);
            cnt++;
        }
    }
    *n = cnt;
    return BB_OK;
}

/* The form enc_write produces — packed dims (absent for a scalar), then
 * data_type, then raw_data ending the field — read in one pass without a
 * call per field: every tensor a node receives from another takes this way.
 * Only a tensor that is certainly valid is built here; anything else
 * (other field orders, typed fields, unpacked dims, a bad dtype, a size
 * mismatch, a limit) returns false and the general decoder below reads it
 * again and names the problem. */
/* A tensor of nbytes of raw little-endian data at raw (NULL when empty):
 * sharing the source buffer when there is one and raw is aligned for the
 * dtype, else a copy. NULL when out of memory. */
static bb_value *tensor_from_raw(const dec *d, const bb_type_node *leaf, int32_t dtype,
                                 uint32_t ndim, const int64_t *dims, const uint8_t *raw,
                                 size_t nbytes, size_t es)
{
    if (d->src && nbytes && (uintptr_t)raw % es == 0)
        return bb__value_tensor_checked(leaf, dtype, ndim, dims, d->src, (uint8_t *)raw, nbytes);
    bb_buffer *b = bb__buffer_new_uninit(nbytes);
    if (!b)
        return NULL;
    if (nbytes)
        memcpy(b->data, raw, nbytes);
    bb_value *v = bb__value_tensor_checked(leaf, dtype, ndim, dims, b, b->data, nbytes);
    bb_buffer_unref(b);
    return v;
}

static bool decode_tensor_canonical(dec *d, const bb_type_node *expect, size_t s, size_t e,
                                    bb_value **out)
{
    if (!d->p) /* an empty payload: no pointer to offset (the general decoder names it) */
        return false;
    const uint8_t *p = d->p + s, *end = d->p + e;
    int64_t dims[BB_MAX_DIMS];
    uint32_t ndim = 0;
    uint64_t v;
    size_t used;
    if (p < end && *p == (TP_DIMS << 3 | WT_LEN)) {
        if (end - p < 2 || p[1] >= 0x80 || (size_t)(end - p - 2) < p[1])
            return false;
        const uint8_t *q = p + 2, *qe = q + p[1];
        for (; q < qe; q += used) {
            if (ndim == BB_MAX_DIMS || bb_uvarint_read_u64(q, (size_t)(qe - q), &v, &used) ||
                (int64_t)v < 0)
                return false;
            dims[ndim++] = (int64_t)v;
        }
        p = qe;
    }
    if (end - p < 3 || p[0] != (TP_DATA_TYPE << 3 | WT_VARINT) || p[1] >= 0x80)
        return false;
    int32_t dtype = p[1];
    p += 2;
    /* the alignment padding around a large raw_data (enc_write) */
    bool padded = end - p >= 2 && p[0] == (TP_DOC_STRING << 3 | WT_LEN) && p[1] < 0x80;
    if (padded) {
        if ((size_t)(end - p - 2) < p[1])
            return false;
        p += 2 + p[1];
    }
    if (end - p < 1 || p[0] != (TP_RAW_DATA << 3 | WT_LEN))
        return false;
    p++;
    if (bb_uvarint_read_u64(p, (size_t)(end - p), &v, &used) || v > (uint64_t)(end - p) - used)
        return false;
    p += used;
    const uint8_t *tail = p + v; /* nothing after raw_data but the padding's second half */
    if (tail != end && !(padded && end - tail >= 2 && tail[0] == (TP_DOC_STRING << 3 | WT_LEN) &&
                         tail[1] == (size_t)(end - tail) - 2))
        return false;
    const bb_type_node *leaf = bb_type_tensor_of(dtype);
    size_t es = bb_tensor_elem_size(dtype);
    if (!leaf || !es || (expect && expect != leaf))
        return false;
    size_t numel = bb_shape_numel(ndim, dims);
    if (numel == SIZE_MAX || numel > SIZE_MAX / es || numel * es != v || v > d->lim->max_bytes)
        return false;
    *out = tensor_from_raw(d, leaf, dtype, ndim, dims, p, (size_t)v, es);
    return *out != NULL; /* out of memory: the general path reports it */
}

static int decode_tensor(dec *d, const bb_type_node *expect, size_t s, size_t e, bb_value **out)
{
    if (decode_tensor_canonical(d, expect, s, e, out))
        return BB_OK;
    int64_t dims[BB_MAX_DIMS];
    uint32_t ndim = 0;
    bool has_dtype = false, has_raw = false;
    int32_t dtype = 0;
    size_t dtype_off = s, raw_off = 0, raw_len = 0, raw_tag = s;
    uint32_t typed_seen = 0; /* field number of the first typed field */
    size_t typed_off = s, typed_n = 0;
    pbfield f;
    int rc;

    /* Pass 1: validate the structure, collect shape/dtype/raw, count typed elements. */
    for (size_t pos = s; pos < e;) {
        if ((rc = pb_next(d, &pos, e, &f)))
            return rc;
        if (f.num == TP_DIMS) {
            if (f.wt != WT_VARINT && f.wt != WT_LEN)
                return dfail(d, BB_EDECODE, f.tag_off, "tensor dims: wrong wire type %u", f.wt);
            size_t p = f.wt == WT_LEN ? f.off : 0, pe = f.wt == WT_LEN ? f.off + f.len : 0;
            bool one = f.wt == WT_VARINT;
            while (one || p < pe) {
                uint64_t v = f.v;
                size_t at = one ? f.tag_off : p;
                if (!one && (rc = get_varint(d, &p, pe, &v, "tensor dims")))
                    return rc;
                one = false;
                if (ndim == BB_MAX_DIMS)
                    return dfail(d, BB_ELIMIT, at, "tensor: more than %d dims", BB_MAX_DIMS);
                if ((int64_t)v < 0)
                    return dfail(d, BB_EDECODE, at, "tensor: negative dim %" PRId64, (int64_t)v);
                dims[ndim++] = (int64_t)v;
            }
        } else if (f.num == TP_DATA_TYPE) {
            if (f.wt != WT_VARINT)
                return dfail(d, BB_EDECODE, f.tag_off, "tensor data_type: wrong wire type %u", f.wt);
            has_dtype = true;
            dtype = (int32_t)(uint32_t)f.v;
            dtype_off = f.tag_off;
        } else if (f.num == TP_RAW_DATA) {
            if (f.wt != WT_LEN)
                return dfail(d, BB_EDECODE, f.tag_off, "tensor raw_data: wrong wire type %u", f.wt);
            has_raw = true;
            raw_off = f.off;
            raw_len = f.len;
            raw_tag = f.tag_off;
        } else if (is_typed_field(f.num)) {
            size_t n;
            if (typed_seen && typed_seen != f.num)
                return dfail(d, BB_EDECODE, f.tag_off, "tensor: both %s and %s present",
                             typed_field_name(typed_seen), typed_field_name(f.num));
            if ((rc = typed_elems(d, &f, &n, NULL, 0, NULL)))
                return rc;
            if (!typed_seen)
                typed_off = f.tag_off;
            typed_seen = f.num;
            typed_n += n;
        }
        /* anything else (name, doc_string, segment, ...) is skipped */
    }

    if (!has_dtype)
        return dfail(d, BB_EDECODE, s, "tensor: missing data_type");
    const bb_type_node *leaf = bb_type_tensor_of(dtype);
    if (!leaf)
        return dfail(d, BB_EDECODE, dtype_off, "tensor: unsupported data_type %d", dtype);
    if (expect && expect != leaf)
        return dfail(d, BB_EDECODE, dtype_off, "tensor: data_type %d (%s) where %s was expected",
                     dtype, leaf->name, expect->name);
    size_t es = bb_tensor_elem_size(dtype);
    size_t numel = bb_shape_numel(ndim, dims);
    if (numel == SIZE_MAX || numel > SIZE_MAX / es)
        return dfail(d, BB_EDECODE, s, "tensor: element count overflows");
    size_t nbytes = numel * es;
    if (nbytes > d->lim->max_bytes)
        return dfail(d, BB_ELIMIT, s, "tensor: %zu bytes exceed the %zu-byte limit", nbytes,
                     d->lim->max_bytes);
    if (has_raw && typed_seen)
        return dfail(d, BB_EDECODE, typed_off, "tensor: both raw_data and %s present",
                     typed_field_name(typed_seen));
    if (typed_seen) {
        if (typed_seen != typed_field_for(dtype))
            return dfail(d, BB_EDECODE, typed_off, "tensor: %s cannot hold data_type %d",
                         typed_field_name(typed_seen), dtype);
        if (typed_n != numel)
            return dfail(d, BB_EDECODE, typed_off, "tensor: %s has %zu elements, shape needs %zu",
                         typed_field_name(typed_seen), typed_n, numel);
    } else if (raw_len != nbytes) {
        return dfail(d, BB_EDECODE, has_raw ? raw_tag : s,
                     "tensor: raw_data has %zu bytes, shape needs %zu", raw_len, nbytes);
    }

    /* Build: raw_data shared or copied; typed elements converted (pass 2). */
    bb_value *v;
    if (!typed_seen) {
        v = tensor_from_raw(d, leaf, dtype, ndim, dims, has_raw ? d->p + raw_off : NULL, nbytes,
                            es);
    } else {
        bb_buffer *b = bb__buffer_new_uninit(nbytes);
        if (!b)
            return dfail(d, BB_ENOMEM, s, "tensor: %zu bytes", nbytes);
        size_t idx = 0, n;
        for (size_t pos = s; pos < e;) {
            if ((rc = pb_next(d, &pos, e, &f)) ||
                (f.num == typed_seen && (rc = typed_elems(d, &f, &n, b->data, es, &idx)))) {
                bb_buffer_unref(b);
                return rc;
            }
        }
        v = bb__value_tensor_checked(leaf, dtype, ndim, dims, b, b->data, nbytes);
        bb_buffer_unref(b);
    }
    if (!v)
        return dfail(d, BB_ENOMEM, s, "tensor: %zu bytes", nbytes);
    *out = v;
    return BB_OK;
}

/* ---- the rest of the table ---- */

static int decode_value(dec *d, uint64_t hash, size_t s, size_t e, uint32_t depth,
                        bb_value **out);

static int make_bytes(dec *d, const bb_type_node *t, size_t s, size_t len, bb_value **out)
{
    bb_value *v;
    if (d->src && len >= SHARE_MIN_BYTES)
        v = bb_value_bytes_buf(t, d->src, d->src->data + s, len);
    else
        v = bb_value_bytes(t, d->p + s, len);
    if (!v)
        return dfail(d, BB_ENOMEM, s, "%s: %zu bytes", t->name, len);
    *out = v;
    return BB_OK;
}

/* A decoder's scratch array of n item pointers: `stack` (room for cap)
 * when it fits, as most lists and batches are short, else calloc'd. */
static bb_value **items_new(size_t n, bb_value **stack, size_t cap)
{
    if (n <= cap)
        return stack;
    return calloc(n, sizeof(bb_value *));
}

static void items_free(bb_value **items, bb_value **stack)
{
    if (items != stack)
        free(items);
}

/* Unref items[0..n) and free the array (unless it is `stack`). */
static void drop(bb_value **items, size_t n, bb_value **stack)
{
    if (!items)
        return;
    for (size_t i = 0; i < n; i++)
        bb_value_unref(items[i]);
    items_free(items, stack);
}

/* Reads a count and checks it against max_items and against the bytes left
 * (each item needs at least min_item bytes) before anything is allocated. */
static int get_count(dec *d, const bb_type_node *t, size_t *pos, size_t e, size_t min_item,
                     size_t *n)
{
    uint64_t v;
    size_t at = *pos;
    int rc = get_varint(d, pos, e, &v, t->name);
    if (rc)
        return rc;
    if (v > d->lim->max_items)
        return dfail(d, BB_ELIMIT, at, "%s: %" PRIu64 " items exceed the limit of %zu", t->name,
                     v, d->lim->max_items);
    if (v > (uint64_t)(e - *pos) / min_item)
        return dfail(d, BB_EDECODE, at, "%s: %" PRIu64 " items cannot fit in %zu bytes",
                     t->name, v, e - *pos);
    *n = (size_t)v;
    return BB_OK;
}

static int decode_vec(dec *d, const bb_type_node *t, size_t s, size_t e, bb_value **out)
{
    const bb_type_node *et = t->kind == BB_VK_PEER_ID_VEC ? &BB_TYPE_PEER_ID : &BB_TYPE_MULTIADDRESS;
    size_t pos = s, n, i = 0;
    int rc = get_count(d, t, &pos, e, 1, &n);
    if (rc)
        return rc;
    bb_value *stack[BB_VALUE_LIST_INLINE];
    bb_value **items = items_new(n, stack, BB_VALUE_LIST_INLINE);
    if (!items)
        return dfail(d, BB_ENOMEM, s, "%s: %zu items", t->name, n);
    for (; i < n; i++) {
        size_t len;
        if ((rc = get_len(d, &pos, e, &len, t->name)) ||
            (rc = make_bytes(d, et, pos, len, &items[i])))
            goto fail;
        pos += len;
    }
    if (pos != e) {
        rc = dfail(d, BB_EDECODE, pos, "%s: %zu trailing bytes", t->name, e - pos);
        goto fail;
    }
    *out = bb_value_list(t, items, n); /* takes the item refs */
    items_free(items, stack);
    return *out ? BB_OK : dfail(d, BB_ENOMEM, s, "%s value", t->name);
fail:
    drop(items, i, stack);
    return rc;
}

/* One "u64 LE hash, varint length, encoding" record. */
static int decode_tagged(dec *d, const char *what, size_t idx, size_t *pos, size_t e,
                         uint32_t depth, bb_value **out)
{
    if (e - *pos < 8)
        return dfail(d, BB_EDECODE, *pos, "%s %zu: truncated type hash", what, idx);
    uint64_t hash = bb_le_get(d->p + *pos, 8);
    *pos += 8;
    size_t len;
    int rc = get_len(d, pos, e, &len, what);
    if (rc)
        return rc;
    rc = decode_value(d, hash, *pos, *pos + len, depth, out);
    if (rc)
        return d->err ? bb_error_prefix(d->err, "%s %zu", what, idx) : rc;
    *pos += len;
    return BB_OK;
}

static int decode_composite(dec *d, const bb_type_node *t, size_t s, size_t e, uint32_t depth,
                            bb_value **out)
{
    if (depth >= d->lim->max_depth)
        return dfail(d, BB_ELIMIT, s, "%s: nesting deeper than %u", t->name, d->lim->max_depth);
    size_t pos = s, n, i = 0;
    int rc = get_count(d, t, &pos, e, 9, &n); /* hash + 1-byte length */
    if (rc)
        return rc;
    bb_value *stack[BB_VALUE_LIST_INLINE];
    bb_value **items = items_new(n, stack, BB_VALUE_LIST_INLINE);
    if (!items)
        return dfail(d, BB_ENOMEM, s, "%s: %zu children", t->name, n);
    for (; i < n; i++)
        if ((rc = decode_tagged(d, "composite child", i, &pos, e, depth + 1, &items[i])))
            goto fail;
    if (pos != e) {
        rc = dfail(d, BB_EDECODE, pos, "%s: %zu trailing bytes", t->name, e - pos);
        goto fail;
    }
    *out = bb_value_list(t, items, n);
    items_free(items, stack);
    return *out ? BB_OK : dfail(d, BB_ENOMEM, s, "%s value", t->name);
fail:
    drop(items, i, stack);
    return rc;
}

static int decode_batch(dec *d, const bb_type_node *t, size_t s, size_t e, uint32_t depth,
                        bb_value **out)
{
    if (depth >= d->lim->max_depth)
        return dfail(d, BB_ELIMIT, s, "%s: nesting deeper than %u", t->name, d->lim->max_depth);
    size_t pos = s, n, i = 0;
    int rc = get_count(d, t, &pos, e, 10, &n); /* peer len + hash + value len */
    if (rc)
        return rc;
    bb_value *stack_items[BB_VALUE_BATCH_INLINE], *stack_peers[BB_VALUE_BATCH_INLINE];
    bb_value **items = items_new(n, stack_items, BB_VALUE_BATCH_INLINE);
    bb_value **peers = items_new(n, stack_peers, BB_VALUE_BATCH_INLINE);
    if (!items || !peers) {
        items_free(items, stack_items);
        items_free(peers, stack_peers);
        return dfail(d, BB_ENOMEM, s, "%s: %zu responses", t->name, n);
    }
    for (; i < n; i++) {
        size_t len;
        items[i] = NULL; /* the fail path below drops items[i] with peers[i] */
        if ((rc = get_len(d, &pos, e, &len, "response peer")) ||
            (rc = make_bytes(d, &BB_TYPE_PEER_ID, pos, len, &peers[i])))
            goto fail;
        pos += len;
        if ((rc = decode_tagged(d, "response", i, &pos, e, depth + 1, &items[i]))) {
            i++; /* peers[i] is set */
            goto fail;
        }
    }
    if (pos != e) {
        rc = dfail(d, BB_EDECODE, pos, "%s: %zu trailing bytes", t->name, e - pos);
        goto fail;
    }
    *out = bb_value_response_batch(items, peers, n);
    items_free(items, stack_items);
    items_free(peers, stack_peers);
    return *out ? BB_OK : dfail(d, BB_ENOMEM, s, "%s value", t->name);
fail:
    drop(items, i, stack_items);
    drop(peers, i, stack_peers);
    return rc;
}

static int decode_value(dec *d, uint64_t hash, size_t s, size_t e, uint32_t depth,
                        bb_value **out)
{
    const bb_type_node *t = bb_type_by_wire_hash(hash);
    if (!t)
        return dfail(d, BB_EDECODE, s, "unknown type hash 0x%016" PRIx64, hash);
    size_t len = e - s;
    switch (t->kind) {
    case BB_VK_ABSTRACT:
        if (t == &BB_TYPE_TENSOR) /* any dtype */
            return decode_tensor(d, NULL, s, e, out);
        return dfail(d, BB_EDECODE, s, "type %s (hash 0x%016" PRIx64 ") has no wire encoding",
                     t->name, hash);
    case BB_VK_TENSOR:
        return decode_tensor(d, t, s, e, out);
    case BB_VK_TRIGGER:
        if (len)
            return dfail(d, BB_EDECODE, s, "%s: %zu trailing bytes", t->name, len);
        *out = bb_value_trigger();
        break;
    case BB_VK_U64:
        if (len < 8)
            return dfail(d, BB_EDECODE, s, "%s: truncated (%zu of 8 bytes)", t->name, len);
        if (len > 8)
            return dfail(d, BB_EDECODE, s + 8, "%s: %zu trailing bytes", t->name, len - 8);
        *out = bb_value_u64(t, bb_le_get(d->p + s, 8));
        break;
    case BB_VK_BYTES:
    case BB_VK_PEER_ID:
    case BB_VK_ADDRESS:
        return make_bytes(d, t, s, len, out);
    case BB_VK_PEER_ID_VEC:
    case BB_VK_ADDRESS_VEC:
        return decode_vec(d, t, s, e, out);
    case BB_VK_COMPOSITE:
        return decode_composite(d, t, s, e, depth, out);
    case BB_VK_RESPONSE_BATCH:
        return decode_batch(d, t, s, e, depth, out);
    default:
        return dfail(d, BB_EDECODE, s, "type %s has no wire encoding", t->name);
    }
    return *out ? BB_OK : dfail(d, BB_ENOMEM, s, "%s value", t->name);
}

static int decode_top(dec *d, uint64_t hash, size_t len, bool tensor_only, bb_value **out)
{
    if (!out)
        return bb_error_set(d->err, BB_EINVAL, "decode: NULL output");
    *out = NULL;
    if (len && !d->p)
        return bb_error_set(d->err, BB_EINVAL, "decode: NULL input");
    if (len > d->lim->max_bytes)
        return dfail(d, BB_ELIMIT, 0, "value of %zu bytes exceeds the %zu-byte limit", len,
                     d->lim->max_bytes);
    if (tensor_only)
        return decode_tensor(d, NULL, 0, len, out);
    return decode_value(d, hash, 0, len, 0, out);
}

int bb_value_decode(uint64_t type_hash, const uint8_t *data, size_t len,
                    const bb_decode_limits *lim, bb_value **out, bb_error *err)
{
    dec d = {data, lim ? lim : &BB_DECODE_LIMITS_DEFAULT, err, NULL};
    return decode_top(&d, type_hash, len, false, out);
}

int bb_value_decode_buf(uint64_t type_hash, bb_buffer *buf, const bb_decode_limits *lim,
                        bb_value **out, bb_error *err)
{
    if (!buf)
        return bb_error_set(err, BB_EINVAL, "decode: NULL buffer");
    dec d = {buf->data, lim ? lim : &BB_DECODE_LIMITS_DEFAULT, err, buf};
    return decode_top(&d, type_hash, buf->len, false, out);
}

int bb_value_decode_tensor_buf(bb_buffer *buf, const bb_decode_limits *lim, bb_value **out,
                               bb_error *err)
{
    if (!buf)
        return bb_error_set(err, BB_EINVAL, "decode: NULL buffer");
    dec d = {buf->data, lim ? lim : &BB_DECODE_LIMITS_DEFAULT, err, buf};
    return decode_top(&d, 0, buf->len, true, out);
}
