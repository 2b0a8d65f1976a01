/*
 * onnx_model.h — internal interface of the nn::Onnx component.
 *
 *   onnx_model.c   the component: config, create, the ops, snapshot
 *   onnx_jobs.c    Train and EvaluateMetrics as plugin_jobs.h jobs, and the
 *                  minibatch passes they and the synchronous ops share
 *   export.c       the trained model as a plain ONNX inference model
 *   autodiff.h     the trainer (plan, session, gradient rules)
 */
#ifndef BB_ONNX_MODEL_H
#define BB_ONNX_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "autodiff.h"
#include "plugins/common/plugin_jobs.h"
#include "plugins/common/plugin_train.h"

#define ONNX_NAME "nn::Onnx"
#define ONNX_EVAL_CHUNK 256 /* rows per inference forward when evaluating */

/* What a minibatch pass needs (shared by the engine-thread ops and jobs). */
typedef struct onnx_trainer {
    ad_plan *plan;             /* referenced */
    ad_session *sess;
    bbp_loss loss;
    size_t batch_size;
    float prox_mu;
    const float *center;       /* FedProx center (n_floats), or NULL */
    float *grad;               /* n_floats */
    int32_t *cls;              /* label scratch */
    float *fbuf;
    size_t lab_cap;
} onnx_trainer;

typedef struct onnx_model {
    ad_plan *plan;
    char who[160];             /* "nn::Onnx at slot 'model'" */
    float *params;             /* committed parameters and buffers (engine thread) */
    float *center;             /* the parameters of the last LoadParameters (FedProx) */
    bbp_optim opt;
    bbp_loss loss;
    float prox_mu;
    int64_t batch_size;
    int64_t epochs_cfg;        /* config epochs, or -1: the node's attribute */
    int64_t batches_per_epoch;
    int64_t opset;             /* ai.onnx version an exported model imports */
    uint64_t seed;             /* Dropout masks */
    uint64_t jobs_started;     /* each Train draws other masks */
    onnx_trainer tr;           /* engine-thread ops, on params */
    float *scratch;            /* n_floats: Gradients runs on a copy */
    ad_session *scratch_sess;
    float *grad_acc;           /* Backward's accumulated gradient */
    bool grad_pending;
    uint64_t version;          /* changes so far (the CommandId ops answer) */
    bb_ctx *ctx;
    bbp_jobs jobs;
    bbp_queue queue;
} onnx_model;

/* ---- onnx_jobs.c ------------------------------------------------------------------- */

int onnx_trainer_init(onnx_trainer *t, ad_plan *plan, float *params, uint64_t seed,
                      bbp_loss loss, size_t batch_size, float prox_mu, const float *center);
void onnx_trainer_free(onnx_trainer *t);
/* Labels of a batch of rows (k outputs per row). */
int onnx_targets(onnx_trainer *t, const bb_value *y, size_t rows, size_t k, bbp_target *out,
                 char *msg, size_t cap);
/* Over the rows of (x, y): with an optimizer, train in minibatches
 * (forward, loss, backward, proximal term, step); without (o NULL), only
 * the loss and accuracy (inference mode, in chunks). Adds to st. */
int onnx_pass(onnx_trainer *t, float *params, bbp_optim *o, const bb_value *x,
              const bb_value *y, bbp_stats *st, char *msg, size_t cap);
/* A view of rows [r0, r0 + n) of x. */
bb_value *onnx_rows(const bb_value *x, size_t r0, size_t n);

int onnx_start_train(void *model, bb_ctx *ctx, bb_completion *c, uint32_t n_out,
                     int64_t epochs, bbp_sync *sync, bb_error *err);
int onnx_start_eval(void *model, bb_ctx *ctx, bb_completion *c, uint32_t n_out,
                    bbp_sync *sync, bb_error *err);
/* Runs every queued op that can run now (after a Train finished). */
void onnx_drain(void *model);

/* ---- export.c ------------------------------------------------------------------------ */

/* The plan's graph with params as its initializers, as a serialized ONNX
 * ModelProto (IR version 8, ai.onnx at opset): *out is malloc'd. */
int onnx_export(const ad_plan *plan, const float *params, int64_t opset, uint8_t **out,
                size_t *len, bb_error *err);

#endif
