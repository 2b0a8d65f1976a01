/*
 * tcp_secure.c — the secure channel of a TCP connection (transport.h,
 * "Security"): the libp2p Noise handshake and sealing frames into Noise
 * transport messages. Records are read and opened in tcp_read.c.
 *
 * On the wire every Noise message is framed as libp2p frames it: a u16
 * big-endian length, then the message (at most 65535 bytes).
 *
 *   initiator -> responder   msg1: e
 *   responder -> initiator   msg2: e, ee, s, es + payload
 *   initiator -> responder   msg3: s, se + payload
 *   responder -> initiator   its first transport message: an Admission frame
 *
 * A payload (noise_payload.h) carries the sender's identity key, its
 * signature of the sender's static Noise key, and as early data bbd's
 * Handshake (PeerId, listen addresses, targets, version), whose PeerId must
 * be the identity key's. Each side checks the other when its payload
 * arrives (bbd__tcp_check_peer: not this node, the PeerId it dialed, the
 * admit callback): the initiator at msg2 — a wrong or refused responder
 * gets no msg3 — and the responder at msg3, answering with its verdict
 * (the Admission frame) either way. The responder's channel opens when it
 * admits, the initiator's when the admission arrives: so a refused node
 * never counts the other as connected, and hears why it was refused.
 *
 * After the handshake the frames of frame.h travel as one byte stream cut
 * into transport messages of at most BBD_SEAL_RECORD_PLAINTEXT bytes (32
 * KiB: libcrypto seals 1 MiB as 32 KiB records at 4,369 MiB/s and as the
 * Noise maximum, 65519-byte ones, at 3,461 — docs/DECISIONS.md; what a peer
 * sends is read up to the maximum), each
 * sealed with the direction's cipher (its counter is the nonce), so a
 * record replayed, reordered, cut or altered fails to open and closes the
 * connection (tcp_read.c). A small frame is one record; a large one is
 * sealed straight from its pieces (the tensor's own memory) into the
 * buffers that go to the socket, one pass over the bytes, ~1 MiB at a time
 * as the socket takes them (tcp.c, bbd__tcp_seal_some).
 *
 * Security off on one side: a plaintext node writes its Handshake frame
 * first thing, whose first bytes are a frame header (a non-zero varint,
 * then 0x0a); Noise's first message starts 0x00 0x20. A secure node that
 * reads a plaintext handshake says so and writes 0x00 0x00 (no frame and
 * no Noise message starts so) before closing; a plaintext node that reads
 * a first byte 0x00 knows its peer requires security (tcp_read.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bb/uvarint.h"
#include "bbd/host/noise_payload.h"
#include "bbd/host/transport_internal.h"

/* ---- the transport's key and payload --------------------------------------------------- */

int bbd__secure_init(bbd_transport *t, const bb_keypair *identity, bb_error *err)
{
    if (!t->secure)
        return BB_OK;
    if (!identity)
        return bb_error_set(err, BB_EINVAL,
                            "transport: security is on but no identity key was given");
    int rc = bbd_noise_keypair(t->static_priv, t->static_pub, true, err);
    if (rc == BB_OK)
        rc = bbd_noise_sign_static(identity, t->static_pub, t->id_sig, err);
    if (rc)
        return bb_error_prefix(err, "transport: static Noise key");
    memcpy(t->id_pk, identity->pk, sizeof t->id_pk);
    return BB_OK;
}

int bbd__secure_payload(bbd_transport *t, bb_error *err)
{
    if (!t->secure)
        return BB_OK;
    size_t cap = t->hs_len + BBD_NOISE_PAYLOAD_OVERHEAD, n;
    uint8_t *p = malloc(cap);
    if (!p)
        return bb_error_set(err, BB_ENOMEM, "transport: out of memory");
    int rc = bbd_noise_payload_encode(t->id_pk, t->id_sig, t->hs, t->hs_len, p, cap, &n, err);
    if (rc) {
        free(p);
        return rc;
    }
    free(t->noise_payload);
    t->noise_payload = p;
    t->noise_payload_len = n;
    return BB_OK;
}

void bbd__secure_free(bbd_transport *t)
{
    sodium_memzero(t->static_priv, sizeof t->static_priv);
    free(t->noise_payload);
    t->noise_payload = NULL;
}

