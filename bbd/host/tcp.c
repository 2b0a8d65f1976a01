/*
 * tcp.c — TCP connections of the transport: listen and accept, dial, the
 * handshake, one connection per peer pair, writes, timeouts and closing.
 * Reading frames is tcp_read.c.
 *
 * Lifecycle: CONNECTING (outbound only, connect timeout) -> HANDSHAKE
 * (plaintext: both sides write their handshake first thing; secure: the
 * Noise handshake and the admission, tcp_secure.c; handshake timeout) ->
 * OPEN, or DRAINING when the peer already has an OPEN connection that wins.
 * Every connection passes the same checks once the peer's identity is
 * known (bbd__tcp_check_peer); frames are sealed before they are written
 * on a secure connection (write_sealed).
 *
 * Simultaneous connects: when a peer ends up with two handshaken
 * connections, both nodes keep the one initiated by the smaller PeerId (of
 * two initiated by the same side, the newer). The loser is drained, not
 * cut: nothing new is written to it, everything already sent on it is
 * still read and delivered; its initiator shuts down its write side, the
 * other side answers EOF with its own shutdown, and each closes once both
 * directions ended (or after handshake_timeout_ms). So no envelope written
 * during the race is lost.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bbd/host/transport_internal.h"

typedef struct tcp_write {
    uv_write_t req;
    bbd_peer *peer;  /* NULL for our handshake */
    bbd_payload pl;  /* envelope (or handshake) bytes */
    size_t wire;     /* with the frame header */
    uint8_t hdr[BBD_FRAME_HEADER_MAX];
} tcp_write;

#define BUFS_ON_STACK 8 /* header + pieces of a frame without a malloc */

static void seal_fail_all(tcp_conn *c);
static void start_shutdown(tcp_conn *c);

static int peerid_cmp(const bb_peerid *a, const bb_peerid *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->bytes, b->bytes, n);
    return c ? c : (int)a->len - (int)b->len;
}

static const char *remote_text(const tcp_conn *c, char *buf, size_t cap)
{
    return bbd__addr_text(c->remote, c->remote_len, buf, cap);
}

/* ---- handles --------------------------------------------------------------------- */

static void conn_handle_closed(uv_handle_t *h)
{
    tcp_conn *c = h->data;
    bbd_transport *t = c->t;
    if (--c->handles == 0) {
        free(c->rec);
        free(c);
    }
    bbd__handle_closed(t);
}

static tcp_conn *conn_new(bbd_transport *t)
{
    tcp_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (uv_tcp_init(t->loop, &c->tcp) != 0) {
        free(c);
        return NULL;
    }
    uv_timer_init(t->loop, &c->timer);
    c->t = t;
    c->seq = ++t->next_conn_seq;
    c->tcp.data = c->timer.data = c->connect_req.data = c->shutdown_req.data = c;
    c->handles = 2;
    t->handles += 2;
    c->next = t->conns;
    if (t->conns)
        t->conns->prev = c;
    t->conns = c;
    t->n_conns++;
    return c;
}

void bbd__tcp_close(tcp_conn *c, const char *why)
{
    if (c->state == CONN_CLOSING)
        return;
    bbd_transport *t = c->t;
    if (why) {
        char rt[BB_MULTIADDR_TEXT_MAX + 1];
        bbd__log_remote(t, BB_LOG_WARN, "tcp %s: %s; connection closed",
                        remote_text(c, rt, sizeof rt), why);
    }
    c->state = CONN_CLOSING;
    t->n_conns--;
    bb_ma_transport src;
    if (c->counted_source && bb_multiaddr_transport(c->remote, c->remote_len, &src, NULL) == BB_OK)
        bbd__source_remove(t, &src);
    c->counted_source = false;
    if (c->prev)
        c->prev->next = c->next;
    else
        t->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    bbd__tcp_rx_reset(c);
    seal_fail_all(c); /* before the cipher goes: nothing more is sealed */
    bbd__tcp_secure_free(c);
    uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
    bbd_peer *p = c->peer;
    if (p) {
        c->peer = NULL;
        if (p->active == c)
            p->active = NULL;
        if (p->dialing == c)
            p->dialing = NULL;
        p->refs--;
        bbd__peer_update(t, p);
    }
}

/* ---- timers ------------------------------------------------------------------------ */

#define RATE_GRACE_MS 1000 /* a frame's first second is not judged */
#define RATE_CHECK_MS 1000

/* A frame in progress arriving under min_rx_bytes_per_s since it began
 * (or since its connection was last resumed: a pause for the budget is
 * not its sender's fault). */
static bool too_slow(const tcp_conn *c, uint64_t now, uint64_t *rate)
{
    uint64_t el = now - c->body_started_ms;
    if (!c->in_body || c->paused || el < RATE_GRACE_MS)
        return false;
    *rate = (uint64_t)(c->body_len - c->body_started_len) * 1000 / el;
    return *rate < c->t->cfg.min_rx_bytes_per_s;
}

