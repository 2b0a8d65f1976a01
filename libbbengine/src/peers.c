/*
 * peers.c — the per-node peer table: the AddressBook (ADDRESSING.md:
 * ordered address list per PeerId, capped), connection state and announced
 * targets (for ctx->peers_running), the BackoffTable (10 ms doubling to
 * 60 s, cleared on success) and the PeerGovernor (blocklist / allowlist,
 * consecutive-failure threshold -> PeerDown / PeerUp steps), plus the
 * ai.bytesandbrains.address_book opset (Insert, InsertMany, Lookup).
 *
 * Entries are found by an open-addressing index over FNV-1a of the PeerId
 * bytes with full byte comparison, so colliding ids cannot alias.
 */
#include <stdlib.h>
#include <string.h>

#include "bb/multiaddr.h"
#include "libbbengine/src/snapshot.h"
#include "libbbengine/src/syscalls.h"

#define MAX_TARGETS 64
#define MAX_TARGET_LEN 256

static uint64_t peer_hash(const bb_peerid *id) { return bbe__hash_bytes(id->bytes, id->len); }

bbe__peer *bbe__peer_find(const bb_engine *e, const bb_peerid *id)
{
    /* A message names its peer several times on its way (sender checks,
     * address merge, gates, the answer, the transport's report): the last
     * entry found is tried first. The cache is a hint: checked, never
     * trusted, so no table change has to invalidate it. */
    bbe__peers *t = (bbe__peers *)&e->peers;
    if (!t->nslots || !id)
        return NULL;
    if (t->last < t->n && t->v[t->last].live && bb_peerid_equal(&t->v[t->last].id, id))
        return &t->v[t->last];
    for (size_t i = peer_hash(id) & (t->nslots - 1), k = 0; k < t->nslots;
         i = (i + 1) & (t->nslots - 1), k++) {
        int32_t s = t->slots[i];
        if (s == -1)
            return NULL;
        if (s >= 0 && bb_peerid_equal(&t->v[s].id, id)) {
            t->last = (uint32_t)s;
            return &t->v[s];
        }
    }
    return NULL;
}

static int reindex(bbe__peers *t, size_t nslots)
{
    int32_t *slots = malloc(nslots * sizeof *slots);
    if (!slots)
        return BB_ENOMEM;
    for (size_t i = 0; i < nslots; i++)
        slots[i] = -1;
    for (size_t k = 0; k < t->n; k++) {
        if (!t->v[k].live)
            continue;
        size_t i = (size_t)t->v[k].id_hash & (nslots - 1);
        while (slots[i] != -1)
            i = (i + 1) & (nslots - 1);
        slots[i] = (int32_t)k;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    t->tomb = 0;
    return 0;
}

static size_t live_count(const bbe__peers *t) { return t->n - t->n_free; }

bbe__peer *bbe__peer_get(bb_engine *e, const bb_peerid *id)
{
    bbe__peer *p = bbe__peer_find(e, id);
    if (p)
        return p;
    bbe__peers *t = &e->peers;
    if (live_count(t) >= e->caps.address_book_max_peers || id->len == 0)
        return NULL;
    if ((live_count(t) + t->tomb + 1) * 10 >= t->nslots * 7) {
        size_t ns = t->nslots ? t->nslots : 16;
        while ((live_count(t) + 1) * 10 >= ns * 5)
            ns *= 2;
        if (reindex(t, ns))
            return NULL;
    }
    uint32_t idx;
    if (t->n_free) {
        idx = t->free_idx[--t->n_free];
    } else {
        if (t->n == t->cap && bbe__arr_reserve(t, sizeof *t->v, t->n + 1))
            return NULL;
        idx = (uint32_t)t->n++;
    }
    p = &t->v[idx];
    memset(p, 0, sizeof *p);
    p->id = *id;
    p->id_hash = peer_hash(id);
    p->live = true;
    size_t i = (size_t)p->id_hash & (t->nslots - 1);
    while (t->slots[i] >= 0)
        i = (i + 1) & (t->nslots - 1);
    if (t->slots[i] == -2)
        t->tomb--;
    t->slots[i] = (int32_t)idx;
    return p;
}

static void peer_clear(bbe__peers *t, bbe__peer *p)
{
    for (uint32_t i = 0; i < p->n_addrs; i++)
        free((void *)p->addrs[i].data);
    free(p->addrs);
    for (uint32_t i = 0; i < p->n_targets; i++)
        free(p->targets[i]);
    free(p->targets);
    if (p->n_addrs)
        t->n_addr_peers--;
    if (p->allowed)
        t->n_allowed--;
    p->addrs = NULL;
    p->targets = NULL;
    p->n_addrs = p->n_targets = 0;
    bb_value_unref(p->id_value);
    p->id_value = NULL;
}

int bb_engine_remove_peer(bb_engine *e, const bb_peerid *peer)
{
    bbe__peers *t = &e->peers;
    bbe__peer *p = bbe__peer_find(e, peer);
    if (!p)
        return BB_ENOTFOUND;
    uint32_t idx = (uint32_t)(p - t->v);
    for (size_t i = peer_hash(peer) & (t->nslots - 1);; i = (i + 1) & (t->nslots - 1)) {
        if (t->slots[i] == (int32_t)idx) {
            t->slots[i] = -2;
            t->tomb++;
            break;
        }
    }
    peer_clear(t, p);
    p->live = false;
    uint32_t *f = realloc(t->free_idx, (t->n_free + 1) * sizeof *f);
    if (f) {
        t->free_idx = f;
        t->free_idx[t->n_free++] = idx;
    }
    return BB_OK;
}

void bbe__peers_free(bb_engine *e)
{
    bbe__peers *t = &e->peers;
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].live)
            peer_clear(t, &t->v[i]);
    free(t->v);
    free(t->slots);
    free(t->free_idx);
    memset(t, 0, sizeof *t);
}

