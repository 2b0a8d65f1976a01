/*
 * bb/le.h — fixed-width little-endian integers (protobuf fixed32/fixed64,
 * tensor payloads, snapshot headers), byte by byte so any alignment works.
 */
#ifndef BB_LE_H
#define BB_LE_H

#include <stddef.h>
#include <stdint.h>

/* The n-byte (n <= 8) little-endian integer at p. */
static inline uint64_t bb_le_get(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Write the low n bytes (n <= 8) of v to p, little-endian. */
static inline void bb_le_put(uint8_t *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

#endif
