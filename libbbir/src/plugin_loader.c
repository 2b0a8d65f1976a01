/*
 * plugin_loader.c — the plugin loader (bb/plugin_loader.h, bb-plugin(7)).
 *
 * Follows the Redis module loader: dlopen(RTLD_NOW|RTLD_LOCAL), a missing
 * entry symbol or a refused table undoes everything and dlclose's, duplicate
 * TYPE_NAMEs are refused. Plugin tables are trusted code but checked like
 * input: every count is bounded, every pointer the host will follow is
 * tested for NULL, and struct_size is consulted before a field is read, so a
 * stale or broken plugin gets a message naming its file instead of a crash.
 *
 * Workload: a handful of files per process, loaded once at start; lookups
 * are linear scans over tens of types.
 */
#include "bb/plugin_loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bb/arena.h"
#include "bb/meta.h"

#ifndef BB_PLUGIN_DIR_INSTALLED
#define BB_PLUGIN_DIR_INSTALLED "/usr/local/lib/bytesandbrains/plugins"
#endif

/* The oldest layout of each table this host reads ends at its last
 * required field (ABI 2.0); later minors append. */
#define LAYOUT_END(T, last) (offsetof(T, last) + sizeof(((T *)0)->last))
#define PLUGIN_INFO_MIN LAYOUT_END(bb_plugin_info, value_layout)
#define COMPONENT_TYPE_MIN LAYOUT_END(bb_component_type, on_timer)
#define STAGE_INFO_MIN LAYOUT_END(bb_stage_info, n_stages)
#define STAGE_MIN LAYOUT_END(bb_stage, state)

/* Plausibility ceilings: a table beyond these is garbage, not a plugin. */
#define MAX_TYPES 1024u
#define MAX_OPSETS 64u
#define MAX_OPS 4096u
#define MAX_PORTS 256u
#define MAX_DEPS 256u
#define MAX_CONFIG 1024u
#define MAX_STAGES 256u

typedef struct module {
    bb_loaded_plugin pub;
    char *path; /* pub.path */
    void *handle;
    bb_loaded_type *types;
    uint32_t n_types;
} module;

struct bb_plugin_loader {
    unsigned flags;
    char **explicit_dirs;
    size_t n_explicit, cap_explicit;
    bb_plugin_dir *dirs;
    size_t n_dirs, cap_dirs;
    module **mods;
    size_t n_mods, cap_mods;
    const bb_loaded_type **types;
    size_t n_types, cap_types;
    char **warnings;
    size_t n_warnings, cap_warnings;
};

/* Make room for one more element of *v (n used, *cap allocated). */
static int grow(void *vp, size_t *cap, size_t n, size_t elem)
{
    void **v = vp;
    if (n < *cap)
        return BB_OK;
    size_t nc = *cap ? *cap * 2 : 8;
    void *p = realloc(*v, nc * elem);
    if (!p)
        return BB_ENOMEM;
    *v = p;
    *cap = nc;
    return BB_OK;
}

const char *bb_plugin_dir_origin_name(bb_plugin_dir_origin origin)
{
    switch (origin) {
    case BB_PLUGIN_ORIGIN_EXPLICIT: return "--plugin-path";
    case BB_PLUGIN_ORIGIN_ENV: return BB_PLUGIN_PATH_ENV;
    case BB_PLUGIN_ORIGIN_EXE: return "next to the executable";
    case BB_PLUGIN_ORIGIN_INSTALLED: return "installed";
    }
    return "?";
}

/* ---- lifetime ----------------------------------------------------------------- */

int bb_plugin_loader_create(unsigned flags, bb_plugin_loader **out, bb_error *err)
{
    bb_plugin_loader *l = calloc(1, sizeof *l);
    if (!l)
        return bb_error_set(err, BB_ENOMEM, "plugin loader: out of memory");
    l->flags = flags;
    *out = l;
    return BB_OK;
}

static void module_free(module *m)
{
    if (!m)
        return;
    if (m->handle)
        dlclose(m->handle);
    free(m->types);
    free(m->path);
    free(m);
}

static void dirs_clear(bb_plugin_loader *l)
{
    for (size_t i = 0; i < l->n_dirs; i++)
        free((char *)l->dirs[i].path);
    l->n_dirs = 0;
}

