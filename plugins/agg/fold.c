/*
 * fold.c — the streamed part of a round: contributions that come tagged
 * with the RequestId of the request they answer (the engine hands a
 * Contribute that alone consumes a RecvRespBatched each response as it
 * lands, ROLES.md deviation in docs/DECISIONS.md) are folded into a running
 * weighted mean at once, so a round holds one model however many senders
 * answer, instead of a reference to every sender's tensor.
 *
 *   mean_k = (W_{k-1} / W_k) mean_{k-1} + (w_k / W_k) x_k,   W_k = W_{k-1} + w_k
 *
 * with w = num_samples (FedAvg, the server optimizers) or 1
 * (WeightAggregator): one pass that reads the mean and the contribution and
 * writes the mean, in place once the mean's memory is ours. The first
 * contribution becomes the mean without a copy (a reference); the second
 * writes a buffer of our own (the first's, when nobody else holds it any
 * more). Only the averaging kinds fold: TrimmedMean and Median order every
 * sender's value per coordinate, so they hold every contribution until
 * Aggregate whatever the path (memory O(senders x model), bounded by
 * max_contributions).
 *
 * What folding changes, by necessity:
 *   - a sender cannot replace a folded contribution (its update is inside
 *     the mean): a second one from it in the round is refused, naming it
 *     (with on_bad_contribution = "skip", logged and left out);
 *   - a non-finite value cannot be taken out of the mean again: in "fail"
 *     mode the Contribute that brought it fails naming the sender and the
 *     round is poisoned (its Aggregate fails with that message and drops the
 *     folded part); in "skip" mode each contribution is checked before it
 *     is folded (one more read of it) and left out when not finite;
 *   - contributions tagged with another request than the round's belong to
 *     a round that never reached Aggregate (its request failed): a new tag
 *     drops them (agg_round_retag).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg.h"

bool agg_folds(agg_kind kind)
{
    return kind == AGG_FEDAVG || kind == AGG_MEAN || agg_is_server_optimizer(kind);
}

void agg_fold_clear(agg_fold *f)
{
    bb_value_unref(f->mean);
    f->mean = NULL;
    f->owned = false;
    f->weight = 0;
    f->samples = 0;
    f->n = 0;
    f->poison[0] = '\0';
}

void agg_fold_free(agg_fold *f)
{
    agg_fold_clear(f);
    free(f->senders);
    f->senders = NULL;
    f->cap = 0;
}

bool agg_fold_has_sender(const agg_fold *f, const bb_peerid *id)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->senders[i].has_peer && bb_peerid_equal(&f->senders[i].peer, id))
            return true;
    return false;
}

int agg_fold_reserve(agg_fold *f, size_t n)
{
    if (n <= f->cap)
        return BB_OK;
    size_t cap = f->cap ? f->cap : 8;
    while (cap < n)
        cap *= 2;
    agg_sender *s = realloc(f->senders, cap * sizeof *s);
    if (!s)
        return BB_ENOMEM;
    f->senders = s;
    f->cap = cap;
    return BB_OK;
}

/* The mean as memory we may write: in place when nobody else holds it,
 * else a fresh result buffer (the caller computes into it). */
static bool exclusively_ours(const bb_value *v)
{
    return atomic_load(&v->refs) == 1 && v->u.tensor.buf &&
           atomic_load(&v->u.tensor.buf->refs) == 1;
}

/* Why a fold made the mean non-finite at index j: the sender's value, or
 * an overflow of the sum. */
static void poison(agg *a, const agg_item *it, size_t j)
{
    char who[96];
    agg_describe_source(it->peer, who, sizeof who);
    float x = bb_tensor_f32(it->tensor)[j];
    if (!(fabsf(x) <= 3.4e38f))
        snprintf(a->fold.poison, sizeof a->fold.poison,
                 "%s: contribution from %s has a non-finite value (%g) at index %zu",
                 a->type_name, who, (double)x, j);
    else
        snprintf(a->fold.poison, sizeof a->fold.poison,
                 "%s: the weighted mean overflows at index %zu (contribution from %s)",
                 a->type_name, j, who);
}

static bool finite_all(const float *x, size_t n)
{
    float chk = 0;
    for (size_t j = 0; j < n; j++)
        chk += x[j] - x[j];
    return chk == 0;
}

bool agg_fold_admits(agg *a, const agg_item *it)
{
    if (!a->skip_bad || finite_all(bb_tensor_f32(it->tensor), a->numel))
        return true;
    char who[96], msg[BB_ERROR_MSG_MAX];
    agg_describe_source(it->peer, who, sizeof who);
    snprintf(msg, sizeof msg, "%s: contribution from %s has a non-finite value; left out",
             a->type_name, who);
    agg_warn(a, msg);
    return false;
}

int agg_fold_add(agg *a, const agg_item *it, bb_error *err)
{
    agg_fold *f = &a->fold;
    bb_peerid id;
    bool has_peer = it->peer && bb_peerid_from_bytes(it->peer->u.bytes.data,
                                                     it->peer->u.bytes.len, &id, NULL) == BB_OK;
    if (agg_fold_reserve(f, f->n + 1))
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    double w = a->kind == AGG_MEAN ? 1.0 : (double)it->num_samples;
    if (w > 0 && !f->mean) {
        f->mean = bb_value_ref((bb_value *)it->tensor); /* no copy until the second */
        f->owned = false;
    } else if (w > 0) {
        bb_value *out = f->owned || exclusively_ours(f->mean) ? f->mean : agg_result_new(a);
        if (!out)
            return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
        double total = f->weight + w;
        const float *x[2] = {bb_tensor_f32(f->mean), bb_tensor_f32(it->tensor)};
        float wt[2] = {(float)(f->weight / total), (float)(w / total)};
        size_t bad = agg_reduce_weighted(agg_par_of(a), x, wt, 2, a->numel, bb_tensor_f32(out),
                                         false);
        if (out != f->mean) {
            bb_value_unref(f->mean);
            f->mean = out;
        }
        f->owned = true;
        if (bad != SIZE_MAX && !f->poison[0])
            poison(a, it, bad);
    }
    f->senders[f->n].has_peer = has_peer;
    if (has_peer)
        f->senders[f->n].peer = id;
    f->n++;
    f->weight += w;
    f->samples += it->num_samples;
    if (f->poison[0])
        return bb_error_set(err, BB_EINVAL, "%s", f->poison);
    return BB_OK;
}

