/*
 * steps.c — the EngineStep buffer a poll returns.
 *
 * The engine accumulates steps in its own buffer while it works (between
 * polls too: address-book feedback can emit PeerDown) and hands the buffer
 * over at the end of bb_engine_poll by swapping it with the caller's, so a
 * host that reuses one bb_steps allocates nothing in steady state. Payloads
 * (envelope bytes, values, formatted messages) belong to the buffer until
 * cleared; a host takes one by NULLing the pointer.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/engine_internal.h"

/* What a steps buffer owns besides its values and envelope bytes: adopted
 * malloc'd blocks (formatted strings), and a bump chunk for small copies
 * made per message (a SendEnvelope's address list), reused from one poll
 * to the next so steady traffic allocates nothing here. */
typedef struct owned_list {
    void **v;
    size_t n, cap;
    uint8_t *chunk; /* bump area; a full one is adopted and a larger one made */
    size_t used, chunk_cap;
} owned_list;

#define CHUNK_MIN 1024

static owned_list *owned_get(void **owned)
{
    if (!*owned)
        *owned = calloc(1, sizeof(owned_list));
    return *owned;
}

void *bbe__owned_add(void **owned, void *p)
{
    if (!p)
        return NULL;
    owned_list *l = owned_get(owned);
    if (!l || BBE__ARR_PUSH(l, p)) {
        free(p);
        return NULL;
    }
    return p;
}

void *bbe__owned_alloc(void **owned, size_t n)
{
    owned_list *l = owned_get(owned);
    if (!l)
        return NULL;
    n = (n + 15) & ~(size_t)15;
    if (l->chunk_cap - l->used < n) {
        size_t cap = l->chunk_cap ? l->chunk_cap * 2 : CHUNK_MIN;
        while (cap < n)
            cap *= 2;
        /* the full chunk holds copies earlier steps point into: room to
         * keep it is made before anything can fail */
        if (l->chunk && l->n == l->cap && bbe__arr_reserve(l, sizeof *l->v, l->n + 1))
            return NULL;
        uint8_t *c = malloc(cap);
        if (!c)
            return NULL;
        if (l->chunk)
            l->v[l->n++] = l->chunk;
        l->chunk = c;
        l->chunk_cap = cap;
        l->used = 0;
    }
    void *p = l->chunk + l->used;
    l->used += n;
    return p;
}

static void owned_clear(void *owned)
{
    owned_list *l = owned;
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    l->n = 0;
    l->used = 0;
}

void bbe__owned_free(void **owned)
{
    owned_list *l = *owned;
    if (!l)
        return;
    owned_clear(l);
    free(l->v);
    free(l->chunk);
    free(l);
    *owned = NULL;
}

void bb_steps_init(bb_steps *s) { memset(s, 0, sizeof *s); }

void bbe__steps_release(bb_step *st)
{
    switch (st->kind) {
    case BB_STEP_SEND_ENVELOPE:
        free(st->u.send.bytes);
        bb_send_gather_free(st->u.send.gather);
        st->u.send.bytes = NULL; /* addrs live in the buffer's owned chunk */
        st->u.send.gather = NULL;
        st->u.send.addrs = NULL;
        break;
    case BB_STEP_APP_EVENT:
        bb_value_unref(st->u.app.value);
        st->u.app.value = NULL;
        break;
    case BB_STEP_TELEMETRY:
        bb_value_unref(st->u.telemetry.record);
        st->u.telemetry.record = NULL;
        break;
    default:
        break;
    }
}

void bb_steps_clear(bb_steps *s)
{
    for (size_t i = 0; i < s->n; i++)
        bbe__steps_release(&s->v[i]);
    s->n = 0;
    owned_clear(s->owned);
}

void bb_steps_free(bb_steps *s)
{
    bb_steps_clear(s);
    free(s->v);
    bbe__owned_free(&s->owned);
    memset(s, 0, sizeof *s);
}

bb_step *bbe__step_push(bb_engine *e, bb_step_kind kind, bb_exec_id exec)
{
    bb_steps *s = &e->acc;
    if (s->n == s->cap && bbe__arr_reserve(s, sizeof *s->v, s->n + 1))
        return NULL;
    bb_step *st = &s->v[s->n++];
    memset(st, 0, sizeof *st);
    st->kind = kind;
    st->exec_id = exec;
    return st;
}

