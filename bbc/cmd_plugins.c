/*
 * cmd_plugins.c — `bbc plugins [--plugin-path DIR]... [--json]`: lists every
 * component type the plugin search finds (bb-plugin(7), "FINDING PLUGINS")
 * with its role, file, ops per opset (port names and storage types),
 * dependencies and config keys. Files that could not be loaded are listed
 * as warnings on stderr (text) or under "warnings" (JSON); they do not fail
 * the command. Exit 0 on success, 1 on a search error (a missing
 * --plugin-path directory, a duplicate TYPE_NAME), 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bb/plugin_loader.h"
#include "bbc/bbc.h"

static const char USAGE[] = "usage: bbc plugins [--plugin-path DIR]... [--json]\n";
static const char HELP[] =
    "\nList every component type found by the plugin search (see bb-plugin(7)).\n"
    "\n"
    "  --plugin-path DIR  search DIR first (repeatable; DIR may be a colon-separated\n"
    "                     list); then $BB_PLUGIN_PATH, the directory next to the\n"
    "                     executable and the installed directory\n"
    "  --json             print JSON: types, plugins, dirs, warnings\n"
    "  -h, --help         print this help\n";

static const char *port_type_name(const bb_port_decl *p)
{
    return p->type && p->type->name ? p->type->name : "any";
}

static int cmp_types(const void *a, const void *b)
{
    const bb_loaded_type *x = *(const bb_loaded_type *const *)a;
    const bb_loaded_type *y = *(const bb_loaded_type *const *)b;
    return strcmp(x->type->type_name, y->type->type_name);
}

/* The optional function pointers a type fills in, in ABI order. */
static const char *const OPTIONAL_FNS[] = {"bootstrap", "snapshot", "restore",
                                           "materialize_from_wire", "on_timer"};

static bool has_optional(const bb_component_type *t, size_t i)
{
    switch (i) {
    case 0: return t->bootstrap != NULL;
    case 1: return t->snapshot != NULL;
    case 2: return t->restore != NULL;
    case 3: return t->materialize_from_wire != NULL;
    case 4: return t->on_timer != NULL;
    }
    return false;
}

#define N_OPTIONAL (sizeof OPTIONAL_FNS / sizeof OPTIONAL_FNS[0])

/* ---- text ----------------------------------------------------------------------------- */

static void print_ports(FILE *out, const bb_port_decl *ports, uint32_t n)
{
    fputc('(', out);
    for (uint32_t i = 0; i < n; i++)
        fprintf(out, "%s%s%s%s: %s", i ? ", " : "", ports[i].name,
                ports[i].optional ? "?" : "", ports[i].variadic ? "..." : "",
                port_type_name(&ports[i]));
    fputc(')', out);
}

static void print_type(FILE *out, const bb_loaded_type *lt)
{
    const bb_component_type *t = lt->type;
    const bb_plugin_info *pi = lt->plugin->info;
    fprintf(out, "%s\n", t->type_name);
    fprintf(out, "    role:      %s\n", bb_role_name(t->role));
    fprintf(out, "    file:      %s (%s%s%s)\n", lt->plugin->path, pi->name,
            pi->version ? " " : "", pi->version ? pi->version : "");
    fprintf(out, "    abi:       %u.%u\n", t->abi_major, t->abi_minor);
    if (t->doc && *t->doc)
        fprintf(out, "    doc:       %s\n", t->doc);
    for (uint32_t s = 0; s < t->n_opsets; s++) {
        const bb_opset_decl *os = &t->opsets[s];
        fprintf(out, "    opset:     %s v%lld\n",
                os->domain && *os->domain ? os->domain : "ai.onnx", (long long)os->version);
        for (uint32_t i = 0; i < os->n_ops; i++) {
            const bb_op_decl *op = &os->ops[i];
            fprintf(out, "      %s", op->op_type);
            print_ports(out, op->inputs, op->n_inputs);
            fputs(" -> ", out);
            print_ports(out, op->outputs, op->n_outputs);
            if (op->doc && *op->doc)
                fprintf(out, "  # %s", op->doc);
            fputc('\n', out);
        }
    }
    if (t->n_deps) {
        fputs("    depends:  ", out);
        for (uint32_t i = 0; i < t->n_deps; i++)
            fprintf(out, "%s %s = \"%s\"", i ? "," : "", bb_role_name(t->deps[i].role),
                    t->deps[i].slot);
        fputc('\n', out);
    }
    if (t->n_config) {
        fputs("    config:\n", out);
        for (uint32_t i = 0; i < t->n_config; i++) {
            const bb_config_decl *c = &t->config[i];
            fprintf(out, "      %s: %s", c->key, c->type);
            if (c->default_json)
                fprintf(out, " = %s", c->default_json);
            else
                fputs(" (required)", out);
            if (c->doc && *c->doc)
                fprintf(out, "  # %s", c->doc);
            fputc('\n', out);
        }
    }
    bool any = false;
    for (size_t i = 0; i < N_OPTIONAL; i++) {
        if (has_optional(t, i)) {
            fprintf(out, "%s%s", any ? ", " : "    provides:  ", OPTIONAL_FNS[i]);
            any = true;
        }
    }
    if (any)
        fputc('\n', out);
}

