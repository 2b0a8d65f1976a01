/*
 * bench_cnn_fashion.c — the centralized Fashion-MNIST run of examples/cnn:
 * nn::Onnx trains the CNN (two conv + BN + pool blocks, two dense layers)
 * on the 60,000 training images with Adam, minibatch 64, through its own
 * ops (Forward, Backward, Step: as a program's nodes would) — learning
 * rate 1e-3, then 1e-4 from epoch --lr-drop on (a step schedule: a new
 * nn::Onnx at the lower rate takes the parameters, running statistics
 * included, by LoadParameters; Adam's moments start again) — and after
 * every epoch evaluates the 10,000 test images (Evaluate, inference mode:
 * running statistics). Prints a line per epoch (test loss and accuracy,
 * wall time) and the target: >= 91% test accuracy (the Fashion-MNIST
 * benchmark lists 0.916 for "2 Conv+pooling", 0.934 with BN).
 *
 * The data are the IDX files of Debian's dataset-fashion-mnist
 * (scripts/fetch-data --set fashion-mnist puts them into data/fashion-mnist/;
 * scripts/cnn-fashion does that and runs this), read by data::Idx — the data
 * plugin's reader, as a program's nodes read them (pixels scaled to [0, 1]);
 * without them the run is skipped with a message.
 *
 * Usage: bench_cnn_fashion [--data DIR] [--epochs N] [--lr-drop E] [--quick]
 *   --quick: 2 epochs on the first 6,000 images (a smoke run)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/support/bench_util.h"
#include "bench/support/onnx_driver.h"
#include "examples/cnn/cnn_graph.h"

#define SIDE 28
#define PIXELS (SIDE * SIDE)
#define BATCH 64

typedef struct dataset {
    bb_value *xv;  /* n x 784 in [0, 1], from data::Idx */
    const float *x;
    int32_t *y;
    size_t n;
} dataset;

/* DIR/PREFIX-{images-idx3,labels-idx1}-ubyte.gz through data::Idx (all its
 * rows, as its evaluation set); false when the files are not there. A file
 * that is there but not IDX stops the run with data::Idx's message. */
static bool load(bb_plugin_loader *l, const char *dir, const char *prefix, dataset *d)
{
    char images[1100], labels[1100], cfg[2400];
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    if (access(images, R_OK) != 0 || access(labels, R_OK) != 0)
        return false;
    snprintf(cfg, sizeof cfg, "{\"path\": \"%s\", \"label_path\": \"%s\", \"part\": \"all\"}",
             images, labels);
    drv_comp src = drv_create(l, "data::Idx", NULL, cfg);
    bb_value *out[2] = {0};
    drv_call(&src, "EvalSet", NULL, 0, out, 2);
    drv_destroy(&src);
    const bb_tensor_view *x = &out[0]->u.tensor;
    if (x->ndim != 2 || x->dims[1] != PIXELS)
        drv_fail(images, "the images are not 28 x 28");
    d->n = (size_t)x->dims[0];
    d->xv = out[0];
    d->x = bb_tensor_f32(out[0]);
    d->y = malloc(d->n * sizeof *d->y);
    if (!d->y || bb_tensor_numel(out[1]) != d->n)
        drv_fail(labels, d->y ? "one label per image expected" : "out of memory");
    for (size_t i = 0; i < d->n; i++) {
        float v = bb_tensor_f32(out[1])[i];
        if (!(v >= 0 && v < 10))
            drv_fail(labels, "a label outside 0..9");
        d->y[i] = (int32_t)v;
    }
    bb_value_unref(out[1]);
    return true;
}

static double now_s(void)
{
    return bench_now_ns() * 1e-9;
}

