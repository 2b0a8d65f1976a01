/*
 * fuzz_noise_handshake.c — a secure TCP connection as a responding node
 * reads it (tcp_secure.c, tcp_read.c): u16-length records, the Noise XX
 * handshake messages (bbd_noise_hs_read), the libp2p payload of message 3
 * (bbd_noise_payload_verify: identity key, signature over the static key,
 * early data) and the Handshake inside it (bbd_handshake_decode, whose
 * PeerId must be the key's), then transport records opened with the
 * receiving cipher and their plaintext cut into frames with the reader's
 * limits. The same pure functions the transport calls, nothing else.
 *
 * An attacker without keys controls only the bytes on the wire, and AEAD
 * makes every record after message 1 unforgeable, so a raw-bytes target
 * would never get past message 3. The first input byte picks the mode:
 *
 *   even: the rest is the wire, read as records by the responder
 *         (message 1, then message 3 and transport records, which fail
 *         authentication: the length and message-1 paths);
 *   odd:  an initiator in this process with fixed keys runs the handshake
 *         honestly, but message 3 carries the payload the input gives
 *         (u16 length, bytes) — so the responder decrypts and checks a
 *         payload the fuzzer controls, as a node with a genuine key but a
 *         hostile payload would send it — and then seals the rest of the
 *         input as transport records of (first byte >> 1) + 1 bytes each,
 *         which the responder opens and parses as frames.
 *
 * Seeds (FUZZ_WRITE_SEEDS=dir): the genuine payload with a Handshake and
 * two envelope frames after it, and a message 1 on the raw wire.
 */
#include <string.h>

#include "bbd/host/frame.h"
#include "bbd/host/handshake.h"
#include "bbd/host/noise.h"
#include "bbd/host/noise_payload.h"
#include "fuzz/support/fuzz_support.h"

#define MAX_ENVELOPE ((size_t)1 << 20)
#define STREAM_CAP (256 * 1024) /* plaintext kept across records */

/* The initiator's identity (fixed, so seeds stay valid) and both static
 * and ephemeral Noise keys. */
static bb_keypair g_id;
static uint8_t g_init_s[32], g_init_e[32], g_resp_s[32], g_resp_e[32];
static uint8_t g_init_s_pub[32];

static void keys_once(void)
{
    static bool done;
    if (done)
        return;
    uint8_t seed[32] = {7};
    bb_error err = {0};
    if (bb_keypair_from_seed(seed, &g_id, &err))
        fz_die("bb_keypair_from_seed", err.msg);
    for (int i = 0; i < 32; i++) {
        g_init_s[i] = (uint8_t)(i + 1);
        g_init_e[i] = (uint8_t)(i + 33);
        g_resp_s[i] = (uint8_t)(i + 65);
        g_resp_e[i] = (uint8_t)(i + 97);
    }
    if (bbd_noise_keypair(g_init_s, g_init_s_pub, false, &err))
        fz_die("bbd_noise_keypair", err.msg);
    done = true;
}

/* The payload an honest initiator sends in message 3: its identity key,
 * the signature over its static key and its Handshake. */
static size_t genuine_payload(uint8_t *out, size_t cap)
{
    bbd_handshake h = {.version = BBD_HANDSHAKE_VERSION, .n_addrs = 0, .n_targets = 1};
    bb_peerid_from_pubkey(g_id.pk, &h.peer);
    h.targets[0] = (bbd_handshake_target){"Client", 6};
    uint8_t hs[512], sig[BB_ED25519_SIG_LEN];
    size_t hl = 0, n = 0;
    bb_error err = {0};
    if (bbd_handshake_encode(&h, hs, sizeof hs, &hl, &err) ||
        bbd_noise_sign_static(&g_id, g_init_s_pub, sig, &err) ||
        bbd_noise_payload_encode(g_id.pk, sig, hs, hl, out, cap, &n, &err))
        fz_die("genuine payload", err.msg);
    return n;
}

/* Plaintext after the handshake, as tcp_read.c parses it: envelope frames
 * only. Returns false when the reader would close the connection. */
typedef struct stream {
    uint8_t buf[STREAM_CAP];
    size_t len;
} stream;

static bool stream_feed(stream *s, const uint8_t *p, size_t n)
{
    if (n > sizeof s->buf - s->len)
        return false; /* the reader moves a large frame to its own buffer; not modelled */
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    bbd_frame_limits lim = {0, MAX_ENVELOPE, 0};
    size_t off = 0;
    for (;;) {
        bbd_frame_header h;
        const uint8_t *payload;
        size_t used;
        bb_error err = {0};
        if (bbd_frame_header_decode(s->buf + off, s->len - off, &lim, &h, &err) != BB_OK)
            return false;
        if (!h.complete || s->len - off < h.header_len + h.payload_len)
            break;
        if (bbd_frame_decode(s->buf + off, s->len - off, &lim, &h, &payload, &used, &err) !=
            BB_OK)
            __builtin_trap(); /* the header said complete: the two must agree */
        off += used;
    }
    memmove(s->buf, s->buf + off, s->len - off);
    s->len -= off;
    return true;
}

