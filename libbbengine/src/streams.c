/*
 * streams.c — chunk streams: an envelope larger than
 * config.stream_chunk_bytes goes to its peer in pieces, so no frame a
 * transport carries is larger than a chunk however large the tensor, and
 * the receiver assembles the envelope in memory it admitted against its
 * byte budget before it reads it as any other envelope.
 *
 * Each piece is an envelope of its own whose StreamChunk (field 9) says
 * which stream, its total size and where the piece goes
 * (proto/bb_envelope.proto). The protocol:
 *
 *   sender    DATA chunks from `sent`, while less than stream_window chunks
 *             lie beyond `acked` (one chunk until the first ACK says the
 *             receiver took the stream: a receiver that has no room keeps
 *             nothing of it and refuses pieces of streams it does not
 *             hold, so the rest of a window would be lost); the data is a slice of the stream's
 *             gather pieces (no copy: the chunk holds the values it points
 *             into). The first chunk carries the source addresses and
 *             previews the envelope's last bytes (StreamChunk.tail).
 *   receiver  admits a stream at its first chunk (offset 0) when it has
 *             room: at most max_streams_in streams, its total at most
 *             max_envelope_bytes, and the total charged to the ingress
 *             byte budget at once (the memory it is assembled in is
 *             allocated then, 64-byte aligned) — unless it is a response
 *             that folds chunk by chunk (chunk_fold.c): then no buffer,
 *             each chunk goes to the aggregator as it lands; it answers
 *             ACK(bytes held in order) to every DATA chunk. A stream it cannot take yet
 *             (budget) is answered WAIT and offered the budget again each
 *             50 ms: when it fits, ACK(0). With max_streams_in streams
 *             held already it answers WAIT and keeps nothing. A stream it
 *             will not take (too large, a first chunk whose stream it does
 *             not know) is answered REFUSE.
 *   sender    an ACK past `acked` moves it (and the window); WAIT stops the
 *             stream until an ACK, and every RTO the sender asks again with
 *             an empty chunk at `acked` (answered WAIT, or ACK when the
 *             receiver took it); REFUSE gives it up. After a reconnect of
 *             the peer (bb_engine_peer_connected), or when no ACK moved for
 *             RTO, the sender goes on from `acked` again: chunks in flight
 *             may have died with the connection. The receiver drops chunks
 *             it has (offset below what it holds) and chunks past a gap,
 *             and says where it is, so the stream resumes per chunk.
 *
 * Every count and offset of a chunk is checked against the stream before
 * anything is used: a DATA chunk must fit its stream, keep its total, and
 * start where the stream is. A stream that moves no byte for
 * stream_stall_ns is given up at both ends (its memory and budget back).
 * Streams are transient: they are not in the snapshot (the program's
 * deadlines decide what a lost transfer costs).
 */
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/engine_internal.h"

#define RTO_NS 2000000000ULL        /* no ACK for this long: resend from the last ACK */
#define WAIT_RECHECK_NS 50000000ULL /* a waiting stream is offered the budget this often */

/* ---- small envelopes: ACK / WAIT / REFUSE ------------------------------------------ */

static void answer(bb_engine *e, const bb_peerid *peer, uint64_t id, uint64_t total, int kind,
                   uint64_t offset)
{
    bbe__chunk c = {.present = true, .kind = kind, .stream_id = id, .total = total,
                    .offset = offset};
    uint8_t *b = malloc(BBE__CHUNK_HEAD_MAX);
    if (!b)
        return;
    size_t n = bbe__chunk_head(&c, NULL, 0, b);
    bbe__push_send(e, peer, NULL, 0, 0, b, NULL, n, 0); /* lost: the sender's RTO resends */
}

static void stream_failed(bb_engine *e, const bb_peerid *peer, size_t total, const char *why,
                          uint64_t id)
{
    e->c[BBE__C_STREAMS_FAILED]++;
    bbe__step_infra(e, BB_INFRA_STREAM_FAILED, 0, peer, total, "chunk stream %llu: %s",
                    (unsigned long long)id, why);
}

