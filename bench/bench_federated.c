/*
 * bench_federated.c — what a round of examples/federated costs with real
 * bbd processes on loopback: one server and K clients, the program recorded
 * and compiled once per scenario, rounds started by the server's Interval
 * back to back (period below the round time, every client alive).
 *
 * Per scenario: seconds per round (median of the measured rounds), bytes
 * the server moved per round (its transport totals, streamed with each
 * round event), and where the time went, from the program's own clocks on
 * one machine: training (client 0's "trained" event: arrival to end of
 * Train), aggregation (answers in to Aggregate done), evaluation (Aggregate
 * done to the end: LoadParameters + EvaluateMetrics) and the rest —
 * transport both ways, (de)serialization and waiting for the slowest
 * client. Then the resident memory of each bbd at the end (VmRSS, and the
 * peak VmHWM) — target: a client node under 30 MB with the digits model.
 *
 * Baseline measured in the same run: a raw loopback TCP stream between two
 * processes (bench/support/raw_tcp.h); "raw" is the time it needs for the
 * round's bytes, and the ratio is round time / raw.
 *
 * Scenarios: the digits MLP (64-32-10, 2,410 parameters) with 4 and 16
 * clients, and a 10M-parameter MLP (1000-5000-1000) on data::Synthetic with
 * 4 clients (aggregation and transfer bound: one short epoch each).
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "bench/support/bbd_nodes.h"
#include "bench/support/bench_util.h"
#include "bench/support/raw_tcp.h"

#define MAX_CLIENTS 16
#define MAX_ROUNDS 32

typedef struct scenario {
    const char *name;
    int clients, warmup, rounds;
    int period_ms, deadline_ms, epochs;
    const char *data_type;   /* recorded data source */
    const char *model_json;  /* every node's "model" config ("" = recorded) */
    const char *data_json;   /* extra keys of every node's "data" config */
    const char *caps_json;   /* every node's "caps" ("" = defaults) */
    const char *transport_json; /* every node's "transport" ("" = defaults) */
    double params;
} scenario;

typedef struct node {
    pid_t pid;
    char dir[PATH_MAX + 64], sock[PATH_MAX + 96], log[PATH_MAX + 80];
} node;

typedef struct round_rec {
    double t0, t1, collected, aggregated; /* ns, the server's clocks */
    double bytes;                          /* moved by the server since the last round */
    int participants;
} round_rec;

static struct {
    char build[PATH_MAX], self[PATH_MAX], tmp[PATH_MAX], bbd[PATH_MAX + 16],
        plugdir[PATH_MAX + 64], fed[PATH_MAX + 32], bbc[PATH_MAX + 16];
    node server, clients[MAX_CLIENTS];
} G;

static void cleanup(void)
{
    if (G.server.pid > 0)
        kill(G.server.pid, SIGKILL);
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (G.clients[i].pid > 0)
            kill(G.clients[i].pid, SIGKILL);
    if (G.tmp[0]) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof cmd, "rm -rf %s", G.tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_federated: cannot remove %s\n", G.tmp);
    }
}

_Noreturn static void fail(const char *what, const node *n)
{
    fprintf(stderr, "bench_federated: error: %s\n", what);
    if (n) {
        char cmd[PATH_MAX + 128];
        snprintf(cmd, sizeof cmd, "tail -n 20 %s >&2", n->log);
        if (system(cmd) != 0)
            fprintf(stderr, "(no log at %s)\n", n->log);
    }
    exit(1);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        fail(path, NULL);
}

static void node_start(node *n, const char *name, const char *target, const char *config,
                       const char *artifact, const char *peer)
{
    snprintf(n->dir, sizeof n->dir, "%s/%s", G.tmp, name);
    snprintf(n->sock, sizeof n->sock, "%s/control.sock", n->dir);
    snprintf(n->log, sizeof n->log, "%s.log", n->dir);
    char notify[PATH_MAX + 80];
    snprintf(notify, sizeof notify, "%s.notify", n->dir);
    char *argv[24] = {G.bbd, "--state-dir", n->dir, "--plugin-path", G.plugdir, "--config",
                      (char *)config, "--targets", (char *)target, "--listen",
                      "/ip4/127.0.0.1/tcp/0", "--log-level", "warn", "--fresh"};
    int k = 14;
    if (peer) {
        argv[k++] = "--peer";
        argv[k++] = (char *)peer;
    }
    argv[k++] = (char *)artifact;
    argv[k] = NULL;
    if ((n->pid = bench_spawn_ready(argv, notify, n->log, 60000, NULL)) < 0)
        fail("a bbd node did not become ready", n);
}

