/*
 * test_compile_examples.c — the whole compiler (bbc_compile) over the two
 * example programs (the federated round and split learning, recorded by
 * bbc_programs.h as the examples first recorded them), with component
 * types supplied in-process (bbc_fixture.h): partitions, gate chains,
 * deadlines, binding metadata,
 * passport, idempotence (the whole pipeline on its own output, and every
 * pass run twice in a row), stages, bindings files and the error surface.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "bbc_fixture.h"
#include "bbc_programs.h"

/* A fixture program (bbc_programs.h) as bbc reads it, with one binding (may
 * be NULL), checked after each pass. */
static void setup_compile(fx_compiled *c, const char *program, const char *binding)
{
    bb_error e = {0};
    bb_model *in = fx_program_loaded(program, &e);
    if (!in)
        fail_msg("%s: %s", program, e.msg);
    assert_int_equal(fx_compiled_init(c, in, binding), BB_OK);
    c->o.verify_each = true;
}

static void compile_ok(fx_compiled *c)
{
    if (fx_compiled_run(c) != BB_OK)
        fail_msg("compile failed: %s: %s: %s", c->err.pass, bbc_errkind_name(c->err.kind),
                 c->err.msg);
}

static const char *meta(const bb_model *m, const char *k)
{
    return bb_kv_get(&m->metadata, k);
}

/* ---- federated ----------------------------------------------------------------- */

static void test_federated_partitions(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "federated", NULL);
    compile_ok(&c);
    bb_model *o = c.out;
    assert_non_null(fx_fn(o, "Server"));
    assert_non_null(fx_fn(o, "Client"));
    assert_non_null(fx_fn(o, "Server__bootstrap"));
    assert_null(fx_fn(o, "Federated")); /* the root is gone: partitions only */
    assert_int_equal(o->functions.n, 3);
    assert_non_null(o->graph);
    assert_int_equal(o->graph->nodes.n, 0);
    assert_string_equal(meta(o, BB_META_COMPILED), "v1");
    assert_int_equal(o->ir_version, BB_FRAMEWORK_IR_VERSION);
    /* Every node of a partition is homed in it. */
    const char *cls[] = {"Server", "Client"};
    for (int k = 0; k < 2; k++) {
        const bb_function *f = fx_fn(o, cls[k]);
        for (size_t i = 0; i < f->nodes.n; i++)
            assert_string_equal(bbc_meta(f->nodes.v[i], BB_META_HOME_CLASS), cls[k]);
        char id[64];
        snprintf(id, sizeof id, "%s#%s", cls[k], bb_kv_get(&f->metadata, BB_META_PARTITION_HASH));
        assert_int_equal(strlen(bb_kv_get(&f->metadata, BB_META_PARTITION_HASH)), 16);
        assert_string_equal(bb_kv_get(&f->metadata, BB_META_PARTITION_ID), id);
    }
    /* The server's wire ops stay on the server, the client's on the client. */
    assert_non_null(fx_find(fx_fn(o, "Server"), "SendReqBatched", 0));
    assert_non_null(fx_find(fx_fn(o, "Server"), "RecvRespBatched", 0));
    assert_non_null(fx_find(fx_fn(o, "Client"), "RecvReq", 0));
    assert_non_null(fx_find(fx_fn(o, "Client"), "SendResp", 0));
    assert_null(fx_find(fx_fn(o, "Client"), "Aggregate", 0));
    /* opset_import covers every domain any node uses. */
    static const char *const DOMS[] = {BB_DOMAIN_SYSCALL, BB_DOMAIN_WIRE, BB_DOMAIN_ROLE_MODEL,
                                       BB_DOMAIN_ROLE_AGGREGATOR, BB_DOMAIN_COMPOSITE,
                                       BB_DOMAIN_ROLE_PEER_SELECTOR};
    for (size_t i = 0; i < sizeof DOMS / sizeof *DOMS; i++)
        assert_true(bb_opset_list_version(&o->opset_imports, DOMS[i]) >= 1);
    fx_compiled_free(&c);
}

