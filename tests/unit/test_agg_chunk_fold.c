/*
 * The agg plugin's contributions folded piece by piece (ABI 2.3,
 * bb_component_type.fold_piece), driven directly as the engine drives it
 * for a response that arrives as a chunk stream (chunk_fold.c): pieces of
 * irregular sizes and two interleaved contributions fold to the mean a
 * whole Contribute gives; a contribution cut part-way counts on the
 * coordinates it brought only (each coordinate's weighted mean of the
 * values that arrived), and coordinates nobody brought fail Aggregate by
 * name; a non-finite value poisons the round naming the sender; the
 * aggregators that need whole contributions (TrimmedMean, skip mode)
 * answer BB_EUNSUPPORTED; out-of-order pieces and a second sender are
 * refused; a snapshot taken mid-stream restores the stream cut.
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

#include "support/plugin_fixtures.h"

#define N 1000 /* elements of a contribution */

typedef struct agg_t {
    const bb_component_type *t;
    void *inst;
} agg_t;

static agg_t make(const char *type, const char *config)
{
    agg_t a = {pfx_type(type), NULL};
    assert_non_null(a.t);
    assert_non_null(a.t->fold_piece);
    bb_error err = {0};
    a.inst = pfx_create(a.t, "aggregator", config, NULL, 1, NULL, &err);
    if (!a.inst)
        fail_msg("create %s: %s", type, err.msg);
    return a;
}

static float value_of(int who, size_t j)
{
    return (float)who * 10.0f + (float)(j % 97) * 0.25f;
}

static void fill(float *x, int who)
{
    for (size_t j = 0; j < N; j++)
        x[j] = value_of(who, j);
}

/* BEGIN of contribution `stream` from peer seed with num_samples n to
 * request req. */
static int begin(agg_t *a, uint64_t stream, uint8_t seed, uint64_t n, uint64_t req,
                 bb_error *err)
{
    bb_value *rest_items[1] = {bb_value_u64(&BB_TYPE_U64, n)};
    bb_value *rest = bb_value_list(&BB_TYPE_COMPOSITE, rest_items, 1);
    bb_value *sender = pfx_peer(seed), *request = bb_value_u64(&BB_TYPE_REQUEST_ID, req);
    int64_t dims[1] = {N};
    bb_fold_piece p = {.struct_size = sizeof p, .step = BB_FOLD_BEGIN, .stream = stream,
                       .request = request, .sender = sender, .rest = rest,
                       .dtype = BB_DT_FLOAT, .ndim = 1, .dims = dims};
    int rc = a->t->fold_piece(a->inst, NULL, &p, err);
    bb_value_unref(rest);
    bb_value_unref(sender);
    bb_value_unref(request);
    return rc;
}

static int data(agg_t *a, uint64_t stream, const float *x, size_t from, size_t count,
                bb_error *err)
{
    bb_fold_piece p = {.struct_size = sizeof p, .step = BB_FOLD_DATA, .stream = stream,
                       .offset = from, .count = count, .data = x + from};
    return a->t->fold_piece(a->inst, NULL, &p, err);
}

