/*
 * cpu_internal.h — shared internals of the cpu::CpuBackend plugin.
 *
 * One op table (CPU_OPS) drives everything: the op enum, the kernel
 * prototypes, the declared opset (cpu_backend.c) and the graph executor
 * (graph.c). A kernel is a pure function of its inputs and the node's
 * attributes; it writes new references into out[] and, on failure, fills
 * r->err through cpu_fail (the caller releases any outputs already
 * written). Kernels run on the engine thread; the instance scratch buffer
 * is theirs for the duration of one call.
 */
#ifndef BB_CPU_INTERNAL_H
#define BB_CPU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bb/plugin.h>

#define CPU_NAME "cpu::CpuBackend"

/* The ai.onnx ops this backend declares (the 51 of bb/opsets.h's ai.onnx
 * catalog), in op_index order. */
#define CPU_OPS(X)                                                                       \
    X(Add) X(Sub) X(Mul) X(Div) X(Neg) X(Abs) X(Sqrt) X(Exp) X(Log) X(Pow)               \
    X(MatMul) X(Gemm) X(Dot)                                                             \
    X(Relu) X(Sigmoid) X(Tanh) X(Softmax) X(LeakyRelu) X(Gelu)                           \
    X(Reshape) X(Transpose) X(Concat) X(Split) X(Slice) X(Squeeze) X(Unsqueeze)          \
    X(Identity) X(Cast)                                                                  \
    X(ReduceSum) X(ReduceMean) X(ReduceMax) X(ReduceMin)                                 \
    X(Equal) X(Greater) X(Less)                                                          \
    X(BatchNormalization) X(LayerNormalization)                                          \
    X(Conv) X(MaxPool) X(AveragePool) X(GlobalAveragePool)                               \
    X(Zeros) X(Ones) X(Constant)                                                         \
    X(Gather) X(Scatter)                                                                 \
    X(If) X(Loop)                                                                        \
    X(Where) X(ArgMax) X(Flatten)

typedef enum cpu_op {
#define CPU__ENUM(n) CPU_OP_##n,
    CPU_OPS(CPU__ENUM)
#undef CPU__ENUM
    CPU_N_OPS
} cpu_op;

typedef struct cpu_backend cpu_backend;
typedef struct cpu_plan cpu_plan;
typedef struct cpu_frame cpu_frame;
typedef struct cpu_plan_node cpu_plan_node;
typedef struct cpu_plan_cache cpu_plan_cache;
typedef struct cpu_dnn_ctx cpu_dnn_ctx;

/* Values a subgraph can read from enclosing scopes: a running plan's slots
 * (plan set, vals indexed by slot), or, with plan NULL, the n_names values
 * named names[] that a per-op If/Loop was given as captured outer scope
 * (node metadata BB_META_OUTER_SCOPE_PREFIX "<k>"). */
struct cpu_frame {
    const cpu_plan *plan;
    bb_value *const *vals;
    const cpu_frame *parent;
    const char *const *names;
    uint32_t n_names;
};

/* One kernel invocation. */
typedef struct cpu_run {
    cpu_backend *be;
    const bb_node *node;        /* attributes; may be NULL (all defaults) */
    cpu_op op;
    const cpu_frame *scope;     /* enclosing graph frame (If/Loop outer names), or NULL */
    const cpu_plan_node *pn;    /* the plan node when run by the graph executor */
    bb_error *err;
} cpu_run;

typedef int (*cpu_kernel)(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                          uint32_t n_out);

#define CPU__PROTO(n) \
    int cpu_k_##n(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out, uint32_t n_out);
CPU_OPS(CPU__PROTO)
#undef CPU__PROTO

/* ---- recycled result memory (tensor_pool.c) ------------------------------- */
typedef struct cpu_tensor_pool cpu_tensor_pool;
/* New pool keeping at most max_bytes idle; NULL on OOM. */
cpu_tensor_pool *cpu_tensor_pool_new(size_t max_bytes);
/* The owner lets go; the pool goes when its last block has come back. */
void cpu_tensor_pool_release(cpu_tensor_pool *p);
/* A tensor (new reference) over a pooled block of nbytes (the shape's
 * bytes), zeroed when zero; NULL on OOM. */
bb_value *cpu_tensor_pool_value(cpu_tensor_pool *p, int32_t dtype, uint32_t ndim,
                                const int64_t *dims, size_t nbytes, bool zero);

/* ---- the instance (cpu_backend.c) ------------------------------------------- */
struct cpu_backend {
    int threads;             /* GEMM threads requested by the config */
    void *scratch;           /* grow-only, 64-byte aligned */
    size_t scratch_cap;
    cpu_plan_cache *plans;   /* graph executor plans, per bb_graph pointer */
    cpu_tensor_pool *pool;   /* results' memory, or NULL (malloc) */
    cpu_dnn_ctx *dnn;        /* oneDNN's engine and stream, made on first use, or NULL */
    bool winograd;           /* inference plans may run 3x3 convolutions by Winograd */
};