/* What the responder checks in message 3's payload (tcp_secure.c). */
static bool check_payload(const bbd_noise_hs *resp, const uint8_t *p, size_t n)
{
    bbd_noise_identity id;
    bbd_handshake hs;
    bb_error err = {0};
    if (bbd_noise_payload_verify(p, n, bbd_noise_hs_remote_static(resp), &id, &err) != BB_OK)
        return false;
    if (!id.data || bbd_handshake_decode(id.data, id.data_len, &hs, &err) != BB_OK)
        return false;
    return bb_peerid_equal(&hs.peer, &id.peer);
}

/* Even mode: the input is the wire. */
static void raw_wire(const uint8_t *data, size_t size)
{
    bbd_noise_hs resp;
    bb_error err = {0};
    if (bbd_noise_hs_init(&resp, false, NULL, 0, g_resp_s, g_resp_e, &err))
        fz_die("bbd_noise_hs_init", err.msg);
    static uint8_t payload[BBD_NOISE_MAX_MSG], msg2[BBD_NOISE_MAX_MSG];
    size_t off = 0;
    while (size - off >= 2) {
        size_t len = (size_t)data[off] << 8 | data[off + 1], plen = 0, n2;
        off += 2;
        if (len > size - off ||
            bbd_noise_hs_read(&resp, data + off, len, payload, sizeof payload, &plen, &err))
            break;
        off += len;
        if (bbd_noise_hs_done(&resp)) {
            check_payload(&resp, payload, plen);
            break;
        }
        if (bbd_noise_hs_write(&resp, NULL, 0, msg2, sizeof msg2, &n2, &err))
            break;
    }
    bbd_noise_hs_wipe(&resp);
}

/* Odd mode: an honest handshake carrying the input's payload, then the
 * rest sealed in records of step bytes. */
static void genuine_peer(size_t step, const uint8_t *data, size_t size)
{
    if (size < 2 || (size_t)(data[0] << 8 | data[1]) > size - 2)
        return;
    size_t plen = (size_t)data[0] << 8 | data[1];
    const uint8_t *p3 = data + 2, *rest = data + 2 + plen;
    size_t rest_len = size - 2 - plen;
    bbd_noise_hs init, resp;
    bb_error err = {0};
    static uint8_t m[BBD_NOISE_MAX_MSG], out[BBD_NOISE_MAX_MSG];
    size_t n, got;
    bbd_noise_cipher itx, irx, rtx, rrx;
    if (bbd_noise_hs_init(&init, true, NULL, 0, g_init_s, g_init_e, &err) ||
        bbd_noise_hs_init(&resp, false, NULL, 0, g_resp_s, g_resp_e, &err))
        fz_die("bbd_noise_hs_init", err.msg);
    bool ok = !bbd_noise_hs_write(&init, NULL, 0, m, sizeof m, &n, &err) &&
              !bbd_noise_hs_read(&resp, m, n, out, sizeof out, &got, &err) &&
              !bbd_noise_hs_write(&resp, NULL, 0, m, sizeof m, &n, &err) &&
              !bbd_noise_hs_read(&init, m, n, out, sizeof out, &got, &err) &&
              plen <= BBD_NOISE_MAX_MSG - BBD_NOISE_MSG3_OVERHEAD &&
              !bbd_noise_hs_write(&init, p3, plen, m, sizeof m, &n, &err) &&
              !bbd_noise_hs_read(&resp, m, n, out, sizeof out, &got, &err) &&
              check_payload(&resp, out, got) &&
              !bbd_noise_hs_split(&init, &itx, &irx, &err) &&
              !bbd_noise_hs_split(&resp, &rtx, &rrx, &err);
    static stream s;
    s.len = 0;
    for (size_t off = 0; ok && off < rest_len; off += step) {
        size_t k = rest_len - off < step ? rest_len - off : step;
        if (bbd_noise_encrypt(&itx, NULL, 0, rest + off, k, m) ||
            bbd_noise_decrypt(&rrx, NULL, 0, m, k + BBD_NOISE_TAGLEN, out))
            __builtin_trap(); /* a record sealed by the peer's cipher must open */
        ok = stream_feed(&s, out, k);
    }
    bbd_noise_hs_wipe(&init);
    bbd_noise_hs_wipe(&resp);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    keys_once();
    if (!fz_seed_dir())
        return 0;
    static uint8_t s[4096];
    size_t n = 0;
    s[n++] = 1; /* genuine peer, one byte per record */
    size_t pl = genuine_payload(s + n + 2, sizeof s - n - 2);
    s[n] = (uint8_t)(pl >> 8);
    s[n + 1] = (uint8_t)pl;
    n += 2 + pl;
    static const uint8_t envelope[] = {0x08, 0x01, 0x10, 0x02};
    for (int k = 0; k < 2; k++) {
        n += bbd_frame_header_encode(BBD_FRAME_ENVELOPE, sizeof envelope, s + n);
        memcpy(s + n, envelope, sizeof envelope);
        n += sizeof envelope;
    }
    fz_seed_write("genuine-payload-envelopes", s, n);
    s[0] = 255; /* the same in records of 128 bytes */
    fz_seed_write("genuine-payload-envelopes-128", s, n);
    uint8_t raw[1 + 2 + 32] = {0, 0x00, 0x20}; /* even: a message 1 on the wire */
    memcpy(raw + 3, g_init_s_pub, 32);
    fz_seed_write("raw-message1", raw, sizeof raw);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    keys_once();
    if (data[0] & 1)
        genuine_peer((size_t)(data[0] >> 1) + 1, data + 1, size - 1);
    else
        raw_wire(data + 1, size - 1);
    return 0;
}
