/*
 * bbc_fixture.h — shared by the compiler tests (test_pass_*.c,
 * test_compile_examples.c, test_compile_alloc.c): in-process component type descriptors for the
 * TYPE_NAMEs the example recordings bind (no dlopen), a tiny IR builder for
 * minimal fragments, and lookups over compiled output. Header-only (static
 * functions) so it is not linked into other tests.
 */
#ifndef BBC_FIXTURE_H
#define BBC_FIXTURE_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bb/ir.h"
#include "bb/meta.h"
#include "bb/model_io.h"
#include "bb/opsets.h"
#include "bb/plugin.h"
#include "bb/types.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"

#define FX_UNUSED __attribute__((unused))

/* ---- component types ------------------------------------------------------ */

#define FX_P(nm, ty) {.name = (nm), .type = &BB_TYPE_##ty}
#define FX_OP(name, ins, outs)                                                       \
    {name, ins, (uint32_t)(sizeof(ins) / sizeof(bb_port_decl)), outs,                \
     (uint32_t)(sizeof(outs) / sizeof(bb_port_decl)), NULL}

static const bb_port_decl FX_NONE[1] = {{0}};
#define FX_OP0(name, outs) {name, FX_NONE, 0, outs, (uint32_t)(sizeof(outs) / sizeof(bb_port_decl)), NULL}
#define FX_OPN(name, ins) {name, ins, (uint32_t)(sizeof(ins) / sizeof(bb_port_decl)), FX_NONE, 0, NULL}

static const bb_port_decl FX_TRIG_IN[] = {FX_P("trigger", TRIGGER)};
static const bb_port_decl FX_F32_IN[] = {FX_P("t", TENSOR_F32)};
static const bb_port_decl FX_F32_OUT[] = {FX_P("t", TENSOR_F32)};
static const bb_port_decl FX_CMD_OUT[] = {FX_P("cmd", COMMAND_ID)};
static const bb_port_decl FX_ANY_IN[] = {FX_P("code", ANY)};
static const bb_port_decl FX_U8_OUT[] = {FX_P("code", TENSOR_U8)};
static const bb_port_decl FX_TRAIN_OUT[] = {FX_P("params", TENSOR_F32), FX_P("num_samples", U64)};
static const bb_port_decl FX_METRICS_OUT[] = {FX_P("loss", TENSOR_F32), FX_P("accuracy", TENSOR_F32)};
static const bb_port_decl FX_PEERS_OUT[] = {FX_P("peers", PEER_ID_VEC)};
static const bb_port_decl FX_AGG_OUT[] = {FX_P("result", TENSOR_F32), FX_P("metadata", ANY)};
static const bb_port_decl FX_CONTRIB_IN[] = {FX_P("contribution", ANY)};
static const bb_port_decl FX_BATCH_OUT[] = {FX_P("batch", TENSOR_F32), FX_P("labels", TENSOR_F32)};
static const bb_port_decl FX_AB_IN[] = {FX_P("A", TENSOR), FX_P("B", TENSOR)};
static const bb_port_decl FX_C_OUT[] = {FX_P("C", TENSOR)};

static const bb_op_decl FX_MLP_OPS[] = {
    FX_OP0("Params", FX_F32_OUT),
    FX_OP("LoadParameters", FX_F32_IN, FX_CMD_OUT),
    FX_OP("Train", FX_TRIG_IN, FX_TRAIN_OUT),
    FX_OP("EvaluateMetrics", FX_TRIG_IN, FX_METRICS_OUT),
    FX_OP("Forward", FX_F32_IN, FX_F32_OUT),
    FX_OP("Step", FX_F32_IN, FX_CMD_OUT),
    FX_OP("Backward", FX_F32_IN, FX_CMD_OUT),
};
static const bb_opset_decl FX_MLP_OPSETS[] = {
    {BB_DOMAIN_ROLE_MODEL, 1, FX_MLP_OPS, sizeof FX_MLP_OPS / sizeof *FX_MLP_OPS}};
static const bb_dependency_decl FX_MLP_DEPS[] = {{BB_ROLE_BACKEND, "backend"},
                                                 {BB_ROLE_DATA_SOURCE, "data"}};

static const bb_op_decl FX_AGG_OPS[] = {
    FX_OP("Contribute", FX_CONTRIB_IN, FX_CMD_OUT),
    FX_OP("Aggregate", FX_TRIG_IN, FX_AGG_OUT),
};
static const bb_opset_decl FX_AGG_OPSETS[] = {
    {BB_DOMAIN_ROLE_AGGREGATOR, 1, FX_AGG_OPS, sizeof FX_AGG_OPS / sizeof *FX_AGG_OPS}};

