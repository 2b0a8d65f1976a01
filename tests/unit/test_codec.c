/*
 * Unit tests for the codecs of plugins/codec, loaded from the build's
 * codec.so and driven through their dispatch entry. Each codec's round-trip
 * error bound is stated next to the test that asserts it:
 *
 *   codec::F16          every half decodes and re-encodes to itself; ties
 *                       round to even; relative error <= 2^-11 in the normal
 *                       range, absolute <= 2^-25 below it; infinities and
 *                       NaNs kept; 65520 and up overflow to infinity
 *   codec::Int8Affine   |x - x'| <= scale / 2 (+ float rounding) within the
 *                       range, per tensor and per channel; 0 is exact;
 *                       calibrated values beyond the range saturate
 *   codec::TopK         the k entries sent are exact and are the largest
 *                       magnitudes; with error feedback nothing is lost:
 *                       sum(decoded) + residual == sum(inputs)
 *   codec::ProductQuantization   every decoded sub-vector is its nearest
 *                       centroid (re-encoding a decoded tensor gives the
 *                       same code); clustered data comes back within the
 *                       clusters' noise; Gaussian rows keep < 15% of their
 *                       variance as error
 *
 * and the compression ratio of each is printed. Codes are wire input: every
 * truncation, a fuzz of byte flips and each hand-made corruption must be
 * refused cleanly (run under ASan by make SAN=1). State — calibration,
 * codebooks, the TopK residual — survives snapshot and restore.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/plugin_fixtures.h"
#include "support/test_rng.h"

typedef struct cdc {
    const bb_component_type *t;
    void *inst;
} cdc;

static cdc make(const char *type, const char *config)
{
    cdc c = {pfx_type(type), NULL};
    assert_non_null(c.t);
    bb_error err = {0};
    c.inst = pfx_create(c.t, "codec", config, NULL, 7, NULL, &err);
    if (!c.inst)
        fail_msg("create %s %s: %s", type, config ? config : "", err.msg);
    return c;
}

static void drop(cdc *c) { c->t->destroy(c->inst); }

static int call(cdc *c, const char *op, bb_value *in, bb_value **out, bb_error *err)
{
    bb_value *o[1] = {NULL};
    int rc = pfx_call(c->t, c->inst, NULL, op, NULL, &in, 1, o, 1, err);
    *out = o[0];
    return rc;
}

static bb_value *call_ok(cdc *c, const char *op, bb_value *in)
{
    bb_value *out = NULL;
    bb_error err = {0};
    if (call(c, op, in, &out, &err))
        fail_msg("%s: %s", op, err.msg);
    return out;
}

/* The op must fail with code `code` and a message containing `what`. */
static void call_fails(cdc *c, const char *op, bb_value *in, int code, const char *what)
{
    bb_value *out = NULL;
    bb_error err = {0};
    int rc = call(c, op, in, &out, &err);
    if (rc == BB_OK)
        fail_msg("%s succeeded; expected \"%s\"", op, what);
    assert_null(out);
    if (code)
        assert_int_equal(err.code, code);
    if (!strstr(err.msg, what))
        fail_msg("%s: \"%s\" does not say \"%s\"", op, err.msg, what);
}

static double gauss(void)
{
    double u1 = ((double)(rnd() >> 11) + 1) / 9007199254740993.0;
    double u2 = (double)(rnd() >> 11) / 9007199254740992.0;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

static bb_value *tensor(uint32_t nd, const int64_t *dims, double (*gen)(size_t i, void *ctx),
                        void *ctx)
{
    bb_value *t = bb_value_tensor_new(BB_DT_FLOAT, nd, dims);
    assert_non_null(t);
    size_t n = bb_tensor_numel(t);
    for (size_t i = 0; i < n; i++)
        bb_tensor_f32(t)[i] = (float)gen(i, ctx);
    return t;
}

static double gen_gauss(size_t i, void *ctx)
{
    (void)i;
    return gauss() * (ctx ? *(double *)ctx : 1.0);
}

static size_t code_bytes(const bb_value *code) { return code->u.tensor.nbytes; }

static void report_ratio(const char *what, size_t elements, const bb_value *code)
{
    printf("codec ratio: %-46s %8zu floats = %8zu bytes -> %7zu bytes: %6.2fx\n", what,
           elements, elements * 4, code_bytes(code),
           (double)elements * 4 / (double)code_bytes(code));
}

/* Snapshot a, restore into a fresh instance of the same type and config. */
static cdc clone(cdc *a, const char *type, const char *config)
{
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err = {0};
    assert_int_equal(a->t->snapshot(a->inst, &snap, &len, &err), BB_OK);
    cdc b = make(type, config);
    if (b.t->restore(b.inst, snap, len, &err))
        fail_msg("restore: %s", err.msg);
    /* every truncation of the snapshot is refused, and leaves no leak */
    for (size_t cut = 0; cut < len; cut += 1 + cut / 8) {
        cdc c = make(type, config);
        assert_int_not_equal(c.t->restore(c.inst, snap, cut, &err), BB_OK);
        drop(&c);
    }
    free(snap);
    return b;
}

/* ---- codec::F16 ------------------------------------------------------------------------- */

static float f16_round_trip(cdc *c, float x)
{
    int64_t one = 1;
    bb_value *t = bb_value_tensor_copy(BB_DT_FLOAT, 1, &one, &x, 4);
    bb_value *code = call_ok(c, "Compress", t);
    bb_value *back = call_ok(c, "Decompress", code);
    float y = bb_tensor_f32(back)[0];
    bb_value_unref(t);
    bb_value_unref(code);
    bb_value_unref(back);
    return y;
}

/* Every binary16 value decodes exactly and encodes back to itself. */
static void test_codec_f16_every_half(void **state)
{
    (void)state;
    cdc c = make("codec::F16", NULL);
    int64_t n = 65536;
    bb_value *halves = bb_value_tensor_new(BB_DT_FLOAT16, 1, &n);
    uint16_t *h = (uint16_t *)(void *)halves->u.tensor.data;
    for (int64_t i = 0; i < n; i++)
        h[i] = (uint16_t)i;
    bb_value *f = call_ok(&c, "Decompress", halves);
    bb_value *again = call_ok(&c, "Compress", f);
    const uint16_t *g = (const uint16_t *)(const void *)again->u.tensor.data;
    for (int64_t i = 0; i < n; i++) {
        bool nan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff);
        if (nan) {
            assert_true(isnan(bb_tensor_f32(f)[i]));
            assert_true((g[i] & 0x7c00) == 0x7c00 && (g[i] & 0x3ff)); /* still a NaN */
            assert_int_equal(g[i] & 0x8000, i & 0x8000);
        } else if (g[i] != (uint16_t)i) {
            fail_msg("half 0x%04llx -> %g -> 0x%04x", (long long)i, (double)bb_tensor_f32(f)[i],
                     g[i]);
        }
    }
    assert_true(bb_tensor_f32(f)[0x3c00] == 1.0f);
    assert_true(bb_tensor_f32(f)[0x7bff] == 65504.0f);
    assert_true(bb_tensor_f32(f)[0x0001] == ldexpf(1, -24));
    assert_true(isinf(bb_tensor_f32(f)[0xfc00]) && bb_tensor_f32(f)[0xfc00] < 0);
    bb_value_unref(halves);
    bb_value_unref(f);
    bb_value_unref(again);
    drop(&c);
}