static void conn_timer_cb(uv_timer_t *h)
{
    tcp_conn *c = h->data;
    bbd_transport *t = c->t;
    uint64_t now = uv_now(t->loop), rate = 0;
    char why[160];
    if (c->deadline_ms && now >= c->deadline_ms) {
        if (c->state == CONN_CONNECTING)
            snprintf(why, sizeof why, "connect timed out after %llu ms",
                     (unsigned long long)t->cfg.connect_timeout_ms);
        else if (c->state == CONN_HANDSHAKE)
            snprintf(why, sizeof why, "no handshake within %llu ms",
                     (unsigned long long)t->cfg.handshake_timeout_ms);
        bbd__tcp_close(c, c->state == CONN_DRAINING ? NULL : why);
        return;
    }
    if (bbd__tcp_rx_partial(c) && now - c->last_progress_ms >= t->cfg.stall_timeout_ms) {
        snprintf(why, sizeof why, "a partial frame made no progress for %llu ms",
                 (unsigned long long)t->cfg.stall_timeout_ms);
        bbd__tcp_close(c, why);
        return;
    }
    if (too_slow(c, now, &rate)) {
        t->stats.slow_closed++;
        snprintf(why, sizeof why, "a frame arrives at %llu bytes/s, under min_rx_bytes_per_s %zu",
                 (unsigned long long)rate, t->cfg.min_rx_bytes_per_s);
        bbd__tcp_close(c, why);
        return;
    }
    bbd__tcp_arm_timer(c);
}

static uint64_t earliest(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* The connection's timer at its earliest due check: its deadline (connect,
 * handshake, drain), the stall of a partial frame, the rate of a frame in
 * progress. An open connection exchanging whole frames has no timer
 * pending: with any uv timer pending, every epoll_wait of the loop carries
 * a timeout, which costs each round trip about a microsecond (DECISIONS.md,
 * "The engine's next deadline arms a timerfd"); idle connections are found
 * by the sweep instead. */
void bbd__tcp_arm_timer(tcp_conn *c)
{
    if (c->state == CONN_CLOSING)
        return;
    const bbd_transport_config *cfg = &c->t->cfg;
    uint64_t now = uv_now(c->t->loop);
    uint64_t due = c->deadline_ms ? c->deadline_ms : UINT64_MAX;
    if (bbd__tcp_rx_partial(c))
        due = earliest(due, c->last_progress_ms + cfg->stall_timeout_ms);
    if (c->in_body && !c->paused)
        due = earliest(due, now < c->body_started_ms + RATE_GRACE_MS
                                ? c->body_started_ms + RATE_GRACE_MS
                                : now + RATE_CHECK_MS);
    if (due == UINT64_MAX) {
        uv_timer_stop(&c->timer);
        return;
    }
    uv_timer_start(&c->timer, conn_timer_cb, due > now ? due - now : 0, 0);
}

static void set_deadline(tcp_conn *c, uint64_t after_ms)
{
    c->deadline_ms = after_ms ? uv_now(c->t->loop) + after_ms : 0;
    bbd__tcp_arm_timer(c);
}

/* ---- the idle sweep ------------------------------------------------------------------ */

/* Every sweep period (a timer.h timer: no uv timer pending, see bbd__tcp_arm_timer)
 * close the open connections idle for idle_timeout_ms: a quarter of it,
 * between 50 ms and 60 s, so one closes at most a quarter late. */
static void on_sweep(bbd_timer *sweep)
{
    bbd_transport *t = sweep->data;
    uint64_t now = uv_now(t->loop);
    char why[96];
    for (tcp_conn *c = t->conns, *next; c; c = next) {
        next = c->next;
        if (c->state != CONN_OPEN || now - c->last_active_ms < t->cfg.idle_timeout_ms)
            continue;
        t->stats.slow_closed++;
        snprintf(why, sizeof why, "idle for %llu ms (idle_timeout_ms)",
                 (unsigned long long)t->cfg.idle_timeout_ms);
        bbd__tcp_close(c, why);
    }
}

int bbd__tcp_sweep_init(bbd_transport *t, bb_error *err)
{
    uint64_t period = t->cfg.idle_timeout_ms / 4;
    period = period < 50 ? 50 : period > 60000 ? 60000 : period;
    int rc = bbd_timer_init(t->loop, &t->sweep, CLOCK_MONOTONIC, on_sweep, t,
                            "transport: idle sweep timer", err);
    if (rc)
        return rc;
    bbd__handle_init(t);
    return bbd_timer_every(&t->sweep, period, "transport: idle sweep timer", err);
}

static void sweep_closed(void *t) { bbd__handle_closed(t); }

/* ---- writing ---------------------------------------------------------------------- */