static const bb_op_decl FX_SEL_OPS[] = {FX_OP0("Sample", FX_PEERS_OUT),
                                        FX_OP0("CurrentView", FX_PEERS_OUT)};
static const bb_opset_decl FX_SEL_OPSETS[] = {
    {BB_DOMAIN_ROLE_PEER_SELECTOR, 1, FX_SEL_OPS, sizeof FX_SEL_OPS / sizeof *FX_SEL_OPS}};

static const bb_op_decl FX_CSV_OPS[] = {FX_OP0("NextBatch", FX_BATCH_OUT)};
static const bb_opset_decl FX_CSV_OPSETS[] = {
    {BB_DOMAIN_ROLE_DATA_LOADER, 1, FX_CSV_OPS, sizeof FX_CSV_OPS / sizeof *FX_CSV_OPS}};

static const bb_op_decl FX_CPU_OPS[] = {FX_OP("Add", FX_AB_IN, FX_C_OUT),
                                        FX_OP("MatMul", FX_AB_IN, FX_C_OUT)};
static const bb_opset_decl FX_CPU_OPSETS[] = {
    {BB_DOMAIN_ONNX, 20, FX_CPU_OPS, sizeof FX_CPU_OPS / sizeof *FX_CPU_OPS}};

static const bb_op_decl FX_PQ_OPS[] = {FX_OP("Decompress", FX_ANY_IN, FX_F32_OUT),
                                       FX_OP("Compress", FX_F32_IN, FX_U8_OUT)};
static const bb_opset_decl FX_PQ_OPSETS[] = {
    {BB_DOMAIN_ROLE_COMPRESSOR, 1, FX_PQ_OPS, sizeof FX_PQ_OPS / sizeof *FX_PQ_OPS}};

static const bb_op_decl FX_WAGG_OPS[] = {FX_OP("Aggregate", FX_TRIG_IN, FX_AGG_OUT)};
static const bb_opset_decl FX_WAGG_OPSETS[] = {
    {BB_DOMAIN_ROLE_AGGREGATOR, 1, FX_WAGG_OPS, 1}};

#define FX_TYPE(sym, nm, rl, ops, nops, dps, ndps)                                \
    static const bb_component_type sym = {.struct_size = sizeof(bb_component_type),  \
                                          .abi_major = BB_PLUGIN_ABI_MAJOR,          \
                                          .abi_minor = BB_PLUGIN_ABI_MINOR,          \
                                          .type_name = nm,                           \
                                          .role = rl,                                \
                                          .opsets = ops,                             \
                                          .n_opsets = nops,                          \
                                          .deps = dps,                               \
                                          .n_deps = ndps}

FX_TYPE(FX_CPU, "cpu::CpuBackend", BB_ROLE_BACKEND, FX_CPU_OPSETS, 1, NULL, 0);
FX_TYPE(FX_MLP, "nn::Mlp", BB_ROLE_MODEL, FX_MLP_OPSETS, 1, FX_MLP_DEPS, 2);
FX_TYPE(FX_FEDAVG, "agg::FedAvg", BB_ROLE_AGGREGATOR, FX_AGG_OPSETS, 1, NULL, 0);
FX_TYPE(FX_CONNECTED, "peers::Connected", BB_ROLE_PEER_SELECTOR, FX_SEL_OPSETS, 1, NULL, 0);
FX_TYPE(FX_CSV, "data::Csv", BB_ROLE_DATA_SOURCE, FX_CSV_OPSETS, 1, NULL, 0);
/* Split learning (IR_AND_DSL.md Part 9). */
FX_TYPE(FX_ONESHOT, "framework_wire::NoBarrierOneShot", BB_ROLE_PROTOCOL, NULL, 0, NULL, 0);
FX_TYPE(FX_REQRESP, "framework_wire::BarrierNetworkReqResp", BB_ROLE_PROTOCOL, NULL, 0, NULL, 0);
FX_TYPE(FX_BURN, "burn_integration::BurnModel", BB_ROLE_MODEL, FX_MLP_OPSETS, 1, NULL, 0);
FX_TYPE(FX_PQ, "framework_compressors::ProductQuantization", BB_ROLE_CODEC, FX_PQ_OPSETS, 1,
        NULL, 0);
FX_TYPE(FX_CYCLONE, "framework_peer_selector::Cyclone", BB_ROLE_PEER_SELECTOR, FX_SEL_OPSETS, 1,
        NULL, 0);
FX_TYPE(FX_WAGG, "framework_aggregators::WeightAggregator", BB_ROLE_AGGREGATOR, FX_WAGG_OPSETS,
        1, NULL, 0);

