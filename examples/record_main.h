/*
 * record_main.h — the main() of an example recorder: record the root
 * Module with record(r) and write it to argv[1]. Header-only, because each
 * examples/NAME/ directory builds into its own program from its own files.
 */
#ifndef BB_EXAMPLES_RECORD_MAIN_H
#define BB_EXAMPLES_RECORD_MAIN_H

#include <stdio.h>

#include "bb/recorder.h"

static inline int bb_example_main(int argc, char **argv, bb_module *(*record)(bb_recorder *r))
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.onnx\n", argv[0]);
        return 2;
    }
    bb_recorder *r = bb_recorder_new("user.app");
    if (!r) {
        fprintf(stderr, "%s: error: out of memory\n", argv[0]);
        return 1;
    }
    bb_error err = {0};
    int rc = bb_recorder_write(r, record(r), argv[1], &err);
    bb_recorder_free(r);
    if (rc) {
        fprintf(stderr, "%s: error: %s\n", argv[0], err.msg);
        return 1;
    }
    return 0;
}

#endif
