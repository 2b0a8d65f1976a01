/*
 * pass_partition_by_wire_ops.c — slices the root at wire ops into one
 * partition per peer class (COMPILER.md "Partition by wire ops").
 *
 * Wire ops are the boundary: every dataflow edge stays inside a class (sends
 * belong to their producers' class, receives to their consumers'; see
 * infer_peer_classes), so a partition is exactly the nodes whose
 * home_class is its class, in root order. Classes are ordered by first
 * appearance, which keeps partition order stable when a compiled model is
 * compiled again.
 *
 * Each partition is its own model (borrowing the root's node and value_info
 * objects, which move into it) whose functions[0] is the partition
 * function named after the class (SELF_CLASS "@self" for a program without
 * classes), with the root formals, ports, value_info, slot declarations and
 * slot metadata it uses, plus clones of the sub-functions its call nodes
 * reach and of the class's bootstrap ("<class>__bootstrap"). The 16-hex
 * content hash of the node bodies is computed here and re-computed over the
 * final bodies by stamp_compilation_metadata ("<class>#<hash>").
 *
 * One WireEdge is recorded per matched send/receive pair.
 */
#include <stdio.h>
#include <string.h>

#include "bb/artifact.h"
#include "bb/meta.h"
#include "bb/opsets.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"
#include "bbc/wire.h"

static bool has_prefix(const char *s, const char *p)
{
    return s && strncmp(s, p, strlen(p)) == 0;
}

/* What the partition's own nodes name: values, slots, sent ports. */
typedef struct part_sets {
    bbc_map values; /* inputs and outputs of the partition's nodes */
    bbc_map made;   /* outputs */
    bbc_map slots;  /* "slot" stamps */
    bbc_map ports;  /* ports of its wire sends */
} part_sets;

static int sets_init(bb_arena *a, const bb_function *pf, part_sets *ps)
{
    size_t n = pf->nodes.n;
    /* About one value per node (the maps grow when there are more). */
    if (bbc_map_init(&ps->values, a, n + 16) != BB_OK || bbc_map_init(&ps->made, a, n) != BB_OK ||
        bbc_map_init(&ps->slots, a, 8) != BB_OK || bbc_map_init(&ps->ports, a, 8) != BB_OK)
        return BB_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const bb_node *nd = pf->nodes.v[i];
        for (size_t j = 0; j < nd->inputs.n; j++)
            if (nd->inputs.v[j] && *nd->inputs.v[j] &&
                bbc_map_put(&ps->values, nd->inputs.v[j], i) != BB_OK)
                return BB_ENOMEM;
        for (size_t j = 0; j < nd->outputs.n; j++)
            if (nd->outputs.v[j] && *nd->outputs.v[j] &&
                (bbc_map_put(&ps->values, nd->outputs.v[j], i) != BB_OK ||
                 bbc_map_put(&ps->made, nd->outputs.v[j], i) != BB_OK))
                return BB_ENOMEM;
        const char *slot = bbc_meta(nd, BB_META_SLOT);
        const char *port = bbc_is_wire_send(nd) ? bbc_meta(nd, BB_META_PORT) : NULL;
        if ((slot && bbc_map_put(&ps->slots, slot, i) != BB_OK) ||
            (port && bbc_map_put(&ps->ports, port, i) != BB_OK))
            return BB_ENOMEM;
    }
    return BB_OK;
}

static bool class_uses(const bb_node_list *nodes, const char *slot)
{
    for (size_t i = 0; i < nodes->n; i++)
        if (bbc_meta_is(nodes->v[i], BB_META_SLOT, slot))
            return true;
    return false;
}

/* Is the slot part of this partition? (Single-class programs keep all.) */
static bool partition_slot(bbc_state *st, const char *cls, const part_sets *ps, const char *slot,
                           bool single)
{
    if (single || bbc_state_class_declares(st, cls, slot) || bbc_map_get(&ps->slots, slot, NULL))
        return true;
    /* Bootstrap bodies name slots too. */
    for (size_t i = 0; i < st->model->functions.n; i++) {
        const bb_function *f = st->model->functions.v[i];
        if (bb_artifact_is_bootstrap(f) && bbc_str_eq(bb_kv_get(&f->metadata, BB_META_HOME_CLASS), cls) &&
            class_uses(&f->nodes, slot))
            return true;
    }
    return false;
}

