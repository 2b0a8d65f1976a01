/* Unit tests for the recorder (bb/recorder.h): the recorded ModelProto's
 * shape, every recording error, and the golden dump of the SplitLearning
 * example (testdata/split_learning.onnx vs testdata/split_learning.dump;
 * regenerate it with `build/bin/bbc dump testdata/split_learning.onnx`
 * when the example changes on purpose). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <limits.h>
#include <cmocka.h>

#include "bb/meta.h"
#include "bb/model_io.h"
#include "bb/opsets.h"
#include "bb/recorder.h"

/* ---- helpers ------------------------------------------------------------------ */

static bb_model *build_ok(bb_recorder *r, bb_module *root)
{
    bb_model *m = NULL;
    bb_error err = {0};
    int rc = bb_recorder_build(r, root, &m, &err);
    if (rc != BB_OK)
        fail_msg("build failed: %s", err.msg);
    assert_non_null(m);
    return m;
}

static const bb_function *fn(const bb_model *m, const char *name)
{
    for (size_t i = 0; i < m->functions.n; i++)
        if (strcmp(m->functions.v[i]->name, name) == 0)
            return m->functions.v[i];
    fail_msg("no function '%s'", name);
    return NULL;
}

static const char *meta(const bb_node *n, const char *key)
{
    return bb_kv_get(&n->metadata, key);
}

static const char *fmeta(const bb_function *f, const char *key)
{
    return bb_kv_get(&f->metadata, key);
}

static void assert_meta(const bb_node *n, const char *key, const char *want)
{
    const char *got = meta(n, key);
    if (!want) {
        if (got)
            fail_msg("node %s: unexpected %s = '%s'", n->op_type, key, got);
        return;
    }
    if (!got || strcmp(got, want) != 0)
        fail_msg("node %s: %s = '%s', want '%s'", n->op_type, key, got ? got : "(absent)",
                 want);
}

/* The first node of f with op_type op. */
static const bb_node *node_of(const bb_function *f, const char *op)
{
    for (size_t i = 0; i < f->nodes.n; i++)
        if (strcmp(f->nodes.v[i]->op_type, op) == 0)
            return f->nodes.v[i];
    fail_msg("function %s has no %s node", f->name, op);
    return NULL;
}

static char *dump_text(const bb_model *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    bb_model_dump(m, f);
    fclose(f);
    return buf;
}

