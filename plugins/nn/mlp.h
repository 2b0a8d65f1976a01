/*
 * mlp.h — internal interface of the nn plugin (nn::Mlp).
 *
 * The network: layers[0] inputs, hidden layers with the activation, a
 * linear output layer (logits for softmax cross-entropy, values for MSE).
 * ALL parameters live in one flat float32 vector, so aggregators and codecs
 * see one tensor: per layer l, W_l row-major [in, out] (Y = X W + b, as an
 * ONNX MatMul) followed by b_l [out].
 *
 *   net.c    the math on that vector: init, forward, loss, backward,
 *            optimizer steps (GEMMs through CBLAS)
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

#define MLP_MAX_LAYERS 16          /* weight layers */
#define MLP_MAX_WIDTH (1u << 20)
#define MLP_MAX_PARAMS (UINT64_C(1) << 30)

typedef enum mlp_act { ACT_RELU, ACT_TANH } mlp_act;
typedef enum mlp_loss { LOSS_CE, LOSS_MSE } mlp_loss;
typedef enum mlp_opt { OPT_SGD, OPT_ADAM } mlp_opt;

typedef struct mlp_shape {
    uint32_t n_layers;                      /* weight layers */
    uint32_t size[MLP_MAX_LAYERS + 1];      /* widths, size[0] = inputs */
    size_t w_off[MLP_MAX_LAYERS], b_off[MLP_MAX_LAYERS];
    size_t n_params;
    uint32_t max_width;
    mlp_act act;
    mlp_loss loss;
} mlp_shape;

/* Activations of one batch (and scratch for backward). */
typedef struct mlp_ws {
    size_t rows_cap;
    float *a[MLP_MAX_LAYERS + 1];           /* a[l]: rows x size[l]; a[0] borrowed input */
    float *da, *dz;                         /* rows x max_width scratch (they swap) */
    size_t rows;                            /* rows of the last forward */
} mlp_ws;

/* Targets of a batch: class ids, or a dense [rows, outputs] matrix. */
typedef struct mlp_target {
    const int32_t *cls;
    const float *dense;
} mlp_target;

typedef struct mlp_optim {
    mlp_opt kind;
    float lr, momentum, beta1, beta2, eps;
    uint64_t t;                             /* Adam steps */
    float *m, *v;                           /* n_params each (v: Adam only) */
} mlp_optim;

/* FedProx (Li et al. 2020): the training loss gains mu/2 ||w - center||^2,
 * so each step's gradient gains mu (w - center). */
typedef struct mlp_prox {
    float mu;
    const float *center;                    /* n_params: the last LoadParameters' */
} mlp_prox;

/* Batch statistics. */
typedef struct mlp_stats {
    double loss_sum;                        /* sum over rows of the per-row loss */
    uint64_t correct, rows;
} mlp_stats;

/* ---- net.c ------------------------------------------------------------------ */
void mlp_shape_init(mlp_shape *s, const uint32_t *sizes, uint32_t n_sizes, mlp_act act,
                    mlp_loss loss);
void mlp_init_params(const mlp_shape *s, uint64_t seed, float *p);
int mlp_ws_reserve(mlp_ws *w, const mlp_shape *s, size_t rows);
void mlp_ws_free(mlp_ws *w);
/* Forward of rows x size[0] inputs (x must outlive the use of w). Returns
 * the output activations (rows x outputs, inside w). */
const float *mlp_forward(const mlp_shape *s, const float *p, const float *x, size_t rows,
                         mlp_ws *w);
/* Loss of the last forward; dz (rows x outputs, may be NULL) receives
 * dLoss/dOutput of the MEAN loss over the rows. Adds to st. */
void mlp_loss_grad(const mlp_shape *s, const mlp_ws *w, const mlp_target *t, float *dz,
                   mlp_stats *st);
/* Back-propagates w->dz (rows x outputs, dLoss/dOutput; consumed) through
 * the last forward into g (n_params): g = grad, or g += grad when
 * accumulate. */
void mlp_backward(const mlp_shape *s, const float *p, mlp_ws *w, float *g, bool accumulate);
/* Momentum or Adam moments: plain SGD (momentum 0) has none (m, v NULL). */
bool mlp_optim_has_moments(const mlp_optim *o);
int mlp_optim_init(mlp_optim *o, size_t n_params);
void mlp_optim_reset(mlp_optim *o, size_t n_params);
void mlp_optim_free(mlp_optim *o);
void mlp_optim_step(mlp_optim *o, float *p, const float *g, size_t n);

/* Targets from a labels tensor: f32 [rows, outputs] (dense), or [rows]
 * (f32 / f64 / i32 / i64): class ids in [0, outputs), except for MSE with
 * one output, where they are the regression targets. cls_buf and fbuf are
 * the caller's scratch of rows entries. On error msg says why. */
