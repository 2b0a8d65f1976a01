/*
 * pq.c — codec::ProductQuantization (Jégou, Douze and Schmid, 2011):
 * tensor_f32 -> tensor_u8. A tensor is read as rows of D = its last
 * dimension; each row is cut into M sub-vectors of D / M floats, and each
 * sub-vector is sent as the index (one byte) of its nearest centroid in that
 * sub-space's codebook of up to 256 centroids, which TrainCodebook fits by
 * k-means (kmeans.c) on sample rows. A row of D floats becomes M bytes.
 *
 * The decoder needs the encoder's codebooks: every code carries the
 * codebooks' digest (FNV-1a-64 of their bytes) and a node whose codebooks
 * differ refuses it. The same samples, seed and config give the same
 * codebooks on every node; the codebooks are state (kept in the snapshot).
 *
 * Payload after the frame header (codec.h):
 *   varint M, varint centroids, u64 digest, u8 code[rows x M]
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "plugins/common/plugin_rng.h"

typedef struct pq_codec {
    codec base;
    uint32_t m, ksub, iterations;
    int64_t max_train_rows;
    uint64_t seed;
    uint32_t dim;     /* D of the trained codebooks; 0 before TrainCodebook */
    float *codebooks; /* [m][ksub][dim / m] */
    uint64_t digest;
} pq_codec;

static size_t book_floats(const pq_codec *q, uint32_t dim)
{
    return (size_t)q->ksub * dim; /* m sub-spaces x ksub x (dim / m) */
}

static uint64_t digest_of(const float *books, size_t n)
{
    return bb_fnv1a64(books, n * sizeof *books);
}

/* D and the row count of an f32 tensor, D = its last dimension. */
static int rows_of(const pq_codec *q, const char *op, uint32_t ndim, const int64_t *dims,
                   uint32_t *dim, size_t *rows, bb_error *err)
{
    if (ndim == 0 || dims[ndim - 1] == 0)
        return bb_error_set(err, BB_ETYPE, "%s: %s needs rows of at least one element",
                            q->base.who, op);
    if (dims[ndim - 1] > UINT32_MAX || dims[ndim - 1] % q->m)
        return bb_error_set(err, BB_ETYPE,
                            "%s: %s got rows of %lld floats, which do not split into m = %u "
                            "sub-vectors",
                            q->base.who, op, (long long)dims[ndim - 1], q->m);
    *dim = (uint32_t)dims[ndim - 1];
    *rows = bb_shape_numel(ndim - 1, dims);
    return BB_OK;
}

/* At most max_train_rows rows of x (a seeded sample when there are more):
 * x itself, or a new copy in *owned. */
static const float *train_rows(const pq_codec *q, const float *x, size_t *rows, uint32_t dim,
                               float **owned)
{
    *owned = NULL;
    if (*rows <= (size_t)q->max_train_rows)
        return x;
    uint32_t *order = malloc(*rows * sizeof *order);
    float *pick = malloc((size_t)q->max_train_rows * dim * sizeof *pick);
    if (order && pick) {
        bbp_rng rng;
        bbp_rng_seed(&rng, q->seed ^ 0x5eed);
        for (size_t i = 0; i < *rows; i++)
            order[i] = (uint32_t)i;
        bbp_rng_shuffle_u32(&rng, order, *rows);
        for (int64_t i = 0; i < q->max_train_rows; i++)
            memcpy(pick + (size_t)i * dim, x + (size_t)order[i] * dim, dim * sizeof *pick);
        *rows = (size_t)q->max_train_rows;
        *owned = pick;
    } else {
        free(pick);
    }
    free(order);
    return *owned;
}

static int pq_train(codec *c, const bb_value *samples, bb_error *err)
{
    pq_codec *q = (pq_codec *)c;
    const bb_tensor_view *v = &samples->u.tensor;
    uint32_t dim = 0;
    size_t rows = 0;
    int rc = rows_of(q, "TrainCodebook", v->ndim, v->dims, &dim, &rows, err);
    if (rc)
        return rc;
    if (rows == 0)
        return bb_error_set(err, BB_EINVAL, "%s: TrainCodebook got no sample rows", c->who);
    size_t bad = codec_first_nonfinite(bb_tensor_f32(samples), bb_tensor_numel(samples));
    if (bad < bb_tensor_numel(samples))
        return bb_error_set(err, BB_EINVAL, "%s: TrainCodebook: element %zu is not finite",
                            c->who, bad);
    float *owned, *books = malloc(book_floats(q, dim) * sizeof *books);
    const float *x = books ? train_rows(q, bb_tensor_f32(samples), &rows, dim, &owned) : NULL;
    uint32_t sub = dim / q->m;
    for (uint32_t j = 0; x && !rc && j < q->m; j++)
        rc = codec_kmeans(x + (size_t)j * sub, rows, dim, sub, q->ksub, q->iterations,
                          q->seed + j, books + (size_t)j * q->ksub * sub);
    if (books && x)
        free(owned);
    if (!books || !x || rc) {
        free(books);
        return codec_oom(c, err);
    }
    free(q->codebooks);
    q->codebooks = books;
    q->dim = dim;
    q->digest = digest_of(books, book_floats(q, dim));
    return BB_OK;
}