static bool contains(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

/* ---- round trip ------------------------------------------------------------------ */

static void test_minimal_round_trip(void **state)
{
    (void)state;
    bb_recorder *r = bb_recorder_new(NULL);
    assert_non_null(r);
    bb_module *m = bb_rec_module(r, "Mini");
    bb_slot *be = bb_rec_generic(m, BB_ROLE_BACKEND, "backend");
    bb_rec *g = bb_module_body(m);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    assert_string_equal(x.name, "x");
    bb_val y = bb_onnx_relu(g, be, x);
    assert_true(bb_val_ok(y));
    assert_ptr_equal(y.type, &BB_TYPE_TENSOR_F32);
    assert_int_equal(bb_rec_output(g, "y", y), BB_OK);
    bb_model *model = build_ok(r, m);
    bb_recorder_free(r);

    assert_int_equal(model->ir_version, BB_FRAMEWORK_IR_VERSION);
    assert_string_equal(model->producer_name, "bytesandbrains");
    assert_string_equal(model->domain, "user.app");
    uint8_t *b1 = NULL, *b2 = NULL;
    size_t l1 = 0, l2 = 0;
    bb_error err = {0};
    assert_int_equal(bb_model_save_mem(model, &b1, &l1, &err), BB_OK);
    bb_model *back = NULL;
    assert_int_equal(bb_model_load_mem(b1, l1, "mini", &back, &err), BB_OK);
    assert_int_equal(bb_model_save_mem(back, &b2, &l2, &err), BB_OK);
    assert_int_equal(l1, l2);
    assert_memory_equal(b1, b2, l1);
    char *d1 = dump_text(model), *d2 = dump_text(back);
    assert_string_equal(d1, d2);

    const bb_function *f = fn(back, "Mini");
    assert_string_equal(f->domain, "user.app");
    assert_int_equal(f->inputs.n, 1);
    assert_string_equal(f->inputs.v[0], "x");
    assert_int_equal(f->outputs.n, 1);
    assert_string_equal(f->outputs.v[0], "y");
    assert_int_equal(f->nodes.n, 1);
    const bb_node *relu = f->nodes.v[0];
    assert_string_equal(relu->op_type, "Relu");
    assert_string_equal(relu->domain, "ai.onnx");
    assert_string_equal(relu->inputs.v[0], "x");
    assert_string_equal(relu->outputs.v[0], "y"); /* the port renamed the site */
    assert_meta(relu, BB_META_REQUIRED_TRAIT, "Backend");
    assert_meta(relu, BB_META_SLOT_ID, "0");
    assert_meta(relu, BB_META_SLOT, "backend");
    const bb_value_info *vy = bb_value_info_find(&f->value_info, "y");
    assert_non_null(vy);
    assert_string_equal(vy->type->denotation, BB_TYPE_TENSOR_F32.denotation);
    /* the top-level graph calls the root with its formals */
    assert_non_null(back->graph);
    assert_string_equal(back->graph->name, "Mini");
    assert_int_equal(back->graph->nodes.n, 1);
    const bb_node *call = back->graph->nodes.v[0];
    assert_string_equal(call->op_type, "Mini");
    assert_string_equal(call->domain, "user.app");
    assert_string_equal(call->inputs.v[0], "x");
    assert_string_equal(call->outputs.v[0], "y");
    assert_meta(call, BB_META_MODULE_INSTANCE, "Mini#0");
    assert_int_equal(back->graph->inputs.n, 1);
    assert_string_equal(back->graph->inputs.v[0]->name, "x");
    assert_int_equal(back->graph->outputs.n, 1);

    free(d1);
    free(d2);
    free(b1);
    free(b2);
    bb_model_free(back);
    bb_model_free(model);
}

/* ---- recording errors ------------------------------------------------------------- */

typedef bb_module *(*scenario_fn)(bb_recorder *r);

static bb_module *e_empty_bundle(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_val v = bb_rec_bundle(bb_module_body(m), NULL, 0);
    assert_false(bb_val_ok(v));
    return m;
}

static bb_module *e_empty_unbundle(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_rec *g = bb_module_body(m);
    bb_val c = bb_rec_input(g, "c", &BB_TYPE_COMPOSITE);
    bb_val out[1];
    assert_int_not_equal(bb_rec_unbundle(g, c, NULL, 0, out), BB_OK);
    return m;
}

static bb_module *e_unbundle_not_composite(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_rec *g = bb_module_body(m);
    bb_val c = bb_rec_input(g, "c", &BB_TYPE_TENSOR_F32);
    const bb_type_node *types[] = {&BB_TYPE_U64};
    bb_val out[1];
    bb_rec_unbundle(g, c, types, 1, out);
    return m;
}

static bb_module *e_unknown_op(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_val out;
    const bb_type_node *t[] = {&BB_TYPE_TRIGGER};
    assert_int_equal(bb_rec_op(bb_module_body(m), NULL, BB_DOMAIN_SYSCALL, "Frobnicate", NULL,
                               0, NULL, 0, t, &out, 1),
                     BB_ERECORD);
    return m;
}

static bb_module *e_compiler_inserted(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_rec *g = bb_module_body(m);
    bb_val v = bb_rec_input(g, "v", NULL), out;
    bb_rec_op(g, NULL, BB_DOMAIN_SYSCALL, BB_OP_GATE_DISPATCH, &v, 1, NULL, 0, NULL, &out, 1);
    return m;
}

static bb_module *e_foreign_value(bb_recorder *r)
{
    bb_module *a = bb_rec_module(r, "ModA");
    bb_module *b = bb_rec_module(r, "ModB");
    bb_val v = bb_rec_input(bb_module_body(a), "x", NULL);
    bb_val p = bb_sys_pass_through(bb_module_body(b), v);
    assert_false(bb_val_ok(p));
    return a;
}

/* A value of a module of ANOTHER recorder (still alive when it is used). */
static bb_module *e_other_recorder_value(bb_recorder *r)
{
    bb_recorder *other = bb_recorder_new("other.app");
    assert_non_null(other);
    bb_val v = bb_rec_input(bb_module_body(bb_rec_module(other, "Elsewhere")), "x", NULL);
    bb_module *m = bb_rec_module(r, "M");
    assert_false(bb_val_ok(bb_sys_pass_through(bb_module_body(m), v)));
    bb_recorder_free(other);
    return m;
}

static bb_module *e_bootstrap_value_in_body(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_val v = bb_rec_input(bb_module_bootstrap(m), "seed", NULL);
    bb_sys_record(bb_module_body(m), v, "seed");
    return m;
}

static bb_module *e_wrong_role(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_slot *agg = bb_rec_generic(m, BB_ROLE_AGGREGATOR, "agg");
    bb_rec *g = bb_module_body(m);
    bb_val x = bb_rec_input(g, "x", NULL);
    assert_false(bb_val_ok(bb_role_model_forward(g, agg, x)));
    return m;
}

static bb_module *e_null_input(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_slot *model = bb_rec_generic(m, BB_ROLE_MODEL, "model");
    bb_role_model_forward(bb_module_body(m), model, BB_VAL_NONE);
    return m;
}

static bb_module *e_null_slot(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_rec *g = bb_module_body(m);
    bb_role_model_forward(g, NULL, bb_rec_input(g, "x", NULL));
    return m;
}

static bb_module *e_foreign_slot(bb_recorder *r)
{
    bb_module *a = bb_rec_module(r, "ModA");
    bb_module *b = bb_rec_module(r, "ModB");
    bb_slot *model = bb_rec_generic(b, BB_ROLE_MODEL, "model");
    bb_role_model_params(bb_module_body(a), model);
    return a;
}

static bb_module *e_bad_json(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    assert_null(bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Mlp", "{not json", NULL));
    return m;
}

static bb_module *e_duplicate_slot(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_rec_generic(m, BB_ROLE_MODEL, "model");
    assert_null(bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Mlp", "{}", NULL));
    return m;
}

static bb_module *e_duplicate_module(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    assert_null(bb_rec_module(r, "M"));
    return m;
}

static bb_module *e_reserved_domain(bb_recorder *r)
{
    assert_null(bb_rec_module_in(r, "ai.bytesandbrains.wire", "M"));
    return bb_rec_module(r, "Other"); /* not created: the error is kept */
}

static bb_module *e_unbound_call_input(bb_recorder *r)
{
    bb_module *root = bb_rec_module(r, "Root");
    bb_module *child = bb_rec_module(r, "Child");
    bb_rec_input(bb_module_body(child), "q", NULL);
    bb_call_build(bb_rec_call(bb_module_body(root), child));
    return root;
}

static bb_module *e_unknown_call_input(bb_recorder *r)
{
    bb_module *root = bb_rec_module(r, "Root");
    bb_module *child = bb_rec_module(r, "Child");
    bb_rec *g = bb_module_body(root);
    bb_call *c = bb_rec_call(g, child);
    bb_call_input(c, "nope", bb_sys_pulse(g));
    bb_call_build(c);
    return root;
}

static bb_module *e_unknown_call_output(bb_recorder *r)
{
    bb_module *root = bb_rec_module(r, "Root");
    bb_module *child = bb_rec_module(r, "Child");
    bb_call *c = bb_rec_call(bb_module_body(root), child);
    bb_call_build(c);
    bb_call_output(c, "missing");
    return root;
}

static bb_module *e_call_not_built(bb_recorder *r)
{
    bb_module *root = bb_rec_module(r, "Root");
    bb_module *child = bb_rec_module(r, "Child");
    bb_rec_call(bb_module_body(root), child);
    return root;
}

static bb_module *e_call_cycle(bb_recorder *r)
{
    bb_module *a = bb_rec_module(r, "ModA");
    bb_module *b = bb_rec_module(r, "ModB");
    bb_call_build(bb_rec_call(bb_module_body(a), b));
    bb_call_build(bb_rec_call(bb_module_body(b), a));
    return a;
}

static bb_module *e_self_call(bb_recorder *r)
{
    bb_module *a = bb_rec_module(r, "ModA");
    assert_null(bb_rec_call(bb_module_body(a), a));
    return a;
}

static bb_module *e_scope_unclosed(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_rec_scope_begin(bb_module_body(m), "inner");
    return m;
}

static bb_module *e_scope_unbalanced(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    assert_int_equal(bb_rec_scope_end(bb_module_body(m)), BB_ERECORD);
    return m;
}

static bb_module *e_orphan_module(bb_recorder *r)
{
    bb_module *root = bb_rec_module(r, "Root");
    bb_rec_module(r, "Orphan");
    return root;
}

static bb_module *e_net_out_not_peers(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_rec *g = bb_module_body(m);
    bb_val t = bb_rec_input(g, "t", &BB_TYPE_TENSOR_F32);
    bb_rec_net_out(g, "port", t, t);
    return m;
}

static bb_module *e_missing_attr(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_val out;
    bb_rec_op(bb_module_body(m), NULL, BB_DOMAIN_SYSCALL, "Interval", NULL, 0, NULL, 0, NULL,
              &out, 1);
    return m;
}

static bb_module *e_arity(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_rec *g = bb_module_body(m);
    bb_val v = bb_rec_input(g, "v", NULL), out;
    bb_rec_op(g, NULL, BB_DOMAIN_SYSCALL, "Gate", &v, 1, NULL, 0, NULL, &out, 1);
    return m;
}

static bb_module *e_wire_on_model(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_slot *model = bb_rec_generic(m, BB_ROLE_MODEL, "model");
    bb_rec *g = bb_module_body(m);
    bb_wire_recv(g, model, NULL, NULL, NULL, NULL);
    return m;
}

static bb_module *e_syscall_with_slot(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_slot *model = bb_rec_generic(m, BB_ROLE_MODEL, "model");
    bb_val out;
    bb_rec_op(bb_module_body(m), model, BB_DOMAIN_SYSCALL, "Pulse", NULL, 0, NULL, 0, NULL,
              &out, 1);
    return m;
}

static bb_module *e_output_clash(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_rec *g = bb_module_body(m);
    bb_val x = bb_rec_input(g, "x", NULL);
    bb_rec_output(g, "x", bb_sys_pass_through(g, x));
    return m;
}

static bb_module *e_reserved_input_name(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_rec_input(bb_module_body(m), "site_3", NULL);
    return m;
}

static bb_module *e_atomic_domain_generic(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_slot *s = bb_rec_generic(m, BB_ROLE_MODEL, "model");
    bb_slot_set_atomic_domain(s, "bb-burn.BurnModel.atomic");
    return m;
}

static bb_module *e_first_error_kept(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_rec *g = bb_module_body(m);
    bb_val out;
    bb_rec_op(g, NULL, BB_DOMAIN_SYSCALL, "Frobnicate", NULL, 0, NULL, 0, NULL, &out, 1);
    bb_rec_bundle(g, NULL, 0); /* a second error: not the one reported */
    return m;
}

static bb_module *e_null_root(bb_recorder *r)
{
    bb_rec_module(r, "M");
    return NULL;
}

typedef struct error_case {
    const char *name;
    scenario_fn fn;
    const char *want[3]; /* substrings of the message */
} error_case;

static const error_case ERROR_CASES[] = {
    {"empty bundle", e_empty_bundle, {"M: ", "Bundle", "zero"}},
    {"empty unbundle", e_empty_unbundle, {"M: ", "Unbundle", "zero"}},
    {"unbundle of a tensor", e_unbundle_not_composite, {"Unbundle", "not a Composite"}},
    {"unknown op", e_unknown_op, {"M: ", "syscall::Frobnicate", "unknown op"}},
    {"compiler-inserted op", e_compiler_inserted, {"GateDispatch", "compiler"}},
    {"foreign value", e_foreign_value, {"ModB: ", "PassThrough", "value of ModA"}},
    {"value of another recorder", e_other_recorder_value,
     {"M: ", "PassThrough", "value of Elsewhere"}},
    {"bootstrap value in body", e_bootstrap_value_in_body, {"M: ", "Record", "M__bootstrap"}},
    {"wrong role", e_wrong_role, {"role.model::Forward", "'agg' has role Aggregator", "Model"}},
    {"NULL input", e_null_input, {"M: ", "Forward", "input 'input' is NULL"}},
    {"NULL slot", e_null_slot, {"Forward", "needs a Model slot"}},
    {"foreign slot", e_foreign_slot, {"ModA: ", "Params", "belongs to module 'ModB'"}},
    {"bad JSON", e_bad_json, {"M: ", "model", "not valid JSON"}},
    {"duplicate slot", e_duplicate_slot, {"slot 'model' declared twice"}},
    {"duplicate module", e_duplicate_module, {"module user.app::M declared twice"}},
    {"reserved domain", e_reserved_domain, {"ai.bytesandbrains.wire", "reserved"}},
    {"unbound call input", e_unbound_call_input, {"Root: ", "call Child", "'q'"}},
    {"unknown call input", e_unknown_call_input, {"call Child", "no input 'nope'"}},
    {"unknown call output", e_unknown_call_output, {"call Child", "no output 'missing'"}},
    {"call never built", e_call_not_built, {"Root: ", "Child", "never built"}},
    {"call cycle", e_call_cycle, {"cycle"}},
    {"self call", e_self_call, {"ModA", "calls itself"}},
    {"unclosed scope", e_scope_unclosed, {"M: ", "'inner'", "never ended"}},
    {"unbalanced scope end", e_scope_unbalanced, {"M: ", "without a matching begin"}},
    {"module never called", e_orphan_module, {"'Orphan'", "never called", "'Root'"}},
    {"net_out to a tensor", e_net_out_not_peers, {"net_out", "'port'", "PeerId vector"}},
    {"missing attribute", e_missing_attr, {"Interval", "period_ns"}},
    {"wrong arity", e_arity, {"Gate", "inputs"}},
    {"wire op on a Model slot", e_wire_on_model, {"Recv", "Protocol"}},
    {"syscall on a slot", e_syscall_with_slot, {"Pulse", "takes no component slot"}},
    {"output name clash", e_output_clash, {"output", "'x' already names"}},
    {"reserved value name", e_reserved_input_name, {"'site_3'", "reserved"}},
    {"atomic domain of a generic", e_atomic_domain_generic, {"'model' is generic"}},
    {"first error kept", e_first_error_kept, {"Frobnicate", "unknown op"}},
    {"NULL root", e_null_root, {"root module is NULL"}},
};

static void test_recording_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof ERROR_CASES / sizeof ERROR_CASES[0]; i++) {
        const error_case *c = &ERROR_CASES[i];
        bb_recorder *r = bb_recorder_new("user.app");
        assert_non_null(r);
        bb_module *root = c->fn(r);
        bb_model *m = (bb_model *)&m; /* must be reset to NULL */
        bb_error err = {0};
        int rc = bb_recorder_build(r, root, &m, &err);
        if (rc != BB_ERECORD)
            fail_msg("case '%s': build returned %d (%s), want ERECORD", c->name, rc, err.msg);
        assert_null(m);
        for (size_t k = 0; k < 3 && c->want[k]; k++)
            if (!contains(err.msg, c->want[k]))
                fail_msg("case '%s': message \"%s\" lacks \"%s\"", c->name, err.msg,
                         c->want[k]);
        if (contains(err.msg, "zero") && c->fn == e_first_error_kept)
            fail_msg("case '%s': the second error replaced the first", c->name);
        bb_error again = {0};
        assert_int_equal(bb_recorder_error(r, &again), BB_ERECORD);
        assert_string_equal(again.msg, err.msg);
        bb_recorder_free(r);
    }
}

/* The handle accessors: names, classes, which module and recorder a
 * recording belongs to. */
static void test_handles(void **state)
{
    (void)state;
    bb_recorder *r = bb_recorder_new(NULL);
    bb_module *plain = bb_rec_module(r, "Plain");
    bb_module *server = bb_rec_class_module(r, "Server");
    bb_module *other = bb_rec_module_in(r, "other.domain", "Plain");
    assert_non_null(plain);
    assert_non_null(server);
    assert_non_null(other);
    assert_string_equal(bb_module_name(plain), "Plain");
    assert_null(bb_module_class(plain));
    assert_string_equal(bb_module_name(server), "Server");
    assert_string_equal(bb_module_class(server), "Server");
    assert_string_equal(bb_module_name(other), "Plain");
    assert_ptr_not_equal(other, plain);
    bb_module *mods[] = {plain, server, other};
    for (size_t i = 0; i < 3; i++) {
        bb_rec *body = bb_module_body(mods[i]), *boot = bb_module_bootstrap(mods[i]);
        assert_non_null(body);
        assert_non_null(boot);
        assert_ptr_not_equal(body, boot);
        /* the same recording on every call */
        assert_ptr_equal(bb_module_body(mods[i]), body);
        assert_ptr_equal(bb_module_bootstrap(mods[i]), boot);
        assert_ptr_equal(bb_rec_module_of(body), mods[i]);
        assert_ptr_equal(bb_rec_module_of(boot), mods[i]);
        assert_ptr_equal(bb_rec_recorder(body), r);
        assert_ptr_equal(bb_rec_recorder(boot), r);
    }
    bb_slot *s = bb_rec_generic(plain, BB_ROLE_MODEL, "model");
    assert_string_equal(bb_slot_name(s), "model");
    assert_int_equal(bb_slot_role(s), BB_ROLE_MODEL);
    /* NULL handles answer NULL instead of crashing */
    assert_null(bb_module_name(NULL));
    assert_null(bb_module_class(NULL));
    assert_null(bb_module_body(NULL));
    assert_null(bb_rec_module_of(NULL));
    assert_null(bb_rec_recorder(NULL));
    /* a second module of the same identity is refused */
    assert_null(bb_rec_module(r, "Plain"));
    bb_error err = {0};
    assert_int_equal(bb_recorder_error(r, &err), BB_ERECORD);
    assert_true(contains(err.msg, "declared twice"));
    bb_recorder_free(r);
}

/* A concrete slot's construction state must be exactly one JSON value
 * (RFC 8259); the message names the byte and the problem. */
static void test_construction_state_json(void **state)
{
    (void)state;
    static const char *const good[] = {
        "{}", "[]", "0", "-0.5e+3", "\"s\"", "null", " \t\r\n{ } ",
        "{\"layers\":[64,32],\"lr\":1E-3,\"on\":true,\"off\":false,\"none\":null}",
        "{\"s\":\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00 caf\xc3\xa9\"}",
    };
    static const struct {
        const char *json;
        const char *want; /* "byte N: <problem>" */
    } bad[] = {
        {"", "byte 0: expected a value"},
        {"   ", "byte 3: expected a value"},
        {"{not json", "byte 1: expected a member name"},
        {"{} x", "byte 3: text after the value"},
        {"{}{}", "byte 2: text after the value"},
        {"01", "byte 1: text after the value"},
        {"1.", "byte 2: a number needs a digit"},
        {"-", "byte 1: a number needs a digit"},
        {"1e", "byte 2: a number needs a digit"},
        {"[1,]", "byte 3: expected a value"},
        {"[1 2]", "byte 3: expected ',' or ']'"},
        {"{\"a\"}", "byte 4: expected ':'"},
        {"{\"a\":1,}", "byte 7: expected a member name"},
        {"{\"a\":1", "byte 6: unterminated object"},
        {"\"abc", "byte 4: unterminated string"},
        {"\"a\nb\"", "byte 2: control character"},
        {"\"\\x\"", "byte 2: unknown escape"},
        {"\"\\u12G4\"", "byte 2: \\u needs four hex digits"},
        {"tru", "byte 0: expected a value"},
        {"True", "byte 0: expected a value"},
        {"'single'", "byte 0: expected a value"},
        {"NaN", "byte 0: expected a value"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        bb_recorder *r = bb_recorder_new(NULL);
        bb_module *m = bb_rec_module(r, "M");
        if (!bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Mlp", good[i], NULL)) {
            bb_error err = {0};
            bb_recorder_error(r, &err);
            fail_msg("valid JSON %s refused: %s", good[i], err.msg);
        }
        bb_recorder_free(r);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bb_recorder *r = bb_recorder_new(NULL);
        bb_module *m = bb_rec_module(r, "M");
        assert_null(bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Mlp", bad[i].json, NULL));
        bb_error err = {0};
        assert_int_equal(bb_recorder_error(r, &err), BB_ERECORD);
        if (!contains(err.msg, "not valid JSON") || !contains(err.msg, bad[i].want))
            fail_msg("JSON '%s': message \"%s\" lacks \"%s\"", bad[i].json, err.msg,
                     bad[i].want);
        bb_recorder_free(r);
    }
    /* nesting is bounded */
    char deep[1024];
    memset(deep, '[', 600);
    deep[600] = '\0';
    bb_recorder *r = bb_recorder_new(NULL);
    assert_null(bb_rec_concrete(bb_rec_module(r, "M"), BB_ROLE_MODEL, "model", "nn::Mlp", deep,
                                NULL));
    bb_error err = {0};
    bb_recorder_error(r, &err);
    assert_true(contains(err.msg, "nested too deeply"));
    bb_recorder_free(r);
}

/* bb_recorder_write: build + save; the file holds what build returns. */
static bb_module *record_pulse(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "M");
    bb_rec *g = bb_module_body(m);
    bb_rec_output(g, "tick", bb_sys_pulse(g));
    return m;
}

static void test_recorder_write(void **state)
{
    (void)state;
    char dir[] = "/tmp/bb-recorder-write.XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    bb_error err = {0};
    bb_recorder *r = bb_recorder_new(NULL);
    if (bb_recorder_write(r, record_pulse(r), path, &err))
        fail_msg("%s", err.msg);
    bb_recorder_free(r);
    bb_model *loaded = NULL;
    if (bb_model_load_file(path, &loaded, &err))
        fail_msg("%s", err.msg);
    r = bb_recorder_new(NULL);
    bb_model *built = build_ok(r, record_pulse(r));
    bb_recorder_free(r);
    char *a = dump_text(loaded), *b = dump_text(built);
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "ai.bytesandbrains.syscall::Pulse"));
    free(a);
    free(b);
    bb_model_free(loaded);
    bb_model_free(built);
    assert_int_equal(unlink(path), 0);

    /* an unwritable place: EIO naming the path; nothing left behind */
    char bad[96];
    snprintf(bad, sizeof bad, "%s/no/such/dir/m.onnx", dir);
    r = bb_recorder_new(NULL);
    assert_int_equal(bb_recorder_write(r, record_pulse(r), bad, &err), BB_EIO);
    assert_true(contains(err.msg, bad));
    bb_recorder_free(r);
    /* a recording error wins over writing; no file appears */
    r = bb_recorder_new(NULL);
    bb_module *m = bb_rec_module(r, "M");
    bb_rec_bundle(bb_module_body(m), NULL, 0);
    assert_int_equal(bb_recorder_write(r, m, path, &err), BB_ERECORD);
    assert_int_equal(access(path, F_OK), -1);
    bb_recorder_free(r);
    r = bb_recorder_new(NULL);
    assert_int_equal(bb_recorder_write(r, record_pulse(r), NULL, &err), BB_EINVAL);
    bb_recorder_free(r);
    assert_int_equal(rmdir(dir), 0);
}

static void test_record_after_build(void **state)
{
    (void)state;
    bb_recorder *r = bb_recorder_new(NULL);
    bb_module *m = bb_rec_module(r, "M");
    bb_rec *g = bb_module_body(m);
    bb_sys_pulse(g);
    bb_model *model = build_ok(r, m);
    /* the recorder refuses further recording and a second build */
    assert_false(bb_val_ok(bb_sys_pulse(g)));
    assert_null(bb_rec_module(r, "N"));
    bb_model *again = NULL;
    bb_error err = {0};
    assert_int_equal(bb_recorder_build(r, m, &again, &err), BB_ERECORD);
    assert_null(again);
    assert_true(contains(err.msg, "already built"));
    assert_int_equal(model->functions.v[0]->nodes.n, 1); /* the model is untouched */
    bb_recorder_free(r);
    bb_model_free(model);
}

/* ---- site naming, value_info ---------------------------------------------------- */

static void test_site_naming(void **state)
{
    (void)state;
    bb_recorder *r = bb_recorder_new(NULL);
    bb_module *m = bb_rec_module(r, "M");
    bb_rec *g = bb_module_body(m);
    bb_val seed = bb_rec_input(g, "seed", &BB_TYPE_U64);
    bb_val p = bb_sys_pulse(g);                /* site_1 */
    bb_val c = bb_sys_clock(g, p);             /* site_2 */
    bb_val tee[2];
    bb_sys_tee(g, c, tee, 2);                  /* site_3, site_4 */
    bb_val parts[] = {tee[0], seed};
    bb_val comp = bb_rec_bundle(g, parts, 2);  /* site_5 */
    const bb_type_node *types[] = {&BB_TYPE_TIMESTAMP, &BB_TYPE_U64};
    bb_val kids[2];
    assert_int_equal(bb_rec_unbundle(g, comp, types, 2, kids), BB_OK); /* site_6_child_* */
    bb_val after = bb_sys_on_trigger(g, p);    /* site_7 */
    assert_string_equal(p.name, "site_1");
    assert_string_equal(c.name, "site_2");
    assert_string_equal(tee[0].name, "site_3");
    assert_string_equal(tee[1].name, "site_4");
    assert_string_equal(comp.name, "site_5");
    assert_string_equal(kids[0].name, "site_6_child_0");
    assert_string_equal(kids[1].name, "site_6_child_1");
    assert_string_equal(after.name, "site_7");
    /* the bootstrap numbers its own sites */
    bb_rec *boot = bb_module_bootstrap(m);
    bb_val bp = bb_sys_pulse(boot);
    assert_string_equal(bp.name, "site_1");
    bb_model *model = build_ok(r, m);
    bb_recorder_free(r);
    const bb_function *f = fn(model, "M");
    const char *want[][3] = {{"site_1"}, {"site_2"}, {"site_3", "site_4"}, {"site_5"},
                             {"site_6_child_0", "site_6_child_1"}, {"site_7"}};
    assert_int_equal(f->nodes.n, 6);
    for (size_t i = 0; i < 6; i++)
        for (size_t k = 0; k < 3 && want[i][k]; k++)
            assert_string_equal(f->nodes.v[i]->outputs.v[k], want[i][k]);
    bb_model_free(model);
}

/* A model exercising classes, calls, bootstrap, net ports, composites. */
static bb_model *record_rich(void)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *root = bb_rec_module(r, "App");
    bb_module *server = bb_rec_class_module(r, "Server");
    bb_module *client = bb_rec_class_module(r, "Client");
    bb_module *helper = bb_rec_module(r, "Helper"); /* called by Server only */
    bb_module *shared = bb_rec_module(r, "Shared"); /* called by both classes */

    bb_rec *h = bb_module_body(helper);
    bb_val hx = bb_rec_input(h, "x", &BB_TYPE_TENSOR_F32);
    bb_rec_output(h, "y", bb_sys_pass_through(h, hx));
    bb_rec *sh = bb_module_body(shared);
    bb_sys_incr_metric(sh, bb_rec_input(sh, "t", &BB_TYPE_TRIGGER), "ticks", 1);

    bb_slot *model = bb_rec_concrete(server, BB_ROLE_MODEL, "model", "nn::Mlp", "{}", NULL);
    bb_slot *sel = bb_rec_concrete(server, BB_ROLE_PEER_SELECTOR, "selector",
                                   "peers::Connected", "{}", NULL);
    bb_rec *s = bb_module_body(server);
    bb_val tick = bb_sys_interval(s, 1000);
    bb_val params = bb_sys_gate(s, bb_role_model_params(s, model), tick);
    bb_call *hc = bb_rec_call(s, helper);
    bb_call_input(hc, "x", params);
    bb_call_build(hc);
    bb_val hy = bb_call_output(hc, "y");
    bb_val peers = bb_role_peer_selector_sample(s, sel, 2, "Client");
    bb_val fwd = bb_sys_pass_through(s, peers);
    bb_rec_net_out(s, "params", fwd, hy);
    bb_call *shc = bb_rec_call(s, shared);
    bb_call_input(shc, "t", bb_sys_pulse(s));
    bb_call_build(shc);
    bb_rec *sb = bb_module_bootstrap(server);
    bb_val seed = bb_rec_input(sb, "seed", &BB_TYPE_TENSOR_F32);
    bb_rec_input(sb, "extra", NULL);
    bb_role_model_load_parameters(sb, model, seed);

    bb_rec *c = bb_module_body(client);
    bb_val in = bb_rec_lookup_output(c, "params", &BB_TYPE_TENSOR_F32);
    assert_true(bb_val_ok(in));
    bb_val again = bb_rec_lookup_output(c, "params", NULL);
    assert_int_equal(again.id, in.id);
    bb_val parts[] = {in, bb_sys_pulse(c)};
    bb_val comp = bb_rec_bundle(c, parts, 2);
    const bb_type_node *types[] = {&BB_TYPE_TENSOR_F32, &BB_TYPE_TRIGGER};
    bb_val kids[2];
    bb_rec_unbundle(c, comp, types, 2, kids);
    bb_sys_record(c, kids[0], "params");
    bb_call *csh = bb_rec_call(c, shared);
    bb_call_input(csh, "t", kids[1]);
    bb_call_build(csh);

    bb_rec *rg = bb_module_body(root);
    bb_call_build(bb_rec_call(rg, server));
    bb_call_build(bb_rec_call(rg, client));
    bb_model *m = build_ok(r, root);
    bb_recorder_free(r);
    return m;
}

