/*
 * cmd_dot.c — `bbc dot OUT.onnx`: a compiled model as a Graphviz digraph on
 * stdout (`bbc dot out.onnx | dot -Tsvg > out.svg`). One cluster per target
 * (partition) holding its entry function's nodes, with nested clusters for
 * its bootstrap and the functions it calls; dataflow edges inside each
 * function; wire edges (send -> receive) drawn bold between the clusters.
 * The gates the compiler inserted are octagons, DeadlineChecks hexagons,
 * wire ops parallelograms, role ops green boxes naming their slot. Exit 0,
 * 1 when the file cannot be loaded or is not a compiled model, 2 on bad
 * usage.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bb/meta.h"
#include "bbc/bbc.h"
#include "bbc/util.h"

static const char USAGE[] = "usage: bbc dot OUT.onnx\n";
static const char HELP[] =
    "\nPrint a compiled model as a Graphviz digraph: one cluster per target, wire\n"
    "edges between them, the inserted gates visible. Render it with\n"
    "  bbc dot out.onnx | dot -Tsvg > out.svg\n";

/* Writes s as the inside of a DOT quoted string. */
static void dot_str(FILE *out, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        if (*s == '\n')
            fputs("\\n", out);
        else if ((unsigned char)*s >= 0x20)
            fputc(*s, out);
    }
}

static const char *short_domain(const char *d)
{
    if (!d || !*d)
        return "ai.onnx";
    size_t pl = strlen(BB_DOMAIN_PREFIX);
    return strncmp(d, BB_DOMAIN_PREFIX, pl) == 0 ? d + pl : d;
}

/* Shape and colours of a node by what it is. */
static const char *node_style(const bb_node *n)
{
    if (bb_op_is_gate(n->domain, n->op_type) ||
        bbc_node_is(n, BB_DOMAIN_SYSCALL, BB_OP_DEADLINE_CHECK))
        return bbc_str_eq(n->op_type, BB_OP_DEADLINE_CHECK)
                   ? "shape=hexagon, fillcolor=\"#fff2b3\", color=\"#b7950b\""
                   : "shape=octagon, fillcolor=\"#fadbd8\", color=\"#c0392b\", penwidth=1.5";
    if (bbc_is_wire(n))
        return "shape=parallelogram, fillcolor=\"#d6eaf8\", color=\"#1f618d\", penwidth=1.5";
    if (bbc_is_role_node(n))
        return "fillcolor=\"#d5f5e3\", color=\"#1e8449\"";
    if (!bb_opset_is_reserved(n->domain))
        return "shape=component, fillcolor=\"#ebdef0\"";
    return "fillcolor=\"#ffffff\"";
}

static void node_id(FILE *out, size_t t, size_t f, size_t i)
{
    fprintf(out, "\"t%zu_f%zu_n%zu\"", t, f, i);
}

static void port_id(FILE *out, size_t t, size_t f, const char *dir, size_t k)
{
    fprintf(out, "\"t%zu_f%zu_%s%zu\"", t, f, dir, k);
}

static void print_node(FILE *out, size_t t, size_t f, size_t i, const bb_node *n)
{
    fputs("    ", out);
    node_id(out, t, f, i);
    fputs(" [label=\"", out);
    dot_str(out, n->op_type);
    const char *slot = bbc_meta(n, BB_META_SLOT);
    if (slot) {
        fputs("\\n[", out);
        dot_str(out, slot);
        fputs("]", out);
    }
    fputs("\\n", out);
    dot_str(out, n->name && *n->name ? n->name : "(unnamed)");
    fputs("\", tooltip=\"", out);
    dot_str(out, short_domain(n->domain));
    fputs("::", out);
    dot_str(out, n->op_type);
    fprintf(out, "\", %s];\n", node_style(n));
}

/* The formals ("in") or output ports ("out") of function fi of target t. */
static void print_ports(FILE *out, size_t t, size_t fi, const char *dir, const bb_str_list *ports)
{
    for (size_t k = 0; k < ports->n; k++) {
        fputs("    ", out);
        port_id(out, t, fi, dir, k);
        fprintf(out, " [shape=ellipse, fillcolor=\"#f2f3f4\", label=\"%s: ", dir);
        dot_str(out, ports->v[k]);
        fputs("\"];\n", out);
    }
}

/* The nodes, formals and outputs of function f (index fi of target t). */
static void print_function_nodes(FILE *out, size_t t, size_t fi, const bb_function *f)
{
    print_ports(out, t, fi, "in", &f->inputs);
    for (size_t i = 0; i < f->nodes.n; i++)
        print_node(out, t, fi, i, f->nodes.v[i]);
    print_ports(out, t, fi, "out", &f->outputs);
}

/* Dataflow edges of f: producer (node or formal) -> consumer (node or output). */
static int print_function_edges(FILE *out, bb_arena *a, size_t t, size_t fi, const bb_function *f)
{
    bbc_map prod;
    if (bbc_producers(a, f, &prod, NULL) != BB_OK)
        return BB_ENOMEM;
    for (size_t i = 0; i <= f->nodes.n; i++) {
        const bb_str_list *ins = i < f->nodes.n ? &f->nodes.v[i]->inputs : &f->outputs;
        for (size_t j = 0; j < ins->n; j++) {
            const char *v = ins->v[j];
            size_t p;
            if (!v || !*v || !bbc_map_get(&prod, v, &p))
                continue;
            fputs("  ", out);
            if (p == BBC_FORMAL)
                port_id(out, t, fi, "in", (size_t)bb_str_list_find(&f->inputs, v));
            else
                node_id(out, t, fi, p);
            fputs(" -> ", out);
            if (i < f->nodes.n)
                node_id(out, t, fi, i);
            else
                port_id(out, t, fi, "out", j);
            fputs(" [tooltip=\"", out);
            dot_str(out, v);
            fputs("\"];\n", out);
        }
    }
    return BB_OK;
}