void bb_plugin_loader_destroy(bb_plugin_loader *l)
{
    if (!l)
        return;
    /* Newest first, so a plugin that linked against an earlier one goes first. */
    for (size_t i = l->n_mods; i-- > 0;)
        module_free(l->mods[i]);
    free(l->mods);
    free(l->types);
    for (size_t i = 0; i < l->n_explicit; i++)
        free(l->explicit_dirs[i]);
    free(l->explicit_dirs);
    dirs_clear(l);
    free(l->dirs);
    for (size_t i = 0; i < l->n_warnings; i++)
        free(l->warnings[i]);
    free(l->warnings);
    free(l);
}

static void warn(bb_plugin_loader *l, const char *msg)
{
    if (grow(&l->warnings, &l->cap_warnings, l->n_warnings, sizeof *l->warnings) != BB_OK)
        return; /* out of memory: a lost warning is not worth failing for */
    char *s = strdup(msg);
    if (s)
        l->warnings[l->n_warnings++] = s;
}

/* ---- explicit directories ---------------------------------------------------- */

int bb_plugin_loader_add_dirs(bb_plugin_loader *l, const char *dirs, bb_error *err)
{
    if (!dirs)
        return BB_OK;
    const char *p = dirs;
    while (*p) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > 0) {
            if (grow(&l->explicit_dirs, &l->cap_explicit, l->n_explicit,
                     sizeof *l->explicit_dirs) != BB_OK)
                return bb_error_set(err, BB_ENOMEM, "plugin loader: out of memory");
            char *d = strndup(p, n);
            if (!d)
                return bb_error_set(err, BB_ENOMEM, "plugin loader: out of memory");
            l->explicit_dirs[l->n_explicit++] = d;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return BB_OK;
}

/* ---- checking a plugin's tables -------------------------------------------------- */

static int check_abi(const char *file, const char *what, uint32_t major, uint32_t minor,
                     bb_error *err)
{
    if (major != BB_PLUGIN_ABI_MAJOR)
        return bb_error_set(err, BB_EABI,
                            "%s: %s ABI %u.%u is incompatible with this host's ABI %u.%u "
                            "(the major version must be %u)",
                            file, what, major, minor, BB_PLUGIN_ABI_MAJOR,
                            BB_PLUGIN_ABI_MINOR, BB_PLUGIN_ABI_MAJOR);
    if (minor > BB_PLUGIN_ABI_MINOR)
        return bb_error_set(err, BB_EABI,
                            "%s: %s ABI %u.%u is newer than this host's ABI %u.%u "
                            "(rebuild the plugin against this host's bb/plugin.h)",
                            file, what, major, minor, BB_PLUGIN_ABI_MAJOR,
                            BB_PLUGIN_ABI_MINOR);
    return BB_OK;
}

static int check_size(const char *file, const char *what, uint32_t size, size_t min,
                      bb_error *err)
{
    if (size < min)
        return bb_error_set(err, BB_EABI,
                            "%s: %s.struct_size is %u bytes, smaller than the oldest layout "
                            "this host reads (%zu bytes); was it built against bb/plugin.h?",
                            file, what, size, min);
    return BB_OK;
}

/* The structs the plugin reads in place must be laid out as the host's. */
static int check_value_layout(const char *file, const bb_plugin_info *info, bb_error *err)
{
    if (info->value_layout == BB_PLUGIN_VALUE_LAYOUT)
        return BB_OK;
    return bb_error_set(err, BB_EABI,
                        "%s: plugin '%s' was built against another value layout "
                        "(signature 0x%016" PRIx64 ", this host's is 0x%016" PRIx64 "): "
                        "rebuild it against this host's bb/plugin.h",
                        file, info->name, info->value_layout, (uint64_t)BB_PLUGIN_VALUE_LAYOUT);
}

static bool nonempty(const char *s)
{
    return s && *s;
}

static bool role_valid(bb_role r)
{
    return r >= BB_ROLE_BACKEND && r <= BB_ROLE_PROTOCOL;
}

static bool config_type_valid(const char *t)
{
    static const char *const ok[] = {"int", "float", "string", "bool", "array", "object"};
    if (!t)
        return false;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(t, ok[i]) == 0)
            return true;
    return false;
}

static int check_ports(const char *file, const char *tn, const char *op, const char *dir,
                       const bb_port_decl *ports, uint32_t n, bb_error *err)
{
    if (n > MAX_PORTS)
        return bb_error_set(err, BB_EABI, "%s: type %s op %s declares %u %s (at most %u)",
                            file, tn, op, n, dir, MAX_PORTS);
    if (n && !ports)
        return bb_error_set(err, BB_EABI, "%s: type %s op %s: %u %s but a NULL array", file,
                            tn, op, n, dir);
    for (uint32_t i = 0; i < n; i++)
        if (!nonempty(ports[i].name))
            return bb_error_set(err, BB_EABI, "%s: type %s op %s: %s port %u has no name",
                                file, tn, op, dir, i);
    return BB_OK;
}

