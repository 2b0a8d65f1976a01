/*
 * Unit tests for bbsim's scenario loader (bbsim/scenario.h): every section
 * read into its structs; durations and rates with their units; selectors;
 * the per-node config templates ({i}, {n}, {node} and their arithmetic);
 * and the refusals — an untrusted scenario is checked key by key, and every
 * error names the offending key by its path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bbsim/scenario.h"

static bbsim_scenario *parse_ok(const char *text)
{
    bbsim_scenario *sc = NULL;
    bb_error err = {0};
    if (bbsim_scenario_parse(text, strlen(text), "test.json", "/sc", &sc, &err))
        fail_msg("parse: %s", err.msg);
    return sc;
}

#define FULL                                                                                  \
    "{\"artifact\": \"fed.onnx\", \"plugin_path\": [\"/p\", \"plugins\"], \"seed\": 7,"      \
    " \"duration\": \"90s\", \"until\": {\"topic\": \"round\", \"count\": 20},"              \
    " \"work\": {\"cost\": \"measured\", \"scale\": 2.5}, \"threads\": 3,"                   \
    " \"groups\": ["                                                                          \
    "  {\"name\": \"server\", \"count\": 1, \"targets\": [\"Server\"], \"bootstrap\": false," \
    "   \"caps\": {\"preset\": \"edge\", \"peer_failure_threshold\": 2}},"                    \
    "  {\"name\": \"clients\", \"count\": 10, \"targets\": [\"Client\"], \"start\": \"2s\","  \
    "   \"connect\": [\"server\", {\"group\": \"clients\", \"count\": 3}],"                    \
    "   \"work_scale\": 4, \"snapshot_every\": \"5s\","                                       \
    "   \"components\": {\"data\": {\"shard_index\": \"{i}\"}}}],"                            \
    " \"network\": {\"latency\": {\"dist\": \"uniform\", \"min\": \"5ms\", \"max\": \"15ms\"}," \
    "  \"bandwidth\": \"100Mbit/s\", \"loss\": 0.01, \"duplicate\": 0.02, \"reorder\": 0.03,"  \
    "  \"links\": [{\"from\": \"server\", \"to\": [\"clients[0:5]\", \"clients[9]\"],"        \
    "              \"latency\": {\"dist\": \"lognormal\", \"median\": \"40ms\", \"sigma\": 0.5}," \
    "              \"loss\": 0.5}],"                                                          \
    "  \"partitions\": [{\"at\": \"10s\", \"heal\": \"13s\", \"isolate\": \"clients[0:5]\"}]}," \
    " \"churn\": [{\"at\": \"20s\", \"kill\": \"server\", \"restart\": \"25s\", \"graceful\": true}," \
    "            {\"rate\": 0.1, \"of\": \"clients\", \"every\": \"1m\", \"downtime\": \"10s\"}]," \
    " \"report\": {\"round_topic\": \"round\", \"bucket\": \"10s\","                          \
    "  \"metrics\": [{\"name\": \"accuracy\", \"topic\": \"round\", \"item\": 4,"            \
    "                \"target\": 0.9},"                                                         \
    "               {\"name\": \"loss\", \"topic\": \"loss\"}]}}"

static void test_bbsim_scenario_reads_every_section(void **state)
{
    (void)state;
    bbsim_scenario *sc = parse_ok(FULL);
    assert_string_equal(sc->artifact, "/sc/fed.onnx"); /* relative to the scenario */
    assert_int_equal(sc->n_plugin_dirs, 2);
    assert_string_equal(sc->plugin_dirs[0], "/p");
    assert_string_equal(sc->plugin_dirs[1], "/sc/plugins");
    assert_int_equal(sc->seed, 7);
    assert_int_equal(sc->duration, 90000000000ull);
    assert_string_equal(sc->until_topic, "round");
    assert_int_equal(sc->until_count, 20);
    assert_int_equal(sc->work_mode, BBSIM_WORK_MEASURED);
    assert_true(sc->work_scale == 2.5);
    assert_int_equal(sc->threads, 3);
    /* groups: numbering, caps, connects */
    assert_int_equal(sc->n_groups, 2);
    assert_int_equal(sc->n_nodes, 11);
    const bbsim_group *s0 = &sc->groups[0], *c = &sc->groups[1];
    assert_false(s0->bootstrap);
    assert_int_equal(s0->caps.peer_failure_threshold, 2);
    assert_int_equal(s0->caps.dedup_window, 1024); /* the edge preset */
    assert_int_equal(c->first, 1);
    assert_int_equal(c->start, 2000000000ull);
    assert_true(c->work_scale == 4);
    assert_int_equal(c->snapshot_every, 5000000000ull);
    assert_int_equal(c->n_connect, 2);
    assert_int_equal(c->connect[0].group, 0);
    assert_int_equal(c->connect[0].count, 0);
    assert_int_equal(c->connect[1].group, 1);
    assert_int_equal(c->connect[1].count, 3);
    assert_int_equal(bbsim_scenario_group_of(sc, 0), 0);
    assert_int_equal(bbsim_scenario_group_of(sc, 10), 1);
    /* the network */
    assert_int_equal(sc->net.latency.kind, BBSIM_DIST_UNIFORM);
    assert_true(sc->net.latency.a == 5e6 && sc->net.latency.b == 15e6);
    assert_true(sc->net.bandwidth == 12.5e6);
    assert_true(sc->net.loss == 0.01 && sc->net.duplicate == 0.02 && sc->net.reorder == 0.03);
    assert_int_equal(sc->n_links, 1);
    const bbsim_link_rule *r = &sc->links[0];
    assert_true(r->m.has_latency && r->m.has_loss && !r->m.has_bandwidth);
    assert_int_equal(r->m.latency.kind, BBSIM_DIST_LOGNORMAL);
    assert_true(r->m.latency.a == 40e6 && r->m.latency.b == 0.5);
    assert_true(bbsim_sels_has(&r->to, 1, 4) && bbsim_sels_has(&r->to, 1, 9));
    assert_false(bbsim_sels_has(&r->to, 1, 5) || bbsim_sels_has(&r->to, 0, 0));
    assert_int_equal(sc->n_partitions, 1);
    assert_int_equal(sc->partitions[0].heal, 13000000000ull);
    /* churn and report */
    assert_int_equal(sc->n_churn, 2);
    assert_false(sc->churn[0].is_rate);
    assert_true(sc->churn[0].graceful);
    assert_int_equal(sc->churn[0].restart, 25000000000ull);
    assert_true(sc->churn[1].is_rate && sc->churn[1].rate == 0.1);
    assert_int_equal(sc->churn[1].every, 60000000000ull);
    assert_int_equal(sc->churn[1].until, UINT64_MAX);
    assert_string_equal(sc->round_topic, "round");
    assert_int_equal(sc->bucket, 10000000000ull);
    assert_int_equal(sc->n_metrics, 2);
    assert_int_equal(sc->metrics[0].item, 4);
    assert_int_equal(sc->metrics[1].item, -1);
    assert_true(sc->metrics[0].has_target && sc->metrics[0].target == 0.9);
    assert_false(sc->metrics[1].has_target);
    bbsim_scenario_free(sc);
}

