/*
 * syscalls.c — the table of framework ops the engine dispatches itself
 * (the Stateless dispatch kind): every op of ai.bytesandbrains.syscall,
 * .wire, .address_book and .composite, with arity, readiness, flags and the
 * install-time init that pre-parses attributes. Install looks an op up here
 * once; the hot path only sees the resolved function pointer.
 */
#include <string.h>

#include "bbd/engine/syscalls.h"

#define SYS BB__DOM_SYSCALL
#define WIRE BB__DOM_WIRE
#define AB BB__DOM_ADDRESS_BOOK
#define COMP BB__DOM_COMPOSITE
#define EV BB__OPF_EVENT_SOURCE
#define ANY_ BB__READY_ANYOF
#define ALL_ BB__READY_ALL

static const bb__syscall_def DEFS[] = {
    /* domain, op_type, fn, init, flags, ready, min_in, max_in, min_out, max_out, out_type, const */
    {SYS, "Pulse", bb__sys_never, NULL, EV, ALL_, 0, 0, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "OnTrigger", bb__sys_ontrigger, NULL, 0, ALL_, 1, 1, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "Threshold", bb__sys_threshold, bb__init_threshold, 0, ANY_, 1, -1, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "Interval", bb__sys_never, bb__init_interval, EV, ALL_, 0, 0, 1, 1, &BB_TYPE_TIMESTAMP, false},
    {SYS, "EventSource", bb__sys_never, bb__init_event_source, EV, ALL_, 0, 0, 1, 1, &BB_TYPE_EVENT_KIND, false},
    {SYS, "After", bb__sys_after, bb__init_after, 0, ALL_, 1, 1, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "Limit.Acquire", bb__sys_limit_acquire, bb__init_limit, 0, ALL_, 1, 1, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "Limit.Release", bb__sys_limit_release, bb__init_limit, 0, ALL_, 1, 1, 0, 0, NULL, false},
    {SYS, "Any", bb__sys_any, NULL, 0, ANY_, 1, -1, 1, 1, NULL, false},
    {SYS, "Gate", bb__sys_gate, NULL, 0, ALL_, 2, 2, 1, 1, NULL, false},
    {SYS, "Serialize.Enqueue", bb__sys_enqueue, bb__init_queue, 0, ALL_, 1, 1, 0, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "Serialize.Dequeue", bb__sys_dequeue, bb__init_queue, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "CorrelateTag", bb__sys_token, NULL, 0, ALL_, 1, 1, 1, 1, &BB_TYPE_CORRELATION_TOKEN, false},
    {SYS, "Hold.Stash", bb__sys_stash, bb__init_hold, 0, ALL_, 1, 1, 0, 0, NULL, false},
    {SYS, "Hold.Flush", bb__sys_flush, bb__init_hold, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "AppEmit", bb__sys_app_emit, bb__init_named, 0, ALL_, 1, 1, 0, 0, NULL, false},
    {SYS, "AppNotify", bb__sys_app_emit, bb__init_named, 0, ALL_, 1, 1, 0, 0, NULL, false},
    {SYS, "Record", bb__sys_record, bb__init_named, 0, ALL_, 1, 1, 0, 0, NULL, false},
    {SYS, "IncrMetric", bb__sys_incr_metric, bb__init_incr_metric, 0, ALL_, 1, 1, 0, 0, NULL, false},
    {SYS, "LifecyclePhase", bb__sys_never, bb__init_lifecycle, EV, ALL_, 0, 0, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "GateDispatch", bb__sys_passthrough, NULL, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "MintDispatch", bb__sys_token, NULL, 0, ALL_, 1, 1, 1, 1, &BB_TYPE_CORRELATION_TOKEN, false},
    {SYS, "GateManyDispatch", bb__sys_gate, NULL, 0, ALL_, 1, -1, 1, 1, NULL, false},
    {SYS, "Clock", bb__sys_clock, NULL, 0, ALL_, 1, 1, 1, 1, &BB_TYPE_TIMESTAMP, false},
    {SYS, "RngU64", bb__sys_rng, NULL, 0, ALL_, 1, 1, 1, 1, &BB_TYPE_U64, false},
    {SYS, "Sleep", bb__sys_after, bb__init_sleep, 0, ALL_, 1, 1, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "DeadlineMatch", bb__sys_any, NULL, 0, ANY_, 2, 2, 1, 1, &BB_TYPE_TRIGGER, false},
    {SYS, "PassThrough", bb__sys_passthrough, NULL, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "Tee", bb__sys_tee, bb__init_tee, 0, ALL_, 1, 1, 1, -1, NULL, false},
    {SYS, "Constant", bb__sys_never, bb__init_constant, 0, ALL_, 0, 0, 1, 1, NULL, true},
    /* gates (COMPILER.md "Wire-gate insertion") */
    {SYS, "DedupGateRx", bb__sys_dedup_rx, NULL, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "PeerHealthGateRx", bb__sys_health_rx, NULL, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "BackoffGateRx", bb__sys_backoff_rx, NULL, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "PeerHealthGateTx", bb__sys_health_tx, bb__init_tx_gate, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "BackoffGateTx", bb__sys_backoff_tx, bb__init_tx_gate, 0, ALL_, 1, 1, 1, 1, NULL, false},
    {SYS, "DeadlineCheck", bb__sys_deadline_check, bb__init_deadline_check, 0, ALL_, 1, 1, 1, 1, NULL, false},
    /* address book (5a.1) */
    {AB, "Insert", bb__sys_ab_insert, NULL, 0, ALL_, 2, 2, 0, 0, NULL, false},
    {AB, "InsertMany", bb__sys_ab_insert_many, NULL, 0, ALL_, 2, 2, 0, 0, NULL, false},
    {AB, "Lookup", bb__sys_ab_lookup, NULL, 0, ALL_, 1, 1, 1, 1, &BB_TYPE_ADDRESS_VEC, false},
    /* composite */
    {COMP, "Bundle", bb__sys_bundle, NULL, 0, ALL_, 1, -1, 1, 1, &BB_TYPE_COMPOSITE, false},
    {COMP, "Unbundle", bb__sys_unbundle, bb__init_unbundle, 0, ALL_, 1, 1, 1, -1, NULL, false},
    /* wire (5b) */
    {WIRE, "Send", bb__sys_send, bb__init_send, 0, ALL_, 2, -1, 0, 0, NULL, false},
    {WIRE, "SendReqBatched", bb__sys_send_req, bb__init_send, 0, ALL_, 2, -1, 1, 2, NULL, false},
    {WIRE, "SendResp", bb__sys_send_resp, bb__init_send, 0, ALL_, 2, 3, 0, 0, NULL, false},
    {WIRE, "Recv", bb__sys_never, bb__init_recv, EV, ALL_, 0, 0, 1, 2, NULL, false},
    {WIRE, "RecvReq", bb__sys_never, bb__init_recv, EV | BB__OPF_RECV_REQ, ALL_, 0, 0, 1, 3, NULL, false},
    {WIRE, "RecvRespBatched", bb__sys_recv_resp, NULL, 0, ALL_, 1, 1, 1, 2, NULL, false},
};

const bb__syscall_def *bb__syscall_find(const char *domain, const char *op_type)
{
    if (!domain || !op_type)
        return NULL;
    for (size_t i = 0; i < sizeof DEFS / sizeof DEFS[0]; i++)
        if (strcmp(DEFS[i].op_type, op_type) == 0 && strcmp(DEFS[i].domain, domain) == 0)
            return &DEFS[i];
    return NULL;
}

bool bb__domain_is_framework(const char *domain)
{
    return domain && (strcmp(domain, SYS) == 0 || strcmp(domain, WIRE) == 0 ||
                      strcmp(domain, AB) == 0 || strcmp(domain, COMP) == 0);
}

/* Event sources are started by their trigger, never by input readiness. */
BB__SYSCALL(bb__sys_never)
{
    (void)e, (void)opi, (void)x, (void)in, (void)out;
    return BB__R_DONE;
}
