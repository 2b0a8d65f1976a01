/*
 * registry.c — bbd's component registry: the plugin loader (seen as a
 * bb_type_source) plus the per-slot JSON configs, seen by the engine as a
 * bb_engine_registry, and
 * the pre-install check that resolves a compiled model's bindings with
 * messages naming target, binding, slot and the directories searched.
 *
 * Slot configs are few (one per bound slot): a flat array searched
 * linearly, each value kept as compact JSON text.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/artifact.h"
#include "bbd/host/registry.h"

typedef struct slot_config {
    char *slot;
    char *json; /* compact JSON text */
} slot_config;

struct bbd_registry {
    bb_plugin_loader *loader;
    bb_engine_registry engine;
    slot_config *configs;
    size_t n_configs, cap_configs;
    char searched[1024]; /* the directories of the scan, for messages */
};

static const char *find_config(void *ud, const char *slot)
{
    return bbd_registry_slot_config(ud, slot);
}

int bbd_registry_new(const bbd_registry_options *opts, bbd_registry **out, bb_error *err)
{
    *out = NULL;
    bbd_registry *r = calloc(1, sizeof *r);
    if (!r)
        return bb_error_set(err, BB_ENOMEM, "plugin registry: out of memory");
    int rc = bb_plugin_loader_create(opts ? opts->loader_flags : 0, &r->loader, err);
    for (size_t i = 0; rc == BB_OK && opts && i < opts->n_plugin_dirs; i++)
        if (opts->plugin_dirs[i])
            rc = bb_plugin_loader_add_dirs(r->loader, opts->plugin_dirs[i], err);
    if (rc == BB_OK)
        rc = bb_plugin_loader_scan(r->loader, err);
    if (rc != BB_OK) {
        bbd_registry_free(r);
        return rc;
    }
    bb_plugin_loader_describe_dirs(r->loader, r->searched, sizeof r->searched);
    static const char prefix[] = "searched: ";
    if (strncmp(r->searched, prefix, sizeof prefix - 1) == 0)
        memmove(r->searched, r->searched + sizeof prefix - 1,
                strlen(r->searched + sizeof prefix - 1) + 1);
    r->engine = (bb_engine_registry){.slot_config = find_config, .ud = r};
    bb_type_source_from_loader(&r->engine.types, r->loader, r->searched);
    *out = r;
    return BB_OK;
}

void bbd_registry_free(bbd_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_configs; i++) {
        free(r->configs[i].slot);
        free(r->configs[i].json);
    }
    free(r->configs);
    bb_plugin_loader_destroy(r->loader);
    free(r);
}

/* ---- per-slot configs ------------------------------------------------------------ */

static slot_config *config_find(const bbd_registry *r, const char *slot)
{
    for (size_t i = 0; slot && i < r->n_configs; i++)
        if (strcmp(r->configs[i].slot, slot) == 0)
            return &r->configs[i];
    return NULL;
}

/* Store item's compact text under slot (replacing an earlier value). */
static int config_put(bbd_registry *r, const char *slot, const cJSON *item, bb_error *err)
{
    char *text = cJSON_PrintUnformatted(item);
    if (!text)
        return bb_error_set(err, BB_ENOMEM, "slot '%s': out of memory printing its config", slot);
    if (strlen(text) > BBD_REGISTRY_MAX_CONFIG_BYTES) {
        cJSON_free(text);
        return bb_error_set(err, BB_ELIMIT, "slot '%s': config exceeds %u bytes", slot,
                            BBD_REGISTRY_MAX_CONFIG_BYTES);
    }
    char *json = strdup(text);
    cJSON_free(text);
    if (!json)
        return bb_error_set(err, BB_ENOMEM, "slot '%s': out of memory", slot);
    slot_config *have = config_find(r, slot);
    if (have) {
        free(have->json);
        have->json = json;
        return BB_OK;
    }
    if (r->n_configs == r->cap_configs) {
        size_t cap = r->cap_configs ? r->cap_configs * 2 : 8;
        slot_config *v = realloc(r->configs, cap * sizeof *v);
        if (!v) {
            free(json);
            return bb_error_set(err, BB_ENOMEM, "slot '%s': out of memory", slot);
        }
        r->configs = v;
        r->cap_configs = cap;
    }
    char *name = strdup(slot);
    if (!name) {
        free(json);
        return bb_error_set(err, BB_ENOMEM, "slot '%s': out of memory", slot);
    }
    r->configs[r->n_configs++] = (slot_config){.slot = name, .json = json};
    return BB_OK;
}

