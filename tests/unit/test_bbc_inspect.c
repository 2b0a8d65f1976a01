/*
 * test_bbc_inspect.c — `bbc targets` and `bbc dot` (the artifact view under
 * them is tested in test_artifact.c) over the two example programs
 * (bbc_programs.h), compiled in-process with the fixture component types:
 * the federated one lists Client and Server with their entry functions,
 * bindings and the two wire edges; the
 * dot output has one cluster per target, every gate drawn, the wire edges
 * between the clusters; a recorded (uncompiled) model and bad usage fail
 * with exit 1 / 2.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "bbc/bbc.h"
#include "bbc_fixture.h"
#include "bbc_programs.h"

static char dir[64];
static char fed[128], split[128], recorded[128];
static char out[1 << 16], err[4096];

/* Compile a fixture program (bbc_programs.h) with the fixture types into path. */
static void compile_example(const char *in, const char *bind, const char *path)
{
    bb_model *m = NULL, *c = NULL;
    bb_error e = {0};
    if (!(m = fx_program(in, &e)))
        fail_msg("%s: %s", in, e.msg);
    bbc_bindings b;
    assert_int_equal(bbc_bindings_init(&b), BB_OK);
    if (bind)
        assert_int_equal(bbc_bindings_add_arg(&b, bind, &e), BB_OK);
    bb_type_array arr;
    bb_type_source ts;
    fx_types(&ts, &arr);
    bbc_error ce;
    if (bbc_compile(m, NULL, &b, &ts, NULL, 0, &c, &ce) != BB_OK)
        fail_msg("compile %s: %s: %s", in, ce.pass, ce.msg);
    assert_int_equal(bb_model_save_file(c, path, &e), BB_OK);
    bb_model_free(c);
    bb_model_free(m);
    bbc_bindings_free(&b);
}

static int setup(void **state)
{
    (void)state;
    if (fx_mkdtemp(dir, sizeof dir, "bbc_inspect") != 0)
        return -1;
    snprintf(fed, sizeof fed, "%s/federated.onnx", dir);
    snprintf(split, sizeof split, "%s/split_learning.onnx", dir);
    compile_example("federated", NULL, fed);
    compile_example("split_learning", "backend=cpu::CpuBackend", split);
    /* The recorded (uncompiled) form, for the refusals. */
    bb_error e = {0};
    bb_model *m = fx_federated(&e);
    snprintf(recorded, sizeof recorded, "%s/recorded.onnx", dir);
    if (!m || bb_model_save_file(m, recorded, &e) != BB_OK)
        return -1;
    bb_model_free(m);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return fx_rmtree(dir);
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void assert_has(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("output lacks '%s':\n%s", needle, hay);
}

/* ---- bbc targets ------------------------------------------------------------------- */

static void test_targets_federated(void **state)
{
    (void)state;
    int rc = fx_run_cli(bbc_cmd_targets, FX_ARGV("targets", fed), out, sizeof out, err, sizeof err);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, err);
    assert_string_equal(err, "");
    assert_has(out, "program: Federated\ntargets: 2\n");
    assert_has(out, "\nServer\n  entry      user.app::Server (18 nodes)\n");
    assert_has(out, "\nClient\n  entry      user.app::Client (11 nodes)\n");
    assert_has(out, "  bootstrap  user.app::Server__bootstrap (2 nodes)\n");
    assert_has(out, "  bindings   aggregator = Aggregator|agg::FedAvg|2\n");
    assert_has(out, "             selector = PeerSelector|peers::Connected|3\n");
    assert_has(out, "wire edges: 2\n");
    assert_has(out, "  Server SendReqBatched \"Server/SendReqBatched_0\" -> Client RecvReq "
                    "\"Client/RecvReq_0\"  port params  data\n");
    assert_has(out, "  Client SendResp \"Client/SendResp_0\" -> Server RecvRespBatched "
                    "\"Server/RecvRespBatched_0\"  data\n");
    /* The client binds neither the aggregator nor the selector. */
    const char *client = strstr(out, "\nClient\n");
    assert_null(strstr(client, "aggregator ="));

    rc = fx_run_cli(bbc_cmd_targets, FX_ARGV("targets", "--names", fed), out, sizeof out, err,
                    sizeof err);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "Server\nClient\n");
}

