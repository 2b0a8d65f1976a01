/*
 * plugin_config.h — the JSON configuration of a standard component: its
 * construction state (AttributeProto.s, JSON text recorded in the program)
 * merged with the node's per-slot config (bbd's node config; its keys win),
 * checked against the type's bb_config_decl table, then read through typed
 * getters that take their defaults from that same table, so the documented
 * default is the one used.
 *
 * Untrusted input: both texts are bounded (BBP_CONFIG_MAX_BYTES), must be
 * JSON objects, unknown keys are refused, and every getter range-checks and
 * names the key and the component in its error.
 *
 * Header-only (static inline): plugins share no library, each .so compiles
 * its own copy.
 */
#ifndef BBP_PLUGIN_CONFIG_H
#define BBP_PLUGIN_CONFIG_H

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <bb/plugin.h>

#define BBP_CONFIG_MAX_BYTES (16u << 20)

typedef struct bbp_config {
    cJSON *root;                /* merged object; NULL until loaded */
    const bb_config_decl *decls;
    uint32_t n_decls;
    char who[160];              /* "nn::Mlp at slot 'model'" for messages */
} bbp_config;

static inline const bb_config_decl *bbp_config_decl(const bbp_config *c, const char *key)
{
    for (uint32_t i = 0; i < c->n_decls; i++)
        if (strcmp(c->decls[i].key, key) == 0)
            return &c->decls[i];
    return NULL;
}

static inline int bbp__config_parse(const bbp_config *c, const char *what, const char *text,
                                    size_t len, cJSON **out, bb_error *err)
{
    *out = NULL;
    if (!text || !len)
        return BB_OK;
    if (len > BBP_CONFIG_MAX_BYTES)
        return bb_error_set(err, BB_ELIMIT, "%s: %s is %zu bytes (limit %u)", c->who, what, len,
                            BBP_CONFIG_MAX_BYTES);
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!j)
        return bb_error_set(err, BB_ECONFIG, "%s: %s is not valid JSON (near byte %zu)", c->who,
                            what, end && end >= text ? (size_t)(end - text) : (size_t)0);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return bb_error_set(err, BB_ECONFIG, "%s: %s must be a JSON object", c->who, what);
    }
    *out = j;
    return BB_OK;
}

static inline void bbp_config_free(bbp_config *c)
{
    cJSON_Delete(c->root);
    c->root = NULL;
}

/* Load and merge; refuses keys the table does not declare. */
static inline int bbp_config_load(bbp_config *c, const bb_create_args *a, const char *type_name,
                                  const bb_config_decl *decls, uint32_t n_decls, bb_error *err)
{
    memset(c, 0, sizeof *c);
    c->decls = decls;
    c->n_decls = n_decls;
    snprintf(c->who, sizeof c->who, "%s at slot '%s'", type_name,
             a && a->slot ? a->slot : "?");
    cJSON *base = NULL, *over = NULL;
    const bb_attr *ca = a ? a->construction : NULL;
    int rc = BB_OK;
    if (ca && ca->has_s)
        rc = bbp__config_parse(c, "the construction state", (const char *)ca->s.data, ca->s.len,
                               &base, err);
    if (!rc && a && a->config_json)
        rc = bbp__config_parse(c, "the slot config", a->config_json, strlen(a->config_json),
                               &over, err);
    if (rc) {
        cJSON_Delete(base);
        return rc;
    }
    if (!base)
        base = cJSON_CreateObject();
    if (!base) {
        cJSON_Delete(over);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", c->who);
    }
    for (cJSON *it = over ? over->child : NULL; it;) {
        cJSON *next = it->next;
        cJSON *moved = cJSON_DetachItemViaPointer(over, it);
        cJSON_DeleteItemFromObjectCaseSensitive(base, moved->string);
        cJSON_AddItemToObject(base, moved->string, moved);
        it = next;
    }
    cJSON_Delete(over);
    c->root = base;
    for (cJSON *it = base->child; it; it = it->next) {
        if (!it->string || !bbp_config_decl(c, it->string)) {
            char known[512] = "";
            size_t used = 0;
            for (uint32_t i = 0; i < n_decls && used < sizeof known; i++)
                used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                                         decls[i].key);
            bb_error_set(err, BB_ECONFIG, "%s: unknown config key '%s' (known: %s)", c->who,
                         it->string ? it->string : "?", known);
            bbp_config_free(c);
            return BB_ECONFIG;
        }
    }
    return BB_OK;
}

/* The value of key: set in the config, else the declared default (parsed
 * into *owned, which the caller deletes). NULL when absent or null. */