static void test_value_info_for_every_value(void **state)
{
    (void)state;
    bb_model *m = record_rich();
    size_t checked = 0;
    for (size_t i = 0; i < m->functions.n; i++) {
        const bb_function *f = m->functions.v[i];
        for (size_t k = 0; k < f->inputs.n; k++) {
            const bb_value_info *vi = bb_value_info_find(&f->value_info, f->inputs.v[k]);
            if (!vi || !vi->type || !vi->type->denotation)
                fail_msg("%s: input %s has no typed value_info", f->name, f->inputs.v[k]);
            checked++;
        }
        for (size_t j = 0; j < f->nodes.n; j++) {
            const bb_node *n = f->nodes.v[j];
            for (size_t k = 0; k < n->outputs.n; k++) {
                const char *o = n->outputs.v[k];
                const bb_value_info *vi = bb_value_info_find(&f->value_info, o);
                if (!vi || !vi->type || !vi->type->denotation ||
                    strncmp(vi->type->denotation, "ai.bytesandbrains.", 18) != 0)
                    fail_msg("%s: %s output %s has no denotated value_info", f->name,
                             n->op_type, o);
                checked++;
            }
        }
        /* no stale entries: every value_info names a value of the function */
        for (size_t k = 0; k < f->value_info.n; k++) {
            const char *nm = f->value_info.v[k]->name;
            bool found = bb_str_list_find(&f->inputs, nm) >= 0;
            for (size_t j = 0; j < f->nodes.n && !found; j++)
                found = bb_str_list_find(&f->nodes.v[j]->outputs, nm) >= 0;
            if (!found)
                fail_msg("%s: value_info %s names no value", f->name, nm);
        }
    }
    assert_true(checked >= 18);
    /* call outputs take the callee's port type */
    const bb_function *s = fn(m, "Server");
    const bb_node *call = node_of(s, "Helper");
    const bb_value_info *vi = bb_value_info_find(&s->value_info, call->outputs.v[0]);
    assert_string_equal(vi->type->denotation, BB_TYPE_TENSOR_F32.denotation);
    /* unbundled children carry their part's denotation */
    const bb_function *c = fn(m, "Client");
    const bb_node *ub = node_of(c, "Unbundle");
    vi = bb_value_info_find(&c->value_info, ub->outputs.v[1]);
    assert_string_equal(vi->type->denotation, BB_TYPE_TRIGGER.denotation);
    bb_model_free(m);
}