/* ---- sender ------------------------------------------------------------------------------ */

static void gather_free_cb(void *ctx, uint8_t *data, size_t len)
{
    (void)data, (void)len;
    free(ctx);
}

/* The whole envelope as pieces: the gather, or its bytes as one piece held
 * by a Bytes value (a chunk in flight keeps what it points into alive). */
static bb_send_gather *as_gather(uint8_t *bytes, size_t len)
{
    bb_send_gather *g = malloc(sizeof *g + sizeof(bb_send_iov) + sizeof(bb_value *));
    bb_buffer *b = g ? bb_buffer_wrap(bytes, len, gather_free_cb, bytes) : NULL;
    bb_value *v = b ? bb_value_bytes_buf(&BB_TYPE_BYTES, b, bytes, len) : NULL;
    bb_buffer_unref(b);
    if (!v) {
        if (!b)
            free(bytes);
        free(g);
        return NULL;
    }
    bb_send_iov *iov = (bb_send_iov *)(g + 1);
    bb_value **held = (bb_value **)(iov + 1);
    *iov = (bb_send_iov){bytes, len};
    *held = v;
    *g = (bb_send_gather){.iov = iov, .n_iov = 1, .len = len, .held = held, .n_held = 1};
    return g;
}

int bbe__stream_start(bb_engine *e, const bb_peerid *peer, uint8_t *bytes, bb_send_gather *g,
                      size_t len, bb_exec_id exec)
{
    if (!g && !(g = as_gather(bytes, len)))
        return BB_ENOMEM;
    if (e->streams_out.n >= e->caps.max_streams_in || !e->caps.max_streams_in) {
        bb_send_gather_free(g);
        stream_failed(e, peer, len, "too many streams out (max_streams_in)", 0);
        return BB_OK; /* the send is lost, as to a peer that never answers */
    }
    bbe__stream_out s = {.id = ++e->next_stream_id, .peer = *peer, .g = g, .total = len,
                         .progress_ns = e->now_ns, .exec = exec};
    if (BBE__ARR_PUSH(&e->streams_out, s)) {
        bb_send_gather_free(g);
        return BB_ENOMEM;
    }
    e->c[BBE__C_STREAMS_OUT]++;
    e->streams_pump = true;
    e->streams_check_at = e->now_ns; /* its due times join the checks this poll */
    return BB_OK;
}

/* Copy bytes [off, off + n) of the gather g to out. */
static void gather_copy(const bb_send_gather *g, size_t off, size_t n, uint8_t *out)
{
    size_t at = 0;
    for (size_t i = 0; i < g->n_iov && n; i++) {
        size_t len = g->iov[i].len;
        if (at + len > off) {
            size_t from = off - at, take = len - from < n ? len - from : n;
            memcpy(out, g->iov[i].data + from, take);
            out += take;
            off += take;
            n -= take;
        }
        at += len;
    }
}

/* The chunk [off, off + n) of s as a gather: its head, then the slices of
 * s's pieces, holding s's values. The first DATA chunk previews the
 * envelope's last bytes (its tail: what follows a large payload), so the
 * receiver can fold the payload as it arrives (chunk_fold.c). */
