/*
 * snapshot.c — an index's state as bytes, so a node restarted from its
 * snapshot answers the same queries with the same results.
 *
 * Layout, little-endian:
 *   "BBIX" u32 version=1, u8 kind, u8 metric, u32 dim, u64 n (ids given
 *   out), u64 live, then by kind:
 *   Flat   n*dim f32 vectors, n tombstone bytes
 *   Hnsw   u32 m, u32 entry, i32 max_level, 4 x u64 rng state,
 *          n level bytes, n tombstone bytes, n*dim f32 vectors,
 *          n*(1+2m) u32 level-0 links, then per node of level L > 0:
 *          L*(1+m) u32 upper links
 *   IvfPq  u32 nlist, u32 pq_m, u8 trained, [nlist*dim f32 centroids,
 *          pq_m*256*(dim/pq_m) f32 codebooks, per list: u32 count,
 *          count u64 ids, count*pq_m code bytes]
 * Search-time knobs (ef_search, nprobe) and the scratch are not state:
 * they come from the config.
 *
 * A snapshot is untrusted input. Restore reads into a fresh store, checks
 * every count against the bytes left before it allocates and every
 * structural fact a search relies on (links and ids in range, link counts
 * within m, levels consistent with the entry point, live counts, finite
 * vectors, the shape of the configured index), and only then replaces the
 * index's state; any failure leaves the index as it was. (A flipped
 * mantissa bit is still a valid index: bbd's snapshot file checksum is
 * what catches damage.)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bb/bytes.h"
#include "index.h"

#define MAGIC "BBIX"
#define VERSION 1u
#define MAX_LEVEL 31

/* ---- writing ------------------------------------------------------------------------ */

static void put_kind(bb_writer *w, const ix_index *ix)
{
    size_t n = ix->n, d = ix->dim;
    if (ix->kind == IX_FLAT) {
        bb_writer_put(w, ix->u.flat.x, n * d * sizeof(float));
        bb_writer_put(w, ix->u.flat.dead, n);
    } else if (ix->kind == IX_HNSW) {
        const ix_hnsw *h = &ix->u.hnsw;
        bb_writer_put_u32le(w, h->m);
        bb_writer_put_u32le(w, h->entry);
        bb_writer_put_u32le(w, (uint32_t)h->max_level);
        bb_writer_put(w, h->rng.s, sizeof h->rng.s);
        bb_writer_put(w, h->level, n);
        bb_writer_put(w, h->dead, n);
        bb_writer_put(w, h->x, n * d * sizeof(float));
        bb_writer_put(w, h->links0, n * (1 + h->m0) * sizeof(uint32_t));
        for (size_t i = 0; i < n; i++)
            bb_writer_put(w, h->upper[i], (size_t)h->level[i] * (1 + h->m) * sizeof(uint32_t));
    } else {
        const ix_ivfpq *v = &ix->u.ivf;
        bb_writer_put_u32le(w, v->nlist);
        bb_writer_put_u32le(w, v->pq_m);
        bb_writer_put_u8(w, v->trained);
        if (!v->trained)
            return;
        bb_writer_put(w, v->centroids, (size_t)v->nlist * d * sizeof(float));
        bb_writer_put(w, v->codebooks, (size_t)v->pq_m * IX_KSUB * v->dsub * sizeof(float));
        for (uint32_t c = 0; c < v->nlist; c++) {
            const ix_list *l = &v->lists[c];
            bb_writer_put_u32le(w, l->n);
            bb_writer_put(w, l->ids, (size_t)l->n * sizeof(uint64_t));
            bb_writer_put(w, l->codes, (size_t)l->n * v->pq_m);
        }
    }
}

int ix_snapshot(void *inst, uint8_t **out, size_t *out_len, bb_error *err)
{
    const ix_index *ix = inst;
    bb_writer w = {0};
    bb_writer_put(&w, MAGIC, 4);
    bb_writer_put_u32le(&w, VERSION);
    bb_writer_put_u8(&w, (uint8_t)ix->kind);
    bb_writer_put_u8(&w, (uint8_t)ix->metric);
    bb_writer_put_u32le(&w, ix->dim);
    bb_writer_put_u64le(&w, ix->n);
    bb_writer_put_u64le(&w, ix->live);
    put_kind(&w, ix);
    if (!bb_writer_take(&w, out, out_len))
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory for a snapshot", ix->who);
    return BB_OK;
}

