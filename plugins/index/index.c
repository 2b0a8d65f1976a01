/*
 * index.c — the index plugin: three Index types (ROLES.md Part 7).
 *
 *   index::Flat   exact: every live vector scanned (BLAS), L2 / ip / cosine
 *   index::Hnsw   approximate: a navigable small-world graph (hnsw.c)
 *   index::IvfPq  approximate and compact: inverted lists of PQ codes over
 *                 a trained coarse quantizer (ivfpq.c)
 *
 * Ops (ai.bytesandbrains.role.index):
 *   Train(samples f32 [n, d]) -> trigger    IvfPq fits its quantizers on the
 *       host's worker pool; Flat and Hnsw only check the samples (and take
 *       their dimension)
 *   Add(vec f32 [d] or [n, d]) -> cmd       CommandId = the first id given;
 *       the rows get consecutive ids
 *   Search(query f32 [d] or [n, d]; k) -> results
 *       Composite(ids u64 [k'] or [n, k'], distances f32 [k'] or [n, k']),
 *       nearest first, k' = min(k, live vectors); a slot an approximate
 *       index could not fill has id 2^64-1 and distance +inf
 *   Remove(id u64/i64 tensor, or a U64) -> cmd   CommandId = ids removed;
 *       all or nothing: an unknown or already removed id fails the op
 *
 * Inputs are untrusted: dtype, rank and dimension are checked, non-finite
 * values are refused (naming row and column), and every count is bounded
 * (max_vectors, IX_MAX_K, IX_MAX_DIM) before anything is allocated.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_type.h"

/* ---- configuration ---------------------------------------------------------------- */

#define COMMON_CONFIG                                                                        \
    {"dim", "int", "0", "vector dimension; 0: taken from the first Train or Add"},           \
    {"metric", "string", "\"l2\"",                                                           \
     "\"l2\" (distance = squared Euclidean), \"ip\" (inner product; distance = -ip) or "     \
     "\"cosine\" (distance = 1 - cosine similarity; vectors are stored normalized)"},        \
    {"max_vectors", "int", "16777216",                                                       \
     "most ids the index gives out (ids are never reused; an Add beyond it fails)"},         \
    {"seed", "int", "null", "seed of the index's random draws (default: the host's seed)"}

static const bb_config_decl FLAT_CONFIG[] = {COMMON_CONFIG};
static const bb_config_decl HNSW_CONFIG[] = {
    COMMON_CONFIG,
    {"m", "int", "16", "links per node and level (2m at level 0); HNSW's M"},
    {"ef_construction", "int", "200", "candidates searched when a vector is inserted"},
    {"ef_search", "int", "64",
     "candidates searched per query (at least k): higher is slower and finds more"},
};
static const bb_config_decl IVFPQ_CONFIG[] = {
    COMMON_CONFIG,
    {"nlist", "int", "256", "inverted lists (k-means centroids of the coarse quantizer)"},
    {"pq_m", "int", "8", "sub-vectors per code, one byte each; must divide the dimension"},
    {"nprobe", "int", "8", "lists scanned per query: higher is slower and finds more"},
    {"train_iterations", "int", "10", "k-means iterations of Train"},
    {"max_train_samples", "int", "65536",
     "Train fits on at most this many samples (drawn from the seed)"},
};

static const char *const METRICS[] = {"l2", "ip", "cosine"};

