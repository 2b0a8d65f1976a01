/*
 * plugin_bytes.h — the byte writer and bounded reader the standard plugins
 * build their snapshots with. The writer grows a malloc'd buffer and
 * remembers an allocation failure (checked once at the end); the reader
 * never reads past its length, so a truncated or hostile snapshot fails a
 * get instead of overrunning. Host byte order: the snapshots are
 * little-endian, which every supported target is (checked at compile time).
 *
 * Header-only (static inline): each plugin .so compiles its own copy.
 */
#ifndef BBP_PLUGIN_BYTES_H
#define BBP_PLUGIN_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "plugin snapshots are little-endian and written in host order"
#endif

typedef struct bbp_wbuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} bbp_wbuf;

static inline void bbp_put(bbp_wbuf *w, const void *src, size_t n)
{
    if (w->oom || !n)
        return;
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->n + n)
            cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (!p) {
            w->oom = true;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->n, src, n);
    w->n += n;
}

static inline void bbp_put_u64(bbp_wbuf *w, uint64_t v) { bbp_put(w, &v, 8); }
static inline void bbp_put_u32(bbp_wbuf *w, uint32_t v) { bbp_put(w, &v, 4); }
static inline void bbp_put_u8(bbp_wbuf *w, uint8_t v) { bbp_put(w, &v, 1); }

typedef struct bbp_rbuf {
    const uint8_t *p;
    size_t n, off;
} bbp_rbuf;

static inline bool bbp_get(bbp_rbuf *r, void *dst, size_t n)
{
    if (r->n - r->off < n)
        return false;
    if (n)
        memcpy(dst, r->p + r->off, n);
    r->off += n;
    return true;
}

/* Room for count items of size bytes each (checked before allocating). */
static inline bool bbp_has(const bbp_rbuf *r, size_t count, size_t size)
{
    return size == 0 || count <= (r->n - r->off) / size;
}

#endif
