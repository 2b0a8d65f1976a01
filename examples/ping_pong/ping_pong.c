/*
 * ping_pong.c — records a request/response program with two peer classes
 * and writes it to argv[1] (bbd's integration tests and benchmark run it
 * between two daemons):
 *
 *   Pinger                                      Ponger
 *     x (input) ── Sample(1, of_class Ponger)
 *     SendReqBatched(x, peers) ── port "ping" ──► RecvReq -> (x, req_id)
 *                                                  AppEmit("ping", x)
 *     RecvRespBatched(req_id) ◄── response ────── SendResp(x, req_id)
 *     AppEmit("pong", responses)
 *
 * The selector is bbdtest::Peers (tests/plugins/bbd_test): compile with
 *   bbc compile ping_pong.onnx -o out.onnx --plugin-path BUILD/tests/plugins
 */
#include "bb/recorder.h"
#include "examples/record_main.h"

static bb_module *record_pinger(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Pinger");
    bb_slot *sel = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "peers", "bbdtest::Peers",
                                   "{\"mode\":\"known\"}", NULL);
    bb_rec *g = bb_module_body(m);
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    bb_val peers = bb_role_peer_selector_sample(g, sel, 1, "Ponger");
    bb_val req_id, responses;
    bb_wire_send_req_batched(g, NULL, "ping", x, peers, 0, 0, &req_id, NULL);
    bb_wire_recv_resp_batched(g, NULL, req_id, NULL, &responses);
    bb_sys_app_emit(g, responses, "pong");
    return m;
}

static bb_module *record_ponger(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Ponger");
    bb_rec *g = bb_module_body(m);
    bb_val x, req_id;
    bb_wire_recv_req(g, NULL, "ping", &BB_TYPE_TENSOR_F32, NULL, &x, &req_id);
    bb_sys_app_emit(g, x, "ping");
    bb_wire_send_resp(g, NULL, x, BB_VAL_OMIT, req_id);
    return m;
}

static bb_module *record(bb_recorder *r)
{
    bb_module *root = bb_rec_module(r, "PingPong");
    bb_module *pinger = record_pinger(r);
    bb_module *ponger = record_ponger(r);
    bb_rec *g = bb_module_body(root);
    bb_call *c = bb_rec_call(g, pinger);
    bb_call_input(c, "x", bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32));
    bb_call_build(c);
    bb_call_build(bb_rec_call(g, ponger));
    return root;
}

int main(int argc, char **argv) { return bb_example_main(argc, argv, record); }