static void test_codec_f16_rounding(void **state)
{
    (void)state;
    cdc c = make("codec::F16", NULL);
    const float ulp1 = ldexpf(1, -10); /* the spacing of halves in [1, 2) */
    /* ties go to the even neighbour */
    assert_true(f16_round_trip(&c, 1 + ulp1 / 2) == 1.0f);
    assert_true(f16_round_trip(&c, 1 + 3 * ulp1 / 2) == 1 + 2 * ulp1);
    assert_true(f16_round_trip(&c, nextafterf(1 + ulp1 / 2, 2)) == 1 + ulp1);
    /* the top of the range, and overflow */
    assert_true(f16_round_trip(&c, 65504) == 65504);
    assert_true(f16_round_trip(&c, 65519.99f) == 65504);
    assert_true(isinf(f16_round_trip(&c, 65520)));
    assert_true(f16_round_trip(&c, -1e30f) == -INFINITY);
    /* infinities and NaN */
    assert_true(f16_round_trip(&c, INFINITY) == INFINITY);
    assert_true(f16_round_trip(&c, -INFINITY) == -INFINITY);
    assert_true(isnan(f16_round_trip(&c, NAN)));
    assert_true(isnan(f16_round_trip(&c, -NAN)) && signbit(f16_round_trip(&c, -NAN)));
    /* subnormals: 2^-25 is a tie between 0 and 2^-24 (rounds to 0, even) */
    assert_true(f16_round_trip(&c, ldexpf(1, -24)) == ldexpf(1, -24));
    assert_true(f16_round_trip(&c, ldexpf(1, -25)) == 0);
    assert_true(f16_round_trip(&c, ldexpf(3, -25)) == ldexpf(1, -23)); /* 1.5 ulp -> 2 */
    assert_true(f16_round_trip(&c, nextafterf(ldexpf(1, -25), 1)) == ldexpf(1, -24));
    assert_true(signbit(f16_round_trip(&c, -0.0f)));
    /* the largest subnormal rounds up into the smallest normal */
    assert_true(f16_round_trip(&c, ldexpf(1, -14) - ldexpf(1, -26)) == ldexpf(1, -14));
    drop(&c);
}

/* Bound: relative error <= 2^-11 for |x| in [2^-14, 65504], absolute
 * <= 2^-25 below 2^-14. */
static void test_codec_f16_error_bound(void **state)
{
    (void)state;
    cdc c = make("codec::F16", NULL);
    int64_t n = 200000;
    bb_value *x = bb_value_tensor_new(BB_DT_FLOAT, 1, &n);
    float *v = bb_tensor_f32(x);
    for (int64_t i = 0; i < n; i++) /* log-uniform magnitudes in [2^-26, 2^15) */
        v[i] = (float)((rnd() & 1 ? -1 : 1) * ldexp(1.0 + (double)(rnd() % 1000000) / 1e6,
                                                   (int)(rnd() % 41) - 26));
    bb_value *code = call_ok(&c, "Compress", x);
    assert_int_equal(code->u.tensor.dtype, BB_DT_FLOAT16);
    assert_int_equal(code->u.tensor.ndim, 1);
    bb_value *back = call_ok(&c, "Decompress", code);
    double worst_rel = 0, worst_abs = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = fabs((double)v[i]), e = fabs((double)v[i] - bb_tensor_f32(back)[i]);
        if (a >= ldexp(1, -14))
            worst_rel = fmax(worst_rel, e / a);
        else
            worst_abs = fmax(worst_abs, e);
    }
    printf("codec::F16 worst relative error %.3g (bound %.3g), worst absolute below 2^-14 "
           "%.3g (bound %.3g)\n",
           worst_rel, ldexp(1, -11), worst_abs, ldexp(1, -25));
    assert_true(worst_rel <= ldexp(1, -11));
    assert_true(worst_abs <= ldexp(1, -25));
    report_ratio("codec::F16", (size_t)n, code);
    assert_int_equal(code_bytes(code) * 2, (size_t)n * 4);
    bb_value_unref(x);
    bb_value_unref(code);
    bb_value_unref(back);
    drop(&c);
}

