/*
 * types.h — the BytesAndBrains type tree (IR_AND_DSL.md Part 4).
 *
 *   any
 *    +-- tensor (abstract: the polymorphic TYPE_TENSOR placeholder)
 *    |    +-- tensor_f32, tensor_f64, tensor_f16, tensor_bf16, tensor_i8,
 *    |        tensor_i16, tensor_i32, tensor_i64, tensor_u8, tensor_u16,
 *    |        tensor_u32, tensor_u64, tensor_bool
 *    +-- Trigger, PeerId, Multiaddress, RequestId, WireRequestId, CommandId,
 *    |   Timestamp, EventKind, CorrelationToken, ResponseBatch, address_vec,
 *    |   Composite, Bytes, U64                       (Opaque leaves)
 *    +-- peer_id_vec                                 (Sequence<PeerId>)
 *
 * Each node is a static, immutable descriptor: its name, the denotation
 * stamped on TypeProto.denotation, its ONNX TypeProto shape and its wire
 * hash = FNV-1a-64("<name>@<opset_version>"), which selects the decoder of
 * a wire fill. Compare nodes with bb_type_same (pointer, then hash), never
 * by name.
 */
#ifndef BB_TYPES_H
#define BB_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/ir.h"

/* Domain of every BB Opaque type. */
#define BB_TYPE_DOMAIN "ai.bytesandbrains"

/* The runtime carrier a value of this type uses (bb_value.kind). */
typedef enum bb_value_kind {
    BB_VK_ABSTRACT = 0, /* any, tensor: no value has exactly this type */
    BB_VK_TRIGGER,
    BB_VK_TENSOR,
    BB_VK_U64,           /* U64 and every id/timestamp scalar */
    BB_VK_BYTES,
    BB_VK_PEER_ID,       /* multihash bytes */
    BB_VK_ADDRESS,       /* binary multiaddr */
    BB_VK_PEER_ID_VEC,
    BB_VK_ADDRESS_VEC,
    BB_VK_COMPOSITE,
    BB_VK_RESPONSE_BATCH
} bb_value_kind;

typedef enum bb_type_shape {
    BB_TS_ANY,      /* no TypeProto value (denotation only) */
    BB_TS_TENSOR,   /* TypeProto.tensor_type */
    BB_TS_OPAQUE,   /* TypeProto.opaque_type{ai.bytesandbrains, name} */
    BB_TS_SEQUENCE  /* TypeProto.sequence_type{elem} */
} bb_type_shape;

typedef struct bb_type_node {
    const char *name;       /* tree name; the Opaque name for opaque leaves */
    const char *denotation; /* "ai.bytesandbrains.<name>" */
    const struct bb_type_node *parent; /* NULL for any */
    bb_value_kind kind;
    bb_type_shape shape;
    int32_t elem_type;      /* bb_dtype for tensor leaves, 0 otherwise */
    const struct bb_type_node *seq_elem; /* element for BB_TS_SEQUENCE */
    uint32_t opset_version; /* version mixed into the wire hash */
    uint64_t wire_hash;
} bb_type_node;

extern const bb_type_node BB_TYPE_ANY;
extern const bb_type_node BB_TYPE_TENSOR;
extern const bb_type_node BB_TYPE_TENSOR_F32, BB_TYPE_TENSOR_F64, BB_TYPE_TENSOR_F16,
    BB_TYPE_TENSOR_BF16, BB_TYPE_TENSOR_I8, BB_TYPE_TENSOR_I16, BB_TYPE_TENSOR_I32,
    BB_TYPE_TENSOR_I64, BB_TYPE_TENSOR_U8, BB_TYPE_TENSOR_U16, BB_TYPE_TENSOR_U32,
    BB_TYPE_TENSOR_U64, BB_TYPE_TENSOR_BOOL;
extern const bb_type_node BB_TYPE_TRIGGER, BB_TYPE_PEER_ID, BB_TYPE_MULTIADDRESS,
    BB_TYPE_REQUEST_ID, BB_TYPE_WIRE_REQUEST_ID, BB_TYPE_COMMAND_ID, BB_TYPE_TIMESTAMP,
    BB_TYPE_EVENT_KIND, BB_TYPE_CORRELATION_TOKEN, BB_TYPE_RESPONSE_BATCH,
    BB_TYPE_ADDRESS_VEC, BB_TYPE_COMPOSITE, BB_TYPE_BYTES, BB_TYPE_U64;
extern const bb_type_node BB_TYPE_PEER_ID_VEC;

/* FNV-1a-64 of "<name>@<version>". */
uint64_t bb_wire_hash(const char *name, uint32_t version);
/* FNV-1a-64 of raw bytes (also used by the dedup gate). */
uint64_t bb_fnv1a64(const void *data, size_t len);

/* Every node of the tree, root first. */
size_t bb_type_count(void);
const bb_type_node *bb_type_at(size_t i);

const bb_type_node *bb_type_by_name(const char *name);
const bb_type_node *bb_type_by_denotation(const char *denotation);
const bb_type_node *bb_type_by_wire_hash(uint64_t hash);
/* Tensor leaf for an ONNX dtype; NULL when the dtype has no leaf. */
const bb_type_node *bb_type_tensor_of(int32_t dtype);

bool bb_type_same(const bb_type_node *a, const bb_type_node *b);
/* a is b or a descendant of b. */
bool bb_type_is_a(const bb_type_node *a, const bb_type_node *b);
/* The narrower of a and b when one is an ancestor of the other, else NULL
 * (the type solver's meet). */
const bb_type_node *bb_type_meet(const bb_type_node *a, const bb_type_node *b);
bool bb_type_is_leaf(const bb_type_node *t);

/* TypeProto for a node (denotation stamped). */
bb_type_proto *bb_type_to_proto(bb_arena *a, const bb_type_node *t);
/* Node for a TypeProto: by denotation first, then by shape (tensor elem
 * type, opaque name, sequence of PeerId). NULL when nothing matches. */
const bb_type_node *bb_type_from_proto(const bb_type_proto *tp);

#endif
