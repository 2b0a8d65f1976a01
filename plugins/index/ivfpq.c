/*
 * ivfpq.c — index::IvfPq: an inverted file over a k-means coarse quantizer
 * (nlist lists), each vector stored as the product-quantization code of
 * its residual from its list's centroid (Jégou, Douze & Schmid, 2011):
 * pq_m sub-vectors of dim / pq_m floats, each replaced by the index of the
 * nearest of 256 codewords, so a vector costs pq_m bytes plus its id.
 *
 * Train (samples [n, dim], n >= max(nlist, 256)) fits the centroids, then
 * one codebook per sub-space on the samples' residuals. It runs on the
 * host's worker pool: the job owns copies of everything it reads and
 * writes, and the engine thread commits its result (train_done) — the
 * index is never touched off the engine thread. Searches and Adds before
 * the commit are refused ("not trained"); recorded in a module bootstrap,
 * the engine's op lock parks them until it lands.
 *
 * Search probes the nprobe lists nearest the query (by the metric) and
 * scores each code by table lookups: for L2 a table of |(q - c)_m - w|^2
 * per probed list; for inner product one table of q_m . w per query plus
 * q . c per list. Remove takes the code out of its list (the list's last
 * entry moves into its place).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"

#define KSUB IX_KSUB
#define ENCODE_BLOCK 4096

/* ---- encoding ------------------------------------------------------------------- */

static bool by_ip(const ix_index *ix) { return ix->metric != IX_L2; }

/* Codes of rows x (n x dim) whose lists are lists[]: the residual's
 * nearest codeword per sub-space. */
static int encode(const ix_index *ix, const float *centroids, const float *codebooks,
                  const float *x, size_t n, const uint32_t *lists, uint8_t *codes)
{
    const ix_ivfpq *v = &ix->u.ivf;
    uint32_t dim = ix->dim, dsub = v->dsub;
    size_t blk = n < ENCODE_BLOCK ? n : ENCODE_BLOCK;
    float *res = malloc((blk ? blk : 1) * dim * sizeof *res);
    float *sub = malloc((blk ? blk : 1) * dsub * sizeof *sub);
    uint32_t *a = malloc((blk ? blk : 1) * sizeof *a);
    int rc = res && sub && a ? BB_OK : BB_ENOMEM;
    for (size_t r0 = 0; !rc && r0 < n; r0 += blk) {
        size_t nr = n - r0 < blk ? n - r0 : blk;
        for (size_t i = 0; i < nr; i++) {
            const float *xi = x + (r0 + i) * dim, *c = centroids + (size_t)lists[r0 + i] * dim;
            for (uint32_t d = 0; d < dim; d++)
                res[i * dim + d] = xi[d] - c[d];
        }
        for (uint32_t m = 0; !rc && m < v->pq_m; m++) {
            for (size_t i = 0; i < nr; i++)
                memcpy(sub + i * dsub, res + i * dim + (size_t)m * dsub, dsub * sizeof(float));
            rc = ix_assign(sub, nr, codebooks + (size_t)m * KSUB * dsub, KSUB, dsub, false, a,
                           NULL);
            for (size_t i = 0; !rc && i < nr; i++)
                codes[(r0 + i) * v->pq_m + m] = (uint8_t)a[i];
        }
    }
    free(res);
    free(sub);
    free(a);
    return rc;
}

static bool list_reserve(ix_list *l, size_t need, uint32_t pq_m)
{
    if (need <= l->cap)
        return true;
    if (need > UINT32_MAX)
        return false;
    size_t cap = ix_next_cap(l->cap, need);
    if (cap > UINT32_MAX)
        cap = UINT32_MAX;
    if (!ix_grow((void **)&l->ids, l->cap, cap, sizeof(uint64_t)) ||
        !ix_grow((void **)&l->codes, (size_t)l->cap * pq_m, cap * pq_m, 1))
        return false;
    l->cap = (uint32_t)cap;
    return true;
}

int ix_ivfpq_check_trained(const ix_index *ix, const char *what, bb_error *err)
{
    if (ix->u.ivf.trained)
        return BB_OK;
    return bb_error_set(err, BB_ESTATE, "%s: %s before Train: an IvfPq index needs its "
                        "quantizers trained first%s", ix->who, what,
                        ix->u.ivf.job ? " (a Train is running)" : "");
}