static int config_kind(ix_index *ix, const bbp_config *cfg, bb_error *err)
{
    int rc = BB_OK;
    if (ix->kind == IX_HNSW) {
        int64_t m = 0, efc = 0, efs = 0;
        if (!(rc = bbp_config_int(cfg, "m", 2, 128, &m, err)) &&
            !(rc = bbp_config_int(cfg, "ef_construction", 1, 1 << 16, &efc, err)) &&
            !(rc = bbp_config_int(cfg, "ef_search", 1, 1 << 16, &efs, err))) {
            ix->u.hnsw.m = (uint32_t)m;
            ix->u.hnsw.ef_construction = (uint32_t)efc;
            ix->u.hnsw.ef_search = (uint32_t)efs;
            rc = ix_hnsw_init(ix);
        }
    } else if (ix->kind == IX_IVFPQ) {
        int64_t nlist = 0, pq_m = 0, nprobe = 0, iters = 0, max_train = 0;
        if (!(rc = bbp_config_int(cfg, "nlist", 1, 1 << 20, &nlist, err)) &&
            !(rc = bbp_config_int(cfg, "pq_m", 1, 4096, &pq_m, err)) &&
            !(rc = bbp_config_int(cfg, "nprobe", 1, 1 << 20, &nprobe, err)) &&
            !(rc = bbp_config_int(cfg, "train_iterations", 1, 1000, &iters, err)) &&
            !(rc = bbp_config_int(cfg, "max_train_samples", 256, (int64_t)1 << 32, &max_train,
                                  err))) {
            ix->u.ivf.nlist = (uint32_t)nlist;
            ix->u.ivf.pq_m = (uint32_t)pq_m;
            ix->u.ivf.nprobe = (uint32_t)nprobe;
            ix->u.ivf.iters = (uint32_t)iters;
            ix->u.ivf.max_train = (uint64_t)max_train;
            if (max_train < nlist)
                rc = bb_error_set(err, BB_ECONFIG, "%s: max_train_samples (%lld) is below nlist "
                                  "(%lld)", ix->who, (long long)max_train, (long long)nlist);
        }
    }
    return rc;
}

static int create_kind(ix_kind kind, const char *name, const bb_config_decl *decls,
                       uint32_t n_decls, const bb_create_args *args, void **out, bb_error *err)
{
    bbp_config cfg;
    int rc = bbp_config_load(&cfg, args, name, decls, n_decls, err);
    if (rc)
        return rc;
    ix_index *ix = calloc(1, sizeof *ix);
    if (!ix) {
        bbp_config_free(&cfg);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", name);
    }
    ix->kind = kind;
    ix->type_name = name;
    snprintf(ix->who, sizeof ix->who, "%s", cfg.who);
    int64_t dim = 0, maxv = 0;
    int metric = 0;
    double seed = 0;
    bool has_seed = false;
    if (!(rc = bbp_config_int(&cfg, "dim", 0, IX_MAX_DIM, &dim, err)) &&
        !(rc = bbp_config_enum(&cfg, "metric", METRICS, 3, &metric, err)) &&
        !(rc = bbp_config_int(&cfg, "max_vectors", 1, UINT32_MAX - 1, &maxv, err)) &&
        !(rc = bbp_config_number(&cfg, "seed", true, 0, 9007199254740992.0, &seed, &has_seed,
                                 err))) {
        ix->dim = (uint32_t)dim;
        ix->metric = (ix_metric)metric;
        ix->max_vectors = (uint64_t)maxv;
        ix->seed = has_seed ? (uint64_t)seed : args->seed;
        rc = config_kind(ix, &cfg, err);
    }
    bbp_config_free(&cfg);
    if (rc) {
        free(ix);
        return rc;
    }
    *out = ix;
    return BB_OK;
}

#define CREATE_FN(fn, kind, name, decls)                                                  \
    static int fn(const bb_create_args *args, void **out, bb_error *err)                  \
    {                                                                                     \
        return create_kind(kind, name, decls, BBP_COUNT(decls), args, out, err);          \
    }
CREATE_FN(create_flat, IX_FLAT, "index::Flat", FLAT_CONFIG)
CREATE_FN(create_hnsw, IX_HNSW, "index::Hnsw", HNSW_CONFIG)
CREATE_FN(create_ivfpq, IX_IVFPQ, "index::IvfPq", IVFPQ_CONFIG)

static void ix_destroy(void *inst)
{
    ix_index *ix = inst;
    if (ix->kind == IX_FLAT) {
        ix_flat_free(ix);
    } else if (ix->kind == IX_HNSW) {
        ix_hnsw_free(ix);
    } else {
        ix_ivfpq_cancel(ix);
        ix_ivfpq_free(ix);
    }
    free(ix);
}

/* ---- inputs ------------------------------------------------------------------------ */

void ix_rows_free(ix_rows *r)
{
    free(r->owned);
    r->owned = NULL;
}

