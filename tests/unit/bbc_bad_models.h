/*
 * bbc_bad_models.h — the generator of testdata/bad/compile/: one recorded
 * model per compiler error variant (COMPILER.md "Error variants", bbc's
 * BBC_ERROR_MAP), each with what `bbc compile` must print for it.
 *
 * Every model is recorded with the C recorder (bb/recorder.h), then, where
 * the recorder itself refuses the mistake (an unknown op, a dangling input,
 * a cycle, ...), the built IR is edited the way a buggy or hand-written
 * producer would. Component types come from the real plugins (cpu::CpuBackend,
 * example::Counter) and from the bbc_types test plugin (bbctest::Dependent,
 * the failing stage "refuse_on_purpose"); "@TYPES" in a case's arguments
 * stands for that plugin's path.
 *
 * tests/unit/test_compile_bad.c compiles every committed file through the
 * CLI and checks its error, and checks the generator still produces the
 * same error; `build/tests/test_compile_bad --write testdata/bad/compile`
 * rewrites the files. Header-only (static functions), for that one test.
 */
#ifndef BBC_BAD_MODELS_H
#define BBC_BAD_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "bb/ir.h"
#include "bb/meta.h"
#include "bb/recorder.h"
#include "bb/types.h"
#include "bbc_programs.h"

#define BM_DIR "testdata/bad/compile"
#define BM_TYPES "@TYPES" /* replaced by the path of bbc_types.so */

typedef struct bm_case {
    const char *file;         /* under BM_DIR */
    const char *variant;      /* error variant name (bbc_errkind_name) */
    const char *pass;         /* the pass the error names */
    const char *args[4];      /* extra `bbc compile` arguments (NULL-terminated) */
    const char *culprit[3];   /* substrings the message must contain */
    bb_model *(*build)(bb_error *err);
} bm_case;

/* ---- helpers ---------------------------------------------------------------- */

static bb_function *bm_fn(bb_model *m, const char *name)
{
    for (size_t i = 0; m && i < m->functions.n; i++)
        if (m->functions.v[i]->name && strcmp(m->functions.v[i]->name, name) == 0)
            return m->functions.v[i];
    return NULL;
}

/* The k-th node with op_type op in function fn, or NULL. */
static bb_node *bm_node(bb_model *m, const char *fn, const char *op, size_t k)
{
    bb_function *f = bm_fn(m, fn);
    for (size_t i = 0; f && i < f->nodes.n; i++)
        if (strcmp(f->nodes.v[i]->op_type, op) == 0 && k-- == 0)
            return f->nodes.v[i];
    return NULL;
}

/* A single-class program "Ticker": Interval(1 s) -> AppNotify("tick"). */
static bb_model *bm_ticker(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *m = bb_rec_module(r, "Ticker");
    bb_rec *g = bb_module_body(m);
    bb_sys_app_notify(g, bb_sys_interval(g, 1000000000), "tick");
    return fx_build(r, m, err);
}

/* A single-class program "Sender": Send(x, peers) on port "out", both formals. */
static bb_model *bm_sender(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *m = bb_rec_module(r, "Sender");
    bb_rec *g = bb_module_body(m);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    bb_val peers = bb_rec_input(g, "peers", &BB_TYPE_PEER_ID_VEC);
    bb_wire_send(g, NULL, "out", x, peers);
    return fx_build(r, m, err);
}

/* ---- ValidationError (the validate pass) ------------------------------------------ */

static bb_model *bm_unknown_op(bb_error *err)
{
    bb_model *m = bm_ticker(err);
    bb_node *n = m ? bm_node(m, "Ticker", "AppNotify", 0) : NULL;
    if (n)
        n->op_type = bb_model_str(m, "Frobnicate");
    return m;
}

static bb_model *bm_dangling_input(bb_error *err)
{
    bb_model *m = bm_ticker(err);
    bb_node *n = m ? bm_node(m, "Ticker", "AppNotify", 0) : NULL;
    if (n)
        n->inputs.v[0] = bb_model_str(m, "nowhere");
    return m;
}

