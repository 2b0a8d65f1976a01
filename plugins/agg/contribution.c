/*
 * contribution.c — what a Contribute input may be, turned into items
 * (tensor, sender, num_samples). Accepted shapes:
 *
 *   contribution = f32 tensor; metadata (optional) = num_samples as U64 or a
 *       one-element tensor, a sender PeerId, or a Composite of those;
 *   contribution = Composite(params, num_samples[, PeerId]) — what a client
 *       sends as Bundle(params, n);
 *   contribution = ResponseBatch of the above — what RecvRespBatched hands
 *       the server (each element's sender is the responding peer).
 * One-child Composites are unwrapped first (responses travel wrapped).
 * Absent num_samples counts 1. Values are untrusted (they came off the
 * wire): every shape that is not one of these is an error naming the
 * element and the sender (with on_bad_contribution = "skip" a bad batch
 * element is logged and left out, its tensor NULL).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg.h"

#define MAX_SAMPLES (1ULL << 53) /* exact in a double weight */

void agg_describe_peer(bool has_peer, const bb_peerid *id, char *out, size_t cap)
{
    char text[BB_PEERID_TEXT_MAX];
    if (has_peer && bb_peerid_to_text(id, text, sizeof text, NULL) == BB_OK)
        snprintf(out, cap, "peer %s", text);
    else
        snprintf(out, cap, "an anonymous contribution");
}

void agg_describe_source(const bb_value *peer, char *out, size_t cap)
{
    bb_peerid id;
    bool has_peer = peer && bb_peerid_from_bytes(peer->u.bytes.data, peer->u.bytes.len, &id,
                                                 NULL) == BB_OK;
    agg_describe_peer(has_peer, &id, out, cap);
}

void agg_format_shape(uint32_t ndim, const int64_t *dims, char *out, size_t cap)
{
    size_t used = (size_t)snprintf(out, cap, "[");
    for (uint32_t i = 0; i < ndim && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%lld", i ? ", " : "",
                                 (long long)dims[i]);
    if (used < cap)
        snprintf(out + used, cap - used, "]");
}

static const bb_value *unwrap(const bb_value *v)
{
    for (int depth = 0; v && depth < 16; depth++) {
        if (v->type->kind != BB_VK_COMPOSITE || v->u.list.n != 1)
            break;
        v = v->u.list.items[0];
    }
    return v;
}

/* A count from a U64 value or a one-element numeric tensor. */
static int samples_of(const agg *a, const bb_value *v, const char *where, uint64_t *out,
                      bb_error *err)
{
    if (v->type->kind == BB_VK_U64) {
        if (v->u.u64 > MAX_SAMPLES)
            return bb_error_set(err, BB_EINVAL, "%s: num_samples %llu of %s is too large",
                                a->type_name, (unsigned long long)v->u.u64, where);
        *out = v->u.u64;
        return BB_OK;
    }
    const bb_tensor_view *t = &v->u.tensor;
    double d;
    switch (t->dtype) {
    case BB_DT_FLOAT: d = *(const float *)(const void *)t->data; break;
    case BB_DT_DOUBLE: d = *(const double *)(const void *)t->data; break;
    case BB_DT_INT64: d = (double)*(const int64_t *)(const void *)t->data; break;
    case BB_DT_INT32: d = *(const int32_t *)(const void *)t->data; break;
    case BB_DT_UINT64: d = (double)*(const uint64_t *)(const void *)t->data; break;
    default:
        return bb_error_set(err, BB_ETYPE, "%s: num_samples of %s is a %s tensor", a->type_name,
                            where, bb_dtype_name(t->dtype));
    }
    if (!(d >= 0) || d > (double)MAX_SAMPLES || d != floor(d))
        return bb_error_set(err, BB_EINVAL,
                            "%s: num_samples of %s is %g (want a whole number >= 0)",
                            a->type_name, where, d);
    *out = (uint64_t)d;
    return BB_OK;
}

static bool is_scalar_tensor(const bb_value *v)
{
    return v->type->kind == BB_VK_TENSOR && bb_tensor_numel(v) == 1;
}