static int check_type(const char *file, uint32_t idx, const bb_component_type *t, bb_error *err)
{
    if (!t)
        return bb_error_set(err, BB_EABI, "%s: types[%u] is NULL", file, idx);
    int rc = check_size(file, "bb_component_type", t->struct_size, COMPONENT_TYPE_MIN, err);
    if (rc)
        return rc;
    if (!nonempty(t->type_name))
        return bb_error_set(err, BB_EABI, "%s: types[%u] has no TYPE_NAME", file, idx);
    const char *tn = t->type_name;
    char what[256];
    snprintf(what, sizeof what, "type %s:", tn);
    if ((rc = check_abi(file, what, t->abi_major, t->abi_minor, err)))
        return rc;
    if (strchr(tn, '|'))
        return bb_error_set(err, BB_EABI, "%s: TYPE_NAME '%s' contains '|' (the binding "
                            "separator)", file, tn);
    if (!role_valid(t->role))
        return bb_error_set(err, BB_EABI, "%s: type %s has an unknown role %d", file, tn,
                            (int)t->role);
    if (!t->create || !t->destroy || !t->dispatch)
        return bb_error_set(err, BB_EABI, "%s: type %s lacks a required function (%s)", file,
                            tn, !t->create ? "create" : !t->destroy ? "destroy" : "dispatch");
    if (t->n_opsets > MAX_OPSETS || (t->n_opsets && !t->opsets))
        return bb_error_set(err, BB_EABI, "%s: type %s: bad opset table (%u opsets)", file, tn,
                            t->n_opsets);
    for (uint32_t s = 0; s < t->n_opsets; s++) {
        const bb_opset_decl *os = &t->opsets[s];
        if (os->n_ops > MAX_OPS || (os->n_ops && !os->ops))
            return bb_error_set(err, BB_EABI, "%s: type %s: opset %s has a bad op table "
                                "(%u ops)", file, tn, os->domain ? os->domain : "ai.onnx",
                                os->n_ops);
        for (uint32_t i = 0; i < os->n_ops; i++) {
            const bb_op_decl *op = &os->ops[i];
            if (!nonempty(op->op_type))
                return bb_error_set(err, BB_EABI, "%s: type %s: op %u of opset %s has no "
                                    "op_type", file, tn, i, os->domain ? os->domain : "ai.onnx");
            for (uint32_t j = 0; j < i; j++)
                if (strcmp(os->ops[j].op_type, op->op_type) == 0)
                    return bb_error_set(err, BB_EABI, "%s: type %s declares op %s twice",
                                        file, tn, op->op_type);
            if ((rc = check_ports(file, tn, op->op_type, "inputs", op->inputs, op->n_inputs,
                                  err)) ||
                (rc = check_ports(file, tn, op->op_type, "outputs", op->outputs,
                                  op->n_outputs, err)))
                return rc;
        }
    }
    if (t->n_deps > MAX_DEPS || (t->n_deps && !t->deps))
        return bb_error_set(err, BB_EABI, "%s: type %s: bad dependency table (%u entries)",
                            file, tn, t->n_deps);
    for (uint32_t i = 0; i < t->n_deps; i++)
        if (!role_valid(t->deps[i].role) || !nonempty(t->deps[i].slot))
            return bb_error_set(err, BB_EABI, "%s: type %s: dependency %u needs a role and a "
                                "slot", file, tn, i);
    if (t->n_config > MAX_CONFIG || (t->n_config && !t->config))
        return bb_error_set(err, BB_EABI, "%s: type %s: bad config table (%u keys)", file, tn,
                            t->n_config);
    for (uint32_t i = 0; i < t->n_config; i++) {
        const bb_config_decl *c = &t->config[i];
        if (!nonempty(c->key) || !config_type_valid(c->type))
            return bb_error_set(err, BB_EABI, "%s: type %s: config key %u needs a name and a "
                                "type (int, float, string, bool, array, object)", file, tn, i);
    }
    return BB_OK;
}

/* ---- modules ------------------------------------------------------------------------ */

