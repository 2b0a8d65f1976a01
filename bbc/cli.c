/*
 * cli.c — what the bbc subcommands share: parsing "[flags] FILE.onnx"
 * command lines, loading a model with an error that names the file, and
 * opening a compiled model as an artifact view (bbc targets, bbc dot).
 */
#include <stdio.h>
#include <string.h>

#include "bb/model_io.h"
#include "bbc/bbc.h"

int bbc_parse_file_args(int argc, char **argv, const char *cmd, const char *usage,
                        const char *help, const char *const *flags, bool *const *set,
                        const char **path)
{
    bool no_more_opts = false;
    *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (no_more_opts || a[0] != '-' || a[1] == '\0') {
            if (*path) {
                fprintf(stderr, "bbc: error: %s: more than one file given ('%s')\n%s", cmd, a,
                        usage);
                return 2;
            }
            *path = a;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            if (help)
                fputs(help, stdout);
            return 0;
        }
        if (strcmp(a, "--") == 0) {
            no_more_opts = true;
            continue;
        }
        size_t k = 0;
        while (flags && flags[k] && strcmp(flags[k], a) != 0)
            k++;
        if (!flags || !flags[k]) {
            fprintf(stderr, "bbc: error: %s: unknown option '%s'\n%s", cmd, a, usage);
            return 2;
        }
        *set[k] = true;
    }
    if (!*path) {
        fprintf(stderr, "bbc: error: %s: no model file given\n%s", cmd, usage);
        return 2;
    }
    return -1;
}

int bbc_load_model(const char *path, bb_model **out)
{
    bb_error err = {0};
    if (bb_model_load_file(path, out, &err) == BB_OK)
        return BB_OK;
    /* The loader's message names the file; make sure it does. */
    if (strstr(err.msg, path))
        fprintf(stderr, "bbc: error: %s\n", err.msg);
    else
        fprintf(stderr, "bbc: error: %s: %s\n", path, err.msg);
    return err.code ? err.code : BB_EIO;
}

int bbc_open_artifact(const char *path, bbc_opened *o)
{
    memset(o, 0, sizeof *o);
    int rc = bbc_load_model(path, &o->model);
    if (rc != BB_OK)
        return rc;
    bb_error err = {0};
    if (!(o->arena = bb_arena_create())) {
        rc = bb_error_set(&err, BB_ENOMEM, "%s: out of memory", path);
    } else {
        rc = bb_artifact_read(o->model, path, o->arena, &o->view, &err);
        if (rc == BB_OK && (rc = bb_artifact_read_links(&o->view, o->arena, &err)) != BB_OK)
            bb_error_prefix(&err, "%s", path);
    }
    if (rc != BB_OK) {
        fprintf(stderr, "bbc: error: %s\n", err.msg);
        bbc_close_artifact(o);
    }
    return rc;
}

void bbc_close_artifact(bbc_opened *o)
{
    bb_arena_destroy(o->arena);
    bb_model_free(o->model);
    memset(o, 0, sizeof *o);
}