int ix_rows_from(ix_index *ix, const bb_value *v, const char *what, bool adopt, ix_rows *out,
                 bb_error *err)
{
    memset(out, 0, sizeof *out);
    if (!v || v->type->kind != BB_VK_TENSOR || v->u.tensor.dtype != BB_DT_FLOAT ||
        v->u.tensor.ndim < 1 || v->u.tensor.ndim > 2)
        return bb_error_set(err, BB_ETYPE, "%s: %s takes an f32 tensor [dim] or [rows, dim]",
                            ix->who, what);
    const int64_t *dims = v->u.tensor.dims;
    int64_t cols = dims[v->u.tensor.ndim - 1], rows = v->u.tensor.ndim == 2 ? dims[0] : 1;
    if (rows < 1 || cols < 1 || cols > (int64_t)IX_MAX_DIM)
        return bb_error_set(err, BB_EINVAL, "%s: %s got %lld rows of %lld floats (need at least "
                            "one row of 1..%u)",
                            ix->who, what, (long long)rows, (long long)cols, IX_MAX_DIM);
    if (!ix->dim && !adopt)
        return bb_error_set(err, BB_ESTATE, "%s: %s before any vector: the dimension is not "
                            "known yet (set dim, or Train or Add first)", ix->who, what);
    if (ix->dim && cols != (int64_t)ix->dim)
        return bb_error_set(err, BB_EINVAL, "%s: %s got vectors of dimension %lld, the index "
                            "holds dimension %u", ix->who, what, (long long)cols, ix->dim);
    const float *x = bb_tensor_f32(v);
    size_t n = (size_t)rows * (size_t)cols;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return bb_error_set(err, BB_EINVAL, "%s: %s: row %zu, column %zu is %s (non-finite "
                                "values are refused)", ix->who, what, i / (size_t)cols,
                                i % (size_t)cols, isnan(x[i]) ? "NaN" : "infinite");
    out->x = x;
    out->rows = (size_t)rows;
    if (ix->metric == IX_COSINE) {
        if (!(out->owned = malloc(n * sizeof(float))))
            return bb_error_set(err, BB_ENOMEM, "%s: out of memory", ix->who);
        memcpy(out->owned, x, n * sizeof(float));
        for (size_t r = 0; r < (size_t)rows; r++) {
            if (!ix_normalize(out->owned + r * (size_t)cols, (uint32_t)cols)) {
                ix_rows_free(out);
                return bb_error_set(err, BB_EINVAL, "%s: %s: row %zu has zero length (cosine "
                                    "needs a direction)", ix->who, what, r);
            }
        }
        out->x = out->owned;
    }
    ix->dim = (uint32_t)cols;
    return BB_OK;
}

/* ---- ops ----------------------------------------------------------------------------- */

static int op_add(ix_index *ix, const bb_value *vec, bb_value **out, bb_error *err)
{
    ix_rows r;
    uint32_t had_dim = ix->dim;
    uint64_t first = ix->n;
    int rc = ix->kind == IX_IVFPQ ? ix_ivfpq_check_trained(ix, "Add", err) : BB_OK;
    if (!rc)
        rc = ix_rows_from(ix, vec, "Add", true, &r, err);
    if (rc)
        return rc;
    if (r.rows > ix->max_vectors - ix->n) {
        rc = bb_error_set(err, BB_EFULL, "%s: Add of %zu vectors passes max_vectors (%llu ids "
                          "given out of %llu)", ix->who, r.rows, (unsigned long long)ix->n,
                          (unsigned long long)ix->max_vectors);
    } else if (ix->kind == IX_FLAT) {
        rc = ix_flat_add(ix, r.x, r.rows, err);
    } else if (ix->kind == IX_HNSW) {
        rc = ix_hnsw_add(ix, r.x, r.rows, err);
    } else {
        rc = ix_ivfpq_add(ix, r.x, r.rows, err);
    }
    ix_rows_free(&r);
    if (rc) {
        if (!ix->n)
            ix->dim = had_dim;
        return rc;
    }
    if (!(*out = bb_value_u64(&BB_TYPE_COMMAND_ID, first)))
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", ix->who);
    return BB_OK;
}