static void test_bbsim_scenario_defaults(void **state)
{
    (void)state;
    bbsim_scenario *sc = parse_ok("{\"artifact\": \"/a.onnx\", \"duration\": \"1s\","
                                  " \"groups\": [{\"name\": \"n\", \"count\": 2,"
                                  " \"targets\": [\"T\"]}]}");
    assert_int_equal(sc->seed, 1);
    assert_int_equal(sc->threads, -1);
    assert_int_equal(sc->work_mode, BBSIM_WORK_FIXED);
    assert_int_equal(sc->work_cost, 10000000ull);
    assert_true(sc->groups[0].bootstrap);
    assert_int_equal(sc->net.latency.kind, BBSIM_DIST_CONSTANT);
    assert_true(sc->net.latency.a == 1e6 && sc->net.bandwidth == 0 && sc->net.loss == 0);
    assert_int_equal(sc->bucket, 20000000ull); /* a 50th of the duration */
    assert_null(sc->until_topic);
    assert_null(sc->round_topic);
    bbsim_scenario_free(sc);
}

static void test_bbsim_units(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bbsim_ns ns;
    } D[] = {{"250ns", 250}, {"3us", 3000}, {"1.5ms", 1500000}, {"2s", 2000000000ull},
             {"1.5m", 90000000000ull}, {"1h", 3600000000000ull}, {"0s", 0}};
    for (size_t i = 0; i < sizeof D / sizeof *D; i++) {
        bbsim_ns v = 1;
        assert_int_equal(bbsim_parse_duration(D[i].text, &v), BB_OK);
        assert_int_equal(v, D[i].ns);
    }
    static const char *const BAD_D[] = {"10", "ms", "-1s", "1 s", "1sec", "1e99h", "9000h", "", NULL};
    for (size_t i = 0; BAD_D[i]; i++) {
        bbsim_ns v;
        assert_int_not_equal(bbsim_parse_duration(BAD_D[i], &v), BB_OK);
    }
    static const struct {
        const char *text;
        double bps;
    } R[] = {{"100Mbit/s", 12.5e6}, {"1Gbit/s", 125e6}, {"8bit/s", 1}, {"12.5MB/s", 12.5e6},
             {"3kB/s", 3000}, {"unlimited", 0}};
    for (size_t i = 0; i < sizeof R / sizeof *R; i++) {
        double v = -1;
        assert_int_equal(bbsim_parse_bandwidth(R[i].text, &v), BB_OK);
        assert_true(v == R[i].bps);
    }
    static const char *const BAD_R[] = {"100", "fast", "100 Mbit/s", "0B/s", "1bit/s", "5TB/s", NULL};
    for (size_t i = 0; BAD_R[i]; i++) {
        double v;
        assert_int_not_equal(bbsim_parse_bandwidth(BAD_R[i], &v), BB_OK);
    }
}

