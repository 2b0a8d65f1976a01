/*
 * cnn.c — writes the CNN of cnn_graph.h as a plain ONNX inference model to
 * argv[1] (make writes testdata/cnn.onnx): by default the Fashion-MNIST
 * shape (28x28 images, 32 and 64 channels, 128 hidden units, 10 classes),
 * with --shape digits the one for the 8x8 digits (8 and 16 channels, 32
 * hidden units; what the tests train in seconds). nn::Onnx trains it (its
 * construction state, or config model_file); bbd run and any ONNX tool run
 * it as it is.
 *
 *   build/examples/cnn OUT.onnx [--seed S] [--shape fashion|digits]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/cnn/cnn_graph.h"

#define CNN_SHAPE_DIGITS ((cnn_shape){8, 8, 16, 32, 10, true})

int main(int argc, char **argv)
{
    uint64_t seed = 2024;
    cnn_shape s = CNN_SHAPE_FASHION;
    for (int i = 2; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (v && strcmp(argv[i], "--seed") == 0) {
            seed = strtoull(v, &end, 10);
            if (*end || !*v) {
                fprintf(stderr, "%s: error: --seed takes a number, got '%s'\n", argv[0], v);
                return 2;
            }
        } else if (v && strcmp(argv[i], "--shape") == 0 &&
                   (strcmp(v, "fashion") == 0 || strcmp(v, "digits") == 0)) {
            s = v[0] == 'd' ? CNN_SHAPE_DIGITS : CNN_SHAPE_FASHION;
        } else {
            argc = 0; /* usage */
        }
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUT.onnx [--seed S] [--shape fashion|digits]\n", argv[0]);
        return 2;
    }
    og g;
    og_begin(&g, "cnn");
    cnn_graph(&g, &s, seed);
    bb_error err = {0};
    int rc = og_save(&g, 17, argv[1], &err);
    og_end(&g);
    if (rc) {
        fprintf(stderr, "%s: error: %s\n", argv[0], err.msg);
        return 1;
    }
    return 0;
}
