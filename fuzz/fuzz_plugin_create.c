/*
 * fuzz_plugin_create.c — every component type of every plugin in the
 * plugin directory, created from hostile construction state and config
 * (bb_loaded_type_create, the call the engine makes at install) and
 * destroyed. Nothing here names a plugin: a plugin dropped into the
 * directory is fuzzed by the next run, with seeds of its own.
 *
 * Input: byte 0 picks the type (modulo the number loaded, in the loader's
 * order), then the construction state's JSON (AttributeProto.s) up to a
 * NUL, the per-slot config JSON up to the next NUL, and the rest, when
 * not empty, a TensorProto for AttributeProto.t (weights).
 * Seeds (FUZZ_WRITE_SEEDS=dir): for each type, its declared config
 * defaults as both JSON texts, empty ones, and the construction state
 * every slot bound to it in the compiled fed_round artifact carries.
 *
 * The bb_ctx a create gets is a stand-in with no peers, no dependencies
 * and a clock at zero: what a create may call, answered as a node with
 * nothing bound would.
 *
 * Sizes are the operator's to choose: a component told to hold 10^9 rows
 * (data::Synthetic "samples") allocates them, within its documented cap,
 * and 1000 x 100000 takes seconds to generate. Neither is a finding, but
 * both are past the fuzzer's memory and time limits, so inputs whose JSON
 * holds a number beyond 4096 are skipped.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/arena.h"
#include "bb/artifact.h"
#include "bb/model_io.h"
#include "bb/plugin_loader.h"

#include <cJSON.h>
#include "fuzz/support/fuzz_support.h"

/* ---- the stand-in context ------------------------------------------------------- */

static void *ctx_dependency(bb_ctx *c, const char *slot, const bb_component_type **type)
{
    (void)c, (void)slot;
    if (type)
        *type = NULL;
    return NULL;
}
static int ctx_call_dependency(bb_ctx *c, const char *slot, const char *op, bb_value *const *in,
                               uint32_t n_in, bb_value **out, uint32_t n_out, bb_error *err)
{
    (void)c, (void)in, (void)n_in, (void)out, (void)n_out;
    return bb_error_set(err, BB_ENOTFOUND, "no dependency '%s' for %s", slot, op);
}
static uint64_t ctx_now(bb_ctx *c) { (void)c; return 0; }
static uint64_t ctx_rng(bb_ctx *c)
{
    (void)c;
    static uint64_t x = 88172645463325252ull;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
}
static const bb_value *ctx_local_peer(bb_ctx *c) { (void)c; return NULL; }
static size_t ctx_peers(bb_ctx *c, bb_value **out, size_t cap)
{
    (void)c, (void)out, (void)cap;
    return 0;
}
static size_t ctx_peers_running(bb_ctx *c, const char *t, bb_value **out, size_t cap)
{
    (void)c, (void)t, (void)out, (void)cap;
    return 0;
}
static bb_value *ctx_peer_addresses(bb_ctx *c, const bb_value *p) { (void)c, (void)p; return NULL; }
static bb_completion *ctx_open_completion(bb_ctx *c) { (void)c; return NULL; }
static int ctx_schedule(bb_ctx *c, uint64_t d, uint64_t t) { (void)c, (void)d, (void)t; return BB_OK; }
static int ctx_submit_work(bb_ctx *c, void (*work)(void *), void (*done)(void *), void *arg)
{
    (void)c;
    work(arg);
    done(arg);
    return BB_OK;
}
static void ctx_log(bb_ctx *c, bb_log_level l, const char *m) { (void)c, (void)l, (void)m; }
static const char *ctx_slot(bb_ctx *c) { (void)c; return "fuzz"; }
static int ctx_add_peer(bb_ctx *c, const bb_value *p, const bb_value *a, bb_error *err)
{
    (void)c, (void)p, (void)a, (void)err;
    return BB_OK;
}

/* bbd's answer: no cache, put hands the value back */
static bb_value *ctx_shared_get(bb_ctx *c, const char *key) { (void)c, (void)key; return NULL; }
static bb_value *ctx_shared_put(bb_ctx *c, const char *key, bb_value *v)
{
    (void)c, (void)key;
    return bb_value_ref(v);
}

/* Nothing sent: no peer is known here */
static int ctx_send_fill(bb_ctx *c, const bb_value *peer, const char *slot, const char *op,
                         const uint8_t *payload, size_t len, uint64_t timeout_ns, uint64_t *token,
                         bb_error *err)
{
    (void)c, (void)peer, (void)slot, (void)payload, (void)len, (void)timeout_ns, (void)token;
    return bb_error_set(err, BB_ENOTFOUND, "no address known for the peer of %s", op);
}
static size_t ctx_local_targets(bb_ctx *c, const char **out, size_t cap)
{
    (void)c;
    if (cap)
        out[0] = "Fuzz";
    return 1;
}

/* Every field by name: a field the ABI adds and this table lacks would be
 * NULL with struct_size saying it is there (the assert below catches it). */
static const bb_ctx_api CTX_API = {
    .struct_size = sizeof(bb_ctx_api),
    .dependency = ctx_dependency,
    .call_dependency = ctx_call_dependency,
    .now_ns = ctx_now,
    .rng_u64 = ctx_rng,
    .local_peer = ctx_local_peer,
    .peers = ctx_peers,
    .peers_running = ctx_peers_running,
    .peer_addresses = ctx_peer_addresses,
    .open_completion = ctx_open_completion,
    .schedule = ctx_schedule,
    .submit_work = ctx_submit_work,
    .log = ctx_log,
    .slot = ctx_slot,
    .add_peer = ctx_add_peer,
    .shared_get = ctx_shared_get,
    .shared_put = ctx_shared_put,
    .send_fill = ctx_send_fill,
    .local_targets = ctx_local_targets,
};
/* a field the ABI adds must be answered above: this fails to compile when
 * bb_ctx_api grows past the last field named here */
