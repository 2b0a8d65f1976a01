/*
 * engine.c — engine lifetime, configuration presets, the byte budget, the
 * seeded RNG, counters and introspection.
 *
 * Everything an engine owns hangs off struct bb_engine; there is no global
 * state. The RNG is splitmix64 seeded from the host's seed, so two engines
 * given the same seed and the same inputs make the same choices.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/engine_internal.h"
#include "libbbengine/src/snapshot.h"

#define MIB ((size_t)1 << 20)
#define KIB ((size_t)1 << 10)

void bb_engine_caps_default(bb_engine_caps *c)
{
    memset(c, 0, sizeof *c);
    c->bus_capacity = 1024;
    c->ingress_capacity = c->bus_capacity * 4;
    c->ingress_byte_budget = 256 * MIB;
    c->max_app_event_bytes = 1 * MIB;
    c->max_invoke_inputs = 100;
    c->max_invoke_bytes = 10 * MIB;
    c->max_completion_result_bytes = 4 * MIB;
    c->max_pending_async = 0;
    c->max_envelope_bytes = 64 * MIB;
    c->max_envelope_fills = 4096;
    c->max_envelope_addresses = 32;
    c->address_book_max_peers = 65536;
    c->address_book_max_addrs = 16;
    c->dedup_window = 8192;
    c->inbound_requests_max = 65536;
    c->record_ring = 1024;
    c->completion_quarantine = 4096;
    c->peer_failure_threshold = 5;
    c->backoff_base_ns = 10000000ULL;
    c->backoff_max_ns = 60000000000ULL;
    c->max_streams_in = 64;
    c->stream_window = 4;
    c->stream_stall_ns = 60000000000ULL;
}

void bb_engine_caps_edge(bb_engine_caps *c)
{
    bb_engine_caps_default(c);
    c->bus_capacity = 256;
    c->ingress_capacity = c->bus_capacity * 4;
    c->ingress_byte_budget = 8 * MIB;
    c->max_app_event_bytes = 64 * KIB;
    c->max_invoke_inputs = 16;
    c->max_invoke_bytes = 256 * KIB;
    c->max_completion_result_bytes = 64 * KIB;
    c->max_envelope_bytes = 1 * MIB;
    c->max_envelope_fills = 256;
    c->max_envelope_addresses = 8;
    c->address_book_max_peers = 1024;
    c->address_book_max_addrs = 4;
    c->dedup_window = 1024;
    c->inbound_requests_max = 1024;
    c->record_ring = 64;
    c->completion_quarantine = 1024;
    c->max_streams_in = 4;
}

void bb_engine_config_init(bb_engine_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    bb_engine_caps_default(&cfg->caps);
}

static const char *const COUNTER_NAMES[BBE__C_COUNT] = {
    [BBE__C_OPS] = "ops.invoked",
    [BBE__C_FRONTIER_PEAK] = "frontier.depth_peak",
    [BBE__C_PENDING_ASYNC] = "pending_async.count",
    [BBE__C_EXEC_LIVE] = "exec.live",
    [BBE__C_ENVELOPES_IN] = "envelopes.in",
    [BBE__C_ENVELOPES_OUT] = "envelopes.out",
    [BBE__C_FILLS_IN] = "fills.in",
    [BBE__C_WIRE_RX_ERRORS] = "wire.receive_errors",
    [BBE__C_UNROUTABLE] = "wire.unroutable",
    [BBE__C_GATE_DENIED] = "gate.denied",
    [BBE__C_OP_FAILED] = "ops.failed",
    [BBE__C_BUS_DROPPED] = "bus.dropped",
    [BBE__C_PEER_RESOLVE_FAILED] = "peer.resolve_failed",
    [BBE__C_APP_EVENTS] = "app.events",
    [BBE__C_BUDGET_HITS] = "cycle.budget_exceeded",
    [BBE__C_APP_INGRESS_ERRORS] = "app_ingress.errors",
    [BBE__C_SEND_REFUSED] = "gate.send_refused",
    [BBE__C_TAUGHT_REPLACED] = "book.taught_replaced",
    [BBE__C_RESPONSES_FOLDED] = "responses.folded",
    [BBE__C_STREAMS_OUT] = "streams.out",
    [BBE__C_STREAMS_IN] = "streams.in",
    [BBE__C_STREAMS_RESUMED] = "streams.resumed",
    [BBE__C_STREAMS_WAITED] = "streams.waited",
    [BBE__C_STREAMS_FAILED] = "streams.failed",
    [BBE__C_DEDUP_DENIED] = "gate.dedup_denied",
    [BBE__C_STREAMS_FOLDED] = "streams.folded",
};

bb_engine *bb_engine_new(const bb_engine_config *cfg, bb_error *err)
{
    if (!cfg) {
        bb_error_set(err, BB_EINVAL, "bb_engine_new: NULL config");
        return NULL;
    }
    if (cfg->peer.len == 0 || bb_peerid_validate(cfg->peer.bytes, cfg->peer.len, NULL) != BB_OK) {
        bb_error_set(err, BB_EINVAL, "bb_engine_new: config.peer is not a valid PeerId");
        return NULL;
    }
    bb_engine *e = calloc(1, sizeof *e);
    if (!e) {
        bb_error_set(err, BB_ENOMEM, "bb_engine_new: out of memory");
        return NULL;
    }
    e->streams_check_at = UINT64_MAX;
    e->cfg = *cfg;
    e->caps = cfg->caps;
    if (!e->caps.bus_capacity)
        e->caps.bus_capacity = 1024;
    if (!e->caps.ingress_capacity)
        e->caps.ingress_capacity = e->caps.bus_capacity * 4;
    if (!e->caps.dedup_window)
        e->caps.dedup_window = 8192;
    if (!e->caps.peer_failure_threshold)
        e->caps.peer_failure_threshold = 5;
    if (!e->caps.backoff_base_ns)
        e->caps.backoff_base_ns = 10000000ULL;
    if (!e->caps.backoff_max_ns)
        e->caps.backoff_max_ns = 60000000000ULL;
    if (!e->caps.record_ring)
        e->caps.record_ring = 1;
    e->cfg.caps = e->caps;
    e->cfg.addrs = NULL;
    e->cfg.n_addrs = 0;
    e->rng = cfg->seed ^ 0x9e3779b97f4a7c15ULL;
    e->incarnation = 1;
    atomic_init(&e->next_exec, 1);
    atomic_init(&e->in_cycle, false);
    atomic_init(&e->bytes_in_flight, 0);
    atomic_init(&e->ing.head, NULL);
    atomic_init(&e->ing.count, 0);
    atomic_init(&e->ing.dropped, 0);
    atomic_init(&e->ing.wake_pending, false);
    e->ing.capacity = e->caps.ingress_capacity;
    e->next_cmd = 1;
    e->next_req = 1;
    e->next_inreq = 1;
    e->next_token = 1;
    e->next_work = 1;
    e->next_wire_req = (bbe__rng_next(e) >> 16) | 1;
    bb_steps_init(&e->acc);

    if (cfg->n_addrs) {
        if (cfg->n_addrs > 64) {
            bb_error_set(err, BB_ELIMIT, "bb_engine_new: %zu local addresses (max 64)", cfg->n_addrs);
            goto fail;
        }
        e->local_addrs = calloc(cfg->n_addrs, sizeof *e->local_addrs);
        if (!e->local_addrs)
            goto oom;
        for (size_t i = 0; i < cfg->n_addrs; i++) {
            const bb_engine_addr *a = &cfg->addrs[i];
            if (!a->data || !a->len || a->len > 1024) {
                bb_error_set(err, BB_EINVAL, "bb_engine_new: local address %zu is empty or too long", i);
                goto fail;
            }
            uint8_t *d = malloc(a->len);
            if (!d)
                goto oom;
            memcpy(d, a->data, a->len);
            e->local_addrs[i].data = d;
            e->local_addrs[i].len = a->len;
            e->n_local_addrs++;
        }
    }
    e->self_value = bbe__peerid_value(&cfg->peer);
    e->trigger = bb_value_trigger();
    e->bus = calloc(e->caps.bus_capacity, sizeof *e->bus);
    e->records = calloc(e->caps.record_ring, sizeof *e->records);
    e->dedup = calloc(e->caps.dedup_window, sizeof *e->dedup);
    if (!e->self_value || !e->trigger || !e->bus || !e->records || !e->dedup)
        goto oom;
    return e;
oom:
    bb_error_set(err, BB_ENOMEM, "bb_engine_new: out of memory");
fail:
    bb_engine_free(e);
    return NULL;
}

void bb_engine_free(bb_engine *e)
{
    if (!e)
        return;
    /* Drop in-flight work first so executions release their values, then
     * the components that may hold references to them. */
    bbe__ingress_free(e);
    for (size_t i = 0; i < e->pending_completions.n; i++) {
        bbe__completion_ev *ev = &e->pending_completions.v[i];
        for (uint32_t k = 0; k < ev->n; k++)
            bb_value_unref(ev->outs[k]);
        free(ev->outs);
        free(ev->msg);
    }
    BBE__ARR_FREE(&e->pending_completions);
    bbe__timers_free(e);
    bbe__streams_free(e);
    bbe__wire_free(e);
    bbe__control_free(e);
    bbe__exec_free_all(e);
    bbe__uninstall(e);
    bbe__boot_free(e);
    bbe__handles_free(e);
    bbe__peers_free(e);
    bb_steps_free(&e->acc);
    for (size_t i = 0; i < e->outbound.n; i++)
        bbe__steps_release(&e->outbound.v[i]);
    BBE__ARR_FREE(&e->outbound);
    for (size_t i = 0; i < e->loopback.n; i++)
        free(e->loopback.v[i].bytes);
    BBE__ARR_FREE(&e->loopback);
    BBE__ARR_FREE(&e->parked);
    BBE__ARR_FREE(&e->works);
    free(e->fr);
    if (e->records) {
        for (size_t i = 0; i < e->rec_n; i++)
            bb_value_unref(e->records[(e->rec_head + i) % e->caps.record_ring].v);
        free(e->records);
    }
    free(e->dedup);
    bbe__map_free(&e->dedup_set);
    free(e->bus);
    bb_value_unref(e->self_value);
    bb_value_unref(e->trigger);
    for (size_t i = 0; i < e->n_local_addrs; i++)
        free((void *)e->local_addrs[i].data);
    free(e->local_addrs);
    free(e);
}

