/*
 * cmd_dump.c — `bbc dump [--json] FILE.onnx`: load a ModelProto and print
 * it as readable text (bb_model_dump) or as the protobuf JSON mapping
 * (bb_model_dump_json). Exit 0, 1 when the file cannot be loaded, 2 on
 * bad usage.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bb/model_io.h"
#include "bbc/bbc.h"

static const char USAGE[] = "usage: bbc dump [--json] FILE.onnx\n";

int bbc_cmd_dump(int argc, char **argv)
{
    bool json = false, no_more_opts = false;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!no_more_opts && a[0] == '-' && a[1] != 0) {
            if (strcmp(a, "--json") == 0) {
                json = true;
            } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
                fputs(USAGE, stdout);
                return 0;
            } else if (strcmp(a, "--") == 0) {
                no_more_opts = true;
            } else {
                fprintf(stderr, "bbc: error: dump: unknown option '%s'\n%s", a, USAGE);
                return 2;
            }
        } else if (!path) {
            path = a;
        } else {
            fprintf(stderr, "bbc: error: dump: more than one file given ('%s')\n%s", a, USAGE);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "bbc: error: dump: no model file given\n%s", USAGE);
        return 2;
    }
    bb_model *m = NULL;
    bb_error err = {0};
    if (bb_model_load_file(path, &m, &err) != BB_OK) {
        /* The loader's message names the file; make sure it does. */
        if (strstr(err.msg, path))
            fprintf(stderr, "bbc: error: %s\n", err.msg);
        else
            fprintf(stderr, "bbc: error: %s: %s\n", path, err.msg);
        return 1;
    }
    if (json)
        bb_model_dump_json(m, stdout);
    else
        bb_model_dump(m, stdout);
    bb_model_free(m);
    return 0;
}
