/*
 * test_bytes.c — the byte writer and bounded reader (bb/bytes.h): round
 * trips of every put/get pair, growth across many reallocations, a fixed
 * writer that runs out of room, allocation failures remembered, and a
 * reader that never reads past its end and reports where it stopped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bb/bytes.h"
#include "bb/status.h"
#include "support/alloc_fail.h"

static void test_round_trip_every_kind(void **state)
{
    (void)state;
    bb_writer w = {0};
    bb_writer_put(&w, "MAGC", 4);
    bb_writer_put_u8(&w, 0xab);
    bb_writer_put_u32le(&w, 0x01020304u);
    bb_writer_put_u64le(&w, UINT64_C(0x1122334455667788));
    bb_writer_put_uvarint(&w, 300);
    bb_writer_put_uvarint(&w, UINT64_MAX);
    bb_writer_put_delimited(&w, "xyz", 3);
    bb_writer_put_str(&w, "name");
    bb_writer_put_str(&w, NULL);
    uint8_t *room = bb_writer_grow(&w, 2);
    assert_non_null(room);
    memcpy(room, "ok", 2);
    assert_false(w.failed);
    /* fixed-width integers are little-endian whatever the host */
    assert_memory_equal(w.data + 5, "\x04\x03\x02\x01", 4);
    assert_memory_equal(w.data + 9, "\x88\x77\x66\x55\x44\x33\x22\x11", 8);
    uint8_t *buf;
    size_t len;
    assert_true(bb_writer_take(&w, &buf, &len));
    assert_null(w.data);

    bb_reader r;
    bb_reader_init(&r, buf, len);
    char magic[4];
    uint8_t u8;
    uint32_t u32;
    uint64_t u64, a, b;
    const uint8_t *d;
    size_t dl;
    assert_true(bb_reader_get(&r, magic, 4));
    assert_memory_equal(magic, "MAGC", 4);
    assert_true(bb_reader_u8(&r, &u8) && u8 == 0xab);
    assert_true(bb_reader_u32le(&r, &u32) && u32 == 0x01020304u);
    assert_true(bb_reader_u64le(&r, &u64) && u64 == UINT64_C(0x1122334455667788));
    assert_true(bb_reader_uvarint(&r, &a) && a == 300);
    assert_true(bb_reader_uvarint_minimal(&r, &b) && b == UINT64_MAX);
    assert_true(bb_reader_delimited(&r, &d, &dl));
    assert_int_equal(dl, 3);
    assert_memory_equal(d, "xyz", 3);
    assert_true(bb_reader_delimited(&r, &d, &dl) && dl == 4 && memcmp(d, "name", 4) == 0);
    assert_true(bb_reader_delimited(&r, &d, &dl) && dl == 0);
    assert_true(bb_reader_get(&r, magic, 2));
    assert_memory_equal(magic, "ok", 2);
    assert_int_equal(bb_reader_left(&r), 0);
    assert_true(bb_reader_view(&r, 0, &d)); /* nothing, at the end: fine */
    assert_false(r.failed);
    /* past the end: failed at the offset where the read started */
    assert_false(bb_reader_u8(&r, &u8));
    assert_int_equal(u8, 0);
    assert_true(r.failed);
    assert_int_equal(r.fail_at, len);
    assert_int_equal(r.status, BB_ETRUNC);
    assert_false(bb_reader_view(&r, 0, &d)); /* a failed reader stays failed */
    assert_null(d);
    free(buf);
}

static void test_writer_grows_and_resets(void **state)
{
    (void)state;
    bb_writer w = {0};
    for (uint32_t i = 0; i < 100000; i++)
        bb_writer_put_u32le(&w, i);
    assert_false(w.failed);
    assert_int_equal(w.len, 400000);
    bb_reader r;
    bb_reader_init(&r, w.data, w.len);
    assert_true(bb_reader_has(&r, 100000, 4));
    assert_false(bb_reader_has(&r, 100001, 4));
    assert_true(bb_reader_has(&r, SIZE_MAX, 0));
    for (uint32_t i = 0; i < 100000; i++) {
        uint32_t v;
        assert_true(bb_reader_u32le(&r, &v));
        assert_int_equal(v, i);
    }
    size_t cap = w.cap;
    bb_writer_reset(&w);
    assert_int_equal(w.len, 0);
    assert_int_equal(w.cap, cap); /* the buffer is kept for reuse */
    bb_writer_put_u8(&w, 7);
    assert_int_equal(w.data[0], 7);
    bb_writer_free(&w);
    assert_null(w.data);
    /* an empty writer hands over nothing, successfully */
    uint8_t *out;
    size_t len;
    assert_true(bb_writer_take(&w, &out, &len));
    assert_null(out);
    assert_int_equal(len, 0);
}