static const char *slot_of_key(const char *key)
{
    static const char *const PREFIXES[] = {BB_META_SLOT_CONCRETE_TYPE_PREFIX,
                                           BB_META_SLOT_ROLE_PREFIX, BB_META_SLOT_ID_PREFIX};
    for (size_t i = 0; i < 3; i++)
        if (has_prefix(key, PREFIXES[i]))
            return key + strlen(PREFIXES[i]);
    return NULL;
}

/* value_info moves like the nodes: each value lives in one partition. */
static int copy_value_info(bb_arena *a, bb_function *pf, bb_value_info *vi)
{
    bb_value_info **slot = BB_VEC_PUSH(a, &pf->value_info);
    if (!slot)
        return BB_ENOMEM;
    *slot = vi;
    return BB_OK;
}

/* Clone function fi of ix->m (and its callees) into pm unless present. */
static int clone_function_into(bbc_state *st, const bbc_fn_index *ix, bb_model *pm, size_t fi,
                               int depth)
{
    const bb_function *f = ix->m->functions.v[fi];
    if (depth > BBC_MAX_CALL_DEPTH)
        return bbc_fail(st, BBC_E_INTERNAL, "function call nesting deeper than %d at '%s'",
                        BBC_MAX_CALL_DEPTH, f->name);
    if (bb_model_find_function(pm, f->domain, f->name, f->overload))
        return BB_OK;
    bb_function *c = bb_function_clone(pm->arena, f);
    bb_function **slot = c ? BB_VEC_PUSH(pm->arena, &pm->functions) : NULL;
    if (!slot)
        return bbc_oom(st);
    *slot = c;
    for (size_t i = 0; i < f->nodes.n; i++) {
        size_t callee = bbc_fn_index_callee(ix, f->nodes.v[i]);
        int rc;
        if (callee != SIZE_MAX && callee != fi &&
            (rc = clone_function_into(st, ix, pm, callee, depth + 1)) != BB_OK)
            return rc;
    }
    return BB_OK;
}

/* Does bootstrap f belong to class cls? Its class module's ("<cls>__bootstrap"
 * or home_class cls), a sub-module's whose nodes all run on cls, or (single
 * class) the root module's. */
static bool bootstrap_of(const bb_function *f, const char *cls, const char *want,
                         const char *root_boot)
{
    const char *fc = bb_kv_get(&f->metadata, BB_META_HOME_CLASS);
    if (fc)
        return bbc_str_eq(fc, cls);
    if (bbc_str_eq(f->name, want) || (root_boot && bbc_str_eq(f->name, root_boot)))
        return true;
    if (f->nodes.n == 0)
        return false;
    for (size_t i = 0; i < f->nodes.n; i++)
        if (!bbc_meta_is(f->nodes.v[i], BB_META_HOME_CLASS, cls))
            return false;
    return true;
}

/* A new partition model for cls whose function holds the root's member
 * nodes (moved, not copied: see compiler_internal.h, partition models
 * borrow from the working model, which outlives them). */
static bbc_partition *new_partition(bbc_state *st, const char *cls, const size_t *members,
                                    size_t n_members)
{
    const bb_function *root = st->root;
    bb_model *pm = bb_model_new();
    if (!pm)
        return NULL;
    pm->ir_version = st->model->ir_version;
    pm->producer_name = bb_model_str(pm, st->model->producer_name);
    pm->producer_version = bb_model_str(pm, st->model->producer_version);
    pm->domain = bb_model_str(pm, st->model->domain);
    pm->has_model_version = st->model->has_model_version;
    pm->model_version = st->model->model_version;
    bb_function *pf = bb_model_add_function(pm, root->domain, cls);
    bbc_partition *p = pf ? bbc_state_add_partition(st, cls, pm) : NULL;
    if (!p) {
        if (!pf)
            bb_model_free(pm);
        return NULL;
    }
    pf->doc_string = bb_model_str(pm, root->doc_string);
    pf->nodes.v = bb_arena_calloc(pm->arena, n_members + 1, sizeof *pf->nodes.v);
    if (!pf->nodes.v)
        return NULL;
    for (size_t m = 0; m < n_members; m++)
        pf->nodes.v[m] = root->nodes.v[members[m]];
    pf->nodes.n = n_members;
    pf->nodes.cap = n_members + 1;
    return p;
}