/* ---- codec::Int8Affine ---------------------------------------------------------------------- */

/* The scale a range gives (the codec's formula). */
static double scale_of(double lo, double hi)
{
    return (fmax(hi, 0) - fmin(lo, 0)) / 255.0;
}

/* |x - x'| <= scale / 2, plus float rounding of x / scale and of the product. */
static void assert_within(const float *x, const float *y, size_t n, double scale, size_t stride,
                          const char *what)
{
    double worst = 0;
    for (size_t i = 0; i < n; i += stride) {
        double e = fabs((double)x[i] - y[i]);
        worst = fmax(worst, e);
        if (e > scale / 2 * (1 + 1e-5) + fabs(x[i]) * 1e-6)
            fail_msg("%s: element %zu: %g -> %g, off by %g > scale/2 = %g", what, i,
                     (double)x[i], (double)y[i], e, scale / 2);
    }
    printf("%s: worst error %.4g, bound scale/2 = %.4g\n", what, worst, scale / 2);
}

static void test_codec_int8_per_tensor(void **state)
{
    (void)state;
    cdc c = make("codec::Int8Affine", NULL);
    int64_t dims[2] = {64, 100};
    double sd = 3;
    bb_value *x = tensor(2, dims, gen_gauss, &sd);
    bb_tensor_f32(x)[5] = 0; /* zero is exact */
    bb_value *code = call_ok(&c, "Compress", x);
    assert_int_equal(code->u.tensor.dtype, BB_DT_UINT8);
    bb_value *back = call_ok(&c, "Decompress", code);
    assert_int_equal(back->u.tensor.ndim, 2);
    assert_int_equal(back->u.tensor.dims[1], 100);
    const float *v = bb_tensor_f32(x), *w = bb_tensor_f32(back);
    float lo = v[0], hi = v[0];
    for (size_t i = 0; i < 6400; i++) {
        lo = fminf(lo, v[i]);
        hi = fmaxf(hi, v[i]);
    }
    assert_within(v, w, 6400, scale_of(lo, hi), 1, "codec::Int8Affine per tensor");
    assert_true(w[5] == 0.0f);
    report_ratio("codec::Int8Affine per tensor [64, 100]", 6400, code);
    bb_value_unref(x);
    bb_value_unref(code);
    bb_value_unref(back);
    drop(&c);
}

/* Channel c of [rows, 8] has scale 10^(c - 4): per channel, each keeps its
 * own precision, which per tensor the largest channel would swamp. */
static double gen_channels(size_t i, void *ctx)
{
    (void)ctx;
    return gauss() * pow(10, (double)(i % 8) - 4);
}

static void test_codec_int8_per_channel(void **state)
{
    (void)state;
    cdc c = make("codec::Int8Affine", "{\"granularity\": \"per_channel\"}");
    cdc t = make("codec::Int8Affine", NULL);
    int64_t dims[2] = {500, 8};
    bb_value *x = tensor(2, dims, gen_channels, NULL);
    bb_value *code = call_ok(&c, "Compress", x), *back = call_ok(&c, "Decompress", code);
    bb_value *tcode = call_ok(&t, "Compress", x), *tback = call_ok(&t, "Decompress", tcode);
    const float *v = bb_tensor_f32(x);
    for (int ch = 0; ch < 8; ch++) {
        float lo = v[ch], hi = v[ch];
        for (int r = 0; r < 500; r++) {
            lo = fminf(lo, v[r * 8 + ch]);
            hi = fmaxf(hi, v[r * 8 + ch]);
        }
        char what[64];
        snprintf(what, sizeof what, "codec::Int8Affine per channel, channel %d", ch);
        assert_within(v + ch, bb_tensor_f32(back) + ch, 500 * 8, scale_of(lo, hi), 8, what);
    }
    /* the smallest channel: per tensor it is almost all rounded to zero */
    double e_ch = 0, e_t = 0;
    for (int r = 0; r < 500; r++) {
        e_ch += fabs(v[r * 8] - bb_tensor_f32(back)[r * 8]);
        e_t += fabs(v[r * 8] - bb_tensor_f32(tback)[r * 8]);
    }
    assert_true(e_ch * 100 < e_t);
    report_ratio("codec::Int8Affine per channel [500, 8]", 4000, code);
    bb_value_unref(x);
    bb_value_unref(code);
    bb_value_unref(back);
    bb_value_unref(tcode);
    bb_value_unref(tback);
    drop(&c);
    drop(&t);
}

static double gen_linear(size_t i, void *ctx)
{
    return (double)i * *(double *)ctx - 1.0;
}

/* TrainCodebook fixes the range: within it the bound holds, beyond it
 * values saturate to its ends; the calibration survives a snapshot. */
