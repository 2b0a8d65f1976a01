/*
 * snapshot.c — an aggregator's state as bytes (the open round and the last
 * result), so a node restarted from a snapshot resumes mid-round.
 *
 * Layout, little-endian:
 *   "BBAG" u32 version=2, u64 rounds, u64 last_samples,
 *   shape(round), u64 n, n x { u8 has_peer, u8 peer_len, peer bytes,
 *                              u64 num_samples, numel(round) f32 },
 *   u8 has_last, [shape(last), numel(last) f32],
 *   the server optimizer's state (server_opt.c; not in version 1)
 *   shape = u32 ndim, ndim x i64 dim
 * Restore checks every length against the remaining bytes before it
 * allocates, like any other untrusted input.
 */
#include <stdlib.h>
#include <string.h>

#include "agg.h"
#include "plugins/common/plugin_bytes.h"

#define MAGIC "BBAG"
#define VERSION 2u

static void put_shape(bbp_wbuf *w, uint32_t nd, const int64_t *dims)
{
    bbp_put_u32(w, nd);
    bbp_put(w, dims, nd * sizeof *dims);
}

void agg_snapshot_put_tensor(bbp_wbuf *w, const bb_value *t)
{
    put_shape(w, t->u.tensor.ndim, t->u.tensor.dims);
    bbp_put(w, bb_tensor_f32(t), bb_tensor_numel(t) * sizeof(float));
}

int agg_snapshot(void *inst, uint8_t **out, size_t *out_len, bb_error *err)
{
    const agg *a = inst;
    bbp_wbuf w = {0};
    bbp_put(&w, MAGIC, 4);
    bbp_put_u32(&w, VERSION);
    bbp_put_u64(&w, a->rounds);
    bbp_put_u64(&w, a->last_samples);
    put_shape(&w, a->ndim, a->dims);
    bbp_put_u64(&w, a->n);
    for (size_t i = 0; i < a->n; i++) {
        const agg_contribution *c = &a->v[i];
        bbp_put_u8(&w, c->has_peer);
        bbp_put_u8(&w, c->has_peer ? c->peer.len : 0);
        if (c->has_peer)
            bbp_put(&w, c->peer.bytes, c->peer.len);
        bbp_put_u64(&w, c->num_samples);
        bbp_put(&w, bb_tensor_f32(c->tensor), a->numel * sizeof(float));
    }
    bbp_put_u8(&w, a->last != NULL);
    if (a->last)
        agg_snapshot_put_tensor(&w, a->last);
    agg_server_snapshot(a, &w);
    if (w.oom) {
        free(w.p);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    }
    *out = w.p;
    *out_len = w.n;
    return BB_OK;
}

static bool get_shape(bbp_rbuf *r, uint32_t *nd, int64_t *dims, size_t *numel)
{
    if (!bbp_get(r, nd, 4) || *nd > BB_MAX_DIMS || !bbp_get(r, dims, *nd * sizeof *dims))
        return false;
    *numel = bb_shape_numel(*nd, dims);
    return *numel != SIZE_MAX;
}

/* A tensor of the shape read from the next numel floats. */
static bb_value *get_tensor(bbp_rbuf *r, uint32_t nd, const int64_t *dims, size_t numel)
{
    if (!bbp_has(r, numel, sizeof(float)))
        return NULL;
    bb_value *t = bb_value_tensor_copy(BB_DT_FLOAT, nd, dims, r->p + r->off, numel * sizeof(float));
    if (t)
        r->off += numel * sizeof(float);
    return t;
}

bb_value *agg_snapshot_get_tensor(bbp_rbuf *r)
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
    bbp_rbuf r = {data, len, 0};
    char magic[4];
    uint32_t version = 0;
    uint64_t n = 0;
    int rc = BB_OK;
    if (!bbp_get(&r, magic, 4) || memcmp(magic, MAGIC, 4) || !bbp_get(&r, &version, 4) ||
        version < 1 || version > VERSION)
        return bb_error_set(err, BB_EDECODE, "%s: not an aggregator snapshot (version %u)",
                            a->type_name, version);
    if (!bbp_get(&r, &s.rounds, 8) || !bbp_get(&r, &s.last_samples, 8) ||
        !get_shape(&r, &s.ndim, s.dims, &s.numel) || !bbp_get(&r, &n, 8) ||
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
        if (!bbp_get(&r, &has, 1) || !bbp_get(&r, &plen, 1) || plen > BB_PEERID_MAX_LEN ||
            (has && !bbp_get(&r, c->peer.bytes, plen)) || !bbp_get(&r, &c->num_samples, 8) ||
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
    if (!bbp_get(&r, &has_last, 1)) {
        rc = bb_error_set(err, BB_EDECODE, "%s: snapshot is truncated", a->type_name);
        goto fail;
    }
    if (has_last && !(s.last = agg_snapshot_get_tensor(&r))) {
        rc = bb_error_set(err, BB_EDECODE, "%s: snapshot result is truncated", a->type_name);
        goto fail;
    }
    if (version >= 2 && (rc = agg_server_restore(&s, &r, err)))
        goto fail;
    if (r.off != len) {
        rc = bb_error_set(err, BB_EDECODE, "%s: %zu stray bytes after the snapshot",
                          a->type_name, len - r.off);
        goto fail;
    }
    agg_round_clear(a);
    free(a->v);
    bb_value_unref(a->last);
    agg_server_free(&a->srv);
    *a = s;
    return BB_OK;
fail:
    agg_round_clear(&s);
    free(s.v);
    bb_value_unref(s.last);
    agg_server_free(&s.srv);
    return rc;
}