static bb_send_gather *chunk_of(const bb_engine *e, const bbe__stream_out *s, size_t off,
                                size_t n)
{
    const bb_send_gather *g = s->g;
    bool first = off == 0;
    size_t addr_bytes = 0;
    for (size_t i = 0; first && i < e->n_local_addrs; i++)
        addr_bytes += 11 + e->local_addrs[i].len;
    size_t tail = first && n && s->total > n ? s->total - n : 0;
    tail = tail < BBE__CHUNK_TAIL_MAX ? tail : BBE__CHUNK_TAIL_MAX;
    size_t max_iov = 1 + g->n_iov;
    size_t block = sizeof(bb_send_gather) + max_iov * sizeof(bb_send_iov) +
                   g->n_held * sizeof(bb_value *) + BBE__CHUNK_HEAD_MAX + addr_bytes + 2 * tail;
    bb_send_gather *c = malloc(block);
    if (!c)
        return NULL;
    bb_send_iov *iov = (bb_send_iov *)(c + 1);
    bb_value **held = (bb_value **)(iov + max_iov);
    uint8_t *preview = (uint8_t *)(held + g->n_held), *head = preview + tail;
    gather_copy(g, s->total - tail, tail, preview);
    bbe__chunk ch = {.present = true, .kind = BBE__CHUNK_DATA, .stream_id = s->id,
                     .total = s->total, .offset = off, .data_len = n, .tail = preview,
                     .tail_len = tail};
    size_t hn = bbe__chunk_head(&ch, e->local_addrs, first ? e->n_local_addrs : 0, head);
    size_t k = 0, at = 0;
    iov[k++] = (bb_send_iov){head, hn};
    for (size_t i = 0; i < g->n_iov && n; i++) {
        size_t len = g->iov[i].len;
        if (at + len > off) {
            size_t from = off > at ? off - at : 0, take = len - from < n ? len - from : n;
            iov[k++] = (bb_send_iov){g->iov[i].data + from, take};
            off += take;
            n -= take;
        }
        at += len;
    }
    for (size_t i = 0; i < g->n_held; i++)
        held[i] = bb_value_ref(g->held[i]);
    *c = (bb_send_gather){.iov = iov, .n_iov = k, .held = held, .n_held = g->n_held,
                          .len = hn + ch.data_len};
    return c;
}

/* Send what the window allows. false when the stream cannot go on. */
static bool pump_one(bb_engine *e, bbe__stream_out *s)
{
    size_t chunk = e->cfg.stream_chunk_bytes, window = (size_t)e->caps.stream_window * chunk;
    if (!s->admitted)
        window = chunk;
    while (!s->waiting && s->sent < s->total && s->sent - s->acked < (window ? window : chunk)) {
        size_t n = s->total - s->sent < chunk ? s->total - s->sent : chunk;
        bb_send_gather *c = chunk_of(e, s, s->sent, n);
        if (!c)
            return true; /* out of memory: the RTO tries again */
        int rc = bbe__push_send(e, &s->peer, NULL, 0, 0, NULL, c, c->len, s->exec);
        if (rc == BB_ENOTFOUND)
            return false;
        if (rc)
            return true;
        s->sent += n;
        if (e->streams_check_at > e->now_ns + RTO_NS) /* its ACK is due within the RTO */
            e->streams_check_at = e->now_ns + RTO_NS;
    }
    return true;
}

/* A waiting stream asks whether the receiver takes it now: an empty chunk
 * at what it acknowledged (lost: the next RTO asks again). */
static void ask_again(bb_engine *e, const bbe__stream_out *s)
{
    bb_send_gather *c = chunk_of(e, s, s->acked, 0);
    if (c)
        bbe__push_send(e, &s->peer, NULL, 0, 0, NULL, c, c->len, s->exec);
}

static void out_remove(bb_engine *e, size_t i)
{
    bb_send_gather_free(e->streams_out.v[i].g);
    e->streams_out.v[i] = e->streams_out.v[--e->streams_out.n];
}

static bbe__stream_out *out_find(bb_engine *e, const bb_peerid *peer, uint64_t id, size_t *at)
{
    for (size_t i = 0; i < e->streams_out.n; i++)
        if (e->streams_out.v[i].id == id && bb_peerid_equal(&e->streams_out.v[i].peer, peer)) {
            *at = i;
            return &e->streams_out.v[i];
        }
    return NULL;
}

