/*
 * meta.h — the spelling of every ai.bytesandbrains.* metadata key, domain,
 * reserved value, compiler-inserted op name and well-known attribute name
 * (IR_AND_DSL.md Parts 2, 5, 7 and Update; COMPILER.md), plus small helpers
 * for the binding metadata "<role>|<TYPE_NAME>|<slot_id>".
 *
 * Every other part of the project spells these strings through this header
 * only, so a typo is a compile error rather than a silent mismatch between
 * the recorder, bbc and bbd.
 *
 * Deviation from the spec (concrete slot type). IR_AND_DSL.md Part 3 stores
 * a concrete slot's TYPE_NAME in AttributeProto.metadata_props. ONNX's
 * AttributeProto has no metadata_props field, so a valid ModelProto cannot
 * carry it there. Instead the recorder stores it on the owning
 * FunctionProto's metadata_props under
 *     "ai.bytesandbrains.concrete_type.<slot>"  (BB_META_SLOT_CONCRETE_TYPE_PREFIX)
 * where <slot> is the attribute_proto's name; see bb_meta_slot_concrete_type_key.
 */
#ifndef BB_META_H
#define BB_META_H

#include <stddef.h>
#include <stdint.h>

#include "bb/arena.h"
#include "bb/status.h"

/* ---- domains ------------------------------------------------------------- */
#define BB_DOMAIN_BB "ai.bytesandbrains"   /* Opaque types (= BB_TYPE_DOMAIN) */
#define BB_DOMAIN_PREFIX "ai.bytesandbrains." /* every reserved BB opset */
#define BB_DOMAIN_SYSCALL "ai.bytesandbrains.syscall"
#define BB_DOMAIN_ADDRESS_BOOK "ai.bytesandbrains.address_book"
#define BB_DOMAIN_WIRE "ai.bytesandbrains.wire"
#define BB_DOMAIN_COMPOSITE "ai.bytesandbrains.composite"
#define BB_DOMAIN_MODULE "ai.bytesandbrains.module" /* hoisted sub-Module functions */
#define BB_DOMAIN_ROLE_PREFIX "ai.bytesandbrains.role."
#define BB_DOMAIN_ROLE_INDEX "ai.bytesandbrains.role.index"
#define BB_DOMAIN_ROLE_MODEL "ai.bytesandbrains.role.model"
#define BB_DOMAIN_ROLE_AGGREGATOR "ai.bytesandbrains.role.aggregator"
#define BB_DOMAIN_ROLE_COMPRESSOR "ai.bytesandbrains.role.compressor"
#define BB_DOMAIN_ROLE_DATA_LOADER "ai.bytesandbrains.role.data_loader"
#define BB_DOMAIN_ROLE_PEER_SELECTOR "ai.bytesandbrains.role.peer_selector"
/* ROLES.md's spellings of the Codec and DataSource domains. The catalogs use
 * compressor / data_loader (IR_AND_DSL.md 5c); bb_domain_role maps these
 * aliases to the same roles, but no catalog is registered under them. */
#define BB_DOMAIN_ROLE_CODEC_ALIAS "ai.bytesandbrains.role.codec"
#define BB_DOMAIN_ROLE_DATA_SOURCE_ALIAS "ai.bytesandbrains.role.data_source"
#define BB_DOMAIN_ONNX "ai.onnx" /* "" in a NodeProto means the same */

/* Every metadata key below starts with this. */
#define BB_META_PREFIX "ai.bytesandbrains."

/* ---- NodeProto metadata_props keys (IR_AND_DSL.md Part 2) ---------------- */
/* Concrete component: TYPE_NAME + per-instance id ("0", "1", ...). */
#define BB_META_CONCRETE_TYPE "ai.bytesandbrains.concrete_type"
#define BB_META_INSTANCE "ai.bytesandbrains.instance"
/* Generic placeholder: the role trait and the slot id (decimal u32). */
#define BB_META_REQUIRED_TRAIT "ai.bytesandbrains.required_trait"
#define BB_META_SLOT_ID "ai.bytesandbrains.slot_id"
/* The FunctionProto attribute (slot name) that owns this node. */
#define BB_META_SLOT "ai.bytesandbrains.slot"
/* with_module scope chain "<parent>_<child>_..." (partition naming only). */
#define BB_META_MODULE_INSTANCE "ai.bytesandbrains.module_instance"
/* On a FunctionProto: "bootstrap" for "<module>__bootstrap". */
#define BB_META_MODULE_PHASE "ai.bytesandbrains.module_phase"
#define BB_MODULE_PHASE_BOOTSTRAP "bootstrap"
#define BB_BOOTSTRAP_SUFFIX "__bootstrap"
/* Telemetry: "<role domain>::<op>" of a role op recorded under an atomic opset. */
#define BB_META_ORIGINAL_OP "ai.bytesandbrains.original_op"

