/*
 * fuzz_model_compile.c — a ModelProto from the network or a file: loaded
 * (bb_model_load_mem), then compiled by the whole bbc pipeline against the
 * real plugins' type information (bbc_compile), as `bbc compile` does.
 * Seeds: the models in testdata and its bad corpus (testdata/bad).
 */
#include <stddef.h>
#include <stdint.h>

#include "bb/model_io.h"
#include "bbc/compiler.h"
#include "fuzz/support/fuzz_support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bb_model *m = NULL;
    bb_error err = {0};
    if (bb_model_load_mem(data, size, "fuzz.onnx", &m, &err) != BB_OK)
        return 0;
    bbc_options o;
    bbc_options_init(&o);
    o.verify_each = true; /* a pass that breaks the IR is a finding too */
    bbc_bindings b;
    if (bbc_bindings_init(&b) == BB_OK) {
        bb_model *out = NULL;
        bbc_error cerr;
        if (bbc_compile(m, &o, &b, bbd_registry_types(fz_registry()), NULL, 0, &out, &cerr) ==
            BB_OK)
            bb_model_free(out);
        bbc_bindings_free(&b);
    }
    bb_model_free(m);
    return 0;
}