/* A whole frame of wire bytes left through the socket (peer NULL: ours). */
static void count_written(bbd_transport *t, bbd_peer *peer, size_t wire)
{
    t->stats.bytes_out += wire;
    if (peer)
        peer->bytes_out += wire;
}

/* A write on c failed (rc a uv error): close c saying so. */
static void close_write_failed(tcp_conn *c, int rc)
{
    char why[128];
    snprintf(why, sizeof why, "write failed: %s", uv_strerror(rc));
    bbd__tcp_close(c, why);
}

static void write_cb(uv_write_t *req, int status)
{
    tcp_write *w = (tcp_write *)req;
    tcp_conn *c = req->handle->data;
    bbd_transport *t = c->t;
    bbd_peer *p = w->peer;
    size_t len = w->pl.len;
    if (status == 0)
        count_written(t, p, w->wire);
    /* Free before reporting: a sender that answers the report with its next
     * envelope gets this (cache-warm) memory back from malloc. */
    bbd__payload_free(&w->pl);
    free(w);
    if (p) {
        p->refs--;
        bbd__send_done(t, p, len, status == 0);
    }
    if (status < 0 && status != UV_ECANCELED && c->state != CONN_CLOSING)
        close_write_failed(c, status);
}

/* The frame as uv bufs: the header, then the payload's bytes or pieces. */
static size_t frame_bufs(const uint8_t *hdr, size_t hl, const bbd_payload *pl, uv_buf_t *bufs)
{
    size_t n = 0;
    bufs[n++] = uv_buf_init((char *)hdr, (unsigned)hl);
    if (pl->bytes && pl->len)
        bufs[n++] = uv_buf_init((char *)pl->bytes, (unsigned)pl->len);
    for (size_t i = 0; !pl->bytes && i < pl->n_iov; i++)
        if (pl->iov[i].len)
            bufs[n++] = uv_buf_init((char *)pl->iov[i].data, (unsigned)pl->iov[i].len);
    return n;
}

/* Drop the first `done` bytes of bufs[0..*n): what the socket already took. */
static uv_buf_t *skip_written(uv_buf_t *bufs, size_t *n, size_t done)
{
    while (*n && done >= bufs->len) {
        done -= bufs->len;
        bufs++;
        (*n)--;
    }
    if (*n) {
        bufs->base += done;
        bufs->len -= done;
    }
    return bufs;
}

/* A frame failed before it was queued: release it, report, close c. */
static void write_failed(tcp_conn *c, bbd_peer *peer, bbd_payload *pl, int rc)
{
    if (peer)
        bbd__send_failed(c->t, peer, pl);
    else
        bbd__payload_free(pl);
    close_write_failed(c, rc);
}

/* Write bufs[0..n) (wire bytes, bufs[0] the header) on c. 0: pl is taken;
 * a uv error: nothing was queued and the caller still holds pl. With
 * nothing queued before it the frame goes to the socket right away
 * (uv_try_write of `now`: the same bytes, maybe as one buffer): a frame the
 * kernel takes whole needs no write request, and no epoll_ctl, which libuv
 * makes after every queued write; the rest of a partial write is queued. */
static int write_bufs(tcp_conn *c, bbd_peer *peer, bbd_payload *pl, const uv_buf_t *now,
                      size_t n_now, uv_buf_t *bufs, size_t n, size_t wire)
{
    bbd_transport *t = c->t;
    int rc = uv_try_write((uv_stream_t *)&c->tcp, now, (unsigned)n_now);
    if (rc < 0 && rc != UV_EAGAIN)
        return rc;
    size_t done = rc > 0 ? (size_t)rc : 0;
    if (done == wire) {
        count_written(t, peer, wire);
        size_t len = pl->len;
        bbd__payload_free(pl);
        if (peer)
            bbd__send_done_later(t, peer, len);
        return 0;
    }
    tcp_write *w = malloc(sizeof *w);
    if (!w)
        return UV_ENOMEM;
    *w = (tcp_write){.peer = peer, .pl = *pl, .wire = wire};
    memcpy(w->hdr, bufs[0].base, bufs[0].len);
    bufs[0].base = (char *)w->hdr; /* the header must outlive this call */
    uv_buf_t *rest = skip_written(bufs, &n, done);
    rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, rest, (unsigned)n, write_cb);
    if (rc != 0) {
        free(w);
        return rc;
    }
    if (peer) /* write_cb runs later, never within uv_write */
        peer->refs++;
    return 0;
}

/* Frames up to this size are tried as one buffer: header and envelope
 * copied together, one write(2) instead of a writev of two pieces, which
 * cost the kernel ~0.35 us more per loopback round trip (measured, two
 * pinned processes). */
#define FLAT_MAX 2048

/* Write wire bytes buf[0..wire) on c: right away when the socket takes
 * them, the rest queued. heap: buf is malloc'd (and taken), else it is the
 * caller's and what is left is copied. held: the envelope's size (for
 * the report; peer NULL: nothing to report). */
