/*
 * round.c — a round of an aggregator: what Contribute adds to it and how
 * Aggregate / CurrentTensor reduce it.
 *
 * A round has two parts. The held part: contributions kept by reference
 * (zero-copy, the value the engine handed us) and reduced in ONE pass at
 * Aggregate (reduce.c) — what a Contribute of a tensor or a whole
 * ResponseBatch gives, and the only part TrimmedMean and Median have. The
 * folded part (fold.c): contributions tagged with the request they answer
 * (metadata = its RequestId: the engine's streaming path) that the
 * averaging kinds fold into a running mean as they arrive. Aggregate
 * combines both, weighting the folded mean by the weight folded into it.
 *
 * A held sender that contributes again in the round replaces its earlier
 * contribution; a folded one cannot be replaced (fold.c). A tag other than
 * the round's drops what the old tag brought (that request's round never
 * reached Aggregate).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg.h"

void agg_round_clear(agg *a)
{
    for (size_t i = 0; i < a->n; i++)
        bb_value_unref(a->v[i].tensor);
    a->n = 0;
    agg_fold_clear(&a->fold);
    a->tagged = false;
    a->tag = 0;
    a->ndim = 0;
    a->numel = 0;
}

/* A Contribute tagged with request `tag`: what an earlier tag brought
 * belongs to a round that failed before its Aggregate. */
static void round_retag(agg *a, uint64_t tag)
{
    if (a->tagged && a->tag == tag)
        return;
    size_t kept = 0, dropped = a->fold.n;
    for (size_t i = 0; i < a->n; i++) {
        if (a->tagged && a->v[i].tagged) {
            bb_value_unref(a->v[i].tensor);
            dropped++;
        } else {
            a->v[kept++] = a->v[i];
        }
    }
    a->n = kept;
    agg_fold_clear(&a->fold);
    if (dropped) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "%s: dropping %zu contributions to request %llu, whose round never reached "
                 "Aggregate",
                 a->type_name, dropped, (unsigned long long)a->tag);
        agg_warn(a, msg);
    }
    if (a->n == 0) {
        a->ndim = 0;
        a->numel = 0;
    }
    a->tagged = true;
    a->tag = tag;
}

static bool same_shape(uint32_t nd, const int64_t *d, const bb_value *t)
{
    return t->u.tensor.ndim == nd && memcmp(t->u.tensor.dims, d, nd * sizeof *d) == 0;
}

static bool peer_id(const bb_value *peer, bb_peerid *id)
{
    return peer && bb_peerid_from_bytes(peer->u.bytes.data, peer->u.bytes.len, id, NULL) == BB_OK;
}

static agg_contribution *find_peer(agg *a, const bb_value *peer)
{
    bb_peerid id;
    if (!peer_id(peer, &id))
        return NULL;
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i].has_peer && bb_peerid_equal(&a->v[i].peer, &id))
            return &a->v[i];
    return NULL;
}

/* A refusal of item it: fails the Contribute, or (skip) drops the item. */
static int refuse_item(agg *a, agg_item *it, bb_error *err)
{
    if (!a->skip_bad)
        return err->code;
    agg_warn(a, err->msg);
    it->tensor = NULL;
    return BB_OK;
}

/* The items' shapes against the round's (the first item fixes an empty
 * round's). A mismatch fails the whole Contribute, or drops the item. */
static int check_shapes(agg *a, agg_item *it, size_t n, uint32_t *nd, int64_t *dims,
                        bb_error *err)
{
    bool have = agg_round_count(a) > 0;
    *nd = a->ndim;
    memcpy(dims, a->dims, sizeof a->dims);
    for (size_t i = 0; i < n; i++) {
        if (!it[i].tensor)
            continue;
        const bb_tensor_view *t = &it[i].tensor->u.tensor;
        if (bb_tensor_numel(it[i].tensor) == SIZE_MAX)
            return bb_error_set(err, BB_EINVAL, "%s: contribution has an invalid shape",
                                a->type_name);
        if (!have) {
            *nd = t->ndim;
            memcpy(dims, t->dims, sizeof t->dims);
            have = true;
            continue;
        }
        if (same_shape(*nd, dims, it[i].tensor))
            continue;
        char who[96], got[160], want[160];
        agg_describe_source(it[i].peer, who, sizeof who);
        agg_format_shape(t->ndim, t->dims, got, sizeof got);
        agg_format_shape(*nd, dims, want, sizeof want);
        bb_error_set(err, BB_ETYPE,
                     "%s: contribution from %s has shape %s, but this round's contributions "
                     "have shape %s",
                     a->type_name, who, got, want);
        int rc = refuse_item(a, &it[i], err);
        if (rc)
            return rc;
    }
    return BB_OK;
}

