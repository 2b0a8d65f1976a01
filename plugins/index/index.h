/*
 * index.h — internal interface of the index plugin (index::Flat,
 * index::Hnsw, index::IvfPq; ROLES.md Part 7).
 *
 * Every index holds f32 vectors of one dimension under dense u64 ids: the
 * index assigns them in Add order (0, 1, 2, ...) and never reuses one, so
 * an id is also the vector's position in the Flat and Hnsw stores and in
 * the IvfPq id table. Remove makes a tombstone (Flat, Hnsw: the vector
 * stays, searches skip it) or takes the code out of its list (IvfPq).
 *
 * Distances are "smaller is nearer" for every metric: squared L2, the
 * negated inner product, and 1 - cosine similarity (cosine stores unit
 * vectors and searches by inner product).
 *
 * Everything here runs on the engine thread except IvfPq training, whose
 * k-means runs on the host's worker pool over the job's own copies
 * (ivfpq.c) and is committed on the engine thread.
 */
#ifndef BB_INDEX_INTERNAL_H
#define BB_INDEX_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bb/plugin.h>

#include "plugins/common/plugin_rng.h"

#define IX_MAX_DIM 65536u           /* a wider vector is refused */
#define IX_MAX_K 4096u              /* the largest Search k */
#define IX_MAX_DSUB 256u            /* IvfPq: the widest sub-vector (dim / pq_m) */
#define IX_KSUB 256u                /* IvfPq: codewords per sub-space (8-bit codes) */
#define IX_PRECOMP_MAX (64u << 20)  /* IvfPq: largest precomputed L2 table, bytes */
#define IX_NO_ID UINT64_MAX         /* a result slot with no neighbour */

typedef enum ix_kind { IX_FLAT = 0, IX_HNSW = 1, IX_IVFPQ = 2 } ix_kind;
typedef enum ix_metric { IX_L2 = 0, IX_IP = 1, IX_COSINE = 2 } ix_metric;

/* One candidate: distance and id (or internal position). */
typedef struct ix_hit {
    float d;
    uint64_t id;
} ix_hit;

/* ---- distances (distance.c) ------------------------------------------------ */
float ix_l2sq(const float *a, const float *b, uint32_t dim);
float ix_dot(const float *a, const float *b, uint32_t dim);
/* The metric's distance between a stored vector and a (prepared) query. */
static inline float ix_distance(ix_metric m, const float *a, const float *b, uint32_t dim)
{
    if (m == IX_L2)
        return ix_l2sq(a, b, dim);
    float ip = ix_dot(a, b, dim);
    return m == IX_IP ? -ip : 1.0f - ip;
}
/* Scale v to unit length; false when its norm is zero. */
bool ix_normalize(float *v, uint32_t dim);

/* ---- heaps (topk.c): min-heap or max-heap on distance, ties by id ------------------- */
void ix_heap_push(ix_hit *v, size_t *n, ix_hit h, bool max);
ix_hit ix_heap_pop(ix_hit *v, size_t *n, bool max); /* *n > 0 */
/* top-k: a bounded max-heap */
typedef struct ix_topk {
    ix_hit *v; /* capacity k */
    uint32_t n, k;
} ix_topk;
/* Worst kept distance, +inf while fewer than k are kept. */
float ix_topk_bound(const ix_topk *t);
void ix_topk_push(ix_topk *t, float d, uint64_t id);
/* Sort ascending (distance, then id) in place; the heap is spent. */
void ix_topk_sort(ix_topk *t);

/* ---- k-means (kmeans.c): Lloyd's iterations, BLAS assignment --------------------- */
/* Fits k centroids (out: k x dim) to x (n x dim), n >= k, seeded draws.
 * stop, when set, is polled between iterations (a cancelled job). */
int ix_kmeans(const float *x, size_t n, uint32_t dim, uint32_t k, uint32_t iters, uint64_t seed,
              float *out, const atomic_bool *stop);
/* For each of n rows of x, the nearest of k centroids c (k x dim): by L2,
 * or by the largest inner product when by_ip (ties: the lowest index).
 * dist_out (may be NULL) gets ||c||^2 - 2 x.c, or -x.c. BB_OK / BB_ENOMEM. */
int ix_assign(const float *x, size_t n, const float *c, uint32_t k, uint32_t dim, bool by_ip,
              uint32_t *out, float *dist_out);

/* ---- the stores ---------------------------------------------------------------- */
typedef struct ix_flat {
    float *x;        /* n x dim */
    float *norms;    /* L2: squared norms, for the BLAS form of the distance */
    uint8_t *dead;   /* tombstones, one byte per id */
    size_t cap;
} ix_flat;

typedef struct ix_hnsw {
    uint32_t m, m0;          /* links per node above level 0 / at level 0 (2m) */
    uint32_t ef_construction, ef_search;
    double level_mult;       /* 1 / ln(m) */
    float *x;                /* n x dim */
    uint32_t *links0;        /* n x (1 + m0): count, then neighbours */
    uint32_t **upper;        /* per node: level x (1 + m), or NULL at level 0 */
    uint8_t *level;
    uint8_t *dead;
    size_t cap;
    uint32_t entry;
    int max_level;           /* -1 while empty */
    bbp_rng rng;             /* level draws (kept in the snapshot) */
    /* search scratch: visited marks by epoch, two heaps */
    uint32_t *visited;
    uint32_t epoch;
    ix_hit *cand, *best;
    size_t heap_cap;
} ix_hnsw;

