/*
 * fuzz_support.h — what the libFuzzer targets in fuzz/ share: the plugin
 * registry, a compiled artifact to deliver into, an installed engine, and
 * the seed writer.
 *
 * Every target is one file fuzz/fuzz_<name>.c defining
 * LLVMFuzzerTestOneInput (and, when it needs them, seeds written in seed
 * mode: fz_seed_dir). Targets are thin: each calls the parsing or delivery
 * function the daemon calls, so a change of that function is fuzzed as it
 * lands. Each is built with -fsanitize=fuzzer,address,undefined by
 * `make fuzz` and run briefly by `make fuzz-smoke` (scripts/fuzz-smoke).
 *
 * Failing to set up (no plugins, no testdata) is not a finding: it aborts
 * with a message, which the smoke run reports as a failure.
 */
#ifndef FUZZ_SUPPORT_H
#define FUZZ_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "bb/engine.h"
#include "bb/ir.h"
#include "bbd/host/registry.h"

/* The registry bbd would build (the plugin directory next to the binary,
 * $BB_PLUGIN_PATH) plus the test plugin fed_round binds
 * (build-fuzz/fuzz/plugins). Created once. */
bbd_registry *fz_registry(void);

/* testdata/fed_round.onnx compiled once (Server and Client targets), as
 * protobuf bytes and as a model (owned here). */
const bb_model *fz_artifact(void);
const uint8_t *fz_artifact_bytes(size_t *len);

/* A new engine (small caps, PeerId and seed from who) with the artifact's
 * targets installed. Caller frees. */
bb_engine *fz_engine(const char *const *targets, size_t n_targets, uint8_t who);

/* Poll e a few times at now_ns and later, dropping every step. */
void fz_drain(bb_engine *e, uint64_t now_ns);

/* Seed mode: when $FUZZ_WRITE_SEEDS names a directory, write(name, bytes)
 * puts one seed file there. Returns the directory or NULL. */
const char *fz_seed_dir(void);
void fz_seed_write(const char *name, const void *data, size_t len);

/* Abort with a message: the harness could not set up. */
void fz_die(const char *what, const char *msg) __attribute__((noreturn));

#endif
