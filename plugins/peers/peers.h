/*
 * peers.h — internal interface of the peers plugin (peers::ConstantView,
 * peers::Connected): two PeerSelectors that differ only in where their view
 * comes from. Both answer the same ops (select.c):
 *
 *   Sample(n) -> peers             SelectParams::Random{n}
 *   CurrentView() -> view          SelectParams::All
 *   Select(params, n[, key]) -> peers   any SelectParams (IR_AND_DSL.md
 *       Update, "PeerSelector + SelectParams"); NearKey is refused — neither
 *       view has a distance metric
 *
 * of_class: the recorder tags a Sample / CurrentView node with the class
 * its peers are drawn from (ai.bytesandbrains.peer_class), and the compiler
 * routes the sends by it. At run time the selector holds the tag to its
 * own configuration: a view of one class never answers a node that samples
 * another (the error names both), and peers::Connected takes the tag as
 * the target its peers must run when its config names none.
 */
#ifndef BB_PEERS_INTERNAL_H
#define BB_PEERS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bb/plugin.h>

#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_rng.h"

#define PEERS_MAX_VIEW (1u << 20)
#define PEERS_CLASS_MAX 128

typedef enum select_kind { SELECT_ALL, SELECT_RANDOM, SELECT_NEAR_KEY } select_kind;

typedef struct select_params {
    select_kind kind;
    int64_t n;
} select_params;

/* The common head of both selectors' instances. */
typedef struct selector {
    char who[160];                   /* "peers::Connected at slot 'selector'" */
    char of_class[PEERS_CLASS_MAX];  /* configured class ("" = any) */
    bbp_rng rng;
} selector;

/* The view a selector offers (new references in *out, malloc'd array). */
typedef int (*view_fn)(void *inst, bb_ctx *ctx, const char *node_class, bb_value ***out,
                       size_t *n, bb_error *err);

/* ---- select.c ---------------------------------------------------------------------- */
/* Fills the head from a loaded config: its who, a generator seeded with
 * seed, and of_class from the string config key class_key. */
int selector_init(selector *s, const bbp_config *cfg, const char *class_key, uint64_t seed,
                  bb_error *err);
/* Runs Sample / CurrentView / Select over the view view() returns. */
bb_dispatch_result selector_dispatch(selector *s, void *inst, view_fn view, bb_ctx *ctx,
                                     const bb_dispatch_call *call, bb_value **outputs,
                                     bb_error *err);
extern const bb_opset_decl SELECTOR_OPSETS[];
#define SELECTOR_N_OPSETS 2

/* ---- constant_view.c / connected.c ------------------------------------------------------ */
extern const bb_component_type PEERS_CONSTANT_VIEW;
extern const bb_component_type PEERS_CONNECTED;

#endif
