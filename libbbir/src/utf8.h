/*
 * utf8.h — UTF-8 validation shared by the text and JSON dumps. Not public.
 */
#ifndef BB_UTF8_H
#define BB_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the valid UTF-8 sequence at p[0..n), n >= 1; 0 when it
 * is not one (a stray or missing continuation byte, an overlong form, a
 * surrogate or a code point above U+10FFFF). */
size_t bb__utf8_len(const uint8_t *p, size_t n);

#endif
