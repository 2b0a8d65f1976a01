/*
 * type_source.h — where component types come from: the one interface the
 * compiler (bbc reads ports, roles and dependencies), the engine (it
 * instantiates the bound types) and the daemon (its plugin registry) look
 * TYPE_NAMEs up through.
 *
 * A source is built from a plugin loader (bb_type_source_from_loader) or
 * from an in-process array of types (bb_type_source_from_array: tests,
 * programs that link their components in); anything else can fill the
 * struct itself. A source only borrows: the loader or the array, and every
 * type it hands out, must outlive it and whatever used it.
 */
#ifndef BB_TYPE_SOURCE_H
#define BB_TYPE_SOURCE_H

#include <stddef.h>

#include "bb/plugin.h"
#include "bb/plugin_loader.h"

typedef struct bb_type_source {
    void *ctx;
    /* The type with this TYPE_NAME, or NULL. */
    const bb_component_type *(*find)(void *ctx, const char *type_name);
    /* Every type, in a stable order (both NULL: the source cannot list its
     * types, and a check that needs them all cannot tell). */
    size_t (*count)(void *ctx);
    const bb_component_type *(*at)(void *ctx, size_t i);
    /* Where the types were looked for, for messages about a TYPE_NAME no
     * type has ("the plugin search path", a list of directories); may be
     * NULL. Borrowed. */
    const char *where;
} bb_type_source;

/* The types of l (borrowed; valid while l lives). where as above; NULL
 * means "the plugin search path". */
void bb_type_source_from_loader(bb_type_source *ts, const bb_plugin_loader *l,
                                const char *where);

/* The types of a static array (borrows arr and its types; NULL entries are
 * skipped by find). where is "the in-process type table". */
typedef struct bb_type_array {
    const bb_component_type *const *types;
    size_t n;
} bb_type_array;
void bb_type_source_from_array(bb_type_source *ts, const bb_type_array *arr);

/* NULL-safe lookups: a NULL source (or one without find / count) has no
 * type. */
const bb_component_type *bb_type_source_find(const bb_type_source *ts, const char *type_name);
size_t bb_type_source_count(const bb_type_source *ts);
const bb_component_type *bb_type_source_at(const bb_type_source *ts, size_t i);
/* The first type of the source (in its order) whose opsets declare
 * (domain, op_type) (bb_component_type_find_op), or NULL. */
const bb_component_type *bb_type_source_find_op(const bb_type_source *ts, const char *domain,
                                                const char *op_type);

#endif
