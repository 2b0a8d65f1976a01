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
 * max_rx_buffer_total_bytes. Bytes already read are always kept (so a
 * connection goes at most one read over the budget); beyond that, one
 * connection at a time (the owner) may grow past the budget so that one
 * frame always completes, and the others stop reading until memory is
 * freed. A partial frame that gets no new bytes for stall_timeout_ms closes
 * its connection (slowloris), which also frees what it held. Memory is thus
 * bounded by the budget + one max_frame_bytes frame + one read per
 * connection. The first frame must be a handshake of at most
 * BBD_HANDSHAKE_MAX_BYTES, every later one an envelope of at most
 * max_frame_bytes; anything else is refused and the connection closed.
 */
#include <stdlib.h>
#include <string.h>

#include "bbd/host/transport_internal.h"

#define DIRECT_MIN (16 * 1024) /* read straight into a frame buffer from here */

bool bbd__tcp_rx_partial(const tcp_conn *c)
{
    return c->in_body || c->hdr_len > 0;
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
            bbd__tcp_read_start(c);
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
    if (t->rx_charged + (cap - c->body_cap) > t->cfg.max_rx_buffer_total_bytes) {
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
    if (!was_partial && bbd__tcp_rx_partial(c) && !uv_is_active((uv_handle_t *)&c->timer))
        bbd__tcp_arm_timer(c);
}

static void refuse(tcp_conn *c, const bb_error *err)
{
    c->t->stats.frames_refused++;
    bbd__tcp_close(c, err->msg);
}

/* One whole frame's payload: borrowed for the call, or owned (malloc'd,
 * the same bytes) and handed on to on_envelope_owned when there is one, else
 * freed here. */
static void deliver(tcp_conn *c, bbd_frame_kind kind, const uint8_t *payload, uint8_t *owned,
                    size_t len)
{
    bbd_transport *t = c->t;
    if (kind == BBD_FRAME_HANDSHAKE) {
        bbd__tcp_on_handshake(c, payload, len);
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

/* A handshake first and only once, then envelopes. */
static void header_limits(const tcp_conn *c, bbd_frame_limits *lim)
{
    bool hs_done = c->state == CONN_OPEN || c->state == CONN_DRAINING;
    lim->max_handshake = hs_done ? 0 : BBD_HANDSHAKE_MAX_BYTES;
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
    c->body_len = 0;
}

/* Parse data[0..n) of the shared buffer. */
static void parse_shared(tcp_conn *c, const uint8_t *data, size_t n)
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

static void alloc_cb(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    tcp_conn *c = handle->data;
    bbd_transport *t = c->t;
    c->direct = false;
    if (c->in_body && c->body_want - c->body_len >= DIRECT_MIN) {
        if (c->body_len == c->body_cap && !body_reserve(c, c->body_len + 1, false)) {
            *buf = uv_buf_init(NULL, 0); /* read_cb gets UV_ENOBUFS: pause */
            return;
        }
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
    bool was_partial = bbd__tcp_rx_partial(c);
    if (c->direct) {
        c->body_len += (size_t)nread;
        if (c->body_len == c->body_want)
            finish_body(c);
    } else {
        parse_shared(c, t->rx, (size_t)nread);
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
