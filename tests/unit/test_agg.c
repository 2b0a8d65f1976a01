/*
 * Unit tests for the agg plugin (agg::FedAvg, agg::WeightAggregator,
 * agg::TrimmedMean, agg::Median), loaded from the build's agg.so and driven
 * through its dispatch entry: hand-computed results, the accepted
 * contribution shapes (tensor + metadata, Composite, ResponseBatch,
 * wrapped responses), replacement within a round, hierarchical FedAvg, the
 * error surface (shape mismatch naming the peer and both shapes, empty
 * round, caps, bad config), a poisoned client against the robust
 * aggregators, the kernels against a naive reference, snapshots, the
 * round count (bb-agg.Aggregator.atomic::Rounds) surviving one, and the
 * server optimizers (FedAdam, FedYogi, FedAdagrad) against steps worked by
 * hand, their errors and their state across a snapshot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/plugin_fixtures.h"

/* ---- helpers ------------------------------------------------------------------ */

typedef struct agg_t {
    const bb_component_type *t;
    void *inst;
} agg_t;

static agg_t make(const char *type, const char *config)
{
    agg_t a = {pfx_type(type), NULL};
    assert_non_null(a.t);
    bb_error err = {0};
    a.inst = pfx_create(a.t, "aggregator", config, NULL, 1, NULL, &err);
    if (!a.inst)
        fail_msg("create %s: %s", type, err.msg);
    return a;
}

static void drop(agg_t *a)
{
    a->t->destroy(a->inst);
}

static bb_value *vec(const float *v, size_t n)
{
    int64_t d = (int64_t)n;
    return pfx_tensor(v, 1, &d);
}
#define VEC(...) vec((const float[]){__VA_ARGS__}, sizeof((const float[]){__VA_ARGS__}) / 4)

static bb_value *u64(uint64_t v) { return bb_value_u64(&BB_TYPE_U64, v); }

static bb_value *composite2(bb_value *a, bb_value *b)
{
    bb_value *items[2] = {a, b};
    return bb_value_list(&BB_TYPE_COMPOSITE, items, 2);
}

/* Contribute(t, meta); takes both references. Returns the status. */
static int contribute(agg_t *a, bb_value *t, bb_value *meta, bb_error *err)
{
    bb_value *in[2] = {t, meta}, *cmd = NULL;
    int rc = pfx_call(a->t, a->inst, NULL, "Contribute", NULL, in, meta ? 2 : 1, &cmd, 1, err);
    if (rc == BB_OK) {
        assert_non_null(cmd);
        assert_ptr_equal(cmd->type, &BB_TYPE_COMMAND_ID);
    }
    bb_value_unref(cmd);
    bb_value_unref(t);
    bb_value_unref(meta);
    return rc;
}

static void contribute_ok(agg_t *a, bb_value *t, bb_value *meta)
{
    bb_error err = {0};
    if (contribute(a, t, meta, &err))
        fail_msg("Contribute: %s", err.msg);
}

/* Aggregate -> result (new ref) and metadata. */
static int aggregate(agg_t *a, bb_value **result, uint64_t *samples, bb_error *err)
{
    bb_value *trig = bb_value_trigger(), *out[2] = {0};
    int rc = pfx_call(a->t, a->inst, NULL, "Aggregate", NULL, &trig, 1, out, 2, err);
    bb_value_unref(trig);
    if (rc == BB_OK) {
        assert_non_null(out[1]);
        assert_int_equal(out[1]->type->kind, BB_VK_U64);
        if (samples)
            *samples = out[1]->u.u64;
    }
    bb_value_unref(out[1]);
    *result = out[0];
    return rc;
}

static void expect_vec_(const bb_value *v, const float *want, size_t n, float tol, int line)
{
    if (!v || v->type->kind != BB_VK_TENSOR || bb_tensor_numel(v) != n)
        fail_msg("line %d: result has the wrong shape", line);
    const float *p = bb_tensor_f32(v);
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(p[i] - want[i]) <= tol))
            fail_msg("line %d: [%zu] = %g, want %g", line, i, (double)p[i], (double)want[i]);
}
#define EXPECT_VEC(v, ...)                                                            \
    expect_vec_(v, (const float[]){__VA_ARGS__},                                      \
                sizeof((const float[]){__VA_ARGS__}) / 4, 1e-5f, __LINE__)

static bb_value *aggregate_ok(agg_t *a, uint64_t *samples)
{
    bb_value *r = NULL;
    bb_error err = {0};
    if (aggregate(a, &r, samples, &err))
        fail_msg("Aggregate: %s", err.msg);
    return r;
}

static bb_value *batch_of(bb_value **items, const uint8_t *seeds, size_t n)
{
    bb_value *peers[16];
    for (size_t i = 0; i < n; i++)
        peers[i] = pfx_peer(seeds[i]);
    return bb_value_response_batch(items, peers, n);
}

/* ---- FedAvg ------------------------------------------------------------------------- */

static void test_fedavg_weighted_mean(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAvg", NULL);
    contribute_ok(&a, VEC(1, 2, 3, 4), u64(1));
    contribute_ok(&a, VEC(3, 4, 5, 6), u64(3));
    uint64_t n = 0;
    bb_value *r = aggregate_ok(&a, &n);
    EXPECT_VEC(r, 2.5f, 3.5f, 4.5f, 5.5f); /* (1*x1 + 3*x2) / 4 */
    assert_int_equal(n, 4);
    bb_value_unref(r);
    /* the round closed: nothing to aggregate now */
    bb_error err = {0};
    assert_int_equal(aggregate(&a, &r, NULL, &err), BB_ESTATE);
    assert_non_null(strstr(err.msg, "no contribution"));
    drop(&a);
}

static void test_fedavg_no_metadata_counts_one(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAvg", NULL);
    contribute_ok(&a, VEC(0, 10), NULL);
    contribute_ok(&a, VEC(2, 20), NULL);
    uint64_t n = 0;
    bb_value *r = aggregate_ok(&a, &n);
    EXPECT_VEC(r, 1, 15);
    assert_int_equal(n, 2);
    bb_value_unref(r);
    drop(&a);
}

static void test_fedavg_metadata_forms(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAvg", NULL);
    /* scalar tensor count, and Composite(count, sender) */
    contribute_ok(&a, VEC(4), VEC(1));
    contribute_ok(&a, VEC(8), composite2(u64(3), pfx_peer(9)));
    uint64_t n = 0;
    bb_value *r = aggregate_ok(&a, &n);
    EXPECT_VEC(r, 7); /* (4 + 3*8) / 4 */
    assert_int_equal(n, 4);
    bb_value_unref(r);
    bb_error err = {0};
    assert_int_equal(contribute(&a, VEC(1), VEC(2.5f), &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "whole number"));
    assert_int_equal(contribute(&a, VEC(1), bb_value_trigger(), &err), BB_ETYPE);
    drop(&a);
}

static void test_fedavg_response_batch(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAvg", NULL);
    /* how federated.c feeds it: elements Composite(params, num_samples),
     * one of them wrapped once more as a response travels */
    bb_value *e0 = composite2(VEC(1, 1), u64(1));
    bb_value *inner = composite2(VEC(4, 7), u64(2));
    bb_value *e1 = bb_value_list(&BB_TYPE_COMPOSITE, &inner, 1);
    bb_value *items[2] = {e0, e1};
    contribute_ok(&a, batch_of(items, (const uint8_t[]){1, 2}, 2), NULL);
    uint64_t n = 0;
    bb_value *r = aggregate_ok(&a, &n);
    EXPECT_VEC(r, 3, 5); /* (1 + 2*4)/3, (1 + 2*7)/3 */
    assert_int_equal(n, 3);
    bb_value_unref(r);
    drop(&a);
}

