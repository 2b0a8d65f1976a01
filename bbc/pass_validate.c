/*
 * pass_validate.c — structural sanity checks, one ValidationError per rule
 * (COMPILER.md "Error variants"), over the root and every other function:
 *
 *   1 UnknownOp              (domain, op_type) in a catalog, a model function
 *                            or a plugin type's opset
 *   2 DanglingInput          every input has a producer
 *   3 DuplicateOutput        no value has two producers
 *   4 UnpairedWireRequest    each engine-native SendReqBatched is answered by
 *                            exactly one SendResp whose req_id traces back
 *                            to it, across the wire through its RecvReq
 *                            (one recorded on a Protocol slot is answered
 *                            by that component and is exempt)
 *   5 MissingTypeInfo        every function input has a declared type
 *   6 MalformedSlotMetadata  role nodes carry (concrete_type, instance) or
 *                            (required_trait, slot_id), decimal ids
 *   7 CyclicGraph            the dataflow graph is acyclic
 *   8 OpsetNotImported       every node's domain is in opset_import
 *
 * Rules 4 and 8 were no-ops in the Rust original; they are enforced here.
 */
#include <stdio.h>
#include <string.h>

#include "bb/meta.h"
#include "bb/opsets.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"
#include "bbc/wire.h"

#define CYCLE_NAMES 8

static const char *dom(const bb_node *n)
{
    return bb_domain_is_onnx(n->domain) ? BB_DOMAIN_ONNX : n->domain;
}

static const char *nm(const bb_node *n)
{
    return n->name && *n->name ? n->name : "(unnamed)";
}

static int rule1_known_op(bbc_state *st, const bb_function *f, const bb_node *n)
{
    if (bb_op_schema_find(n->domain, n->op_type) || bbc_callee(st->model, n))
        return BB_OK;
    bbc_sig sig;
    if (bbc_node_sig(st, n, &sig) || bb_type_source_find_op(st->types, dom(n), n->op_type))
        return BB_OK;
    /* A non-reserved domain with no type source to ask, or on a slot whose
     * type no plugin describes (bbc check without plugins): cannot tell. */
    if (!bb_opset_is_reserved(n->domain)) {
        const bbc_slot *s = bbc_state_node_slot(st, n);
        if (!st->types || (s && s->type_name && !s->type))
            return BB_OK;
    }
    return bbc_fail(st, BBC_E_UNKNOWN_OP,
                    "function '%s': node '%s' (%s::%s) is in no catalog, model function or "
                    "plugin opset",
                    f->name, nm(n), dom(n), n->op_type ? n->op_type : "");
}

static int rule23_producers(bbc_state *st, const bb_function *f, const bbc_map *producers,
                            const char *dup)
{
    const bbc_map prod = *producers;
    if (dup) {
        const char *a = NULL, *b = NULL;
        if (bb_str_list_find(&f->inputs, dup) >= 0)
            a = "(function input)";
        for (size_t i = 0; i < f->nodes.n && !b; i++)
            if (bb_str_list_find(&f->nodes.v[i]->outputs, dup) >= 0) {
                if (!a)
                    a = nm(f->nodes.v[i]);
                else
                    b = nm(f->nodes.v[i]);
            }
        return bbc_fail(st, BBC_E_DUPLICATE_OUTPUT,
                        "function '%s': value '%s' is written by '%s' and by '%s'", f->name, dup,
                        a ? a : "?", b ? b : "?");
    }
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        for (size_t j = 0; j < n->inputs.n; j++) {
            const char *v = n->inputs.v[j];
            if (v && *v && !bbc_map_get(&prod, v, NULL))
                return bbc_fail(st, BBC_E_DANGLING_INPUT,
                                "function '%s': node '%s' (%s::%s) input %zu reads '%s', which "
                                "nothing produces",
                                f->name, nm(n), dom(n), n->op_type, j, v);
        }
    }
    for (size_t j = 0; j < f->outputs.n; j++)
        if (f->outputs.v[j] && *f->outputs.v[j] && !bbc_map_get(&prod, f->outputs.v[j], NULL))
            return bbc_fail(st, BBC_E_DANGLING_INPUT,
                            "function '%s': output port '%s' has no producer", f->name,
                            f->outputs.v[j]);
    return BB_OK;
}