static module *find_module(const bb_plugin_loader *l, const char *real)
{
    for (size_t i = 0; i < l->n_mods; i++)
        if (strcmp(l->mods[i]->path, real) == 0)
            return l->mods[i];
    return NULL;
}

static const bb_loaded_type *find_type(const bb_plugin_loader *l, const char *name)
{
    for (size_t i = 0; i < l->n_types; i++)
        if (strcmp(l->types[i]->type->type_name, name) == 0)
            return l->types[i];
    return NULL;
}

/* dlerror() usually starts with the path we passed; drop it to avoid "f: f: ...". */
static const char *dl_reason(const char *path)
{
    const char *e = dlerror();
    if (!e)
        return "unknown dynamic loader error";
    size_t n = strlen(path);
    if (strncmp(e, path, n) == 0 && e[n] == ':' && e[n + 1] == ' ')
        return e + n + 2;
    return e;
}

static int module_open(const char *real, module **out, bb_error *err)
{
    module *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(real))) {
        free(m);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", real);
    }
    m->pub.path = m->path;
    dlerror();
    m->handle = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!m->handle) {
        int rc = bb_error_set(err, BB_EIO, "%s: cannot load: %s", real, dl_reason(real));
        module_free(m);
        return rc;
    }
    *out = m;
    return BB_OK;
}

/* The symbol, if m itself defines it (not one of its dependencies). */
static void *module_sym(module *m, const char *name)
{
    dlerror();
    void *sym = dlsym(m->handle, name);
    if (!sym)
        return NULL;
    Dl_info info;
    if (dladdr(sym, &info) && info.dli_fname && strcmp(info.dli_fname, m->path) != 0) {
        /* The object may have been mapped earlier under another name (as a
         * dependency of another plugin): compare canonical paths. */
        char *real = realpath(info.dli_fname, NULL);
        bool same = real && strcmp(real, m->path) == 0;
        free(real);
        if (!same)
            return NULL;
    }
    return sym;
}

/* Read, check and register m's component types. Leaves l unchanged on error. */
static int module_attach_plugin(bb_plugin_loader *l, module *m, bb_error *err)
{
    const char *file = m->path;
    bb_plugin_entry_fn entry;
    void *sym = module_sym(m, BB_PLUGIN_ENTRY_SYMBOL);
    if (!sym)
        return bb_error_set(err, BB_ENOTFOUND, "%s: no entry symbol %s (not a "
                            "BytesAndBrains component plugin?)", file, BB_PLUGIN_ENTRY_SYMBOL);
    *(void **)(&entry) = sym; /* POSIX: object pointer to function pointer */
    const bb_plugin_info *info = entry();
    if (!info)
        return bb_error_set(err, BB_EABI, "%s: %s() returned NULL", file,
                            BB_PLUGIN_ENTRY_SYMBOL);
    int rc = check_size(file, "bb_plugin_info", info->struct_size, PLUGIN_INFO_MIN, err);
    if (rc || (rc = check_abi(file, "plugin", info->abi_major, info->abi_minor, err)))
        return rc;
    if (!nonempty(info->name))
        return bb_error_set(err, BB_EABI, "%s: bb_plugin_info has no name", file);
    if ((rc = check_value_layout(file, info, err)))
        return rc;
    if (info->n_types > MAX_TYPES || (info->n_types && !info->types))
        return bb_error_set(err, BB_EABI, "%s: bad type table (%u types)", file, info->n_types);
    for (uint32_t i = 0; i < info->n_types; i++) {
        if ((rc = check_type(file, i, info->types[i], err)))
            return rc;
        const char *tn = info->types[i]->type_name;
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(info->types[j]->type_name, tn) == 0)
                return bb_error_set(err, BB_EEXIST, "%s: exports component type '%s' twice",
                                    file, tn);
        const bb_loaded_type *prev = find_type(l, tn);
        if (prev)
            return bb_error_set(err, BB_EEXIST, "component type '%s' is exported by both "
                                "%s and %s", tn, prev->plugin->path, file);
    }
    bb_loaded_type *types = info->n_types ? calloc(info->n_types, sizeof *types) : NULL;
    if (info->n_types && !types)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", file);
    while (l->n_types + info->n_types > l->cap_types) {
        if (grow(&l->types, &l->cap_types, l->cap_types, sizeof *l->types) != BB_OK) {
            free(types);
            return bb_error_set(err, BB_ENOMEM, "%s: out of memory", file);
        }
    }
    for (uint32_t i = 0; i < info->n_types; i++) {
        types[i].type = info->types[i];
        types[i].plugin = &m->pub;
        l->types[l->n_types++] = &types[i];
    }
    m->types = types;
    m->n_types = info->n_types;
    m->pub.info = info;
    return BB_OK;
}

