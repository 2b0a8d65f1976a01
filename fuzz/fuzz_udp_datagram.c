/*
 * fuzz_udp_datagram.c — UDP datagrams as udp.c takes them: each decoded
 * (bbd_dgram_decode, with the transport's default caps), handshake bodies
 * decoded, and fragments put through reassembly (bbd_reasm_add) under a
 * small byte budget, with time moving on so messages expire. The input is
 * a sequence of datagrams (u16 length, bytes); the high bit of the length
 * switches the sending session, so fragments of one message can come from
 * two sources. Seeds (FUZZ_WRITE_SEEDS=dir): an envelope datagram and a
 * message in three fragments, in order and reordered with a duplicate.
 */
#include <stdlib.h>
#include <string.h>

#include "bbd/host/fragment.h"
#include "bbd/host/fragment_reassembly.h"
#include "bbd/host/handshake.h"
#include "fuzz/support/fuzz_support.h"

#define MAX_MESSAGE ((size_t)1 << 20)

/* Append one datagram (u16 length, bytes) to s at *n. */
static void put(uint8_t *s, size_t *n, const uint8_t *d, size_t len)
{
    s[(*n)++] = (uint8_t)(len >> 8);
    s[(*n)++] = (uint8_t)len;
    memcpy(s + *n, d, len);
    *n += len;
}

/* Fragment index of a 100-byte message cut into 40-byte chunks. */
static size_t fragment(uint32_t index, uint8_t *out)
{
    bbd_dgram_fragment_header_encode(77, 100, 40, index, out);
    size_t len = index == 2 ? 20 : 40;
    memset(out + BBD_DGRAM_FRAGMENT_HEADER, 'a' + (int)index, len);
    return BBD_DGRAM_FRAGMENT_HEADER + len;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!fz_seed_dir())
        return 0;
    uint8_t s[1024], d[128];
    size_t n = 0;
    bbd_dgram_header_encode(BBD_DGRAM_ENVELOPE, d);
    memcpy(d + BBD_DGRAM_HEADER, "\x08\x01", 2);
    put(s, &n, d, BBD_DGRAM_HEADER + 2);
    fz_seed_write("envelope", s, n);
    n = 0;
    for (uint32_t i = 0; i < 3; i++)
        put(s, &n, d, fragment(i, d));
    fz_seed_write("fragments", s, n);
    n = 0;
    static const uint32_t order[] = {2, 0, 2, 1};
    for (int i = 0; i < 4; i++)
        put(s, &n, d, fragment(order[i], d));
    fz_seed_write("fragments-reordered-duplicate", s, n);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bbd_reasm_config rc = {.budget_bytes = 4u << 20, .timeout_ms = 5000, .max_messages = 64};
    bbd_reasm *r = bbd_reasm_new(&rc);
    if (!r)
        return 0;
    uint64_t now = 1000, source = 1;
    size_t off = 0;
    while (off + 2 <= size) {
        size_t n = (size_t)(data[off] & 0x7f) << 8 | data[off + 1];
        if (data[off] & 0x80)
            source = source == 1 ? 2 : 1;
        off += 2;
        if (n > size - off)
            n = size - off;
        bbd_dgram d;
        bb_error err = {0};
        if (bbd_dgram_decode(data + off, n, MAX_MESSAGE, BBD_HANDSHAKE_MAX_BYTES, &d, &err) ==
            BB_OK) {
            if (d.kind == BBD_DGRAM_HELLO || d.kind == BBD_DGRAM_HELLO_ACK) {
                bbd_handshake hs;
                bbd_handshake_decode(d.body, d.body_len, &hs, &err);
            } else if (d.kind == BBD_DGRAM_FRAGMENT) {
                bbd_reasm_result res;
                uint8_t *msg = NULL;
                size_t len = 0;
                if (bbd_reasm_add(r, source, &d, now, &res, &msg, &len, &err) == BB_OK &&
                    res == BBD_REASM_COMPLETE) {
                    if (len != d.total)
                        __builtin_trap();
                    free(msg);
                }
            }
        }
        off += n;
        now += 700;
        bbd_reasm_expire(r, now);
    }
    bbd_reasm_free(r);
    return 0;
}
