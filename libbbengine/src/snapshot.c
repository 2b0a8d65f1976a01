/*
 * snapshot.c — node snapshot / restore (ENGINE.md Part 15): the format, its
 * framing and the helpers every section is written and read with. The
 * sections themselves live with their subsystems (snapshot.h lists them).
 *
 * A snapshot captures everything a restored engine needs to carry on from
 * the same point: component states (type->snapshot), every live execution
 * with its slots (values in their wire encoding, tagged by type hash), the
 * frontier, suspended ops (timers, semaphore / queue / request waiters),
 * request batches and open inbound requests, framework tables (address
 * book with health and backoff state, dedup window, semaphores, queues,
 * holds, records, metrics, counters), the bus, the bootstrap state and the
 * not-yet-processed ingress (drained and re-queued). The install itself is
 * not serialized: the host re-installs the same artifact and targets into a
 * fresh engine (checked by a fingerprint) and calls bb_engine_restore
 * before the first poll.
 *
 * Component ops that were suspended on a completion handle cannot keep it
 * (the work it stood for is gone): on restore they go back to the frontier
 * and dispatch again, which re-triggers the work (ENGINE.md 9.4). In-flight
 * component bootstraps are re-staged the same way.
 *
 * Format (integers are unsigned varints, bb/uvarint.h):
 *   "BBSNAP3\0"
 *   then every section of BBE__SNAP_SECTIONS, in its order:
 *     tag, layout version, body length, body
 * A restore error names the section and the byte offset inside its body
 * (and in the whole snapshot): "section 'timers' malformed at byte 17 of
 * 40 (byte 912 of the snapshot): a timer kind that cannot be restored".
 *
 * Evolution. The magic changes only when this framing does; an older or
 * newer magic is refused naming both formats. A section's layout carries
 * its own version: changing what a section holds bumps that section's
 * version (and its reader may go on reading the older one), never the
 * other sections'. A reader must consume its section exactly: trailing
 * bytes it does not understand, a section tag out of place or unknown, a
 * layout version it does not read, are refused naming the section — never
 * skipped, because bytes a reader skips are state the restored engine
 * would silently lose (and a short count inside a section looks exactly
 * like them). The one deliberate tolerance is inside the engine section:
 * a counter list longer than this engine's counters drops the extra
 * counters, a shorter one leaves the rest at zero (observability only).
 *
 * Restore treats the bytes as untrusted: every count and index is bounded
 * and checked, and a failed restore leaves the engine as installed (no
 * transient state).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/uvarint.h"
#include "libbbengine/src/snapshot.h"
#include "libbbengine/src/syscalls.h"

#define MAGIC "BBSNAP3" /* with its NUL: 8 bytes */
#define MAGIC_LEN 8

#define BBE__SNAP_ENTRY(tag, name, version) \
    {tag, #name, version, bbe__snap_write_##name, bbe__snap_read_##name},
const bbe__snap_section bbe__snap_sections[] = {BBE__SNAP_SECTIONS(BBE__SNAP_ENTRY)};
#undef BBE__SNAP_ENTRY
const size_t bbe__snap_n_sections = sizeof bbe__snap_sections / sizeof bbe__snap_sections[0];

uint64_t bbe__install_fingerprint(const bb_engine *e)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint32_t gi = 0; gi < e->n_graphs; gi++) {
        const bbe__graph *g = &e->graphs[gi];
        h = bbe__mix64(h ^ bb_fnv1a64(g->name, strlen(g->name)) ^ g->n_sites);
        for (uint32_t k = g->op_begin; k < g->op_end; k++)
            h = bbe__mix64(h ^ bb_fnv1a64(e->ops[k].op_type, strlen(e->ops[k].op_type)) ^ k);
    }
    for (uint32_t c = 0; c < e->n_comps; c++)
        h = bbe__mix64(h ^ bb_fnv1a64(e->comps[c].slot, strlen(e->comps[c].slot)));
    return h;
}

/* ---- writing helpers --------------------------------------------------------------------- */