static int untrained(const pq_codec *q, const char *op, bb_error *err)
{
    return bb_error_set(err, BB_ESTATE, "%s: %s before TrainCodebook: there are no codebooks",
                        q->base.who, op);
}

static int pq_encode(codec *c, const bb_value *t, bb_value **code, bb_error *err)
{
    pq_codec *q = (pq_codec *)c;
    const bb_tensor_view *v = &t->u.tensor;
    uint32_t dim = 0;
    size_t rows = 0;
    if (!q->dim)
        return untrained(q, "Compress", err);
    int rc = rows_of(q, "Compress", v->ndim, v->dims, &dim, &rows, err);
    if (!rc && dim != q->dim)
        rc = bb_error_set(err, BB_ETYPE, "%s: Compress got rows of %u floats; the codebooks "
                          "are for %u", c->who, dim, q->dim);
    if (rc)
        return rc;
    bb_writer w;
    *code = codec_frame_begin(CODEC_FMT_PQ, v->ndim, v->dims,
                              bb_uvarint_size(q->m) + bb_uvarint_size(q->ksub) + 8 + rows * q->m,
                              &w);
    if (!*code)
        return codec_oom(c, err);
    bb_writer_put_uvarint(&w, q->m);
    bb_writer_put_uvarint(&w, q->ksub);
    bb_writer_put_u64le(&w, q->digest);
    uint8_t *codes = rows ? bb_writer_grow(&w, rows * q->m) : NULL; /* written in place */
    assert(!w.failed && w.len == w.cap); /* sized exactly */
    uint32_t sub = dim / q->m;
    const float *x = bb_tensor_f32(t);
    for (size_t r = 0; r < rows; r++)
        for (uint32_t j = 0; j < q->m; j++)
            codes[r * q->m + j] = (uint8_t)codec_nearest(
                x + r * dim + (size_t)j * sub, q->codebooks + (size_t)j * q->ksub * sub, q->ksub,
                sub, NULL);
    return BB_OK;
}

static int pq_decode(const codec *c, const bb_value *code, bb_value **t, bb_error *err)
{
    const pq_codec *q = (const pq_codec *)c;
    codec_shape sh;
    bb_reader r;
    uint64_t m = 0, ksub = 0, digest = 0;
    int rc = codec_frame_open(c, code, CODEC_FMT_PQ, &sh, &r, err);
    if (!rc)
        rc = codec_get_varint(c, &r, "M", &m, err);
    if (!rc)
        rc = codec_get_varint(c, &r, "the centroid count", &ksub, err);
    if (!rc && !bb_reader_u64le(&r, &digest))
        rc = codec_malformed(c, &r, "the codebook digest is truncated", err);
    if (rc)
        return rc;
    if (!q->dim)
        return untrained(q, "Decompress", err);
    if (m != q->m || ksub != q->ksub || digest != q->digest || sh.ndim == 0 ||
        sh.dims[sh.ndim - 1] != q->dim)
        return bb_error_set(err, BB_EDECODE,
                            "%s: the code was made with other codebooks (M %llu, %llu "
                            "centroids, digest %016llx, rows of %lld) than this node's (M %u, "
                            "%u centroids, digest %016llx, rows of %u)",
                            c->who, (unsigned long long)m, (unsigned long long)ksub,
                            (unsigned long long)digest,
                            sh.ndim ? (long long)sh.dims[sh.ndim - 1] : 0LL, q->m, q->ksub,
                            (unsigned long long)q->digest, q->dim);
    size_t rows = sh.numel / q->dim;
    const uint8_t *codes = NULL;
    if (bb_reader_left(&r) != rows * q->m || (rows && !bb_reader_view(&r, rows * q->m, &codes)))
        return bb_error_set(err, BB_EDECODE,
                            "%s: malformed code: %zu code bytes for %zu rows of M = %u",
                            c->who, bb_reader_left(&r), rows, q->m);
    if (!(*t = bb_value_tensor_new(BB_DT_FLOAT, sh.ndim, sh.dims)))
        return codec_oom(c, err);
    uint32_t sub = q->dim / q->m;
    float *x = bb_tensor_f32(*t);
    for (size_t i = 0; i < rows * q->m; i++) {
        uint8_t k = codes[i];
        if (k >= q->ksub) {
            bb_value_unref(*t);
            *t = NULL;
            bb_reader_fail(&r, (size_t)(codes + i - r.data), BB_EPARSE, "centroid index");
            return codec_malformed(c, &r, "a centroid index beyond the codebook", err);
        }
        size_t j = i % q->m;
        memcpy(x + (i / q->m) * q->dim + j * sub, q->codebooks + (j * q->ksub + k) * sub,
               sub * sizeof *x);
    }
    return BB_OK;
}