void bbd__tcp_secure_free(tcp_conn *c)
{
    if (c->noise) {
        bbd_noise_hs_wipe(c->noise);
        free(c->noise);
        c->noise = NULL;
    }
    bbd_noise_cipher_wipe(&c->tx);
    bbd_noise_cipher_wipe(&c->rx);
    free(c->peer_hs);
    c->peer_hs = NULL;
    /* c->rec may still be read by the parse that closed c: freed with c */
}

/* ---- the handshake -------------------------------------------------------------------- */

static void handshake_failed(tcp_conn *c, const char *why)
{
    c->t->stats.handshakes_failed++;
    bbd__tcp_close(c, why);
}

/* Write our next handshake message around payload. */
static bool write_noise(tcp_conn *c, const uint8_t *payload, size_t plen)
{
    bb_error err = {0};
    size_t cap = BBD_RECORD_HEADER + BBD_NOISE_MSG2_OVERHEAD + plen, n = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        bbd__tcp_close(c, "out of memory");
        return false;
    }
    if (bbd_noise_hs_write(c->noise, payload, plen, buf + BBD_RECORD_HEADER,
                           cap - BBD_RECORD_HEADER, &n, &err) != BB_OK) {
        free(buf);
        handshake_failed(c, err.msg);
        return false;
    }
    buf[0] = (uint8_t)(n >> 8);
    buf[1] = (uint8_t)n;
    bbd__tcp_write_raw(c, buf, BBD_RECORD_HEADER + n);
    return c->state != CONN_CLOSING;
}

void bbd__tcp_secure_start(tcp_conn *c)
{
    bb_error err = {0};
    c->noise = malloc(sizeof *c->noise);
    if (!c->noise) {
        bbd__tcp_close(c, "out of memory");
        return;
    }
    if (bbd_noise_hs_init(c->noise, c->outbound, NULL, 0, c->t->static_priv, NULL, &err)) {
        free(c->noise);
        c->noise = NULL;
        bbd__tcp_close(c, err.msg);
        return;
    }
    if (c->outbound)
        write_noise(c, NULL, 0);
}

/* The peer's payload: its identity proven, its Handshake decoded into hs
 * (views into payload), the two agreeing. False when it fails (closed). */
static bool peer_identity(tcp_conn *c, const uint8_t *payload, size_t plen,
                          bbd_noise_identity *id, bbd_handshake *hs)
{
    bb_error err = {0};
    char why[BB_ERROR_MSG_MAX + 256], a[BB_PEERID_TEXT_MAX], b[BB_PEERID_TEXT_MAX];
    if (bbd_noise_payload_verify(payload, plen, bbd_noise_hs_remote_static(c->noise), id,
                                 &err) != BB_OK) {
        handshake_failed(c, err.msg);
        return false;
    }
    if (!id->data || bbd_handshake_decode(id->data, id->data_len, hs, &err) != BB_OK) {
        snprintf(why, sizeof why, "refused %s", id->data ? err.msg : "a payload without a handshake");
        handshake_failed(c, why);
        return false;
    }
    if (!bb_peerid_equal(&hs->peer, &id->peer)) {
        snprintf(why, sizeof why, "the handshake claims PeerId %s but the key proves %s",
                 bbd__peer_text(&hs->peer, a, sizeof a), bbd__peer_text(&id->peer, b, sizeof b));
        handshake_failed(c, why);
        return false;
    }
    return true;
}

/* Split the finished handshake into the connection's ciphers. */
static bool split(tcp_conn *c)
{
    bb_error err = {0};
    int rc = bbd_noise_hs_split(c->noise, &c->tx, &c->rx, &err);
    bbd_noise_hs_wipe(c->noise);
    free(c->noise);
    c->noise = NULL;
    if (rc) {
        handshake_failed(c, err.msg);
        return false;
    }
    c->sealed = true;
    return true;
}

/* Our admission verdict (refused NULL: admitted), the first sealed frame. */
static void send_admission(tcp_conn *c, const char *refused)
{
    uint8_t buf[BBD_ADMISSION_MAX_BYTES];
    size_t n = bbd_admission_encode(refused, buf);
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy) {
        bbd__tcp_close(c, "out of memory");
        return;
    }
    memcpy(copy, buf, n);
    bbd_payload pl = {.bytes = copy, .len = n};
    bbd__tcp_write_frame(c, BBD_FRAME_ADMISSION, NULL, &pl);
}

