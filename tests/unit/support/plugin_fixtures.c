/*
 * plugin_fixtures.c — see plugin_fixtures.h. Test-only: the loader and the
 * repository path are process-wide statics.
 */
#include "plugin_fixtures.h"

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bb/model_io.h"
#include "bb/multiaddr.h"
#include "bb/plugin_loader.h"
#include "bbc/compiler.h"
#include "engine_fixtures.h"

static bb_plugin_loader *g_loader;
static char g_repo[PATH_MAX];

/* <build>/tests/test_x -> <build> */
static void build_dir(char *out, size_t cap)
{
    const char *env = getenv("BB_BUILD");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(out, cap, "build");
        return;
    }
    exe[n] = '\0';
    for (int i = 0; i < 2; i++) {
        char *s = strrchr(exe, '/');
        if (s)
            *s = '\0';
    }
    snprintf(out, cap, "%s", exe);
}

bb_plugin_loader *pfx_loader(void)
{
    bb_error err = {0};
    if (!g_loader) {
        char dir[PATH_MAX], plugins[PATH_MAX + 64];
        build_dir(dir, sizeof dir);
        snprintf(plugins, sizeof plugins, "%s/lib/bytesandbrains/plugins", dir);
        if (bb_plugin_loader_create(BB_PLUGIN_LOADER_ONLY_EXPLICIT, &g_loader, &err) ||
            bb_plugin_loader_add_dirs(g_loader, plugins, &err) ||
            bb_plugin_loader_scan(g_loader, &err)) {
            fprintf(stderr, "plugin loader: %s\n", err.msg);
            bb_plugin_loader_destroy(g_loader);
            g_loader = NULL;
        }
    }
    return g_loader;
}

const bb_component_type *pfx_type(const char *type_name)
{
    const bb_loaded_type *t = pfx_loader() ? bb_plugin_loader_find(g_loader, type_name) : NULL;
    if (!t)
        fprintf(stderr, "plugin type %s not found\n", type_name);
    return t ? t->type : NULL;
}

void pfx_shutdown(void)
{
    bb_plugin_loader_destroy(g_loader);
    g_loader = NULL;
}

int pfx_group_teardown(void **state)
{
    (void)state;
    pfx_shutdown();
    return 0;
}

void *pfx_create(const bb_component_type *t, const char *slot, const char *config_json,
                 const bb_attr *construction, uint64_t seed, bb_ctx *ctx, bb_error *err)
{
    bb_create_args a = {.struct_size = sizeof a,
                        .slot = slot,
                        .construction = construction,
                        .config_json = config_json,
                        .seed = seed,
                        .ctx = ctx};
    void *inst = NULL;
    if (t->create(&a, &inst, err) != BB_OK)
        return NULL;
    return inst;
}

/* A completion that must never be used: direct calls are synchronous. */
static int never_complete(bb_completion *c, int status, bb_value **o, uint32_t n, const char *m)
{
    (void)c;
    (void)status;
    (void)m;
    for (uint32_t i = 0; i < n; i++)
        bb_value_unref(o[i]);
    return BB_ESTATE;
}
static void never_abandon(bb_completion *c) { (void)c; }
static const bb_completion_api NEVER = {sizeof NEVER, never_complete, never_abandon};

