/*
 * cnn.c — writes the CNN of cnn_graph.h (the Fashion-MNIST shape: 28x28
 * images, 32 and 64 channels, 128 hidden units, 10 classes) as a plain ONNX
 * inference model to argv[1] (make writes testdata/cnn.onnx). nn::Onnx
 * trains it (its construction state, or config model_file); bbd run and
 * any ONNX tool run it as it is.
 *
 *   build/examples/cnn OUT.onnx [--seed S]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/cnn/cnn_graph.h"

int main(int argc, char **argv)
{
    uint64_t seed = 2024;
    if (argc == 4 && strcmp(argv[2], "--seed") == 0) {
        char *end;
        seed = strtoull(argv[3], &end, 10);
        if (*end) {
            fprintf(stderr, "%s: error: --seed takes a number, got '%s'\n", argv[0], argv[3]);
            return 2;
        }
    } else if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.onnx [--seed S]\n", argv[0]);
        return 2;
    }
    og g;
    og_begin(&g, "cnn");
    cnn_shape s = CNN_SHAPE_FASHION;
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
