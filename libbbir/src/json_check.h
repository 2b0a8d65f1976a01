/*
 * json_check.h — a strict JSON (RFC 8259) syntax check that allocates
 * nothing (internal to libbbir).
 *
 * The recorder checks a concrete slot's construction state with it, so an
 * out-of-memory condition can never be mistaken for "not valid JSON" (a
 * parser that builds a tree reports both the same way), and so trailing
 * garbage after the value is refused. Nesting is bounded by
 * BB__JSON_MAX_DEPTH; the recursion is bounded with it.
 */
#ifndef BB__JSON_CHECK_H
#define BB__JSON_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#define BB__JSON_MAX_DEPTH 256

/* True when s[0..n) is exactly one JSON value (surrounded by optional
 * whitespace). Otherwise false, with *err_off = the byte offset of the
 * first problem and *why = what is wrong there (a static string). */
bool bb__json_valid(const char *s, size_t n, size_t *err_off, const char **why);

#endif
