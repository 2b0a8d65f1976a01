/* Unit tests for the arena allocator, the growable arrays and bb_error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "bb/arena.h"
#include "bb/status.h"

static void test_alloc_is_zeroed_and_aligned(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    assert_non_null(a);
    for (size_t i = 1; i < 5000; i += 37) {
        unsigned char *p = bb_arena_alloc(a, i);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        for (size_t j = 0; j < i; j++)
            assert_int_equal(p[j], 0);
        memset(p, 0xab, i);
    }
    /* a request larger than any chunk gets its own */
    unsigned char *big = bb_arena_alloc(a, 10u << 20);
    assert_non_null(big);
    assert_true(bb_arena_used(a) >= (10u << 20));
    for (size_t j = 0; j < (10u << 20); j += 4093)
        assert_int_equal(big[j], 0);
    assert_int_equal(big[(10u << 20) - 1], 0);
    assert_null(bb_arena_alloc(a, SIZE_MAX - 3));
    assert_null(bb_arena_calloc(a, SIZE_MAX / 2, 4));
    bb_arena_destroy(a);
}

static void test_strings(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    assert_string_equal(bb_arena_strdup(a, "hello"), "hello");
    assert_null(bb_arena_strdup(a, NULL));
    assert_string_equal(bb_arena_strndup(a, "hello", 3), "hel");
    assert_string_equal(bb_arena_sprintf(a, "%s_%d", "site", 42), "site_42");
    const char raw[4] = {1, 0, 2, 3};
    assert_memory_equal(bb_arena_memdup(a, raw, 4), raw, 4);
    bb_arena_destroy(a);
}

static void test_adopt_moves_the_memory(void **state)
{
    (void)state;
    bb_arena *dst = bb_arena_create(), *src = bb_arena_create();
    assert_non_null(dst);
    assert_non_null(src);
    char *kept = bb_arena_strdup(dst, "dst's own");
    const char *moved[64];
    for (int i = 0; i < 64; i++) /* several chunks of src, a big one among them */
        moved[i] = bb_arena_sprintf(src, "%d %0*d", i, i == 7 ? 300000 : 4000, i);
    size_t before = bb_arena_used(dst) + bb_arena_used(src);
    bb_arena_adopt(dst, src);
    bb_arena_adopt(dst, dst); /* no-op */
    assert_int_equal(bb_arena_used(dst), before);
    assert_int_equal(bb_arena_used(src), 0);
    /* src stays usable: its new memory is its own */
    char *fresh = bb_arena_alloc(src, 100);
    assert_non_null(fresh);
    assert_int_equal(fresh[99], 0);
    bb_arena_destroy(src);
    /* dst still serves from its current chunk, and holds what src made */
    char *more = bb_arena_strdup(dst, "after");
    assert_string_equal(more, "after");
    assert_string_equal(kept, "dst's own");
    for (int i = 0; i < 64; i++) {
        char head[16];
        snprintf(head, sizeof head, "%d ", i);
        assert_memory_equal(moved[i], head, strlen(head));
    }
    bb_arena_destroy(dst);
    /* adopting into an arena that never allocated */
    bb_arena *empty = bb_arena_create(), *other = bb_arena_create();
    const char *s = bb_arena_strdup(other, "x");
    bb_arena_adopt(empty, other);
    bb_arena_destroy(other);
    assert_string_equal(s, "x");
    bb_arena_destroy(empty);
}

static void test_reset_reuses_zeroed_memory(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    assert_non_null(a);
    unsigned char *first = bb_arena_alloc(a, 100);
    memset(first, 0xab, 100);
    for (int i = 0; i < 40; i++) { /* several chunks, dirty, a big one among them */
        unsigned char *p = bb_arena_alloc(a, i == 20 ? 600000 : 20000);
        assert_non_null(p);
        memset(p, 0xcd, i == 20 ? 600000 : 20000);
    }
    bb_arena_reset(a);
    assert_int_equal(bb_arena_used(a), 0);
    /* the same memory serves again, zeroed */
    unsigned char *again = bb_arena_alloc(a, 100);
    assert_ptr_equal(again, first);
    for (size_t j = 0; j < 100; j++)
        assert_int_equal(again[j], 0);
    for (int i = 0; i < 40; i++) {
        size_t n = i == 20 ? 600000 : 20000;
        unsigned char *p = bb_arena_alloc(a, n);
        assert_non_null(p);
        for (size_t j = 0; j < n; j += 997)
            assert_int_equal(p[j], 0);
        assert_int_equal(p[n - 1], 0);
    }
    bb_arena_reset(a);
    bb_arena_reset(a); /* twice: nothing to forget */
    bb_arena_destroy(a);
}

static void test_vec_push_insert_remove(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    BB_VEC(int) v = {0};
    for (int i = 0; i < 100; i++) {
        int *slot = BB_VEC_PUSH(a, &v);
        assert_non_null(slot);
        *slot = i;
    }
    assert_int_equal(v.n, 100);
    assert_true(v.cap >= 100);
    int *ins = BB_VEC_INSERT(a, &v, 0);
    *ins = -1;
    assert_int_equal(v.v[0], -1);
    assert_int_equal(v.v[1], 0);
    assert_int_equal(v.v[100], 99);
    assert_null(BB_VEC_INSERT(a, &v, 1000));
    BB_VEC_REMOVE(&v, 0);
    assert_int_equal(v.n, 100);
    for (int i = 0; i < 100; i++)
        assert_int_equal(v.v[i], i);
    BB_VEC_REMOVE(&v, 99);
    assert_int_equal(v.n, 99);
    BB_VEC_REMOVE(&v, 500); /* out of range: no change */
    assert_int_equal(v.n, 99);
    bb_arena_destroy(a);
}

static void test_error_values(void **state)
{
    (void)state;
    bb_error e;
    assert_int_equal(bb_error_set(&e, BB_EPARSE, "model.onnx: bad tag at byte %d", 12), BB_EPARSE);
    assert_int_equal(e.code, BB_EPARSE);
    assert_string_equal(e.msg, "model.onnx: bad tag at byte 12");
    bb_error_prefix(&e, "load %s", "x");
    assert_string_equal(e.msg, "load x: model.onnx: bad tag at byte 12");
    assert_string_equal(bb_status_name(BB_ETRUNC), "ETRUNC");
    assert_string_equal(bb_status_str(BB_OK), "success");
    assert_string_equal(bb_status_name(9999), "UNKNOWN");
    assert_int_equal(bb_error_set(NULL, BB_EIO, "ignored"), BB_EIO);
    bb_error_clear(&e);
    assert_int_equal(e.code, 0);
    assert_string_equal(e.msg, "");
    /* a cleared error's message tail is left as it was (no 516-byte memset) */
    bb_error f;
    memset(&f, 'x', sizeof f);
    bb_error_clear(&f);
    assert_int_equal(f.code, 0);
    assert_string_equal(f.msg, "");
    assert_int_equal(f.msg[1], 'x');
    assert_int_equal(bb_error_set(&f, BB_EIO, "disk %d", 2), BB_EIO);
    assert_string_equal(f.msg, "disk 2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_is_zeroed_and_aligned),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_adopt_moves_the_memory),
        cmocka_unit_test(test_reset_reuses_zeroed_memory),
        cmocka_unit_test(test_vec_push_insert_remove),
        cmocka_unit_test(test_error_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
