/*
 * store.c — the records a Kademlia node keeps for the network: small
 * values (at most max_value bytes) under a 256-bit key, each with an
 * expiry. At most max_records; a full store drops the expired first and
 * then refuses newcomers (a Store from a peer cannot grow memory without
 * bound). A value stored again replaces the old one and its expiry.
 * Expired records are dropped when looked up and on every refresh tick.
 */
#include <stdlib.h>
#include <string.h>

#include "dht.h"

void kad_store_expire(kademlia *kd, uint64_t now)
{
    for (size_t i = 0; i < kd->n_records;) {
        if (kd->records[i].expires_ns <= now) {
            free(kd->records[i].value);
            kd->records[i] = kd->records[--kd->n_records];
        } else {
            i++;
        }
    }
}

static kad_record *find(kademlia *kd, const kad_key *key)
{
    for (size_t i = 0; i < kd->n_records; i++)
        if (!memcmp(kd->records[i].key.b, key->b, KAD_KEY))
            return &kd->records[i];
    return NULL;
}

int kad_store_put(kademlia *kd, const kad_key *key, const uint8_t *value, size_t len,
                  uint64_t ttl_ms, uint64_t now, bb_error *err)
{
    if (len > kd->max_value)
        return bb_error_set(err, BB_ELIMIT, "%s: a value of %zu bytes (max_value_bytes %zu)",
                            kd->who, len, kd->max_value);
    kad_record *r = find(kd, key);
    if (!r) {
        if (kd->n_records == kd->max_records)
            kad_store_expire(kd, now);
        if (kd->n_records == kd->max_records)
            return bb_error_set(err, BB_EFULL, "%s: the store holds %zu records (max_records)",
                                kd->who, kd->n_records);
        r = &kd->records[kd->n_records];
        memset(r, 0, sizeof *r);
        r->key = *key;
    }
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", kd->who);
    memcpy(copy, value, len);
    if (r == &kd->records[kd->n_records])
        kd->n_records++;
    free(r->value);
    r->value = copy;
    r->len = (uint32_t)len;
    uint64_t ttl = ttl_ms < kd->record_ttl_ms ? ttl_ms : kd->record_ttl_ms;
    r->expires_ns = now + ttl * KAD_MS;
    return BB_OK;
}

const kad_record *kad_store_get(kademlia *kd, const kad_key *key, uint64_t now)
{
    kad_record *r = find(kd, key);
    if (r && r->expires_ns <= now) {
        kad_store_expire(kd, now);
        return NULL;
    }
    return r;
}

void kad_store_free(kademlia *kd)
{
    for (size_t i = 0; i < kd->n_records; i++)
        free(kd->records[i].value);
    kd->n_records = 0;
}
