/*
 * transport.c — the public face of bbd's network layer (transport.h):
 * configuration, listening, choosing a carrier for each send, counters,
 * logging and the orderly close. TCP lives in tcp.c / tcp_read.c, UDP in
 * udp.c, the peer table and send queues in transport_peers.c.
 *
 * Routing: a peer with an open TCP connection is sent to over it, else over
 * an established UDP session; otherwise the first address of the send's
 * list that this node can use (any /tcp, or a /udp of a family we listen
 * on) is dialed and the envelope waits, bounded, for the handshake.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bbd/host/transport_internal.h"

#define MiB ((size_t)1024 * 1024)

void bbd_transport_config_init(bbd_transport_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_frame_bytes = 64 * MiB;
    cfg->max_queue_per_peer_bytes = 16 * MiB;
    cfg->max_queue_total_bytes = 64 * MiB;
    cfg->max_connections = 1024;
    cfg->udp_payload_bytes = 1200;
    cfg->udp_reassembly_bytes = 32 * MiB;
    cfg->udp_reassembly_timeout_ms = 5000;
    cfg->connect_timeout_ms = 3000;
    cfg->handshake_timeout_ms = 3000;
    cfg->max_rx_buffer_total_bytes = 256 * MiB;
    cfg->stall_timeout_ms = 30000;
    cfg->udp_session_timeout_ms = 60000;
    cfg->security = BBD_SECURITY_NOISE;
    cfg->max_connections_per_source = 64;
    cfg->idle_timeout_ms = 600000;
    cfg->min_rx_bytes_per_s = 16384;
}

/* Zero fields take their default. */
static void config_defaults(bbd_transport_config *c)
{
    bbd_transport_config d;
    bbd_transport_config_init(&d);
#define DEF(f) if (!c->f) c->f = d.f
    DEF(max_frame_bytes);
    DEF(max_queue_per_peer_bytes);
    DEF(max_queue_total_bytes);
    DEF(max_connections);
    DEF(udp_payload_bytes);
    DEF(udp_reassembly_bytes);
    DEF(udp_reassembly_timeout_ms);
    DEF(connect_timeout_ms);
    DEF(handshake_timeout_ms);
    DEF(max_rx_buffer_total_bytes);
    DEF(stall_timeout_ms);
    DEF(udp_session_timeout_ms);
    DEF(max_connections_per_source);
    DEF(idle_timeout_ms);
    DEF(min_rx_bytes_per_s);
#undef DEF
}

static int config_check(const bbd_transport_config *c, bb_error *err)
{
    int rc = bb_peerid_validate(c->self.bytes, c->self.len, err);
    if (rc)
        return bb_error_prefix(err, "transport: own PeerId");
    if (c->max_frame_bytes > UINT32_MAX)
        return bb_error_set(err, BB_EINVAL,
                            "transport: max_frame_bytes %zu over 4 GiB (UDP sizes are 32-bit)",
                            c->max_frame_bytes);
    size_t min_dgram = BBD_DGRAM_FRAGMENT_HEADER + BBD_DGRAM_MIN_CHUNK +
                       (c->security == BBD_SECURITY_NOISE ? BBD_DGRAM_SEALED_OVERHEAD : 0);
    if (c->udp_payload_bytes < min_dgram || c->udp_payload_bytes > BBD_DGRAM_MAX_BYTES ||
        c->udp_payload_bytes - BBD_DGRAM_FRAGMENT_HEADER > UINT16_MAX)
        return bb_error_set(err, BB_EINVAL, "transport: udp_payload_bytes %zu not in %zu..%d",
                            c->udp_payload_bytes, min_dgram, UINT16_MAX);
    if (c->n_targets > BBD_HANDSHAKE_MAX_TARGETS)
        return bb_error_set(err, BB_ELIMIT, "transport: %zu targets, at most %d",
                            c->n_targets, BBD_HANDSHAKE_MAX_TARGETS);
    if (c->security != BBD_SECURITY_NOISE && c->security != BBD_SECURITY_OFF)
        return bb_error_set(err, BB_EINVAL, "transport: unknown security mode %d",
                            (int)c->security);
    if (c->security == BBD_SECURITY_NOISE && c->identity) {
        bb_peerid id;
        bb_peerid_from_pubkey(c->identity->pk, &id);
        if (!bb_peerid_equal(&id, &c->self))
            return bb_error_set(err, BB_EINVAL,
                                "transport: the identity key is not the key of its own PeerId");
    }
    return BB_OK;
}

