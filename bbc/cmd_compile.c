/*
 * cmd_compile.c — `bbc compile MODEL.onnx -o OUT.onnx [options]`: load a
 * recorded model, bind slots (--bind, --bindings), find component types
 * through the plugin search (--plugin-path), run the pipeline and write ONE
 * compiled ModelProto. Compile failures print
 * "bbc: error: <pass>: <Variant>: <message>" and exit 1; bad usage exits 2.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/model_io.h"
#include "bb/plugin_loader.h"
#include "bbc/bbc.h"
#include "bbc/compiler_internal.h"

static const char USAGE[] =
    "usage: bbc compile MODEL.onnx -o OUT.onnx [--bind SLOT=TYPE_NAME]... [--bindings FILE.json]\n"
    "                   [--plugin-path DIR]... [--target-version N] [--per-hop-budget-ns N]\n"
    "                   [--permissive-types] [--without-stage NAME]... [--stage PLUGIN.so]...\n"
    "                   [--verify-each] [--sign KEY]\n";

#define MAX_LIST 256

static int usage_error(const char *fmt, const char *arg)
{
    fputs("bbc: error: compile: ", stderr);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", USAGE);
    return 2;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

static bool stage_named(const bb_stage *const *stages, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (stages[i]->name && strcmp(stages[i]->name, name) == 0)
            return true;
    return false;
}

/* The command line: the files, the repeated options and the options. */
typedef struct compile_args {
    const char *in, *out, *sign_key;
    const char *without[MAX_LIST], *stage_paths[MAX_LIST], *binds[MAX_LIST], *bfiles[MAX_LIST],
        *dirs[MAX_LIST];
    size_t n_without, n_stage_paths, n_binds, n_bfiles, n_dirs;
    bbc_options opts;
} compile_args;

/* One option that takes a value: -1 when taken, else the exit status. */
static int take_value_option(compile_args *c, const char *a, const char *v)
{
    uint64_t num;
    if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
        c->out = v;
    } else if (!strcmp(a, "--sign")) {
        c->sign_key = v;
    } else if (!strcmp(a, "--bind") && c->n_binds < MAX_LIST) {
        c->binds[c->n_binds++] = v;
    } else if (!strcmp(a, "--bindings") && c->n_bfiles < MAX_LIST) {
        c->bfiles[c->n_bfiles++] = v;
    } else if (!strcmp(a, "--plugin-path") && c->n_dirs < MAX_LIST) {
        c->dirs[c->n_dirs++] = v;
    } else if (!strcmp(a, "--without-stage") && c->n_without < MAX_LIST) {
        c->without[c->n_without++] = v;
    } else if (!strcmp(a, "--stage") && c->n_stage_paths < MAX_LIST) {
        c->stage_paths[c->n_stage_paths++] = v;
    } else if (!strcmp(a, "--target-version")) {
        if (!parse_u64(v, &num) || num == 0 || num > 1000)
            return usage_error("--target-version '%s': expected an IR version (1..1000)", v);
        c->opts.target_ir_version = (int64_t)num;
    } else if (!strcmp(a, "--per-hop-budget-ns")) {
        if (!parse_u64(v, &num) || num == 0 || num > (uint64_t)INT64_MAX)
            return usage_error("--per-hop-budget-ns '%s': expected a positive number of "
                               "nanoseconds", v);
        c->opts.per_hop_budget_ns = num;
    } else {
        return usage_error("unknown option '%s' (or too many repeats)", a);
    }
    return -1;
}

/* -1 to go on with c filled, else the exit status (0 after --help). */
static int parse_args(int argc, char **argv, compile_args *c)
{
    memset(c, 0, sizeof *c);
    bbc_options_init(&c->opts);
    bool no_more = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (no_more || a[0] != '-' || !a[1]) {
            if (c->in)
                return usage_error("more than one model given ('%s')", a);
            c->in = a;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return 0;
        } else if (!strcmp(a, "--")) {
            no_more = true;
        } else if (!strcmp(a, "--permissive-types")) {
            c->opts.permissive_types = true;
        } else if (!strcmp(a, "--verify-each")) {
            c->opts.verify_each = true;
        } else if (i + 1 >= argc) {
            return usage_error("option '%s' needs a value", a);
        } else {
            int rc = take_value_option(c, a, argv[++i]);
            if (rc >= 0)
                return rc;
        }
    }
    if (!c->in)
        return usage_error("%s", "no model file given");
    if (!c->out)
        return usage_error("%s", "no output file given (-o OUT.onnx)");
    c->opts.without = c->without;
    c->opts.n_without = c->n_without;
    return -1;
}

