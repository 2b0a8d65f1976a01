/*
 * type_source.c — the two built-in sources of component types (a plugin
 * loader, an in-process array) and the NULL-safe lookups over any source
 * (see bb/type_source.h). Lookups are linear in an array source: arrays
 * hold the few types a test or an embedding program links in.
 */
#include "bb/type_source.h"

#include <string.h>

static const bb_component_type *loader_find(void *ctx, const char *type_name)
{
    const bb_loaded_type *t = bb_plugin_loader_find(ctx, type_name);
    return t ? t->type : NULL;
}

static size_t loader_count(void *ctx)
{
    return bb_plugin_loader_type_count(ctx);
}

static const bb_component_type *loader_at(void *ctx, size_t i)
{
    const bb_loaded_type *t = bb_plugin_loader_type_at(ctx, i);
    return t ? t->type : NULL;
}

void bb_type_source_from_loader(bb_type_source *ts, const bb_plugin_loader *l,
                                const char *where)
{
    *ts = (bb_type_source){.ctx = (void *)l,
                           .find = loader_find,
                           .count = loader_count,
                           .at = loader_at,
                           .where = where ? where : "the plugin search path"};
}

static const bb_component_type *array_find(void *ctx, const char *type_name)
{
    const bb_type_array *arr = ctx;
    for (size_t i = 0; i < arr->n; i++)
        if (arr->types[i] && arr->types[i]->type_name &&
            strcmp(arr->types[i]->type_name, type_name) == 0)
            return arr->types[i];
    return NULL;
}

static size_t array_count(void *ctx)
{
    return ((const bb_type_array *)ctx)->n;
}

static const bb_component_type *array_at(void *ctx, size_t i)
{
    const bb_type_array *arr = ctx;
    return i < arr->n ? arr->types[i] : NULL;
}

void bb_type_source_from_array(bb_type_source *ts, const bb_type_array *arr)
{
    *ts = (bb_type_source){.ctx = (void *)arr,
                           .find = array_find,
                           .count = array_count,
                           .at = array_at,
                           .where = "the in-process type table"};
}

const bb_component_type *bb_type_source_find(const bb_type_source *ts, const char *type_name)
{
    if (!ts || !ts->find || !type_name)
        return NULL;
    return ts->find(ts->ctx, type_name);
}

size_t bb_type_source_count(const bb_type_source *ts)
{
    return ts && ts->count && ts->at ? ts->count(ts->ctx) : 0;
}

const bb_component_type *bb_type_source_at(const bb_type_source *ts, size_t i)
{
    return ts && ts->at && i < bb_type_source_count(ts) ? ts->at(ts->ctx, i) : NULL;
}

const bb_component_type *bb_type_source_find_op(const bb_type_source *ts, const char *domain,
                                                const char *op_type)
{
    size_t n = bb_type_source_count(ts);
    for (size_t i = 0; i < n; i++) {
        const bb_component_type *t = ts->at(ts->ctx, i);
        if (t && bb_component_type_find_op(t, domain, op_type, NULL))
            return t;
    }
    return NULL;
}
