/*
 * large_tensor.c — records a program that moves one tensor of any size
 * between two daemons, and writes it to argv[1] (the large-tensor test and
 * benchmark run it; a tensor larger than the transport's frame limit
 * crosses as a chunk stream):
 *
 *   Sender                                        Receiver
 *     n (input) -> Blob.Fill(n) = t
 *     AppEmit("sent", Blob.Digest(t))
 *     Send(t, Sample(1, of_class Receiver)) ── port "blob" ──► Recv -> t
 *                                                  AppEmit("received", Blob.Digest(t))
 *
 * The components are bbdtest::Blob and bbdtest::Peers (tests/plugins/bbd_test):
 *   bbc compile large_tensor.onnx -o out.onnx --plugin-path BUILD/tests/plugins
 */
#include "bb/recorder.h"
#include "examples/record_main.h"

static bb_val blob_op(bb_rec *g, bb_slot *blob, const char *op, bb_val in,
                      const bb_type_node *type)
{
    bb_val out;
    bb_rec_op(g, blob, "bbdtest.blob", op, &in, 1, NULL, 0, &type, &out, 1);
    return out;
}

static bb_module *record_sender(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Sender");
    bb_slot *blob = bb_rec_concrete(m, BB_ROLE_PROTOCOL, "blob", "bbdtest::Blob", "{}", NULL);
    bb_slot *sel = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "peers", "bbdtest::Peers",
                                   "{\"mode\":\"known\"}", NULL);
    bb_rec *g = bb_module_body(m);
    bb_val n = bb_rec_input(g, "n", &BB_TYPE_U64);
    bb_val t = blob_op(g, blob, "Fill", n, &BB_TYPE_TENSOR_F32);
    bb_sys_app_emit(g, blob_op(g, blob, "Digest", t, &BB_TYPE_U64), "sent");
    bb_wire_send(g, NULL, "blob", t, bb_role_peer_selector_sample(g, sel, 1, "Receiver"));
    return m;
}

static bb_module *record_receiver(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Receiver");
    bb_slot *blob = bb_rec_concrete(m, BB_ROLE_PROTOCOL, "blob", "bbdtest::Blob", "{}", NULL);
    bb_rec *g = bb_module_body(m);
    bb_val trig, t;
    bb_wire_recv(g, NULL, "blob", &BB_TYPE_TENSOR_F32, &trig, &t);
    bb_sys_app_emit(g, blob_op(g, blob, "Digest", t, &BB_TYPE_U64), "received");
    return m;
}

static bb_module *record(bb_recorder *r)
{
    bb_module *root = bb_rec_module(r, "LargeTensor");
    bb_module *sender = record_sender(r);
    bb_module *receiver = record_receiver(r);
    bb_rec *g = bb_module_body(root);
    bb_call *c = bb_rec_call(g, sender);
    bb_call_input(c, "n", bb_rec_input(g, "n", &BB_TYPE_U64));
    bb_call_build(c);
    bb_call_build(bb_rec_call(g, receiver));
    return root;
}

int main(int argc, char **argv) { return bb_example_main(argc, argv, record); }
