/*
 * test_pass_synthesize_wire_recvs.c — net_out / lookup_output recorded with
 * the C recorder (bb/recorder.h): the pass materializes one wire.Recv in the
 * consumer class producing the looked-up value, links the pair by site
 * name, removes the formal, and is a no-op the second time; the storage
 * re-check types the Recv; a full compile partitions it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bb/recorder.h"
#include "bbc_fixture.h"

/* Root "Gossip" calls class A (Params -> net_out "weights" to class B) and
 * class B (lookup_output "weights" -> LoadParameters). */
static bb_model *record(const bb_type_node *lookup_type)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *root = bb_rec_module(r, "Gossip");
    bb_module *a = bb_rec_class_module(r, "A");
    bb_slot *sel = bb_rec_concrete(a, BB_ROLE_PEER_SELECTOR, "sel", "peers::Connected", "{}", NULL);
    bb_slot *ma = bb_rec_concrete(a, BB_ROLE_MODEL, "model", "nn::Mlp", "{}", NULL);
    bb_rec_concrete(a, BB_ROLE_BACKEND, "backend", "cpu::CpuBackend", "{}", NULL);
    bb_rec_concrete(a, BB_ROLE_DATA_SOURCE, "data", "data::Csv", "{}", NULL);
    bb_rec *ga = bb_module_body(a);
    bb_val w = bb_role_model_params(ga, ma);
    bb_val peers = bb_role_peer_selector_sample(ga, sel, 2, "B");
    assert_int_equal(bb_rec_net_out(ga, "weights", peers, w), BB_OK);
    bb_module *b = bb_rec_class_module(r, "B");
    bb_slot *mb = bb_rec_concrete(b, BB_ROLE_MODEL, "model", "nn::Mlp", "{}", NULL);
    bb_rec *gb = bb_module_body(b);
    bb_val got = bb_rec_lookup_output(gb, "weights", lookup_type);
    bb_role_model_load_parameters(gb, mb, got);
    bb_rec *g = bb_module_body(root);
    bb_call_build(bb_rec_call(g, a));
    bb_call_build(bb_rec_call(g, b));
    bb_model *m = NULL;
    bb_error err = {0};
    if (bb_recorder_build(r, root, &m, &err) != BB_OK)
        fail_msg("record: %s", err.msg);
    bb_recorder_free(r);
    return m;
}

typedef struct t {
    bbc_state st;
    bbc_error err;
    bb_type_source ts;
    bb_type_array arr;
} t;

static int prefix(t *x, bb_model *m)
{
    memset(x, 0, sizeof *x);
    fx_types(&x->ts, &x->arr);
    int rc = fx_state(&x->st, m, NULL, &x->ts, NULL, &x->err);
    static const char *const PASSES[] = {"inline_for_partition", "type_solver",
                                         "infer_peer_classes", "synthesize_wire_recvs"};
    for (size_t i = 0; rc == BB_OK && i < 4; i++)
        rc = fx_run(&x->st, PASSES[i]);
    return rc;
}

static void test_materialize(void **state)
{
    (void)state;
    t x;
    assert_int_equal(prefix(&x, record(NULL)), BB_OK);
    const bb_function *f = x.st.root;
    bb_node *r = fx_find(f, "Recv", 0);
    assert_non_null(r);
    assert_null(fx_find(f, "Recv", 1));
    assert_string_equal(bbc_meta(r, BB_META_HOME_CLASS), "B");
    assert_string_equal(bbc_meta(r, BB_META_PORT), "weights");
    assert_string_equal(bbc_meta(r, BB_META_SYNTHESIZED), "true");
    assert_string_equal(bbc_meta(r, BB_META_WIRE_CORRELATION), "none");
    assert_string_equal(r->name, "B/Recv_weights");
    /* The Recv's payload is the looked-up value: consumers unchanged. */
    const bb_node *load = fx_find(f, "LoadParameters", 0);
    assert_string_equal(r->outputs.v[1], load->inputs.v[0]);
    assert_int_equal(bb_str_list_find(&f->inputs, load->inputs.v[0]), -1);
    assert_true(bbc_node_index(f, r) < bbc_node_index(f, load));
    /* Linked both ways by site name. */
    const bb_node *s = fx_find(f, "Send", 0);
    assert_string_equal(bbc_meta(s, BB_META_DEST_SITE), r->name);
    assert_string_equal(bbc_meta(r, BB_META_SRC_SITE), s->name);
    /* The payload type came from the send. */
    assert_ptr_equal(bb_type_from_proto(bb_node_attr(r, "payload_type")->tp), &BB_TYPE_TENSOR_F32);
    assert_ptr_equal(bbc_value_type(f, r->outputs.v[0]), &BB_TYPE_TRIGGER);
    /* A second run changes nothing. */
    size_t n = f->nodes.n;
    assert_int_equal(fx_run(&x.st, "synthesize_wire_recvs"), BB_OK);
    assert_int_equal(f->nodes.n, n);
    bbc_state_free(&x.st);
}

