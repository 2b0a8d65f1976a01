/*
 * dht.c — records a Kademlia DHT node and writes it to argv[1]: one peer
 * class, "Node", with dht::Kademlia at slot "dht" (which joins the network
 * from its seeds in its component bootstrap) and peers::Dht at slot
 * "selector" (NearKey over it). Each input starts its own branch, so one
 * invoke runs one operation:
 *
 *   key                -> Lookup -> AppEmit("closest", Bundle(peers, hops))
 *                      -> Select(near_key, n=5) -> AppEmit("near")
 *   put_key, put_value -> Put    -> AppEmit("stored")
 *   get_key            -> Get    -> AppEmit("got")
 *
 *   bbctl invoke Node 'key={"type":"bytes","base64":"..."}' --wait closest
 *
 * Each node's seeds are its bbd config ("components": {"dht": {"seeds":
 * [...]}}); tests/integration/kademlia_dht.sh runs 32 of them.
 */
#include "bb/recorder.h"
#include "examples/record_main.h"

#define KAD "bb-dht.Kademlia.atomic"

static bb_val op1(bb_rec *g, bb_slot *slot, const char *domain, const char *op, const bb_val *in,
                  size_t n_in, const bb_rec_attr *attrs, size_t n_attrs,
                  const bb_type_node *type)
{
    bb_val out = BB_VAL_NONE;
    bb_rec_op(g, slot, domain, op, in, n_in, attrs, n_attrs, &type, &out, 1);
    return out;
}

static bb_module *record(bb_recorder *r)
{
    bb_module *root = bb_rec_module(r, "Dht");
    bb_module *m = bb_rec_class_module(r, "Node");
    bb_slot *dht = bb_rec_concrete(m, BB_ROLE_PROTOCOL, "dht", "dht::Kademlia", "{}", NULL);
    bb_slot *sel = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "selector", "peers::Dht",
                                   "{\"of_class\":\"Node\"}", NULL);
    bb_rec *g = bb_module_body(m);

    bb_val key = bb_rec_input(g, "key", &BB_TYPE_BYTES);
    const bb_type_node *lookup_types[2] = {&BB_TYPE_PEER_ID_VEC, &BB_TYPE_U64};
    bb_val found[2];
    bb_rec_op(g, dht, KAD, "Lookup", &key, 1, NULL, 0, lookup_types, found, 2);
    bb_sys_app_emit(g, bb_rec_bundle(g, found, 2), "closest");
    bb_rec_attr near_attrs[] = {BB_RA_STRING("params", "near_key"), BB_RA_INT("n", 5)};
    bb_val near = op1(g, sel, "bb-peers.PeerSelector.atomic", "Select", &key, 1, near_attrs, 2,
                      &BB_TYPE_PEER_ID_VEC);
    bb_sys_app_emit(g, bb_rec_of_class(g, near, "Node"), "near"); /* the class they run */

    bb_val kv[2] = {bb_rec_input(g, "put_key", &BB_TYPE_BYTES),
                    bb_rec_input(g, "put_value", &BB_TYPE_BYTES)};
    bb_sys_app_emit(g, op1(g, dht, KAD, "Put", kv, 2, NULL, 0, &BB_TYPE_U64), "stored");
    bb_val get_key = bb_rec_input(g, "get_key", &BB_TYPE_BYTES);
    bb_sys_app_emit(g, op1(g, dht, KAD, "Get", &get_key, 1, NULL, 0, &BB_TYPE_BYTES), "got");

    bb_rec *rg = bb_module_body(root); /* the root hands its inputs to the class */
    bb_call *c = bb_rec_call(rg, m);
    const char *inputs[] = {"key", "put_key", "put_value", "get_key"};
    for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++)
        bb_call_input(c, inputs[i], bb_rec_input(rg, inputs[i], &BB_TYPE_BYTES));
    bb_call_build(c);
    return root;
}

int main(int argc, char **argv) { return bb_example_main(argc, argv, record); }
