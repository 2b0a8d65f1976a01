/*
 * fuzz_udp_sealed.c — sealed datagrams as a secure UDP session takes them
 * (udp_secure.c bbd__udp_on_sealed): the outer datagram decoded
 * (bbd_dgram_decode), its nonce checked against the replay window
 * (replay.h), opened at that nonce (bbd_noise_decrypt_at), marked, and the
 * inner datagram decoded with the transport's caps (an admission decoded
 * too). The same pure functions the session calls.
 *
 * Forged ciphertext never opens, so each input datagram says whether it
 * is raw wire bytes or a plaintext inner datagram that the peer's genuine
 * key seals at a nonce the input chooses: the input is a sequence of
 * (flags u8, nonce u64 big-endian, length u16 big-endian, bytes); flags
 * bit 0 = seal. That reaches the inner decoder with fuzzer-chosen bytes
 * and drives the replay window with fuzzer-chosen nonces, in any order,
 * repeated. Two properties are checked, not just the absence of crashes:
 * a nonce the window accepted and marked is never accepted again, and a
 * datagram sealed with the genuine key at an unused nonce always opens.
 *
 * Seeds (FUZZ_WRITE_SEEDS=dir): a sealed envelope, the same replayed, and
 * nonces out of order across the window's edge.
 */
#include <string.h>

#include "bbd/host/fragment.h"
#include "bbd/host/handshake.h"
#include "bbd/host/noise.h"
#include "bbd/host/replay.h"
#include "fuzz/support/fuzz_support.h"

#define MAX_MESSAGE ((size_t)1 << 20)
#define SEALED_HEADER (BBD_DGRAM_HEADER + BBD_DGRAM_NONCE)
#define ITEM_HEADER 11 /* flags, nonce, length */

static bbd_noise_cipher key_of(void)
{
    bbd_noise_cipher c = {.n = 0, .has_key = true};
    for (int i = 0; i < BBD_NOISE_KEYLEN; i++)
        c.k[i] = (uint8_t)(3 * i + 1);
    return c;
}

/* The wire bytes of inner[0..n) (an inner datagram without its magic)
 * sealed at nonce into out; returns the size, 0 when it does not fit. */
static size_t seal(const bbd_noise_cipher *c, uint64_t nonce, const uint8_t *inner, size_t n,
                   uint8_t *out)
{
    if (SEALED_HEADER + n + BBD_NOISE_TAGLEN > BBD_DGRAM_MAX_BYTES)
        return 0;
    bbd_dgram_header_encode(BBD_DGRAM_SEALED, out);
    for (int i = 0; i < BBD_DGRAM_NONCE; i++)
        out[BBD_DGRAM_HEADER + i] = (uint8_t)(nonce >> (8 * (BBD_DGRAM_NONCE - 1 - i)));
    if (bbd_noise_encrypt_at(c, nonce, NULL, 0, inner, n, out + SEALED_HEADER) != BB_OK)
        return 0;
    return SEALED_HEADER + n + BBD_NOISE_TAGLEN;
}

/* One datagram as the session takes it. sealed_here: this harness sealed
 * it with the genuine key (so it must open unless its nonce was used). */
static void take(const bbd_noise_cipher *rx, bbd_replay *window, const uint8_t *wire, size_t n,
                 bool sealed_here)
{
    static uint8_t plain[BBD_DGRAM_MAX_BYTES + 1];
    bbd_dgram d, in;
    bb_error err = {0};
    if (bbd_dgram_decode(wire, n, MAX_MESSAGE, BBD_HANDSHAKE_MAX_BYTES, &d, &err) != BB_OK ||
        d.kind != BBD_DGRAM_SEALED)
        return; /* dropped before any key is used */
    bool fresh = bbd_replay_check(window, d.nonce);
    plain[0] = BBD_DGRAM_MAGIC;
    if (!fresh || bbd_noise_decrypt_at(rx, d.nonce, NULL, 0, d.body, d.body_len, plain + 1)) {
        if (sealed_here && fresh)
            __builtin_trap(); /* a genuine datagram at an unused nonce must open */
        return;               /* counted replayed or auth_failed */
    }
    bbd_replay_mark(window, d.nonce);
    if (bbd_replay_check(window, d.nonce))
        __builtin_trap(); /* a marked nonce must never pass again */
    size_t inner = d.body_len - BBD_NOISE_TAGLEN + 1;
    if (bbd_dgram_decode(plain, inner, MAX_MESSAGE, BBD_ADMISSION_MAX_BYTES, &in, &err) != BB_OK)
        return; /* frames_refused */
    if (in.kind == BBD_DGRAM_ADMISSION) {
        char reason[BBD_ADMISSION_REASON_MAX + 1];
        bbd_admission_decode(in.body, in.body_len, reason, &err);
    }
}

static size_t put(uint8_t *s, size_t n, uint8_t flags, uint64_t nonce, const void *d, size_t len)
{
    s[n++] = flags;
    for (int i = 7; i >= 0; i--)
        s[n++] = (uint8_t)(nonce >> (8 * i));
    s[n++] = (uint8_t)(len >> 8);
    s[n++] = (uint8_t)len;
    memcpy(s + n, d, len);
    return n + len;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!fz_seed_dir())
        return 0;
    static const uint8_t envelope[] = {BBD_DGRAM_ENVELOPE, 0x08, 0x01, 0x10, 0x02};
    uint8_t s[512];
    size_t n = put(s, 0, 1, 0, envelope, sizeof envelope);
    fz_seed_write("sealed-envelope", s, n);
    n = put(s, n, 1, 0, envelope, sizeof envelope);
    fz_seed_write("sealed-envelope-replayed", s, n);
    n = 0;
    static const uint64_t order[] = {5, 3, 4000, 5, 1951, 1952, 4001, 2};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        n = put(s, n, 1, order[i], envelope, sizeof envelope);
    fz_seed_write("sealed-out-of-order", s, n);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const bbd_noise_cipher key = key_of();
    bbd_replay window;
    memset(&window, 0, sizeof window);
    static uint8_t wire[BBD_DGRAM_MAX_BYTES];
    size_t off = 0;
    while (size - off >= ITEM_HEADER) {
        uint8_t flags = data[off];
        uint64_t nonce = 0;
        for (int i = 1; i <= 8; i++)
            nonce = nonce << 8 | data[off + i];
        size_t len = (size_t)data[off + 9] << 8 | data[off + 10];
        off += ITEM_HEADER;
        if (len > size - off)
            len = size - off;
        const uint8_t *bytes = data + off;
        off += len;
        if (flags & 1) {
            size_t n = nonce == UINT64_MAX ? 0 : seal(&key, nonce, bytes, len, wire);
            if (n)
                take(&key, &window, wire, n, true);
        } else {
            take(&key, &window, bytes, len, false);
        }
    }
    return 0;
}
