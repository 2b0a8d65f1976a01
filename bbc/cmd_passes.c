/*
 * cmd_passes.c — `bbc passes [--names | --man]`: lists every compiler pass
 * from the one pass table, in run order, with its phase and summary
 * (--names: one name per line, for scripts; --man: the roff block that
 * man/bbc.1 carries between its "BEGIN/END bbc passes --man" markers, which
 * test_bbc_cli checks). Every name is valid for `bbc compile --without-stage`.
 */
#include <stdio.h>
#include <string.h>

#include "bbc/bbc.h"
#include "bbc/compiler_internal.h"

static const char USAGE[] = "usage: bbc passes [--names | --man]\n";

/* roff: '-' is a hyphen unless escaped; '\' must be doubled. */
static void man_escape(const char *s)
{
    for (; *s; s++) {
        if (*s == '-')
            fputs("\\-", stdout);
        else if (*s == '\\')
            fputs("\\e", stdout);
        else
            fputc(*s, stdout);
    }
}

int bbc_cmd_passes(int argc, char **argv)
{
    int names = 0, man = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--names")) {
            names = 1;
            continue;
        }
        if (!strcmp(argv[i], "--man")) {
            man = 1;
            continue;
        }
        fprintf(stderr, "bbc: error: passes: unknown argument '%s'\n%s", argv[i], USAGE);
        return 2;
    }
    for (size_t i = 0; i < bbc_pass_count(); i++) {
        const bbc_pass *p = bbc_pass_at(i);
        if (names) {
            printf("%s\n", p->name);
        } else if (man) {
            printf(".TP\n.B %s\n(", p->name);
            man_escape(bbc_phase_name(p->phase));
            fputs(") ", stdout);
            man_escape(p->summary);
            fputc('\n', stdout);
        } else {
            printf("%-32s %-14s %s\n", p->name, bbc_phase_name(p->phase), p->summary);
        }
    }
    return 0;
}