/* Formals the nodes read, ports they produce, and value_info in the root's
 * order (stable when compiled again), once each; the formals and ports are
 * among the values the nodes name. */
static int copy_interface(bbc_state *st, bbc_partition *p, const part_sets *ps)
{
    const bb_function *root = st->root;
    bb_function *pf = p->fn;
    bb_arena *a = p->model->arena;
    for (size_t j = 0; j < root->inputs.n; j++) {
        const char *v = root->inputs.v[j];
        if (v && bbc_map_get(&ps->values, v, NULL) && bb_str_list_push(a, &pf->inputs, v) != BB_OK)
            return bbc_oom(st);
    }
    for (size_t j = 0; j < root->outputs.n; j++) {
        const char *v = root->outputs.v[j];
        if (v && bbc_map_get(&ps->made, v, NULL) && bb_str_list_push(a, &pf->outputs, v) != BB_OK)
            return bbc_oom(st);
    }
    bbc_map copied;
    if (bbc_map_init(&copied, st->scratch, ps->values.n) != BB_OK)
        return bbc_oom(st);
    for (size_t j = 0; j < root->value_info.n; j++) {
        bb_value_info *vi = root->value_info.v[j];
        if (!vi->name || !*vi->name || !bbc_map_get(&ps->values, vi->name, NULL) ||
            bbc_map_get(&copied, vi->name, NULL))
            continue;
        if (bbc_map_put(&copied, vi->name, j) != BB_OK || copy_value_info(a, pf, vi) != BB_OK)
            return bbc_oom(st);
    }
    return BB_OK;
}

/* Slot declarations and metadata of the partition's slots; the root's
 * other metadata but its class and net_in keys (net_out only for the
 * ports the partition sends); its own home_class. */
static int copy_slots(bbc_state *st, bbc_partition *p, const part_sets *ps, bool single)
{
    const bb_function *root = st->root;
    const char *cls = p->cls;
    bb_function *pf = p->fn;
    bb_arena *a = p->model->arena;
    for (size_t j = 0; j < root->attributes.n; j++)
        if (partition_slot(st, cls, ps, root->attributes.v[j], single) &&
            bb_str_list_push(a, &pf->attributes, root->attributes.v[j]) != BB_OK)
            return bbc_oom(st);
    for (size_t j = 0; j < root->attribute_protos.n; j++) {
        const bb_attr *ap = root->attribute_protos.v[j];
        if (!partition_slot(st, cls, ps, ap->name, single))
            continue;
        /* The class's own construction state when it declares the slot (the
         * root holds the first class's). */
        const bb_attr *own = bbc_state_class_attr(st, cls, ap->name);
        bb_attr *c = bb_attr_clone(a, own ? own : ap);
        bb_attr **slot = c ? BB_VEC_PUSH(a, &pf->attribute_protos) : NULL;
        if (!slot)
            return bbc_oom(st);
        *slot = c;
    }
    bbc_map meta_keys; /* pf's metadata (one net_out key per port it sends) */
    if (bbc_map_init(&meta_keys, st->scratch, 16) != BB_OK)
        return bbc_oom(st);
    for (size_t j = 0; j < root->metadata.n; j++) {
        const bb_kv *kv = &root->metadata.v[j];
        const char *slot = slot_of_key(kv->key);
        bool keep;
        if (slot)
            keep = partition_slot(st, cls, ps, slot, single);
        else if (has_prefix(kv->key, BB_META_NET_OUT_PREFIX))
            keep = bbc_map_get(&ps->ports, kv->key + strlen(BB_META_NET_OUT_PREFIX), NULL);
        else
            keep = !bbc_str_eq(kv->key, BB_META_HOME_CLASS) &&
                   !has_prefix(kv->key, BB_META_NET_IN_PREFIX);
        if (keep && bbc_kv_set_indexed(a, &pf->metadata, &meta_keys, kv->key, kv->value) != BB_OK)
            return bbc_oom(st);
    }
    if (bbc_kv_set_indexed(a, &pf->metadata, &meta_keys, BB_META_HOME_CLASS, cls) != BB_OK)
        return bbc_oom(st);
    return BB_OK;
}

