/*
 * test_bbc_cli.c — `bbc compile`, `bbc check`, `bbc passes` in-process, and
 * the bindings parsers: exit codes (0 ok, 1 bad input, 2 bad usage), the
 * printed "bbc: error: <pass>: <Variant>: <message>" form, a compiled file
 * that loads back with its passport, WrongRole through --bind, bindings
 * file errors, and the effect of every compile option (--bind, --bindings
 * with a per-slot config, --plugin-path, $BB_PLUGIN_PATH, --target-version,
 * --per-hop-budget-ns, --permissive-types, --without-stage, --stage).
 * Component types come from the real plugin search (the cpu and example
 * plugins next to the executable) and the bbc_types test plugin.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include <limits.h>
#include <sys/stat.h>

#include "bb/recorder.h"
#include "bbc/bbc.h"
#include "bbc_bad_models.h"
#include "bbc_fixture.h"
#include "bbc_programs.h"

static char dir[64];

static void save(bb_model *m, const char *path, const bb_error *why)
{
    bb_error e = {0};
    if (!m)
        fail_msg("record %s: %s", path, why->msg);
    if (bb_model_save_file(m, path, &e) != BB_OK)
        fail_msg("%s", e.msg);
    bb_model_free(m);
}

/* A module with a generic Backend slot "compute": z = x + y. */
static void write_model(const char *path)
{
    bb_error err = {0};
    save(bm_unbound_slot(&err), path, &err);
}

/* Run a command (NULL-terminated arguments) with stderr captured into buf. */
static int run_cmd(int (*cmd)(int, char **), char *buf, size_t cap, ...)
{
    const char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, cap);
    for (const char *a; argc < 31 && (a = va_arg(ap, const char *));)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    return fx_run_cli(cmd, argv, NULL, 0, buf, cap);
}

static char types_dir[96], types_so[4200];

static int setup(void **state)
{
    (void)state;
    if (fx_mkdtemp(dir, sizeof dir, "bbc_cli") != 0)
        return -1;
    char p[128];
    snprintf(p, sizeof p, "%s/adder.onnx", dir);
    write_model(p);
    return fx_types_plugin_dir(dir, types_dir, sizeof types_dir, types_so, sizeof types_so);
}

static int teardown(void **state)
{
    (void)state;
    return fx_rmtree(dir);
}

static void test_compile_ok(void **state)
{
    (void)state;
    char in[128], out[128], err[4096];
    snprintf(in, sizeof in, "%s/adder.onnx", dir);
    snprintf(out, sizeof out, "%s/adder.compiled.onnx", dir);
    int rc = run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, "--bind",
                     "compute=cpu::CpuBackend", "--per-hop-budget-ns", "1000", NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, err);
    bb_model *m = NULL;
    bb_error e = {0};
    assert_int_equal(bb_model_load_file(out, &m, &e), BB_OK);
    assert_string_equal(bb_kv_get(&m->metadata, BB_META_COMPILED), "v1");
    assert_string_equal(bb_kv_get(&m->metadata, "ai.bytesandbrains.binding.@self.compute"),
                        "Backend|cpu::CpuBackend|0");
    const bb_function *f = fx_fn(m, BB_SELF_CLASS);
    assert_non_null(f);
    assert_ptr_equal(bbc_value_type(f, "z"), &BB_TYPE_TENSOR_F32);
    bb_model_free(m);
}

