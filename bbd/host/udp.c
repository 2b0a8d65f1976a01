/*
 * udp.c — the UDP carrier: sockets, sessions, fragmentation, reassembly.
 *
 * A session is one remote socket address. It is established when a
 * handshake (HELLO or HELLO_ACK datagram, fragment.h) arrived from it,
 * which names the peer behind it; envelopes and fragments from a source
 * without an established session are dropped, and the source is sent a
 * HELLO (at most BBD_PROBES_PER_S a second) so that its next ones are
 * accepted — that is how a restarted peer is learned again. To send to a
 * peer without a session, the transport sends HELLO (retried until
 * handshake_timeout_ms) and queues the envelopes until the answer.
 *
 * Envelopes that fit (2 + len <= udp_payload_bytes) go in one datagram,
 * larger ones as fragments of udp_payload_bytes. UDP gives no delivery
 * feedback: on_send_result(true) means handed to the kernel. Sessions with
 * nothing received for udp_session_timeout_ms expire (on_peer_disconnected
 * when it was the peer's last channel).
 *
 * With security on (the default) the HELLO exchange is replaced by the
 * Noise handshake and every data datagram is sealed (udp_secure.c); this
 * file keeps the sessions, fragmentation, sending and timers for both.
 */
#include <stdlib.h>
#include <string.h>

#include "bbd/host/transport_internal.h"

#define BBD_PROBES_PER_S 16
#define BBD_UDP_IDLE_TICK_MS 1000
#define BBD_UDP_SOCKBUF (4 * 1024 * 1024)

/* One envelope being sent, possibly as many datagrams. */
typedef struct udp_msg {
    bbd_peer *peer;
    uint8_t *bytes;
    size_t len, wire;
    uint32_t pending; /* datagrams queued in libuv */
    bool failed;
} udp_msg;

typedef struct udp_req {
    uv_udp_send_t req;
    udp_msg *msg;     /* NULL for a handshake datagram */
    size_t wire;
    uint8_t hdr[BBD_DGRAM_FRAGMENT_HEADER];
    uint8_t *copy;    /* handshake bytes (msg == NULL) */
} udp_req;

/* ---- session table ------------------------------------------------------------------- */

static size_t sa_hash(const struct sockaddr_storage *ss)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const uint8_t *b;
    size_t n;
    uint16_t port;
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
        b = s6->sin6_addr.s6_addr;
        n = 16;
        port = s6->sin6_port;
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
        b = (const uint8_t *)&s4->sin_addr;
        n = 4;
        port = s4->sin_port;
    }
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    h = (h ^ port) * 0x100000001b3ull;
    return (size_t)(h ^ (h >> 31));
}