static int module_attach_stages(module *m, bb_error *err)
{
    const char *file = m->path;
    bb_stage_entry_fn entry;
    void *sym = module_sym(m, BB_STAGE_ENTRY_SYMBOL);
    if (!sym)
        return bb_error_set(err, BB_ENOTFOUND, "%s: no entry symbol %s (not a compiler "
                            "stage plugin?)", file, BB_STAGE_ENTRY_SYMBOL);
    *(void **)(&entry) = sym;
    const bb_stage_info *si = entry();
    if (!si)
        return bb_error_set(err, BB_EABI, "%s: %s() returned NULL", file,
                            BB_STAGE_ENTRY_SYMBOL);
    int rc = check_size(file, "bb_stage_info", si->struct_size, STAGE_INFO_MIN, err);
    if (rc || (rc = check_abi(file, "stage table", si->abi_major, si->abi_minor, err)))
        return rc;
    if (si->n_stages > MAX_STAGES || (si->n_stages && !si->stages))
        return bb_error_set(err, BB_EABI, "%s: bad stage table (%u stages)", file,
                            si->n_stages);
    for (uint32_t i = 0; i < si->n_stages; i++) {
        const bb_stage *s = si->stages[i];
        if (!s)
            return bb_error_set(err, BB_EABI, "%s: stages[%u] is NULL", file, i);
        if ((rc = check_size(file, "bb_stage", s->struct_size, STAGE_MIN, err)))
            return rc;
        if (!nonempty(s->name) || !s->run)
            return bb_error_set(err, BB_EABI, "%s: stages[%u] needs a name and a run "
                                "function", file, i);
    }
    m->pub.stages = si;
    return BB_OK;
}

static int add_module(bb_plugin_loader *l, module *m, bb_error *err)
{
    if (grow(&l->mods, &l->cap_mods, l->n_mods, sizeof *l->mods) != BB_OK)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", m->path);
    l->mods[l->n_mods++] = m;
    return BB_OK;
}

/* Drop the types a failed add registered (they are the newest). */
static void unregister_types(bb_plugin_loader *l, module *m)
{
    l->n_types -= m->n_types;
}

typedef enum { WANT_PLUGIN, WANT_STAGES } want;

/* Open (or reuse) the file at its realpath and attach what is wanted. */
static int load_real(bb_plugin_loader *l, const char *real, want w, module **out, bb_error *err)
{
    module *m = find_module(l, real);
    if (m) {
        int rc = BB_OK;
        if (w == WANT_PLUGIN && !m->pub.info)
            rc = module_attach_plugin(l, m, err);
        else if (w == WANT_STAGES && !m->pub.stages)
            rc = module_attach_stages(m, err);
        if (rc == BB_OK)
            *out = m;
        return rc;
    }
    int rc = module_open(real, &m, err);
    if (rc)
        return rc;
    rc = w == WANT_PLUGIN ? module_attach_plugin(l, m, err) : module_attach_stages(m, err);
    if (rc == BB_OK && (rc = add_module(l, m, err)) != BB_OK && w == WANT_PLUGIN)
        unregister_types(l, m);
    if (rc) {
        module_free(m);
        return rc;
    }
    *out = m;
    return BB_OK;
}

static int canonical(const char *path, char **out, bb_error *err)
{
    char *real = realpath(path, NULL);
    if (!real)
        return bb_error_set(err, errno == ENOMEM ? BB_ENOMEM : BB_ENOTFOUND, "%s: %s", path,
                            strerror(errno));
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
        free(real);
        return bb_error_set(err, BB_EINVAL, "%s: not a regular file", path);
    }
    *out = real;
    return BB_OK;
}

int bb_plugin_loader_load_file(bb_plugin_loader *l, const char *path,
                               const bb_loaded_plugin **out, bb_error *err)
{
    char *real;
    int rc = canonical(path, &real, err);
    if (rc)
        return rc;
    module *m = NULL;
    rc = load_real(l, real, WANT_PLUGIN, &m, err);
    free(real);
    if (rc == BB_OK && out)
        *out = &m->pub;
    return rc;
}