/* Parse untrusted JSON text of at most limit bytes; *out must be deleted. */
static int parse_json(const char *json, size_t len, size_t limit, const char *what,
                      cJSON **out, bb_error *err)
{
    *out = NULL;
    if (!json)
        return bb_error_set(err, BB_EINVAL, "%s: no JSON given", what);
    if (len > limit)
        return bb_error_set(err, BB_ELIMIT, "%s: %zu bytes of JSON exceed the limit of %zu",
                            what, len, limit);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!root) {
        size_t at = end && end >= json ? (size_t)(end - json) : 0;
        return bb_error_set(err, BB_EPARSE, "%s: malformed JSON near byte %zu", what, at);
    }
    /* Only whitespace may follow the value. */
    for (const char *p = end; p && p < json + len; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\0') {
            cJSON_Delete(root);
            return bb_error_set(err, BB_EPARSE, "%s: trailing data after the JSON value at "
                                "byte %zu", what, (size_t)(p - json));
        }
    }
    *out = root;
    return BB_OK;
}

int bbd_registry_set_slot_config(bbd_registry *r, const char *slot, const char *json,
                                 bb_error *err)
{
    if (!slot || !*slot)
        return bb_error_set(err, BB_EINVAL, "slot config: empty slot name");
    char what[160];
    snprintf(what, sizeof what, "config of slot '%.100s'", slot);
    cJSON *root;
    int rc = parse_json(json, json ? strlen(json) : 0, BBD_REGISTRY_MAX_CONFIG_BYTES, what,
                        &root, err);
    if (rc == BB_OK)
        rc = config_put(r, slot, root, err);
    cJSON_Delete(root);
    return rc;
}

int bbd_registry_load_slot_configs(bbd_registry *r, const char *json, size_t len,
                                   const char *origin, bb_error *err)
{
    const char *from = origin ? origin : "slot configs";
    cJSON *root;
    int rc = parse_json(json, len, BBD_REGISTRY_MAX_CONFIGS_BYTES, from, &root, err);
    if (rc != BB_OK)
        return rc;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return bb_error_set(err, BB_EPARSE, "%s: slot configs must be a JSON object "
                            "{\"<slot>\": <config>, ...}", from);
    }
    for (const cJSON *it = root->child; it && rc == BB_OK; it = it->next) {
        if (!it->string || !it->string[0])
            rc = bb_error_set(err, BB_EPARSE, "%s: a slot config has an empty slot name", from);
        else if ((rc = config_put(r, it->string, it, err)) != BB_OK)
            bb_error_prefix(err, "%s", from);
    }
    cJSON_Delete(root);
    return rc;
}

const char *bbd_registry_slot_config(const bbd_registry *r, const char *slot)
{
    const slot_config *c = r ? config_find(r, slot) : NULL;
    return c ? c->json : NULL;
}

/* ---- resolution --------------------------------------------------------------------- */

static bool kind_matches(const char *kind, const cJSON *v)
{
    if (strcmp(kind, "int") == 0)
        return cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
               v->valuedouble == floor(v->valuedouble);
    if (strcmp(kind, "float") == 0)
        return cJSON_IsNumber(v);
    if (strcmp(kind, "string") == 0)
        return cJSON_IsString(v);
    if (strcmp(kind, "bool") == 0)
        return cJSON_IsBool(v);
    if (strcmp(kind, "array") == 0)
        return cJSON_IsArray(v);
    if (strcmp(kind, "object") == 0)
        return cJSON_IsObject(v);
    return true; /* the loader refuses other kinds; nothing to hold against the value */
}

/* "a (int), b (string)" of the keys t declares. */
static void describe_keys(const bb_component_type *t, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < t->n_config && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s (%s)", i ? ", " : "",
                                 t->config[i].key, t->config[i].type);
}

