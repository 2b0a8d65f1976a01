/*
 * cmd_dump.c — `bbc dump [--json] FILE.onnx`: load a ModelProto and print
 * it as readable text (bb_model_dump) or as the protobuf JSON mapping
 * (bb_model_dump_json). Exit 0, 1 when the file cannot be loaded, 2 on
 * bad usage.
 */
#include <stdbool.h>
#include <stdio.h>

#include "bb/model_io.h"
#include "bbc/bbc.h"

static const char USAGE[] = "usage: bbc dump [--json] FILE.onnx\n";

int bbc_cmd_dump(int argc, char **argv)
{
    bool json = false;
    const char *path = NULL;
    int rc = bbc_parse_file_args(argc, argv, "dump", USAGE, NULL, (const char *[]){"--json", NULL},
                                 (bool *[]){&json}, &path);
    if (rc >= 0)
        return rc;
    bb_model *m = NULL;
    if (bbc_load_model(path, &m) != BB_OK)
        return 1;
    if (json)
        bb_model_dump_json(m, stdout);
    else
        bb_model_dump(m, stdout);
    bb_model_free(m);
    return 0;
}
