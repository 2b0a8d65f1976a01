/*
 * pass_stamp_compilation_metadata.c — turns each partition model into a
 * complete install artifact (COMPILER.md "Stamp metadata"):
 *
 *   model.metadata  ai.bytesandbrains.compiled = "v1"
 *                   ai.bytesandbrains.binding.<target>.<slot> =
 *                       "<role>|<TYPE_NAME>|<slot_id>"   (every partition slot)
 *   Recv/RecvReq    ai.bytesandbrains.recv_slot_id = slot_id of the role node
 *                   its payload feeds (after the RX gate chain); receives
 *                   whose payload feeds no role node stay unstamped
 *   function        ai.bytesandbrains.partition_hash = 16-hex content hash
 *                   of the final node bodies, partition_id = "<class>#<hash>"
 *
 * The partition function's slot declarations and metadata are sorted by
 * name (canonical form: compiling the output again changes nothing).
 * A binding with a per-slot JSON config becomes the slot's construction
 * state: attribute_proto "<slot>" (STRING, s = the JSON) with
 * concrete_type.<slot> = TYPE_NAME, replacing a generic declaration.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/artifact.h"
#include "bb/meta.h"
#include "bb/opsets.h"
#include "bbc/compiler_internal.h"
#include "bbc/gates.h"
#include "bbc/util.h"
#include "bbc/wire.h"

static int apply_config(bbc_state *st, bbc_partition *p, const bbc_slot *s)
{
    bb_function *f = p->fn;
    bb_arena *a = p->model->arena;
    const char *cfg = s->binding->config_json;
    bb_attr *ap = NULL;
    for (size_t i = 0; i < f->attribute_protos.n; i++)
        if (bbc_str_eq(f->attribute_protos.v[i]->name, s->name))
            ap = f->attribute_protos.v[i];
    if (!ap) {
        ap = bb_arena_alloc(a, sizeof *ap);
        bb_attr **dst = ap ? BB_VEC_PUSH(a, &f->attribute_protos) : NULL;
        if (!dst || !(ap->name = bb_arena_strdup(a, s->name)))
            return bbc_oom(st);
        *dst = ap;
    }
    ap->type = BB_ATTR_STRING;
    ap->has_s = true;
    ap->s.len = strlen(cfg);
    if (!(ap->s.data = bb_arena_memdup(a, cfg, ap->s.len + 1)))
        return bbc_oom(st);
    long gi = bb_str_list_find(&f->attributes, s->name);
    if (gi >= 0)
        BB_VEC_REMOVE(&f->attributes, (size_t)gi);
    char *key = bb_meta_slot_concrete_type_key(st->scratch, s->name);
    if (!key || bb_kv_set(a, &f->metadata, key, s->type_name) != BB_OK)
        return bbc_oom(st);
    return BB_OK;
}

static bb_role slot_role(const bbc_slot *s)
{
    if (s->role != BB_ROLE_NONE)
        return s->role;
    return s->type ? s->type->role : BB_ROLE_NONE;
}

/* Absent strings (untrusted files may omit names) sort first. */
static const char *nz(const char *s)
{
    return s ? s : "";
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(nz(*(const char *const *)a), nz(*(const char *const *)b));
}

static int cmp_attr(const void *a, const void *b)
{
    return strcmp(nz((*(bb_attr *const *)a)->name), nz((*(bb_attr *const *)b)->name));
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp(nz(((const bb_kv *)a)->key), nz(((const bb_kv *)b)->key));
}

static int cmp_opset(const void *x, const void *y)
{
    const bb_opset_id *a = x, *b = y;
    bool oa = bb_domain_is_onnx(a->domain), ob = bb_domain_is_onnx(b->domain);
    if (oa || ob)
        return oa && ob ? 0 : (oa ? -1 : 1);
    return strcmp(a->domain, b->domain);
}

/* opset_import = exactly the domains the final body uses (gates and checks
 * included), ai.onnx first then by name. */
