/*
 * peers.h — internal interface of the peers plugin: the PeerSelectors.
 *
 *   peers::ConstantView   a fixed list from the config
 *   peers::Connected      the connected peers that announced a target
 *   peers::GlobalRegistry a registry server (serve) or its clients
 *   peers::Cyclon         CYCLON peer sampling (a partial view, shuffles)
 *   peers::Dht            NearKey over a Protocol slot "dht" (Kademlia)
 *
 * Every one answers the same ops (select.c):
 *   Sample(n) -> peers             SelectParams::Random{n}
 *   CurrentView() -> view          SelectParams::All
 *   Select(params, n[, key]) -> peers   any SelectParams (IR_AND_DSL.md
 *       Update, "PeerSelector + SelectParams"); NearKey only where there is
 *       a distance metric (peers::Dht), refused elsewhere
 * Registry and CYCLON also answer control-plane ops from their
 * counterparts on other nodes (bb-plugin(7) CONTROL PLANE): Announce /
 * Query, Shuffle. Their payloads are untrusted and decoded with bounds
 * (plugins/common/plugin_peer.h).
 *
 * of_class: the recorder tags a Sample / CurrentView / Select node with
 * the class its peers are drawn from (ai.bytesandbrains.peer_class), and
 * the compiler routes the sends by it. At run time the selector holds the
 * tag to its own configuration: a view of one class never answers a node
 * that samples another (the error names both); the registry filters its
 * entries by the tag; peers::Connected takes it as the target its peers
 * must run when its config names none.
 */
#ifndef BB_PEERS_INTERNAL_H
#define BB_PEERS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bb/bytes.h>
#include <bb/peerid.h>
#include <bb/plugin.h>

#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_peer.h"
#include "plugins/common/plugin_rng.h"

#define PEERS_MAX_VIEW (1u << 20)
#define PEERS_CLASS_MAX 128

typedef enum select_kind { SELECT_ALL, SELECT_RANDOM, SELECT_NEAR_KEY } select_kind;

typedef struct select_params {
    select_kind kind;
    int64_t n;
    const bb_value *key;    /* NearKey: the key (Select's input; borrowed) */
    const char *node_class; /* the class the node samples (NULL: untagged) */
} select_params;

/* The common head of every selector's instance. */
typedef struct selector {
    char who[160];                   /* "peers::Connected at slot 'selector'" */
    char of_class[PEERS_CLASS_MAX];  /* configured class ("" = any) */
    bbp_rng rng;                     /* the draws of Random{n} (seeded by the host) */
} selector;

/* The view a selector offers (new references in *out, malloc'd array). */
typedef int (*view_fn)(void *inst, bb_ctx *ctx, const char *node_class, bb_value ***out,
                       size_t *n, bb_error *err);

/* ---- select.c ---------------------------------------------------------------------- */
/* Fills the head from a loaded config: its who, a generator seeded with
 * seed, and of_class from the string config key class_key. */
int selector_init(selector *s, const bbp_config *cfg, const char *class_key, uint64_t seed,
                  bb_error *err);
/* SelectParams of a Sample / CurrentView / Select call, checked against
 * the configured class. */
int selector_params(const selector *s, const bb_dispatch_call *call, select_params *p,
                    bb_error *err);
/* The answer to p from view[0..n) (takes the references): all of it, or
 * min(n, p->n) drawn uniformly without replacement, as a PeerIdVec. */
bb_value *selector_draw(selector *s, const select_params *p, bb_value **view, size_t n);
/* Runs Sample / CurrentView / Select over the view view() returns
 * (NearKey refused: a view has no distance metric). */
bb_dispatch_result selector_dispatch(selector *s, void *inst, view_fn view, bb_ctx *ctx,
                                     const bb_dispatch_call *call, bb_value **outputs,
                                     bb_error *err);
/* Is this a control-plane dispatch (no node; payload, token, sender)? */
bool selector_is_control(const bb_dispatch_call *call);

/* The ops every selector declares (peers.c), as opset initializers, and
 * the ports of a control-plane op: (payload, token, sender) -> answer. */
extern const bb_op_decl SELECTOR_ROLE_OPS[2];
extern const bb_op_decl SELECTOR_EXT_OPS[1];
#define SELECTOR_ROLE_OPSET {"ai.bytesandbrains.role.peer_selector", 1, SELECTOR_ROLE_OPS, 2}
#define SELECTOR_EXT_OPSET {"bb-peers.PeerSelector.atomic", 1, SELECTOR_EXT_OPS, 1}
extern const bb_opset_decl SELECTOR_OPSETS[];
#define SELECTOR_N_OPSETS 2
extern const bb_port_decl CONTROL_IN[3];
extern const bb_port_decl CONTROL_OUT[1];

/* ---- the types ------------------------------------------------------------------------------ */
extern const bb_component_type PEERS_CONSTANT_VIEW;
extern const bb_component_type PEERS_CONNECTED;
extern const bb_component_type PEERS_GLOBAL_REGISTRY;
extern const bb_component_type PEERS_CYCLON;
extern const bb_component_type PEERS_DHT;

#endif