/* --stage with the test stage plugin (build/tests/plugins/bbc_stage.so). */
static void test_user_stage(void **state)
{
    (void)state;
    char exe[512], so[600], in[128], out[128], err[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(so, sizeof so, "%s/plugins/bbc_stage.so", exe);
    snprintf(in, sizeof in, "%s/adder.onnx", dir);
    snprintf(out, sizeof out, "%s/staged.onnx", dir);
    int rc = run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, "--bind",
                     "compute=cpu::CpuBackend", "--stage", so, NULL);
    if (rc != 0)
        fail_msg("exit %d: %s (build it with make build/tests/plugins/bbc_stage.so)", rc, err);
    bb_model *m = NULL;
    bb_error e = {0};
    assert_int_equal(bb_model_load_file(out, &m, &e), BB_OK);
    assert_string_equal(bb_kv_get(&fx_fn(m, BB_SELF_CLASS)->metadata, "example.stage"), "ran");
    bb_model_free(m);
    /* --without-stage names the stage. */
    rc = run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, "--bind",
                 "compute=cpu::CpuBackend", "--stage", so, "--without-stage", "stamp_tracing_ids",
                 NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(bb_model_load_file(out, &m, &e), BB_OK);
    assert_null(bb_kv_get(&fx_fn(m, BB_SELF_CLASS)->metadata, "example.stage"));
    bb_model_free(m);
    /* A stage file that does not exist is bad input. */
    rc = run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, "--stage",
                 "/nonexistent/stage.so", NULL);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "/nonexistent/stage.so"));
}

static void test_compile_errors(void **state)
{
    (void)state;
    char in[128], out[128], err[4096];
    snprintf(in, sizeof in, "%s/adder.onnx", dir);
    snprintf(out, sizeof out, "%s/x.onnx", dir);
    /* Unbound generic slot. */
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, NULL), 1);
    assert_non_null(strstr(err, "bbc: error: validate_all_slots_bound: UnboundSlot: "));
    assert_non_null(strstr(err, "'compute'"));
    /* Wrong role. */
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, "--bind",
                             "compute=example::Counter", NULL), 1);
    assert_non_null(strstr(err, "bbc: error: bind: WrongRole: slot 'compute' needs role Backend "
                                "but 'example::Counter' (--bind) has role Aggregator"));
    /* Usage errors exit 2. */
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, NULL), 2);
    assert_non_null(strstr(err, "-o OUT.onnx"));
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                             "--without-stage", "no_such_pass", NULL), 2);
    assert_non_null(strstr(err, "no_such_pass"));
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, "--bind",
                             "nobinding", NULL), 2);
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                             "--per-hop-budget-ns", "-5", NULL), 2);
    /* A missing input file is bad input. */
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", "/nonexistent.onnx", "-o",
                             out, NULL), 1);
    assert_non_null(strstr(err, "/nonexistent.onnx"));
    /* A bindings file with a bad shape. */
    char bf[128];
    snprintf(bf, sizeof bf, "%s/b.json", dir);
    FILE *f = fopen(bf, "w");
    fputs("{\"bindings\": {\"compute\": 7}}", f);
    fclose(f);
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                             "--bindings", bf, NULL), 1);
    assert_non_null(strstr(err, "slot 'compute'"));
}