/* Initiator, message 2 read: check the responder, answer with message 3. */
static void on_responder(tcp_conn *c, const uint8_t *payload, size_t plen)
{
    bbd_noise_identity id;
    bbd_handshake hs;
    char why[BB_ERROR_MSG_MAX + 256];
    if (!peer_identity(c, payload, plen, &id, &hs))
        return;
    const char *refused = bbd__tcp_check_peer(c, &id.peer, why, sizeof why, NULL);
    if (refused) {
        bbd__tcp_close(c, refused);
        return;
    }
    if (!(c->peer_hs = malloc(id.data_len))) {
        bbd__tcp_close(c, "out of memory");
        return;
    }
    memcpy(c->peer_hs, id.data, id.data_len);
    c->peer_hs_len = id.data_len;
    if (write_noise(c, c->t->noise_payload, c->t->noise_payload_len) && split(c))
        c->awaiting_admission = true;
}

/* Responder, message 3 read: check the initiator, tell it the verdict. */
static void on_initiator(tcp_conn *c, const uint8_t *payload, size_t plen)
{
    bbd_noise_identity id;
    bbd_handshake hs;
    char why[BB_ERROR_MSG_MAX + 256];
    if (!peer_identity(c, payload, plen, &id, &hs))
        return;
    const char *reason = NULL;
    const char *refused = bbd__tcp_check_peer(c, &id.peer, why, sizeof why, &reason);
    if (!split(c))
        return;
    send_admission(c, refused ? reason : NULL);
    if (c->state == CONN_CLOSING)
        return;
    if (refused)
        bbd__tcp_close_when_written(c, refused);
    else
        bbd__tcp_open(c, &hs);
}

void bbd__tcp_noise_message(tcp_conn *c, const uint8_t *msg, size_t len)
{
    bb_error err = {0};
    uint8_t *payload = malloc(len);
    size_t plen = 0;
    if (!payload) {
        bbd__tcp_close(c, "out of memory");
        return;
    }
    if (bbd_noise_hs_read(c->noise, msg, len, payload, len, &plen, &err) != BB_OK) {
        free(payload);
        handshake_failed(c, err.msg);
        return;
    }
    switch (c->noise->step) {
    case 1: /* responder: msg1 read (its payload, if any, is ignored) */
        write_noise(c, c->t->noise_payload, c->t->noise_payload_len);
        break;
    case 2:
        on_responder(c, payload, plen);
        break;
    default:
        on_initiator(c, payload, plen);
        break;
    }
    free(payload);
}

void bbd__tcp_on_admission(tcp_conn *c, const uint8_t *payload, size_t len)
{
    bb_error err = {0};
    char reason[BBD_ADMISSION_REASON_MAX + 1], why[BBD_ADMISSION_REASON_MAX + 128];
    char pt[BB_PEERID_TEXT_MAX];
    if (bbd_admission_decode(payload, len, reason, &err) != BB_OK) {
        handshake_failed(c, err.msg);
        return;
    }
    if (reason[0]) {
        snprintf(why, sizeof why, "peer %s refused this node: %s",
                 bbd__peer_text(&c->peer->id, pt, sizeof pt), reason);
        handshake_failed(c, why);
        return;
    }
    bbd_handshake hs;
    c->awaiting_admission = false;
    if (bbd_handshake_decode(c->peer_hs, c->peer_hs_len, &hs, &err) != BB_OK) {
        handshake_failed(c, err.msg); /* decoded once already: cannot happen */
        return;
    }
    bbd__tcp_open(c, &hs);
    free(c->peer_hs);
    c->peer_hs = NULL;
}

/* A plaintext node's first frame: a varint frame length, then 0x0a and a
 * handshake length that agrees with it (a Noise length prefix cannot: its
 * high byte is small and the bytes after it are random). */
bool bbd__looks_plaintext(const uint8_t *p, size_t n)
{
    bbd_frame_limits lim = {.max_handshake = BBD_HANDSHAKE_MAX_BYTES};
    bbd_frame_header h;
    return n && p[0] != 0 && bbd_frame_header_decode(p, n, &lim, &h, NULL) == BB_OK &&
           h.complete && h.kind == BBD_FRAME_HANDSHAKE && h.payload_len >= 40;
}