static int rebuild_opsets(bbc_state *st, bbc_partition *p)
{
    bb_function *f = p->fn;
    bb_opset_list fresh = {0};
    bb_arena *a = p->model->arena;
    const char *prev = NULL; /* runs of one domain are looked up once */
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        const char *d = bb_domain_is_onnx(n->domain) ? BB_DOMAIN_ONNX : n->domain;
        if (bbc_str_eq(d, prev))
            continue;
        prev = d;
        if (bb_opset_list_version(&fresh, d) >= 0)
            continue;
        /* The highest version the program imports anywhere (stable when the
         * output is compiled again: its model import is that maximum). */
        int64_t v = bb_opset_list_version(&st->model->opset_imports, d);
        for (size_t k = 0; k < st->model->functions.n; k++) {
            int64_t r = bb_opset_list_version(&st->model->functions.v[k]->opset_imports, d);
            v = r > v ? r : v;
        }
        for (size_t k = 0; k < st->parts.n; k++)
            for (size_t j = 0; j < st->parts.v[k]->model->functions.n; j++) {
                const bb_function *g = st->parts.v[k]->model->functions.v[j];
                int64_t q = bb_opset_list_version(&g->opset_imports, d);
                v = q > v ? q : v;
            }
        if (v < 0) {
            const bb_opset_schema *os = bb_opset_find(d);
            v = os ? os->version : 1;
        }
        if (bb_opset_list_add(a, &fresh, d, v) != BB_OK)
            return bbc_oom(st);
    }
    if (fresh.n > 1)
        qsort(fresh.v, fresh.n, sizeof *fresh.v, cmp_opset);
    f->opset_imports.v = fresh.v;
    f->opset_imports.n = fresh.n;
    f->opset_imports.cap = fresh.cap;
    return BB_OK;
}

/* Canonical order of the partition function's declarations and metadata, so
 * a model compiled twice comes out byte-identical whatever path (recorded,
 * inlined, re-assembled, adopted as a dependency) put them there. */
static void canonicalize(bb_function *f)
{
    if (f->attributes.n > 1)
        qsort(f->attributes.v, f->attributes.n, sizeof *f->attributes.v, cmp_str);
    if (f->attribute_protos.n > 1)
        qsort(f->attribute_protos.v, f->attribute_protos.n, sizeof *f->attribute_protos.v,
              cmp_attr);
    if (f->metadata.n > 1)
        qsort(f->metadata.v, f->metadata.n, sizeof *f->metadata.v, cmp_kv);
}

static int stamp_bindings(bbc_state *st, bbc_partition *p)
{
    const char **names;
    size_t n;
    if (bbc_partition_slots(st, p, &names, &n) != BB_OK)
        return bbc_oom(st);
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_str);
    bb_arena *a = p->model->arena;
    for (size_t i = 0; i < n; i++) {
        const bbc_slot *s = bbc_state_slot(st, names[i]);
        if (!s || !s->type_name)
            return bbc_fail(st, BBC_E_UNBOUND_SLOT, "partition `%s`: slot '%s' has no binding",
                            p->cls, names[i]);
        bb_role role = slot_role(s);
        if (role == BB_ROLE_NONE)
            return bbc_fail(st, BBC_E_INTERNAL,
                            "partition `%s`: the role of slot '%s' ('%s') is unknown (no plugin "
                            "describes the type and the recording names no role)",
                            p->cls, s->name, s->type_name);
        bb_binding_triple t = {bb_role_name(role), s->type_name, s->slot_id};
        char *val = NULL;
        bb_error e = {0};
        char *key = bb_meta_binding_key(a, p->cls, s->name);
        if (!key)
            return bbc_oom(st);
        if (bb_binding_triple_format(a, &t, &val, &e) != BB_OK)
            return bbc_fail(st, BBC_E_INTERNAL, "partition `%s`: slot '%s': %s", p->cls, s->name,
                            e.msg);
        if (bb_kv_set(a, &p->model->metadata, key, val) != BB_OK)
            return bbc_oom(st);
        /* Slot ids of every partition slot (dependency slots adopted after
         * resolve_slots too), so a recompile keeps them. */
        char idkey[1200], id[16];
        snprintf(idkey, sizeof idkey, "%s%s", BB_META_SLOT_ID_PREFIX, s->name);
        snprintf(id, sizeof id, "%u", s->slot_id);
        if (!bbc_str_eq(bb_kv_get(&p->fn->metadata, idkey), id) &&
            bb_kv_set(a, &p->fn->metadata, idkey, id) != BB_OK)
            return bbc_oom(st);
        if (s->binding && s->binding->config_json) {
            int rc = apply_config(st, p, s);
            if (rc != BB_OK)
                return rc;
        }
    }
    return BB_OK;
}