static void test_fedavg_same_peer_replaces(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAvg", NULL);
    bb_value *i1[1] = {composite2(VEC(100), u64(5))};
    contribute_ok(&a, batch_of(i1, (const uint8_t[]){7}, 1), NULL);
    bb_value *i2[2] = {composite2(VEC(2), u64(1)), composite2(VEC(4), u64(1))};
    contribute_ok(&a, batch_of(i2, (const uint8_t[]){7, 8}, 2), NULL); /* 7 again */
    /* a sender given in the metadata also identifies it */
    contribute_ok(&a, VEC(50), composite2(u64(1), pfx_peer(8)));
    contribute_ok(&a, VEC(6), composite2(u64(1), pfx_peer(8)));
    uint64_t n = 0;
    bb_value *r = aggregate_ok(&a, &n);
    EXPECT_VEC(r, 4); /* peer 7: 2, peer 8: 6 -> (2 + 6) / 2 */
    assert_int_equal(n, 2);
    bb_value_unref(r);
    drop(&a);
}

static void test_fedavg_shape_mismatch_names_peer(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAvg", NULL);
    bb_value *i1[1] = {composite2(VEC(1, 2, 3), u64(1))};
    contribute_ok(&a, batch_of(i1, (const uint8_t[]){1}, 1), NULL);
    bb_value *i2[1] = {composite2(VEC(1, 2), u64(1))};
    bb_error err = {0};
    assert_int_equal(contribute(&a, batch_of(i2, (const uint8_t[]){2}, 1), NULL, &err), BB_ETYPE);
    bb_peerid p2 = {0};
    char text[BB_PEERID_TEXT_MAX];
    bb_value *pv = pfx_peer(2);
    assert_int_equal(bb_peerid_from_bytes(pv->u.bytes.data, pv->u.bytes.len, &p2, NULL), BB_OK);
    bb_value_unref(pv);
    assert_int_equal(bb_peerid_to_text(&p2, text, sizeof text, NULL), BB_OK);
    assert_non_null(strstr(err.msg, text));
    assert_non_null(strstr(err.msg, "[2]"));
    assert_non_null(strstr(err.msg, "[3]"));
    /* the failed Contribute changed nothing */
    uint64_t n = 0;
    bb_value *r = aggregate_ok(&a, &n);
    EXPECT_VEC(r, 1, 2, 3);
    assert_int_equal(n, 1);
    bb_value_unref(r);
    drop(&a);
}

static void test_fedavg_skip_bad_contribution(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAvg", "{\"on_bad_contribution\": \"skip\"}");
    bb_value *items[3] = {composite2(VEC(1, 1), u64(1)), composite2(VEC(9), u64(1)),
                          bb_value_trigger()};
    contribute_ok(&a, batch_of(items, (const uint8_t[]){1, 2, 3}, 3), NULL);
    contribute_ok(&a, VEC(3, 3), NULL);
    uint64_t n = 0;
    bb_value *r = aggregate_ok(&a, &n);
    EXPECT_VEC(r, 2, 2);
    assert_int_equal(n, 2);
    bb_value_unref(r);
    drop(&a);
}

static void test_fedavg_hierarchical(void **state)
{
    (void)state;
    /* two edge FedAvgs feed a parent: equals FedAvg over all four clients */
    agg_t e1 = make("agg::FedAvg", NULL), e2 = make("agg::FedAvg", NULL);
    agg_t top = make("agg::FedAvg", NULL), flat = make("agg::FedAvg", NULL);
    const float x[4] = {1, 5, 2, 10};
    const uint64_t ns[4] = {10, 30, 5, 5};
    for (int i = 0; i < 4; i++) {
        contribute_ok(i < 2 ? &e1 : &e2, vec(&x[i], 1), u64(ns[i]));
        contribute_ok(&flat, vec(&x[i], 1), u64(ns[i]));
    }
    for (int k = 0; k < 2; k++) {
        uint64_t n = 0;
        bb_value *r = aggregate_ok(k ? &e2 : &e1, &n);
        contribute_ok(&top, r, u64(n)); /* the metadata output feeds the parent */
    }
    uint64_t nt = 0, nf = 0;
    bb_value *rt = aggregate_ok(&top, &nt), *rf = aggregate_ok(&flat, &nf);
    EXPECT_VEC(rt, (10 * 1 + 30 * 5 + 5 * 2 + 5 * 10) / 50.0f);
    EXPECT_VEC(rf, (10 * 1 + 30 * 5 + 5 * 2 + 5 * 10) / 50.0f);
    assert_int_equal(nt, 50);
    assert_int_equal(nf, 50);
    bb_value_unref(rt);
    bb_value_unref(rf);
    drop(&e1);
    drop(&e2);
    drop(&top);
    drop(&flat);
}

static void test_fedavg_errors(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAvg", "{\"max_contributions\": 2}");
    bb_error err = {0};
    assert_int_equal(contribute(&a, bb_value_trigger(), NULL, &err), BB_ETYPE);
    int64_t d = 1;
    assert_int_equal(contribute(&a, bb_value_tensor_new(BB_DT_INT64, 1, &d), NULL, &err),
                     BB_ETYPE);
    assert_non_null(strstr(err.msg, "int64"));
    contribute_ok(&a, VEC(1), u64(0));
    contribute_ok(&a, VEC(2), u64(0));
    assert_int_equal(contribute(&a, VEC(3), NULL, &err), BB_EFULL);
    bb_value *r = NULL;
    assert_int_equal(aggregate(&a, &r, NULL, &err), BB_EINVAL); /* all weights 0 */
    assert_non_null(strstr(err.msg, "num_samples 0"));
    drop(&a);

    /* a non-finite contribution is named */
    agg_t b = make("agg::FedAvg", NULL);
    bb_value *items[2] = {composite2(VEC(1, 2), u64(1)), composite2(VEC(1, NAN), u64(1))};
    contribute_ok(&b, batch_of(items, (const uint8_t[]){4, 5}, 2), NULL);
    assert_int_equal(aggregate(&b, &r, NULL, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "non-finite"));
    assert_non_null(strstr(err.msg, "index 1"));
    drop(&b);
}

static void test_config_errors(void **state)
{
    (void)state;
    bb_error err = {0};
    const bb_component_type *t = pfx_type("agg::TrimmedMean");
    assert_null(pfx_create(t, "s", "{\"trim\": 0.7}", NULL, 1, NULL, &err));
    assert_non_null(strstr(err.msg, "'trim'"));
    assert_null(pfx_create(t, "s", "{\"bogus\": 1}", NULL, 1, NULL, &err));
    assert_non_null(strstr(err.msg, "unknown config key 'bogus'"));
    assert_null(pfx_create(t, "s", "{\"trim\": ", NULL, 1, NULL, &err));
    assert_non_null(strstr(err.msg, "not valid JSON"));
    assert_null(pfx_create(pfx_type("agg::FedAvg"), "s", "{\"on_bad_contribution\": \"x\"}",
                           NULL, 1, NULL, &err));
    assert_non_null(strstr(err.msg, "\"skip\""));
}

static void test_current_tensor(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAvg", NULL);
    bb_value *trig = bb_value_trigger(), *out = NULL;
    bb_error err = {0};
    assert_int_equal(pfx_call(a.t, a.inst, NULL, "CurrentTensor", NULL, &trig, 1, &out, 1, &err),
                     BB_ESTATE);
    contribute_ok(&a, VEC(2), NULL);
    contribute_ok(&a, VEC(4), NULL);
    assert_int_equal(pfx_call(a.t, a.inst, NULL, "CurrentTensor", NULL, &trig, 1, &out, 1, &err),
                     BB_OK);
    EXPECT_VEC(out, 3);
    bb_value_unref(out);
    bb_value *r = aggregate_ok(&a, NULL); /* CurrentTensor did not close the round */
    EXPECT_VEC(r, 3);
    contribute_ok(&a, VEC(10), NULL);
    /* the open round is reduced; the held result stays intact */
    assert_int_equal(pfx_call(a.t, a.inst, NULL, "CurrentTensor", NULL, &trig, 1, &out, 1, &err),
                     BB_OK);
    EXPECT_VEC(out, 10);
    EXPECT_VEC(r, 3);
    bb_value_unref(out);
    bb_value_unref(r);
    bb_value_unref(trig);
    drop(&a);
}

