/*
 * autodiff.h — reverse-mode automatic differentiation over an ONNX
 * inference graph (the trainer inside nn::Onnx).
 *
 * A plan is built once, from the graph, at create time (plan.c):
 *   - every value name becomes a slot; initializers become parameters
 *     (f32, rank >= 1, not frozen: trained), buffers (BatchNormalization's
 *     running mean / variance: kept and updated, never trained) or
 *     constants; Constant nodes are folded;
 *   - each node gets its op's rule (rules.c): how it runs forward in
 *     training and in inference, and how its gradient flows back;
 *   - the nodes between a trained parameter and the loss (graph output 0)
 *     form the backward graph: they run their gradient rules in reverse
 *     order; such a node whose op has no rule is refused here, naming the
 *     node and its op.
 * Parameters and buffers live in ONE flat f32 vector in initializer order
 * (ad_param.offset), so aggregators and codecs see one tensor and the
 * trained values map back to their ONNX initializer names.
 *
 * A session (session.c) runs the plan over a flat vector it borrows:
 * forward (training: BatchNormalization uses batch statistics and updates
 * the running ones, Dropout masks; inference: running statistics, Dropout
 * passes through), then backward from dLoss/dOutput into a flat gradient.
 * Forward kernels are cpu::CpuBackend's (plugins/cpu, linked into this
 * plugin), so both plugins compute the same forward pass. A session is
 * used by one thread at a time; plans are immutable and shared.
 */
#ifndef BB_ONNX_AUTODIFF_H
#define BB_ONNX_AUTODIFF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bb/arena.h>
#include <bb/ir.h>
#include <bb/plugin.h>

#include "plugins/common/plugin_train.h"
#include "plugins/cpu/cpu_internal.h"

#define AD_MAX_NODES (1u << 20)
#define AD_MAX_FLOATS (UINT64_C(1) << 30) /* parameters + buffers */
#define AD_POOL_BYTES ((size_t)1 << 30)     /* idle tensor memory a session keeps */

typedef struct ad_plan ad_plan;
typedef struct ad_session ad_session;
typedef struct ad_node ad_node;
typedef struct ad_rule ad_rule;

typedef enum ad_slot_kind {
    AD_SLOT_VALUE,  /* produced by a node */
    AD_SLOT_INPUT,  /* the graph's data input */
    AD_SLOT_PARAM,  /* a parameter or buffer initializer (in the flat vector) */
    AD_SLOT_CONST   /* any other initializer, or a folded Constant */
} ad_slot_kind;

typedef struct ad_slot {
    const char *name;
    ad_slot_kind kind;
    int32_t param;      /* index into plan->params (AD_SLOT_PARAM), else -1 */
    bb_value *konst;    /* AD_SLOT_CONST: the value (owned by the plan) */
    bool depends;       /* depends on a trained parameter */
    bool grad;          /* its gradient is needed (depends, and reaches the loss) */
    int32_t last_use;   /* last node reading it (inference releases it there) */
} ad_slot;

typedef struct ad_param {
    const char *name;   /* the ONNX initializer name */
    uint32_t slot;
    size_t offset;      /* in the flat vector, in floats */
    size_t numel;
    uint32_t ndim;
    int64_t dims[BB_MAX_DIMS];
    bool trained;       /* false: a buffer (running statistics) or frozen */
} ad_param;

/* Work a rule saves from forward for its backward (per node, per session). */
#define AD_MAX_SAVED 3

struct ad_node {
    const bb_node *node;    /* the ONNX node (attributes), in the plan's graph copy */
    const ad_rule *rule;
    uint32_t n_in, n_out;
    int32_t *in, *out;      /* slots; -1 for an omitted optional input / unused output */
    bool backward;          /* runs its gradient rule */
    bb_node *aux;           /* a node with attributes a backward kernel needs, or NULL */
};