/* ACK, WAIT or REFUSE from the receiver of one of our streams. */
static void sender_hears(bb_engine *e, const bb_peerid *src, const bbe__chunk *c)
{
    size_t i;
    bbe__stream_out *s = out_find(e, src, c->stream_id, &i);
    if (!s)
        return; /* a stream given up already */
    if (c->kind == BBE__CHUNK_REFUSE) {
        stream_failed(e, src, s->total, "refused by the receiver", s->id);
        out_remove(e, i);
        return;
    }
    if (c->kind == BBE__CHUNK_WAIT) {
        if (!s->waiting) {
            e->c[BBE__C_STREAMS_WAITED]++;
            e->streams_check_at = e->now_ns; /* its next question joins the checks */
        }
        s->waiting = true;
        s->sent = s->acked;
        s->progress_ns = s->resent_ns = e->now_ns; /* a receiver that answers is no stall */
        return;
    }
    if (c->offset > s->total)
        return; /* nonsense: ignored, the stall decides */
    if (s->waiting || c->offset > s->acked)
        s->progress_ns = e->now_ns;
    s->waiting = false;
    s->admitted = true;
    if (c->offset > s->acked)
        s->acked = c->offset;
    if (s->sent < s->acked)
        s->sent = s->acked;
    if (s->acked == s->total) {
        out_remove(e, i);
        return;
    }
    e->streams_pump = true;
}

void bbe__streams_peer_connected(bb_engine *e, const bb_peerid *peer)
{
    for (size_t i = 0; i < e->streams_out.n; i++) {
        bbe__stream_out *s = &e->streams_out.v[i];
        if (!bb_peerid_equal(&s->peer, peer) || s->sent == s->acked)
            continue;
        s->sent = s->acked; /* what was in flight may have died with the connection */
        e->c[BBE__C_STREAMS_RESUMED]++;
        e->streams_pump = true;
    }
}

/* ---- receiver ------------------------------------------------------------------------------ */

/* tell: a folding stream's component hears ABORT (not when the engine is
 * freed). */
static void in_drop(bb_engine *e, size_t i, bool tell)
{
    bbe__stream_in *s = &e->streams_in.v[i];
    if (s->buf) {
        bb_large_free(s->buf, s->total);
        bbe__budget_release(e, s->total);
    }
    if (s->fold)
        bbe__chunk_fold_abort(e, s->fold, tell);
    e->streams_in.v[i] = e->streams_in.v[--e->streams_in.n];
}

static void in_remove(bb_engine *e, size_t i)
{
    in_drop(e, i, true);
}

/* Memory and budget for s now; false: not yet. */
static bool admit(bb_engine *e, bbe__stream_in *s)
{
    if (!bbe__budget_charge(e, s->total))
        return false;
    s->buf = bb_large_alloc(s->total);
    if (!s->buf) {
        bbe__budget_release(e, s->total);
        return false;
    }
    return true;
}

/* The whole envelope is here: read it as any other. Its charge goes
 * first: reading it charges what its values keep (the fills), as for an
 * envelope that came whole. */
static void complete(bb_engine *e, size_t i)
{
    bbe__stream_in s = e->streams_in.v[i];
    e->streams_in.v[i] = e->streams_in.v[--e->streams_in.n];
    answer(e, &s.peer, s.id, s.total, BBE__CHUNK_ACK, s.total);
    if (s.fold) { /* folded as it came: nothing to read */
        bbe__chunk_fold_end(e, s.fold, &s.peer);
        return;
    }
    bbe__budget_release(e, s.total);
    bb_buffer *b = bb_buffer_adopt_large(s.buf, s.total);
    if (!b)
        return;
    bbe__deliver_assembled(e, &s.peer, b);
    bb_buffer_unref(b);
}

static bbe__stream_in *in_find(bb_engine *e, const bb_peerid *peer, uint64_t id, size_t *at)
{
    for (size_t i = 0; i < e->streams_in.n; i++)
        if (e->streams_in.v[i].id == id && bb_peerid_equal(&e->streams_in.v[i].peer, peer)) {
            *at = i;
            return &e->streams_in.v[i];
        }
    return NULL;
}