int bbe__peer_add_addr(bb_engine *e, bbe__peer *p, const uint8_t *a, size_t len)
{
    if (!a || !len)
        return BB_EPARSE;
    /* known already (every envelope repeats its sender's): the stored copy
     * was validated when it was added */
    for (uint32_t i = 0; i < p->n_addrs; i++)
        if (p->addrs[i].len == len && memcmp(p->addrs[i].data, a, len) == 0)
            return BB_OK;
    if (bb_multiaddr_validate(a, len, NULL) != BB_OK)
        return BB_EPARSE;
    if (p->n_addrs >= e->caps.address_book_max_addrs)
        return BB_EFULL;
    bb_engine_addr *na = realloc(p->addrs, (p->n_addrs + 1) * sizeof *na);
    if (!na)
        return BB_ENOMEM;
    p->addrs = na;
    uint8_t *d = malloc(len);
    if (!d)
        return BB_ENOMEM;
    memcpy(d, a, len);
    p->addrs[p->n_addrs].data = d;
    p->addrs[p->n_addrs].len = len;
    p->addrs_gen++;
    if (p->n_addrs++ == 0)
        e->peers.n_addr_peers++;
    return BB_OK;
}

int bb_engine_add_peer(bb_engine *e, const bb_peerid *peer, const bb_engine_addr *addrs, size_t n,
                       bb_error *err)
{
    if (!peer || bb_peerid_validate(peer->bytes, peer->len, NULL) != BB_OK)
        return bb_error_set(err, BB_EINVAL, "add_peer: invalid PeerId");
    bbe__peer *p = bbe__peer_get(e, peer);
    if (!p)
        return bb_error_set(err, BB_EFULL, "add_peer: address book full (%zu peers)",
                            e->caps.address_book_max_peers);
    for (size_t i = 0; i < n; i++) {
        int rc = bbe__peer_add_addr(e, p, addrs[i].data, addrs[i].len);
        if (rc == BB_EPARSE)
            return bb_error_set(err, rc, "add_peer: address %zu is not a valid multiaddr", i);
        if (rc)
            return bb_error_set(err, rc, "add_peer: %s (cap %zu addresses per peer)",
                                rc == BB_EFULL ? "peer full" : "out of memory",
                                e->caps.address_book_max_addrs);
    }
    return BB_OK;
}

/* ---- peers other nodes teach this one ------------------------------------------------- */

/* Make room for one more peer taught by key: true when there is room
 * (made by dropping the oldest of its peers that is not connected and on
 * no access list), false when every one of its share is connected. */
static bool taught_room(bb_engine *e, uint64_t key)
{
    bbe__peers *t = &e->peers;
    size_t n = 0;
    bbe__peer *oldest = NULL;
    for (size_t i = 0; i < t->n; i++) {
        bbe__peer *p = &t->v[i];
        if (!p->live || p->taught_by != key)
            continue;
        n++;
        if (!p->connected && !p->allowed && !p->blocked &&
            (!oldest || p->taught_seq < oldest->taught_seq))
            oldest = p;
    }
    if (n < BBE__TAUGHT_MAX_PER_PEER)
        return true;
    if (!oldest)
        return false;
    bb_peerid id = oldest->id;
    bb_engine_remove_peer(e, &id);
    e->c[BBE__C_TAUGHT_REPLACED]++;
    return true;
}