/* Our Handshake, re-encoded whenever the listen set changes. */
static int build_handshake(bbd_transport *t, bb_error *err)
{
    bbd_handshake h = {.peer = t->cfg.self, .version = BBD_HANDSHAKE_VERSION};
    h.n_addrs = t->n_listen;
    for (size_t i = 0; i < t->n_listen; i++)
        h.addrs[i] = (bb_multiaddr_ref){t->listen[i].data, t->listen[i].len};
    h.n_targets = t->cfg.n_targets;
    for (size_t i = 0; i < h.n_targets; i++)
        h.targets[i] = (bbd_handshake_target){t->targets[i], strlen(t->targets[i])};
    uint8_t buf[BBD_HANDSHAKE_MAX_BYTES];
    size_t n;
    int rc = bbd_handshake_encode(&h, buf, sizeof buf, &n, err);
    if (rc)
        return rc;
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy)
        return bb_error_set(err, BB_ENOMEM, "transport: out of memory");
    memcpy(copy, buf, n);
    free(t->hs);
    t->hs = copy;
    t->hs_len = n;
    return bbd__secure_payload(t, err); /* a secure handshake carries it */
}

static void free_transport(bbd_transport *t)
{
    if (t->sweep.fd >= 0) /* never started: bbd__tcp_close_all closes it otherwise */
        close(t->sweep.fd);
    bbd__secure_free(t);
    bbd__rules_free(t);
    bbd__peers_free(t);
    bbd_reasm_free(t->reasm);
    free(t->sess_buckets);
    free(t->udp_scratch);
    for (size_t i = 0; i < t->cfg.n_targets; i++)
        free(t->targets[i]);
    free(t->targets);
    free(t->hs);
    free(t->reports);
    free(t);
}

bbd_transport *bbd_transport_new(uv_loop_t *loop, const bbd_transport_config *cfg,
                                 const bbd_transport_callbacks *cb, bb_error *err)
{
    bbd_transport *t = calloc(1, sizeof *t);
    if (!t) {
        bb_error_set(err, BB_ENOMEM, "transport: out of memory");
        return NULL;
    }
    t->loop = loop;
    t->cfg = *cfg;
    t->cb = *cb;
    t->sweep.fd = -1;
    config_defaults(&t->cfg);
    if (config_check(&t->cfg, err)) {
        free(t);
        return NULL;
    }
    t->secure = t->cfg.security == BBD_SECURITY_NOISE;
    t->cfg.identity = NULL; /* borrowed for bbd__secure_init only */
    if (bbd__rules_init(t) != BB_OK || bbd__secure_init(t, cfg->identity, err) != BB_OK) {
        if (!err || err->code == BB_OK)
            bb_error_set(err, BB_ENOMEM, "transport: out of memory");
        t->cfg.n_targets = 0;
        free_transport(t);
        return NULL;
    }
    t->targets = calloc(t->cfg.n_targets ? t->cfg.n_targets : 1, sizeof *t->targets);
    bool ok = t->targets != NULL;
    for (size_t i = 0; ok && i < t->cfg.n_targets; i++)
        ok = (t->targets[i] = strdup(cfg->targets[i])) != NULL;
    if (!ok) {
        t->cfg.n_targets = 0;
        free_transport(t);
        bb_error_set(err, BB_ENOMEM, "transport: out of memory");
        return NULL;
    }
    t->cfg.targets = (const char *const *)t->targets;
    bbd_reasm_config rc = {.budget_bytes = t->cfg.udp_reassembly_bytes,
                           .timeout_ms = t->cfg.udp_reassembly_timeout_ms,
                           .max_messages = 1024};
    if (build_handshake(t, err) || bbd__peers_init(t) || !(t->reasm = bbd_reasm_new(&rc)) ||
        bbd__udp_init(t) || bbd__reports_init(t) || bbd__tcp_sweep_init(t, err)) {
        if (!err || err->code == BB_OK)
            bb_error_set(err, BB_ENOMEM, "transport: out of memory");
        free_transport(t);
        return NULL;
    }
    return t;
}

/* ---- listening ------------------------------------------------------------------- */

