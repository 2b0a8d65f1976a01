/*
 * map.c — the engine's small containers: a u64 -> u64 open-addressing hash
 * map (linear probing, power-of-two capacity, tombstones only where a
 * probe must go on past them), the growable
 * malloc array helper behind BBE__ARR, zeroed allocations for the per-message
 * path, and the byte hash of whole envelopes.
 *
 * Used on warm paths only (wire site ids, request ids, dedup window): the
 * per-op hot path indexes arrays resolved at install.
 */
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/engine_internal.h"

void *bbe__zalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        return NULL;
    /* keeps the compiler from fusing malloc + memset into calloc, which
     * glibc serves without its per-thread cache */
    __asm__ volatile("" ::: "memory");
    return memset(p, 0, n);
}

int bbe__arr_reserve(void *arr, size_t elem, size_t need)
{
    struct {
        void *v;
        size_t n, cap;
    } *a = arr;
    if (need <= a->cap)
        return 0;
    size_t cap = a->cap ? a->cap : 8;
    while (cap < need) {
        if (cap > SIZE_MAX / 2)
            return BB_ENOMEM;
        cap *= 2;
    }
    if (elem && cap > SIZE_MAX / elem)
        return BB_ENOMEM;
    void *p = realloc(a->v, cap * elem);
    if (!p)
        return BB_ENOMEM;
    a->v = p;
    a->cap = cap;
    return 0;
}

static size_t slot_of(size_t cap, uint64_t k)
{
    return (size_t)bbe__mix64(k) & (cap - 1);
}

bool bbe__map_get(const bbe__map *m, uint64_t k, uint64_t *v)
{
    if (!m->cap)
        return false;
    for (size_t i = slot_of(m->cap, k), probes = 0; probes < m->cap; i = (i + 1) & (m->cap - 1), probes++) {
        const bbe__mslot *s = &m->slots[i];
        if (s->state == BBE__MAP_EMPTY)
            return false;
        if (s->state == BBE__MAP_FULL && s->key == k) {
            if (v)
                *v = s->val;
            return true;
        }
    }
    return false;
}

static int rehash(bbe__map *m, size_t cap)
{
    bbe__mslot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return BB_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < m->cap; i++) {
        const bbe__mslot *s = &m->slots[i];
        if (s->state != BBE__MAP_FULL)
            continue;
        size_t j = slot_of(cap, s->key);
        while (slots[j].state != BBE__MAP_EMPTY)
            j = (j + 1) & (cap - 1);
        slots[j] = *s;
        n++;
    }
    free(m->slots);
    *m = (bbe__map){.slots = slots, .cap = cap, .n = n};
    return 0;
}

int bbe__map_put(bbe__map *m, uint64_t k, uint64_t v)
{
    if ((m->n + m->tomb + 1) * 10 >= m->cap * 7) {
        size_t cap = m->cap ? m->cap : 16;
        while ((m->n + 1) * 10 >= cap * 5)
            cap *= 2;
        if (rehash(m, cap))
            return BB_ENOMEM;
    }
    bbe__mslot *tomb = NULL;
    for (size_t i = slot_of(m->cap, k);; i = (i + 1) & (m->cap - 1)) {
        bbe__mslot *s = &m->slots[i];
        if (s->state == BBE__MAP_FULL && s->key == k) {
            s->val = v;
            return 0;
        }
        if (s->state == BBE__MAP_TOMB && !tomb)
            tomb = s;
        if (s->state == BBE__MAP_EMPTY) {
            if (tomb) {
                s = tomb;
                m->tomb--;
            }
            *s = (bbe__mslot){.key = k, .val = v, .state = BBE__MAP_FULL};
            m->n++;
            return 0;
        }
    }
}

/* A tombstone only keeps a probe going to the slots after it: when the
 * slot after slot i is empty, i and the tombstones right before it end
 * every chain anyway and become empty. Without this a map whose entries
 * come and go (a request id per request, the dedup window) filled with
 * tombstones and was rebuilt every few dozen deletes. */
static void clear_tombs_before_empty(bbe__map *m, size_t i)
{
    size_t mask = m->cap - 1;
    if (m->slots[(i + 1) & mask].state != BBE__MAP_EMPTY)
        return;
    while (m->slots[i].state == BBE__MAP_TOMB) { /* ends: the load stays under 0.7 */
        m->slots[i].state = BBE__MAP_EMPTY;
        m->tomb--;
        i = (i - 1) & mask;
    }
}

bool bbe__map_del(bbe__map *m, uint64_t k)
{
    if (!m->cap)
        return false;
    for (size_t i = slot_of(m->cap, k), probes = 0; probes < m->cap; i = (i + 1) & (m->cap - 1), probes++) {
        bbe__mslot *s = &m->slots[i];
        if (s->state == BBE__MAP_EMPTY)
            return false;
        if (s->state == BBE__MAP_FULL && s->key == k) {
            s->state = BBE__MAP_TOMB;
            m->n--;
            m->tomb++;
            clear_tombs_before_empty(m, i);
            return true;
        }
    }
    return false;
}

void bbe__map_free(bbe__map *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* ---- bbe__hash_bytes: one 64x64->128 multiply per 16 bytes, three lanes ------------ */

#define S0 0xa0761d6478bd642fULL /* odd constants with mixed bits (wyhash's) */
#define S1 0xe7037ed1a0b428dbULL
#define S2 0x8ebc6af09c88c6e3ULL
#define S3 0x589965cc75374cc3ULL

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The 128-bit product of a and b, its halves folded together. */
static inline uint64_t mum(uint64_t a, uint64_t b)
{
#ifdef __SIZEOF_INT128__
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
#else
    uint64_t al = (uint32_t)a, ah = a >> 32, bl = (uint32_t)b, bh = b >> 32;
    uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    uint64_t mid = (ll >> 32) + (uint32_t)lh + (uint32_t)hl;
    uint64_t lo = (mid << 32) | (uint32_t)ll;
    uint64_t hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
    return lo ^ hi;
#endif
}

uint64_t bbe__hash_bytes(const void *data, size_t len)
{
    const uint8_t *p = data, *end = p + len;
    uint64_t a = S0 ^ (uint64_t)len, b = S1, c = S2;
    for (; end - p >= 48; p += 48) { /* independent lanes: the multiplies overlap */
        a = mum(load64(p) ^ S1, load64(p + 8) ^ a);
        b = mum(load64(p + 16) ^ S2, load64(p + 24) ^ b);
        c = mum(load64(p + 32) ^ S3, load64(p + 40) ^ c);
    }
    a ^= b ^ c;
    for (; end - p >= 16; p += 16)
        a = mum(load64(p) ^ S1, load64(p + 8) ^ a);
    size_t r = (size_t)(end - p);
    uint64_t lo = 0, hi = 0;
    if (r > 8) {
        lo = load64(p);
        memcpy(&hi, p + 8, r - 8);
    } else {
        memcpy(&lo, p, r);
    }
    return bbe__mix64(mum(lo ^ S1, hi ^ a ^ (uint64_t)r));
}
