/*
 * split_learning.c — records the canonical SplitLearning Module of
 * IR_AND_DSL.md Part 9, node for node, and writes it to argv[1].
 *
 *   let (_t1, enc_in) = self.network_server.recv(g);
 *   let dec_in = self.codec.decompress(g, enc_in);
 *   let dec_out = self.model.forward(g, dec_in);
 *   let enc_out = self.codec.compress(g, dec_out);
 *   let peers = self.gossip.sample(g, 5);
 *   let (req_id, _ack) = self.network_client.send_req_batched(g, enc_out, peers);
 *   let (_t2, batched_grads) = self.network_client.recv_responses(g, req_id);
 *   let dec_grads = self.codec.decompress(g, batched_grads);
 *   let avg_grad = self.aggregator.aggregate(g, dec_grads);
 *   let _ = self.model.step(g, avg_grad);
 *   let _ = self.model.backward(g, avg_grad);
 *
 * The concrete components keep the worked example's TYPE_NAMEs; their
 * construction state is JSON (DESIGN.md decision 5) instead of bincode.
 */
#include "bb/recorder.h"
#include "examples/record_main.h"

static bb_module *record(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "SplitLearning");

    /* struct SplitLearning { backend: Backend, network_server: ..., ... } */
    bb_rec_generic(m, BB_ROLE_BACKEND, "backend");
    bb_slot *network_server =
        bb_rec_concrete(m, BB_ROLE_PROTOCOL, "network_server",
                        "framework_wire::NoBarrierOneShot", "{\"barrier\":false}", NULL);
    bb_slot *network_client =
        bb_rec_concrete(m, BB_ROLE_PROTOCOL, "network_client",
                        "framework_wire::BarrierNetworkReqResp", "{\"barrier\":true}", NULL);
    bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "model", "burn_integration::BurnModel",
                                     "{\"layers\":[64,32],\"learning_rate\":0.01}", NULL);
    bb_slot *codec =
        bb_rec_concrete(m, BB_ROLE_CODEC, "codec", "framework_compressors::ProductQuantization",
                        "{\"m\":8,\"n\":256}", NULL);
    bb_slot *gossip = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "gossip",
                                      "framework_peer_selector::Cyclone",
                                      "{\"c\":20,\"h\":1,\"s\":10}", NULL);
    bb_slot *aggregator =
        bb_rec_concrete(m, BB_ROLE_AGGREGATOR, "aggregator",
                        "framework_aggregators::WeightAggregator", "{}", NULL);

    bb_rec *g = bb_module_body(m);
    bb_val enc_in, req_id, batched_grads;
    bb_wire_recv(g, network_server, NULL, &BB_TYPE_TENSOR_F32, NULL, &enc_in);
    bb_val dec_in = bb_role_compressor_decompress(g, codec, enc_in);
    bb_val dec_out = bb_role_model_forward(g, model, dec_in);
    bb_val enc_out = bb_role_compressor_compress(g, codec, dec_out);
    bb_val peers = bb_role_peer_selector_sample(g, gossip, 5, NULL);
    bb_wire_send_req_batched(g, network_client, NULL, enc_out, peers, 0, 0, &req_id, NULL);
    bb_wire_recv_resp_batched(g, network_client, req_id, NULL, &batched_grads);
    bb_val dec_grads = bb_role_compressor_decompress(g, codec, batched_grads);
    bb_val avg_grad = bb_role_aggregator_aggregate(g, aggregator, dec_grads, NULL);
    bb_role_model_step(g, model, avg_grad);
    bb_role_model_backward(g, model, avg_grad);
    return m;
}

int main(int argc, char **argv) { return bb_example_main(argc, argv, record); }
