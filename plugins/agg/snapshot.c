/*
 * snapshot.c — an aggregator's state as bytes (the open round and the last
 * result), so a node restarted from a snapshot resumes mid-round.
 *
 * Layout, little-endian:
 *   "BBAG" u32 version=2, u64 rounds, u64 last_samples,
 *   shape(round), u64 n, n x { u8 has_peer, u8 peer_len, peer bytes,
 *                              u64 num_samples, numel(round) f32 },
 *   u8 has_last, [shape(last), numel(last) f32],
 *   the server optimizer's state (server_opt.c; not in version 1),
 *   the round's request tags and its folded part (fold.c; version 3;
 *   from version 4 with the contributions folded in ranges)
 *   shape = u32 ndim, ndim x i64 dim
 * Restore checks every length against the remaining bytes before it
 * allocates, like any other untrusted input.
 */
#include <stdlib.h>
#include <string.h>

#include "agg.h"
#include "bb/bytes.h"

#define MAGIC "BBAG"
#define VERSION 4u

static void put_shape(bb_writer *w, uint32_t nd, const int64_t *dims)
{
    bb_writer_put_u32le(w, nd);
    bb_writer_put(w, dims, nd * sizeof *dims);
}

void agg_snapshot_put_tensor(bb_writer *w, const bb_value *t)
{
    put_shape(w, t->u.tensor.ndim, t->u.tensor.dims);
    bb_writer_put(w, bb_tensor_f32(t), bb_tensor_numel(t) * sizeof(float));
}

int agg_snapshot(void *inst, uint8_t **out, size_t *out_len, bb_error *err)
{
    const agg *a = inst;
    bb_writer w = {0};
    bb_writer_put(&w, MAGIC, 4);
    bb_writer_put_u32le(&w, VERSION);
    bb_writer_put_u64le(&w, a->rounds);
    bb_writer_put_u64le(&w, a->last_samples);
    put_shape(&w, a->ndim, a->dims);
    bb_writer_put_u64le(&w, a->n);
    for (size_t i = 0; i < a->n; i++) {
        const agg_contribution *c = &a->v[i];
        bb_writer_put_u8(&w, c->has_peer);
        bb_writer_put_u8(&w, c->has_peer ? c->peer.len : 0);
        if (c->has_peer)
            bb_writer_put(&w, c->peer.bytes, c->peer.len);
        bb_writer_put_u64le(&w, c->num_samples);
        bb_writer_put(&w, bb_tensor_f32(c->tensor), a->numel * sizeof(float));
    }
    bb_writer_put_u8(&w, a->last != NULL);
    if (a->last)
        agg_snapshot_put_tensor(&w, a->last);
    agg_server_snapshot(a, &w);
    agg_fold_snapshot(a, &w);
    if (!bb_writer_take(&w, out, out_len))
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    return BB_OK;
}

static bool get_shape(bb_reader *r, uint32_t *nd, int64_t *dims, size_t *numel)
{
    if (!bb_reader_u32le(r, nd) || *nd > BB_MAX_DIMS ||
        !bb_reader_get(r, dims, *nd * sizeof *dims))
        return false;
    *numel = bb_shape_numel(*nd, dims);
    return *numel != SIZE_MAX;
}

/* A tensor of the shape read from the next numel floats. */
static bb_value *get_tensor(bb_reader *r, uint32_t nd, const int64_t *dims, size_t numel)
{
    const uint8_t *f32;
    if (!bb_reader_has(r, numel, sizeof(float)) || !bb_reader_view(r, numel * sizeof(float), &f32))
        return NULL;
    return bb_value_tensor_copy(BB_DT_FLOAT, nd, dims, f32, numel * sizeof(float));
}

bb_value *agg_snapshot_get_tensor(bb_reader *r)
{
    uint32_t nd;
    int64_t dims[BB_MAX_DIMS];
    size_t numel;
    return get_shape(r, &nd, dims, &numel) ? get_tensor(r, nd, dims, numel) : NULL;
}