static void write_sealed(tcp_conn *c, bbd_peer *peer, size_t held, uint8_t *buf, size_t wire,
                         bool heap)
{
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)wire);
    int rc = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    size_t done = rc > 0 ? (size_t)rc : 0;
    if (done == wire) {
        count_written(c->t, peer, wire);
        if (heap)
            free(buf);
        if (peer)
            bbd__send_done_later(c->t, peer, held);
        return;
    }
    /* queue what is left: in buf itself, or a copy of it */
    uint8_t *rest = heap ? buf : malloc(wire - done);
    tcp_write *w = rest ? malloc(sizeof *w) : NULL;
    if (rc < 0 && rc != UV_EAGAIN) {
        free(w);
        w = NULL;
    } else if (!w) {
        rc = UV_ENOMEM;
    } else {
        if (!heap)
            memcpy(rest, buf + done, wire - done);
        *w = (tcp_write){.peer = peer, .pl = {.bytes = rest, .len = held}, .wire = wire};
        b = uv_buf_init((char *)(heap ? buf + done : rest), (unsigned)(wire - done));
        if ((rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, write_cb)) == 0) {
            if (peer) /* write_cb runs later, never within uv_write */
                peer->refs++;
            return;
        }
        free(w);
    }
    if (rest != buf)
        free(rest);
    bbd_payload pl = {.bytes = heap ? buf : NULL, .len = held};
    write_failed(c, peer, &pl, rc);
}

void bbd__tcp_write_raw(tcp_conn *c, uint8_t *buf, size_t len)
{
    write_sealed(c, NULL, 0, buf, len, true);
}

/* ---- large frames sealed as the socket drains ------------------------------------------ */

/* Sealing a frame whole before writing it keeps a second copy of it -- a
 * 16 MiB chunk of a streamed tensor -- until the socket has taken all of
 * it: with Noise the 100M-parameter round's server peaked 226 MB above
 * plaintext, which writes from the tensor's own memory. A frame over
 * SEAL_WHOLE_MAX is sealed SEAL_PIECE at a time instead, as the socket
 * takes the pieces: the connection has at most SEAL_PIECES_AHEAD pieces
 * written and not yet taken, and the payload (the tensor's memory) is held
 * until its last byte is sealed. Records carry consecutive nonces, so
 * nothing may be sealed out of turn: while such a frame is on its way, the
 * frames sent after it on that connection wait behind it, in order, in
 * c's queue (their number is the senders' to bound: the transport's
 * per-peer held bytes and the engine's stream windows). */
#define SEAL_PIECE (32 * (size_t)BBD_SEAL_RECORD_PLAINTEXT) /* ~1 MiB of plaintext */
#define SEAL_WHOLE_MAX (2 * SEAL_PIECE)
#define SEAL_PIECES_AHEAD 2

struct seal_job {
    struct seal_job *next;
    tcp_conn *c;
    bbd_peer *peer; /* a reference while the job lives; NULL: ours, not reported */
    bbd_payload pl; /* held until sealed whole */
    uint8_t hdr[BBD_FRAME_HEADER_MAX];
    bbd_seal_cursor cur;
    size_t held;     /* the envelope's size (the report's) */
    unsigned pieces; /* written, not yet taken */
    bool queued;     /* in c's queue: not sealed whole, not failed */
    bool failed;     /* reported as failed: no report at the end */
};

typedef struct seal_piece {
    uv_write_t req;
    struct seal_job *job;
    size_t wire;
    uint8_t buf[];
} seal_piece;

/* Free j once it is out of the queue and its last piece was taken,
 * reporting the envelope sent unless it failed. */
static void seal_job_end(struct seal_job *j)
{
    if (j->queued || j->pieces)
        return;
    if (j->peer) {
        j->peer->refs--;
        if (!j->failed)
            bbd__send_done(j->c->t, j->peer, j->held, true);
    }
    free(j);
}

/* Every queued frame failed (c is closing): released and reported once;
 * pieces already written end with their callbacks. */
static void seal_fail_all(tcp_conn *c)
{
    struct seal_job *first = c->seal_head; /* detached first: the reports may send */
    c->seal_head = c->seal_tail = NULL;
    for (struct seal_job *j = first, *next; j; j = next) {
        next = j->next;
        j->queued = false;
        j->failed = true;
        if (j->peer)
            bbd__send_failed(c->t, j->peer, &j->pl);
        else
            bbd__payload_free(&j->pl);
        seal_job_end(j);
    }
}

static void seal_pump(tcp_conn *c);

