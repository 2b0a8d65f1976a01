/*
 * plugin_fixtures.h — test support for the standard component plugins
 * (plugins/nn, agg, data, peers): load the build's plugin .so files through
 * the real plugin loader, create instances, dispatch ops directly (with an
 * optional stand-in ctx), hand the engine a registry with per-slot configs,
 * and find the repository (for scripts/fetch-data and data/).
 *
 * The loader is process-wide and opened on first use; pfx_shutdown closes
 * it (call it from a group teardown, after every instance is destroyed).
 */
#ifndef BB_TEST_PLUGIN_FIXTURES_H
#define BB_TEST_PLUGIN_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/plugin.h"
#include "bb/value.h"
#include "bb/engine.h"

/* The type with this TYPE_NAME from the build's plugin directory
 * ($BB_BUILD/lib/bytesandbrains/plugins, else next to the test binary), or
 * NULL (the reason is printed). */
const bb_component_type *pfx_type(const char *type_name);
void pfx_shutdown(void);
/* The loader behind pfx_type (opened on first use; NULL on failure). */
struct bb_plugin_loader *pfx_loader(void);
/* A cmocka group teardown that calls pfx_shutdown. */
int pfx_group_teardown(void **state);

/* create() with slot, config JSON (may be NULL), construction attribute
 * (may be NULL), seed and ctx (may be NULL). NULL on failure, err filled. */
void *pfx_create(const bb_component_type *t, const char *slot, const char *config_json,
                 const bb_attr *construction, uint64_t seed, bb_ctx *ctx, bb_error *err);

/* Dispatch op_type (looked up in any of t's opsets) synchronously. A
 * LATER result is an error here (BB_ESTATE): use the engine for those.
 * outputs[] receive new references. */
int pfx_call(const bb_component_type *t, void *inst, bb_ctx *ctx, const char *op_type,
             const bb_node *node, bb_value *const *inputs, uint32_t n_inputs, bb_value **outputs,
             uint32_t n_outputs, bb_error *err);

/* A recorded program compiled as `bbc compile` would, against the build's
 * plugins (in is borrowed). NULL with err filled ("<pass>: <message>"). */
bb_model *pfx_compile(const bb_model *in, bb_error *err);

/* ---- engine registry: types from the plugins, configs per slot ---------------- */
typedef struct pfx_slot_config {
    const char *slot;
    const char *json;
} pfx_slot_config;
/* A registry whose slot_config answers from cfg[0..n) (borrowed: keep cfg
 * alive while the engine installs). */
bb_engine_registry pfx_registry(const pfx_slot_config *cfg, size_t n);

/* ---- one node running a model and its data source ------------------------------------ */
/* An engine (fx_engine(1, 7001, ecfg); ecfg may be NULL) with targets[0..n)
 * of m installed, slot "model" configured by model_cfg and "data" by
 * data_cfg (either may be NULL). NULL with err filled on failure. */
bb_engine *pfx_model_engine(bb_model *m, const char *const *targets, size_t n,
                            const char *model_cfg, const char *data_cfg,
                            const bb_engine_config *ecfg, bb_error *err);
/* Invoke target with one input (takes v). A bb status. */
int pfx_invoke(bb_engine *e, const char *target, const char *input, bb_value *v, bb_error *err);
struct fx_log;
struct fx_rec;
/* Polls e (now 1) until an AppEvent with topic is in log, an op fails or
 * seconds of wall time pass; sleeps 0.2 ms when a poll found nothing (a
 * worker is busy). The event (owned by log), or NULL (the log tells an op
 * failure from a timeout). */
const struct fx_rec *pfx_run_until(bb_engine *e, struct fx_log *log, const char *topic,
                                   double seconds);

/* ---- nodes of an in-memory network (engine_fixtures.h's fx_net) -------------------- */
/* An engine with PeerId fx_peer(seed) and address port 7000 + seed (ecfg may
 * be NULL: defaults), `target` of the compiled m installed with the build's
 * plugins and the slot configs cfg[0..n_cfg), added to net. NULL with err
 * filled when it cannot be created or installed. */
struct fx_net;
bb_engine *pfx_net_node(struct fx_net *net, uint8_t seed, bb_model *m, const char *target,
                        const pfx_slot_config *cfg, size_t n_cfg, const bb_engine_config *ecfg,
                        bb_error *err);

/* ---- selectors through the engine ------------------------------------------------- */
/* Target "Server"(go) -> Sample(n) (output "peers") and CurrentView (output
 * "view") on slot "selector" bound to type with slot id 0; both nodes
 * tagged with of_class when it is not NULL. */
bb_model *pfx_selector_model(const char *type, int64_t n, const char *of_class);
/* Index (1-based seed) of a PeerId value among fx_peer(1..64), or 0. */
int pfx_seed_of(const bb_value *peer);
/* A node of net running m's "Server" with slot "selector" configured by
 * cfg, its component bootstraps fired (as bbd does on a fresh start). */
bb_engine *pfx_net_start(struct fx_net *net, uint8_t seed, bb_model *m, const char *cfg);
/* Let ns of virtual time pass on net in 10 ms steps, running every node. */
void pfx_net_advance(struct fx_net *net, uint64_t ns);
/* Hand e a control-plane request from fx_peer(from): payload[0..len) to
 * op of the component with slot id ref, correlation token. */
void pfx_deliver_control(bb_engine *e, uint8_t from, uint64_t ref, const char *op,
                         const uint8_t *payload, size_t len, uint64_t token);

/* ---- configs a type refuses ------------------------------------------------------- */
typedef struct pfx_bad_config {
    const char *json, *want; /* the config, and what its error message must say */
} pfx_bad_config;
/* create() of type must fail for each config, naming what the case wants. */
void pfx_assert_configs_refused(const char *type, const pfx_bad_config *cases, size_t n);

/* ---- example programs ------------------------------------------------------------ */
/* Record examples/<example> with its knobs (argv after the output file,
 * NULL-terminated; knobs may be NULL), then compile it as bbc does with the
 * build's plugins. A cmocka failure when either fails; the caller frees the
 * compiled model. */
bb_model *pfx_compile_example(const char *example, const char *const *knobs);

/* ---- the repository ------------------------------------------------------------- */
/* Absolute path of rel inside the repository (static buffer). */
const char *pfx_repo_path(const char *rel);
/* Runs scripts/fetch-data once per process; true when data/digits.csv.gz
 * is there afterwards (the script's failure is printed). */
bool pfx_fetch_data(void);

/* ---- values ---------------------------------------------------------------------- */
/* f32 tensor of shape dims[0..nd) copied from v. */
bb_value *pfx_tensor(const float *v, uint32_t nd, const int64_t *dims);
/* PeerId value of fx_peer(seed). */
bb_value *pfx_peer(uint8_t seed);

#endif