int ix_ivfpq_add(ix_index *ix, const float *x, size_t rows, bb_error *err)
{
    ix_ivfpq *v = &ix->u.ivf;
    size_t need = (size_t)ix->n + rows;
    if (need > v->id_cap) {
        size_t cap = ix_next_cap(v->id_cap, need);
        if (!ix_grow((void **)&v->list_of, v->id_cap, cap, sizeof(uint32_t)) ||
            !ix_grow((void **)&v->pos_of, v->id_cap, cap, sizeof(uint32_t)))
            return bb_error_set(err, BB_ENOMEM, "%s: out of memory for %zu ids", ix->who, need);
        v->id_cap = cap;
    }
    uint32_t *lists = malloc((rows ? rows : 1) * sizeof *lists);
    uint8_t *codes = malloc((rows ? rows : 1) * v->pq_m);
    int rc = lists && codes ? BB_OK : BB_ENOMEM;
    if (!rc)
        rc = ix_assign(x, rows, v->centroids, v->nlist, ix->dim, by_ip(ix), lists, NULL);
    if (!rc)
        rc = encode(ix, v->centroids, v->codebooks, x, rows, lists, codes);
    uint32_t *grow = rc ? NULL : calloc(v->nlist, sizeof *grow);
    if (!rc && !grow)
        rc = BB_ENOMEM;
    for (size_t i = 0; !rc && i < rows; i++)
        grow[lists[i]]++;
    for (uint32_t c = 0; !rc && c < v->nlist; c++)
        if (grow[c] && !list_reserve(&v->lists[c], (size_t)v->lists[c].n + grow[c], v->pq_m))
            rc = BB_ENOMEM;
    free(grow);
    for (size_t i = 0; !rc && i < rows; i++) { /* nothing fails from here on */
        ix_list *l = &v->lists[lists[i]];
        uint64_t id = ix->n + i;
        l->ids[l->n] = id;
        memcpy(l->codes + (size_t)l->n * v->pq_m, codes + i * v->pq_m, v->pq_m);
        v->list_of[id] = lists[i];
        v->pos_of[id] = l->n++;
    }
    free(lists);
    free(codes);
    if (rc)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory adding %zu vectors", ix->who,
                            rows);
    ix->n += rows;
    ix->live += rows;
    return BB_OK;
}

void ix_ivfpq_remove(ix_index *ix, uint64_t id)
{
    ix_ivfpq *v = &ix->u.ivf;
    ix_list *l = &v->lists[v->list_of[id]];
    uint32_t p = v->pos_of[id], last = l->n - 1;
    if (p != last) {
        uint64_t moved = l->ids[last];
        l->ids[p] = moved;
        memcpy(l->codes + (size_t)p * v->pq_m, l->codes + (size_t)last * v->pq_m, v->pq_m);
        v->pos_of[moved] = p;
    }
    l->n--;
    v->list_of[id] = UINT32_MAX;
}

/* ---- search ---------------------------------------------------------------------- */

/* Distance tables: tab[m * 256 + j], the contribution of codeword j of
 * sub-space m to a code's distance from query q.
 *   inner product: -q_m . w_j, once per query;
 *   L2, per probed list c: |(q - c)_m - w_j|^2 — or, with the precomputed
 *   table, pre[c][m][j] + (-2 q_m . w_j), the second part once per query:
 *   |q - c - r|^2 = |q - c|^2 + sum_m (|w|^2 + 2 c_m.w - 2 q_m.w). */
static void query_table(const ix_index *ix, const float *q, float scale, float *tab)
{
    const ix_ivfpq *v = &ix->u.ivf;
    for (uint32_t m = 0; m < v->pq_m; m++) {
        const float *cb = v->codebooks + (size_t)m * KSUB * v->dsub, *qm = q + (size_t)m * v->dsub;
        for (uint32_t j = 0; j < KSUB; j++)
            tab[(size_t)m * KSUB + j] = scale * ix_dot(qm, cb + (size_t)j * v->dsub, v->dsub);
    }
}

static void list_table(const ix_index *ix, const float *q, uint32_t c, const float *qtab,
                       float *tab)
{
    const ix_ivfpq *v = &ix->u.ivf;
    size_t n = (size_t)v->pq_m * KSUB;
    if (v->precomp) {
        const float *pre = v->precomp + (size_t)c * n;
        for (size_t i = 0; i < n; i++)
            tab[i] = pre[i] + qtab[i];
        return;
    }
    const float *cen = v->centroids + (size_t)c * ix->dim;
    for (uint32_t m = 0; m < v->pq_m; m++) {
        const float *cb = v->codebooks + (size_t)m * KSUB * v->dsub;
        const float *qm = q + (size_t)m * v->dsub, *cm = cen + (size_t)m * v->dsub;
        float r[IX_MAX_DSUB];
        for (uint32_t d = 0; d < v->dsub; d++)
            r[d] = qm[d] - cm[d];
        for (uint32_t j = 0; j < KSUB; j++)
            tab[(size_t)m * KSUB + j] = ix_l2sq(r, cb + (size_t)j * v->dsub, v->dsub);
    }
}

