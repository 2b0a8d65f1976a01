/*
 * plugin_loader.h — finds, dlopen's and checks component plugins
 * (bb-plugin(7)); shared by bbc (types, ports, dependencies) and bbd
 * (instantiating the types an artifact's bindings name).
 *
 * A loader is an object (no globals): it owns every plugin it opened and
 * dlclose's them in bb_plugin_loader_destroy. Pointers it hands out
 * (bb_loaded_plugin, bb_loaded_type, the plugins' static tables) stay valid
 * until then. Not thread-safe: use one loader from one thread.
 *
 * Search order (bb_plugin_loader_scan), first directory first:
 *   1. directories given with bb_plugin_loader_add_dirs (--plugin-path),
 *   2. $BB_PLUGIN_PATH (colon-separated),
 *   3. <dir of /proc/self/exe>/../lib/bytesandbrains/plugins (so build/bin/bbd
 *      finds build/lib/bytesandbrains/plugins),
 *   4. BB_PLUGIN_DIR_INSTALLED (set at build time: $PREFIX/lib/bytesandbrains/plugins).
 * Every *.so in those directories is loaded (names sorted within a directory).
 * A file name seen in an earlier directory shadows the same name later in the
 * order (a build tree's cpu.so hides an installed cpu.so), and each file is
 * opened once, by its realpath (symlinks to one file count once).
 *
 * Errors vs warnings while scanning:
 *   - fatal (scan returns an error): an explicit directory that cannot be
 *     read; two files exporting the same TYPE_NAME (the message names both).
 *   - warning (collected, see bb_plugin_loader_warning_at): a file in a search
 *     directory that fails to dlopen, lacks the entry symbol, has an
 *     incompatible ABI or an invalid type table; an unreadable BB_PLUGIN_PATH
 *     directory. The file is skipped; the rest of the directory still loads.
 *     Missing default directories (3, 4) are skipped silently.
 * Explicitly named files (bb_plugin_loader_load_file / _load_stages) are
 * always fatal on any problem.
 *
 * ABI rules checked for every plugin, type and stage table: abi_major equals
 * BB_PLUGIN_ABI_MAJOR; abi_minor is at most BB_PLUGIN_ABI_MINOR (an older
 * plugin is fine, a newer one is refused); struct_size covers at least the
 * oldest layout the host reads; a plugin's value_layout equals
 * BB_PLUGIN_VALUE_LAYOUT; create, destroy and dispatch are present;
 * declarations are well-formed. A refusal names the file and both versions
 * (or both layout signatures).
 */
#ifndef BB_PLUGIN_LOADER_H
#define BB_PLUGIN_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "bb/plugin.h"
#include "bb/status.h"

#define BB_PLUGIN_PATH_ENV "BB_PLUGIN_PATH"
/* Relative to the directory of the running executable. */
#define BB_PLUGIN_DIR_FROM_EXE "../lib/bytesandbrains/plugins"

/* bb_plugin_loader_create flags: leave out default directories (tests,
 * `bbc plugins --plugin-path DIR` with a clean slate). */
enum {
    BB_PLUGIN_LOADER_NO_ENV = 1u << 0,       /* ignore $BB_PLUGIN_PATH */
    BB_PLUGIN_LOADER_NO_EXE_DIR = 1u << 1,   /* ignore the dir next to the executable */
    BB_PLUGIN_LOADER_NO_INSTALLED = 1u << 2, /* ignore BB_PLUGIN_DIR_INSTALLED */
    BB_PLUGIN_LOADER_ONLY_EXPLICIT = 7u
};

/* Where a search directory came from. */
typedef enum bb_plugin_dir_origin {
    BB_PLUGIN_ORIGIN_EXPLICIT = 0, /* --plugin-path */
    BB_PLUGIN_ORIGIN_ENV = 1,      /* $BB_PLUGIN_PATH */
    BB_PLUGIN_ORIGIN_EXE = 2,      /* next to the executable */
    BB_PLUGIN_ORIGIN_INSTALLED = 3 /* compile-time install dir */
} bb_plugin_dir_origin;

typedef struct bb_plugin_dir {
    const char *path;            /* canonical when it exists, else as given */
    bb_plugin_dir_origin origin;
    bool present;                /* the directory exists and could be read */
} bb_plugin_dir;

typedef struct bb_plugin_loader bb_plugin_loader;

/* One opened shared object. */
typedef struct bb_loaded_plugin {
    const char *path;             /* realpath of the file */
    const bb_plugin_info *info;   /* NULL when loaded only for its stages */
    const bb_stage_info *stages;  /* NULL unless loaded with _load_stages */
} bb_loaded_plugin;