/* Senders whose update is folded into the round (or comes twice in this
 * Contribute, when it folds) cannot contribute again. */
static int check_folded_senders(agg *a, agg_item *it, size_t n, bool folding, bb_error *err)
{
    for (size_t i = 0; i < n; i++) {
        bb_peerid id, other;
        if (!it[i].tensor || !peer_id(it[i].peer, &id))
            continue;
        bool again = agg_fold_has_sender(&a->fold, &id);
        for (size_t j = 0; folding && !again && j < i; j++)
            again = it[j].tensor && peer_id(it[j].peer, &other) && bb_peerid_equal(&id, &other);
        if (!again)
            continue;
        char who[96];
        agg_describe_source(it[i].peer, who, sizeof who);
        bb_error_set(err, BB_EEXIST,
                     "%s: %s already contributed to this round (its update was folded in as it "
                     "arrived and cannot be replaced)",
                     a->type_name, who);
        int rc = refuse_item(a, &it[i], err);
        if (rc)
            return rc;
    }
    return BB_OK;
}

static void set_shape(agg *a, uint32_t nd, const int64_t *dims)
{
    if (agg_round_count(a) == 0)
        return;
    a->ndim = nd;
    memcpy(a->dims, dims, sizeof a->dims);
    a->numel = bb_shape_numel(nd, dims);
}

static int count_output(agg *a, size_t count, bb_value **out, bb_error *err)
{
    if (!(*out = bb_value_u64(&BB_TYPE_COMMAND_ID, count)))
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    return BB_OK;
}

static int full_error(agg *a, bb_error *err)
{
    return bb_error_set(err, BB_EFULL,
                        "%s: the round already holds %zu contributions (max_contributions %zu)",
                        a->type_name, agg_round_count(a), a->max_contributions);
}

/* The folded path: every item checked first, then folded in order (only
 * out of memory or a non-finite mean stops it midway). */
static int contribute_folded(agg *a, agg_item *it, size_t n, uint32_t nd, const int64_t *dims,
                             bb_value **out, bb_error *err)
{
    size_t fresh = 0;
    for (size_t i = 0; i < n; i++)
        fresh += it[i].tensor != NULL && !find_peer(a, it[i].peer);
    if (agg_round_count(a) + fresh > a->max_contributions)
        return full_error(a, err);
    if (agg_fold_reserve(&a->fold, a->fold.n + n))
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    size_t was = agg_round_count(a);
    int rc = BB_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        if (!it[i].tensor)
            continue;
        if (agg_round_count(a) == 0 && was == 0) { /* the round's shape, before the first fold */
            a->ndim = nd;
            memcpy(a->dims, dims, sizeof a->dims);
            a->numel = bb_shape_numel(nd, dims);
        }
        if (!agg_fold_admits(a, &it[i]))
            continue;
        agg_contribution *held = find_peer(a, it[i].peer);
        if (held) { /* a held update of the sender: the folded one replaces it */
            bb_value_unref(held->tensor);
            *held = a->v[--a->n];
        }
        rc = agg_fold_add(a, &it[i], err);
    }
    if (agg_round_count(a) == 0) {
        a->ndim = 0;
        a->numel = 0;
    }
    return rc ? rc : count_output(a, agg_round_count(a), out, err);
}

/* The held path: references kept; a sender's second update replaces its
 * first. Nothing changes unless the whole Contribute applies. */