const char *bbe__step_str(bb_engine *e, const char *str)
{
    if (!str)
        return NULL;
    return bbe__owned_add(&e->acc.owned, strdup(str));
}

const char *bbe__step_strf(bb_engine *e, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return bbe__step_str(e, buf);
}

void bbe__step_infra(bb_engine *e, bb_infra_kind kind, int sub, const bb_peerid *peer,
                    uint64_t count, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    bb_step *st = bbe__step_push(e, BB_STEP_INFRA_EVENT, 0);
    if (!st)
        return;
    st->u.infra.kind = kind;
    st->u.infra.sub = sub;
    st->u.infra.count = count;
    if (peer) {
        st->u.infra.has_peer = true;
        st->u.infra.peer = *peer;
    }
    st->u.infra.detail = bbe__step_str(e, buf);
}

const char *bb_step_kind_name(bb_step_kind k)
{
    switch (k) {
    case BB_STEP_SEND_ENVELOPE: return "SendEnvelope";
    case BB_STEP_APP_EVENT: return "AppEvent";
    case BB_STEP_PEER_RESOLVE_FAILED: return "PeerResolveFailed";
    case BB_STEP_OP_FAILED: return "OpFailed";
    case BB_STEP_PEER_DOWN: return "PeerDown";
    case BB_STEP_PEER_UP: return "PeerUp";
    case BB_STEP_BOOTSTRAP_COMPLETE: return "BootstrapComplete";
    case BB_STEP_BOOTSTRAP_FAILED: return "BootstrapFailed";
    case BB_STEP_WAITING_ON_BOOTSTRAP: return "WaitingOnBootstrap";
    case BB_STEP_INFRA_EVENT: return "InfraEvent";
    case BB_STEP_TELEMETRY: return "Telemetry";
    case BB_STEP_CYCLE_BUDGET_EXCEEDED: return "CycleBudgetExceeded";
    case BB_STEP_OP_COMPLETED: return "OpCompleted";
    case BB_STEP_ASYNC_SUSPENDED: return "AsyncSuspended";
    case BB_STEP_OP_TRIGGER: return "OpTrigger";
    case BB_STEP_OP_SINK: return "OpSink";
    }
    return "?";
}

const char *bb_infra_kind_name(bb_infra_kind k)
{
    switch (k) {
    case BB_INFRA_WIRE_RECEIVE_ERROR: return "WireReceiveError";
    case BB_INFRA_APP_INGRESS_ERROR: return "AppIngressError";
    case BB_INFRA_INGRESS_DROPPED: return "IngressDropped";
    case BB_INFRA_BUS_DROPPED: return "BusDropped";
    case BB_INFRA_ENVELOPE_MALFORMED: return "EnvelopeMalformed";
    case BB_INFRA_UNROUTABLE_FILL: return "UnroutableFill";
    case BB_INFRA_UNKNOWN_CORRELATION: return "UnknownCorrelation";
    case BB_INFRA_QUORUM_FAILED: return "QuorumFailed";
    case BB_INFRA_BOOTSTRAP_REJECTED: return "BootstrapRejected";
    case BB_INFRA_STREAM_FAILED: return "StreamFailed";
    }
    return "?";
}

const char *bb_wire_rx_error_name(bb_wire_rx_error k)
{
    switch (k) {
    case BB_WIRE_RX_ALLOCATION_FAILED: return "AllocationFailed";
    case BB_WIRE_RX_BUDGET_EXCEEDED: return "BudgetExceeded";
    case BB_WIRE_RX_BACKEND_MATERIALIZE_FAILED: return "BackendMaterializeFailed";
    case BB_WIRE_RX_TYPE_MISMATCH: return "TypeMismatch";
    case BB_WIRE_RX_UNKNOWN_TYPE_HASH: return "UnknownTypeHash";
    case BB_WIRE_RX_DECODE_FAILED: return "DecodeFailed";
    }
    return "?";
}