/* The loader over --plugin-path (warnings printed) and the --stage
 * plugins' stages into stages[0..*n). */
static int load_plugins(const compile_args *c, bb_plugin_loader **loader,
                        const bb_stage **stages, size_t cap, size_t *n, bb_error *err)
{
    int rc = bb_plugin_loader_create(0, loader, err);
    for (size_t i = 0; rc == BB_OK && i < c->n_dirs; i++)
        rc = bb_plugin_loader_add_dirs(*loader, c->dirs[i], err);
    if (rc == BB_OK)
        rc = bb_plugin_loader_scan(*loader, err);
    for (size_t i = 0; rc == BB_OK && i < bb_plugin_loader_warning_count(*loader); i++)
        fprintf(stderr, "bbc: warning: %s\n", bb_plugin_loader_warning_at(*loader, i));
    for (size_t i = 0; rc == BB_OK && i < c->n_stage_paths; i++) {
        const bb_stage_info *si = NULL;
        rc = bb_plugin_loader_load_stages(*loader, c->stage_paths[i], &si, err);
        for (uint32_t k = 0; rc == BB_OK && k < si->n_stages && *n < cap; k++)
            stages[(*n)++] = si->stages[k];
    }
    return rc;
}

/* Every --without-stage names a pass or a loaded stage: -1, else 2. */
static int check_without(const compile_args *c, const bb_stage *const *stages, size_t n)
{
    for (size_t i = 0; i < c->n_without; i++)
        if (!bbc_pass_find(c->without[i]) && !stage_named(stages, n, c->without[i])) {
            fprintf(stderr,
                    "bbc: error: compile: --without-stage '%s' names no pass (see 'bbc passes') "
                    "and no loaded stage\n%s",
                    c->without[i], USAGE);
            return 2;
        }
    return -1;
}

int bbc_cmd_compile(int argc, char **argv)
{
    compile_args c;
    int status = parse_args(argc, argv, &c);
    if (status >= 0)
        return status;
    status = 1;
    bb_error err = {0};
    bbc_error cerr = {0};
    bb_model *m = NULL, *compiled = NULL;
    bb_plugin_loader *loader = NULL;
    bbc_bindings b;
    const bb_stage *stages[MAX_LIST * 4];
    size_t n_stages = 0;
    if (bbc_bindings_init(&b) != BB_OK) {
        fputs("bbc: error: out of memory\n", stderr);
        return 1;
    }
    for (size_t i = 0; i < c.n_bfiles; i++)
        if (bbc_bindings_load_file(&b, c.bfiles[i], &err) != BB_OK)
            goto fail;
    for (size_t i = 0; i < c.n_binds; i++)
        if (bbc_bindings_add_arg(&b, c.binds[i], &err) != BB_OK) {
            fprintf(stderr, "bbc: error: compile: %s\n%s", err.msg, USAGE);
            status = 2;
            goto done;
        }
    if (load_plugins(&c, &loader, stages, sizeof stages / sizeof *stages, &n_stages, &err) != BB_OK)
        goto fail;
    if ((status = check_without(&c, stages, n_stages)) >= 0)
        goto done;
    status = 1;
    if (bb_model_load_file(c.in, &m, &err) != BB_OK)
        goto fail;
    bb_type_source ts;
    bb_type_source_from_loader(&ts, loader, BBC_PLUGIN_SEARCH_PATH);
    if (bbc_compile(m, &c.opts, &b, &ts, stages, n_stages, &compiled, &cerr) != BB_OK) {
        bbc_error_print(&cerr, stderr);
        goto done;
    }
    if (bb_model_save_file(compiled, c.out, &err) != BB_OK)
        goto fail;
    if (c.sign_key && bbc_sign_file(c.out, c.out, c.sign_key, NULL, &err) != BB_OK)
        goto fail;
    status = 0;
    goto done;
fail:
    fprintf(stderr, "bbc: error: %s\n", err.msg);
done:
    bb_model_free(compiled);
    bb_model_free(m);
    bb_plugin_loader_destroy(loader);
    bbc_bindings_free(&b);
    return status;
}
