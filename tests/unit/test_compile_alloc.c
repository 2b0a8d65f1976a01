/*
 * test_compile_alloc.c — the whole compiler (bbc_compile) with each of its
 * allocations failing in turn (support/alloc_fail.h), over the two example
 * programs: every run either fails saying "out of memory" or produces the
 * very artifact a clean run produces (byte for byte), and leaks nothing.
 * An allocation failure must never turn into a different error or into a
 * quietly smaller answer (a pass skipping a wire edge it could not index).
 * What fails in turn are heap allocations: the IR and the passes' side
 * tables live in arenas (libbbir/src/arena.c), whose chunks are the heap
 * allocations here, so an arena allocation fails only when it needs a new
 * chunk — 15 to 20 points per compile, each at a different stage, not
 * every push.
 *
 * Under AddressSanitizer or valgrind the allocator is theirs: the sweeps
 * skip, and only the clean compiles run (deterministic, byte for byte).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "bbc_fixture.h"
#include "bbc_programs.h"
#include "support/alloc_fail.h"

/* A fixture program as bbc reads it, with one binding (may be NULL). */
static void setup_compile(fx_compiled *c, const char *program, const char *binding)
{
    bb_error e = {0};
    bb_model *in = fx_program_loaded(program, &e);
    if (!in)
        fail_msg("%s: %s", program, e.msg);
    assert_int_equal(fx_compiled_init(c, in, binding), BB_OK);
}

/* Compile and save: the artifact's bytes in *out (caller frees); c->out is
 * freed again, so a sweep's leak count sees only what the compile kept. */
static int compile_bytes(fx_compiled *c, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    int rc = fx_compiled_run(c);
    if (rc == BB_OK) {
        bb_error e = {0};
        rc = bb_model_save_mem(c->out, out, len, &e);
        if (rc != BB_OK)
            memcpy(c->err.msg, e.msg, sizeof c->err.msg); /* "... out of memory" names it */
    }
    bb_model_free(c->out);
    c->out = NULL;
    return rc;
}

static void sweep_program(const char *program, const char *binding)
{
    fx_compiled c;
    setup_compile(&c, program, binding);
    uint8_t *want = NULL;
    size_t want_len = 0;
    if (compile_bytes(&c, &want, &want_len) != BB_OK)
        fail_msg("%s: clean compile failed: %s: %s", program, c.err.pass, c.err.msg);
    assert_true(want_len > 0);
    if (!af_interposed()) {
        free(want);
        fx_compiled_free(&c);
        skip(); /* valgrind or a sanitizer owns malloc */
    }
    long runs = 0, completed_anyway = 0;
    for (long n = 1;; n++) {
        uint8_t *got = NULL;
        size_t got_len = 0;
        long base = af_live;
        memset(&c.err, 0, sizeof c.err);
        af_arm(n);
        int rc = compile_bytes(&c, &got, &got_len);
        bool hit = af_failed;
        af_arm(0);
        if (rc == BB_OK) {
            if (got_len != want_len || memcmp(got, want, want_len) != 0)
                fail_msg("%s, allocation %ld failing: compiled, but the artifact differs from a "
                         "clean compile (%zu bytes, want %zu)",
                         program, n, got_len, want_len);
            completed_anyway += hit;
        } else if (!strstr(c.err.msg, "out of memory")) {
            fail_msg("%s, allocation %ld failing: %s: %s: %s (want an out-of-memory error)",
                     program, n, c.err.pass, bbc_errkind_name(c.err.kind), c.err.msg);
        }
        free(got);
        if (af_live != base)
            fail_msg("%s, allocation %ld failing: %ld block(s) leaked", program, n,
                     af_live - base);
        if (!hit) {
            assert_int_equal(rc, BB_OK); /* the whole run, nothing injected */
            break;
        }
        runs++;
    }
    print_message("%s: %ld allocations failed in turn (%ld absorbed)\n", program, runs,
                  completed_anyway);
    assert_true(runs > 10);
    free(want);
    fx_compiled_free(&c);
}

/* The sweeps compare against one clean compile: compiling is deterministic
 * (runs under every allocator, sanitizers included). */
static void test_clean_compiles_are_identical(void **state)
{
    (void)state;
    static const char *const PROGRAMS[][2] = {{"federated", NULL},
                                              {"split_learning", FX_SPLIT_LEARNING_BINDING}};
    for (size_t i = 0; i < sizeof PROGRAMS / sizeof *PROGRAMS; i++) {
        fx_compiled c;
        setup_compile(&c, PROGRAMS[i][0], PROGRAMS[i][1]);
        uint8_t *a = NULL, *b = NULL;
        size_t al = 0, bl = 0;
        if (compile_bytes(&c, &a, &al) != BB_OK || compile_bytes(&c, &b, &bl) != BB_OK)
            fail_msg("%s: %s: %s", PROGRAMS[i][0], c.err.pass, c.err.msg);
        assert_true(al > 1000);
        assert_int_equal(al, bl);
        assert_memory_equal(a, b, al);
        free(a);
        free(b);
        fx_compiled_free(&c);
    }
}

static void test_federated_every_allocation_fails(void **state)
{
    (void)state;
    sweep_program("federated", NULL);
}

static void test_split_learning_every_allocation_fails(void **state)
{
    (void)state;
    sweep_program("split_learning", FX_SPLIT_LEARNING_BINDING);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_compiles_are_identical),
        cmocka_unit_test(test_federated_every_allocation_fails),
        cmocka_unit_test(test_split_learning_every_allocation_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