/* Function index fi of target t: 0 entry, 1 bootstrap, 2 + k its k-th call. */
static const bb_function *target_fn(const bb_artifact_target *t, size_t fi)
{
    if (fi == 0)
        return t->fn;
    if (fi == 1)
        return t->bootstrap;
    return fi - 2 < t->n_calls ? t->calls[fi - 2] : NULL;
}

static void print_cluster(FILE *out, size_t ti, const bb_artifact_target *t)
{
    fprintf(out, "  subgraph \"cluster_t%zu\" {\n    label=\"", ti);
    dot_str(out, t->name);
    if (t->partition_id) {
        fputs("\\n", out);
        dot_str(out, t->partition_id);
    }
    fputs("\";\n    style=\"rounded,filled\"; fillcolor=\"#f8f9f9\"; color=\"#2e4053\"; "
          "penwidth=2;\n",
          out);
    print_function_nodes(out, ti, 0, t->fn);
    for (size_t fi = 1; fi < 2 + t->n_calls; fi++) {
        const bb_function *f = target_fn(t, fi);
        if (!f)
            continue;
        fprintf(out, "    subgraph \"cluster_t%zu_f%zu\" {\n    label=\"%s", ti, fi,
                fi == 1 ? "bootstrap: " : "function: ");
        dot_str(out, f->name);
        fputs("\";\n    style=\"rounded,dashed\"; color=\"#7f8c8d\"; fillcolor=\"#ffffff\";\n",
              out);
        print_function_nodes(out, ti, fi, f);
        fputs("    }\n", out);
    }
    fputs("  }\n", out);
}

static void print_end(FILE *out, const bb_artifact *v, const bb_artifact_end *e,
                      size_t edge, const char *side)
{
    if (!e->node) {
        fprintf(out, "\"outside_%zu_%s\"", edge, side);
        return;
    }
    const bb_artifact_target *t = &v->targets[e->target];
    node_id(out, e->target, e->fn == t->fn ? 0 : 1, e->index);
}

static void print_wire_edge(FILE *out, const bb_artifact *v, size_t i)
{
    const bb_artifact_edge *e = &v->edges[i];
    const char *sides[2] = {"send", "recv"};
    const bb_artifact_end *ends[2] = {&e->send, &e->recv};
    for (int k = 0; k < 2; k++)
        if (!ends[k]->node)
            fprintf(out, "  \"outside_%zu_%s\" [shape=plaintext, style=\"\", label=\"(outside "
                         "this program)\"];\n",
                    i, sides[k]);
    fputs("  ", out);
    print_end(out, v, &e->send, i, "send");
    fputs(" -> ", out);
    print_end(out, v, &e->recv, i, "recv");
    fputs(" [style=bold, penwidth=2.5, color=\"#1f618d\", fontcolor=\"#1f618d\", label=\"", out);
    const bb_node *any = e->send.node ? e->send.node : e->recv.node;
    const char *corr = bbc_meta(any, BB_META_WIRE_CORRELATION);
    dot_str(out, e->port ? e->port : corr && !bbc_str_eq(corr, "none") ? corr : "wire");
    if (e->transport) {
        fputs(" (", out);
        dot_str(out, e->transport);
        fputs(")", out);
    }
    fputs("\"];\n", out);
}

static int print_dot(FILE *out, const bb_artifact *v, bb_arena *a)
{
    fputs("digraph \"", out);
    dot_str(out, v->name ? v->name : "program");
    fputs("\" {\n  graph [fontname=\"Helvetica\", fontsize=12, compound=true, newrank=true, "
          "labelloc=t, label=\"",
          out);
    dot_str(out, v->name ? v->name : "program");
    fprintf(out, " (compiled: %zu target%s, %zu wire edge%s)\"];\n", v->n_targets,
            v->n_targets == 1 ? "" : "s", v->n_edges, v->n_edges == 1 ? "" : "s");
    fputs("  node [fontname=\"Helvetica\", fontsize=10, shape=box, style=\"rounded,filled\"];\n"
          "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#566573\"];\n",
          out);
    for (size_t t = 0; t < v->n_targets; t++)
        print_cluster(out, t, &v->targets[t]);
    for (size_t t = 0; t < v->n_targets; t++)
        for (size_t fi = 0; fi < 2 + v->targets[t].n_calls; fi++) {
            const bb_function *f = target_fn(&v->targets[t], fi);
            if (f && print_function_edges(out, a, t, fi, f) != BB_OK)
                return BB_ENOMEM;
        }
    for (size_t i = 0; i < v->n_edges; i++)
        print_wire_edge(out, v, i);
    fputs("}\n", out);
    return BB_OK;
}

int bbc_cmd_dot(int argc, char **argv)
{
    const char *path = NULL;
    int rc = bbc_parse_file_args(argc, argv, "dot", USAGE, HELP, NULL, NULL, &path);
    if (rc >= 0)
        return rc;
    bbc_opened o;
    if (bbc_open_artifact(path, &o) != BB_OK)
        return 1;
    int status = 0;
    if (print_dot(stdout, &o.view, o.arena) != BB_OK) {
        fprintf(stderr, "bbc: error: dot: %s: out of memory\n", path);
        status = 1;
    }
    bbc_close_artifact(&o);
    return status;
}
