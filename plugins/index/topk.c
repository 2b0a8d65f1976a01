/*
 * topk.c — the binary heaps of the index plugin over ix_hit: a min-heap
 * (HNSW's candidates, nearest first) or a max-heap (the k best kept so
 * far, worst at the root, so a candidate costs one compare against
 * ix_topk_bound until it beats the root). Ties order by id, which makes
 * every index's answer a function of its contents alone (two nodes with
 * the same vectors answer the same ids).
 */
#include <math.h>
#include <stdlib.h>

#include "index.h"

/* a goes above b: nearer (min-heap) or farther (max-heap); ties by id. */
static inline bool above(const ix_hit *a, const ix_hit *b, bool max)
{
    if (a->d != b->d)
        return max ? a->d > b->d : a->d < b->d;
    return max ? a->id > b->id : a->id < b->id;
}

static void sift_down(ix_hit *v, size_t n, size_t i, ix_hit h, bool max)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const ix_hit *best = &h;
        if (l < n && above(&v[l], best, max)) {
            m = l;
            best = &v[l];
        }
        if (r < n && above(&v[r], best, max))
            m = r;
        if (m == i)
            break;
        v[i] = v[m];
        i = m;
    }
    v[i] = h;
}

void ix_heap_push(ix_hit *v, size_t *n, ix_hit h, bool max)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!above(&h, &v[p], max))
            break;
        v[i] = v[p];
        i = p;
    }
    v[i] = h;
}

ix_hit ix_heap_pop(ix_hit *v, size_t *n, bool max)
{
    ix_hit top = v[0];
    if (--*n)
        sift_down(v, *n, 0, v[*n], max);
    return top;
}

float ix_topk_bound(const ix_topk *t)
{
    return t->n < t->k ? INFINITY : t->v[0].d;
}

void ix_topk_push(ix_topk *t, float d, uint64_t id)
{
    ix_hit h = {d, id};
    size_t n = t->n;
    if (n < t->k) {
        ix_heap_push(t->v, &n, h, true);
        t->n = (uint32_t)n;
    } else if (t->k && above(&t->v[0], &h, true)) {
        sift_down(t->v, n, 0, h, true); /* replace the worst */
    }
}

void ix_topk_sort(ix_topk *t)
{
    size_t n = t->n;
    while (n > 1) {
        ix_hit top = ix_heap_pop(t->v, &n, true);
        t->v[n] = top;
    }
}