/* ---- opset_import ------------------------------------------------------------------ */

static void assert_opsets(const bb_opset_list *l, const char *const *want, size_t n)
{
    if (l->n != n)
        fail_msg("%zu opsets imported, want %zu (first: %s)", l->n, n,
                 l->n ? l->v[0].domain : "-");
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(l->v[i].domain, want[i]);
        assert_int_equal(l->v[i].version, strcmp(want[i], "ai.onnx") == 0
                                              ? BB_ONNX_OPSET_VERSION
                                              : BB_OPSET_VERSION);
    }
}

static void test_opset_import_exact(void **state)
{
    (void)state;
    bb_recorder *r = bb_recorder_new(NULL);
    bb_module *root = bb_rec_module(r, "Root");
    bb_module *math = bb_rec_module(r, "Math");
    bb_slot *be = bb_rec_generic(math, BB_ROLE_BACKEND, "backend");
    bb_rec *g = bb_module_body(math);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    bb_rec_output(g, "y", bb_onnx_add(g, be, x, bb_sys_pass_through(g, x)));
    bb_rec *rg = bb_module_body(root);
    bb_sys_record(rg, bb_sys_pulse(rg), "p");
    bb_call *c = bb_rec_call(rg, math);
    bb_call_input(c, "x", bb_rec_input(rg, "x", &BB_TYPE_TENSOR_F32));
    bb_call_build(c);
    bb_model *m = build_ok(r, root);
    bb_recorder_free(r);

    const char *root_want[] = {"ai.bytesandbrains.syscall", "user.app"};
    assert_opsets(&fn(m, "Root")->opset_imports, root_want, 2);
    const char *math_want[] = {"ai.onnx", "ai.bytesandbrains.syscall"};
    assert_opsets(&fn(m, "Math")->opset_imports, math_want, 2);
    const char *model_want[] = {"ai.onnx", "ai.bytesandbrains.syscall", "user.app"};
    assert_opsets(&m->opset_imports, model_want, 3);
    bb_model_free(m);
}

/* ---- slots ------------------------------------------------------------------------ */

static void test_generic_and_concrete_slots(void **state)
{
    (void)state;
    bb_recorder *r = bb_recorder_new(NULL);
    bb_module *m = bb_rec_module(r, "M");
    bb_slot *be = bb_rec_generic(m, BB_ROLE_BACKEND, "backend");
    bb_slot *idx = bb_rec_generic(m, BB_ROLE_INDEX, "index");
    float w[3] = {1.0f, 2.0f, 3.0f};
    bb_tensor_proto weights = {.name = "w", .data_type = BB_DT_FLOAT,
                               .raw_data = {(uint8_t *)w, sizeof w}, .has_raw_data = true};
    int64_t dims[1] = {3};
    weights.dims.v = dims;
    weights.dims.n = weights.dims.cap = 1;
    bb_slot *teacher = bb_rec_concrete(m, BB_ROLE_MODEL, "teacher", "nn::Mlp",
                                       "{\"layers\":[3]}", &weights);
    bb_slot *student = bb_rec_concrete(m, BB_ROLE_MODEL, "student", "nn::Mlp", NULL, NULL);
    bb_slot *burn = bb_rec_concrete(m, BB_ROLE_MODEL, "burn", "bb-burn::BurnModel", "{}", NULL);
    assert_int_equal(bb_slot_set_atomic_domain(burn, "bb-burn.BurnModel.atomic"), BB_OK);
    assert_string_equal(bb_slot_name(student), "student");
    assert_int_equal(bb_slot_role(student), BB_ROLE_MODEL);
    bb_rec *g = bb_module_body(m);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    bb_onnx_matmul(g, be, x, x);
    bb_role_index_add(g, idx, x);
    bb_role_model_forward(g, teacher, x);
    bb_role_model_forward(g, student, x);
    bb_role_model_backward(g, burn, x);
    bb_model *model = build_ok(r, m);
    bb_recorder_free(r);

    const bb_function *f = fn(model, "M");
    assert_int_equal(f->attributes.n, 2);
    assert_string_equal(f->attributes.v[0], "backend");
    assert_string_equal(f->attributes.v[1], "index");
    assert_int_equal(f->attribute_protos.n, 3);
    const bb_attr *ta = f->attribute_protos.v[0];
    assert_string_equal(ta->name, "teacher");
    assert_int_equal(ta->type, BB_ATTR_STRING);
    assert_int_equal(ta->s.len, strlen("{\"layers\":[3]}"));
    assert_memory_equal(ta->s.data, "{\"layers\":[3]}", ta->s.len);
    assert_non_null(ta->t);
    assert_int_equal(ta->t->data_type, BB_DT_FLOAT);
    assert_int_equal(ta->t->dims.n, 1);
    assert_int_equal(ta->t->dims.v[0], 3);
    assert_memory_equal(ta->t->raw_data.data, w, sizeof w);
    const bb_attr *sa = f->attribute_protos.v[1];
    assert_string_equal(sa->name, "student");
    assert_memory_equal(sa->s.data, "{}", 2); /* NULL config = {} */
    assert_null(sa->t);
    /* function-level slot metadata */
    assert_string_equal(fmeta(f, "ai.bytesandbrains.concrete_type.teacher"), "nn::Mlp");
    assert_string_equal(fmeta(f, "ai.bytesandbrains.concrete_type.burn"), "bb-burn::BurnModel");
    assert_null(fmeta(f, "ai.bytesandbrains.concrete_type.backend"));
    assert_string_equal(fmeta(f, BB_REC_META_SLOT_ROLE_PREFIX "backend"), "Backend");
    assert_string_equal(fmeta(f, BB_REC_META_SLOT_ROLE_PREFIX "teacher"), "Model");
    assert_string_equal(fmeta(f, BB_REC_META_SLOT_ID_PREFIX "backend"), "0");
    assert_string_equal(fmeta(f, BB_REC_META_SLOT_ID_PREFIX "index"), "1");
    /* per-node stamps */
    const bb_node *mm = f->nodes.v[0];
    assert_string_equal(mm->domain, "ai.onnx");
    assert_meta(mm, BB_META_REQUIRED_TRAIT, "Backend");
    assert_meta(mm, BB_META_SLOT_ID, "0");
    assert_meta(mm, BB_META_SLOT, "backend");
    assert_meta(mm, BB_META_CONCRETE_TYPE, NULL);
    assert_meta(mm, BB_META_INSTANCE, NULL);
    const bb_node *add = f->nodes.v[1];
    assert_string_equal(add->domain, BB_DOMAIN_ROLE_INDEX);
    assert_meta(add, BB_META_REQUIRED_TRAIT, "Index");
    assert_meta(add, BB_META_SLOT_ID, "1");
    const bb_node *tf = f->nodes.v[2], *sf = f->nodes.v[3];
    assert_string_equal(tf->domain, BB_DOMAIN_ROLE_MODEL);
    assert_meta(tf, BB_META_CONCRETE_TYPE, "nn::Mlp");
    assert_meta(tf, BB_META_INSTANCE, "0");
    assert_meta(tf, BB_META_SLOT, "teacher");
    assert_meta(tf, BB_META_REQUIRED_TRAIT, NULL);
    assert_meta(tf, BB_META_ORIGINAL_OP, NULL);
    assert_meta(sf, BB_META_CONCRETE_TYPE, "nn::Mlp");
    assert_meta(sf, BB_META_INSTANCE, "1"); /* a second instance of the same type */
    assert_meta(sf, BB_META_SLOT, "student");
    const bb_node *bw = f->nodes.v[4];
    assert_string_equal(bw->domain, "bb-burn.BurnModel.atomic");
    assert_string_equal(bw->op_type, "Backward");
    assert_meta(bw, BB_META_ORIGINAL_OP, "ai.bytesandbrains.role.model::Backward");
    assert_meta(bw, BB_META_INSTANCE, "0");
    /* the atomic domain is imported too */
    assert_true(bb_opset_list_version(&f->opset_imports, "bb-burn.BurnModel.atomic") == 1);
    bb_model_free(model);
}

