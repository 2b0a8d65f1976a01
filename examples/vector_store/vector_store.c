/*
 * vector_store.c — records the VectorStore module of IR_AND_DSL.md
 * ("Module::bootstrap recording"), made to run on real nodes, and a
 * second peer class that queries it over the wire; writes argv[1].
 *
 *   VectorStore
 *     bootstrap   seed_corpus (f32 [n, d], staged by the host:
 *                 `bbctl bootstrap --module VectorStore seed_corpus=@corpus.pb`)
 *                 trained = Index.Train(seed_corpus)
 *                 first   = Index.Add(Gate(seed_corpus, trained))  ids 0..n-1
 *                 AppEmit("seeded", first)
 *     body        query -> Index.Search(k) -> AppEmit("results")
 *                 RecvReq("query") -> Index.Search(k) -> SendResp
 *   Client
 *     body        query -> Sample(1, of_class VectorStore)    peers::Connected
 *                 SendReqBatched(query, port "query") -> RecvRespBatched
 *                 AppEmit("results", responses)
 *
 * The spec's module trains and searches; the Add after Train is what
 * makes the store hold the corpus it was trained on. Train runs on the
 * node's worker pool (index::IvfPq), so the bootstrap is in flight for a
 * while: a query that arrives meanwhile waits on the engine's op lock
 * (ENGINE.md 6.8.4: every Index op touches the component the bootstrap
 * holds) and is answered once the corpus is in, instead of failing on an
 * untrained index.
 *
 * Knobs (argv, after OUT.onnx): --index TYPE (index::IvfPq, index::Hnsw or
 * index::Flat), --k N (results per query, 10). The index's parameters are
 * its construction state below; a node's config overrides any of them
 * ({"components": {"index": {"nprobe": 32}}}).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/recorder.h"
#include "examples/record_main.h"

typedef struct vs_knobs {
    const char *index;
    int64_t k;
} vs_knobs;

static vs_knobs g_knobs = {"index::IvfPq", 10};

/* The construction state recorded for each index type. */
static const char *index_config(const char *type)
{
    if (!strcmp(type, "index::IvfPq"))
        return "{\"nlist\":64,\"pq_m\":16,\"nprobe\":16}";
    if (!strcmp(type, "index::Hnsw"))
        return "{\"m\":16,\"ef_construction\":200,\"ef_search\":64}";
    return "{}";
}

static bb_module *record_store(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "VectorStore");
    bb_slot *index =
        bb_rec_concrete(m, BB_ROLE_INDEX, "index", g_knobs.index, index_config(g_knobs.index), NULL);

    bb_rec *boot = bb_module_bootstrap(m);
    bb_val corpus = bb_rec_input(boot, "seed_corpus", &BB_TYPE_TENSOR_F32);
    bb_val trained = bb_role_index_train(boot, index, corpus);
    bb_val first = bb_role_index_add(boot, index, bb_sys_gate(boot, corpus, trained));
    bb_sys_app_emit(boot, first, "seeded");

    bb_rec *g = bb_module_body(m);
    bb_val query = bb_rec_input(g, "query", &BB_TYPE_TENSOR_F32);
    bb_sys_app_emit(g, bb_role_index_search(g, index, query, g_knobs.k), "results");
    bb_val remote, req_id;
    bb_wire_recv_req(g, NULL, "query", &BB_TYPE_TENSOR_F32, NULL, &remote, &req_id);
    bb_wire_send_resp(g, NULL, bb_role_index_search(g, index, remote, g_knobs.k), BB_VAL_OMIT,
                      req_id);
    return m;
}

static bb_module *record_client(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Client");
    bb_slot *stores = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "stores", "peers::Connected",
                                      "{\"target\":\"VectorStore\"}", NULL);
    bb_rec *g = bb_module_body(m);
    bb_val query = bb_rec_input(g, "query", &BB_TYPE_TENSOR_F32);
    bb_val peers = bb_role_peer_selector_sample(g, stores, 1, "VectorStore");
    bb_val req_id, responses;
    bb_wire_send_req_batched(g, NULL, "query", query, peers, 0, 0, &req_id, NULL);
    bb_wire_recv_resp_batched(g, NULL, req_id, NULL, &responses);
    bb_sys_app_emit(g, responses, "results");
    return m;
}

static bb_module *record(bb_recorder *r)
{
    bb_module *root = bb_rec_module(r, "VectorStoreApp");
    bb_module *store = record_store(r);
    bb_module *client = record_client(r);
    bb_rec *g = bb_module_body(root);
    bb_val query = bb_rec_input(g, "query", &BB_TYPE_TENSOR_F32);
    bb_call *c = bb_rec_call(g, store);
    bb_call_input(c, "query", query);
    bb_call_build(c);
    c = bb_rec_call(g, client);
    bb_call_input(c, "query", query);
    bb_call_build(c);
    return root;
}

static int usage(const char *prog)
{
    fprintf(stderr, "usage: %s OUT.onnx [--index index::IvfPq|index::Hnsw|index::Flat] [--k N]\n",
            prog);
    return 2;
}

int main(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--index") && i + 1 < argc) {
            g_knobs.index = argv[++i];
            if (strcmp(g_knobs.index, "index::IvfPq") && strcmp(g_knobs.index, "index::Hnsw") &&
                strcmp(g_knobs.index, "index::Flat")) {
                fprintf(stderr, "%s: error: unknown index type '%s'\n", argv[0], g_knobs.index);
                return 2;
            }
        } else if (!strcmp(argv[i], "--k") && i + 1 < argc) {
            char *end;
            g_knobs.k = strtoll(argv[++i], &end, 10);
            if (*end || g_knobs.k < 1 || g_knobs.k > 4096) {
                fprintf(stderr, "%s: error: --k must be 1..4096, not '%s'\n", argv[0], argv[i]);
                return 2;
            }
        } else {
            return usage(argv[0]);
        }
    }
    return bb_example_main(argc < 2 ? argc : 2, argv, record);
}