static const bb_component_type *const FX_TYPES[] = {
    &FX_CPU, &FX_MLP, &FX_FEDAVG, &FX_CONNECTED, &FX_CSV, &FX_ONESHOT,
    &FX_REQRESP, &FX_BURN, &FX_PQ, &FX_CYCLONE, &FX_WAGG};

/* A type source over FX_TYPES; arr must outlive ts. */
static FX_UNUSED void fx_types(bb_type_source *ts, bb_type_array *arr)
{
    arr->types = FX_TYPES;
    arr->n = sizeof FX_TYPES / sizeof *FX_TYPES;
    bb_type_source_from_array(ts, arr);
}

/* ---- one bbc_compile -------------------------------------------------------------- */

/* The inputs of a bbc_compile (in owned; the fixture types, default
 * options) and its outcome (out owned). */
typedef struct fx_compiled {
    bb_model *in, *out;
    bbc_bindings b;
    bb_type_array arr;
    bb_type_source ts;
    bbc_options o;
    bbc_error err;
    int rc;
} fx_compiled;

/* c over in (taken: fx_compiled_free frees it, also after a failure),
 * with one "slot=Type" binding (NULL: none). */
static FX_UNUSED int fx_compiled_init(fx_compiled *c, bb_model *in, const char *binding)
{
    memset(c, 0, sizeof *c);
    c->in = in;
    fx_types(&c->ts, &c->arr);
    bbc_options_init(&c->o);
    int rc = bbc_bindings_init(&c->b);
    if (rc == BB_OK && binding)
        rc = bbc_bindings_add_arg(&c->b, binding, NULL);
    return rc;
}

/* Compile c->in into c->out (replacing the last output); c->rc. */
static FX_UNUSED int fx_compiled_run(fx_compiled *c)
{
    bb_model_free(c->out);
    c->out = NULL;
    c->rc = bbc_compile(c->in, &c->o, &c->b, &c->ts, NULL, 0, &c->out, &c->err);
    return c->rc;
}

static FX_UNUSED void fx_compiled_free(fx_compiled *c)
{
    bb_model_free(c->in);
    bb_model_free(c->out);
    bbc_bindings_free(&c->b);
}

/* ---- IR builder ---------------------------------------------------------------- */

/* A model with one root function "M" (domain user.app) called from the graph,
 * importing every built-in opset. */
static FX_UNUSED bb_model *fx_model(bb_function **root)
{
    bb_model *m = bb_model_new();
    m->ir_version = BB_FRAMEWORK_IR_VERSION;
    m->domain = bb_model_str(m, "user.app");
    for (size_t i = 0; i < bb_opset_count(); i++)
        bb_opset_list_add(m->arena, &m->opset_imports, bb_opset_at(i)->domain,
                          bb_opset_at(i)->version);
    bb_opset_list_add(m->arena, &m->opset_imports, "user.app", 1);
    *root = bb_model_add_function(m, "user.app", "M");
    m->graph = bb_graph_new(m->arena, "M");
    bb_graph_add_node(m->arena, m->graph, "user.app", "M");
    return m;
}

/* Node with inputs/outputs given as NULL-terminated lists ("a", "b", NULL). */
static FX_UNUSED bb_node *fx_node(bb_model *m, bb_function *f, const char *name, const char *domain,
                                  const char *op, const char *const *in, const char *const *out)
{
    bb_node *n = bb_function_add_node(m, f, domain, op);
    n->name = name ? bb_model_str(m, name) : NULL;
    for (; in && *in; in++)
        bb_str_list_push(m->arena, &n->inputs, *in);
    for (; out && *out; out++)
        bb_str_list_push(m->arena, &n->outputs, *out);
    return n;
}

#define FX_L(...) ((const char *const[]){__VA_ARGS__, NULL})
#define FX_NOL ((const char *const *)NULL)

static FX_UNUSED void fx_meta(bb_model *m, bb_node *n, const char *k, const char *v)
{
    bb_kv_set(m->arena, &n->metadata, k, v);
}

static FX_UNUSED void fx_type(bb_model *m, bb_function *f, const char *v, const bb_type_node *t)
{
    bbc_set_value_type(m->arena, f, v, t);
}

/* A state over m (taken) for running single passes. */
static FX_UNUSED int fx_state(bbc_state *st, bb_model *m, bbc_options *o, bb_type_source *ts,
                              bbc_bindings *b, bbc_error *err)
{
    return bbc_state_init(st, m, o, b, ts, err);
}