typedef struct ix_list {
    uint64_t *ids;
    uint8_t *codes; /* n x pq_m */
    uint32_t n, cap;
} ix_list;

typedef struct ix_ivfpq {
    uint32_t nlist, pq_m, dsub, nprobe, iters;
    uint64_t max_train;
    bool trained;
    float *centroids;   /* nlist x dim */
    float *codebooks;   /* pq_m x 256 x dsub */
    float *precomp;     /* L2: nlist x pq_m x 256 list terms (derived; NULL: none) */
    ix_list *lists;     /* nlist */
    uint32_t *list_of;  /* per id: its list, UINT32_MAX when removed */
    uint32_t *pos_of;   /* per id: its place in the list */
    size_t id_cap;
    struct ix_train_job *job; /* a Train in progress (one at a time) */
} ix_ivfpq;

typedef struct ix_index {
    ix_kind kind;
    const char *type_name;
    char who[160];            /* "index::Hnsw at slot 'index'" */
    ix_metric metric;
    uint32_t dim;             /* 0 until the first Train or Add when not configured */
    uint64_t max_vectors;     /* ids ever assigned */
    uint64_t n;               /* ids assigned so far */
    uint64_t live;            /* not removed */
    uint64_t seed;
    union {
        ix_flat flat;
        ix_hnsw hnsw;
        ix_ivfpq ivf;
    } u;
} ix_index;

/* A checked batch of vectors: rows x dim, borrowed or owned (cosine). */
typedef struct ix_rows {
    const float *x;
    size_t rows;
    float *owned;
} ix_rows;

/* index.c: the input of op `what` as rows of the index's dimension, every
 * value finite (cosine: normalized copies, zero norm refused). Sets an
 * unset dimension when adopt is true. */
int ix_rows_from(ix_index *ix, const bb_value *v, const char *what, bool adopt, ix_rows *out,
                 bb_error *err);
void ix_rows_free(ix_rows *r);

/* ---- per kind (flat.c, hnsw.c, ivfpq.c) ----------------------------------------------
 * add: rows already checked; ids ix->n .. ix->n + rows - 1; counts what it
 *   stored in ix->n and ix->live (Flat, IvfPq: all or nothing; Hnsw: a
 *   vector is stored and counted before it is linked, so an allocation
 *   failure mid-batch keeps the vectors before it).
 * search: nq queries, k' results each into out (nq x k'), IX_NO_ID-padded
 *   (IvfPq: trained, checked by the caller).
 * remove: ids known live (checked by the caller). */
int ix_flat_add(ix_index *ix, const float *x, size_t rows, bb_error *err);
int ix_flat_search(ix_index *ix, const float *q, size_t nq, uint32_t k, ix_hit *out,
                   bb_error *err);
void ix_flat_free(ix_index *ix);

int ix_hnsw_init(ix_index *ix);
int ix_hnsw_add(ix_index *ix, const float *x, size_t rows, bb_error *err);
int ix_hnsw_search(ix_index *ix, const float *q, size_t nq, uint32_t k, ix_hit *out,
                   bb_error *err);
void ix_hnsw_free(ix_index *ix);

/* Derive the search tables of trained quantizers (after Train, restore);
 * without memory for them, searches compute each list's table instead. */
void ix_ivfpq_prepare(ix_index *ix);
/* BB_ESTATE naming op `what` while the quantizers are not trained. */
int ix_ivfpq_check_trained(const ix_index *ix, const char *what, bb_error *err);
int ix_ivfpq_add(ix_index *ix, const float *x, size_t rows, bb_error *err);
int ix_ivfpq_search(ix_index *ix, const float *q, size_t nq, uint32_t k, ix_hit *out,
                    bb_error *err);
void ix_ivfpq_remove(ix_index *ix, uint64_t id);
void ix_ivfpq_free(ix_index *ix);
/* Stop and forget a running Train (destroy). */
void ix_ivfpq_cancel(ix_index *ix);
/* Train: validates and starts the k-means job (NOW when it finished inline,
 * LATER when the pool has it). samples is referenced by the job; rows are
 * taken (freed on every path). */
bb_dispatch_result ix_ivfpq_train(ix_index *ix, bb_ctx *ctx, const bb_dispatch_call *call,
                                  const bb_value *samples, ix_rows *rows, bb_value **outputs,
                                  bb_error *err);

/* ---- snapshot.c ---------------------------------------------------------------------- */
int ix_snapshot(void *inst, uint8_t **out, size_t *out_len, bb_error *err);
int ix_restore(void *inst, const uint8_t *data, size_t len, bb_error *err);
/* realloc *p from old_n to new_n items of size bytes, zeroing the new
 * ones; false (and *p untouched) on overflow or OOM. */
bool ix_grow(void **p, size_t old_n, size_t new_n, size_t size);
/* The capacity to grow to for need items: doubling from cap, at least 64. */
size_t ix_next_cap(size_t cap, size_t need);

#endif
