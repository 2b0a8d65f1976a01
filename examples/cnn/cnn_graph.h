/*
 * cnn_graph.h — the CNN of examples/cnn as a plain ONNX inference graph:
 * two conv blocks (3x3 Conv, pad 1 -> BatchNormalization -> Relu ->
 * 2x2 MaxPool) and two dense layers, on side x side grey images that
 * arrive as flat rows ([N, side*side]; a Reshape makes them N x 1 x side x
 * side):
 *
 *   input [N, side^2] -> Reshape -> conv1 -> bn1 -> relu -> pool
 *                     -> conv2 -> bn2 -> relu -> pool -> Flatten
 *                     -> fc1 (Gemm) -> relu -> fc2 (Gemm) -> logits [N, classes]
 *
 * Initializers are named as torch.nn names its state_dict (conv1.weight,
 * bn1.running_mean, fc1.bias, ...), weights He-normal from the seed,
 * biases 0, batch-norm scale 1 and shift 0, running mean 0 and variance 1.
 * The default shape is the Fashion-MNIST one (28, 32, 64, 128, 10).
 */
#ifndef BB_EXAMPLES_CNN_GRAPH_H
#define BB_EXAMPLES_CNN_GRAPH_H

#include <stdlib.h>

#include "examples/onnx_graph.h"

typedef struct cnn_shape {
    int64_t side;      /* image side (a multiple of 4) */
    int64_t c1, c2;    /* channels of the two conv blocks */
    int64_t hidden;    /* fc1 width */
    int64_t classes;
    bool batch_norm;
} cnn_shape;

#define CNN_SHAPE_FASHION ((cnn_shape){28, 32, 64, 128, 10, true})

static inline void cnn__conv_block(og *o, const cnn_shape *s, int k, int64_t cin, int64_t cout,
                                   const char *in, const char *out, uint64_t *seed)
{
    char n[8][48], ins0[160];
    size_t nw = (size_t)(cout * cin * 9);
    float *w = malloc(nw * sizeof *w), *zero = calloc((size_t)cout, sizeof *zero);
    float *one = malloc((size_t)cout * sizeof *one);
    if (!w || !zero || !one) {
        o->oom = true;
        free(w);
        free(zero);
        free(one);
        return;
    }
    og_he(w, nw, (size_t)(cin * 9), seed);
    for (int64_t i = 0; i < cout; i++)
        one[i] = 1.0f;
    snprintf(n[0], sizeof n[0], "conv%d.weight", k);
    snprintf(n[1], sizeof n[1], "conv%d.bias", k);
    og_param(o, n[0], 4, (int64_t[]){cout, cin, 3, 3}, w);
    og_param(o, n[1], 1, &cout, zero);
    snprintf(ins0, sizeof ins0, "%s,%s,%s", in, n[0], n[1]);
    snprintf(n[3], sizeof n[3], "conv%d", k);
    bb_node *c = og_node(o, "Conv", n[3], ins0, n[3]);
    og_attr_ints(o, c, "kernel_shape", 2, (int64_t[]){3, 3});
    og_attr_ints(o, c, "pads", 4, (int64_t[]){1, 1, 1, 1});
    const char *act_in = n[3];
    if (s->batch_norm) {
        const char *suffix[4] = {"weight", "bias", "running_mean", "running_var"};
        const float *init[4] = {one, zero, zero, one};
        char ins[200];
        int at = snprintf(ins, sizeof ins, "%s", n[3]);
        for (int i = 0; i < 4; i++) {
            snprintf(n[4], sizeof n[4], "bn%d.%s", k, suffix[i]);
            og_param(o, n[4], 1, &cout, init[i]);
            at += snprintf(ins + at, sizeof ins - (size_t)at, ",%s", n[4]);
        }
        snprintf(n[5], sizeof n[5], "bn%d", k);
        og_node(o, "BatchNormalization", n[5], ins, n[5]);
        act_in = n[5];
    }
    snprintf(n[6], sizeof n[6], "relu%d", k);
    og_node(o, "Relu", n[6], act_in, n[6]);
    bb_node *p = og_node(o, "MaxPool", out, n[6], out);
    og_attr_ints(o, p, "kernel_shape", 2, (int64_t[]){2, 2});
    og_attr_ints(o, p, "strides", 2, (int64_t[]){2, 2});
    free(w);
    free(zero);
    free(one);
}

static inline void cnn__dense(og *o, const char *name, int64_t in, int64_t out,
                              const char *x, const char *y, uint64_t *seed)
{
    char wn[48], bn[48], ins[160];
    size_t nw = (size_t)(in * out);
    float *w = malloc(nw * sizeof *w), *b = calloc((size_t)out, sizeof *b);
    if (!w || !b) {
        o->oom = true;
        free(w);
        free(b);
        return;
    }
    og_he(w, nw, (size_t)in, seed);
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    og_param(o, wn, 2, (int64_t[]){out, in}, w); /* torch's Linear layout: [out, in] */
    og_param(o, bn, 1, &out, b);
    snprintf(ins, sizeof ins, "%s,%s,%s", x, wn, bn);
    og_attr_int(o, og_node(o, "Gemm", name, ins, y), "transB", 1);
    free(w);
    free(b);
}

/* The CNN into o (begun, empty). */
static inline void cnn_graph(og *o, const cnn_shape *s, uint64_t seed)
{
    int64_t flat = s->c2 * (s->side / 4) * (s->side / 4);
    og_input(o, "input", 2, (int64_t[]){-1, s->side * s->side});
    og_ints(o, "image_shape", 4, (int64_t[]){-1, 1, s->side, s->side});
    og_node(o, "Reshape", "reshape", "input,image_shape", "image");
    cnn__conv_block(o, s, 1, 1, s->c1, "image", "pool1", &seed);
    cnn__conv_block(o, s, 2, s->c1, s->c2, "pool1", "pool2", &seed);
    og_attr_int(o, og_node(o, "Flatten", "flatten", "pool2", "flat"), "axis", 1);
    cnn__dense(o, "fc1", flat, s->hidden, "flat", "fc1", &seed);
    og_node(o, "Relu", "relu3", "fc1", "hidden");
    cnn__dense(o, "fc2", s->hidden, s->classes, "hidden", "logits", &seed);
    og_output(o, "logits", 2, (int64_t[]){-1, s->classes});
}

#endif
