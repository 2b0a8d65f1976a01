/*
 * bbsim runs (bbsim/sim.h) of the federated example as shipped — the
 * recorder with its knobs, the real compiler and plugins — mostly through
 * the scenarios under examples/sim/ (their artifact replaced by the one
 * compiled here):
 *
 *  - the same scenario and seed give the same event log (its hash and every
 *    event line), whatever the number of worker threads; another seed
 *    another log;
 *  - a partition cuts the server off from half of its clients for three
 *    rounds: the rounds go on with the clients it can reach, the cut-off
 *    ones come back after it heals, the run completes;
 *  - churn: the server stopped (graceful: snapshot) and restarted goes on
 *    numbering its rounds from its snapshot; clients die at a rate and come
 *    back; the server's governor reports PeerDown and PeerUp;
 *  - the network model: a link's bandwidth makes the parameters take their
 *    time, a lossy link costs the round its deadline;
 *  - every node shares one prepared dataset (the host cache), work charged
 *    its measured time still completes, and a bad artifact fails by name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bb/model_io.h"
#include "bbsim/sim.h"
#include "support/plugin_fixtures.h"

#define MS 1000000ull

/* Items of the federated "round" report (examples/federated/federated.c). */
enum { R_ROUND, R_PARTICIPANTS, R_SAMPLES, R_LOSS, R_ACCURACY, R_STARTED, R_FINISHED };

static char g_artifact[64]; /* the federated example compiled with --clients 4 */

static int group_setup(void **state)
{
    (void)state;
    if (!pfx_fetch_data())
        return -1;
    const char *knobs[] = {"--clients", "4", NULL};
    bb_model *m = pfx_compile_example("federated", knobs);
    snprintf(g_artifact, sizeof g_artifact, "/tmp/bb-test-bbsim-XXXXXX");
    int fd = mkstemp(g_artifact);
    if (fd < 0)
        return -1;
    close(fd);
    bb_error err = {0};
    int rc = bb_model_save_file(m, g_artifact, &err);
    bb_model_free(m);
    return rc ? -1 : 0;
}

static int group_teardown(void **state)
{
    unlink(g_artifact);
    return pfx_group_teardown(state);
}

typedef struct run {
    bbsim_summary sum;
    char *events; /* the JSON lines */
    size_t len;
} run;

/* Run a scenario (a file under examples/sim, or text) with the artifact
 * compiled here. */
static void run_scenario(const char *file, const char *text, const bbsim_options *extra,
                         run *r)
{
    bbsim_scenario *sc = NULL;
    bb_error err = {0};
    int rc = file ? bbsim_scenario_load(pfx_repo_path(file), &sc, &err)
                  : bbsim_scenario_parse(text, strlen(text), "test", ".", &sc, &err);
    if (rc)
        fail_msg("scenario: %s", err.msg);
    bbsim_options o = {.threads = 2};
    if (extra)
        o = *extra;
    o.artifact = g_artifact;
    FILE *f = open_memstream(&r->events, &r->len);
    o.events = f;
    bbsim *s = NULL;
    if (bbsim_new(sc, &o, &s, &err) || bbsim_run(s, &err))
        fail_msg("run: %s", err.msg);
    r->sum = *bbsim_summary_get(s);
    bbsim_free(s);
    bbsim_scenario_free(sc);
    fclose(f);
}

static void run_free(run *r)
{
    free(r->events);
}

/* The i-th event line with this event (and topic, for "app"), or NULL;
 * the caller deletes it. */
static cJSON *nth_event(const run *r, const char *event, const char *topic, size_t i)
{
    const char *p = r->events;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        cJSON *j = cJSON_ParseWithLength(p, nl ? (size_t)(nl - p) : strlen(p));
        p = nl ? nl + 1 : NULL;
        assert_non_null(j);
        const cJSON *e = cJSON_GetObjectItem(j, "event"), *t = cJSON_GetObjectItem(j, "topic");
        if (!strcmp(e->valuestring, event) && (!topic || (t && !strcmp(t->valuestring, topic))) &&
            i-- == 0)
            return j;
        cJSON_Delete(j);
    }
    return NULL;
}

