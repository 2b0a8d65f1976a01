/*
 * udp_secure.c — secure UDP sessions (transport.h, "Security"): the same
 * Noise XX handshake and libp2p payload as TCP (tcp_secure.c), in
 * datagrams, and every later datagram sealed.
 *
 *   initiator -> responder   NOISE1: e, padded to BBD_DGRAM_NOISE1_MIN bytes
 *   responder -> initiator   NOISE2: e, ee, s, es + payload
 *   initiator -> responder   NOISE3: s, se + payload
 *   responder -> initiator   SEALED ADMISSION: its verdict (then data)
 *
 * Loss: the initiator sends its last handshake datagram again every
 * retry interval until the next one arrives (udp.c's tick), for at most
 * handshake_timeout_ms; the responder answers a repeated NOISE1 with the
 * NOISE2 it sent and a repeated NOISE3 with its admission again, never
 * running the handshake twice. The initiator takes any datagram sealed
 * with the new keys as its admission when the admission itself was lost.
 * A NOISE1 must be padded so that a spoofed one cannot draw an answer
 * larger than itself (NOISE2 is about 300 bytes), and answering NOISE1s
 * is rate-limited (each costs two X25519 operations): from new sources by
 * a budget per second, on an established session to one per 250 ms.
 *
 * Both sides dialing at once (each sent a NOISE1): the handshake whose
 * initiator's ephemeral key is smaller goes on, the other initiator turns
 * responder; both see both keys, so both agree. A new handshake on an
 * address with an established session (a restarted peer) leaves the old
 * keys in place until it completes: a spoofed NOISE1 cannot cut a session.
 *
 * Sealed datagrams: nonce (u64, sent in clear: datagrams are lost and
 * reordered) and the inner datagram encrypted with the direction's key at
 * that nonce. A receiver checks the nonce against its replay window
 * (replay.h) before opening, marks it only once it opened, and drops what
 * fails — counted as replayed, auth_failed, or unauthenticated (no session
 * to open it: answered with a handshake, rate-limited, as a restarted peer
 * needs) — before anything of it is decoded.
 */
#include <stdlib.h>
#include <string.h>

#include "bbd/host/noise_payload.h"
#include "bbd/host/transport_internal.h"

#define HANDSHAKES_PER_S 128 /* NOISE1s answered per second from new sources */
#define REHANDSHAKE_MS 250   /* between NOISE1s answered on one established session */
#define SEALED_HEADER (BBD_DGRAM_HEADER + BBD_DGRAM_NONCE)

static const char *at_text(const udp_session *s, char *buf, size_t cap)
{
    return bbd__addr_text(s->observed, s->observed_len, buf, cap);
}

/* Forget a handshake in progress and the keys waiting on it. */
static void hs_clear(udp_session *s)
{
    if (s->noise) {
        bbd_noise_hs_wipe(s->noise);
        free(s->noise);
        s->noise = NULL;
    }
    free(s->last_hs);
    free(s->peer_hs);
    s->last_hs = s->peer_hs = NULL;
    s->hs_retx = s->pending = false;
    bbd_noise_cipher_wipe(&s->ptx);
    bbd_noise_cipher_wipe(&s->prx);
}

void bbd__udp_secure_free(udp_session *s)
{
    hs_clear(s);
    bbd_noise_cipher_wipe(&s->tx);
    bbd_noise_cipher_wipe(&s->rx);
}

void bbd__udp_noise_drop(bbd_transport *t, udp_session *s)
{
    hs_clear(s);
    bbd__udp_drop_expected(t, s);
}

static void handshake_failed(bbd_transport *t, udp_session *s, const char *why)
{
    char at[BB_MULTIADDR_TEXT_MAX + 1];
    t->stats.handshakes_failed++;
    bbd__log_remote(t, BB_LOG_WARN, "udp %s: %s", at_text(s, at, sizeof at), why);
    bbd__udp_noise_drop(t, s);
}

