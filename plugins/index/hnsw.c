/*
 * hnsw.c — index::Hnsw: a hierarchical navigable small-world graph
 * (Malkov & Yashunin, 2018; the construction follows hnswlib).
 *
 * Every vector is a node with a level drawn as floor(-ln U / ln m); it has
 * up to m0 = 2m links at level 0 and up to m links at each level above.
 * Insert: greedy descent from the entry point to the node's level, then at
 * each level down to 0 a best-first search with ef_construction
 * candidates, links chosen by the neighbour heuristic (a candidate is kept
 * only if it is nearer the new node than to every link kept so far, which
 * keeps links pointing in different directions), and reverse links; a
 * neighbour whose list overflows is pruned with the same heuristic.
 * Search: greedy descent, then a best-first search at level 0 with
 * max(ef_search, k) candidates.
 *
 * Remove marks a tombstone: the node keeps routing searches (its links
 * stay) but is never returned — a graph stays navigable without a repair.
 *
 * Single-threaded (the engine thread); the search scratch (visited marks
 * by epoch, two heaps) lives in the index so a query allocates nothing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"

#define MAX_LEVEL 31 /* a draw above it is clamped (p < m^-31) */

int ix_hnsw_init(ix_index *ix)
{
    ix_hnsw *h = &ix->u.hnsw;
    h->m0 = 2 * h->m;
    h->level_mult = 1.0 / log((double)h->m);
    h->max_level = -1;
    bbp_rng_seed(&h->rng, ix->seed ^ 0x686e7377ULL);
    return BB_OK;
}

static inline uint32_t *links_at(const ix_hnsw *h, uint32_t node, int level)
{
    return level == 0 ? h->links0 + (size_t)node * (1 + h->m0)
                      : h->upper[node] + (size_t)(level - 1) * (1 + h->m);
}

static inline float dist_to(const ix_index *ix, const float *q, uint32_t node)
{
    return ix_distance(ix->metric, ix->u.hnsw.x + (size_t)node * ix->dim, q, ix->dim);
}

/* Room for need entries in both heaps. */
static bool heaps_reserve(ix_hnsw *h, size_t need)
{
    if (need <= h->heap_cap)
        return true;
    size_t cap = ix_next_cap(h->heap_cap, need);
    if (!ix_grow((void **)&h->cand, h->heap_cap, cap, sizeof(ix_hit)) ||
        !ix_grow((void **)&h->best, h->heap_cap, cap, sizeof(ix_hit)))
        return false;
    h->heap_cap = cap;
    return true;
}

static void visit_begin(ix_hnsw *h, size_t n)
{
    if (++h->epoch == 0) {
        memset(h->visited, 0, n * sizeof *h->visited);
        h->epoch = 1;
    }
}

/* ---- searching one level ---------------------------------------------------------- */

/* Greedy walk at one level: the nearest node reachable by strict improvement. */
static uint32_t greedy(const ix_index *ix, const float *q, uint32_t cur, float *cur_d, int level)
{
    const ix_hnsw *h = &ix->u.hnsw;
    for (bool moved = true; moved;) {
        moved = false;
        const uint32_t *l = links_at(h, cur, level);
        for (uint32_t j = 1; j <= l[0]; j++) {
            float d = dist_to(ix, q, l[j]);
            if (d < *cur_d) {
                *cur_d = d;
                cur = l[j];
                moved = true;
            }
        }
    }
    return cur;
}

/* Best-first search from ep at one level keeping ef results in h->best (a
 * max-heap of *n_best). With skip_dead, tombstones route but are not kept.
 * BB_ENOMEM when the candidate heap cannot grow. */
static int search_level(ix_index *ix, const float *q, uint32_t ep, float ep_d, uint32_t ef,
                        int level, bool skip_dead, size_t *n_best)
{
    ix_hnsw *h = &ix->u.hnsw;
    size_t n_cand = 0, nb = 0;
    visit_begin(h, ix->n);
    h->visited[ep] = h->epoch;
    ix_heap_push(h->cand, &n_cand, (ix_hit){ep_d, ep}, false);
    bool dead_ok = !skip_dead || !h->dead[ep];
    if (dead_ok)
        ix_heap_push(h->best, &nb, (ix_hit){ep_d, ep}, true);
    float bound = dead_ok ? ep_d : INFINITY;
    const uint32_t dim = ix->dim;
    while (n_cand) {
        if (h->cand[0].d > bound && (nb == ef || !skip_dead))
            break;
        ix_hit c = ix_heap_pop(h->cand, &n_cand, false);
        const uint32_t *l = links_at(h, (uint32_t)c.id, level);
        uint32_t cnt = l[0];
        if (cnt)
            __builtin_prefetch(h->x + (size_t)l[1] * dim);
        if (n_cand + cnt > h->heap_cap && !heaps_reserve(h, n_cand + cnt + ef + 1))
            return BB_ENOMEM;
        for (uint32_t j = 1; j <= cnt; j++) {
            uint32_t v = l[j];
            if (j < cnt)
                __builtin_prefetch(h->x + (size_t)l[j + 1] * dim);
            if (h->visited[v] == h->epoch)
                continue;
            h->visited[v] = h->epoch;
            float d = dist_to(ix, q, v);
            if (nb < ef || d < bound) {
                ix_heap_push(h->cand, &n_cand, (ix_hit){d, v}, false);
                if (!skip_dead || !h->dead[v]) {
                    ix_heap_push(h->best, &nb, (ix_hit){d, v}, true);
                    if (nb > ef)
                        ix_heap_pop(h->best, &nb, true);
                }
                if (nb)
                    bound = h->best[0].d;
            }
        }
    }
    *n_best = nb;
    return BB_OK;
}

