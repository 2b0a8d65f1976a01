/*
 * fuzz_snapshot_restore.c — a snapshot file's engine bytes (BBSNAP3, the
 * part after snapshot_file.c's checked header) restored into a freshly
 * installed engine running Server and Client of the compiled fed_round
 * artifact (bb_engine_restore), then polled and snapshotted again: a
 * restore either refuses with an error or leaves an engine that runs.
 * Seeds: the snapshot of an engine that served one invocation
 * (FUZZ_WRITE_SEEDS=dir).
 */
#include <stdlib.h>

#include "fuzz/support/fuzz_support.h"

static const char *const TARGETS[] = {"Server", "Client"};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!fz_seed_dir())
        return 0;
    bb_engine *e = fz_engine(TARGETS, 2, 7);
    bb_error err = {0};
    uint8_t *snap = NULL;
    size_t len = 0;
    if (bb_engine_snapshot(e, &snap, &len, &err) == BB_OK)
        fz_seed_write("fresh.bbsnap", snap, len);
    free(snap);
    bb_engine_invoke(e, "Server", NULL, 0, NULL, &err);
    fz_drain(e, 1000000000ull);
    if (bb_engine_snapshot(e, &snap, &len, &err) == BB_OK)
        fz_seed_write("after-invoke.bbsnap", snap, len);
    free(snap);
    bb_engine_free(e);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bb_engine *e = fz_engine(TARGETS, 2, 7);
    bb_error err = {0};
    if (bb_engine_restore(e, data, size, &err) == BB_OK) {
        fz_drain(e, 5000000000ull);
        uint8_t *snap = NULL;
        size_t len = 0;
        if (bb_engine_snapshot(e, &snap, &len, &err) == BB_OK)
            free(snap);
    }
    bb_engine_free(e);
    return 0;
}