int pfx_call(const bb_component_type *t, void *inst, bb_ctx *ctx, const char *op_type,
             const bb_node *node, bb_value *const *inputs, uint32_t n_inputs, bb_value **outputs,
             uint32_t n_outputs, bb_error *err)
{
    uint32_t idx = 0;
    const char *domain = NULL;
    for (uint32_t s = 0; s < t->n_opsets && !domain; s++)
        if (bb_component_type_find_op(t, t->opsets[s].domain, op_type, &idx))
            domain = t->opsets[s].domain;
    if (!domain)
        return bb_error_set(err, BB_ENOTFOUND, "%s has no op %s", t->type_name, op_type);
    bb_completion c = {&NEVER};
    bb_dispatch_call call = {.domain = domain,
                             .op_type = op_type,
                             .op_index = idx,
                             .inputs = inputs,
                             .n_inputs = n_inputs,
                             .n_outputs = n_outputs,
                             .node = node,
                             .completion = &c};
    for (uint32_t i = 0; i < n_outputs; i++)
        outputs[i] = NULL;
    bb_dispatch_result r = t->dispatch(inst, ctx, &call, outputs, err);
    if (r == BB_DISPATCH_NOW_OK)
        return BB_OK;
    if (r == BB_DISPATCH_LATER)
        return bb_error_set(err, BB_ESTATE, "%s.%s went asynchronous", t->type_name, op_type);
    return err->code ? err->code : BB_ERUNTIME;
}

bb_model *pfx_compile(const bb_model *in, bb_error *err)
{
    struct bb_plugin_loader *l = pfx_loader();
    if (!l) {
        bb_error_set(err, BB_ENOTFOUND, "the build's plugins cannot be loaded");
        return NULL;
    }
    bb_type_source ts;
    bb_type_source_from_loader(&ts, l, NULL);
    bbc_options o;
    bbc_options_init(&o);
    bbc_error e = {0};
    bb_model *out = NULL;
    if (bbc_compile(in, &o, NULL, &ts, NULL, 0, &out, &e)) {
        bb_error_set(err, BB_ECOMPILE, "%s: %s", e.pass, e.msg);
        return NULL;
    }
    return out;
}

/* ---- registry --------------------------------------------------------------------- */

typedef struct reg_ud {
    const pfx_slot_config *cfg;
    size_t n;
} reg_ud;

static reg_ud g_reg_ud;

static const bb_component_type *reg_find(void *ud, const char *name)
{
    (void)ud;
    return pfx_type(name);
}

static const char *reg_config(void *ud, const char *slot)
{
    const reg_ud *r = ud;
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->cfg[i].slot, slot) == 0)
            return r->cfg[i].json;
    return NULL;
}

bb_engine_registry pfx_registry(const pfx_slot_config *cfg, size_t n)
{
    g_reg_ud.cfg = cfg;
    g_reg_ud.n = n;
    bb_engine_registry r = {.types = {.find = reg_find}, .slot_config = reg_config,
                            .ud = &g_reg_ud};
    return r;
}

/* ---- repository ------------------------------------------------------------------------ */

const char *pfx_repo_path(const char *rel)
{
    static char out[PATH_MAX + 256];
    if (!g_repo[0]) {
        char dir[PATH_MAX];
        build_dir(dir, sizeof dir);
        char *real = realpath(dir, NULL);
        snprintf(g_repo, sizeof g_repo, "%s", real ? real : dir);
        free(real);
        char *s = strrchr(g_repo, '/'); /* <repo>/<build> -> <repo> */
        if (s)
            *s = '\0';
    }
    snprintf(out, sizeof out, "%s/%s", g_repo, rel);
    return out;
}

bool pfx_fetch_data(void)
{
    static int state; /* 0 not tried, 1 ok, -1 failed */
    if (!state) {
        char cmd[PATH_MAX + 64];
        snprintf(cmd, sizeof cmd, "'%s' >&2", pfx_repo_path("scripts/fetch-data"));
        int rc = system(cmd);
        state = rc == 0 && access(pfx_repo_path("data/digits.csv.gz"), R_OK) == 0 ? 1 : -1;
        if (state < 0)
            fprintf(stderr, "scripts/fetch-data failed (exit %d)\n", rc);
    }
    return state > 0;
}

/* ---- example programs ------------------------------------------------------------------- */