/* ---- reading ------------------------------------------------------------------------ */

/* count items of size bytes, copied into a new array (NULL: truncated or OOM). */
static void *get_array(bb_reader *r, size_t count, size_t size)
{
    if (!bb_reader_has(r, count, size))
        return NULL;
    size_t bytes = count * size;
    void *p = malloc(bytes ? bytes : 1);
    if (p && !bb_reader_get(r, p, count * size)) {
        free(p);
        return NULL;
    }
    return p;
}

static const char *check_vectors(const float *x, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (!isfinite(x[i]))
            return "a stored vector has a non-finite value";
    return NULL;
}

/* Tombstones: 0 or 1, and live = the zeros. */
static const char *check_dead(const uint8_t *dead, size_t n, uint64_t live)
{
    uint64_t alive = 0;
    for (size_t i = 0; i < n; i++) {
        if (dead[i] > 1)
            return "a tombstone byte is neither 0 nor 1";
        alive += !dead[i];
    }
    return alive == live ? NULL : "the live count does not match the tombstones";
}

static const char *read_flat(bb_reader *r, ix_index *s)
{
    ix_flat *f = &s->u.flat;
    size_t n = s->n, d = s->dim;
    if (n && d > SIZE_MAX / n)
        return "the vector count overflows";
    if (!(f->x = get_array(r, n * d, sizeof(float))) || !(f->dead = get_array(r, n, 1)) ||
        !(f->norms = malloc((n ? n : 1) * sizeof(float))))
        return "truncated vectors (or out of memory)";
    f->cap = n;
    for (size_t i = 0; i < n; i++)
        f->norms[i] = ix_dot(f->x + i * d, f->x + i * d, s->dim);
    const char *why = check_vectors(f->x, n * d);
    return why ? why : check_dead(f->dead, n, s->live);
}

/* A node's links at one level: within m, to nodes that exist at that
 * level (a search walking level L follows only nodes that have it). */
static const char *check_links(const uint32_t *l, uint32_t max, uint64_t n,
                               const uint8_t *level, uint32_t at)
{
    if (l[0] > max)
        return "a node has more links than m allows";
    for (uint32_t j = 1; j <= l[0]; j++)
        if (l[j] >= n || level[l[j]] < at)
            return "a link points to a node that is not on its level";
    return NULL;
}

static const char *read_hnsw_graph(bb_reader *r, ix_index *s)
{
    ix_hnsw *h = &s->u.hnsw;
    size_t n = s->n, d = s->dim, l0 = 1 + h->m0;
    if (!(h->level = get_array(r, n, 1)) || !(h->dead = get_array(r, n, 1)) ||
        (n && d > SIZE_MAX / n) || !(h->x = get_array(r, n * d, sizeof(float))) ||
        !(h->links0 = get_array(r, n * l0, sizeof(uint32_t))) ||
        !(h->upper = calloc(n ? n : 1, sizeof *h->upper)) ||
        !(h->visited = calloc(n ? n : 1, sizeof *h->visited)))
        return "truncated graph (or out of memory)";
    h->cap = n;
    int top = -1;
    for (size_t i = 0; i < n; i++) {
        if (h->level[i] > MAX_LEVEL)
            return "a node's level is out of range";
        top = h->level[i] > top ? h->level[i] : top;
        const char *why = check_links(h->links0 + i * l0, h->m0, n, h->level, 0);
        if (why)
            return why;
        if (h->level[i] &&
            !(h->upper[i] = get_array(r, (size_t)h->level[i] * (1 + h->m), sizeof(uint32_t))))
            return "truncated upper links (or out of memory)";
        for (uint32_t lv = 0; lv < h->level[i]; lv++)
            if ((why = check_links(h->upper[i] + (size_t)lv * (1 + h->m), h->m, n, h->level,
                                   lv + 1)))
                return why;
    }
    if (top != h->max_level || (n && (h->entry >= n || h->level[h->entry] != top)))
        return "the entry point is not a node of the top level";
    const char *why = check_vectors(h->x, n * d);
    return why ? why : check_dead(h->dead, n, s->live);
}