static bb_value *result_tensor(int32_t dtype, bool batch, size_t nq, uint32_t k)
{
    int64_t dims[2] = {(int64_t)nq, (int64_t)k};
    return batch ? bb_value_tensor_new(dtype, 2, dims) : bb_value_tensor_new(dtype, 1, dims + 1);
}

static int op_search(ix_index *ix, const bb_dispatch_call *call, const bb_value *query,
                     bb_value **out, bb_error *err)
{
    int64_t k = call->node ? bb_node_attr_int(call->node, "k", 10) : 10;
    if (k < 1 || k > (int64_t)IX_MAX_K)
        return bb_error_set(err, BB_EINVAL, "%s: Search k = %lld is outside [1, %u]", ix->who,
                            (long long)k, IX_MAX_K);
    ix_rows r;
    int rc = ix->kind == IX_IVFPQ ? ix_ivfpq_check_trained(ix, "Search", err) : BB_OK;
    if (!rc)
        rc = ix_rows_from(ix, query, "Search", false, &r, err);
    if (rc)
        return rc;
    uint32_t kk = (uint64_t)k < ix->live ? (uint32_t)k : (uint32_t)ix->live;
    bool batch = query->u.tensor.ndim == 2;
    bb_value *ids = result_tensor(BB_DT_UINT64, batch, r.rows, kk);
    bb_value *dist = result_tensor(BB_DT_FLOAT, batch, r.rows, kk);
    size_t n_hits = r.rows * kk;
    ix_hit *hits = malloc((n_hits ? n_hits : 1) * sizeof *hits);
    if (!ids || !dist || !hits)
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory for %zu x %u results", ix->who,
                          r.rows, kk);
    else if (kk && ix->kind == IX_FLAT)
        rc = ix_flat_search(ix, r.x, r.rows, kk, hits, err);
    else if (kk && ix->kind == IX_HNSW)
        rc = ix_hnsw_search(ix, r.x, r.rows, kk, hits, err);
    else if (kk && ix->kind == IX_IVFPQ)
        rc = ix_ivfpq_search(ix, r.x, r.rows, kk, hits, err);
    ix_rows_free(&r);
    if (!rc) {
        uint64_t *pi = (uint64_t *)(void *)ids->u.tensor.data;
        float *pd = bb_tensor_f32(dist);
        for (size_t i = 0; i < r.rows * kk; i++) {
            pi[i] = hits[i].id;
            pd[i] = hits[i].d;
        }
        bb_value *items[2] = {ids, dist};
        ids = dist = NULL;
        if (!(*out = bb_value_list(&BB_TYPE_COMPOSITE, items, 2)))
            rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", ix->who);
    }
    free(hits);
    bb_value_unref(ids);
    bb_value_unref(dist);
    return rc;
}