/* ---- composites ---------------------------------------------------------------------- */

static void test_bundle_unbundle_stamps(void **state)
{
    (void)state;
    bb_model *m = record_rich();
    const bb_function *c = fn(m, "Client");
    const bb_node *b = node_of(c, "Bundle");
    assert_string_equal(b->domain, BB_DOMAIN_COMPOSITE);
    assert_int_equal(b->inputs.n, 2);
    assert_int_equal(b->outputs.n, 1);
    const bb_attr *cc = bb_node_attr(b, BB_META_COMPOSITE_CHILD_COUNT);
    assert_non_null(cc);
    assert_int_equal(cc->type, BB_ATTR_INT);
    assert_int_equal(cc->i, 2);
    assert_string_equal(bb_node_attr_string(b, BB_META_COMPOSITE_CHILD_TYPES, ""),
                        "ai.bytesandbrains.tensor_f32,ai.bytesandbrains.Trigger");
    const bb_value_info *vi = bb_value_info_find(&c->value_info, b->outputs.v[0]);
    assert_string_equal(vi->type->denotation, BB_TYPE_COMPOSITE.denotation);
    const bb_node *u = node_of(c, "Unbundle");
    assert_string_equal(u->domain, BB_DOMAIN_COMPOSITE);
    assert_int_equal(u->inputs.n, 1);
    assert_string_equal(u->inputs.v[0], b->outputs.v[0]);
    assert_int_equal(u->outputs.n, 2);
    assert_true(contains(u->outputs.v[0], "_child_0"));
    assert_true(contains(u->outputs.v[1], "_child_1"));
    assert_int_equal(bb_node_attr_int(u, BB_META_COMPOSITE_CHILD_COUNT, -1), 2);
    assert_string_equal(bb_node_attr_string(u, BB_META_COMPOSITE_CHILD_TYPES, ""),
                        "ai.bytesandbrains.tensor_f32,ai.bytesandbrains.Trigger");
    vi = bb_value_info_find(&c->value_info, u->outputs.v[0]);
    assert_string_equal(vi->type->denotation, BB_TYPE_TENSOR_F32.denotation);
    assert_true(bb_opset_list_version(&c->opset_imports, BB_DOMAIN_COMPOSITE) == 1);
    bb_model_free(m);
}

/* ---- bootstrap ------------------------------------------------------------------------- */

static void test_bootstrap_sibling(void **state)
{
    (void)state;
    bb_model *m = record_rich();
    const bb_function *b = fn(m, "Server__bootstrap");
    assert_string_equal(b->domain, "user.app");
    assert_string_equal(fmeta(b, BB_META_MODULE_PHASE), "bootstrap");
    assert_string_equal(fmeta(b, BB_META_HOME_CLASS), "Server");
    assert_int_equal(b->inputs.n, 2);
    assert_string_equal(b->inputs.v[0], "seed");
    assert_string_equal(b->inputs.v[1], "extra");
    assert_int_equal(b->nodes.n, 1);
    assert_string_equal(b->nodes.v[0]->op_type, "LoadParameters");
    assert_meta(b->nodes.v[0], BB_META_SLOT, "model");
    assert_meta(b->nodes.v[0], BB_META_HOME_CLASS, "Server");
    /* slots are declared on the body only; the body keeps its own formals */
    assert_int_equal(b->attribute_protos.n, 0);
    const bb_function *s = fn(m, "Server");
    assert_null(fmeta(s, BB_META_MODULE_PHASE));
    assert_int_equal(s->inputs.n, 0);
    /* the bootstrap follows its body in model.functions */
    size_t is = SIZE_MAX, ib = SIZE_MAX;
    for (size_t i = 0; i < m->functions.n; i++) {
        if (m->functions.v[i] == s)
            is = i;
        if (m->functions.v[i] == b)
            ib = i;
    }
    assert_int_equal(ib, is + 1);
    /* modules without a bootstrap recording have no sibling */
    for (size_t i = 0; i < m->functions.n; i++)
        assert_false(strcmp(m->functions.v[i]->name, "Client__bootstrap") == 0);
    bb_model_free(m);
}

/* ---- module_instance ------------------------------------------------------------------ */

static void test_module_instance_chains(void **state)
{
    (void)state;
    bb_recorder *r = bb_recorder_new(NULL);
    bb_module *root = bb_rec_module(r, "Root");
    bb_module *child = bb_rec_module(r, "Child");
    bb_rec *g = bb_module_body(root);
    bb_val p0 = bb_sys_pulse(g);
    bb_rec_scope_begin(g, "a");
    bb_val p1 = bb_sys_on_trigger(g, p0);
    bb_rec_scope_begin(g, "b");
    bb_sys_on_trigger(g, p1);
    bb_call_build(bb_rec_call(g, child));
    bb_rec_scope_end(g);
    bb_sys_on_trigger(g, p1);
    bb_rec_scope_end(g);
    bb_sys_on_trigger(g, p0);
    bb_call_build(bb_rec_call(g, child));
    bb_model *m = build_ok(r, root);
    bb_recorder_free(r);
    const bb_function *f = fn(m, "Root");
    assert_int_equal(f->nodes.n, 7);
    assert_meta(f->nodes.v[0], BB_META_MODULE_INSTANCE, NULL);
    assert_meta(f->nodes.v[1], BB_META_MODULE_INSTANCE, "a");
    assert_meta(f->nodes.v[2], BB_META_MODULE_INSTANCE, "a_b");
    assert_meta(f->nodes.v[3], BB_META_MODULE_INSTANCE, "a_b_Child#0");
    assert_meta(f->nodes.v[4], BB_META_MODULE_INSTANCE, "a");
    assert_meta(f->nodes.v[5], BB_META_MODULE_INSTANCE, NULL);
    assert_meta(f->nodes.v[6], BB_META_MODULE_INSTANCE, "Child#1");
    assert_meta(m->graph->nodes.v[0], BB_META_MODULE_INSTANCE, "Root#0");
    bb_model_free(m);
}

/* ---- sub-module calls ------------------------------------------------------------------- */

static void test_submodule_call_shape(void **state)
{
    (void)state;
    bb_recorder *r = bb_recorder_new(NULL);
    bb_module *root = bb_rec_module(r, "Root");
    bb_module *cell = bb_rec_module(r, "Cell");
    bb_rec *g = bb_module_body(root);
    bb_val q = bb_rec_input(g, "q", &BB_TYPE_TENSOR_F32);
    bb_val grad = bb_rec_input(g, "grad", &BB_TYPE_TENSOR_F32);
    /* the parent records its calls before the child's body exists */
    bb_call *c1 = bb_rec_call(g, cell);
    bb_call_input(c1, "incoming_grad", grad); /* bound out of order: by name */
    bb_call_input(c1, "query", q);
    assert_int_equal(bb_call_build(c1), BB_OK);
    bb_val resp = bb_call_output(c1, "response");
    assert_true(bb_val_ok(resp));
    assert_ptr_equal(resp.type, &BB_TYPE_ANY); /* fixed at build */
    assert_int_equal(bb_call_output(c1, "response").id, resp.id);
    bb_call *c2 = bb_rec_call(g, cell);
    bb_call_input(c2, "query", resp);
    bb_call_input(c2, "incoming_grad", grad);
    bb_call_build(c2);
    bb_rec_output(g, "out", bb_call_output(c2, "response"));

    bb_rec *cg = bb_module_body(cell);
    bb_val cq = bb_rec_input(cg, "query", &BB_TYPE_TENSOR_F32);
    bb_rec_input(cg, "incoming_grad", &BB_TYPE_TENSOR_F32);
    bb_rec_lookup_output(cg, "remote", &BB_TYPE_TENSOR_F32);
    bb_rec_output(cg, "response", bb_sys_pass_through(cg, cq));
    bb_rec_output(cg, "echo", bb_sys_pass_through(cg, cq));
    bb_model *m = build_ok(r, root);
    bb_recorder_free(r);

    size_t cells = 0;
    for (size_t i = 0; i < m->functions.n; i++)
        cells += strcmp(m->functions.v[i]->name, "Cell") == 0;
    assert_int_equal(cells, 1); /* recorded once */
    const bb_function *cf = fn(m, "Cell");
    assert_int_equal(cf->inputs.n, 3);
    assert_string_equal(cf->inputs.v[0], "query");
    assert_string_equal(cf->inputs.v[1], "incoming_grad");
    assert_string_equal(cf->inputs.v[2], "remote"); /* network formal last */
    assert_int_equal(cf->outputs.n, 2);
    const bb_function *f = fn(m, "Root");
    const bb_node *n1 = f->nodes.v[0], *n2 = f->nodes.v[1];
    assert_string_equal(n1->op_type, "Cell");
    assert_string_equal(n1->domain, "user.app");
    assert_int_equal(n1->inputs.n, 2); /* the trailing network formal is omitted */
    assert_string_equal(n1->inputs.v[0], "q");
    assert_string_equal(n1->inputs.v[1], "grad");
    assert_int_equal(n1->outputs.n, 2);
    assert_string_equal(n1->outputs.v[0], resp.name);
    assert_true(strncmp(n1->outputs.v[1], "site_", 5) == 0); /* unrequested: fresh site */
    assert_string_equal(n2->inputs.v[0], resp.name);
    assert_string_equal(n2->outputs.v[0], "out");
    const bb_value_info *vi = bb_value_info_find(&f->value_info, resp.name);
    assert_string_equal(vi->type->denotation, BB_TYPE_TENSOR_F32.denotation);
    assert_meta(n1, BB_META_MODULE_INSTANCE, "Cell#0");
    assert_meta(n2, BB_META_MODULE_INSTANCE, "Cell#1");
    assert_string_equal(f->outputs.v[0], "out");
    bb_model_free(m);
}

