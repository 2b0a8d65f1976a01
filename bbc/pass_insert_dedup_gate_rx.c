/*
 * pass_insert_dedup_gate_rx.c — splices the gate of contract BBC_GATE_CONTRACTS[0]
 * next to every peer-routed wire op of every partition (COMPILER.md
 * "Wire-gate insertion"; the shapes, stamps and names are in gates.h).
 * Idempotent: a wire op carrying the gate's stamp is skipped.
 */
#include "bbc/compiler_internal.h"
#include "bbc/gates.h"

int bbc_pass_insert_dedup_gate_rx(bbc_state *st)
{
    return bbc_insert_gate(st, &BBC_GATE_CONTRACTS[0]);
}