void ix_ivfpq_prepare(ix_index *ix)
{
    ix_ivfpq *v = &ix->u.ivf;
    free(v->precomp);
    v->precomp = NULL;
    size_t per = (size_t)v->pq_m * KSUB;
    if (ix->metric != IX_L2 || !v->trained ||
        (size_t)v->nlist * per > IX_PRECOMP_MAX / sizeof(float) ||
        !(v->precomp = malloc((size_t)v->nlist * per * sizeof(float))))
        return; /* searches compute each list's table instead */
    for (uint32_t c = 0; c < v->nlist; c++) {
        const float *cen = v->centroids + (size_t)c * ix->dim;
        float *t = v->precomp + (size_t)c * per;
        for (uint32_t m = 0; m < v->pq_m; m++) {
            const float *cb = v->codebooks + (size_t)m * KSUB * v->dsub;
            const float *cm = cen + (size_t)m * v->dsub;
            for (uint32_t j = 0; j < KSUB; j++) {
                const float *w = cb + (size_t)j * v->dsub;
                t[(size_t)m * KSUB + j] = ix_dot(w, w, v->dsub) + 2.0f * ix_dot(cm, w, v->dsub);
            }
        }
    }
}

static void scan_list(const ix_index *ix, const ix_list *l, const float *tab, float base,
                      ix_topk *t)
{
    uint32_t pq_m = ix->u.ivf.pq_m;
    float bound = ix_topk_bound(t);
    for (uint32_t i = 0; i < l->n; i++) {
        const uint8_t *code = l->codes + (size_t)i * pq_m;
        float d = base;
        for (uint32_t m = 0; m < pq_m; m++)
            d += tab[(size_t)m * KSUB + code[m]];
        if (d <= bound) {
            ix_topk_push(t, d, l->ids[i]);
            bound = ix_topk_bound(t);
        }
    }
}

int ix_ivfpq_search(ix_index *ix, const float *q, size_t nq, uint32_t k, ix_hit *out,
                    bb_error *err)
{
    ix_ivfpq *v = &ix->u.ivf;
    uint32_t np = v->nprobe < v->nlist ? v->nprobe : v->nlist;
    size_t tn = (size_t)v->pq_m * KSUB;
    float *tab = malloc(tn * sizeof *tab), *qtab = malloc(tn * sizeof *qtab);
    ix_hit *probe = malloc((size_t)np * sizeof *probe), *heap = malloc((size_t)k * sizeof *heap);
    if (!tab || !qtab || !probe || !heap) {
        free(tab);
        free(qtab);
        free(probe);
        free(heap);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory for a search", ix->who);
    }
    for (size_t i = 0; i < nq; i++) {
        const float *qi = q + i * ix->dim;
        ix_topk lists = {probe, 0, np}, best = {heap, 0, k};
        for (uint32_t c = 0; c < v->nlist; c++)
            ix_topk_push(&lists, ix_distance(by_ip(ix) ? IX_IP : IX_L2,
                                             v->centroids + (size_t)c * ix->dim, qi, ix->dim),
                         c);
        ix_topk_sort(&lists);
        if (by_ip(ix))
            query_table(ix, qi, -1.0f, tab);
        else if (v->precomp)
            query_table(ix, qi, -2.0f, qtab);
        for (uint32_t p = 0; p < lists.n; p++) {
            uint32_t c = (uint32_t)lists.v[p].id;
            if (!v->lists[c].n)
                continue;
            /* the list's own term: -q.c (1 - q.x for cosine), or |q - c|^2 */
            float base = lists.v[p].d + (ix->metric == IX_COSINE ? 1.0f : 0.0f);
            if (!by_ip(ix)) {
                list_table(ix, qi, c, qtab, tab);
                if (!v->precomp)
                    base = 0; /* the residual table holds the whole distance */
            }
            scan_list(ix, &v->lists[c], tab, base, &best);
        }
        ix_topk_sort(&best);
        for (uint32_t j = 0; j < k; j++)
            out[i * k + j] = j < best.n ? best.v[j] : (ix_hit){INFINITY, IX_NO_ID};
    }
    free(tab);
    free(qtab);
    free(probe);
    free(heap);
    return BB_OK;
}

void ix_ivfpq_free(ix_index *ix)
{
    ix_ivfpq *v = &ix->u.ivf;
    for (uint32_t c = 0; v->lists && c < v->nlist; c++) {
        free(v->lists[c].ids);
        free(v->lists[c].codes);
    }
    free(v->lists);
    free(v->centroids);
    free(v->codebooks);
    free(v->list_of);
    free(v->pos_of);
    free(v->precomp);
    v->precomp = NULL;
    v->lists = NULL;
    v->centroids = v->codebooks = NULL;
    v->list_of = v->pos_of = NULL;
    v->id_cap = 0;
    v->trained = false;
}
