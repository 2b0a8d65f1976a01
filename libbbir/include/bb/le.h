/*
 * bb/le.h — fixed-width little-endian integers (protobuf fixed32/fixed64,
 * tensor payloads, snapshot headers), at any alignment. On a
 * little-endian host the 8- and 4-byte cases are one unaligned load or
 * store (memcpy): written byte by byte, the compiler kept the loop, and
 * every envelope reads and writes several 8-byte stamps and type hashes.
 */
#ifndef BB_LE_H
#define BB_LE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define BB_LE_HOST 1
#else
#define BB_LE_HOST 0
#endif

/* The n-byte (n <= 8) little-endian integer at p. */
static inline uint64_t bb_le_get(const uint8_t *p, size_t n)
{
    if (BB_LE_HOST && n == 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    if (BB_LE_HOST && n == 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Write the low n bytes (n <= 8) of v to p, little-endian. */
static inline void bb_le_put(uint8_t *p, uint64_t v, size_t n)
{
    if (BB_LE_HOST && n == 8) {
        memcpy(p, &v, 8);
        return;
    }
    if (BB_LE_HOST && n == 4) {
        uint32_t w = (uint32_t)v;
        memcpy(p, &w, 4);
        return;
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

#endif
