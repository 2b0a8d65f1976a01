/*
 * registry.h — where bbd's engine gets its component types and per-slot
 * configs: a bb_engine_registry (bb/engine.h) whose bb_type_source
 * (bb/type_source.h) is the plugin loader (bb/plugin_loader.h). Shared by
 * the daemon and `bbd run`.
 *
 *   bbd_registry_options o = {.plugin_dirs = dirs, .n_plugin_dirs = n};
 *   bbd_registry *reg;
 *   if (bbd_registry_new(&o, &reg, &err)) ...           scans the plugin dirs
 *   bbd_registry_load_slot_configs(reg, text, len, "node.json", &err);
 *   if (bbd_registry_resolve_model(reg, model, targets, n, &err)) ...
 *   bb_engine_install(engine, model, targets, n, bbd_registry_engine(reg), &err);
 *   ... bb_engine_free(engine) ...; bbd_registry_free(reg);
 *
 * Search order (the loader's): the plugin_dirs (--plugin-path, first
 * first), $BB_PLUGIN_PATH, the directory next to the executable
 * (../lib/bytesandbrains/plugins), the installed plugin directory.
 * Files that could not be loaded while scanning are warnings
 * (bbd_registry_warning_at), not errors: the host prints them.
 *
 * bbd_registry_resolve_model is the pre-flight the host runs before
 * bb_engine_install: it resolves every binding "<role>|<TYPE_NAME>|<slot_id>"
 * the targets carry to a loaded type and checks each slot's config against
 * the keys the type declares. Its messages name the target, the binding, the
 * slot and every directory searched, which the engine's own
 * UnregisteredConcreteType message cannot know.
 *
 * Per-slot configs come from a JSON object mapping slot -> JSON value (the
 * node config's "components" object); the engine receives the slot's value
 * as compact JSON text in bb_create_args.config_json (NULL when the slot has
 * none). The config text is untrusted: bounded and parsed here.
 *
 * Ownership: the registry owns the loader and every plugin it opened; the
 * bb_engine_registry and every type it hands out stay valid until
 * bbd_registry_free, so free the engines that used it first. Not
 * thread-safe: use it from the engine thread.
 */
#ifndef BBD_HOST_REGISTRY_H
#define BBD_HOST_REGISTRY_H

#include <stddef.h>

#include "bb/ir.h"
#include "bb/plugin_loader.h"
#include "bb/status.h"
#include "bb/engine.h"

/* Upper bound on one slot's config text and on a whole configs object. */
#define BBD_REGISTRY_MAX_CONFIG_BYTES (1u << 20)
#define BBD_REGISTRY_MAX_CONFIGS_BYTES (16u << 20)

typedef struct bbd_registry bbd_registry;

typedef struct bbd_registry_options {
    const char *const *plugin_dirs; /* --plugin-path values (colon-separated lists allowed) */
    size_t n_plugin_dirs;
    unsigned loader_flags;          /* BB_PLUGIN_LOADER_* (0: every default directory) */
} bbd_registry_options;

/* Creates the loader, adds the directories and scans them. opts may be NULL
 * (default directories only). A --plugin-path directory that does not exist,
 * or two plugins exporting one TYPE_NAME, is an error (err names them). */
int bbd_registry_new(const bbd_registry_options *opts, bbd_registry **out, bb_error *err);
/* Closes every plugin (NULL is fine). */
void bbd_registry_free(bbd_registry *r);

/* ---- per-slot configs ---------------------------------------------------------- */

/* Set (or replace) one slot's config: json is any JSON value, copied in
 * compact form. BB_EPARSE / BB_ELIMIT name the slot. */
int bbd_registry_set_slot_config(bbd_registry *r, const char *slot, const char *json,
                                 bb_error *err);
/* Add every member of a JSON object {"<slot>": <config>, ...} (later values
 * replace earlier ones). origin names the input in messages ("node.json"). */
int bbd_registry_load_slot_configs(bbd_registry *r, const char *json, size_t len,
                                   const char *origin, bb_error *err);
/* The slot's config as compact JSON text (borrowed), or NULL. */
const char *bbd_registry_slot_config(const bbd_registry *r, const char *slot);

/* ---- resolution ------------------------------------------------------------------- */

/* Resolve every binding of targets[0..n) in the compiled model m (the
 * targets and their bindings as bb/artifact.h reads them; every target's
 * when n is 0): each TYPE_NAME must be exported by a loaded plugin with the
 * binding's role, and a slot's config must be a JSON object whose keys the
 * type declares (when it declares any) with values of the declared kinds.
 * Errors: BB_ENOTFOUND / BB_ETYPE / BB_EPARSE / BB_ECONFIG, the message
 * naming the target, binding, slot and, for a missing type, every
 * directory searched; the artifact's own refusals (no passport, an unknown
 * or ambiguous target). */
int bbd_registry_resolve_model(const bbd_registry *r, const bb_model *m,
                               const char *const *targets, size_t n_targets, bb_error *err);

/* The loader's types (bb/type_source.h), whose `where` is
 * bbd_registry_searched: what bbc compiles against (`bbd run`) and the
 * engine installs from. Borrowed from r. */
const bb_type_source *bbd_registry_types(const bbd_registry *r);

/* The engine's view: bbd_registry_types plus slot_config returning
 * bbd_registry_slot_config. Borrowed from r. */
const bb_engine_registry *bbd_registry_engine(const bbd_registry *r);

/* The loader (types, plugin files, directories searched). Borrowed. */
const bb_plugin_loader *bbd_registry_loader(const bbd_registry *r);

/* "/a (--plugin-path), /b (BB_PLUGIN_PATH), ..." — the directories of
 * the scan, for messages. Borrowed. */
const char *bbd_registry_searched(const bbd_registry *r);

/* Plugin files skipped while scanning ("<file>: <why>"). */
size_t bbd_registry_warning_count(const bbd_registry *r);
const char *bbd_registry_warning_at(const bbd_registry *r, size_t i);

#endif