/* ---- JSON ----------------------------------------------------------------------------- */

static cJSON *ports_json(const bb_port_decl *ports, uint32_t n)
{
    cJSON *arr = cJSON_CreateArray();
    for (uint32_t i = 0; arr && i < n; i++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "name", ports[i].name);
        cJSON_AddStringToObject(p, "type", port_type_name(&ports[i]));
        cJSON_AddBoolToObject(p, "optional", ports[i].optional);
        cJSON_AddBoolToObject(p, "variadic", ports[i].variadic);
        cJSON_AddItemToArray(arr, p);
    }
    return arr;
}

static cJSON *type_json(const bb_loaded_type *lt)
{
    const bb_component_type *t = lt->type;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type_name", t->type_name);
    cJSON_AddStringToObject(o, "role", bb_role_name(t->role));
    cJSON_AddStringToObject(o, "file", lt->plugin->path);
    cJSON_AddStringToObject(o, "plugin", lt->plugin->info->name);
    char abi[32];
    snprintf(abi, sizeof abi, "%u.%u", t->abi_major, t->abi_minor);
    cJSON_AddStringToObject(o, "abi", abi);
    if (t->doc)
        cJSON_AddStringToObject(o, "doc", t->doc);
    cJSON *opsets = cJSON_AddArrayToObject(o, "opsets");
    for (uint32_t s = 0; s < t->n_opsets; s++) {
        const bb_opset_decl *os = &t->opsets[s];
        cJSON *jo = cJSON_CreateObject();
        cJSON_AddStringToObject(jo, "domain",
                                os->domain && *os->domain ? os->domain : "ai.onnx");
        cJSON_AddNumberToObject(jo, "version", (double)os->version);
        cJSON *ops = cJSON_AddArrayToObject(jo, "ops");
        for (uint32_t i = 0; i < os->n_ops; i++) {
            const bb_op_decl *op = &os->ops[i];
            cJSON *jop = cJSON_CreateObject();
            cJSON_AddStringToObject(jop, "op_type", op->op_type);
            cJSON_AddItemToObject(jop, "inputs", ports_json(op->inputs, op->n_inputs));
            cJSON_AddItemToObject(jop, "outputs", ports_json(op->outputs, op->n_outputs));
            if (op->doc)
                cJSON_AddStringToObject(jop, "doc", op->doc);
            cJSON_AddItemToArray(ops, jop);
        }
        cJSON_AddItemToArray(opsets, jo);
    }
    cJSON *deps = cJSON_AddArrayToObject(o, "dependencies");
    for (uint32_t i = 0; i < t->n_deps; i++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "role", bb_role_name(t->deps[i].role));
        cJSON_AddStringToObject(d, "slot", t->deps[i].slot);
        cJSON_AddItemToArray(deps, d);
    }
    cJSON *config = cJSON_AddArrayToObject(o, "config");
    for (uint32_t i = 0; i < t->n_config; i++) {
        const bb_config_decl *c = &t->config[i];
        cJSON *jc = cJSON_CreateObject();
        cJSON_AddStringToObject(jc, "key", c->key);
        cJSON_AddStringToObject(jc, "type", c->type);
        cJSON_AddBoolToObject(jc, "required", c->default_json == NULL);
        if (c->default_json) {
            /* The default is JSON text; keep it verbatim if it does not parse. */
            cJSON *dflt = cJSON_Parse(c->default_json);
            cJSON_AddItemToObject(jc, "default",
                                  dflt ? dflt : cJSON_CreateString(c->default_json));
        }
        if (c->doc)
            cJSON_AddStringToObject(jc, "doc", c->doc);
        cJSON_AddItemToArray(config, jc);
    }
    cJSON *fns = cJSON_AddArrayToObject(o, "provides");
    for (size_t i = 0; i < N_OPTIONAL; i++)
        if (has_optional(t, i))
            cJSON_AddItemToArray(fns, cJSON_CreateString(OPTIONAL_FNS[i]));
    return o;
}