static void watch(bench_ctl *c, const node *n, const char *topic)
{
    char req[128];
    snprintf(req, sizeof req, "{\"cmd\":\"watch\",\"kinds\":[\"app\"],\"topics\":[\"%s\"]}",
             topic);
    cJSON *r = NULL;
    if (bench_ctl_open(c, n->sock) != 0 || !(r = bench_ctl_request(c, req, 10000)))
        fail("cannot watch a node", n);
    cJSON_Delete(r);
}

/* Item i of an event's Composite value as a number. */
static double item(const cJSON *ev, int i)
{
    const cJSON *it = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ev, "value"), "items"),
        i);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, "value");
    if (cJSON_IsString(v))
        return strtod(v->valuestring, NULL);
    if (cJSON_IsNumber(v))
        return v->valuedouble;
    return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(it, "data"), 0)
               ? cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(it, "data"), 0)->valuedouble
               : 0;
}

static double transport_total(const cJSON *ev)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(ev, "transport");
    const cJSON *i = cJSON_GetObjectItemCaseSensitive(t, "bytes_in");
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(t, "bytes_out");
    return (cJSON_IsNumber(i) ? i->valuedouble : 0) + (cJSON_IsNumber(o) ? o->valuedouble : 0);
}

static void rss_of(pid_t pid, double *rss_mb, double *hwm_mb)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb;
    *rss_mb = *hwm_mb = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            *rss_mb = kb / 1024.0;
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            *hwm_mb = kb / 1024.0;
    }
    if (f)
        fclose(f);
}

static void config(const scenario *s, char *path, size_t cap, const char *name,
                   const char *data_keys)
{
    char text[2048];
    snprintf(path, cap, "%s/%s.json", G.tmp, name);
    snprintf(text, sizeof text,
             "{\"components\": {\"data\": {%s%s%s}%s%s}%s%s%s%s}\n", data_keys,
             s->data_json[0] ? ", " : "", s->data_json, s->model_json[0] ? ", \"model\": " : "",
             s->model_json, s->caps_json[0] ? ", \"caps\": " : "", s->caps_json,
             s->transport_json[0] ? ", \"transport\": " : "", s->transport_json);
    write_file(path, text);
}

