/*
 * record_main.h — the main() of an example recorder: record the root
 * Module with record(r) and write it to argv[1]; and, for recorders with
 * knobs (examples/federated, examples/gossip), their argv parsing and
 * their write. Header-only, because each examples/NAME/ directory builds
 * into its own program from its own files.
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

/* ---- recorders with knobs ------------------------------------------------------ */

/* A whole-number knob: --opt N with N in [lo, hi] into *dst. */
typedef struct bb_example_knob {
    const char *opt;
    long *dst;
    long lo, hi;
} bb_example_knob;

/* A whole number in [lo, hi] from argv, or -1 after printing why. */
static inline long bb_example_long(const char *prog, const char *opt, const char *s, long lo,
                                   long hi)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !*s || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: error: %s: '%s' is not a whole number in [%ld, %ld]\n", prog, opt,
                s, lo, hi);
        return -1;
    }
    return v;
}

/* argv: -h / --help prints usage and exits 0; one OUT.onnx (*out); every
 * other argument an "--opt VALUE" pair: a whole-number knob of whole[], or
 * handed to other(prog, opt, value, ud), which returns 0, 2 after printing
 * why, or -1 for an option it does not know. 0, or 2 (bad usage). */
static inline int bb_example_args(int argc, char **argv, void (*usage)(FILE *, const char *),
                                  const bb_example_knob *whole, size_t n_whole,
                                  int (*other)(const char *, const char *, const char *, void *),
                                  void *ud, const char **out)
{
    *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout, argv[0]);
            exit(0);
        }
        if (a[0] != '-') {
            if (*out) {
                fprintf(stderr, "%s: error: two output files ('%s', '%s')\n", argv[0], *out, a);
                return 2;
            }
            *out = a;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: error: %s needs a value\n", argv[0], a);
            return 2;
        }
        const char *v = argv[++i];
        size_t w = 0;
        while (w < n_whole && strcmp(a, whole[w].opt))
            w++;
        int rc = w < n_whole ? ((*whole[w].dst = bb_example_long(argv[0], a, v, whole[w].lo,
                                                                 whole[w].hi)) < 0 ? 2 : 0)
                             : other(argv[0], a, v, ud);
        if (rc < 0) {
            fprintf(stderr, "%s: error: unknown option '%s'\n", argv[0], a);
            usage(stderr, argv[0]);
        }
        if (rc)
            return 2;
    }
    if (!*out) {
        usage(stderr, argv[0]);
        return 2;
    }
    return 0;
}

/* Record with record(r, ud) and write the program to out: the exit status
 * (1 after printing why). */
static inline int bb_example_write(const char *prog, const char *out,
                                   bb_module *(*record)(bb_recorder *, const void *),
                                   const void *ud)
{
    bb_recorder *r = bb_recorder_new("user.app");
    if (!r) {
        fprintf(stderr, "%s: error: out of memory\n", prog);
        return 1;
    }
    bb_error err = {0};
    int rc = bb_recorder_write(r, record(r, ud), out, &err);
    bb_recorder_free(r);
    if (rc) {
        fprintf(stderr, "%s: error: %s\n", prog, err.msg);
        return 1;
    }
    return 0;
}

#endif