int bb_plugin_loader_load_stages(bb_plugin_loader *l, const char *path,
                                 const bb_stage_info **out, bb_error *err)
{
    char *real;
    int rc = canonical(path, &real, err);
    if (rc)
        return rc;
    module *m = NULL;
    rc = load_real(l, real, WANT_STAGES, &m, err);
    free(real);
    if (rc == BB_OK && out)
        *out = m->pub.stages;
    return rc;
}

/* ---- directory search ------------------------------------------------------------ */

/* Append a search directory unless the same directory is already listed. */
static int push_dir(bb_plugin_loader *l, const char *path, bb_plugin_dir_origin origin)
{
    struct stat st;
    char *real = realpath(path, NULL);
    bool present = real && stat(real, &st) == 0 && S_ISDIR(st.st_mode);
    char *p = real ? real : strdup(path);
    if (!p)
        return BB_ENOMEM;
    for (size_t i = 0; i < l->n_dirs; i++) {
        if (strcmp(l->dirs[i].path, p) == 0) {
            free(p);
            return BB_OK;
        }
    }
    if (grow(&l->dirs, &l->cap_dirs, l->n_dirs, sizeof *l->dirs) != BB_OK) {
        free(p);
        return BB_ENOMEM;
    }
    l->dirs[l->n_dirs++] = (bb_plugin_dir){.path = p, .origin = origin, .present = present};
    return BB_OK;
}

static int compute_dirs(bb_plugin_loader *l, bb_error *err)
{
    dirs_clear(l);
    for (size_t i = 0; i < l->n_explicit; i++)
        if (push_dir(l, l->explicit_dirs[i], BB_PLUGIN_ORIGIN_EXPLICIT))
            goto oom;
    const char *env = getenv(BB_PLUGIN_PATH_ENV);
    if (env && !(l->flags & BB_PLUGIN_LOADER_NO_ENV)) {
        const char *p = env;
        while (*p) {
            const char *e = strchr(p, ':');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            if (n > 0) {
                char *d = strndup(p, n);
                if (!d || push_dir(l, d, BB_PLUGIN_ORIGIN_ENV)) {
                    free(d);
                    goto oom;
                }
                free(d);
            }
            if (!e)
                break;
            p = e + 1;
        }
    }
    if (!(l->flags & BB_PLUGIN_LOADER_NO_EXE_DIR)) {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = '\0';
            char *slash = strrchr(exe, '/');
            if (slash) {
                /* Resolve "<exe dir>/.." first so a missing plugin dir is still
                 * reported as a clean path. */
                snprintf(slash, sizeof exe - (size_t)(slash - exe), "/..");
                char *up = realpath(exe, NULL);
                const char *rest = &BB_PLUGIN_DIR_FROM_EXE[3]; /* after "../" */
                char dir[PATH_MAX + sizeof BB_PLUGIN_DIR_FROM_EXE];
                if (up)
                    snprintf(dir, sizeof dir, "%s/%s", strcmp(up, "/") ? up : "", rest);
                else
                    snprintf(dir, sizeof dir, "%s/%s", exe, rest); /* exe is "<dir>/.." */
                free(up);
                if (push_dir(l, dir, BB_PLUGIN_ORIGIN_EXE))
                    goto oom;
            }
        }
    }
    if (!(l->flags & BB_PLUGIN_LOADER_NO_INSTALLED) && BB_PLUGIN_DIR_INSTALLED[0] != '\0')
        if (push_dir(l, BB_PLUGIN_DIR_INSTALLED, BB_PLUGIN_ORIGIN_INSTALLED))
            goto oom;
    return BB_OK;
oom:
    return bb_error_set(err, BB_ENOMEM, "plugin loader: out of memory");
}

static int so_filter(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return d->d_name[0] != '.' && n > 3 && strcmp(d->d_name + n - 3, ".so") == 0;
}

typedef struct name_set {
    char **v;
    size_t n, cap;
} name_set;

static bool name_set_has(const name_set *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return true;
    return false;
}

static int name_set_add(name_set *s, const char *name)
{
    if (grow(&s->v, &s->cap, s->n, sizeof *s->v) != BB_OK)
        return BB_ENOMEM;
    if (!(s->v[s->n] = strdup(name)))
        return BB_ENOMEM;
    s->n++;
    return BB_OK;
}

