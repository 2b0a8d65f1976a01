/*
 * gates.h — the five wire gates (COMPILER.md "Wire-gate insertion"): one
 * contract row per gate (op, idempotence stamp, *_source key, output
 * suffix, side) used by the five insert passes and by
 * validate_runtime_complete, which asserts every registered contract. A new
 * gate is a new row plus its insert pass.
 *
 * Which wire ops are peer-routed (get a gate chain):
 *   RX: every Recv and RecvReq (an inbound envelope from one peer lands
 *       there). RecvRespBatched is fed by the engine's response collector,
 *       which already correlates by request id; it gets no RX chain.
 *   TX: every Send, SendReqBatched and SendResp with a data input. The spec
 *       gates only sends with a static `peer` attribute; here destinations
 *       are chosen at run time (a PeerId vector from a PeerSelector, or the
 *       requester for SendResp), so every send is peer-routed. The gate
 *       reads [data] and forwards it (its output is the send's data, not a
 *       Trigger, so the payload keeps flowing); a static `peer` attribute is
 *       copied onto the gate, which then checks that peer (the engine checks
 *       run-time destinations when the envelope goes out).
 *
 * RX chain: Recv -> DedupGateRx -> PeerHealthGateRx -> BackoffGateRx, off
 * the cursor rx_chain_head on the receive, which defaults to the payload
 * output (the value consumers use; output[1] of Recv / RecvReq) — or the
 * trigger output when nothing reads the payload. Gate outputs are named
 * "<recv>#<gate>_rx_out"; every consumer of the old head is rewired.
 * TX chain: PeerHealthGateTx -> BackoffGateTx -> send, each pass replacing
 * the send's input[0] with "<send>#<gate>_tx_gated".
 */
#ifndef BBC_GATES_H
#define BBC_GATES_H

#include <stdbool.h>

#include "bb/ir.h"
#include "bbc/compiler_internal.h"

typedef struct bbc_gate_contract {
    const char *op;         /* syscall op_type */
    const char *gated_key;  /* idempotence stamp on the wire op */
    const char *source_key; /* on the gate: the wire op's name */
    const char *suffix;     /* output name suffix after '#' */
    bool rx;
} bbc_gate_contract;

/* In run order: the three RX gates, then the two TX gates. */
extern const bbc_gate_contract BBC_GATE_CONTRACTS[5];
#define BBC_N_GATE_CONTRACTS 5

bool bbc_rx_routed(const bb_node *n);
bool bbc_tx_routed(const bb_node *n);

/* Splice gate g into every partition (idempotent). */
int bbc_insert_gate(bbc_state *st, const bbc_gate_contract *g);

/* The gates of one function, by (op, the wire op they protect), and its
 * consumers: what bbc_gate_missing looks at. NULL on OOM. */
typedef struct bbc_gate_index bbc_gate_index;
bbc_gate_index *bbc_gate_index_new(bb_arena *a, const bb_function *f);
/* The function's dataflow index (consumers, producers) the gate index holds. */
const struct bbc_fnedit *bbc_gate_index_flow(const bbc_gate_index *gx);

/* NULL when the gate of contract g protecting wire node n is in place in
 * the indexed function, else a description of what is missing (arena
 * string). */
const char *bbc_gate_missing(bb_arena *a, const bbc_gate_index *gx, const bb_node *n,
                             const bbc_gate_contract *g);

#endif
