/*
 * bytes.c — the byte writer and bounded reader of bb/bytes.h.
 *
 * Workload: snapshots (kilobytes to the size of a model's parameters) and
 * handshakes (a few hundred bytes); not the message path, whose codecs
 * (envelope.c, value_wire.c) read their bytes inline. A growable writer
 * starts at 256 bytes and doubles, so a large snapshot costs O(log n)
 * reallocations.
 */
#include "bb/bytes.h"

#include <stdlib.h>
#include <string.h>

#include "bb/le.h"
#include "bb/status.h"
#include "bb/uvarint.h"

#define FIRST_CAP 256u

/* ---- writer ----------------------------------------------------------------------------- */

void bb_writer_init_fixed(bb_writer *w, void *buf, size_t cap)
{
    *w = (bb_writer){.data = buf, .cap = cap, .fixed = true};
}

/* Room for n more bytes at the end, or the writer is failed. */
static bool writer_room(bb_writer *w, size_t n)
{
    if (w->failed)
        return false;
    if (n <= w->cap - w->len)
        return true;
    if (w->fixed || w->len > SIZE_MAX / 2 || n > SIZE_MAX / 2 - w->len) {
        w->failed = true;
        return false;
    }
    size_t cap = w->cap ? w->cap : FIRST_CAP;
    while (cap < w->len + n)
        cap *= 2;
    uint8_t *p = realloc(w->data, cap);
    if (!p) {
        w->failed = true;
        return false;
    }
    w->data = p;
    w->cap = cap;
    return true;
}

void bb_writer_put(bb_writer *w, const void *src, size_t n)
{
    if (!n || !writer_room(w, n))
        return;
    memcpy(w->data + w->len, src, n);
    w->len += n;
}

uint8_t *bb_writer_grow(bb_writer *w, size_t n)
{
    if (!writer_room(w, n))
        return NULL;
    uint8_t *p = w->data + w->len;
    w->len += n;
    return p;
}

void bb_writer_put_u8(bb_writer *w, uint8_t v)
{
    bb_writer_put(w, &v, 1);
}

void bb_writer_put_u32le(bb_writer *w, uint32_t v)
{
    uint8_t b[4];
    bb_le_put(b, v, 4);
    bb_writer_put(w, b, 4);
}

void bb_writer_put_u64le(bb_writer *w, uint64_t v)
{
    uint8_t b[8];
    bb_le_put(b, v, 8);
    bb_writer_put(w, b, 8);
}

void bb_writer_put_uvarint(bb_writer *w, uint64_t v)
{
    uint8_t b[BB_UVARINT_MAX_U64];
    bb_writer_put(w, b, bb_uvarint_encode(v, b));
}

void bb_writer_put_delimited(bb_writer *w, const void *src, size_t n)
{
    bb_writer_put_uvarint(w, n);
    bb_writer_put(w, src, n);
}

void bb_writer_put_str(bb_writer *w, const char *s)
{
    bb_writer_put_delimited(w, s, s ? strlen(s) : 0);
}

void bb_writer_reset(bb_writer *w)
{
    w->len = 0;
    w->failed = false;
}

bool bb_writer_take(bb_writer *w, uint8_t **out, size_t *len)
{
    bool ok = !w->failed;
    *out = ok ? w->data : NULL;
    *len = ok ? w->len : 0;
    if (!ok && !w->fixed)
        free(w->data);
    *w = (bb_writer){0};
    return ok;
}

void bb_writer_free(bb_writer *w)
{
    if (!w->fixed)
        free(w->data);
    *w = (bb_writer){0};
}

/* ---- reader ------------------------------------------------------------------------------- */

void bb_reader_init(bb_reader *r, const void *data, size_t len)
{
    *r = (bb_reader){.data = data, .len = len};
}

size_t bb_reader_left(const bb_reader *r)
{
    return r->len - r->pos;
}

bool bb_reader_has(const bb_reader *r, size_t count, size_t size)
{
    return !r->failed && (size == 0 || count <= (r->len - r->pos) / size);
}

bool bb_reader_fail(bb_reader *r, size_t at, int status, const char *why)
{
    if (!r->failed) {
        r->failed = true;
        r->fail_at = at;
        r->status = status;
        r->why = why;
    }
    return false;
}

bool bb_reader_view(bb_reader *r, size_t n, const uint8_t **out)
{
    *out = NULL;
    if (r->failed)
        return false;
    if (n > r->len - r->pos)
        return bb_reader_fail(r, r->pos, BB_ETRUNC, "the data ends early");
    *out = r->data ? r->data + r->pos : NULL; /* no data: nothing to point into */
    r->pos += n;
    return true;
}

bool bb_reader_get(bb_reader *r, void *dst, size_t n)
{
    const uint8_t *p;
    if (!bb_reader_view(r, n, &p))
        return false;
    if (n)
        memcpy(dst, p, n);
    return true;
}

bool bb_reader_u8(bb_reader *r, uint8_t *v)
{
    const uint8_t *p;
    bool ok = bb_reader_view(r, 1, &p);
    *v = ok ? p[0] : 0;
    return ok;
}

bool bb_reader_u32le(bb_reader *r, uint32_t *v)
{
    const uint8_t *p;
    bool ok = bb_reader_view(r, 4, &p);
    *v = ok ? (uint32_t)bb_le_get(p, 4) : 0;
    return ok;
}

bool bb_reader_u64le(bb_reader *r, uint64_t *v)
{
    const uint8_t *p;
    bool ok = bb_reader_view(r, 8, &p);
    *v = ok ? bb_le_get(p, 8) : 0;
    return ok;
}

static bool reader_varint(bb_reader *r, uint64_t *v, bool minimal)
{
    *v = 0;
    if (r->failed)
        return false;
    size_t used, n = r->len - r->pos;
    if (!n)
        return bb_reader_fail(r, r->pos, BB_ETRUNC, bb_uvarint_rc_str(BB_UVARINT_TRUNC));
    const uint8_t *p = r->data + r->pos;
    bb_uvarint_rc rc = minimal ? bb_uvarint_decode(p, n, BB_UVARINT_MAX_U64, v, &used)
                               : bb_uvarint_read_u64(p, n, v, &used);
    if (rc != BB_UVARINT_OK) {
        *v = 0;
        return bb_reader_fail(r, r->pos, rc == BB_UVARINT_TRUNC ? BB_ETRUNC : BB_EPARSE,
                              bb_uvarint_rc_str(rc));
    }
    r->pos += used;
    return true;
}

bool bb_reader_uvarint(bb_reader *r, uint64_t *v)
{
    return reader_varint(r, v, false);
}

bool bb_reader_uvarint_minimal(bb_reader *r, uint64_t *v)
{
    return reader_varint(r, v, true);
}

bool bb_reader_delimited(bb_reader *r, const uint8_t **out, size_t *len)
{
    size_t at = r->pos;
    uint64_t n;
    *out = NULL;
    *len = 0;
    if (!bb_reader_uvarint(r, &n))
        return false;
    if (n > r->len - r->pos)
        return bb_reader_fail(r, at, BB_ETRUNC, "a length runs past the end");
    *len = (size_t)n;
    return bb_reader_view(r, (size_t)n, out);
}