static int contribute_held(agg *a, agg_item *it, size_t n, bool tagged, uint32_t nd,
                           const int64_t *dims, bb_value **out, bb_error *err)
{
    size_t fresh = 0; /* items that add a contribution (not a replacement) */
    for (size_t i = 0; i < n; i++) {
        if (!it[i].tensor || find_peer(a, it[i].peer))
            continue;
        bool again = false;
        for (size_t j = 0; j < i && !again && it[i].peer; j++)
            again = it[j].tensor && it[j].peer && bb_value_equal(it[j].peer, it[i].peer);
        fresh += !again;
    }
    if (agg_round_count(a) + fresh > a->max_contributions)
        return full_error(a, err);
    if (a->n + fresh > a->cap) {
        size_t cap = a->cap ? a->cap : 8;
        while (cap < a->n + fresh)
            cap *= 2;
        agg_contribution *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
        a->v = v;
        a->cap = cap;
    }
    int rc = count_output(a, agg_round_count(a) + fresh, out, err);
    if (rc)
        return rc;
    /* Nothing can fail from here on: the Contribute applies whole. */
    for (size_t i = 0; i < n; i++) {
        if (!it[i].tensor)
            continue;
        agg_contribution *c = find_peer(a, it[i].peer);
        if (c) { /* same sender, same round: replace */
            bb_value_unref(c->tensor);
        } else {
            c = &a->v[a->n++];
            memset(c, 0, sizeof *c);
            c->has_peer = peer_id(it[i].peer, &c->peer);
        }
        c->tensor = bb_value_ref((bb_value *)it[i].tensor);
        c->num_samples = it[i].num_samples;
        c->tagged = tagged;
    }
    set_shape(a, nd, dims);
    return BB_OK;
}

int agg_contribute(agg *a, const bb_value *contribution, const bb_value *metadata,
                   bb_value **out, bb_error *err)
{
    bool tagged = metadata && metadata->type == &BB_TYPE_REQUEST_ID;
    uint64_t tag = tagged ? metadata->u.u64 : 0;
    agg_item *it;
    size_t n;
    int rc = agg_parse_contribute(a, contribution, tagged ? NULL : metadata, &it, &n, err);
    if (rc)
        return rc;
    if (tagged)
        round_retag(a, tag);
    bool folding = tagged && agg_folds(a->kind);
    uint32_t nd;
    int64_t dims[BB_MAX_DIMS];
    rc = check_shapes(a, it, n, &nd, dims, err);
    if (!rc)
        rc = check_folded_senders(a, it, n, folding, err);
    if (!rc && folding)
        rc = contribute_folded(a, it, n, nd, dims, out, err);
    else if (!rc)
        rc = contribute_held(a, it, n, tagged, nd, dims, out, err);
    free(it);
    return rc;
}

static bool is_shape(uint32_t nd, const int64_t *d, uint32_t nd2, const int64_t *d2)
{
    return nd == nd2 && memcmp(d, d2, nd * sizeof *d) == 0;
}

int agg_contribute_begin(agg *a, const bb_fold_piece *p, bb_error *err)
{
    if (!agg_folds(a->kind) || a->skip_bad)
        return bb_error_set(err, BB_EUNSUPPORTED, "%s takes contributions whole (%s)",
                            a->type_name,
                            a->skip_bad ? "on_bad_contribution = \"skip\" checks each first"
                                        : "it keeps every contribution");
    if (!p->request || p->request->type != &BB_TYPE_REQUEST_ID || p->dtype != BB_DT_FLOAT ||
        p->ndim > BB_MAX_DIMS)
        return bb_error_set(err, BB_EUNSUPPORTED, "%s: not a tagged f32 contribution",
                            a->type_name);
    agg_item it;
    int rc = agg_parse_streamed(a, p->rest, p->sender, &it, err);
    if (rc)
        return rc;
    round_retag(a, p->request->u.u64);
    char who[96];
    agg_describe_source(it.peer, who, sizeof who);
    size_t numel = bb_shape_numel(p->ndim, p->dims);
    if (numel == SIZE_MAX || numel == 0)
        return bb_error_set(err, BB_EINVAL, "%s: contribution from %s has an invalid shape",
                            a->type_name, who);
    if (agg_round_count(a) > 0 && !is_shape(p->ndim, p->dims, a->ndim, a->dims)) {
        char got[160], want[160];
        agg_format_shape(p->ndim, p->dims, got, sizeof got);
        agg_format_shape(a->ndim, a->dims, want, sizeof want);
        return bb_error_set(err, BB_ETYPE,
                            "%s: contribution from %s has shape %s, but this round's "
                            "contributions have shape %s",
                            a->type_name, who, got, want);
    }
    bb_peerid id;
    if (peer_id(it.peer, &id) && agg_fold_has_sender(&a->fold, &id))
        return bb_error_set(err, BB_EEXIST,
                            "%s: %s already contributed to this round (its update was folded in "
                            "as it arrived and cannot be replaced)",
                            a->type_name, who);
    agg_contribution *held = find_peer(a, it.peer);
    if (!held && agg_round_count(a) + 1 > a->max_contributions)
        return full_error(a, err);
    if (agg_round_count(a) == 0) {
        a->ndim = p->ndim;
        memset(a->dims, 0, sizeof a->dims);
        memcpy(a->dims, p->dims, p->ndim * sizeof *p->dims);
        a->numel = numel;
    }
    if (held) { /* a held update of the sender: the folded one replaces it */
        bb_value_unref(held->tensor);
        *held = a->v[--a->n];
    }
    rc = agg_fold_part_begin(a, p->stream, &it, err);
    if (rc && agg_round_count(a) == 0) {
        a->ndim = 0;
        a->numel = 0;
    }
    return rc;
}