static bool sa_equal(const struct sockaddr_storage *a, const struct sockaddr *b)
{
    if (a->ss_family != b->sa_family)
        return false;
    if (b->sa_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
        return x->sin6_port == y->sin6_port &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
}

static void sa_copy(struct sockaddr_storage *dst, const struct sockaddr *src)
{
    memset(dst, 0, sizeof *dst);
    memcpy(dst, src,
           src->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
}

static udp_session **bucket(bbd_transport *t, const struct sockaddr_storage *ss)
{
    return &t->sess_buckets[sa_hash(ss) & (t->n_sess_buckets - 1)];
}

udp_session *bbd__udp_session_find(bbd_transport *t, const struct sockaddr *sa)
{
    struct sockaddr_storage ss;
    sa_copy(&ss, sa);
    udp_session *s = *bucket(t, &ss);
    while (s && !sa_equal(&s->addr, sa))
        s = s->hnext;
    return s;
}



/* When s was last heard from (a probe: when it arrived). */
static uint64_t session_heard_ms(const udp_session *s)
{
    return s->established ? s->last_rx_ms : s->created_ms;
}

/* The table is full: make room by dropping the session heard from least
 * recently that no send waits on, so HELLOs from ever new (or spoofed)
 * addresses cannot lock out new peers. False if every session is dialing. */
static bool session_evict(bbd_transport *t)
{
    udp_session *victim = NULL;
    uint64_t victim_ms = UINT64_MAX;
    for (udp_session *s = t->sessions; s; s = s->next) {
        if (!s->expected && session_heard_ms(s) < victim_ms) {
            victim = s;
            victim_ms = session_heard_ms(s);
        }
    }
    if (victim)
        bbd__udp_session_free(t, victim);
    return victim != NULL;
}

udp_session *bbd__udp_session_new(bbd_transport *t, udp_sock *sock, const struct sockaddr *sa)
{
    if (t->n_sessions >= t->cfg.max_connections && !session_evict(t))
        return NULL;
    udp_session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->sock = sock;
    sa_copy(&s->addr, sa);
    s->id = ++t->next_session_id;
    s->created_ms = uv_now(t->loop);
    socklen_t salen = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                 : sizeof(struct sockaddr_in);
    if (bb_multiaddr_from_sockaddr(sa, salen, BB_MA_UDP, s->observed, sizeof s->observed,
                                   &s->observed_len, NULL) != BB_OK)
        s->observed_len = 0;
    udp_session **b = bucket(t, &s->addr);
    s->hnext = *b;
    *b = s;
    s->next = t->sessions;
    if (t->sessions)
        t->sessions->prev = s;
    t->sessions = s;
    t->n_sessions++;
    bbd__udp_arm_tick(t, BBD_UDP_TICK_MS);
    return s;
}

/* Another established session of p to send through, if any. */
static udp_session *other_session(bbd_transport *t, bbd_peer *p, udp_session *not)
{
    for (udp_session *s = t->sessions; s; s = s->next)
        if (s != not && s->peer == p && s->established)
            return s;
    return NULL;
}

static void session_drop_peer(bbd_transport *t, udp_session *s)
{
    bbd_peer *p = s->peer;
    if (!p)
        return;
    s->peer = NULL;
    if (p->udp == s)
        p->udp = other_session(t, p, s);
    p->refs--;
    bbd__peer_update(t, p);
}

/* Stop waiting for s's HELLO answer on behalf of its expected peer. */
void bbd__udp_drop_expected(bbd_transport *t, udp_session *s)
{
    bbd_peer *q = s->expected;
    if (!q)
        return;
    s->expected = NULL;
    if (q->udp_dialing == s)
        q->udp_dialing = NULL;
    q->refs--;
    bbd__peer_update(t, q);
}

void bbd__udp_session_free(bbd_transport *t, udp_session *s)
{
    udp_session **b = bucket(t, &s->addr);
    while (*b != s)
        b = &(*b)->hnext;
    *b = s->hnext;
    if (s->prev)
        s->prev->next = s->next;
    else
        t->sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    t->n_sessions--;
    bbd_reasm_drop_source(t->reasm, s->id);
    bbd__udp_drop_expected(t, s);
    session_drop_peer(t, s);
    bbd__udp_secure_free(s);
    free(s);
}

/* ---- sending ---------------------------------------------------------------------------- */

static void msg_done(bbd_transport *t, udp_msg *m)
{
    bbd_peer *p = m->peer;
    if (!m->failed) {
        t->stats.bytes_out += m->wire;
        p->bytes_out += m->wire;
    }
    p->refs--;
    size_t len = m->len;
    bool ok = !m->failed;
    free(m->bytes); /* before the report: the next send may reuse it */
    free(m);
    bbd__send_done(t, p, len, ok);
}

static void send_cb(uv_udp_send_t *req, int status)
{
    udp_req *r = (udp_req *)req;
    udp_sock *sock = req->handle->data;
    bbd_transport *t = sock->t;
    if (r->msg) {
        if (status < 0)
            r->msg->failed = true;
        if (--r->msg->pending == 0)
            msg_done(t, r->msg);
    } else if (status == 0) {
        t->stats.bytes_out += r->wire;
    }
    free(r->copy);
    free(r);
}

/* Send one datagram hdr + data to addr: right away when the socket takes
 * it, else queued in libuv (data copied when copy is set: it does not
 * outlive the call). Returns false on failure. */
static bool send_parts(udp_sock *sock, const struct sockaddr *addr, const uint8_t *hdr,
                       size_t hl, const uint8_t *data, size_t n, udp_msg *m, bool copy)
{
    bbd_transport *t = sock->t;
    uv_buf_t bufs[2] = {uv_buf_init((char *)hdr, (unsigned)hl),
                        uv_buf_init((char *)data, (unsigned)n)};
    int rc = uv_udp_try_send(&sock->udp, hl ? bufs : bufs + 1, hl ? 2 : 1, addr);
    if (rc >= 0) {
        if (!m)
            t->stats.bytes_out += hl + n;
        return true;
    }
    if (rc != UV_EAGAIN)
        return false;
    udp_req *r = calloc(1, sizeof *r);
    if (!r)
        return false;
    r->msg = m;
    r->wire = hl + n;
    memcpy(r->hdr, hdr, hl);
    bufs[0] = uv_buf_init((char *)r->hdr, (unsigned)hl);
    if (copy) {
        r->copy = malloc(n ? n : 1);
        if (!r->copy) {
            free(r);
            return false;
        }
        memcpy(r->copy, data, n);
        bufs[1] = uv_buf_init((char *)r->copy, (unsigned)n);
    }
    if (uv_udp_send(&r->req, &sock->udp, hl ? bufs : bufs + 1, hl ? 2 : 1, addr, send_cb) != 0) {
        free(r->copy);
        free(r);
        return false;
    }
    if (m)
        m->pending++;
    return true;
}

/* One datagram of an envelope (m) or a plaintext handshake (m NULL: our
 * handshake may be rebuilt before it goes out, so it is copied) to s; a
 * secure session's envelope datagrams are sealed first. */
static bool send_dgram(udp_session *s, const uint8_t *hdr, size_t hl, const uint8_t *data,
                       size_t n, udp_msg *m)
{
    bbd_transport *t = s->sock->t;
    const struct sockaddr *addr = (struct sockaddr *)&s->addr;
    if (t->secure && m) {
        size_t len = bbd__udp_seal(s, hdr, hl, data, n, t->udp_scratch);
        return len && send_parts(s->sock, addr, NULL, 0, t->udp_scratch, len, m, true);
    }
    return send_parts(s->sock, addr, hdr, hl, data, n, m, m == NULL);
}

void bbd__udp_send_bytes(udp_session *s, const uint8_t *bytes, size_t len)
{
    send_parts(s->sock, (struct sockaddr *)&s->addr, NULL, 0, bytes, len, NULL, true);
    s->hello_sent_ms = uv_now(s->sock->t->loop);
}

static void send_handshake(bbd_transport *t, udp_session *s, bbd_dgram_kind kind)
{
    uint8_t hdr[BBD_DGRAM_HEADER];
    bbd_dgram_header_encode(kind, hdr);
    send_dgram(s, hdr, sizeof hdr, t->hs, t->hs_len, NULL);
    s->hello_sent_ms = uv_now(t->loop);
}

/* The envelope as one malloc'd buffer: datagrams are cut from it (pieces
 * are copied together and released). NULL when out of memory. */
static uint8_t *payload_bytes(bbd_payload *pl)
{
    uint8_t *bytes = pl->bytes;
    pl->bytes = NULL;
    if (!bytes && (bytes = malloc(pl->len ? pl->len : 1))) {
        size_t off = 0;
        for (size_t i = 0; i < pl->n_iov; i++) {
            memcpy(bytes + off, pl->iov[i].data, pl->iov[i].len);
            off += pl->iov[i].len;
        }
    }
    bbd__payload_free(pl);
    return bytes;
}

void bbd__udp_send(bbd_transport *t, udp_session *s, bbd_payload *pl)
{
    bbd_peer *p = s->peer;
    size_t len = pl->len;
    uint8_t *bytes = payload_bytes(pl);
    udp_msg *m = bytes ? malloc(sizeof *m) : NULL;
    if (!m) {
        free(bytes);
        bbd__send_done(t, p, len, false);
        return;
    }
    *m = (udp_msg){.peer = p, .bytes = bytes, .len = len, .pending = 1};
    p->refs++;
    /* a sealed datagram is BBD_DGRAM_SEALED_OVERHEAD bytes longer */
    size_t payload = t->cfg.udp_payload_bytes - (t->secure ? BBD_DGRAM_SEALED_OVERHEAD : 0);
    if (BBD_DGRAM_HEADER + len <= payload) {
        uint8_t hdr[BBD_DGRAM_HEADER];
        bbd_dgram_header_encode(BBD_DGRAM_ENVELOPE, hdr);
        m->wire = sizeof hdr + len;
        m->failed = !send_dgram(s, hdr, sizeof hdr, bytes, len, m);
    } else {
        uint16_t chunk = (uint16_t)(payload - BBD_DGRAM_FRAGMENT_HEADER);
        uint32_t count = (uint32_t)((len + chunk - 1) / chunk), id = s->next_msg_id++;
        for (uint32_t i = 0; i < count && !m->failed; i++) {
            uint8_t hdr[BBD_DGRAM_FRAGMENT_HEADER];
            size_t off = (size_t)i * chunk, n = len - off < chunk ? len - off : chunk;
            bbd_dgram_fragment_header_encode(id, (uint32_t)len, chunk, i, hdr);
            m->wire += sizeof hdr + n;
            m->failed = !send_dgram(s, hdr, sizeof hdr, bytes + off, n, m);
        }
    }
    if (--m->pending == 0) /* the 1 held while sending */
        msg_done(t, m);
}

/* ---- dialing -------------------------------------------------------------------------------- */

static udp_sock *sock_for(const bbd_transport *t, int family)
{
    for (size_t i = 0; i < t->n_udp_socks; i++)
        if (t->udp_socks[i]->family == family)
            return t->udp_socks[i];
    return NULL;
}

bool bbd__udp_can_reach(const bbd_transport *t, int family)
{
    return sock_for(t, family) != NULL;
}

int bbd__udp_dial(bbd_transport *t, bbd_peer *p, const bb_ma_transport *ma)
{
    udp_sock *sock = sock_for(t, ma->family);
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (!sock || bb_ma_transport_to_sockaddr(ma, &ss, &sslen, NULL) != BB_OK)
        return BB_ENOTFOUND;
    udp_session *s = bbd__udp_session_find(t, (struct sockaddr *)&ss);
    if (!s && !(s = bbd__udp_session_new(t, sock, (struct sockaddr *)&ss))) {
        bbd__log(t, BB_LOG_WARN, "udp: cannot start a session: %zu sessions (max_connections)",
                 t->n_sessions);
        return BB_EFULL;
    }
    bbd__udp_drop_expected(t, s); /* someone else's dial to the same address */
    s->expected = p;
    p->refs++;
    p->udp_dialing = s;
    s->dial_started_ms = uv_now(t->loop);
    if (t->secure)
        bbd__udp_noise_start(t, s);
    else
        send_handshake(t, s, BBD_DGRAM_HELLO);
    return BB_OK;
}

/* ---- receiving ---------------------------------------------------------------------------- */

/* The address of a datagram's source as text, for log lines. */
static const char *source_text(const struct sockaddr *addr, char *buf, size_t cap)
{
    uint8_t ma[BBD_ADDR_BYTES];
    size_t mal = 0;
    socklen_t salen = addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                   : sizeof(struct sockaddr_in);
    if (bb_multiaddr_from_sockaddr(addr, salen, BB_MA_UDP, ma, sizeof ma, &mal, NULL) != BB_OK)
        mal = 0;
    return bbd__addr_text(ma, mal, buf, cap);
}

void bbd__udp_establish(bbd_transport *t, udp_session *s, bbd_peer *p, const bbd_handshake *hs)
{
    char at[BB_MULTIADDR_TEXT_MAX + 1], a[BB_PEERID_TEXT_MAX], b[BB_PEERID_TEXT_MAX];
    if (s->expected && s->expected != p) {
        bbd__log_remote(t, BB_LOG_WARN, "udp %s: sent a handshake for peer %s but %s answered",
                        bbd__addr_text(s->observed, s->observed_len, at, sizeof at),
                        bbd__peer_text(&s->expected->id, a, sizeof a),
                        bbd__peer_text(&p->id, b, sizeof b));
        bbd__udp_drop_expected(t, s);
    }
    if (s->peer != p) {
        session_drop_peer(t, s);
        s->peer = p;
        p->refs++;
    }
    s->established = true;
    s->last_rx_ms = uv_now(t->loop);
    if (s->expected == p) {
        s->expected = NULL;
        p->refs--;
    }
    if (p->udp_dialing == s)
        p->udp_dialing = NULL;
    p->udp = s;
    if (!p->active)
        bbd__peer_flush(t, p);
    bbd__report_connected(t, p, hs);
}

/* A plaintext HELLO or HELLO_ACK (security off). */
static void on_handshake(udp_sock *sock, const struct sockaddr *addr, const bbd_dgram *d)
{
    bbd_transport *t = sock->t;
    bbd_handshake hs;
    bb_error err = {0};
    char at[BB_MULTIADDR_TEXT_MAX + 1], pt[BB_PEERID_TEXT_MAX];
    udp_session *s = bbd__udp_session_find(t, addr);
    if (bbd_handshake_decode(d->body, d->body_len, &hs, &err) != BB_OK) {
        t->stats.frames_refused++;
        bbd__log_remote(t, BB_LOG_WARN, "udp %s: refused %s", source_text(addr, at, sizeof at),
                        err.msg);
        return;
    }
    if (bb_peerid_equal(&hs.peer, &t->cfg.self))
        return;
    const char *refused = bbd__admit(t, &hs.peer);
    if (refused) {
        bbd__log_remote(t, BB_LOG_WARN, "udp %s: refused peer %s: %s",
                        source_text(addr, at, sizeof at), bbd__peer_text(&hs.peer, pt, sizeof pt),
                        refused);
        return;
    }
    bbd_peer *p = bbd__peer_get(t, &hs.peer);
    if (!p || (!s && !(s = bbd__udp_session_new(t, sock, addr))))
        return;
    if (d->kind == BBD_DGRAM_HELLO)
        send_handshake(t, s, BBD_DGRAM_HELLO_ACK);
    bbd__udp_establish(t, s, p, &hs);
}

/* Data from a source we have no handshake from: ask for one (a HELLO, or
 * with security on a Noise handshake), at most BBD_PROBES_PER_S a second. */
void bbd__udp_unknown_source(udp_sock *sock, const struct sockaddr *addr)
{
    bbd_transport *t = sock->t;
    uint64_t now = uv_now(t->loop);
    if (bbd__udp_session_find(t, addr))
        return; /* a handshake is under way */
    if (now - t->probe_window_ms >= 1000) {
        t->probe_window_ms = now;
        t->probes_in_window = 0;
    }
    if (t->probes_in_window >= BBD_PROBES_PER_S)
        return;
    t->probes_in_window++;
    udp_session *s = bbd__udp_session_new(t, sock, addr);
    if (s && t->secure)
        bbd__udp_noise_start(t, s);
    else if (s)
        send_handshake(t, s, BBD_DGRAM_HELLO);
}

static void deliver(bbd_transport *t, udp_session *s, const uint8_t *bytes, size_t len)
{
    bbd_peer *p = s->peer;
    p->envelopes_in++;
    t->stats.envelopes_in++;
    if (t->cb.on_envelope) {
        bbd_addr obs = {s->observed, s->observed_len};
        t->cb.on_envelope(t->cb.ud, &p->id, s->observed_len ? &obs : NULL, bytes, len);
    }
}

void bbd__udp_on_data(bbd_transport *t, udp_session *s, const bbd_dgram *d, size_t wire)
{
    if (d->kind == BBD_DGRAM_FRAGMENT)
        t->stats.udp_fragments_in++;
    s->last_rx_ms = uv_now(t->loop);
    s->peer->bytes_in += wire;
    if (d->kind == BBD_DGRAM_ENVELOPE) {
        deliver(t, s, d->body, d->body_len);
        return;
    }
    bbd_reasm_result res;
    uint8_t *msg = NULL;
    size_t len = 0;
    bb_error err = {0};
    if (bbd_reasm_add(t->reasm, s->id, d, s->last_rx_ms, &res, &msg, &len, &err) != BB_OK) {
        t->stats.udp_reassembly_dropped++;
        char at[BB_MULTIADDR_TEXT_MAX + 1];
        bbd__log_remote(t, BB_LOG_WARN, "udp %s: fragment dropped: %s",
                        bbd__addr_text(s->observed, s->observed_len, at, sizeof at), err.msg);
        return;
    }
    if (res == BBD_REASM_DUPLICATE)
        t->stats.udp_fragments_duplicate++;
    if (res == BBD_REASM_COMPLETE) {
        deliver(t, s, msg, len);
        free(msg);
    }
}

static void udp_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    udp_sock *sock = h->data;
    *buf = uv_buf_init((char *)sock->buf, sizeof sock->buf);
}

/* Security off: HELLOs and plaintext data; a Noise datagram means the
 * peer has security on. */
static void recv_plain(udp_sock *sock, const struct sockaddr *addr, const bbd_dgram *d,
                       size_t wire)
{
    bbd_transport *t = sock->t;
    if (d->kind == BBD_DGRAM_HELLO || d->kind == BBD_DGRAM_HELLO_ACK) {
        on_handshake(sock, addr, d);
        return;
    }
    if (d->kind != BBD_DGRAM_ENVELOPE && d->kind != BBD_DGRAM_FRAGMENT) {
        bbd__udp_security_mismatch(sock, addr, true);
        return;
    }
    udp_session *s = bbd__udp_session_find(t, addr);
    if (!s || !s->established) {
        if (d->kind == BBD_DGRAM_FRAGMENT)
            t->stats.udp_fragments_in++;
        bbd__udp_unknown_source(sock, addr);
        return;
    }
    bbd__udp_on_data(t, s, d, wire);
}

/* Security on: Noise handshakes and sealed datagrams only; anything else
 * is dropped before it is decoded any further. */
static void recv_secure(udp_sock *sock, const struct sockaddr *addr, const bbd_dgram *d,
                        size_t wire)
{
    bbd_transport *t = sock->t;
    switch (d->kind) {
    case BBD_DGRAM_NOISE1:
    case BBD_DGRAM_NOISE2:
    case BBD_DGRAM_NOISE3: bbd__udp_on_noise(sock, addr, d); return;
    case BBD_DGRAM_SEALED: bbd__udp_on_sealed(sock, addr, d, wire); return;
    case BBD_DGRAM_HELLO:
    case BBD_DGRAM_HELLO_ACK: bbd__udp_security_mismatch(sock, addr, false); return;
    default: t->stats.unauthenticated++; return;
    }
}

static void udp_recv(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *addr,
                     unsigned flags)
{
    udp_sock *sock = h->data;
    bbd_transport *t = sock->t;
    if (t->closing || nread <= 0 || !addr)
        return;
    t->stats.bytes_in += (uint64_t)nread;
    bbd_dgram d;
    bb_error err = {0};
    int rc = (flags & UV_UDP_PARTIAL)
                 ? bb_error_set(&err, BB_ELIMIT, "datagram: truncated to %zd bytes", nread)
                 : bbd_dgram_decode((const uint8_t *)buf->base, (size_t)nread,
                                    t->cfg.max_frame_bytes, BBD_HANDSHAKE_MAX_BYTES, &d, &err);
    if (rc != BB_OK) {
        t->stats.frames_refused++;
        char at[BB_MULTIADDR_TEXT_MAX + 1];
        bbd__log_remote(t, BB_LOG_WARN, "udp %s: refused %s", source_text(addr, at, sizeof at),
                        err.msg);
        return;
    }
    if (t->secure)
        recv_secure(sock, addr, &d, (size_t)nread);
    else
        recv_plain(sock, addr, &d, (size_t)nread);
}

/* ---- housekeeping ----------------------------------------------------------------------------- */

/* The handshake on s got no answer in time: say so (when we asked), stop
 * waiting, and forget s unless it carries an established session. */
static void give_up(bbd_transport *t, udp_session *s, bool we_asked)
{
    char at[BB_MULTIADDR_TEXT_MAX + 1];
    if (we_asked)
        bbd__log_remote(t, BB_LOG_WARN, "udp %s: no handshake answer within %llu ms",
                        bbd__addr_text(s->observed, s->observed_len, at, sizeof at),
                        (unsigned long long)t->cfg.handshake_timeout_ms);
    if (t->secure)
        bbd__udp_noise_drop(t, s);
    else
        bbd__udp_drop_expected(t, s);
    if (!s->established)
        bbd__udp_session_free(t, s);
}

/* A secure session's handshake: retransmitted by its initiator, given up
 * after handshake_timeout_ms. False once nothing waits (or s was freed). */
static bool secure_tick(bbd_transport *t, udp_session *s, uint64_t now, uint64_t retry)
{
    if (!s->noise && !s->pending) {
        if (s->expected) /* a dial whose handshake failed */
            bbd__udp_drop_expected(t, s);
        return false;
    }
    if (now - s->hs_started_ms >= t->cfg.handshake_timeout_ms) {
        give_up(t, s, s->hs_retx);
        return false;
    }
    if (s->hs_retx && now - s->hello_sent_ms >= retry)
        bbd__udp_send_bytes(s, s->last_hs, s->last_hs_len);
    return true;
}

/* A plaintext dial: HELLO again until answered or timed out. */
static bool plain_tick(bbd_transport *t, udp_session *s, uint64_t now, uint64_t retry)
{
    if (now - s->dial_started_ms >= t->cfg.handshake_timeout_ms) {
        give_up(t, s, true);
        return false;
    }
    if (now - s->hello_sent_ms >= retry)
        send_handshake(t, s, BBD_DGRAM_HELLO);
    return true;
}

static void udp_tick(uv_timer_t *h)
{
    bbd_transport *t = h->data;
    uint64_t now = uv_now(t->loop);
    uint64_t retry = t->cfg.handshake_timeout_ms / 8;
    retry = retry < 50 ? 50 : retry > 1000 ? 1000 : retry;
    bool busy = false;
    for (udp_session *s = t->sessions, *next; s; s = next) {
        next = s->next;
        bool handshaking = s->expected != NULL || (t->secure && (s->noise || s->pending));
        if (handshaking) {
            busy |= t->secure ? secure_tick(t, s, now, retry) : plain_tick(t, s, now, retry);
        } else if (!s->established) { /* a probe nobody answered */
            if (now - s->created_ms >= t->cfg.handshake_timeout_ms)
                bbd__udp_session_free(t, s);
            else
                busy = true;
        } else if (now - s->last_rx_ms >= t->cfg.udp_session_timeout_ms) {
            bbd__udp_session_free(t, s);
        }
    }
    size_t dropped = bbd_reasm_expire(t->reasm, now);
    if (dropped) {
        t->stats.udp_reassembly_dropped += dropped;
        bbd__log_remote(t, BB_LOG_WARN, "udp: %zu incomplete envelopes timed out after %llu ms",
                        dropped, (unsigned long long)t->cfg.udp_reassembly_timeout_ms);
    }
    if (t->closing)
        return;
    if (busy || bbd_reasm_pending(t->reasm))
        bbd__udp_arm_tick(t, BBD_UDP_TICK_MS);
    else if (t->sessions)
        bbd__udp_arm_tick(t, BBD_UDP_IDLE_TICK_MS);
}

void bbd__udp_arm_tick(bbd_transport *t, uint64_t ms)
{
    if (t->closing)
        return;
    if (uv_is_active((uv_handle_t *)&t->udp_timer) && uv_timer_get_due_in(&t->udp_timer) <= ms)
        return;
    uv_timer_start(&t->udp_timer, udp_tick, ms, 0);
}

/* ---- sockets ------------------------------------------------------------------------------------ */

int bbd__udp_init(bbd_transport *t)
{
    t->n_sess_buckets = 256;
    t->sess_buckets = calloc(t->n_sess_buckets, sizeof *t->sess_buckets);
    t->udp_scratch = t->secure ? malloc(BBD_DGRAM_MAX_BYTES + 1) : NULL;
    if (!t->sess_buckets || (t->secure && !t->udp_scratch))
        return BB_ENOMEM;
    uv_timer_init(t->loop, &t->udp_timer);
    t->udp_timer.data = t;
    bbd__handle_init(t);
    uv_unref((uv_handle_t *)&t->udp_timer); /* housekeeping alone keeps no loop alive */
    return BB_OK;
}

static void sock_closed(uv_handle_t *h)
{
    udp_sock *sock = h->data;
    bbd_transport *t = sock->t;
    free(sock);
    bbd__handle_closed(t);
}

int bbd__udp_listen(bbd_transport *t, const struct sockaddr *sa, const char *text,
                    bb_error *err)
{
    udp_sock *sock = calloc(1, sizeof *sock);
    if (!sock || uv_udp_init(t->loop, &sock->udp) != 0) {
        free(sock);
        return bb_error_set(err, BB_ENOMEM, "listen %s: out of memory", text);
    }
    sock->t = t;
    sock->family = sa->sa_family;
    sock->udp.data = sock;
    bbd__handle_init(t);
    unsigned flags = sa->sa_family == AF_INET6 ? UV_UDP_IPV6ONLY : 0;
    int rc = uv_udp_bind(&sock->udp, sa, flags);
    if (rc == 0)
        rc = uv_udp_recv_start(&sock->udp, udp_alloc, udp_recv);
    rc = bbd__listen_bound(t, (uv_handle_t *)&sock->udp, rc, BB_MA_UDP, text, sock_closed, err);
    if (rc != BB_OK)
        return rc;
    /* Room for bursts of fragments; the kernel caps it at rmem_max/wmem_max. */
    int size = BBD_UDP_SOCKBUF;
    uv_recv_buffer_size((uv_handle_t *)&sock->udp, &size);
    size = BBD_UDP_SOCKBUF;
    uv_send_buffer_size((uv_handle_t *)&sock->udp, &size);
    t->udp_socks[t->n_udp_socks++] = sock;
    return BB_OK;
}

void bbd__udp_drop_peer(bbd_transport *t, bbd_peer *p)
{
    for (udp_session *s = t->sessions, *next; s; s = next) {
        next = s->next;
        if (s->peer == p || s->expected == p)
            bbd__udp_session_free(t, s);
    }
}

void bbd__udp_close_all(bbd_transport *t)
{
    while (t->sessions)
        bbd__udp_session_free(t, t->sessions);
    for (size_t i = 0; i < t->n_udp_socks; i++)
        uv_close((uv_handle_t *)&t->udp_socks[i]->udp, sock_closed);
    t->n_udp_socks = 0;
    uv_close((uv_handle_t *)&t->udp_timer, bbd__own_handle_closed);
}