static void test_result_memory_recycled_only_when_unshared(void **state)
{
    (void)state;
    agg_t a = make("agg::WeightAggregator", NULL);
    contribute_ok(&a, VEC(1, 2), NULL);
    bb_value *r1 = aggregate_ok(&a, NULL);
    contribute_ok(&a, VEC(5, 6), NULL);
    bb_value *r2 = aggregate_ok(&a, NULL); /* r1 still held: must not be overwritten */
    EXPECT_VEC(r1, 1, 2);
    EXPECT_VEC(r2, 5, 6);
    bb_value_unref(r1);
    bb_value_unref(r2);
    contribute_ok(&a, VEC(7, 8), NULL);
    bb_value *r3 = aggregate_ok(&a, NULL);
    EXPECT_VEC(r3, 7, 8);
    bb_value_unref(r3);
    drop(&a);
}

/* ---- plain mean, trimmed mean, median ------------------------------------------------ */

static void test_weight_aggregator_ignores_counts(void **state)
{
    (void)state;
    agg_t a = make("agg::WeightAggregator", NULL);
    contribute_ok(&a, VEC(1, 0), u64(100));
    contribute_ok(&a, VEC(3, 6), u64(1));
    uint64_t n = 0;
    bb_value *r = aggregate_ok(&a, &n);
    EXPECT_VEC(r, 2, 3);
    assert_int_equal(n, 101); /* still sums num_samples, so layers compose */
    bb_value_unref(r);
    drop(&a);
}

static void test_trimmed_mean_hand_values(void **state)
{
    (void)state;
    agg_t a = make("agg::TrimmedMean", "{\"trim_count\": 1}");
    /* per coordinate, sorted: {1,2,3,4,1e6} -> mean(2,3,4) = 3;
     * {-5,0,1,2,10} -> mean(0,1,2) = 1 */
    contribute_ok(&a, VEC(3, 10), NULL);
    contribute_ok(&a, VEC(1e6f, 0), NULL);
    contribute_ok(&a, VEC(1, -5), NULL);
    contribute_ok(&a, VEC(4, 1), NULL);
    contribute_ok(&a, VEC(2, 2), NULL);
    bb_value *r = aggregate_ok(&a, NULL);
    EXPECT_VEC(r, 3, 1);
    bb_value_unref(r);
    /* trim fraction: floor(0.25 * 4) = 1 at each end of 4 */
    agg_t b = make("agg::TrimmedMean", "{\"trim\": 0.25}");
    contribute_ok(&b, VEC(1), NULL);
    contribute_ok(&b, VEC(2), NULL);
    contribute_ok(&b, VEC(6), NULL);
    contribute_ok(&b, VEC(100), NULL);
    r = aggregate_ok(&b, NULL);
    EXPECT_VEC(r, 4);
    bb_value_unref(r);
    /* cutting everything is refused */
    agg_t c = make("agg::TrimmedMean", "{\"trim_count\": 1}");
    contribute_ok(&c, VEC(1), NULL);
    contribute_ok(&c, VEC(2), NULL);
    bb_error err = {0};
    assert_int_equal(aggregate(&c, &r, NULL, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "leaves none"));
    drop(&a);
    drop(&b);
    drop(&c);
}

static void test_median_hand_values(void **state)
{
    (void)state;
    agg_t a = make("agg::Median", NULL);
    contribute_ok(&a, VEC(5, -1), NULL);
    contribute_ok(&a, VEC(1, 7), NULL);
    contribute_ok(&a, VEC(3, 2), NULL);
    bb_value *r = aggregate_ok(&a, NULL);
    EXPECT_VEC(r, 3, 2);
    bb_value_unref(r);
    contribute_ok(&a, VEC(5), NULL); /* even count: mean of the middle two */
    contribute_ok(&a, VEC(1), NULL);
    contribute_ok(&a, VEC(3), NULL);
    contribute_ok(&a, VEC(100), NULL);
    r = aggregate_ok(&a, NULL);
    EXPECT_VEC(r, 4);
    bb_value_unref(r);
    drop(&a);
}

/* Four honest clients near w, one sending 1e6 * w: the robust results stay
 * inside the honest clients' range in every coordinate; FedAvg does not. */
static void test_poisoned_client(void **state)
{
    (void)state;
    enum { DIM = 64, HONEST = 4 };
    float honest[HONEST][DIM], lo[DIM], hi[DIM], poison[DIM];
    for (int j = 0; j < DIM; j++) {
        float w = sinf((float)j) + 0.5f;
        lo[j] = INFINITY;
        hi[j] = -INFINITY;
        for (int i = 0; i < HONEST; i++) {
            honest[i][j] = w + 0.01f * (float)(i - 1) * cosf((float)(j * (i + 1)));
            lo[j] = fminf(lo[j], honest[i][j]);
            hi[j] = fmaxf(hi[j], honest[i][j]);
        }
        poison[j] = 1e6f * w;
    }
    const char *types[3] = {"agg::TrimmedMean", "agg::Median", "agg::FedAvg"};
    for (int k = 0; k < 3; k++) {
        agg_t a = make(types[k], k == 0 ? "{\"trim\": 0.2}" : NULL);
        for (int i = 0; i < HONEST; i++)
            contribute_ok(&a, vec(honest[i], DIM), u64(10));
        contribute_ok(&a, vec(poison, DIM), u64(10));
        bb_value *r = aggregate_ok(&a, NULL);
        const float *p = bb_tensor_f32(r);
        int outside = 0;
        for (int j = 0; j < DIM; j++)
            outside += !(p[j] >= lo[j] && p[j] <= hi[j]);
        if (k < 2 && outside)
            fail_msg("%s: %d coordinates left the honest range", types[k], outside);
        if (k == 2)
            assert_true(outside > DIM / 2); /* the contrast: FedAvg is not robust */
        bb_value_unref(r);
        drop(&a);
    }
}

static void test_nan_sender_is_an_outlier(void **state)
{
    (void)state;
    agg_t a = make("agg::Median", NULL), b = make("agg::TrimmedMean", "{\"trim_count\": 1}");
    const float rows[4][2] = {{1, 2}, {2, 3}, {3, 4}, {NAN, NAN}};
    for (int i = 0; i < 4; i++) {
        contribute_ok(&a, vec(rows[i], 2), NULL);
        contribute_ok(&b, vec(rows[i], 2), NULL);
    }
    bb_value *r = aggregate_ok(&a, NULL);
    EXPECT_VEC(r, 2.5f, 3.5f); /* NaN sorts as +inf: median of 1,2,3,inf */
    bb_value_unref(r);
    r = aggregate_ok(&b, NULL);
    EXPECT_VEC(r, 2.5f, 3.5f); /* 1 and inf cut */
    bb_value_unref(r);
    drop(&a);
    drop(&b);
}