static void test_fixed_writer_runs_out_of_room(void **state)
{
    (void)state;
    uint8_t buf[6];
    bb_writer w;
    bb_writer_init_fixed(&w, buf, sizeof buf);
    bb_writer_put_u32le(&w, 1);
    bb_writer_put_uvarint(&w, 300); /* 2 bytes: exactly full */
    assert_false(w.failed);
    bb_writer_put_u8(&w, 9);
    assert_true(w.failed);
    assert_int_equal(w.len, 6);
    bb_writer_reset(&w);
    assert_false(w.failed);
    bb_writer_put_delimited(&w, "abcdef", 6); /* 7 bytes: does not fit */
    assert_true(w.failed);
    bb_writer_free(&w); /* the caller's buffer is not freed */
    /* a failed writer hands over nothing */
    bb_writer_init_fixed(&w, buf, 1);
    bb_writer_put_u64le(&w, 1);
    assert_null(bb_writer_grow(&w, 1)); /* a failed writer gives no room */
    uint8_t *out;
    size_t len;
    assert_false(bb_writer_take(&w, &out, &len));
    assert_null(out);
}

static void test_writer_remembers_allocation_failure(void **state)
{
    (void)state;
    if (!af_interposed())
        skip();
    for (long n = 1;; n++) {
        bb_writer w = {0};
        af_arm(n);
        for (int i = 0; i < 2000; i++)
            bb_writer_put_u64le(&w, (uint64_t)i);
        bool injected = af_failed;
        af_arm(0);
        uint8_t *out;
        size_t len;
        if (bb_writer_take(&w, &out, &len)) {
            assert_false(injected);
            assert_int_equal(len, 16000);
            free(out);
            break;
        }
        assert_true(injected);
        assert_null(out);
    }
}

static void test_reader_reports_where_it_stopped(void **state)
{
    (void)state;
    bb_reader r;
    /* a length that claims more than remains: failed at the length */
    const uint8_t claim[] = {0x01, 0x05, 'a', 'b'};
    bb_reader_init(&r, claim, sizeof claim);
    uint64_t v;
    const uint8_t *d;
    size_t dl;
    assert_true(bb_reader_uvarint(&r, &v));
    assert_false(bb_reader_delimited(&r, &d, &dl));
    assert_null(d);
    assert_int_equal(dl, 0);
    assert_int_equal(r.fail_at, 1);
    assert_int_equal(r.status, BB_ETRUNC);
    /* every later get fails and keeps the first failure */
    assert_false(bb_reader_uvarint(&r, &v));
    assert_false(bb_reader_has(&r, 0, 1));
    assert_false(bb_reader_fail(&r, 3, BB_EDECODE, "later"));
    assert_int_equal(r.fail_at, 1);

    /* a varint over 64 bits is malformed, not truncated */
    const uint8_t over[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    bb_reader_init(&r, over, sizeof over);
    assert_false(bb_reader_uvarint(&r, &v));
    assert_int_equal(r.status, BB_EPARSE);
    assert_int_equal(r.fail_at, 0);
    /* a varint cut short is truncated */
    bb_reader_init(&r, over, 3);
    assert_false(bb_reader_uvarint(&r, &v));
    assert_int_equal(r.status, BB_ETRUNC);
    assert_string_equal(r.why, "truncated varint");

    /* protobuf's reading takes a non-minimal varint; the minimal one does not */
    const uint8_t nonmin[2] = {0x81, 0x00};
    bb_reader_init(&r, nonmin, 2);
    assert_true(bb_reader_uvarint(&r, &v) && v == 1);
    bb_reader_init(&r, nonmin, 2);
    assert_false(bb_reader_uvarint_minimal(&r, &v));
    assert_string_equal(r.why, "non-minimal varint");

    /* no data at all: an empty read succeeds, a varint is truncated */
    bb_reader_init(&r, NULL, 0);
    assert_true(bb_reader_view(&r, 0, &d));
    assert_null(d);
    assert_false(bb_reader_uvarint(&r, &v));
    assert_int_equal(r.status, BB_ETRUNC);
    assert_int_equal(r.fail_at, 0);

    /* a caller's own verdict on a value that decoded */
    bb_reader_init(&r, nonmin, 2);
    assert_false(bb_reader_fail(&r, 1, BB_EDECODE, "index out of range"));
    assert_int_equal(r.status, BB_EDECODE);
    uint8_t got = 0x55;
    assert_false(bb_reader_get(&r, &got, 1));
    assert_int_equal(got, 0x55); /* untouched */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_kind),
        cmocka_unit_test(test_writer_grows_and_resets),
        cmocka_unit_test(test_fixed_writer_runs_out_of_room),
        cmocka_unit_test(test_writer_remembers_allocation_failure),
        cmocka_unit_test(test_reader_reports_where_it_stopped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