static const char *read_hnsw(bb_reader *r, ix_index *s, bb_error *err)
{
    ix_hnsw *h = &s->u.hnsw;
    uint32_t m = 0, entry = 0, top = 0;
    if (!bb_reader_get(r, &m, 4) || !bb_reader_get(r, &entry, 4) || !bb_reader_get(r, &top, 4) ||
        !bb_reader_get(r, h->rng.s, sizeof h->rng.s))
        return "truncated header";
    if (m != h->m) {
        bb_error_set(err, BB_EVALIDATE, "%s: the snapshot was taken with m = %u, this slot "
                     "is configured with m = %u", s->who, m, h->m);
        return "";
    }
    if (s->n > UINT32_MAX - 1)
        return "too many nodes";
    h->entry = entry;
    h->max_level = (int32_t)top;
    return read_hnsw_graph(r, s);
}

/* The lists; every id given out once at most, live = the entries. */
static const char *read_lists(bb_reader *r, ix_index *s)
{
    ix_ivfpq *v = &s->u.ivf;
    size_t n = s->n;
    if (!(v->lists = calloc(v->nlist, sizeof *v->lists)) ||
        !(v->list_of = malloc((n ? n : 1) * sizeof *v->list_of)) ||
        !(v->pos_of = malloc((n ? n : 1) * sizeof *v->pos_of)))
        return "out of memory";
    v->id_cap = n;
    memset(v->list_of, 0xff, n * sizeof *v->list_of);
    uint64_t entries = 0;
    for (uint32_t c = 0; c < v->nlist; c++) {
        ix_list *l = &v->lists[c];
        uint32_t cnt = 0;
        if (!bb_reader_get(r, &cnt, 4) || cnt > n || !(l->ids = get_array(r, cnt, sizeof(uint64_t))) ||
            !(l->codes = get_array(r, cnt, v->pq_m)))
            return "truncated lists (or out of memory)";
        l->n = l->cap = cnt;
        for (uint32_t i = 0; i < cnt; i++) {
            uint64_t id = l->ids[i];
            if (id >= n || v->list_of[id] != UINT32_MAX)
                return "a list holds an id out of range or twice";
            v->list_of[id] = c;
            v->pos_of[id] = i;
        }
        entries += cnt;
    }
    return entries == s->live ? NULL : "the live count does not match the lists";
}

static const char *read_ivfpq(bb_reader *r, ix_index *s, bb_error *err)
{
    ix_ivfpq *v = &s->u.ivf;
    uint32_t nlist = 0, pq_m = 0;
    uint8_t trained = 0;
    if (!bb_reader_get(r, &nlist, 4) || !bb_reader_get(r, &pq_m, 4) || !bb_reader_get(r, &trained, 1) ||
        trained > 1)
        return "truncated header";
    if (nlist != v->nlist || pq_m != v->pq_m) {
        bb_error_set(err, BB_EVALIDATE, "%s: the snapshot was taken with nlist = %u, pq_m = "
                     "%u; this slot is configured with nlist = %u, pq_m = %u",
                     s->who, nlist, pq_m, v->nlist, v->pq_m);
        return "";
    }
    if (!trained)
        return s->n ? "vectors in an untrained index" : NULL;
    if (!s->dim || s->dim % pq_m || s->dim / pq_m > IX_MAX_DSUB)
        return "the dimension does not split into pq_m sub-vectors";
    v->dsub = s->dim / pq_m;
    if (!(v->centroids = get_array(r, (size_t)nlist * s->dim, sizeof(float))) ||
        !(v->codebooks = get_array(r, (size_t)pq_m * IX_KSUB * v->dsub, sizeof(float))))
        return "truncated quantizers (or out of memory)";
    v->trained = true;
    const char *why = check_vectors(v->centroids, (size_t)nlist * s->dim);
    if (!why)
        why = check_vectors(v->codebooks, (size_t)pq_m * IX_KSUB * v->dsub);
    if (why)
        return why;
    ix_ivfpq_prepare(s);
    return read_lists(r, s);
}

