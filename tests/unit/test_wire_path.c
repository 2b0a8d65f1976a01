/*
 * test_wire_path.c — the large-envelope paths of the wire: the byte hash
 * DedupGateRx keys on (bb__hash_bytes), envelopes handed to the engine
 * without a copy (bb_engine_deliver_envelope_owned) and values encoded in
 * place (bb_value_encode_into, which the engine's Send uses).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bbd/engine/engine_internal.h"
#include "support/engine_fixtures.h"

#define SHORT 300

static uint8_t *pattern(size_t len)
{
    uint8_t *b = malloc(len ? len : 1);
    assert_non_null(b);
    for (size_t i = 0; i < len; i++)
        b[i] = (uint8_t)(i * 131u + 7u);
    return b;
}

/* Every prefix hashes differently, the same bytes at another alignment
 * hash the same, and any one flipped bit (short and long inputs) changes
 * the hash. */
static void test_hash_bytes(void **state)
{
    (void)state;
    uint8_t *b = pattern(SHORT), *moved = malloc(SHORT + 8);
    assert_non_null(moved);
    uint64_t h[SHORT + 1];
    for (size_t n = 0; n <= SHORT; n++) {
        h[n] = bb__hash_bytes(b, n);
        for (size_t k = 0; k < n; k++)
            assert_true(h[k] != h[n]);
        memcpy(moved + 3, b, n);
        assert_true(bb__hash_bytes(moved + 3, n) == h[n]);
    }
    for (size_t n = 1; n <= 100; n += 33) {
        for (size_t bit = 0; bit < n * 8; bit++) {
            b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            assert_true(bb__hash_bytes(b, n) != h[n]);
            b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
    }
    free(b);
    free(moved);
    size_t big = 1u << 20;
    uint8_t *l = pattern(big);
    uint64_t whole = bb__hash_bytes(l, big);
    size_t at[] = {0, 47, 48, big / 2, big - 17, big - 1};
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        l[at[i]] ^= 0x10;
        assert_true(bb__hash_bytes(l, big) != whole);
        l[at[i]] ^= 0x10;
    }
    free(l);
}

/* An engine running Rx: Recv(/site/201, u64) -> DedupGateRx -> out. The
 * engine borrows *m: free it after the engine. */
static bb_engine *rx_engine(size_t max_envelope_bytes, bb_model **mp)
{
    bb_model *m = *mp = fx_model();
    bb_function *f = fx_fn(m, "Rx", "", "out");
    fx_recv(m, f, 201, "t", "p", &BB_TYPE_U64);
    fx_op(m, f, FX_SYS, "DedupGateRx", "p", "out");
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    if (max_envelope_bytes)
        cfg.caps.max_envelope_bytes = max_envelope_bytes;
    bb_engine *e = fx_engine(9, 7009, &cfg);
    bb_error err = {0};
    if (fx_install(e, m, "Rx", &err))
        fail_msg("%s", err.msg);
    return e;
}

static size_t outs(bb_engine *e, uint64_t now, uint64_t *last)
{
    fx_log log = {0};
    fx_run(e, &log, now, 5);
    size_t n = 0;
    const fx_rec *r;
    while ((r = fx_log_app(&log, "out", n))) {
        *last = r->value->u.u64;
        n++;
    }
    fx_log_free(&log);
    return n;
}

/* The owned entry point takes the bytes on every path (the leak checkers
 * see a refused one freed) and delivers like the copying one: the value
 * arrives, and the same envelope again is a duplicate. */
static void test_deliver_owned(void **state)
{
    (void)state;
    bb_model *m;
    bb_engine *e = rx_engine(0, &m);
    bb_peerid src = fx_peer(4), bad = {0};
    size_t n;
    bb_error err = {0};
    uint8_t *buf = fx_envelope_u64(201, 7, 100, 0, &n);
    assert_int_equal(bb_engine_deliver_envelope_owned(e, &bad, NULL, buf, n, &err), BB_EINVAL);
    buf = fx_envelope_u64(201, 7, 100, 0, &n);
    uint8_t *copy = malloc(n);
    assert_non_null(copy);
    memcpy(copy, buf, n);
    assert_int_equal(bb_engine_deliver_envelope_owned(e, &src, NULL, buf, n, &err), BB_OK);
    uint64_t v = 0;
    assert_int_equal(outs(e, 1000, &v), 1);
    assert_int_equal(v, 7);
    assert_int_equal(bb_engine_deliver_envelope_owned(e, &src, NULL, copy, n, &err), BB_OK);
    assert_int_equal(outs(e, 2000, &v), 0); /* a retransmission: DedupGateRx drops it */
    bb_engine_free(e);
    bb_model_free(m);

    e = rx_engine(16, &m);
    buf = fx_envelope_u64(201, 8, 100, 0, &n);
    assert_true(n > 16);
    assert_int_equal(bb_engine_deliver_envelope_owned(e, &src, NULL, buf, n, &err), BB_ELIMIT);
    assert_non_null(strstr(err.msg, "exceeds the 16 cap"));
    bb_engine_free(e);
    bb_model_free(m);
}

/* In place, the encoding is byte for byte bb_value_encode's; a buffer one
 * byte short is refused before anything is written. */
static void test_encode_into(void **state)
{
    (void)state;
    float f[5] = {1, 2, 3, 4, 5};
    bb_value *parts[2] = {fx_f32(f, 5), bb_value_u64(&BB_TYPE_U64, 42)};
    bb_value *values[2] = {fx_f32(f, 5), bb_value_list(&BB_TYPE_COMPOSITE, parts, 2)};
    for (int i = 0; i < 2; i++) {
        uint8_t *want;
        size_t wlen, len = 0;
        bb_error err = {0};
        assert_int_equal(bb_value_encode(values[i], &want, &wlen, &err), BB_OK);
        uint8_t *out = malloc(wlen + 1);
        assert_non_null(out);
        memset(out, 0xee, wlen + 1);
        assert_int_equal(bb_value_encode_into(values[i], out, wlen - 1, &len, &err), BB_ELIMIT);
        assert_int_equal(out[0], 0xee);
        assert_int_equal(bb_value_encode_into(values[i], out, wlen + 1, &len, &err), BB_OK);
        assert_int_equal(len, wlen);
        assert_memory_equal(out, want, wlen);
        assert_int_equal(out[wlen], 0xee);
        assert_int_equal(bb_value_encode_into(values[i], NULL, 8, &len, &err), BB_EINVAL);
        free(out);
        free(want);
        bb_value_unref(values[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_bytes),
        cmocka_unit_test(test_deliver_owned),
        cmocka_unit_test(test_encode_into),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
