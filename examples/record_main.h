/*
 * record_main.h — the main() of an example recorder: record the root
 * Module with record(r) and write it to argv[1]; and the command line of
 * an example with knobs. Header-only, because each examples/NAME/
 * directory builds into its own program from its own files.
 */
#ifndef BB_EXAMPLES_RECORD_MAIN_H
#define BB_EXAMPLES_RECORD_MAIN_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- the command line of an example with knobs -------------------------------- */

typedef struct bb_example_long_opt { /* --name N, a whole number in [lo, hi] */
    const char *name;
    long *dst;
    long lo, hi;
} bb_example_long_opt;

typedef struct bb_example_str_opt { /* --name TEXT */
    const char *name;
    const char **dst;
} bb_example_str_opt;

/* argv: OUT.onnx (*out) and the options. Returns 0, -1 after printing the
 * usage for -h / --help, or 2 after printing "prog: error: ..." (bad usage). */
static inline int bb_example_args(int argc, char **argv, const bb_example_long_opt *longs,
                                  size_t n_longs, const bb_example_str_opt *strs, size_t n_strs,
                                  void (*usage)(FILE *f, const char *prog), const char **out)
{
    *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout, argv[0]);
            return -1;
        }
        if (a[0] != '-') {
            if (*out) {
                fprintf(stderr, "%s: error: two output files ('%s', '%s')\n", argv[0], *out, a);
                return 2;
            }
            *out = a;
            continue;
        }
        size_t l = 0, s = 0;
        while (l < n_longs && strcmp(a, longs[l].name))
            l++;
        while (s < n_strs && strcmp(a, strs[s].name))
            s++;
        if (l == n_longs && s == n_strs) {
            fprintf(stderr, "%s: error: unknown option '%s'\n", argv[0], a);
            usage(stderr, argv[0]);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: error: %s needs a value\n", argv[0], a);
            return 2;
        }
        const char *v = argv[++i];
        if (s < n_strs) {
            *strs[s].dst = v;
            continue;
        }
        char *end = NULL;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno || !*v || *end || n < longs[l].lo || n > longs[l].hi) {
            fprintf(stderr, "%s: error: %s: '%s' is not a whole number in [%ld, %ld]\n",
                    argv[0], a, v, longs[l].lo, longs[l].hi);
            return 2;
        }
        *longs[l].dst = n;
    }
    if (!*out) {
        usage(stderr, argv[0]);
        return 2;
    }
    return 0;
}

#endif
