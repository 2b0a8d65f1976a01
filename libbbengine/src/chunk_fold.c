/*
 * chunk_fold.c — a response that arrives as a chunk stream, folded into
 * its aggregator piece by piece as its chunks land, so the node never
 * holds the whole update (issue 23: server memory O(model + chunks in
 * flight), not O(model) more per update being received).
 *
 * A batch folds its responses as they land (wire.c, "responses folded as
 * they land"); a response larger than stream_chunk_bytes comes as a chunk
 * stream (streams.c), which would otherwise be assembled whole first. At
 * the stream's first DATA chunk this file reads what the whole envelope
 * would say about it:
 *
 *   head   the first chunk's bytes: the envelope's fields up to its one
 *          fill, the fill's payload — Composites of one child around
 *          Composite(tensor, rest...) — and the tensor's TensorProto up to
 *          raw_data (f32, its shape, where its bytes lie);
 *   tail   the envelope's last bytes, which the sender previews in the
 *          first chunk (StreamChunk.tail, at most BBE__CHUNK_TAIL_MAX):
 *          the padding after raw_data, the rest of the Composite
 *          (num_samples, ...), and the envelope's fields after the fill
 *          (the correlation: a RESPONSE and its wire_req_id).
 *
 * When all of that is there, well-formed, and names a batch that folds,
 * from a cohort member that has not answered and streams nothing else to
 * it, and the fold op's component takes pieces (bb_component_type
 * .fold_piece, BEGIN not refused), the stream is admitted without a
 * buffer: each chunk's part of raw_data goes to the component as whole
 * elements (a partial element waits in `carry`; misaligned bytes are
 * copied to an aligned bounce buffer first), each byte of the previewed
 * tail is compared with the preview when it arrives, and the last byte
 * ends the contribution (END), which counts as a response that landed.
 * Anything else — no preview, another layout, a batch that does not fold
 * yet, a component without fold_piece or one that says BB_EUNSUPPORTED
 * (TrimmedMean, skip mode) — leaves the stream to the whole-envelope path,
 * unchanged.
 *
 * What a piece-wise response cannot do: be taken back. A stream that dies
 * part-way (stall, a refused chunk, its batch completing first) ends with
 * ABORT and what was folded stays folded (the aggregator keeps per-
 * coordinate weights: docs/DECISIONS.md); a tail that differs from its
 * preview, or a piece the component refuses, fails the batch as a refused
 * response does. Only bytes at the stream's position are taken
 * (streams.c), so a chunk resent after a reconnect is never folded twice.
 */
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "bb/le.h"
#include "bb/uvarint.h"
#include "libbbengine/src/engine_internal.h"

#define WRAP_DEPTH 4              /* Composites of one child around the contribution */
#define REST_MAX_CHILDREN 16      /* num_samples, a PeerId, ... */
#define BOUNCE_BYTES ((size_t)1 << 20)

struct bbe__fold_in {
    uint64_t batch;               /* the local RequestId of the batch it answers */
    uint32_t who;                 /* the sender's index in the batch's cohort */
    uint32_t comp;                /* the fold op's component */
    uint64_t handle;              /* bb_fold_piece.stream */
    size_t raw_at, raw_end;       /* the tensor's bytes in the envelope */
    size_t es;                    /* bytes per element */
    uint64_t elems;               /* handed over so far */
    size_t tail_at;               /* the preview: bytes [tail_at, total) */
    uint8_t *tail;
    size_t charged;               /* the preview and the bounce buffer, charged to the
                                   * ingress budget */
    alignas(8) uint8_t carry[8];  /* a partial element */
    size_t n_carry;
    uint8_t *bounce;              /* bounce_len bytes (charged at open), made when bytes
                                   * come misaligned */
    size_t bounce_len;
};

/* ---- what the first chunk and the preview say ------------------------------------- */

/* The bytes visible at the first chunk: the head [0, hn) and the
 * previewed tail [tail_at, total). */
typedef struct view {
    const uint8_t *head, *tail;
    size_t hn, tail_at, total;
} view;

typedef struct layout {
    size_t raw_at, raw_len;
    uint32_t ndim;
    int64_t dims[BB_MAX_DIMS];
    uint64_t rest_hash;           /* the Composite the tensor is the first child of */
    uint64_t rest_n;              /* its other children, in [rest_at, rest_end) */
    size_t rest_at, rest_end;
    size_t env_at;                /* the envelope's fields after the fill, to total */
} layout;

