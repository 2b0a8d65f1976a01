/*
 * main.c — bbd's entry point: dispatches subcommands. `bbd run` (run.c)
 * runs a model once in-process; the daemon proper is added by its own
 * module.
 */
#include <stdio.h>
#include <string.h>

#include "bbd/host/run.h"

static const char USAGE[] = "usage: bbd run MODEL.onnx [options] NAME=FILE.pb ... [-o DIR]\n"
                            "       bbd run --test-dir DIR [options]\n";

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "run") == 0)
        return bbd_run_main(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        fputs(USAGE, stdout);
        return 0;
    }
    fprintf(stderr, "bbd: error: %s\n%s", argc < 2 ? "no command given" : "unknown command",
            USAGE);
    return 2;
}
