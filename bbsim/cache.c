/*
 * cache.c — the read-only values the simulator's nodes share
 * (ctx->shared_get / shared_put, bb/plugin.h; sim_internal.h): a prepared
 * dataset is loaded by the first node that needs it and referenced by
 * every other. A run holds a handful of keys (one per file and split), so
 * a flat array searched linearly is all it needs. Entries live until the
 * simulator is freed; the values are immutable, so the nodes' worker
 * threads may read them while the loop adds entries.
 */
#include <stdlib.h>
#include <string.h>

#include "bbsim/sim_internal.h"

/* The bytes of a value's payloads (tensors, bytes, and those of its items),
 * for the summary's "shared" figure. */
static size_t payload_bytes(const bb_value *v, int depth)
{
    switch (v && depth < 8 ? v->type->kind : BB_VK_TRIGGER) {
    case BB_VK_TENSOR: return v->u.tensor.nbytes;
    case BB_VK_BYTES: return v->u.bytes.len;
    case BB_VK_COMPOSITE: {
        size_t n = 0;
        for (size_t i = 0; i < v->u.list.n; i++)
            n += payload_bytes(v->u.list.items[i], depth + 1);
        return n;
    }
    default: return 0;
    }
}

bb_value *bbsim__shared_get(void *ud, const char *key)
{
    bbsim_cache *c = &((bbsim *)ud)->cache;
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->keys[i], key) == 0)
            return bb_value_ref(c->vals[i]);
    return NULL;
}

bb_value *bbsim__shared_put(void *ud, const char *key, bb_value *v)
{
    bbsim_cache *c = &((bbsim *)ud)->cache;
    bb_value *have = bbsim__shared_get(ud, key);
    if (have)
        return have;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        char **k = realloc(c->keys, cap * sizeof *k);
        if (k)
            c->keys = k;
        bb_value **vs = k ? realloc(c->vals, cap * sizeof *vs) : NULL;
        if (!vs)
            return NULL;
        c->vals = vs;
        c->cap = cap;
    }
    if (!(c->keys[c->n] = strdup(key)))
        return NULL;
    c->vals[c->n++] = bb_value_ref(v);
    ((bbsim *)ud)->sum.shared_values = c->n;
    ((bbsim *)ud)->sum.shared_bytes += payload_bytes(v, 0);
    return bb_value_ref(v);
}

void bbsim__cache_free(bbsim_cache *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->keys[i]);
        bb_value_unref(c->vals[i]);
    }
    free(c->keys);
    free(c->vals);
    memset(c, 0, sizeof *c);
}
