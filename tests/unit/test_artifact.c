/*
 * test_artifact.c — bb/artifact.h, the one view of a compiled artifact:
 * the federated program compiled in-process with the fixture types gives
 * Server and Client with bootstraps, parsed bindings and the two wire
 * edges; an unstamped model falls back to its uncalled non-bootstraps; a
 * host finds a target by name or by "<name>#<hash>"; and malformed
 * artifacts are refused (or, for a binding, kept with its error) with
 * messages naming what is wrong.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "bb/artifact.h"
#include "bbc_fixture.h"
#include "bbc_programs.h"

static void assert_has(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("'%s' lacks '%s'", hay, needle);
}

/* A compiled-looking model: the passport and functions named names[]
 * (domain user.app), each stamped as a partition when stamp is set. */
static bb_model *stamped_model(const char *const *names, size_t n, bool stamp)
{
    bb_model *m = bb_model_new();
    assert_int_equal(bb_artifact_stamp_passport(m), BB_OK);
    for (size_t i = 0; i < n; i++) {
        bb_function *f = bb_model_add_function(m, "user.app", names[i]);
        if (stamp && !strstr(names[i], BB_BOOTSTRAP_SUFFIX))
            assert_int_equal(bb_kv_set(m->arena, &f->metadata, BB_META_PARTITION_ID, "x#0"),
                             BB_OK);
    }
    return m;
}

static void bind(bb_model *m, const char *target, const char *slot, const char *value)
{
    char *key = bb_meta_binding_key(m->arena, target, slot);
    assert_non_null(key);
    assert_int_equal(bb_kv_set(m->arena, &m->metadata, key, value), BB_OK);
}

/* ---- a compiled program ------------------------------------------------------------- */

static void test_compiled_federated(void **state)
{
    (void)state;
    bb_error e = {0};
    fx_compiled c;
    assert_int_equal(fx_compiled_init(&c, fx_program("federated", &e), NULL), BB_OK);
    if (fx_compiled_run(&c) != BB_OK)
        fail_msg("compile: %s: %s", c.err.pass, c.err.msg);
    assert_true(bb_artifact_is_compiled(c.out));
    bb_arena *a = bb_arena_create();
    bb_artifact v;
    assert_int_equal(bb_artifact_read(c.out, "fed.onnx", a, &v, &e), BB_OK);
    assert_string_equal(v.name, "Federated");
    assert_int_equal(v.n_targets, 2);
    const bb_artifact_target *server = &v.targets[0], *client = &v.targets[1];
    assert_string_equal(server->name, "Server");
    assert_string_equal(client->name, "Client");
    assert_ptr_equal(c.out->functions.v[server->fn_index], server->fn);
    assert_true(bb_artifact_is_partition(server->fn));
    assert_non_null(server->bootstrap);
    assert_string_equal(server->bootstrap->name, "Server__bootstrap");
    assert_ptr_equal(c.out->functions.v[server->bootstrap_index], server->bootstrap);
    assert_true(bb_artifact_is_bootstrap(server->bootstrap));
    assert_false(bb_artifact_is_partition(server->bootstrap));
    assert_null(client->bootstrap);
    assert_int_equal(client->bootstrap_index, SIZE_MAX);
    assert_has(server->partition_id, "Server#");
    assert_int_equal(server->n_bindings, 5);
    assert_int_equal(client->n_bindings, 3);
    const bb_artifact_binding *agg = NULL;
    for (size_t i = 0; i < server->n_bindings; i++)
        if (strcmp(server->bindings[i].slot, "aggregator") == 0)
            agg = &server->bindings[i];
    assert_non_null(agg);
    assert_null(agg->error);
    assert_string_equal(agg->key, BB_META_BINDING_PREFIX "Server.aggregator");
    assert_string_equal(agg->parsed.role, "Aggregator");
    assert_string_equal(agg->parsed.type_name, "agg::FedAvg");
    assert_int_equal(agg->parsed.slot_id, 2);
    assert_string_equal(agg->triple, "Aggregator|agg::FedAvg|2");
    /* no edges until asked for */
    assert_int_equal(v.n_edges, 0);
    assert_int_equal(bb_artifact_read_links(&v, a, &e), BB_OK);
    /* Request Server -> Client, response Client -> Server. */
    assert_int_equal(v.n_edges, 2);
    assert_int_equal(v.edges[0].send.target, 0);
    assert_int_equal(v.edges[0].recv.target, 1);
    assert_string_equal(v.edges[0].send.node->op_type, "SendReqBatched");
    assert_string_equal(v.edges[0].recv.node->op_type, "RecvReq");
    assert_string_equal(v.edges[0].port, "params");
    assert_string_equal(v.edges[0].transport, "data");
    assert_ptr_equal(v.edges[0].recv.fn->nodes.v[v.edges[0].recv.index], v.edges[0].recv.node);
    assert_string_equal(v.edges[1].send.node->op_type, "SendResp");
    assert_string_equal(v.edges[1].recv.node->op_type, "RecvRespBatched");
    assert_int_equal(v.edges[1].recv.target, 0);
    char names[64];
    assert_string_equal(bb_artifact_target_names(&v, names, sizeof names), "Server, Client");
    bb_arena_destroy(a);
    fx_compiled_free(&c);
}