int bbe__peer_add_taught(bb_engine *e, const bb_peerid *teacher, const bb_peerid *peer,
                         const bb_engine_addr *addrs, size_t n, bb_error *err)
{
    uint64_t key = peer_hash(teacher) | 1; /* 0 means "taught by nobody" */
    if (!taught_room(e, key))
        return bb_error_set(err, BB_EFULL,
                            "add_peer: the %d peers one node may add are all connected",
                            BBE__TAUGHT_MAX_PER_PEER);
    int rc = bb_engine_add_peer(e, peer, addrs, n, err);
    bbe__peer *p = rc == BB_OK ? bbe__peer_find(e, peer) : NULL;
    if (p && !p->taught_by && !p->connected) {
        p->taught_by = key;
        p->taught_seq = ++e->peers.taught_seq;
    }
    return rc;
}

size_t bb_engine_peer_addrs(const bb_engine *e, const bb_peerid *peer, const bb_engine_addr **out)
{
    const bbe__peer *p = bbe__peer_find(e, peer);
    if (out)
        *out = p ? p->addrs : NULL;
    return p ? p->n_addrs : 0;
}

size_t bb_engine_peer_count(const bb_engine *e) { return e->peers.n_addr_peers; }

int bb_engine_peer_connected(bb_engine *e, const bb_peerid *peer, const char *const *targets,
                             size_t n, bb_error *err)
{
    if (n > MAX_TARGETS)
        return bb_error_set(err, BB_ELIMIT, "peer_connected: %zu targets (max %d)", n, MAX_TARGETS);
    bbe__peer *p = peer ? bbe__peer_get(e, peer) : NULL;
    if (!p)
        return bb_error_set(err, BB_EFULL, "peer_connected: address book full or bad peer");
    char **t = n ? calloc(n, sizeof *t) : NULL;
    if (n && !t)
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (!targets[i] || strlen(targets[i]) > MAX_TARGET_LEN || !(t[i] = strdup(targets[i]))) {
            for (size_t k = 0; k < i; k++)
                free(t[k]);
            free(t);
            return bb_error_set(err, BB_EINVAL, "peer_connected: bad target %zu", i);
        }
    }
    for (uint32_t i = 0; i < p->n_targets; i++)
        free(p->targets[i]);
    free(p->targets);
    p->targets = t;
    p->n_targets = (uint32_t)n;
    p->connected = true;
    p->taught_by = 0; /* proven by its own channel now: the host bounds those */
    p->addrs_told = false; /* the new connection's first envelope tells them */
    bbe__peer_success(e, peer); /* a (re)connect is proof of life: PeerUp if it was down */
    bbe__streams_peer_connected(e, peer);
    return BB_OK;
}

void bb_engine_peer_disconnected(bb_engine *e, const bb_peerid *peer)
{
    bbe__peer *p = bbe__peer_find(e, peer);
    if (p)
        p->connected = p->addrs_told = false;
}

/* ---- backoff table + governor (COMPILER.md "State-machine summary") ----------- */

static uint64_t delay_for(const bb_engine *e, uint32_t attempts)
{
    uint64_t d = e->caps.backoff_base_ns;
    for (uint32_t i = 1; i < attempts && d < e->caps.backoff_max_ns; i++)
        d *= 2;
    return d < e->caps.backoff_max_ns ? d : e->caps.backoff_max_ns;
}

/* PeerDown / PeerUp: a step for the host, an event for the bus. */
static bool health_changed(bb_engine *e, const bb_peerid *id, bb_step_kind kind, uint64_t event)
{
    bb_step *st = bbe__step_push(e, kind, 0);
    if (st)
        st->u.peer.peer = *id;
    bbe__bus_publish(e, event);
    return true;
}

