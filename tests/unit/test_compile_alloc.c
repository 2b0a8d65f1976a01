/*
 * test_compile_alloc.c — the whole compiler (bbc_compile) with each of its
 * allocations failing in turn (support/alloc_fail.h), over the two example
 * programs: every run either fails saying "out of memory" or produces the
 * very artifact a clean run produces (byte for byte), and leaks nothing.
 * An allocation failure must never turn into a different error or into a
 * quietly smaller answer (a pass skipping a wire edge it could not index).
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

typedef struct job {
    bb_model *in;
    bbc_bindings b;
    bbc_type_array arr;
    bbc_type_source ts;
    bbc_options o;
} job;

static void job_init(job *j, const char *program, const char *binding)
{
    memset(j, 0, sizeof *j);
    bb_error e = {0};
    bb_model *rec = fx_program(program, &e);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!rec || bb_model_save_mem(rec, &buf, &len, &e) != BB_OK ||
        bb_model_load_mem(buf, len, program, &j->in, &e) != BB_OK)
        fail_msg("%s: %s", program, e.msg);
    free(buf);
    bb_model_free(rec);
    assert_int_equal(bbc_bindings_init(&j->b), BB_OK);
    if (binding)
        assert_int_equal(bbc_bindings_add_arg(&j->b, binding, NULL), BB_OK);
    fx_types(&j->ts, &j->arr);
    bbc_options_init(&j->o);
}

static void job_free(job *j)
{
    bb_model_free(j->in);
    bbc_bindings_free(&j->b);
}

/* Compile and save: the artifact's bytes in *out (caller frees). */
static int compile_bytes(job *j, uint8_t **out, size_t *len, bbc_error *err)
{
    bb_model *m = NULL;
    *out = NULL;
    *len = 0;
    int rc = bbc_compile(j->in, &j->o, &j->b, &j->ts, NULL, 0, &m, err);
    if (rc == BB_OK) {
        bb_error e = {0};
        rc = bb_model_save_mem(m, out, len, &e);
        if (rc != BB_OK)
            memcpy(err->msg, e.msg, sizeof err->msg); /* "... out of memory" names it */
    }
    bb_model_free(m);
    return rc;
}

static void sweep_program(const char *program, const char *binding)
{
    job j;
    job_init(&j, program, binding);
    uint8_t *want = NULL;
    size_t want_len = 0;
    bbc_error err = {0};
    if (compile_bytes(&j, &want, &want_len, &err) != BB_OK)
        fail_msg("%s: clean compile failed: %s: %s", program, err.pass, err.msg);
    assert_true(want_len > 0);
    if (!af_interposed()) {
        free(want);
        job_free(&j);
        skip(); /* valgrind or a sanitizer owns malloc */
    }
    long runs = 0, completed_anyway = 0;
    for (long n = 1;; n++) {
        uint8_t *got = NULL;
        size_t got_len = 0;
        long base = af_live;
        memset(&err, 0, sizeof err);
        af_arm(n);
        int rc = compile_bytes(&j, &got, &got_len, &err);
        bool hit = af_failed;
        af_arm(0);
        if (rc == BB_OK) {
            if (got_len != want_len || memcmp(got, want, want_len) != 0)
                fail_msg("%s, allocation %ld failing: compiled, but the artifact differs from a "
                         "clean compile (%zu bytes, want %zu)",
                         program, n, got_len, want_len);
            completed_anyway += hit;
        } else if (!strstr(err.msg, "out of memory")) {
            fail_msg("%s, allocation %ld failing: %s: %s: %s (want an out-of-memory error)",
                     program, n, err.pass, bbc_errkind_name(err.kind), err.msg);
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
    job_free(&j);
}

/* The sweeps compare against one clean compile: compiling is deterministic
 * (runs under every allocator, sanitizers included). */
static void test_clean_compiles_are_identical(void **state)
{
    (void)state;
    static const char *const PROGRAMS[][2] = {{"federated", NULL},
                                              {"split_learning", "backend=cpu::CpuBackend"}};
    for (size_t i = 0; i < 2; i++) {
        job j;
        job_init(&j, PROGRAMS[i][0], PROGRAMS[i][1]);
        uint8_t *a = NULL, *b = NULL;
        size_t al = 0, bl = 0;
        bbc_error err = {0};
        if (compile_bytes(&j, &a, &al, &err) != BB_OK || compile_bytes(&j, &b, &bl, &err) != BB_OK)
            fail_msg("%s: %s: %s", PROGRAMS[i][0], err.pass, err.msg);
        assert_true(al > 1000);
        assert_int_equal(al, bl);
        assert_memory_equal(a, b, al);
        free(a);
        free(b);
        job_free(&j);
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
    sweep_program("split_learning", "backend=cpu::CpuBackend");
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