/* Without partition_id stamps (a stage dropped them), the uncalled
 * non-bootstrap functions are the targets; a called function is not. */
static void test_fallback_targets(void **state)
{
    (void)state;
    bb_function *root;
    bb_model *m = fx_model(&root);
    assert_int_equal(bb_artifact_stamp_passport(m), BB_OK);
    bb_function *sub = bb_model_add_function(m, "user.app", "Sub");
    fx_node(m, sub, "id", BB_DOMAIN_SYSCALL, "PassThrough", FX_L("x"), FX_L("y"));
    bb_str_list_push(m->arena, &sub->inputs, "x");
    bb_str_list_push(m->arena, &sub->outputs, "y");
    fx_node(m, root, "call", "user.app", "Sub", FX_L("a"), FX_L("b"));
    bb_str_list_push(m->arena, &root->inputs, "a");
    bb_function *boot = bb_model_add_function(m, "user.app", "M__bootstrap");
    bb_kv_set(m->arena, &boot->metadata, BB_META_MODULE_PHASE, BB_MODULE_PHASE_BOOTSTRAP);
    bb_arena *a = bb_arena_create();
    bb_artifact v;
    bb_error e = {0};
    assert_int_equal(bb_artifact_read(m, "x", a, &v, &e), BB_OK);
    assert_int_equal(v.n_targets, 1);
    assert_string_equal(v.targets[0].name, "M");
    assert_ptr_equal(v.targets[0].bootstrap, boot);
    assert_int_equal(v.targets[0].n_calls, 0); /* until asked for */
    assert_int_equal(bb_artifact_read_links(&v, a, &e), BB_OK);
    assert_int_equal(v.targets[0].n_calls, 1);
    assert_ptr_equal(v.targets[0].calls[0], sub);
    assert_int_equal(v.n_edges, 0);
    bb_arena_destroy(a);
    bb_model_free(m);
}

/* ---- finding a target ------------------------------------------------------------- */

static void test_find_target(void **state)
{
    (void)state;
    const char *names[] = {"Server", "Client#0123456789abcdef", "Client__bootstrap",
                           "Relay#aaaa", "Relay#bbbb"};
    bb_model *m = stamped_model(names, 5, true);
    bind(m, "Client", "model", "Model|nn::Mlp|0");         /* by its class */
    bind(m, "Client#0123456789abcdef", "data", "DataSource|data::Csv|3");
    bind(m, "Clientele", "x", "Model|nn::Mlp|1");          /* another target */
    bb_arena *a = bb_arena_create();
    bb_artifact v;
    bb_error e = {0};
    assert_int_equal(bb_artifact_read(m, "m.onnx", a, &v, &e), BB_OK);
    assert_int_equal(v.n_targets, 4); /* the bootstrap is no target */
    const bb_artifact_target *t = NULL;
    assert_int_equal(bb_artifact_find_target(&v, "Server", &t, &e), BB_OK);
    assert_ptr_equal(t, &v.targets[0]);
    /* "<name>#<hash>": its bootstrap and bindings go by its class too */
    assert_int_equal(bb_artifact_find_target(&v, "Client", &t, &e), BB_OK);
    assert_string_equal(t->name, "Client#0123456789abcdef");
    assert_non_null(t->bootstrap);
    assert_string_equal(t->bootstrap->name, "Client__bootstrap");
    assert_int_equal(t->n_bindings, 2);
    assert_string_equal(t->bindings[0].slot, "model");
    assert_string_equal(t->bindings[1].slot, "data");
    assert_int_equal(bb_artifact_find_target(&v, "Client#0123456789abcdef", &t, &e), BB_OK);
    /* refusals name what is wrong */
    assert_int_equal(bb_artifact_find_target(&v, "Relay", &t, &e), BB_EINVAL);
    assert_null(t);
    assert_has(e.msg, "target 'Relay' is ambiguous: it matches both Relay#aaaa and Relay#bbbb");
    assert_int_equal(bb_artifact_find_target(&v, "Nobody", &t, &e), BB_ENOTFOUND);
    assert_has(e.msg, "no target 'Nobody' (targets: Server, Client#0123456789abcdef, Relay#aaaa, "
                      "Relay#bbbb)");
    assert_int_equal(bb_artifact_find_target(&v, "Serv", &t, &e), BB_ENOTFOUND);
    assert_int_equal(bb_artifact_find_target(&v, "", &t, &e), BB_EINVAL);
    assert_int_equal(bb_artifact_find_target(&v, NULL, &t, &e), BB_EINVAL);
    /* names, cut to the buffer */
    char small[10];
    assert_string_equal(bb_artifact_target_names(&v, small, sizeof small), "Server, C");
    bb_arena_destroy(a);
    bb_model_free(m);
}

