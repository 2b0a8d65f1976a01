/*
 * test_engine_invariants.c — the engine's invariant checks (BBE__ASSERT) are
 * compiled into the engine the tests link, and a broken invariant stops the
 * process naming the file, the line and the condition. Each breakage runs
 * in a child process (it aborts); the parent reads its stderr.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "libbbengine/src/engine_internal.h"
#include "support/engine_fixtures.h"

/* An engine whose one execution sleeps (After): a live frame to break. */
static bb_engine *sleeping_engine(bb_model **m)
{
    *m = fx_model();
    bb_function *f = fx_fn(*m, "Main", "x", "y");
    bb_node *n = fx_op(*m, f, FX_SYS, "After", "x", "y");
    fx_int(*m, n, "delay_ns", 1000);
    bb_engine *e = fx_engine(1, 7001, NULL);
    assert_int_equal(fx_install(e, *m, "Main", NULL), BB_OK);
    bb_value *v = bb_value_trigger();
    bb_engine_input in = {.name = "x", .value = v};
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(v);
    fx_run(e, NULL, 1, 5);
    assert_non_null(e->live);
    return e;
}

typedef void (*breakage_fn)(bb_engine *e);

/* Run breakage in a child; it must abort with "engine invariant failed:
 * <cond>" on stderr. */
static void expect_abort(breakage_fn breakage, const char *cond)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        bb_model *m;
        bb_engine *e = sleeping_engine(&m);
        breakage(e);
        _exit(0); /* not reached when the check fires */
    }
    close(fds[1]);
    char buf[4096];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fds[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
        fail_msg("the child did not abort (status %#x); stderr: %s", status, buf);
    char want[256];
    snprintf(want, sizeof want, "engine invariant failed: %s", cond);
    if (!strstr(buf, want) || !strstr(buf, "libbbengine/src/"))
        fail_msg("stderr does not name the check \"%s\": %s", want, buf);
}

/* A frame released once more than it was referenced. */
static void unref_too_often(bb_engine *e)
{
    bbe__exec *x = e->live;
    x->refs = 0;
    bbe__exec_unref(e, x);
}

/* A frame collected while something still refers to it (exec.c: the
 * library's own objects are checked, not only the inline code here). */
static void collect_referenced(bb_engine *e)
{
    bbe__exec_gc(e, e->live);
}

/* An op pushed with a frame of another graph's execution. */
static void op_in_wrong_frame(bb_engine *e)
{
    bbe__exec *x = e->live;
    bbe__frontier_push(e, e->n_ops, x);
}

/* A write to a site the frame's graph does not have (exec.c). */
static void site_out_of_range(bb_engine *e)
{
    bbe__exec *x = e->live;
    bbe__write(e, x, x->g->n_sites, bb_value_trigger(), 0);
}

static void test_broken_invariants_abort_naming_the_check(void **state)
{
    (void)state;
#ifndef BBE_CHECKED
    fail_msg("the unit tests are compiled without BBE_CHECKED (Makefile: CHECK_CFLAGS)");
#endif
    expect_abort(unref_too_often, "x->refs > 0");
    expect_abort(collect_referenced, "x->refs == 0");
    expect_abort(op_in_wrong_frame, "op < e->n_ops");
    expect_abort(site_out_of_range, "site < x->g->n_sites");
}

/* The same engine, left alone, runs to the end without a check firing. */
static void test_intact_engine_runs(void **state)
{
    (void)state;
    bb_model *m;
    bb_engine *e = sleeping_engine(&m);
    fx_log log = {0};
    fx_run(e, &log, 2000, 5);
    assert_non_null(fx_log_app(&log, "y", 0));
    assert_int_equal(bb_engine_live_executions(e), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broken_invariants_abort_naming_the_check),
        cmocka_unit_test(test_intact_engine_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