static int rule4_pairing(bbc_state *st, const bb_function *f)
{
    size_t *answers = NULL;
    const bbc_wire_ix *x = NULL;
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *s = f->nodes.v[i];
        if (!bbc_node_is(s, BB_DOMAIN_WIRE, BB_OP_WIRE_SEND_REQ_BATCHED))
            continue;
        /* Recorded on a Protocol slot: the component answers (Part 9's
         * network_client); only engine-native requests must pair here. */
        if (bbc_meta(s, BB_META_CONCRETE_TYPE) || bbc_meta(s, BB_META_SLOT))
            continue;
        if (!answers) {
            /* answers[req] = SendResp nodes whose req_id traces back to req:
             * directly (same function) or across the wire via its RecvReq. */
            answers = bb_arena_calloc(st->scratch, f->nodes.n + 1, sizeof *answers);
            x = answers ? bbc_wire_ix_new(st->scratch, f) : NULL;
            if (!x)
                return bbc_oom(st);
            for (size_t j = 0; j < f->nodes.n; j++) {
                const bb_node *r = f->nodes.v[j];
                if (!bbc_node_is(r, BB_DOMAIN_WIRE, BB_OP_WIRE_SEND_RESP) || r->inputs.n < 3)
                    continue;
                size_t port = 0;
                size_t p = bbc_wire_trace(x, r->inputs.v[2], &port);
                if (p == SIZE_MAX)
                    continue;
                size_t req = SIZE_MAX;
                if (bbc_node_is(f->nodes.v[p], BB_DOMAIN_WIRE, BB_OP_WIRE_SEND_REQ_BATCHED) &&
                    port == 0)
                    req = p;
                else if (bbc_node_is(f->nodes.v[p], BB_DOMAIN_WIRE, BB_OP_WIRE_RECV_REQ))
                    req = bbc_wire_sender(x, p);
                if (req != SIZE_MAX)
                    answers[req]++;
            }
        }
        if (answers[i] != 1) {
            const char *port = bbc_meta(s, BB_META_PORT);
            return bbc_fail(st, BBC_E_UNPAIRED_WIRE_REQUEST,
                            "function '%s': SendReqBatched '%s'%s%s%s is answered by %zu "
                            "SendResp nodes whose req_id traces back to it (exactly 1 required)",
                            f->name, nm(s), port ? " (port '" : "", port ? port : "",
                            port ? "')" : "", answers[i]);
        }
    }
    return BB_OK;
}

static bool has_type(const bb_value_info *vi)
{
    return vi && vi->type && (vi->type->kind != BB_TP_NONE || vi->type->denotation);
}

static int rule5_types(bbc_state *st, const bb_function *f)
{
    if (f->inputs.n == 0)
        return BB_OK;
    bbc_map vi;
    if (bbc_value_info_index(st->scratch, f, &vi) != BB_OK)
        return bbc_oom(st);
    for (size_t j = 0; j < f->inputs.n; j++) {
        const char *v = f->inputs.v[j];
        if (!v || !*v)
            continue;
        size_t k;
        if (!bbc_map_get(&vi, v, &k) || !has_type(f->value_info.v[k]))
            return bbc_fail(st, BBC_E_MISSING_TYPE_INFO,
                            "function '%s': input '%s' has no value_info type", f->name, v);
    }
    return BB_OK;
}

static bool decimal(const char *s)
{
    if (!s || !*s || strlen(s) > 10)
        return false;
    unsigned long long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (unsigned)(*s - '0');
    }
    return v <= UINT32_MAX;
}

static int rule6_slot_meta(bbc_state *st, const bb_function *f, const bb_node *n)
{
    if (!bbc_is_role_node(n))
        return BB_OK;
    const char *ct = bbc_meta(n, BB_META_CONCRETE_TYPE), *inst = bbc_meta(n, BB_META_INSTANCE);
    const char *rt = bbc_meta(n, BB_META_REQUIRED_TRAIT), *sid = bbc_meta(n, BB_META_SLOT_ID);
    bool concrete = ct && *ct && inst, generic = rt && *rt && sid;
    const char *detail = NULL;
    if (!concrete && !generic)
        detail = "carries neither (concrete_type, instance) nor (required_trait, slot_id)";
    else if (concrete && !decimal(inst))
        detail = "instance is not a decimal u32";
    else if (generic && !decimal(sid))
        detail = "slot_id is not a decimal u32";
    else if (generic && bb_role_parse(rt) == BB_ROLE_NONE)
        detail = "required_trait names no role";
    if (!detail)
        return BB_OK;
    return bbc_fail(st, BBC_E_MALFORMED_SLOT_METADATA, "function '%s': node '%s' (%s::%s) %s",
                    f->name, nm(n), dom(n), n->op_type, detail);
}