/* n visible bytes at pos, or NULL. */
static const uint8_t *seen(const view *v, size_t pos, size_t n)
{
    if (pos <= v->hn && n <= v->hn - pos)
        return v->head + pos;
    if (pos >= v->tail_at && pos <= v->total && n <= v->total - pos)
        return v->tail + (pos - v->tail_at);
    return NULL;
}

static bool varint(const view *v, size_t *pos, uint64_t *out)
{
    size_t avail = 0, used = 0;
    const uint8_t *p = NULL;
    if (*pos < v->hn) {
        p = v->head + *pos;
        avail = v->hn - *pos;
    } else if (*pos >= v->tail_at && *pos < v->total) {
        p = v->tail + (*pos - v->tail_at);
        avail = v->total - *pos;
    }
    if (!p || bb_uvarint_read_u64(p, avail, out, &used) != BB_UVARINT_OK)
        return false;
    *pos += used;
    return true;
}

/* A length at *pos whose bytes end by `end`: *stop is where they end. */
static bool length(const view *v, size_t *pos, size_t end, size_t *stop)
{
    uint64_t n;
    if (!varint(v, pos, &n) || *pos > end || n > end - *pos)
        return false;
    *stop = *pos + (size_t)n;
    return true;
}

static bool byte_is(const view *v, size_t pos, uint8_t want)
{
    const uint8_t *p = seen(v, pos, 1);
    return p && *p == want;
}

/* TensorProto [s, e) as the encoder writes it (value_wire.c enc_write):
 * dims, data_type FLOAT, the padding, raw_data; after raw_data only the
 * padding's second half, all of it in the tail. */
static bool parse_tensor(const view *v, size_t pos, size_t e, layout *l)
{
    size_t stop;
    uint64_t x;
    l->ndim = 0;
    if (byte_is(v, pos, 0x0a)) {
        pos++;
        if (!length(v, &pos, e, &stop))
            return false;
        while (pos < stop) {
            if (l->ndim == BB_MAX_DIMS || !varint(v, &pos, &x) || x > INT64_MAX)
                return false;
            l->dims[l->ndim++] = (int64_t)x;
        }
        if (pos != stop)
            return false;
    }
    if (!byte_is(v, pos++, 0x10) || !varint(v, &pos, &x) || x != BB_DT_FLOAT)
        return false;
    if (byte_is(v, pos, 0x62)) { /* the alignment padding before raw_data */
        pos++;
        if (!length(v, &pos, e, &stop))
            return false;
        pos = stop;
    }
    if (!byte_is(v, pos++, 0x4a) || !length(v, &pos, e, &stop))
        return false;
    size_t numel = bb_shape_numel(l->ndim, l->dims);
    l->raw_at = pos;
    l->raw_len = stop - pos;
    if (!l->raw_len || numel == SIZE_MAX || numel > SIZE_MAX / 4 || numel * 4 != l->raw_len)
        return false;
    if (stop < v->tail_at) /* what follows raw_data must be in the preview */
        return false;
    if (stop == e)
        return true;
    pos = stop;
    return byte_is(v, pos++, 0x62) && length(v, &pos, e, &stop) && stop == e;
}

/* The fill's payload [pos, end): decoded as a Composite (wire.c
 * deliver_response), whose one child may be a Composite again, down to
 * the Composite whose first child is the tensor. */
static bool parse_payload(const view *v, size_t pos, size_t end, layout *l)
{
    uint64_t hash = BB_TYPE_COMPOSITE.wire_hash;
    for (int depth = 0; depth < WRAP_DEPTH; depth++) {
        uint64_t n;
        size_t stop;
        const uint8_t *h;
        if (!varint(v, &pos, &n) || n < 1 || n > REST_MAX_CHILDREN || !(h = seen(v, pos, 8)))
            return false;
        uint64_t child = bb_le_get(h, 8);
        pos += 8;
        const bb_type_node *t = bb_type_by_wire_hash(child);
        if (!t || !length(v, &pos, end, &stop))
            return false;
        if (n == 1 && t->kind == BB_VK_COMPOSITE) {
            if (stop != end)
                return false;
            hash = child;
            continue;
        }
        if (t->kind != BB_VK_TENSOR)
            return false;
        l->rest_hash = hash;
        l->rest_n = n - 1;
        l->rest_at = stop;
        l->rest_end = end;
        return parse_tensor(v, pos, stop, l);
    }
    return false;
}

/* The envelope's fields before its fill, the fill's dest_suffix, then its
 * payload. */