void bbe__snap_put_value(bbe__snap_out *o, const bb_value *v)
{
    size_t len;
    if (!v) {
        bbe__snap_put_u(o, 0);
        return;
    }
    if (bb_value_encoded_size(v, &len, NULL) != BB_OK) {
        o->w.failed = true; /* an unencodable value: reported as the snapshot failing */
        return;
    }
    bbe__snap_put_u(o, 1);
    bb_writer_put_u64le(&o->w, v->type->wire_hash);
    bbe__snap_put_u(o, len);
    uint8_t *room = len ? bb_writer_grow(&o->w, len) : NULL;
    size_t got;
    if (room && bb_value_encode_into(v, room, len, &got, NULL) != BB_OK)
        o->w.failed = true;
}

void bbe__snap_put_peer(bbe__snap_out *o, const bb_peerid *p)
{
    bb_writer_put_delimited(&o->w, p->bytes, p->len);
}

void bbe__snap_put_frame(bbe__snap_out *o, const bbe__exec *x)
{
    uint64_t v = 0;
    if (x)
        bbe__map_get(&o->frames, (uint64_t)(uintptr_t)x, &v);
    bbe__snap_put_u(o, v);
}

void bbe__snap_put_waiters(bbe__snap_out *o, const struct bbe__waiter *v, size_t n)
{
    bbe__snap_put_u(o, n);
    for (size_t i = 0; i < n; i++) {
        bbe__snap_put_u(o, v[i].op);
        bbe__snap_put_frame(o, v[i].x);
    }
}

void bbe__snap_put_in_values(bbe__snap_out *o, const bbe__in_value *in, uint32_t n)
{
    bbe__snap_put_u(o, n);
    for (uint32_t i = 0; i < n; i++) {
        bbe__snap_put_u(o, in[i].site);
        bbe__snap_put_u(o, in[i].charged);
        bbe__snap_put_value(o, in[i].v);
    }
}

/* ---- reading helpers ---------------------------------------------------------------------- */

void bbe__snap_fail(bbe__snap_in *in, size_t at, const char *why)
{
    bb_reader_fail(&in->r, at, BB_EDECODE, why);
}

void bbe__snap_nomem(bbe__snap_in *in)
{
    in->oom = true;
    bb_reader_fail(&in->r, in->r.pos, BB_ENOMEM, "out of memory");
}

uint64_t bbe__snap_u(bbe__snap_in *in)
{
    uint64_t v;
    bb_reader_uvarint(&in->r, &v);
    return v;
}

bool bbe__snap_flag(bbe__snap_in *in)
{
    return bbe__snap_max(in, 1, "a flag that is neither 0 nor 1") != 0;
}

uint64_t bbe__snap_max(bbe__snap_in *in, uint64_t max, const char *why)
{
    size_t at = in->r.pos;
    uint64_t v = bbe__snap_u(in);
    if (v > max) {
        bbe__snap_fail(in, at, why);
        return 0;
    }
    return v;
}

void bbe__snap_expect(bbe__snap_in *in, uint64_t want, const char *why)
{
    size_t at = in->r.pos;
    if (bbe__snap_u(in) != want && !in->r.failed)
        bbe__snap_fail(in, at, why);
}

uint32_t bbe__snap_index(bbe__snap_in *in, uint32_t limit, const char *why)
{
    size_t at = in->r.pos;
    uint64_t v = bbe__snap_u(in);
    if (!in->r.failed && v >= limit) {
        bbe__snap_fail(in, at, why);
        return 0;
    }
    return (uint32_t)v;
}

size_t bbe__snap_count(bbe__snap_in *in, size_t max, const char *why)
{
    size_t at = in->r.pos;
    uint64_t v = bbe__snap_u(in);
    if (v > bb_reader_left(&in->r)) {
        bbe__snap_fail(in, at, "a count larger than the bytes that follow");
        return 0;
    }
    if (v > max) {
        bbe__snap_fail(in, at, why);
        return 0;
    }
    return (size_t)v;
}

const uint8_t *bbe__snap_bytes(bbe__snap_in *in, size_t *len)
{
    const uint8_t *d;
    bb_reader_delimited(&in->r, &d, len);
    return d;
}

bb_value *bbe__snap_value_or_null(bbe__snap_in *in)
{
    size_t at = in->r.pos;
    uint64_t hash;
    size_t len;
    const uint8_t *d;
    if (!bbe__snap_flag(in) || !bb_reader_u64le(&in->r, &hash) ||
        !bb_reader_delimited(&in->r, &d, &len))
        return NULL;
    bb_value *v = NULL;
    int rc = bb_value_decode(hash, d, len, NULL, &v, NULL);
    if (rc == BB_ENOMEM)
        bbe__snap_nomem(in);
    else if (rc)
        bbe__snap_fail(in, at, "a value that does not decode");
    return rc ? NULL : v;
}