/* A fresh handshake state on s (any earlier one dropped, keys kept). */
static bool hs_begin(bbd_transport *t, udp_session *s, bool initiator)
{
    bb_error err = {0};
    if (s->noise) {
        bbd_noise_hs_wipe(s->noise);
        free(s->noise);
    }
    free(s->last_hs);
    s->last_hs = NULL;
    s->noise = malloc(sizeof *s->noise);
    if (!s->noise ||
        bbd_noise_hs_init(s->noise, initiator, NULL, 0, t->static_priv, NULL, &err) != BB_OK) {
        free(s->noise);
        s->noise = NULL;
        return false;
    }
    s->hs_started_ms = uv_now(t->loop);
    s->hs_retx = initiator;
    return true;
}

/* Write our next handshake message as a datagram of kind (min: padded to
 * at least that many bytes), keep it in last_hs and send it. */
static bool hs_send(bbd_transport *t, udp_session *s, bbd_dgram_kind kind, const uint8_t *payload,
                    size_t plen, size_t min)
{
    bb_error err = {0};
    size_t cap = BBD_DGRAM_HEADER + BBD_NOISE_MSG2_OVERHEAD + plen, n = 0;
    if (cap < min)
        cap = min;
    uint8_t *d = calloc(1, cap);
    if (!d)
        return false;
    bbd_dgram_header_encode(kind, d);
    if (bbd_noise_hs_write(s->noise, payload, plen, d + BBD_DGRAM_HEADER, cap - BBD_DGRAM_HEADER,
                           &n, &err) != BB_OK) {
        free(d);
        handshake_failed(t, s, err.msg);
        return false;
    }
    free(s->last_hs);
    s->last_hs = d;
    s->last_hs_len = BBD_DGRAM_HEADER + n < min ? min : BBD_DGRAM_HEADER + n;
    bbd__udp_send_bytes(s, d, s->last_hs_len);
    bbd__udp_arm_tick(t, 0);
    return true;
}

void bbd__udp_noise_start(bbd_transport *t, udp_session *s)
{
    if (hs_begin(t, s, true))
        hs_send(t, s, BBD_DGRAM_NOISE1, NULL, 0, BBD_DGRAM_NOISE1_MIN);
}

/* ---- sealing ------------------------------------------------------------------------- */

/* Seal the inner datagram plain[1..1+n) (plain[0] is room for the header)
 * with c at nonce into out. */
static size_t seal_with(const bbd_noise_cipher *c, uint64_t nonce, const uint8_t *inner, size_t n,
                        uint8_t *out)
{
    bbd_dgram_header_encode(BBD_DGRAM_SEALED, out);
    for (int i = 0; i < BBD_DGRAM_NONCE; i++)
        out[BBD_DGRAM_HEADER + i] = (uint8_t)(nonce >> (8 * (BBD_DGRAM_NONCE - 1 - i)));
    if (bbd_noise_encrypt_at(c, nonce, NULL, 0, inner, n, out + SEALED_HEADER) != BB_OK)
        return 0;
    return SEALED_HEADER + n + BBD_NOISE_TAGLEN;
}

size_t bbd__udp_seal(udp_session *s, const uint8_t *hdr, size_t hl, const uint8_t *data,
                     size_t n, uint8_t *out)
{
    if (!s->sealed || SEALED_HEADER + hl - 1 + n + BBD_NOISE_TAGLEN > BBD_DGRAM_MAX_BYTES)
        return 0;
    /* the inner datagram without its magic byte, in place, then sealed there */
    uint8_t *inner = out + SEALED_HEADER;
    memcpy(inner, hdr + 1, hl - 1);
    memcpy(inner + hl - 1, data, n);
    return seal_with(&s->tx, s->tx_nonce++, inner, hl - 1 + n, out);
}

/* Our admission verdict (refused NULL: admitted), sealed with c. */
static void send_admission(udp_session *s, const bbd_noise_cipher *c, uint64_t nonce,
                           const char *refused)
{
    uint8_t inner[1 + BBD_ADMISSION_MAX_BYTES], out[SEALED_HEADER + sizeof inner + 16];
    inner[0] = BBD_DGRAM_ADMISSION;
    size_t n = 1 + bbd_admission_encode(refused, inner + 1);
    size_t len = seal_with(c, nonce, inner, n, out);
    if (len)
        bbd__udp_send_bytes(s, out, len);
}

