/*
 * syscalls.c — the table of framework ops the engine dispatches itself
 * (the Stateless dispatch kind): every op of ai.bytesandbrains.syscall,
 * .wire, .address_book and .composite, with arity, readiness, flags and the
 * install-time init that pre-parses attributes. Install looks an op up here
 * once; the hot path only sees the resolved function pointer.
 */
#include <string.h>

#include "libbbengine/src/syscalls.h"

#define SYS BB_DOMAIN_SYSCALL
#define WIRE BB_DOMAIN_WIRE
#define AB BB_DOMAIN_ADDRESS_BOOK
#define COMP BB_DOMAIN_COMPOSITE
#define EV BBE__OPF_EVENT_SOURCE
#define TRIG BBE__OPF_TRIGGER_IN
#define ANY_ BBE__READY_ANYOF
#define ALL_ BBE__READY_ALL

static const bbe__syscall_def DEFS[] = {
    /* domain, op_type, fn, init, flags, ready, min_in, max_in, min_out, max_out, out_type, const */
    {SYS, "Pulse", bbe__sys_never, NULL, EV, ALL_, 0, 0, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "OnTrigger", bbe__sys_ontrigger, NULL, 0, ALL_, 1, 1, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "Threshold", bbe__sys_threshold, bbe__init_threshold, 0, ANY_, 1, -1, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "Interval", bbe__sys_never, bbe__init_interval, EV, ALL_, 0, 0, 1, 1, &BB_TYPE_TIMESTAMP, false},
    {SYS, "EventSource", bbe__sys_never, bbe__init_event_source, EV, ALL_, 0, 0, 1, 1, &BB_TYPE_EVENT_KIND, false},
    {SYS, "After", bbe__sys_after, bbe__init_after, TRIG, ALL_, 1, 1, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "Limit.Acquire", bbe__sys_limit_acquire, bbe__init_limit, TRIG, ALL_, 1, 1, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "Limit.Release", bbe__sys_limit_release, bbe__init_limit, TRIG, ALL_, 1, 1, 0, 0, NULL, false},
    {SYS, "Any", bbe__sys_any, NULL, 0, ANY_, 1, -1, 1, 1, NULL, false},
    {SYS, "Gate", bbe__sys_gate, NULL, 0, ALL_, 2, 2, 1, 1, NULL, false},
    {SYS, "Serialize.Enqueue", bbe__sys_enqueue, bbe__init_queue, 0, ALL_, 1, 1, 0, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "Serialize.Dequeue", bbe__sys_dequeue, bbe__init_queue, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "CorrelateTag", bbe__sys_token, NULL, 0, ALL_, 1, 1, 1, 1, &BB_TYPE_CORRELATION_TOKEN, false},
    {SYS, "Hold.Stash", bbe__sys_stash, bbe__init_hold, 0, ALL_, 1, 1, 0, 0, NULL, false},
    {SYS, "Hold.Flush", bbe__sys_flush, bbe__init_hold, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "AppEmit", bbe__sys_app_emit, bbe__init_named, 0, ALL_, 1, 1, 0, 0, NULL, false},
    {SYS, "AppNotify", bbe__sys_app_emit, bbe__init_named, 0, ALL_, 1, 1, 0, 0, NULL, false},
    {SYS, "Record", bbe__sys_record, bbe__init_named, 0, ALL_, 1, 1, 0, 0, NULL, false},
    {SYS, "IncrMetric", bbe__sys_incr_metric, bbe__init_incr_metric, 0, ALL_, 1, 1, 0, 0, NULL, false},
    {SYS, "LifecyclePhase", bbe__sys_never, bbe__init_lifecycle, EV, ALL_, 0, 0, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "GateDispatch", bbe__sys_passthrough, NULL, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "MintDispatch", bbe__sys_token, NULL, 0, ALL_, 1, 1, 1, 1, &BB_TYPE_CORRELATION_TOKEN, false},
    {SYS, "GateManyDispatch", bbe__sys_gate, NULL, 0, ALL_, 1, -1, 1, 1, NULL, false},
    {SYS, "Clock", bbe__sys_clock, NULL, TRIG, ALL_, 1, 1, 1, 1, &BB_TYPE_TIMESTAMP, false},
    {SYS, "RngU64", bbe__sys_rng, NULL, TRIG, ALL_, 1, 1, 1, 1, &BB_TYPE_U64, false},
    {SYS, "Sleep", bbe__sys_after, bbe__init_sleep, TRIG, ALL_, 1, 1, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "DeadlineMatch", bbe__sys_any, NULL, 0, ANY_, 2, 2, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "PassThrough", bbe__sys_passthrough, NULL, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "Tee", bbe__sys_tee, bbe__init_tee, 0, ALL_, 1, 1, 1, -1, NULL, false},
    {SYS, "Constant", bbe__sys_never, bbe__init_constant, 0, ALL_, 0, 0, 1, 1, NULL, true},
    /* gates (COMPILER.md "Wire-gate insertion") */
    {SYS, "DedupGateRx", bbe__sys_dedup_rx, NULL, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "PeerHealthGateRx", bbe__sys_health_rx, NULL, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "BackoffGateRx", bbe__sys_backoff_rx, NULL, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "PeerHealthGateTx", bbe__sys_health_tx, bbe__init_tx_gate, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "BackoffGateTx", bbe__sys_backoff_tx, bbe__init_tx_gate, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "DeadlineCheck", bbe__sys_deadline_check, bbe__init_deadline_check, 0, ALL_, 1, 1, 1, 1, NULL, false},
    /* address book (5a.1) */
    {AB, "Insert", bbe__sys_ab_insert, NULL, 0, ALL_, 2, 2, 0, 0, NULL, false},
    {AB, "InsertMany", bbe__sys_ab_insert_many, NULL, 0, ALL_, 2, 2, 0, 0, NULL, false},
    {AB, "Lookup", bbe__sys_ab_lookup, NULL, 0, ALL_, 1, 1, 1, 1, &BB_TYPE_ADDRESS_VEC, false},
    /* composite */
    {COMP, "Bundle", bbe__sys_bundle, NULL, 0, ALL_, 1, -1, 1, 1, &BB_TYPE_COMPOSITE, false},
    {COMP, "Unbundle", bbe__sys_unbundle, bbe__init_unbundle, 0, ALL_, 1, 1, 1, -1, NULL, false},
    /* wire (5b) */
    {WIRE, "Send", bbe__sys_send, bbe__init_send, 0, ALL_, 2, -1, 0, 0, NULL, false},
    {WIRE, "SendReqBatched", bbe__sys_send_req, bbe__init_send, 0, ALL_, 2, -1, 1, 2, NULL, false},
    {WIRE, "SendResp", bbe__sys_send_resp, bbe__init_send, 0, ALL_, 2, 3, 0, 0, NULL, false},
    {WIRE, "Recv", bbe__sys_never, bbe__init_recv, EV, ALL_, 0, 0, 1, 2, NULL, false},
    {WIRE, "RecvReq", bbe__sys_never, bbe__init_recv, EV | BBE__OPF_RECV_REQ, ALL_, 0, 0, 1, 3, NULL, false},
    {WIRE, "RecvRespBatched", bbe__sys_recv_resp, NULL, 0, ALL_, 1, 1, 1, 2, NULL, false},
};

const bbe__syscall_def *bbe__syscall_find(const char *domain, const char *op_type)
{
    if (!domain || !op_type)
        return NULL;
    for (size_t i = 0; i < sizeof DEFS / sizeof DEFS[0]; i++)
        if (strcmp(DEFS[i].op_type, op_type) == 0 && strcmp(DEFS[i].domain, domain) == 0)
            return &DEFS[i];
    return NULL;
}

bool bbe__domain_is_framework(const char *domain)
{
    return domain && (strcmp(domain, SYS) == 0 || strcmp(domain, WIRE) == 0 ||
                      strcmp(domain, AB) == 0 || strcmp(domain, COMP) == 0);
}

/* Event sources are started by their trigger, never by input readiness. */
BBE__SYSCALL(bbe__sys_never)
{
    (void)e, (void)opi, (void)x, (void)in, (void)out;
    return BBE__R_DONE;
}