static void test_codec_int8_calibrated(void **state)
{
    (void)state;
    cdc c = make("codec::Int8Affine", "{\"granularity\": \"per_channel\", \"axis\": 1}");
    int64_t sd[2] = {100, 4}, xd[2] = {3, 4};
    double step = 0.01; /* samples cover [-1, 2.99] */
    bb_value *samples = tensor(2, sd, gen_linear, &step);
    bb_value *cmd = call_ok(&c, "TrainCodebook", samples);
    assert_ptr_equal(cmd->type, &BB_TYPE_COMMAND_ID);
    assert_int_equal(cmd->u.u64, 1);
    float in[12] = {-1, 0, 0.5f, 2.9f, -5, 100, 0, 1, 0.25f, -0.5f, 1.5f, 2.0f};
    bb_value *x = bb_value_tensor_copy(BB_DT_FLOAT, 2, xd, in, sizeof in);
    bb_value *code = call_ok(&c, "Compress", x), *back = call_ok(&c, "Decompress", code);
    const float *y = bb_tensor_f32(back), *s = bb_tensor_f32(samples);
    for (int ch = 0; ch < 4; ch++) {
        float lo = s[ch], hi = s[396 + ch];
        double sc = scale_of(lo, hi);
        for (int r = 0; r < 3; r++) {
            float v = in[r * 4 + ch], clipped = fminf(fmaxf(v, fminf(lo, 0)), fmaxf(hi, 0));
            if (fabs(clipped - y[r * 4 + ch]) > sc / 2 * (1 + 1e-5))
                fail_msg("channel %d row %d: %g -> %g (range [%g, %g])", ch, r, (double)v,
                         (double)y[r * 4 + ch], (double)lo, (double)hi);
        }
    }
    assert_true(y[4] <= -0.9f && y[4] >= -1.1f); /* -5 saturates at the range's bottom */
    assert_true(y[5] > 2.8f && y[5] < 3.1f);     /* 100 at its top */
    /* the same input codes the same after a snapshot and restore */
    cdc d = clone(&c, "codec::Int8Affine", "{\"granularity\": \"per_channel\", \"axis\": 1}");
    bb_value *code2 = call_ok(&d, "Compress", x);
    assert_true(bb_value_equal(code, code2));
    /* another channel count than the calibration's is refused */
    int64_t bad[2] = {2, 5};
    bb_value *x5 = bb_value_tensor_new(BB_DT_FLOAT, 2, bad);
    call_fails(&d, "Compress", x5, BB_ETYPE, "calibrated 4");
    bb_value *again = call_ok(&d, "TrainCodebook", samples);
    assert_int_equal(again->u.u64, 2); /* the fit count came through the snapshot */
    bb_value_unref(samples);
    bb_value_unref(cmd);
    bb_value_unref(again);
    bb_value_unref(x);
    bb_value_unref(x5);
    bb_value_unref(code);
    bb_value_unref(code2);
    bb_value_unref(back);
    drop(&c);
    drop(&d);
}

static void test_codec_int8_refuses(void **state)
{
    (void)state;
    cdc c = make("codec::Int8Affine", NULL);
    float v[3] = {1, NAN, 2};
    int64_t n = 3;
    bb_value *x = bb_value_tensor_copy(BB_DT_FLOAT, 1, &n, v, sizeof v);
    call_fails(&c, "Compress", x, BB_EINVAL, "element 1");
    v[1] = INFINITY;
    bb_value *y = bb_value_tensor_copy(BB_DT_FLOAT, 1, &n, v, sizeof v);
    call_fails(&c, "TrainCodebook", y, BB_EINVAL, "element 1");
    bb_value *i64 = bb_value_tensor_new(BB_DT_INT64, 1, &n);
    call_fails(&c, "Compress", i64, BB_ETYPE, "f32 tensor");
    int64_t one = 1;
    cdc bad = make("codec::Int8Affine", "{\"granularity\": \"per_channel\", \"axis\": 3}");
    bb_value *s = bb_value_tensor_new(BB_DT_FLOAT, 1, &one);
    call_fails(&bad, "Compress", s, BB_ETYPE, "axis 3");
    bb_error err = {0};
    assert_null(pfx_create(c.t, "codec", "{\"granularity\": \"per_row\"}", NULL, 1, NULL, &err));
    assert_non_null(strstr(err.msg, "granularity"));
    assert_null(pfx_create(c.t, "codec", "{\"bits\": 4}", NULL, 1, NULL, &err));
    assert_non_null(strstr(err.msg, "unknown config key 'bits'"));
    bb_value_unref(x);
    bb_value_unref(y);
    bb_value_unref(i64);
    bb_value_unref(s);
    drop(&c);
    drop(&bad);
}

/* ---- codec::TopK ------------------------------------------------------------------------------ */

/* The entries sent are exact and the largest: every entry left out is no
 * larger than the smallest sent. Returns the count sent. */
static size_t check_topk(const float *v, const float *d, size_t n)
{
    size_t sent = 0;
    float smallest_sent = INFINITY, largest_left = 0;
    for (size_t i = 0; i < n; i++) {
        if (d[i] != 0) {
            assert_true(d[i] == v[i]);
            smallest_sent = fminf(smallest_sent, fabsf(v[i]));
            sent++;
        } else {
            largest_left = fmaxf(largest_left, fabsf(v[i]));
        }
    }
    assert_true(largest_left <= smallest_sent);
    return sent;
}