static bb_model *bm_duplicate_output(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "Twice");
    bb_rec *g = bb_module_body(mod);
    bb_sys_app_notify(g, bb_sys_interval(g, 1000000000), "a");
    bb_sys_app_notify(g, bb_sys_interval(g, 2000000000), "b");
    bb_model *m = fx_build(r, mod, err);
    bb_node *a = m ? bm_node(m, "Twice", "Interval", 0) : NULL;
    bb_node *b = m ? bm_node(m, "Twice", "Interval", 1) : NULL;
    if (a && b)
        b->outputs.v[0] = a->outputs.v[0];
    return m;
}

static bb_model *bm_unpaired_request(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "Asker");
    bb_rec *g = bb_module_body(mod);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    bb_val peers = bb_rec_input(g, "peers", &BB_TYPE_PEER_ID_VEC);
    bb_val req_id, responses;
    bb_wire_send_req_batched(g, NULL, "ask", x, peers, 0, 0, &req_id, NULL);
    bb_wire_recv_resp_batched(g, NULL, req_id, NULL, &responses);
    bb_sys_app_emit(g, responses, "answers");
    return fx_build(r, mod, err);
}

static bb_model *bm_missing_type_info(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "Echo");
    bb_rec *g = bb_module_body(mod);
    bb_sys_app_emit(g, bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32), "x");
    bb_model *m = fx_build(r, mod, err);
    bb_function *f = m ? bm_fn(m, "Echo") : NULL;
    for (size_t i = 0; f && i < f->value_info.n; i++)
        if (strcmp(f->value_info.v[i]->name, "x") == 0)
            f->value_info.v[i]->type = NULL;
    return m;
}

static bb_model *bm_malformed_slot_metadata(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "Collector");
    bb_slot *agg = bb_rec_generic(mod, BB_ROLE_AGGREGATOR, "agg");
    bb_rec *g = bb_module_body(mod);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    bb_sys_app_emit(g, bb_role_aggregator_contribute(g, agg, x, BB_VAL_OMIT), "done");
    bb_model *m = fx_build(r, mod, err);
    bb_node *n = m ? bm_node(m, "Collector", "Contribute", 0) : NULL;
    if (n) {
        bb_kv_remove(&n->metadata, BB_META_REQUIRED_TRAIT);
        bb_kv_remove(&n->metadata, BB_META_SLOT_ID);
    }
    return m;
}

static bb_model *bm_cyclic_graph(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "Loop");
    bb_rec *g = bb_module_body(mod);
    bb_val a = bb_sys_pass_through(g, bb_sys_interval(g, 1000000000));
    bb_sys_app_notify(g, bb_sys_pass_through(g, a), "tick");
    bb_model *m = fx_build(r, mod, err);
    bb_node *first = m ? bm_node(m, "Loop", "PassThrough", 0) : NULL;
    bb_node *second = m ? bm_node(m, "Loop", "PassThrough", 1) : NULL;
    if (first && second)
        first->inputs.v[0] = second->outputs.v[0];
    return m;
}

static bb_model *bm_opset_not_imported(bb_error *err)
{
    bb_model *m = bm_ticker(err);
    bb_opset_list *lists[2] = {m ? &m->opset_imports : NULL,
                               m && bm_fn(m, "Ticker") ? &bm_fn(m, "Ticker")->opset_imports : NULL};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; lists[k] && i < lists[k]->n;) {
            if (strcmp(lists[k]->v[i].domain, BB_DOMAIN_SYSCALL) == 0)
                BB_VEC_REMOVE(lists[k], i);
            else
                i++;
        }
    return m;
}

/* ---- CompileError ------------------------------------------------------------------- */

static bb_model *bm_expansion_failed(bb_error *err)
{
    bb_model *m = bm_ticker(err);
    bb_node *n = m ? bm_node(m, "Ticker", "Interval", 0) : NULL;
    if (n)
        n->attrs.n = 0; /* drop the required period_ns */
    return m;
}