static void name_set_free(name_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

/* Load one directory entry in scan mode: most failures become warnings. */
static int scan_file(bb_plugin_loader *l, const char *dir, const char *name, bb_error *err)
{
    size_t len = strlen(dir) + 1 + strlen(name) + 1;
    char *full = malloc(len);
    if (!full)
        return bb_error_set(err, BB_ENOMEM, "plugin loader: out of memory");
    snprintf(full, len, "%s/%s", dir, name);
    struct stat st;
    if (stat(full, &st) != 0) {
        char msg[BB_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s: %s", full, strerror(errno));
        warn(l, msg);
        free(full);
        return BB_OK;
    }
    if (!S_ISREG(st.st_mode)) { /* a directory called x.so: not ours to judge */
        free(full);
        return BB_OK;
    }
    bb_error e;
    bb_error_clear(&e);
    char *real = NULL;
    int rc = canonical(full, &real, &e);
    free(full);
    if (rc == BB_OK) {
        module *m = find_module(l, real);
        if (!m || !m->pub.info)
            rc = load_real(l, real, WANT_PLUGIN, &m, &e);
        free(real);
    }
    if (rc == BB_EEXIST || rc == BB_ENOMEM) {
        if (err)
            *err = e;
        return rc;
    }
    if (rc)
        warn(l, e.msg);
    return BB_OK;
}

int bb_plugin_loader_scan(bb_plugin_loader *l, bb_error *err)
{
    int rc = compute_dirs(l, err);
    if (rc)
        return rc;
    name_set seen = {0};
    for (size_t d = 0; d < l->n_dirs && rc == BB_OK; d++) {
        bb_plugin_dir *pd = &l->dirs[d];
        if (!pd->present) {
            if (pd->origin == BB_PLUGIN_ORIGIN_EXPLICIT) {
                rc = bb_error_set(err, BB_ENOTFOUND, "plugin directory %s (--plugin-path): "
                                  "no such directory", pd->path);
            } else if (pd->origin == BB_PLUGIN_ORIGIN_ENV) {
                char msg[BB_ERROR_MSG_MAX];
                snprintf(msg, sizeof msg, "plugin directory %s (%s): no such directory",
                         pd->path, BB_PLUGIN_PATH_ENV);
                warn(l, msg);
            }
            continue;
        }
        struct dirent **names = NULL;
        int n = scandir(pd->path, &names, so_filter, alphasort);
        if (n < 0) {
            pd->present = false;
            if (pd->origin == BB_PLUGIN_ORIGIN_EXPLICIT) {
                rc = bb_error_set(err, BB_EIO, "plugin directory %s (--plugin-path): %s",
                                  pd->path, strerror(errno));
            } else {
                char msg[BB_ERROR_MSG_MAX];
                snprintf(msg, sizeof msg, "plugin directory %s (%s): %s", pd->path,
                         bb_plugin_dir_origin_name(pd->origin), strerror(errno));
                warn(l, msg);
            }
            continue;
        }
        for (int i = 0; i < n; i++) {
            const char *name = names[i]->d_name;
            if (rc == BB_OK && !name_set_has(&seen, name)) {
                /* An earlier directory's file of the same name shadows this one. */
                if (name_set_add(&seen, name) != BB_OK)
                    rc = bb_error_set(err, BB_ENOMEM, "plugin loader: out of memory");
                else
                    rc = scan_file(l, pd->path, name, err);
            }
            free(names[i]);
        }
        free(names);
    }
    name_set_free(&seen);
    return rc;
}

/* ---- lookups --------------------------------------------------------------------- */

const bb_loaded_type *bb_plugin_loader_find(const bb_plugin_loader *l, const char *type_name)
{
    if (!l || !type_name)
        return NULL;
    return find_type(l, type_name);
}

void bb_plugin_loader_describe_dirs(const bb_plugin_loader *l, char *buf, size_t cap)
{
    size_t used = 0;
    if (l->n_dirs == 0) {
        snprintf(buf, cap, "no plugin directory was searched");
        return;
    }
    used += (size_t)snprintf(buf, cap, "searched:");
    for (size_t i = 0; i < l->n_dirs && used < cap; i++) {
        const bb_plugin_dir *d = &l->dirs[i];
        used += (size_t)snprintf(buf + used, cap - used, "%s %s (%s%s)", i ? "," : "", d->path,
                                 bb_plugin_dir_origin_name(d->origin),
                                 d->present ? "" : ", missing");
    }
}

/* The type a found TYPE_NAME names, checked against the role the binding
 * asks for (BB_ROLE_NONE: any). */
static int resolve_type(const bb_plugin_loader *l, const char *binding, const char *slot,
                        const char *type_name, bb_role role, const bb_loaded_type **out,
                        bb_error *err)
{
    const bb_loaded_type *t = find_type(l, type_name);
    if (!t) {
        char dirs[1024];
        bb_plugin_loader_describe_dirs(l, dirs, sizeof dirs);
        char more[256] = "";
        if (l->n_warnings)
            snprintf(more, sizeof more, "; %zu plugin file(s) could not be loaded, first: %s",
                     l->n_warnings, l->warnings[0]);
        return bb_error_set(err, BB_ENOTFOUND, "binding '%s' for slot '%s': no loaded plugin "
                            "exports component type '%s'; %s%s", binding, slot, type_name, dirs,
                            more);
    }
    if (role != BB_ROLE_NONE && t->type->role != role)
        return bb_error_set(err, BB_ETYPE, "binding '%s' for slot '%s': component type '%s' "
                            "(%s) has role %s, the binding asks for %s", binding, slot,
                            type_name, t->plugin->path, bb_role_name(t->type->role),
                            bb_role_name(role));
    if (out)
        *out = t;
    return BB_OK;
}

int bb_plugin_loader_resolve(const bb_plugin_loader *l, const char *binding, const char *slot,
                             const bb_loaded_type **out, bb_error *err)
{
    const char *sl = slot ? slot : "?";
    if (!binding)
        return bb_error_set(err, BB_EINVAL, "slot '%s': no binding", sl);
    if (!strchr(binding, BB_BINDING_SEP)) { /* a bare TYPE_NAME */
        if (!*binding)
            return bb_error_set(err, BB_EPARSE, "binding '' for slot '%s': empty TYPE_NAME", sl);
        return resolve_type(l, binding, sl, binding, BB_ROLE_NONE, out, err);
    }
    bb_arena *a = bb_arena_create();
    if (!a)
        return bb_error_set(err, BB_ENOMEM, "plugin loader: out of memory");
    bb_binding_triple t;
    int rc = bb_binding_triple_parse(a, binding, &t, err);
    bb_role role = rc == BB_OK ? bb_role_parse(t.role) : BB_ROLE_NONE;
    if (rc != BB_OK)
        bb_error_prefix(err, "slot '%s'", sl);
    else if (role == BB_ROLE_NONE)
        rc = bb_error_set(err, BB_EPARSE, "binding '%s' for slot '%s': unknown role '%s'",
                          binding, sl, t.role);
    else
        rc = resolve_type(l, binding, sl, t.type_name, role, out, err);
    bb_arena_destroy(a);
    return rc;
}

size_t bb_plugin_loader_type_count(const bb_plugin_loader *l)
{
    return l ? l->n_types : 0;
}

const bb_loaded_type *bb_plugin_loader_type_at(const bb_plugin_loader *l, size_t i)
{
    return l && i < l->n_types ? l->types[i] : NULL;
}

size_t bb_plugin_loader_plugin_count(const bb_plugin_loader *l)
{
    return l ? l->n_mods : 0;
}

const bb_loaded_plugin *bb_plugin_loader_plugin_at(const bb_plugin_loader *l, size_t i)
{
    return l && i < l->n_mods ? &l->mods[i]->pub : NULL;
}

size_t bb_plugin_loader_dir_count(const bb_plugin_loader *l)
{
    return l ? l->n_dirs : 0;
}

const bb_plugin_dir *bb_plugin_loader_dir_at(const bb_plugin_loader *l, size_t i)
{
    return l && i < l->n_dirs ? &l->dirs[i] : NULL;
}

size_t bb_plugin_loader_warning_count(const bb_plugin_loader *l)
{
    return l ? l->n_warnings : 0;
}

const char *bb_plugin_loader_warning_at(const bb_plugin_loader *l, size_t i)
{
    return l && i < l->n_warnings ? l->warnings[i] : NULL;
}

/* ---- create ---------------------------------------------------------------------- */

int bb_loaded_type_create(const bb_loaded_type *t, const bb_create_args *args, void **out,
                          bb_error *err)
{
    bb_error e;
    bb_error_clear(&e);
    void *inst = NULL;
    const char *slot = args && args->slot ? args->slot : "?";
    int rc = t->type->create(args, &inst, &e);
    if (rc != BB_OK) {
        if (!e.msg[0])
            snprintf(e.msg, sizeof e.msg, "create failed: %s", bb_status_str(rc));
        return bb_error_set(err, rc, "slot '%s': %s (%s): %s", slot, t->type->type_name,
                            t->plugin->path, e.msg);
    }
    *out = inst;
    return BB_OK;
}