static void test_check_and_passes(void **state)
{
    (void)state;
    char in[128], err[4096];
    snprintf(in, sizeof in, "%s/adder.onnx", dir);
    assert_int_equal(run_cmd(bbc_cmd_check, err, sizeof err, "check", in, NULL), 0);
    assert_int_equal(run_cmd(bbc_cmd_check, err, sizeof err, "check", NULL), 2);
    /* A program whose types no plugin exports still checks (structure only). */
    char sl[128];
    snprintf(sl, sizeof sl, "%s/split_learning.onnx", dir);
    bb_error se = {0};
    save(fx_split_learning(&se), sl, &se);
    assert_int_equal(run_cmd(bbc_cmd_check, err, sizeof err, "check", sl, NULL), 0);
    /* A broken program: a node reading a value nothing produces. */
    bb_function *root;
    bb_model *m = fx_model(&root);
    fx_node(m, root, "lost", BB_DOMAIN_SYSCALL, "OnTrigger", FX_L("nowhere"), FX_L("v"));
    char bad[128];
    snprintf(bad, sizeof bad, "%s/bad.onnx", dir);
    bb_error e = {0};
    assert_int_equal(bb_model_save_file(m, bad, &e), BB_OK);
    bb_model_free(m);
    assert_int_equal(run_cmd(bbc_cmd_check, err, sizeof err, "check", bad, NULL), 1);
    assert_non_null(strstr(err, "bbc: error: validate: DanglingInput: function 'M': node 'lost' "
                                "(ai.bytesandbrains.syscall::OnTrigger) input 0 reads 'nowhere'"));
    /* passes lists every table row, in order. */
    static char names[8192];
    assert_int_equal(fx_run_cli(bbc_cmd_passes, FX_ARGV("passes", "--names"), names, sizeof names,
                                NULL, 0),
                     0);
    size_t i = 0;
    for (char *line = strtok(names, "\n"); line; line = strtok(NULL, "\n")) {
        assert_non_null(bbc_pass_at(i));
        assert_string_equal(line, bbc_pass_at(i)->name);
        i++;
    }
    assert_int_equal(i, bbc_pass_count());
    assert_int_equal(i, 1 + 1 + 17 + 4);
    /* The canonical block is CANONICAL_PASS_NAMES in order. */
    static const char *const CANON[] = {
        "inline_for_partition", "derive_wire_deadlines", "validate", "expand_ops", "type_solver",
        "infer_peer_classes", "synthesize_wire_recvs", "partition_by_wire_ops", "resolve_slots",
        "analyze_wire_edges", "insert_dedup_gate_rx", "insert_peer_health_gate_rx",
        "insert_backoff_gate_rx", "insert_peer_health_gate_tx", "insert_backoff_gate_tx",
        "insert_async_deadlines", "validate_runtime_complete"};
    size_t k = 0;
    for (size_t j = 0; j < bbc_pass_count(); j++)
        if (bbc_pass_at(j)->phase == BBC_PHASE_CANONICAL)
            assert_string_equal(bbc_pass_at(j)->name, CANON[k++]);
    assert_int_equal(k, 17);
}

/* man/bbc.1 carries exactly `bbc passes --man` between its markers, and
 * documents every option of compile. */
static void test_man_page(void **state)
{
    (void)state;
    static char want[32768], man[262144];
    char *argv[] = {"passes", "--man", NULL};
    assert_int_equal(fx_run_cli(bbc_cmd_passes, (const char *const *)argv, want, sizeof want, NULL, 0), 0);
    FILE *f = fopen("man/bbc.1", "r");
    if (!f)
        fail_msg("man/bbc.1 not found (run the tests from the repository root)");
    size_t n = fread(man, 1, sizeof man - 1, f);
    man[n] = '\0';
    fclose(f);
    const char *begin = strstr(man, ".\\\" BEGIN bbc passes --man\n");
    const char *end = strstr(man, ".\\\" END bbc passes --man\n");
    assert_non_null(begin);
    assert_non_null(end);
    begin = strchr(begin, '\n') + 1;
    if ((size_t)(end - begin) != strlen(want) || strncmp(begin, want, strlen(want)) != 0)
        fail_msg("man/bbc.1 PASSES is out of date: paste `bbc passes --man` between its markers");
    static const char *const OPTS[] = {"\\-\\-bind", "\\-\\-bindings", "\\-\\-plugin\\-path",
                                       "\\-\\-target\\-version", "\\-\\-per\\-hop\\-budget\\-ns",
                                       "\\-\\-permissive\\-types", "\\-\\-without\\-stage",
                                       "\\-\\-stage", "\\-\\-verify\\-each", ".SS bbc check",
                                       ".SS bbc passes", ".SS bbc compile", ".SS bbc dump",
                                       ".SS bbc targets", ".SS bbc dot", ".SS bbc plugins",
                                       ".B BB_PLUGIN_PATH", "dot \\-Tsvg"};
    for (size_t i = 0; i < sizeof OPTS / sizeof *OPTS; i++)
        if (!strstr(man, OPTS[i]))
            fail_msg("man/bbc.1 does not document %s", OPTS[i]);
    /* Every error variant is listed. */
    for (unsigned k = 1; k < BBC_E__COUNT; k++) {
        char b[96];
        snprintf(b, sizeof b, ".BR %s ", bbc_errkind_name((bbc_errkind)k));
        if (!strstr(man, b))
            fail_msg("man/bbc.1 ERRORS does not list %s", bbc_errkind_name((bbc_errkind)k));
    }
}