/* ---- malformed artifacts ------------------------------------------------------------ */

static void test_refusals(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    bb_artifact v;
    bb_error e = {0};
    /* no passport */
    bb_model *m = bb_model_new();
    assert_non_null(bb_model_add_function(m, "user.app", "Main"));
    assert_false(bb_artifact_is_compiled(m));
    assert_int_equal(bb_artifact_read(m, "rec.onnx", a, &v, &e), BB_EINVAL);
    assert_has(e.msg, "rec.onnx: not a compiled model");
    assert_has(e.msg, BB_META_COMPILED);
    /* a passport of another version */
    assert_int_equal(bb_kv_set(m->arena, &m->metadata, BB_META_COMPILED, "v0"), BB_OK);
    assert_int_equal(bb_artifact_read(m, "old.onnx", a, &v, &e), BB_EINVAL);
    bb_model_free(m);
    /* the passport and nothing to run: only a bootstrap */
    const char *boot[] = {"Main__bootstrap"};
    m = stamped_model(boot, 1, false);
    assert_int_equal(bb_artifact_read(m, "empty.onnx", a, &v, &e), BB_ENOTFOUND);
    assert_has(e.msg, "empty.onnx: the compiled model has no partition function");
    char names[16];
    assert_string_equal(bb_artifact_target_names(&v, names, sizeof names), "none");
    bb_model_free(m);
    bb_arena_destroy(a);
}

/* A binding value that does not parse stays in the view with its error,
 * naming the value and the problem; the others parse. */
static void test_malformed_bindings(void **state)
{
    (void)state;
    const char *names[] = {"Main"};
    bb_model *m = stamped_model(names, 1, true);
    bind(m, "Main", "good", "Backend|cpu::CpuBackend|0");
    bind(m, "Main", "two", "Protocol|test::Echo");
    bind(m, "Main", "id", "Protocol|test::Echo|x7");
    bind(m, "Main", "big", "Protocol|test::Echo|4294967296");
    bind(m, "Main", "four", "Protocol|a|1|2");
    bind(m, "Main", "norole", "|test::Echo|1");
    bind(m, "Main", "none", NULL);
    bb_arena *a = bb_arena_create();
    bb_artifact v;
    bb_error e = {0};
    assert_int_equal(bb_artifact_read(m, "m.onnx", a, &v, &e), BB_OK);
    const bb_artifact_target *t = &v.targets[0];
    assert_int_equal(t->n_bindings, 7);
    assert_null(t->bindings[0].error);
    assert_int_equal(t->bindings[0].parsed.slot_id, 0);
    static const char *const why[] = {NULL, "want <role>|<TYPE_NAME>|<slot_id>",
                                      "slot_id is not a decimal number",
                                      "slot_id exceeds 4294967295", "more than three fields",
                                      "empty role", "missing"};
    for (size_t i = 1; i < 7; i++) {
        assert_non_null(t->bindings[i].error);
        assert_has(t->bindings[i].error, why[i]);
        assert_null(t->bindings[i].parsed.role);
    }
    assert_has(t->bindings[2].error, "Protocol|test::Echo|x7");
    assert_string_equal(t->bindings[6].triple, "");
    bb_arena_destroy(a);
    bb_model_free(m);
}

/* The model is untrusted: a call cycle and a chain deeper than the bound
 * end; wire stamps naming nothing make one-sided edges. */