static double item(const cJSON *ev, int i)
{
    const cJSON *it = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "value"), "items"), i);
    const cJSON *v = cJSON_GetObjectItem(it, "value");
    if (v)
        return cJSON_IsString(v) ? strtod(v->valuestring, NULL) : v->valuedouble;
    return cJSON_GetArrayItem(cJSON_GetObjectItem(it, "data"), 0)->valuedouble;
}

static double t_s(const cJSON *ev) { return cJSON_GetObjectItem(ev, "t_ns")->valuedouble / 1e9; }
static const char *node(const cJSON *ev) { return cJSON_GetObjectItem(ev, "node")->valuestring; }

static void test_bbsim_same_seed_same_run(void **state)
{
    (void)state;
    run a, b, c, d;
    bbsim_options two = {.threads = 2}, none = {.threads = 0},
                  other = {.threads = 2, .has_seed = true, .seed = 2};
    run_scenario("examples/sim/federated-4.json", NULL, &two, &a);
    run_scenario("examples/sim/federated-4.json", NULL, &two, &b);
    run_scenario("examples/sim/federated-4.json", NULL, &none, &c);
    run_scenario("examples/sim/federated-4.json", NULL, &other, &d);
    print_message("  federated, 4 clients, 20 rounds: event log %016llx (%llu events), "
                  "%.3f s virtual; seed 2: %016llx\n",
                  (unsigned long long)a.sum.log_hash, (unsigned long long)a.sum.events,
                  (double)a.sum.virtual_ns / 1e9, (unsigned long long)d.sum.log_hash);
    assert_int_equal(a.sum.rounds, 20);
    assert_int_equal(a.sum.log_hash, b.sum.log_hash);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.events, b.events, a.len); /* every line, not only the hash */
    assert_int_equal(a.sum.log_hash, c.sum.log_hash); /* inline work: the same run */
    assert_int_not_equal(a.sum.log_hash, d.sum.log_hash);
    assert_int_equal(d.sum.rounds, 20);
    cJSON *last = nth_event(&a, "app", "round", 19);
    assert_non_null(last);
    assert_true(item(last, R_ACCURACY) > 0.95); /* the demo's 98% */
    cJSON_Delete(last);
    run_free(&a);
    run_free(&b);
    run_free(&c);
    run_free(&d);
}

/* examples/sim/federated-partition.json: clients[0:4] cut off from the
 * server (and the other clients) from 3.5 s to 6.5 s: rounds 4-6. */
static void test_bbsim_partition_rounds_go_on(void **state)
{
    (void)state;
    run r;
    run_scenario("examples/sim/federated-partition.json", NULL, NULL, &r);
    assert_int_equal(r.sum.rounds, 10);
    assert_string_equal(r.sum.stopped, "until count reached");
    cJSON *ev;
    for (size_t i = 0; (ev = nth_event(&r, "app", "round", i)); i++) {
        assert_int_equal((int)item(ev, R_ROUND), (int)i + 1);
        assert_int_equal((int)item(ev, R_PARTICIPANTS), 4); /* K = 4 of the reachable */
        cJSON_Delete(ev);
    }
    size_t during = 0, after = 0;
    for (size_t i = 0; (ev = nth_event(&r, "app", "trained", i)); i++) {
        int k = atoi(node(ev) + strlen("clients["));
        if (t_s(ev) > 3.5 && t_s(ev) < 6.5) {
            assert_true(k >= 4); /* only the reachable half trains */
            during++;
        }
        after += t_s(ev) > 6.5 && k < 4;
        cJSON_Delete(ev);
    }
    assert_int_equal(during, 3 * 4);
    assert_true(after > 0); /* the cut-off half is back after the heal */
    ev = nth_event(&r, "sim", NULL, 0);
    assert_string_equal(cJSON_GetObjectItem(ev, "what")->valuestring, "partition");
    cJSON_Delete(ev);
    run_free(&r);
}

/* examples/sim/federated-churn.json: the server stops at 2.5 s (graceful)
 * and restarts at 4.5 s from its snapshot; 10% of the clients die every 2 s
 * and come back 1.5 s later. */