/* Grow-only scratch owned by the instance (im2col columns and the like).
 * NULL + error on OOM. */
void *cpu_scratch(cpu_run *r, size_t bytes);

/* The declared op table (cpu_backend.c). */
extern const bb_op_decl cpu_op_decls[CPU_N_OPS];
extern const cpu_kernel cpu_kernels[CPU_N_OPS];
/* Op by name (NULL domain = ai.onnx); -1 when unknown. */
int cpu_op_lookup(const char *op_type);
/* Check inputs/outputs against the declared ports (arity, presence,
 * tensor kind, fixed leaf dtypes), then run the kernel. On failure the
 * outputs written so far are released and set to NULL. */
int cpu_run_kernel(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                   uint32_t n_out);

/* ---- graph executor (graph.c) --------------------------------------------- */
/* Plan for g (cached per graph pointer on the instance); *owned set when
 * the caller must free it with cpu_plan_release (cache full). */
int cpu_plan_get(cpu_backend *be, const bb_graph *g, cpu_plan **out, bool *owned,
                 bb_error *err);
void cpu_plan_release(cpu_plan *p, bool owned);
void cpu_plan_free(cpu_plan *p);
/* Run a plan with positional inputs (graph->inputs order; NULL entries
 * fall back to initializers). parent: enclosing frame for outer-scope
 * names (NULL at top level). outputs[] get new references. */
int cpu_plan_run(cpu_backend *be, const cpu_plan *p, const cpu_frame *parent,
                 bb_value *const *inputs, uint32_t n_in, bb_value **outputs, uint32_t n_out,
                 bb_error *err);
uint32_t cpu_plan_n_inputs(const cpu_plan *p);
uint32_t cpu_plan_n_outputs(const cpu_plan *p);
/* Declared elem_type / dims of the plan graph's output i (for empty Loop
 * scan outputs); false when unknown. */
bool cpu_plan_output_type(const cpu_plan *p, uint32_t i, int32_t *dtype, uint32_t *ndim,
                          int64_t *dims);
/* Child plan i of a plan node (If: 0 then, 1 else; Loop: 0 body), or NULL. */
cpu_plan *cpu_plan_node_child(const cpu_plan_node *pn, uint32_t i);
int cpu_execute_graph(void *inst, const bb_graph *graph, const char *const *input_names,
                      bb_value *const *inputs, uint32_t n_inputs, bb_value **outputs,
                      uint32_t n_outputs, bb_error *err);
/* Plans cached per graph pointer (owned by the instance). */
cpu_plan_cache *cpu_plan_cache_new(size_t max_plans);
void cpu_plan_cache_free(cpu_plan_cache *c);

/* Value name -> slot, open addressing over borrowed names; cap is a power
 * of two, at least twice the entries (keys / vals: cap entries, zeroed). */
typedef struct cpu_name_map {
    const char **keys;
    int32_t *vals;
    size_t cap;
} cpu_name_map;
int32_t cpu_name_map_get(const cpu_name_map *m, const char *k); /* -1 when absent */
void cpu_name_map_put(cpu_name_map *m, const char *k, int32_t v);