static void seal_written(uv_write_t *req, int status)
{
    seal_piece *p = (seal_piece *)req;
    struct seal_job *j = p->job;
    tcp_conn *c = j->c; /* its handle closes after its write callbacks ran */
    bbd_transport *t = c->t;
    t->tx_sealed -= p->wire;
    if (status == 0)
        count_written(t, j->peer, p->wire);
    free(p);
    j->pieces--;
    c->seal_pieces--;
    if (status < 0 && !j->queued && !j->failed) {
        j->failed = true;
        if (j->peer)
            bbd__send_done(t, j->peer, j->held, false);
    }
    seal_job_end(j);
    if (status < 0) {
        if (status != UV_ECANCELED && c->state != CONN_CLOSING)
            close_write_failed(c, status);
        return;
    }
    if (c->state != CONN_CLOSING)
        seal_pump(c);
}

/* Seal and write the queue's next pieces while fewer than
 * SEAL_PIECES_AHEAD are on their way. */
static void seal_pump(tcp_conn *c)
{
    bbd_transport *t = c->t;
    struct seal_job *j;
    while ((j = c->seal_head) && c->seal_pieces < SEAL_PIECES_AHEAD) {
        size_t plain = j->cur.left < SEAL_PIECE ? j->cur.left : SEAL_PIECE;
        seal_piece *p = malloc(sizeof *p + bbd__sealed_size(plain));
        size_t wire = p ? bbd__tcp_seal_some(c, &j->cur, plain, p->buf) : 0;
        int rc = !p ? UV_ENOMEM : !wire ? UV_EINVAL /* nonces used up: 2^64 */ : 0;
        if (rc == 0) {
            *p = (seal_piece){.job = j, .wire = wire};
            uv_buf_t b = uv_buf_init((char *)p->buf, (unsigned)wire);
            rc = uv_write(&p->req, (uv_stream_t *)&c->tcp, &b, 1, seal_written);
        }
        if (rc != 0) {
            free(p);
            close_write_failed(c, rc); /* fails the queue, j too */
            return;
        }
        j->pieces++;
        c->seal_pieces++;
        t->tx_sealed += wire;
        if (t->tx_sealed > t->tx_sealed_peak)
            t->tx_sealed_peak = t->tx_sealed;
        if (!j->cur.left) { /* sealed whole: its bytes are in the pieces */
            c->seal_head = j->next;
            if (!c->seal_head)
                c->seal_tail = NULL;
            j->queued = false;
            bbd__payload_free(&j->pl);
        }
    }
    if (!c->seal_head && c->shutdown_after_seal) {
        c->shutdown_after_seal = false;
        start_shutdown(c);
    }
}

/* Queue the frame hdr + pl behind c's others; takes pl. */
static void seal_enqueue(tcp_conn *c, bbd_peer *peer, const uint8_t *hdr, size_t hl,
                         bbd_payload *pl)
{
    struct seal_job *j = c->state == CONN_CLOSING ? NULL : malloc(sizeof *j);
    if (!j) { /* closing: a report of its queue sent again at once */
        write_failed(c, peer, pl, c->state == CONN_CLOSING ? UV_ECANCELED : UV_ENOMEM);
        return;
    }
    *j = (struct seal_job){.c = c, .peer = peer, .pl = *pl, .held = pl->len, .queued = true};
    memcpy(j->hdr, hdr, hl);
    bbd__seal_cursor_init(&j->cur, j->hdr, hl, &j->pl);
    if (peer)
        peer->refs++;
    if (c->seal_tail)
        c->seal_tail->next = j;
    else
        c->seal_head = j;
    c->seal_tail = j;
    seal_pump(c);
}

/* Seal the frame hdr + pl and write it; takes pl (released once sealed:
 * the records hold its bytes). */
static void seal_and_write(tcp_conn *c, bbd_peer *peer, const uint8_t *hdr, size_t hl,
                           bbd_payload *pl)
{
    if (c->seal_head || hl + pl->len > SEAL_WHOLE_MAX) {
        seal_enqueue(c, peer, hdr, hl, pl);
        return;
    }
    size_t held = pl->len, cap = bbd__sealed_size(hl + pl->len);
    uint8_t flat[FLAT_MAX + BBD_RECORD_OVERHEAD];
    uint8_t *buf = cap <= sizeof flat ? flat : malloc(cap);
    size_t wire = buf ? bbd__tcp_seal(c, hdr, hl, pl, buf) : 0;
    if (!wire) {
        if (buf != flat)
            free(buf);
        write_failed(c, peer, pl, buf ? UV_EINVAL : UV_ENOMEM); /* nonces used up: 2^64 */
        return;
    }
    bbd__payload_free(pl);
    write_sealed(c, peer, held, buf, wire, buf != flat);
}