/* Concrete slot TYPE_NAME on the FunctionProto (see the deviation above):
 * key = prefix + slot name. */
#define BB_META_SLOT_CONCRETE_TYPE_PREFIX "ai.bytesandbrains.concrete_type."

/* ---- wire annotations (IR_AND_DSL.md 5b) --------------------------------- */
#define BB_META_WIRE_CORRELATION "ai.bytesandbrains.wire_correlation"
#define BB_WIRE_CORRELATION_NONE "none"
#define BB_WIRE_CORRELATION_REQUEST "request"
#define BB_WIRE_CORRELATION_RESPONSE "response"
#define BB_META_WIRE_TRANSPORT "ai.bytesandbrains.wire_transport"
#define BB_WIRE_TRANSPORT_DATA "data"
#define BB_WIRE_TRANSPORT_TRIGGER_ONLY "trigger_only"

/* ---- peer classes and partitions (COMPILER.md, DESIGN.md) ---------------- */
/* Class of Node a NodeProto runs on (stamped by infer_peer_classes). */
#define BB_META_HOME_CLASS "ai.bytesandbrains.home_class"
#define BB_HOME_CLASS_KEY BB_META_HOME_CLASS /* the spec's name */
/* Class a wire send's destination peers belong to. */
#define BB_META_DEST_CLASS "ai.bytesandbrains.dest_class"
/* Class a PeerSelector's sampled peers belong to (its of_class tag,
 * ROLES.md Part 9), stamped on role.peer_selector nodes. */
#define BB_META_PEER_CLASS "ai.bytesandbrains.peer_class"
/* Class of a single-Node Module without peer-class metadata. */
#define BB_SELF_CLASS "@self"
/* On a wire.Recv: slot_id of the role node its payload feeds. */
#define BB_META_RECV_SLOT_ID "ai.bytesandbrains.recv_slot_id"
#define BB_RECV_SLOT_ID_KEY BB_META_RECV_SLOT_ID

/* ---- compiled partitions and wire edges (bbc writes them) ---------------- */
/* On a partition function: its 16-hex content hash and "<class>#<hash>". */
#define BB_META_PARTITION_HASH "ai.bytesandbrains.partition_hash"
#define BB_META_PARTITION_ID "ai.bytesandbrains.partition_id"
/* On a wire send: the name of the receive node (the NodeSiteId the sender
 * addresses with /site/<id>) in the destination partition. */
#define BB_META_DEST_SITE "ai.bytesandbrains.dest_site"
/* On a wire receive: the name of the send node that feeds it. */
#define BB_META_SRC_SITE "ai.bytesandbrains.src_site"
/* On a Recv that synthesize_wire_recvs materialized: "true". */
#define BB_META_SYNTHESIZED "ai.bytesandbrains.synthesized"
/* On a wire send (optional, author-set): hops the deadline covers (default 1). */
#define BB_META_CHAIN_DEPTH "ai.bytesandbrains.chain_depth"
/* On a wire send: sends of one partition with the same value batch into one
 * envelope per destination peer (value = destination class). */
#define BB_META_WIRE_BATCH "ai.bytesandbrains.wire_batch"
/* On a DeadlineCheck: the node whose deadline it enforces. On that node:
 * the name of its DeadlineCheck (idempotence stamp of insert_async_deadlines). */
#define BB_META_DEADLINE_SOURCE "ai.bytesandbrains.deadline_source"
#define BB_META_DEADLINE_CHECK "ai.bytesandbrains.deadline_check"

/* ---- engine wire routing (docs/DECISIONS.md "Wire routing ids") ---------- */
/* A wire receiver (Recv / RecvReq) is addressed as /site/<id> with id =
 * FNV-1a-64("port:<port>") when it carries BB_META_PORT, else
 * FNV-1a-64("<function>/<payload value>"); a sender uses the same rule on
 * its own port. Either side may pin ids: on a receiver its id (decimal
 * u64); on a Send one entry per data input, comma-separated, each a number
 * or "<function>/<value>". */