static void run(const scenario *s, int index, double raw_mib_s)
{
    char rec[PATH_MAX + 32], artifact[PATH_MAX + 32], k[16], p[16], d[16], e[16];
    snprintf(rec, sizeof rec, "%s/%s.rec.onnx", G.tmp, s->name);
    snprintf(artifact, sizeof artifact, "%s/%s.onnx", G.tmp, s->name);
    snprintf(k, sizeof k, "%d", s->clients);
    snprintf(p, sizeof p, "%d", s->period_ms);
    snprintf(d, sizeof d, "%d", s->deadline_ms);
    snprintf(e, sizeof e, "%d", s->epochs);
    char *record[] = {G.fed,          rec,  "--clients", k, "--period-ms", p, "--deadline-ms", d,
                      "--epochs",     e,    "--data",    (char *)s->data_type, NULL};
    char *compile[] = {G.bbc, "compile", rec, "-o", artifact, "--plugin-path", G.plugdir, NULL};
    if (bench_run(record) != 0 || bench_run(compile) != 0)
        fail("recording or compiling the program failed", NULL);

    char cfg[PATH_MAX + 96], keys[512];
    const char *digits = !strcmp(s->data_type, "data::Csv") ? "\"path\": \"data/digits.csv.gz\", " : "";
    snprintf(keys, sizeof keys, "%s\"part\": \"holdout\"", digits);
    char name[48];
    snprintf(name, sizeof name, "s%d-server", index);
    config(s, cfg, sizeof cfg, name, keys);
    node_start(&G.server, name, "Server", cfg, artifact, NULL);
    bench_ctl c;
    if (bench_ctl_open(&c, G.server.sock) != 0)
        fail("cannot reach the server", &G.server);
    cJSON *st = bench_ctl_request(&c, "{\"cmd\":\"status\"}", 10000);
    bench_ctl_close(&c);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(st, "peer_id");
    const cJSON *la = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(st, "listen"), 0);
    if (!cJSON_IsString(id) || !cJSON_IsString(la))
        fail("the server's status has no peer_id or listen address", &G.server);
    char peer[512];
    snprintf(peer, sizeof peer, "%s=%s", id->valuestring, la->valuestring);
    cJSON_Delete(st);
    bench_ctl rounds_w, trained_w;
    watch(&rounds_w, &G.server, "round");
    for (int i = 0; i < s->clients; i++) {
        snprintf(name, sizeof name, "s%d-client%d", index, i);
        snprintf(keys, sizeof keys, "%s\"shard_count\": %d, \"shard_index\": %d, \"seed\": %d",
                 digits, s->clients, i, 10 + i);
        config(s, cfg, sizeof cfg, name, keys);
        node_start(&G.clients[i], name, "Client", cfg, artifact, peer);
    }
    watch(&trained_w, &G.clients[0], "trained");

    /* rounds: skip those with fewer than K answers (clients still joining)
     * and the warmup, keep the next s->rounds */
    round_rec r[MAX_ROUNDS];
    int n = 0, full = 0;
    double prev_bytes = -1;
    double deadline = bench_now_ns() + 600e9, t_start = bench_now_ns();
    while (n < s->rounds) {
        const char *line = bench_ctl_line(&rounds_w, 60000);
        if (!line || bench_now_ns() > deadline)
            fail("rounds stopped coming", &G.server);
        cJSON *ev = cJSON_Parse(line);
        double bytes = transport_total(ev);
        int parts = (int)item(ev, 1);
        if (parts == s->clients && ++full > s->warmup) {
            r[n] = (round_rec){item(ev, 5), item(ev, 6), item(ev, 9), item(ev, 10),
                               prev_bytes >= 0 ? bytes - prev_bytes : 0, parts};
            n++;
        }
        prev_bytes = bytes;
        cJSON_Delete(ev);
    }
    fprintf(stderr, "  %s K=%d: %d rounds in %.1f s\n", s->name, s->clients, n,
            (bench_now_ns() - t_start) / 1e9);
    /* client 0's training time in each measured round (its arrival falls
     * inside the round) */
    double train[MAX_ROUNDS] = {0};
    const char *line;
    bench_ctl_fill(&trained_w); /* what has arrived: client 0 goes on training */
    while ((line = bench_ctl_line(&trained_w, 0))) {
        cJSON *ev = cJSON_Parse(line);
        double t_in = item(ev, 1), t_out = item(ev, 2);
        for (int i = 0; i < n; i++)
            if (t_in >= r[i].t0 && t_in <= r[i].t1)
                train[i] = t_out - t_in;
        cJSON_Delete(ev);
    }
    double rss_s, hwm_s, rss_c = 0, hwm_c = 0;
    rss_of(G.server.pid, &rss_s, &hwm_s);
    for (int i = 0; i < s->clients; i++) {
        double a, b;
        rss_of(G.clients[i].pid, &a, &b);
        rss_c = a > rss_c ? a : rss_c;
        hwm_c = b > hwm_c ? b : hwm_c;
    }
    bench_ctl_close(&rounds_w);
    bench_ctl_close(&trained_w);
    for (int i = 0; i < s->clients; i++) {
        if (bench_stop(G.clients[i].pid) != 0)
            fail("a client did not stop cleanly", &G.clients[i]);
        G.clients[i].pid = 0;
    }
    if (bench_stop(G.server.pid) != 0)
        fail("the server did not stop cleanly", &G.server);
    G.server.pid = 0;

    double secs[MAX_ROUNDS], bytes[MAX_ROUNDS], f_train = 0, f_agg = 0, f_eval = 0;
    for (int i = 0; i < n; i++) {
        double t = r[i].t1 - r[i].t0;
        secs[i] = t / 1e9;
        bytes[i] = r[i].bytes;
        f_train += train[i] / t / n;
        f_agg += (r[i].aggregated - r[i].collected) / t / n;
        f_eval += (r[i].t1 - r[i].aggregated) / t / n;
    }
    double sec = bench_median(secs, (size_t)n), by = bench_median(bytes, (size_t)n);
    double raw = by / (raw_mib_s * 1048576.0);
    printf("%-16s %3d %9.0f %10.4f %12.0f %9.4f %6.1f %6.1f%% %6.1f%% %6.1f%% %6.1f%% %7.1f "
           "%7.1f %7.1f %7.1f\n",
           s->name, s->clients, s->params, sec, by, raw, sec / raw,
           100 * (1 - f_train - f_agg - f_eval), 100 * f_agg, 100 * f_train, 100 * f_eval,
           rss_s, hwm_s, rss_c, hwm_c);
    fflush(stdout);
    if (!strcmp(s->data_type, "data::Csv"))
        printf("%-16s     client RSS %.1f MB (peak %.1f MB): target < 30 MB, ratio %.2f %s\n",
               "", rss_c, hwm_c, hwm_c / 30.0, hwm_c < 30.0 ? "(met)" : "(NOT met)");
}