static void test_untrusted_shapes(void **state)
{
    (void)state;
    bb_function *root;
    bb_model *m = fx_model(&root);
    assert_int_equal(bb_artifact_stamp_passport(m), BB_OK);
    assert_int_equal(bb_kv_set(m->arena, &root->metadata, BB_META_PARTITION_ID, "M#0"), BB_OK);
    /* F0 -> F1 -> ... -> F99 -> F0 */
    char name[16];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "F%d", i);
        bb_function *f = bb_model_add_function(m, "user.app", name);
        snprintf(name, sizeof name, "F%d", (i + 1) % 100);
        fx_node(m, f, NULL, "user.app", name, FX_NOL, FX_NOL);
    }
    fx_node(m, root, "call", "user.app", "F0", FX_NOL, FX_NOL);
    bb_node *send = fx_node(m, root, "send", BB_DOMAIN_WIRE, BB_OP_WIRE_SEND, FX_L("x", "p"),
                            FX_L("t"));
    fx_meta(m, send, BB_META_DEST_SITE, "nowhere");
    fx_meta(m, send, BB_META_PORT, "p1");
    bb_node *recv = fx_node(m, root, "recv", BB_DOMAIN_WIRE, BB_OP_WIRE_RECV, FX_NOL,
                            FX_L("t2", "v"));
    fx_meta(m, recv, BB_META_SRC_SITE, "recv"); /* names a receive, not a send */
    bb_arena *a = bb_arena_create();
    bb_artifact v;
    bb_error e = {0};
    assert_int_equal(bb_artifact_read(m, "m.onnx", a, &v, &e), BB_OK);
    assert_int_equal(v.n_targets, 1);
    assert_int_equal(bb_artifact_read_links(&v, a, &e), BB_OK);
    assert_int_equal(v.targets[0].n_calls, BB_ARTIFACT_MAX_CALL_DEPTH + 1);
    assert_int_equal(v.n_edges, 2);
    assert_ptr_equal(v.edges[0].send.node, send);
    assert_null(v.edges[0].recv.node);
    assert_int_equal(v.edges[0].recv.target, SIZE_MAX);
    assert_string_equal(v.edges[0].port, "p1");
    assert_ptr_equal(v.edges[1].recv.node, recv);
    assert_null(v.edges[1].send.node);
    assert_null(v.edges[1].port);
    bb_arena_destroy(a);
    bb_model_free(m);
}

/* Many targets: each binding key goes to the one target it names (T1's
 * is not T10's), read in one pass; call walks that together would look at
 * more than BB_ARTIFACT_MAX_WALK nodes are refused. */
static void test_many_targets(void **state)
{
    (void)state;
    enum { N = 20000 };
    bb_model *m = bb_model_new();
    assert_int_equal(bb_artifact_stamp_passport(m), BB_OK);
    char name[32], slot[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "T%d", i);
        assert_non_null(bb_model_add_function(m, "user.app", name));
        snprintf(slot, sizeof slot, "s%d", i);
        bb_kv *kv = BB_VEC_PUSH(m->arena, &m->metadata); /* bb_kv_set would scan */
        assert_non_null(kv);
        kv->key = bb_meta_binding_key(m->arena, name, slot);
        kv->value = "Model|nn::Mlp|1";
    }
    bb_arena *a = bb_arena_create();
    bb_artifact v;
    bb_error e = {0};
    assert_int_equal(bb_artifact_read(m, "many.onnx", a, &v, &e), BB_OK);
    assert_int_equal(v.n_targets, N);
    for (int i = 0; i < N; i++) {
        snprintf(slot, sizeof slot, "s%d", i);
        assert_int_equal(v.targets[i].n_bindings, 1);
        assert_string_equal(v.targets[i].bindings[0].slot, slot);
    }
    bb_arena_destroy(a);
    bb_model_free(m);

    /* 300 targets calling one function of 60000 nodes: 1.8e7 > 2^24 */
    m = bb_model_new();
    assert_int_equal(bb_artifact_stamp_passport(m), BB_OK);
    bb_function *big = bb_model_add_function(m, "user.app", "Big");
    for (int i = 0; i < 60000; i++)
        bb_function_add_node(m, big, BB_DOMAIN_SYSCALL, "PassThrough");
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "T%d", i);
        bb_function *t = bb_model_add_function(m, "user.app", name);
        assert_int_equal(bb_kv_set(m->arena, &t->metadata, BB_META_PARTITION_ID, "x#0"), BB_OK);
        bb_function_add_node(m, t, "user.app", "Big");
    }
    a = bb_arena_create();
    assert_int_equal(bb_artifact_read(m, "big.onnx", a, &v, &e), BB_OK);
    assert_int_equal(v.n_targets, 300);
    assert_int_equal(bb_artifact_read_links(&v, a, &e), BB_ELIMIT);
    assert_has(e.msg, "call graphs are larger than");
    bb_arena_destroy(a);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compiled_federated), cmocka_unit_test(test_fallback_targets),
        cmocka_unit_test(test_find_target),        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_malformed_bindings), cmocka_unit_test(test_untrusted_shapes),
        cmocka_unit_test(test_many_targets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
