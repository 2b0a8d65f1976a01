/*
 * json_check.c — strict RFC 8259 syntax check, no allocation (see
 * json_check.h). A recursive descent over the bytes: objects, arrays,
 * strings (escapes, no raw control characters), numbers in the grammar's
 * exact form, true / false / null.
 */
#include "json_check.h"

#include <string.h>

typedef struct jc {
    const char *s;
    size_t n, pos;
    const char *why;
} jc;

static bool fail(jc *c, const char *why)
{
    c->why = why;
    return false;
}

static void skip_ws(jc *c)
{
    while (c->pos < c->n && (c->s[c->pos] == ' ' || c->s[c->pos] == '\t' ||
                             c->s[c->pos] == '\n' || c->s[c->pos] == '\r'))
        c->pos++;
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

static bool is_hex(char ch)
{
    return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

static bool string(jc *c)
{
    c->pos++; /* the opening quote */
    while (c->pos < c->n) {
        unsigned char ch = (unsigned char)c->s[c->pos];
        if (ch == '"') {
            c->pos++;
            return true;
        }
        if (ch < 0x20)
            return fail(c, "control character in a string");
        if (ch != '\\') {
            c->pos++;
            continue;
        }
        if (++c->pos >= c->n)
            break;
        ch = (unsigned char)c->s[c->pos];
        if (ch == 'u') {
            for (int i = 1; i <= 4; i++)
                if (c->pos + i >= c->n || !is_hex(c->s[c->pos + i]))
                    return fail(c, "\\u needs four hex digits");
            c->pos += 5;
        } else if (strchr("\"\\/bfnrt", ch) && ch) {
            c->pos++;
        } else {
            return fail(c, "unknown escape in a string");
        }
    }
    return fail(c, "unterminated string");
}

static bool digits(jc *c)
{
    if (c->pos >= c->n || !is_digit(c->s[c->pos]))
        return fail(c, "a number needs a digit here");
    while (c->pos < c->n && is_digit(c->s[c->pos]))
        c->pos++;
    return true;
}

static bool number(jc *c)
{
    if (c->s[c->pos] == '-')
        c->pos++;
    if (c->pos < c->n && c->s[c->pos] == '0')
        c->pos++; /* no leading zeros */
    else if (!digits(c))
        return false;
    if (c->pos < c->n && c->s[c->pos] == '.') {
        c->pos++;
        if (!digits(c))
            return false;
    }
    if (c->pos < c->n && (c->s[c->pos] == 'e' || c->s[c->pos] == 'E')) {
        c->pos++;
        if (c->pos < c->n && (c->s[c->pos] == '+' || c->s[c->pos] == '-'))
            c->pos++;
        if (!digits(c))
            return false;
    }
    return true;
}

static bool literal(jc *c, const char *word)
{
    size_t len = strlen(word);
    if (c->n - c->pos < len || memcmp(c->s + c->pos, word, len) != 0)
        return fail(c, "expected a value");
    c->pos += len;
    return true;
}

static bool value(jc *c, int depth);

/* Members of an object (is_object) or elements of an array, after the
 * opening bracket. */
static bool container(jc *c, int depth, bool is_object)
{
    char close = is_object ? '}' : ']';
    c->pos++;
    skip_ws(c);
    if (c->pos < c->n && c->s[c->pos] == close) {
        c->pos++;
        return true;
    }
    for (;;) {
        if (is_object) {
            skip_ws(c);
            if (c->pos >= c->n || c->s[c->pos] != '"')
                return fail(c, "expected a member name (a string)");
            if (!string(c))
                return false;
            skip_ws(c);
            if (c->pos >= c->n || c->s[c->pos] != ':')
                return fail(c, "expected ':' after a member name");
            c->pos++;
        }
        if (!value(c, depth + 1))
            return false;
        if (c->pos >= c->n)
            return fail(c, is_object ? "unterminated object" : "unterminated array");
        if (c->s[c->pos] == close) {
            c->pos++;
            return true;
        }
        if (c->s[c->pos] != ',')
            return fail(c, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
        c->pos++;
    }
}

/* One value with the whitespace around it. */
static bool value(jc *c, int depth)
{
    if (depth > BB__JSON_MAX_DEPTH)
        return fail(c, "nested too deeply");
    skip_ws(c);
    if (c->pos >= c->n)
        return fail(c, "expected a value");
    bool ok;
    switch (c->s[c->pos]) {
    case '{': ok = container(c, depth, true); break;
    case '[': ok = container(c, depth, false); break;
    case '"': ok = string(c); break;
    case 't': ok = literal(c, "true"); break;
    case 'f': ok = literal(c, "false"); break;
    case 'n': ok = literal(c, "null"); break;
    default:
        ok = (c->s[c->pos] == '-' || is_digit(c->s[c->pos])) ? number(c)
                                                             : fail(c, "expected a value");
    }
    if (ok)
        skip_ws(c);
    return ok;
}

bool bb__json_valid(const char *s, size_t n, size_t *err_off, const char **why)
{
    jc c = {s, n, 0, NULL};
    bool ok = value(&c, 0);
    if (ok && c.pos != n)
        ok = fail(&c, "text after the value");
    if (!ok) {
        if (err_off)
            *err_off = c.pos;
        if (why)
            *why = c.why;
    }
    return ok;
}