static int rule7_acyclic(bbc_state *st, const bb_function *f, const bbc_map *prod)
{
    size_t n = f->nodes.n;
    size_t *order = bb_arena_calloc(st->scratch, n + 1, sizeof *order);
    bool *sorted = bb_arena_calloc(st->scratch, n + 1, sizeof *sorted);
    if (!order || !sorted)
        return bbc_oom(st);
    size_t k = 0;
    int rc = bbc_topo_order_with(st->scratch, f, prod, order, &k);
    if (rc == BB_ENOMEM)
        return bbc_oom(st);
    if (rc == BB_OK)
        return BB_OK;
    for (size_t i = 0; i < k; i++)
        sorted[order[i]] = true;
    /* Name the nodes left unordered: the cycle and what hangs off it. */
    char buf[400] = "";
    size_t len = 0, named = 0;
    for (size_t i = 0; i < n && named < CYCLE_NAMES && len < sizeof buf; i++) {
        if (sorted[i])
            continue;
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s'%s'", named ? ", " : "",
                                nm(f->nodes.v[i]));
        named++;
    }
    return bbc_fail(st, BBC_E_CYCLIC_GRAPH,
                    "function '%s': the dataflow has a cycle involving %s%s", f->name, buf,
                    n - k > named ? ", ..." : "");
}

static int rule8_opsets(bbc_state *st, const bb_function *f, const bb_node *n)
{
    if (bbc_callee(st->model, n))
        return BB_OK;
    if (bb_opset_list_version(&st->model->opset_imports, n->domain) >= 0 ||
        bb_opset_list_version(&f->opset_imports, n->domain) >= 0)
        return BB_OK;
    const bb_op_schema *s = bb_op_schema_find(n->domain, n->op_type);
    return bbc_fail(st, BBC_E_OPSET_NOT_IMPORTED,
                    "function '%s': node '%s' (%s::%s) uses domain '%s' (version %lld), which "
                    "opset_import does not declare",
                    f->name, nm(n), dom(n), n->op_type, dom(n),
                    (long long)(s ? s->version : 1));
}

static int validate_function(bbc_state *st, const bb_function *f, bool is_root)
{
    int rc;
    for (size_t i = 0; i < f->nodes.n; i++)
        if ((rc = rule1_known_op(st, f, f->nodes.v[i])) != BB_OK)
            return rc;
    bbc_map prod;
    const char *dup = NULL;
    if (bbc_producers(st->scratch, f, &prod, &dup) != BB_OK)
        return bbc_oom(st);
    if ((rc = rule23_producers(st, f, &prod, dup)) != BB_OK)
        return rc;
    if (is_root && (rc = rule4_pairing(st, f)) != BB_OK)
        return rc;
    if ((rc = rule5_types(st, f)) != BB_OK)
        return rc;
    for (size_t i = 0; i < f->nodes.n; i++)
        if ((rc = rule6_slot_meta(st, f, f->nodes.v[i])) != BB_OK)
            return rc;
    if ((rc = rule7_acyclic(st, f, &prod)) != BB_OK)
        return rc;
    for (size_t i = 0; i < f->nodes.n; i++)
        if ((rc = rule8_opsets(st, f, f->nodes.v[i])) != BB_OK)
            return rc;
    return BB_OK;
}

int bbc_pass_validate(bbc_state *st)
{
    if (st->parts.n > 0) {
        for (size_t i = 0; i < st->parts.n; i++) {
            int rc = validate_function(st, st->parts.v[i]->fn, true);
            if (rc != BB_OK)
                return rc;
        }
        return BB_OK;
    }
    int rc = validate_function(st, st->root, true);
    if (rc != BB_OK)
        return rc;
    for (size_t i = 0; i < st->model->functions.n; i++) {
        const bb_function *f = st->model->functions.v[i];
        if (f != st->root && (rc = validate_function(st, f, false)) != BB_OK)
            return rc;
    }
    return BB_OK;
}