static void test_codec_topk_selects(void **state)
{
    (void)state;
    cdc c = make("codec::TopK", "{\"error_feedback\": false}");
    int64_t n = 10000;
    bb_value *x = tensor(1, &n, gen_gauss, NULL);
    bb_value *code = call_ok(&c, "Compress", x), *back = call_ok(&c, "Decompress", code);
    assert_int_equal(check_topk(bb_tensor_f32(x), bb_tensor_f32(back), 10000), 100);
    report_ratio("codec::TopK ratio 0.01 (16-bit indices)", 10000, code);
    /* ties: k entries of equal magnitude out of many, taken in index order */
    cdc k3 = make("codec::TopK", "{\"k\": 3, \"error_feedback\": false}");
    float ties[6] = {1, -2, 2, 0, -2, 2};
    int64_t six = 6;
    bb_value *tx = bb_value_tensor_copy(BB_DT_FLOAT, 1, &six, ties, sizeof ties);
    bb_value *tc = call_ok(&k3, "Compress", tx), *tb = call_ok(&k3, "Decompress", tc);
    const float want[6] = {0, -2, 2, 0, -2, 0};
    assert_memory_equal(bb_tensor_f32(tb), want, sizeof want);
    /* 4-byte indices past 65536 elements */
    int64_t big = 70000;
    bb_value *bx = tensor(1, &big, gen_gauss, NULL);
    bb_value *bc = call_ok(&c, "Compress", bx), *bb = call_ok(&c, "Decompress", bc);
    assert_int_equal(check_topk(bb_tensor_f32(bx), bb_tensor_f32(bb), 70000), 700);
    report_ratio("codec::TopK ratio 0.01 (32-bit indices)", 70000, bc);
    bb_value *values[] = {x, code, back, tx, tc, tb, bx, bc, bb};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        bb_value_unref(values[i]);
    drop(&c);
    drop(&k3);
}

/* Error feedback loses nothing: after T rounds, the sum of what was decoded
 * plus the residual is the sum of the inputs. The residual survives a
 * snapshot: the restored codec sends what the original would have. */
static void test_codec_topk_error_feedback(void **state)
{
    (void)state;
    const char *cfg = "{\"ratio\": 0.05}";
    cdc c = make("codec::TopK", cfg);
    int64_t n = 1000;
    double *sum_in = calloc(1000, sizeof *sum_in), *sum_out = calloc(1000, sizeof *sum_out);
    for (int round = 0; round < 30; round++) {
        bb_value *x = tensor(1, &n, gen_gauss, NULL);
        bb_value *code = call_ok(&c, "Compress", x), *back = call_ok(&c, "Decompress", code);
        size_t sent = 0;
        for (int i = 0; i < 1000; i++) {
            sum_in[i] += bb_tensor_f32(x)[i];
            sum_out[i] += bb_tensor_f32(back)[i];
            sent += bb_tensor_f32(back)[i] != 0;
        }
        assert_int_equal(sent, 50);
        bb_value_unref(x);
        bb_value_unref(code);
        bb_value_unref(back);
    }
    /* the residual is what Compress adds to a zero tensor before choosing:
     * with k = n it all comes out */
    cdc all = clone(&c, "codec::TopK", cfg);
    drop(&all);
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err = {0};
    assert_int_equal(c.t->snapshot(c.inst, &snap, &len, &err), BB_OK);
    cdc flush = make("codec::TopK", "{\"k\": 1000}");
    assert_int_equal(flush.t->restore(flush.inst, snap, len, &err), BB_OK);
    free(snap);
    bb_value *zero = bb_value_tensor_new(BB_DT_FLOAT, 1, &n);
    bb_value *rc = call_ok(&flush, "Compress", zero), *residual = call_ok(&flush, "Decompress", rc);
    double worst = 0;
    for (int i = 0; i < 1000; i++)
        worst = fmax(worst, fabs(sum_in[i] - sum_out[i] - bb_tensor_f32(residual)[i]));
    printf("codec::TopK error feedback, 30 rounds: |sum(in) - sum(decoded) - residual| <= %.3g\n",
           worst);
    assert_true(worst < 1e-4);
    /* a restored copy sends exactly what the original sends next */
    cdc d = clone(&c, "codec::TopK", cfg);
    bb_value *x = tensor(1, &n, gen_gauss, NULL);
    bb_value *c1 = call_ok(&c, "Compress", x), *c2 = call_ok(&d, "Compress", x);
    assert_true(bb_value_equal(c1, c2));
    /* another size breaks the stream */
    int64_t m = 999;
    bb_value *y = bb_value_tensor_new(BB_DT_FLOAT, 1, &m);
    call_fails(&c, "Compress", y, BB_ETYPE, "residual holds 1000");
    bb_value *values[] = {zero, rc, residual, x, c1, c2, y};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        bb_value_unref(values[i]);
    free(sum_in);
    free(sum_out);
    drop(&c);
    drop(&d);
    drop(&flush);
}

/* ---- codec::ProductQuantization ----------------------------------------------------------------- */

#define PQ_D 16
#define PQ_PROTOS 16
#define PQ_NOISE 0.01

/* Rows whose four 4-float sub-vectors each come from one of PQ_PROTOS
 * prototypes of their sub-space, plus noise of PQ_NOISE. */
typedef struct clusters {
    float protos[4 * PQ_PROTOS * 4]; /* [sub-space][prototype][4] */
    size_t pick;                     /* the prototype of the sub-vector being made */
} clusters;

static double gen_clustered(size_t i, void *ctx)
{
    clusters *cl = ctx;
    size_t col = i % PQ_D, j = col / 4;
    if (col % 4 == 0)
        cl->pick = (size_t)(rnd() % PQ_PROTOS);
    return cl->protos[(j * PQ_PROTOS + cl->pick) * 4 + col % 4] + gauss() * PQ_NOISE;
}