/* ---- the handshake --------------------------------------------------------------------------- */

/* The peer's payload (hs views into payload) proven and consistent, and
 * the checks every channel passes: not this node, the peer we dialed,
 * the admit callback. NULL when it may open, else the reason (refusal:
 * *refused set to the admit callback's reason, for the peer). */
static const char *check_payload(bbd_transport *t, udp_session *s, const uint8_t *payload,
                                 size_t plen, bbd_noise_identity *id, bbd_handshake *hs,
                                 const char **refused)
{
    static char why[BB_ERROR_MSG_MAX + 256];
    char a[BB_PEERID_TEXT_MAX], b[BB_PEERID_TEXT_MAX];
    bb_error err = {0};
    *refused = NULL;
    if (bbd_noise_payload_verify(payload, plen, bbd_noise_hs_remote_static(s->noise), id, &err) ||
        !id->data || bbd_handshake_decode(id->data, id->data_len, hs, &err)) {
        snprintf(why, sizeof why, "refused %s", err.msg[0] ? err.msg : "a payload without a handshake");
        return why;
    }
    if (!bb_peerid_equal(&hs->peer, &id->peer)) {
        snprintf(why, sizeof why, "the handshake claims PeerId %s but the key proves %s",
                 bbd__peer_text(&hs->peer, a, sizeof a), bbd__peer_text(&id->peer, b, sizeof b));
        return why;
    }
    if (bb_peerid_equal(&id->peer, &t->cfg.self))
        return "a handshake from this node itself";
    if (s->expected && s->noise->initiator && !bb_peerid_equal(&id->peer, &s->expected->id)) {
        snprintf(why, sizeof why, "sent a handshake for peer %s but %s answered (its key proves it)",
                 bbd__peer_text(&s->expected->id, a, sizeof a),
                 bbd__peer_text(&id->peer, b, sizeof b));
        return why;
    }
    if ((*refused = bbd__admit(t, &id->peer))) {
        snprintf(why, sizeof why, "refused peer %s: %s", bbd__peer_text(&id->peer, a, sizeof a),
                 *refused);
        return why;
    }
    return NULL;
}

/* Whether a new NOISE1 may be answered: each costs two DH operations.
 * From a new source, a transport-wide budget per second; on an established
 * session (a restarted peer, whose datagrams a flood from new sources must
 * not crowd out), one per session per REHANDSHAKE_MS, so spoofing a peer's
 * address buys no more than that. */
static bool handshake_budget(bbd_transport *t, const udp_session *s)
{
    uint64_t now = uv_now(t->loop);
    if (s && s->established)
        return now - s->hs_started_ms >= REHANDSHAKE_MS;
    if (now - t->udp_hs_window_ms >= 1000) {
        t->udp_hs_window_ms = now;
        t->udp_handshakes_in_window = 0;
    }
    if (t->udp_handshakes_in_window >= HANDSHAKES_PER_S)
        return false;
    t->udp_handshakes_in_window++;
    return true;
}

/* Responder: a NOISE1 (answered once; a repeat gets the same NOISE2). */
static void on_msg1(udp_sock *sock, const struct sockaddr *addr, const bbd_dgram *d)
{
    bbd_transport *t = sock->t;
    udp_session *s = bbd__udp_session_find(t, addr);
    if (s && s->noise && s->noise->step == 1 && !s->noise->initiator &&
        memcmp(s->hs_e, d->body, 32) == 0) {
        bbd__udp_send_bytes(s, s->last_hs, s->last_hs_len); /* our answer was lost */
        return;
    }
    if (s && s->noise && s->noise->initiator && s->noise->step == 1 &&
        memcmp(s->noise->e_pub, d->body, 32) < 0)
        return; /* both dialed: ours goes on, the peer answers it */
    if (!handshake_budget(t, s))
        return;
    if (!s && !(s = bbd__udp_session_new(t, sock, addr)))
        return;
    uint8_t none[1];
    size_t n;
    bb_error err = {0};
    if (!hs_begin(t, s, false))
        return;
    if (bbd_noise_hs_read(s->noise, d->body, d->body_len, none, sizeof none, &n, &err) != BB_OK) {
        handshake_failed(t, s, err.msg);
        return;
    }
    memcpy(s->hs_e, d->body, 32);
    hs_send(t, s, BBD_DGRAM_NOISE2, t->noise_payload, t->noise_payload_len, 0);
}