/* The per-node configs: one placeholder is a number, others are text. */
static void test_bbsim_templates(void **state)
{
    (void)state;
    bbsim_scenario *sc = parse_ok(
        "{\"artifact\": \"a\", \"duration\": \"1s\", \"groups\": ["
        " {\"name\": \"s\", \"count\": 1, \"targets\": [\"S\"]},"
        " {\"name\": \"c\", \"count\": 12, \"targets\": [\"C\"], \"components\": {"
        "  \"data\": {\"shard_index\": \"{i}\", \"shard_count\": \"{n}\", \"seed\": \"{i+10}\","
        "            \"path\": \"d/part-{i%5}.csv\", \"nested\": [{\"x\": \"{node*2}\"}, 7, true],"
        "            \"label\": \"{i}/{n}\", \"down\": \"{i-20}\", \"half\": \"{i/2}\"},"
        "  \"model\": {\"epochs\": 3}}}]}");
    char *text = NULL;
    bb_error err = {0};
    assert_int_equal(bbsim_slot_config(sc, 1, 7, "data", &text, &err), BB_OK);
    assert_string_equal(text, "{\"shard_index\":7,\"shard_count\":12,\"seed\":17,"
                              "\"path\":\"d/part-2.csv\",\"nested\":[{\"x\":16},7,true],"
                              "\"label\":\"7/12\",\"down\":-13,\"half\":3}");
    free(text);
    assert_int_equal(bbsim_slot_config(sc, 1, 0, "model", &text, &err), BB_OK);
    assert_string_equal(text, "{\"epochs\":3}");
    free(text);
    assert_int_equal(bbsim_slot_config(sc, 1, 0, "nothing", &text, &err), BB_OK);
    assert_null(text); /* the group configures no such slot */
    assert_int_equal(bbsim_slot_config(sc, 0, 0, "data", &text, &err), BB_OK);
    assert_null(text);
    bbsim_scenario_free(sc);
}