static void test_targets_json(void **state)
{
    (void)state;
    int rc = fx_run_cli(bbc_cmd_targets, FX_ARGV("targets", "--json", fed), out, sizeof out, err,
                        sizeof err);
    assert_int_equal(rc, 0);
    cJSON *j = cJSON_Parse(out);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "program")->valuestring, "Federated");
    cJSON *ts = cJSON_GetObjectItem(j, "targets");
    assert_int_equal(cJSON_GetArraySize(ts), 2);
    cJSON *srv = cJSON_GetArrayItem(ts, 0);
    assert_string_equal(cJSON_GetObjectItem(srv, "name")->valuestring, "Server");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(srv, "bootstrap"), "name")->valuestring,
        "Server__bootstrap");
    cJSON *b0 = cJSON_GetArrayItem(cJSON_GetObjectItem(srv, "bindings"), 0);
    assert_string_equal(cJSON_GetObjectItem(b0, "slot")->valuestring, "aggregator");
    assert_string_equal(cJSON_GetObjectItem(b0, "type_name")->valuestring, "agg::FedAvg");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(ts, 1), "bootstrap")));
    cJSON *es = cJSON_GetObjectItem(j, "wire_edges");
    assert_int_equal(cJSON_GetArraySize(es), 2);
    cJSON *e0 = cJSON_GetArrayItem(es, 0);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(e0, "recv"), "target")->valuestring, "Client");
    assert_string_equal(cJSON_GetObjectItem(e0, "port")->valuestring, "params");
    cJSON_Delete(j);
}

/* Split learning: one @self target; its wire ops talk to peers outside. */
static void test_targets_split_learning(void **state)
{
    (void)state;
    int rc = fx_run_cli(bbc_cmd_targets, FX_ARGV("targets", split), out, sizeof out, err,
                        sizeof err);
    assert_int_equal(rc, 0);
    assert_has(out, "targets: 1\n@self\n");
    assert_has(out, "             network_client = Protocol|framework_wire::BarrierNetworkReqResp|2\n");
    assert_has(out, "  @self SendReqBatched \"SendReqBatched_0\" -> (outside this program)  data\n");
    assert_has(out, "  (outside this program) -> @self Recv \"Recv_0\"  data\n");
}

static void test_targets_errors(void **state)
{
    (void)state;
    assert_int_equal(fx_run_cli(bbc_cmd_targets, FX_ARGV("targets", recorded), out, sizeof out,
                                err, sizeof err),
                     1);
    assert_has(err, "recorded.onnx: not a compiled model");
    assert_string_equal(out, "");
    assert_int_equal(fx_run_cli(bbc_cmd_targets, FX_ARGV("targets", "/nonexistent.onnx"), out,
                                sizeof out, err, sizeof err),
                     1);
    assert_has(err, "/nonexistent.onnx");
    assert_int_equal(fx_run_cli(bbc_cmd_targets, FX_ARGV("targets"), out, sizeof out, err,
                                sizeof err),
                     2);
    assert_has(err, "usage: bbc targets");
    assert_int_equal(fx_run_cli(bbc_cmd_targets, FX_ARGV("targets", "--names", "--json", fed),
                                out, sizeof out, err, sizeof err),
                     2);
    assert_int_equal(fx_run_cli(bbc_cmd_targets, FX_ARGV("targets", "--frob", fed), out,
                                sizeof out, err, sizeof err),
                     2);
    assert_has(err, "unknown option '--frob'");
    assert_int_equal(fx_run_cli(bbc_cmd_targets, FX_ARGV("targets", fed, fed), out, sizeof out,
                                err, sizeof err),
                     2);
    assert_int_equal(fx_run_cli(bbc_cmd_targets, FX_ARGV("targets", "--help"), out, sizeof out,
                                err, sizeof err),
                     0);
    assert_has(out, "usage: bbc targets");
}

/* ---- bbc dot ----------------------------------------------------------------------- */