static void test_federated_bindings(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "federated", NULL);
    compile_ok(&c);
    bb_model *o = c.out;
    const char *model = meta(o, "ai.bytesandbrains.binding.Server.model");
    assert_non_null(model);
    bb_binding_triple t;
    bb_error e;
    assert_int_equal(bb_binding_triple_parse(o->arena, model, &t, &e), BB_OK);
    assert_string_equal(t.role, "Model");
    assert_string_equal(t.type_name, "nn::Mlp");
    /* Shared slots agree across targets (one ComponentRef per slot). */
    assert_string_equal(meta(o, "ai.bytesandbrains.binding.Client.model"), model);
    assert_string_equal(meta(o, "ai.bytesandbrains.binding.Server.aggregator"),
                        "Aggregator|agg::FedAvg|2");
    assert_non_null(meta(o, "ai.bytesandbrains.binding.Server.selector"));
    assert_non_null(meta(o, "ai.bytesandbrains.binding.Client.data"));
    assert_non_null(meta(o, "ai.bytesandbrains.binding.Client.backend"));
    /* The client neither declares nor needs the aggregator or selector. */
    assert_null(meta(o, "ai.bytesandbrains.binding.Client.aggregator"));
    assert_null(meta(o, "ai.bytesandbrains.binding.Client.selector"));
    /* Every role node carries the slot id of its binding. */
    const bb_function *s = fx_fn(o, "Server");
    const bb_node *agg = fx_find(s, "Aggregate", 0);
    assert_string_equal(bbc_meta(agg, BB_META_SLOT_ID), "2");
    const bb_node *boot = fx_find(fx_fn(o, "Server__bootstrap"), "Params", 0);
    assert_string_equal(bbc_meta(boot, BB_META_SLOT_ID), "1");
    assert_non_null(boot->name);
    fx_compiled_free(&c);
}

/* Recv -> DedupGateRx -> PeerHealthGateRx -> BackoffGateRx -> consumer, off
 * the receive op's payload; returns the receive. */
static const bb_node *check_rx_chain(const bb_function *f, const char *op, const char *consumer)
{
    const bb_node *rx = fx_find(f, op, 0);
    const bb_node *use = fx_find(f, consumer, 0);
    assert_non_null(rx);
    assert_non_null(use);
    const bb_node *b = fx_producer(f, use->inputs.v[0]);
    assert_string_equal(b->op_type, "BackoffGateRx");
    const bb_node *p = fx_producer(f, b->inputs.v[0]);
    assert_string_equal(p->op_type, "PeerHealthGateRx");
    const bb_node *d = fx_producer(f, p->inputs.v[0]);
    assert_string_equal(d->op_type, "DedupGateRx");
    assert_ptr_equal(fx_producer(f, d->inputs.v[0]), rx);
    assert_string_equal(d->inputs.v[0], rx->outputs.v[1]);
    assert_string_equal(bbc_meta(d, BB_META_DEDUP_RX_SOURCE), rx->name);
    assert_string_equal(bbc_meta(p, BB_META_PEER_HEALTH_RX_SOURCE), rx->name);
    assert_string_equal(bbc_meta(b, BB_META_BACKOFF_RX_SOURCE), rx->name);
    assert_string_equal(bbc_meta(rx, BB_META_RX_CHAIN_HEAD), b->outputs.v[0]);
    assert_string_equal(bbc_meta(rx, BB_META_DEDUP_RX_GATED), "true");
    assert_string_equal(bbc_meta(rx, BB_META_PEER_HEALTH_RX_GATED), "true");
    assert_string_equal(bbc_meta(rx, BB_META_BACKOFF_RX_GATED), "true");
    char want[256];
    snprintf(want, sizeof want, "%s#dedup_rx_out", rx->name);
    assert_string_equal(d->outputs.v[0], want);
    /* Gates run in chain order in the body. */
    assert_true(bbc_node_index(f, rx) < bbc_node_index(f, d));
    assert_true(bbc_node_index(f, d) < bbc_node_index(f, p));
    assert_true(bbc_node_index(f, p) < bbc_node_index(f, b));
    assert_true(bbc_node_index(f, b) < bbc_node_index(f, use));
    return rx;
}