/* Read the peer's handshake message d and check its payload (as
 * check_payload). Returns the payload buffer (the caller frees it: id and
 * hs view it), NULL when out of memory; *why is NULL when all is well. */
static uint8_t *read_peer(bbd_transport *t, udp_session *s, const bbd_dgram *d,
                          bbd_noise_identity *id, bbd_handshake *hs, const char **refused,
                          const char **why)
{
    static bb_error err;
    uint8_t *payload = malloc(d->body_len);
    size_t plen = 0;
    *refused = NULL;
    *why = NULL;
    if (!payload)
        return NULL;
    bb_error_clear(&err);
    if (bbd_noise_hs_read(s->noise, d->body, d->body_len, payload, d->body_len, &plen, &err))
        *why = err.msg;
    else
        *why = check_payload(t, s, payload, plen, id, hs, refused);
    return payload;
}

/* Initiator: a NOISE2 — check the responder, answer with NOISE3 and wait
 * for the admission with the new keys pending. */
static void on_msg2(bbd_transport *t, udp_session *s, const bbd_dgram *d)
{
    if (!s->noise || !s->noise->initiator || s->noise->step != 1) {
        if (s->pending && s->last_hs) /* a repeat: our NOISE3 was lost */
            bbd__udp_send_bytes(s, s->last_hs, s->last_hs_len);
        return;
    }
    bbd_noise_identity id;
    bbd_handshake hs;
    const char *refused, *why;
    uint8_t *payload = read_peer(t, s, d, &id, &hs, &refused, &why);
    if (!payload)
        return;
    if (!why && !(s->peer_hs = malloc(id.data_len ? id.data_len : 1)))
        why = "out of memory";
    if (why) {
        free(payload);
        if (refused) { /* counted as refused by bbd__admit */
            char at[BB_MULTIADDR_TEXT_MAX + 1];
            bbd__log_remote(t, BB_LOG_WARN, "udp %s: %s", at_text(s, at, sizeof at), why);
            bbd__udp_noise_drop(t, s);
        } else {
            handshake_failed(t, s, why);
        }
        return;
    }
    memcpy(s->peer_hs, id.data, id.data_len);
    s->peer_hs_len = id.data_len;
    free(payload);
    if (!hs_send(t, s, BBD_DGRAM_NOISE3, t->noise_payload, t->noise_payload_len, 0))
        return;
    bbd_noise_hs_split(s->noise, &s->ptx, &s->prx, NULL);
    bbd_noise_hs_wipe(s->noise);
    free(s->noise);
    s->noise = NULL;
    memset(&s->preplay, 0, sizeof s->preplay);
    s->pending = true;
}

/* The session's keys are now tx, rx: a fresh nonce and window. */
static void install_keys(udp_session *s, const bbd_noise_cipher *tx, const bbd_noise_cipher *rx,
                         const bbd_replay *window)
{
    s->tx = *tx;
    s->rx = *rx;
    s->tx_nonce = 0;
    if (window)
        s->replay = *window;
    else
        memset(&s->replay, 0, sizeof s->replay);
    s->sealed = true;
}

/* Responder: a NOISE3 — check the initiator, tell it the verdict, and on
 * admission make the new keys the session's. */