/* LoadParameters on a bbctest::Dependent, which declares only Params. */
static bb_model *bm_role_method_failed(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "Reloader");
    bb_rec_concrete(mod, BB_ROLE_BACKEND, "backend", "cpu::CpuBackend", "{}", NULL);
    bb_slot *model = bb_rec_concrete(mod, BB_ROLE_MODEL, "model", "bbctest::Dependent", "{}", NULL);
    bb_rec *g = bb_module_body(mod);
    bb_val p = bb_role_model_params(g, model);
    bb_sys_app_emit(g, bb_role_model_load_parameters(g, model, p), "loaded");
    return fx_build(r, mod, err);
}

/* Two slots hold cpu::CpuBackend and the Add names neither. */
static bb_model *bm_ambiguous_role(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "TwoBackends");
    bb_slot *a = bb_rec_concrete(mod, BB_ROLE_BACKEND, "left", "cpu::CpuBackend", "{}", NULL);
    bb_slot *b = bb_rec_concrete(mod, BB_ROLE_BACKEND, "right", "cpu::CpuBackend", "{}", NULL);
    bb_rec *g = bb_module_body(mod);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    bb_rec_output(g, "y", bb_onnx_add(g, a, x, x));
    bb_rec_output(g, "z", bb_onnx_mul(g, b, x, x));
    bb_model *m = fx_build(r, mod, err);
    bb_node *n = m ? bm_node(m, "TwoBackends", "Add", 0) : NULL;
    if (n)
        bb_kv_remove(&n->metadata, BB_META_SLOT);
    return m;
}

/* A root that composes a class module and a class-less helper that
 * exchanges nothing with it. */
static bb_model *bm_unresolved_peer_class(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *root = bb_rec_module(r, "Deployment");
    bb_module *server = bb_rec_class_module(r, "Server");
    bb_module *helper = bb_rec_module(r, "Helper");
    bb_rec *gs = bb_module_body(server);
    bb_sys_app_notify(gs, bb_sys_interval(gs, 1000000000), "server_tick");
    bb_rec *gh = bb_module_body(helper);
    bb_sys_app_notify(gh, bb_sys_interval(gh, 1000000000), "helper_tick");
    bb_rec *g = bb_module_body(root);
    bb_call_build(bb_rec_call(g, server));
    bb_call_build(bb_rec_call(g, helper));
    return fx_build(r, root, err);
}

/* A Server value handed to a Client node through the root, not the wire. */
static bb_model *bm_cross_class_dataflow(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *root = bb_rec_module(r, "Deployment");
    bb_module *server = bb_rec_class_module(r, "Server");
    bb_module *client = bb_rec_class_module(r, "Client");
    bb_rec *gs = bb_module_body(server);
    bb_rec_output(gs, "tick", bb_sys_interval(gs, 1000000000));
    bb_rec *gc = bb_module_body(client);
    bb_sys_app_notify(gc, bb_rec_input(gc, "tick", &BB_TYPE_TIMESTAMP), "client_tick");
    bb_rec *g = bb_module_body(root);
    bb_call *cs = bb_rec_call(g, server);
    bb_call_build(cs);
    bb_call *cc = bb_rec_call(g, client);
    bb_call_input(cc, "tick", bb_call_output(cs, "tick"));
    bb_call_build(cc);
    return fx_build(r, root, err);
}

static bb_model *bm_ir_version_mismatch(bb_error *err)
{
    bb_model *m = bm_ticker(err);
    if (m)
        m->ir_version = 9;
    return m;
}

/* A Contribute names slot "ghost", which no module declares. */
static bb_model *bm_missing_binding(bb_error *err)
{
    bb_model *m = bm_malformed_slot_metadata(err);
    bb_node *n = m ? bm_node(m, "Collector", "Contribute", 0) : NULL;
    if (n) {
        bb_kv_set(m->arena, &n->metadata, BB_META_REQUIRED_TRAIT, "Aggregator");
        bb_kv_set(m->arena, &n->metadata, BB_META_SLOT_ID, "7");
        bb_kv_set(m->arena, &n->metadata, BB_META_SLOT, "ghost");
    }
    return m;
}