static void test_dot_federated(void **state)
{
    (void)state;
    int rc = fx_run_cli(bbc_cmd_dot, FX_ARGV("dot", fed), out, sizeof out, err, sizeof err);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, err);
    assert_has(out, "digraph \"Federated\" {\n");
    assert_int_equal(out[strlen(out) - 2], '}');
    assert_int_equal(count(out, "{"), count(out, "}"));
    /* One cluster per target, the bootstrap nested in the server's. */
    assert_has(out, "subgraph \"cluster_t0\" {\n    label=\"Server\\nServer#");
    assert_has(out, "subgraph \"cluster_t1\" {\n    label=\"Client\\nClient#");
    assert_has(out, "subgraph \"cluster_t0_f1\" {\n    label=\"bootstrap: Server__bootstrap\"");
    assert_int_equal(count(out, "subgraph \"cluster_"), 3);
    /* Every gate visible: 3 RX gates on the client, 2 TX gates per send. */
    assert_int_equal(count(out, "[label=\"DedupGateRx\\n"), 1);
    assert_int_equal(count(out, "[label=\"PeerHealthGateRx\\n"), 1);
    assert_int_equal(count(out, "[label=\"BackoffGateRx\\n"), 1);
    assert_int_equal(count(out, "[label=\"PeerHealthGateTx\\n"), 2);
    assert_int_equal(count(out, "[label=\"BackoffGateTx\\n"), 2);
    assert_int_equal(count(out, "shape=octagon"), 7);
    assert_int_equal(count(out, "shape=hexagon"), 3); /* DeadlineChecks */
    /* The chain Recv -> Dedup -> PeerHealth -> Backoff inside the client. */
    assert_has(out, "\"t1_f0_n0\" [label=\"RecvReq\\nClient/RecvReq_0\"");
    assert_has(out, "\"t1_f0_n1\" [label=\"DedupGateRx\\nClient/RecvReq_0#DedupGateRx\"");
    assert_has(out, "  \"t1_f0_n0\" -> \"t1_f0_n1\"");
    assert_has(out, "  \"t1_f0_n1\" -> \"t1_f0_n2\"");
    assert_has(out, "  \"t1_f0_n2\" -> \"t1_f0_n3\"");
    /* Wire edges between the clusters: server send -> client recv and back. */
    assert_has(out, "  \"t0_f0_n8\" -> \"t1_f0_n0\" [style=bold");
    assert_has(out, "  \"t1_f0_n10\" -> \"t0_f0_n10\" [style=bold");
    assert_int_equal(count(out, "[style=bold"), 2);
    assert_has(out, "label=\"params (data)\"");
    assert_has(out, "label=\"response (data)\"");
}

static void test_dot_split_and_errors(void **state)
{
    (void)state;
    assert_int_equal(fx_run_cli(bbc_cmd_dot, FX_ARGV("dot", split), out, sizeof out, err,
                                sizeof err),
                     0);
    assert_has(out, "digraph \"SplitLearning\" {\n");
    assert_int_equal(count(out, "subgraph \"cluster_"), 1);
    /* Three one-sided edges, each to or from an outside node. */
    assert_int_equal(count(out, "[style=bold"), 3);
    assert_int_equal(count(out, "label=\"(outside this program)\""), 3);
    assert_int_equal(fx_run_cli(bbc_cmd_dot, FX_ARGV("dot", recorded), out, sizeof out, err,
                                sizeof err),
                     1);
    assert_has(err, "not a compiled model");
    assert_int_equal(fx_run_cli(bbc_cmd_dot, FX_ARGV("dot"), out, sizeof out, err, sizeof err), 2);
    assert_int_equal(fx_run_cli(bbc_cmd_dot, FX_ARGV("dot", "--json", split), out, sizeof out,
                                err, sizeof err),
                     2);
}

/* Names that need DOT escaping stay inside their quotes. */
static void test_dot_escaping(void **state)
{
    (void)state;
    bb_function *root;
    bb_model *m = fx_model(&root);
    bb_kv_set(m->arena, &m->metadata, BB_META_COMPILED, BB_COMPILED_PASSPORT);
    m->graph->name = bb_model_str(m, "we\"ird\\name");
    fx_node(m, root, "a\"b", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("t"));
    char path[128];
    snprintf(path, sizeof path, "%s/weird.onnx", dir);
    bb_error e = {0};
    assert_int_equal(bb_model_save_file(m, path, &e), BB_OK);
    bb_model_free(m);
    assert_int_equal(fx_run_cli(bbc_cmd_dot, FX_ARGV("dot", path), out, sizeof out, err,
                                sizeof err),
                     0);
    assert_has(out, "digraph \"we\\\"ird\\\\name\" {");
    assert_has(out, "[label=\"Pulse\\na\\\"b\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_targets_federated),
        cmocka_unit_test(test_targets_json),
        cmocka_unit_test(test_targets_split_learning),
        cmocka_unit_test(test_targets_errors),
        cmocka_unit_test(test_dot_federated),
        cmocka_unit_test(test_dot_split_and_errors),
        cmocka_unit_test(test_dot_escaping),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