static void test_federated_rx_chain(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "federated", NULL);
    compile_ok(&c);
    const bb_function *f = fx_fn(c.out, "Client");
    /* LoadParameters <- BackoffGateRx <- PeerHealthGateRx <- DedupGateRx <- RecvReq.payload */
    const bb_node *rx = check_rx_chain(f, "RecvReq", "LoadParameters");
    const bb_node *load = fx_find(f, "LoadParameters", 0);
    /* The payload feeds the model: RECV_SLOT_ID = model's slot id. */
    assert_string_equal(bbc_meta(rx, BB_META_RECV_SLOT_ID), bbc_meta(load, BB_META_SLOT_ID));
    assert_string_equal(bbc_meta(rx, BB_META_WIRE_TRANSPORT), "data");
    /* The request's pairing is linked by site name both ways. */
    assert_string_equal(bbc_meta(rx, BB_META_SRC_SITE), "Server/SendReqBatched_0");
    /* The response comes back through the engine's collector: no RX chain. */
    assert_int_equal(fx_count(fx_fn(c.out, "Server"), "DedupGateRx"), 0);
    fx_compiled_free(&c);
}

static void check_tx_chain(const bb_function *f, const char *op)
{
    const bb_node *s = fx_find(f, op, 0);
    assert_non_null(s);
    const bb_node *b = fx_producer(f, s->inputs.v[0]);
    assert_non_null(b);
    assert_string_equal(b->op_type, "BackoffGateTx");
    const bb_node *p = fx_producer(f, b->inputs.v[0]);
    assert_string_equal(p->op_type, "PeerHealthGateTx");
    assert_string_equal(bbc_meta(b, BB_META_BACKOFF_TX_SOURCE), s->name);
    assert_string_equal(bbc_meta(p, BB_META_PEER_HEALTH_TX_SOURCE), s->name);
    char want[256];
    snprintf(want, sizeof want, "%s#backoff_tx_gated", s->name);
    assert_string_equal(s->inputs.v[0], want);
    snprintf(want, sizeof want, "%s#peer_health_tx_gated", s->name);
    assert_string_equal(b->inputs.v[0], want);
    assert_string_equal(bbc_meta(s, BB_META_PEER_HEALTH_TX_GATED), "true");
    assert_string_equal(bbc_meta(s, BB_META_BACKOFF_TX_GATED), "true");
    /* The DeadlineCheck guards the head of the chain. */
    const bb_node *dc = fx_producer(f, p->inputs.v[0]);
    assert_string_equal(dc->op_type, BB_OP_DEADLINE_CHECK);
    assert_string_equal(bbc_meta(dc, BB_META_DEADLINE_SOURCE), s->name);
}

static void test_federated_tx_chains(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "federated", NULL);
    compile_ok(&c);
    check_tx_chain(fx_fn(c.out, "Server"), "SendReqBatched");
    check_tx_chain(fx_fn(c.out, "Client"), "SendResp");
    /* The gates forward the data; the selector's peers stay on the send. */
    const bb_function *s = fx_fn(c.out, "Server");
    const bb_node *ph = fx_find(s, "PeerHealthGateTx", 0);
    assert_int_equal(ph->inputs.n, 1);
    assert_ptr_equal(bbc_value_type(s, ph->outputs.v[0]), &BB_TYPE_TENSOR_F32);
    const bb_node *req = fx_find(s, "SendReqBatched", 0);
    assert_string_equal(fx_producer(s, req->inputs.v[1])->op_type, "Sample");
    fx_compiled_free(&c);
}