static void on_msg3(bbd_transport *t, udp_session *s, const bbd_dgram *d)
{
    const uint8_t *tag = d->body + d->body_len - BBD_NOISE_TAGLEN;
    if (!s->noise || s->noise->initiator || s->noise->step != 2) {
        if (s->sealed && d->body_len >= BBD_NOISE_TAGLEN && memcmp(s->last_msg3, tag, 16) == 0)
            send_admission(s, &s->tx, s->tx_nonce++, NULL); /* our admission was lost */
        return;
    }
    bbd_noise_identity id;
    bbd_handshake hs;
    const char *refused, *why;
    uint8_t *payload = read_peer(t, s, d, &id, &hs, &refused, &why);
    if (!payload)
        return;
    bbd_noise_cipher tx, rx;
    if (why && !refused) {
        free(payload);
        handshake_failed(t, s, why);
        return;
    }
    bbd_noise_hs_split(s->noise, &tx, &rx, NULL);
    bbd_noise_hs_wipe(s->noise);
    free(s->noise);
    s->noise = NULL;
    if (refused) { /* told why, then forgotten; an older session stays */
        char at[BB_MULTIADDR_TEXT_MAX + 1];
        send_admission(s, &tx, 0, refused);
        bbd__log_remote(t, BB_LOG_WARN, "udp %s: %s", at_text(s, at, sizeof at), why);
    } else {
        bbd_peer *p = bbd__peer_get(t, &hs.peer);
        if (p) {
            memcpy(s->last_msg3, tag, 16);
            install_keys(s, &tx, &rx, NULL);
            send_admission(s, &s->tx, s->tx_nonce++, NULL);
            bbd__udp_establish(t, s, p, &hs);
        }
    }
    bbd_noise_cipher_wipe(&tx);
    bbd_noise_cipher_wipe(&rx);
    free(payload);
    free(s->last_hs); /* our NOISE2: answered */
    s->last_hs = NULL;
    if (!s->established)
        bbd__udp_noise_drop(t, s);
}

void bbd__udp_on_noise(udp_sock *sock, const struct sockaddr *addr, const bbd_dgram *d)
{
    if (d->kind == BBD_DGRAM_NOISE1) {
        on_msg1(sock, addr, d);
        return;
    }
    udp_session *s = bbd__udp_session_find(sock->t, addr);
    if (!s) {
        sock->t->stats.unauthenticated++;
        return;
    }
    if (d->kind == BBD_DGRAM_NOISE2)
        on_msg2(sock->t, s, d);
    else
        on_msg3(sock->t, s, d);
}

/* ---- sealed datagrams ----------------------------------------------------------------------- */

/* The initiator's pending keys are admitted: they become the session's. */
static void admitted(bbd_transport *t, udp_session *s)
{
    bbd_handshake hs;
    bb_error err = {0};
    if (bbd_handshake_decode(s->peer_hs, s->peer_hs_len, &hs, &err) != BB_OK) {
        handshake_failed(t, s, err.msg); /* decoded once already: cannot happen */
        return;
    }
    install_keys(s, &s->ptx, &s->prx, &s->preplay);
    bbd_peer *p = bbd__peer_get(t, &hs.peer);
    if (p)
        bbd__udp_establish(t, s, p, &hs);
    uint8_t *keep = s->peer_hs;
    s->peer_hs = NULL; /* hs viewed it until now */
    bbd__udp_noise_drop(t, s);
    free(keep);
}

/* The inner datagram of a sealed one; pending: opened with the keys that
 * wait for the admission. */
static void on_inner(bbd_transport *t, udp_session *s, const uint8_t *plain, size_t n,
                     bool pending, size_t wire)
{
    bbd_dgram in;
    bb_error err = {0};
    char reason[BBD_ADMISSION_REASON_MAX + 1], why[BB_ERROR_MSG_MAX + 128];
    char pt[BB_PEERID_TEXT_MAX];
    if (bbd_dgram_decode(plain, n, t->cfg.max_frame_bytes, BBD_ADMISSION_MAX_BYTES, &in, &err)) {
        t->stats.frames_refused++;
        return;
    }
    if (in.kind == BBD_DGRAM_ADMISSION) {
        if (!pending)
            return; /* a repeated admission on an open session */
        if (bbd_admission_decode(in.body, in.body_len, reason, &err) != BB_OK || reason[0]) {
            snprintf(why, sizeof why, "peer %s refused this node: %s",
                     s->expected ? bbd__peer_text(&s->expected->id, pt, sizeof pt) : "?",
                     reason[0] ? reason : err.msg);
            handshake_failed(t, s, why);
            return;
        }
        admitted(t, s);
        return;
    }
    if (in.kind != BBD_DGRAM_ENVELOPE && in.kind != BBD_DGRAM_FRAGMENT) {
        t->stats.frames_refused++;
        return;
    }
    if (pending) /* the admission was lost; data with the new keys is as good */
        admitted(t, s);
    if (s->established && s->peer)
        bbd__udp_on_data(t, s, &in, wire);
}