static int print_json(const bb_plugin_loader *l, const bb_loaded_type **types, size_t n)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return 1;
    cJSON *jt = cJSON_AddArrayToObject(root, "types");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(jt, type_json(types[i]));
    cJSON *jp = cJSON_AddArrayToObject(root, "plugins");
    for (size_t i = 0; i < bb_plugin_loader_plugin_count(l); i++) {
        const bb_loaded_plugin *p = bb_plugin_loader_plugin_at(l, i);
        if (!p->info)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", p->path);
        cJSON_AddStringToObject(o, "name", p->info->name);
        if (p->info->version)
            cJSON_AddStringToObject(o, "version", p->info->version);
        cJSON_AddNumberToObject(o, "types", p->info->n_types);
        cJSON_AddItemToArray(jp, o);
    }
    cJSON *jd = cJSON_AddArrayToObject(root, "dirs");
    for (size_t i = 0; i < bb_plugin_loader_dir_count(l); i++) {
        const bb_plugin_dir *d = bb_plugin_loader_dir_at(l, i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "path", d->path);
        cJSON_AddStringToObject(o, "origin", bb_plugin_dir_origin_name(d->origin));
        cJSON_AddBoolToObject(o, "present", d->present);
        cJSON_AddItemToArray(jd, o);
    }
    cJSON *jw = cJSON_AddArrayToObject(root, "warnings");
    for (size_t i = 0; i < bb_plugin_loader_warning_count(l); i++)
        cJSON_AddItemToArray(jw, cJSON_CreateString(bb_plugin_loader_warning_at(l, i)));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "bbc: error: out of memory\n");
        return 1;
    }
    puts(text);
    cJSON_free(text);
    return 0;
}

/* ---- the command --------------------------------------------------------------------- */

int bbc_cmd_plugins(int argc, char **argv)
{
    bool json = false;
    bb_plugin_loader *l = NULL;
    bb_error err;
    int status = 0;
    if (bb_plugin_loader_create(0, &l, &err) != BB_OK) {
        fprintf(stderr, "bbc: error: %s\n", err.msg);
        return 1;
    }
    /* argv[0] is the command name ("plugins") */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *dir = NULL;
        if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--plugin-path") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bbc: error: --plugin-path needs a directory\n%s", USAGE);
                status = 2;
                goto out;
            }
            dir = argv[++i];
        } else if (strncmp(a, "--plugin-path=", 14) == 0) {
            dir = a + 14;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(USAGE, stdout);
            fputs(HELP, stdout);
            goto out;
        } else {
            fprintf(stderr, "bbc: error: plugins: unknown argument '%s'\n%s", a, USAGE);
            status = 2;
            goto out;
        }
        if (dir && bb_plugin_loader_add_dirs(l, dir, &err) != BB_OK) {
            fprintf(stderr, "bbc: error: %s\n", err.msg);
            status = 1;
            goto out;
        }
    }
    if (bb_plugin_loader_scan(l, &err) != BB_OK) {
        fprintf(stderr, "bbc: error: %s\n", err.msg);
        status = 1;
        goto out;
    }
    size_t n = bb_plugin_loader_type_count(l);
    const bb_loaded_type **types = malloc((n ? n : 1) * sizeof *types);
    if (!types) {
        fprintf(stderr, "bbc: error: out of memory\n");
        status = 1;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        types[i] = bb_plugin_loader_type_at(l, i);
    qsort(types, n, sizeof *types, cmp_types);
    if (json) {
        status = print_json(l, types, n);
    } else {
        for (size_t i = 0; i < bb_plugin_loader_warning_count(l); i++)
            fprintf(stderr, "bbc: warning: %s\n", bb_plugin_loader_warning_at(l, i));
        for (size_t i = 0; i < n; i++) {
            if (i)
                fputc('\n', stdout);
            print_type(stdout, types[i]);
        }
        if (n == 0) {
            fputs("no component types found; searched:\n", stderr);
            for (size_t i = 0; i < bb_plugin_loader_dir_count(l); i++) {
                const bb_plugin_dir *d = bb_plugin_loader_dir_at(l, i);
                fprintf(stderr, "  %s (%s%s)\n", d->path, bb_plugin_dir_origin_name(d->origin),
                        d->present ? "" : ", missing");
            }
        }
    }
    free(types);
out:
    /* Flush before dlclose: nothing printed may point into a plugin. */
    fflush(stdout);
    bb_plugin_loader_destroy(l);
    return status;
}