/* The slot's config against the keys its type declares. */
static int check_config(const bbd_registry *r, const char *target, const char *slot,
                        const bb_loaded_type *lt, bb_error *err)
{
    const char *json = bbd_registry_slot_config(r, slot);
    const bb_component_type *t = lt->type;
    if (!json)
        return BB_OK;
    cJSON *root = cJSON_Parse(json); /* our own compact text */
    if (!root)
        return bb_error_set(err, BB_ENOMEM, "slot '%s': out of memory", slot);
    int rc = BB_OK;
    char keys[768];
    if (!cJSON_IsObject(root)) {
        rc = bb_error_set(err, BB_ECONFIG, "target '%s': the config of slot '%s' (%s) must be a "
                          "JSON object", target, slot, t->type_name);
    } else if (t->n_config) {
        for (const cJSON *it = root->child; it && rc == BB_OK; it = it->next) {
            const bb_config_decl *d = NULL;
            for (uint32_t i = 0; i < t->n_config && !d; i++)
                if (it->string && strcmp(t->config[i].key, it->string) == 0)
                    d = &t->config[i];
            if (!d) {
                describe_keys(t, keys, sizeof keys);
                rc = bb_error_set(err, BB_ECONFIG, "target '%s': the config of slot '%s' has key "
                                  "'%s', which %s does not accept (it accepts: %s)", target, slot,
                                  it->string ? it->string : "", t->type_name, keys);
            } else if (!kind_matches(d->type, it)) {
                rc = bb_error_set(err, BB_ECONFIG, "target '%s': the config of slot '%s': key "
                                  "'%s' of %s must be of type %s", target, slot, d->key,
                                  t->type_name, d->type);
            }
        }
    }
    cJSON_Delete(root);
    return rc;
}

/* Resolve the bindings of target t (name is the one the host asked for,
 * for messages). */
static int resolve_target(const bbd_registry *r, const bb_artifact_target *t, const char *name,
                          bb_error *err)
{
    for (size_t i = 0; i < t->n_bindings; i++) {
        const bb_artifact_binding *b = &t->bindings[i];
        const bb_loaded_type *lt = NULL;
        int rc = bb_plugin_loader_resolve(r->loader, b->triple, b->slot, &lt, err);
        if (rc == BB_OK)
            rc = check_config(r, name, b->slot, lt, err);
        else
            bb_error_prefix(err, "target '%s'", name);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}

static int resolve_artifact(const bbd_registry *r, const bb_artifact *art,
                            const char *const *targets, size_t n_targets, bb_error *err)
{
    for (size_t i = 0; i < n_targets; i++) {
        if (!targets[i] || !targets[i][0])
            return bb_error_set(err, BB_EINVAL, "plugin registry: empty target name");
        const bb_artifact_target *t;
        int rc = bb_artifact_find_target(art, targets[i], &t, err);
        if (rc == BB_OK)
            rc = resolve_target(r, t, targets[i], err);
        if (rc != BB_OK)
            return rc;
    }
    /* No targets: every target of the artifact. */
    for (size_t i = 0; n_targets == 0 && i < art->n_targets; i++) {
        int rc = resolve_target(r, &art->targets[i], art->targets[i].name, err);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}

int bbd_registry_resolve_model(const bbd_registry *r, const bb_model *m,
                               const char *const *targets, size_t n_targets, bb_error *err)
{
    if (!r || !m)
        return bb_error_set(err, BB_EINVAL, "plugin registry: no model to resolve");
    bb_arena *a = bb_arena_create();
    if (!a)
        return bb_error_set(err, BB_ENOMEM, "plugin registry: out of memory");
    bb_artifact art;
    int rc = bb_artifact_read(m, "plugin registry", a, &art, err);
    if (rc == BB_OK)
        rc = resolve_artifact(r, &art, targets, n_targets, err);
    bb_arena_destroy(a);
    return rc;
}

const bb_engine_registry *bbd_registry_engine(const bbd_registry *r)
{
    return r ? &r->engine : NULL;
}

const bb_type_source *bbd_registry_types(const bbd_registry *r)
{
    return r ? &r->engine.types : NULL;
}

const char *bbd_registry_searched(const bbd_registry *r)
{
    return r ? r->searched : "";
}

const bb_plugin_loader *bbd_registry_loader(const bbd_registry *r)
{
    return r ? r->loader : NULL;
}

size_t bbd_registry_warning_count(const bbd_registry *r)
{
    return r ? bb_plugin_loader_warning_count(r->loader) : 0;
}

const char *bbd_registry_warning_at(const bbd_registry *r, size_t i)
{
    return r ? bb_plugin_loader_warning_at(r->loader, i) : NULL;
}