int agg_restore(void *inst, const uint8_t *data, size_t len, bb_error *err)
{
    agg *a = inst;
    agg s = *a; /* the config part carries over */
    s.v = NULL;
    s.n = s.cap = 0;
    s.last = NULL;
    s.srv.reference = NULL; /* the server optimizer's config carries over, its state not */
    s.srv.m = s.srv.v = NULL;
    s.srv.numel = 0;
    s.srv.steps = 0;
    memset(&s.fold, 0, sizeof s.fold); /* the folded part is state */
    s.tagged = false;
    s.tag = 0;
    bb_reader r;
    bb_reader_init(&r, data, len);
    char magic[4];
    uint32_t version = 0;
    uint64_t n = 0;
    int rc = BB_OK;
    if (!bb_reader_get(&r, magic, 4) || memcmp(magic, MAGIC, 4) ||
        !bb_reader_u32le(&r, &version) || version < 1 || version > VERSION)
        return bb_error_set(err, BB_EDECODE, "%s: not an aggregator snapshot (version %u)",
                            a->type_name, version);
    if (!bb_reader_u64le(&r, &s.rounds) || !bb_reader_u64le(&r, &s.last_samples) ||
        !get_shape(&r, &s.ndim, s.dims, &s.numel) || !bb_reader_u64le(&r, &n) ||
        n > a->max_contributions) {
        rc = bb_error_set(err, BB_EDECODE, "%s: snapshot header is truncated or out of range",
                          a->type_name);
        goto fail;
    }
    s.v = calloc(n ? n : 1, sizeof *s.v);
    if (!s.v) {
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
        goto fail;
    }
    s.cap = n ? n : 1;
    for (uint64_t i = 0; i < n; i++) {
        agg_contribution *c = &s.v[i];
        uint8_t has = 0, plen = 0;
        if (!bb_reader_u8(&r, &has) || !bb_reader_u8(&r, &plen) || plen > BB_PEERID_MAX_LEN ||
            (has && !bb_reader_get(&r, c->peer.bytes, plen)) ||
            !bb_reader_u64le(&r, &c->num_samples) ||
            !(c->tensor = get_tensor(&r, s.ndim, s.dims, s.numel))) {
            rc = bb_error_set(err, BB_EDECODE, "%s: snapshot contribution %llu is truncated",
                              a->type_name, (unsigned long long)i);
            goto fail;
        }
        c->has_peer = has != 0;
        c->peer.len = has ? plen : 0;
        s.n++;
    }
    uint8_t has_last = 0;
    if (!bb_reader_u8(&r, &has_last)) {
        rc = bb_error_set(err, BB_EDECODE, "%s: snapshot is truncated", a->type_name);
        goto fail;
    }
    if (has_last && !(s.last = agg_snapshot_get_tensor(&r))) {
        rc = bb_error_set(err, BB_EDECODE, "%s: snapshot result is truncated", a->type_name);
        goto fail;
    }
    if (version >= 2 && (rc = agg_server_restore(&s, &r, err)))
        goto fail;
    if (version >= 3 && (rc = agg_fold_restore(&s, &r, version, err)))
        goto fail;
    if (bb_reader_left(&r)) {
        rc = bb_error_set(err, BB_EDECODE, "%s: %zu stray bytes after the snapshot",
                          a->type_name, bb_reader_left(&r));
        goto fail;
    }
    agg_round_clear(a);
    free(a->v);
    agg_fold_free(&a->fold);
    bb_value_unref(a->last);
    agg_server_free(&a->srv);
    *a = s;
    return BB_OK;
fail:
    agg_round_clear(&s);
    free(s.v);
    agg_fold_free(&s.fold);
    bb_value_unref(s.last);
    agg_server_free(&s.srv);
    return rc;
}
