/*
 * cmd_targets.c — `bbc targets [--names | --json] OUT.onnx`: what a compiled
 * model offers a bbd: every target (partition) with its entry function,
 * inputs and outputs, bootstrap, the model-local functions it calls and its
 * binding triples, then every wire edge between sends and receives. Exit 0,
 * 1 when the file cannot be loaded or is not a compiled model, 2 on bad
 * usage.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bb/artifact.h"
#include "bb/meta.h"
#include "bb/model_io.h"
#include "bbc/bbc.h"
#include "bbc/util.h"

static const char USAGE[] = "usage: bbc targets [--names | --json] OUT.onnx\n";
static const char HELP[] =
    "\nList the targets (partitions) of a compiled model: entry function, inputs and\n"
    "outputs, bootstrap, called functions and bindings, then the wire edges.\n"
    "\n"
    "  --names     print the target names only, one per line\n"
    "  --json      print JSON: {\"program\", \"targets\": [...], \"wire_edges\": [...]}\n"
    "  -h, --help  print this help\n";

static const char *or_dash(const char *s)
{
    return s && *s ? s : "-";
}

static void print_fn(FILE *out, const char *label, const bb_function *f)
{
    fprintf(out, "  %-10s %s::%s (%zu nodes)\n", label, or_dash(f->domain), or_dash(f->name),
            f->nodes.n);
}

static void print_ports(FILE *out, const char *label, const bb_function *f,
                        const bb_str_list *ports)
{
    fprintf(out, "  %-10s", label);
    if (ports->n == 0)
        fputs(" -", out);
    for (size_t i = 0; i < ports->n; i++) {
        char ty[128] = "any";
        const bb_value_info *vi = bb_value_info_find(&f->value_info, ports->v[i]);
        if (vi && vi->type)
            bb_type_proto_str(vi->type, ty, sizeof ty);
        fprintf(out, "%s %s: %s", i ? "," : "", ports->v[i], ty);
    }
    fputc('\n', out);
}

static void print_target(FILE *out, const bb_artifact_target *t)
{
    fprintf(out, "%s\n", t->name);
    print_fn(out, "entry", t->fn);
    if (t->partition_id)
        fprintf(out, "  %-10s %s\n", "id", t->partition_id);
    print_ports(out, "inputs", t->fn, &t->fn->inputs);
    print_ports(out, "outputs", t->fn, &t->fn->outputs);
    if (t->bootstrap)
        print_fn(out, "bootstrap", t->bootstrap);
    for (size_t i = 0; i < t->n_calls; i++)
        print_fn(out, i ? "" : "calls", t->calls[i]);
    if (t->n_bindings == 0)
        fprintf(out, "  %-10s -\n", "bindings");
    for (size_t i = 0; i < t->n_bindings; i++)
        fprintf(out, "  %-10s %s = %s\n", i ? "" : "bindings", t->bindings[i].slot,
                t->bindings[i].triple);
}

static const char *end_target(const bb_artifact *v, const bb_artifact_end *e)
{
    return e->target < v->n_targets ? v->targets[e->target].name : "?";
}

static void print_end(FILE *out, const bb_artifact *v, const bb_artifact_end *e)
{
    if (!e->node) {
        fputs("(outside this program)", out);
        return;
    }
    fprintf(out, "%s %s \"%s\"", end_target(v, e), e->node->op_type, or_dash(e->node->name));
}

static void print_edges(FILE *out, const bb_artifact *v)
{
    fprintf(out, "wire edges: %zu\n", v->n_edges);
    for (size_t i = 0; i < v->n_edges; i++) {
        const bb_artifact_edge *e = &v->edges[i];
        fputs("  ", out);
        print_end(out, v, &e->send);
        fputs(" -> ", out);
        print_end(out, v, &e->recv);
        if (e->port)
            fprintf(out, "  port %s", e->port);
        if (e->transport)
            fprintf(out, "  %s", e->transport);
        fputc('\n', out);
    }
}

/* ---- JSON ------------------------------------------------------------------------- */

static cJSON *fn_json(const bb_function *f)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "domain", f->domain ? f->domain : "");
    cJSON_AddStringToObject(o, "name", f->name ? f->name : "");
    cJSON_AddNumberToObject(o, "nodes", (double)f->nodes.n);
    return o;
}

