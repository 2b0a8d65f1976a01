/*
 * tcp_read.c — inbound frames on a TCP connection, with bounded memory.
 *
 * Reads land in one buffer shared by all connections (the loop runs one
 * read callback at a time); every frame wholly inside it is delivered from
 * there without a copy. A frame that continues past the read gets its own
 * buffer, sized from the header only after the header passed its cap:
 * first min(size, BBD_RX_EAGER: 1 MiB + 64 KiB), then doubled as bytes
 * actually arrive, so a peer that announces a large frame and sends little
 * holds little. Once the header is known, further reads go straight into
 * that buffer.
 *
 * All partial-frame buffers together are charged against
 * max_rx_buffer_total_bytes, and one connection's against an eighth of it
 * (its share). Bytes already read are always kept (so a connection goes
 * at most one read over); beyond that, one connection at a time (the
 * owner) may grow past its share and the budget so that one frame always
 * completes, and the others stop reading until memory is freed. A partial
 * frame that gets no new bytes for stall_timeout_ms, or that arrives at
 * under min_rx_bytes_per_s after its first second (time paused for the
 * budget not counted), closes its connection (slowloris), which also
 * frees what it held. Memory is thus
 * bounded by the budget + one max_frame_bytes frame + one read per
 * connection. The first frame must be a handshake of at most
 * BBD_HANDSHAKE_MAX_BYTES, every later one an envelope of at most
 * max_frame_bytes; anything else is refused and the connection closed.
 *
 * On a secure connection the socket carries records instead (tcp_secure.c:
 * u16 length, Noise message): handshake messages first, then transport
 * messages, each opened with the receiving cipher — a record that fails
 * authentication closes the connection (counted: auth_failed) — and its
 * plaintext fed to the same frame parser. A record wholly inside a read is
 * opened in place; one split across reads is gathered in a buffer of the
 * connection's own (its rest read straight into it); a record that only
 * continues the frame in progress is opened straight into the frame's
 * buffer, so a large envelope is copied by the kernel and the cipher only.
 * The receive budget works as above: a connection whose frame needs more
 * buffer than the budget allows stops reading.
 */
#include <stdlib.h>
#include <string.h>

#include "bbd/host/transport_internal.h"

#define DIRECT_MIN (16 * 1024) /* read straight into a frame buffer from here */

bool bbd__tcp_rx_partial(const tcp_conn *c)
{
    return c->in_body || c->hdr_len > 0 || c->rec_want || c->rec_hdr_len;
}

/* Restart connections that stopped for the budget, once memory was freed
 * or nobody holds the right to exceed it. */
static void resume_paused(bbd_transport *t)
{
    if (t->rx_charged >= t->cfg.max_rx_buffer_total_bytes && t->rx_owner)
        return;
    for (tcp_conn *c = t->conns, *next; c && t->n_paused; c = next) {
        next = c->next;
        if (c->paused) {
            c->paused = false;
            t->n_paused--;
            c->body_started_ms = uv_now(t->loop); /* its rate is measured anew */
            c->body_started_len = c->body_len;
            bbd__tcp_read_start(c);
            bbd__tcp_arm_timer(c);
        }
    }
}

static void body_free(tcp_conn *c)
{
    bbd_transport *t = c->t;
    free(c->body);
    t->rx_charged -= c->body_cap;
    c->body = NULL;
    c->body_len = c->body_cap = c->body_want = 0;
    c->in_body = false;
    if (t->rx_owner == c)
        t->rx_owner = NULL;
    if (t->n_paused)
        resume_paused(t);
}

void bbd__tcp_rx_reset(tcp_conn *c)
{
    if (c->paused) {
        c->paused = false;
        c->t->n_paused--;
    }
    c->hdr_len = 0;
    if (c->body || c->in_body)
        body_free(c);
}

/* Grow the frame buffer to hold at least need bytes. force: bytes already
 * read, always kept (exactly, when over the budget). Otherwise growth past
 * the budget is allowed to one connection at a time (the owner), so one
 * frame always progresses and the rest wait. */