static bool parse_envelope(const view *v, layout *l)
{
    size_t pos = 0, stop = 0, fill_end;
    for (;;) {
        uint64_t tag, x;
        if (pos >= v->hn || !varint(v, &pos, &tag))
            return false;
        unsigned wt = (unsigned)(tag & 7);
        uint64_t field = tag >> 3;
        if (wt == 2) {
            if (!length(v, &pos, v->total, &stop))
                return false;
            if (field == 2)
                break;
            if (field == 3 || field == 9) /* not where a sender writes them */
                return false;
            pos = stop;
        } else if (wt == 0) {
            if (!varint(v, &pos, &x))
                return false;
        } else if (wt == 1) {
            pos += 8;
        } else {
            return false;
        }
    }
    fill_end = stop;
    for (;;) {
        uint64_t tag;
        if (!varint(v, &pos, &tag) || (tag & 7) != 2 || !length(v, &pos, fill_end, &stop))
            return false;
        if (tag >> 3 == 2)
            break;
        pos = stop; /* dest_suffix: a response is routed by its correlation */
    }
    l->env_at = fill_end;
    return fill_end >= v->tail_at && parse_payload(v, pos, stop, l);
}

/* The Composite of the contribution's other children (new reference), or
 * NULL. */
static bb_value *rest_of(const view *v, const layout *l)
{
    size_t n = l->rest_end - l->rest_at;
    const uint8_t *src = seen(v, l->rest_at, n);
    uint8_t *buf = src ? malloc(BB_UVARINT_MAX_U64 + n) : NULL;
    if (!buf)
        return NULL;
    size_t k = bb_uvarint_encode(l->rest_n, buf);
    memcpy(buf + k, src, n);
    bb_value *out = NULL;
    bb_error err;
    if (bb_value_decode(l->rest_hash, buf, k + n, &BB_DECODE_LIMITS_DEFAULT, &out, &err))
        out = NULL;
    free(buf);
    return out;
}

/* The wire_req_id of the response the envelope's trailing fields make it,
 * or 0. */
static uint64_t response_id(bb_engine *e, const view *v, const layout *l)
{
    bbe__envelope env;
    bb_error err;
    bbe__env_limits lim = {e->caps.max_envelope_fills, e->caps.max_envelope_addresses};
    const uint8_t *rest = seen(v, l->env_at, v->total - l->env_at);
    if (!rest || bbe__envelope_decode(rest, v->total - l->env_at, &lim, &env, &err))
        return 0;
    uint64_t id = env.corr_kind == 2 && !env.n_fills && !env.chunk.present ? env.wire_req_id : 0;
    bbe__envelope_release(&env);
    return id;
}

/* ---- the component ------------------------------------------------------------------ */

static int piece(bb_engine *e, const bbe__fold_in *f, bb_fold_piece *p, bb_error *err)
{
    bbe__comp *c = &e->comps[f->comp];
    p->struct_size = sizeof *p;
    p->stream = f->handle;
    bb_error_clear(err);
    int rc = c->type->fold_piece(c->inst, &c->ctx.pub, p, err);
    if (rc && !err->msg[0])
        bb_error_set(err, rc, "%s: a piece of a contribution refused", c->slot);
    return rc;
}

static bool takes_pieces(const bbe__comp *c)
{
    return BB_ABI_HAS(bb_component_type, c->type, fold_piece) && c->type->fold_piece;
}

static void fold_free(bb_engine *e, bbe__fold_in *f)
{
    bbe__budget_release(e, f->charged);
    free(f->tail);
    free(f->bounce);
    free(f);
}

/* Whether sender `who` of batch already streams a response into it. */
bool bbe__chunk_fold_busy(const bb_engine *e, uint64_t batch, uint32_t who)
{
    for (size_t i = 0; i < e->streams_in.n; i++) {
        const bbe__fold_in *f = e->streams_in.v[i].fold;
        if (f && f->batch == batch && f->who == who)
            return true;
    }
    return false;
}

/* BEGIN: BB_OK, BB_EUNSUPPORTED (the whole path takes it), or the
 * component's refusal in err. */