bb_model *pfx_compile_example(const char *example, const char *const *knobs)
{
    char build[PATH_MAX], exe[PATH_MAX + 64], out[] = "/tmp/bb-test-example-XXXXXX";
    build_dir(build, sizeof build);
    snprintf(exe, sizeof exe, "%s/examples/%s", build, example);
    int fd = mkstemp(out);
    assert_true(fd >= 0);
    close(fd);
    const char *argv[16] = {exe, out};
    size_t n = 2;
    for (; knobs && knobs[n - 2] && n < 15; n++)
        argv[n] = knobs[n - 2];
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status))
        fail_msg("%s failed (status %d)", exe, status);
    bb_model *in = NULL, *compiled = NULL;
    bb_error e = {0};
    if (bb_model_load_file(out, &in, &e))
        fail_msg("load %s: %s", out, e.msg);
    unlink(out);
    bb_type_source ts;
    bb_type_source_from_loader(&ts, pfx_loader(), NULL);
    bbc_options o;
    bbc_options_init(&o);
    bbc_error err = {0};
    if (bbc_compile(in, &o, NULL, &ts, NULL, 0, &compiled, &err))
        fail_msg("compile: %s: %s", err.pass, err.msg);
    bb_model_free(in);
    return compiled;
}

/* ---- values ------------------------------------------------------------------------------ */

bb_value *pfx_tensor(const float *v, uint32_t nd, const int64_t *dims)
{
    size_t n = bb_shape_numel(nd, dims);
    return bb_value_tensor_copy(BB_DT_FLOAT, nd, dims, v, n * sizeof(float));
}

bb_engine *pfx_model_engine(bb_model *m, const char *const *targets, size_t n,
                            const char *model_cfg, const char *data_cfg,
                            const bb_engine_config *ecfg, bb_error *err)
{
    bb_engine *e = fx_engine(1, 7001, ecfg);
    if (!e) {
        bb_error_set(err, BB_ENOMEM, "cannot create the engine");
        return NULL;
    }
    pfx_slot_config sc[2] = {{"model", model_cfg}, {"data", data_cfg}};
    bb_engine_registry reg = pfx_registry(sc, 2);
    if (bb_engine_install(e, m, targets, n, &reg, err) != BB_OK) {
        bb_engine_free(e);
        return NULL;
    }
    return e;
}