/* ---- errors, dtypes, attributes (util.c) ----------------------------------- */
int cpu_fail(cpu_run *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "dtype <name> not supported". */
int cpu_fail_dtype(cpu_run *r, int32_t dtype);
const char *cpu_op_name(cpu_op op);
const char *cpu_dtype_name(int32_t dtype);
bool cpu_dtype_is_float(int32_t dt);

const bb_attr *cpu_attr(const bb_node *n, const char *name);
int64_t cpu_attr_i(const bb_node *n, const char *name, int64_t dflt);
float cpu_attr_f(const bb_node *n, const char *name, float dflt);
/* STRING attribute equal to s (exact bytes)? */
bool cpu_attr_s_is(const bb_node *n, const char *name, const char *s);
/* STRING attribute bytes (not NUL-terminated); NULL when absent. */
const uint8_t *cpu_attr_s(const bb_node *n, const char *name, size_t *len);
/* INTS attribute: true when present (possibly empty). */
bool cpu_attr_ints(const bb_node *n, const char *name, const int64_t **v, size_t *count);

/* ---- tensors (util.c) ---------------------------------------------------- */
static inline const bb_tensor_view *cpu_tv(const bb_value *v)
{
    return &v->u.tensor;
}
/* New zeroed tensor (from the instance's pool when it has one); BB_ENOMEM
 * (with message) on failure. */
int cpu_alloc(cpu_run *r, int32_t dtype, uint32_t ndim, const int64_t *dims, bb_value **out);
/* The same, not zeroed: for kernels that write every element. */
int cpu_alloc_uninit(cpu_run *r, int32_t dtype, uint32_t ndim, const int64_t *dims,
                     bb_value **out);
/* New value sharing src's bytes under another shape of equal numel. */
int cpu_view(cpu_run *r, const bb_value *src, uint32_t ndim, const int64_t *dims,
             bb_value **out);
/* Integer vector from an int32/int64 tensor of rank <= 1 into v[cap]. */
int cpu_read_ints(cpu_run *r, const bb_value *t, const char *what, int64_t *v, size_t cap,
                  size_t *n);
/* Normalize a possibly negative axis against rank. */
int cpu_axis(cpu_run *r, int64_t axis, uint32_t rank, const char *what, uint32_t *out);
/* "[2,3,4]" into buf. */
const char *cpu_shape_str(uint32_t ndim, const int64_t *dims, char *buf, size_t cap);
/* Element count (shape already validated by the value model). */
size_t cpu_numel(uint32_t ndim, const int64_t *dims);
/* TensorProto -> new value (copies raw_data). */
int cpu_tensor_from_proto(cpu_run *r, const bb_tensor_proto *tp, bb_value **out);
/* Value of a tensor element as double / int64 (for scalars: cond, M). */
double cpu_elem_f64(const bb_tensor_view *t, size_t i);
int64_t cpu_elem_i64(const bb_tensor_view *t, size_t i);
/* Convert n elements between numeric dtypes (float<->int saturates, NaN -> 0;
 * to bool is != 0). Both dtypes must pass cpu_cast_supported. */
bool cpu_cast_supported(int32_t dt);
void cpu_cast_buf(void *dst, int32_t ddt, const void *src, int32_t sdt, size_t n);

/* y = max(x, 0) (activation.c; x may be y: the fused Conv's epilogue). */
void cpu_relu_f32(const float *x, float *y, size_t n);

/* ---- BLAS and window geometry (matmul.c, conv.c) ---------------------------- */
/* C[M,N] = alpha * op(A) op(B) + beta * C for float/double (CBLAS; gemv for
 * one row or column), exact wrapping product for int32/int64/uint32/uint64
 * (alpha/beta ignored, C overwritten). A is [M,K] ([K,M] when ta), B is
 * [K,N] ([N,K] when tb), row-major and contiguous. */
void cpu_gemm(int32_t dt, bool ta, bool tb, size_t M, size_t K, size_t N, float alpha,
              const void *A, const void *B, float beta, void *C);
/* The f32 GEMM behind cpu_gemm (oneDNN), same operands; M, N > 1, K > 0. */
void cpu_sgemm(bool ta, bool tb, size_t M, size_t K, size_t N, float alpha, const float *A,
               const float *B, float beta, float *C);
/* Threads of the GEMMs (OpenBLAS and oneDNN): process-wide, default 1. */
void cpu_gemm_set_threads(int n);
/* Apply that count to the calling thread's OpenMP (oneDNN's threads). */
void cpu_gemm_threads_apply(void);

#define CPU_MAX_SPATIAL (BB_MAX_DIMS - 2)
/* Sliding-window geometry of Conv and the pools over X [N, C, spatial...]. */
typedef struct cpu_geom {
    uint32_t ns;                    /* spatial dims */
    int64_t in[CPU_MAX_SPATIAL];    /* input extent */
    int64_t k[CPU_MAX_SPATIAL];     /* kernel */
    int64_t s[CPU_MAX_SPATIAL];     /* strides */
    int64_t d[CPU_MAX_SPATIAL];     /* dilations */
    int64_t pb[CPU_MAX_SPATIAL];    /* pad at the beginning */
    int64_t pe[CPU_MAX_SPATIAL];    /* pad at the end */
    int64_t out[CPU_MAX_SPATIAL];   /* output extent */
} cpu_geom;
/* Reads auto_pad, pads, strides, dilations (and ceil_mode when allowed)
 * from the node; kernel has ns entries. */
int cpu_geom_init(cpu_run *r, const bb_tensor_view *x, const int64_t *kernel, bool allow_ceil,
                  cpu_geom *g);
/* col [C * K, O] of one image's C channels at x (K kernel elements, O
 * output positions; padding reads as 0), and its adjoint: x += what
 * im2col would have read into col. */
void cpu_im2col_f32(const cpu_geom *g, const float *x, size_t C, float *col);
void cpu_col2im_add_f32(const cpu_geom *g, const float *col, size_t C, float *x);
/* In-bounds offsets (row-major within a plane) of the pooling window at
 * output position oc; *padded counts positions inside the padded extent. */
size_t cpu_pool_window(const cpu_geom *g, const int64_t *oc, size_t *offs, size_t *padded);
/* Slice's geometry from its inputs (starts, ends, axes, steps): per axis
 * the first index, the step and the output extent. */
int cpu_slice_geom(cpu_run *r, bb_value *const *in, uint32_t n_in, int64_t *start,
                   int64_t *step, int64_t *out_dims);
/* Where that slice's elements sit in t: returns the first one's offset;
 * sst[d] is the element stride of output axis d. */
ptrdiff_t cpu_slice_strides(const bb_tensor_view *t, const int64_t *start, const int64_t *step,
                            const int64_t *out_dims, ptrdiff_t *sst);

/* ---- oneDNN layers with packed weights (dnn.c) ------------------------------- */
#define CPU_DNN_MAX_LAYERS 8

typedef enum cpu_dnn_kind {
    CPU_DNN_CONV,     /* Conv over [N, C, H, W]: weights [M, C/group, kh, kw], bias [M] */
    CPU_DNN_MAXPOOL,  /* MaxPool / AveragePool over [N, C, H, W] */
    CPU_DNN_AVGPOOL,
    CPU_DNN_LINEAR    /* Gemm [rows, K] x B (transB as the node says) + C [N] */
} cpu_dnn_kind;

typedef struct cpu_dnn_layer {
    cpu_dnn_kind kind;
    const bb_node *node;  /* its attributes (borrowed; outlives the chain) */
    bool relu;            /* a Relu in its epilogue */
} cpu_dnn_layer;

typedef struct cpu_dnn_chain cpu_dnn_chain;

/* The instance's oneDNN engine and stream (made on first use; NULL when
 * oneDNN cannot make one). cpu_dnn_ctx_release drops the instance's
 * reference (chains hold their own). */
cpu_dnn_ctx *cpu_dnn_ctx_get(cpu_backend *be);
void cpu_dnn_ctx_release(cpu_dnn_ctx *c);
/* Whether node (op) can be a chain's layer, from its attributes alone
 * (Gemm: transA 0, alpha and beta 1; pools: 2-D, no ceil_mode or
 * dilations, an average without pads; one output). */
bool cpu_dnn_layer_ok(cpu_op op, const bb_node *node);
/* A chain of n layers (each reads the one before); winograd: 3x3 stride-1
 * convolutions may run by Winograd (inference: equal up to rounding, ~2e-6
 * on unit-scale data). NULL on OOM or a bad n. */
cpu_dnn_chain *cpu_dnn_chain_new(const cpu_dnn_layer *layers, uint32_t n, bool winograd);
void cpu_dnn_chain_free(cpu_dnn_chain *c);
/* *y (new, plain row-major) = the first *ran layers of the chain over x,
 * with w[i] / b[i] the weights and bias of layer i (NULL for pools; a bias
 * may be NULL): every layer, or those before the first that oneDNN has no
 * fast kernel for at this shape (the caller runs the rest). Weights packed
 * by an earlier run at the same shape are reused while version is the same
 * non-zero value and w[i] the same buffers (0: pack on every run).
 * BB_EUNSUPPORTED with nothing set when oneDNN cannot run even the first
 * layer (the caller runs its own kernels); BB_ENOMEM with r->err set. */
int cpu_dnn_chain_run(cpu_run *r, cpu_dnn_chain *c, const bb_value *x, const bb_value *const *w,
                      const bb_value *const *b, uint64_t version, uint32_t *ran, bb_value **y);

/* ---- multidirectional broadcasting (broadcast.c) --------------------------- */
#define CPU_BC_MAX 3
typedef struct cpu_bcast {
    uint32_t k;                          /* operands */
    uint32_t nd;                         /* collapsed rank, >= 1 */
    int64_t dims[BB_MAX_DIMS];           /* collapsed output dims */
    size_t st[CPU_BC_MAX][BB_MAX_DIMS];  /* element strides per operand (0: broadcast) */
    uint32_t out_nd;                     /* full output shape */
    int64_t out_dims[BB_MAX_DIMS];
    size_t numel;
} cpu_bcast;

/* Output shape of k tensors under ONNX multidirectional broadcasting. */
int cpu_bcast_init(cpu_run *r, cpu_bcast *bc, uint32_t k, const bb_value *const *ops);
/* Calls fn once per contiguous run: off[0] output offset, off[1..k]
 * operand offsets (elements); inner[j] is operand j's stride in the run
 * (0 or 1); n elements. */
typedef void (*cpu_bcast_fn)(void *ctx, const size_t *off, const size_t *inner, size_t n);
void cpu_bcast_each(const cpu_bcast *bc, cpu_bcast_fn fn, void *ctx);
/* Unidirectional: copy src broadcast to dims (elements of esize bytes). */
int cpu_bcast_to(cpu_run *r, const bb_value *src, uint32_t ndim, const int64_t *dims,
                 void *dst, const char *what);

#endif
