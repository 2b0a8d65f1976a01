/*
 * fragment_reassembly.c — partial UDP messages (fragment_reassembly.h).
 * Workload: a few messages in flight per peer, so entries are a small
 * array searched linearly, with the last hit checked first (fragments of
 * one message arrive together).
 */
#include "bbd/host/fragment_reassembly.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define RECENT 64 /* completed (source, msg_id) remembered to ignore late copies */

typedef struct entry {
    uint64_t source;
    uint32_t msg_id, total, count, received;
    uint16_t chunk;
    uint64_t started_ms;
    size_t charged;
    uint8_t *data;
    uint8_t *bitmap;
} entry;

typedef struct recent {
    uint64_t source;
    uint32_t msg_id;
    bool used;
} recent;

struct bbd_reasm {
    bbd_reasm_config cfg;
    entry **entries;
    size_t n;
    size_t last;
    size_t charged;
    recent recent[RECENT];
    size_t recent_next;
};

bbd_reasm *bbd_reasm_new(const bbd_reasm_config *cfg)
{
    bbd_reasm *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->cfg = *cfg;
    if (r->cfg.max_messages == 0)
        r->cfg.max_messages = 1;
    r->entries = calloc(r->cfg.max_messages, sizeof *r->entries);
    if (!r->entries) {
        free(r);
        return NULL;
    }
    return r;
}

static void entry_free(bbd_reasm *r, size_t i)
{
    entry *e = r->entries[i];
    r->charged -= e->charged;
    free(e->data);
    free(e->bitmap);
    free(e);
    r->entries[i] = r->entries[--r->n];
    r->last = 0;
}

void bbd_reasm_free(bbd_reasm *r)
{
    if (!r)
        return;
    while (r->n)
        entry_free(r, r->n - 1);
    free(r->entries);
    free(r);
}

static bool recently_completed(const bbd_reasm *r, uint64_t source, uint32_t msg_id)
{
    for (size_t i = 0; i < RECENT; i++)
        if (r->recent[i].used && r->recent[i].source == source &&
            r->recent[i].msg_id == msg_id)
            return true;
    return false;
}

static entry *find(bbd_reasm *r, uint64_t source, uint32_t msg_id, size_t *idx)
{
    if (r->last < r->n && r->entries[r->last]->source == source &&
        r->entries[r->last]->msg_id == msg_id) {
        *idx = r->last;
        return r->entries[r->last];
    }
    for (size_t i = 0; i < r->n; i++)
        if (r->entries[i]->source == source && r->entries[i]->msg_id == msg_id) {
            r->last = *idx = i;
            return r->entries[i];
        }
    return NULL;
}

static int start(bbd_reasm *r, uint64_t source, const bbd_dgram *f, uint64_t now_ms,
                 entry **out, bb_error *err)
{
    size_t bitmap = (f->count + 7u) / 8u;
    size_t charge = (size_t)f->total + bitmap + sizeof(entry);
    if (r->n == r->cfg.max_messages)
        return bb_error_set(err, BB_ELIMIT,
                            "reassembly: %zu partial envelopes already (the limit)", r->n);
    if (charge > r->cfg.budget_bytes - r->charged || r->charged > r->cfg.budget_bytes)
        return bb_error_set(err, BB_EBUDGET,
                            "reassembly: envelope of %u bytes does not fit the budget "
                            "(%zu of %zu bytes in use)",
                            f->total, r->charged, r->cfg.budget_bytes);
    entry *e = calloc(1, sizeof *e);
    if (!e || !(e->data = malloc(f->total)) || !(e->bitmap = calloc(bitmap, 1))) {
        if (e)
            free(e->data);
        free(e);
        return bb_error_set(err, BB_ENOMEM, "reassembly: out of memory for %u bytes",
                            f->total);
    }
    e->source = source;
    e->msg_id = f->msg_id;
    e->total = f->total;
    e->chunk = f->chunk;
    e->count = f->count;
    e->started_ms = now_ms;
    e->charged = charge;
    r->charged += charge;
    r->last = r->n;
    r->entries[r->n++] = e;
    *out = e;
    return BB_OK;
}

int bbd_reasm_add(bbd_reasm *r, uint64_t source, const bbd_dgram *f, uint64_t now_ms,
                  bbd_reasm_result *res, uint8_t **msg, size_t *len, bb_error *err)
{
    *res = BBD_REASM_PARTIAL;
    size_t idx = 0;
    entry *e = find(r, source, f->msg_id, &idx);
    if (!e) {
        if (recently_completed(r, source, f->msg_id)) {
            *res = BBD_REASM_DUPLICATE;
            return BB_OK;
        }
        int rc = start(r, source, f, now_ms, &e, err);
        if (rc)
            return rc;
        idx = r->n - 1;
    } else if (e->total != f->total || e->chunk != f->chunk) {
        return bb_error_set(err, BB_EPARSE,
                            "reassembly: fragment of message %u says %u bytes in chunks of "
                            "%u, earlier ones %u in chunks of %u",
                            f->msg_id, f->total, f->chunk, e->total, e->chunk);
    }
    uint8_t bit = (uint8_t)(1u << (f->index % 8));
    if (e->bitmap[f->index / 8] & bit) {
        *res = BBD_REASM_DUPLICATE;
        return BB_OK;
    }
    e->bitmap[f->index / 8] |= bit;
    memcpy(e->data + (size_t)f->index * e->chunk, f->body, f->body_len);
    if (++e->received < e->count)
        return BB_OK;

    *res = BBD_REASM_COMPLETE;
    *msg = e->data;
    *len = e->total;
    e->data = NULL;
    r->recent[r->recent_next] = (recent){source, f->msg_id, true};
    r->recent_next = (r->recent_next + 1) % RECENT;
    entry_free(r, idx);
    return BB_OK;
}

size_t bbd_reasm_expire(bbd_reasm *r, uint64_t now_ms)
{
    size_t dropped = 0;
    for (size_t i = r->n; i-- > 0;)
        if (now_ms - r->entries[i]->started_ms >= r->cfg.timeout_ms) {
            entry_free(r, i);
            dropped++;
        }
    return dropped;
}

size_t bbd_reasm_drop_source(bbd_reasm *r, uint64_t source)
{
    size_t dropped = 0;
    for (size_t i = r->n; i-- > 0;)
        if (r->entries[i]->source == source) {
            entry_free(r, i);
            dropped++;
        }
    for (size_t i = 0; i < RECENT; i++)
        if (r->recent[i].source == source)
            r->recent[i].used = false;
    return dropped;
}

size_t bbd_reasm_bytes(const bbd_reasm *r)
{
    return r->charged;
}

size_t bbd_reasm_pending(const bbd_reasm *r)
{
    return r->n;
}
