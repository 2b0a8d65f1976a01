/*
 * flat.c — index::Flat: exact search by scanning every live vector.
 *
 * One query is a matrix-vector product (cblas_sgemv) over the store; a
 * batch is blocked matrix products (cblas_sgemm) of QUERY_BLOCK queries
 * by BASE_BLOCK stored vectors, so each block of inner products stays in
 * cache while its rows feed the queries' top-k heaps (the form FAISS's
 * IndexFlat uses). L2 is ||x||^2 - 2 q.x + ||q||^2 with the stored
 * squared norms kept beside the vectors.
 *
 * Remove leaves a tombstone: ids stay positions, the scan skips it.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"

#define QUERY_BLOCK 4096
#define BASE_BLOCK 1024

int ix_flat_add(ix_index *ix, const float *x, size_t rows, bb_error *err)
{
    ix_flat *f = &ix->u.flat;
    size_t need = (size_t)ix->n + rows, d = ix->dim;
    if (need > f->cap) {
        size_t cap = ix_next_cap(f->cap, need);
        if (cap > SIZE_MAX / d / sizeof(float) || !ix_grow((void **)&f->x, f->cap * d, cap * d, sizeof(float)) ||
            !ix_grow((void **)&f->norms, f->cap, cap, sizeof(float)) ||
            !ix_grow((void **)&f->dead, f->cap, cap, 1))
            return bb_error_set(err, BB_ENOMEM, "%s: out of memory for %zu vectors", ix->who,
                                need);
        f->cap = cap;
    }
    memcpy(f->x + ix->n * d, x, rows * d * sizeof(float));
    for (size_t i = 0; i < rows; i++) {
        f->norms[ix->n + i] = ix_dot(x + i * d, x + i * d, ix->dim);
        f->dead[ix->n + i] = 0;
    }
    ix->n += rows;
    ix->live += rows;
    return BB_OK;
}

/* Rows b0..b0+nb of one query's block of inner products into its top-k:
 * L2 is qnorm + ||x||^2 - 2 q.x (clamped at 0: the expanded form can
 * round below it for near-duplicates), ip -q.x, cosine 1 - q.x. The
 * metric and the tombstone test are hoisted out of the loop: this is
 * the whole scan's per-vector cost. */
static void scan_block(const ix_index *ix, const float *row, size_t b0, size_t nb, float qnorm,
                       ix_topk *t)
{
    const ix_flat *f = &ix->u.flat;
    const uint8_t *dead = ix->live < ix->n ? f->dead + b0 : NULL;
    const float *xn = f->norms + b0;
    float bound = ix_topk_bound(t);
    if (ix->metric == IX_L2) {
        for (size_t j = 0; j < nb; j++) {
            float d = qnorm + xn[j] - 2.0f * row[j];
            if (d <= bound && !(dead && dead[j])) {
                ix_topk_push(t, d > 0 ? d : 0, b0 + j);
                bound = ix_topk_bound(t);
            }
        }
        return;
    }
    float off = ix->metric == IX_COSINE ? 1.0f : 0.0f;
    for (size_t j = 0; j < nb; j++) {
        float d = off - row[j];
        if (d <= bound && !(dead && dead[j])) {
            ix_topk_push(t, d, b0 + j);
            bound = ix_topk_bound(t);
        }
    }
}

static void emit(ix_topk *t, uint32_t k, ix_hit *out)
{
    ix_topk_sort(t);
    for (uint32_t j = 0; j < k; j++)
        out[j] = j < t->n ? t->v[j] : (ix_hit){INFINITY, IX_NO_ID};
}

int ix_flat_search(ix_index *ix, const float *q, size_t nq, uint32_t k, ix_hit *out,
                   bb_error *err)
{
    const ix_flat *f = &ix->u.flat;
    size_t n = ix->n, d = ix->dim, qb = nq < QUERY_BLOCK ? nq : QUERY_BLOCK;
    size_t bb = n < BASE_BLOCK ? n : BASE_BLOCK;
    float *ip = malloc((qb ? qb : 1) * (bb ? bb : 1) * sizeof *ip);
    ix_hit *heaps = malloc((qb ? qb : 1) * (k ? k : 1) * sizeof *heaps);
    float *qn = malloc((qb ? qb : 1) * sizeof *qn);
    ix_topk *t = malloc((qb ? qb : 1) * sizeof *t);
    if (!ip || !heaps || !qn || !t) {
        free(ip);
        free(heaps);
        free(qn);
        free(t);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory for a search", ix->who);
    }
    for (size_t q0 = 0; q0 < nq; q0 += qb) {
        size_t nqb = nq - q0 < qb ? nq - q0 : qb;
        for (size_t i = 0; i < nqb; i++) {
            t[i] = (ix_topk){heaps + i * k, 0, k};
            qn[i] = ix_dot(q + (q0 + i) * d, q + (q0 + i) * d, ix->dim);
        }
        for (size_t b0 = 0; b0 < n; b0 += bb) {
            size_t nb = n - b0 < bb ? n - b0 : bb;
            if (nqb == 1)
                cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)nb, (int)d, 1.0f, f->x + b0 * d,
                            (int)d, q + q0 * d, 1, 0.0f, ip, 1);
            else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nqb, (int)nb, (int)d,
                            1.0f, q + q0 * d, (int)d, f->x + b0 * d, (int)d, 0.0f, ip, (int)nb);
            for (size_t i = 0; i < nqb; i++)
                scan_block(ix, ip + i * nb, b0, nb, qn[i], &t[i]);
        }
        for (size_t i = 0; i < nqb; i++)
            emit(&t[i], k, out + (q0 + i) * k);
    }
    free(ip);
    free(heaps);
    free(qn);
    free(t);
    return BB_OK;
}

void ix_flat_free(ix_index *ix)
{
    free(ix->u.flat.x);
    free(ix->u.flat.norms);
    free(ix->u.flat.dead);
    memset(&ix->u.flat, 0, sizeof ix->u.flat);
}