static bool body_reserve(tcp_conn *c, size_t need, bool force)
{
    bbd_transport *t = c->t;
    if (need <= c->body_cap)
        return true;
    size_t cap = c->body_cap ? c->body_cap : (c->body_want < BBD_RX_EAGER ? c->body_want
                                                                          : BBD_RX_EAGER);
    while (cap < need)
        cap = cap > c->body_want / 2 ? c->body_want : cap * 2;
    /* over the budget, or over this connection's share of it (an eighth,
     * so that a few connections cannot hold it all): only one connection
     * at a time (the owner) may go on */
    size_t share = t->cfg.max_rx_buffer_total_bytes / 8;
    if (share < BBD_RX_EAGER)
        share = BBD_RX_EAGER;
    if (t->rx_charged + (cap - c->body_cap) > t->cfg.max_rx_buffer_total_bytes ||
        (cap > share && !force)) {
        if (force)
            cap = need;
        else if (!t->rx_owner || t->rx_owner == c)
            t->rx_owner = c;
        else
            return false;
    }
    uint8_t *b = realloc(c->body, cap);
    if (!b)
        return false;
    c->body = b;
    t->rx_charged += cap - c->body_cap;
    c->body_cap = cap;
    return true;
}

static void mark_progress(tcp_conn *c, bool was_partial)
{
    c->last_progress_ms = uv_now(c->t->loop);
    if (!was_partial && bbd__tcp_rx_partial(c)) /* the stall and rate checks start */
        bbd__tcp_arm_timer(c);
}

static void refuse(tcp_conn *c, const bb_error *err)
{
    c->t->stats.frames_refused++;
    bbd__tcp_close(c, err->msg);
}

/* A plaintext node's first byte 0x00: its peer speaks Noise (tcp_secure.c). */
static void refuse_noise_peer(tcp_conn *c)
{
    c->t->stats.handshakes_failed++;
    bbd__tcp_close(c, "the peer requires encrypted channels (security \"noise\") and this "
                      "node runs with security \"off\"");
}

/* One whole frame's payload: borrowed for the call, or owned (malloc'd,
 * the same bytes) and handed on to on_envelope_owned when there is one, else
 * freed here. */
static void deliver(tcp_conn *c, bbd_frame_kind kind, const uint8_t *payload, uint8_t *owned,
                    size_t len)
{
    bbd_transport *t = c->t;
    if (kind != BBD_FRAME_ENVELOPE) {
        if (kind == BBD_FRAME_HANDSHAKE)
            bbd__tcp_on_handshake(c, payload, len);
        else
            bbd__tcp_on_admission(c, payload, len);
        free(owned);
        return;
    }
    bbd_peer *p = c->peer;
    p->envelopes_in++;
    t->stats.envelopes_in++;
    bbd_addr obs = {c->observed, c->observed_len};
    if (owned && t->cb.on_envelope_owned) {
        t->cb.on_envelope_owned(t->cb.ud, &p->id, c->observed_len ? &obs : NULL, owned, len);
        return;
    }
    if (t->cb.on_envelope)
        t->cb.on_envelope(t->cb.ud, &p->id, c->observed_len ? &obs : NULL, payload, len);
    free(owned);
}

static bool alive(const tcp_conn *c)
{
    return c->state != CONN_CLOSING && !c->t->closing;
}

static void finish_body(tcp_conn *c)
{
    bbd_frame_kind kind = c->body_kind;
    uint8_t *body = c->body;
    size_t len = c->body_len, cap = c->body_cap;
    c->body = NULL; /* goes with the frame */
    c->body_len = c->body_cap = c->body_want = 0;
    c->in_body = false;
    if (c->t->rx_owner == c)
        c->t->rx_owner = NULL;
    c->t->rx_charged -= cap;
    deliver(c, kind, body, body, len);
    if (c->t->n_paused && !c->t->closing)
        resume_paused(c->t);
}

/* Plaintext: a handshake first and only once, then envelopes. Secure: the
 * admission (to the initiator), then envelopes. */
static void header_limits(const tcp_conn *c, bbd_frame_limits *lim)
{
    bool hs_done = c->state == CONN_OPEN || c->state == CONN_DRAINING;
    lim->max_handshake = hs_done || c->t->secure ? 0 : BBD_HANDSHAKE_MAX_BYTES;
    lim->max_admission = c->awaiting_admission ? BBD_ADMISSION_MAX_BYTES : 0;
    lim->max_envelope = hs_done ? c->t->cfg.max_frame_bytes : 0;
}

/* A header is complete: deliver an empty frame or start its body. */
static void begin_body(tcp_conn *c, const bbd_frame_header *h)
{
    if (h->payload_len == 0) {
        deliver(c, h->kind, NULL, NULL, 0);
        return;
    }
    c->in_body = true;
    c->body_kind = h->kind;
    c->body_want = h->payload_len;
    c->body_len = c->body_started_len = 0;
    c->body_started_ms = uv_now(c->t->loop);
    bbd__tcp_arm_timer(c); /* its rate is checked */
}