static void test_bindings_parsers(void **state)
{
    (void)state;
    bbc_bindings b;
    bbc_bindings_init(&b);
    bb_error e = {0};
    static const char OK[] =
        "{\"bindings\": {\"a\": \"x::A\", \"b\": {\"type\": \"x::B\", \"config\": {\"k\": [1, 2]}}}}";
    assert_int_equal(bbc_bindings_load_json(&b, OK, sizeof OK - 1, "f.json", &e), BB_OK);
    assert_string_equal(bbc_bindings_find(&b, "a")->type_name, "x::A");
    assert_null(bbc_bindings_find(&b, "a")->config_json);
    assert_string_equal(bbc_bindings_find(&b, "b")->config_json, "{\"k\":[1,2]}");
    assert_string_equal(bbc_bindings_find(&b, "b")->origin, "f.json");
    /* A later --bind replaces. */
    assert_int_equal(bbc_bindings_add_arg(&b, "a=y::A", &e), BB_OK);
    assert_string_equal(bbc_bindings_find(&b, "a")->type_name, "y::A");
    assert_int_equal(b.v.n, 2);
    static const char *const BAD[] = {
        "not json", "[]", "{\"bindings\": 3}", "{\"bindings\": {\"a\": {\"config\": {}}}}",
        "{\"bindings\": {\"a\": {\"type\": \"t\", \"config\": 5}}}",
        "{\"bindings\": {\"a\": {\"type\": \"t\", \"extra\": 1}}}",
        "{\"bindings\": {\"a\": \"has|pipe\"}}", "{\"bindings\": {\"\": \"t\"}}"};
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        e.msg[0] = '\0';
        int rc = bbc_bindings_load_json(&b, BAD[i], strlen(BAD[i]), "bad.json", &e);
        assert_int_not_equal(rc, BB_OK);
        assert_non_null(strstr(e.msg, "bad.json"));
    }
    assert_int_equal(bbc_bindings_add_arg(&b, "=x", &e), BB_EINVAL);
    assert_int_equal(bbc_bindings_add_arg(&b, "slot=", &e), BB_EINVAL);
    assert_int_equal(bbc_bindings_load_file(&b, "/nonexistent/b.json", &e), BB_EIO);
    bbc_bindings_free(&b);
}


/* ---- every compile option, through the CLI --------------------------------------------- */

static bb_model *load_out(const char *path)
{
    bb_model *m = NULL;
    bb_error e = {0};
    if (bb_model_load_file(path, &m, &e) != BB_OK)
        fail_msg("%s", e.msg);
    return m;
}

static const bb_attr *slot_attr(const bb_function *f, const char *slot)
{
    for (size_t i = 0; i < f->attribute_protos.n; i++)
        if (bbc_str_eq(f->attribute_protos.v[i]->name, slot))
            return f->attribute_protos.v[i];
    return NULL;
}

/* --bindings FILE.json with a per-slot config; a later --bind wins. */
static void test_bindings_file(void **state)
{
    (void)state;
    char in[128], out[128], bf[128], err[4096];
    snprintf(in, sizeof in, "%s/adder.onnx", dir);
    snprintf(out, sizeof out, "%s/bf.onnx", dir);
    snprintf(bf, sizeof bf, "%s/bindings.json", dir);
    FILE *f = fopen(bf, "w");
    fputs("{\"bindings\": {\"compute\": {\"type\": \"cpu::CpuBackend\", "
          "\"config\": {\"threads\": 2}}}}",
          f);
    fclose(f);
    int rc = run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, "--bindings", bf,
                     NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, err);
    bb_model *m = load_out(out);
    assert_string_equal(bb_kv_get(&m->metadata, "ai.bytesandbrains.binding.@self.compute"),
                        "Backend|cpu::CpuBackend|0");
    const bb_attr *a = slot_attr(fx_fn(m, BB_SELF_CLASS), "compute");
    assert_non_null(a);
    assert_int_equal(a->s.len, strlen("{\"threads\":2}"));
    assert_memory_equal(a->s.data, "{\"threads\":2}", a->s.len);
    bb_model_free(m);
    /* The file binds a type of the wrong role; --bind (later) replaces it. */
    f = fopen(bf, "w");
    fputs("{\"bindings\": {\"compute\": \"example::Counter\"}}", f);
    fclose(f);
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                             "--bindings", bf, NULL),
                     1);
    assert_non_null(strstr(err, "bbc: error: bind: WrongRole: slot 'compute' needs role Backend "
                                "but 'example::Counter' ("));
    assert_non_null(strstr(err, "bindings.json) has role Aggregator"));
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                             "--bindings", bf, "--bind", "compute=cpu::CpuBackend", NULL),
                     0);
}

