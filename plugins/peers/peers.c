/*
 * peers.c — the peers plugin: the ops every selector declares, the ports
 * of a control-plane op, and the plugin entry (the types live in their own
 * files, see peers.h).
 */
#include "peers.h"
#include "plugins/common/plugin_type.h"

/* ---- declarations ------------------------------------------------------------------ */

static const bb_port_decl PEERS_OUT[] = {{.name = "peers", .type = &BB_TYPE_PEER_ID_VEC}};
static const bb_port_decl VIEW_OUT[] = {{.name = "view", .type = &BB_TYPE_PEER_ID_VEC}};
static const bb_port_decl KEY_IN[] = {{.name = "key", .type = &BB_TYPE_ANY, .optional = true}};

const bb_op_decl SELECTOR_ROLE_OPS[2] = {
    {"CurrentView", NULL, 0, VIEW_OUT, 1, "every peer in the view (SelectParams::All)"},
    {"Sample", NULL, 0, PEERS_OUT, 1,
     "n peers drawn uniformly without replacement (SelectParams::Random{n})"},
};
const bb_op_decl SELECTOR_EXT_OPS[1] = {
    {"Select", KEY_IN, 1, PEERS_OUT, 1,
     "attributes params = \"all\" | \"random\" | \"near_key\" and n: any SelectParams "
     "(NearKey{key, n}, the key the input: only where there is a distance metric)"},
};

const bb_opset_decl SELECTOR_OPSETS[SELECTOR_N_OPSETS] = {SELECTOR_ROLE_OPSET, SELECTOR_EXT_OPSET};

/* A control-plane op (bb-plugin(7) CONTROL PLANE): what the engine hands it
 * and what it answers. */
const bb_port_decl CONTROL_IN[3] = {
    {.name = "payload", .type = &BB_TYPE_BYTES},
    {.name = "correlation", .type = &BB_TYPE_CORRELATION_TOKEN},
    {.name = "sender", .type = &BB_TYPE_PEER_ID},
};
const bb_port_decl CONTROL_OUT[1] = {{.name = "answer", .type = &BB_TYPE_BYTES}};

static const bb_component_type *const TYPES[] = {&PEERS_CONSTANT_VIEW, &PEERS_CONNECTED,
                                                 &PEERS_GLOBAL_REGISTRY, &PEERS_CYCLON,
                                                 &PEERS_DHT};

BBP_PLUGIN_ENTRY("peers", TYPES)