/* Parse frames from data[0..n) (the shared buffer, or a record's
 * plaintext): borrowed for the calls that deliver them. */
static void parse_frames(tcp_conn *c, const uint8_t *data, size_t n)
{
    bbd_frame_limits lim;
    bbd_frame_header h;
    bb_error err;
    bb_error_clear(&err);
    size_t pos = 0;
    while (pos < n && alive(c)) {
        if (c->in_body) {
            size_t take = c->body_want - c->body_len;
            if (take > n - pos)
                take = n - pos;
            if (!body_reserve(c, c->body_len + take, true)) {
                bbd__tcp_close(c, "out of memory for a frame");
                return;
            }
            memcpy(c->body + c->body_len, data + pos, take);
            c->body_len += take;
            pos += take;
            if (c->body_len == c->body_want)
                finish_body(c);
            continue;
        }
        header_limits(c, &lim);
        if (c->hdr_len == 0) {
            if (!c->got_bytes) { /* the first byte of a plaintext connection */
                c->got_bytes = true;
                if (data[pos] == 0) {
                    refuse_noise_peer(c);
                    return;
                }
            }
            if (bbd_frame_header_decode(data + pos, n - pos, &lim, &h, &err) != BB_OK) {
                refuse(c, &err);
                return;
            }
            if (!h.complete) { /* fewer than BBD_FRAME_HEADER_MAX bytes left */
                memcpy(c->hdr, data + pos, n - pos);
                c->hdr_len = n - pos;
                return;
            }
            pos += h.header_len;
            if (h.payload_len <= n - pos) { /* the whole frame is here: no copy */
                deliver(c, h.kind, data + pos, NULL, h.payload_len);
                pos += h.payload_len;
            } else {
                begin_body(c, &h);
            }
            continue;
        }
        /* A header split across reads: add bytes until it decodes. */
        size_t take = BBD_FRAME_HEADER_MAX - c->hdr_len;
        if (take > n - pos)
            take = n - pos;
        memcpy(c->hdr + c->hdr_len, data + pos, take);
        if (bbd_frame_header_decode(c->hdr, c->hdr_len + take, &lim, &h, &err) != BB_OK) {
            refuse(c, &err);
            return;
        }
        if (!h.complete) {
            c->hdr_len += take;
            pos += take;
            continue;
        }
        pos += h.header_len - c->hdr_len;
        c->hdr_len = 0;
        begin_body(c, &h);
    }
}

/* ---- records (secure connections) ------------------------------------------------------- */

/* A transport record: open it (into the frame in progress when it only
 * continues that frame), then parse the frames in its plaintext. */
static void open_record(tcp_conn *c, uint8_t *rec, size_t len)
{
    size_t m = len - BBD_NOISE_TAGLEN;
    bool to_body = c->in_body && m && c->body_want - c->body_len >= m &&
                   body_reserve(c, c->body_len + m, true);
    uint8_t *dst = to_body ? c->body + c->body_len : rec;
    if (bbd_noise_decrypt(&c->rx, NULL, 0, rec, len, dst) != BB_OK) {
        c->t->stats.auth_failed++;
        bbd__tcp_close(c, "a record failed authentication (altered, replayed, reordered or "
                          "cut); connection closed");
        return;
    }
    if (!to_body) {
        parse_frames(c, rec, m);
        return;
    }
    c->body_len += m;
    if (c->body_len == c->body_want)
        finish_body(c);
}

static void record_done(tcp_conn *c, uint8_t *rec, size_t len)
{
    if (c->noise)
        bbd__tcp_noise_message(c, rec, len);
    else
        open_record(c, rec, len);
}

/* The record header is complete: check the length it announces. */
static bool record_begin(tcp_conn *c)
{
    size_t len = (size_t)c->rec_hdr[0] << 8 | c->rec_hdr[1];
    c->rec_hdr_len = 0;
    size_t min = c->noise ? BBD_NOISE_MSG1_OVERHEAD : BBD_NOISE_TAGLEN + 1;
    if (len < min) {
        bb_error err;
        bb_error_set(&err, BB_EPARSE, "a %s of %zu bytes (at least %zu)",
                     c->noise ? "Noise handshake message" : "record", len, min);
        refuse(c, &err);
        return false;
    }
    c->rec_want = len;
    c->rec_len = 0;
    return true;
}

/* A partial record is done: open it from the connection's buffer, which
 * is kept only while a large frame streams in. */
