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
    f->n_parts = 0;
    f->poison[0] = '\0';
}

void agg_fold_free(agg_fold *f)
{
    agg_fold_clear(f);
    free(f->senders);
    f->senders = NULL;
    f->cap = 0;
    free(f->parts);
    f->parts = NULL;
    f->parts_cap = 0;
}

bool agg_fold_has_sender(const agg_fold *f, const bb_peerid *id)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->senders[i].has_peer && bb_peerid_equal(&f->senders[i].peer, id))
            return true;
    return agg_fold_has_part(f, id);
}

bool agg_fold_has_part(const agg_fold *f, const bb_peerid *id)
{
    for (size_t i = 0; i < f->n_parts; i++)
        if (f->parts[i].has_peer && bb_peerid_equal(&f->parts[i].peer, id))
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

/* Why a fold made the mean non-finite at index j: the sender's value x,
 * or an overflow of the sum. */
static void poison(agg *a, const char *who, float x, size_t j)
{
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

/* The one fold of the round's arithmetic: x (elements [lo, hi) of a
 * contribution of weight w > 0, x[0] being element lo) into the mean, out
 * (the mean itself, or a fresh buffer when [lo, hi) is the whole model):
 *
 *   out[j] = (W(j) mean[j] + w x[j]) / (W(j) + w)
 *
 * where W(j) is what coordinate j holds so far: the weight of the whole
 * contributions, plus each part (but `self`) whose prefix covers j. W is
 * constant between the parts' ends, so the range goes to the kernel in
 * at most parts + 1 segments; where W(j) is 0 the mean takes x as it is.
 * Returns the first index whose result is not finite, or SIZE_MAX. */
static size_t fold_range(agg *a, const float *x, double w, size_t lo, size_t hi, float *out,
                         const agg_fold_part *self)
{
    const agg_fold *f = &a->fold;
    const float *mean = f->mean ? bb_tensor_f32(f->mean) : NULL;
    size_t bad = SIZE_MAX;
    for (size_t s = lo, t; s < hi; s = t) {
        double W = f->weight;
        t = hi;
        for (size_t i = 0; i < f->n_parts; i++) {
            const agg_fold_part *p = &f->parts[i];
            if (p == self || p->done <= s)
                continue;
            W += p->w;
            t = p->done < t ? p->done : t;
        }
        size_t k;
        if (W > 0) {
            const float *in[2] = {mean + s, x + (s - lo)};
            float wt[2] = {(float)(W / (W + w)), (float)(w / (W + w))};
            k = agg_reduce_weighted(agg_par_of(a), in, wt, 2, t - s, out + s, false);
        } else {
            const float *in[1] = {x + (s - lo)};
            float one[1] = {1.0f};
            k = agg_reduce_weighted(agg_par_of(a), in, one, 1, t - s, out + s, false);
        }
        if (k != SIZE_MAX && bad == SIZE_MAX)
            bad = s + k;
    }
    return bad;
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
        const float *x = bb_tensor_f32(it->tensor);
        size_t bad = fold_range(a, x, w, 0, a->numel, bb_tensor_f32(out), NULL);
        if (out != f->mean) {
            bb_value_unref(f->mean);
            f->mean = out;
        }
        f->owned = true;
        if (bad != SIZE_MAX && !f->poison[0]) {
            char who[96];
            agg_describe_source(it->peer, who, sizeof who);
            poison(a, who, x[bad], bad);
        }
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

/* ---- parts: contributions folded in ranges as their bytes arrive ------------------- */

static agg_fold_part *find_part(agg_fold *f, uint64_t stream)
{
    for (size_t i = 0; stream && i < f->n_parts; i++)
        if (f->parts[i].live && f->parts[i].stream == stream)
            return &f->parts[i];
    return NULL;
}

static void drop_part(agg_fold *f, agg_fold_part *p)
{
    *p = f->parts[--f->n_parts];
}

int agg_fold_part_begin(agg *a, uint64_t stream, const agg_item *it, bb_error *err)
{
    agg_fold *f = &a->fold;
    if (f->n_parts == f->parts_cap) {
        size_t cap = f->parts_cap ? 2 * f->parts_cap : 4;
        agg_fold_part *v = realloc(f->parts, cap * sizeof *v);
        if (!v)
            return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
        f->parts = v;
        f->parts_cap = cap;
    }
    /* a part writes the mean in place: memory of our own (uninitialized
     * where nothing is folded yet: W(j) = 0 there, and the first fold of a
     * coordinate takes x as it is) */
    int rc = f->mean ? agg_fold_own(a, err) : BB_OK;
    if (!rc && !f->mean) {
        if (!(f->mean = agg_result_new(a)))
            return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
        f->owned = true;
    }
    if (rc || agg_fold_reserve(f, f->n + 1))
        return rc ? rc : bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    agg_fold_part *p = &f->parts[f->n_parts++];
    memset(p, 0, sizeof *p);
    p->stream = stream;
    p->live = true;
    p->has_peer = it->peer && bb_peerid_from_bytes(it->peer->u.bytes.data, it->peer->u.bytes.len,
                                                   &p->peer, NULL) == BB_OK;
    p->w = a->kind == AGG_MEAN ? 1.0 : (double)it->num_samples;
    p->samples = it->num_samples;
    return BB_OK;
}

int agg_fold_part_data(agg *a, uint64_t stream, uint64_t offset, uint64_t count, const float *x,
                       bb_error *err)
{
    agg_fold *f = &a->fold;
    agg_fold_part *p = find_part(f, stream);
    if (!p || offset != p->done || count > a->numel - p->done)
        return bb_error_set(err, BB_EINVAL,
                            "%s: elements [%llu, +%llu) of a contribution that has %zu of %zu "
                            "(out of order, or no such contribution)",
                            a->type_name, (unsigned long long)offset, (unsigned long long)count,
                            p ? p->done : 0, a->numel);
    if (f->poison[0])
        return bb_error_set(err, BB_EINVAL, "%s", f->poison);
    size_t bad = SIZE_MAX;
    if (p->w > 0)
        bad = fold_range(a, x, p->w, p->done, p->done + count, bb_tensor_f32(f->mean), p);
    p->done += count;
    if (bad == SIZE_MAX)
        return BB_OK;
    char who[96];
    agg_describe_peer(p->has_peer, &p->peer, who, sizeof who);
    poison(a, who, x[bad - offset], bad);
    return bb_error_set(err, BB_EINVAL, "%s", f->poison);
}

int agg_fold_part_end(agg *a, uint64_t stream, bb_error *err)
{
    agg_fold *f = &a->fold;
    agg_fold_part *p = find_part(f, stream);
    if (!p || p->done != a->numel)
        return bb_error_set(err, BB_EINVAL,
                            "%s: a contribution ended with %zu of its %zu elements",
                            a->type_name, p ? p->done : 0, a->numel);
    /* every coordinate has it now: it weighs like a whole contribution */
    f->senders[f->n].has_peer = p->has_peer;
    f->senders[f->n].peer = p->peer;
    f->n++;
    f->weight += p->w;
    f->samples += p->samples;
    drop_part(f, p);
    return BB_OK;
}

void agg_fold_part_cut(agg *a, uint64_t stream)
{
    agg_fold *f = &a->fold;
    agg_fold_part *p = find_part(f, stream);
    if (!p)
        return;
    if (!p->done || !p->w) { /* it brought nothing */
        drop_part(f, p);
        return;
    }
    p->live = false;
    p->stream = 0;
    char who[96], msg[BB_ERROR_MSG_MAX];
    agg_describe_peer(p->has_peer, &p->peer, who, sizeof who);
    snprintf(msg, sizeof msg,
             "%s: the contribution from %s was cut after %zu of %zu elements; it counts on "
             "those only",
             a->type_name, who, p->done, a->numel);
    agg_warn(a, msg);
}

int agg_fold_covered(const agg *a, bb_error *err)
{
    const agg_fold *f = &a->fold;
    if (!f->n_parts || f->weight > 0)
        return BB_OK;
    size_t covered = 0;
    for (size_t i = 0; i < f->n_parts; i++)
        if (f->parts[i].w > 0 && f->parts[i].done > covered)
            covered = f->parts[i].done;
    if (covered >= a->numel)
        return BB_OK;
    return bb_error_set(err, BB_EINVAL,
                        "%s: coordinates [%zu, %zu) of the round came from no sender (every "
                        "contribution that would bring them was cut)",
                        a->type_name, covered, a->numel);
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
 * f32], delimited poison text; version 4 adds u64 n_parts, n_parts x
 * {u8 has_peer, u8 len, peer, u64 w (bits), u64 samples, u64 done} ------- */

static void put_peer(bb_writer *w, bool has_peer, const bb_peerid *id)
{
    bb_writer_put_u8(w, has_peer);
    bb_writer_put_u8(w, has_peer ? id->len : 0);
    if (has_peer)
        bb_writer_put(w, id->bytes, id->len);
}

static bool get_peer(bb_reader *r, bool *has_peer, bb_peerid *id)
{
    uint8_t has = 0, len = 0;
    if (!bb_reader_u8(r, &has) || has > 1 || !bb_reader_u8(r, &len) ||
        len > BB_PEERID_MAX_LEN || (has && !bb_reader_get(r, id->bytes, len)) || (!has && len))
        return false;
    *has_peer = has;
    id->len = has ? len : 0;
    return true;
}

void agg_fold_snapshot(const agg *a, bb_writer *w)
{
    const agg_fold *f = &a->fold;
    bb_writer_put_u8(w, a->tagged);
    bb_writer_put_u64le(w, a->tag);
    for (size_t i = 0; i < a->n; i++)
        bb_writer_put_u8(w, a->v[i].tagged);
    bb_writer_put_u64le(w, f->n);
    for (size_t i = 0; i < f->n; i++)
        put_peer(w, f->senders[i].has_peer, &f->senders[i].peer);
    uint64_t bits;
    memcpy(&bits, &f->weight, sizeof bits);
    bb_writer_put_u64le(w, f->samples);
    bb_writer_put_u64le(w, bits);
    bb_writer_put_u8(w, f->mean != NULL);
    if (f->mean)
        bb_writer_put(w, bb_tensor_f32(f->mean), a->numel * sizeof(float));
    bb_writer_put_delimited(w, f->poison, strlen(f->poison));
    bb_writer_put_u64le(w, f->n_parts);
    for (size_t i = 0; i < f->n_parts; i++) {
        const agg_fold_part *p = &f->parts[i];
        put_peer(w, p->has_peer, &p->peer);
        memcpy(&bits, &p->w, sizeof bits);
        bb_writer_put_u64le(w, bits);
        bb_writer_put_u64le(w, p->samples);
        bb_writer_put_u64le(w, p->done);
    }
}

static bool read_senders(agg *into, bb_reader *r, uint64_t n)
{
    agg_fold *f = &into->fold;
    if (n > into->max_contributions || agg_fold_reserve(f, (size_t)n))
        return false;
    for (uint64_t i = 0; i < n; i++) {
        if (!get_peer(r, &f->senders[i].has_peer, &f->senders[i].peer))
            return false;
        f->n++;
    }
    return true;
}

/* Version 4's parts, all cut now; each within the round and below its
 * shape. */
static bool read_parts(agg *into, bb_reader *r)
{
    agg_fold *f = &into->fold;
    uint64_t n = 0;
    if (!bb_reader_u64le(r, &n) || agg_round_count(into) + n > into->max_contributions ||
        (n && !f->mean))
        return false;
    f->parts = n ? calloc((size_t)n, sizeof *f->parts) : NULL;
    if (n && !f->parts)
        return false;
    f->parts_cap = (size_t)n;
    for (uint64_t i = 0; i < n; i++) {
        agg_fold_part *p = &f->parts[i];
        uint64_t bits = 0, done = 0;
        if (!get_peer(r, &p->has_peer, &p->peer) || !bb_reader_u64le(r, &bits) ||
            !bb_reader_u64le(r, &p->samples) || !bb_reader_u64le(r, &done) ||
            done >= into->numel)
            return false;
        memcpy(&p->w, &bits, sizeof bits);
        if (!(p->w >= 0) || p->w > 1e300)
            return false;
        p->done = (size_t)done;
        f->n_parts++;
    }
    return true;
}

int agg_fold_restore(agg *into, bb_reader *r, uint32_t version, bb_error *err)
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
        ok = f->weight >= 0 && (has_mean || f->weight == 0) &&
             (!has_mean || f->n > 0 || version >= 4); /* parts may hold the mean */
    }
    if (ok && has_mean) {
        const uint8_t *data;
        ok = bb_reader_has(r, into->numel, sizeof(float)) &&
             bb_reader_view(r, into->numel * sizeof(float), &data) &&
             (f->mean = bb_value_tensor_copy(BB_DT_FLOAT, into->ndim, into->dims, data,
                                             into->numel * sizeof(float))) != NULL;
        f->owned = true;
    }
    ok = ok && bb_reader_delimited(r, &poison, &plen) && plen < sizeof f->poison &&
         (version < 4 || read_parts(into, r));
    if (!ok)
        return bb_error_set(err, BB_EDECODE, "%s: snapshot folded round is truncated or out of "
                            "range", into->type_name);
    memcpy(f->poison, poison, plen);
    f->poison[plen] = '\0';
    into->tagged = tagged;
    return BB_OK;
}