static bool is_live(const ix_index *ix, uint64_t id)
{
    if (id >= ix->n)
        return false;
    if (ix->kind == IX_FLAT)
        return !ix->u.flat.dead[id];
    if (ix->kind == IX_HNSW)
        return !ix->u.hnsw.dead[id];
    return ix->u.ivf.list_of[id] != UINT32_MAX;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The ids a Remove names: a u64 or non-negative i64 tensor, or a U64. */
static int remove_ids(const ix_index *ix, const bb_value *v, uint64_t **ids, size_t *n,
                      bb_error *err)
{
    if (v && v->type->kind == BB_VK_U64) {
        if (!(*ids = malloc(sizeof **ids)))
            return bb_error_set(err, BB_ENOMEM, "%s: out of memory", ix->who);
        (*ids)[0] = v->u.u64;
        *n = 1;
        return BB_OK;
    }
    if (!v || v->type->kind != BB_VK_TENSOR ||
        (v->u.tensor.dtype != BB_DT_UINT64 && v->u.tensor.dtype != BB_DT_INT64))
        return bb_error_set(err, BB_ETYPE, "%s: Remove takes a u64 or i64 tensor of ids",
                            ix->who);
    size_t cnt = bb_tensor_numel(v);
    if (cnt == SIZE_MAX || cnt > ix->n)
        return bb_error_set(err, BB_EINVAL, "%s: Remove of %zu ids, the index gave out %llu",
                            ix->who, cnt, (unsigned long long)ix->n);
    if (!(*ids = malloc((cnt ? cnt : 1) * sizeof **ids)))
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", ix->who);
    memcpy(*ids, v->u.tensor.data, cnt * sizeof **ids);
    for (size_t i = 0; v->u.tensor.dtype == BB_DT_INT64 && i < cnt; i++) {
        if ((int64_t)(*ids)[i] < 0) {
            int64_t bad = (int64_t)(*ids)[i];
            free(*ids);
            return bb_error_set(err, BB_EINVAL, "%s: Remove: id %lld is negative", ix->who,
                                (long long)bad);
        }
    }
    *n = cnt;
    return BB_OK;
}

static int op_remove(ix_index *ix, const bb_value *v, bb_value **out, bb_error *err)
{
    uint64_t *ids = NULL;
    size_t n = 0;
    int rc = remove_ids(ix, v, &ids, &n, err);
    if (rc)
        return rc;
    qsort(ids, n, sizeof *ids, cmp_u64);
    for (size_t i = 0; i < n && !rc; i++) {
        if (ids[i] >= ix->n)
            rc = bb_error_set(err, BB_ENOTFOUND, "%s: Remove: unknown id %llu (ids 0..%llu "
                              "were given out)", ix->who, (unsigned long long)ids[i],
                              (unsigned long long)ix->n - (ix->n > 0));
        else if (!is_live(ix, ids[i]) || (i && ids[i] == ids[i - 1]))
            rc = bb_error_set(err, BB_ENOTFOUND, "%s: Remove: id %llu is already removed",
                              ix->who, (unsigned long long)ids[i]);
    }
    for (size_t i = 0; i < n && !rc; i++) { /* all checked: nothing fails from here */
        if (ix->kind == IX_FLAT)
            ix->u.flat.dead[ids[i]] = 1;
        else if (ix->kind == IX_HNSW)
            ix->u.hnsw.dead[ids[i]] = 1;
        else
            ix_ivfpq_remove(ix, ids[i]);
        ix->live--;
    }
    free(ids);
    if (!rc && !(*out = bb_value_u64(&BB_TYPE_COMMAND_ID, n)))
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", ix->who);
    return rc;
}

static bb_dispatch_result op_train(ix_index *ix, bb_ctx *ctx, const bb_dispatch_call *call,
                                   const bb_value *samples, bb_value **outputs, bb_error *err)
{
    ix_rows r;
    uint32_t had_dim = ix->dim;
    if (ix_rows_from(ix, samples, "Train", true, &r, err))
        return BB_DISPATCH_NOW_ERR;
    if (ix->kind == IX_IVFPQ) {
        bb_dispatch_result res = ix_ivfpq_train(ix, ctx, call, samples, &r, outputs, err);
        if (res == BB_DISPATCH_NOW_ERR && !ix->n && !ix->u.ivf.trained)
            ix->dim = had_dim;
        return res; /* the job took the rows */
    }
    ix_rows_free(&r); /* Flat and Hnsw learn nothing: the samples fixed the dimension */
    if (!(outputs[0] = bb_value_trigger())) {
        bb_error_set(err, BB_ENOMEM, "%s: out of memory", ix->who);
        return BB_DISPATCH_NOW_ERR;
    }
    return BB_DISPATCH_NOW_OK;
}

/* ---- dispatch ---------------------------------------------------------------------- */

enum { OP_ADD, OP_REMOVE, OP_SEARCH, OP_TRAIN, N_OPS };

static bb_dispatch_result ix_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                      bb_value **outputs, bb_error *err)
{
    ix_index *ix = inst;
    const bb_value *in0 = call->n_inputs > 0 ? call->inputs[0] : NULL;
    int rc;
    if (call->n_outputs < 1)
        rc = bb_error_set(err, BB_EINVAL, "%s: %s needs an output", ix->who, call->op_type);
    else if (call->op_index == OP_TRAIN)
        return op_train(ix, ctx, call, in0, outputs, err);
    else if (call->op_index == OP_ADD)
        rc = op_add(ix, in0, &outputs[0], err);
    else if (call->op_index == OP_SEARCH)
        rc = op_search(ix, call, in0, &outputs[0], err);
    else if (call->op_index == OP_REMOVE)
        rc = op_remove(ix, in0, &outputs[0], err);
    else
        rc = bb_error_set(err, BB_EUNSUPPORTED, "%s: no op %s", ix->who, call->op_type);
    return rc == BB_OK ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
}