#define BB_META_WIRE_SITE "ai.bytesandbrains.wire_site"
#define BB_META_WIRE_DEST_SITE "ai.bytesandbrains.wire_dest_site"

/* ---- compilation passport and bindings (model.metadata_props) ------------ */
#define BB_META_COMPILED "ai.bytesandbrains.compiled"
#define BB_COMPILED_PASSPORT "v1"
/* "ai.bytesandbrains.binding.<target>.<slot>" = "<role>|<TYPE_NAME>|<slot_id>" */
#define BB_META_BINDING_PREFIX "ai.bytesandbrains.binding."
#define BB_BINDING_SEP '|'

/* ---- wire-gate insertion (COMPILER.md "Wire-gate insertion") ------------- */
/* RX chain cursor on a wire.Recv; defaults to recv.output[0]. */
#define BB_META_RX_CHAIN_HEAD "ai.bytesandbrains.rx_chain_head"
#define BB_RX_CHAIN_HEAD_KEY BB_META_RX_CHAIN_HEAD
/* Idempotence stamps (value "true") on the protected wire op. */
#define BB_META_DEDUP_RX_GATED "ai.bytesandbrains.dedup_rx_gated"
#define BB_META_PEER_HEALTH_RX_GATED "ai.bytesandbrains.peer_health_rx_gated"
#define BB_META_BACKOFF_RX_GATED "ai.bytesandbrains.backoff_rx_gated"
#define BB_META_PEER_HEALTH_TX_GATED "ai.bytesandbrains.peer_health_tx_gated"
#define BB_META_BACKOFF_TX_GATED "ai.bytesandbrains.backoff_tx_gated"
#define BB_META_GATED_VALUE "true"
/* On each gate node: the name of the wire op it protects. */
#define BB_META_DEDUP_RX_SOURCE "ai.bytesandbrains.dedup_rx_source"
#define BB_META_PEER_HEALTH_RX_SOURCE "ai.bytesandbrains.peer_health_rx_source"
#define BB_META_BACKOFF_RX_SOURCE "ai.bytesandbrains.backoff_rx_source"
#define BB_META_PEER_HEALTH_TX_SOURCE "ai.bytesandbrains.peer_health_tx_source"
#define BB_META_BACKOFF_TX_SOURCE "ai.bytesandbrains.backoff_tx_source"

/* ---- composite Bundle / Unbundle (IR_AND_DSL.md Update) ------------------ */
/* Stamped on both ops: child_count (INT) and child_types (comma-joined
 * TypeNode denotations). The catalog lists them as optional attributes of
 * those names (the recorder writes attributes). */
#define BB_META_COMPOSITE_CHILD_COUNT "ai.bytesandbrains.composite.child_count"
#define BB_META_COMPOSITE_CHILD_TYPES "ai.bytesandbrains.composite.child_types"

/* ---- keys this project adds (not in the spec; see bb/recorder.h) --------- */
/* On a wire node: the network port it sends / receives. */
#define BB_META_PORT "ai.bytesandbrains.port"
/* On a FunctionProto: "<prefix><port>" = destination class of a net_out /
 * the formal a lookup_output reads. */
#define BB_META_NET_OUT_PREFIX "ai.bytesandbrains.net_out."
#define BB_META_NET_IN_PREFIX "ai.bytesandbrains.net_in."
/* On a FunctionProto: "<prefix><slot>" = the slot's role name / slot id. */
#define BB_META_SLOT_ROLE_PREFIX "ai.bytesandbrains.slot_role."
#define BB_META_SLOT_ID_PREFIX "ai.bytesandbrains.slot_id."
/* On an ai.onnx If / Loop dispatched per op: "<prefix><k>" = the outer-scope
 * name its subgraphs read that the node's k-th extra trailing input carries
 * (ONNX subgraphs see the enclosing graph; a per-op dispatch has none).
 * `bbd run` stamps them when it turns a plain ONNX graph into a module. */
#define BB_META_OUTER_SCOPE_PREFIX "ai.bytesandbrains.outer_scope."

