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
 * A receive's class is its home_class (or the class of the net_in it came
 * from); before infer_peer_classes ran, an unknown class matches any.
 */
#ifndef BBC_WIRE_H
#define BBC_WIRE_H

#include <stddef.h>

#include "bb/ir.h"
#include "bbc/compiler.h"

/* Follow value v upstream through value-forwarding nodes (PassThrough, Gate,
 * the wire gates, DeadlineCheck, Identity) to the node that made it. Returns
 * the producing node index (SIZE_MAX for a formal / unknown) and in *port
 * the output position. */
size_t bbc_trace_producer(const bb_function *f, const char *v, size_t *port);

/* Receive nodes of f fed by send node index s (indices into out, at most
 * cap; returns the count found, which may exceed cap). */
size_t bbc_wire_receivers(const bb_function *f, size_t s, size_t *out, size_t cap);

/* The send feeding receive node index r, or SIZE_MAX. */
size_t bbc_wire_sender(const bb_function *f, size_t r);

/* The payload output position of a receive op (1), the data input of a
 * send (0); the request id positions. */
#define BBC_SEND_DATA 0
#define BBC_SEND_DEST 1
#define BBC_RECV_PAYLOAD 1

#endif