int pfx_invoke(bb_engine *e, const char *target, const char *input, bb_value *v, bb_error *err)
{
    bb_engine_input in = {.name = input, .value = v};
    int rc = bb_engine_invoke(e, target, &in, 1, NULL, err);
    bb_value_unref(v);
    return rc;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const fx_rec *pfx_run_until(bb_engine *e, fx_log *log, const char *topic, double seconds)
{
    double end = mono_s() + seconds;
    bb_steps s;
    bb_steps_init(&s);
    const fx_rec *r = NULL;
    while (!(r = fx_log_app(log, topic, 0)) && !fx_log_count(log, BB_STEP_OP_FAILED) &&
           mono_s() < end) {
        bb_engine_poll(e, 1, &s);
        for (size_t k = 0; k < s.n; k++)
            fx_log_add(log, &s.v[k]);
        if (!s.n) {
            struct timespec ts = {0, 200000}; /* waiting on a worker */
            nanosleep(&ts, NULL);
        }
    }
    bb_steps_free(&s);
    return r;
}

bb_engine *pfx_net_node(struct fx_net *net, uint8_t seed, bb_model *m, const char *target,
                        const pfx_slot_config *cfg, size_t n_cfg, const bb_engine_config *ecfg,
                        bb_error *err)
{
    bb_engine *e = fx_engine(seed, (uint16_t)(7000 + seed), ecfg);
    if (!e) {
        bb_error_set(err, BB_ENOMEM, "engine %u: cannot create it", seed);
        return NULL;
    }
    bb_engine_registry reg = pfx_registry(cfg, n_cfg);
    if (net->n >= (int)(sizeof net->e / sizeof *net->e))
        bb_error_set(err, BB_EFULL, "engine %u: the network is full", seed);
    else if (bb_engine_install(e, m, &target, 1, &reg, err) == BB_OK) {
        fx_net_add(net, e);
        return e;
    }
    bb_engine_free(e);
    return NULL;
}

bb_model *pfx_selector_model(const char *type, int64_t n, const char *of_class)
{
    static const char *const SEL = "ai.bytesandbrains.role.peer_selector";
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Server", "go", "peers,view");
    bb_node *s = fx_op(m, f, SEL, "Sample", "", "peers");
    fx_int(m, s, "n", n);
    fx_meta(m, s, "ai.bytesandbrains.slot", "selector");
    bb_node *v = fx_op(m, f, SEL, "CurrentView", "", "view");
    fx_meta(m, v, "ai.bytesandbrains.slot", "selector");
    if (of_class) {
        fx_meta(m, s, "ai.bytesandbrains.peer_class", of_class);
        fx_meta(m, v, "ai.bytesandbrains.peer_class", of_class);
    }
    char triple[64];
    snprintf(triple, sizeof triple, "PeerSelector|%s|0", type);
    fx_bind(m, "Server", "selector", triple);
    return m;
}

int pfx_seed_of(const bb_value *p)
{
    for (int i = 1; i <= 64; i++) {
        bb_peerid id = fx_peer((uint8_t)i);
        if (p && p->u.bytes.len == id.len && !memcmp(p->u.bytes.data, id.bytes, id.len))
            return i;
    }
    return 0;
}

bb_engine *pfx_net_start(fx_net *net, uint8_t seed, bb_model *m, const char *cfg)
{
    pfx_slot_config sc[1] = {{"selector", cfg}};
    bb_error err = {0};
    bb_engine *e = pfx_net_node(net, seed, m, "Server", sc, 1, NULL, &err);
    if (!e)
        fail_msg("node %u: %s", seed, err.msg);
    bb_bootstrap_target fresh = {.kind = BB_BOOTSTRAP_FRESH};
    assert_int_equal(bb_engine_run_bootstrap(e, &fresh, &err), BB_OK);
    return e;
}

void pfx_net_advance(fx_net *net, uint64_t ns)
{
    for (uint64_t t = 0; t < ns; t += 10000000) {
        net->now += 10000000;
        fx_net_run(net, 20);
    }
}

void pfx_deliver_control(bb_engine *e, uint8_t from, uint64_t ref, const char *op,
                         const uint8_t *payload, size_t len, uint64_t token)
{
    uint8_t sfx[300];
    size_t sl, n;
    assert_int_equal(bb_suffix_component_op(ref, op, sfx, sizeof sfx, &sl, NULL), BB_OK);
    fx_fill f = {.suffix = sfx, .suffix_len = sl, .payload = payload, .len = len};
    fx_env env = {.fills = &f, .n_fills = 1, .corr = 1, .wire_req_id = token};
    uint8_t *bytes = fx_envelope(&env, &n);
    bb_peerid src = fx_peer(from);
    assert_int_equal(bb_engine_deliver_envelope(e, &src, NULL, bytes, n, NULL), BB_OK);
    free(bytes);
}

void pfx_assert_configs_refused(const char *type, const pfx_bad_config *cases, size_t n)
{
    const bb_component_type *t = pfx_type(type);
    assert_non_null(t);
    for (size_t i = 0; i < n; i++) {
        bb_error err = {0};
        assert_null(pfx_create(t, "selector", cases[i].json, NULL, 1, NULL, &err));
        if (!strstr(err.msg, cases[i].want))
            fail_msg("%s: \"%s\" lacks \"%s\"", cases[i].json, err.msg, cases[i].want);
    }
}

bb_value *pfx_peer(uint8_t seed)
{
    bb_peerid id = fx_peer(seed);
    return bb_value_bytes(&BB_TYPE_PEER_ID, id.bytes, id.len);
}