_Static_assert(sizeof(bb_ctx_api) == offsetof(bb_ctx_api, local_targets) +
                                         sizeof(((bb_ctx_api *)0)->local_targets),
               "bb_ctx_api grew: give the stand-in context the new field");
static bb_ctx CTX = {&CTX_API};

/* ---- seeds ------------------------------------------------------------------------ */

static void seed(size_t type, const char *what, const char *state, size_t state_len,
                 const char *config)
{
    size_t clen = strlen(config), n = 1 + state_len + 1 + clen + 1;
    uint8_t *b = malloc(n);
    b[0] = (uint8_t)type;
    memcpy(b + 1, state, state_len);
    b[1 + state_len] = 0;
    memcpy(b + 2 + state_len, config, clen);
    b[2 + state_len + clen] = 0;
    char name[128];
    snprintf(name, sizeof name, "type%03zu-%s", type, what);
    fz_seed_write(name, b, n);
    free(b);
}

/* {"key": default, ...} of the keys that have one. */
static void defaults_object(const bb_component_type *t, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "{");
    for (uint32_t i = 0; i < t->n_config && n < cap; i++)
        if (t->config[i].default_json)
            n += (size_t)snprintf(out + n, cap - n, "%s\"%s\":%s", n > 1 ? "," : "",
                                  t->config[i].key, t->config[i].default_json);
    if (n < cap)
        snprintf(out + n, cap - n, "}");
}

static void write_seeds(const bb_plugin_loader *l)
{
    size_t nt = bb_plugin_loader_type_count(l);
    char obj[8192];
    for (size_t i = 0; i < nt; i++) {
        defaults_object(bb_plugin_loader_type_at(l, i)->type, obj, sizeof obj);
        seed(i, "defaults", obj, strlen(obj), obj);
        seed(i, "empty", "", 0, "");
    }
    bb_arena *a = bb_arena_create();
    bb_artifact art;
    bb_error err = {0};
    if (!a || bb_artifact_read(fz_artifact(), "fed_round", a, &art, &err))
        fz_die("artifact view", err.msg);
    for (size_t t = 0; t < art.n_targets; t++) {
        const bb_artifact_target *tg = &art.targets[t];
        for (size_t b = 0; b < tg->n_bindings; b++) {
            const bb_artifact_binding *bd = &tg->bindings[b];
            for (size_t i = 0; !bd->error && i < nt; i++) {
                if (strcmp(bb_plugin_loader_type_at(l, i)->type->type_name,
                           bd->parsed.type_name) != 0)
                    continue;
                for (size_t k = 0; k < tg->fn->attribute_protos.n; k++) {
                    const bb_attr *at = tg->fn->attribute_protos.v[k];
                    if (at->name && !strcmp(at->name, bd->slot) && at->has_s) {
                        char what[96];
                        snprintf(what, sizeof what, "%s-%s", tg->name, bd->slot);
                        seed(i, what, (const char *)at->s.data, at->s.len, "{}");
                    }
                }
            }
        }
    }
    bb_arena_destroy(a);
}

/* ---- the target ------------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const bb_plugin_loader *l = bbd_registry_loader(fz_registry());
    if (!bb_plugin_loader_type_count(l))
        fz_die("plugin create", "no component type found in the plugin directory");
    if (fz_seed_dir())
        write_seeds(l);
    return 0;
}

/* Does j hold a number beyond 4096 (see the top comment)? */
static bool has_big_number(const cJSON *j)
{
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j) && (j->valuedouble > 4096 || j->valuedouble < -4096))
            return true;
        if (j->child && has_big_number(j->child))
            return true;
    }
    return false;
}

static bool too_big(const char *json)
{
    cJSON *j = json ? cJSON_Parse(json) : NULL;
    bool big = j && has_big_number(j);
    cJSON_Delete(j);
    return big;
}

/* The next NUL-terminated piece of data[*off..size) (or the rest). */
static char *piece(const uint8_t *data, size_t size, size_t *off)
{
    const uint8_t *end = memchr(data + *off, 0, size - *off);
    size_t n = end ? (size_t)(end - (data + *off)) : size - *off;
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, data + *off, n);
        s[n] = '\0';
    }
    *off += n + (end ? 1 : 0);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const bb_plugin_loader *l = bbd_registry_loader(fz_registry());
    if (size < 1)
        return 0;
    const bb_loaded_type *t = bb_plugin_loader_type_at(l, data[0] % bb_plugin_loader_type_count(l));
    size_t off = 1;
    char *state = piece(data, size, &off), *config = piece(data, size, &off);
    if (too_big(state) || too_big(config)) {
        free(state);
        free(config);
        return 0;
    }
    bb_arena *a = bb_arena_create();
    bb_attr attr = {.name = "fuzz", .type = BB_ATTR_STRING};
    attr.s.data = (uint8_t *)state;
    attr.s.len = state ? strlen(state) : 0;
    attr.has_s = true;
    bb_error err = {0};
    if (a && off < size &&
        bb_tensor_proto_decode(a, data + off, size - off, "fuzz.t", &attr.t, &err) != BB_OK)
        attr.t = NULL;
    bb_create_args args = {sizeof args, "fuzz", &attr, config, 7, &CTX};
    void *inst = NULL;
    if (state && config && bb_loaded_type_create(t, &args, &inst, &err) == BB_OK)
        t->type->destroy(inst);
    bb_arena_destroy(a);
    free(state);
    free(config);
    return 0;
}