static int begin(bb_engine *e, bbe__fold_in *f, const bb_peerid *src, const bb_value *rest,
                 const layout *l, bb_error *err)
{
    bbe__peer *p = bbe__peer_find(e, src);
    bb_value *sender = p ? bbe__peer_cached_id_value(p) : bbe__peerid_value(src);
    bb_value *request = bb_value_u64(&BB_TYPE_REQUEST_ID, f->batch);
    int rc = BB_ENOMEM;
    if (sender && request) {
        bb_fold_piece pc = {.step = BB_FOLD_BEGIN, .request = request, .sender = sender,
                            .rest = rest, .dtype = BB_DT_FLOAT, .ndim = l->ndim,
                            .dims = l->dims};
        rc = piece(e, f, &pc, err);
    } else {
        bb_error_set(err, rc, "out of memory");
    }
    bb_value_unref(sender);
    bb_value_unref(request);
    return rc;
}

bbe__fold_in *bbe__chunk_fold_open(bb_engine *e, const bb_peerid *src, const bbe__chunk *c,
                                   bool *refused)
{
    *refused = false;
    if (c->offset || !c->data_len || !c->tail_len || c->tail_len > BBE__CHUNK_TAIL_MAX ||
        c->tail_len > c->total || c->data_len > c->total)
        return NULL;
    view v = {.head = c->data, .hn = c->data_len, .tail = c->tail,
              .tail_at = c->total - c->tail_len, .total = c->total};
    layout l;
    uint64_t wire_id;
    bbe__batch *b;
    if (!parse_envelope(&v, &l) || !(wire_id = response_id(e, &v, &l)) ||
        !(b = bbe__batch_of_wire(e, wire_id)) || b->done || !b->folding)
        return NULL;
    uint32_t who = bbe__batch_cohort_index(b, src);
    uint32_t comp = e->ops[b->fold_op].comp;
    if (who == UINT32_MAX || !takes_pieces(&e->comps[comp]))
        return NULL; /* the whole path drops or dispatches it, as before */
    if (bbe__chunk_fold_busy(e, b->id, who)) {
        *refused = true; /* a second stream of the same answer: one is enough */
        return NULL;
    }
    bb_value *rest = rest_of(&v, &l);
    bbe__fold_in *f = rest ? calloc(1, sizeof *f) : NULL;
    uint8_t *tail = f ? malloc(c->tail_len) : NULL;
    /* what the stream may hold besides its chunks: the preview, and a
     * bounce buffer of one chunk (the first's size) or BOUNCE_BYTES */
    size_t bounce = c->data_len < BOUNCE_BYTES ? c->data_len : BOUNCE_BYTES;
    bounce = bounce < 64 ? 64 : bounce; /* a whole element at least, however small the chunk */
    size_t charge = c->tail_len + bounce;
    if (!tail || !bbe__budget_charge(e, charge)) {
        free(tail);
        free(f);
        bb_value_unref(rest);
        return NULL; /* no room: assembled whole, which waits for the budget */
    }
    memcpy(tail, c->tail, c->tail_len);
    *f = (bbe__fold_in){.batch = b->id, .who = who, .comp = comp, .handle = ++e->next_fold_id,
                        .raw_at = l.raw_at, .raw_end = l.raw_at + l.raw_len, .es = 4,
                        .tail_at = v.tail_at, .tail = tail, .charged = charge,
                        .bounce_len = bounce - bounce % 4};
    bb_error err;
    int rc = begin(e, f, src, rest, &l, &err);
    bb_value_unref(rest);
    if (rc) {
        fold_free(e, f);
        if (rc != BB_EUNSUPPORTED) {
            *refused = true;
            bbe__batch_refused(e, b, err.msg);
        }
        return NULL;
    }
    return f;
}

/* ---- the pieces ------------------------------------------------------------------------ */

static int hand_over(bb_engine *e, bbe__fold_in *f, const void *data, uint64_t count,
                     bb_error *err)
{
    bb_fold_piece pc = {.step = BB_FOLD_DATA, .offset = f->elems, .count = count, .data = data};
    int rc = piece(e, f, &pc, err);
    f->elems += count;
    return rc;
}

/* Raw bytes d[0, n), the next ones of the tensor, as whole aligned
 * elements. */