void bbd__udp_on_sealed(udp_sock *sock, const struct sockaddr *addr, const bbd_dgram *d,
                        size_t wire)
{
    bbd_transport *t = sock->t;
    udp_session *s = bbd__udp_session_find(t, addr);
    char at[BB_MULTIADDR_TEXT_MAX + 1];
    if (!s || (!s->sealed && !s->pending)) {
        t->stats.unauthenticated++;
        if (!s)
            bbd__udp_unknown_source(sock, addr); /* a peer that restarted: handshake again */
        return;
    }
    uint8_t *plain = t->udp_scratch; /* magic, then the inner datagram */
    plain[0] = BBD_DGRAM_MAGIC;
    size_t n = d->body_len - BBD_NOISE_TAGLEN;
    bool seen = s->sealed && !bbd_replay_check(&s->replay, d->nonce);
    if (s->sealed && !seen &&
        bbd_noise_decrypt_at(&s->rx, d->nonce, NULL, 0, d->body, d->body_len, plain + 1) == BB_OK) {
        bbd_replay_mark(&s->replay, d->nonce);
        on_inner(t, s, plain, n + 1, false, wire);
        return;
    }
    if (s->pending && bbd_replay_check(&s->preplay, d->nonce) &&
        bbd_noise_decrypt_at(&s->prx, d->nonce, NULL, 0, d->body, d->body_len, plain + 1) ==
            BB_OK) {
        bbd_replay_mark(&s->preplay, d->nonce);
        on_inner(t, s, plain, n + 1, true, wire);
        return;
    }
    if (seen) {
        t->stats.replayed++;
        bbd__log_remote(t, BB_LOG_WARN, "udp %s: a replayed datagram (nonce %llu) dropped",
                        at_text(s, at, sizeof at), (unsigned long long)d->nonce);
    } else {
        t->stats.auth_failed++;
        bbd__log_remote(t, BB_LOG_WARN, "udp %s: a datagram failed authentication; dropped",
                        at_text(s, at, sizeof at));
    }
}

/* ---- security off on one side ----------------------------------------------------------------- */

void bbd__udp_security_mismatch(udp_sock *sock, const struct sockaddr *addr, bool peer_secure)
{
    bbd_transport *t = sock->t;
    uint8_t ma[BBD_ADDR_BYTES];
    size_t mal = 0;
    char at[BB_MULTIADDR_TEXT_MAX + 1];
    socklen_t salen = addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                   : sizeof(struct sockaddr_in);
    if (bb_multiaddr_from_sockaddr(addr, salen, BB_MA_UDP, ma, sizeof ma, &mal, NULL) != BB_OK)
        mal = 0;
    t->stats.handshakes_failed++;
    if (peer_secure) {
        bbd__log_remote(t, BB_LOG_WARN,
                        "udp %s: the peer requires encrypted channels (security \"noise\") and "
                        "this node runs with security \"off\"",
                        bbd__addr_text(ma, mal, at, sizeof at));
        return;
    }
    bbd__log_remote(t, BB_LOG_WARN,
                    "udp %s: the peer sent a plaintext handshake: it runs with security \"off\" "
                    "and this node requires encrypted channels (security \"noise\")",
                    bbd__addr_text(ma, mal, at, sizeof at));
    /* answer with a handshake of ours, so the peer learns it too */
    bbd__udp_unknown_source(sock, addr);
}
