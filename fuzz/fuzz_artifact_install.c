/*
 * fuzz_artifact_install.c — a compiled artifact as bbd loads it: protobuf
 * bytes to a model, the artifact view read, every target it names
 * installed into an engine with the real plugins (bb_engine_install), and a
 * few polls of what was installed. Seeds: testdata/fed_round.onnx compiled
 * (written by FUZZ_WRITE_SEEDS=dir), plus every compiled example the smoke
 * script adds.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "bb/arena.h"
#include "bb/artifact.h"
#include "bb/model_io.h"
#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "fuzz/support/fuzz_support.h"

#define MAX_TARGETS 16

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (fz_seed_dir()) {
        size_t n;
        const uint8_t *b = fz_artifact_bytes(&n);
        fz_seed_write("fed_round.compiled.onnx", b, n);
    }
    return 0;
}

static void install(const bb_model *m, const char *const *targets, size_t n)
{
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    bb_engine_caps_edge(&cfg.caps);
    uint8_t seed[32] = {9};
    bb_peerid_from_seed(seed, NULL, &cfg.peer, NULL);
    cfg.seed = 9;
    bb_error err = {0};
    bb_engine *e = bb_engine_new(&cfg, &err);
    if (!e)
        return;
    if (bb_engine_install(e, m, targets, n, bbd_registry_engine(fz_registry()), &err) == BB_OK)
        fz_drain(e, 1000000000ull);
    bb_engine_free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bb_model *m = NULL;
    bb_error err = {0};
    if (bb_model_load_mem(data, size, "fuzz.onnx", &m, &err) != BB_OK)
        return 0;
    bb_arena *a = bb_arena_create();
    bb_artifact art;
    if (a && bb_artifact_read(m, "fuzz.onnx", a, &art, &err) == BB_OK) {
        const char *targets[MAX_TARGETS];
        size_t n = 0;
        for (size_t i = 0; i < art.n_targets && n < MAX_TARGETS; i++)
            targets[n++] = art.targets[i].name;
        /* the registry's pre-flight first, as bbd does */
        if (n && bbd_registry_resolve_model(fz_registry(), m, targets, n, &err) == BB_OK)
            install(m, targets, n);
    }
    bb_arena_destroy(a);
    bb_model_free(m);
    return 0;
}
