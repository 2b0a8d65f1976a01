/*
 * opsets.h — the built-in opset catalogs as static data (IR_AND_DSL.md
 * Part 5): ai.bytesandbrains.syscall (+ the compiler-inserted gates),
 * .address_book, .wire, .composite, the six .role.* opsets, and the ai.onnx
 * subset every Backend must support.
 *
 * Each op lists its ports (name, type node, optional / variadic), its
 * attributes (name, type, required, default as text) and a one-line doc.
 * Everything is immutable and shared; no function here allocates. Lookups
 * are binary searches over tables sorted by strcmp (test_opsets checks the
 * order), so bbc's validator may call them per node.
 *
 * Port conventions (same bb_port_decl as plugin ABI declarations):
 *   - optional: the input may be omitted (trailing) or given as "".
 *   - variadic: only on the LAST port; takes every remaining value. It needs
 *     at least one value unless it is also optional.
 *   - type: the storage type node; &BB_TYPE_ANY accepts anything,
 *     &BB_TYPE_TENSOR any tensor leaf.
 * Attribute type BB_ATTR_UNDEFINED means "any attribute type" (the syscall
 * Constant's value).
 */
#ifndef BB_OPSETS_H
#define BB_OPSETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/ir.h"
#include "bb/meta.h"
#include "bb/plugin.h"
#include "bb/status.h"
#include "bb/types.h"

/* Version every BB opset is declared at. */
#define BB_OPSET_VERSION 1
/* ai.onnx version the catalog's signatures follow and opset_import declares:
 * Split(num_outputs) and Reduce*(axes as input) are opset 18, Gelu is 20.
 * Zeros / Ones are BB additions inside ai.onnx (not standard ONNX). */
#define BB_ONNX_OPSET_VERSION 20

typedef struct bb_attr_schema {
    const char *name;
    bb_attr_type type;        /* BB_ATTR_UNDEFINED: any type */
    bool required;
    const char *default_text; /* default as text ("1", "1.0", "NOTSET"), or NULL */
} bb_attr_schema;

/* bb_op_schema.flags */
enum {
    BB_OPF_COMPILER_INSERTED = 1u << 0, /* spliced by a pass, never authored */
    BB_OPF_WIRE_SEND = 1u << 1,         /* Send, SendReqBatched, SendResp */
    BB_OPF_WIRE_RECV = 1u << 2,         /* Recv, RecvReq, RecvRespBatched */
    BB_OPF_GATE_RX = 1u << 3,           /* Dedup/PeerHealth/Backoff GateRx */
    BB_OPF_GATE_TX = 1u << 4,           /* PeerHealth/Backoff GateTx */
    BB_OPF_ASYNC = 1u << 5              /* may suspend (deadline_ns carrier) */
};

typedef struct bb_op_schema {
    const char *domain;  /* canonical: "ai.onnx" for the ONNX subset */
    int64_t version;     /* opset version the signature belongs to */
    const char *op_type;
    const bb_port_decl *inputs;
    uint32_t n_inputs;
    const bb_port_decl *outputs;
    uint32_t n_outputs;
    const bb_attr_schema *attrs;
    uint32_t n_attrs;
    uint32_t flags;      /* BB_OPF_* */
    const char *doc;
} bb_op_schema;

typedef struct bb_opset_schema {
    const char *domain;
    int64_t version;
    bb_role role;             /* role of a role.* domain; BACKEND for ai.onnx; else NONE */
    const bb_op_schema *ops;  /* sorted by op_type (strcmp) */
    uint32_t n_ops;
    const char *doc;
} bb_opset_schema;

/* ---- catalogs ------------------------------------------------------------- */

/* Number of built-in opsets, and the i-th (sorted by domain; NULL past the end). */
size_t bb_opset_count(void);
const bb_opset_schema *bb_opset_at(size_t i);

/* The catalog of a domain (NULL and "" mean ai.onnx); NULL when unknown. */
const bb_opset_schema *bb_opset_find(const char *domain);

/* An op by (domain, op_type); NULL and "" domain mean ai.onnx. NULL when
 * unknown. O(log n). */
const bb_op_schema *bb_op_schema_find(const char *domain, const char *op_type);

/* Every op of every catalog has a dense id in [0, bb_op_schema_total()):
 * engines may index dispatch tables by it. */
size_t bb_op_schema_total(void);
size_t bb_op_schema_id(const bb_op_schema *op); /* op must come from a catalog */
const bb_op_schema *bb_op_schema_by_id(size_t id); /* NULL when out of range */

/* ---- domains -------------------------------------------------------------- */

/* ai.onnx ("" / NULL too), ai.onnx.*, ai.bytesandbrains and every
 * ai.bytesandbrains.* domain: names no user or plugin may claim. */
bool bb_opset_is_reserved(const char *domain);
/* True for ai.bytesandbrains.role.* (including the ROLES.md aliases). */
bool bb_domain_is_role(const char *domain);
/* Role served by a domain: role.* -> that role (role.codec / role.compressor
 * -> CODEC, role.data_source / role.data_loader -> DATA_SOURCE), ai.onnx ->
 * BACKEND, anything else -> BB_ROLE_NONE. */
bb_role bb_domain_role(const char *domain);

/* ---- ops ------------------------------------------------------------------- */

/* Port / attribute of an op by name (borrowed), with its index; NULL if none. */
const bb_port_decl *bb_op_input(const bb_op_schema *op, const char *name, uint32_t *index);
const bb_port_decl *bb_op_output(const bb_op_schema *op, const char *name, uint32_t *index);
const bb_attr_schema *bb_op_attr(const bb_op_schema *op, const char *name);

/* The port a value at position pos binds to (the variadic last port absorbs
 * the tail), or NULL past the end. */
const bb_port_decl *bb_op_input_at(const bb_op_schema *op, uint32_t pos);
const bb_port_decl *bb_op_output_at(const bb_op_schema *op, uint32_t pos);

/* Accepted value counts: max is UINT32_MAX when the last port is variadic. */
void bb_op_input_arity(const bb_op_schema *op, uint32_t *min, uint32_t *max);
void bb_op_output_arity(const bb_op_schema *op, uint32_t *min, uint32_t *max);

/* Flags of (domain, op_type); 0 when unknown. */
uint32_t bb_op_flags(const char *domain, const char *op_type);
/* An op of the ai.bytesandbrains.wire catalog / its send or receive side. */
bool bb_op_is_wire(const char *domain, const char *op_type);
bool bb_op_is_wire_send(const char *domain, const char *op_type);
bool bb_op_is_wire_recv(const char *domain, const char *op_type);
/* One of the five compiler-inserted wire gates. */
bool bb_op_is_gate(const char *domain, const char *op_type);

/* Checks a node against its schema: input / output counts, required inputs
 * not left "", required attributes present, and known attributes of the
 * declared type. Attributes the schema does not list are accepted (passes
 * stamp e.g. deadline_ns). BB_EVALIDATE with a message naming the node, the
 * op and the port or attribute. op and n are borrowed. */
int bb_op_schema_check_node(const bb_op_schema *op, const bb_node *n, bb_error *err);

#endif