/* Every refusal names the key by its path. */
static void test_bbsim_scenario_refusals(void **state)
{
    (void)state;
    static const char *const G = "{\"name\": \"s\", \"count\": 1, \"targets\": [\"S\"]}";
    static const struct {
        const char *top, *group, *rest, *needle;
    } CASES[] = {
        {"\"durration\": \"1s\"", "", "", "scenario: unknown key 'durration'"},
        {"", "\"conect\": [\"s\"]", "", "groups[1]: unknown key 'conect'"},
        {"", "\"count\": 0", "", "groups[1].count: must be a whole number in [1, 1000000]"},
        {"", "\"count\": 1000001", "", "groups[1].count"},
        {"", "\"count\": 1.5", "", "groups[1].count"},
        {"", "\"targets\": []", "", "groups[1].targets: must be a list of 1"},
        {"", "\"name\": \"s\"", "", "groups[1].name: groups[0] is 's' too"},
        {"", "\"name\": \"9lives\"", "", "groups[1].name: '9lives' is not a name"},
        {"", "\"connect\": [\"nobody\"]", "", "groups[1].connect[0]: no group 'nobody' (groups: s, c)"},
        {"", "\"connect\": [{\"group\": \"s\", \"count\": 2}]", "", "groups[1].connect[0].count: 2 of a group of 1"},
        {"", "\"start\": \"5\"", "", "groups[1].start: must be a duration with its unit"},
        {"", "\"caps\": {\"preset\": \"tiny\"}", "", "groups[1].caps.preset: \"default\" or \"edge\""},
        {"", "\"components\": {\"data\": {\"i\": \"{x}\"}}", "", "groups[1].components.data.i: '{x}' starts with no variable"},
        {"", "\"components\": {\"data\": {\"i\": \"{i/0}\"}}", "", "divides by zero"},
        {"", "\"components\": {\"data\": {\"i\": \"{i\"}}", "", "unclosed"},
        {"", "\"components\": {\"data\": {\"i\": \"{i^2}\"}}", "", "is not <variable> followed by"},
        {"", "\"components\": {\"data\": {\"i\": \"{i*2147483647*2147483647*2147483647}\"}}", "", "overflows"},
        {"", "\"components\": [1]", "", "groups[1].components: must be an object"},
        {"", "", ", \"network\": {\"latency\": \"fast\"}", "network.latency: 'fast' is not a duration"},
        {"", "", ", \"network\": {\"latency\": {\"dist\": \"uniform\", \"min\": \"2ms\"}}", "network.latency: 'max' is required"},
        {"", "", ", \"network\": {\"latency\": {\"dist\": \"normal\", \"mean\": \"2ms\", \"stddev\": \"1ms\", \"max\": \"3ms\"}}", "a normal distribution has no 'max'"},
        {"", "", ", \"network\": {\"latency\": {\"dist\": \"gamma\"}}", "network.latency.dist: 'gamma' is none of"},
        {"", "", ", \"network\": {\"bandwidth\": \"fast\"}", "network.bandwidth: 'fast' is not a rate"},
        {"", "", ", \"network\": {\"loss\": 2}", "network.loss: must be a number in [0, 1]"},
        {"", "", ", \"network\": {\"links\": [{\"from\": \"c[5:2]\", \"to\": \"s\"}]}", "network.links[0].from: 'c[5:2]' selects nothing"},
        {"", "", ", \"network\": {\"links\": [{\"from\": \"c[0:999]\", \"to\": \"s\"}]}", "selects nothing of the 3 nodes of c"},
        {"", "", ", \"network\": {\"links\": [{\"from\": \"c[x]\", \"to\": \"s\"}]}", "'c[x]' is not group"},
        {"", "", ", \"network\": {\"links\": [{\"from\": \"c\", \"too\": \"s\"}]}", "network.links[0]: unknown key 'too'"},
        {"", "", ", \"network\": {\"partitions\": [{\"at\": \"5s\", \"heal\": \"4s\", \"isolate\": \"c\"}]}", "network.partitions[0].heal: must come after 'at'"},
        {"", "", ", \"churn\": [{\"at\": \"5s\"}]", "churn[0]: an object with \"kill\""},
        {"", "", ", \"churn\": [{\"rate\": 0.1, \"of\": \"c\", \"every\": \"0s\"}]", "churn[0].every: at least 1ms"},
        {"", "", ", \"churn\": [{\"at\": \"5s\", \"kill\": \"c[1]\", \"restart\": \"2s\"}]", "churn[0].restart: must come after 'at'"},
        {"", "", ", \"report\": {\"metrics\": [{\"name\": \"a b\", \"topic\": \"r\"}]}", "report.metrics[0].name: 'a b' is not a name"},
        {"", "", ", \"report\": {\"metrics\": [{\"name\": \"a\", \"topic\": \"r\", \"target\": \"high\"}]}", "report.metrics[0].target: must be a number"},
        {"", "", ", \"work\": {\"cost\": \"measured\", \"time\": \"5ms\"}", "work.time: a measured cost takes a scale"},
        {"", "", ", \"until\": {\"topic\": \"round\"}", "until: 'count' is required"},
        {"\"seed\": -1", "", "", "scenario.seed: must be a whole number"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        char text[2048];
        /* the case's group keys come first: cJSON finds the first of a repeated key */
        snprintf(text, sizeof text,
                 "{\"artifact\": \"a\", %s%s\"duration\": \"1s\", \"groups\": [%s, {%s%s"
                 "\"name\": \"c\", \"count\": 3, \"targets\": [\"C\"]}]%s}",
                 CASES[i].top, CASES[i].top[0] ? ", " : "", G, CASES[i].group,
                 CASES[i].group[0] ? ", " : "", CASES[i].rest);
        bbsim_scenario *sc = NULL;
        bb_error err = {0};
        int rc = bbsim_scenario_parse(text, strlen(text), "t.json", ".", &sc, &err);
        if (rc == BB_OK || !strstr(err.msg, CASES[i].needle))
            fail_msg("case %zu (%s): got %s, want '%s'", i, text, rc ? err.msg : "success",
                     CASES[i].needle);
        assert_null(sc);
        assert_int_equal(strncmp(err.msg, "t.json: ", 8), 0);
    }
}

static void test_bbsim_scenario_limits(void **state)
{
    (void)state;
    bb_error err = {0};
    bbsim_scenario *sc = NULL;
    const char *not_json = "{\"artifact\": ";
    assert_int_equal(bbsim_scenario_parse(not_json, strlen(not_json), "t.json", ".", &sc, &err),
                     BB_EPARSE);
    assert_non_null(strstr(err.msg, "not valid JSON"));
    assert_int_equal(bbsim_scenario_parse("{}", BBSIM_MAX_SCENARIO_BYTES + 1, "t.json", ".", &sc,
                                          &err),
                     BB_ELIMIT);
    /* a million nodes each connected to a million: refused before anything is built */
    const char *dense = "{\"artifact\": \"a\", \"duration\": \"1s\", \"groups\": ["
                        "{\"name\": \"a\", \"count\": 500000, \"targets\": [\"T\"],"
                        " \"connect\": [\"b\"]},"
                        "{\"name\": \"b\", \"count\": 500000, \"targets\": [\"T\"]}]}";
    assert_int_equal(bbsim_scenario_parse(dense, strlen(dense), "t.json", ".", &sc, &err),
                     BB_ELIMIT);
    assert_non_null(strstr(err.msg, "connections (at most"));
    assert_int_equal(bbsim_scenario_load("/nonexistent/s.json", &sc, &err), BB_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/s.json"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bbsim_scenario_reads_every_section),
        cmocka_unit_test(test_bbsim_scenario_defaults),
        cmocka_unit_test(test_bbsim_units),
        cmocka_unit_test(test_bbsim_templates),
        cmocka_unit_test(test_bbsim_scenario_refusals),
        cmocka_unit_test(test_bbsim_scenario_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
