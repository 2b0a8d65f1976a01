/*
 * template.c — per-node component configs from a group's template: every
 * "{expr}" in a string is the node's number (scenario.h gives the grammar),
 * so `"shard_index": "{i}"` gives node 7 shard 7 and `"path":
 * "data/part-{i%10}.csv"` one of ten files. A string that is one
 * placeholder becomes a JSON number: the data plugin reads shard_index as a
 * number, not as text.
 *
 * Placeholders come from an untrusted scenario: each is bounded (at most
 * 64 bytes, 8 operations), the arithmetic is checked (no overflow, no
 * division by zero) and every error names the template's path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bbsim/scenario.h"

#define MAX_EXPR 64
#define MAX_OPS 8
#define MAX_TEXT (64u << 10)

typedef struct vars {
    int64_t i, n, node;
} vars;

static bool var_of(const char **p, const vars *v, int64_t *out)
{
    static const struct {
        const char *name;
        size_t len;
    } NAMES[] = {{"node", 4}, {"i", 1}, {"n", 1}};
    for (size_t k = 0; k < sizeof NAMES / sizeof *NAMES; k++)
        if (strncmp(*p, NAMES[k].name, NAMES[k].len) == 0) {
            *out = k == 0 ? v->node : k == 1 ? v->i : v->n;
            *p += NAMES[k].len;
            return true;
        }
    return false;
}

/* One placeholder's body, between the braces. */
static int eval(const char *body, const vars *v, int64_t *out, const char *path, bb_error *err)
{
    const char *p = body;
    int64_t x;
    if (!var_of(&p, v, &x))
        return bb_error_set(err, BB_ECONFIG, "%s: '{%s}' starts with no variable (i, n or node)",
                            path, body);
    for (int ops = 0; *p; ops++) {
        char op = *p++;
        char *end = NULL;
        long long k = strtoll(p, &end, 10);
        if (ops == MAX_OPS || !strchr("+-*/%", op) || end == p || k < 0 || k > INT32_MAX)
            return bb_error_set(err, BB_ECONFIG,
                                "%s: '{%s}' is not <variable> followed by at most %d of "
                                "+K -K *K /K %%K (K a whole number)",
                                path, body, MAX_OPS);
        p = end;
        bool bad = false;
        switch (op) {
        case '+': bad = __builtin_add_overflow(x, k, &x); break;
        case '-': bad = __builtin_sub_overflow(x, k, &x); break;
        case '*': bad = __builtin_mul_overflow(x, k, &x); break;
        default:
            if (k == 0)
                return bb_error_set(err, BB_ECONFIG, "%s: '{%s}' divides by zero", path, body);
            x = op == '/' ? x / k : x % k;
        }
        if (bad)
            return bb_error_set(err, BB_ECONFIG, "%s: '{%s}' overflows", path, body);
    }
    *out = x;
    return BB_OK;
}

/* Substitute the placeholders of one string: a number when s is exactly
 * one placeholder, else a string. */
static cJSON *apply_string(const char *s, const vars *v, const char *path, bb_error *err)
{
    size_t len = strlen(s);
    if (len > MAX_TEXT) {
        bb_error_set(err, BB_ELIMIT, "%s: a string of %zu bytes (at most %u)", path, len, MAX_TEXT);
        return NULL;
    }
    /* a placeholder is at least 3 bytes ("{i}") and prints at most 20 */
    char *out = malloc(len * 7 + 32), *o = out;
    if (!out) {
        bb_error_set(err, BB_ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    int placeholders = 0;
    bool whole = false;
    for (const char *p = s; *p;) {
        if (*p != '{') {
            *o++ = *p++;
            continue;
        }
        const char *close = strchr(p, '}');
        char body[MAX_EXPR + 1];
        size_t blen = close ? (size_t)(close - p - 1) : 0;
        int64_t x = 0;
        if (!close || blen == 0 || blen > MAX_EXPR) {
            bb_error_set(err, BB_ECONFIG, "%s: an unclosed, empty or over-long '{' placeholder "
                         "in \"%.80s\"", path, s);
            free(out);
            return NULL;
        }
        memcpy(body, p + 1, blen);
        body[blen] = '\0';
        if (eval(body, v, &x, path, err)) {
            free(out);
            return NULL;
        }
        whole = p == s && close[1] == '\0';
        o += sprintf(o, "%lld", (long long)x);
        placeholders++;
        p = close + 1;
    }
    *o = '\0';
    cJSON *r = placeholders == 1 && whole ? cJSON_CreateNumber((double)strtoll(out, NULL, 10))
                                          : cJSON_CreateString(out);
    free(out);
    if (!r)
        bb_error_set(err, BB_ENOMEM, "%s: out of memory", path);
    return r;
}

static cJSON *apply(const cJSON *t, const vars *v, const char *path, int depth, bb_error *err)
{
    if (depth > 32) {
        bb_error_set(err, BB_ELIMIT, "%s: nested deeper than 32", path);
        return NULL;
    }
    if (cJSON_IsString(t))
        return apply_string(t->valuestring, v, path, err);
    if (!cJSON_IsArray(t) && !cJSON_IsObject(t)) {
        cJSON *c = cJSON_Duplicate(t, false);
        if (!c)
            bb_error_set(err, BB_ENOMEM, "%s: out of memory", path);
        return c;
    }
    cJSON *c = cJSON_IsArray(t) ? cJSON_CreateArray() : cJSON_CreateObject();
    if (!c) {
        bb_error_set(err, BB_ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    size_t k = 0;
    for (const cJSON *x = t->child; x; x = x->next, k++) {
        char sub[256];
        if (cJSON_IsArray(t))
            snprintf(sub, sizeof sub, "%s[%zu]", path, k);
        else
            snprintf(sub, sizeof sub, "%s.%s", path, x->string);
        cJSON *y = apply(x, v, sub, depth + 1, err);
        if (!y) {
            cJSON_Delete(c);
            return NULL;
        }
        if (cJSON_IsArray(t))
            cJSON_AddItemToArray(c, y);
        else
            cJSON_AddItemToObject(c, x->string, y);
    }
    return c;
}

cJSON *bbsim_template_apply(const cJSON *t, int64_t i, int64_t n, int64_t node,
                            const char *path, bb_error *err)
{
    vars v = {i, n, node};
    return apply(t, &v, path, 0, err);
}
