/*
 * opsets_syscall.c — the ai.bytesandbrains.syscall v1 catalog
 * (IR_AND_DSL.md 5a, plus the compiler-inserted wire gates and DeadlineCheck
 * of COMPILER.md) and the ai.bytesandbrains.composite v1 catalog (Bundle /
 * Unbundle, IR_AND_DSL.md Update). Ops sorted by op_type (strcmp).
 *
 * The TX gates output `value` (their input, forwarded on Allow), not the
 * Trigger COMPILER.md describes: the TX passes splice them into
 * wire.Send's data input, so a Trigger would replace the payload
 * (docs/DECISIONS.md, "TX gates forward their input value").
 */
#include "opsets_internal.h"

#define BB__DOM BB_DOMAIN_SYSCALL
#define BB__VER BB_OPSET_VERSION

#define INSERTED BB_OPF_COMPILER_INSERTED

static const bb_op_schema SYSCALL_OPS[] = {
    BB__OP("After", BB__PORTS(BB__P("trigger", TRIGGER)), BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__ATTRS(BB__A_REQ("delay_ns", INT)), BB_OPF_ASYNC,
           "Re-fires its trigger after delay_ns"),
    BB__OP("Any", BB__PORTS(BB__P_VAR("inputs", ANY)), BB__PORTS(BB__P("value", ANY)),
           BB__ATTRS(BB__A("group", STRING, "")), 0,
           "First-arrival group: forwards the first input to arrive"),
    BB__OP("AppEmit", BB__PORTS(BB__P("value", ANY)), BB__NONE,
           BB__ATTRS(BB__A_REQ("name", STRING)), 0,
           "Surfaces the value to the host as AppEvent{topic: name}"),
    BB__OP("AppNotify", BB__PORTS(BB__P("trigger", TRIGGER)), BB__NONE,
           BB__ATTRS(BB__A_REQ("name", STRING)), 0,
           "Surfaces a marker AppEvent{topic: name} to the host"),
    BB__OP("BackoffGateRx", BB__PORTS(BB__P("value", ANY)), BB__PORTS(BB__P("value", ANY)),
           BB__NONE, INSERTED | BB_OPF_GATE_RX,
           "Drops inbound values from a peer in backoff cooldown (reason=cooldown)"),
    BB__OP("BackoffGateTx", BB__PORTS(BB__P("value", ANY)), BB__PORTS(BB__P("value", ANY)),
           BB__ATTRS(BB__A_REQ("peer", STRING)), INSERTED | BB_OPF_GATE_TX,
           "Forwards the value when the destination peer is retry-eligible in the backoff table"),
    BB__OP("Clock", BB__PORTS(BB__P("trigger", TRIGGER)), BB__PORTS(BB__P("now", TIMESTAMP)),
           BB__NONE, 0, "Reads the host clock"),
    BB__OP("Constant", BB__NONE, BB__PORTS(BB__P("value", ANY)),
           BB__ATTRS(BB__A_REQ("value", UNDEFINED)), 0,
           "Emits the value carried in its attribute once at boot"),
    BB__OP("CorrelateTag", BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__PORTS(BB__P("token", CORRELATION_TOKEN)), BB__NONE, 0,
           "Mints a fresh correlation token"),
    BB__OP("DeadlineCheck", BB__PORTS(BB__P("value", ANY)), BB__PORTS(BB__P("value", ANY)),
           BB__ATTRS(BB__A_REQ("deadline_ns", INT)), INSERTED,
           "Forwards the value while its execution is within deadline_ns, else fails"),
    BB__OP("DeadlineMatch", BB__PORTS(BB__P("then", TRIGGER), BB__P("timeout", TRIGGER)),
           BB__PORTS(BB__P("winner", TRIGGER)), BB__NONE, 0,
           "First-to-fire selector between then and timeout"),
    BB__OP("DedupGateRx", BB__PORTS(BB__P("value", ANY)), BB__PORTS(BB__P("value", ANY)),
           BB__NONE, INSERTED | BB_OPF_GATE_RX,
           "Drops inbound values whose wire bytes were seen recently (reason=duplicate)"),
    BB__OP("EventSource", BB__NONE, BB__PORTS(BB__P("event", EVENT_KIND)),
           BB__ATTRS(BB__A_REQ("kind", INT)), 0, "Fires on each bus event of the given kind"),
    BB__OP("Gate", BB__PORTS(BB__P("value", ANY), BB__P("trigger", TRIGGER)),
           BB__PORTS(BB__P("value", ANY)), BB__NONE, 0,
           "Host-controlled gate: forwards value once trigger arrives"),
    BB__OP("GateDispatch", BB__PORTS(BB__P("value", ANY)), BB__PORTS(BB__P("value", ANY)),
           BB__NONE, INSERTED, "Edge gate inserted by the augmentation pass"),
    BB__OP("GateManyDispatch", BB__PORTS(BB__P("value", ANY), BB__P_VAR("gates", ANY)),
           BB__PORTS(BB__P("value", ANY)), BB__NONE, INSERTED,
           "Multi-edge gate: forwards value once every gate input arrived"),
    BB__OP("Hold.Flush", BB__PORTS(BB__P("trigger", TRIGGER)), BB__PORTS(BB__P("value", ANY)),
           BB__ATTRS(BB__A_REQ("slot", STRING)), 0, "Releases the value held in slot"),
    BB__OP("Hold.Stash", BB__PORTS(BB__P("value", ANY)), BB__NONE,
           BB__ATTRS(BB__A_REQ("slot", STRING)), 0, "Buffers a value in slot"),
    BB__OP("IncrMetric", BB__PORTS(BB__P("trigger", TRIGGER)), BB__NONE,
           BB__ATTRS(BB__A_REQ("name", STRING), BB__A("delta", INT, "1")), 0,
           "Adds delta to the per-Node counter name"),
    BB__OP("Interval", BB__NONE, BB__PORTS(BB__P("tick", TIMESTAMP)),
           BB__ATTRS(BB__A_REQ("period_ns", INT)), 0, "Periodic timer"),
    BB__OP("LifecyclePhase", BB__NONE, BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__ATTRS(BB__A_REQ("phase", INT)), 0,
           "Fires on the lifecycle phase (Shutdown=1, Snapshot=2)"),
    BB__OP("Limit.Acquire", BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__ATTRS(BB__A_REQ("name", STRING), BB__A("n", INT, "1")), BB_OPF_ASYNC,
           "Acquires the named semaphore (n permits); parks while none is free"),
    BB__OP("Limit.Release", BB__PORTS(BB__P("trigger", TRIGGER)), BB__NONE,
           BB__ATTRS(BB__A_REQ("name", STRING)), 0, "Releases the named semaphore"),
    BB__OP("MintDispatch", BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__PORTS(BB__P("token", CORRELATION_TOKEN)), BB__NONE, INSERTED,
           "Token mint inserted by the augmentation pass"),
    BB__OP("OnTrigger", BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__PORTS(BB__P("trigger", TRIGGER)), BB__NONE, 0,
           "Re-fires on each input arrival"),
    BB__OP("PassThrough", BB__PORTS(BB__P("value", ANY)), BB__PORTS(BB__P("value", ANY)),
           BB__NONE, 0, "Identity"),
    BB__OP("PeerHealthGateRx", BB__PORTS(BB__P("value", ANY)), BB__PORTS(BB__P("value", ANY)),
           BB__NONE, INSERTED | BB_OPF_GATE_RX,
           "Drops inbound values from blocklisted / not-allowlisted peers"),
    BB__OP("PeerHealthGateTx", BB__PORTS(BB__P("value", ANY)), BB__PORTS(BB__P("value", ANY)),
           BB__ATTRS(BB__A_REQ("peer", STRING)), INSERTED | BB_OPF_GATE_TX,
           "Forwards the value unless the destination peer is blocklisted, not allowlisted "
           "or cooling down"),
    BB__OP("Pulse", BB__NONE, BB__PORTS(BB__P("trigger", TRIGGER)), BB__NONE, 0,
           "Fires once at bootstrap"),
    BB__OP("Record", BB__PORTS(BB__P("value", ANY)), BB__NONE,
           BB__ATTRS(BB__A_REQ("name", STRING)), 0, "Pushes the value to the per-Node ring buffer"),
    BB__OP("RngU64", BB__PORTS(BB__P("trigger", TRIGGER)), BB__PORTS(BB__P("value", U64)),
           BB__NONE, 0, "Draws from the seeded PRNG"),
    BB__OP("Serialize.Dequeue", BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__PORTS(BB__P("value", ANY)), BB__ATTRS(BB__A_REQ("queue", STRING)), 0,
           "Pops the oldest value of the FIFO queue"),
    BB__OP("Serialize.Enqueue", BB__PORTS(BB__P("value", ANY)),
           BB__PORTS(BB__P("trigger", TRIGGER)), BB__ATTRS(BB__A_REQ("queue", STRING)), 0,
           "Pushes a value onto the FIFO queue"),
    BB__OP("Sleep", BB__PORTS(BB__P("trigger", TRIGGER)), BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__ATTRS(BB__A_REQ("duration_ns", INT)), BB_OPF_ASYNC, "Async timer"),
    BB__OP("Tee", BB__PORTS(BB__P("value", ANY)), BB__PORTS(BB__P_VAR("outputs", ANY)),
           BB__ATTRS(BB__A_OPT("fanout", INT)), 0,
           "Duplicates the input to fanout outputs (default: one per output)"),
    BB__OP("Threshold", BB__PORTS(BB__P_VAR("inputs", ANY)),
           BB__PORTS(BB__P("trigger", TRIGGER)), BB__ATTRS(BB__A_REQ("n", INT)), 0,
           "Fires after n inputs arrived"),
};