/* A model whose concrete type only the bbc_types test plugin exports. */
static void write_dependent(const char *path)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *mod = bb_rec_module(r, "WithDeps");
    bb_rec_concrete(mod, BB_ROLE_BACKEND, "backend", "cpu::CpuBackend", "{}", NULL);
    bb_slot *model = bb_rec_concrete(mod, BB_ROLE_MODEL, "model", "bbctest::Dependent", "{}", NULL);
    bb_rec *g = bb_module_body(mod);
    bb_sys_app_emit(g, bb_role_model_params(g, model), "params");
    bb_error e = {0};
    save(fx_build(r, mod, &e), path, &e);
}

/* --plugin-path DIR and $BB_PLUGIN_PATH both extend the search. */
static void test_plugin_search(void **state)
{
    (void)state;
    char in[128], out[128], err[4096];
    snprintf(in, sizeof in, "%s/deps.onnx", dir);
    snprintf(out, sizeof out, "%s/deps.compiled.onnx", dir);
    write_dependent(in);
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, NULL), 1);
    assert_non_null(strstr(err, "bbc: error: bind: UnknownComponentType: slot 'model' is bound to "
                                "'bbctest::Dependent' (recorded), which no plugin exports"));
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                             "--plugin-path", types_dir, NULL),
                     0);
    bb_model *m = load_out(out);
    assert_string_equal(bb_kv_get(&m->metadata, "ai.bytesandbrains.binding.@self.model"),
                        "Model|bbctest::Dependent|1");
    bb_model_free(m);
    const char *old = getenv("BB_PLUGIN_PATH");
    char *saved = old ? strdup(old) : NULL;
    char both[4300];
    snprintf(both, sizeof both, "%s%s%s", types_dir, saved ? ":" : "", saved ? saved : "");
    setenv("BB_PLUGIN_PATH", both, 1);
    int rc = run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, NULL);
    if (saved)
        setenv("BB_PLUGIN_PATH", saved, 1);
    else
        unsetenv("BB_PLUGIN_PATH");
    free(saved);
    if (rc != 0)
        fail_msg("with BB_PLUGIN_PATH: exit %d: %s", rc, err);
    /* A --plugin-path directory that does not exist is bad input. */
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                             "--plugin-path", "/nonexistent/plugins", NULL),
                     1);
    assert_non_null(strstr(err, "/nonexistent/plugins"));
}

/* --target-version: the IR version the input must carry. */
static void test_target_version(void **state)
{
    (void)state;
    char in[128], out[128], err[4096];
    snprintf(in, sizeof in, "%s/adder.onnx", dir);
    snprintf(out, sizeof out, "%s/tv.onnx", dir);
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, "--bind",
                             "compute=cpu::CpuBackend", "--target-version", "11", NULL),
                     1);
    assert_string_equal(err, "bbc: error: pipeline: IrVersionMismatch: the model has ir_version "
                             "10, the target is 11 (--target-version)\n");
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, "--bind",
                             "compute=cpu::CpuBackend", "--target-version", "10", NULL),
                     0);
    static const char *const BAD[] = {"0", "abc", "-3", "99999"};
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                                 "--target-version", BAD[i], NULL),
                         2);
        assert_non_null(strstr(err, "--target-version"));
    }
}