bool bbe__peer_failure(bb_engine *e, const bb_peerid *id)
{
    bbe__peer *p = bbe__peer_get(e, id);
    if (!p)
        return false;
    if (p->attempts < UINT32_MAX)
        p->attempts++;
    p->next_retry_ns = e->now_ns + delay_for(e, p->attempts);
    if (p->failures < UINT32_MAX)
        p->failures++;
    if (p->down || p->failures < e->caps.peer_failure_threshold)
        return false;
    p->down = true;
    /* down: out of every target view for the longest backoff, then offered
     * again (half-open, ctx.c) so a peer that only stalled comes back */
    p->next_retry_ns = e->now_ns + e->caps.backoff_max_ns;
    return health_changed(e, id, BB_STEP_PEER_DOWN, BB_EVENT_PEER_DOWN);
}

bool bbe__peer_success(bb_engine *e, const bb_peerid *id)
{
    bbe__peer *p = bbe__peer_find(e, id);
    if (!p)
        return false;
    p->attempts = 0;
    p->next_retry_ns = 0;
    p->failures = 0;
    if (!p->down)
        return false;
    p->down = false;
    return health_changed(e, id, BB_STEP_PEER_UP, BB_EVENT_PEER_UP);
}

bool bb_engine_report_send(bb_engine *e, const bb_peerid *peer, bool ok)
{
    if (!peer)
        return false;
    if (!ok) {
        bbe__control_unreachable(e, peer); /* its requests need not wait for their deadline */
        bbe__peer *p = bbe__peer_find(e, peer);
        if (p) /* the lost envelope may have been the one that told the addresses */
            p->addrs_told = false;
    }
    return ok ? bbe__peer_success(e, peer) : bbe__peer_failure(e, peer);
}

bool bbe__peer_should_retry(const bb_engine *e, const bb_peerid *id)
{
    const bbe__peer *p = bbe__peer_find(e, id);
    return !p || p->attempts == 0 || e->now_ns >= p->next_retry_ns;
}

const char *bbe__peer_check(const bb_engine *e, const bb_peerid *id, bool outbound)
{
    const bbe__peer *p = bbe__peer_find(e, id);
    if (p && p->blocked)
        return "blocklisted";
    if (e->peers.n_allowed && !(p && p->allowed))
        return "not_allowlisted";
    if (outbound && !bbe__peer_should_retry(e, id))
        return "cooldown";
    return NULL;
}

int bb_engine_block_peer(bb_engine *e, const bb_peerid *peer, bool blocked)
{
    bbe__peer *p = peer ? bbe__peer_get(e, peer) : NULL;
    if (!p)
        return BB_EFULL;
    p->blocked = blocked;
    return BB_OK;
}

int bb_engine_allow_peer(bb_engine *e, const bb_peerid *peer, bool allowed)
{
    bbe__peer *p = peer ? bbe__peer_get(e, peer) : NULL;
    if (!p)
        return BB_EFULL;
    if (p->allowed != allowed)
        e->peers.n_allowed += allowed ? 1 : (size_t)-1;
    p->allowed = allowed;
    return BB_OK;
}

const char *bb_engine_peer_access(const bb_engine *e, const bb_peerid *peer)
{
    return peer ? bbe__peer_check(e, peer, false) : NULL;
}

static void peer_info(const bbe__peer *p, bb_engine_peer_info *out)
{
    out->peer = p->id;
    out->allowed = p->allowed;
    out->addrs = p->addrs;
    out->n_addrs = p->n_addrs;
    out->connected = p->connected;
    out->down = p->down;
    out->blocked = p->blocked;
    out->failures = p->failures;
    out->attempts = p->attempts;
    out->next_retry_ns = p->attempts ? p->next_retry_ns : 0;
    out->rtt_ns = p->rtt_ns;
}

void bb_engine_peer_foreach(const bb_engine *e,
                            void (*fn)(void *ud, const bb_engine_peer_info *p), void *ud)
{
    for (size_t k = 0; k < e->peers.n; k++) {
        if (!e->peers.v[k].live)
            continue;
        bb_engine_peer_info info;
        peer_info(&e->peers.v[k], &info);
        fn(ud, &info);
    }
}

bool bb_engine_peer_info_get(const bb_engine *e, const bb_peerid *peer, bb_engine_peer_info *out)
{
    const bbe__peer *p = bbe__peer_find(e, peer);
    if (p)
        peer_info(p, out);
    return p != NULL;
}

/* ---- values ----------------------------------------------------------------------- */

bool bbe__peerid_from_value(const bb_value *v, bb_peerid *out)
{
    if (!v || !v->type || v->type->kind != BB_VK_PEER_ID)
        return false;
    return bb_peerid_from_bytes(v->u.bytes.data, v->u.bytes.len, out, NULL) == BB_OK;
}