const bb_opset_schema bb__opset_syscall = {
    .domain = BB_DOMAIN_SYSCALL,
    .version = BB_OPSET_VERSION,
    .role = BB_ROLE_NONE,
    .ops = SYSCALL_OPS,
    .n_ops = BB__COUNT(SYSCALL_OPS),
    .doc = "Framework primitives, dispatched by the engine (stateless syscalls)",
};

#undef BB__DOM
#define BB__DOM BB_DOMAIN_COMPOSITE

/* The spec stamps child_count (INT) and child_types (comma-joined
 * denotations) on both ops; the recorder writes them as attributes. */
#define CHILD_ATTRS                                                  \
    BB__ATTRS(BB__A_OPT(BB_META_COMPOSITE_CHILD_COUNT, INT),         \
              BB__A_OPT(BB_META_COMPOSITE_CHILD_TYPES, STRING))

static const bb_op_schema COMPOSITE_OPS[] = {
    BB__OP("Bundle", BB__PORTS(BB__P_VAR("parts", ANY)), BB__PORTS(BB__P("composite", COMPOSITE)),
           CHILD_ATTRS, 0, "Packs N typed values into one composite value"),
    BB__OP("Unbundle", BB__PORTS(BB__P("composite", COMPOSITE)),
           BB__PORTS(BB__P_VAR("children", ANY)), CHILD_ATTRS, 0,
           "Unpacks a composite value into its N typed children (child_0..child_{N-1})"),
};

const bb_opset_schema bb__opset_composite = {
    .domain = BB_DOMAIN_COMPOSITE,
    .version = BB_OPSET_VERSION,
    .role = BB_ROLE_NONE,
    .ops = COMPOSITE_OPS,
    .n_ops = BB__COUNT(COMPOSITE_OPS),
    .doc = "Bundle / Unbundle of typed values through one port",
};