/* --per-hop-budget-ns reaches the send's deadline and its DeadlineCheck. */
static void test_per_hop_budget(void **state)
{
    (void)state;
    char in[128], out[128], err[4096];
    snprintf(in, sizeof in, "%s/sender.onnx", dir);
    snprintf(out, sizeof out, "%s/sender.compiled.onnx", dir);
    bb_error e = {0};
    save(bm_sender(&e), in, &e);
    static const struct {
        const char *arg;
        int64_t want;
    } CASES[] = {{NULL, (int64_t)BBC_DEFAULT_PER_HOP_BUDGET_NS}, {"250000000", 250000000}};
    for (size_t i = 0; i < 2; i++) {
        int rc = CASES[i].arg ? run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                                        "--per-hop-budget-ns", CASES[i].arg, NULL)
                              : run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                                        NULL);
        if (rc != 0)
            fail_msg("exit %d: %s", rc, err);
        bb_model *m = load_out(out);
        const bb_function *f = fx_fn(m, BB_SELF_CLASS);
        assert_int_equal(bb_node_attr_int(fx_find(f, "Send", 0), "deadline_ns", 0), CASES[i].want);
        assert_int_equal(bb_node_attr_int(fx_find(f, BB_OP_DEADLINE_CHECK, 0), "deadline_ns", 0),
                         CASES[i].want);
        bb_model_free(m);
    }
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                             "--per-hop-budget-ns", "0", NULL),
                     2);
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                             "--per-hop-budget-ns", "1e9", NULL),
                     2);
}

/* --permissive-types lets an unnarrowed value through. */
static void test_permissive_types(void **state)
{
    (void)state;
    char in[128], out[128], err[4096];
    snprintf(in, sizeof in, "%s/vague.onnx", dir);
    snprintf(out, sizeof out, "%s/vague.compiled.onnx", dir);
    bb_error e = {0};
    save(bm_unresolved_type(&e), in, &e);
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, NULL), 1);
    assert_non_null(strstr(err, "bbc: error: type_solver: UnresolvedType: function 'Vague': value "
                                "'anything'"));
    int rc = run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                     "--permissive-types", NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, err);
    bb_model *m = load_out(out);
    const bb_type_node *t = bbc_value_type(fx_fn(m, BB_SELF_CLASS), "anything");
    assert_true(!t || !bb_type_is_leaf(t));
    bb_model_free(m);
}

/* --without-stage skips a canonical pass; the pre-flight names the gap. */
static void test_without_stage(void **state)
{
    (void)state;
    char in[128], out[128], err[4096];
    snprintf(in, sizeof in, "%s/sender.onnx", dir);
    snprintf(out, sizeof out, "%s/ws.onnx", dir);
    bb_error e = {0};
    save(bm_sender(&e), in, &e);
    assert_int_equal(run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out,
                             "--without-stage", "insert_backoff_gate_tx", NULL),
                     1);
    assert_string_equal(err, "bbc: error: validate_runtime_complete: Internal: partition `@self`: "
                             "Send 'Send_0' has no BackoffGateTx\n");
    int rc = run_cmd(bbc_cmd_compile, err, sizeof err, "compile", in, "-o", out, "--without-stage",
                     "insert_backoff_gate_tx", "--without-stage", "validate_runtime_complete",
                     NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, err);
    bb_model *m = load_out(out);
    const bb_function *f = fx_fn(m, BB_SELF_CLASS);
    assert_int_equal(fx_count(f, "BackoffGateTx"), 0);
    assert_int_equal(fx_count(f, "PeerHealthGateTx"), 1);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile_ok),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_user_stage),
        cmocka_unit_test(test_check_and_passes),
        cmocka_unit_test(test_bindings_parsers),
        cmocka_unit_test(test_man_page),
        cmocka_unit_test(test_bindings_file),
        cmocka_unit_test(test_plugin_search),
        cmocka_unit_test(test_target_version),
        cmocka_unit_test(test_per_hop_budget),
        cmocka_unit_test(test_permissive_types),
        cmocka_unit_test(test_without_stage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