/* One component type exported by a loaded plugin. */
typedef struct bb_loaded_type {
    const bb_component_type *type;
    const bb_loaded_plugin *plugin; /* plugin->path names the file */
} bb_loaded_type;

/* Returns a new, empty loader in *out. flags: BB_PLUGIN_LOADER_*. */
int bb_plugin_loader_create(unsigned flags, bb_plugin_loader **out, bb_error *err);
/* dlclose's every plugin and frees the loader (NULL is fine). Instances
 * created from its types must be destroyed first. */
void bb_plugin_loader_destroy(bb_plugin_loader *l);

/* Append explicit search directories (borrows dirs; colon-separated allowed,
 * empty entries ignored). Repeatable; order is kept. */
int bb_plugin_loader_add_dirs(bb_plugin_loader *l, const char *dirs, bb_error *err);

/* Compute the search directories and load every plugin found in them (see
 * the rules above). Can be called again after adding directories; files
 * already open are not reopened. */
int bb_plugin_loader_scan(bb_plugin_loader *l, bb_error *err);

/* Load one named plugin file (fatal on any problem). *out (may be NULL)
 * borrows the loaded record; a file already open returns its record. */
int bb_plugin_loader_load_file(bb_plugin_loader *l, const char *path,
                               const bb_loaded_plugin **out, bb_error *err);

/* Load the user compiler stages a file exports through
 * BB_STAGE_ENTRY_SYMBOL (bbc --stage PLUGIN.so). *out borrows the checked
 * table. The file need not export component types. */
int bb_plugin_loader_load_stages(bb_plugin_loader *l, const char *path,
                                 const bb_stage_info **out, bb_error *err);

/* ---- lookups (all borrow; valid until destroy) ----------------------------- */

/* The type with this TYPE_NAME, or NULL. (bb_type_source_from_loader,
 * bb/type_source.h, gives the loader's types to bbc and the engine.) */
const bb_loaded_type *bb_plugin_loader_find(const bb_plugin_loader *l, const char *type_name);

/* Resolve a binding "<role>|<TYPE_NAME>|<slot_id>" (read by
 * bb_binding_triple_parse; a bare TYPE_NAME, without '|', is accepted too)
 * bound at slot. Errors: BB_ENOTFOUND naming the binding, the slot and
 * every directory searched; BB_ETYPE when the type's role differs from the
 * binding's; BB_EPARSE for an unreadable binding or an unknown role. */
int bb_plugin_loader_resolve(const bb_plugin_loader *l, const char *binding, const char *slot,
                             const bb_loaded_type **out, bb_error *err);

/* Every type, in load order. */
size_t bb_plugin_loader_type_count(const bb_plugin_loader *l);
const bb_loaded_type *bb_plugin_loader_type_at(const bb_plugin_loader *l, size_t i);

/* Every opened file, in load order. */
size_t bb_plugin_loader_plugin_count(const bb_plugin_loader *l);
const bb_loaded_plugin *bb_plugin_loader_plugin_at(const bb_plugin_loader *l, size_t i);

/* The directories of the last scan, in search order (empty before a scan). */
size_t bb_plugin_loader_dir_count(const bb_plugin_loader *l);
const bb_plugin_dir *bb_plugin_loader_dir_at(const bb_plugin_loader *l, size_t i);
/* "searched: /a (--plugin-path), /b (installed, missing)" into buf (always
 * NUL-terminated; cut at cap): the directories of the last scan, for
 * messages about a type no plugin exports. */
void bb_plugin_loader_describe_dirs(const bb_plugin_loader *l, char *buf, size_t cap);
/* "--plugin-path", "BB_PLUGIN_PATH", "next to the executable", "installed". */
const char *bb_plugin_dir_origin_name(bb_plugin_dir_origin origin);

/* Files skipped while scanning, one message each ("<file>: <why>"). */
size_t bb_plugin_loader_warning_count(const bb_plugin_loader *l);
const char *bb_plugin_loader_warning_at(const bb_plugin_loader *l, size_t i);

/* Call t's create with args and check its contract: on failure the message
 * is prefixed with the slot, TYPE_NAME and file, and a create that failed
 * without a message gets one. *out is the new instance (destroy it with
 * t->type->destroy). */
int bb_loaded_type_create(const bb_loaded_type *t, const bb_create_args *args, void **out,
                          bb_error *err);

#endif