/* A plain ONNX graph: no FunctionProto to compile. */
static bb_model *bm_empty_function_table(bb_error *err)
{
    (void)err;
    bb_model *m = bb_model_new();
    if (!m)
        return NULL;
    m->ir_version = BB_FRAMEWORK_IR_VERSION;
    bb_opset_list_add(m->arena, &m->opset_imports, "", 17);
    m->graph = bb_graph_new(m->arena, "just_a_graph");
    bb_node *n = bb_graph_add_node(m->arena, m->graph, "", "Identity");
    bb_str_list_push(m->arena, &n->inputs, "x");
    bb_str_list_push(m->arena, &n->outputs, "y");
    bb_value_info **in = BB_VEC_PUSH(m->arena, &m->graph->inputs);
    *in = bb_value_info_new(m->arena, "x", bb_type_proto_tensor(m->arena, BB_DT_FLOAT));
    bb_value_info **out = BB_VEC_PUSH(m->arena, &m->graph->outputs);
    *out = bb_value_info_new(m->arena, "y", bb_type_proto_tensor(m->arena, BB_DT_FLOAT));
    return m;
}

/* The Send claims a DeadlineCheck ("forged") that does not exist, so
 * insert_async_deadlines leaves it alone. */
static bb_model *bm_runtime_incomplete(bb_error *err)
{
    bb_model *m = bm_sender(err);
    bb_node *n = m ? bm_node(m, "Sender", "Send", 0) : NULL;
    if (n)
        bb_kv_set(m->arena, &n->metadata, "ai.bytesandbrains.deadline_check", "forged");
    return m;
}

/* The Send claims its PeerHealthGateTx is in place (the idempotence stamp)
 * when it is not: the gate pass skips it and the final pre-flight trips. */
static bb_model *bm_internal(bb_error *err)
{
    bb_model *m = bm_sender(err);
    bb_node *n = m ? bm_node(m, "Sender", "Send", 0) : NULL;
    if (n)
        bb_kv_set(m->arena, &n->metadata, BB_META_PEER_HEALTH_TX_GATED, BB_META_GATED_VALUE);
    return m;
}

/* Add(u64, f32) on a tensor backend. */
static bb_model *bm_type_constraint_failed(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "BadAdd");
    bb_slot *be = bb_rec_concrete(mod, BB_ROLE_BACKEND, "compute", "cpu::CpuBackend", "{}", NULL);
    bb_rec *g = bb_module_body(mod);
    bb_val count = bb_rec_input(g, "count", &BB_TYPE_U64);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    bb_rec_output(g, "y", bb_onnx_add(g, be, count, x));
    return fx_build(r, mod, err);
}

/* An input of the polymorphic tensor type nothing narrows. */
static bb_model *bm_unresolved_type(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "Vague");
    bb_rec *g = bb_module_body(mod);
    bb_sys_app_emit(g, bb_sys_pass_through(g, bb_rec_input(g, "anything", &BB_TYPE_TENSOR)),
                    "out");
    return fx_build(r, mod, err);
}

/* bbctest::Dependent needs a Backend at slot "backend"; none is declared. */
static bb_model *bm_unbound_dependency(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "Lonely");
    bb_slot *model = bb_rec_concrete(mod, BB_ROLE_MODEL, "model", "bbctest::Dependent", "{}", NULL);
    bb_rec *g = bb_module_body(mod);
    bb_sys_app_emit(g, bb_role_model_params(g, model), "params");
    return fx_build(r, mod, err);
}

/* A generic Backend slot "compute" no binding fills. */
static bb_model *bm_unbound_slot(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "Adder");
    bb_slot *be = bb_rec_generic(mod, BB_ROLE_BACKEND, "compute");
    bb_rec *g = bb_module_body(mod);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    bb_val y = bb_rec_input(g, "y", &BB_TYPE_TENSOR_F32);
    bb_rec_output(g, "z", bb_onnx_add(g, be, x, y));
    return fx_build(r, mod, err);
}

