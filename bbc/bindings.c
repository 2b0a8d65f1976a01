/*
 * bindings.c — the bind chain in C: slot -> TYPE_NAME (+ per-slot JSON
 * config) from --bind arguments and bindings files.
 *
 * Bindings files are untrusted input: size-capped, parsed with cJSON, every
 * key checked; errors name the file and the offending slot.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bbc/compiler.h"

/* Largest bindings file / slot name / TYPE_NAME accepted. */
#define BINDINGS_MAX_BYTES ((size_t)16 << 20)
#define NAME_MAX_LEN 1024

/* ---- bindings ------------------------------------------------------------------ */

int bbc_bindings_init(bbc_bindings *b)
{
    memset(b, 0, sizeof *b);
    b->arena = bb_arena_create();
    return b->arena ? BB_OK : BB_ENOMEM;
}

void bbc_bindings_free(bbc_bindings *b)
{
    if (!b)
        return;
    bb_arena_destroy(b->arena);
    memset(b, 0, sizeof *b);
}

static bool name_ok(const char *s)
{
    if (!s || !*s || strlen(s) > NAME_MAX_LEN)
        return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '|')
            return false;
    return true;
}

int bbc_bindings_add(bbc_bindings *b, const char *slot, const char *type_name,
                     const char *config_json, const char *origin, bb_error *err)
{
    if (!name_ok(slot))
        return bb_error_set(err, BB_EINVAL, "%s: bad slot name '%s'", origin ? origin : "binding",
                            slot ? slot : "(null)");
    if (!name_ok(type_name))
        return bb_error_set(err, BB_EINVAL, "%s: slot '%s': bad TYPE_NAME '%s'",
                            origin ? origin : "binding", slot, type_name ? type_name : "(null)");
    bbc_binding *dst = (bbc_binding *)bbc_bindings_find(b, slot);
    if (!dst) {
        dst = BB_VEC_PUSH(b->arena, &b->v);
        if (!dst)
            return bb_error_set(err, BB_ENOMEM, "out of memory");
        dst->slot = bb_arena_strdup(b->arena, slot);
    }
    dst->type_name = bb_arena_strdup(b->arena, type_name);
    dst->config_json = config_json ? bb_arena_strdup(b->arena, config_json) : NULL;
    dst->origin = bb_arena_strdup(b->arena, origin ? origin : "--bind");
    if (!dst->slot || !dst->type_name || !dst->origin || (config_json && !dst->config_json))
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    return BB_OK;
}

int bbc_bindings_add_arg(bbc_bindings *b, const char *arg, bb_error *err)
{
    const char *eq = arg ? strchr(arg, '=') : NULL;
    if (!eq || eq == arg || !eq[1])
        return bb_error_set(err, BB_EINVAL, "--bind '%s': expected SLOT=TYPE_NAME",
                            arg ? arg : "(null)");
    size_t sl = (size_t)(eq - arg);
    if (sl > NAME_MAX_LEN)
        return bb_error_set(err, BB_EINVAL, "--bind: slot name too long");
    char slot[NAME_MAX_LEN + 1];
    memcpy(slot, arg, sl);
    slot[sl] = '\0';
    return bbc_bindings_add(b, slot, eq + 1, NULL, "--bind", err);
}

const bbc_binding *bbc_bindings_find(const bbc_bindings *b, const char *slot)
{
    if (!b || !slot)
        return NULL;
    for (size_t i = 0; i < b->v.n; i++)
        if (strcmp(b->v.v[i].slot, slot) == 0)
            return &b->v.v[i];
    return NULL;
}

int bbc_bindings_load_json(bbc_bindings *b, const char *text, size_t len, const char *origin,
                           bb_error *err)
{
    if (!origin)
        origin = "bindings";
    if (len > BINDINGS_MAX_BYTES)
        return bb_error_set(err, BB_ELIMIT, "%s: larger than %zu bytes", origin,
                            BINDINGS_MAX_BYTES);
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long off = (at && at >= text && at <= text + len) ? (long)(at - text) : -1;
        return bb_error_set(err, BB_EPARSE, "%s: not valid JSON (near byte %ld)", origin, off);
    }
    int rc = BB_OK;
    const cJSON *binds = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "bindings")
                                              : NULL;
    if (!cJSON_IsObject(binds)) {
        rc = bb_error_set(err, BB_EPARSE, "%s: expected {\"bindings\": {\"slot\": ...}}", origin);
        goto out;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, binds)
    {
        const char *slot = it->string;
        const char *type = NULL;
        char *config = NULL;
        if (cJSON_IsString(it)) {
            type = it->valuestring;
        } else if (cJSON_IsObject(it)) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "type");
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "config");
            if (!cJSON_IsString(t)) {
                rc = bb_error_set(err, BB_EPARSE, "%s: slot '%s': \"type\" must be a string",
                                  origin, slot);
                goto out;
            }
            type = t->valuestring;
            for (const cJSON *k = it->child; k; k = k->next)
                if (strcmp(k->string, "type") != 0 && strcmp(k->string, "config") != 0) {
                    rc = bb_error_set(err, BB_EPARSE, "%s: slot '%s': unknown key \"%s\"",
                                      origin, slot, k->string);
                    goto out;
                }
            if (c) {
                if (!cJSON_IsObject(c)) {
                    rc = bb_error_set(err, BB_EPARSE,
                                      "%s: slot '%s': \"config\" must be an object", origin, slot);
                    goto out;
                }
                config = cJSON_PrintUnformatted(c);
                if (!config) {
                    rc = bb_error_set(err, BB_ENOMEM, "out of memory");
                    goto out;
                }
            }
        } else {
            rc = bb_error_set(err, BB_EPARSE,
                              "%s: slot '%s': expected \"TYPE_NAME\" or {\"type\": ...}", origin,
                              slot);
            goto out;
        }
        rc = bbc_bindings_add(b, slot, type, config, origin, err);
        cJSON_free(config);
        if (rc != BB_OK)
            goto out;
    }
out:
    cJSON_Delete(root);
    return rc;
}

int bbc_bindings_load_file(bbc_bindings *b, const char *path, bb_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return bb_error_set(err, BB_EIO, "%s: %s", path, strerror(errno));
    char *buf = malloc(BINDINGS_MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    }
    size_t n = fread(buf, 1, BINDINGS_MAX_BYTES + 1, f);
    int bad = ferror(f);
    fclose(f);
    int rc;
    if (bad)
        rc = bb_error_set(err, BB_EIO, "%s: read error", path);
    else if (n > BINDINGS_MAX_BYTES)
        rc = bb_error_set(err, BB_ELIMIT, "%s: larger than %zu bytes", path, BINDINGS_MAX_BYTES);
    else
        rc = bbc_bindings_load_json(b, buf, n, path, err);
    free(buf);
    return rc;
}