static void record_gathered(tcp_conn *c)
{
    size_t len = c->rec_want;
    c->rec_want = c->rec_len = 0;
    record_done(c, c->rec, len);
    if (alive(c) && !c->in_body) {
        free(c->rec);
        c->rec = NULL;
    }
}

/* Records in data[0..n) (writable: opened in place). */
static void read_records(tcp_conn *c, uint8_t *data, size_t n)
{
    size_t pos = 0;
    while (pos < n && alive(c)) {
        if (!c->rec_want) {
            if (!c->got_bytes) {
                c->got_bytes = true;
                /* Noise's first messages start 0x00 (their length is < 256) */
                if (data[pos] != 0 && (!c->outbound || bbd__looks_plaintext(data + pos, n - pos))) {
                    bbd__tcp_not_noise(c, data + pos, n - pos);
                    return;
                }
            }
            c->rec_hdr[c->rec_hdr_len++] = data[pos++];
            if (c->rec_hdr_len == BBD_RECORD_HEADER && !record_begin(c))
                return;
            continue;
        }
        size_t want = c->rec_want - c->rec_len;
        if (c->rec_len == 0 && n - pos >= want) { /* whole: open it where it is */
            c->rec_want = 0;
            pos += want;
            record_done(c, data + pos - want, want);
            continue;
        }
        if (!c->rec && !(c->rec = malloc(BBD_NOISE_MAX_MSG))) {
            bbd__tcp_close(c, "out of memory for a record");
            return;
        }
        size_t take = want < n - pos ? want : n - pos;
        memcpy(c->rec + c->rec_len, data + pos, take);
        c->rec_len += take;
        pos += take;
        if (c->rec_len == c->rec_want)
            record_gathered(c);
    }
}

/* ---- the socket ------------------------------------------------------------------------------ */

static void alloc_cb(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    tcp_conn *c = handle->data;
    bbd_transport *t = c->t;
    c->direct = c->rec_direct = false;
    /* a frame in progress needs room before more of it is read: the budget */
    if (c->in_body && c->body_len == c->body_cap && !body_reserve(c, c->body_len + 1, false)) {
        *buf = uv_buf_init(NULL, 0); /* read_cb gets UV_ENOBUFS: pause */
        return;
    }
    if (t->secure && c->rec_len) { /* the rest of a split record, straight in */
        c->rec_direct = true;
        *buf = uv_buf_init((char *)c->rec + c->rec_len, (unsigned)(c->rec_want - c->rec_len));
        return;
    }
    if (!t->secure && c->in_body && c->body_want - c->body_len >= DIRECT_MIN) {
        c->direct = true;
        *buf = uv_buf_init((char *)c->body + c->body_len, (unsigned)(c->body_cap - c->body_len));
        return;
    }
    *buf = uv_buf_init((char *)t->rx, sizeof t->rx);
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    tcp_conn *c = stream->data;
    bbd_transport *t = c->t;
    if (!alive(c))
        return;
    if (nread == UV_ENOBUFS) {
        uv_read_stop(stream);
        c->paused = true;
        t->n_paused++;
        return;
    }
    if (nread == UV_EOF) {
        bbd__tcp_on_eof(c);
        return;
    }
    if (nread < 0) {
        char why[128];
        snprintf(why, sizeof why, "read failed: %s", uv_strerror((int)nread));
        bbd__tcp_close(c, why);
        return;
    }
    if (nread == 0)
        return;
    t->stats.bytes_in += (uint64_t)nread;
    if (c->peer)
        c->peer->bytes_in += (uint64_t)nread;
    c->last_active_ms = uv_now(t->loop);
    bool was_partial = bbd__tcp_rx_partial(c);
    if (c->rec_direct) {
        c->rec_len += (size_t)nread;
        if (c->rec_len == c->rec_want)
            record_gathered(c);
    } else if (t->secure) {
        read_records(c, t->rx, (size_t)nread);
    } else if (c->direct) {
        c->body_len += (size_t)nread;
        if (c->body_len == c->body_want)
            finish_body(c);
    } else {
        parse_frames(c, t->rx, (size_t)nread);
    }
    if (!alive(c))
        return;
    mark_progress(c, was_partial);
}

void bbd__tcp_read_start(tcp_conn *c)
{
    int rc = uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
    if (rc != 0) {
        char why[128];
        snprintf(why, sizeof why, "read failed: %s", uv_strerror(rc));
        bbd__tcp_close(c, why);
    }
}