/* ---- declarations ------------------------------------------------------------------ */

static const bb_port_decl VEC_IN[] = {{.name = "vec", .type = &BB_TYPE_TENSOR_F32}};
static const bb_port_decl ID_IN[] = {{.name = "id", .type = &BB_TYPE_TENSOR_U64}};
static const bb_port_decl QUERY_IN[] = {{.name = "query", .type = &BB_TYPE_TENSOR_F32}};
static const bb_port_decl SAMPLES_IN[] = {{.name = "samples", .type = &BB_TYPE_TENSOR_F32}};
static const bb_port_decl CMD_OUT[] = {{.name = "cmd", .type = &BB_TYPE_COMMAND_ID}};
static const bb_port_decl RESULTS_OUT[] = {{.name = "results", .type = &BB_TYPE_COMPOSITE}};
static const bb_port_decl TRIGGER_OUT[] = {{.name = "trigger", .type = &BB_TYPE_TRIGGER}};

static const bb_op_decl OPS[N_OPS] = {
    [OP_ADD] = {"Add", VEC_IN, 1, CMD_OUT, 1,
                "add f32 [d] or [n, d]; the rows get consecutive ids, cmd = the first"},
    [OP_REMOVE] = {"Remove", ID_IN, 1, CMD_OUT, 1,
                   "remove ids (u64 / i64 tensor or U64); all or nothing; cmd = ids removed"},
    [OP_SEARCH] = {"Search", QUERY_IN, 1, RESULTS_OUT, 1,
                   "the k nearest (attribute k) of each query: Composite(ids u64, distances "
                   "f32), [k'] or [n, k'], nearest first"},
    [OP_TRAIN] = {"Train", SAMPLES_IN, 1, TRIGGER_OUT, 1,
                  "fit the index to samples f32 [n, d] (IvfPq: quantizers, on the worker "
                  "pool; Flat, Hnsw: fixes the dimension)"},
};

static const bb_opset_decl OPSETS[] = {{"ai.bytesandbrains.role.index", 1, OPS, N_OPS}};

#define IX_TYPE(sym, name, docstr, createfn, decls)                                    \
    static const bb_component_type sym = {                                             \
        BBP_TYPE_ABI,                                                                  \
        .type_name = name,                                                             \
        .role = BB_ROLE_INDEX,                                                         \
        .doc = docstr,                                                                 \
        .opsets = OPSETS,                                                              \
        .n_opsets = BBP_COUNT(OPSETS),                                                 \
        .config = decls,                                                               \
        .n_config = BBP_COUNT(decls),                                                  \
        .create = createfn,                                                            \
        .destroy = ix_destroy,                                                         \
        .dispatch = ix_dispatch,                                                       \
        .snapshot = ix_snapshot,                                                       \
        .restore = ix_restore,                                                         \
    }

IX_TYPE(FLAT, "index::Flat", "exact nearest neighbours by scanning every vector (BLAS); L2, "
        "inner product or cosine", create_flat, FLAT_CONFIG);
IX_TYPE(HNSW, "index::Hnsw", "approximate nearest neighbours on a hierarchical navigable "
        "small-world graph; remove leaves tombstones", create_hnsw, HNSW_CONFIG);
IX_TYPE(IVFPQ, "index::IvfPq", "approximate nearest neighbours over product-quantized codes "
        "in inverted lists; Train fits the quantizers", create_ivfpq, IVFPQ_CONFIG);

static const bb_component_type *const TYPES[] = {&FLAT, &HNSW, &IVFPQ};

BBP_PLUGIN_ENTRY("index", TYPES)