/* ---- state: u32 D (0: untrained), u32 M, u32 centroids, u64 digest, f32 books ---------- */

static void pq_save(const codec *c, bb_writer *w)
{
    const pq_codec *q = (const pq_codec *)c;
    bb_writer_put_u32le(w, q->dim);
    bb_writer_put_u32le(w, q->m);
    bb_writer_put_u32le(w, q->ksub);
    bb_writer_put_u64le(w, q->digest);
    if (q->dim)
        bb_writer_put(w, q->codebooks, book_floats(q, q->dim) * sizeof(float));
}

static int pq_load(codec *c, bb_reader *r, bb_error *err)
{
    pq_codec *q = (pq_codec *)c;
    uint32_t dim = 0, m = 0, ksub = 0;
    uint64_t digest = 0;
    if (!bb_reader_u32le(r, &dim) || !bb_reader_u32le(r, &m) || !bb_reader_u32le(r, &ksub) ||
        !bb_reader_u64le(r, &digest))
        return bb_error_set(err, BB_EDECODE, "%s: the snapshot is truncated", c->who);
    if (m != q->m || ksub != q->ksub || (dim && (dim % m || dim > c->max_elements)))
        return bb_error_set(err, BB_EDECODE,
                            "%s: the snapshot's codebooks are M %u x %u centroids for rows of "
                            "%u; this codec is configured for M %u x %u",
                            c->who, m, ksub, dim, q->m, q->ksub);
    size_t n = dim ? book_floats(q, dim) : 0;
    if (!bb_reader_has(r, n, sizeof(float)))
        return bb_error_set(err, BB_EDECODE, "%s: the snapshot's codebooks are truncated",
                            c->who);
    float *books = n ? malloc(n * sizeof *books) : NULL;
    if (n && !books)
        return codec_oom(c, err);
    bb_reader_get(r, books, n * sizeof *books);
    if (dim && digest_of(books, n) != digest) {
        free(books);
        return bb_error_set(err, BB_EDECODE, "%s: the snapshot's codebooks fail their digest",
                            c->who);
    }
    free(q->codebooks);
    q->codebooks = books;
    q->dim = dim;
    q->digest = dim ? digest : 0;
    return BB_OK;
}

/* ---- config ------------------------------------------------------------------------------ */

static int pq_init(codec *c, const bbp_config *cfg, uint64_t host_seed, bb_error *err)
{
    pq_codec *q = (pq_codec *)c;
    int64_t m = 0, ksub = 0, iters = 0, seed = 0;
    (void)host_seed; /* both ends must agree: the seed is config, not per node */
    int rc = bbp_config_int(cfg, "m", 1, 65536, &m, err);
    if (!rc)
        rc = bbp_config_int(cfg, "centroids", 1, 256, &ksub, err);
    if (!rc)
        rc = bbp_config_int(cfg, "iterations", 1, 10000, &iters, err);
    if (!rc)
        rc = bbp_config_int(cfg, "max_train_rows", 1, INT64_C(1) << 32, &q->max_train_rows, err);
    if (!rc)
        rc = bbp_config_int(cfg, "seed", 0, INT64_C(9007199254740992), &seed, err);
    q->m = (uint32_t)m;
    q->ksub = (uint32_t)ksub;
    q->iterations = (uint32_t)iters;
    q->seed = (uint64_t)seed;
    return rc;
}

static void pq_fini(codec *c)
{
    free(((pq_codec *)c)->codebooks);
}

static const bb_config_decl PQ_CONFIG[] = {
    {"m", "int", "8", "sub-vectors per row (the row length must be a multiple of m)"},
    {"centroids", "int", "256", "centroids per sub-space codebook (1 to 256: one byte a code)"},
    {"iterations", "int", "20", "k-means iterations of TrainCodebook"},
    {"max_train_rows", "int", "8192",
     "TrainCodebook fits on at most this many sample rows (a seeded sample of larger sets)"},
    {"seed", "int", "0",
     "k-means seed: the same samples, seed and config give the same codebooks on every node"},
    CODEC_COMMON_DECLS,
};

static const codec_kind PQ_KIND = {
    .type_name = "codec::ProductQuantization",
    .code_type = &BB_TYPE_TENSOR_U8,
    .size = sizeof(pq_codec),
    .config = PQ_CONFIG,
    .n_config = BBP_COUNT(PQ_CONFIG),
    .init = pq_init,
    .fini = pq_fini,
    .train = pq_train,
    .encode = pq_encode,
    .decode = pq_decode,
    .save = pq_save,
    .load = pq_load,
};

CODEC_COMPONENT(CODEC_TYPE_PQ, "codec::ProductQuantization", PQ_KIND, PQ_CONFIG,
                CODEC_OPSETS_U8,
                "f32 -> u8 product quantization: rows cut into m sub-vectors, each sent as "
                "its nearest of up to 256 k-means centroids (TrainCodebook fits the "
                "codebooks; kept in the snapshot, checked by digest on decode)");