void bbd__tcp_write_frame(tcp_conn *c, bbd_frame_kind kind, bbd_peer *peer, bbd_payload *pl)
{
    uint8_t hdr[BBD_FRAME_HEADER_MAX];
    size_t hl = bbd_frame_header_encode(kind, pl->len, hdr), wire = hl + pl->len;
    c->last_active_ms = uv_now(c->t->loop);
    if (c->sealed) {
        seal_and_write(c, peer, hdr, hl, pl);
        return;
    }
    size_t max = 1 + (pl->bytes ? 1 : pl->n_iov);
    uv_buf_t stack[BUFS_ON_STACK];
    uv_buf_t *bufs = max <= BUFS_ON_STACK ? stack : malloc(max * sizeof *bufs);
    size_t n = bufs ? frame_bufs(hdr, hl, pl, bufs) : 0;
    uint8_t flat[FLAT_MAX];
    uv_buf_t one;
    const uv_buf_t *now = bufs;
    size_t n_now = n;
    if (pl->bytes && wire <= FLAT_MAX) {
        memcpy(flat, hdr, hl);
        memcpy(flat + hl, pl->bytes, pl->len);
        one = uv_buf_init((char *)flat, (unsigned)wire);
        now = &one;
        n_now = 1;
    }
    int rc = bufs ? write_bufs(c, peer, pl, now, n_now, bufs, n, wire) : UV_ENOMEM;
    if (bufs != stack)
        free(bufs);
    if (rc != 0)
        write_failed(c, peer, pl, rc);
}

void bbd__tcp_send(bbd_transport *t, tcp_conn *c, bbd_payload *pl)
{
    (void)t;
    bbd__tcp_write_frame(c, BBD_FRAME_ENVELOPE, c->peer, pl);
}

static void start_handshake(tcp_conn *c)
{
    bbd_transport *t = c->t;
    uv_tcp_nodelay(&c->tcp, 1);
    c->state = CONN_HANDSHAKE;
    c->opened_ms = c->last_active_ms = uv_now(t->loop);
    set_deadline(c, t->cfg.handshake_timeout_ms);
    bbd__tcp_read_start(c);
    if (c->state == CONN_CLOSING)
        return;
    if (t->secure) {
        bbd__tcp_secure_start(c);
        return;
    }
    uint8_t *copy = malloc(t->hs_len);
    if (!copy) {
        bbd__tcp_close(c, "out of memory");
        return;
    }
    memcpy(copy, t->hs, t->hs_len);
    bbd_payload pl = {.bytes = copy, .len = t->hs_len};
    bbd__tcp_write_frame(c, BBD_FRAME_HANDSHAKE, NULL, &pl);
}

/* ---- draining a losing connection ---------------------------------------------------- */

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    tcp_conn *c = req->data;
    if (status == UV_ECANCELED || c->state == CONN_CLOSING)
        return;
    c->shutdown_done = true;
    if (status < 0 || c->eof)
        bbd__tcp_close(c, NULL);
}

static void start_shutdown(tcp_conn *c)
{
    if (c->shut_down)
        return;
    if (c->seal_head) { /* after the frames still being sealed */
        c->shutdown_after_seal = true;
        return;
    }
    c->shut_down = true;
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, shutdown_cb) != 0)
        bbd__tcp_close(c, NULL);
}

void bbd__tcp_close_when_written(tcp_conn *c, const char *why)
{
    char rt[BB_MULTIADDR_TEXT_MAX + 1];
    bbd__log_remote(c->t, BB_LOG_WARN, "tcp %s: %s; connection closed",
                    remote_text(c, rt, sizeof rt), why);
    if (c->peer && c->peer->active == c)
        c->peer->active = NULL;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->eof = true; /* nothing more is read: shutdown_cb closes */
    c->state = CONN_DRAINING;
    set_deadline(c, c->t->cfg.handshake_timeout_ms);
    start_shutdown(c);
}

static void demote(tcp_conn *c)
{
    if (c->peer && c->peer->active == c)
        c->peer->active = NULL;
    c->state = CONN_DRAINING;
    set_deadline(c, c->t->cfg.handshake_timeout_ms);
    if (c->outbound)
        start_shutdown(c);
}

void bbd__tcp_on_eof(tcp_conn *c)
{
    c->eof = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (c->state == CONN_HANDSHAKE)
        bbd__tcp_close(c, "the peer closed the connection during the handshake");
    else if (c->state != CONN_DRAINING)
        bbd__tcp_close(c, NULL); /* the peer closed */
    else if (c->shutdown_done)
        bbd__tcp_close(c, NULL);
    else
        start_shutdown(c); /* shutdown_cb closes */
}

/* ---- the handshake ------------------------------------------------------------------ */

/* Which of two handshaken connections to one peer both sides keep. */
static bool keep_newer(const tcp_conn *cur, const tcp_conn *c)
{
    const bb_peerid *self = &c->t->cfg.self, *peer = &c->peer->id;
    int cmp = peerid_cmp(cur->outbound ? self : peer, c->outbound ? self : peer);
    return cmp == 0 || cmp > 0;
}