/* A stream's first chunk: a new stream when there is room for it. */
static bbe__stream_in *receiver_opens(bb_engine *e, const bb_peerid *src, const bbe__chunk *c)
{
    const char *why = NULL;
    if (c->offset != 0)
        why = "a piece of a stream this node does not hold (restarted, or given up)";
    else if (!c->total || c->total > e->caps.max_envelope_bytes)
        why = "larger than max_envelope_bytes";
    else if (c->total > e->caps.ingress_byte_budget)
        why = "larger than the ingress byte budget (it would never fit)";
    if (!why && e->streams_in.n >= e->caps.max_streams_in) {
        answer(e, src, c->stream_id, c->total, BBE__CHUNK_WAIT, 0); /* it asks again */
        return NULL;
    }
    if (why) {
        if (c->offset == 0)
            stream_failed(e, src, c->total, why, c->stream_id);
        answer(e, src, c->stream_id, c->total, BBE__CHUNK_REFUSE, 0);
        return NULL;
    }
    bbe__stream_in s = {.id = c->stream_id, .peer = *src, .total = c->total,
                        .progress_ns = e->now_ns};
    bool refused = false;
    s.fold = bbe__chunk_fold_open(e, src, c, &refused); /* folded as it lands: no buffer */
    if (refused) {
        stream_failed(e, src, c->total, "a response this node does not take", c->stream_id);
        answer(e, src, c->stream_id, c->total, BBE__CHUNK_REFUSE, 0);
        return NULL;
    }
    bool in = s.fold || admit(e, &s);
    if (BBE__ARR_PUSH(&e->streams_in, s)) {
        if (s.buf) {
            bb_large_free(s.buf, s.total);
            bbe__budget_release(e, s.total);
        }
        if (s.fold)
            bbe__chunk_fold_abort(e, s.fold, true);
        answer(e, src, c->stream_id, c->total, BBE__CHUNK_WAIT, 0); /* out of memory: later */
        return NULL;
    }
    e->c[BBE__C_STREAMS_IN]++;
    e->streams_check_at = e->now_ns; /* its due times join the checks this poll */
    if (!in) { /* no room yet: the sender waits, the budget's turn comes in poll */
        answer(e, src, c->stream_id, c->total, BBE__CHUNK_WAIT, 0);
        return NULL;
    }
    return &e->streams_in.v[e->streams_in.n - 1];
}

static void receiver_gets(bb_engine *e, const bb_peerid *src, const bbe__chunk *c)
{
    size_t i = 0;
    bbe__stream_in *s = in_find(e, src, c->stream_id, &i);
    if (!s) {
        if (!(s = receiver_opens(e, src, c)))
            return;
        i = e->streams_in.n - 1;
    }
    if (s->gone) { /* its batch completed, or its fold failed */
        answer(e, src, s->id, s->total, BBE__CHUNK_REFUSE, 0);
        in_remove(e, i);
        return;
    }
    if (!s->buf && !s->fold) { /* still waiting for the budget */
        answer(e, src, s->id, s->total, BBE__CHUNK_WAIT, 0);
        return;
    }
    if (c->total != s->total || c->data_len > s->total - c->offset || c->offset > s->total) {
        stream_failed(e, src, s->total, "a piece that does not fit its stream", s->id);
        answer(e, src, s->id, s->total, BBE__CHUNK_REFUSE, 0);
        in_remove(e, i);
        return;
    }
    if (c->offset != s->got || !c->data_len) { /* had it, or past a gap: say where we are */
        answer(e, src, s->id, s->total, BBE__CHUNK_ACK, s->got);
        return;
    }
    if (s->fold) {
        bbe__fold_in *f = s->fold;
        s->fold = NULL; /* while it folds, a batch that completes must not find it */
        if (!bbe__chunk_fold_data(e, f, s->got, c->data, c->data_len)) { /* f is gone */
            stream_failed(e, src, s->total, "its response was refused or its batch ended", s->id);
            answer(e, src, s->id, s->total, BBE__CHUNK_REFUSE, 0);
            in_remove(e, i);
            return;
        }
        s->fold = f;
    } else {
        memcpy(s->buf + s->got, c->data, c->data_len);
    }
    s->got += c->data_len;
    s->progress_ns = e->now_ns;
    if (s->got == s->total)
        complete(e, i);
    else
        answer(e, src, s->id, s->total, BBE__CHUNK_ACK, s->got);
}