bb_value *bbe__peerid_value(const bb_peerid *id)
{
    return bb_value_bytes(&BB_TYPE_PEER_ID, id->bytes, id->len);
}

bb_value *bbe__peer_cached_id_value(bbe__peer *p)
{
    if (!p->id_value)
        p->id_value = bbe__peerid_value(&p->id);
    return bb_value_ref(p->id_value);
}

bb_value *bbe__addr_vec_value(const bb_engine_addr *a, size_t n)
{
    bb_value **items = malloc((n ? n : 1) * sizeof *items);
    if (!items)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        items[i] = bb_value_bytes(&BB_TYPE_MULTIADDRESS, a[i].data, a[i].len);
        if (!items[i]) {
            for (size_t k = 0; k < i; k++)
                bb_value_unref(items[k]);
            free(items);
            return NULL;
        }
    }
    bb_value *v = bb_value_list(&BB_TYPE_ADDRESS_VEC, items, n);
    free(items);
    return v;
}

/* ---- ai.bytesandbrains.address_book ------------------------------------------------- */

BBE__SYSCALL(bbe__sys_ab_insert)
{
    (void)opi, (void)x, (void)out;
    bb_peerid id;
    if (!bbe__peerid_from_value(in[0], &id))
        return bbe__fail(e, "Insert: input 0 is not a PeerId");
    if (!in[1]->type || in[1]->type->kind != BB_VK_ADDRESS)
        return bbe__fail(e, "Insert: input 1 is not a Multiaddress");
    bbe__peer *p = bbe__peer_get(e, &id);
    if (!p)
        return bbe__fail(e, "Insert: address book Full");
    int rc = bbe__peer_add_addr(e, p, in[1]->u.bytes.data, in[1]->u.bytes.len);
    if (rc)
        return bbe__fail(e, "Insert: %s", rc == BB_EFULL ? "Full" : rc == BB_EPARSE ? "invalid multiaddr" : "out of memory");
    return BBE__R_DONE;
}

BBE__SYSCALL(bbe__sys_ab_insert_many)
{
    (void)opi, (void)x, (void)out;
    bb_peerid id;
    if (!bbe__peerid_from_value(in[0], &id))
        return bbe__fail(e, "InsertMany: input 0 is not a PeerId");
    const bb_value *l = in[1];
    if (!l->type || l->type->kind != BB_VK_ADDRESS_VEC)
        return bbe__fail(e, "InsertMany: input 1 is not an AddressVec");
    if (!l->u.list.n)
        return bbe__fail(e, "InsertMany: empty address list");
    bbe__peer *p = bbe__peer_get(e, &id);
    if (!p)
        return bbe__fail(e, "InsertMany: address book Full");
    for (size_t i = 0; i < l->u.list.n; i++) {
        const bb_value *a = l->u.list.items[i];
        int rc = bbe__peer_add_addr(e, p, a->u.bytes.data, a->u.bytes.len);
        if (rc)
            return bbe__fail(e, "InsertMany: address %zu: %s", i,
                            rc == BB_EFULL ? "Full" : rc == BB_EPARSE ? "invalid multiaddr" : "out of memory");
    }
    return BBE__R_DONE;
}

BBE__SYSCALL(bbe__sys_ab_lookup)
{
    (void)opi, (void)x;
    bb_peerid id;
    if (!bbe__peerid_from_value(in[0], &id))
        return bbe__fail(e, "Lookup: input is not a PeerId");
    const bbe__peer *p = bbe__peer_find(e, &id);
    if (!p)
        return bbe__fail(e, "Lookup: unknown peer");
    if (!p->n_addrs)
        return bbe__fail(e, "Lookup: empty address list");
    out[0] = bbe__addr_vec_value(p->addrs, p->n_addrs);
    return out[0] ? BBE__R_DONE : bbe__fail(e, "Lookup: out of memory");
}

/* ---- snapshot section "peers" ------------------------------------------------------------------
 * Every live entry of the address book: PeerId, addresses (binary
 * multiaddrs, in order), connected, announced targets, backoff (attempts,
 * next retry), governor (failures; flags down, blocked, allowed), RTT and
 * the last piggybacked stamps. Restored entries merge into what the host
 * added before restoring (its configured peers). */

