/* Unit tests for the host's log rate limiter (bbd/host/ratelimit.h): the
 * burst per (kind, source), the "N more suppressed" report when a window
 * ends, sources and kinds kept apart, the total cap, and a bounded table
 * under thousands of forged sources. Time is passed in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "bbd/host/ratelimit.h"

typedef struct reports {
    int n;
    uint64_t suppressed;
    char kind[64], source[96];
} reports;

static void report(void *ud, const char *kind, const char *source, uint64_t suppressed,
                   uint64_t window_ms)
{
    reports *r = ud;
    (void)window_ms;
    r->n++;
    r->suppressed += suppressed;
    snprintf(r->kind, sizeof r->kind, "%s", kind);
    snprintf(r->source, sizeof r->source, "%s", source);
}

/* Issue 21: 2,000 junk datagrams wrote 3,116 lines. Now one source's
 * flood of one kind writes the burst, then one report per window. */
static void test_burst_then_one_report(void **state)
{
    (void)state;
    static bbd_ratelimit rl;
    reports r = {0};
    bbd_ratelimit_init(&rl, report, &r);
    int written = 0;
    for (int i = 0; i < 2000; i++)
        written += bbd_ratelimit_allow(&rl, "InfraEvent DecodeFailed", "peerA", 1000);
    assert_int_equal(written, BBD_RATELIMIT_BURST);
    assert_int_equal(r.n, 0);
    bbd_ratelimit_flush(&rl, 1500); /* the window has not ended */
    assert_int_equal(r.n, 0);
    bbd_ratelimit_flush(&rl, 2000);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.suppressed, 2000 - BBD_RATELIMIT_BURST);
    assert_string_equal(r.kind, "InfraEvent DecodeFailed");
    assert_string_equal(r.source, "peerA");
    assert_int_equal(rl.suppressed_total, 2000 - BBD_RATELIMIT_BURST);
    /* a new window: the burst again */
    assert_true(bbd_ratelimit_allow(&rl, "InfraEvent DecodeFailed", "peerA", 2001));
    bbd_ratelimit_flush(&rl, 5000);
    assert_int_equal(r.n, 1); /* nothing suppressed since: no report */
}

static void test_sources_and_kinds_apart(void **state)
{
    (void)state;
    static bbd_ratelimit rl;
    reports r = {0};
    bbd_ratelimit_init(&rl, report, &r);
    for (int i = 0; i < 100; i++)
        bbd_ratelimit_allow(&rl, "refused", "flooder", 10);
    assert_true(bbd_ratelimit_allow(&rl, "refused", "honest", 10));
    assert_true(bbd_ratelimit_allow(&rl, "other kind", "flooder", 10));
}

static void test_total_cap_and_bounded_table(void **state)
{
    (void)state;
    static bbd_ratelimit rl;
    reports r = {0};
    bbd_ratelimit_init(&rl, report, &r);
    int written = 0;
    char src[32];
    for (int i = 0; i < 5000; i++) { /* thousands of forged sources in one window */
        snprintf(src, sizeof src, "forged-%d", i);
        written += bbd_ratelimit_allow(&rl, "refused", src, 100);
    }
    assert_int_equal(written, BBD_RATELIMIT_TOTAL);
    assert_int_equal(r.n, 0); /* evictions do not report one by one */
    /* on flush: one report per tracked pair that suppressed, one for the
     * evicted ones together */
    bbd_ratelimit_flush(&rl, 1100);
    assert_true(r.n <= BBD_RATELIMIT_SLOTS + 1);
    assert_int_equal(r.suppressed, 5000 - BBD_RATELIMIT_TOTAL);
    assert_int_equal(rl.suppressed_total, 5000 - BBD_RATELIMIT_TOTAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_then_one_report),
        cmocka_unit_test(test_sources_and_kinds_apart),
        cmocka_unit_test(test_total_cap_and_bounded_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