void bbe__stream_chunk(bb_engine *e, const bb_peerid *src, const bbe__chunk *c)
{
    if (c->kind == BBE__CHUNK_DATA)
        receiver_gets(e, src, c);
    else
        sender_hears(e, src, c);
}

/* ---- poll -------------------------------------------------------------------------------------- */

/* Give up streams that stalled; resend from the last ACK where none came
 * for RTO; admit waiting streams the budget now holds. Sets the next time
 * something is due. */
static void check(bb_engine *e)
{
    uint64_t now = e->now_ns, stall = e->caps.stream_stall_ns, next = UINT64_MAX;
    for (size_t i = 0; i < e->streams_out.n;) {
        bbe__stream_out *s = &e->streams_out.v[i];
        if (stall && now - s->progress_ns >= stall) {
            stream_failed(e, &s->peer, s->total, "no progress (stream_stall_ns)", s->id);
            out_remove(e, i);
            continue;
        }
        uint64_t quiet = s->progress_ns > s->resent_ns ? s->progress_ns : s->resent_ns;
        if (s->waiting && now - quiet >= RTO_NS) {
            ask_again(e, s);
            s->resent_ns = quiet = now;
        } else if (s->sent > s->acked && now - quiet >= RTO_NS) {
            s->sent = s->acked;
            s->resent_ns = quiet = now;
            e->c[BBE__C_STREAMS_RESUMED]++;
            e->streams_pump = true;
        }
        uint64_t due = s->waiting || s->sent > s->acked ? quiet + RTO_NS : s->progress_ns + stall;
        next = due < next ? due : next;
        i++;
    }
    for (size_t i = 0; i < e->streams_in.n;) {
        bbe__stream_in *s = &e->streams_in.v[i];
        if (s->gone) {
            answer(e, &s->peer, s->id, s->total, BBE__CHUNK_REFUSE, 0);
            in_remove(e, i);
            continue;
        }
        if (stall && now - s->progress_ns >= stall) {
            stream_failed(e, &s->peer, s->total, "no progress (stream_stall_ns)", s->id);
            in_remove(e, i);
            continue;
        }
        if (!s->buf && !s->fold && admit(e, s)) {
            s->progress_ns = now;
            answer(e, &s->peer, s->id, s->total, BBE__CHUNK_ACK, 0);
        }
        uint64_t due = s->buf || s->fold ? s->progress_ns + stall : now + WAIT_RECHECK_NS;
        next = due < next ? due : next;
        i++;
    }
    e->streams_check_at = next;
}

void bbe__streams_poll(bb_engine *e)
{
    if (e->now_ns >= e->streams_check_at || e->streams_pump)
        check(e);
    if (!e->streams_pump)
        return;
    e->streams_pump = false;
    for (size_t i = 0; i < e->streams_out.n;) {
        if (pump_one(e, &e->streams_out.v[i])) {
            i++;
            continue;
        }
        bbe__stream_out *s = &e->streams_out.v[i];
        stream_failed(e, &s->peer, s->total, "the peer has no address", s->id);
        out_remove(e, i);
    }
}

uint64_t bbe__streams_due(const bb_engine *e)
{
    return e->streams_pump ? 0 : e->streams_check_at;
}

void bbe__streams_free(bb_engine *e)
{
    while (e->streams_out.n)
        out_remove(e, e->streams_out.n - 1);
    while (e->streams_in.n)
        in_drop(e, e->streams_in.n - 1, false);
    BBE__ARR_FREE(&e->streams_out);
    BBE__ARR_FREE(&e->streams_in);
}