static const bb_attr *slot_state(const bb_function *f, const char *slot)
{
    for (size_t i = 0; f && i < f->attribute_protos.n; i++)
        if (bbc_str_eq(f->attribute_protos.v[i]->name, slot))
            return f->attribute_protos.v[i];
    return NULL;
}

static void assert_state(const bb_function *f, const char *slot, const char *json)
{
    const bb_attr *a = slot_state(f, slot);
    assert_non_null(a);
    assert_int_equal(a->s.len, strlen(json));
    assert_memory_equal(a->s.data, json, a->s.len);
}

/* Two classes configuring one slot name differently each keep their own
 * construction state, also when the output is compiled again. */
static void test_per_class_construction_state(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "federated", NULL);
    static const char CLIENT_CFG[] = "{\"layers\":[4,8,3],\"seed\":11}";
    bb_attr *a = (bb_attr *)slot_state(fx_fn(c.in, "Client"), "model");
    assert_non_null(a);
    a->s.data = (uint8_t *)bb_model_str(c.in, CLIENT_CFG);
    a->s.len = strlen(CLIENT_CFG);
    const bb_attr *server = slot_state(fx_fn(c.in, "Server"), "model");
    char server_cfg[256];
    snprintf(server_cfg, sizeof server_cfg, "%.*s", (int)server->s.len, (const char *)server->s.data);
    compile_ok(&c);
    assert_state(fx_fn(c.out, "Server"), "model", server_cfg);
    assert_state(fx_fn(c.out, "Client"), "model", CLIENT_CFG);
    /* Compiled again: still per class. */
    bb_model *again = NULL;
    bbc_error err;
    assert_int_equal(bbc_compile(c.out, &c.o, &c.b, &c.ts, NULL, 0, &again, &err), BB_OK);
    assert_state(fx_fn(again, "Server"), "model", server_cfg);
    assert_state(fx_fn(again, "Client"), "model", CLIENT_CFG);
    bb_model_free(again);
    fx_compiled_free(&c);
}

static void test_federated_deadlines(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "federated", NULL);
    compile_ok(&c);
    const bb_function *s = fx_fn(c.out, "Server");
    const bb_node *req = fx_find(s, "SendReqBatched", 0);
    assert_int_equal(bb_node_attr_int(req, "deadline_ns", 0), (int64_t)BBC_DEFAULT_PER_HOP_BUDGET_NS);
    const bb_node *resp = fx_find(s, "RecvRespBatched", 0);
    assert_int_equal(bb_node_attr_int(resp, "deadline_ns", 0), (int64_t)BBC_DEFAULT_PER_HOP_BUDGET_NS);
    assert_int_equal(fx_count(s, BB_OP_DEADLINE_CHECK), 2);
    assert_string_equal(bbc_meta(req, BB_META_DEST_CLASS), "Client");
    assert_string_equal(bbc_meta(req, BB_META_DEST_SITE), "Client/RecvReq_0");
    assert_string_equal(bbc_meta(req, BB_META_WIRE_BATCH), "Client");
    /* A smaller budget reaches every stamp. */
    c.o.per_hop_budget_ns = 250000000;
    compile_ok(&c);
    s = fx_fn(c.out, "Server");
    assert_int_equal(bb_node_attr_int(fx_find(s, "SendReqBatched", 0), "deadline_ns", 0), 250000000);
    const bb_node *dc = fx_find(s, BB_OP_DEADLINE_CHECK, 0);
    assert_int_equal(bb_node_attr_int(dc, "deadline_ns", 0), 250000000);
    const bb_function *cl = fx_fn(c.out, "Client");
    assert_int_equal(bb_node_attr_int(fx_find(cl, "SendResp", 0), "deadline_ns", 0), 250000000);
    assert_string_equal(bbc_meta(fx_find(cl, "SendResp", 0), BB_META_DEST_CLASS), "Server");
    fx_compiled_free(&c);
}