static void test_codec_pq_round_trip(void **state)
{
    (void)state;
    const char *cfg = "{\"m\": 4, \"iterations\": 15}";
    cdc c = make("codec::ProductQuantization", cfg);
    clusters cl;
    for (size_t i = 0; i < sizeof cl.protos / sizeof *cl.protos; i++)
        cl.protos[i] = (float)(gauss() * 2);
    int64_t sd[2] = {4000, PQ_D}, xd[2] = {500, PQ_D};
    bb_value *samples = tensor(2, sd, gen_clustered, &cl);
    bb_value *x = tensor(2, xd, gen_clustered, &cl);
    call_fails(&c, "Compress", x, BB_ESTATE, "before TrainCodebook");
    bb_value_unref(call_ok(&c, "TrainCodebook", samples));
    bb_value *code = call_ok(&c, "Compress", x), *back = call_ok(&c, "Decompress", code);
    /* each sub-vector decodes to its nearest centroid: coding it again
     * gives the same code */
    bb_value *again = call_ok(&c, "Compress", back);
    assert_true(bb_value_equal(code, again));
    double worst = 0;
    for (size_t i = 0; i < 500 * PQ_D; i++)
        worst = fmax(worst, fabs(bb_tensor_f32(x)[i] - bb_tensor_f32(back)[i]));
    printf("codec::ProductQuantization clustered rows (noise %g): worst error %.4g (bound %g)\n",
           PQ_NOISE, worst, 6 * PQ_NOISE);
    assert_true(worst <= 6 * PQ_NOISE);
    report_ratio("codec::ProductQuantization m=4 [500, 16]", 500 * PQ_D, code);
    /* the same samples and seed on another node give the same codebooks */
    cdc other = make("codec::ProductQuantization", cfg);
    bb_value_unref(call_ok(&other, "TrainCodebook", samples));
    bb_value *theirs = call_ok(&other, "Decompress", code);
    assert_true(bb_value_equal(theirs, back));
    /* different codebooks refuse the code */
    cdc stranger = make("codec::ProductQuantization", "{\"m\": 4, \"seed\": 9}");
    bb_value_unref(call_ok(&stranger, "TrainCodebook", x));
    call_fails(&stranger, "Decompress", code, BB_EDECODE, "other codebooks");
    /* the codebooks survive a snapshot */
    cdc restored = clone(&c, "codec::ProductQuantization", cfg);
    bb_value *rb = call_ok(&restored, "Decompress", code);
    assert_true(bb_value_equal(rb, back));
    bb_value *values[] = {samples, x, code, back, again, theirs, rb};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        bb_value_unref(values[i]);
    drop(&c);
    drop(&other);
    drop(&stranger);
    drop(&restored);
}

/* Bound on unstructured data: Gaussian rows, 4-float sub-vectors, 256
 * centroids (2 bits a float) keep under 15% of the variance as error (the
 * Gaussian rate-distortion bound at 2 bits is 6.25%; k-means gets ~10%). */
static void test_codec_pq_gaussian(void **state)
{
    (void)state;
    cdc c = make("codec::ProductQuantization", "{\"m\": 8}");
    int64_t sd[2] = {6000, 32};
    bb_value *x = tensor(2, sd, gen_gauss, NULL);
    bb_value_unref(call_ok(&c, "TrainCodebook", x));
    bb_value *code = call_ok(&c, "Compress", x), *back = call_ok(&c, "Decompress", code);
    double se = 0, var = 0;
    for (size_t i = 0; i < 6000 * 32; i++) {
        double v = bb_tensor_f32(x)[i];
        se += (v - bb_tensor_f32(back)[i]) * (v - bb_tensor_f32(back)[i]);
        var += v * v;
    }
    printf("codec::ProductQuantization Gaussian rows: relative MSE %.4f (bound 0.15)\n", se / var);
    assert_true(se / var < 0.15);
    report_ratio("codec::ProductQuantization m=8 [6000, 32]", 6000 * 32, code);
    /* rows that do not split into m sub-vectors */
    int64_t bd[2] = {2, 12};
    bb_value *bad = bb_value_tensor_new(BB_DT_FLOAT, 2, bd);
    call_fails(&c, "Compress", bad, BB_ETYPE, "rows of 12 floats");
    bb_value_unref(x);
    bb_value_unref(code);
    bb_value_unref(back);
    bb_value_unref(bad);
    drop(&c);
}

/* ---- malformed codes ------------------------------------------------------------------------------- */

static bb_value *u8_code(const uint8_t *b, size_t n)
{
    int64_t len = (int64_t)n;
    return bb_value_tensor_copy(BB_DT_UINT8, 1, &len, b, n);
}

/* Every truncation of a valid code, and 3000 random corruptions, either
 * decode or fail cleanly (never crash, never read out of bounds). */
static void fuzz_code(cdc *c, const bb_value *code)
{
    const uint8_t *b = code->u.tensor.data;
    size_t n = code->u.tensor.nbytes;
    bb_error err = {0};
    for (size_t cut = 0; cut < n; cut++) {
        bb_value *t = u8_code(b, cut), *out = NULL;
        assert_int_not_equal(call(c, "Decompress", t, &out, &err), BB_OK);
        bb_value_unref(t);
    }
    uint8_t *m = malloc(n + 8);
    for (int k = 0; k < 3000; k++) {
        memcpy(m, b, n);
        size_t len = n;
        for (int flips = 1 + (int)below(3); flips > 0; flips--)
            m[below(n)] ^= (uint8_t)(1u << below(8));
        if (k % 7 == 0) /* trailing garbage */
            for (int e = 0; e < 1 + k % 8; e++)
                m[len++] = (uint8_t)rnd();
        bb_value *t = u8_code(m, len), *out = NULL;
        if (call(c, "Decompress", t, &out, &err) == BB_OK)
            bb_value_unref(out);
        bb_value_unref(t);
    }
    free(m);
}

static void expect_refused(cdc *c, const uint8_t *b, size_t n, int code, const char *what)
{
    bb_value *t = u8_code(b, n);
    call_fails(c, "Decompress", t, code, what);
    bb_value_unref(t);
}

