/*
 * cmd_check.c — `bbc check MODEL.onnx [--plugin-path DIR]... [--target-version N]`:
 * runs the structural front half of the compiler (bootstrap composition,
 * inlining, the validate rules) and reports the first failure as
 * "bbc: error: <pass>: <Variant>: <message>". Exit 0 when the model is
 * well-formed, 1 when it is not, 2 on bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/model_io.h"
#include "bb/plugin_loader.h"
#include "bbc/bbc.h"
#include "bbc/compiler.h"

static const char USAGE[] =
    "usage: bbc check MODEL.onnx [--plugin-path DIR]... [--target-version N]\n";

#define MAX_DIRS 256

int bbc_cmd_check(int argc, char **argv)
{
    const char *in = NULL, *dirs[MAX_DIRS];
    size_t n_dirs = 0;
    bbc_options opts;
    bbc_options_init(&opts);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return 0;
        }
        if ((!strcmp(a, "--plugin-path") || !strcmp(a, "--target-version")) && i + 1 < argc) {
            const char *v = argv[++i];
            if (a[2] == 'p') {
                if (n_dirs == MAX_DIRS) {
                    fprintf(stderr, "bbc: error: check: too many --plugin-path\n%s", USAGE);
                    return 2;
                }
                dirs[n_dirs++] = v;
            } else {
                char *end;
                errno = 0;
                long long n = strtoll(v, &end, 10);
                if (errno || *end || n <= 0 || n > 1000) {
                    fprintf(stderr, "bbc: error: check: --target-version '%s': expected an IR "
                                    "version (1..1000)\n%s", v, USAGE);
                    return 2;
                }
                opts.target_ir_version = n;
            }
            continue;
        }
        if (a[0] == '-' && a[1]) {
            fprintf(stderr, "bbc: error: check: unknown option '%s'\n%s", a, USAGE);
            return 2;
        }
        if (in) {
            fprintf(stderr, "bbc: error: check: more than one model given ('%s')\n%s", a, USAGE);
            return 2;
        }
        in = a;
    }
    if (!in) {
        fprintf(stderr, "bbc: error: check: no model file given\n%s", USAGE);
        return 2;
    }
    int status = 1;
    bb_error err = {0};
    bbc_error cerr = {0};
    bb_model *m = NULL;
    bb_plugin_loader *loader = NULL;
    if (bb_plugin_loader_create(0, &loader, &err) != BB_OK)
        goto fail;
    for (size_t i = 0; i < n_dirs; i++)
        if (bb_plugin_loader_add_dirs(loader, dirs[i], &err) != BB_OK)
            goto fail;
    if (bb_plugin_loader_scan(loader, &err) != BB_OK || bb_model_load_file(in, &m, &err) != BB_OK)
        goto fail;
    bb_type_source ts;
    bb_type_source_from_loader(&ts, loader, BBC_PLUGIN_SEARCH_PATH);
    if (bbc_check(m, &opts, &ts, &cerr) != BB_OK) {
        bbc_error_print(&cerr, stderr);
        goto done;
    }
    printf("%s: ok\n", in);
    status = 0;
    goto done;
fail:
    fprintf(stderr, "bbc: error: %s\n", err.msg);
done:
    bb_model_free(m);
    bb_plugin_loader_destroy(loader);
    return status;
}