/* Run one pass by name (with st->pass set). */
static FX_UNUSED int fx_run(bbc_state *st, const char *pass)
{
    const bbc_pass *p = bbc_pass_find(pass);
    if (!p)
        return -1;
    return bbc_run_pass(st, p);
}

/* Add an empty partition of class cls (its function named cls, homed cls). */
static FX_UNUSED bbc_partition *fx_part(bbc_state *st, const char *cls)
{
    bb_model *pm = bb_model_new();
    pm->ir_version = BB_FRAMEWORK_IR_VERSION;
    bb_function *f = bb_model_add_function(pm, "user.app", cls);
    bb_kv_set(pm->arena, &f->metadata, BB_META_HOME_CLASS, cls);
    return bbc_state_add_partition(st, cls, pm);
}

/* A concrete slot on f: attribute_proto + concrete_type / slot_role metadata. */
static FX_UNUSED void fx_concrete(bb_model *m, bb_function *f, const char *slot, const char *type,
                                  const char *role)
{
    bb_attr *at = bb_arena_alloc(m->arena, sizeof *at);
    at->name = bb_model_str(m, slot);
    at->type = BB_ATTR_STRING;
    at->has_s = true;
    at->s.data = (uint8_t *)bb_arena_strdup(m->arena, "{}");
    at->s.len = 2;
    bb_attr **slotp = BB_VEC_PUSH(m->arena, &f->attribute_protos);
    *slotp = at;
    char key[256];
    snprintf(key, sizeof key, "%s%s", BB_META_SLOT_CONCRETE_TYPE_PREFIX, slot);
    bb_kv_set(m->arena, &f->metadata, key, type);
    snprintf(key, sizeof key, "%s%s", BB_META_SLOT_ROLE_PREFIX, slot);
    bb_kv_set(m->arena, &f->metadata, key, role);
}

/* A generic slot on f. */
static FX_UNUSED void fx_generic(bb_model *m, bb_function *f, const char *slot, const char *role)
{
    bb_str_list_push(m->arena, &f->attributes, slot);
    char key[256];
    snprintf(key, sizeof key, "%s%s", BB_META_SLOT_ROLE_PREFIX, slot);
    bb_kv_set(m->arena, &f->metadata, key, role);
}

/* Stamp n as a concrete role node on slot. */
static FX_UNUSED void fx_on_slot(bb_model *m, bb_node *n, const char *slot, const char *type)
{
    fx_meta(m, n, BB_META_SLOT, slot);
    fx_meta(m, n, BB_META_CONCRETE_TYPE, type);
    fx_meta(m, n, BB_META_INSTANCE, "0");
}

/* A partition "@self" with a receive feeding a model and a send:
 *   recv: Recv() -> (t, payload)          payload -> load: LoadParameters
 *   sample: Sample() -> peers;  params: Params() -> w;  send: Send(w, peers)
 * Types are stamped as the solver would. */
static FX_UNUSED bbc_partition *fx_wire_part(bbc_state *st)
{
    bbc_partition *p = fx_part(st, "@self");
    bb_model *m = p->model;
    bb_function *f = p->fn;
    bb_node *r = fx_node(m, f, "recv", BB_DOMAIN_WIRE, "Recv", FX_NOL, FX_L("t", "payload"));
    fx_meta(m, r, BB_META_HOME_CLASS, "@self");
    bb_node *l = fx_node(m, f, "load", BB_DOMAIN_ROLE_MODEL, "LoadParameters", FX_L("payload"),
                         FX_L("cmd"));
    fx_on_slot(m, l, "model", "nn::Mlp");
    fx_meta(m, l, BB_META_SLOT_ID, "1");
    bb_node *s = fx_node(m, f, "sample", BB_DOMAIN_ROLE_PEER_SELECTOR, "Sample", FX_NOL,
                         FX_L("peers"));
    fx_on_slot(m, s, "sel", "peers::Connected");
    bb_node *pa = fx_node(m, f, "params", BB_DOMAIN_ROLE_MODEL, "Params", FX_NOL, FX_L("w"));
    fx_on_slot(m, pa, "model", "nn::Mlp");
    bb_node *snd = fx_node(m, f, "send", BB_DOMAIN_WIRE, "Send", FX_L("w", "peers"), FX_NOL);
    fx_meta(m, snd, BB_META_HOME_CLASS, "@self");
    fx_meta(m, snd, BB_META_DEST_CLASS, "@self");
    fx_type(m, f, "payload", &BB_TYPE_TENSOR_F32);
    fx_type(m, f, "w", &BB_TYPE_TENSOR_F32);
    fx_type(m, f, "t", &BB_TYPE_TRIGGER);
    fx_type(m, f, "peers", &BB_TYPE_PEER_ID_VEC);
    return p;
}

