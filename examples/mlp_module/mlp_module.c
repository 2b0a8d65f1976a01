/*
 * mlp_module.c — records a BytesAndBrains Module (not a plain ONNX graph)
 * computing a small MLP on a generic Backend slot, and writes it to
 * argv[1]:
 *
 *   module Classifier { compute: Backend }
 *     probs = Softmax(Gemm(Relu(Gemm(x, W1, b1, transB)), W2, b2, transB), axis 1)
 *
 * x is [N, 16], W1 [8, 16], b1 [8], W2 [4, 8], b2 [4]; the weights are
 * fixed pseudo-random numbers recorded as ai.onnx Constants. Bound with
 * `--bind compute=cpu::CpuBackend`, `bbd run` runs it (tests/integration/
 * bbd_run.sh checks the result against numpy reading the same file).
 */
#include "bb/recorder.h"
#include "examples/record_main.h"

enum { IN = 16, HID = 8, OUT = 4 };

/* Deterministic weights in [-0.5, 0.5): a 32-bit LCG. */
static float next_weight(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / (float)(1u << 24) - 0.5f;
}

static bb_val constant(bb_rec *g, bb_slot *compute, const char *name, int64_t d0, int64_t d1,
                       uint32_t *seed)
{
    float v[IN * HID];
    int64_t dims[2] = {d0, d1};
    size_t n = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    for (size_t i = 0; i < n; i++)
        v[i] = next_weight(seed);
    bb_tensor_proto t = {.name = name, .data_type = BB_DT_FLOAT, .has_raw_data = true};
    t.dims.v = dims;
    t.dims.n = d1 ? 2 : 1;
    t.raw_data.data = (uint8_t *)v;
    t.raw_data.len = n * sizeof *v;
    return bb_onnx_constant(g, compute, &t);
}

static bb_module *record(bb_recorder *r)
{
    bb_module *m = bb_rec_module(r, "Classifier");
    bb_slot *compute = bb_rec_generic(m, BB_ROLE_BACKEND, "compute");
    bb_rec *g = bb_module_body(m);
    uint32_t seed = 2024;
    bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
    bb_val w1 = constant(g, compute, "W1", HID, IN, &seed);
    bb_val b1 = constant(g, compute, "b1", HID, 0, &seed);
    bb_val w2 = constant(g, compute, "W2", OUT, HID, &seed);
    bb_val b2 = constant(g, compute, "b2", OUT, 0, &seed);
    bb_val h = bb_onnx_relu(g, compute, bb_onnx_gemm(g, compute, x, w1, b1, 1.0f, 1.0f, 0, 1));
    bb_val z = bb_onnx_gemm(g, compute, h, w2, b2, 1.0f, 1.0f, 0, 1);
    bb_rec_output(g, "probs", bb_onnx_softmax(g, compute, z, 1));
    return m;
}

int main(int argc, char **argv) { return bb_example_main(argc, argv, record); }