static void activate(tcp_conn *c, const bbd_handshake *hs)
{
    bbd_transport *t = c->t;
    bbd_peer *p = c->peer;
    c->state = CONN_OPEN;
    p->active = c;
    set_deadline(c, 0);
    bbd__peer_flush(t, p);
    if (p->active == c)
        bbd__report_connected(t, p, hs);
}

/* Observed address of an inbound peer: the IP it connected from with the
 * port of its first announced TCP listen address of that family. */
static void inbound_observed(tcp_conn *c, const bbd_handshake *hs)
{
    bb_ma_transport remote, a;
    c->observed_len = 0;
    if (bb_multiaddr_transport(c->remote, c->remote_len, &remote, NULL) != BB_OK)
        return;
    for (size_t i = 0; i < hs->n_addrs; i++) {
        if (bb_multiaddr_transport(hs->addrs[i].data, hs->addrs[i].len, &a, NULL) != BB_OK ||
            a.proto != BB_MA_TCP || a.family != remote.family)
            continue;
        remote.port = a.port;
        if (bb_ma_transport_encode(&remote, c->observed, sizeof c->observed, &c->observed_len,
                                   NULL) != BB_OK)
            c->observed_len = 0;
        return;
    }
}

const char *bbd__tcp_check_peer(tcp_conn *c, const bb_peerid *peer, char *why, size_t cap,
                                const char **reason)
{
    bbd_transport *t = c->t;
    char a[BB_PEERID_TEXT_MAX], b[BB_PEERID_TEXT_MAX];
    if (reason)
        *reason = "refused";
    if (bb_peerid_equal(peer, &t->cfg.self))
        return "connected to this node itself";
    if (c->outbound && !bb_peerid_equal(peer, &c->peer->id)) {
        t->stats.handshakes_failed++;
        snprintf(why, cap, "dialed for peer %s but %s %s",
                 bbd__peer_text(&c->peer->id, a, sizeof a), bbd__peer_text(peer, b, sizeof b),
                 t->secure ? "answered (its key proves it)" : "answered");
        return why;
    }
    const char *refused = bbd__admit(t, peer);
    if (!refused)
        return NULL;
    if (reason)
        *reason = refused;
    snprintf(why, cap, "refused peer %s: %s", bbd__peer_text(peer, a, sizeof a), refused);
    return why;
}

void bbd__tcp_open(tcp_conn *c, const bbd_handshake *hs)
{
    bbd_transport *t = c->t;
    if (c->outbound) {
        memcpy(c->observed, c->remote, c->remote_len);
        c->observed_len = c->remote_len;
    } else {
        bbd_peer *p = bbd__peer_get(t, &hs->peer);
        if (!p) {
            bbd__tcp_close(c, "peer table full");
            return;
        }
        c->peer = p;
        p->refs++;
        inbound_observed(c, hs);
    }
    bbd_peer *p = c->peer;
    if (p->dialing == c)
        p->dialing = NULL;
    tcp_conn *cur = p->active;
    if (!cur) {
        activate(c, hs);
    } else if (keep_newer(cur, c)) {
        demote(cur);
        activate(c, hs);
    } else {
        demote(c);
    }
}

void bbd__tcp_on_handshake(tcp_conn *c, const uint8_t *payload, size_t len)
{
    bbd_transport *t = c->t;
    bbd_handshake hs;
    bb_error err = {0};
    char why[BB_ERROR_MSG_MAX + 256];
    if (bbd_handshake_decode(payload, len, &hs, &err) != BB_OK) {
        t->stats.frames_refused++;
        snprintf(why, sizeof why, "refused %s", err.msg);
        bbd__tcp_close(c, why);
        return;
    }
    const char *refused = bbd__tcp_check_peer(c, &hs.peer, why, sizeof why, NULL);
    if (refused)
        bbd__tcp_close(c, refused);
    else
        bbd__tcp_open(c, &hs);
}

/* ---- dial and accept ------------------------------------------------------------------- */

static void on_connect(uv_connect_t *req, int status)
{
    tcp_conn *c = req->data;
    if (status == UV_ECANCELED || c->state == CONN_CLOSING)
        return;
    if (status < 0) {
        char why[128];
        snprintf(why, sizeof why, "connect failed: %s", uv_strerror(status));
        bbd__tcp_close(c, why);
        return;
    }
    start_handshake(c);
}