int bbd_transport_listen(bbd_transport *t, const uint8_t *maddr, size_t len, bb_error *err)
{
    char text[BB_MULTIADDR_TEXT_MAX + 1];
    bbd__addr_text(maddr, len, text, sizeof text);
    if (t->closing)
        return bb_error_set(err, BB_ESTATE, "listen %s: transport is closing", text);
    if (t->n_listen == BBD_MAX_LISTEN)
        return bb_error_set(err, BB_ELIMIT, "listen %s: at most %d listen addresses", text,
                            BBD_MAX_LISTEN);
    bb_ma_proto proto;
    struct sockaddr_storage ss;
    socklen_t sslen;
    int rc = bb_multiaddr_to_sockaddr(maddr, len, &proto, &ss, &sslen, err);
    if (rc)
        return bb_error_prefix(err, "listen %s", text);
    rc = proto == BB_MA_TCP ? bbd__tcp_listen(t, (struct sockaddr *)&ss, text, err)
                            : bbd__udp_listen(t, (struct sockaddr *)&ss, text, err);
    if (rc)
        return rc;
    return build_handshake(t, err);
}

/* A listen socket was bound (rc: how that went): record its address (port
 * 0 resolved), or close it and say why. */
int bbd__listen_bound(bbd_transport *t, uv_handle_t *h, int rc, bb_ma_proto proto,
                      const char *text, uv_close_cb closed, bb_error *err)
{
    struct sockaddr_storage ss;
    socklen_t salen = sizeof ss;
    uv_os_fd_t fd;
    if (rc == 0 && (rc = uv_fileno(h, &fd)) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &salen) != 0)
        rc = uv_translate_sys_error(errno);
    if (rc != 0) {
        uv_close(h, closed);
        return bb_error_set(err, BB_EIO, "listen %s: %s", text, uv_strerror(rc));
    }
    size_t i = t->n_listen, n;
    rc = bb_multiaddr_from_sockaddr((struct sockaddr *)&ss, salen, proto, t->listen_bytes[i],
                                    BBD_ADDR_BYTES, &n, err);
    if (rc != BB_OK) {
        uv_close(h, closed);
        return bb_error_prefix(err, "listen %s", text);
    }
    t->listen[i] = (bbd_addr){t->listen_bytes[i], n};
    t->n_listen++;
    return BB_OK;
}

size_t bbd_transport_listen_addrs(const bbd_transport *t, const bbd_addr **out)
{
    *out = t->listen;
    return t->n_listen;
}

/* ---- sending ---------------------------------------------------------------------- */

/* The first address of addrs this node can use: any /tcp, or a /udp of a
 * family it listens on, that the dial rules allow; a host name (/dns...) is
 * resolved when dialed, and the rules judge the addresses it resolves to. */
static bool pick_address(bbd_transport *t, const bbd_addr *addrs, size_t n_addrs,
                         bb_ma_endpoint *out)
{
    for (size_t i = 0; i < n_addrs; i++)
        if (bb_multiaddr_endpoint(addrs[i].data, addrs[i].len, out, NULL) == BB_OK &&
            (out->is_name ||
             ((out->proto == BB_MA_TCP || bbd__udp_can_reach(t, out->ip.family)) &&
              bbd__dial_allowed(t, &out->ip))))
            return true;
    return false;
}

void bbd__payload_free(bbd_payload *pl)
{
    free(pl->bytes);
    pl->bytes = NULL;
    if (pl->release)
        pl->release(pl->ud);
    pl->release = NULL;
}

/* BB_ESTATE while closing, BB_EINVAL for this node itself: nothing to
 * send to or dial. */
static int refuse_peer(const bbd_transport *t, const bb_peerid *peer)
{
    if (t->closing)
        return BB_ESTATE;
    return bb_peerid_equal(peer, &t->cfg.self) ? BB_EINVAL : BB_OK;
}

/* Dial p at an address pick_address chose (a name: once resolved). */
static int dial(bbd_transport *t, bbd_peer *p, const bb_ma_endpoint *ep)
{
    if (ep->is_name)
        return bbd__resolve_dial(t, p, ep);
    return ep->proto == BB_MA_TCP ? bbd__tcp_dial(t, p, &ep->ip) : bbd__udp_dial(t, p, &ep->ip);
}

