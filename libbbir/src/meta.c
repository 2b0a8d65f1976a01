/*
 * meta.c — helpers over the metadata spellings of bb/meta.h: binding keys,
 * the "<role>|<TYPE_NAME>|<slot_id>" binding value, and the per-slot
 * concrete-type key. Binding values come from artifact files, so the parser
 * treats them as untrusted: bounded length, exact field count, checked
 * integer range.
 */
#include "bb/meta.h"

#include <stdbool.h>
#include <string.h>

char *bb_meta_binding_key(bb_arena *a, const char *target, const char *slot)
{
    if (!a || !target || !*target || !slot || !*slot)
        return NULL;
    return bb_arena_sprintf(a, "%s%s.%s", BB_META_BINDING_PREFIX, target, slot);
}

const char *bb_meta_binding_key_slot(const char *key, const char *target)
{
    static const char prefix[] = BB_META_BINDING_PREFIX;
    if (!key || !target || !*target)
        return NULL;
    size_t pl = sizeof prefix - 1;
    if (strncmp(key, prefix, pl) != 0)
        return NULL;
    key += pl;
    size_t tl = strlen(target);
    if (strncmp(key, target, tl) != 0 || key[tl] != '.' || key[tl + 1] == '\0')
        return NULL;
    return key + tl + 1;
}

static bool field_ok(const char *s)
{
    return s && *s && !strchr(s, BB_BINDING_SEP);
}

int bb_binding_triple_format(bb_arena *a, const bb_binding_triple *t, char **out,
                             bb_error *err)
{
    if (!a || !t || !out)
        return bb_error_set(err, BB_EINVAL, "binding triple: NULL argument");
    *out = NULL;
    if (!field_ok(t->role))
        return bb_error_set(err, BB_EINVAL,
                            "binding triple: role '%s' is empty or contains '|'",
                            t->role ? t->role : "(null)");
    if (!field_ok(t->type_name))
        return bb_error_set(err, BB_EINVAL,
                            "binding triple: TYPE_NAME '%s' is empty or contains '|'",
                            t->type_name ? t->type_name : "(null)");
    *out = bb_arena_sprintf(a, "%s|%s|%u", t->role, t->type_name, (unsigned)t->slot_id);
    if (!*out)
        return bb_error_set(err, BB_ENOMEM, "binding triple: out of memory");
    return BB_OK;
}

int bb_binding_triple_parse(bb_arena *a, const char *value, bb_binding_triple *out,
                            bb_error *err)
{
    if (!a || !out)
        return bb_error_set(err, BB_EINVAL, "binding value: NULL argument");
    memset(out, 0, sizeof *out);
    if (!value)
        return bb_error_set(err, BB_EPARSE, "binding value: missing");
    size_t len = strnlen(value, BB_BINDING_MAX_LEN + 1);
    if (len > BB_BINDING_MAX_LEN)
        return bb_error_set(err, BB_EPARSE, "binding value: longer than %d bytes",
                            BB_BINDING_MAX_LEN);
    const char *p1 = memchr(value, BB_BINDING_SEP, len);
    const char *p2 = p1 ? memchr(p1 + 1, BB_BINDING_SEP, len - (size_t)(p1 + 1 - value))
                        : NULL;
    if (!p1 || !p2)
        return bb_error_set(err, BB_EPARSE,
                            "binding value '%.64s': want <role>|<TYPE_NAME>|<slot_id>", value);
    const char *id = p2 + 1;
    size_t idlen = len - (size_t)(id - value);
    if (memchr(id, BB_BINDING_SEP, idlen))
        return bb_error_set(err, BB_EPARSE, "binding value '%.64s': more than three fields",
                            value);
    if (p1 == value)
        return bb_error_set(err, BB_EPARSE, "binding value '%.64s': empty role", value);
    if (p2 == p1 + 1)
        return bb_error_set(err, BB_EPARSE, "binding value '%.64s': empty TYPE_NAME", value);
    if (idlen == 0)
        return bb_error_set(err, BB_EPARSE, "binding value '%.64s': empty slot_id", value);
    uint64_t sid = 0;
    for (size_t i = 0; i < idlen; i++) {
        if (id[i] < '0' || id[i] > '9')
            return bb_error_set(err, BB_EPARSE,
                                "binding value '%.64s': slot_id is not a decimal number",
                                value);
        sid = sid * 10 + (uint64_t)(id[i] - '0');
        if (sid > UINT32_MAX)
            return bb_error_set(err, BB_EPARSE,
                                "binding value '%.64s': slot_id exceeds 4294967295", value);
    }
    char *role = bb_arena_strndup(a, value, (size_t)(p1 - value));
    char *type = bb_arena_strndup(a, p1 + 1, (size_t)(p2 - p1 - 1));
    if (!role || !type)
        return bb_error_set(err, BB_ENOMEM, "binding value: out of memory");
    out->role = role;
    out->type_name = type;
    out->slot_id = (uint32_t)sid;
    return BB_OK;
}

char *bb_meta_slot_concrete_type_key(bb_arena *a, const char *slot)
{
    if (!a || !slot || !*slot)
        return NULL;
    return bb_arena_sprintf(a, "%s%s", BB_META_SLOT_CONCRETE_TYPE_PREFIX, slot);
}