int main(void)
{
    atexit(cleanup);
    if (bench_build_dir(G.build, G.self, sizeof G.build) != 0)
        bench_die("/proc/self/exe");
    snprintf(G.bbd, sizeof G.bbd, "%s/bin/bbd", G.build);
    snprintf(G.bbc, sizeof G.bbc, "%s/bin/bbc", G.build);
    snprintf(G.fed, sizeof G.fed, "%s/examples/federated", G.build);
    snprintf(G.plugdir, sizeof G.plugdir, "%s/lib/bytesandbrains/plugins", G.build);
    char *fetch[] = {"scripts/fetch-data", NULL};
    if (bench_run(fetch) != 0)
        fail("scripts/fetch-data failed (run from the repository root)", NULL);
    snprintf(G.tmp, sizeof G.tmp, "/tmp/bench-federated.XXXXXX");
    if (!mkdtemp(G.tmp))
        bench_die("mkdtemp");
    bench_place(false);
    double raw = 0;
    for (int i = 0; i < 3; i++) { /* the best of three: the machine is shared */
        double x = bench_raw_stream(64);
        raw = x > raw ? x : raw;
    }
    printf("bench_federated: examples/federated, one server + K clients as bbd processes on "
           "loopback\nbaseline: raw loopback TCP stream %.0f MiB/s (same run); raw = the round's "
           "bytes at that rate\n\n",
           raw);
    printf("%-16s %3s %9s %10s %12s %9s %6s %7s %7s %7s %7s %7s %7s %7s %7s\n", "scenario", "K",
           "params", "s/round", "bytes/round", "raw s", "ratio", "transp", "aggr", "train",
           "eval", "srvRSS", "srvPeak", "cliRSS", "cliPeak");
    /* a 40 MB parameter vector: over the default 16 MiB per-peer send queue and
     * 4 MiB completion result */
    static const char *const BIG_QUEUES =
        "{\"max_queue_per_peer_bytes\": 268435456, \"max_queue_total_bytes\": 1073741824}";
    static const char *const BIG_CAPS =
        "{\"max_completion_result_bytes\": 134217728, \"max_envelope_bytes\": 134217728}";
    const scenario sc[] = {
        {"digits", 4, 2, 10, 150, 140, 5, "data::Csv", "", "", "", "", 2410},
        {"digits", 16, 2, 10, 300, 280, 5, "data::Csv", "", "", "", "", 2410},
        {"synthetic-10M", 4, 1, 3, 500, 120000, 1, "data::Synthetic",
         "{\"layers\": [1000, 5000, 1000], \"optimizer\": \"sgd\", \"learning_rate\": 0.01, "
         "\"batch_size\": 32}",
         "\"samples\": 400, \"features\": 1000, \"classes\": 1000", BIG_CAPS, BIG_QUEUES,
         10006000},
    };
    for (size_t i = 0; i < sizeof sc / sizeof *sc; i++)
        run(&sc[i], (int)i, raw);
    printf("\ntransp = the rest of the round: sending the parameters, answers back, (de)"
           "serialization, the slowest client; train = client 0's Train; aggr = Contribute + "
           "Aggregate; eval = LoadParameters + EvaluateMetrics (fractions of the round, "
           "means)\n");
    return 0;
}
