/*
 * opsets_wire.c — the network catalogs: ai.bytesandbrains.wire v1
 * (IR_AND_DSL.md 5b) and ai.bytesandbrains.address_book v1 (5a.1).
 * Ops sorted by op_type (strcmp).
 *
 * dest is a PeerId vector: the M-phase update ("Wire op cardinality") makes
 * the peers vector the only accepted destination at input position 1.
 * Batched responses ride the ResponseBatch carrier on both request ops.
 */
#include "opsets_internal.h"

#define BB__DOM BB_DOMAIN_WIRE
#define BB__VER BB_OPSET_VERSION

static const bb_op_schema WIRE_OPS[] = {
    BB__OP("Recv", BB__NONE, BB__PORTS(BB__P("trigger", TRIGGER), BB__P("payload", ANY)),
           BB__ATTRS(BB__A_OPT("payload_type", TYPE_PROTO)), BB_OPF_WIRE_RECV,
           "Declares an inbound site: fires with each payload sent to it"),
    BB__OP("RecvReq", BB__NONE,
           BB__PORTS(BB__P("trigger", TRIGGER), BB__P("payload", ANY),
                     BB__P("req_id", REQUEST_ID)),
           BB__ATTRS(BB__A_OPT("payload_type", TYPE_PROTO)), BB_OPF_WIRE_RECV,
           "Declares an inbound request site: payload plus the id to answer"),
    BB__OP("RecvRespBatched", BB__PORTS(BB__P("req_id", REQUEST_ID)),
           BB__PORTS(BB__P("trigger", TRIGGER), BB__P("responses", RESPONSE_BATCH)),
           BB__NONE, BB_OPF_WIRE_RECV | BB_OPF_ASYNC,
           "Collects the responses to a batched request; fires once per cohort"),
    BB__OP("Send", BB__PORTS(BB__P("data", ANY), BB__P("dest", PEER_ID_VEC)), BB__NONE,
           BB__ATTRS(BB__A_OPT("peer", STRING), BB__A_OPT("deadline_ns", INT)),
           BB_OPF_WIRE_SEND, "Fire-and-forget send of data to every dest peer"),
    BB__OP("SendReqBatched", BB__PORTS(BB__P("data", ANY), BB__P("dest", PEER_ID_VEC)),
           BB__PORTS(BB__P("req_id", REQUEST_ID), BB__P("responses", RESPONSE_BATCH)),
           BB__ATTRS(BB__A_OPT("deadline_ns", INT), BB__A("quorum", INT, "0")),
           BB_OPF_WIRE_SEND | BB_OPF_ASYNC,
           "Batched request; responses fire once when the cohort completes (quorum 0 = all)"),
    BB__OP("SendResp",
           BB__PORTS(BB__P("data", ANY), BB__P_OPT("dest", PEER_ID_VEC),
                     BB__P("req_id", REQUEST_ID)),
           BB__NONE, BB__ATTRS(BB__A_OPT("deadline_ns", INT)), BB_OPF_WIRE_SEND,
           "Replies to an inbound request (dest defaults to the requester)"),
};

const bb_opset_schema bb__opset_wire = {
    .domain = BB_DOMAIN_WIRE,
    .version = BB_OPSET_VERSION,
    .role = BB_ROLE_NONE,
    .ops = WIRE_OPS,
    .n_ops = BB__COUNT(WIRE_OPS),
    .doc = "Network endpoints; engine-native, partition boundaries",
};

#undef BB__DOM
#define BB__DOM BB_DOMAIN_ADDRESS_BOOK

static const bb_op_schema ADDRESS_BOOK_OPS[] = {
    BB__OP("Insert", BB__PORTS(BB__P("peer", PEER_ID), BB__P("address", MULTIADDRESS)),
           BB__NONE, BB__NONE, 0, "Adds a peer with one address, or registers another address"),
    BB__OP("InsertMany", BB__PORTS(BB__P("peer", PEER_ID), BB__P("addresses", ADDRESS_VEC)),
           BB__NONE, BB__NONE, 0, "Adds a peer with its addresses, or registers each of them"),
    BB__OP("Lookup", BB__PORTS(BB__P("peer", PEER_ID)),
           BB__PORTS(BB__P("addresses", ADDRESS_VEC)), BB__NONE, 0,
           "The peer's ordered address list; fails for unknown peers"),
};

const bb_opset_schema bb__opset_address_book = {
    .domain = BB_DOMAIN_ADDRESS_BOOK,
    .version = BB_OPSET_VERSION,
    .role = BB_ROLE_NONE,
    .ops = ADDRESS_BOOK_OPS,
    .n_ops = BB__COUNT(ADDRESS_BOOK_OPS),
    .doc = "DAG-mutable AddressBook operations",
};
