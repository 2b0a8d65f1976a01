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

#include <stdio.h>

#define BBC_VERSION "0.9.0"

typedef struct bbc_command {
    const char *name;
    const char *help; /* one line, for `bbc --help` */
    int (*run)(int argc, char **argv);
} bbc_command;

int bbc_cmd_check(int argc, char **argv);
int bbc_cmd_compile(int argc, char **argv);
int bbc_cmd_dump(int argc, char **argv);
int bbc_cmd_passes(int argc, char **argv);
int bbc_cmd_plugins(int argc, char **argv);

#endif