/* Both send calls: takes pl in every case. */
static int send_payload(bbd_transport *t, const bb_peerid *peer, const bbd_addr *addrs,
                        size_t n_addrs, bbd_payload *pl)
{
    char pt[BB_PEERID_TEXT_MAX];
    size_t len = pl->len;
    int refused = refuse_peer(t, peer);
    if (refused != BB_OK) {
        bbd__payload_free(pl);
        return refused;
    }
    if (len > t->cfg.max_frame_bytes) {
        bbd__payload_free(pl);
        bbd__log(t, BB_LOG_WARN, "send to %s: envelope of %zu bytes over max_frame_bytes %zu",
                 bbd__peer_text(peer, pt, sizeof pt), len, t->cfg.max_frame_bytes);
        return BB_ELIMIT;
    }
    bbd_peer *p = bbd__peer_get(t, peer);
    bool has_channel = p && (p->active || p->udp);
    bool dialing = p && (p->dialing || p->udp_dialing || p->resolving);
    bb_ma_endpoint ma = {0};
    if (p && !has_channel && !dialing && !pick_address(t, addrs, n_addrs, &ma)) {
        bbd__payload_free(pl);
        bbd__peer_update(t, p);
        return BB_ENOTFOUND;
    }
    if (!p || !bbd__peer_admit(t, p, len)) {
        bbd__payload_free(pl);
        t->stats.queue_dropped++;
        if (p)
            p->dropped++;
        if (t->cb.on_send_result)
            t->cb.on_send_result(t->cb.ud, peer, false);
        return BB_EFULL;
    }
    if (has_channel) {
        bbd__peer_channel_send(t, p, pl);
        return BB_OK;
    }
    bbd__peer_enqueue(t, p, pl);
    if (!dialing) {
        if (dial(t, p, &ma) != BB_OK)
            bbd__peer_update(t, p); /* nothing carries the queue: it fails */
    }
    return BB_OK;
}

int bbd_transport_send(bbd_transport *t, const bb_peerid *peer, const bbd_addr *addrs,
                       size_t n_addrs, uint8_t *bytes, size_t len)
{
    bbd_payload pl = {.bytes = bytes, .len = len};
    return send_payload(t, peer, addrs, n_addrs, &pl);
}

int bbd_transport_send_gather(bbd_transport *t, const bb_peerid *peer, const bbd_addr *addrs,
                              size_t n_addrs, const bbd_iov *iov, size_t n_iov, size_t len,
                              void (*release)(void *ud), void *release_ud)
{
    bbd_payload pl = {.iov = iov, .n_iov = n_iov, .len = len, .release = release,
                      .ud = release_ud};
    return send_payload(t, peer, addrs, n_addrs, &pl);
}

int bbd_transport_connect(bbd_transport *t, const bb_peerid *peer, const bbd_addr *addrs,
                          size_t n_addrs, bool *open)
{
    if (open)
        *open = false;
    int rc = refuse_peer(t, peer);
    if (rc != BB_OK)
        return rc;
    bbd_peer *p = bbd__peer_get(t, peer);
    if (!p)
        return BB_EFULL;
    if (p->active || p->udp) {
        if (open)
            *open = true;
        return BB_OK;
    }
    if (p->dialing || p->udp_dialing || p->resolving)
        return BB_OK;
    bb_ma_endpoint ma = {0};
    rc = pick_address(t, addrs, n_addrs, &ma) ? dial(t, p, &ma) : BB_ENOTFOUND;
    if (rc != BB_OK)
        bbd__peer_update(t, p);
    return rc;
}

void bbd_transport_disconnect(bbd_transport *t, const bb_peerid *peer)
{
    bbd_peer *p = t->closing ? NULL : bbd__peer_find(t, peer);
    if (!p)
        return;
    p->refs++; /* keep p while its channels close */
    for (tcp_conn *c = t->conns, *next; c; c = next) {
        next = c->next;
        if (c->peer == p)
            bbd__tcp_close(c, "disconnected by this node (access control)");
    }
    bbd__udp_drop_peer(t, p);
    bbd__peer_fail_queue(t, p);
    p->refs--;
    bbd__peer_update(t, p);
}

/* ---- counters ---------------------------------------------------------------------- */

void bbd_transport_stats_get(const bbd_transport *t, bbd_transport_stats *out)
{
    *out = t->stats;
    out->connections_open = t->n_conns;
    out->rx_buffered_bytes = t->rx_charged;
    out->tx_sealed_bytes = t->tx_sealed;
    out->tx_sealed_peak = t->tx_sealed_peak;
}

/* ---- logging ----------------------------------------------------------------------- */

static void log_v(bbd_transport *t, int level, const char *fmt, va_list ap)
{
    if (!t->cb.on_log)
        return;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    t->cb.on_log(t->cb.ud, level, msg);
}

void bbd__log(bbd_transport *t, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_v(t, level, fmt, ap);
    va_end(ap);
}

/* The remote address a peer-caused line names: "tcp ADDR: ..." and
 * "udp ADDR: ..." (every such line starts so), else "". */