int agg_fold_own(agg *a, bb_error *err)
{
    agg_fold *f = &a->fold;
    if (!f->mean || f->owned)
        return BB_OK;
    if (exclusively_ours(f->mean)) {
        f->owned = true;
        return BB_OK;
    }
    bb_value *t = agg_result_new(a);
    if (!t)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    memcpy(bb_tensor_f32(t), bb_tensor_f32(f->mean), a->numel * sizeof(float));
    bb_value_unref(f->mean);
    f->mean = t;
    f->owned = true;
    return BB_OK;
}

/* ---- snapshot (the version-3 tail, snapshot.c): u8 tagged, u64 tag, one u8
 * per held contribution (tagged), u64 n, n x {u8 has_peer, u8 len, peer},
 * u64 samples, u64 weight (the double's bits), u8 has_mean, [numel(round)
 * f32], delimited poison text ------------------------------------------------ */

void agg_fold_snapshot(const agg *a, bb_writer *w)
{
    const agg_fold *f = &a->fold;
    bb_writer_put_u8(w, a->tagged);
    bb_writer_put_u64le(w, a->tag);
    for (size_t i = 0; i < a->n; i++)
        bb_writer_put_u8(w, a->v[i].tagged);
    bb_writer_put_u64le(w, f->n);
    for (size_t i = 0; i < f->n; i++) {
        bb_writer_put_u8(w, f->senders[i].has_peer);
        bb_writer_put_u8(w, f->senders[i].has_peer ? f->senders[i].peer.len : 0);
        if (f->senders[i].has_peer)
            bb_writer_put(w, f->senders[i].peer.bytes, f->senders[i].peer.len);
    }
    uint64_t bits;
    memcpy(&bits, &f->weight, sizeof bits);
    bb_writer_put_u64le(w, f->samples);
    bb_writer_put_u64le(w, bits);
    bb_writer_put_u8(w, f->mean != NULL);
    if (f->mean)
        bb_writer_put(w, bb_tensor_f32(f->mean), a->numel * sizeof(float));
    bb_writer_put_delimited(w, f->poison, strlen(f->poison));
}

static bool read_senders(agg *into, bb_reader *r, uint64_t n)
{
    agg_fold *f = &into->fold;
    if (n > into->max_contributions || agg_fold_reserve(f, (size_t)n))
        return false;
    for (uint64_t i = 0; i < n; i++) {
        agg_sender *s = &f->senders[i];
        uint8_t has = 0, len = 0;
        if (!bb_reader_u8(r, &has) || has > 1 || !bb_reader_u8(r, &len) ||
            len > BB_PEERID_MAX_LEN || (has && !bb_reader_get(r, s->peer.bytes, len)) ||
            (!has && len))
            return false;
        s->has_peer = has;
        s->peer.len = has ? len : 0;
        f->n++;
    }
    return true;
}

int agg_fold_restore(agg *into, bb_reader *r, bb_error *err)
{
    agg_fold *f = &into->fold;
    uint8_t tagged = 0, has_mean = 0, flag = 0;
    uint64_t n = 0, bits = 0;
    const uint8_t *poison = NULL;
    size_t plen = 0;
    bool ok = bb_reader_u8(r, &tagged) && tagged <= 1 && bb_reader_u64le(r, &into->tag);
    for (size_t i = 0; ok && i < into->n; i++) {
        ok = bb_reader_u8(r, &flag) && flag <= 1;
        into->v[i].tagged = flag;
    }
    ok = ok && bb_reader_u64le(r, &n) && agg_round_count(into) + n <= into->max_contributions &&
         read_senders(into, r, n) && bb_reader_u64le(r, &f->samples) &&
         bb_reader_u64le(r, &bits) && bb_reader_u8(r, &has_mean) && has_mean <= 1;
    if (ok) {
        memcpy(&f->weight, &bits, sizeof bits);
        ok = f->weight >= 0 && (has_mean || f->weight == 0) && (!has_mean || f->n > 0);
    }
    if (ok && has_mean) {
        const uint8_t *data;
        ok = bb_reader_has(r, into->numel, sizeof(float)) &&
             bb_reader_view(r, into->numel * sizeof(float), &data) &&
             (f->mean = bb_value_tensor_copy(BB_DT_FLOAT, into->ndim, into->dims, data,
                                             into->numel * sizeof(float))) != NULL;
        f->owned = true;
    }
    ok = ok && bb_reader_delimited(r, &poison, &plen) && plen < sizeof f->poison;
    if (!ok)
        return bb_error_set(err, BB_EDECODE, "%s: snapshot folded round is truncated or out of "
                            "range", into->type_name);
    memcpy(f->poison, poison, plen);
    f->poison[plen] = '\0';
    into->tagged = tagged;
    return BB_OK;
}