static void test_output_of_a_formal_uses_pass_through(void **state)
{
    (void)state;
    bb_recorder *r = bb_recorder_new(NULL);
    bb_module *m = bb_rec_module(r, "M");
    bb_rec *g = bb_module_body(m);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_U64);
    bb_val p = bb_sys_pulse(g);
    assert_int_equal(bb_rec_output(g, "echo", x), BB_OK);
    assert_int_equal(bb_rec_output(g, "first", p), BB_OK);
    assert_int_equal(bb_rec_output(g, "second", p), BB_OK); /* same value, two ports */
    bb_sys_on_trigger(g, p); /* a handle stays valid after its value was renamed */
    bb_model *model = build_ok(r, m);
    bb_recorder_free(r);
    const bb_function *f = fn(model, "M");
    assert_int_equal(f->outputs.n, 3);
    assert_string_equal(f->nodes.v[0]->outputs.v[0], "first");
    assert_string_equal(f->nodes.v[1]->op_type, "PassThrough");
    assert_string_equal(f->nodes.v[1]->inputs.v[0], "x");
    assert_string_equal(f->nodes.v[1]->outputs.v[0], "echo");
    assert_string_equal(f->nodes.v[2]->op_type, "PassThrough");
    assert_string_equal(f->nodes.v[2]->inputs.v[0], "first");
    assert_string_equal(f->nodes.v[2]->outputs.v[0], "second");
    assert_string_equal(f->nodes.v[3]->inputs.v[0], "first");
    assert_non_null(bb_value_info_find(&f->value_info, "first"));
    assert_null(bb_value_info_find(&f->value_info, "site_1"));
    bb_model_free(model);
}

/* ---- peer classes, network ports ----------------------------------------------------------- */

static void test_of_class_and_net_ports(void **state)
{
    (void)state;
    bb_model *m = record_rich();
    const bb_function *s = fn(m, "Server");
    const bb_node *sample = node_of(s, "Sample");
    assert_meta(sample, BB_META_PEER_CLASS, "Client");
    assert_int_equal(bb_node_attr_int(sample, "n", -1), 2);
    const bb_node *send = node_of(s, "Send");
    assert_string_equal(send->domain, BB_DOMAIN_WIRE);
    assert_int_equal(send->inputs.n, 2);
    assert_string_equal(send->inputs.v[0], node_of(s, "Helper")->outputs.v[0]);
    assert_string_equal(send->inputs.v[1], node_of(s, "PassThrough")->outputs.v[0]);
    assert_meta(send, BB_REC_META_PORT, "params");
    assert_meta(send, BB_META_DEST_CLASS, "Client"); /* tag survived the PassThrough */
    assert_meta(send, BB_META_WIRE_CORRELATION, "none");
    assert_meta(send, BB_META_HOME_CLASS, "Server");
    assert_string_equal(fmeta(s, BB_REC_META_NET_OUT_PREFIX "params"), "Client");
    const bb_function *c = fn(m, "Client");
    assert_int_equal(c->inputs.n, 1);
    assert_string_equal(c->inputs.v[0], "params");
    assert_string_equal(fmeta(c, BB_REC_META_NET_IN_PREFIX "params"), "params");
    const bb_value_info *vi = bb_value_info_find(&c->value_info, "params");
    assert_string_equal(vi->type->denotation, BB_TYPE_TENSOR_F32.denotation);
    /* the root passes nothing for the network formal */
    const bb_node *cc = node_of(fn(m, "App"), "Client");
    assert_int_equal(cc->inputs.n, 0);
    bb_model_free(m);
}

/* A selector op recorded by hand (Select with params "near_key") is tagged
 * with bb_rec_of_class like Sample / CurrentView: the producing node is
 * stamped and a send to its peers is routed to that class. */
static void test_rec_of_class(void **state)
{
    (void)state;
    bb_recorder *r = bb_recorder_new(NULL);
    bb_module *root = bb_rec_module(r, "Root");
    bb_module *srv = bb_rec_class_module(r, "Server");
    bb_module *cli = bb_rec_class_module(r, "Client");
    bb_slot *sel = bb_rec_concrete(srv, BB_ROLE_PEER_SELECTOR, "selector", "peers::Dht", "{}",
                                   NULL);
    bb_rec *s = bb_module_body(srv);
    bb_val key = bb_rec_input(s, "key", &BB_TYPE_BYTES);
    bb_rec_attr attrs[] = {BB_RA_STRING("params", "near_key"), BB_RA_INT("n", 3)};
    const bb_type_node *types[] = {&BB_TYPE_PEER_ID_VEC};
    bb_val near;
    assert_int_equal(bb_rec_op(s, sel, "bb-peers.PeerSelector.atomic", "Select", &key, 1, attrs,
                               2, types, &near, 1),
                     BB_OK);
    bb_val tagged = bb_rec_of_class(s, near, "Client");
    assert_true(bb_val_ok(tagged));
    bb_wire_send(s, NULL, "hello", key, tagged);
    bb_rec *c = bb_module_body(cli);
    bb_val got;
    bb_wire_recv(c, NULL, "hello", &BB_TYPE_BYTES, NULL, &got);
    bb_sys_record(c, got, "got");
    bb_rec *rg = bb_module_body(root);
    bb_call *sc = bb_rec_call(rg, srv);
    bb_call_input(sc, "key", bb_rec_input(rg, "key", &BB_TYPE_BYTES));
    bb_call_build(sc);
    bb_call_build(bb_rec_call(rg, cli));
    bb_model *m = build_ok(r, root);
    bb_recorder_free(r);
    const bb_function *sf = fn(m, "Server");
    assert_meta(node_of(sf, "Select"), BB_META_PEER_CLASS, "Client");
    assert_meta(node_of(sf, "Send"), BB_META_DEST_CLASS, "Client");
    bb_model_free(m);

    /* refused: NULL or empty class, a formal input, another graph's value */
    static const char *const why[] = {"NULL of_class", "empty of_class",
                                      "not the output of a node", "another recording"};
    for (size_t k = 0; k < 4; k++) {
        r = bb_recorder_new(NULL);
        srv = bb_rec_class_module(r, "Server");
        bb_module *other = bb_rec_module(r, "Other");
        sel = bb_rec_generic(srv, BB_ROLE_PEER_SELECTOR, "selector");
        s = bb_module_body(srv);
        bb_val v = bb_role_peer_selector_current_view(s, sel, NULL);
        if (k == 2)
            v = bb_rec_input(s, "peers", &BB_TYPE_PEER_ID_VEC);
        if (k == 3)
            v = bb_rec_input(bb_module_body(other), "x", &BB_TYPE_PEER_ID_VEC);
        const char *cls = k == 0 ? NULL : k == 1 ? "" : "Client";
        assert_false(bb_val_ok(bb_rec_of_class(s, v, cls)));
        bb_error err = {0};
        assert_int_equal(bb_recorder_error(r, &err), BB_ERECORD);
        assert_true(contains(err.msg, why[k]));
        bb_recorder_free(r);
    }
}

static void test_home_class(void **state)
{
    (void)state;
    bb_model *m = record_rich();
    const bb_function *app = fn(m, "App");
    assert_null(fmeta(app, BB_META_HOME_CLASS));
    assert_meta(node_of(app, "Server"), BB_META_HOME_CLASS, "Server");
    assert_meta(node_of(app, "Client"), BB_META_HOME_CLASS, "Client");
    assert_meta(m->graph->nodes.v[0], BB_META_HOME_CLASS, NULL);
    const char *cls[] = {"Server", "Client"};
    for (size_t k = 0; k < 2; k++) {
        const bb_function *f = fn(m, cls[k]);
        assert_string_equal(fmeta(f, BB_META_HOME_CLASS), cls[k]);
        for (size_t i = 0; i < f->nodes.n; i++)
            assert_meta(f->nodes.v[i], BB_META_HOME_CLASS, cls[k]);
    }
    /* called from Server only: derived; from both classes: left to the compiler */
    const bb_function *h = fn(m, "Helper");
    assert_null(fmeta(h, BB_META_HOME_CLASS));
    assert_meta(h->nodes.v[0], BB_META_HOME_CLASS, "Server");
    const bb_function *sh = fn(m, "Shared");
    assert_meta(sh->nodes.v[0], BB_META_HOME_CLASS, NULL);
    bb_model_free(m);
}

static void test_wire_ops_pairing_stamps(void **state)
{
    (void)state;
    bb_recorder *r = bb_recorder_new(NULL);
    bb_module *root = bb_rec_module(r, "Root");
    bb_module *srv = bb_rec_class_module(r, "Server");
    bb_module *cli = bb_rec_class_module(r, "Client");
    bb_slot *sel = bb_rec_generic(srv, BB_ROLE_PEER_SELECTOR, "selector");
    bb_slot *net = bb_rec_concrete(srv, BB_ROLE_PROTOCOL, "net", "framework_wire::Net", "{}",
                                   NULL);
    bb_rec *s = bb_module_body(srv);
    bb_val peers = bb_role_peer_selector_current_view(s, sel, "Client");
    bb_val req, responses;
    bb_wire_send_req_batched(s, net, "work", bb_sys_pulse(s), peers, 2, 5000000, &req, NULL);
    bb_wire_recv_resp_batched(s, net, req, NULL, &responses);
    bb_sys_record(s, responses, "answers");
    bb_rec *c = bb_module_body(cli);
    bb_val trig, payload, rid;
    bb_wire_recv_req(c, NULL, "work", &BB_TYPE_TRIGGER, &trig, &payload, &rid);
    bb_wire_send_resp(c, NULL, payload, BB_VAL_OMIT, rid);
    bb_rec *rg = bb_module_body(root);
    bb_call_build(bb_rec_call(rg, srv));
    bb_call_build(bb_rec_call(rg, cli));
    bb_model *m = build_ok(r, root);
    bb_recorder_free(r);

    const bb_function *sf = fn(m, "Server");
    assert_meta(node_of(sf, "CurrentView"), BB_META_PEER_CLASS, "Client");
    const bb_node *srb = node_of(sf, "SendReqBatched");
    assert_meta(srb, BB_REC_META_PORT, "work");
    assert_meta(srb, BB_META_DEST_CLASS, "Client");
    assert_meta(srb, BB_META_WIRE_CORRELATION, "request");
    assert_meta(srb, BB_META_CONCRETE_TYPE, "framework_wire::Net");
    assert_meta(srb, BB_META_SLOT, "net");
    assert_int_equal(bb_node_attr_int(srb, "quorum", -1), 2);
    assert_int_equal(bb_node_attr_int(srb, BB_ATTR_NAME_DEADLINE_NS, -1), 5000000);
    assert_int_equal(srb->outputs.n, 2);
    const bb_node *rrb = node_of(sf, "RecvRespBatched");
    assert_string_equal(rrb->inputs.v[0], srb->outputs.v[0]);
    assert_meta(rrb, BB_META_WIRE_CORRELATION, "response");
    const bb_function *cf = fn(m, "Client");
    const bb_node *rr = node_of(cf, "RecvReq");
    assert_meta(rr, BB_REC_META_PORT, "work");
    assert_meta(rr, BB_META_WIRE_CORRELATION, "request");
    const bb_attr *pt = bb_node_attr(rr, BB_ATTR_NAME_PAYLOAD_TYPE);
    assert_non_null(pt);
    assert_int_equal(pt->type, BB_ATTR_TYPE_PROTO);
    assert_string_equal(pt->tp->denotation, BB_TYPE_TRIGGER.denotation);
    assert_int_equal(rr->outputs.n, 3);
    const bb_node *sr = node_of(cf, "SendResp");
    assert_int_equal(sr->inputs.n, 3);
    assert_string_equal(sr->inputs.v[1], ""); /* dest omitted: reply to the requester */
    assert_string_equal(sr->inputs.v[2], rr->outputs.v[2]);
    assert_meta(sr, BB_META_WIRE_CORRELATION, "response");
    assert_meta(sr, BB_META_DEST_CLASS, NULL);
    bb_model_free(m);
}