static void free_store(ix_index *s)
{
    if (s->kind == IX_FLAT)
        ix_flat_free(s);
    else if (s->kind == IX_HNSW)
        ix_hnsw_free(s);
    else
        ix_ivfpq_free(s);
}

/* A copy of ix's configuration with an empty store. */
static void blank_like(const ix_index *ix, ix_index *s)
{
    *s = *ix;
    s->n = s->live = 0;
    if (ix->kind == IX_FLAT) {
        memset(&s->u.flat, 0, sizeof s->u.flat);
    } else if (ix->kind == IX_HNSW) {
        ix_hnsw h = ix->u.hnsw;
        memset(&s->u.hnsw, 0, sizeof s->u.hnsw);
        s->u.hnsw.m = h.m;
        s->u.hnsw.ef_construction = h.ef_construction;
        s->u.hnsw.ef_search = h.ef_search;
        ix_hnsw_init(s);
    } else {
        ix_ivfpq v = ix->u.ivf;
        memset(&s->u.ivf, 0, sizeof s->u.ivf);
        s->u.ivf.nlist = v.nlist;
        s->u.ivf.pq_m = v.pq_m;
        s->u.ivf.nprobe = v.nprobe;
        s->u.ivf.iters = v.iters;
        s->u.ivf.max_train = v.max_train;
    }
}

static const char *read_header(bb_reader *r, const ix_index *ix, ix_index *s)
{
    uint8_t kind = 0, metric = 0;
    uint32_t dim = 0;
    if (!bb_reader_get(r, &kind, 1) || !bb_reader_get(r, &metric, 1) || !bb_reader_get(r, &dim, 4) ||
        !bb_reader_get(r, &s->n, 8) || !bb_reader_get(r, &s->live, 8))
        return "truncated header";
    if (kind != ix->kind)
        return "it is another kind of index";
    if (metric != ix->metric)
        return "it was taken with another metric";
    if (dim > IX_MAX_DIM || (ix->dim && dim && dim != ix->dim))
        return "its dimension differs from the configured one";
    if (s->n > ix->max_vectors || s->live > s->n || (s->n && !dim))
        return "its counts are out of range (max_vectors)";
    s->dim = dim ? dim : ix->dim;
    return NULL;
}

int ix_restore(void *inst, const uint8_t *data, size_t len, bb_error *err)
{
    ix_index *ix = inst;
    if (ix->kind == IX_IVFPQ && ix->u.ivf.job)
        return bb_error_set(err, BB_ESTATE, "%s: restore while a Train is running", ix->who);
    bb_reader r;
    bb_reader_init(&r, data, len);
    char magic[4];
    uint32_t version = 0;
    if (!bb_reader_get(&r, magic, 4) || memcmp(magic, MAGIC, 4) || !bb_reader_get(&r, &version, 4) ||
        version != VERSION)
        return bb_error_set(err, BB_EDECODE, "%s: not an index snapshot (or version %u, not "
                            "%u)", ix->who, version, VERSION);
    ix_index s;
    blank_like(ix, &s);
    bb_error kerr = {0};
    const char *why = read_header(&r, ix, &s);
    if (!why)
        why = ix->kind == IX_FLAT ? read_flat(&r, &s)
              : ix->kind == IX_HNSW ? read_hnsw(&r, &s, &kerr)
                                    : read_ivfpq(&r, &s, &kerr);
    if (!why && r.pos != len)
        why = "stray bytes after the end";
    if (why) {
        free_store(&s);
        if (kerr.code)
            return bb_error_set(err, kerr.code, "%s", kerr.msg);
        return bb_error_set(err, BB_EDECODE, "%s: snapshot refused: %s (at byte %zu of %zu)",
                            ix->who, why, r.pos, len);
    }
    free_store(ix);
    *ix = s;
    return BB_OK;
}