/* slot_id of the first role node reading v (or NULL), from the index. */
static const char *role_consumer_slot(const bb_function *f, const bbc_map *readers, const char *v)
{
    size_t i;
    return v && bbc_map_get(readers, v, &i) ? bbc_meta(f->nodes.v[i], BB_META_SLOT_ID) : NULL;
}

static int stamp_recv_slots(bbc_state *st, bbc_partition *p)
{
    bb_function *f = p->fn;
    /* value -> the first role node (with a slot_id) reading it. */
    bbc_map readers;
    if (bbc_map_init(&readers, st->scratch, f->nodes.n) != BB_OK)
        return bbc_oom(st);
    for (size_t i = f->nodes.n; i-- > 0;) {
        const bb_node *n = f->nodes.v[i];
        if (!bbc_is_role_node(n) || bbc_is_wire(n) || !bbc_meta(n, BB_META_SLOT_ID))
            continue;
        for (size_t j = 0; j < n->inputs.n; j++)
            if (n->inputs.v[j] && *n->inputs.v[j] &&
                bbc_map_put(&readers, n->inputs.v[j], i) != BB_OK)
                return bbc_oom(st);
    }
    for (size_t i = 0; i < f->nodes.n; i++) {
        bb_node *r = f->nodes.v[i];
        /* Inbound fill sites only (Recv, RecvReq): a RecvRespBatched
         * collects responses, it does not decode a fill into a slot. */
        if (!bbc_rx_routed(r) || r->outputs.n <= BBC_RECV_PAYLOAD)
            continue;
        const char *head = bbc_meta(r, BB_META_RX_CHAIN_HEAD);
        const char *sid = head ? role_consumer_slot(f, &readers, head) : NULL;
        if (!sid)
            sid = role_consumer_slot(f, &readers, r->outputs.v[BBC_RECV_PAYLOAD]);
        if (sid && !bbc_meta_is(r, BB_META_RECV_SLOT_ID, sid) &&
            bbc_set_meta(p->model->arena, r, BB_META_RECV_SLOT_ID, sid) != BB_OK)
            return bbc_oom(st);
    }
    return BB_OK;
}

int bbc_pass_stamp_compilation_metadata(bbc_state *st)
{
    for (size_t k = 0; k < st->parts.n; k++) {
        bbc_partition *p = st->parts.v[k];
        bb_arena *a = p->model->arena;
        int rc;
        if ((rc = stamp_bindings(st, p)) != BB_OK || (rc = stamp_recv_slots(st, p)) != BB_OK)
            return rc;
        if (bb_artifact_stamp_passport(p->model) != BB_OK)
            return bbc_oom(st);
        snprintf(p->hash, sizeof p->hash, "%016llx", (unsigned long long)bbc_hash_nodes(p->fn));
        char id[600];
        snprintf(id, sizeof id, "%s#%s", p->cls, p->hash);
        if (bb_kv_set(a, &p->fn->metadata, BB_META_PARTITION_HASH, p->hash) != BB_OK ||
            bb_kv_set(a, &p->fn->metadata, BB_META_PARTITION_ID, id) != BB_OK)
            return bbc_oom(st);
        canonicalize(p->fn);
        if ((rc = rebuild_opsets(st, p)) != BB_OK)
            return rc;
    }
    return BB_OK;
}