static void shuffle(size_t *idx, size_t n, uint64_t *s)
{
    for (size_t i = n; i > 1; i--) {
        *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t j = (size_t)((*s >> 33) % i), t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}

/* Evaluate on the test set: loss and accuracy. */
static void evaluate(drv_comp *m, const dataset *te, float *loss, float *acc)
{
    bb_value *in[2];
    in[0] = bb_value_ref(te->xv);
    in[1] = bb_value_tensor_copy(BB_DT_INT32, 1, (int64_t[]){(int64_t)te->n}, te->y,
                                 te->n * sizeof(int32_t));
    bb_value *out[2] = {0};
    if (!in[1])
        drv_fail("evaluate", "out of memory");
    drv_call(m, "Evaluate", in, 2, out, 2);
    *loss = *bb_tensor_f32(out[0]);
    *acc = *bb_tensor_f32(out[1]);
    for (int i = 0; i < 2; i++) {
        bb_value_unref(in[i]);
        bb_value_unref(out[i]);
    }
}

int main(int argc, char **argv)
{
    const char *dir = "data/fashion-mnist";
    int epochs = 12, lr_drop = 9;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--epochs") == 0 && i + 1 < argc) {
            epochs = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--lr-drop") == 0 && i + 1 < argc) {
            lr_drop = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = true;
            epochs = 2;
        } else {
            fprintf(stderr, "usage: bench_cnn_fashion [--data DIR] [--epochs N] [--lr-drop E] "
                            "[--quick]\n");
            return 2;
        }
    }
    if (epochs < 1 || epochs > 1000) {
        fprintf(stderr, "bench_cnn_fashion: error: --epochs takes 1..1000\n");
        return 2;
    }
    bb_plugin_loader *l = drv_plugins();
    dataset tr = {0}, te = {0};
    if (!load(l, dir, "train", &tr) || !load(l, dir, "t10k", &te)) {
        printf("bench_cnn_fashion: skipped: no Fashion-MNIST in %s (scripts/fetch-data --set "
               "fashion-mnist fetches it; scripts/cnn-fashion fetches it and runs this)\n", dir);
        bb_value_unref(tr.xv);
        free(tr.y);
        bb_plugin_loader_destroy(l);
        return 0;
    }
    if (quick)
        tr.n = 6000;
    bench_place(true);
    og g;
    og_begin(&g, "cnn");
    cnn_shape s = CNN_SHAPE_FASHION;
    cnn_graph(&g, &s, 2024);
    drv_comp m = drv_create(l, "nn::Onnx", g.g,
                            "{\"optimizer\": \"adam\", \"learning_rate\": 0.001}");
    printf("CNN on Fashion-MNIST: %zu training images, %zu test images, Adam 1e-3 "
           "(1e-4 from epoch %d), minibatch %d, one core\n\n", tr.n, te.n, lr_drop, BATCH);
    printf("%5s %12s %12s %10s %10s\n", "epoch", "train loss", "test loss", "test acc", "wall s");
    size_t *idx = malloc(tr.n * sizeof *idx);
    int32_t labels[BATCH];
    for (size_t i = 0; i < tr.n; i++)
        idx[i] = i;
    uint64_t seed = 7;
    double t0 = now_s();
    float loss = 0, acc = 0;
    for (int e = 1; e <= epochs; e++) {
        if (e == lr_drop) { /* the step schedule: the same parameters, a lower rate */
            bb_value *p = NULL, *cmd = NULL;
            drv_call(&m, "Params", NULL, 0, &p, 1);
            drv_destroy(&m);
            m = drv_create(l, "nn::Onnx", g.g,
                           "{\"optimizer\": \"adam\", \"learning_rate\": 0.0001}");
            drv_call(&m, "LoadParameters", &p, 1, &cmd, 1);
            bb_value_unref(p);
            bb_value_unref(cmd);
        }
        shuffle(idx, tr.n, &seed);
        double sum = 0;
        size_t steps = 0;
        for (size_t b = 0; b + BATCH <= tr.n; b += BATCH, steps++) {
            bb_value *x = bb_value_tensor_new(BB_DT_FLOAT, 2, (int64_t[]){BATCH, PIXELS});
            if (!x)
                drv_fail("batch", "out of memory");
            for (int r = 0; r < BATCH; r++) {
                memcpy(bb_tensor_f32(x) + (size_t)r * PIXELS, tr.x + idx[b + r] * PIXELS,
                       PIXELS * sizeof(float));
                labels[r] = tr.y[idx[b + r]];
            }
            sum += drv_train_step(&m, x, labels, BATCH);
            bb_value_unref(x);
        }
        evaluate(&m, &te, &loss, &acc);
        printf("%5d %12.4f %12.4f %9.2f%% %10.1f\n", e, sum / (double)steps, (double)loss,
               100.0 * acc, now_s() - t0);
        fflush(stdout);
    }
    printf("\ntarget: >= 91%% test accuracy: %s (%.2f%% after %d epochs, %.1f s)\n",
           acc >= 0.91f ? "met" : quick ? "not judged (--quick)" : "MISSED", 100.0 * acc, epochs,
           now_s() - t0);
    free(idx);
    drv_destroy(&m);
    og_end(&g);
    bb_plugin_loader_destroy(l);
    bb_value_unref(tr.xv);
    free(tr.y);
    bb_value_unref(te.xv);
    free(te.y);
    return 0;
}