int mlp_target_from(const mlp_shape *s, const bb_value *y, size_t rows, int32_t *cls_buf,
                    float *fbuf, mlp_target *t, char *msg, size_t cap);

/* Over a batch in minibatches of at most mb rows: with an optimizer, train
 * (forward, loss, backward, the proximal term when prox is not NULL, step;
 * grad is n_params scratch, unused and may be NULL for plain SGD without a
 * proximal term: mlp_pass_needs_grad); without one (o NULL), only the loss
 * and accuracy. Adds to st. */
bool mlp_pass_needs_grad(const mlp_optim *o, const mlp_prox *prox);
int mlp_pass(const mlp_shape *s, float *p, mlp_optim *o, const mlp_prox *prox, mlp_ws *w,
             float *grad, const float *x, const mlp_target *t, size_t rows, size_t mb,
             mlp_stats *st);
/* g += prox->mu (p - prox->center) over n parameters. */
void mlp_add_proximal(const mlp_prox *prox, const float *p, float *g, size_t n);

/* ---- the component (mlp.c) ---------------------------------------------------- */

typedef enum mlp_op {
    OP_APPLY_DELTA, OP_BACKWARD, OP_EVALUATE, OP_EVALUATE_METRICS, OP_FORWARD,
    OP_LOAD_PARAMETERS, OP_PARAMS, OP_STEP, OP_TRAIN, OP_GRADIENTS, OP_PARAMS_ON,
    OP_PARAMS_DIGEST, N_MLP_OPS
} mlp_op;

/* An op that waits for the running Train (ops that change the model). */
typedef struct mlp_deferred {
    mlp_op op;
    bb_value *in[2];
    uint32_t n_in, n_out;
    int64_t epochs;
    bb_completion *completion;
} mlp_deferred;

typedef struct mlp_job mlp_job;

typedef struct mlp {
    mlp_shape shape;
    char who[160];             /* "nn::Mlp at slot 'model'" */
    bb_value *pv;              /* committed parameters, f32 [P] (engine thread), shared with
                                * whoever asked for them: Params, Train's output, the wire */
    float *params;             /* bb_tensor_f32(pv), to read; changes go through
                                * mlp_params_mut (copy on write while pv is shared) */
    mlp_optim opt;
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
    bb_ctx *ctx;               /* the engine's ctx for this component */
    mlp_job *busy;             /* the Train in flight: changes wait for it */
    mlp_job **jobs;            /* every live job (Train and EvaluateMetrics) */
    size_t n_jobs, cap_jobs;
    mlp_deferred *queue;       /* FIFO of ops waiting for busy */
    size_t q_head, q_n, q_cap;
} mlp;

/* FNV-1a-64 over the parameters' 64-bit little-endian words (ParamsDigest). */
uint64_t mlp_params_digest(const float *p, size_t n);

/* The committed parameters become v (takes the reference; a 1-D f32 [P]). */
void mlp_commit_params(mlp *m, bb_value *v);
/* The committed parameters as memory the engine thread may change: copied
 * first while anyone else holds them. NULL when out of memory. */
float *mlp_params_mut(mlp *m);
/* A new f32 [P] value holding a copy of p (64-byte aligned), or NULL. */
bb_value *mlp_params_copy(const mlp *m, const void *p);

/* Runs every queued op that can run now (after a Train finished). */
void mlp_drain(mlp *m);

/* ---- jobs.c ---------------------------------------------------------------------- */

/* Where a job that finishes inside the dispatch that started it (the host
 * ran its work inline) leaves its result: the engine takes a result from
 * the dispatch itself then, not through the completion handle. */
typedef struct mlp_sync {
    bb_value **out;            /* the dispatch's outputs */
    bb_error *err;
    bool done;                 /* finished inline: out / err hold the result */
    int rc;
} mlp_sync;

/* Train epochs over the "data" dependency off the engine thread; the result
 * is (params, num_samples), n_out of them. Returns BB_OK when the job is
 * under way or done (see sync, which may be NULL when the op's dispatch has
 * already returned), else an error (c untouched). */
int mlp_start_train(mlp *m, bb_ctx *ctx, bb_completion *c, uint32_t n_out, int64_t epochs,
                    mlp_sync *sync, bb_error *err);
/* Loss and accuracy on the source's evaluation set; same contract. */
int mlp_start_eval(mlp *m, bb_ctx *ctx, bb_completion *c, uint32_t n_out, mlp_sync *sync,
                   bb_error *err);
/* The component is going away: running workers stop at their next batch. */
void mlp_jobs_cancel_all(mlp *m);

#endif