/* ---- reduce ---------------------------------------------------------------------- */

bb_value *agg_result_new(agg *a)
{
    size_t bytes = a->numel * sizeof(float);
    bb_value *l = a->last;
    if (l && atomic_load(&l->refs) == 1 && l->u.tensor.buf &&
        atomic_load(&l->u.tensor.buf->refs) == 1 && l->u.tensor.nbytes == bytes &&
        ((uintptr_t)l->u.tensor.data & 63) == 0) {
        bb_value *t = bb_value_tensor_wrap(BB_DT_FLOAT, a->ndim, a->dims, l->u.tensor.buf,
                                           l->u.tensor.data);
        if (t) {
            bb_value_unref(l);
            a->last = NULL;
            return t;
        }
    }
    uint8_t *data = bb_large_alloc(bytes);
    bb_buffer *buf = data ? bb_buffer_adopt_large(data, bytes) : NULL;
    if (!buf)
        return NULL;
    bb_value *t = bb_value_tensor_wrap(BB_DT_FLOAT, a->ndim, a->dims, buf, data);
    bb_buffer_unref(buf);
    return t;
}

/* After a non-finite weighted sum at index j: name the sender. */
static int non_finite_error(const agg *a, size_t j, bb_error *err)
{
    for (size_t i = 0; i < a->n; i++) {
        float x = bb_tensor_f32(a->v[i].tensor)[j];
        if (x != x || x - x != 0.0f) {
            char who[96];
            bb_value *peer = NULL;
            if (a->v[i].has_peer)
                peer = bb_value_bytes(&BB_TYPE_PEER_ID, a->v[i].peer.bytes, a->v[i].peer.len);
            agg_describe_source(peer, who, sizeof who);
            bb_value_unref(peer);
            return bb_error_set(err, BB_EINVAL,
                                "%s: contribution from %s has a non-finite value (%g) at index "
                                "%zu",
                                a->type_name, who, (double)x, j);
        }
    }
    return bb_error_set(err, BB_EINVAL, "%s: the weighted sum overflows at index %zu",
                        a->type_name, j);
}

/* The folded mean as the result: shared as it is, except where a server
 * optimizer steps it in place (our own memory when closing the round, a
 * copy for CurrentTensor). */
static int mean_result(agg *a, bool close, bb_value **out, bb_error *err)
{
    agg_fold *f = &a->fold;
    if (!agg_is_server_optimizer(a->kind)) {
        *out = bb_value_ref(f->mean);
        return BB_OK;
    }
    if (close) {
        int rc = agg_fold_own(a, err);
        if (!rc)
            *out = bb_value_ref(f->mean);
        return rc;
    }
    bb_value *t = agg_result_new(a);
    if (!t)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    memcpy(bb_tensor_f32(t), bb_tensor_f32(f->mean), a->numel * sizeof(float));
    *out = t;
    return BB_OK;
}

/* The averaging kinds: the folded mean (weight W_f) and the held
 * contributions in one pass, into the mean's own memory when close and it
 * is ours. */
