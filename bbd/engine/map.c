/*
 * map.c — the engine's small containers: a u64 -> u64 open-addressing hash
 * map (linear probing, power-of-two capacity, tombstones) and the growable
 * malloc array helper behind BB__ARR.
 *
 * Used on warm paths only (wire site ids, request ids, dedup window): the
 * per-op hot path indexes arrays resolved at install.
 */
#include <stdlib.h>
#include <string.h>

#include "bbd/engine/engine_internal.h"

int bb__arr_reserve(void *arr, size_t elem, size_t need)
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

static size_t slot_of(const bb__map *m, uint64_t k)
{
    return (size_t)bb__mix64(k) & (m->cap - 1);
}

bool bb__map_get(const bb__map *m, uint64_t k, uint64_t *v)
{
    if (!m->cap)
        return false;
    for (size_t i = slot_of(m, k), probes = 0; probes < m->cap; i = (i + 1) & (m->cap - 1), probes++) {
        if (m->used[i] == 0)
            return false;
        if (m->used[i] == 1 && m->keys[i] == k) {
            if (v)
                *v = m->vals[i];
            return true;
        }
    }
    return false;
}

static int rehash(bb__map *m, size_t cap)
{
    bb__map n = {0};
    n.cap = cap;
    n.keys = malloc(cap * sizeof *n.keys);
    n.vals = malloc(cap * sizeof *n.vals);
    n.used = calloc(cap, 1);
    if (!n.keys || !n.vals || !n.used) {
        free(n.keys);
        free(n.vals);
        free(n.used);
        return BB_ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->used[i] != 1)
            continue;
        size_t j = slot_of(&n, m->keys[i]);
        while (n.used[j])
            j = (j + 1) & (cap - 1);
        n.used[j] = 1;
        n.keys[j] = m->keys[i];
        n.vals[j] = m->vals[i];
        n.n++;
    }
    bb__map_free(m);
    *m = n;
    return 0;
}

int bb__map_put(bb__map *m, uint64_t k, uint64_t v)
{
    if ((m->n + m->tomb + 1) * 10 >= m->cap * 7) {
        size_t cap = m->cap ? m->cap : 16;
        while ((m->n + 1) * 10 >= cap * 5)
            cap *= 2;
        if (rehash(m, cap))
            return BB_ENOMEM;
    }
    size_t tomb = SIZE_MAX;
    for (size_t i = slot_of(m, k);; i = (i + 1) & (m->cap - 1)) {
        if (m->used[i] == 1 && m->keys[i] == k) {
            m->vals[i] = v;
            return 0;
        }
        if (m->used[i] == 2 && tomb == SIZE_MAX)
            tomb = i;
        if (m->used[i] == 0) {
            if (tomb != SIZE_MAX) {
                i = tomb;
                m->tomb--;
            }
            m->used[i] = 1;
            m->keys[i] = k;
            m->vals[i] = v;
            m->n++;
            return 0;
        }
    }
}

bool bb__map_del(bb__map *m, uint64_t k)
{
    if (!m->cap)
        return false;
    for (size_t i = slot_of(m, k), probes = 0; probes < m->cap; i = (i + 1) & (m->cap - 1), probes++) {
        if (m->used[i] == 0)
            return false;
        if (m->used[i] == 1 && m->keys[i] == k) {
            m->used[i] = 2;
            m->n--;
            m->tomb++;
            return true;
        }
    }
    return false;
}

void bb__map_free(bb__map *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof *m);
}
