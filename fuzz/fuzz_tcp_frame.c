/*
 * fuzz_tcp_frame.c — a TCP byte stream as tcp_read.c reads it: frame
 * headers decoded from whatever prefix has arrived (bbd_frame_header_decode,
 * the call the reader makes before it allocates), whole frames cut
 * (bbd_frame_decode) with the reader's limits — a handshake first and only
 * once, envelopes after it — and each handshake body decoded
 * (bbd_handshake_decode). The first input byte picks how the stream is cut
 * into reads. This is the plaintext framing (security "off", and the
 * plaintext inside sealed records); the default secure connection's
 * records and Noise handshake are fuzz_noise_handshake's, sealed UDP
 * datagrams fuzz_udp_sealed's. It calls the reader's own parsing
 * functions and nothing else.
 * Seeds (FUZZ_WRITE_SEEDS=dir): a handshake frame written by
 * bbd_handshake_encode, alone and followed by envelope frames.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bb/multiaddr.h"
#include "bbd/host/frame.h"
#include "bbd/host/handshake.h"
#include "fuzz/support/fuzz_support.h"

#define MAX_ENVELOPE ((size_t)1 << 20)

/* A handshake frame from a node at /ip4/127.0.0.1/tcp/7001 running
 * Client into out; returns its size. */
static size_t handshake_frame(uint8_t *out, size_t cap)
{
    bbd_handshake h = {.version = BBD_HANDSHAKE_VERSION, .n_addrs = 1, .n_targets = 1};
    uint8_t seed[32] = {3}, addr[64];
    size_t alen = 0, n = 0;
    bb_peerid_from_seed(seed, NULL, &h.peer, NULL);
    bb_multiaddr_parse("/ip4/127.0.0.1/tcp/7001", addr, sizeof addr, &alen, NULL);
    h.addrs[0] = (bb_multiaddr_ref){addr, alen};
    h.targets[0] = (bbd_handshake_target){"Client", 6};
    uint8_t body[1024];
    bb_error err = {0};
    if (bbd_handshake_encode(&h, body, sizeof body, &n, &err))
        fz_die("bbd_handshake_encode", err.msg);
    size_t hl = bbd_frame_header_encode(BBD_FRAME_HANDSHAKE, n, out);
    if (hl + n > cap)
        fz_die("handshake frame", "too long");
    memcpy(out + hl, body, n);
    return hl + n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!fz_seed_dir())
        return 0;
    uint8_t s[4096];
    s[0] = 255; /* the whole stream in one read */
    size_t n = 1 + handshake_frame(s + 1, sizeof s - 1);
    fz_seed_write("handshake", s, n);
    static const uint8_t envelope[] = {0x08, 0x01, 0x10, 0x02}; /* two varint fields */
    for (int k = 0; k < 3; k++) {
        n += bbd_frame_header_encode(BBD_FRAME_ENVELOPE, sizeof envelope, s + n);
        memcpy(s + n, envelope, sizeof envelope);
        n += sizeof envelope;
    }
    fz_seed_write("handshake-envelopes", s, n);
    s[0] = 2; /* three bytes per read */
    fz_seed_write("handshake-envelopes-trickled", s, n);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] + 1; /* bytes per read */
    data++, size--;
    bool handshaken = false;
    size_t off = 0, avail = 0;
    while (off < size) {
        avail = avail + step > size - off ? size - off : avail + step;
        bbd_frame_limits lim = {handshaken ? 0 : BBD_HANDSHAKE_MAX_BYTES,
                                handshaken ? MAX_ENVELOPE : 0};
        bbd_frame_header h;
        bb_error err = {0};
        if (bbd_frame_header_decode(data + off, avail, &lim, &h, &err) != BB_OK)
            return 0; /* the reader closes the connection */
        if (!h.complete || avail < h.header_len + h.payload_len) {
            if (avail == size - off)
                return 0; /* the stream ended inside a frame */
            continue;     /* read more */
        }
        const uint8_t *payload;
        size_t consumed;
        if (bbd_frame_decode(data + off, avail, &lim, &h, &payload, &consumed, &err) != BB_OK)
            __builtin_trap(); /* the header said complete: the two must agree */
        if (h.kind == BBD_FRAME_HANDSHAKE) {
            bbd_handshake hs;
            if (bbd_handshake_decode(payload, h.payload_len, &hs, &err) != BB_OK)
                return 0;
            handshaken = true;
        }
        off += consumed;
        avail -= consumed;
    }
    return 0;
}