static void test_bbsim_churn(void **state)
{
    (void)state;
    run r;
    run_scenario("examples/sim/federated-churn.json", NULL, NULL, &r);
    assert_int_equal(r.sum.rounds, 15);
    assert_true(r.sum.kills >= 10 && r.sum.restarts >= 9);
    cJSON *ev;
    double prev_t = 0;
    for (size_t i = 0; (ev = nth_event(&r, "app", "round", i)); i++) {
        /* numbered on from the snapshot: no round counted twice or lost */
        assert_int_equal((int)item(ev, R_ROUND), (int)i + 1);
        assert_false(t_s(ev) > 2.5 && t_s(ev) < 4.5); /* none while the server is down */
        prev_t = t_s(ev);
        cJSON_Delete(ev);
    }
    assert_true(prev_t > 4.5);
    ev = nth_event(&r, "PeerDown", NULL, 0);
    assert_non_null(ev);
    assert_string_equal(node(ev), "server[0]");
    cJSON_Delete(ev);
    ev = nth_event(&r, "PeerUp", NULL, 0);
    assert_non_null(ev);
    cJSON_Delete(ev);
    size_t restored = 0;
    for (size_t i = 0; (ev = nth_event(&r, "sim", NULL, i)); i++) {
        restored += !strcmp(cJSON_GetObjectItem(ev, "what")->valuestring, "restart");
        cJSON_Delete(ev);
    }
    assert_true(restored >= 2); /* the server and clients with a snapshot */
    run_free(&r);
}

/* Four clients (or n) of the federated example, three rounds, a 2 ms
 * network with more settings; extra top-level keys first. */
#define SMALL                                                                                 \
    "{%s\"artifact\": \"x\", \"duration\": \"8s\","                                          \
    " \"until\": {\"topic\": \"round\", \"count\": 3},"                                        \
    " \"groups\": [{\"name\": \"server\", \"count\": 1, \"targets\": [\"Server\"],"          \
    "  \"components\": {\"data\": {\"path\": \"%s\", \"part\": \"holdout\"}}},"               \
    " {\"name\": \"clients\", \"count\": %d, \"targets\": [\"Client\"],"                     \
    "  \"connect\": [\"server\"], \"components\": {\"data\": {\"path\": \"%s\","               \
    "  \"shard_count\": \"{n}\", \"shard_index\": \"{i}\"}}}],"                                \
    " \"report\": {\"round_topic\": \"round\"}, \"network\": {\"latency\": \"2ms\", %s}}"

static void small_text(char *text, size_t cap, const char *top, int clients, const char *network)
{
    char digits[1024];
    snprintf(digits, sizeof digits, "%s", pfx_repo_path("data/digits.csv.gz"));
    snprintf(text, cap, SMALL, top, digits, clients, digits, network);
}

static void small_run(const char *top, int clients, const char *network, run *r)
{
    char text[4096];
    small_text(text, sizeof text, top, clients, network);
    run_scenario(NULL, text, NULL, r);
    assert_int_equal(r->sum.rounds, 3);
}