static void assert_same_bytes(const bb_model *a, const bb_model *b)
{
    uint8_t *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    bb_error e = {0};
    assert_int_equal(bb_model_save_mem(a, &x, &nx, &e), BB_OK);
    assert_int_equal(bb_model_save_mem(b, &y, &ny, &e), BB_OK);
    if (nx != ny || memcmp(x, y, nx) != 0) {
        bb_model_dump(a, stderr);
        bb_model_dump(b, stderr);
    }
    assert_int_equal(nx, ny);
    assert_memory_equal(x, y, nx);
    free(x);
    free(y);
}

static void idempotent(const char *path, const char *bind)
{
    fx_compiled c;
    setup_compile(&c, path, bind);
    compile_ok(&c);
    /* Through bytes, as a user would: save, load, compile again. */
    uint8_t *buf = NULL;
    size_t len = 0;
    bb_error e = {0};
    assert_int_equal(bb_model_save_mem(c.out, &buf, &len, &e), BB_OK);
    bb_model *again = NULL, *twice = NULL;
    assert_int_equal(bb_model_load_mem(buf, len, "compiled", &again, &e), BB_OK);
    free(buf);
    bbc_error err;
    int rc = bbc_compile(again, &c.o, &c.b, &c.ts, NULL, 0, &twice, &err);
    if (rc != BB_OK)
        fail_msg("recompile: %s: %s: %s", err.pass, bbc_errkind_name(err.kind), err.msg);
    assert_same_bytes(c.out, twice);
    bb_model_free(again);
    bb_model_free(twice);
    fx_compiled_free(&c);
}

/* The state's IR as bytes: the working model before partitioning, every
 * partition model after, the merged output once it exists. */
static size_t snapshot(const bbc_state *st, uint8_t **out)
{
    size_t total = 0;
    *out = NULL;
    const bb_model *models[64];
    size_t n = 0;
    if (st->out)
        models[n++] = st->out;
    else if (st->parts.n == 0)
        models[n++] = st->model;
    for (size_t i = 0; !st->out && i < st->parts.n && n < 64; i++)
        models[n++] = st->parts.v[i]->model;
    for (size_t i = 0; i < n; i++) {
        uint8_t *b = NULL;
        size_t len = 0;
        bb_error e = {0};
        assert_int_equal(bb_model_save_mem(models[i], &b, &len, &e), BB_OK);
        *out = realloc(*out, total + len + 1);
        memcpy(*out + total, b, len);
        total += len;
        free(b);
    }
    return total;
}

static void run_or_fail(fx_compiled *c, bbc_state *st, const bbc_pass *p, const char *path,
                        int round)
{
    if (bbc_run_pass(st, p) != BB_OK)
        fail_msg("%s: pass %s (run %d): %s: %s", path, p->name, round,
                 bbc_errkind_name(c->err.kind), c->err.msg);
    if (p->run == bbc_pass_synthesize_wire_recvs && bbc_check_wire_storage(st) != BB_OK)
        fail_msg("%s: wire storage check: %s", path, c->err.msg);
}

/* Every pass, run a second time right after itself, changes nothing. */
static void each_pass_idempotent(const char *path, const char *bind)
{
    fx_compiled c;
    setup_compile(&c, path, bind);
    bbc_state st;
    assert_int_equal(bbc_state_init(&st, bb_model_clone(c.in), &c.o, &c.b, &c.ts, &c.err), BB_OK);
    for (size_t i = 0; i < bbc_pass_count(); i++) {
        const bbc_pass *p = bbc_pass_at(i);
        uint8_t *once = NULL, *twice = NULL;
        run_or_fail(&c, &st, p, path, 1);
        size_t n1 = snapshot(&st, &once);
        run_or_fail(&c, &st, p, path, 2);
        size_t n2 = snapshot(&st, &twice);
        assert_true(n1 > 0);
        if (n1 != n2 || memcmp(once, twice, n1) != 0)
            fail_msg("%s: running %s a second time changed the IR (%zu -> %zu bytes)", path,
                     p->name, n1, n2);
        free(once);
        free(twice);
    }
    assert_non_null(st.out);
    bbc_state_free(&st);
    fx_compiled_free(&c);
}

