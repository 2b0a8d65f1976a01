/*
 * peers.c — the peers plugin: the ops both selectors declare and the
 * plugin entry (the types live in constant_view.c and connected.c).
 */
#include "peers.h"
#include "plugins/common/plugin_type.h"

/* ---- declarations ------------------------------------------------------------------ */

static const bb_port_decl PEERS_OUT[] = {{.name = "peers", .type = &BB_TYPE_PEER_ID_VEC}};
static const bb_port_decl VIEW_OUT[] = {{.name = "view", .type = &BB_TYPE_PEER_ID_VEC}};
static const bb_port_decl KEY_IN[] = {{.name = "key", .type = &BB_TYPE_ANY, .optional = true}};

static const bb_op_decl ROLE_OPS[] = {
    {"CurrentView", NULL, 0, VIEW_OUT, 1, "every peer in the view (SelectParams::All)"},
    {"Sample", NULL, 0, PEERS_OUT, 1,
     "n peers drawn uniformly without replacement (SelectParams::Random{n})"},
};
static const bb_op_decl EXT_OPS[] = {
    {"Select", KEY_IN, 1, PEERS_OUT, 1,
     "attributes params = \"all\" | \"random\" | \"near_key\" and n: any SelectParams "
     "(NearKey is refused)"},
};

const bb_opset_decl SELECTOR_OPSETS[SELECTOR_N_OPSETS] = {
    {"ai.bytesandbrains.role.peer_selector", 1, ROLE_OPS, BBP_COUNT(ROLE_OPS)},
    {"bb-peers.PeerSelector.atomic", 1, EXT_OPS, BBP_COUNT(EXT_OPS)},
};
_Static_assert(BBP_COUNT(SELECTOR_OPSETS) == SELECTOR_N_OPSETS, "SELECTOR_N_OPSETS");

static const bb_component_type *const TYPES[] = {&PEERS_CONSTANT_VIEW, &PEERS_CONNECTED};

BBP_PLUGIN_ENTRY("peers", TYPES)
