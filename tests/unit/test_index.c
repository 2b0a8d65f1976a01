/*
 * Unit tests for the index plugin (index::Flat, index::Hnsw, index::IvfPq),
 * loaded from the build's index.so and driven through its dispatch entry:
 *
 *  - Flat is exact for L2, inner product and cosine (against a naive
 *    double-precision scan), for one query [d] and a batch [n, d];
 *  - Hnsw and IvfPq reach a stated recall@10 against Flat on clustered
 *    data; Remove leaves no removed id in any answer, and the answers
 *    after it still meet the bar;
 *  - the refusals name what is wrong: wrong dimension, NaN / inf (row and
 *    column), wrong dtype, k out of range, a zero vector under cosine,
 *    unknown / removed / repeated ids on Remove, Add and Search before an
 *    IvfPq is trained, too few training samples, max_vectors, bad config;
 *  - IvfPq's Train on a worker pool (a stand-in host that holds the work):
 *    LATER, Search and a second Train refused meanwhile, the completion
 *    carries a Trigger once the work and its done() ran; an index
 *    destroyed with its Train still queued frees the job (ASan, valgrind);
 *  - snapshot / restore: a restored index answers the same queries with
 *    the same ids and bit-identical distances, and goes on the same way
 *    (an Hnsw's level draws are part of its state); a snapshot of one
 *    kind, metric or shape is refused by another; every truncation and
 *    every single-byte change of a snapshot either restores a consistent
 *    index or is refused with a message (never a crash: ASan runs this).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/engine_fixtures.h"
#include "support/plugin_fixtures.h"
#include "support/test_rng.h"

/* ---- helpers --------------------------------------------------------------------- */

typedef struct ix_t {
    const bb_component_type *t;
    void *inst;
} ix_t;

static ix_t make(const char *type, const char *config)
{
    ix_t a = {pfx_type(type), NULL};
    assert_non_null(a.t);
    bb_error err = {0};
    a.inst = pfx_create(a.t, "index", config, NULL, 7, NULL, &err);
    if (!a.inst)
        fail_msg("create %s %s: %s", type, config ? config : "", err.msg);
    return a;
}

static void drop(ix_t *a)
{
    a->t->destroy(a->inst);
    a->inst = NULL;
}

