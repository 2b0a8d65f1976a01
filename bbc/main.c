/*
 * main.c — bbc's entry point: global options (--help, --version) and the
 * subcommand table. Everything else lives in bbc/cmd_<name>.c.
 */
#include <stdio.h>
#include <string.h>

#include "bbc/bbc.h"

/* One line per subcommand, in the order `bbc --help` lists them. */
static const bbc_command COMMANDS[] = {
    {"compile", "compile a recorded model into one deployable ModelProto", bbc_cmd_compile},
    {"check", "validate a recorded model (structural checks only)", bbc_cmd_check},
    {"dump", "print a model as readable text or JSON", bbc_cmd_dump},
    {"targets", "list a compiled model's targets, bindings and wire edges", bbc_cmd_targets},
    {"dot", "draw a compiled model as a Graphviz digraph", bbc_cmd_dot},
    {"plugins", "list the component types the plugin search finds", bbc_cmd_plugins},
    {"passes", "list the compiler passes in run order", bbc_cmd_passes},
    {"sign", "add an Ed25519 signature to an artifact (bbd require_signed_by)", bbc_cmd_sign},
};

#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static const char USAGE[] = "usage: bbc [--help] [--version] <command> [<args>]\n";

static void print_help(FILE *out)
{
    fputs(USAGE, out);
    fputs("\nBytesAndBrains compiler and model tools.\n\ncommands:\n", out);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-12s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fputs("\nRun 'bbc help <command>' for a command's options; see bbc(1).\n", out);
}

static const bbc_command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(COMMANDS[i].name, name) == 0)
            return &COMMANDS[i];
    return NULL;
}

static int unknown_command(const char *name)
{
    fprintf(stderr, "bbc: error: unknown command '%s' (see 'bbc --help')\n%s", name, USAGE);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "bbc: error: no command given\n%s", USAGE);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        print_help(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("bbc (BytesAndBrains) %s\n", BBC_VERSION);
        return 0;
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc == 2) {
            print_help(stdout);
            return 0;
        }
        if (argc > 3) {
            fprintf(stderr, "bbc: error: help takes one command name\n%s", USAGE);
            return 2;
        }
        const bbc_command *c = find_command(argv[2]);
        if (!c)
            return unknown_command(argv[2]);
        char *help_argv[] = {(char *)c->name, "--help", NULL};
        return c->run(2, help_argv);
    }
    if (cmd[0] == '-') {
        fprintf(stderr, "bbc: error: unknown option '%s'\n%s", cmd, USAGE);
        return 2;
    }
    const bbc_command *c = find_command(cmd);
    if (!c)
        return unknown_command(cmd);
    int rc = c->run(argc - 1, argv + 1);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("bbc: error: writing output");
        return 1;
    }
    return rc;
}
