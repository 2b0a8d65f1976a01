/*
 * test_engine_map.c — the engine's u64 -> u64 hash map (libbbengine/src/
 * map.c) against a plain array as the oracle: random puts, gets and
 * deletes agree, and a map whose entries come and go keeps no pile of
 * tombstones (a delete whose next slot is empty empties its slot and the
 * tombstones before it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "libbbengine/src/engine_internal.h"

#define KEYS 512 /* key space: small, so puts, hits and deletes all happen */
#define OPS 200000

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_map_agrees_with_an_array(void **state)
{
    (void)state;
    static uint64_t val[KEYS];
    static bool has[KEYS];
    bbe__map m = {0};
    size_t n = 0;
    for (int it = 0; it < OPS; it++) {
        uint64_t k = next() % KEYS, v = next(), got = 0;
        switch (next() % 3) {
        case 0:
            assert_int_equal(bbe__map_put(&m, k * 0x100000001ULL, v), 0);
            n += !has[k];
            has[k] = true;
            val[k] = v;
            break;
        case 1:
            assert_int_equal(bbe__map_del(&m, k * 0x100000001ULL), has[k]);
            n -= has[k];
            has[k] = false;
            break;
        default:
            assert_int_equal(bbe__map_get(&m, k * 0x100000001ULL, &got), has[k]);
            if (has[k])
                assert_true(got == val[k]);
        }
        assert_int_equal(m.n, n);
    }
    for (uint64_t k = 0; k < KEYS; k++)
        assert_int_equal(bbe__map_get(&m, k * 0x100000001ULL, NULL), has[k]);
    bbe__map_free(&m);
}

/* One entry in, one out, over and over (an id per request): every delete
 * leaves the map as empty as it found it. */
static void test_churn_leaves_no_tombstones(void **state)
{
    (void)state;
    bbe__map m = {0};
    assert_int_equal(bbe__map_put(&m, 1, 1), 0);
    size_t cap = m.cap;
    for (uint64_t id = 2; id < 10000; id++) {
        assert_int_equal(bbe__map_put(&m, id, id), 0);
        assert_true(bbe__map_del(&m, id - 1));
        assert_int_equal(m.n, 1);
    }
    assert_true(bbe__map_del(&m, 9999));
    assert_int_equal(m.tomb, 0);
    assert_int_equal(m.cap, cap); /* never rebuilt larger */
    bbe__map_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_agrees_with_an_array),
        cmocka_unit_test(test_churn_leaves_no_tombstones),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