static double gauss(void)
{
    double u1 = ((double)(rnd() >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(rnd() >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* n x d points around `clusters` centres, each centre spread over a few
 * directions (data with a low intrinsic dimension, like embeddings). */
static float *clustered(size_t n, uint32_t d, uint32_t clusters, uint64_t seed)
{
    g_rng = seed | 1;
    float *centre = malloc((size_t)clusters * d * sizeof *centre);
    float *dir = malloc((size_t)clusters * 4 * d * sizeof *dir);
    float *x = malloc(n * d * sizeof *x);
    assert_true(centre && dir && x);
    for (size_t i = 0; i < (size_t)clusters * d; i++)
        centre[i] = (float)(4.0 * gauss());
    for (size_t i = 0; i < (size_t)clusters * 4 * d; i++)
        dir[i] = (float)gauss();
    for (size_t i = 0; i < n; i++) {
        size_t c = below(clusters);
        double w[4] = {gauss(), gauss(), gauss(), gauss()};
        for (uint32_t j = 0; j < d; j++) {
            double v = centre[c * d + j] + 0.1 * gauss();
            for (int t = 0; t < 4; t++)
                v += 0.5 * w[t] * dir[(c * 4 + t) * d + j];
            x[i * d + j] = (float)v;
        }
    }
    free(centre);
    free(dir);
    return x;
}

static bb_value *rows_value(const float *x, size_t rows, uint32_t d)
{
    int64_t dims[2] = {(int64_t)rows, d};
    return pfx_tensor(x, 2, dims);
}

static bb_value *vec_value(const float *x, uint32_t d)
{
    int64_t dim = d;
    return pfx_tensor(x, 1, &dim);
}

/* One op; takes the input reference. Returns the status, *out the output. */
static int call(ix_t *a, const char *op, const bb_node *node, bb_value *in, bb_value **out,
                bb_error *err)
{
    bb_value *o = NULL;
    memset(err, 0, sizeof *err);
    int rc = pfx_call(a->t, a->inst, NULL, op, node, &in, 1, &o, 1, err);
    bb_value_unref(in);
    if (out)
        *out = o;
    else
        bb_value_unref(o);
    return rc;
}

static uint64_t add_ok(ix_t *a, const float *x, size_t rows, uint32_t d)
{
    bb_value *cmd;
    bb_error err;
    if (call(a, "Add", NULL, rows_value(x, rows, d), &cmd, &err))
        fail_msg("Add: %s", err.msg);
    assert_ptr_equal(cmd->type, &BB_TYPE_COMMAND_ID);
    uint64_t first = cmd->u.u64;
    bb_value_unref(cmd);
    return first;
}

static void train_ok(ix_t *a, const float *x, size_t rows, uint32_t d)
{
    bb_value *t;
    bb_error err;
    if (call(a, "Train", NULL, rows_value(x, rows, d), &t, &err))
        fail_msg("Train: %s", err.msg);
    assert_ptr_equal(t->type, &BB_TYPE_TRIGGER);
    bb_value_unref(t);
}

/* A Search node carrying attribute k (owned by the returned model). */
static bb_model *search_node(int64_t k, const bb_node **node)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "F", "q", "r");
    bb_node *n = fx_op(m, f, "ai.bytesandbrains.role.index", "Search", "q", "r");
    fx_int(m, n, "k", k);
    *node = n;
    return m;
}

/* Search the batch q (nq x d) for k: ids and distances (malloc'd). */
static void search_ok(ix_t *a, const float *q, size_t nq, uint32_t d, int64_t k, uint64_t **ids,
                      float **dist, uint32_t *k_out)
{
    const bb_node *node;
    bb_model *m = search_node(k, &node);
    bb_value *res;
    bb_error err;
    if (call(a, "Search", node, rows_value(q, nq, d), &res, &err))
        fail_msg("Search: %s", err.msg);
    bb_model_free(m);
    assert_ptr_equal(res->type, &BB_TYPE_COMPOSITE);
    assert_int_equal(res->u.list.n, 2);
    const bb_value *vi = res->u.list.items[0], *vd = res->u.list.items[1];
    assert_int_equal(vi->u.tensor.dtype, BB_DT_UINT64);
    assert_int_equal(vd->u.tensor.dtype, BB_DT_FLOAT);
    assert_int_equal(vi->u.tensor.ndim, 2);
    assert_int_equal(vi->u.tensor.dims[0], (int64_t)nq);
    uint32_t kk = (uint32_t)vi->u.tensor.dims[1];
    *ids = malloc(nq * kk * sizeof **ids + 1);
    *dist = malloc(nq * kk * sizeof **dist + 1);
    memcpy(*ids, vi->u.tensor.data, nq * kk * sizeof **ids);
    memcpy(*dist, vd->u.tensor.data, nq * kk * sizeof **dist);
    *k_out = kk;
    bb_value_unref(res);
}

/* Fraction of the exact top-k ids (from Flat) found in got's top-k. */
static double recall(const uint64_t *exact, const uint64_t *got, size_t nq, uint32_t k)
{
    size_t hit = 0;
    for (size_t i = 0; i < nq; i++)
        for (uint32_t a = 0; a < k; a++)
            for (uint32_t b = 0; b < k; b++)
                hit += got[i * k + b] == exact[i * k + a] && exact[i * k + a] != UINT64_MAX;
    return (double)hit / (double)(nq * k);
}

static void expect_error(int rc, const bb_error *err, const char *needle)
{
    assert_int_not_equal(rc, BB_OK);
    if (!strstr(err->msg, needle))
        fail_msg("error \"%s\" does not say \"%s\"", err->msg, needle);
}

/* ---- Flat is exact --------------------------------------------------------------- */

static double ref_dist(const char *metric, const float *a, const float *b, uint32_t d)
{
    double l2 = 0, ip = 0, na = 0, nb = 0;
    for (uint32_t j = 0; j < d; j++) {
        l2 += ((double)a[j] - b[j]) * ((double)a[j] - b[j]);
        ip += (double)a[j] * b[j];
        na += (double)a[j] * a[j];
        nb += (double)b[j] * b[j];
    }
    if (!strcmp(metric, "l2"))
        return l2;
    if (!strcmp(metric, "ip"))
        return -ip;
    return 1.0 - ip / sqrt(na * nb);
}

static void flat_metric(const char *metric)
{
    enum { N = 600, D = 24, NQ = 30, K = 7 };
    float *x = clustered(N + NQ, D, 12, 11), *q = x + (size_t)N * D;
    char cfg[64];
    snprintf(cfg, sizeof cfg, "{\"metric\": \"%s\"}", metric);
    ix_t a = make("index::Flat", cfg);
    assert_int_equal(add_ok(&a, x, N / 2, D), 0);
    assert_int_equal(add_ok(&a, x + (N / 2) * D, N - N / 2, D), N / 2);
    uint64_t *ids;
    float *dist;
    uint32_t k;
    search_ok(&a, q, NQ, D, K, &ids, &dist, &k);
    assert_int_equal(k, K);
    for (size_t i = 0; i < NQ; i++) {
        double *all = malloc(N * sizeof *all);
        for (size_t j = 0; j < N; j++)
            all[j] = ref_dist(metric, x + j * D, q + i * D, D);
        for (uint32_t r = 0; r < K; r++) {
            uint64_t id = ids[i * K + r];
            assert_true(id < N);
            /* the distance is the reference one, and nothing unreported is nearer */
            double want = all[id], tol = 1e-3 * (1.0 + fabs(want));
            if (fabs(dist[i * K + r] - want) > tol)
                fail_msg("%s query %zu rank %u: distance %g, reference %g", metric, i, r,
                         (double)dist[i * K + r], want);
            if (r)
                assert_true(dist[i * K + r] >= dist[i * K + r - 1]);
        }
        double worst = all[ids[i * K + K - 1]];
        size_t nearer = 0;
        for (size_t j = 0; j < N; j++)
            nearer += all[j] < worst - 1e-3 * (1.0 + fabs(worst));
        assert_true(nearer < K);
        free(all);
    }
    /* one query [d] answers [k] with the batch's first row */
    bb_value *res;
    bb_error err;
    assert_int_equal(call(&a, "Search", NULL, vec_value(q, D), &res, &err), BB_OK);
    const bb_value *vi = res->u.list.items[0];
    assert_int_equal(vi->u.tensor.ndim, 1);
    assert_int_equal(vi->u.tensor.dims[0], 10 < N ? 10 : N); /* default k without a node */
    assert_memory_equal(vi->u.tensor.data, ids, K * sizeof *ids);
    bb_value_unref(res);
    free(ids);
    free(dist);
    drop(&a);
    free(x);
}

static void test_index_flat_exact_l2(void **state) { (void)state; flat_metric("l2"); }
static void test_index_flat_exact_ip(void **state) { (void)state; flat_metric("ip"); }
static void test_index_flat_exact_cosine(void **state) { (void)state; flat_metric("cosine"); }

/* ---- approximate indexes against Flat --------------------------------------------- */

enum { AN = 4000, AD = 32, ANQ = 100, AK = 10 };

static uint64_t *exact_ids(const float *x, size_t n, const float *q, size_t nq,
                           const char *cfg)
{
    ix_t f = make("index::Flat", cfg);
    add_ok(&f, x, n, AD);
    uint64_t *ids;
    float *dist;
    uint32_t k;
    search_ok(&f, q, nq, AD, AK, &ids, &dist, &k);
    free(dist);
    drop(&f);
    return ids;
}

static void approx_recall(const char *type, const char *cfg, bool train, double bar)
{
    float *x = clustered(AN + ANQ, AD, 40, 21), *q = x + (size_t)AN * AD;
    uint64_t *exact = exact_ids(x, AN, q, ANQ, "{}");
    ix_t a = make(type, cfg);
    if (train)
        train_ok(&a, x, AN, AD);
    add_ok(&a, x, AN, AD);
    uint64_t *ids;
    float *dist;
    uint32_t k;
    search_ok(&a, q, ANQ, AD, AK, &ids, &dist, &k);
    double r = recall(exact, ids, ANQ, AK);
    printf("  %s %s recall@10 = %.3f (bar %.2f)\n", type, cfg, r, bar);
    assert_true(r >= bar);
    free(ids);
    free(dist);

    /* remove every third id: none comes back, recall against the new exact answer holds */
    size_t nrm = AN / 3;
    int64_t dim = (int64_t)nrm;
    bb_value *rm = bb_value_tensor_new(BB_DT_UINT64, 1, &dim), *cmd;
    for (size_t i = 0; i < nrm; i++)
        ((uint64_t *)(void *)rm->u.tensor.data)[i] = 3 * i;
    bb_error err;
    assert_int_equal(call(&a, "Remove", NULL, rm, &cmd, &err), BB_OK);
    assert_int_equal(cmd->u.u64, nrm);
    bb_value_unref(cmd);
    search_ok(&a, q, ANQ, AD, AK, &ids, &dist, &k);
    for (size_t i = 0; i < ANQ * AK; i++)
        assert_true(ids[i] == UINT64_MAX || ids[i] % 3 != 0 || ids[i] >= 3 * nrm);
    float *kept = malloc(AN * AD * sizeof *kept);
    uint64_t *map = malloc(AN * sizeof *map);
    size_t nk = 0;
    for (size_t i = 0; i < AN; i++) {
        if (i % 3 == 0 && i < 3 * nrm)
            continue;
        memcpy(kept + nk * AD, x + i * AD, AD * sizeof *kept);
        map[nk++] = i;
    }
    uint64_t *ex2 = exact_ids(kept, nk, q, ANQ, "{}");
    for (size_t i = 0; i < ANQ * AK; i++)
        ex2[i] = map[ex2[i]];
    double r2 = recall(ex2, ids, ANQ, AK);
    printf("  %s after removing %zu: recall@10 = %.3f\n", type, nrm, r2);
    assert_true(r2 >= bar);
    free(kept);
    free(map);
    free(ex2);
    free(ids);
    free(dist);
    free(exact);
    drop(&a);
    free(x);
}

static void test_index_hnsw_recall_and_tombstones(void **state)
{
    (void)state;
    approx_recall("index::Hnsw", "{\"m\": 12, \"ef_construction\": 100, \"ef_search\": 64}",
                  false, 0.95);
}

static void test_index_ivfpq_recall_and_remove(void **state)
{
    (void)state;
    approx_recall("index::IvfPq", "{\"nlist\": 32, \"pq_m\": 16, \"nprobe\": 8}", true, 0.85);
}

/* ---- refusals ------------------------------------------------------------------------ */

static void test_index_refuses_malformed_input(void **state)
{
    (void)state;
    ix_t a = make("index::Hnsw", "{\"dim\": 4, \"max_vectors\": 5}");
    bb_error err;
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    expect_error(call(&a, "Add", NULL, vec_value(v, 3), NULL, &err), &err,
                 "dimension 3, the index holds dimension 4");
    v[6] = NAN;
    expect_error(call(&a, "Add", NULL, rows_value(v, 2, 4), NULL, &err), &err,
                 "row 1, column 2 is NaN");
    v[6] = INFINITY;
    expect_error(call(&a, "Search", NULL, rows_value(v, 2, 4), NULL, &err), &err,
                 "row 1, column 2 is infinite");
    v[6] = 7;
    int64_t d4 = 4;
    bb_value *ints = bb_value_tensor_new(BB_DT_INT32, 1, &d4);
    expect_error(call(&a, "Add", NULL, ints, NULL, &err), &err, "takes an f32 tensor");
    assert_int_equal(add_ok(&a, v, 2, 4), 0);
    const bb_node *node;
    bb_model *m = search_node(0, &node);
    expect_error(call(&a, "Search", node, vec_value(v, 4), NULL, &err), &err,
                 "k = 0 is outside");
    bb_model_free(m);
    float four[16] = {0};
    expect_error(call(&a, "Add", NULL, rows_value(four, 4, 4), NULL, &err), &err,
                 "passes max_vectors");

    /* Remove: unknown, removed, repeated, negative; all or nothing */
    int64_t two = 2;
    bb_value *ids = bb_value_tensor_new(BB_DT_UINT64, 1, &two);
    ((uint64_t *)(void *)ids->u.tensor.data)[0] = 1;
    ((uint64_t *)(void *)ids->u.tensor.data)[1] = 9;
    expect_error(call(&a, "Remove", NULL, ids, NULL, &err), &err, "unknown id 9");
    ids = bb_value_tensor_new(BB_DT_UINT64, 1, &two);
    ((uint64_t *)(void *)ids->u.tensor.data)[0] = 1;
    ((uint64_t *)(void *)ids->u.tensor.data)[1] = 1;
    expect_error(call(&a, "Remove", NULL, ids, NULL, &err), &err, "id 1 is already removed");
    assert_int_equal(call(&a, "Remove", NULL, bb_value_u64(&BB_TYPE_U64, 1), NULL, &err), BB_OK);
    expect_error(call(&a, "Remove", NULL, bb_value_u64(&BB_TYPE_U64, 1), NULL, &err), &err,
                 "id 1 is already removed");
    int64_t one = 1;
    bb_value *neg = bb_value_tensor_new(BB_DT_INT64, 1, &one);
    ((int64_t *)(void *)neg->u.tensor.data)[0] = -3;
    expect_error(call(&a, "Remove", NULL, neg, NULL, &err), &err, "id -3 is negative");
    /* the survivor answers alone */
    bb_value *res;
    assert_int_equal(call(&a, "Search", NULL, vec_value(v, 4), &res, &err), BB_OK);
    assert_int_equal(res->u.list.items[0]->u.tensor.dims[0], 1);
    assert_int_equal(((uint64_t *)(void *)res->u.list.items[0]->u.tensor.data)[0], 0);
    bb_value_unref(res);
    drop(&a);

    ix_t c = make("index::Flat", "{\"metric\": \"cosine\"}");
    float z[3] = {0, 0, 0};
    expect_error(call(&c, "Add", NULL, vec_value(z, 3), NULL, &err), &err,
                 "row 0 has zero length");
    expect_error(call(&c, "Search", NULL, vec_value(v, 3), NULL, &err), &err,
                 "the dimension is not known yet");
    drop(&c);
}

static void test_index_ivfpq_needs_training(void **state)
{
    (void)state;
    ix_t a = make("index::IvfPq", "{\"nlist\": 16, \"pq_m\": 4, \"dim\": 16}");
    float *x = clustered(600, 16, 8, 31);
    bb_error err;
    expect_error(call(&a, "Add", NULL, rows_value(x, 10, 16), NULL, &err), &err,
                 "Add before Train");
    expect_error(call(&a, "Search", NULL, rows_value(x, 1, 16), NULL, &err), &err,
                 "Search before Train");
    expect_error(call(&a, "Train", NULL, rows_value(x, 100, 16), NULL, &err), &err,
                 "at least 256 samples");
    ix_t b = make("index::IvfPq", "{\"nlist\": 16, \"pq_m\": 5}");
    expect_error(call(&b, "Train", NULL, rows_value(x, 600, 16), NULL, &err), &err,
                 "does not split into pq_m = 5");
    drop(&b);
    train_ok(&a, x, 600, 16);
    add_ok(&a, x, 600, 16);
    expect_error(call(&a, "Train", NULL, rows_value(x, 600, 16), NULL, &err), &err,
                 "Train after 600 vectors");
    drop(&a);
    free(x);

    const bb_component_type *t = pfx_type("index::Hnsw");
    const char *bad[][2] = {{"{\"metric\": \"manhattan\"}", "is not one of"},
                            {"{\"m\": 1}", "outside"},
                            {"{\"ef\": 3}", "unknown config key 'ef'"},
                            {"{\"dim\": -1}", "outside"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(&err, 0, sizeof err);
        assert_null(pfx_create(t, "index", bad[i][0], NULL, 1, NULL, &err));
        expect_error(err.code, &err, bad[i][1]);
    }
}

/* ---- snapshot / restore ----------------------------------------------------------------- */

static uint8_t *snap(ix_t *a, size_t *len)
{
    uint8_t *p = NULL;
    bb_error err = {0};
    if (a->t->snapshot(a->inst, &p, len, &err))
        fail_msg("snapshot: %s", err.msg);
    return p;
}

static void same_answers(ix_t *a, ix_t *b, const float *q, size_t nq, uint32_t d)
{
    uint64_t *ia, *ib;
    float *da, *db;
    uint32_t ka, kb;
    search_ok(a, q, nq, d, AK, &ia, &da, &ka);
    search_ok(b, q, nq, d, AK, &ib, &db, &kb);
    assert_int_equal(ka, kb);
    assert_memory_equal(ia, ib, nq * ka * sizeof *ia);
    assert_memory_equal(da, db, nq * ka * sizeof *da);
    free(ia);
    free(ib);
    free(da);
    free(db);
}

static void round_trip(const char *type, const char *cfg, bool train)
{
    float *x = clustered(1240, AD, 20, 41), *q = x + (size_t)1200 * AD;
    ix_t a = make(type, cfg);
    if (train)
        train_ok(&a, x, 1200, AD);
    add_ok(&a, x, 1000, AD);
    bb_error err;
    assert_int_equal(call(&a, "Remove", NULL, bb_value_u64(&BB_TYPE_U64, 5), NULL, &err), BB_OK);
    size_t len;
    uint8_t *s = snap(&a, &len);
    ix_t b = make(type, cfg);
    if (b.t->restore(b.inst, s, len, &err))
        fail_msg("restore: %s", err.msg);
    same_answers(&a, &b, q, 40, AD);
    /* both go on alike: the same ids, the same graph */
    assert_int_equal(add_ok(&a, x + 1000 * AD, 200, AD), 1000);
    assert_int_equal(add_ok(&b, x + 1000 * AD, 200, AD), 1000);
    same_answers(&a, &b, q, 40, AD);
    size_t len2, len3;
    uint8_t *s2 = snap(&a, &len2), *s3 = snap(&b, &len3);
    assert_int_equal(len2, len3);
    assert_memory_equal(s2, s3, len2);
    free(s2);
    free(s3);
    /* a restore replaces whatever the index held */
    if (b.t->restore(b.inst, s, len, &err))
        fail_msg("restore again: %s", err.msg);
    expect_error(call(&b, "Remove", NULL, bb_value_u64(&BB_TYPE_U64, 1100), NULL, &err), &err,
                 "unknown id 1100");
    free(s);
    drop(&a);
    drop(&b);
    free(x);
}

static void test_index_flat_snapshot_round_trip(void **state)
{
    (void)state;
    round_trip("index::Flat", "{\"metric\": \"cosine\"}", false);
}

static void test_index_hnsw_snapshot_round_trip(void **state)
{
    (void)state;
    round_trip("index::Hnsw", "{\"m\": 8, \"ef_construction\": 40}", false);
}

static void test_index_ivfpq_snapshot_round_trip(void **state)
{
    (void)state;
    round_trip("index::IvfPq", "{\"nlist\": 8, \"pq_m\": 8}", true);
}

static void test_index_snapshot_of_another_shape_is_refused(void **state)
{
    (void)state;
    float *x = clustered(300, 8, 4, 51);
    ix_t h = make("index::Hnsw", "{\"m\": 4}");
    add_ok(&h, x, 50, 8);
    size_t len;
    uint8_t *s = snap(&h, &len);
    struct {
        const char *type, *cfg, *needle;
    } cases[] = {
        {"index::Flat", "{}", "another kind of index"},
        {"index::Hnsw", "{\"m\": 4, \"metric\": \"ip\"}", "another metric"},
        {"index::Hnsw", "{\"m\": 6}", "taken with m = 4"},
        {"index::Hnsw", "{\"m\": 4, \"dim\": 9}", "dimension differs"},
        {"index::Hnsw", "{\"m\": 4, \"max_vectors\": 10}", "max_vectors"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ix_t b = make(cases[i].type, cases[i].cfg);
        bb_error err = {0};
        expect_error(b.t->restore(b.inst, s, len, &err), &err, cases[i].needle);
        drop(&b);
    }
    ix_t p = make("index::IvfPq", "{\"nlist\": 4, \"pq_m\": 2}");
    train_ok(&p, x, 300, 8);
    free(s);
    s = snap(&p, &len);
    ix_t p2 = make("index::IvfPq", "{\"nlist\": 5, \"pq_m\": 2}");
    bb_error err = {0};
    expect_error(p2.t->restore(p2.inst, s, len, &err), &err, "nlist = 4, pq_m = 2");
    drop(&p2);
    drop(&p);
    drop(&h);
    free(s);
    free(x);
}

/* Every prefix and every single-byte change: restored consistently, or
 * refused with a message; a refused restore leaves the index intact. */
static void corrupt_all(const char *type, const char *cfg, bool train)
{
    float *x = clustered(305, 8, 4, 61), *q = x + (size_t)300 * 8;
    ix_t a = make(type, cfg);
    if (train)
        train_ok(&a, x, 300, 8);
    add_ok(&a, x, 40, 8);
    bb_error err;
    assert_int_equal(call(&a, "Remove", NULL, bb_value_u64(&BB_TYPE_U64, 3), NULL, &err), BB_OK);
    size_t len;
    uint8_t *s = snap(&a, &len), *c = malloc(len);
    ix_t b = make(type, cfg);
    size_t refused = 0;
    for (size_t cut = 0; cut < len; cut++) {
        memset(&err, 0, sizeof err);
        assert_int_not_equal(b.t->restore(b.inst, s, cut, &err), BB_OK);
        assert_true(strstr(err.msg, "index") != NULL);
    }
    for (size_t i = 0; i < len; i++) {
        static const uint8_t flips[] = {0x01, 0x80, 0xff};
        for (size_t f = 0; f < sizeof flips; f++) {
            memcpy(c, s, len);
            c[i] ^= flips[f];
            memset(&err, 0, sizeof err);
            if (b.t->restore(b.inst, c, len, &err) != BB_OK) {
                assert_true(err.msg[0] != '\0');
                refused++;
                continue;
            }
            /* accepted: a consistent index that answers and snapshots */
            uint64_t *ids;
            float *dist;
            uint32_t k;
            search_ok(&b, q, 5, 8, 4, &ids, &dist, &k);
            free(ids);
            free(dist);
            size_t l2;
            free(snap(&b, &l2));
        }
    }
    printf("  %s: %zu prefixes and %zu of %zu byte changes refused\n", type, len, refused,
           3 * len);
    assert_true(refused > 0);
    /* the original still restores and answers like a */
    if (b.t->restore(b.inst, s, len, &err))
        fail_msg("restore: %s", err.msg);
    same_answers(&a, &b, q, 5, 8);
    free(s);
    free(c);
    drop(&a);
    drop(&b);
    free(x);
}

static void test_index_flat_corrupted_snapshots(void **state)
{
    (void)state;
    corrupt_all("index::Flat", "{}", false);
}

static void test_index_hnsw_corrupted_snapshots(void **state)
{
    (void)state;
    corrupt_all("index::Hnsw", "{\"m\": 4, \"ef_construction\": 16}", false);
}

static void test_index_ivfpq_corrupted_snapshots(void **state)
{
    (void)state;
    corrupt_all("index::IvfPq", "{\"nlist\": 2, \"pq_m\": 2, \"train_iterations\": 2}", true);
}


/* ---- IvfPq's Train on a worker pool ------------------------------------------------------ */

static struct held_work {
    void (*work)(void *), (*done)(void *);
    void *arg;
    int n;
} g_held;

static int held_submit(bb_ctx *ctx, void (*work)(void *), void (*done)(void *), void *arg)
{
    (void)ctx;
    g_held = (struct held_work){work, done, arg, g_held.n + 1};
    return BB_OK;
}

static struct completed {
    int n, status;
    bb_value *out;
    char msg[256];
} g_done;

static int record_complete(bb_completion *c, int status, bb_value **outputs, uint32_t n,
                           const char *errmsg)
{
    (void)c;
    g_done.n++;
    g_done.status = status;
    g_done.out = n ? outputs[0] : NULL;
    snprintf(g_done.msg, sizeof g_done.msg, "%s", errmsg ? errmsg : "");
    return BB_OK;
}

static void record_abandon(bb_completion *c) { (void)c; }

static const bb_ctx_api HELD_API = {.struct_size = sizeof HELD_API, .submit_work = held_submit};
static bb_ctx g_held_ctx = {&HELD_API};
static const bb_completion_api RECORD_API = {sizeof RECORD_API, record_complete, record_abandon};
static bb_completion g_completion = {&RECORD_API};

static bb_dispatch_result train_on_pool(ix_t *a, bb_value *samples, bb_value **out, bb_error *err)
{
    uint32_t idx = 0;
    assert_non_null(bb_component_type_find_op(a->t, "ai.bytesandbrains.role.index", "Train", &idx));
    bb_dispatch_call c = {.domain = "ai.bytesandbrains.role.index", .op_type = "Train",
                          .op_index = idx, .inputs = &samples, .n_inputs = 1, .n_outputs = 1,
                          .completion = &g_completion};
    *out = NULL;
    bb_dispatch_result r = a->t->dispatch(a->inst, &g_held_ctx, &c, out, err);
    bb_value_unref(samples);
    return r;
}

static void test_index_ivfpq_trains_on_the_worker_pool(void **state)
{
    (void)state;
    float *x = clustered(600, 16, 8, 71);
    ix_t a = make("index::IvfPq", "{\"nlist\": 8, \"pq_m\": 4, \"dim\": 16}");
    memset(&g_held, 0, sizeof g_held);
    memset(&g_done, 0, sizeof g_done);
    bb_value *out;
    bb_error err = {0};
    assert_int_equal(train_on_pool(&a, rows_value(x, 600, 16), &out, &err), BB_DISPATCH_LATER);
    assert_int_equal(g_held.n, 1);
    expect_error(call(&a, "Search", NULL, rows_value(x, 1, 16), NULL, &err), &err,
                 "Search before Train: an IvfPq index needs its quantizers trained first (a "
                 "Train is running)");
    memset(&err, 0, sizeof err);
    assert_int_equal(train_on_pool(&a, rows_value(x, 600, 16), &out, &err), BB_DISPATCH_NOW_ERR);
    expect_error(err.code, &err, "Train while another Train is running");
    /* the worker runs, then done() on the engine thread: the op completes */
    g_held.work(g_held.arg);
    assert_int_equal(g_done.n, 0);
    g_held.done(g_held.arg);
    assert_int_equal(g_done.n, 1);
    assert_int_equal(g_done.status, BB_OK);
    assert_ptr_equal(g_done.out->type, &BB_TYPE_TRIGGER);
    bb_value_unref(g_done.out);
    add_ok(&a, x, 600, 16);
    uint64_t *ids;
    float *dist;
    uint32_t k;
    search_ok(&a, x + 5 * 16, 1, 16, 3, &ids, &dist, &k);
    assert_int_equal(k, 3);
    free(ids);
    free(dist);
    drop(&a);

    /* destroyed with its Train still queued (the host cancels work not started) */
    ix_t b = make("index::IvfPq", "{\"nlist\": 8, \"pq_m\": 4}");
    assert_int_equal(train_on_pool(&b, rows_value(x, 600, 16), &out, &err), BB_DISPATCH_LATER);
    drop(&b);
    assert_int_equal(g_done.n, 1);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_flat_exact_l2),
        cmocka_unit_test(test_index_flat_exact_ip),
        cmocka_unit_test(test_index_flat_exact_cosine),
        cmocka_unit_test(test_index_hnsw_recall_and_tombstones),
        cmocka_unit_test(test_index_ivfpq_recall_and_remove),
        cmocka_unit_test(test_index_refuses_malformed_input),
        cmocka_unit_test(test_index_ivfpq_needs_training),
        cmocka_unit_test(test_index_ivfpq_trains_on_the_worker_pool),
        cmocka_unit_test(test_index_flat_snapshot_round_trip),
        cmocka_unit_test(test_index_hnsw_snapshot_round_trip),
        cmocka_unit_test(test_index_ivfpq_snapshot_round_trip),
        cmocka_unit_test(test_index_snapshot_of_another_shape_is_refused),
        cmocka_unit_test(test_index_flat_corrupted_snapshots),
        cmocka_unit_test(test_index_hnsw_corrupted_snapshots),
        cmocka_unit_test(test_index_ivfpq_corrupted_snapshots),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