static void line_source(const char *msg, char *out, size_t cap)
{
    out[0] = '\0';
    if (strncmp(msg, "tcp ", 4) && strncmp(msg, "udp ", 4))
        return;
    const char *end = strchr(msg + 4, ':');
    /* an address holds ':' itself only as IPv6 text; the line's own ': ' ends it */
    const char *sep = strstr(msg + 4, ": ");
    if (sep)
        end = sep;
    if (end)
        snprintf(out, cap, "%.*s", (int)(end - (msg + 4)), msg + 4);
}

void bbd__log_remote(bbd_transport *t, int level, const char *fmt, ...)
{
    if (t->cb.on_log_remote) { /* the host's one limiter decides */
        char msg[1024], source[128];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        line_source(msg, source, sizeof source);
        t->cb.on_log_remote(t->cb.ud, level, fmt, source, msg);
        return;
    }
    uint64_t now = uv_now(t->loop);
    if (now - t->log_window_ms >= 1000) {
        if (t->logs_suppressed)
            bbd__log(t, BB_LOG_WARN, "%u more messages about peers suppressed",
                     t->logs_suppressed);
        t->log_window_ms = now;
        t->logs_in_window = 0;
        t->logs_suppressed = 0;
    }
    if (t->logs_in_window >= BBD_LOG_BURST) {
        t->logs_suppressed++;
        return;
    }
    t->logs_in_window++;
    va_list ap;
    va_start(ap, fmt);
    log_v(t, level, fmt, ap);
    va_end(ap);
}

const char *bbd__addr_text(const uint8_t *a, size_t n, char *buf, size_t cap)
{
    if (!a || n == 0 || bb_multiaddr_format(a, n, buf, cap, NULL, NULL) != BB_OK)
        snprintf(buf, cap, "(address)");
    return buf;
}

const char *bbd__peer_text(const bb_peerid *id, char *buf, size_t cap)
{
    if (bb_peerid_to_text(id, buf, cap, NULL) != BB_OK)
        snprintf(buf, cap, "(peer)");
    return buf;
}

const char *bbd__admit(bbd_transport *t, const bb_peerid *peer)
{
    const char *refused = t->cb.admit ? t->cb.admit(t->cb.ud, peer) : NULL;
    if (refused)
        t->stats.peers_refused++;
    return refused;
}

void bbd__report_connected(bbd_transport *t, bbd_peer *p, const bbd_handshake *hs)
{
    if (p->connected)
        return;
    p->connected = true;
    if (!t->cb.on_peer_connected)
        return;
    bbd_addr addrs[BBD_HANDSHAKE_MAX_ADDRS];
    for (size_t i = 0; i < hs->n_addrs; i++)
        addrs[i] = (bbd_addr){hs->addrs[i].data, hs->addrs[i].len};
    /* NUL-terminated copies of the target names, all in one block. */
    char names[BBD_HANDSHAKE_MAX_TARGETS * (BBD_HANDSHAKE_TARGET_MAX + 1)];
    const char *targets[BBD_HANDSHAKE_MAX_TARGETS];
    size_t off = 0;
    for (size_t i = 0; i < hs->n_targets; i++) {
        memcpy(names + off, hs->targets[i].name, hs->targets[i].len);
        names[off + hs->targets[i].len] = '\0';
        targets[i] = names + off;
        off += hs->targets[i].len + 1;
    }
    t->cb.on_peer_connected(t->cb.ud, &p->id, addrs, hs->n_addrs, targets, hs->n_targets);
}

/* ---- closing ------------------------------------------------------------------------ */

void bbd__handle_init(bbd_transport *t)
{
    t->handles++;
}

void bbd__handle_closed(bbd_transport *t)
{
    if (--t->handles > 0 || !t->closing)
        return;
    void (*done)(void *) = t->done;
    void *ud = t->done_ud;
    free_transport(t);
    if (done)
        done(ud);
}

void bbd__own_handle_closed(uv_handle_t *h)
{
    bbd__handle_closed(h->data);
}

void bbd_transport_close(bbd_transport *t, void (*done)(void *ud), void *ud)
{
    if (t->closing)
        return;
    t->closing = true;
    t->done = done;
    t->done_ud = ud;
    bbd__resolve_cancel_all(t);
    bbd__tcp_close_all(t); /* listeners and connections */
    bbd__reports_flush(t);
    uv_close((uv_handle_t *)&t->report_prepare, bbd__own_handle_closed);
    bbd__udp_close_all(t); /* closes the UDP timer too: the last handle */
}
