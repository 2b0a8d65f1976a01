/*
 * Unit tests for bbd's component registry (bbd/host/registry.h): the
 * plugin loader seen as a bb_engine_registry, per-slot JSON configs, and
 * the pre-install binding check. Plugins are the real .so files of the
 * build ($BB_BUILD/lib/bytesandbrains/plugins); the end-to-end case
 * compiles a small plain ONNX graph and installs it in a real engine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bb/artifact.h"
#include "bb/meta.h"
#include "bb/peerid.h"
#include "bbc/compiler.h"
#include "bb/engine.h"
#include "bbd/host/registry.h"
#include "bbd/host/run_internal.h"

static char g_plugins[PATH_MAX]; /* <build>/lib/bytesandbrains/plugins */

static void find_plugins(void)
{
    const char *env = getenv("BB_BUILD");
    char buf[PATH_MAX];
    if (env && *env) {
        snprintf(buf, sizeof buf, "%s", env);
    } else { /* <build>/tests/test_registry -> <build> */
        ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
        assert_true(n > 0);
        buf[n] = '\0';
        for (int i = 0; i < 2; i++)
            *strrchr(buf, '/') = '\0';
    }
    char real[PATH_MAX];
    assert_non_null(realpath(buf, real));
    snprintf(g_plugins, sizeof g_plugins, "%.*s/lib/bytesandbrains/plugins", PATH_MAX - 64, real);
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

/* A registry over the build's plugin directory only. */
static bbd_registry *registry(void)
{
    const char *dirs[] = {g_plugins};
    bbd_registry_options o = {.plugin_dirs = dirs, .n_plugin_dirs = 1,
                              .loader_flags = BB_PLUGIN_LOADER_ONLY_EXPLICIT};
    bbd_registry *r = NULL;
    bb_error err = {0};
    if (bbd_registry_new(&o, &r, &err) != BB_OK)
        fail_msg("bbd_registry_new: %s", err.msg);
    return r;
}

/* ---- types ------------------------------------------------------------------------ */

static void test_engine_view_finds_types(void **state)
{
    (void)state;
    bbd_registry *r = registry();
    const bb_engine_registry *er = bbd_registry_engine(r);
    assert_non_null(er);
    const bb_component_type *t = bb_type_source_find(&er->types, "cpu::CpuBackend");
    assert_non_null(t);
    assert_string_equal(t->type_name, "cpu::CpuBackend");
    assert_int_equal(t->role, BB_ROLE_BACKEND);
    assert_non_null(bb_type_source_find(&er->types, "example::Counter"));
    assert_null(bb_type_source_find(&er->types, "no::Such"));
    /* the same types bbc compiles against, saying where they were looked for */
    const bb_type_source *ts = bbd_registry_types(r);
    assert_ptr_equal(bb_type_source_find(ts, "cpu::CpuBackend"), t);
    assert_string_equal(ts->where, bbd_registry_searched(r));
    assert_null(er->slot_config(er->ud, "backend"));
    assert_true(bb_plugin_loader_type_count(bbd_registry_loader(r)) >= 2);
    assert_contains(bbd_registry_searched(r), g_plugins);
    assert_contains(bbd_registry_searched(r), "(--plugin-path)");
    assert_int_equal(bbd_registry_warning_count(r), 0);
    bbd_registry_free(r);
    bbd_registry_free(NULL);
}

static void test_missing_plugin_path(void **state)
{
    (void)state;
    const char *dirs[] = {"/nonexistent/bb-plugins"};
    bbd_registry_options o = {.plugin_dirs = dirs, .n_plugin_dirs = 1,
                              .loader_flags = BB_PLUGIN_LOADER_ONLY_EXPLICIT};
    bbd_registry *r = (bbd_registry *)1;
    bb_error err = {0};
    assert_int_equal(bbd_registry_new(&o, &r, &err), BB_ENOTFOUND);
    assert_null(r);
    assert_contains(err.msg, "/nonexistent/bb-plugins");
    assert_contains(err.msg, "--plugin-path");
}

/* ---- slot configs --------------------------------------------------------------------- */

static void test_slot_configs(void **state)
{
    (void)state;
    bbd_registry *r = registry();
    bb_error err = {0};
    assert_int_equal(bbd_registry_set_slot_config(r, "backend", " { \"threads\" : 2 } ", &err),
                     BB_OK);
    assert_string_equal(bbd_registry_slot_config(r, "backend"), "{\"threads\":2}");
    /* replaced, not added */
    assert_int_equal(bbd_registry_set_slot_config(r, "backend", "{\"threads\":3}", &err), BB_OK);
    assert_string_equal(bbd_registry_slot_config(r, "backend"), "{\"threads\":3}");
    const bb_engine_registry *er = bbd_registry_engine(r);
    assert_string_equal(er->slot_config(er->ud, "backend"), "{\"threads\":3}");
    assert_null(bbd_registry_slot_config(r, "other"));

    assert_int_equal(bbd_registry_set_slot_config(r, "model", "{\"a\":", &err), BB_EPARSE);
    assert_contains(err.msg, "config of slot 'model'");
    assert_int_equal(bbd_registry_set_slot_config(r, "model", "{} {}", &err), BB_EPARSE);
    assert_contains(err.msg, "trailing data");
    assert_int_equal(bbd_registry_set_slot_config(r, "", "{}", &err), BB_EINVAL);
    assert_null(bbd_registry_slot_config(r, "model"));

    /* a whole configs object */
    const char *cfg = "{\"agg\": {\"trim\": 0.2}, \"backend\": {\"threads\": 1}}";
    assert_int_equal(bbd_registry_load_slot_configs(r, cfg, strlen(cfg), "node.json", &err),
                     BB_OK);
    assert_string_equal(bbd_registry_slot_config(r, "agg"), "{\"trim\":0.2}");
    assert_string_equal(bbd_registry_slot_config(r, "backend"), "{\"threads\":1}");
    assert_int_equal(bbd_registry_load_slot_configs(r, "[1]", 3, "node.json", &err), BB_EPARSE);
    assert_contains(err.msg, "node.json: slot configs must be a JSON object");
    assert_int_equal(bbd_registry_load_slot_configs(r, "{\"\": {}}", 8, "node.json", &err),
                     BB_EPARSE);
    assert_contains(err.msg, "empty slot name");
    assert_int_equal(bbd_registry_load_slot_configs(r, "{\"x\":", 5, "node.json", &err),
                     BB_EPARSE);
    assert_contains(err.msg, "node.json: malformed JSON");
    bbd_registry_free(r);
}

static void test_slot_config_limits(void **state)
{
    (void)state;
    bbd_registry *r = registry();
    bb_error err = {0};
    size_t n = BBD_REGISTRY_MAX_CONFIG_BYTES + 16;
    char *big = malloc(n + 1);
    assert_non_null(big);
    big[0] = '"';
    memset(big + 1, 'a', n - 2);
    big[n - 1] = '"';
    big[n] = '\0';
    assert_int_equal(bbd_registry_set_slot_config(r, "s", big, &err), BB_ELIMIT);
    assert_contains(err.msg, "slot 's'");
    /* a configs object within its own limit whose one value is too big */
    char *obj = malloc(n + 16);
    assert_non_null(obj);
    snprintf(obj, n + 16, "{\"s\":%s}", big);
    assert_int_equal(bbd_registry_load_slot_configs(r, obj, strlen(obj), "cfg", &err), BB_ELIMIT);
    assert_contains(err.msg, "cfg");
    assert_contains(err.msg, "slot 's'");
    /* the whole object over its limit: refused before parsing */
    assert_int_equal(bbd_registry_load_slot_configs(r, obj, BBD_REGISTRY_MAX_CONFIGS_BYTES + 1,
                                                    "cfg", &err),
                     BB_ELIMIT);
    assert_null(bbd_registry_slot_config(r, "s"));
    free(obj);
    free(big);
    bbd_registry_free(r);
}

/* ---- resolving a compiled model's bindings ------------------------------------------- */

/* A compiled model with functions fns[] (unstamped: each is a target) and
 * binding metadata key -> value pairs. */
static bb_model *bound_model(const char *const *fns, size_t n_fns, const char *const *kv,
                             size_t n_kv)
{
    bb_model *m = bb_model_new();
    assert_non_null(m);
    assert_int_equal(bb_artifact_stamp_passport(m), BB_OK);
    for (size_t i = 0; i < n_fns; i++)
        assert_non_null(bb_model_add_function(m, "user.app", fns[i]));
    for (size_t i = 0; i + 1 < n_kv; i += 2)
        assert_int_equal(bb_kv_set(m->arena, &m->metadata, kv[i], kv[i + 1]), BB_OK);
    return m;
}

static void test_resolve_bindings(void **state)
{
    (void)state;
    bbd_registry *r = registry();
    bb_error err = {0};
    const char *fns[] = {"Server", "Client#0123456789abcdef"};
    const char *kv[] = {
        BB_META_BINDING_PREFIX "Server.backend", "Backend|cpu::CpuBackend|0",
        BB_META_BINDING_PREFIX "Server.agg", "Aggregator|example::Counter|1",
        BB_META_BINDING_PREFIX "Client#0123456789abcdef.model", "Model|no::Such|0",
    };
    bb_model *m = bound_model(fns, 2, kv, 6);
    const char *server[] = {"Server"}, *client[] = {"Client"};
    assert_int_equal(bbd_registry_resolve_model(r, m, server, 1, &err), BB_OK);
    /* the Client target resolves to its hashed function and its binding fails */
    assert_int_equal(bbd_registry_resolve_model(r, m, client, 1, &err), BB_ENOTFOUND);
    assert_contains(err.msg, "target 'Client'");
    assert_contains(err.msg, "binding 'Model|no::Such|0'");
    assert_contains(err.msg, "slot 'model'");
    assert_contains(err.msg, g_plugins);
    assert_contains(err.msg, "(--plugin-path)");
    /* no targets: every target */
    assert_int_equal(bbd_registry_resolve_model(r, m, NULL, 0, &err), BB_ENOTFOUND);
    assert_contains(err.msg, "no::Such");
    const char *empty[] = {""};
    assert_int_equal(bbd_registry_resolve_model(r, m, empty, 1, &err), BB_EINVAL);
    bb_model_free(m);

    /* a binding asking for another role */
    const char *kv2[] = {BB_META_BINDING_PREFIX "Server.backend", "Model|cpu::CpuBackend|0"};
    m = bound_model(fns, 1, kv2, 2);
    assert_int_equal(bbd_registry_resolve_model(r, m, server, 1, &err), BB_ETYPE);
    assert_contains(err.msg, "slot 'backend'");
    assert_contains(err.msg, "has role Backend, the binding asks for Model");
    bb_model_free(m);

    /* a malformed binding value */
    const char *kv3[] = {BB_META_BINDING_PREFIX "Server.backend", "Nonsense|cpu::CpuBackend|0"};
    m = bound_model(fns, 1, kv3, 2);
    assert_int_equal(bbd_registry_resolve_model(r, m, server, 1, &err), BB_EPARSE);
    assert_contains(err.msg, "unknown role 'Nonsense'");
    bb_model_free(m);
    bbd_registry_free(r);
}

static void test_resolve_checks_configs(void **state)
{
    (void)state;
    bbd_registry *r = registry();
    bb_error err = {0};
    const char *fns[] = {"Server"};
    const char *kv[] = {BB_META_BINDING_PREFIX "Server.backend", "Backend|cpu::CpuBackend|0"};
    bb_model *m = bound_model(fns, 1, kv, 2);
    const char *server[] = {"Server"};
    assert_int_equal(bbd_registry_set_slot_config(r, "backend", "{\"threads\":2}", &err), BB_OK);
    assert_int_equal(bbd_registry_resolve_model(r, m, server, 1, &err), BB_OK);

    assert_int_equal(bbd_registry_set_slot_config(r, "backend", "{\"thread\":2}", &err), BB_OK);
    assert_int_equal(bbd_registry_resolve_model(r, m, server, 1, &err), BB_ECONFIG);
    assert_contains(err.msg, "slot 'backend' has key 'thread'");
    assert_contains(err.msg, "threads (int), max_cached_graphs (int)");

    assert_int_equal(bbd_registry_set_slot_config(r, "backend", "{\"threads\":1.5}", &err),
                     BB_OK);
    assert_int_equal(bbd_registry_resolve_model(r, m, server, 1, &err), BB_ECONFIG);
    assert_contains(err.msg, "'threads' of cpu::CpuBackend must be of type int");

    assert_int_equal(bbd_registry_set_slot_config(r, "backend", "[1]", &err), BB_OK);
    assert_int_equal(bbd_registry_resolve_model(r, m, server, 1, &err), BB_ECONFIG);
    assert_contains(err.msg, "must be a JSON object");
    bb_model_free(m);
    bbd_registry_free(r);
}

/* ---- end to end: the config reaches create through the engine ---------------------------- */

/* A plain ONNX graph y = Relu(x), compiled with backend = cpu::CpuBackend. */
static bb_model *compiled_relu(const bbd_registry *r)
{
    bb_model *plain = bb_model_new();
    assert_non_null(plain);
    bb_arena *a = plain->arena;
    plain->ir_version = 8;
    assert_int_equal(bb_opset_list_add(a, &plain->opset_imports, "", 13), BB_OK);
    plain->graph = bb_graph_new(a, "relu");
    bb_node *n = bb_graph_add_node(a, plain->graph, "", "Relu");
    assert_int_equal(bb_str_list_push(a, &n->inputs, "x"), BB_OK);
    assert_int_equal(bb_str_list_push(a, &n->outputs, "y"), BB_OK);
    *(bb_value_info **)BB_VEC_PUSH(a, &plain->graph->inputs) =
        bb_value_info_new(a, "x", bb_type_proto_tensor(a, BB_DT_FLOAT));
    *(bb_value_info **)BB_VEC_PUSH(a, &plain->graph->outputs) =
        bb_value_info_new(a, "y", bb_type_proto_tensor(a, BB_DT_FLOAT));
    bb_model *mod = NULL, *out = NULL;
    bb_error err = {0};
    assert_int_equal(bbd_run_module_from_onnx(plain, "relu.onnx", &mod, &err), BB_OK);
    bbc_bindings b;
    assert_int_equal(bbc_bindings_init(&b), BB_OK);
    assert_int_equal(bbc_bindings_add(&b, BBD_RUN_BACKEND_SLOT, "cpu::CpuBackend", NULL, "test",
                                      &err),
                     BB_OK);
    bbc_options o;
    bbc_options_init(&o);
    o.permissive_types = true;
    bbc_error cerr;
    if (bbc_compile(mod, &o, &b, bbd_registry_types(r), NULL, 0, &out, &cerr) != BB_OK)
        fail_msg("compile: %s: %s", cerr.pass, cerr.msg);
    bbc_bindings_free(&b);
    bb_model_free(mod);
    bb_model_free(plain);
    return out;
}

static void test_config_reaches_create(void **state)
{
    (void)state;
    bbd_registry *r = registry();
    bb_model *m = compiled_relu(r);
    const bb_function *picked = NULL;
    bb_error err = {0};
    assert_int_equal(bbd_run_pick_target(m, NULL, &picked, &err), BB_OK);
    const char *target = picked->name;
    /* valid kind, value the plugin refuses: the pre-check passes, create fails */
    assert_int_equal(bbd_registry_set_slot_config(r, "backend", "{\"threads\":0}", &err), BB_OK);
    assert_int_equal(bbd_registry_resolve_model(r, m, &target, 1, &err), BB_OK);
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    uint8_t seed[BB_ED25519_SEED_LEN] = {1};
    assert_int_equal(bb_peerid_from_seed(seed, NULL, &cfg.peer, &err), BB_OK);
    bb_engine *e = bb_engine_new(&cfg, &err);
    assert_non_null(e);
    assert_int_equal(bb_engine_install(e, m, &target, 1, bbd_registry_engine(r), &err),
                     BB_EINSTALL);
    assert_int_equal(bb_engine_install_error(e), BB_INSTALL_COMPONENT_CREATE_FAILED);
    assert_contains(err.msg, "threads must be an integer");
    bb_engine_free(e);
    /* a good config installs */
    assert_int_equal(bbd_registry_set_slot_config(r, "backend", "{\"threads\":1}", &err), BB_OK);
    e = bb_engine_new(&cfg, &err);
    assert_non_null(e);
    assert_int_equal(bb_engine_install(e, m, &target, 1, bbd_registry_engine(r), &err), BB_OK);
    bb_engine_free(e);
    bb_model_free(m);
    bbd_registry_free(r);
}

int main(void)
{
    find_plugins();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_view_finds_types),
        cmocka_unit_test(test_missing_plugin_path),
        cmocka_unit_test(test_slot_configs),
        cmocka_unit_test(test_slot_config_limits),
        cmocka_unit_test(test_resolve_bindings),
        cmocka_unit_test(test_resolve_checks_configs),
        cmocka_unit_test(test_config_reaches_create),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