static int feed(bb_engine *e, bbe__fold_in *f, const uint8_t *d, size_t n, bb_error *err)
{
    int rc = BB_OK;
    while (n && !rc) {
        if (f->n_carry || n < f->es) { /* an element split between chunks */
            size_t take = f->es - f->n_carry < n ? f->es - f->n_carry : n;
            memcpy(f->carry + f->n_carry, d, take);
            f->n_carry += take;
            d += take;
            n -= take;
            if (f->n_carry == f->es) {
                f->n_carry = 0;
                rc = hand_over(e, f, f->carry, 1, err);
            }
            continue;
        }
        size_t bytes = n - n % f->es;
        if ((uintptr_t)d % f->es == 0) {
            rc = hand_over(e, f, d, bytes / f->es, err);
        } else { /* where the transport put the chunk: copied to be read as floats */
            if (!f->bounce && !(f->bounce = malloc(f->bounce_len)))
                return bb_error_set(err, BB_ENOMEM, "out of memory");
            bytes = bytes < f->bounce_len ? bytes : f->bounce_len;
            memcpy(f->bounce, d, bytes);
            rc = hand_over(e, f, f->bounce, bytes / f->es, err);
        }
        d += bytes;
        n -= bytes;
    }
    return rc;
}

/* The batch the stream still folds into, or NULL (completed, dropped with
 * its execution, restored from a snapshot without it). */
static bbe__batch *live_batch(bb_engine *e, const bbe__fold_in *f)
{
    bbe__batch *b = bbe__batch_get(e, f->batch);
    return b && !b->done && b->folding ? b : NULL;
}

static void abort_piece(bb_engine *e, bbe__fold_in *f)
{
    bb_fold_piece pc = {.step = BB_FOLD_ABORT};
    bb_error err;
    piece(e, f, &pc, &err);
}

bool bbe__chunk_fold_data(bb_engine *e, bbe__fold_in *f, size_t off, const uint8_t *d, size_t n)
{
    bbe__batch *b = live_batch(e, f);
    if (!b) {
        abort_piece(e, f);
        fold_free(e, f);
        return false;
    }
    bb_error err;
    int rc = BB_OK;
    size_t end = off + n;
    if (end > f->tail_at) {
        size_t from = off > f->tail_at ? off : f->tail_at;
        if (memcmp(d + (from - off), f->tail + (from - f->tail_at), end - from))
            rc = bb_error_set(&err, BB_EDECODE,
                              "a response streamed in chunks differs from the tail its first "
                              "chunk previewed (at byte %zu)",
                              from);
    }
    size_t lo = off > f->raw_at ? off : f->raw_at, hi = end < f->raw_end ? end : f->raw_end;
    if (!rc && lo < hi)
        rc = feed(e, f, d + (lo - off), hi - lo, &err);
    if (!rc)
        return true;
    abort_piece(e, f);
    fold_free(e, f);
    bbe__batch_refused(e, b, err.msg);
    return false;
}

void bbe__chunk_fold_end(bb_engine *e, bbe__fold_in *f, const bb_peerid *src)
{
    bbe__batch *b = live_batch(e, f);
    if (!b) {
        abort_piece(e, f);
        fold_free(e, f);
        return;
    }
    bb_fold_piece pc = {.step = BB_FOLD_END};
    bb_error err;
    int rc = piece(e, f, &pc, &err);
    uint32_t who = f->who;
    fold_free(e, f);
    e->c[BBE__C_STREAMS_FOLDED] += !rc;
    bbe__batch_response_landed(e, b, who, src, rc ? err.msg : NULL);
}

void bbe__chunk_fold_abort(bb_engine *e, bbe__fold_in *f, bool tell)
{
    if (tell) {
        abort_piece(e, f);
        /* what it brought stays in the round: the sender has answered
         * (a later answer would count its prefix twice), but brought no
         * response the batch can count towards its quorum */
        bbe__batch *b = live_batch(e, f);
        if (b && f->elems)
            b->answered[f->who] = true;
    }
    fold_free(e, f);
}

void bbe__chunk_fold_batch_done(bb_engine *e, uint64_t batch)
{
    for (size_t i = 0; i < e->streams_in.n; i++) {
        bbe__stream_in *s = &e->streams_in.v[i];
        if (!s->fold || s->fold->batch != batch)
            continue;
        bbe__chunk_fold_abort(e, s->fold, true);
        s->fold = NULL;
        s->gone = true; /* refused at its next chunk, or by the next check */
        e->streams_check_at = e->now_ns;
    }
}

void bbe__chunk_fold_forget(bb_engine *e)
{
    for (size_t i = 0; i < e->streams_in.n; i++) {
        bbe__stream_in *s = &e->streams_in.v[i];
        if (!s->fold)
            continue;
        /* the batch ids it named may be reused by the restored state, and
         * the restored component never heard of it: nothing to tell */
        bbe__chunk_fold_abort(e, s->fold, false);
        s->fold = NULL;
        s->gone = true;
    }
}