static void test_each_pass_idempotent(void **state)
{
    (void)state;
    each_pass_idempotent("federated", NULL);
    each_pass_idempotent("split_learning", FX_SPLIT_LEARNING_BINDING);
}

static void test_idempotent_federated(void **state)
{
    (void)state;
    idempotent("federated", NULL);
}

static void test_idempotent_split_learning(void **state)
{
    (void)state;
    idempotent("split_learning", FX_SPLIT_LEARNING_BINDING);
}

/* ---- split learning ------------------------------------------------------------- */

static void test_split_learning_unbound_backend(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "split_learning", NULL);
    assert_int_equal(fx_compiled_run(&c), BB_ECOMPILE);
    assert_int_equal(c.err.kind, BBC_E_UNBOUND_SLOT);
    assert_string_equal(c.err.pass, "validate_all_slots_bound");
    assert_non_null(strstr(c.err.msg, "'backend'"));
    assert_non_null(strstr(c.err.msg, "Backend"));
    fx_compiled_free(&c);
}

static void test_split_learning_partitions(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "split_learning", FX_SPLIT_LEARNING_BINDING);
    compile_ok(&c);
    /* No peer classes: one partition on SELF_CLASS. */
    assert_int_equal(c.out->functions.n, 1);
    const bb_function *f = fx_fn(c.out, BB_SELF_CLASS);
    assert_non_null(f);
    const bb_node *send = fx_find(f, "SendReqBatched", 0);
    assert_string_equal(bbc_meta(send, BB_META_DEST_CLASS), BB_SELF_CLASS);
    assert_string_equal(fx_producer(f, send->inputs.v[0])->op_type, "BackoffGateTx");
    check_rx_chain(f, "Recv", "Decompress");
    check_tx_chain(f, "SendReqBatched");
    assert_string_equal(meta(c.out, "ai.bytesandbrains.binding.@self.backend"),
                        "Backend|cpu::CpuBackend|0");
    assert_string_equal(meta(c.out, "ai.bytesandbrains.binding.@self.network_client"),
                        "Protocol|framework_wire::BarrierNetworkReqResp|2");
    /* Types narrowed from the bound declarations. */
    assert_ptr_equal(bbc_value_type(f, fx_find(f, "Compress", 0)->outputs.v[0]), &BB_TYPE_TENSOR_U8);
    fx_compiled_free(&c);
}

static void test_bindings_file_config(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "split_learning", NULL);
    static const char JSON[] =
        "{\"bindings\": {\"backend\": {\"type\": \"cpu::CpuBackend\", \"config\": {\"threads\": 2}}}}";
    bb_error e = {0};
    assert_int_equal(bbc_bindings_load_json(&c.b, JSON, sizeof JSON - 1, "b.json", &e), BB_OK);
    compile_ok(&c);
    const bb_function *f = fx_fn(c.out, BB_SELF_CLASS);
    const bb_attr *ap = NULL;
    for (size_t i = 0; i < f->attribute_protos.n; i++)
        if (bbc_str_eq(f->attribute_protos.v[i]->name, "backend"))
            ap = f->attribute_protos.v[i];
    assert_non_null(ap);
    assert_int_equal(ap->s.len, strlen("{\"threads\":2}"));
    assert_memory_equal(ap->s.data, "{\"threads\":2}", ap->s.len);
    assert_int_equal(bb_str_list_find(&f->attributes, "backend"), -1);
    assert_string_equal(bb_kv_get(&f->metadata, "ai.bytesandbrains.concrete_type.backend"),
                        "cpu::CpuBackend");
    fx_compiled_free(&c);
}

