/*
 * main.c — bbsim, the command: run a scenario (bbsim(1)).
 *
 * Exit status: 0 when the run went to its end, 1 on bad input (the
 * scenario, the artifact, a node that cannot start, an output that cannot
 * be written), 2 on bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bbsim/sim.h"

#define MAX_PLUGIN_DIRS 64

static void usage(FILE *f)
{
    fputs("usage: bbsim [options] SCENARIO.json\n"
          "Runs every node of the scenario — real engines, real plugins, real envelopes —\n"
          "in one process, in virtual time (bbsim(1) documents the scenario format).\n"
          "  -o, --out DIR          write events.jsonl, summary.json and the SVG plots into DIR\n"
          "  -e, --events FILE      the event lines (JSON) to FILE; '-' standard output (the\n"
          "                         default without --out), 'none' nowhere\n"
          "      --artifact FILE    run this compiled artifact instead of the scenario's\n"
          "      --plugin-path DIR  look for plugins in DIR first (repeatable; DIR:DIR...)\n"
          "      --seed N           instead of the scenario's seed\n"
          "      --threads N        worker threads for the nodes' off-thread work (0: none;\n"
          "                         default: the scenario's, else one per CPU)\n"
          "      --no-progress      no progress bar (drawn only when stderr is a terminal)\n"
          "      --check            read and check the scenario, print what it holds, run nothing\n"
          "  -q, --quiet            no summary on stderr\n"
          "  -h, --help             this text\n",
          f);
}

static int bad_usage(const char *fmt, const char *arg)
{
    fputs("bbsim: error: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs(" (bbsim --help)\n", stderr);
    return 2;
}

static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !*s || *end || s[0] == '-' || v > max)
        return false;
    *out = v;
    return true;
}

typedef struct cli {
    bbsim_options o;
    const char *dirs[MAX_PLUGIN_DIRS];
    const char *out, *events, *scenario;
    bool quiet, no_progress, check;
} cli;

static int parse_args(int argc, char **argv, cli *c)
{
    enum { OPT_ARTIFACT = 256, OPT_PLUGIN_PATH, OPT_SEED, OPT_THREADS, OPT_NO_PROGRESS, OPT_CHECK };
    static const struct option LONG[] = {
        {"out", required_argument, NULL, 'o'},
        {"events", required_argument, NULL, 'e'},
        {"artifact", required_argument, NULL, OPT_ARTIFACT},
        {"plugin-path", required_argument, NULL, OPT_PLUGIN_PATH},
        {"seed", required_argument, NULL, OPT_SEED},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
        {"check", no_argument, NULL, OPT_CHECK},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    c->o.threads = -1;
    c->o.plugin_dirs = c->dirs;
    opterr = 0;
    int ch;
    uint64_t v;
    while ((ch = getopt_long(argc, argv, ":o:e:qh", LONG, NULL)) != -1) {
        switch (ch) {
        case 'o': c->out = optarg; break;
        case 'e': c->events = optarg; break;
        case 'q': c->quiet = true; break;
        case 'h': usage(stdout); exit(0);
        case OPT_ARTIFACT: c->o.artifact = optarg; break;
        case OPT_PLUGIN_PATH:
            if (c->o.n_plugin_dirs == MAX_PLUGIN_DIRS)
                return bad_usage("more than %s --plugin-path options", "64");
            c->dirs[c->o.n_plugin_dirs++] = optarg;
            break;
        case OPT_SEED:
            if (!parse_u64(optarg, 1ull << 53, &c->o.seed))
                return bad_usage("--seed: '%s' is not a whole number up to 2^53", optarg);
            c->o.has_seed = true;
            break;
        case OPT_THREADS:
            if (!parse_u64(optarg, 64, &v))
                return bad_usage("--threads: '%s' is not a whole number from 0 to 64", optarg);
            c->o.threads = (int)v;
            break;
        case OPT_NO_PROGRESS: c->no_progress = true; break;
        case OPT_CHECK: c->check = true; break;
        case ':': return bad_usage("%s needs a value", argv[optind - 1]);
        default: return bad_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind == argc)
        return bad_usage("no scenario given%s", "");
    if (optind + 1 < argc)
        return bad_usage("one scenario at a time ('%s' is extra)", argv[optind + 1]);
    c->scenario = argv[optind];
    return 0;
}

static const char *duration_text(bbsim_ns ns)
{
    static char buf[32];
    snprintf(buf, sizeof buf, "%.3f s", (double)ns / 1e9);
    return buf;
}

/* Where the event lines go: --events, else DIR/events.jsonl, else stdout. */
static int open_events(cli *c, char *path, size_t cap)
{
    const char *where = c->events;
    if (!where && c->out) {
        snprintf(path, cap, "%s/events.jsonl", c->out);
        where = path;
    }
    if (!where || !strcmp(where, "-")) {
        c->o.events = stdout;
        return 0;
    }
    if (!strcmp(where, "none"))
        return 0;
    if (!(c->o.events = fopen(where, "w"))) {
        fprintf(stderr, "bbsim: error: %s: cannot write: %s\n", where, strerror(errno));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    cli c = {0};
    int rc = parse_args(argc, argv, &c);
    if (rc)
        return rc;
    /* The nodes' work runs on bbsim's own workers (--threads). OpenBLAS
     * (loaded with the plugins, after this) would also split every product
     * over a thread pool of its own: the cores oversubscribed (100 gossip
     * nodes on Fashion-MNIST, 2 cores: 25.8 s -> 4.8 s with one BLAS
     * thread), and sums rounded in an order that depends on the machine's
     * core count, so a run's hash would too. */
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    bb_error err = {0};
    bbsim_scenario *sc = NULL;
    bbsim *s = NULL;
    char events_path[4096];
    if (bbsim_scenario_load(c.scenario, &sc, &err)) {
        fprintf(stderr, "bbsim: error: %s\n", err.msg);
        return 1;
    }
    if (c.check) {
        printf("%s: ok: %u nodes in %zu groups, %s of virtual time, artifact %s\n", c.scenario,
               sc->n_nodes, sc->n_groups, duration_text(sc->duration),
               c.o.artifact ? c.o.artifact : sc->artifact);
        bbsim_scenario_free(sc);
        return 0;
    }
    if (c.out && mkdir(c.out, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "bbsim: error: %s: cannot create: %s\n", c.out, strerror(errno));
        bbsim_scenario_free(sc);
        return 1;
    }
    if (open_events(&c, events_path, sizeof events_path)) {
        bbsim_scenario_free(sc);
        return 1;
    }
    c.o.progress = !c.no_progress && isatty(STDERR_FILENO);
    rc = bbsim_new(sc, &c.o, &s, &err) || bbsim_run(s, &err);
    if (!rc && !c.quiet)
        bbsim_report_print(s, stderr);
    if (!rc && c.out && bbsim_report_write(s, c.out, &err))
        rc = 1;
    if (rc)
        fprintf(stderr, "bbsim: error: %s\n", err.msg);
    if (c.o.events && c.o.events != stdout && fclose(c.o.events) != 0 && !rc) {
        fprintf(stderr, "bbsim: error: the event lines: %s\n", strerror(errno));
        rc = 1;
    }
    bbsim_free(s);
    bbsim_scenario_free(sc);
    return rc ? 1 : 0;
}