/* Opsets the body uses, at the version the root / model imports (runs of
 * one domain looked up once). */
static int import_opsets(bbc_state *st, bbc_partition *p)
{
    const bb_function *root = st->root;
    bb_function *pf = p->fn;
    const char *prev = NULL;
    for (size_t i = 0; i < pf->nodes.n; i++) {
        const bb_node *n = pf->nodes.v[i];
        const char *d = bb_domain_is_onnx(n->domain) ? BB_DOMAIN_ONNX : n->domain;
        if (bbc_str_eq(d, prev))
            continue;
        prev = d;
        if (bb_opset_list_version(&pf->opset_imports, d) >= 0)
            continue;
        int64_t v = bb_opset_list_version(&root->opset_imports, d);
        if (v < 0)
            v = bb_opset_list_version(&st->model->opset_imports, d);
        if (v < 0) {
            const bb_opset_schema *os = bb_opset_find(d);
            v = os ? os->version : 1;
        }
        if (bb_opset_list_add(p->model->arena, &pf->opset_imports, d, v) != BB_OK)
            return bbc_oom(st);
    }
    return BB_OK;
}

/* Sub-functions the partition calls, and the class's bootstrap. */
static int clone_callees(bbc_state *st, const bbc_fn_index *ix, bbc_partition *p, bool single)
{
    const char *cls = p->cls;
    const bb_function *pf = p->fn;
    bb_model *pm = p->model;
    int rc;
    for (size_t i = 0; i < pf->nodes.n; i++) {
        size_t callee = bbc_fn_index_callee(ix, pf->nodes.v[i]);
        if (callee != SIZE_MAX && (rc = clone_function_into(st, ix, pm, callee, 0)) != BB_OK)
            return rc;
    }
    char want[512], root_boot[512];
    snprintf(want, sizeof want, "%s%s", cls, BB_BOOTSTRAP_SUFFIX);
    snprintf(root_boot, sizeof root_boot, "%s%s", st->root->name, BB_BOOTSTRAP_SUFFIX);
    for (size_t i = 0; i < ix->m->functions.n; i++) {
        const bb_function *f = ix->m->functions.v[i];
        if (!bb_artifact_is_bootstrap(f) || !bootstrap_of(f, cls, want, single ? root_boot : NULL))
            continue;
        if ((rc = clone_function_into(st, ix, pm, i, 0)) != BB_OK)
            return rc;
        bb_function *bc = bb_model_find_function(pm, f->domain, f->name, f->overload);
        if (bc && single && bbc_str_eq(f->name, root_boot))
            bc->name = bb_model_str(pm, want); /* "@self__bootstrap" */
        if (bc && bb_kv_set(pm->arena, &bc->metadata, BB_META_HOME_CLASS, cls) != BB_OK)
            return bbc_oom(st);
    }
    return BB_OK;
}

static int build_partition(bbc_state *st, const bbc_fn_index *ix, const char *cls,
                           const size_t *members, size_t n_members, bool single)
{
    bbc_partition *p = new_partition(st, cls, members, n_members);
    if (!p)
        return bbc_oom(st);
    part_sets ps;
    if (sets_init(st->scratch, p->fn, &ps) != BB_OK)
        return bbc_oom(st);
    int rc;
    if ((rc = copy_interface(st, p, &ps)) != BB_OK || (rc = copy_slots(st, p, &ps, single)) != BB_OK ||
        (rc = import_opsets(st, p)) != BB_OK || (rc = clone_callees(st, ix, p, single)) != BB_OK)
        return rc;
    snprintf(p->hash, sizeof p->hash, "%016llx", (unsigned long long)bbc_hash_nodes(p->fn));
    return BB_OK;
}