static int reduce_weighted(agg *a, bool close, uint64_t total, bb_value **out, bb_error *err)
{
    bool weighted = a->kind != AGG_MEAN;
    const agg_fold *f = &a->fold;
    double w_all = (weighted ? (double)(total - f->samples) : (double)a->n) + f->weight;
    if (f->mean && a->n == 0) /* the folded mean is the result */
        return mean_result(a, close, out, err);
    if (close && f->mean) {
        int rc = agg_fold_own(a, err);
        if (rc)
            return rc;
    }
    size_t n = a->n + (f->mean != NULL);
    const float **x = malloc((n ? n : 1) * sizeof *x);
    float *w = malloc((n ? n : 1) * sizeof *w);
    bb_value *t = NULL;
    if (x && w)
        t = close && f->mean ? bb_value_ref(f->mean) : agg_result_new(a);
    int rc = BB_OK;
    if (!t) {
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
        goto done;
    }
    size_t k = 0;
    if (f->mean) {
        x[k] = bb_tensor_f32(f->mean);
        w[k++] = (float)(f->weight / w_all);
    }
    for (size_t i = 0; i < a->n; i++) {
        x[k] = bb_tensor_f32(a->v[i].tensor);
        w[k++] = weighted ? (float)((double)a->v[i].num_samples / w_all) : (float)(1.0 / w_all);
    }
    size_t bad = agg_reduce_weighted(agg_par_of(a), x, w, n, a->numel, bb_tensor_f32(t), false);
    if (bad != SIZE_MAX)
        rc = non_finite_error(a, bad, err);
done:
    free(x);
    free(w);
    if (rc) {
        bb_value_unref(t);
        return rc;
    }
    *out = t;
    return BB_OK;
}

int agg_reduce_round(agg *a, bool close, bb_value **out, uint64_t *samples, bb_error *err)
{
    if (agg_round_count(a) == 0)
        return bb_error_set(err, BB_ESTATE, "%s: Aggregate with no contribution in this round",
                            a->type_name);
    if (a->fold.poison[0]) {
        bb_error_set(err, BB_EINVAL, "%s", a->fold.poison);
        if (close) /* the mean cannot be cleaned: the folded part goes */
            agg_fold_clear(&a->fold);
        return err->code;
    }
    if (a->fold.n_parts && a->n) /* the mean's weight differs by coordinate */
        return bb_error_set(err, BB_EUNSUPPORTED,
                            "%s: a round with a contribution cut part-way cannot also reduce "
                            "%zu contributions given whole",
                            a->type_name, a->n);
    int covered = agg_fold_covered(a, err);
    if (covered)
        return covered;
    uint64_t total = a->fold.samples;
    for (size_t i = 0; i < a->n; i++)
        total += a->v[i].num_samples;
    bool weighted = a->kind == AGG_FEDAVG || agg_is_server_optimizer(a->kind);
    if (weighted && total == 0)
        return bb_error_set(err, BB_EINVAL,
                            "%s: every contribution of the round has num_samples 0",
                            a->type_name);
    *samples = total;
    if (agg_folds(a->kind))
        return reduce_weighted(a, close, total, out, err);
    size_t k = 0;
    if (a->kind == AGG_TRIMMED) {
        k = a->trim_count >= 0 ? (size_t)a->trim_count : (size_t)(a->trim * (double)a->n);
        if (2 * k >= a->n)
            return bb_error_set(err, BB_EINVAL,
                                "%s: trimming %zu at each end of %zu contributions leaves none",
                                a->type_name, k, a->n);
    }
    const float **x = malloc(a->n * sizeof *x);
    bb_value *t = x ? agg_result_new(a) : NULL;
    int rc = BB_OK;
    if (!t)
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    for (size_t i = 0; !rc && i < a->n; i++)
        x[i] = bb_tensor_f32(a->v[i].tensor);
    if (!rc && agg_reduce_sorted(agg_par_of(a), a->kind, x, a->n, k, a->numel,
                                 bb_tensor_f32(t)) != BB_OK)
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    free(x);
    if (rc) {
        bb_value_unref(t);
        return rc;
    }
    *out = t;
    return BB_OK;
}