int bbe__fail(bb_engine *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->fail_msg, sizeof e->fail_msg, fmt, ap);
    va_end(ap);
    return BBE__R_FAIL;
}

uint64_t bbe__rng_next(bb_engine *e)
{
    uint64_t z = (e->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

bool bbe__budget_charge(bb_engine *e, size_t n)
{
    if (!n)
        return true;
    size_t cur = atomic_load_explicit(&e->bytes_in_flight, memory_order_relaxed);
    for (;;) {
        if (n > e->caps.ingress_byte_budget || cur > e->caps.ingress_byte_budget - n)
            return false;
        if (atomic_compare_exchange_weak_explicit(&e->bytes_in_flight, &cur, cur + n,
                                                  memory_order_relaxed, memory_order_relaxed))
            return true;
    }
}

/* Approximate payload bytes of a value (for caps; not an encoding size). */
size_t bbe__value_size(const bb_value *v)
{
    if (!v || !v->type)
        return 0;
    switch (v->type->kind) {
    case BB_VK_TENSOR:
        return v->u.tensor.nbytes;
    case BB_VK_BYTES:
    case BB_VK_PEER_ID:
    case BB_VK_ADDRESS:
        return v->u.bytes.len;
    case BB_VK_U64:
        return 8;
    case BB_VK_PEER_ID_VEC:
    case BB_VK_ADDRESS_VEC:
    case BB_VK_COMPOSITE: {
        size_t s = 0;
        for (size_t i = 0; i < v->u.list.n; i++)
            s += bbe__value_size(v->u.list.items[i]);
        return s;
    }
    case BB_VK_RESPONSE_BATCH: {
        size_t s = 0;
        for (size_t i = 0; i < v->u.batch.n; i++)
            s += bbe__value_size(v->u.batch.items[i]) + bbe__value_size(v->u.batch.peers[i]);
        return s;
    }
    default:
        return 0;
    }
}

/* ---- introspection ----------------------------------------------------------- */

static uint64_t counter_value(const bb_engine *e, size_t i)
{
    switch (i) {
    case BBE__C_PENDING_ASYNC:
        return e->pending_async;
    case BBE__C_EXEC_LIVE:
        return e->n_live;
    default:
        return e->c[i];
    }
}

#define N_EXTRA 5
bool bb_engine_counter_at(const bb_engine *e, size_t i, const char **name, uint64_t *value)
{
    if (i < BBE__C_COUNT) {
        *name = COUNTER_NAMES[i];
        *value = counter_value(e, i);
        return true;
    }
    i -= BBE__C_COUNT;
    if (i < N_EXTRA) {
        switch (i) {
        case 0:
            *name = "ingress.dropped";
            *value = atomic_load(&((bb_engine *)e)->ing.dropped);
            break;
        case 1:
            *name = "ingress.bytes_in_flight";
            *value = atomic_load(&((bb_engine *)e)->bytes_in_flight);
            break;
        case 2:
            *name = "slots.live";
            *value = e->live_slots;
            break;
        case 3:
            *name = "timers.count"; /* scheduled, dead deadlines included */
            *value = e->timers.n;
            break;
        default:
            *name = "frames.pooled_extra"; /* pooled beyond one per graph */
            *value = e->pool_extra;
            break;
        }
        return true;
    }
    i -= N_EXTRA;
    if (i < e->n_metrics) {
        *name = e->metrics[i].name;
        *value = e->metrics[i].value;
        return true;
    }
    return false;
}

uint64_t bb_engine_counter(const bb_engine *e, const char *name)
{
    const char *n;
    uint64_t v;
    if (!name)
        return 0;
    for (size_t i = 0; bb_engine_counter_at(e, i, &n, &v); i++)
        if (strcmp(n, name) == 0)
            return v;
    return 0;
}

size_t bb_engine_pending_async_count(const bb_engine *e) { return e->pending_async; }
size_t bb_engine_live_executions(const bb_engine *e) { return e->n_live; }
size_t bb_engine_live_slots(const bb_engine *e) { return e->live_slots; }
const bb_peerid *bb_engine_peer_id(const bb_engine *e) { return &e->cfg.peer; }
uint64_t bb_engine_incarnation(const bb_engine *e) { return e->incarnation; }
size_t bb_engine_target_count(const bb_engine *e) { return e->n_targets; }

const char *bb_engine_target_at(const bb_engine *e, size_t i)
{
    return i < e->n_targets ? e->targets[i].name : NULL;
}

size_t bb_engine_record_count(const bb_engine *e) { return e->rec_n; }

bool bb_engine_record_at(const bb_engine *e, size_t i, const char **name, const bb_value **v)
{
    if (i >= e->rec_n)
        return false;
    const bbe__record *r = &e->records[(e->rec_head + i) % e->caps.record_ring];
    if (name)
        *name = r->name;
    if (v)
        *v = r->v;
    return true;
}

bb_install_error bb_engine_install_error(const bb_engine *e) { return e->install_err; }

void bb_engine_set_wake(bb_engine *e, void (*wake)(void *ud), void *ud)
{
    e->ing.wake = wake;
    e->ing.wake_ud = ud;
}

const char *bb_install_error_name(bb_install_error k)
{
    switch (k) {
    case BB_INSTALL_OK: return "Ok";
    case BB_INSTALL_EMPTY_TARGETS: return "EmptyTargets";
    case BB_INSTALL_NOT_COMPILED: return "NotCompiled";
    case BB_INSTALL_UNKNOWN_TARGET: return "UnknownTarget";
    case BB_INSTALL_AMBIGUOUS_TARGET: return "AmbiguousTarget";
    case BB_INSTALL_MALFORMED_BINDING: return "MalformedBinding";
    case BB_INSTALL_SLOT_BINDING_CONFLICT: return "SlotBindingConflict";
    case BB_INSTALL_UNBOUND_GENERIC_SLOT: return "UnboundGenericSlot";
    case BB_INSTALL_UNREGISTERED_CONCRETE_TYPE: return "UnregisteredConcreteType";
    case BB_INSTALL_ROLE_MISMATCH: return "RoleMismatch";
    case BB_INSTALL_UNBOUND_DEPENDENCY: return "UnboundDependency";
    case BB_INSTALL_FUNCTION_DEFINITION_CONFLICT: return "FunctionDefinitionConflict";
    case BB_INSTALL_RECURSIVE_FUNCTION_CALL: return "RecursiveFunctionCall";
    case BB_INSTALL_INCOMPATIBLE_RUNTIME: return "IncompatibleRuntime";
    case BB_INSTALL_MALFORMED_GRAPH: return "MalformedGraph";
    case BB_INSTALL_COMPONENT_CREATE_FAILED: return "ComponentCreateFailed";
    case BB_INSTALL_ALREADY_INSTALLED: return "AlreadyInstalled";
    }
    return "?";
}

void bbe__assert_fail(const char *file, int line, const char *cond)
{
    fprintf(stderr, "%s:%d: engine invariant failed: %s\n", file, line, cond);
    abort();
}

/* ---- snapshot section "engine" -------------------------------------------------------------
 * the install fingerprint (checked first: a snapshot of another install is
 * refused before anything is read), incarnation, the ExecId counter, rng,
 * clock, last sent_at stamp, cycle number, then the counters (a count and
 * the values in BBE__C_* order; see snapshot.c for why a longer or shorter
 * list is accepted). */

int bbe__snap_write_engine(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->fingerprint);
    bbe__snap_put_u(o, e->incarnation);
    bbe__snap_put_u(o, atomic_load(&e->next_exec));
    bbe__snap_put_u(o, e->rng);
    bbe__snap_put_u(o, e->now_ns);
    bbe__snap_put_u(o, e->last_sent_at);
    bbe__snap_put_u(o, e->cycle_seq);
    bbe__snap_put_u(o, BBE__C_COUNT);
    for (int i = 0; i < BBE__C_COUNT; i++)
        bbe__snap_put_u(o, e->c[i]);
    return BB_OK;
}

int bbe__snap_read_engine(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    uint64_t fingerprint = bbe__snap_u(in);
    if (!in->r.failed && fingerprint != e->fingerprint)
        return bb_error_set(err, BB_EVALIDATE,
                            "restore: the snapshot was taken on a different install (model or "
                            "targets)");
    in->incarnation = bbe__snap_u(in);
    atomic_store(&e->next_exec, bbe__snap_u(in));
    e->rng = bbe__snap_u(in);
    e->now_ns = bbe__snap_u(in);
    e->last_sent_at = bbe__snap_u(in);
    e->cycle_seq = bbe__snap_u(in);
    size_t n = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many counters");
    for (size_t i = 0; i < n; i++) {
        uint64_t v = bbe__snap_u(in);
        if (i < BBE__C_COUNT)
            e->c[i] = v;
    }
    return BB_OK;
}
