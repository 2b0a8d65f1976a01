/*
 * bench_bbsim.c — how fast the simulator runs federated rounds: simulated
 * node-rounds per wall second (every node of the scenario through every
 * round), the virtual seconds simulated per wall second, and the resident
 * memory per node, for the scenarios of examples/sim/ (the federated example
 * on digits shards, 20 rounds):
 *
 *   federated-4      the demo's deployment: 1 server, 4 clients (the baseline)
 *   100 clients      federated-1000.json with 100 clients (K = 50)
 *   1,000 clients    federated-1000.json (K = 50)
 *
 * The ratio column is node-rounds per second against the baseline's,
 * measured in the same run: above 1, the simulator's cost per node and
 * round falls as the nodes grow (most nodes idle in a round). Each run is a
 * process of its own (its memory per node is its own), each figure the best
 * of TRIALS runs (wall time: a shared machine's other load only ever slows a
 * run down). scripts/sim-scale runs 1,000 and 10,000 clients
 * against the targets.
 *
 * Run from the repository root (make bench does), after make: it reads
 * the scenarios in examples/sim, data/digits.csv.gz and BUILD/sim/federated-kK.onnx.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cblas.h>
#include <cjson/cJSON.h>

#include "bb/io.h"
#include "bbsim/sim.h"

#define TRIALS 3

typedef struct result {
    double wall_s, virtual_s, rss_per_node;
    uint64_t rounds;
    uint32_t nodes;
} result;

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_bbsim: %s: %s\n", what, msg);
    exit(1);
}

/* <build>/bench/bench_bbsim -> <build> */
static void build_dir(char *out, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0)
        die("/proc/self/exe", "cannot read");
    out[n] = '\0';
    for (int i = 0; i < 2; i++)
        *strrchr(out, '/') = '\0';
}

/* The scenario file with its client group resized (0: as it is). */
static bbsim_scenario *load(const char *file, int clients)
{
    uint8_t *text = NULL;
    size_t len = 0;
    bb_error err = {0};
    if (bb_read_file(file, 1 << 20, &text, &len, &err))
        die(file, err.msg);
    cJSON *j = cJSON_Parse((const char *)text);
    free(text);
    if (!j)
        die(file, "not JSON");
    if (clients) {
        cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "groups"), 1);
        cJSON_SetNumberValue(cJSON_GetObjectItem(g, "count"), clients);
    }
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    bbsim_scenario *sc = NULL;
    if (bbsim_scenario_parse(s, strlen(s), file, "examples/sim", &sc, &err))
        die(file, err.msg);
    free(s);
    return sc;
}

/* One run, in a child process of its own: the resident memory it adds per
 * node is its nodes', not what an earlier run left to malloc. */
static result run_once(const char *file, int clients, const char *artifact)
{
    int fd[2];
    result r = {0};
    if (pipe(fd) != 0)
        die("pipe", "cannot create");
    pid_t pid = fork();
    if (pid < 0)
        die("fork", "cannot fork");
    if (pid == 0) {
        close(fd[0]);
        bbsim_scenario *sc = load(file, clients);
        bbsim_options o = {.threads = -1, .artifact = artifact};
        bbsim *s = NULL;
        bb_error err = {0};
        if (bbsim_new(sc, &o, &s, &err) || bbsim_run(s, &err))
            die(file, err.msg);
        const bbsim_summary *u = bbsim_summary_get(s);
        r = (result){u->wall_s, (double)u->virtual_ns / 1e9,
                     u->rss_nodes > u->rss_before
                         ? (double)(u->rss_nodes - u->rss_before) / u->nodes
                         : 0,
                     u->rounds, u->nodes};
        _exit(write(fd[1], &r, sizeof r) == sizeof r ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = read(fd[0], &r, sizeof r);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != sizeof r || !WIFEXITED(status) || WEXITSTATUS(status))
        die(file, "the run failed");
    if (r.rounds < 20)
        die(file, "fewer than 20 rounds");
    return r;
}

static result run(const char *file, int clients, const char *artifact)
{
    result best = {0};
    for (int t = 0; t < TRIALS; t++) {
        result r = run_once(file, clients, artifact);
        if (t == 0 || r.wall_s < best.wall_s)
            best = r;
    }
    return best;
}

static double node_rounds_per_s(const result *r)
{
    return (double)r->nodes * (double)r->rounds / r->wall_s;
}

int main(void)
{
    char build[PATH_MAX], k4[PATH_MAX + 64], k50[PATH_MAX + 64];
    openblas_set_num_threads(1); /* as bbsim runs (its main): the nodes' workers are the threads */
    build_dir(build, sizeof build);
    snprintf(k4, sizeof k4, "%s/sim/federated-k4.onnx", build);
    snprintf(k50, sizeof k50, "%s/sim/federated-k50.onnx", build);
    if (access("data/digits.csv.gz", R_OK) || access(k4, R_OK) || access(k50, R_OK))
        die("data/digits.csv.gz or the build's sim/ artifacts", "missing (run make from the "
            "repository root; scripts/fetch-data)");
    const struct {
        const char *name, *file, *artifact;
        int clients;
    } CASES[] = {{"federated-4 (baseline)", "examples/sim/federated-4.json", k4, 0},
                 {"federated, 100 clients, K=50", "examples/sim/federated-1000.json", k50, 100},
                 {"federated, 1,000 clients, K=50", "examples/sim/federated-1000.json", k50, 0}};
    printf("%-32s %7s %7s %9s %10s %14s %10s %9s %7s\n", "scenario", "nodes", "rounds", "wall s",
           "virtual s", "node-rounds/s", "virtual/s", "KB/node", "ratio");
    double base = 0;
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        result r = run(CASES[i].file, CASES[i].clients, CASES[i].artifact);
        double nrs = node_rounds_per_s(&r);
        if (i == 0)
            base = nrs;
        printf("%-32s %7u %7llu %9.3f %10.2f %14.0f %10.1f %9.1f %7.2f\n", CASES[i].name,
               r.nodes, (unsigned long long)r.rounds, r.wall_s, r.virtual_s, nrs,
               r.virtual_s / r.wall_s, r.rss_per_node / 1024, nrs / base);
    }
    return 0;
}