/* The Server sends f32 on port "w"; the Client looks it up as u8. */
static bb_model *bm_incompatible_storage(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *root = bb_rec_module(r, "Deployment");
    bb_module *server = bb_rec_class_module(r, "Server");
    bb_module *client = bb_rec_class_module(r, "Client");
    bb_slot *sel = bb_rec_generic(server, BB_ROLE_PEER_SELECTOR, "selector");
    bb_rec *gs = bb_module_body(server);
    static const float W[2] = {0.5f, 0.25f};
    bb_tensor_proto t = {.data_type = BB_DT_FLOAT,
                         .raw_data = {(uint8_t *)W, sizeof W},
                         .has_raw_data = true};
    int64_t dims[1] = {2};
    t.dims.v = dims;
    t.dims.n = t.dims.cap = 1;
    bb_val w = bb_sys_constant(gs, &t);
    bb_rec_net_out(gs, "w", bb_role_peer_selector_sample(gs, sel, 2, "Client"), w);
    bb_rec *gc = bb_module_body(client);
    bb_sys_app_emit(gc, bb_rec_lookup_output(gc, "w", &BB_TYPE_TENSOR_U8), "w");
    bb_rec *g = bb_module_body(root);
    bb_call_build(bb_rec_call(g, server));
    bb_call_build(bb_rec_call(g, client));
    return fx_build(r, root, err);
}

/* The bootstrap calls user.app::Ghost, which no function defines. */
static bb_model *bm_bootstrap_gap(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "Starter");
    bb_rec *g = bb_module_body(mod);
    bb_sys_app_notify(g, bb_sys_interval(g, 1000000000), "tick");
    bb_rec *boot = bb_module_bootstrap(mod);
    bb_sys_app_notify(boot, bb_sys_pulse(boot), "booted");
    bb_model *m = fx_build(r, mod, err);
    bb_node *n = m ? bm_node(m, "Starter__bootstrap", "AppNotify", 0) : NULL;
    if (n) {
        n->domain = bb_model_str(m, "user.app");
        n->op_type = bb_model_str(m, "Ghost");
    }
    return m;
}

/* The bootstrap calls Warmup, which calls itself. */
static bb_model *bm_bootstrap_cycle(bb_error *err)
{
    bb_model *m = bm_bootstrap_gap(err);
    if (!m)
        return NULL;
    bb_function *w = bb_model_add_function(m, "user.app", "Warmup");
    bb_node *self = bb_function_add_node(m, w, "user.app", "Warmup");
    bb_str_list_push(m->arena, &self->inputs, "t");
    bb_str_list_push(m->arena, &w->inputs, "t");
    bb_value_info **vi = BB_VEC_PUSH(m->arena, &w->value_info);
    *vi = bb_value_info_new(m->arena, "t", bb_type_to_proto(m->arena, &BB_TYPE_TRIGGER));
    bb_opset_list_add(m->arena, &w->opset_imports, "user.app", 1);
    bb_node *call = bm_node(m, "Starter__bootstrap", "Ghost", 0);
    call->op_type = bb_model_str(m, "Warmup");
    return m;
}

static bb_model *bm_wrong_role(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "Misbound");
    bb_slot *agg = bb_rec_concrete(mod, BB_ROLE_AGGREGATOR, "agg", "cpu::CpuBackend", "{}", NULL);
    bb_rec *g = bb_module_body(mod);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    bb_sys_app_emit(g, bb_role_aggregator_contribute(g, agg, x, BB_VAL_OMIT), "done");
    return fx_build(r, mod, err);
}

static bb_model *bm_unknown_component_type(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "Missing");
    bb_slot *agg = bb_rec_concrete(mod, BB_ROLE_AGGREGATOR, "agg", "nope::Nothing", "{}", NULL);
    bb_rec *g = bb_module_body(mod);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    bb_sys_app_emit(g, bb_role_aggregator_contribute(g, agg, x, BB_VAL_OMIT), "done");
    return fx_build(r, mod, err);
}