static inline const cJSON *bbp_config_get(const bbp_config *c, const char *key, cJSON **owned)
{
    *owned = NULL;
    const cJSON *v = c->root ? cJSON_GetObjectItemCaseSensitive(c->root, key) : NULL;
    if (!v) {
        const bb_config_decl *d = bbp_config_decl(c, key);
        if (d && d->default_json)
            v = *owned = cJSON_Parse(d->default_json);
    }
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* Set explicitly (and not null) in the config. */
static inline bool bbp_config_has(const bbp_config *c, const char *key)
{
    const cJSON *v = c->root ? cJSON_GetObjectItemCaseSensitive(c->root, key) : NULL;
    return v && !cJSON_IsNull(v);
}

static inline int bbp__config_missing(const bbp_config *c, const char *key, bb_error *err)
{
    return bb_error_set(err, BB_ECONFIG, "%s: config key '%s' is required", c->who, key);
}

/* A number in [lo, hi]; integral when integral is set. *present (may be
 * NULL) tells whether a value (set or default) exists; absent without a
 * default is an error unless present is given. */
static inline int bbp_config_number(const bbp_config *c, const char *key, bool integral,
                                    double lo, double hi, double *out, bool *present,
                                    bb_error *err)
{
    cJSON *owned;
    const cJSON *v = bbp_config_get(c, key, &owned);
    int rc = BB_OK;
    if (present)
        *present = v != NULL;
    if (!v) {
        if (!present)
            rc = bbp__config_missing(c, key, err);
    } else if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        rc = bb_error_set(err, BB_ECONFIG, "%s: config key '%s' must be a number", c->who, key);
    } else if (integral && v->valuedouble != floor(v->valuedouble)) {
        rc = bb_error_set(err, BB_ECONFIG, "%s: config key '%s' must be an integer, not %g",
                          c->who, key, v->valuedouble);
    } else if (v->valuedouble < lo || v->valuedouble > hi) {
        rc = bb_error_set(err, BB_ECONFIG, "%s: config key '%s' = %g is outside [%g, %g]", c->who,
                          key, v->valuedouble, lo, hi);
    } else {
        *out = v->valuedouble;
    }
    cJSON_Delete(owned);
    return rc;
}

static inline int bbp_config_int(const bbp_config *c, const char *key, int64_t lo, int64_t hi,
                                 int64_t *out, bb_error *err)
{
    double d = 0;
    int rc = bbp_config_number(c, key, true, (double)lo, (double)hi, &d, NULL, err);
    if (!rc)
        *out = (int64_t)d;
    return rc;
}

static inline int bbp_config_double(const bbp_config *c, const char *key, double lo, double hi,
                                    double *out, bb_error *err)
{
    return bbp_config_number(c, key, false, lo, hi, out, NULL, err);
}

static inline int bbp_config_bool(const bbp_config *c, const char *key, bool *out, bb_error *err)
{
    cJSON *owned;
    const cJSON *v = bbp_config_get(c, key, &owned);
    int rc = BB_OK;
    if (!v)
        rc = bbp__config_missing(c, key, err);
    else if (!cJSON_IsBool(v))
        rc = bb_error_set(err, BB_ECONFIG, "%s: config key '%s' must be true or false", c->who,
                          key);
    else
        *out = cJSON_IsTrue(v);
    cJSON_Delete(owned);
    return rc;
}

/* A string (copied into out, at most cap - 1 bytes, longer is an error);
 * absent without a default gives "". */
static inline int bbp_config_string(const bbp_config *c, const char *key, char *out, size_t cap,
                                    bb_error *err)
{
    cJSON *owned;
    const cJSON *v = bbp_config_get(c, key, &owned);
    int rc = BB_OK;
    out[0] = '\0';
    if (v && !cJSON_IsString(v))
        rc = bb_error_set(err, BB_ECONFIG, "%s: config key '%s' must be a string", c->who, key);
    else if (v && strlen(v->valuestring) >= cap)
        rc = bb_error_set(err, BB_ELIMIT, "%s: config key '%s' is longer than %zu bytes", c->who,
                          key, cap - 1);
    else if (v)
        memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    cJSON_Delete(owned);
    return rc;
}

/* One of choices[0..n) (a string); *out is its index. */
static inline int bbp_config_enum(const bbp_config *c, const char *key, const char *const *choices,
                                  int n, int *out, bb_error *err)
{
    char s[64];
    int rc = bbp_config_string(c, key, s, sizeof s, err);
    if (rc)
        return rc;
    for (int i = 0; i < n; i++) {
        if (strcmp(s, choices[i]) == 0) {
            *out = i;
            return BB_OK;
        }
    }
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; i < n && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s\"%s\"", i ? ", " : "",
                                 choices[i]);
    return bb_error_set(err, BB_ECONFIG, "%s: config key '%s' = \"%s\" is not one of %s", c->who,
                        key, s, list);
}

#endif