static void test_wrong_role(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "split_learning", "backend=nn::Mlp");
    assert_int_equal(fx_compiled_run(&c), BB_ECOMPILE);
    assert_int_equal(c.err.kind, BBC_E_WRONG_ROLE);
    assert_non_null(strstr(c.err.msg, "slot 'backend' needs role Backend"));
    assert_non_null(strstr(c.err.msg, "'nn::Mlp'"));
    assert_non_null(strstr(c.err.msg, "has role Model"));
    fx_compiled_free(&c);
}

static void test_unknown_type(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "split_learning", "backend=nope::Nothing");
    assert_int_equal(fx_compiled_run(&c), BB_ECOMPILE);
    assert_int_equal(c.err.kind, BBC_E_UNKNOWN_COMPONENT_TYPE);
    assert_non_null(strstr(c.err.msg, "nope::Nothing"));
    fx_compiled_free(&c);
}

static void test_ir_version_mismatch(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "federated", NULL);
    c.o.target_ir_version = 11;
    assert_int_equal(fx_compiled_run(&c), BB_ECOMPILE);
    assert_int_equal(c.err.kind, BBC_E_IR_VERSION_MISMATCH);
    assert_non_null(strstr(c.err.msg, "11"));
    fx_compiled_free(&c);
}

/* ---- user stages ------------------------------------------------------------------ */

typedef struct stage_log {
    char seen[8][64];
    int n;
    int counter;
} stage_log;

static int tracing_stage(void *state, bb_model *partition, bb_error *err)
{
    stage_log *log = state;
    (void)err;
    const bb_function *f = partition->functions.v[0];
    if (log->n < 8)
        snprintf(log->seen[log->n++], 64, "trace:%s", f->name);
    for (size_t i = 0; i < partition->functions.n; i++) {
        const bb_function *g = partition->functions.v[i];
        for (size_t j = 0; j < g->nodes.n; j++) {
            bb_node *n = g->nodes.v[j];
            if (!bbc_is_wire_send(n))
                continue;
            char id[32];
            snprintf(id, sizeof id, "trace-%d", log->counter++);
            bb_kv_set(partition->arena, &n->metadata, "example.tracing_id", id);
        }
    }
    return BB_OK;
}

static int second_stage(void *state, bb_model *partition, bb_error *err)
{
    stage_log *log = state;
    (void)err;
    if (log->n < 8)
        snprintf(log->seen[log->n++], 64, "second:%s", partition->functions.v[0]->name);
    return BB_OK;
}

static int failing_stage(void *state, bb_model *partition, bb_error *err)
{
    (void)state;
    (void)partition;
    return bb_error_set(err, BB_EINVAL, "refusing on purpose");
}

static void test_user_stages(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "federated", NULL);
    stage_log log = {0};
    bb_stage s1 = {sizeof s1, "stamp_tracing_ids", tracing_stage, &log};
    bb_stage s2 = {sizeof s2, "second", second_stage, &log};
    const bb_stage *stages[] = {&s1, &s2};
    assert_int_equal(bbc_compile(c.in, &c.o, &c.b, &c.ts, stages, 2, &c.out, &c.err), BB_OK);
    /* Once per partition, in push order. */
    assert_int_equal(log.n, 4);
    assert_string_equal(log.seen[0], "trace:Server");
    assert_string_equal(log.seen[1], "trace:Client");
    assert_string_equal(log.seen[2], "second:Server");
    assert_string_equal(log.seen[3], "second:Client");
    assert_non_null(bbc_meta(fx_find(fx_fn(c.out, "Server"), "SendReqBatched", 0), "example.tracing_id"));
    assert_non_null(bbc_meta(fx_find(fx_fn(c.out, "Client"), "SendResp", 0), "example.tracing_id"));
    /* --without-stage removes a user stage by name. */
    const char *without[] = {"stamp_tracing_ids"};
    c.o.without = without;
    c.o.n_without = 1;
    log.n = 0;
    bb_model_free(c.out);
    assert_int_equal(bbc_compile(c.in, &c.o, &c.b, &c.ts, stages, 2, &c.out, &c.err), BB_OK);
    assert_int_equal(log.n, 2);
    assert_string_equal(log.seen[0], "second:Server");
    /* A failing stage is StageFailed naming the stage. */
    bb_stage s3 = {sizeof s3, "bad_stage", failing_stage, NULL};
    const bb_stage *bad[] = {&s3};
    bb_model_free(c.out);
    c.out = NULL;
    assert_int_equal(bbc_compile(c.in, &c.o, &c.b, &c.ts, bad, 1, &c.out, &c.err), BB_ECOMPILE);
    assert_int_equal(c.err.kind, BBC_E_STAGE_FAILED);
    assert_string_equal(c.err.pass, "bad_stage");
    assert_non_null(strstr(c.err.msg, "refusing on purpose"));
    fx_compiled_free(&c);
}