bb_value *bbe__snap_value(bbe__snap_in *in)
{
    size_t at = in->r.pos;
    bb_value *v = bbe__snap_value_or_null(in);
    if (!v && !in->r.failed)
        bbe__snap_fail(in, at, "no value where one is needed");
    return v;
}

bool bbe__snap_peer(bbe__snap_in *in, bb_peerid *p)
{
    size_t at = in->r.pos, len;
    const uint8_t *d = bbe__snap_bytes(in, &len);
    if (in->r.failed)
        return false;
    if (bb_peerid_from_bytes(d, len, p, NULL) != BB_OK) {
        bbe__snap_fail(in, at, "not a PeerId");
        return false;
    }
    return true;
}

bbe__exec *bbe__snap_frame_or_null(bbe__snap_in *in)
{
    uint64_t v = bbe__snap_max(in, in->n_frames, "a frame index past the executions");
    return v ? in->frames[v - 1] : NULL;
}

bbe__exec *bbe__snap_frame(bbe__snap_in *in)
{
    size_t at = in->r.pos;
    bbe__exec *x = bbe__snap_frame_or_null(in);
    if (!x && !in->r.failed)
        bbe__snap_fail(in, at, "no frame where one is needed");
    return x;
}

bool bbe__snap_op_in_frame(bb_engine *e, bbe__snap_in *in, uint32_t *op, bbe__exec **x)
{
    size_t at = in->r.pos;
    *op = bbe__snap_index(in, e->n_ops, "an op index out of range");
    *x = bbe__snap_frame(in);
    if (in->r.failed)
        return false;
    if (e->ops[*op].graph != (*x)->g->index) {
        bbe__snap_fail(in, at, "an op that is not in its frame's graph");
        return false;
    }
    return true;
}

void bbe__snap_waiters(bb_engine *e, bbe__snap_in *in, void *arr)
{
    BBE__ARR(struct bbe__waiter) *a = arr;
    size_t n = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many waiters");
    for (size_t i = 0; i < n; i++) {
        struct bbe__waiter wt;
        if (!bbe__snap_op_in_frame(e, in, &wt.op, &wt.x))
            return;
        if (BBE__ARR_PUSH(a, wt)) {
            bbe__snap_nomem(in);
            return;
        }
        wt.x->refs++;
        e->pending_async++;
    }
}