static int record_edges(bbc_state *st)
{
    const bb_function *f = st->root;
    const bbc_wire_ix *x = bbc_wire_ix_new(st->scratch, f);
    if (!x)
        return bbc_oom(st);
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *s = f->nodes.v[i];
        if (!bbc_is_wire_send(s))
            continue;
        const size_t *rx;
        size_t k;
        if (bbc_wire_receivers(x, i, st->scratch, &rx, &k) != BB_OK)
            return bbc_oom(st);
        for (size_t r = 0; r < k; r++) {
            const bb_node *rn = f->nodes.v[rx[r]];
            bbc_wire_edge *e = BB_VEC_PUSH(st->arena, &st->edges);
            if (!e)
                return bbc_oom(st);
            e->producer_class = bbc_meta(s, BB_META_HOME_CLASS);
            e->consumer_class = bbc_meta(rn, BB_META_HOME_CLASS);
            e->value_name = s->inputs.n ? s->inputs.v[BBC_SEND_DATA] : "";
            e->recv_value = rn->outputs.n > BBC_RECV_PAYLOAD ? rn->outputs.v[BBC_RECV_PAYLOAD]
                                                             : (rn->outputs.n ? rn->outputs.v[0] : "");
            e->send_node = s->name;
            e->recv_node = rn->name;
            e->send_op = s->op_type;
            e->recv_op = rn->op_type;
        }
    }
    return BB_OK;
}

int bbc_pass_partition_by_wire_ops(bbc_state *st)
{
    if (st->parts.n > 0)
        return BB_OK;
    const bb_function *root = st->root;
    size_t n = root->nodes.n;
    /* Classes in order of first appearance; every node's class index. */
    BB_VEC(const char *) classes = {0};
    bbc_map by_name;
    size_t *cls_of = bb_arena_calloc(st->scratch, n + 1, sizeof *cls_of);
    if (!cls_of || bbc_map_init(&by_name, st->scratch, 8) != BB_OK)
        return bbc_oom(st);
    for (size_t i = 0; i < n; i++) {
        const bb_node *nd = root->nodes.v[i];
        const char *c = bbc_meta(nd, BB_META_HOME_CLASS);
        if (!c)
            return bbc_fail(st, BBC_E_INTERNAL,
                            "node '%s' (%s::%s) has no home_class (did infer_peer_classes run?)",
                            nd->name ? nd->name : "", nd->domain ? nd->domain : "", nd->op_type);
        if (!bbc_map_get(&by_name, c, &cls_of[i])) {
            const char **slot = BB_VEC_PUSH(st->scratch, &classes);
            if (!slot || bbc_map_put(&by_name, c, classes.n - 1) != BB_OK)
                return bbc_oom(st);
            *slot = c;
            cls_of[i] = classes.n - 1;
        }
    }
    if (classes.n == 0) {
        /* An empty body still yields its (empty) partition. */
        const char *c = bb_kv_get(&root->metadata, BB_META_HOME_CLASS);
        const char **slot = BB_VEC_PUSH(st->scratch, &classes);
        if (!slot)
            return bbc_oom(st);
        *slot = c ? c : BB_SELF_CLASS;
    }
    /* Members of every class, in root order: counting sort by class. */
    size_t *start = bb_arena_calloc(st->scratch, classes.n + 1, sizeof *start);
    size_t *members = bb_arena_calloc(st->scratch, n + 1, sizeof *members);
    if (!start || !members)
        return bbc_oom(st);
    for (size_t i = 0; i < n; i++)
        start[cls_of[i] + 1]++;
    for (size_t k = 0; k < classes.n; k++)
        start[k + 1] += start[k];
    size_t *fill = bb_arena_memdup(st->scratch, start, (classes.n + 1) * sizeof *start);
    if (!fill)
        return bbc_oom(st);
    for (size_t i = 0; i < n; i++)
        members[fill[cls_of[i]]++] = i;
    bool single = classes.n == 1 && bbc_str_eq(classes.v[0], BB_SELF_CLASS);
    int rc;
    if ((rc = record_edges(st)) != BB_OK)
        return rc;
    bbc_fn_index ix; /* the model's functions do not change while partitioning */
    if (bbc_fn_index_init(&ix, st->scratch, st->model) != BB_OK)
        return bbc_oom(st);
    for (size_t k = 0; k < classes.n; k++)
        if ((rc = build_partition(st, &ix, classes.v[k], members + start[k],
                                  start[k + 1] - start[k], single)) != BB_OK)
            return rc;
    return BB_OK;
}
