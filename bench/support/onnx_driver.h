/*
 * onnx_driver.h — driving nn::Onnx and cpu::CpuBackend from a benchmark:
 * the plugins from the build, a model from an ONNX graph and a config, op
 * dispatch that exits on failure, and one training step through the
 * model's own ops (Forward, softmax cross-entropy's gradient, Backward,
 * Step) — the way a program's Forward/Backward/Step nodes train it.
 */
#ifndef BB_BENCH_ONNX_DRIVER_H
#define BB_BENCH_ONNX_DRIVER_H

#include <stdint.h>

#include "bb/ir.h"
#include "bb/plugin.h"
#include "bb/plugin_loader.h"

typedef struct drv_comp {
    const bb_component_type *t;
    void *inst;
} drv_comp;

/* The build's plugin directory scanned ($BB_BUILD, else next to the
 * program); exits on failure. */
bb_plugin_loader *drv_plugins(void);
/* A component of type_name with the construction graph g (may be NULL)
 * and config JSON; exits on failure. */
drv_comp drv_create(bb_plugin_loader *l, const char *type_name, const bb_graph *g,
                    const char *config);
void drv_destroy(drv_comp *c);
/* op on c (any of its opsets); exits naming the op on failure. */
void drv_call(drv_comp *c, const char *op, bb_value **in, uint32_t n_in, bb_value **out,
              uint32_t n_out);
/* One SGD / Adam step on (x [rows, ...], labels[rows] class ids): Forward,
 * the mean softmax cross-entropy's gradient, Backward, Step. Returns the
 * batch's mean loss. */
double drv_train_step(drv_comp *m, bb_value *x, const int32_t *labels, int64_t rows);
/* A fatal error: "PROG: error: what: msg", exit 1. */
_Noreturn void drv_fail(const char *what, const char *msg);

#endif
