/*
 * run_internal.h — the pieces of `bbd run` (bbd/host/run.c), one file
 * each, callable by tests without the CLI:
 *
 *   run_module.c   a plain ONNX model -> a recorded single-module model
 *   run_session.c  one invocation of a compiled target in an in-process
 *                  engine (no network), polled until its outputs are in
 *   run_tensor.c   TensorProto files <-> values, summaries, comparison
 */
#ifndef BBD_HOST_RUN_INTERNAL_H
#define BBD_HOST_RUN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/ir.h"
#include "bb/status.h"
#include "bb/value.h"
#include "bbd/host/registry.h"

/* ---- plain ONNX models (run_module.c) ---------------------------------------- */

/* The module, slot and domain a plain ONNX graph becomes. */
#define BBD_RUN_MODULE_DOMAIN "bbd.run"
#define BBD_RUN_MODULE_NAME "Main"
#define BBD_RUN_BACKEND_SLOT "backend"
#define BBD_RUN_DEFAULT_BACKEND "cpu::CpuBackend"

/* A model with a main graph and no functions: an ordinary ONNX model. */
bool bbd_run_is_plain_onnx(const bb_model *m);

/* Turn plain's main graph (ai.onnx ops + initializers) into a recorded
 * model bbc compiles: one module BBD_RUN_MODULE_NAME with a generic Backend
 * slot BBD_RUN_BACKEND_SLOT holding every node (value names kept),
 * initializers as Constant nodes (an input with an initializer is a
 * constant), the graph inputs / outputs as the module's. An If / Loop whose
 * subgraphs read outer-scope values gets them as extra trailing inputs,
 * named in order by node metadata BB_META_OUTER_SCOPE_PREFIX "<k>" (per-op
 * dispatch has no enclosing graph). origin names the file in messages.
 * *out is new. BB_EUNSUPPORTED names a node of another domain. */
int bbd_run_module_from_onnx(const bb_model *plain, const char *origin, bb_model **out,
                             bb_error *err);

/* ---- one invocation (run_session.c) ----------------------------------------------- */

typedef struct bbd_run_input {
    const char *name;
    bb_value *value; /* borrowed */
} bbd_run_input;

typedef struct bbd_run_output {
    char *name;
    bb_value *value; /* owned reference */
} bbd_run_output;

typedef struct bbd_run_result {
    bbd_run_output *v; /* in the target function's output order */
    size_t n;
} bbd_run_result;

void bbd_run_result_free(bbd_run_result *r);

/* The install target of a compiled model (bb/artifact.h): want when given
 * (bb_artifact_find_target), else its only target. *out borrows the
 * model's function (its name is the target). */
int bbd_run_pick_target(const bb_model *compiled, const char *want, const bb_function **out,
                        bb_error *err);

/* Install target of compiled into a fresh engine with reg's types, invoke
 * it once with inputs and poll until every output of the target arrived
 * (or the execution ended, an op failed, or timeout_ms passed). Errors name
 * the failing node, the missing outputs or the install variant. */
int bbd_run_once(const bbd_registry *reg, const bb_model *compiled, const char *target,
                 const bbd_run_input *inputs, size_t n_inputs, uint64_t timeout_ms,
                 bbd_run_result *out, bb_error *err);

/* ---- tensors (run_tensor.c) --------------------------------------------------------- */

/* Largest .pb tensor file read. */
#define BBD_RUN_MAX_TENSOR_FILE ((size_t)1 << 30)

/* Read a TensorProto file into a new tensor value; *name_out (may be NULL)
 * gets the proto's name (malloc'd, NULL when it has none). */
int bbd_run_tensor_read(const char *path, bb_value **out, char **name_out, bb_error *err);
/* Write v (a tensor) as a TensorProto named name, atomically. */
int bbd_run_tensor_write(const char *path, const char *name, const bb_value *v, bb_error *err);
/* "name: float [2,3]" (a tensor) or "name: <type name>" into buf. */
const char *bbd_run_summary(const char *name, const bb_value *v, char *buf, size_t cap);
/* Does got match want within |got - want| <= atol + rtol * |want| (exact
 * for integer and bool tensors)? On mismatch why gets the first difference
 * (index, both values) or the dtype / shape difference. */
bool bbd_run_tensor_close(const bb_value *got, const bb_value *want, double rtol, double atol,
                          char *why, size_t cap);

#endif