/* ---- every catalog op has a DSL function ------------------------------------------------- */

static void test_every_catalog_op_recordable(void **state)
{
    (void)state;
    bb_recorder *r = bb_recorder_new(NULL);
    bb_module *m = bb_rec_module(r, "All");
    bb_slot *be = bb_rec_generic(m, BB_ROLE_BACKEND, "backend");
    bb_slot *model = bb_rec_generic(m, BB_ROLE_MODEL, "model");
    bb_slot *agg = bb_rec_generic(m, BB_ROLE_AGGREGATOR, "agg");
    bb_slot *codec = bb_rec_generic(m, BB_ROLE_CODEC, "codec");
    bb_slot *data = bb_rec_generic(m, BB_ROLE_DATA_SOURCE, "data");
    bb_slot *index = bb_rec_generic(m, BB_ROLE_INDEX, "index");
    bb_slot *sel = bb_rec_generic(m, BB_ROLE_PEER_SELECTOR, "sel");
    bb_rec *g = bb_module_body(m);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    bb_val i64 = bb_rec_input(g, "i64", &BB_TYPE_TENSOR_I64);
    bb_val cond = bb_rec_input(g, "cond", &BB_TYPE_TENSOR_BOOL);
    bb_val peer = bb_rec_input(g, "peer", &BB_TYPE_PEER_ID);
    bb_val addr = bb_rec_input(g, "addr", &BB_TYPE_MULTIADDRESS);
    bb_val addrs = bb_rec_input(g, "addrs", &BB_TYPE_ADDRESS_VEC);
    bb_val trig = bb_sys_pulse(g);
    bb_val out[4];
    /* ai.onnx */
#define U(fn, op) bb_onnx_##fn(g, be, x);
#define B(fn, op) bb_onnx_##fn(g, be, x, x);
    BB__ONNX_UNARY(U)
    BB__ONNX_BINARY(B)
#undef U
#undef B
    bb_onnx_argmax(g, be, x, 1, 0);
    bb_onnx_flatten(g, be, x, 1);
    bb_onnx_where(g, be, cond, x, x);
    bb_onnx_gemm(g, be, x, x, BB_VAL_OMIT, 1.0f, 1.0f, 0, 1);
    bb_onnx_softmax(g, be, x, -1);
    bb_onnx_leaky_relu(g, be, x, 0.1f);
    bb_onnx_gelu(g, be, x, "tanh");
    int64_t perm[] = {1, 0};
    bb_onnx_transpose(g, be, x, perm, 2);
    bb_val two[] = {x, x};
    bb_onnx_concat(g, be, two, 2, 0);
    assert_int_equal(bb_onnx_split(g, be, x, BB_VAL_OMIT, 0, out, 2), BB_OK);
    bb_onnx_slice(g, be, x, i64, i64, BB_VAL_OMIT, BB_VAL_OMIT);
    bb_onnx_squeeze(g, be, x, BB_VAL_OMIT);
    bb_onnx_unsqueeze(g, be, x, i64);
    bb_val cast = bb_onnx_cast(g, be, x, BB_DT_INT64);
    assert_ptr_equal(cast.type, &BB_TYPE_TENSOR_I64);
    bb_onnx_reduce_sum(g, be, x, i64, 1);
    bb_onnx_reduce_mean(g, be, x, BB_VAL_OMIT, 0);
    bb_onnx_reduce_max(g, be, x, i64, 1);
    bb_onnx_reduce_min(g, be, x, i64, 1);
    bb_onnx_batch_normalization(g, be, x, x, x, x, x, 1e-5f, 0.9f);
    bb_onnx_layer_normalization(g, be, x, x, BB_VAL_OMIT, -1, 1e-5f);
    int64_t k2[] = {2, 2};
    bb_onnx_window win = {.kernel_shape = k2, .n_kernel_shape = 2, .strides = k2,
                          .n_strides = 2, .group = 1};
    bb_onnx_conv(g, be, x, x, BB_VAL_OMIT, &win);
    bb_onnx_max_pool(g, be, x, &win);
    bb_onnx_average_pool(g, be, x, &win);
    bb_val z = bb_onnx_zeros(g, be, i64, BB_DT_FLOAT);
    assert_ptr_equal(z.type, &BB_TYPE_TENSOR_F32);
    bb_onnx_ones(g, be, i64, BB_DT_DOUBLE);
    float one = 1.0f;
    bb_tensor_proto t = {.data_type = BB_DT_FLOAT, .raw_data = {(uint8_t *)&one, 4},
                         .has_raw_data = true};
    bb_onnx_constant(g, be, &t);
    bb_onnx_gather(g, be, x, i64, 0);
    bb_onnx_scatter(g, be, x, i64, x, 0);
    bb_arena *ga = bb_arena_create();
    bb_graph *branch = bb_graph_new(ga, "branch");
    assert_int_equal(bb_onnx_if(g, be, cond, branch, branch, out, 1), BB_OK);
    assert_int_equal(bb_onnx_loop(g, be, i64, cond, &x, 1, branch, out, 1), BB_OK);
    bb_arena_destroy(ga); /* the recorder copied the graphs */
    /* role.* */
    bb_val p = bb_role_model_params(g, model);
    bb_role_model_forward(g, model, p);
    bb_role_model_backward(g, model, p);
    bb_role_model_step(g, model, p);
    bb_role_model_evaluate(g, model, p, p);
    bb_role_model_apply_delta(g, model, p);
    bb_role_model_load_parameters(g, model, p);
    assert_int_equal(bb_role_model_train(g, model, trig, 2, &out[0], &out[1]), BB_OK);
    assert_ptr_equal(out[1].type, &BB_TYPE_U64);
    assert_int_equal(bb_role_model_evaluate_metrics(g, model, trig, NULL, NULL), BB_OK);
    bb_val cmd = bb_role_aggregator_contribute(g, agg, p, BB_VAL_OMIT);
    assert_ptr_equal(cmd.type, &BB_TYPE_COMMAND_ID);
    bb_val meta_out;
    bb_role_aggregator_aggregate(g, agg, trig, &meta_out);
    assert_true(bb_val_ok(meta_out));
    bb_role_aggregator_current_tensor(g, agg, trig);
    bb_role_compressor_train_codebook(g, codec, p);
    bb_role_compressor_decompress(g, codec, bb_role_compressor_compress(g, codec, p));
    bb_val batch, labels;
    assert_int_equal(bb_role_data_loader_next_batch(g, data, &batch, &labels), BB_OK);
    assert_true(bb_val_ok(labels));
    bb_role_data_loader_reset(g, data, trig);
    bb_role_data_loader_on_data_loaded(g, data);
    bb_role_index_add(g, index, x);
    bb_role_index_search(g, index, x, 5);
    bb_role_index_remove(g, index, x);
    bb_role_index_train(g, index, x);
    bb_val peers = bb_role_peer_selector_sample(g, sel, 3, NULL);
    assert_ptr_equal(peers.type, &BB_TYPE_PEER_ID_VEC);
    bb_role_peer_selector_current_view(g, sel, NULL);
    /* syscalls */
    bb_val trig2[] = {trig, p};
    bb_sys_threshold(g, trig2, 2, 2);
    bb_sys_interval(g, 10);
    bb_sys_event_source(g, 3);
    bb_sys_after(g, trig, 5);
    bb_sys_on_trigger(g, trig);
    bb_val acq = bb_sys_limit_acquire(g, trig, "lim", 2);
    bb_sys_limit_release(g, acq, "lim");
    bb_sys_any(g, trig2, 2, "grp");
    bb_sys_gate(g, p, trig);
    bb_sys_serialize_dequeue(g, bb_sys_serialize_enqueue(g, p, "q"), "q", &BB_TYPE_TENSOR);
    bb_sys_correlate_tag(g, trig);
    bb_sys_hold_stash(g, p, "h");
    bb_sys_hold_flush(g, trig, "h", NULL);
    bb_sys_app_emit(g, p, "topic");
    bb_sys_app_notify(g, trig, "note");
    bb_sys_record(g, p, "rec");
    bb_sys_incr_metric(g, trig, "count", 2);
    bb_sys_lifecycle_phase(g, 1);
    bb_sys_clock(g, trig);
    bb_sys_rng_u64(g, trig);
    bb_sys_sleep(g, trig, 100);
    bb_sys_deadline_match(g, trig, trig);
    bb_sys_pass_through(g, p);
    assert_int_equal(bb_sys_tee(g, p, out, 3), BB_OK);
    bb_sys_constant(g, &t);
    /* wire */
    bb_wire_send(g, NULL, NULL, p, peers);
    bb_val rid, resp;
    bb_wire_send_req_batched(g, NULL, NULL, p, peers, 0, 0, &rid, &resp);
    bb_wire_recv_resp_batched(g, NULL, rid, NULL, NULL);
    bb_wire_recv(g, NULL, NULL, NULL, NULL, NULL);
    bb_val rreq;
    bb_wire_recv_req(g, NULL, NULL, NULL, NULL, NULL, &rreq);
    bb_wire_send_resp(g, NULL, p, peers, rreq);
    /* address book, composite */
    bb_addrbook_insert(g, peer, addr);
    bb_addrbook_insert_many(g, peer, addrs);
    bb_addrbook_lookup(g, peer);
    bb_val bundle = bb_rec_bundle(g, trig2, 2);
    const bb_type_node *types[] = {&BB_TYPE_TRIGGER, &BB_TYPE_TENSOR};
    bb_rec_unbundle(g, bundle, types, 2, out);

    bb_model *model_out = build_ok(r, m);
    bb_recorder_free(r);
    const bb_function *f = fn(model_out, "All");
    size_t ops = 0;
    for (size_t i = 0; i < bb_opset_count(); i++) {
        const bb_opset_schema *os = bb_opset_at(i);
        for (uint32_t k = 0; k < os->n_ops; k++) {
            const bb_op_schema *op = &os->ops[k];
            if (op->flags & BB_OPF_COMPILER_INSERTED)
                continue;
            bool found = false;
            for (size_t j = 0; j < f->nodes.n && !found; j++) {
                const bb_node *n = f->nodes.v[j];
                found = strcmp(n->op_type, op->op_type) == 0 &&
                        (strcmp(n->domain, op->domain) == 0 ||
                         (bb_domain_is_onnx(n->domain) && bb_domain_is_onnx(op->domain)));
                if (found) {
                    bb_error err = {0};
                    if (bb_op_schema_check_node(op, n, &err))
                        fail_msg("%s", err.msg);
                }
            }
            if (!found)
                fail_msg("no DSL call recorded %s::%s", op->domain, op->op_type);
            ops++;
        }
    }
    assert_true(ops > 100);
    bb_model_free(model_out);
}