static void test_codec_malformed_int8(void **state)
{
    (void)state;
    cdc c = make("codec::Int8Affine", "{\"granularity\": \"per_channel\"}");
    int64_t dims[2] = {5, 3};
    bb_value *x = tensor(2, dims, gen_gauss, NULL);
    bb_value *code = call_ok(&c, "Compress", x);
    fuzz_code(&c, code);
    const uint8_t *b = code->u.tensor.data;
    size_t n = code->u.tensor.nbytes;
    uint8_t m[128];
    assert_true(n <= sizeof m);
    /* header: 'I' 1 2 5 3, then granularity 1, axis 1, 3 scales, 3 zero points */
    memcpy(m, b, n);
    m[0] = 'T';
    expect_refused(&c, m, n, BB_EDECODE, "is a TopK code");
    memcpy(m, b, n);
    m[1] = 9;
    expect_refused(&c, m, n, BB_EDECODE, "code version 9");
    memcpy(m, b, n);
    m[5] = 2;
    expect_refused(&c, m, n, BB_EDECODE, "granularity");
    memcpy(m, b, n);
    m[6] = 2;
    expect_refused(&c, m, n, BB_EDECODE, "channel axis");
    m[5] = 0; /* per tensor, but an axis byte: not a code this codec writes */
    expect_refused(&c, m, n, BB_EDECODE, "channel axis");
    memcpy(m, b, n);
    memset(m + 7, 0, 4); /* scale 0 */
    expect_refused(&c, m, n, BB_EDECODE, "positive finite");
    memcpy(m, b, n);
    memset(m + 7, 0xff, 4); /* scale NaN */
    expect_refused(&c, m, n, BB_EDECODE, "positive finite");
    /* a shape claiming 2^62 elements is refused before any allocation */
    const uint8_t huge[] = {'I', 1, 2, 0x80, 0x80, 0x80, 0x80, 0x04, 0x80, 0x80, 0x80, 0x80, 0x04, 0, 0};
    expect_refused(&c, huge, sizeof huge, BB_ELIMIT, "max_elements");
    const uint8_t dims9[] = {'I', 1, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    expect_refused(&c, dims9, sizeof dims9, BB_EDECODE, "9 dimensions");
    /* not a u8 code at all */
    call_fails(&c, "Decompress", x, BB_ETYPE, "1-D u8 code");
    bb_value *trig = bb_value_trigger();
    call_fails(&c, "Decompress", trig, BB_ETYPE, "Trigger");
    bb_value_unref(trig);
    bb_value_unref(x);
    bb_value_unref(code);
    drop(&c);
}

static void test_codec_malformed_topk(void **state)
{
    (void)state;
    cdc c = make("codec::TopK", "{\"k\": 2, \"error_feedback\": false}");
    float v[5] = {0, 3, 0, -4, 1};
    int64_t five = 5;
    bb_value *x = bb_value_tensor_copy(BB_DT_FLOAT, 1, &five, v, sizeof v);
    bb_value *code = call_ok(&c, "Compress", x);
    fuzz_code(&c, code);
    const uint8_t *b = code->u.tensor.data;
    size_t n = code->u.tensor.nbytes;
    /* 'T' 1 1 5 | k=2 | width 2 | idx 1, 3 | values 3, -4 */
    assert_int_equal(n, 4 + 1 + 1 + 4 + 8);
    uint8_t m[32];
    memcpy(m, b, n);
    m[4] = 6; /* more entries than elements */
    expect_refused(&c, m, n, BB_EDECODE, "more entries than elements");
    memcpy(m, b, n);
    m[5] = 3;
    expect_refused(&c, m, n, BB_EDECODE, "index width");
    memcpy(m, b, n);
    m[6] = 3, m[8] = 1; /* indices 3, 1 */
    expect_refused(&c, m, n, BB_EDECODE, "out of order");
    memcpy(m, b, n);
    m[8] = 1; /* indices 1, 1 */
    expect_refused(&c, m, n, BB_EDECODE, "out of order");
    memcpy(m, b, n);
    m[8] = 5; /* index 5 of 5 elements */
    expect_refused(&c, m, n, BB_EDECODE, "beyond the tensor");
    memcpy(m, b, n);
    memset(m + 10, 0xff, 4);
    expect_refused(&c, m, n, BB_EDECODE, "non-finite");
    memcpy(m, b, n);
    m[4] = 1; /* one entry, but two entries' bytes */
    expect_refused(&c, m, n, BB_EDECODE, "bytes of entries");
    /* a sparse code may not claim a huge tensor: the cap holds before allocating */
    const uint8_t huge[] = {'T', 1, 1, 0x80, 0x80, 0x80, 0x80, 0x40, 0, 2};
    expect_refused(&c, huge, sizeof huge, BB_ELIMIT, "max_elements");
    bb_value_unref(x);
    bb_value_unref(code);
    drop(&c);
}

static void test_codec_malformed_pq(void **state)
{
    (void)state;
    cdc c = make("codec::ProductQuantization", "{\"m\": 2, \"centroids\": 4}");
    int64_t sd[2] = {50, 4};
    bb_value *x = tensor(2, sd, gen_gauss, NULL);
    bb_value *code = NULL;
    bb_error err = {0};
    bb_value *u = u8_code((const uint8_t[]){'P', 1, 0, 2, 4}, 5);
    call_fails(&c, "Decompress", u, 0, "digest is truncated");
    bb_value_unref(u);
    bb_value_unref(call_ok(&c, "TrainCodebook", x));
    code = call_ok(&c, "Compress", x);
    fuzz_code(&c, code);
    const uint8_t *b = code->u.tensor.data;
    size_t n = code->u.tensor.nbytes;
    /* 'P' 1 2 50 4 | m 2 | centroids 4 | digest 8 | 100 codes */
    uint8_t *m = malloc(n);
    memcpy(m, b, n);
    m[n - 1] = 4; /* a centroid index past the 4 of the codebook */
    expect_refused(&c, m, n, BB_EDECODE, "beyond the codebook");
    memcpy(m, b, n);
    m[7] ^= 1; /* another digest */
    expect_refused(&c, m, n, BB_EDECODE, "other codebooks");
    expect_refused(&c, b, n - 1, BB_EDECODE, "code bytes");
    free(m);
    (void)err;
    bb_value_unref(x);
    bb_value_unref(code);
    drop(&c);
}

/* ---- DecompressBatch, snapshots, ops ------------------------------------------------------------- */

static void test_codec_decompress_batch(void **state)
{
    (void)state;
    cdc c = make("codec::F16", NULL);
    float v[3] = {1, 2.5f, -3};
    int64_t three = 3;
    bb_value *x = bb_value_tensor_copy(BB_DT_FLOAT, 1, &three, v, sizeof v);
    bb_value *code = call_ok(&c, "Compress", x);
    /* answer 0: a bare code wrapped as responses travel; answer 1: Bundle(code, n) */
    bb_value *n = bb_value_u64(&BB_TYPE_U64, 42);
    bb_value *wrap0[1] = {bb_value_ref(code)};
    bb_value *pair[2] = {bb_value_ref(code), bb_value_ref(n)};
    bb_value *inner = bb_value_list(&BB_TYPE_COMPOSITE, pair, 2);
    bb_value *wrap1[1] = {inner};
    bb_value *items[2] = {bb_value_list(&BB_TYPE_COMPOSITE, wrap0, 1),
                          bb_value_list(&BB_TYPE_COMPOSITE, wrap1, 1)};
    bb_value *peers[2] = {pfx_peer(2), pfx_peer(3)};
    bb_value *batch = bb_value_response_batch(items, peers, 2);
    bb_value *out = call_ok(&c, "DecompressBatch", batch);
    assert_ptr_equal(out->type, &BB_TYPE_RESPONSE_BATCH);
    assert_int_equal(out->u.batch.n, 2);
    assert_true(bb_value_equal(out->u.batch.items[0], x));
    const bb_value *b1 = out->u.batch.items[1];
    assert_int_equal(b1->type->kind, BB_VK_COMPOSITE);
    assert_int_equal(b1->u.list.n, 2);
    assert_true(bb_value_equal(b1->u.list.items[0], x));
    assert_int_equal(b1->u.list.items[1]->u.u64, 42);
    assert_true(bb_value_equal(out->u.batch.peers[1], batch->u.batch.peers[1]));
    /* a bad answer names its place */
    bb_value *bad_items[2] = {bb_value_ref(code), bb_value_ref(x)};
    bb_value *bad_peers[2] = {pfx_peer(2), pfx_peer(3)};
    bb_value *bad = bb_value_response_batch(bad_items, bad_peers, 2);
    call_fails(&c, "DecompressBatch", bad, BB_ETYPE, "answer 1");
    call_fails(&c, "DecompressBatch", x, BB_ETYPE, "takes a ResponseBatch");
    bb_value *values[] = {x, code, n, batch, out, bad};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        bb_value_unref(values[i]);
    drop(&c);
}

static void test_codec_snapshot_refusals(void **state)
{
    (void)state;
    cdc f = make("codec::F16", NULL), t = make("codec::TopK", NULL);
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err = {0};
    assert_int_equal(f.t->snapshot(f.inst, &snap, &len, &err), BB_OK);
    assert_int_equal(t.t->restore(t.inst, snap, len, &err), BB_EDECODE);
    assert_non_null(strstr(err.msg, "snapshot is of a codec::F16"));
    snap[0] = 'X';
    assert_int_equal(f.t->restore(f.inst, snap, len, &err), BB_EDECODE);
    assert_non_null(strstr(err.msg, "not a codec snapshot"));
    free(snap);
    /* a stateless codec still answers TrainCodebook with its count */
    int64_t one = 1;
    bb_value *x = bb_value_tensor_new(BB_DT_FLOAT, 1, &one);
    bb_value *cmd = call_ok(&f, "TrainCodebook", x);
    assert_int_equal(cmd->u.u64, 1);
    bb_value_unref(cmd);
    call_fails(&f, "Nope", x, BB_ENOTFOUND, "no op Nope");
    bb_value_unref(x);
    drop(&f);
    drop(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_f16_every_half),
        cmocka_unit_test(test_codec_f16_rounding),
        cmocka_unit_test(test_codec_f16_error_bound),
        cmocka_unit_test(test_codec_int8_per_tensor),
        cmocka_unit_test(test_codec_int8_per_channel),
        cmocka_unit_test(test_codec_int8_calibrated),
        cmocka_unit_test(test_codec_int8_refuses),
        cmocka_unit_test(test_codec_topk_selects),
        cmocka_unit_test(test_codec_topk_error_feedback),
        cmocka_unit_test(test_codec_pq_round_trip),
        cmocka_unit_test(test_codec_pq_gaussian),
        cmocka_unit_test(test_codec_malformed_int8),
        cmocka_unit_test(test_codec_malformed_topk),
        cmocka_unit_test(test_codec_malformed_pq),
        cmocka_unit_test(test_codec_decompress_batch),
        cmocka_unit_test(test_codec_snapshot_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