static void test_storage_check_after_synthesis(void **state)
{
    (void)state;
    t x;
    /* The lookup declares u8 but the send carries f32. */
    assert_int_equal(prefix(&x, record(&BB_TYPE_TENSOR_U8)), BB_ECOMPILE);
    /* The first type_solver run already sees the contradiction at LoadParameters
     * (tensor_f32 port) or leaves it to the edge check; either names u8. */
    assert_non_null(strstr(x.err.msg, "tensor_u8"));
    bbc_state_free(&x.st);

    /* Through the runner: the re-check reports the edge. */
    bb_model *m = record(&BB_TYPE_TENSOR_U8);
    /* Remove the consumer's contradiction: feed the lookup to AppEmit. */
    bb_function *b = fx_fn(m, "B");
    bb_node *load = fx_find(b, "LoadParameters", 0);
    load->domain = bb_model_str(m, BB_DOMAIN_SYSCALL);
    load->op_type = bb_model_str(m, "AppEmit");
    load->outputs.n = 0;
    bb_node_set_attr_string(m->arena, load, "name", "w");
    bb_kv_remove(&load->metadata, BB_META_SLOT);
    bb_kv_remove(&load->metadata, BB_META_CONCRETE_TYPE);
    bb_kv_remove(&load->metadata, BB_META_INSTANCE);
    bb_opset_list_add(m->arena, &m->opset_imports, BB_DOMAIN_SYSCALL, 1);
    memset(&x, 0, sizeof x);
    fx_types(&x.ts, &x.arr);
    bb_model *out = NULL;
    int rc = bbc_compile(m, NULL, NULL, &x.ts, NULL, 0, &out, &x.err);
    if (rc != BB_ECOMPILE)
        fail_msg("rc %d: %s: %s: %s", rc, x.err.pass, bbc_errkind_name(x.err.kind), x.err.msg);
    assert_int_equal(x.err.kind, BBC_E_INCOMPATIBLE_STORAGE_ON_EDGE);
    assert_string_equal(x.err.pass, "type_solver");
    assert_non_null(strstr(x.err.msg, "port 'weights'"));
    assert_non_null(strstr(x.err.msg, "tensor_f32"));
    assert_non_null(strstr(x.err.msg, "tensor_u8"));
    bb_model_free(m);
}

static void test_full_compile(void **state)
{
    (void)state;
    bb_model *m = record(NULL);
    bb_type_source ts;
    bb_type_array arr;
    fx_types(&ts, &arr);
    bb_model *out = NULL;
    bbc_error err;
    if (bbc_compile(m, NULL, NULL, &ts, NULL, 0, &out, &err) != BB_OK)
        fail_msg("%s: %s: %s", err.pass, bbc_errkind_name(err.kind), err.msg);
    const bb_function *a = fx_fn(out, "A"), *b = fx_fn(out, "B");
    assert_non_null(a);
    assert_non_null(b);
    const bb_node *r = fx_find(b, "Recv", 0);
    assert_non_null(r);
    assert_null(fx_find(a, "Recv", 0));
    assert_string_equal(bbc_meta(fx_find(a, "Send", 0), BB_META_DEST_SITE), r->name);
    /* The net_in formal is gone from the consumer partition. */
    assert_int_equal(b->inputs.n, 0);
    assert_string_equal(bbc_meta(r, BB_META_RECV_SLOT_ID),
                        bbc_meta(fx_find(b, "LoadParameters", 0), BB_META_SLOT_ID));
    bb_model_free(out);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_materialize),
        cmocka_unit_test(test_storage_check_after_synthesis),
        cmocka_unit_test(test_full_compile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