static int cmpf(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

/* The sorting-network path (n <= 64) and the per-coordinate path (n > 64)
 * against a naive reference, over lengths that are not block multiples. */
static void check_against_reference(size_t n, size_t len)
{
    agg_t med = make("agg::Median", NULL), tri = make("agg::TrimmedMean", "{\"trim\": 0.2}");
    agg_t avg = make("agg::FedAvg", NULL);
    float **x = calloc(n, sizeof *x);
    uint64_t seed = 12345 + n;
    for (size_t i = 0; i < n; i++) {
        x[i] = malloc(len * sizeof **x);
        for (size_t j = 0; j < len; j++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            x[i][j] = (float)((seed >> 40) % 2001) / 100.0f - 10.0f;
        }
        contribute_ok(&med, vec(x[i], len), NULL);
        contribute_ok(&tri, vec(x[i], len), NULL);
        contribute_ok(&avg, vec(x[i], len), u64(i + 1));
    }
    bb_value *rm = aggregate_ok(&med, NULL), *rt = aggregate_ok(&tri, NULL);
    bb_value *ra = aggregate_ok(&avg, NULL);
    size_t k = (size_t)(0.2 * (double)n);
    float *col = malloc(n * sizeof *col);
    double wsum = (double)n * (double)(n + 1) / 2;
    for (size_t j = 0; j < len; j++) {
        double s = 0, ws = 0;
        for (size_t i = 0; i < n; i++) {
            col[i] = x[i][j];
            ws += (double)(i + 1) * x[i][j];
        }
        qsort(col, n, sizeof *col, cmpf);
        for (size_t i = k; i < n - k; i++)
            s += col[i];
        float want_m = 0.5f * (col[(n - 1) / 2] + col[n / 2]);
        float want_t = (float)(s / (double)(n - 2 * k));
        float want_a = (float)(ws / wsum);
        if (fabsf(bb_tensor_f32(rm)[j] - want_m) > 1e-5f ||
            fabsf(bb_tensor_f32(rt)[j] - want_t) > 1e-3f ||
            fabsf(bb_tensor_f32(ra)[j] - want_a) > 1e-3f)
            fail_msg("n=%zu len=%zu j=%zu: median %g/%g trimmed %g/%g fedavg %g/%g", n, len, j,
                     (double)bb_tensor_f32(rm)[j], (double)want_m, (double)bb_tensor_f32(rt)[j],
                     (double)want_t, (double)bb_tensor_f32(ra)[j], (double)want_a);
    }
    free(col);
    for (size_t i = 0; i < n; i++)
        free(x[i]);
    free(x);
    bb_value_unref(rm);
    bb_value_unref(rt);
    bb_value_unref(ra);
    drop(&med);
    drop(&tri);
    drop(&avg);
}

static void test_kernels_match_reference(void **state)
{
    (void)state;
    check_against_reference(1, 1000);
    check_against_reference(2, 300);
    check_against_reference(5, 999);
    check_against_reference(7, 10007);
    check_against_reference(13, 513);
    check_against_reference(33, 300);
    check_against_reference(64, 257);
    check_against_reference(8, 4096 * 3 + 5);
    check_against_reference(70, 777);
}

/* Split over threads, every kernel gives the same bits as on one thread,
 * and a non-finite value is found at the same index whichever part holds
 * it. 9 contributions (two passes of the weighted sum) of a length that
 * neither the parts nor the 16-float lines divide. */
static bb_value *reduce_with(const char *type, unsigned threads, float **x, size_t n, size_t len,
                             bb_error *err)
{
    char config[96];
    snprintf(config, sizeof config, "{\"threads\": %u%s}", threads,
             strcmp(type, "agg::TrimmedMean") == 0 ? ", \"trim_count\": 2" : "");
    agg_t a = make(type, config);
    for (size_t i = 0; i < n; i++)
        contribute_ok(&a, vec(x[i], len), u64(i + 1));
    bb_value *r = NULL;
    int rc = aggregate(&a, &r, NULL, err);
    drop(&a);
    return rc == BB_OK ? r : NULL;
}

static void test_threads_give_the_same_bits(void **state)
{
    (void)state;
    const size_t n = 9, len = ((size_t)1 << 19) + 7;
    float *x[9];
    uint64_t seed = 42;
    for (size_t i = 0; i < n; i++) {
        x[i] = malloc(len * sizeof *x[i]);
        assert_non_null(x[i]);
        for (size_t j = 0; j < len; j++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            x[i][j] = (float)(int32_t)(seed >> 32) * 1e-9f;
        }
    }
    static const char *const TYPES[] = {"agg::FedAvg", "agg::WeightAggregator",
                                        "agg::TrimmedMean", "agg::Median"};
    bb_error err = {0};
    for (size_t k = 0; k < 4; k++) {
        bb_value *one = reduce_with(TYPES[k], 1, x, n, len, &err);
        assert_non_null(one);
        for (unsigned t = 2; t <= 3; t++) {
            bb_value *many = reduce_with(TYPES[k], t, x, n, len, &err);
            assert_non_null(many);
            if (memcmp(bb_tensor_f32(one), bb_tensor_f32(many), len * sizeof(float)) != 0)
                fail_msg("%s: %u threads differ from one", TYPES[k], t);
            bb_value_unref(many);
        }
        bb_value_unref(one);
    }
    /* the non-finite value sits in the last part */
    x[3][len - 5] = INFINITY;
    char want[64];
    snprintf(want, sizeof want, "index %zu", len - 5);
    for (unsigned t = 1; t <= 3; t++) {
        assert_null(reduce_with("agg::FedAvg", t, x, n, len, &err));
        assert_int_equal(err.code, BB_EINVAL);
        if (!strstr(err.msg, want))
            fail_msg("%u threads: %s (want %s)", t, err.msg, want);
    }
    for (size_t i = 0; i < n; i++)
        free(x[i]);
}

/* ---- the folded path: Contributes tagged with a request (the engine's streaming) ---- */

static void set_model_ok(agg_t *a, bb_value *params);

/* Contribute(ResponseBatch[(x, n) from peer seed], RequestId tag). */
static int contribute_tagged(agg_t *a, bb_value *x, uint64_t n, uint8_t seed, uint64_t tag,
                             bb_error *err)
{
    bb_value *items[1] = {composite2(x, u64(n))};
    return contribute(a, batch_of(items, &seed, 1), bb_value_u64(&BB_TYPE_REQUEST_ID, tag), err);
}

static void contribute_tagged_ok(agg_t *a, bb_value *x, uint64_t n, uint8_t seed, uint64_t tag)
{
    bb_error err = {0};
    if (contribute_tagged(a, x, n, seed, tag, &err))
        fail_msg("tagged Contribute: %s", err.msg);
}

static void test_fold_equals_one_pass(void **state)
{
    (void)state;
    static const char *const TYPES[] = {"agg::FedAvg", "agg::WeightAggregator",
                                        "agg::TrimmedMean", "agg::Median"};
    const float x[4][3] = {{1, 2, 3}, {5, -1, 0}, {2, 2, 2}, {-4, 8, 1}};
    for (size_t k = 0; k < 4; k++) {
        agg_t one = make(TYPES[k], NULL), fold = make(TYPES[k], NULL);
        bb_value *items[4];
        for (uint8_t i = 0; i < 4; i++) {
            items[i] = composite2(vec(x[i], 3), u64(10u * (i + 1u)));
            contribute_tagged_ok(&fold, vec(x[i], 3), 10u * (i + 1u), (uint8_t)(i + 1), 77);
        }
        contribute_ok(&one, batch_of(items, (const uint8_t[]){1, 2, 3, 4}, 4), NULL);
        uint64_t n1 = 0, n2 = 0;
        bb_value *r1 = aggregate_ok(&one, &n1), *r2 = aggregate_ok(&fold, &n2);
        assert_int_equal(n1, 100);
        assert_int_equal(n2, 100);
        for (int j = 0; j < 3; j++)
            if (fabsf(bb_tensor_f32(r1)[j] - bb_tensor_f32(r2)[j]) > 1e-5f)
                fail_msg("%s [%d]: folded %g, one pass %g", TYPES[k], j,
                         (double)bb_tensor_f32(r2)[j], (double)bb_tensor_f32(r1)[j]);
        bb_value_unref(r1);
        bb_value_unref(r2);
        drop(&one);
        drop(&fold);
    }
}

/* The averaging kinds keep no contribution: after the second fold the
 * aggregator holds none of the tensors it was given (one model in memory
 * however many senders), the robust kinds hold them all. */
static void test_fold_holds_no_contribution(void **state)
{
    (void)state;
    agg_t avg = make("agg::FedAvg", NULL), med = make("agg::Median", NULL);
    bb_value *x[3] = {VEC(1, 1), VEC(2, 4), VEC(3, 7)};
    for (uint8_t i = 0; i < 3; i++) {
        contribute_tagged_ok(&avg, bb_value_ref(x[i]), 1, (uint8_t)(i + 1), 5);
        contribute_tagged_ok(&med, bb_value_ref(x[i]), 1, (uint8_t)(i + 1), 5);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(atomic_load(&x[i]->refs), 2); /* ours and the Median's */
    drop(&med);
    for (int i = 0; i < 3; i++)
        assert_int_equal(atomic_load(&x[i]->refs), 1);
    bb_value *r = aggregate_ok(&avg, NULL);
    EXPECT_VEC(r, 2, 4);
    bb_value_unref(r);
    for (int i = 0; i < 3; i++)
        bb_value_unref(x[i]);
    drop(&avg);
}

static void test_fold_refusals(void **state)
{
    (void)state;
    bb_error err = {0};
    /* a folded sender cannot come again, tagged or not */
    agg_t a = make("agg::FedAvg", NULL);
    contribute_tagged_ok(&a, VEC(1), 1, 3, 9);
    assert_int_equal(contribute_tagged(&a, VEC(5), 1, 3, 9, &err), BB_EEXIST);
    assert_non_null(strstr(err.msg, "already contributed"));
    assert_int_equal(contribute(&a, VEC(5), composite2(u64(1), pfx_peer(3)), &err), BB_EEXIST);
    /* a held sender is replaced by its folded update */
    contribute_ok(&a, VEC(100), composite2(u64(1), pfx_peer(4)));
    contribute_tagged_ok(&a, VEC(3), 1, 4, 9);
    uint64_t n = 0;
    bb_value *r = aggregate_ok(&a, &n);
    EXPECT_VEC(r, 2); /* (1 + 3) / 2 */
    assert_int_equal(n, 2);
    bb_value_unref(r);
    /* a non-finite value poisons the round: the Contribute and the Aggregate
     * name the sender, and that Aggregate drops the folded part */
    contribute_tagged_ok(&a, VEC(1, 1), 1, 1, 10);
    assert_int_equal(contribute_tagged(&a, VEC(NAN, 1), 1, 2, 10, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "non-finite"));
    assert_int_equal(aggregate(&a, &r, NULL, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "index 0"));
    assert_int_equal(aggregate(&a, &r, NULL, &err), BB_ESTATE); /* nothing left */
    drop(&a);
    /* with "skip", both are logged and left out */
    agg_t b = make("agg::FedAvg", "{\"on_bad_contribution\": \"skip\"}");
    contribute_tagged_ok(&b, VEC(1, 1), 1, 1, 10);
    contribute_tagged_ok(&b, VEC(INFINITY, 1), 1, 2, 10);
    contribute_tagged_ok(&b, VEC(7, 7), 1, 1, 10);
    contribute_tagged_ok(&b, VEC(3, 3), 3, 3, 10);
    r = aggregate_ok(&b, &n);
    EXPECT_VEC(r, 2.5f, 2.5f);
    assert_int_equal(n, 4);
    bb_value_unref(r);
    drop(&b);
}

/* A new request tag drops what an older tag brought (its round failed
 * before Aggregate); untagged contributions stay. */
static void test_fold_new_tag_drops_the_failed_round(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAvg", NULL), t = make("agg::TrimmedMean", "{\"trim_count\": 0}");
    contribute_ok(&a, VEC(10), composite2(u64(1), pfx_peer(9)));
    contribute_tagged_ok(&a, VEC(1000), 1, 1, 20);
    contribute_tagged_ok(&t, VEC(1000), 1, 1, 20);
    contribute_tagged_ok(&a, VEC(2), 1, 1, 21);
    contribute_tagged_ok(&a, VEC(0), 1, 2, 21);
    contribute_tagged_ok(&t, VEC(4), 1, 2, 21);
    uint64_t n = 0;
    bb_value *r = aggregate_ok(&a, &n);
    EXPECT_VEC(r, 4); /* (10 + 2 + 0) / 3 */
    assert_int_equal(n, 3);
    bb_value_unref(r);
    r = aggregate_ok(&t, &n);
    EXPECT_VEC(r, 4);
    assert_int_equal(n, 1);
    bb_value_unref(r);
    drop(&a);
    drop(&t);
}

/* A snapshot taken mid-fold restores the folded mean, its weight, its
 * senders and its tag. */
static void test_fold_snapshot(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAdam", NULL), b = make("agg::FedAdam", NULL);
    set_model_ok(&a, VEC(0, 0));
    set_model_ok(&b, VEC(0, 0));
    contribute_tagged_ok(&a, VEC(1, 2), 2, 1, 30);
    contribute_tagged_ok(&a, VEC(4, 8), 1, 2, 30);
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err = {0};
    assert_int_equal(a.t->snapshot(a.inst, &snap, &len, &err), BB_OK);
    for (size_t cut = 0; cut < len; cut++)
        assert_int_not_equal(b.t->restore(b.inst, snap, cut, &err), BB_OK);
    assert_int_equal(b.t->restore(b.inst, snap, len, &err), BB_OK);
    free(snap);
    assert_int_equal(contribute_tagged(&b, VEC(0, 0), 1, 2, 30, &err), BB_EEXIST);
    contribute_tagged_ok(&a, VEC(3, 3), 1, 3, 30);
    contribute_tagged_ok(&b, VEC(3, 3), 1, 3, 30);
    uint64_t na = 0, nb = 0;
    bb_value *ra = aggregate_ok(&a, &na), *rb = aggregate_ok(&b, &nb);
    assert_true(bb_value_equal(ra, rb));
    assert_int_equal(na, 4);
    assert_int_equal(nb, 4);
    bb_value_unref(ra);
    bb_value_unref(rb);
    drop(&a);
    drop(&b);
}

/* ---- snapshot ------------------------------------------------------------------------------ */

static void test_snapshot_roundtrip_and_truncation(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAvg", NULL);
    contribute_ok(&a, VEC(1, 2), u64(1));
    bb_value *r = aggregate_ok(&a, NULL);
    bb_value_unref(r);
    bb_value *items[2] = {composite2(VEC(2, 2), u64(1)), composite2(VEC(4, 8), u64(3))};
    contribute_ok(&a, batch_of(items, (const uint8_t[]){3, 4}, 2), NULL);
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err = {0};
    assert_int_equal(a.t->snapshot(a.inst, &snap, &len, &err), BB_OK);

    agg_t b = make("agg::FedAvg", NULL);
    for (size_t cut = 0; cut < len; cut++) /* every truncation is refused cleanly */
        assert_int_not_equal(b.t->restore(b.inst, snap, cut, &err), BB_OK);
    snap[0] ^= 0xff;
    assert_int_equal(b.t->restore(b.inst, snap, len, &err), BB_EDECODE);
    snap[0] ^= 0xff;
    assert_int_equal(b.t->restore(b.inst, snap, len, &err), BB_OK);
    /* the restored round remembers its senders: peer 4 replaces */
    bb_value *again[1] = {composite2(VEC(0, 0), u64(3))};
    contribute_ok(&b, batch_of(again, (const uint8_t[]){4}, 1), NULL);
    uint64_t n = 0;
    r = aggregate_ok(&b, &n);
    EXPECT_VEC(r, 0.5f, 0.5f);
    assert_int_equal(n, 4);
    bb_value_unref(r);
    /* restored again: the open round reduces as before the snapshot */
    assert_int_equal(b.t->restore(b.inst, snap, len, &err), BB_OK);
    free(snap);
    bb_value *trig = bb_value_trigger(), *out = NULL;
    assert_int_equal(pfx_call(b.t, b.inst, NULL, "CurrentTensor", NULL, &trig, 1, &out, 1, &err),
                     BB_OK);
    EXPECT_VEC(out, 3.5f, 6.5f); /* (1*[2,2] + 3*[4,8]) / 4 */
    bb_value_unref(trig);
    bb_value_unref(out);
    drop(&a);
    drop(&b);
}

/* Rounds: the Aggregates so far, on every aggregator, kept by a snapshot. */
static uint64_t rounds_of(agg_t *a)
{
    bb_value *trig = bb_value_trigger(), *out = NULL;
    bb_error err = {0};
    if (pfx_call(a->t, a->inst, NULL, "Rounds", NULL, &trig, 1, &out, 1, &err))
        fail_msg("Rounds: %s", err.msg);
    bb_value_unref(trig);
    assert_ptr_equal(out->type, &BB_TYPE_U64);
    uint64_t n = out->u.u64;
    bb_value_unref(out);
    return n;
}

static void test_rounds_counted_and_snapshotted(void **state)
{
    (void)state;
    const char *types[] = {"agg::FedAvg", "agg::WeightAggregator", "agg::TrimmedMean",
                           "agg::Median"};
    for (size_t k = 0; k < 4; k++) {
        agg_t a = make(types[k], NULL);
        assert_int_equal(rounds_of(&a), 0);
        for (int r = 1; r <= 3; r++) {
            contribute_ok(&a, VEC(1, 2), u64(1));
            assert_int_equal(rounds_of(&a), (uint64_t)r - 1); /* a contribution is no round */
            bb_value_unref(aggregate_ok(&a, NULL));
            assert_int_equal(rounds_of(&a), (uint64_t)r);
        }
        bb_error err = {0};
        bb_value *r = NULL;
        assert_int_not_equal(aggregate(&a, &r, NULL, &err), BB_OK); /* empty: no round */
        assert_int_equal(rounds_of(&a), 3);
        uint8_t *snap = NULL;
        size_t len = 0;
        assert_int_equal(a.t->snapshot(a.inst, &snap, &len, &err), BB_OK);
        agg_t b = make(types[k], NULL);
        assert_int_equal(b.t->restore(b.inst, snap, len, &err), BB_OK);
        assert_int_equal(rounds_of(&b), 3);
        free(snap);
        drop(&a);
        drop(&b);
    }
}

/* ---- server optimizers (FedAdam, FedYogi, FedAdagrad) ------------------------------- */

static int set_model(agg_t *a, bb_value *params, bb_error *err)
{
    bb_value *out = NULL;
    int rc = pfx_call(a->t, a->inst, NULL, "SetModel", NULL, &params, 1, &out, 1, err);
    if (rc == BB_OK)
        assert_int_equal(out->type->kind, BB_VK_TRIGGER);
    bb_value_unref(out);
    bb_value_unref(params);
    return rc;
}

static void set_model_ok(agg_t *a, bb_value *params)
{
    bb_error err = {0};
    if (set_model(a, params, &err))
        fail_msg("SetModel: %s", err.msg);
}

/* The rounds of the hand computation: x0 = [1, 2, -1]; round 1 averages
 * [2, 2, -1] x 1 and [4, 2, -1] x 3 (mean [3.5, 2, -1], Delta [2.5, 0, 0]);
 * round 2 averages [1, 2.5, -1] and [1, 2.5, -3] (mean [1, 2.5, -2]). */
static bb_value *fedopt_round(agg_t *a, int round)
{
    if (round == 1) {
        contribute_ok(a, VEC(2, 2, -1), u64(1));
        contribute_ok(a, VEC(4, 2, -1), u64(3));
    } else {
        contribute_ok(a, VEC(1, 2.5f, -1), u64(1));
        contribute_ok(a, VEC(1, 2.5f, -3), u64(1));
    }
    return aggregate_ok(a, NULL);
}

/* Each expected value worked through by hand (Reddi et al. 2021, Algorithm
 * 2; server_lr 0.1, beta1 0.9, beta2 0.5, tau 1e-3, v from tau^2). Round 1,
 * coordinate 0, FedAdam: m = 0.1 x 2.5 = 0.25, v = 0.5e-6 + 0.5 x 6.25 =
 * 3.1250005, x = 1 + 0.1 x 0.25 / (1.7677671 + 0.001) = 1.014134; the other
 * coordinates have Delta 0 and stay. FedYogi's first v is tau^2 + 0.5
 * Delta^2 (Delta^2 > v): the same step. In round 2, coordinate 0 has
 * Delta^2 = 0.0002 < v, where Yogi lowers v by 0.5 Delta^2 and Adam halves
 * it, so the two part. FedAdagrad: v = tau^2 + Delta^2, x0 = 1 + 0.1 x 0.25
 * / (2.5000002 + 0.001) = 1.009996. */
static void test_server_optimizers_by_hand(void **state)
{
    (void)state;
    static const struct {
        const char *type, *config;
        float r1[3], r2[3];
    } CASES[] = {
        {"agg::FedAdam", "{\"server_lr\": 0.1, \"beta1\": 0.9, \"beta2\": 0.5, \"tau\": 0.001}",
         {1.014134f, 2, -1}, {1.032006f, 2.014102f, -1.014122f}},
        {"agg::FedYogi", "{\"server_lr\": 0.1, \"beta1\": 0.9, \"beta2\": 0.5, \"tau\": 0.001}",
         {1.014134f, 2, -1}, {1.026775f, 2.014102f, -1.014122f}},
        {"agg::FedAdagrad", "{\"server_lr\": 0.1, \"beta1\": 0.9, \"tau\": 0.001}",
         {1.009996f, 2, -1}, {1.018952f, 2.00998f, -1.00999f}},
    };
    for (size_t k = 0; k < 3; k++) {
        agg_t a = make(CASES[k].type, CASES[k].config);
        set_model_ok(&a, VEC(1, 2, -1));
        bb_value *r = fedopt_round(&a, 1);
        expect_vec_(r, CASES[k].r1, 3, 2e-6f, __LINE__);
        bb_value_unref(r);
        r = fedopt_round(&a, 2); /* no SetModel: the step starts from the last result */
        expect_vec_(r, CASES[k].r2, 3, 2e-6f, __LINE__);
        bb_value_unref(r);
        drop(&a);
    }
}

static void test_server_optimizer_errors_and_current_tensor(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAdam", "{\"server_lr\": 0.1, \"beta2\": 0.5}");
    bb_error err = {0};
    bb_value *r = NULL;
    contribute_ok(&a, VEC(2, 2, -1), u64(1));
    assert_int_equal(aggregate(&a, &r, NULL, &err), BB_ESTATE); /* no global model yet */
    assert_non_null(strstr(err.msg, "agg::FedAdam: no global model to step from: SetModel"));
    set_model_ok(&a, VEC(1, 2));
    assert_int_equal(aggregate(&a, &r, NULL, &err), BB_ETYPE);
    assert_non_null(strstr(err.msg, "contributions have shape [3], but the global model "
                                    "(SetModel) has shape [2]"));
    assert_int_equal(set_model(&a, u64(3), &err), BB_ETYPE);
    assert_non_null(strstr(err.msg, "SetModel takes the global model as an f32 tensor"));
    /* the failed Aggregates left the round open; CurrentTensor steps without
     * committing, so Aggregate then gives the same values */
    set_model_ok(&a, VEC(1, 2, -1));
    contribute_ok(&a, VEC(4, 2, -1), u64(3));
    bb_value *trig = bb_value_trigger(), *peek[2] = {0};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pfx_call(a.t, a.inst, NULL, "CurrentTensor", NULL, &trig, 1, &peek[i], 1,
                                  &err),
                         BB_OK);
    r = aggregate_ok(&a, NULL);
    EXPECT_VEC(r, 1.014134f, 2, -1);
    assert_true(bb_value_equal(peek[0], r) && bb_value_equal(peek[1], r));
    bb_value_unref(peek[0]);
    bb_value_unref(peek[1]);
    /* a global model of the wrong size fails the next Aggregate before
     * anything changes (the state, snapshot included, is the same after it),
     * although the last result is held by nobody else and could have been
     * recycled for the failed round's */
    bb_value_unref(trig);
    bb_value_unref(r);
    set_model_ok(&a, VEC(1, 2));
    contribute_ok(&a, VEC(4, 2, -1), u64(3));
    uint8_t *before = NULL, *after = NULL;
    size_t n_before = 0, n_after = 0;
    assert_int_equal(a.t->snapshot(a.inst, &before, &n_before, &err), BB_OK);
    bb_value *none = NULL;
    assert_int_equal(aggregate(&a, &none, NULL, &err), BB_ETYPE);
    assert_int_equal(a.t->snapshot(a.inst, &after, &n_after, &err), BB_OK);
    assert_int_equal(n_after, n_before);
    assert_memory_equal(after, before, n_before);
    free(before);
    free(after);
    drop(&a);
    /* the averaging aggregators take SetModel and ignore it */
    agg_t f = make("agg::FedAvg", NULL);
    set_model_ok(&f, VEC(100, 100));
    contribute_ok(&f, VEC(1, 2), u64(1));
    r = aggregate_ok(&f, NULL);
    EXPECT_VEC(r, 1, 2);
    bb_value_unref(r);
    drop(&f);
    /* configuration */
    const struct { const char *type, *config, *want; } BAD[] = {
        {"agg::FedAdagrad", "{\"beta2\": 0.9}", "unknown config key 'beta2'"},
        {"agg::FedYogi", "{\"server_lr\": 0}", "'server_lr' = 0 is outside"},
        {"agg::FedAdam", "{\"beta1\": 1}", "'beta1' = 1 is outside"},
        {"agg::FedAdam", "{\"tau\": -1}", "'tau' = -1 is outside"},
    };
    for (size_t k = 0; k < sizeof BAD / sizeof *BAD; k++) {
        assert_null(pfx_create(pfx_type(BAD[k].type), "aggregator", BAD[k].config, NULL, 1, NULL,
                               &err));
        if (!strstr(err.msg, BAD[k].want))
            fail_msg("%s %s: \"%s\" lacks \"%s\"", BAD[k].type, BAD[k].config, err.msg,
                     BAD[k].want);
    }
}

/* ---- SetParamNames ---------------------------------------------------------------- */

static int set_param_names(agg_t *a, bb_value *names, bb_error *err)
{
    bb_value *out = NULL;
    int rc = pfx_call(a->t, a->inst, NULL, "SetParamNames", NULL, &names, 1, &out, 1, err);
    if (rc == BB_OK)
        assert_int_equal(out->type->kind, BB_VK_TRIGGER);
    bb_value_unref(out);
    bb_value_unref(names);
    return rc;
}

static bb_value *json(const char *text)
{
    return bb_value_bytes(&BB_TYPE_BYTES, text, strlen(text));
}

static void set_param_names_ok(agg_t *a, const char *text)
{
    bb_error err = {0};
    if (set_param_names(a, json(text), &err))
        fail_msg("SetParamNames %s: %s", text, err.msg);
}

/* The coordinates ParamNames marks not trained take the round's weighted
 * mean exactly; the others get the very step they get without it (the
 * hand-worked rounds above: round 1's mean [3.5, 2, -1], round 2's
 * [1, 2.5, -2]). */
static void test_server_optimizer_param_names_keep_the_mean(void **state)
{
    (void)state;
    const char *cfg = "{\"server_lr\": 0.1, \"beta1\": 0.9, \"beta2\": 0.5, \"tau\": 0.001}";
    static const struct {
        const char *names;
        float r1[3], r2[3];
    } CASES[] = {
        /* the first coordinate a running statistic */
        {"[{\"name\": \"bn.running_mean\", \"offset\": 0, \"shape\": [1], \"trained\": false},"
         " {\"name\": \"w\", \"offset\": 1, \"shape\": [2], \"trained\": true}]",
         {3.5f, 2, -1}, {1, 2.014102f, -1.014122f}},
        /* the last two, as one [1, 2] tensor; the entries in any order */
        {"[{\"name\": \"v\", \"offset\": 1, \"shape\": [1, 2], \"trained\": false},"
         " {\"name\": \"w\", \"offset\": 0, \"shape\": [1], \"trained\": true}]",
         {1.014134f, 2, -1}, {1.032006f, 2.5f, -2}},
        /* overlapping and touching entries merge; an empty one is nothing */
        {"[{\"offset\": 1, \"shape\": [1], \"trained\": false},"
         " {\"offset\": 2, \"shape\": [1], \"trained\": false},"
         " {\"offset\": 1, \"shape\": [2], \"trained\": false},"
         " {\"offset\": 0, \"shape\": [0], \"trained\": false}]",
         {1.014134f, 2, -1}, {1.032006f, 2.5f, -2}},
        /* everything trained: the plain step */
        {"[{\"name\": \"w\", \"offset\": 0, \"shape\": [3], \"trained\": true}]",
         {1.014134f, 2, -1}, {1.032006f, 2.014102f, -1.014122f}},
    };
    for (size_t k = 0; k < sizeof CASES / sizeof *CASES; k++) {
        agg_t a = make("agg::FedAdam", cfg);
        set_model_ok(&a, VEC(1, 2, -1));
        set_param_names_ok(&a, CASES[k].names);
        bb_value *r = fedopt_round(&a, 1);
        expect_vec_(r, CASES[k].r1, 3, 2e-6f, __LINE__);
        bb_value_unref(r);
        r = fedopt_round(&a, 2);
        expect_vec_(r, CASES[k].r2, 3, 2e-6f, __LINE__);
        bb_value_unref(r);
        drop(&a);
    }
    /* the averaging aggregators take it and ignore it */
    agg_t f = make("agg::FedAvg", NULL);
    set_param_names_ok(&f, CASES[0].names);
    contribute_ok(&f, VEC(1, 2, 3), u64(1));
    bb_value *r = aggregate_ok(&f, NULL);
    EXPECT_VEC(r, 1, 2, 3);
    bb_value_unref(r);
    drop(&f);
}

/* Each malformed ParamNames is refused naming the entry and the problem,
 * and leaves the ranges set before in place; ranges past the round's size
 * fail the Aggregate before anything changes. */
static void test_server_optimizer_param_names_refused(void **state)
{
    (void)state;
    agg_t a = make("agg::FedAdam",
                   "{\"server_lr\": 0.1, \"beta1\": 0.9, \"beta2\": 0.5, \"tau\": 0.001}");
    bb_error err = {0};
    assert_int_equal(set_param_names(&a, u64(3), &err), BB_ETYPE);
    assert_non_null(strstr(err.msg, "agg::FedAdam: SetParamNames takes the model's ParamNames"));
    set_param_names_ok(&a, "[{\"offset\": 0, \"shape\": [1], \"trained\": false}]");
    static const struct { const char *names, *want; } BAD[] = {
        {"[{\"offset\": 0", "SetParamNames: not valid JSON (near byte"},
        {"{\"offset\": 0}", "SetParamNames: not a JSON array"},
        {"[7]", "entry 0 (\"?\") is not an object"},
        {"[{\"name\": \"w\", \"offset\": -1, \"shape\": [1], \"trained\": false}]",
         "entry 0 (\"w\") has no \"offset\" that is a non-negative integer"},
        {"[{\"offset\": 0, \"shape\": [1], \"trained\": true},"
         " {\"name\": \"b\", \"offset\": 0.5, \"shape\": [1], \"trained\": false}]",
         "entry 1 (\"b\") has no \"offset\""},
        {"[{\"name\": \"w\", \"offset\": 0, \"shape\": 3, \"trained\": false}]",
         "entry 0 (\"w\") has no \"shape\" array"},
        {"[{\"name\": \"w\", \"offset\": 0, \"shape\": [1.5], \"trained\": false}]",
         "entry 0 (\"w\") has a dimension that is not a non-negative integer"},
        {"[{\"name\": \"w\", \"offset\": 0, \"shape\": [1]}]",
         "entry 0 (\"w\") has no \"trained\" true or false"},
        {"[{\"name\": \"w\", \"offset\": 0, \"shape\": [4294967296, 4294967296, 16],"
         " \"trained\": false}]",
         "entry 0 (\"w\") has a shape too large to count"},
    };
    for (size_t k = 0; k < sizeof BAD / sizeof *BAD; k++) {
        assert_int_equal(set_param_names(&a, json(BAD[k].names), &err), BB_EINVAL);
        if (!strstr(err.msg, BAD[k].want))
            fail_msg("%s: \"%s\" lacks \"%s\"", BAD[k].names, err.msg, BAD[k].want);
    }
    /* the ranges set before the refusals still hold */
    set_model_ok(&a, VEC(1, 2, -1));
    bb_value *r = fedopt_round(&a, 1);
    EXPECT_VEC(r, 3.5f, 2, -1);
    bb_value_unref(r);
    /* a model of three coordinates, ranges up to 7 */
    set_param_names_ok(&a,
                       "[{\"name\": \"w\", \"offset\": 2, \"shape\": [5], \"trained\": false}]");
    contribute_ok(&a, VEC(1, 2.5f, -1), u64(1));
    assert_int_equal(aggregate(&a, &r, NULL, &err), BB_ETYPE);
    assert_non_null(strstr(err.msg, "SetParamNames names coordinates up to 7, but this round's "
                                    "contributions have 3"));
    drop(&a);
}

/* The optimizer's state (global model, moments, step count) survives a
 * snapshot: a restored FedYogi's second round equals the original's. Every
 * truncation is refused; a version-1 snapshot (before server state) still
 * restores. */
static void test_server_optimizer_snapshot(void **state)
{
    (void)state;
    const char *cfg = "{\"server_lr\": 0.1, \"beta2\": 0.5}";
    agg_t a = make("agg::FedYogi", cfg), b = make("agg::FedYogi", cfg);
    set_model_ok(&a, VEC(1, 2, -1));
    bb_value_unref(fedopt_round(&a, 1));
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err = {0};
    assert_int_equal(a.t->snapshot(a.inst, &snap, &len, &err), BB_OK);
    for (size_t cut = 0; cut < len; cut++)
        assert_int_not_equal(b.t->restore(b.inst, snap, cut, &err), BB_OK);
    assert_int_equal(b.t->restore(b.inst, snap, len, &err), BB_OK);
    bb_value *ra = fedopt_round(&a, 2), *rb = fedopt_round(&b, 2);
    EXPECT_VEC(rb, 1.026775f, 2.014102f, -1.014122f);
    assert_true(bb_value_equal(ra, rb));
    bb_value_unref(ra);
    bb_value_unref(rb);
    /* a global model of its own (SetModel after the last result) is kept too */
    set_model_ok(&a, VEC(0, 0, 0));
    free(snap);
    assert_int_equal(a.t->snapshot(a.inst, &snap, &len, &err), BB_OK);
    agg_t c = make("agg::FedYogi", cfg);
    assert_int_equal(c.t->restore(c.inst, snap, len, &err), BB_OK);
    ra = fedopt_round(&a, 2);
    rb = fedopt_round(&c, 2);
    assert_true(bb_value_equal(ra, rb));
    bb_value_unref(ra);
    bb_value_unref(rb);
    free(snap);
    /* versions 1 to 3: a FedAvg snapshot without the server section (u8 +
     * u64 + u8), without the round's tags and folded part (version 3: u8
     * tagged, u64 tag, u64 n, u64 samples, u64 weight, u8 has_mean, an empty
     * delimited poison text) and without the parts (version 4: u64 count) */
    agg_t f = make("agg::FedAvg", NULL), g = make("agg::FedAvg", NULL);
    contribute_ok(&f, VEC(1, 2), u64(1));
    bb_value_unref(aggregate_ok(&f, NULL));
    assert_int_equal(f.t->snapshot(f.inst, &snap, &len, &err), BB_OK);
    const size_t server_part = 10, parts = 8, fold_part = 1 + 8 + 8 + 8 + 8 + 1 + 1 + parts;
    for (uint32_t v = 1; v <= 3; v++) {
        memcpy(snap + 4, &v, 4);
        size_t cut = len - (v == 3 ? parts : fold_part) - (v == 1 ? server_part : 0);
        assert_int_equal(g.t->restore(g.inst, snap, cut, &err), BB_OK);
        assert_int_equal(rounds_of(&g), 1);
        assert_int_not_equal(g.t->restore(g.inst, snap, cut + 1, &err), BB_OK);
    }
    free(snap);
    drop(&a);
    drop(&b);
    drop(&c);
    drop(&f);
    drop(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fedavg_weighted_mean),
        cmocka_unit_test(test_fedavg_no_metadata_counts_one),
        cmocka_unit_test(test_fedavg_metadata_forms),
        cmocka_unit_test(test_fedavg_response_batch),
        cmocka_unit_test(test_fedavg_same_peer_replaces),
        cmocka_unit_test(test_fedavg_shape_mismatch_names_peer),
        cmocka_unit_test(test_fedavg_skip_bad_contribution),
        cmocka_unit_test(test_fedavg_hierarchical),
        cmocka_unit_test(test_fedavg_errors),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_current_tensor),
        cmocka_unit_test(test_result_memory_recycled_only_when_unshared),
        cmocka_unit_test(test_weight_aggregator_ignores_counts),
        cmocka_unit_test(test_trimmed_mean_hand_values),
        cmocka_unit_test(test_median_hand_values),
        cmocka_unit_test(test_poisoned_client),
        cmocka_unit_test(test_nan_sender_is_an_outlier),
        cmocka_unit_test(test_kernels_match_reference),
        cmocka_unit_test(test_threads_give_the_same_bits),
        cmocka_unit_test(test_fold_equals_one_pass),
        cmocka_unit_test(test_fold_holds_no_contribution),
        cmocka_unit_test(test_fold_refusals),
        cmocka_unit_test(test_fold_new_tag_drops_the_failed_round),
        cmocka_unit_test(test_fold_snapshot),
        cmocka_unit_test(test_snapshot_roundtrip_and_truncation),
        cmocka_unit_test(test_rounds_counted_and_snapshotted),
        cmocka_unit_test(test_server_optimizers_by_hand),
        cmocka_unit_test(test_server_optimizer_errors_and_current_tensor),
        cmocka_unit_test(test_server_optimizer_param_names_keep_the_mean),
        cmocka_unit_test(test_server_optimizer_param_names_refused),
        cmocka_unit_test(test_server_optimizer_snapshot),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
