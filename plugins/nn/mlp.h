/*
 * mlp.h — internal interface of the nn plugin (nn::Mlp).
 *
 * The network: layers[0] inputs, hidden layers with the activation, a
 * linear output layer (logits for softmax cross-entropy, values for MSE).
 * ALL parameters live in one flat float32 vector, so aggregators and codecs
 * see one tensor: per layer l, W_l row-major [in, out] (Y = X W + b, as an
 * ONNX MatMul) followed by b_l [out].
 *
 *   net.c    the math on that vector: init, forward, backward (GEMMs
 *            through CBLAS); the losses, targets, optimizers and FedProx's
 *            term are every model's (plugins/common/plugin_train.h)
 *   jobs.c   Train and EvaluateMetrics as jobs off the engine thread
 *   mlp.c    the component: config, ops, the queue of ops that wait for a
 *            running Train, snapshot
 */
#ifndef BB_MLP_INTERNAL_H
#define BB_MLP_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bb/plugin.h>

#include "plugins/common/plugin_jobs.h"
#include "plugins/common/plugin_train.h"

#define MLP_MAX_LAYERS 16          /* weight layers */
#define MLP_MAX_WIDTH (1u << 20)
#define MLP_MAX_PARAMS (UINT64_C(1) << 30)

typedef enum mlp_act { ACT_RELU, ACT_TANH } mlp_act;

typedef struct mlp_shape {
    uint32_t n_layers;                      /* weight layers */
    uint32_t size[MLP_MAX_LAYERS + 1];      /* widths, size[0] = inputs */
    size_t w_off[MLP_MAX_LAYERS], b_off[MLP_MAX_LAYERS];
    size_t n_params;
    uint32_t max_width;
    mlp_act act;
    bbp_loss loss;
} mlp_shape;

/* Activations of one batch (and scratch for backward). */
typedef struct mlp_ws {
    size_t rows_cap;
    float *a[MLP_MAX_LAYERS + 1];           /* a[l]: rows x size[l]; a[0] borrowed input */
    float *da, *dz;                         /* rows x max_width scratch (they swap) */
    size_t rows;                            /* rows of the last forward */
} mlp_ws;

/* FedProx (Li et al. 2020): the training loss gains mu/2 ||w - center||^2,
 * so each step's gradient gains mu (w - center). */
typedef struct mlp_prox {
    float mu;
    const float *center;                    /* n_params: the last LoadParameters' */
} mlp_prox;

/* ---- net.c ------------------------------------------------------------------ */
void mlp_shape_init(mlp_shape *s, const uint32_t *sizes, uint32_t n_sizes, mlp_act act,
                    bbp_loss loss);
void mlp_init_params(const mlp_shape *s, uint64_t seed, float *p);
int mlp_ws_reserve(mlp_ws *w, const mlp_shape *s, size_t rows);
void mlp_ws_free(mlp_ws *w);
/* Forward of rows x size[0] inputs (x must outlive the use of w). Returns
 * the output activations (rows x outputs, inside w). */
const float *mlp_forward(const mlp_shape *s, const float *p, const float *x, size_t rows,
                         mlp_ws *w);
/* Loss of the last forward; dz (rows x outputs, may be NULL) receives
 * dLoss/dOutput of the MEAN loss over the rows. Adds to st. */
void mlp_loss_grad(const mlp_shape *s, const mlp_ws *w, const bbp_target *t, float *dz,
                   bbp_stats *st);
/* Back-propagates w->dz (rows x outputs, dLoss/dOutput; consumed) through
 * the last forward into g (n_params): g = grad, or g += grad when
 * accumulate. */
void mlp_backward(const mlp_shape *s, const float *p, mlp_ws *w, float *g, bool accumulate);
/* Right after mlp_backward: dLoss/dInput of the last forward (rows x
 * inputs) into dx — what split learning sends back to the layers below. */
void mlp_input_grad(const mlp_shape *s, const float *p, const mlp_ws *w, float *dx);
/* Targets from a labels tensor (bbp_target_from for this network's loss
 * and outputs). */
int mlp_target_from(const mlp_shape *s, const bb_value *y, size_t rows, int32_t *cls_buf,
                    float *fbuf, bbp_target *t, char *msg, size_t cap);

/* Over a batch in minibatches of at most mb rows: with an optimizer, train
 * (forward, loss, backward, the proximal term when prox is not NULL, step;
 * grad is n_params scratch, unused and may be NULL when the step does not
 * need the whole gradient: mlp_pass_needs_grad); without one (o NULL),
 * only the loss and accuracy. Adds to st. */
bool mlp_pass_needs_grad(const bbp_optim *o, const mlp_prox *prox);
int mlp_pass(const mlp_shape *s, float *p, bbp_optim *o, const mlp_prox *prox, mlp_ws *w,
             float *grad, const float *x, const bbp_target *t, size_t rows, size_t mb,
             bbp_stats *st);