int bbe__snap_write_peers(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    size_t n = 0;
    for (size_t i = 0; i < e->peers.n; i++)
        n += e->peers.v[i].live;
    bbe__snap_put_u(o, n);
    for (size_t i = 0; i < e->peers.n; i++) {
        const bbe__peer *p = &e->peers.v[i];
        if (!p->live)
            continue;
        bbe__snap_put_peer(o, &p->id);
        bbe__snap_put_u(o, p->n_addrs);
        for (uint32_t k = 0; k < p->n_addrs; k++)
            bb_writer_put_delimited(&o->w, p->addrs[k].data, p->addrs[k].len);
        bbe__snap_put_u(o, p->connected);
        bbe__snap_put_u(o, p->n_targets);
        for (uint32_t k = 0; k < p->n_targets; k++)
            bb_writer_put_str(&o->w, p->targets[k]);
        bbe__snap_put_u(o, p->attempts);
        bbe__snap_put_u(o, p->next_retry_ns);
        bbe__snap_put_u(o, p->failures);
        bbe__snap_put_u(o, (uint64_t)p->down | (uint64_t)p->blocked << 1 | (uint64_t)p->allowed << 2);
        bbe__snap_put_u(o, p->rtt_ns);
        bbe__snap_put_u(o, p->last_rx_sent_at);
        bbe__snap_put_u(o, p->last_rx_at);
    }
    return BB_OK;
}

/* p's addresses, merged into its list (each checked as a multiaddr). */
static void read_addrs(bb_engine *e, bbe__snap_in *in, bbe__peer *p)
{
    size_t n = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many addresses");
    for (size_t k = 0; k < n && !in->r.failed; k++) {
        size_t at = in->r.pos, len;
        const uint8_t *a = bbe__snap_bytes(in, &len);
        int rc = in->r.failed ? BB_OK : bbe__peer_add_addr(e, p, a, len);
        if (rc == BB_ENOMEM)
            bbe__snap_nomem(in);
        else if (rc)
            bbe__snap_fail(in, at, "an address the address book refuses");
    }
}

/* p's announced targets, replacing any it had. */
static void read_targets(bbe__snap_in *in, bbe__peer *p)
{
    size_t n = bbe__snap_count(in, MAX_TARGETS, "more targets than a peer may announce");
    char **t = n && !in->r.failed ? calloc(n, sizeof *t) : NULL;
    if (n && !in->r.failed && !t)
        bbe__snap_nomem(in);
    size_t got = 0;
    for (; got < n && !in->r.failed; got++) {
        size_t at = in->r.pos, len;
        const uint8_t *name = bbe__snap_bytes(in, &len);
        if (!in->r.failed && (len > MAX_TARGET_LEN || memchr(name, 0, len)))
            bbe__snap_fail(in, at, "a target name that is not a name");
        if (in->r.failed)
            break;
        if (!(t[got] = strndup((const char *)name, len)))
            bbe__snap_nomem(in);
    }
    if (in->r.failed) {
        for (size_t k = 0; k < got; k++)
            free(t[k]);
        free(t);
        return;
    }
    for (uint32_t k = 0; k < p->n_targets; k++)
        free(p->targets[k]);
    free(p->targets);
    p->targets = t;
    p->n_targets = (uint32_t)n;
}

int bbe__snap_read_peers(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    size_t n = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many peers");
    for (size_t i = 0; i < n && !in->r.failed; i++) {
        size_t at = in->r.pos;
        bb_peerid id;
        if (!bbe__snap_peer(in, &id))
            break;
        bbe__peer *p = bbe__peer_get(e, &id);
        if (!p) {
            bbe__snap_fail(in, at, "more peers than the address book holds");
            break;
        }
        read_addrs(e, in, p);
        p->connected = bbe__snap_flag(in);
        read_targets(in, p);
        p->attempts = (uint32_t)bbe__snap_max(in, UINT32_MAX, "attempts over 32 bits");
        p->next_retry_ns = bbe__snap_u(in);
        p->failures = (uint32_t)bbe__snap_max(in, UINT32_MAX, "failures over 32 bits");
        uint64_t flags = bbe__snap_max(in, 7, "peer flags out of range");
        p->down = flags & 1;
        p->blocked = (flags >> 1) & 1;
        p->rtt_ns = bbe__snap_u(in);
        p->last_rx_sent_at = bbe__snap_u(in);
        p->last_rx_at = bbe__snap_u(in);
        if (!in->r.failed && (flags >> 2) & 1)
            bb_engine_allow_peer(e, &id, true); /* counts it among the allowed */
    }
    return BB_OK;
}
