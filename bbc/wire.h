/*
 * wire.h — finding the two ends of wire edges in one function (the root
 * before partitioning): which receive a send feeds, following the
 * recorder's pairing rules (bb/recorder.h "Network ports"):
 *
 *   Send(port P)            -> Recv(port P)        in the send's dest class
 *   SendReqBatched(port P)  -> RecvReq(port P)     in the send's dest class
 *   SendResp(req_id from RecvReq Q) -> RecvRespBatched(req_id from the
 *                                      SendReqBatched Q pairs with)
 *
 * dest_site (on a send) / src_site (on a receive) stamps, once written, pin
 * a pair by node name. A receive's class is its home_class (or the class of
 * the net_in it came from); before infer_peer_classes ran, an unknown class
 * matches any.
 *
 * Lookups go through an index of the function (producers, node names, wire
 * ops bucketed by port and by site stamps) so every query costs about the
 * number of wire ops sharing its port, never a scan of the function. The
 * index stays valid while the function's nodes and their inputs/outputs do
 * not change; metadata (the site stamps) is read live, so stamping pairs
 * while querying is fine.
 */
#ifndef BBC_WIRE_H
#define BBC_WIRE_H

#include <stddef.h>

#include "bb/arena.h"
#include "bb/ir.h"
#include "bbc/compiler_internal.h"

typedef struct bbc_wire_ix bbc_wire_ix;
struct bbc_map; /* bbc/util.h */

/* Index f (allocated in a). NULL when out of memory. */
bbc_wire_ix *bbc_wire_ix_new(bb_arena *a, const bb_function *f);

/* Follow value v upstream through value-forwarding nodes (PassThrough, Gate,
 * the wire gates, DeadlineCheck, Identity) to the node that made it. Returns
 * the producing node index (SIZE_MAX for a formal / unknown) and in *port
 * the output position. */
size_t bbc_wire_trace(const bbc_wire_ix *x, const char *v, size_t *port);

/* Receive nodes fed by send node index s, in node order: *n node indices
 * in *out (allocated in a; NULL when there are none). BB_ENOMEM when out of
 * memory: then *n is 0, never a short answer. */
int bbc_wire_receivers(const bbc_wire_ix *x, size_t s, bb_arena *a, const size_t **out, size_t *n);

/* The send feeding receive node index r (the first in node order), or
 * SIZE_MAX. */
size_t bbc_wire_sender(const bbc_wire_ix *x, size_t r);

/* Add to set the values on the two ends of f's wire edges: every send's
 * data input and every receive's payload output. BB_OK / BB_ENOMEM. */
int bbc_wire_ends(const bb_function *f, struct bbc_map *set);

/* The payload output position of a receive op (1), the data input of a
 * send (0); the request id positions. */
#define BBC_SEND_DATA 0
#define BBC_SEND_DEST 1
#define BBC_RECV_PAYLOAD 1

#endif