/* g += prox->mu (p - prox->center) over n parameters. */
static inline void mlp_add_proximal(const mlp_prox *prox, const float *p, float *g, size_t n)
{
    bbp_prox_add(prox->mu, p, prox->center, g, n, NULL, 0);
}

/* ---- the component (mlp.c) ---------------------------------------------------- */

typedef enum mlp_op {
    OP_APPLY_DELTA, OP_BACKWARD, OP_EVALUATE, OP_EVALUATE_METRICS, OP_FORWARD,
    OP_LOAD_PARAMETERS, OP_PARAMS, OP_STEP, OP_TRAIN, OP_GRADIENTS, OP_PARAMS_ON,
    OP_PARAMS_DIGEST, OP_BACKWARD_INPUT, OP_LOSS_GRADIENT, OP_STEP_ON, OP_MERGE, OP_SHARE,
    N_MLP_OPS
} mlp_op;

#define MLP_MAX_OUTPUTS 3 /* LossGradient's (grad, loss, accuracy) */

/* How Merge combines a received model with this one (config "merge"). */
typedef enum mlp_merge { MERGE_WEIGHTED, MERGE_AVERAGE, MERGE_REPLACE, MERGE_PUSH_SUM } mlp_merge;

/* A push-sum mass on the wire: U64 in units of 2^-32 (a node starts at 1). */
#define MLP_MASS_ONE 4294967296.0

typedef struct mlp {
    mlp_shape shape;
    char who[160];             /* "nn::Mlp at slot 'model'" */
    bb_value *pv;              /* committed parameters, f32 [P] (engine thread), shared with
                                * whoever asked for them: Params, Train's output, the wire */
    float *params;             /* bb_tensor_f32(pv), to read; changes go through
                                * mlp_params_mut (copy on write while pv is shared) */
    bbp_optim opt;
    int64_t batch_size;        /* training minibatch */
    int64_t epochs_cfg;        /* config epochs, or -1: the node's attribute */
    int64_t batches_per_epoch; /* epoch length for sources without NumSamples */
    float update_scale;        /* attack simulation: Train answers start + scale x update */
    float proximal_mu;         /* FedProx: Train's and Step's pull towards center */
    bb_value *center;          /* proximal_mu > 0: the parameters of the last LoadParameters
                                * (at first the initial ones): FedProx's global model, a
                                * value shared with them (never changed) */
    float *step_grad;          /* proximal_mu > 0: Step's scratch for a given gradient */
    mlp_ws ws;                 /* engine-thread ops */
    bb_value *fwd_input;       /* the input of the cached Forward (ws.a[0]) */
    bool fwd_cached;
    float *grad_acc;           /* Backward's accumulated gradient */
    bool grad_pending;
    uint64_t version;          /* changes so far (the CommandId ops answer) */
    uint64_t age;              /* samples trained on, through merges too (gossip learning) */
    double mass;               /* push-sum: this model's share of the network's total weight */
    mlp_merge merge;           /* the Merge rule */
    bb_ctx *ctx;               /* the engine's ctx for this component */
    bbp_jobs jobs;             /* live Train / EvaluateMetrics; jobs.busy: the Train in
                                * flight, changes wait for it */
    bbp_queue queue;           /* FIFO of ops waiting for jobs.busy */
} mlp;

/* The committed parameters become v (takes the reference; a 1-D f32 [P]). */
void mlp_commit_params(mlp *m, bb_value *v);
/* The committed parameters as memory the engine thread may change: copied
 * first while anyone else holds them. NULL when out of memory. */
float *mlp_params_mut(mlp *m);
/* A new f32 [P] value holding a copy of the P floats at p (64-byte
 * aligned), or NULL. */
bb_value *mlp_params_copy(const mlp *m, const void *p);

/* Runs every queued op that can run now (after a Train finished). */
void mlp_drain(void *model);

/* ---- jobs.c (plugins/common/plugin_jobs.h's protocol) ---------------------------- */

/* Train epochs over the "data" dependency off the engine thread; the result
 * is (params, num_samples), n_out of them. Returns BB_OK when the job is
 * under way or done (see sync, which may be NULL when the op's dispatch has
 * already returned), else an error (c untouched). */
int mlp_start_train(void *model, bb_ctx *ctx, bb_completion *c, uint32_t n_out,
                    int64_t epochs, bbp_sync *sync, bb_error *err);
/* Loss and accuracy on the source's evaluation set; same contract. */
int mlp_start_eval(void *model, bb_ctx *ctx, bb_completion *c, uint32_t n_out, bbp_sync *sync,
                   bb_error *err);

#endif