int bbd__tcp_dial(bbd_transport *t, bbd_peer *p, const bb_ma_transport *ma)
{
    char pt[BB_PEERID_TEXT_MAX];
    if (t->n_conns >= t->cfg.max_connections) {
        bbd__log(t, BB_LOG_WARN, "tcp: cannot dial %s: %zu connections (max_connections)",
                 bbd__peer_text(&p->id, pt, sizeof pt), t->n_conns);
        return BB_EFULL;
    }
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (bb_ma_transport_to_sockaddr(ma, &ss, &sslen, NULL) != BB_OK)
        return BB_EINVAL;
    tcp_conn *c = conn_new(t);
    if (!c)
        return BB_ENOMEM;
    c->outbound = true;
    c->peer = p;
    p->refs++;
    p->dialing = c;
    c->state = CONN_CONNECTING;
    if (bb_ma_transport_encode(ma, c->remote, sizeof c->remote, &c->remote_len, NULL) != BB_OK)
        c->remote_len = 0;
    int rc = uv_tcp_connect(&c->connect_req, &c->tcp, (struct sockaddr *)&ss, on_connect);
    if (rc != 0) {
        char why[128];
        snprintf(why, sizeof why, "connect failed: %s", uv_strerror(rc));
        bbd__tcp_close(c, why);
        return BB_EIO;
    }
    set_deadline(c, t->cfg.connect_timeout_ms);
    return BB_OK;
}

/* The inbound connection still in its handshake that came first. */
static tcp_conn *oldest_unauthenticated(bbd_transport *t, const tcp_conn *not)
{
    tcp_conn *v = NULL;
    for (tcp_conn *c = t->conns; c; c = c->next)
        if (c != not && !c->outbound && c->state == CONN_HANDSHAKE &&
            (!v || c->seq < v->seq))
            v = c;
    return v;
}

/* May the new inbound connection c stay? Its source's share of the table
 * (max_connections_per_source), then room in the table: when it is full,
 * the oldest connection not yet past its handshake makes room, so
 * anonymous ones can never lock out peers that prove who they are. */
static bool admit_connection(bbd_transport *t, tcp_conn *c)
{
    char why[160];
    bb_ma_transport src;
    if (bb_multiaddr_transport(c->remote, c->remote_len, &src, NULL) == BB_OK) {
        if (!bbd__source_add(t, &src)) {
            t->stats.connections_refused++;
            snprintf(why, sizeof why, "refused: %zu connections from this address "
                     "(max_connections_per_source)", t->cfg.max_connections_per_source);
            bbd__tcp_close(c, why);
            return false;
        }
        c->counted_source = true;
    }
    if (t->n_conns <= t->cfg.max_connections)
        return true;
    tcp_conn *victim = oldest_unauthenticated(t, c);
    if (!victim) {
        t->stats.connections_refused++;
        bbd__tcp_close(c, "refused: max_connections reached");
        return false;
    }
    t->stats.connections_evicted++;
    bbd__tcp_close(victim, "closed to make room: still in its handshake when the connection "
                           "table was full (max_connections)");
    return true;
}

static void on_connection(uv_stream_t *server, int status)
{
    tcp_listener *l = server->data;
    bbd_transport *t = l->t;
    if (status < 0) {
        bbd__log(t, BB_LOG_WARN, "tcp: accept failed: %s", uv_strerror(status));
        return;
    }
    tcp_conn *c = conn_new(t);
    if (!c) {
        bbd__log(t, BB_LOG_ERROR, "tcp: out of memory accepting a connection");
        return;
    }
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        bbd__tcp_close(c, NULL);
        return;
    }
    struct sockaddr_storage ss;
    int sslen = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sslen) == 0 &&
        bb_multiaddr_from_sockaddr((struct sockaddr *)&ss, (socklen_t)sslen, BB_MA_TCP,
                                   c->remote, sizeof c->remote, &c->remote_len, NULL) != BB_OK)
        c->remote_len = 0;
    if (!admit_connection(t, c))
        return;
    start_handshake(c);
}

static void listener_closed(uv_handle_t *h)
{
    tcp_listener *l = h->data;
    bbd_transport *t = l->t;
    free(l);
    bbd__handle_closed(t);
}

int bbd__tcp_listen(bbd_transport *t, const struct sockaddr *sa, const char *text,
                    bb_error *err)
{
    tcp_listener *l = calloc(1, sizeof *l);
    if (!l || uv_tcp_init(t->loop, &l->tcp) != 0) {
        free(l);
        return bb_error_set(err, BB_ENOMEM, "listen %s: out of memory", text);
    }
    l->t = t;
    l->tcp.data = l;
    bbd__handle_init(t);
    unsigned flags = sa->sa_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0;
    int rc = uv_tcp_bind(&l->tcp, sa, flags);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&l->tcp, 128, on_connection);
    rc = bbd__listen_bound(t, (uv_handle_t *)&l->tcp, rc, BB_MA_TCP, text, listener_closed, err);
    if (rc != BB_OK)
        return rc;
    t->tcp_listeners[t->n_tcp_listeners++] = l;
    return BB_OK;
}

void bbd__tcp_close_all(bbd_transport *t)
{
    bbd_timer_close(&t->sweep, sweep_closed);
    for (size_t i = 0; i < t->n_tcp_listeners; i++)
        uv_close((uv_handle_t *)&t->tcp_listeners[i]->tcp, listener_closed);
    t->n_tcp_listeners = 0;
    while (t->conns)
        bbd__tcp_close(t->conns, NULL);
}
