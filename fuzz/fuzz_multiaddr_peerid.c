/*
 * fuzz_multiaddr_peerid.c — addresses and peer ids as they arrive in
 * handshakes, envelopes, configs and on command lines: the input read as
 * multiaddr text and as binary (parse, validate, decode, format, the
 * transport part, the intra-node suffix, and back), and as PeerId text
 * and bytes. A binary address that validates must format, and its text
 * must parse back to the same bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "bb/multiaddr.h"
#include "bb/peerid.h"

static void binary(const uint8_t *data, size_t size)
{
    bb_error err = {0};
    bb_multiaddr_component comps[BB_MULTIADDR_MAX_COMPONENTS];
    size_t n = 0;
    bb_multiaddr_decode(data, size, comps, BB_MULTIADDR_MAX_COMPONENTS, &n, &err);
    bb_ma_transport t;
    bb_multiaddr_transport(data, size, &t, &err);
    bb_suffix sfx;
    bb_suffix_parse(data, size, &sfx, &err);
    size_t tlen;
    bb_multiaddr_split(data, size, &tlen, &err);
    if (bb_multiaddr_validate(data, size, &err) != BB_OK)
        return;
    char text[BB_MULTIADDR_TEXT_MAX + 1];
    if (bb_multiaddr_format(data, size, text, sizeof text, NULL, &err) != BB_OK)
        __builtin_trap(); /* a valid address always formats */
    uint8_t back[BB_MULTIADDR_MAX_LEN];
    size_t blen = 0;
    if (bb_multiaddr_parse(text, back, sizeof back, &blen, &err) != BB_OK || blen != size ||
        memcmp(back, data, size) != 0)
        __builtin_trap(); /* and reads back as itself */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    bb_error err = {0};
    uint8_t *a = NULL;
    size_t alen = 0;
    if (bb_multiaddr_parse_alloc(text, &a, &alen, &err) == BB_OK) {
        binary(a, alen);
        free(a);
    }
    binary(data, size);
    bb_peerid id;
    if (bb_peerid_from_text(text, &id, &err) == BB_OK) {
        char t2[BB_PEERID_TEXT_MAX];
        if (bb_peerid_to_text(&id, t2, sizeof t2, &err) != BB_OK)
            __builtin_trap();
    }
    if (bb_peerid_from_bytes(data, size, &id, &err) == BB_OK) {
        uint8_t pk[BB_ED25519_PK_LEN];
        bb_peerid_pubkey(&id, pk, &err);
    }
    free(text);
    return 0;
}
