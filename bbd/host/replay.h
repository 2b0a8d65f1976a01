/*
 * replay.h — the sliding replay window of a sealed datagram channel
 * (udp_secure.c): nonces arrive out of order and some never; each one is
 * accepted at most once, and one older than the window is refused. The
 * window is BBD_REPLAY_WINDOW nonces below the highest accepted one (as
 * RFC 6479 and WireGuard keep it: a ring of bits, cleared as the top
 * moves). Pure functions; the caller checks before opening a datagram and
 * marks only once it authenticated, so a forged datagram moves nothing.
 */
#ifndef BBD_HOST_REPLAY_H
#define BBD_HOST_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#define BBD_REPLAY_WINDOW 2048

typedef struct bbd_replay {
    uint64_t top;   /* highest accepted nonce */
    bool any;       /* anything accepted yet */
    uint64_t bits[BBD_REPLAY_WINDOW / 64];
} bbd_replay;

/* Would nonce n be accepted? (false: seen, or below the window) */
bool bbd_replay_check(const bbd_replay *r, uint64_t n);
/* Record n as seen (after bbd_replay_check said yes and it authenticated). */
void bbd_replay_mark(bbd_replay *r, uint64_t n);

#endif
