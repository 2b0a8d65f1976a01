/*
 * test_compile_bad.c — every compiler error variant, from a recorded model
 * in testdata/bad/compile/ (bbc_bad_models.h lists them): `bbc compile`
 * (the CLI entry, in-process) exits 1 and prints exactly one line
 *   bbc: error: <pass>: <Variant>: <message naming the culprit>
 * for each committed file and for the same model generated afresh; every
 * variant of BBC_ERROR_MAP has a model; the ValidationError ones fail
 * `bbc check` the same way.
 *
 *   build/tests/test_compile_bad --write testdata/bad/compile
 * regenerates the committed files (then run the test again).
 * Component types: the plugin search (cpu, example) plus the bbc_types test
 * plugin, linked alone into a temporary --plugin-path directory.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bb/model_io.h"
#include "bbc/bbc.h"
#include "bbc_bad_models.h"
#include "bbc_fixture.h"

static char dir[64];           /* scratch */
static char types_dir[96];     /* holds a link to bbc_types.so only */
static char types_so[PATH_MAX + 32]; /* the bbc_types plugin */
static char err[8192], err2[8192];

static int setup(void **state)
{
    (void)state;
    if (fx_mkdtemp(dir, sizeof dir, "bbc_bad") != 0)
        return -1;
    return fx_types_plugin_dir(dir, types_dir, sizeof types_dir, types_so, sizeof types_so);
}

static int teardown(void **state)
{
    (void)state;
    return fx_rmtree(dir);
}

/* `bbc compile model -o <scratch> --plugin-path <types> <case args>`,
 * stderr into buf. Returns the exit status. */
static int compile_cli(const bm_case *c, const char *model, char *buf, size_t cap)
{
    char out[128];
    snprintf(out, sizeof out, "%s/out.onnx", dir);
    unlink(out);
    const char *argv[16] = {"compile", model, "-o", out, "--plugin-path", types_dir};
    size_t n = 6;
    for (size_t i = 0; c->args[i] && n < 15; i++)
        argv[n++] = strcmp(c->args[i], BM_TYPES) == 0 ? types_so : c->args[i];
    argv[n] = NULL;
    int rc = fx_run_cli(bbc_cmd_compile, argv, NULL, 0, buf, cap);
    if (access(out, F_OK) == 0)
        fail_msg("%s: a failing compile wrote %s", c->file, out);
    return rc;
}

/* Exactly one line "bbc: error: <pass>: <Variant>: ..." holding every culprit. */
static void assert_error(const bm_case *c, const char *what, int rc, const char *text)
{
    if (rc != 1)
        fail_msg("%s (%s): exit %d, wanted 1; stderr:\n%s", c->file, what, rc, text);
    char head[160];
    snprintf(head, sizeof head, "bbc: error: %s: %s: ", c->pass, c->variant);
    if (strncmp(text, head, strlen(head)) != 0)
        fail_msg("%s (%s): stderr does not start with '%s':\n%s", c->file, what, head, text);
    const char *nl = strchr(text, '\n');
    if (!nl || nl[1] != '\0')
        fail_msg("%s (%s): wanted exactly one line on stderr:\n%s", c->file, what, text);
    for (size_t i = 0; i < 3 && c->culprit[i]; i++)
        if (!strstr(text, c->culprit[i]))
            fail_msg("%s (%s): the message does not name '%s':\n%s", c->file, what,
                     c->culprit[i], text);
}

static void committed_path(const bm_case *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", BM_DIR, c->file);
    if (access(buf, R_OK) != 0)
        fail_msg("%s is missing: regenerate with build/tests/test_compile_bad --write %s", buf,
                 BM_DIR);
}

/* ---- tests -------------------------------------------------------------------------- */

static void test_every_variant_has_a_model(void **state)
{
    (void)state;
    for (unsigned k = 1; k < BBC_E__COUNT; k++) {
        const char *name = bbc_errkind_name((bbc_errkind)k);
        size_t hits = 0;
        for (size_t i = 0; i < BM_N_CASES; i++)
            hits += strcmp(BM_CASES[i].variant, name) == 0;
        if (hits == 0)
            fail_msg("no model in %s for error variant %s (add one to bbc_bad_models.h)", BM_DIR,
                     name);
    }
    for (size_t i = 0; i < BM_N_CASES; i++)
        if (bbc_errkind_parse(BM_CASES[i].variant) == BBC_E_NONE)
            fail_msg("%s names no variant: %s", BM_CASES[i].file, BM_CASES[i].variant);
}

static void test_committed_models(void **state)
{
    (void)state;
    for (size_t i = 0; i < BM_N_CASES; i++) {
        const bm_case *c = &BM_CASES[i];
        char path[256];
        committed_path(c, path, sizeof path);
        assert_error(c, "committed", compile_cli(c, path, err, sizeof err), err);
    }
}

/* The generator still makes a model that fails the same way (so a stale
 * committed file is noticed). */
static void test_generated_models(void **state)
{
    (void)state;
    for (size_t i = 0; i < BM_N_CASES; i++) {
        const bm_case *c = &BM_CASES[i];
        bb_error e = {0};
        bb_model *m = c->build(&e);
        if (!m)
            fail_msg("%s: the generator failed: %s", c->file, e.msg);
        char path[160], committed[256];
        snprintf(path, sizeof path, "%s/%s", dir, c->file);
        assert_int_equal(bb_model_save_file(m, path, &e), BB_OK);
        bb_model_free(m);
        assert_error(c, "generated", compile_cli(c, path, err, sizeof err), err);
        committed_path(c, committed, sizeof committed);
        compile_cli(c, committed, err2, sizeof err2);
        if (strcmp(err, err2) != 0)
            fail_msg("%s: the committed file fails differently from the generator's model; "
                     "regenerate with build/tests/test_compile_bad --write %s\n"
                     "generated: %scommitted: %s",
                     c->file, BM_DIR, err, err2);
    }
}

/* `bbc check` (the structural front half) reports the ValidationErrors too. */
static void test_check_reports_validation_errors(void **state)
{
    (void)state;
    size_t checked = 0;
    for (size_t i = 0; i < BM_N_CASES; i++) {
        const bm_case *c = &BM_CASES[i];
        if (strcmp(c->pass, "validate") != 0)
            continue;
        char path[256];
        committed_path(c, path, sizeof path);
        int rc = fx_run_cli(bbc_cmd_check, FX_ARGV("check", path), NULL, 0, err, sizeof err);
        assert_error(c, "bbc check", rc, err);
        checked++;
    }
    assert_int_equal(checked, 8);
}

/* ---- --write: regenerate the committed files -------------------------------------------- */

static int write_all(const char *out_dir)
{
    int status = 0;
    for (size_t i = 0; i < BM_N_CASES; i++) {
        const bm_case *c = &BM_CASES[i];
        bb_error e = {0};
        bb_model *m = c->build(&e);
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", out_dir, c->file);
        if (!m || bb_model_save_file(m, path, &e) != BB_OK) {
            fprintf(stderr, "test_compile_bad: error: %s: %s\n", path, e.msg);
            status = 1;
        } else {
            printf("wrote %s (%s)\n", path, c->variant);
        }
        bb_model_free(m);
    }
    return status;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write") == 0)
        return write_all(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--write DIR]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_variant_has_a_model),
        cmocka_unit_test(test_committed_models),
        cmocka_unit_test(test_generated_models),
        cmocka_unit_test(test_check_reports_validation_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