/* Drain the best heap into w[] ascending. */
static void drain_sorted(ix_hnsw *h, size_t nb, ix_hit *w)
{
    for (size_t i = nb; i > 0; i--)
        w[i - 1] = ix_heap_pop(h->best, &nb, true);
}

/* ---- construction ----------------------------------------------------------------- */

/* The neighbour heuristic over w[0..n) (ascending by distance to the new
 * node): keeps up to max candidates, each nearer the node than to every
 * one kept before it. Writes the kept ids to out, returns their count. */
static uint32_t select_neighbours(const ix_index *ix, const ix_hit *w, size_t n, uint32_t max,
                                  uint32_t *out)
{
    const ix_hnsw *h = &ix->u.hnsw;
    uint32_t kept = 0;
    for (size_t i = 0; i < n && kept < max; i++) {
        const float *xi = h->x + (size_t)w[i].id * ix->dim;
        bool good = true;
        for (uint32_t j = 0; j < kept && good; j++)
            good = dist_to(ix, xi, out[j]) >= w[i].d;
        if (good)
            out[kept++] = (uint32_t)w[i].id;
    }
    return kept;
}

/* Add node to v's links at level; an overflowing list is re-chosen by the
 * heuristic among its links and node. w: scratch of m0 + 1 entries. */
static void link_back(ix_index *ix, uint32_t v, uint32_t node, int level, ix_hit *w)
{
    ix_hnsw *h = &ix->u.hnsw;
    uint32_t *l = links_at(h, v, level), max = level ? h->m : h->m0;
    if (l[0] < max) {
        l[1 + l[0]++] = node;
        return;
    }
    const float *xv = h->x + (size_t)v * ix->dim;
    size_t n = 0;
    for (uint32_t j = 1; j <= l[0]; j++)
        w[n++] = (ix_hit){dist_to(ix, xv, l[j]), l[j]};
    w[n++] = (ix_hit){dist_to(ix, xv, node), node};
    /* insertion sort: n <= m0 + 1 */
    for (size_t i = 1; i < n; i++) {
        ix_hit t = w[i];
        size_t j = i;
        for (; j > 0 && (w[j - 1].d > t.d || (w[j - 1].d == t.d && w[j - 1].id > t.id)); j--)
            w[j] = w[j - 1];
        w[j] = t;
    }
    l[0] = select_neighbours(ix, w, n, max, l + 1);
}

static int draw_level(ix_hnsw *h)
{
    double u = 1.0 - bbp_rng_uniform(&h->rng); /* (0, 1] */
    double lv = floor(-log(u) * h->level_mult);
    return lv > MAX_LEVEL ? MAX_LEVEL : (int)lv;
}

static bool reserve_nodes(ix_index *ix, size_t need)
{
    ix_hnsw *h = &ix->u.hnsw;
    if (need <= h->cap)
        return true;
    size_t cap = ix_next_cap(h->cap, need), d = ix->dim, l0 = 1 + h->m0;
    if (cap > SIZE_MAX / (d > l0 ? d : l0) / sizeof(float))
        return false;
    if (!ix_grow((void **)&h->x, h->cap * d, cap * d, sizeof(float)) ||
        !ix_grow((void **)&h->links0, h->cap * l0, cap * l0, sizeof(uint32_t)) ||
        !ix_grow((void **)&h->upper, h->cap, cap, sizeof(uint32_t *)) ||
        !ix_grow((void **)&h->level, h->cap, cap, 1) || !ix_grow((void **)&h->dead, h->cap, cap, 1) ||
        !ix_grow((void **)&h->visited, h->cap, cap, sizeof(uint32_t)))
        return false;
    h->cap = cap;
    return true;
}