void bbd__tcp_not_noise(tcp_conn *c, const uint8_t *data, size_t n)
{
    if (!bbd__looks_plaintext(data, n)) {
        handshake_failed(c, "not a Noise handshake message");
        return;
    }
    c->t->stats.handshakes_failed++;
    uint8_t *marker = calloc(1, BBD_RECORD_HEADER);
    if (marker)
        bbd__tcp_write_raw(c, marker, BBD_RECORD_HEADER);
    if (c->state != CONN_CLOSING)
        bbd__tcp_close_when_written(c, "the peer sent a plaintext handshake: it runs with "
                                       "security \"off\" and this node requires encrypted "
                                       "channels (security \"noise\")");
}

/* ---- sealing ------------------------------------------------------------------------------ */

size_t bbd__sealed_size(size_t plain)
{
    size_t records =
        plain ? (plain + BBD_SEAL_RECORD_PLAINTEXT - 1) / BBD_SEAL_RECORD_PLAINTEXT : 1;
    return plain + records * BBD_RECORD_OVERHEAD;
}

/* The frame as pieces: k = 0 the header, then the payload's bytes or iov. */
static void piece(const bbd_seal_cursor *p, size_t k, const uint8_t **d, size_t *n)
{
    if (k == 0) {
        *d = p->hdr;
        *n = p->hl;
    } else if (p->pl->bytes) {
        *d = p->pl->bytes;
        *n = k == 1 ? p->pl->len : 0;
    } else {
        *d = k - 1 < p->pl->n_iov ? p->pl->iov[k - 1].data : NULL;
        *n = k - 1 < p->pl->n_iov ? p->pl->iov[k - 1].len : 0;
    }
}

/* The next take bytes of the stream: a pointer into one piece when they
 * lie in it, else copied together into tmp. */
static const uint8_t *next_bytes(bbd_seal_cursor *p, size_t take, uint8_t *tmp)
{
    const uint8_t *d;
    size_t n;
    piece(p, p->k, &d, &n);
    while (p->off == n) { /* skip finished and empty pieces */
        p->k++;
        p->off = 0;
        piece(p, p->k, &d, &n);
    }
    if (n - p->off >= take) {
        p->off += take;
        return d + p->off - take;
    }
    for (size_t got = 0; got < take;) {
        piece(p, p->k, &d, &n);
        size_t c = n - p->off < take - got ? n - p->off : take - got;
        memcpy(tmp + got, d + p->off, c);
        got += c;
        p->off += c;
        if (p->off == n) {
            p->k++;
            p->off = 0;
        }
    }
    return tmp;
}

void bbd__seal_cursor_init(bbd_seal_cursor *cur, const uint8_t *hdr, size_t hl,
                           const bbd_payload *pl)
{
    *cur = (bbd_seal_cursor){.hdr = hdr, .hl = hl, .pl = pl, .left = hl + pl->len};
}

size_t bbd__tcp_seal_some(tcp_conn *c, bbd_seal_cursor *cur, size_t max_plain, uint8_t *out)
{
    size_t at = 0;
    while (cur->left && max_plain) {
        size_t take = cur->left < BBD_SEAL_RECORD_PLAINTEXT ? cur->left : BBD_SEAL_RECORD_PLAINTEXT;
        take = take < max_plain ? take : max_plain;
        uint8_t *rec = out + at;
        size_t len = take + BBD_NOISE_TAGLEN;
        rec[0] = (uint8_t)(len >> 8);
        rec[1] = (uint8_t)len;
        const uint8_t *pt = next_bytes(cur, take, rec + BBD_RECORD_HEADER);
        if (bbd_noise_encrypt(&c->tx, NULL, 0, pt, take, rec + BBD_RECORD_HEADER) != BB_OK)
            return 0;
        at += BBD_RECORD_HEADER + len;
        cur->left -= take;
        max_plain -= take;
    }
    return at;
}

size_t bbd__tcp_seal(tcp_conn *c, const uint8_t *hdr, size_t hl, const bbd_payload *pl,
                     uint8_t *out)
{
    bbd_seal_cursor cur;
    bbd__seal_cursor_init(&cur, hdr, hl, pl);
    return bbd__tcp_seal_some(c, &cur, SIZE_MAX, out);
}