/* Server and Client both declare slot "agg", with different types. */
static bb_model *bm_slot_conflict(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *root = bb_rec_module(r, "Deployment");
    const char *cls[2] = {"Server", "Client"};
    const char *types[2] = {"example::Counter", "nope::OtherCounter"};
    bb_rec *g = bb_module_body(root);
    for (int k = 0; k < 2; k++) {
        bb_module *m = bb_rec_class_module(r, cls[k]);
        bb_slot *agg = bb_rec_concrete(m, BB_ROLE_AGGREGATOR, "agg", types[k], "{}", NULL);
        bb_rec *gm = bb_module_body(m);
        bb_val x = bb_role_aggregator_current_tensor(gm, agg, bb_sys_interval(gm, 1000000000));
        bb_sys_app_emit(gm, x, "current");
        bb_call_build(bb_rec_call(g, m));
    }
    return fx_build(r, root, err);
}

/* ---- the table ------------------------------------------------------------------ */

static const bm_case BM_CASES[] = {
    {"unknown_op.onnx", "UnknownOp", "validate", {NULL},
     {"function 'Ticker'", "node 'Frobnicate_0' (ai.bytesandbrains.syscall::Frobnicate)"},
     bm_unknown_op},
    {"dangling_input.onnx", "DanglingInput", "validate", {NULL},
     {"node 'AppNotify_0' (ai.bytesandbrains.syscall::AppNotify) input 0 reads 'nowhere'"},
     bm_dangling_input},
    {"duplicate_output.onnx", "DuplicateOutput", "validate", {NULL},
     {"value 'site_1' is written by 'Interval_0' and by 'Interval_1'"}, bm_duplicate_output},
    {"unpaired_wire_request.onnx", "UnpairedWireRequest", "validate", {NULL},
     {"SendReqBatched 'SendReqBatched_0' (port 'ask')", "answered by 0 SendResp"},
     bm_unpaired_request},
    {"missing_type_info.onnx", "MissingTypeInfo", "validate", {NULL},
     {"function 'Echo': input 'x' has no value_info type"}, bm_missing_type_info},
    {"malformed_slot_metadata.onnx", "MalformedSlotMetadata", "validate", {NULL},
     {"node 'Contribute_0' (ai.bytesandbrains.role.aggregator::Contribute)",
      "neither (concrete_type, instance) nor (required_trait, slot_id)"},
     bm_malformed_slot_metadata},
    {"cyclic_graph.onnx", "CyclicGraph", "validate", {NULL},
     {"function 'Loop'", "cycle involving 'PassThrough_0', 'PassThrough_1'"}, bm_cyclic_graph},
    {"opset_not_imported.onnx", "OpsetNotImported", "validate", {NULL},
     {"node 'Interval_0' (ai.bytesandbrains.syscall::Interval)",
      "domain 'ai.bytesandbrains.syscall'"},
     bm_opset_not_imported},
    {"expansion_failed.onnx", "ExpansionFailed", "expand_ops", {NULL},
     {"node 'Interval_0' (ai.bytesandbrains.syscall::Interval)",
      "required attribute 'period_ns'"},
     bm_expansion_failed},
    {"role_method_failed.onnx", "RoleMethodFailed", "resolve_slots", {NULL},
     {"node 'LoadParameters_0' runs ai.bytesandbrains.role.model::LoadParameters on slot 'model'",
      "'bbctest::Dependent' declares no such op"},
     bm_role_method_failed},
    {"ambiguous_role.onnx", "AmbiguousRole", "resolve_slots", {NULL},
     {"node 'Add_0' (ai.onnx::Add)", "'cpu::CpuBackend' but 2 slots hold that type"},
     bm_ambiguous_role},
    {"unresolved_peer_class.onnx", "UnresolvedPeerClass", "infer_peer_classes", {NULL},
     {"node 'Helper/Interval_0' (ai.bytesandbrains.syscall::Interval)",
      "belongs to no peer class"},
     bm_unresolved_peer_class},
    {"cross_class_dataflow.onnx", "CrossClassDataflow", "infer_peer_classes", {NULL},
     {"class Client", "class Server", "without a wire op"}, bm_cross_class_dataflow},
    {"ir_version_mismatch.onnx", "IrVersionMismatch", "pipeline", {NULL},
     {"ir_version 9, the target is 10"}, bm_ir_version_mismatch},
    {"missing_binding.onnx", "MissingBinding", "resolve_slots", {NULL},
     {"node 'Contribute_0' (ai.bytesandbrains.role.aggregator::Contribute)",
      "slot 'ghost', which no module declares"},
     bm_missing_binding},
    {"empty_function_table.onnx", "EmptyFunctionTable", "pipeline", {NULL},
     {"the model has no functions"}, bm_empty_function_table},
    {"runtime_incomplete.onnx", "RuntimeIncomplete", "validate_runtime_complete", {NULL},
     {"partition `@self`: Send 'Send_0' carries deadline_ns but no DeadlineCheck"},
     bm_runtime_incomplete},
    {"internal.onnx", "Internal", "validate_runtime_complete", {NULL},
     {"partition `@self`: Send 'Send_0' has no PeerHealthGateTx"}, bm_internal},
    {"type_constraint_failed.onnx", "TypeConstraintFailed", "type_solver", {NULL},
     {"node 'Add_0' (ai.onnx::Add) input 0", "'count' is U64"}, bm_type_constraint_failed},
    {"unresolved_type.onnx", "UnresolvedType", "type_solver", {NULL},
     {"function 'Vague': value 'anything'", "stays tensor"}, bm_unresolved_type},
    {"unbound_dependency.onnx", "UnboundDependency", "resolve_component_dependencies", {NULL},
     {"component 'bbctest::Dependent' bound at slot 'model'",
      "depends on role Backend at slot 'backend', which is not bound"},
     bm_unbound_dependency},
    {"unbound_slot.onnx", "UnboundSlot", "validate_all_slots_bound", {NULL},
     {"partition `@self`: slot 'compute' (Backend) has no binding"}, bm_unbound_slot},
    {"incompatible_storage_on_edge.onnx", "IncompatibleStorageOnEdge", "type_solver", {NULL},
     {"(port 'w')", "tensor_f32", "tensor_u8"}, bm_incompatible_storage},
    {"bootstrap_composition_gap.onnx", "BootstrapCompositionGap",
     "validate_bootstrap_composition", {NULL},
     {"bootstrap 'Starter__bootstrap'", "calls target user.app::Ghost, which has no FunctionProto"},
     bm_bootstrap_gap},
    {"bootstrap_composition_cycle.onnx", "BootstrapCompositionCycle",
     "validate_bootstrap_composition", {NULL},
     {"bootstrap 'Starter__bootstrap' reaches a call cycle: Warmup -> Warmup"},
     bm_bootstrap_cycle},
    {"wrong_role.onnx", "WrongRole", "bind", {NULL},
     {"slot 'agg' needs role Aggregator but 'cpu::CpuBackend' (recorded) has role Backend"},
     bm_wrong_role},
    {"unknown_component_type.onnx", "UnknownComponentType", "bind", {NULL},
     {"slot 'agg' is bound to 'nope::Nothing' (recorded), which no plugin exports"},
     bm_unknown_component_type},
    {"slot_conflict.onnx", "SlotConflict", "bind", {NULL},
     {"slot 'agg' is declared as 'example::Counter' and as 'nope::OtherCounter'"},
     bm_slot_conflict},
    {"stage_failed.onnx", "StageFailed", "refuse_on_purpose", {"--stage", BM_TYPES, NULL},
     {"partition `@self`: refusing partition '@self' on purpose"}, bm_ticker},
};

#define BM_N_CASES (sizeof BM_CASES / sizeof BM_CASES[0])

#endif