/* ---- lookups ---------------------------------------------------------------------- */

static FX_UNUSED bb_function *fx_fn(const bb_model *m, const char *name)
{
    for (size_t i = 0; i < m->functions.n; i++)
        if (bbc_str_eq(m->functions.v[i]->name, name))
            return m->functions.v[i];
    return NULL;
}

/* k-th node (0-based) of op_type in f (any domain), or NULL. */
static FX_UNUSED bb_node *fx_find(const bb_function *f, const char *op, size_t k)
{
    for (size_t i = 0; i < f->nodes.n; i++)
        if (bbc_str_eq(f->nodes.v[i]->op_type, op) && k-- == 0)
            return f->nodes.v[i];
    return NULL;
}

static FX_UNUSED bb_node *fx_named(const bb_function *f, const char *name)
{
    for (size_t i = 0; i < f->nodes.n; i++)
        if (bbc_str_eq(f->nodes.v[i]->name, name))
            return f->nodes.v[i];
    return NULL;
}

/* The node producing v in f, or NULL. */
static FX_UNUSED bb_node *fx_producer(const bb_function *f, const char *v)
{
    for (size_t i = 0; i < f->nodes.n; i++)
        if (bb_str_list_find(&f->nodes.v[i]->outputs, v) >= 0)
            return f->nodes.v[i];
    return NULL;
}

static FX_UNUSED size_t fx_count(const bb_function *f, const char *op)
{
    size_t c = 0;
    for (size_t i = 0; i < f->nodes.n; i++)
        c += bbc_str_eq(f->nodes.v[i]->op_type, op);
    return c;
}

/* ---- running a CLI command in-process --------------------------------------------- */

/* Reads what fd `fd` received into buf (NUL-terminated) and restores it. */
static FX_UNUSED void fx__restore(int fd, int saved, FILE *f, char *buf, size_t cap)
{
    fflush(fd == 1 ? stdout : stderr);
    dup2(saved, fd);
    close(saved);
    rewind(f);
    size_t n = buf && cap ? fread(buf, 1, cap - 1, f) : 0;
    if (buf && cap)
        buf[n] = '\0';
    fclose(f);
}

/* Runs cmd(argc, argv) (argv NULL-terminated, argv[0] the subcommand) with
 * stdout captured into out and stderr into err (either may be NULL: then
 * that stream is discarded). Returns the command's exit status. */
static FX_UNUSED int fx_run_cli(int (*cmd)(int, char **), const char *const *argv, char *out,
                                size_t out_cap, char *err, size_t err_cap)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    fflush(stdout);
    fflush(stderr);
    FILE *fo = tmpfile(), *fe = tmpfile();
    if (!fo || !fe)
        abort();
    int so = dup(1), se = dup(2);
    dup2(fileno(fo), 1);
    dup2(fileno(fe), 2);
    int rc = cmd(argc, (char **)argv);
    fx__restore(1, so, fo, out, out_cap);
    fx__restore(2, se, fe, err, err_cap);
    return rc;
}

/* A fresh directory /tmp/<prefix>_XXXXXX into buf (cap >= strlen(prefix) + 13). */
static FX_UNUSED int fx_mkdtemp(char *buf, size_t cap, const char *prefix)
{
    snprintf(buf, cap, "/tmp/%s_XXXXXX", prefix);
    return mkdtemp(buf) ? 0 : -1;
}

/* rm -rf dir (a fx_mkdtemp directory). */
static FX_UNUSED int fx_rmtree(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The test plugin NAME.so next to the test binary ($BUILD/tests/plugins). */
static FX_UNUSED int fx_test_plugin(const char *name, char *out, size_t cap)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    int len = snprintf(out, cap, "%s/plugins/%s.so", exe, name);
    return len > 0 && (size_t)len < cap && access(out, R_OK) == 0 ? 0 : -1;
}

/* <scratch>/types holding a link to the bbc_types test plugin alone (a
 * --plugin-path directory without the other test plugins' duplicate
 * TYPE_NAMEs); so_out receives the plugin's path. */
static FX_UNUSED int fx_types_plugin_dir(const char *scratch, char *dir_out, size_t dir_cap,
                                         char *so_out, size_t so_cap)
{
    if (fx_test_plugin("bbc_types", so_out, so_cap) != 0)
        return -1;
    char link[4200];
    snprintf(dir_out, dir_cap, "%s/types", scratch);
    snprintf(link, sizeof link, "%s/bbc_types.so", dir_out);
    if (mkdir(dir_out, 0700) != 0 || symlink(so_out, link) != 0)
        return -1;
    return 0;
}

#define FX_ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

#endif
