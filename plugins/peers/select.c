/*
 * select.c — what every selector shares: SelectParams from the op (Sample
 * -> Random{n}, CurrentView -> All, Select -> its attributes and its key
 * input), the of_class check, and the selection over a view. Random{n}
 * draws a uniform subset of min(n, view) peers without replacement, in
 * random order, from the instance's generator (seeded by the host).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bb/meta.h>

#include "peers.h"

int selector_init(selector *s, const bbp_config *cfg, const char *class_key, uint64_t seed,
                  bb_error *err)
{
    snprintf(s->who, sizeof s->who, "%s", cfg->who);
    bbp_rng_seed(&s->rng, seed);
    return bbp_config_string(cfg, class_key, s->of_class, sizeof s->of_class, err);
}

/* The node's of_class tag (NULL when untagged or no node). */
static const char *node_class_of(const bb_dispatch_call *call)
{
    const char *c = call->node ? bb_kv_get(&call->node->metadata, BB_META_PEER_CLASS) : NULL;
    return c && *c ? c : NULL;
}

/* Refuses a node tagged with another class than the configured one. */
static int check_class(const selector *s, const char *node_class, bb_error *err)
{
    if (s->of_class[0] && node_class && strcmp(s->of_class, node_class) != 0)
        return bb_error_set(err, BB_EINVAL,
                            "%s selects peers of class '%s', but the node samples of_class '%s'",
                            s->who, s->of_class, node_class);
    return BB_OK;
}

static int params_of(const selector *s, const bb_dispatch_call *call, select_params *p,
                     bb_error *err)
{
    const char *op = call->op_type ? call->op_type : "";
    const bb_node *node = call->node;
    if (!strcmp(op, "CurrentView")) {
        p->kind = SELECT_ALL;
        return BB_OK;
    }
    const char *kind = !strcmp(op, "Sample") ? "random"
                       : node                ? bb_node_attr_string(node, "params", "all")
                                             : "all";
    if (!strcmp(op, "Sample") || !strcmp(op, "Select")) {
        p->n = node ? bb_node_attr_int(node, "n", -1) : -1;
        if (!strcmp(kind, "all"))
            p->kind = SELECT_ALL;
        else if (!strcmp(kind, "random"))
            p->kind = SELECT_RANDOM;
        else if (!strcmp(kind, "near_key"))
            p->kind = SELECT_NEAR_KEY;
        else
            return bb_error_set(err, BB_EINVAL,
                                "%s: Select params \"%s\" (want \"all\", \"random\" or "
                                "\"near_key\")",
                                s->who, kind);
        if (p->kind != SELECT_ALL && p->n < 1)
            return bb_error_set(err, BB_EINVAL, "%s: %s needs an attribute n >= 1", s->who, op);
        if (p->kind == SELECT_NEAR_KEY)
            p->key = call->n_inputs > 0 ? call->inputs[0] : NULL;
        return BB_OK;
    }
    return bb_error_set(err, BB_EUNSUPPORTED, "%s: no op %s", s->who, op);
}

int selector_params(const selector *s, const bb_dispatch_call *call, select_params *p,
                    bb_error *err)
{
    memset(p, 0, sizeof *p);
    p->node_class = node_class_of(call);
    if (call->n_outputs < 1)
        return bb_error_set(err, BB_EINVAL, "%s: no output", s->who);
    int rc = params_of(s, call, p, err);
    return rc ? rc : check_class(s, p->node_class, err);
}

bb_value *selector_draw(selector *s, const select_params *p, bb_value **v, size_t n)
{
    size_t k = n;
    if (p->kind != SELECT_ALL) {
        k = (uint64_t)p->n < n ? (size_t)p->n : n;
        for (size_t i = 0; i < k; i++) { /* partial Fisher-Yates */
            size_t j = i + (size_t)bbp_rng_below(&s->rng, n - i);
            bb_value *t = v[i];
            v[i] = v[j];
            v[j] = t;
        }
    }
    for (size_t i = k; i < n; i++)
        bb_value_unref(v[i]);
    return bb_value_list(&BB_TYPE_PEER_ID_VEC, v, k); /* takes v[0..k) */
}

bb_dispatch_result selector_dispatch(selector *s, void *inst, view_fn view, bb_ctx *ctx,
                                     const bb_dispatch_call *call, bb_value **outputs,
                                     bb_error *err)
{
    select_params p;
    int rc = selector_params(s, call, &p, err);
    if (!rc && p.kind == SELECT_NEAR_KEY)
        rc = bb_error_set(err, BB_EUNSUPPORTED,
                          "%s: SelectParams::NearKey is not supported: this view has no distance "
                          "metric (peers::Dht answers NearKey)",
                          s->who);
    bb_value **v = NULL;
    size_t n = 0;
    if (!rc)
        rc = view(inst, ctx, p.node_class, &v, &n, err);
    if (rc)
        return BB_DISPATCH_NOW_ERR;
    outputs[0] = selector_draw(s, &p, v, n);
    free(v);
    if (!outputs[0]) {
        bb_error_set(err, BB_ENOMEM, "%s: out of memory", s->who);
        return BB_DISPATCH_NOW_ERR;
    }
    return BB_DISPATCH_NOW_OK;
}

bool selector_is_control(const bb_dispatch_call *call)
{
    return !call->node && call->n_inputs == 3 && call->inputs[0] &&
           call->inputs[0]->type->kind == BB_VK_BYTES && call->inputs[2] &&
           call->inputs[2]->type->kind == BB_VK_PEER_ID;
}