bbe__in_value *bbe__snap_in_values(bb_engine *e, bbe__snap_in *in, uint32_t graph,
                                   uint32_t *n_out)
{
    size_t n = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many input values");
    bbe__in_value *v = calloc(n ? n : 1, sizeof *v);
    *n_out = 0;
    if (!v) {
        bbe__snap_nomem(in);
        return NULL;
    }
    for (size_t i = 0; i < n && !in->r.failed; i++) {
        v[i].site = bbe__snap_index(in, e->graphs[graph].n_sites, "a site index out of range");
        v[i].charged = (size_t)bbe__snap_u(in);
        v[i].v = bbe__snap_value(in);
    }
    if (in->r.failed) {
        for (size_t i = 0; i < n; i++)
            bb_value_unref(v[i].v);
        free(v);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        atomic_fetch_add(&e->bytes_in_flight, v[i].charged);
    *n_out = (uint32_t)n;
    return v;
}

/* ---- snapshot ----------------------------------------------------------------------------- */

int bb_engine_snapshot(bb_engine *e, uint8_t **out, size_t *out_len, bb_error *err)
{
    if (!e->installed)
        return bb_error_set(err, BB_ESTATE, "snapshot: nothing installed");
    if (atomic_load(&e->in_cycle))
        return bb_error_set(err, BB_ESTATE, "snapshot: inside a poll");
    bb_writer file = {0};
    bbe__snap_out o = {0};
    if (bbe__snap_number_frames(e, &o.frames))
        file.failed = true;
    bb_writer_put(&file, MAGIC, MAGIC_LEN);
    int rc = BB_OK;
    for (size_t i = 0; i < bbe__snap_n_sections && !rc; i++) {
        const bbe__snap_section *s = &bbe__snap_sections[i];
        bb_writer_reset(&o.w);
        rc = s->write(e, &o, err);
        file.failed |= o.w.failed;
        bb_writer_put_uvarint(&file, s->tag);
        bb_writer_put_uvarint(&file, s->version);
        bb_writer_put_delimited(&file, o.w.data, o.w.len);
    }
    bb_writer_free(&o.w);
    bbe__map_free(&o.frames);
    if (rc) {
        bb_writer_free(&file);
        return rc;
    }
    if (!bb_writer_take(&file, out, out_len))
        return bb_error_set(err, BB_ENOMEM, "snapshot: out of memory (or an unencodable value)");
    return BB_OK;
}

/* ---- restore ------------------------------------------------------------------------------ */

/* Drop every restored transient structure (restore failed). */
static void reset_transient(bb_engine *e)
{
    bbe__ingress_free(e);
    bbe__timers_free(e);
    bbe__chunk_fold_forget(e); /* before the batches it names go */
    bbe__wire_free(e);
    bbe__control_free(e);
    bbe__exec_free_all(e);
    bbe__boot_free(e);
    for (uint32_t i = 0; i < e->boot.n_mods; i++)
        e->boot.mods[i].done = false;
    e->boot.all_armed = e->boot.all_blocked = e->boot.pulses_fired = false;
    e->boot.next_idx = 0;
    bbe__peers_free(e);
    for (uint32_t i = 0; i < e->n_semas; i++) {
        e->semas[i].held = 0;
        e->semas[i].waiters.n = 0;
    }
    for (uint32_t i = 0; i < e->n_queues; i++) {
        bbe__queue *q = &e->queues[i];
        for (size_t k = q->head; k < q->items.n; k++)
            bb_value_unref(q->items.v[k]);
        q->items.n = q->head = 0;
        q->waiters.n = 0;
    }
    for (uint32_t i = 0; i < e->n_holds; i++) {
        bb_value_unref(e->holds[i].v);
        e->holds[i].v = NULL;
    }
    for (size_t i = 0; i < e->rec_n; i++)
        bb_value_unref(e->records[(e->rec_head + i) % e->caps.record_ring].v);
    e->rec_n = e->rec_head = 0;
    for (size_t i = 0; i < e->loopback.n; i++)
        free(e->loopback.v[i].bytes);
    e->loopback.n = 0;
    e->dedup_n = e->dedup_head = 0;
    bbe__map_free(&e->dedup_set);
    e->bus_n = e->bus_head = 0;
    e->pending_async = 0;
    e->inreq_n = e->inreq_head = 0;
    atomic_store(&e->bytes_in_flight, 0);
}

/* "BBSNAP3\0", or an error naming what the bytes are instead. */
static int check_magic(const uint8_t *data, size_t len, bb_error *err)
{
    if (data && len >= MAGIC_LEN && memcmp(data, MAGIC, MAGIC_LEN) == 0)
        return BB_OK;
    if (data && len >= MAGIC_LEN && memcmp(data, MAGIC, 6) == 0 && data[6] >= '1' &&
        data[6] <= '9' && data[7] == 0)
        return bb_error_set(err, BB_EUNSUPPORTED,
                            "restore: snapshot format %.7s is %s than this engine's (%s) and "
                            "cannot be restored",
                            (const char *)data, data[6] < MAGIC[6] ? "older" : "newer", MAGIC);
    return bb_error_set(err, BB_EDECODE, "restore: not an engine snapshot");
}

static const char *section_name(uint64_t tag)
{
    for (size_t i = 0; i < bbe__snap_n_sections; i++)
        if (bbe__snap_sections[i].tag == tag)
            return bbe__snap_sections[i].name;
    return NULL;
}

/* The header of section s at file->pos (tag, version, length): *body is
 * its body, which file is moved past. */
static int section_open(bb_reader *file, const bbe__snap_section *s, bb_reader *body,
                        bb_error *err)
{
    size_t at = file->pos;
    uint64_t tag, version, len;
    if (!bb_reader_uvarint(file, &tag) || !bb_reader_uvarint(file, &version) ||
        !bb_reader_uvarint(file, &len)) {
        if (file->status == BB_ETRUNC)
            return bb_error_set(err, BB_ETRUNC, "restore: the snapshot ends at byte %zu, in the "
                                "header of section '%s'", file->len, s->name);
        return bb_error_set(err, BB_EDECODE, "restore: the header of section '%s' (byte %zu) "
                            "is malformed: %s", s->name, at, file->why);
    }
    if (tag != s->tag) {
        const char *other = section_name(tag);
        if (other)
            return bb_error_set(err, BB_EDECODE, "restore: byte %zu holds section '%s' where "
                                "section '%s' belongs", at, other, s->name);
        return bb_error_set(err, BB_EDECODE, "restore: byte %zu holds a section of unknown "
                            "tag %llu where section '%s' belongs (a newer engine's?)", at,
                            (unsigned long long)tag, s->name);
    }
    if (version != s->version)
        return bb_error_set(err, BB_EUNSUPPORTED, "restore: section '%s' (byte %zu) has layout "
                            "version %llu; this engine reads version %u", s->name, at,
                            (unsigned long long)version, s->version);
    if (len > bb_reader_left(file))
        return bb_error_set(err, BB_ETRUNC, "restore: section '%s' (byte %zu) declares %llu "
                            "bytes, the snapshot has %zu more", s->name, at,
                            (unsigned long long)len, bb_reader_left(file));
    const uint8_t *d;
    bb_reader_view(file, (size_t)len, &d);
    bb_reader_init(body, d, (size_t)len);
    return BB_OK;
}

/* Read section s from file into e: its reader must take the whole body. */
static int restore_section(bb_engine *e, const bbe__snap_section *s, bb_reader *file,
                           bbe__snap_in *in, bb_error *err)
{
    int rc = section_open(file, s, &in->r, err);
    if (rc || (rc = s->read(e, in, err)))
        return rc;
    size_t base = file->pos - in->r.len; /* the body's offset in the snapshot */
    if (in->oom)
        return bb_error_set(err, BB_ENOMEM, "restore: out of memory in section '%s'", s->name);
    if (in->r.failed)
        return bb_error_set(err, in->r.status == BB_ETRUNC ? BB_ETRUNC : BB_EDECODE,
                            "restore: section '%s' malformed at byte %zu of %zu (byte %zu of "
                            "the snapshot): %s", s->name, in->r.fail_at, in->r.len,
                            base + in->r.fail_at, in->r.why);
    size_t left = bb_reader_left(&in->r);
    if (left)
        return bb_error_set(err, BB_EDECODE, "restore: section '%s' ends with %zu byte%s its "
                            "reader does not know (byte %zu of %zu, byte %zu of the snapshot)",
                            s->name, left, left == 1 ? "" : "s", in->r.pos, in->r.len,
                            base + in->r.pos);
    return BB_OK;
}

static int restore_sections(bb_engine *e, const uint8_t *data, size_t len, bbe__snap_in *in,
                            bb_error *err)
{
    bb_reader file;
    bb_reader_init(&file, data, len);
    file.pos = MAGIC_LEN;
    for (size_t i = 0; i < bbe__snap_n_sections; i++) {
        int rc = restore_section(e, &bbe__snap_sections[i], &file, in, err);
        if (rc)
            return rc;
    }
    size_t left = bb_reader_left(&file);
    if (left)
        return bb_error_set(err, BB_EDECODE, "restore: %zu byte%s after the last section (byte "
                            "%zu)", left, left == 1 ? "" : "s", file.pos);
    /* an execution nothing refers to any more is finished */
    for (size_t i = 0; i < in->n_frames; i++) {
        if (!in->frames[i]->refs) {
            in->frames[i]->refs = 1;
            bbe__exec_unref(e, in->frames[i]);
        }
    }
    e->incarnation = in->incarnation + 1;
    return BB_OK;
}

int bb_engine_restore(bb_engine *e, const uint8_t *data, size_t len, bb_error *err)
{
    if (!e->installed)
        return bb_error_set(err, BB_ESTATE, "restore: install the same targets first");
    if (e->ran || e->live || e->fr_n || e->timers.n)
        return bb_error_set(err, BB_ESTATE, "restore: the engine has already run");
    int rc = check_magic(data, len, err);
    if (rc)
        return rc;
    bbe__snap_in in = {0};
    rc = restore_sections(e, data, len, &in, err);
    free(in.frames);
    if (rc)
        reset_transient(e);
    return rc;
}
