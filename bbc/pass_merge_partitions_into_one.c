/*
 * pass_merge_partitions_into_one.c — the compiled form (COMPILER.md
 * "Pipeline output"): ONE ModelProto whose functions[] hold every partition
 * function (in partition order), each followed by the bootstraps and
 * sub-functions it brought, deduplicated by (domain, name, overload) — two
 * different bodies under one identity is an ODR violation (Internal).
 * opset_import lists every domain any node uses (ai.onnx first, then by
 * name) at the highest version imported; metadata holds the input's own
 * entries (not its signatures: they sign other bytes), the passport and
 * every partition's binding triples; the graph
 * is empty (bodies live in functions[]). ir_version is the target version.
 *
 * The functions move into the output as they are, not copied: the output
 * adopts the memory of the partition models and of the working model (whose
 * nodes and value_info the partitions borrow), which the state then frees
 * as empty shells. A deep copy of every body was the pass's whole cost.
 */
#include <stdlib.h>
#include <string.h>

#include "bb/artifact.h"
#include "bb/meta.h"
#include "bb/opsets.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"

static bool has_prefix(const char *s, const char *p)
{
    return s && strncmp(s, p, strlen(p)) == 0;
}

static int domain_cmp(const void *x, const void *y)
{
    const bb_opset_id *a = x, *b = y;
    bool oa = bb_domain_is_onnx(a->domain), ob = bb_domain_is_onnx(b->domain);
    if (oa || ob)
        return oa && ob ? 0 : (oa ? -1 : 1);
    return strcmp(a->domain, b->domain);
}

static int64_t version_of(const bbc_state *st, const bb_function *f, const char *d)
{
    int64_t v = bb_opset_list_version(&f->opset_imports, d);
    int64_t mv = bb_opset_list_version(&st->model->opset_imports, d);
    if (mv > v)
        v = mv;
    if (v < 0) {
        const bb_opset_schema *os = bb_opset_find(d);
        v = os ? os->version : 1;
    }
    return v;
}

static int add_opsets(bbc_state *st, bb_model *out, const bb_function *f)
{
    const char *prev = NULL; /* runs of one domain are looked up once */
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        const char *d = bb_domain_is_onnx(n->domain) ? BB_DOMAIN_ONNX : n->domain;
        if (bbc_str_eq(d, prev))
            continue;
        prev = d;
        int64_t v = version_of(st, f, d);
        int64_t have = bb_opset_list_version(&out->opset_imports, d);
        if (have >= v)
            continue;
        if (bb_opset_list_add(out->arena, &out->opset_imports, d, v) != BB_OK)
            return bbc_oom(st);
    }
    return BB_OK;
}

static int add_function(bbc_state *st, bb_model *out, bb_function *f, const char *part)
{
    const bb_function *have = bb_model_find_function(out, f->domain, f->name, f->overload);
    if (have) {
        if (bbc_hash_nodes(have) != bbc_hash_nodes(f))
            return bbc_fail(st, BBC_E_INTERNAL,
                            "function %s::%s from partition `%s` differs from the one already "
                            "emitted under that name",
                            f->domain ? f->domain : "", f->name, part);
        return BB_OK;
    }
    bb_function **slot = BB_VEC_PUSH(out->arena, &out->functions);
    if (!slot)
        return bbc_oom(st);
    *slot = f;
    return add_opsets(st, out, f);
}

int bbc_pass_merge_partitions_into_one(bbc_state *st)
{
    if (st->parts.n == 0)
        return bbc_fail(st, BBC_E_EMPTY_FUNCTION_TABLE, "no partition to emit");
    bb_model *out = bb_model_new();
    if (!out)
        return bbc_oom(st);
    /* What the output takes as it is lives in these arenas (a previous
     * output may hold them already: it hands them on). */
    bb_arena_adopt(out->arena, st->model->arena);
    for (size_t k = 0; k < st->parts.n; k++)
        bb_arena_adopt(out->arena, st->parts.v[k]->model->arena);
    if (st->out)
        bb_arena_adopt(out->arena, st->out->arena);
    bb_model_free(st->out);
    st->out = out;
    const bb_model *in = st->model;
    out->ir_version = st->opts->target_ir_version;
    out->producer_name = bb_model_str(out, in->producer_name);
    out->producer_version = bb_model_str(out, in->producer_version);
    out->domain = bb_model_str(out, in->domain);
    out->doc_string = bb_model_str(out, in->doc_string);
    out->has_model_version = in->has_model_version;
    out->model_version = in->model_version;
    out->graph = bb_graph_new(out->arena, in->graph && in->graph->name ? in->graph->name
                                                                        : st->root->name);
    if (!out->graph)
        return bbc_oom(st);
    for (size_t i = 0; i < in->metadata.n; i++) {
        const bb_kv *kv = &in->metadata.v[i];
        /* a signature of the input signs other bytes: not carried over */
        if (bbc_str_eq(kv->key, BB_META_COMPILED) || bbc_str_eq(kv->key, BB_META_SIGNATURE) ||
            has_prefix(kv->key, BB_META_BINDING_PREFIX))
            continue;
        if (bb_kv_set(out->arena, &out->metadata, kv->key, kv->value) != BB_OK)
            return bbc_oom(st);
    }
    if (bb_artifact_stamp_passport(out) != BB_OK)
        return bbc_oom(st);
    int rc;
    for (size_t k = 0; k < st->parts.n; k++) {
        const bbc_partition *p = st->parts.v[k];
        for (size_t i = 0; i < p->model->metadata.n; i++) {
            const bb_kv *kv = &p->model->metadata.v[i];
            if (!has_prefix(kv->key, BB_META_BINDING_PREFIX))
                continue;
            if (bb_kv_set(out->arena, &out->metadata, kv->key, kv->value) != BB_OK)
                return bbc_oom(st);
        }
        for (size_t i = 0; i < p->model->functions.n; i++)
            if ((rc = add_function(st, out, p->model->functions.v[i], p->cls)) != BB_OK)
                return rc;
    }
    /* Call nodes name their callee's domain: import it too. */
    for (size_t i = 0; i < out->functions.n; i++) {
        const bb_function *f = out->functions.v[i];
        for (size_t j = 0; j < f->nodes.n; j++)
            if (bbc_callee(out, f->nodes.v[j]) &&
                bb_opset_list_version(&out->opset_imports, f->nodes.v[j]->domain) < 0 &&
                bb_opset_list_add(out->arena, &out->opset_imports, f->nodes.v[j]->domain, 1) != BB_OK)
                return bbc_oom(st);
    }
    if (out->opset_imports.n > 1)
        qsort(out->opset_imports.v, out->opset_imports.n, sizeof *out->opset_imports.v, domain_cmp);
    return BB_OK;
}