static int step(agg_t *a, uint64_t stream, bb_fold_step s, bb_error *err)
{
    bb_fold_piece p = {.struct_size = sizeof p, .step = s, .stream = stream};
    return a->t->fold_piece(a->inst, NULL, &p, err);
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        bb_error err_ = {0};                                                                       \
        if ((call) != BB_OK)                                                                       \
            fail_msg("%s: %s", #call, err_.msg);                                                   \
    } while (0)
#define E (&err_)

/* Aggregate: BB_OK and *out, or the status with err. */
static int aggregate(agg_t *a, bb_value **out, uint64_t *samples, bb_error *err)
{
    bb_value *trig = bb_value_trigger(), *o[2] = {0};
    int rc = pfx_call(a->t, a->inst, NULL, "Aggregate", NULL, &trig, 1, o, 2, err);
    bb_value_unref(trig);
    if (!rc && samples)
        *samples = o[1]->u.u64;
    bb_value_unref(o[1]);
    *out = o[0];
    return rc;
}

/* The whole path: Contribute(Composite(x, n)) tagged with req. */
static void contribute_whole(agg_t *a, const float *x, uint8_t seed, uint64_t n, uint64_t req)
{
    int64_t d = N;
    bb_value *items[2] = {pfx_tensor(x, 1, &d), bb_value_u64(&BB_TYPE_U64, n)};
    bb_value *bundle = bb_value_list(&BB_TYPE_COMPOSITE, items, 2);
    bb_value *peer = pfx_peer(seed);
    bb_value *batch = bb_value_response_batch(&bundle, &peer, 1);
    bb_value *in[2] = {batch, bb_value_u64(&BB_TYPE_REQUEST_ID, req)}, *cmd = NULL;
    bb_error err = {0};
    if (pfx_call(a->t, a->inst, NULL, "Contribute", NULL, in, 2, &cmd, 1, &err))
        fail_msg("Contribute: %s", err.msg);
    bb_value_unref(cmd);
    bb_value_unref(in[0]);
    bb_value_unref(in[1]);
}

static void expect_close(const bb_value *got, const float *want, float tol)
{
    assert_non_null(got);
    assert_int_equal(bb_tensor_numel(got), N);
    for (size_t j = 0; j < N; j++)
        if (!(fabsf(bb_tensor_f32(got)[j] - want[j]) <= tol * (1.0f + fabsf(want[j]))))
            fail_msg("[%zu] = %.9g, want %.9g", j, (double)bb_tensor_f32(got)[j],
                     (double)want[j]);
}

/* Three senders, two of them in pieces interleaved (sizes 1, 7, 300, ...),
 * one whole: the same mean as three whole Contributes, up to rounding. */
static void test_chunk_fold_pieces_give_the_whole_mean(void **state)
{
    (void)state;
    static float x1[N], x2[N], x3[N];
    fill(x1, 1), fill(x2, 2), fill(x3, 3);
    agg_t whole = make("agg::FedAvg", NULL), pieces = make("agg::FedAvg", NULL);
    contribute_whole(&whole, x1, 11, 5, 7);
    contribute_whole(&whole, x2, 12, 3, 7);
    contribute_whole(&whole, x3, 13, 2, 7);
    bb_value *want = NULL, *got = NULL;
    uint64_t sw = 0, sg = 0;
    bb_error err = {0};
    assert_int_equal(aggregate(&whole, &want, &sw, &err), BB_OK);

    OK(begin(&pieces, 1, 11, 5, 7, E));
    OK(begin(&pieces, 2, 12, 3, 7, E));
    const size_t sizes[] = {1, 7, 300, 2, 90, 600};
    size_t at1 = 0, at2 = 0;
    for (size_t k = 0; at1 < N || at2 < N; k++) {
        size_t n1 = sizes[k % 6] < N - at1 ? sizes[k % 6] : N - at1;
        size_t n2 = sizes[(k + 3) % 6] < N - at2 ? sizes[(k + 3) % 6] : N - at2;
        if (n1)
            OK(data(&pieces, 1, x1, at1, n1, E));
        at1 += n1;
        if (k == 2)
            contribute_whole(&pieces, x3, 13, 2, 7); /* a whole one lands meanwhile */
        if (n2)
            OK(data(&pieces, 2, x2, at2, n2, E));
        at2 += n2;
    }
    OK(step(&pieces, 1, BB_FOLD_END, E));
    OK(step(&pieces, 2, BB_FOLD_END, E));
    assert_int_equal(aggregate(&pieces, &got, &sg, &err), BB_OK);
    assert_int_equal(sg, sw);
    expect_close(got, bb_tensor_f32(want), 1e-5f);
    bb_value_unref(want);
    bb_value_unref(got);
    whole.t->destroy(whole.inst);
    pieces.t->destroy(pieces.inst);
}

/* Sender A (weight 4) cut after 300 elements, B (weight 1) whole: the
 * first 300 coordinates are the weighted mean of both, the rest are B's.
 * Cut alone, the coordinates nobody brought fail Aggregate by name. */
static void test_chunk_fold_cut_counts_on_its_prefix(void **state)
{
    (void)state;
    static float xa[N], xb[N], want[N];
    fill(xa, 1), fill(xb, 2);
    for (size_t j = 0; j < N; j++)
        want[j] = j < 300 ? (4 * xa[j] + 1 * xb[j]) / 5 : xb[j];
    agg_t a = make("agg::FedAvg", NULL);
    OK(begin(&a, 1, 11, 4, 9, E));
    OK(data(&a, 1, xa, 0, 300, E));
    OK(step(&a, 1, BB_FOLD_ABORT, E));
    bb_error err = {0};
    assert_int_equal(data(&a, 1, xa, 300, 10, &err), BB_EINVAL); /* cut: no more of it */
    OK(begin(&a, 2, 12, 1, 9, E));
    OK(data(&a, 2, xb, 0, 650, E));
    OK(data(&a, 2, xb, 650, N - 650, E));
    OK(step(&a, 2, BB_FOLD_END, E));
    bb_value *got = NULL;
    uint64_t samples = 0;
    assert_int_equal(aggregate(&a, &got, &samples, &err), BB_OK);
    assert_int_equal(samples, 1); /* the cut sender's samples are not the round's */
    expect_close(got, want, 1e-6f);
    bb_value_unref(got);

    OK(begin(&a, 3, 11, 4, 10, E)); /* the next round: cut alone */
    OK(data(&a, 3, xa, 0, 400, E));
    OK(step(&a, 3, BB_FOLD_ABORT, E));
    assert_int_not_equal(aggregate(&a, &got, NULL, &err), BB_OK);
    assert_non_null(strstr(err.msg, "coordinates [400, 1000)"));
    a.t->destroy(a.inst);
}

/* A non-finite value in a piece poisons the round naming the sender; a
 * second contribution of a sender, out-of-order pieces and an unknown
 * stream are refused; the aggregators that need whole contributions say
 * BB_EUNSUPPORTED. */
static void test_chunk_fold_refusals(void **state)
{
    (void)state;
    static float x[N];
    fill(x, 1);
    agg_t a = make("agg::FedAvg", NULL);
    bb_error err = {0};
    OK(begin(&a, 1, 11, 2, 5, E));
    assert_int_equal(begin(&a, 2, 11, 2, 5, &err), BB_EEXIST); /* the same sender again */
    assert_int_equal(data(&a, 1, x, 5, 10, &err), BB_EINVAL);   /* not where it is */
    assert_non_null(strstr(err.msg, "out of order"));
    assert_int_equal(data(&a, 9, x, 0, 10, &err), BB_EINVAL);   /* no such stream */
    assert_int_equal(step(&a, 1, BB_FOLD_END, &err), BB_EINVAL); /* ended early */
    OK(data(&a, 1, x, 0, 100, E));
    x[150] = NAN;
    assert_int_equal(data(&a, 1, x, 100, 100, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "non-finite"));
    assert_non_null(strstr(err.msg, "index 150"));
    assert_non_null(strstr(err.msg, "peer "));
    bb_value *got = NULL;
    assert_int_not_equal(aggregate(&a, &got, NULL, &err), BB_OK); /* poisoned */
    assert_non_null(strstr(err.msg, "non-finite"));
    a.t->destroy(a.inst);

    agg_t t = make("agg::TrimmedMean", NULL), s = make("agg::FedAvg",
                                                       "{\"on_bad_contribution\": \"skip\"}");
    assert_int_equal(begin(&t, 1, 11, 2, 5, &err), BB_EUNSUPPORTED);
    assert_int_equal(begin(&s, 1, 11, 2, 5, &err), BB_EUNSUPPORTED);
    t.t->destroy(t.inst);
    s.t->destroy(s.inst);
}

/* A snapshot taken while a contribution arrives restores it cut: the
 * restored round aggregates as the cut round does. */
static void test_chunk_fold_snapshot_restores_cut(void **state)
{
    (void)state;
    static float xa[N], xb[N];
    fill(xa, 1), fill(xb, 2);
    agg_t a = make("agg::FedAvg", NULL), b = make("agg::FedAvg", NULL);
    OK(begin(&a, 1, 12, 1, 3, E));
    OK(data(&a, 1, xb, 0, N, E));
    OK(step(&a, 1, BB_FOLD_END, E));
    OK(begin(&a, 2, 11, 4, 3, E));
    OK(data(&a, 2, xa, 0, 250, E));
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err = {0};
    assert_int_equal(a.t->snapshot(a.inst, &snap, &len, &err), BB_OK);
    assert_int_equal(b.t->restore(b.inst, snap, len, &err), BB_OK);
    free(snap);
    OK(step(&a, 2, BB_FOLD_ABORT, E));
    assert_int_equal(data(&b, 2, xa, 250, 10, &err), BB_EINVAL); /* the stream is gone */
    bb_value *ra = NULL, *rb = NULL;
    assert_int_equal(aggregate(&a, &ra, NULL, &err), BB_OK);
    assert_int_equal(aggregate(&b, &rb, NULL, &err), BB_OK);
    expect_close(rb, bb_tensor_f32(ra), 0);
    assert_true(fabsf(bb_tensor_f32(ra)[0] - (4 * xa[0] + xb[0]) / 5) < 1e-5f);
    assert_true(bb_tensor_f32(ra)[600] == xb[600]);
    bb_value_unref(ra);
    bb_value_unref(rb);
    a.t->destroy(a.inst);
    b.t->destroy(b.inst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunk_fold_pieces_give_the_whole_mean),
        cmocka_unit_test(test_chunk_fold_cut_counts_on_its_prefix),
        cmocka_unit_test(test_chunk_fold_refusals),
        cmocka_unit_test(test_chunk_fold_snapshot_restores_cut),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
