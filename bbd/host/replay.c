/*
 * replay.c — the replay window (replay.h).
 */
#include "bbd/host/replay.h"

#include <string.h>

static bool bit(const bbd_replay *r, uint64_t n)
{
    uint64_t i = n % BBD_REPLAY_WINDOW;
    return (r->bits[i / 64] >> (i % 64)) & 1;
}

bool bbd_replay_check(const bbd_replay *r, uint64_t n)
{
    if (!r->any || n > r->top)
        return true;
    if (r->top - n >= BBD_REPLAY_WINDOW)
        return false;
    return !bit(r, n);
}

void bbd_replay_mark(bbd_replay *r, uint64_t n)
{
    if (!r->any) {
        r->any = true;
        r->top = n;
    } else if (n > r->top) {
        /* clear the slots the window slides past */
        if (n - r->top >= BBD_REPLAY_WINDOW)
            memset(r->bits, 0, sizeof r->bits);
        else
            for (uint64_t k = r->top + 1; k <= n; k++) {
                uint64_t i = k % BBD_REPLAY_WINDOW;
                r->bits[i / 64] &= ~(1ull << (i % 64));
            }
        r->top = n;
    }
    uint64_t i = n % BBD_REPLAY_WINDOW;
    r->bits[i / 64] |= 1ull << (i % 64);
}
