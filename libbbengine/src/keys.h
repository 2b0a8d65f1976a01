/*
 * keys.h — the metadata keys, domains and op names the engine reads, taken
 * from bb/meta.h, plus the engine's own wire-routing stamps.
 */
#ifndef BBE__ENGINE_KEYS_H
#define BBE__ENGINE_KEYS_H

#include "bb/meta.h"

/* model / function metadata */
#define BBE__KEY_COMPILED BB_META_COMPILED
#define BBE__COMPILED_V1 BB_COMPILED_PASSPORT
#define BBE__KEY_BINDING_PREFIX BB_META_BINDING_PREFIX
#define BBE__KEY_MODULE_PHASE BB_META_MODULE_PHASE
#define BBE__MODULE_PHASE_BOOTSTRAP BB_MODULE_PHASE_BOOTSTRAP
#define BBE__BOOTSTRAP_SUFFIX BB_BOOTSTRAP_SUFFIX
#define BBE__KEY_SLOT_CONCRETE_TYPE_PREFIX BB_META_SLOT_CONCRETE_TYPE_PREFIX

/* node metadata */
#define BBE__KEY_SLOT BB_META_SLOT
#define BBE__KEY_SLOT_ID BB_META_SLOT_ID
#define BBE__KEY_CONCRETE_TYPE BB_META_CONCRETE_TYPE
#define BBE__KEY_INSTANCE BB_META_INSTANCE
#define BBE__KEY_RECV_SLOT_ID BB_META_RECV_SLOT_ID
#define BBE__KEY_WIRE_TRANSPORT BB_META_WIRE_TRANSPORT
#define BBE__WIRE_TRANSPORT_TRIGGER_ONLY BB_WIRE_TRANSPORT_TRIGGER_ONLY
#define BBE__KEY_PORT BB_META_PORT
/* Engine wire routing (docs/DECISIONS.md). A wire receiver (Recv/RecvReq)
 * is addressed as /site/<id> with id = FNV-1a-64("port:<port>") when the
 * node carries ai.bytesandbrains.port, else FNV-1a-64("<function>/<payload
 * value>"); a sender uses the same rule on its own port metadata. Either
 * side may pin ids explicitly (decimal u64; a Send lists one per data input,
 * comma-separated, each either a number or "<function>/<value>"). */
#define BBE__KEY_WIRE_DEST_SITE "ai.bytesandbrains.wire_dest_site"
#define BBE__KEY_WIRE_SITE "ai.bytesandbrains.wire_site"

/* domains */
#define BBE__DOM_SYSCALL BB_DOMAIN_SYSCALL
#define BBE__DOM_WIRE BB_DOMAIN_WIRE
#define BBE__DOM_ADDRESS_BOOK BB_DOMAIN_ADDRESS_BOOK
#define BBE__DOM_COMPOSITE BB_DOMAIN_COMPOSITE
#define BBE__DOM_MODULE BB_DOMAIN_MODULE
#define BBE__DOM_ROLE_PREFIX BB_DOMAIN_ROLE_PREFIX

/* attributes */
#define BBE__ATTR_DEADLINE_NS BB_ATTR_NAME_DEADLINE_NS
#define BBE__ATTR_PEER BB_ATTR_NAME_PEER
#define BBE__ATTR_PAYLOAD_TYPE BB_ATTR_NAME_PAYLOAD_TYPE

#endif
