/*
 * fuzz_envelope_deliver.c — WireEnvelope bytes from a peer, delivered into
 * an engine running the compiled fed_round artifact (Server and Client
 * installed, as a node running both would), then polled: decode, the gates,
 * the fills into the receiving sites, and whatever executions they start.
 * The input is a sequence of envelopes (u16 length, bytes), each from one
 * of four peers, so duplicates, replies and interleavings are reachable.
 * Seeds: the envelopes two in-process engines exchange over one round
 * (FUZZ_WRITE_SEEDS=dir).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "fuzz/support/fuzz_support.h"

static const char *const TARGETS[] = {"Server", "Client"};
static bb_engine *engine;
static bb_peerid peers[4];

/* One round between a Server engine and a Client engine, every envelope
 * written as a seed (both directions). */
static void write_seeds(void)
{
    const char *s = "Server", *c = "Client";
    bb_engine *srv = fz_engine(&s, 1, 7), *cli = fz_engine(&c, 1, 8);
    bb_steps steps;
    bb_steps_init(&steps);
    bb_error err = {0};
    const bb_peerid *srv_id = bb_engine_peer_id(srv), *cli_id = bb_engine_peer_id(cli);
    const char *client_targets[] = {"Client"}, *server_targets[] = {"Server"};
    uint8_t a[32];
    size_t alen = 0;
    bb_multiaddr_parse("/ip4/127.0.0.1/tcp/7002", a, sizeof a, &alen, NULL);
    bb_engine_addr addr = {a, alen};
    bb_engine_add_peer(srv, cli_id, &addr, 1, &err);
    bb_engine_add_peer(cli, srv_id, &addr, 1, &err);
    /* the round samples two clients: a second one that never answers */
    bb_engine_add_peer(srv, &peers[3], &addr, 1, &err);
    bb_engine_peer_connected(srv, &peers[3], client_targets, 1, &err);
    bb_engine_peer_connected(srv, cli_id, client_targets, 1, &err);
    bb_engine_peer_connected(cli, srv_id, server_targets, 1, &err);
    if (bb_engine_invoke(srv, "Server", NULL, 0, NULL, &err))
        fz_die("invoke Server", err.msg);
    int written = 0;
    for (int round = 0; round < 40 && written < 64; round++) {
        bb_engine *from = round % 2 ? cli : srv, *to = round % 2 ? srv : cli;
        bb_engine_poll(from, 1000000000ull + (uint64_t)round * 1000000ull, &steps);
        for (size_t i = 0; i < steps.n; i++) {
            bb_step *st = &steps.v[i];
            if (st->kind != BB_STEP_SEND_ENVELOPE || !st->u.send.bytes)
                continue;
            uint8_t hdr[2] = {(uint8_t)(st->u.send.len >> 8), (uint8_t)st->u.send.len};
            uint8_t *seed = malloc(st->u.send.len + 2);
            memcpy(seed, hdr, 2);
            memcpy(seed + 2, st->u.send.bytes, st->u.send.len);
            char name[64];
            snprintf(name, sizeof name, "round-envelope-%02d", written++);
            if (st->u.send.len <= 0xffff)
                fz_seed_write(name, seed, st->u.send.len + 2);
            free(seed);
            bb_engine_deliver_envelope(to, round % 2 ? cli_id : srv_id, NULL, st->u.send.bytes,
                                       st->u.send.len, &err);
        }
        bb_steps_clear(&steps);
    }
    bb_steps_free(&steps);
    if (!written)
        fz_die("envelope seeds", "one round between two engines sent no envelope");
    bb_engine_free(srv);
    bb_engine_free(cli);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    for (int i = 0; i < 4; i++) {
        uint8_t seed[32] = {(uint8_t)(40 + i)};
        bb_peerid_from_seed(seed, NULL, &peers[i], NULL);
    }
    if (fz_seed_dir())
        write_seeds();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A fresh engine every few thousand inputs keeps one long run's tables
     * from hiding what a first envelope does; in between it carries state
     * across inputs, as a running node does. */
    static unsigned uses;
    if (!engine || ++uses % 4096 == 0) {
        bb_engine_free(engine);
        engine = fz_engine(TARGETS, 2, 7);
        const char *client[] = {"Client"};
        bb_error err = {0};
        for (int i = 0; i < 4; i++)
            bb_engine_peer_connected(engine, &peers[i], client, 1, &err);
    }
    static uint64_t now = 1000000000ull;
    bb_error err = {0};
    size_t off = 0;
    for (unsigned k = 0; off + 2 <= size; k++) {
        size_t n = (size_t)data[off] << 8 | data[off + 1];
        off += 2;
        if (n > size - off)
            n = size - off;
        bb_engine_deliver_envelope(engine, &peers[k % 4], NULL, data + off, n, &err);
        off += n;
    }
    now += 10000000ull;
    fz_drain(engine, now);
    now += 4000000000ull;
    return 0;
}