struct ad_plan {
    atomic_uint refs;       /* a job's worker may outlive the model */
    bb_arena *arena;
    const char *who;        /* "nn::Onnx at slot 'model'": prefixes messages */
    bb_graph *graph;        /* deep copy of the construction graph */
    uint32_t n_slots;
    ad_slot *slots;
    uint32_t n_nodes;
    ad_node *nodes;
    uint32_t n_params;
    ad_param *params;
    size_t n_floats;        /* length of the flat vector */
    size_t n_trained;       /* floats that are trained */
    bbp_range *trained;     /* the trained runs of the flat vector */
    size_t n_trained_runs;
    uint32_t input_slot, output_slot;
    uint32_t input_ndim;    /* declared input shape; dims < 0 unknown */
    int64_t input_dims[BB_MAX_DIMS];
    bool has_dropout;
};

/* Build a plan for graph (deep-copied). frozen[0..n_frozen) names
 * initializers that are not trained. who prefixes messages ("nn::Onnx at
 * slot 'model'"). On error *out is NULL and err names the node / value. */
int ad_plan_build(const bb_graph *graph, const char *const *frozen, size_t n_frozen,
                  const char *who, ad_plan **out, bb_error *err);
ad_plan *ad_plan_ref(ad_plan *p);
void ad_plan_unref(ad_plan *p);
/* The initializer values in the flat layout (parameters and buffers). */
void ad_plan_initial_params(const ad_plan *p, float *flat);
/* Index of the parameter named name, or -1. */
int32_t ad_plan_find_param(const ad_plan *p, const char *name);
/* Initial parameters must come from the graph: a parameter initializer
 * with no data is refused at build. */

/* ---- sessions --------------------------------------------------------------------- */

/* A session over the flat vector params (borrowed, n_floats long; may be
 * changed between steps, not during one). seed drives Dropout. */
ad_session *ad_session_new(const ad_plan *p, float *params, uint64_t seed);
void ad_session_free(ad_session *s);
/* Point the session at another flat vector. */
void ad_session_rebind(ad_session *s, float *params);
/* The flat vector's values changed (LoadParameters, Step, ...): weights an
 * inference forward packed for oneDNN are packed again on its next run.
 * Every writer of the parameters between forwards calls it (a training
 * forward and a rebind count as changes by themselves). */
void ad_session_params_changed(ad_session *s);

/* Forward of one batch x (f32 [rows, ...]; reshaped to the declared input
 * shape when the element counts agree). training keeps what backward needs
 * and updates the buffers in params. *out: a new reference to graph output
 * 0. Messages name the failing node. */
int ad_forward(ad_session *s, const bb_value *x, bool training, bb_value **out, bb_error *err);
/* Backward through the last training forward: dout is dLoss/dOutput (f32,
 * the output's shape); gflat (n_floats) receives the gradient of every
 * parameter (buffers and frozen parameters: 0), or has it added when
 * accumulate. Releases the forward's saved values. */
int ad_backward(ad_session *s, const bb_value *dout, float *gflat, bool accumulate,
                bb_error *err);
/* Drop the forward's values (no backward will follow). */
void ad_session_clear(ad_session *s);
/* Rows of the last forward (0 when there is none to go back through). */
size_t ad_session_rows(const ad_session *s);

/* ---- what a gradient rule sees (rules.c, grad_*.c) --------------------------------- */

typedef struct ad_ctx {
    ad_session *s;
    const ad_node *n;
    bb_error *err;
} ad_ctx;

/* A forward rule runs the node: out[0..n_out) get new references (NULL for
 * outputs the node does not produce). A backward rule reads the node's
 * inputs, outputs and output gradients and hands each input that wants one
 * its gradient (ad_give). */
typedef int (*ad_fwd_fn)(ad_ctx *c, bb_value *const *in, bb_value **out);
typedef int (*ad_bwd_fn)(ad_ctx *c);

