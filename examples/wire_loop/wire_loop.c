/*
 * wire_loop.c — records a self-clocking request loop between two peer
 * classes and writes it to argv[1] (bench/bench_bbd_wire measures bbd's
 * envelope round trip and tensor throughput with it):
 *
 *   Source                                              Sink
 *     x (input) ─────────────┐
 *     EventSource(WireResponseLanded) ── Dequeue("window") ─┤
 *                      Any(x, dequeued) ── Enqueue("window")
 *     Sample(1, of_class Sink) ─┐   │
 *     SendReqBatched(data, peers) ── port "data" ──► RecvReq -> (tensor, req_id)
 *                                                      Hold.Stash(tensor)
 *                                                      Clock ── Record("got")
 *     RecvRespBatched(req_id) ◄───── response ─────── SendResp(Clock, req_id)
 *     Clock ── Record("ack")
 *
 * Each invoke of Source puts one tensor in flight. Every response that
 * lands raises the bus event WireResponseLanded, which starts a new Source
 * execution (its Sample runs with it) that sends the oldest tensor of the
 * window again: W invokes keep W requests in flight for as long as the
 * nodes run, one invoke is a ping-pong. The "window" queue only recycles
 * the W tensors; the responses are the flow control.
 *
 * The nodes Record Clock stamps (the host's time at the start of the poll
 * that ran the op) in their Record rings, read after the run through the
 * control socket ("records"), so nobody watches while the loop runs:
 * consecutive "ack" stamps are one round trip apart with one request in
 * flight, and the span of N "got" stamps is Sink's receive rate with many.
 * Sink keeps the last tensor (Hold.Stash), so the payload is used and
 * really crosses the wire.
 *
 * The selector is bbdtest::Peers (tests/plugins/bbd_test): compile with
 *   bbc compile wire_loop.onnx -o out.onnx --plugin-path BUILD/tests/plugins
 */
#include "bb/recorder.h"
#include "examples/record_main.h"

/* EventKind WireResponseLanded (ENGINE.md 13.1; bb_event_kind in bb/engine.h). */
#define EVENT_WIRE_RESPONSE_LANDED 7

static bb_module *record_source(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Source");
    bb_slot *sel = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "peers", "bbdtest::Peers",
                                   "{\"mode\":\"known\"}", NULL);
    bb_rec *g = bb_module_body(m);
    bb_val landed_any = bb_sys_event_source(g, EVENT_WIRE_RESPONSE_LANDED);
    bb_val in[2] = {bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32),
                    bb_sys_serialize_dequeue(g, landed_any, "window", &BB_TYPE_TENSOR_F32)};
    bb_val data = bb_sys_any(g, in, 2, "data");
    bb_sys_serialize_enqueue(g, data, "window");
    bb_val peers = bb_role_peer_selector_sample(g, sel, 1, "Sink");
    bb_val req_id, landed;
    bb_wire_send_req_batched(g, NULL, "data", data, peers, 0, 0, &req_id, NULL);
    bb_wire_recv_resp_batched(g, NULL, req_id, &landed, NULL);
    bb_sys_record(g, bb_sys_clock(g, landed), "ack");
    return m;
}

static bb_module *record_sink(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Sink");
    bb_rec *g = bb_module_body(m);
    bb_val got, tensor, req_id;
    bb_wire_recv_req(g, NULL, "data", &BB_TYPE_TENSOR_F32, &got, &tensor, &req_id);
    bb_sys_hold_stash(g, tensor, "last");
    bb_val stamp = bb_sys_clock(g, got);
    bb_sys_record(g, stamp, "got");
    bb_wire_send_resp(g, NULL, stamp, BB_VAL_OMIT, req_id);
    return m;
}

static bb_module *record(bb_recorder *r)
{
    bb_module *root = bb_rec_module(r, "WireLoop");
    bb_module *source = record_source(r);
    bb_module *sink = record_sink(r);
    bb_rec *g = bb_module_body(root);
    bb_call *c = bb_rec_call(g, source);
    bb_call_input(c, "x", bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32));
    bb_call_build(c);
    bb_call_build(bb_rec_call(g, sink));
    return root;
}

int main(int argc, char **argv) { return bb_example_main(argc, argv, record); }
