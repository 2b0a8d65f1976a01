/*
 * overlay.c — records a CYCLON overlay and nothing else, and writes it to
 * argv[1]: one peer class, "Peer", whose peers::Cyclon keeps the node's
 * partial view fresh by itself (its own timers and control-plane
 * shuffles). The body only reports: an invoke (bbctl invoke Peer --wait
 * view) answers the node's current view and a sample of two.
 *
 *   view  = CurrentView(of_class Peer)   AppEmit("view")
 *   some  = Sample(2, of_class Peer)     AppEmit("sample")
 *
 * Each node's seeds are its bbd config ("components": {"peers": {"seeds":
 * ["/ip4/.../tcp/7000/p2p/<PeerId>"]}}); tests/integration/cyclon_overlay.sh
 * starts 16 of them from one seed and checks the views they report.
 */
#include "bb/recorder.h"
#include "examples/record_main.h"

#define CYCLON_CONFIG                                                                          \
    "{\"view_size\":8,\"shuffle_length\":4,\"period_ms\":500,\"of_class\":\"Peer\"}"

static bb_module *record(bb_recorder *r)
{
    bb_module *root = bb_rec_module(r, "Overlay");
    bb_module *m = bb_rec_class_module(r, "Peer");
    bb_slot *peers = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "peers", "peers::Cyclon",
                                     CYCLON_CONFIG, NULL);
    bb_rec *g = bb_module_body(m);
    bb_sys_app_emit(g, bb_role_peer_selector_current_view(g, peers, "Peer"), "view");
    bb_sys_app_emit(g, bb_role_peer_selector_sample(g, peers, 2, "Peer"), "sample");
    bb_call_build(bb_rec_call(bb_module_body(root), m));
    return root;
}

int main(int argc, char **argv) { return bb_example_main(argc, argv, record); }