static cJSON *ports_json(const bb_function *f, const bb_str_list *ports)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < ports->n; i++) {
        char ty[128] = "any";
        const bb_value_info *vi = bb_value_info_find(&f->value_info, ports->v[i]);
        if (vi && vi->type)
            bb_type_proto_str(vi->type, ty, sizeof ty);
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "name", ports->v[i]);
        cJSON_AddStringToObject(p, "type", ty);
        cJSON_AddItemToArray(arr, p);
    }
    return arr;
}

static cJSON *target_json(const bb_artifact_target *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", t->name);
    if (t->partition_id)
        cJSON_AddStringToObject(o, "partition_id", t->partition_id);
    cJSON_AddItemToObject(o, "entry", fn_json(t->fn));
    cJSON_AddItemToObject(o, "inputs", ports_json(t->fn, &t->fn->inputs));
    cJSON_AddItemToObject(o, "outputs", ports_json(t->fn, &t->fn->outputs));
    cJSON_AddItemToObject(o, "bootstrap", t->bootstrap ? fn_json(t->bootstrap) : cJSON_CreateNull());
    cJSON *calls = cJSON_AddArrayToObject(o, "calls");
    for (size_t i = 0; i < t->n_calls; i++)
        cJSON_AddItemToArray(calls, fn_json(t->calls[i]));
    cJSON *bs = cJSON_AddArrayToObject(o, "bindings");
    for (size_t i = 0; i < t->n_bindings; i++) {
        const bb_artifact_binding *b = &t->bindings[i];
        cJSON *jb = cJSON_CreateObject();
        cJSON_AddStringToObject(jb, "slot", b->slot);
        cJSON_AddStringToObject(jb, "binding", b->triple);
        if (!b->error) {
            char id[16];
            snprintf(id, sizeof id, "%u", (unsigned)b->parsed.slot_id);
            cJSON_AddStringToObject(jb, "role", b->parsed.role);
            cJSON_AddStringToObject(jb, "type_name", b->parsed.type_name);
            cJSON_AddStringToObject(jb, "slot_id", id);
        }
        cJSON_AddItemToArray(bs, jb);
    }
    return o;
}

static cJSON *end_json(const bb_artifact *v, const bb_artifact_end *e)
{
    if (!e->node)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "target", end_target(v, e));
    cJSON_AddStringToObject(o, "node", e->node->name ? e->node->name : "");
    cJSON_AddStringToObject(o, "op_type", e->node->op_type ? e->node->op_type : "");
    return o;
}

static int print_json(const bb_artifact *v)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return 1;
    if (v->name)
        cJSON_AddStringToObject(root, "program", v->name);
    cJSON *ts = cJSON_AddArrayToObject(root, "targets");
    for (size_t i = 0; i < v->n_targets; i++)
        cJSON_AddItemToArray(ts, target_json(&v->targets[i]));
    cJSON *es = cJSON_AddArrayToObject(root, "wire_edges");
    for (size_t i = 0; i < v->n_edges; i++) {
        const bb_artifact_edge *e = &v->edges[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "send", end_json(v, &e->send));
        cJSON_AddItemToObject(o, "recv", end_json(v, &e->recv));
        if (e->port)
            cJSON_AddStringToObject(o, "port", e->port);
        if (e->transport)
            cJSON_AddStringToObject(o, "transport", e->transport);
        cJSON_AddItemToArray(es, o);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        fputs("bbc: error: targets: out of memory\n", stderr);
        return 1;
    }
    puts(text);
    cJSON_free(text);
    return 0;
}

int bbc_cmd_targets(int argc, char **argv)
{
    bool names = false, json = false;
    const char *path = NULL;
    int rc = bbc_parse_file_args(argc, argv, "targets", USAGE, HELP, (const char *[]){"--names", "--json", NULL},
                                 (bool *[]){&names, &json}, &path);
    if (rc >= 0)
        return rc;
    if (names && json) {
        fprintf(stderr, "bbc: error: targets: --names and --json exclude each other\n%s", USAGE);
        return 2;
    }
    bbc_opened o;
    if (bbc_open_artifact(path, &o) != BB_OK)
        return 1;
    int status = 0;
    if (json) {
        status = print_json(&o.view);
    } else if (names) {
        for (size_t i = 0; i < o.view.n_targets; i++)
            printf("%s\n", o.view.targets[i].name);
    } else {
        printf("program: %s\ntargets: %zu\n", or_dash(o.view.name), o.view.n_targets);
        for (size_t i = 0; i < o.view.n_targets; i++)
            print_target(stdout, &o.view.targets[i]);
        print_edges(stdout, &o.view);
    }
    bbc_close_artifact(&o);
    return status;
}
