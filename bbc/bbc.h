/*
 * bbc.h — the bbc command-line tool: one entry point per subcommand.
 *
 * Each subcommand is `int bbc_cmd_<name>(int argc, char **argv)` with
 * argv[0] the subcommand name. It returns the process exit status:
 * 0 success, 1 bad input (message "bbc: error: ..." on stderr), 2 bad usage
 * (message plus its usage line on stderr). Every subcommand accepts
 * -h/--help, printing its usage on stdout and returning 0; `bbc help NAME`
 * relies on that. To add a subcommand: write bbc/cmd_<name>.c, declare its
 * entry here and add one line to the table in bbc/main.c.
 */
#ifndef BBC_BBC_H
#define BBC_BBC_H

#include <stdbool.h>
#include <stdio.h>

#include "bb/artifact.h"
#include "bb/ir.h"
#include "bb/peerid.h"

#define BBC_VERSION "0.9.0"

/* Where the subcommands' type sources say they looked for a TYPE_NAME. */
#define BBC_PLUGIN_SEARCH_PATH "the plugin search path (see 'bbc plugins')"

typedef struct bbc_command {
    const char *name;
    const char *help; /* one line, for `bbc --help` */
    int (*run)(int argc, char **argv);
} bbc_command;

int bbc_cmd_check(int argc, char **argv);
int bbc_cmd_compile(int argc, char **argv);
int bbc_cmd_dot(int argc, char **argv);
int bbc_cmd_dump(int argc, char **argv);
int bbc_cmd_passes(int argc, char **argv);
int bbc_cmd_plugins(int argc, char **argv);
int bbc_cmd_targets(int argc, char **argv);
int bbc_cmd_sign(int argc, char **argv);

/* Sign the model file in with the key file key_path into out (may be in):
 * bb/model_sign.h; *signer (may be NULL) gets the signer's PeerId.
 * bbc sign and bbc compile --sign. */
int bbc_sign_file(const char *in, const char *out, const char *key_path, bb_peerid *signer,
                  bb_error *err);

/* ---- shared by the subcommands (bbc/cli.c) ---- */

/* Parses "[flags] FILE": flags[k] (NULL-terminated list) sets *set[k];
 * -h/--help prints usage and help (may be NULL); "--" ends options.
 * Returns -1 to go on (*path set), else the exit status to return (0 after
 * --help, 2 on bad usage, with the message and usage on stderr). */
int bbc_parse_file_args(int argc, char **argv, const char *cmd, const char *usage,
                        const char *help, const char *const *flags, bool *const *set,
                        const char **path);
/* Loads path; on failure prints "bbc: error: ..." naming the file and
 * returns the status. */
int bbc_load_model(const char *path, bb_model **out);

/* A compiled model loaded from a file with its artifact view. */
typedef struct bbc_opened {
    bb_model *model;
    bb_arena *arena;
    bb_artifact view;
} bbc_opened;
/* Loads path and reads the view; on failure prints "bbc: error: ..."
 * (naming the file) and returns the status, with nothing left to close. */
int bbc_open_artifact(const char *path, bbc_opened *o);
void bbc_close_artifact(bbc_opened *o);

#endif