struct ad_rule {
    const char *op_type;
    int cpu_op;             /* the CPU kernel that runs it (-1: fwd only) */
    ad_fwd_fn fwd_train;    /* training forward when it differs, or NULL */
    ad_fwd_fn fwd_infer;    /* inference forward when it differs, or NULL */
    ad_bwd_fn bwd;          /* NULL: no gradient */
    uint32_t nondiff;       /* bit i: input i takes no gradient (shapes, indices, stats) */
};

const ad_rule *ad_rule_find(const char *op_type);
/* Per-node preparation a rule needs once (aux nodes); the last step of
 * ad_plan_build. */
int ad_rules_prepare(ad_plan *p, const char *who, bb_error *err);

/* Forward values of the node being differentiated (borrowed; NULL when
 * omitted), the gradient of output i (NULL: zero), whether input i wants a
 * gradient. */
const bb_value *ad_in(const ad_ctx *c, uint32_t i);
const bb_value *ad_out(const ad_ctx *c, uint32_t i);
const bb_value *ad_dout(const ad_ctx *c, uint32_t i);
bool ad_wants(const ad_ctx *c, uint32_t i);
/* Input i is a parameter or buffer of the flat vector (writable in place). */
bool ad_in_is_param(const ad_ctx *c, uint32_t i);
/* Values a training forward saved for backward (slot k < AD_MAX_SAVED). */
void ad_save(ad_ctx *c, uint32_t k, bb_value *v); /* takes v */
const bb_value *ad_saved(const ad_ctx *c, uint32_t k);
/* Add g (takes the reference) to input i's gradient. g must have the
 * input's shape and be f32. */
int ad_give(ad_ctx *c, uint32_t i, bb_value *g);
/* New f32 tensors from the session's pool: zeroed, zeroed in like's shape,
 * and in like's shape for a rule that writes every element. */
int ad_new(ad_ctx *c, uint32_t ndim, const int64_t *dims, bb_value **out);
int ad_new_like(ad_ctx *c, const bb_value *like, bb_value **out);
int ad_new_uninit(ad_ctx *c, const bb_value *like, bb_value **out);
/* A view of v with another shape of equal numel (new reference). */
int ad_view(ad_ctx *c, const bb_value *v, uint32_t ndim, const int64_t *dims, bb_value **out);
/* Run a CPU kernel with node's attributes (node NULL: defaults). */
int ad_kernel(ad_ctx *c, cpu_op op, const bb_node *node, bb_value *const *in, uint32_t n_in,
              bb_value **out, uint32_t n_out);
/* A cpu_run for calling cpu:: helpers directly (scratch, errors); when
 * one fails, ad_cpu_error(c, rc) restates its message as this node's. */
cpu_run ad_cpu_run(ad_ctx *c, cpu_op op);
int ad_cpu_error(ad_ctx *c, int rc);
/* Inference forward of the node (Conv or Gemm) through a oneDNN primitive
 * (plugins/cpu/dnn.c) where oneDNN has a fast kernel for it, else its CPU
 * kernel: weights packed once per parameter version (when inputs 1 and 2
 * are parameters or constants; else on every run), 3x3 convolutions by
 * Winograd where they fit. (Training forwards keep the CPU kernels: the
 * weights change every step, and the convolutions are a small part of a
 * step; docs/DECISIONS.md.) */
int ad_fwd_dnn(ad_ctx *c, bb_value *const *in, bb_value **out);
/* Uniform draw in [0, 1) from the session's generator (Dropout). */
double ad_uniform(ad_ctx *c);
int ad_fail(ad_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Refuse a dtype other than f32 for input i. */
int ad_need_f32(ad_ctx *c, const bb_value *v, const char *what);

/* Sum g (shape of the broadcast result) down to shape dims (ONNX
 * multidirectional broadcasting in reverse), into a new tensor. */
int ad_unbroadcast(ad_ctx *c, const bb_value *g, uint32_t ndim, const int64_t *dims,
                   bb_value **out);

#endif