static void test_without_canonical_pass(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "federated", NULL);
    /* Without the TX backoff gate the final pre-flight names the gap. */
    const char *without[] = {"insert_backoff_gate_tx"};
    c.o.without = without;
    c.o.n_without = 1;
    assert_int_equal(fx_compiled_run(&c), BB_ECOMPILE);
    assert_int_equal(c.err.kind, BBC_E_INTERNAL);
    assert_string_equal(c.err.pass, "validate_runtime_complete");
    assert_non_null(strstr(c.err.msg, "BackoffGateTx"));
    assert_non_null(strstr(c.err.msg, "`Server`"));
    /* ... unless that check is disabled too. */
    const char *both[] = {"insert_backoff_gate_tx", "validate_runtime_complete"};
    c.o.without = both;
    c.o.n_without = 2;
    compile_ok(&c);
    assert_int_equal(fx_count(fx_fn(c.out, "Server"), "BackoffGateTx"), 0);
    assert_int_equal(fx_count(fx_fn(c.out, "Server"), "PeerHealthGateTx"), 1);
    fx_compiled_free(&c);
}

static void test_check_and_error_print(void **state)
{
    (void)state;
    fx_compiled c;
    setup_compile(&c, "federated", NULL);
    bbc_error err;
    assert_int_equal(bbc_check(c.in, NULL, &c.ts, &err), BB_OK);
    /* The printed form. */
    bbc_error_set(&err, BBC_E_UNKNOWN_OP, "validate", "node 'x' (a::B)");
    char buf[256];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    bbc_error_print(&err, f);
    fclose(f);
    assert_string_equal(buf, "bbc: error: validate: UnknownOp: node 'x' (a::B)\n");
    assert_int_equal(bbc_errkind_parse("IncompatibleStorageOnEdge"),
                     BBC_E_INCOMPATIBLE_STORAGE_ON_EDGE);
    fx_compiled_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_federated_partitions),
        cmocka_unit_test(test_federated_bindings),
        cmocka_unit_test(test_federated_rx_chain),
        cmocka_unit_test(test_federated_tx_chains),
        cmocka_unit_test(test_federated_deadlines),
        cmocka_unit_test(test_per_class_construction_state),
        cmocka_unit_test(test_idempotent_federated),
        cmocka_unit_test(test_idempotent_split_learning),
        cmocka_unit_test(test_each_pass_idempotent),
        cmocka_unit_test(test_split_learning_unbound_backend),
        cmocka_unit_test(test_split_learning_partitions),
        cmocka_unit_test(test_bindings_file_config),
        cmocka_unit_test(test_wrong_role),
        cmocka_unit_test(test_unknown_type),
        cmocka_unit_test(test_ir_version_mismatch),
        cmocka_unit_test(test_user_stages),
        cmocka_unit_test(test_without_canonical_pass),
        cmocka_unit_test(test_check_and_error_print),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
