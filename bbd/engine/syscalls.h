/*
 * syscalls.h — framework op implementations (IR_AND_DSL.md Part 5a, 5a.1,
 * 5b, composite; COMPILER.md gates), registered in syscalls.c's table.
 */
#ifndef BB__ENGINE_SYSCALLS_H
#define BB__ENGINE_SYSCALLS_H

#include "bbd/engine/engine_internal.h"

#define BB__SYSCALL(name) \
    int name(bb_engine *e, uint32_t opi, bb__exec *x, bb_value *const *in, bb_value **out)
#define BB__SYSINIT(name) int name(bb__install *ins, bb__op *op, bb_error *err)

/* syscalls_flow.c */
BB__SYSCALL(bb__sys_passthrough);
BB__SYSCALL(bb__sys_ontrigger);
BB__SYSCALL(bb__sys_threshold);
BB__SYSCALL(bb__sys_any);
BB__SYSCALL(bb__sys_gate);
BB__SYSCALL(bb__sys_tee);
BB__SYSCALL(bb__sys_token);
BB__SYSCALL(bb__sys_clock);
BB__SYSCALL(bb__sys_rng);
BB__SYSCALL(bb__sys_never); /* event sources: never pushed by readiness */
BB__SYSCALL(bb__sys_bundle);
BB__SYSCALL(bb__sys_unbundle);
BB__SYSINIT(bb__init_threshold);
BB__SYSINIT(bb__init_tee);
BB__SYSINIT(bb__init_constant);
BB__SYSINIT(bb__init_unbundle);

/* syscalls_state.c */
BB__SYSCALL(bb__sys_after);
BB__SYSCALL(bb__sys_limit_acquire);
BB__SYSCALL(bb__sys_limit_release);
BB__SYSCALL(bb__sys_enqueue);
BB__SYSCALL(bb__sys_dequeue);
BB__SYSCALL(bb__sys_stash);
BB__SYSCALL(bb__sys_flush);
BB__SYSINIT(bb__init_after);
BB__SYSINIT(bb__init_sleep);
BB__SYSINIT(bb__init_interval);
BB__SYSINIT(bb__init_event_source);
BB__SYSINIT(bb__init_lifecycle);
BB__SYSINIT(bb__init_limit);
BB__SYSINIT(bb__init_queue);
BB__SYSINIT(bb__init_hold);

/* syscalls_app.c */
BB__SYSCALL(bb__sys_app_emit);
BB__SYSCALL(bb__sys_record);
BB__SYSCALL(bb__sys_incr_metric);
BB__SYSINIT(bb__init_named);
BB__SYSINIT(bb__init_incr_metric);

/* gates.c */
BB__SYSCALL(bb__sys_dedup_rx);
BB__SYSCALL(bb__sys_health_rx);
BB__SYSCALL(bb__sys_backoff_rx);
BB__SYSCALL(bb__sys_health_tx);
BB__SYSCALL(bb__sys_backoff_tx);
BB__SYSCALL(bb__sys_deadline_check);
BB__SYSINIT(bb__init_tx_gate);
BB__SYSINIT(bb__init_deadline_check);

/* peers.c (address_book opset) */
BB__SYSCALL(bb__sys_ab_insert);
BB__SYSCALL(bb__sys_ab_insert_many);
BB__SYSCALL(bb__sys_ab_lookup);

/* wire.c */
BB__SYSCALL(bb__sys_send);
BB__SYSCALL(bb__sys_send_req);
BB__SYSCALL(bb__sys_send_resp);
BB__SYSCALL(bb__sys_recv_resp);
BB__SYSINIT(bb__init_send);
BB__SYSINIT(bb__init_recv);

/* a semaphore hold ended (exec GC or Limit.Release) */
void bb__sema_release(bb_engine *e, uint32_t sema);
void bb__semas_free(bb_engine *e);

#endif
