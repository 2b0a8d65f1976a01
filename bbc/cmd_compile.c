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
    "                   [--verify-each]\n";

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

int bbc_cmd_compile(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    const char *without[MAX_LIST], *stage_paths[MAX_LIST], *binds[MAX_LIST], *bfiles[MAX_LIST],
        *dirs[MAX_LIST];
    size_t n_without = 0, n_stage_paths = 0, n_binds = 0, n_bfiles = 0, n_dirs = 0;
    bbc_options opts;
    bbc_options_init(&opts);
    bool no_more = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (no_more || a[0] != '-' || !a[1]) {
            if (in)
                return usage_error("more than one model given ('%s')", a);
            in = a;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (!strcmp(a, "--")) {
            no_more = true;
            continue;
        }
        if (!strcmp(a, "--permissive-types")) {
            opts.permissive_types = true;
            continue;
        }
        if (!strcmp(a, "--verify-each")) {
            opts.verify_each = true;
            continue;
        }
        /* Options with a value. */
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return usage_error("option '%s' needs a value", a);
        i++;
        uint64_t num;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            out = v;
        } else if (!strcmp(a, "--bind") && n_binds < MAX_LIST) {
            binds[n_binds++] = v;
        } else if (!strcmp(a, "--bindings") && n_bfiles < MAX_LIST) {
            bfiles[n_bfiles++] = v;
        } else if (!strcmp(a, "--plugin-path") && n_dirs < MAX_LIST) {
            dirs[n_dirs++] = v;
        } else if (!strcmp(a, "--without-stage") && n_without < MAX_LIST) {
            without[n_without++] = v;
        } else if (!strcmp(a, "--stage") && n_stage_paths < MAX_LIST) {
            stage_paths[n_stage_paths++] = v;
        } else if (!strcmp(a, "--target-version")) {
            if (!parse_u64(v, &num) || num == 0 || num > 1000)
                return usage_error("--target-version '%s': expected an IR version (1..1000)", v);
            opts.target_ir_version = (int64_t)num;
        } else if (!strcmp(a, "--per-hop-budget-ns")) {
            if (!parse_u64(v, &num) || num == 0 || num > (uint64_t)INT64_MAX)
                return usage_error("--per-hop-budget-ns '%s': expected a positive number of "
                                   "nanoseconds", v);
            opts.per_hop_budget_ns = num;
        } else {
            return usage_error("unknown option '%s' (or too many repeats)", a);
        }
    }
    if (!in)
        return usage_error("%s", "no model file given");
    if (!out)
        return usage_error("%s", "no output file given (-o OUT.onnx)");
    opts.without = without;
    opts.n_without = n_without;

    int status = 1;
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
    for (size_t i = 0; i < n_bfiles; i++)
        if (bbc_bindings_load_file(&b, bfiles[i], &err) != BB_OK)
            goto fail;
    for (size_t i = 0; i < n_binds; i++)
        if (bbc_bindings_add_arg(&b, binds[i], &err) != BB_OK) {
            fprintf(stderr, "bbc: error: compile: %s\n%s", err.msg, USAGE);
            status = 2;
            goto done;
        }
    if (bb_plugin_loader_create(0, &loader, &err) != BB_OK)
        goto fail;
    for (size_t i = 0; i < n_dirs; i++)
        if (bb_plugin_loader_add_dirs(loader, dirs[i], &err) != BB_OK)
            goto fail;
    if (bb_plugin_loader_scan(loader, &err) != BB_OK)
        goto fail;
    for (size_t i = 0; i < bb_plugin_loader_warning_count(loader); i++)
        fprintf(stderr, "bbc: warning: %s\n", bb_plugin_loader_warning_at(loader, i));
    for (size_t i = 0; i < n_stage_paths; i++) {
        const bb_stage_info *si = NULL;
        if (bb_plugin_loader_load_stages(loader, stage_paths[i], &si, &err) != BB_OK)
            goto fail;
        for (uint32_t k = 0; k < si->n_stages && n_stages < sizeof stages / sizeof *stages; k++)
            stages[n_stages++] = si->stages[k];
    }
    for (size_t i = 0; i < n_without; i++)
        if (!bbc_pass_find(without[i]) && !stage_named(stages, n_stages, without[i])) {
            fprintf(stderr,
                    "bbc: error: compile: --without-stage '%s' names no pass (see 'bbc passes') "
                    "and no loaded stage\n%s",
                    without[i], USAGE);
            status = 2;
            goto done;
        }
    if (bb_model_load_file(in, &m, &err) != BB_OK)
        goto fail;
    bb_type_source ts;
    bb_type_source_from_loader(&ts, loader, BBC_PLUGIN_SEARCH_PATH);
    if (bbc_compile(m, &opts, &b, &ts, stages, n_stages, &compiled, &cerr) != BB_OK) {
        bbc_error_print(&cerr, stderr);
        goto done;
    }
    if (bb_model_save_file(compiled, out, &err) != BB_OK)
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