/* ---- op names ------------------------------------------------------------ */
/* Compiler-inserted syscall gates (bb_ir::syscall_ids). */
#define BB_OP_DEDUP_GATE_RX "DedupGateRx"
#define BB_OP_PEER_HEALTH_GATE_RX "PeerHealthGateRx"
#define BB_OP_BACKOFF_GATE_RX "BackoffGateRx"
#define BB_OP_PEER_HEALTH_GATE_TX "PeerHealthGateTx"
#define BB_OP_BACKOFF_GATE_TX "BackoffGateTx"
#define BB_OP_DEADLINE_CHECK "DeadlineCheck"
#define BB_OP_GATE_DISPATCH "GateDispatch"
#define BB_OP_MINT_DISPATCH "MintDispatch"
#define BB_OP_GATE_MANY_DISPATCH "GateManyDispatch"
/* ai.bytesandbrains.wire */
#define BB_OP_WIRE_SEND "Send"
#define BB_OP_WIRE_SEND_REQ_BATCHED "SendReqBatched"
#define BB_OP_WIRE_SEND_RESP "SendResp"
#define BB_OP_WIRE_RECV "Recv"
#define BB_OP_WIRE_RECV_REQ "RecvReq"
#define BB_OP_WIRE_RECV_RESP_BATCHED "RecvRespBatched"
/* ai.bytesandbrains.composite */
#define BB_OP_BUNDLE "Bundle"
#define BB_OP_UNBUNDLE "Unbundle"
/* ai.bytesandbrains.address_book */
#define BB_OP_AB_INSERT "Insert"
#define BB_OP_AB_INSERT_MANY "InsertMany"
#define BB_OP_AB_LOOKUP "Lookup"

/* ---- well-known attribute names ------------------------------------------ */
#define BB_ATTR_NAME_PEER "peer"                 /* TX gates, peer-routed Send: PeerId bytes */
#define BB_ATTR_NAME_DEADLINE_NS "deadline_ns"   /* wire sends, async ops, DeadlineCheck */
#define BB_ATTR_NAME_PAYLOAD_TYPE "payload_type" /* Recv / RecvReq: TypeProto */

/* ---- helpers ------------------------------------------------------------- */

/* Upper bound on a binding value / key the parsers accept (untrusted input). */
#define BB_BINDING_MAX_LEN 4096

/* One parsed binding value. role and type_name are arena strings. */
typedef struct bb_binding_triple {
    const char *role;      /* "Backend", "Model", ... (bb_role_parse reads it) */
    const char *type_name; /* TYPE_NAME, e.g. "cpu::CpuBackend" */
    uint32_t slot_id;
} bb_binding_triple;

/* "ai.bytesandbrains.binding.<target>.<slot>". Returns new (arena), or NULL
 * on OOM or when target/slot is NULL or empty. */
char *bb_meta_binding_key(bb_arena *a, const char *target, const char *slot);

/* When key is a binding key for target, returns the slot part (a pointer
 * into key, borrowed); otherwise NULL. Never allocates. */
const char *bb_meta_binding_key_slot(const char *key, const char *target);

/* Writes "<role>|<TYPE_NAME>|<slot_id>" into a (new arena string in *out).
 * BB_EINVAL (err names the field) when role or type_name is NULL, empty, or
 * contains '|'; BB_ENOMEM on OOM. */
int bb_binding_triple_format(bb_arena *a, const bb_binding_triple *t, char **out,
                             bb_error *err);

/* Parses an untrusted binding value. Fields are copied into a. BB_EPARSE
 * (err names the value and the problem) unless the value is at most
 * BB_BINDING_MAX_LEN bytes with exactly three '|'-separated fields, a
 * non-empty role and TYPE_NAME, and a decimal slot_id that fits in u32. */
int bb_binding_triple_parse(bb_arena *a, const char *value, bb_binding_triple *out,
                            bb_error *err);

/* "ai.bytesandbrains.concrete_type.<slot>". Returns new (arena) or NULL. */
char *bb_meta_slot_concrete_type_key(bb_arena *a, const char *slot);

/* ---- signed artifacts (bbc sign; bbd require_signed_by) ------------------- */
/* A signature of the artifact (ModelProto.metadata_props, written last):
 * "<signer PeerId> <base64 Ed25519 signature>" (bb/model_sign.h). */
#define BB_META_SIGNATURE "ai.bytesandbrains.signature"

#endif