/* Insert stored node id (its vector, level and upper links are in place). */
static int insert(ix_index *ix, uint32_t id)
{
    ix_hnsw *h = &ix->u.hnsw;
    int level = h->level[id];
    if (h->max_level < 0) {
        h->entry = id;
        h->max_level = level;
        return BB_OK;
    }
    const float *q = h->x + (size_t)id * ix->dim;
    uint32_t ep = h->entry;
    float ep_d = dist_to(ix, q, ep);
    for (int lc = h->max_level; lc > level; lc--)
        ep = greedy(ix, q, ep, &ep_d, lc);
    size_t ef = h->ef_construction;
    if (!heaps_reserve(h, ef + 2 + h->m0))
        return BB_ENOMEM;
    ix_hit *w = malloc((ef + 2 + h->m0) * sizeof *w);
    if (!w)
        return BB_ENOMEM;
    int rc = BB_OK;
    for (int lc = level < h->max_level ? level : h->max_level; lc >= 0 && !rc; lc--) {
        size_t nb;
        rc = search_level(ix, q, ep, ep_d, (uint32_t)ef, lc, false, &nb);
        if (rc)
            break;
        drain_sorted(h, nb, w);
        ep = (uint32_t)w[0].id;
        ep_d = w[0].d;
        uint32_t *l = links_at(h, id, lc);
        l[0] = select_neighbours(ix, w, nb, h->m, l + 1);
        for (uint32_t j = 1; j <= l[0]; j++)
            link_back(ix, l[j], id, lc, w);
    }
    free(w);
    if (!rc && level > h->max_level) {
        h->entry = id;
        h->max_level = level;
    }
    return rc;
}

int ix_hnsw_add(ix_index *ix, const float *x, size_t rows, bb_error *err)
{
    ix_hnsw *h = &ix->u.hnsw;
    if (!reserve_nodes(ix, (size_t)ix->n + rows))
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory for %zu vectors", ix->who,
                            (size_t)ix->n + rows);
    for (size_t i = 0; i < rows; i++) {
        uint32_t id = (uint32_t)ix->n;
        int level = draw_level(h);
        uint32_t *up = NULL;
        if (level > 0 && !(up = calloc((size_t)level * (1 + h->m), sizeof *up)))
            return bb_error_set(err, BB_ENOMEM, "%s: out of memory", ix->who);
        memcpy(h->x + (size_t)id * ix->dim, x + i * ix->dim, ix->dim * sizeof(float));
        h->upper[id] = up;
        h->level[id] = (uint8_t)level;
        h->dead[id] = 0;
        links_at(h, id, 0)[0] = 0;
        /* Counted as soon as it is stored: a failed insert leaves an
         * unlinked node, which searches never reach but Remove may name. */
        ix->n++;
        ix->live++;
        if (insert(ix, id) != BB_OK)
            return bb_error_set(err, BB_ENOMEM, "%s: out of memory linking vector %u", ix->who,
                                id);
    }
    return BB_OK;
}

int ix_hnsw_search(ix_index *ix, const float *q, size_t nq, uint32_t k, ix_hit *out,
                   bb_error *err)
{
    ix_hnsw *h = &ix->u.hnsw;
    uint32_t ef = h->ef_search > k ? h->ef_search : k;
    ix_hit *w = malloc(((size_t)ef + 1) * sizeof *w);
    if (!w || !heaps_reserve(h, (size_t)ef + 2 + h->m0)) {
        free(w);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory for a search", ix->who);
    }
    for (size_t i = 0; i < nq; i++) {
        const float *qi = q + i * ix->dim;
        ix_hit *o = out + i * k;
        size_t nb = 0;
        if (h->max_level >= 0 && ix->live) {
            uint32_t ep = h->entry;
            float ep_d = dist_to(ix, qi, ep);
            for (int lc = h->max_level; lc > 0; lc--)
                ep = greedy(ix, qi, ep, &ep_d, lc);
            if (search_level(ix, qi, ep, ep_d, ef, 0, true, &nb)) {
                free(w);
                return bb_error_set(err, BB_ENOMEM, "%s: out of memory for a search", ix->who);
            }
            drain_sorted(h, nb, w);
        }
        for (uint32_t j = 0; j < k; j++)
            o[j] = j < nb ? w[j] : (ix_hit){INFINITY, IX_NO_ID};
    }
    free(w);
    return BB_OK;
}

void ix_hnsw_free(ix_index *ix)
{
    ix_hnsw *h = &ix->u.hnsw;
    for (size_t i = 0; i < ix->n && h->upper; i++)
        free(h->upper[i]);
    free(h->x);
    free(h->links0);
    free(h->upper);
    free(h->level);
    free(h->dead);
    free(h->visited);
    free(h->cand);
    free(h->best);
    h->x = NULL;
    h->links0 = NULL;
    h->upper = NULL;
    h->level = h->dead = NULL;
    h->visited = NULL;
    h->cand = h->best = NULL;
    h->cap = h->heap_cap = 0;
    h->max_level = -1;
}
