/*
 * syscalls.h — framework op implementations (IR_AND_DSL.md Part 5a, 5a.1,
 * 5b, composite; COMPILER.md gates), registered in syscalls.c's table.
 */
#ifndef BBE__ENGINE_SYSCALLS_H
#define BBE__ENGINE_SYSCALLS_H

#include "libbbengine/src/engine_internal.h"

#define BBE__SYSCALL(name) \
    int name(bb_engine *e, uint32_t opi, bbe__exec *x, bb_value *const *in, bb_value **out)
#define BBE__SYSINIT(name) int name(bbe__install *ins, bbe__op *op, bb_error *err)

/* syscalls_flow.c */
BBE__SYSCALL(bbe__sys_passthrough);
BBE__SYSCALL(bbe__sys_ontrigger);
BBE__SYSCALL(bbe__sys_threshold);
BBE__SYSCALL(bbe__sys_any);
BBE__SYSCALL(bbe__sys_gate);
BBE__SYSCALL(bbe__sys_tee);
BBE__SYSCALL(bbe__sys_token);
BBE__SYSCALL(bbe__sys_clock);
BBE__SYSCALL(bbe__sys_rng);
BBE__SYSCALL(bbe__sys_never); /* event sources: never pushed by readiness */
BBE__SYSCALL(bbe__sys_bundle);
BBE__SYSCALL(bbe__sys_unbundle);
BBE__SYSINIT(bbe__init_threshold);
BBE__SYSINIT(bbe__init_tee);
BBE__SYSINIT(bbe__init_constant);
BBE__SYSINIT(bbe__init_unbundle);

/* syscalls_state.c */
BBE__SYSCALL(bbe__sys_after);
BBE__SYSCALL(bbe__sys_limit_acquire);
BBE__SYSCALL(bbe__sys_limit_release);
BBE__SYSCALL(bbe__sys_enqueue);
BBE__SYSCALL(bbe__sys_dequeue);
BBE__SYSCALL(bbe__sys_stash);
BBE__SYSCALL(bbe__sys_flush);
BBE__SYSINIT(bbe__init_after);
BBE__SYSINIT(bbe__init_sleep);
BBE__SYSINIT(bbe__init_interval);
BBE__SYSINIT(bbe__init_event_source);
BBE__SYSINIT(bbe__init_lifecycle);
BBE__SYSINIT(bbe__init_limit);
BBE__SYSINIT(bbe__init_queue);
BBE__SYSINIT(bbe__init_hold);

/* syscalls_app.c */
BBE__SYSCALL(bbe__sys_app_emit);
BBE__SYSCALL(bbe__sys_record);
BBE__SYSCALL(bbe__sys_incr_metric);
BBE__SYSINIT(bbe__init_named);
BBE__SYSINIT(bbe__init_incr_metric);

/* gates.c */
BBE__SYSCALL(bbe__sys_dedup_rx);
BBE__SYSCALL(bbe__sys_health_rx);
BBE__SYSCALL(bbe__sys_backoff_rx);
BBE__SYSCALL(bbe__sys_health_tx);
BBE__SYSCALL(bbe__sys_backoff_tx);
BBE__SYSCALL(bbe__sys_deadline_check);
BBE__SYSINIT(bbe__init_tx_gate);
BBE__SYSINIT(bbe__init_deadline_check);

/* peers.c (address_book opset) */
BBE__SYSCALL(bbe__sys_ab_insert);
BBE__SYSCALL(bbe__sys_ab_insert_many);
BBE__SYSCALL(bbe__sys_ab_lookup);

/* wire.c */
BBE__SYSCALL(bbe__sys_send);
BBE__SYSCALL(bbe__sys_send_req);
BBE__SYSCALL(bbe__sys_send_resp);
BBE__SYSCALL(bbe__sys_recv_resp);
BBE__SYSINIT(bbe__init_send);
BBE__SYSINIT(bbe__init_recv);

/* a semaphore hold ended (exec GC or Limit.Release) */
void bbe__sema_release(bb_engine *e, uint32_t sema);
void bbe__semas_free(bb_engine *e);

#endif