/* ---- golden dump of the SplitLearning example ------------------------------------------------ */

/* The build directory: $BB_BUILD, else two levels above this binary
 * (<build>/tests/test_recorder). */
static void build_dir(char *out, size_t cap)
{
    const char *env = getenv("BB_BUILD");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return;
    }
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    assert_true(n > 0);
    out[n] = '\0';
    for (int i = 0; i < 2; i++) {
        char *s = strrchr(out, '/');
        assert_non_null(s);
        *s = '\0';
    }
}

/* The repository root: the build directory's parent. */
static void repo_root(char *out, size_t cap)
{
    char buf[PATH_MAX], up[PATH_MAX + 4];
    build_dir(buf, sizeof buf);
    snprintf(up, sizeof up, "%s/..", buf);
    assert_non_null(realpath(up, out));
    (void)cap;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* stdout of `<build>/bin/bbc dump path`. */
static char *bbc_dump_output(const char *path)
{
    char bbc[PATH_MAX + 16], dir[PATH_MAX], cmd[3 * PATH_MAX];
    build_dir(dir, sizeof dir);
    snprintf(bbc, sizeof bbc, "%s/bin/bbc", dir);
    if (access(bbc, X_OK) != 0)
        fail_msg("%s is missing (build bbc first)", bbc);
    snprintf(cmd, sizeof cmd, "'%s' dump '%s'", bbc, path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    char chunk[4096];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, p)) > 0)
        fwrite(chunk, 1, k, out);
    fclose(out);
    int rc = pclose(p);
    if (rc != 0)
        fail_msg("`%s` exited with status %d", cmd, rc);
    return buf;
}

static void test_split_learning_golden(void **state)
{
    (void)state;
    char root[PATH_MAX], onnx[PATH_MAX + 64], golden[PATH_MAX + 64];
    repo_root(root, sizeof root);
    snprintf(onnx, sizeof onnx, "%s/testdata/split_learning.onnx", root);
    snprintf(golden, sizeof golden, "%s/testdata/split_learning.dump", root);
    bb_model *m = NULL;
    bb_error err = {0};
    if (bb_model_load_file(onnx, &m, &err))
        fail_msg("%s (run make to record the examples)", err.msg);
    char *got = dump_text(m);
    char *want = read_text(golden);
    if (strcmp(got, want) != 0) {
        /* point at the first differing line */
        size_t line = 1, i = 0;
        while (got[i] && got[i] == want[i]) {
            if (got[i] == '\n')
                line++;
            i++;
        }
        fail_msg("bbc dump of %s differs from %s at line %zu", onnx, golden, line);
    }
    /* `bbc dump` prints the same text */
    char *cli = bbc_dump_output(onnx);
    if (strcmp(cli, want) != 0)
        fail_msg("`bbc dump %s` differs from %s", onnx, golden);
    free(cli);
    /* spot checks: Part 9's ops, cut into the two classes that train */
    assert_int_equal(m->functions.n, 3);
    const bb_function *owner = fn(m, "DataOwner"), *top = fn(m, "Top");
    const char *owner_ops[] = {"Interval",  "Limit.Acquire",  "NextBatch",       "Gate",
                               "Gate",      "Forward",        "Sample",          "Bundle",
                               "SendReqBatched", "RecvRespBatched", "Contribute", "Aggregate",
                               "Backward",  "StepOn",         "Limit.Release"};
    for (size_t i = 0; i < sizeof owner_ops / sizeof *owner_ops; i++)
        assert_string_equal(owner->nodes.v[i]->op_type, owner_ops[i]);
    const char *top_ops[] = {"RecvReq",      "Limit.Acquire", "Gate",   "Unbundle",
                             "Forward",      "LossGradient",  "BackwardInput", "StepOn",
                             "Gate",         "SendResp"};
    for (size_t i = 0; i < sizeof top_ops / sizeof *top_ops; i++)
        assert_string_equal(top->nodes.v[i]->op_type, top_ops[i]);
    assert_string_equal(bb_kv_get(&owner->metadata, BB_META_HOME_CLASS), "DataOwner");
    assert_string_equal(bb_kv_get(&top->metadata, BB_META_HOME_CLASS), "Top");
    assert_int_equal(top->attribute_protos.n, 1); /* the top holds no data source */
    assert_string_equal(top->attribute_protos.v[0]->name, "top");
    assert_meta(m->graph->nodes.v[0], BB_META_MODULE_INSTANCE, "SplitLearning#0");
    free(got);
    free(want);
    bb_model_free(m);
}

/* The federated example (DESIGN.md "The federated round, as a graph"). */
static void test_federated_example_shape(void **state)
{
    (void)state;
    char root[PATH_MAX], onnx[PATH_MAX + 64];
    repo_root(root, sizeof root);
    snprintf(onnx, sizeof onnx, "%s/testdata/federated.onnx", root);
    bb_model *m = NULL;
    bb_error err = {0};
    if (bb_model_load_file(onnx, &m, &err))
        fail_msg("%s (run make to record the examples)", err.msg);
    assert_int_equal(m->functions.n, 4);
    const char *names[] = {"Federated", "Server", "Server__bootstrap", "Client"};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(m->functions.v[i]->name, names[i]);
    const bb_function *s = fn(m, "Server"), *c = fn(m, "Client");
    const char *server_ops[] = {"Interval", "Limit.Acquire", "Clock", "ParamsDigest",
                                "ParamsOn", "SetModel", "Sample", "SendReqBatched",
                                "RecvRespBatched", "Clock", "Contribute", "Bundle", "Aggregate",
                                "Clock", "Rounds", "LoadParameters", "EvaluateMetrics",
                                "ParamsDigest", "Clock", "Bundle", "AppEmit", "Limit.Release"};
    assert_int_equal(s->nodes.n, 22);
    for (size_t i = 0; i < 22; i++)
        assert_string_equal(s->nodes.v[i]->op_type, server_ops[i]);
    const bb_node *sample = node_of(s, "Sample");
    assert_meta(sample, BB_META_PEER_CLASS, "Client");
    assert_meta(sample, BB_META_CONCRETE_TYPE, "peers::Connected");
    const bb_node *srb = node_of(s, "SendReqBatched");
    assert_meta(srb, BB_REC_META_PORT, "params");
    assert_meta(srb, BB_META_DEST_CLASS, "Client");
    assert_string_equal(srb->inputs.v[0], node_of(s, "ParamsOn")->outputs.v[0]);
    assert_string_equal(node_of(s, "ParamsOn")->domain, "bb-nn.Mlp.atomic");
    const bb_node *set_model = node_of(s, "SetModel"); /* what a server optimizer steps from */
    assert_string_equal(set_model->domain, "bb-agg.Aggregator.atomic");
    assert_string_equal(set_model->inputs.v[0], node_of(s, "ParamsOn")->outputs.v[0]);
    assert_int_equal(bb_node_attr_int(srb, "deadline_ns", 0), 800000000); /* authored */
    assert_string_equal(srb->inputs.v[1], sample->outputs.v[0]);
    assert_string_equal(node_of(s, "RecvRespBatched")->inputs.v[0], srb->outputs.v[0]);
    assert_string_equal(bb_node_attr_string(node_of(s, "AppEmit"), "name", ""), "round");
    assert_string_equal(fmeta(fn(m, "Server__bootstrap"), BB_META_MODULE_PHASE), "bootstrap");
    const char *client_ops[] = {"RecvReq", "Clock",  "LoadParameters", "Train",  "Bundle",
                                "SendResp", "Clock", "Bundle",         "AppEmit"};
    assert_int_equal(c->nodes.n, 9);
    for (size_t i = 0; i < 9; i++) {
        assert_string_equal(c->nodes.v[i]->op_type, client_ops[i]);
        assert_meta(c->nodes.v[i], BB_META_HOME_CLASS, "Client");
    }
    const bb_node *rr = node_of(c, "RecvReq"), *sr = node_of(c, "SendResp");
    assert_meta(rr, BB_REC_META_PORT, "params");
    assert_string_equal(sr->inputs.v[0], c->nodes.v[4]->outputs.v[0]); /* the first Bundle */
    assert_string_equal(sr->inputs.v[2], rr->outputs.v[2]);
    const char *types[] = {"nn::Mlp", "agg::FedAvg", "peers::Connected", "data::Csv"};
    const char *slots[] = {"model", "aggregator", "selector", "data"};
    for (size_t i = 0; i < 4; i++) {
        char key[128];
        snprintf(key, sizeof key, "%s%s", BB_META_SLOT_CONCRETE_TYPE_PREFIX, slots[i]);
        assert_string_equal(fmeta(s, key), types[i]);
    }
    assert_meta(node_of(c, "Train"), BB_META_INSTANCE, "1"); /* the second nn::Mlp */
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimal_round_trip),
        cmocka_unit_test(test_recording_errors),
        cmocka_unit_test(test_handles),
        cmocka_unit_test(test_construction_state_json),
        cmocka_unit_test(test_recorder_write),
        cmocka_unit_test(test_record_after_build),
        cmocka_unit_test(test_site_naming),
        cmocka_unit_test(test_value_info_for_every_value),
        cmocka_unit_test(test_opset_import_exact),
        cmocka_unit_test(test_generic_and_concrete_slots),
        cmocka_unit_test(test_bundle_unbundle_stamps),
        cmocka_unit_test(test_bootstrap_sibling),
        cmocka_unit_test(test_module_instance_chains),
        cmocka_unit_test(test_submodule_call_shape),
        cmocka_unit_test(test_output_of_a_formal_uses_pass_through),
        cmocka_unit_test(test_of_class_and_net_ports),
        cmocka_unit_test(test_rec_of_class),
        cmocka_unit_test(test_home_class),
        cmocka_unit_test(test_wire_ops_pairing_stamps),
        cmocka_unit_test(test_every_catalog_op_recordable),
        cmocka_unit_test(test_split_learning_golden),
        cmocka_unit_test(test_federated_example_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