static void test_bbsim_network_model(void **state)
{
    (void)state;
    /* 100 kB/s: the ~9.7 kB of parameters take ~97 ms, plus the 2 ms latency */
    run r;
    small_run("", 4, "\"bandwidth\": \"100kB/s\"", &r);
    cJSON *round1 = nth_event(&r, "app", "round", 0), *tr = nth_event(&r, "app", "trained", 0);
    double len = cJSON_GetObjectItem(cJSON_GetObjectItem(tr, "transport"), "bytes_in")->valuedouble;
    double took = (item(tr, 1) - item(round1, R_STARTED)) / 1e6; /* arrival - start, ms */
    print_message("  %.0f bytes at 100 kB/s + 2 ms: arrived after %.3f ms\n", len, took);
    assert_true(len > 9000 && len < 11000);
    assert_true(fabs(took - (len / 100.0 + 2.0)) < 0.5);
    cJSON_Delete(round1);
    cJSON_Delete(tr);
    run_free(&r);
    /* every envelope to clients[0] lost: each round waits for its deadline
     * (800 ms) and completes with the quorum, 3 of 4 */
    small_run("", 4, "\"links\": [{\"from\": \"server\", \"to\": \"clients[0]\", \"loss\": 1}]", &r);
    cJSON *ev;
    for (size_t i = 0; (ev = nth_event(&r, "app", "round", i)); i++) {
        assert_int_equal((int)item(ev, R_PARTICIPANTS), 3);
        assert_true(item(ev, R_FINISHED) - item(ev, R_STARTED) >= 800 * MS);
        cJSON_Delete(ev);
    }
    assert_int_equal(r.sum.dropped_loss, 3);
    assert_null(nth_event(&r, "app", "trained", 9)); /* 3 rounds x 3 clients */
    run_free(&r);
    /* every envelope twice, in any order, over jittery links: the dedup gates
     * drop the copies, nothing changes */
    small_run("", 4,
              "\"duplicate\": 1, \"reorder\": 1, \"links\": [{\"from\": \"clients\", \"to\": "
              "\"server\", \"latency\": {\"dist\": \"exponential\", \"mean\": \"20ms\"}}]",
              &r);
    assert_int_equal(r.sum.duplicated, r.sum.sent);
    ev = nth_event(&r, "app", "round", 2);
    assert_int_equal((int)item(ev, R_PARTICIPANTS), 4);
    cJSON_Delete(ev);
    run_free(&r);
}

/* 50 clients and the server read one file with one split: one prepared
 * table for all of them; work charged its measured CPU time completes too. */
static void test_bbsim_shared_data_and_measured_work(void **state)
{
    (void)state;
    run r;
    small_run("\"work\": {\"cost\": \"measured\", \"scale\": 10}, ", 50,
              "\"bandwidth\": \"unlimited\"", &r);
    print_message("  51 nodes: %zu shared value, %zu bytes\n", r.sum.shared_values,
                  r.sum.shared_bytes);
    assert_int_equal(r.sum.rounds, 3);
    assert_int_equal(r.sum.shared_values, 1);
    assert_true(r.sum.shared_bytes >= 1797 * 65 * 4); /* every row and label, once */
    assert_int_equal(r.sum.nodes, 51);
    run_free(&r);
}

static void test_bbsim_bad_artifact_fails_by_name(void **state)
{
    (void)state;
    char text[4096];
    small_text(text, sizeof text, "", 4, "\"loss\": 0");
    bbsim_scenario *sc = NULL;
    bb_error err = {0};
    assert_int_equal(bbsim_scenario_parse(text, strlen(text), "t", ".", &sc, &err), BB_OK);
    bbsim_options o = {.threads = 0, .artifact = "/nonexistent/fed.onnx"};
    bbsim *s = NULL;
    assert_int_not_equal(bbsim_new(sc, &o, &s, &err), BB_OK);
    assert_non_null(strstr(err.msg, "/nonexistent/fed.onnx"));
    /* an artifact without the targets: the node that cannot install is named */
    char *p = strstr(text, "\"Client\"");
    memcpy(p, "\"Cliant\"", 8);
    bbsim_scenario_free(sc);
    assert_int_equal(bbsim_scenario_parse(text, strlen(text), "t", ".", &sc, &err), BB_OK);
    o.artifact = g_artifact;
    assert_int_equal(bbsim_new(sc, &o, &s, &err), BB_OK);
    assert_int_not_equal(bbsim_run(s, &err), BB_OK);
    assert_non_null(strstr(err.msg, "clients[0]: "));
    assert_non_null(strstr(err.msg, "Cliant"));
    bbsim_free(s);
    bbsim_scenario_free(sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bbsim_same_seed_same_run),
        cmocka_unit_test(test_bbsim_partition_rounds_go_on),
        cmocka_unit_test(test_bbsim_churn),
        cmocka_unit_test(test_bbsim_network_model),
        cmocka_unit_test(test_bbsim_shared_data_and_measured_work),
        cmocka_unit_test(test_bbsim_bad_artifact_fails_by_name),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