/* Fold one metadata value (or Composite child) into it. */
static int apply_meta(const agg *a, const bb_value *m, const char *where, agg_item *it,
                      bool *have_samples, bb_error *err)
{
    m = unwrap(m);
    if (!m)
        return BB_OK;
    switch (m->type->kind) {
    case BB_VK_U64:
        *have_samples = true;
        return samples_of(a, m, where, &it->num_samples, err);
    case BB_VK_PEER_ID:
        if (!it->peer)
            it->peer = m;
        return BB_OK;
    case BB_VK_TENSOR:
        if (is_scalar_tensor(m)) {
            *have_samples = true;
            return samples_of(a, m, where, &it->num_samples, err);
        }
        break;
    case BB_VK_COMPOSITE:
        for (size_t i = 0; i < m->u.list.n; i++) {
            int rc = apply_meta(a, m->u.list.items[i], where, it, have_samples, err);
            if (rc)
                return rc;
        }
        return BB_OK;
    default:
        break;
    }
    return bb_error_set(err, BB_ETYPE,
                        "%s: metadata of %s is a %s (want num_samples as U64 or a scalar tensor, "
                        "or a PeerId)",
                        a->type_name, where, m->type->name);
}

/* An item from peer before its parts are read: absent num_samples counts 1. */
static void item_init(agg_item *it, const bb_value *peer, char *where, size_t cap)
{
    agg_describe_source(peer, where, cap);
    memset(it, 0, sizeof *it);
    it->peer = peer;
    it->num_samples = 1;
}

/* One element: a tensor, or Composite(params, metadata...). */
static int parse_element(const agg *a, const bb_value *v, const bb_value *peer,
                         const bb_value *metadata, agg_item *it, bb_error *err)
{
    char where[96];
    item_init(it, peer, where, sizeof where);
    bool have_samples = false;
    v = unwrap(v);
    if (v && v->type->kind == BB_VK_COMPOSITE && v->u.list.n > 0) {
        const bb_value *params = unwrap(v->u.list.items[0]);
        if (!params || params->type->kind != BB_VK_TENSOR)
            return bb_error_set(err, BB_ETYPE,
                                "%s: the first part of the Composite from %s is a %s, not the "
                                "parameter tensor",
                                a->type_name, where, params ? params->type->name : "nothing");
        it->tensor = params;
        for (size_t i = 1; i < v->u.list.n; i++) {
            int rc = apply_meta(a, v->u.list.items[i], where, it, &have_samples, err);
            if (rc)
                return rc;
        }
    } else if (v && v->type->kind == BB_VK_TENSOR) {
        it->tensor = v;
    } else {
        return bb_error_set(err, BB_ETYPE,
                            "%s: contribution from %s is a %s (want an f32 tensor, "
                            "Composite(params, num_samples) or a ResponseBatch of those)",
                            a->type_name, where, v ? v->type->name : "nothing");
    }
    if (metadata && !have_samples) {
        int rc = apply_meta(a, metadata, where, it, &have_samples, err);
        if (rc)
            return rc;
    }
    if (it->tensor->u.tensor.dtype != BB_DT_FLOAT)
        return bb_error_set(err, BB_ETYPE, "%s: contribution from %s is a %s tensor (want float)",
                            a->type_name, where, bb_dtype_name(it->tensor->u.tensor.dtype));
    return BB_OK;
}

int agg_parse_contribute(const agg *a, const bb_value *contribution, const bb_value *metadata,
                         agg_item **items, size_t *n_items, bb_error *err)
{
    *items = NULL;
    *n_items = 0;
    if (!contribution)
        return bb_error_set(err, BB_EINVAL, "%s: Contribute needs a contribution", a->type_name);
    size_t n = contribution->type->kind == BB_VK_RESPONSE_BATCH ? contribution->u.batch.n : 1;
    if (n > a->max_contributions)
        return bb_error_set(err, BB_ELIMIT,
                            "%s: a batch of %zu contributions exceeds max_contributions %zu",
                            a->type_name, n, a->max_contributions);
    agg_item *v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    int rc = BB_OK;
    if (contribution->type->kind == BB_VK_RESPONSE_BATCH) {
        for (size_t i = 0; i < n && !rc; i++) {
            rc = parse_element(a, contribution->u.batch.items[i], contribution->u.batch.peers[i],
                               metadata, &v[i], err);
            if (rc && a->skip_bad) { /* one faulty client must not sink the round */
                agg_warn(a, err->msg);
                v[i].tensor = NULL;
                rc = BB_OK;
            }
        }
    } else {
        rc = parse_element(a, contribution, NULL, metadata, &v[0], err);
    }
    if (rc) {
        free(v);
        return rc;
    }
    *items = v;
    *n_items = n;
    return BB_OK;
}

int agg_parse_streamed(const agg *a, const bb_value *rest, const bb_value *sender, agg_item *it,
                       bb_error *err)
{
    char where[96];
    item_init(it, sender, where, sizeof where);
    bool have_samples = false;
    return rest ? apply_meta(a, rest, where, it, &have_samples, err) : BB_OK;
}
