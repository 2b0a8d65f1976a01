/*
 * recorder.h — the C authoring surface: record Modules into a ModelProto.
 *
 * This plays the role of the Rust DSL's `Module::build()` (IR_AND_DSL.md
 * Parts 2, 3, 6, 7, 9 and "Update — M-phase additions"). A program creates
 * a recorder, declares modules and their component slots, records each
 * module's body (and optional bootstrap) by calling one C function per op,
 * then builds: the result is a recorded bb_model that `bbc compile` reads.
 *
 *   bb_recorder *r = bb_recorder_new("user.app");
 *   bb_module *m = bb_rec_module(r, "SplitLearning");
 *   bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Mlp", "{}", NULL);
 *   bb_rec *g = bb_module_body(m);
 *   bb_val x = bb_rec_input(g, "x", &BB_TYPE_TENSOR_F32);
 *   bb_rec_output(g, "y", bb_role_model_forward(g, model, x));
 *   bb_model *out;  bb_error err;
 *   if (bb_recorder_build(r, m, &out, &err) != BB_OK) ... err.msg names the op
 *   bb_recorder_free(r);
 *
 * Recording never aborts. A mistake (NULL or foreign input, unknown op, a
 * compiler-inserted op, a slot of the wrong role or of another module, an
 * empty bundle, a bad arity or missing required attribute per the catalog
 * of bb/opsets.h, an unbound call port, a call cycle, ...) is kept on the
 * recorder as its FIRST error — code BB_ERECORD, message "<function>:
 * <domain>::<op>: <what>" — the failing call returns BB_VAL_NONE / a
 * non-zero status, later calls do nothing, and bb_recorder_build returns
 * that error instead of a model.
 *
 * ---------------------------------------------------------------------------
 * What the recorded ModelProto looks like (the contract bbc relies on)
 * ---------------------------------------------------------------------------
 * Keys are the constants of bb/meta.h; literal spellings are given here.
 *
 * Model.   ir_version BB_FRAMEWORK_IR_VERSION, producer "bytesandbrains",
 *   model_version 1, domain = the recorder's domain. model.graph (named
 *   after the root) holds ONE node calling the root module, stamped
 *   module_instance "<Root>#0"; the graph's inputs/outputs are the root's
 *   g.input formals / g.output ports (with their value_info). Every module
 *   must be reachable from the root by calls (an unreachable module is a
 *   recording error). model.opset_import and every function.opset_import
 *   list exactly the domains their nodes use (ai.onnx at
 *   BB_ONNX_OPSET_VERSION — the catalogs' signatures — every other domain
 *   at 1, including the user domain of module-call nodes and a concrete's
 *   atomic domain), ai.onnx first, then sorted by name.
 *
 * Modules.   One FunctionProto per module, identity (domain, name),
 *   overload empty. function.input = the g.input formals in call order,
 *   followed in call order by the lookup_output formals (see below);
 *   function.output = the g.output ports in call order. Every value has a
 *   value_info entry whose TypeProto comes from bb_type_to_proto (so its
 *   denotation is stamped). Role-op ports carry the polymorphic
 *   BB_TYPE_TENSOR placeholder; values of unknown type (e.g. an untyped
 *   input) carry BB_TYPE_ANY (a TypeProto with only a denotation).
 *   Value names: fresh sites "site_1", "site_2", ... per function in
 *   recording order (one per node output); formals keep their names; a
 *   value passed to bb_rec_output is renamed to the port name (when it is
 *   already a formal or another port, a syscall PassThrough is recorded to
 *   carry the port instead). Unbundle outputs are "site_<k>_child_<i>".
 *
 * Slots (IR_AND_DSL.md Part 3).
 *   generic:  function.attribute += "<slot>"
 *             function.metadata "ai.bytesandbrains.slot_id.<slot>" = id
 *   concrete: function.attribute_proto += {name "<slot>", type STRING,
 *             s = JSON construction state, t = optional weights TensorProto,
 *             g = optional graph (bb_slot_set_graph)}
 *             function.metadata "ai.bytesandbrains.concrete_type.<slot>" =
 *             TYPE_NAME  (AttributeProto has no metadata_props)
 *   both:     function.metadata "ai.bytesandbrains.slot_role.<slot>" = role
 *             name ("Model", "Aggregator", ... bb_role_name).
 *   Nodes recorded on a slot carry  "ai.bytesandbrains.slot" = "<slot>"  and
 *     generic:  "ai.bytesandbrains.required_trait" = role name,
 *               "ai.bytesandbrains.slot_id" = decimal id (model-wide, from
 *               0, in slot-declaration order)
 *     concrete: "ai.bytesandbrains.concrete_type" = TYPE_NAME,
 *               "ai.bytesandbrains.instance" = decimal id (per TYPE_NAME,
 *               model-wide, from 0, in slot-declaration order)
 *   A concrete given an atomic domain (bb_slot_set_atomic_domain) records
 *   its role ops under that domain with "ai.bytesandbrains.original_op" =
 *   "<role domain>::<OpType>" (Part 5c.1); otherwise role ops record under
 *   the role domain (Part 9) and carry no original_op.
 *
 * Bootstrap.   bb_module_bootstrap(m) records the sibling FunctionProto
 *   "<module>__bootstrap" (same domain), metadata
 *   "ai.bytesandbrains.module_phase" = "bootstrap"; its function.input is
 *   the bootstrap recording's g.input formals in call order. Slots are
 *   declared on the body function only; bootstrap nodes name them through
 *   the same per-node keys.
 *
 * Sub-module calls.   A node whose (domain, op_type) = the child function's
 *   (domain, name); inputs/outputs positionally match the child's
 *   function.input/output (bound by name with bb_call_input /
 *   bb_call_output, resolved at build). A child lookup_output formal is
 *   passed as "" (omitted): the compiler wires it from the network. The
 *   call node carries "ai.bytesandbrains.module_instance" =
 *   "[<scope chain>_]<Child>#<k>" (k counts calls of that child, from 0).
 *   Each module is one entry of model.functions however often it is called;
 *   a call cycle is a recording error.
 *
 * with_module scopes.   Nodes recorded between bb_rec_scope_begin(g, "a")
 *   and its end carry "ai.bytesandbrains.module_instance" = "a"; nested
 *   scopes join with '_' ("a_b"). Nodes outside any scope carry none.
 *
 * Peer classes (DESIGN.md "Peer classes and partitions").
 *   - A class module (bb_rec_class_module) is a module whose name is a peer
 *     class; its functions (body and bootstrap) carry metadata
 *     "ai.bytesandbrains.home_class" = "<class>" (BB_META_HOME_CLASS).
 *   - home_class: every node recorded in a class module's body or bootstrap
 *     gets "ai.bytesandbrains.home_class" = "<class>". A call node calling a
 *     class module gets the CALLEE's class. Nodes of a non-class module
 *     whose every (transitive) caller sits in one class get that class at
 *     build; otherwise they carry no home_class and infer_peer_classes
 *     decides. The top-level graph node gets the root's class when the
 *     root is a class module.
 *   - of_class: bb_role_peer_selector_sample / _current_view given a class
 *     (and bb_rec_of_class, for a selector op of the selector's own domain)
 *     stamp the node "ai.bytesandbrains.peer_class" = "<class>"
 *     (BB_META_PEER_CLASS) and tag the output value; the syscalls
 *     PassThrough, Gate, Tee (and Any, when all inputs agree) propagate
 *     the tag. NULL of_class stamps nothing: the peers are of the sampling
 *     node's own class (SELF_CLASS "@self").
 *
 * Network ports (the compiler's synthesize_wire_recvs reads these).
 *   net_out(port, peers, value) records
 *     wire.Send { inputs [value, peers] } with node metadata
 *       "ai.bytesandbrains.port" = "<port>",
 *       "ai.bytesandbrains.dest_class" = of_class of peers (absent if the
 *                                        peers carry no class tag),
 *       "ai.bytesandbrains.wire_correlation" = "none"
 *     and function metadata "ai.bytesandbrains.net_out.<port>" = dest class
 *     ("" when untagged). A port may be sent from only once per function.
 *   lookup_output(port, type) appends a formal named "<port>" to
 *     function.input (after the g.input formals), with a value_info of the
 *     given type (ANY when NULL), and function metadata
 *     "ai.bytesandbrains.net_in.<port>" = "<port>" (the formal's name). The
 *     compiler materializes a wire.Recv producing that value in the consumer
 *     partition, matched against the net_out of the same port whose
 *     dest_class is this function's class. Looking the same port up twice
 *     returns the same value.
 *   User-authored wire ops (bb_wire_*) take an optional port: when given
 *   the node carries "ai.bytesandbrains.port"; Send-flavoured ops whose
 *   dest carries a class tag get "ai.bytesandbrains.dest_class". Every wire
 *   node carries "ai.bytesandbrains.wire_correlation" ("none" for
 *   Send/Recv, "request" for SendReqBatched/RecvReq, "response" for
 *   SendResp/RecvRespBatched). A request port pairs SendReqBatched(port P,
 *   dest_class C) with the RecvReq(port P) homed in class C; SendResp pairs
 *   through the req_id it consumes; RecvRespBatched through its req_id.
 *
 * Composites.   bb_rec_bundle records ai.bytesandbrains.composite::Bundle
 *   (inputs = the parts, one Composite output); bb_rec_unbundle records
 *   ::Unbundle (one input, N typed outputs). Both carry INT attribute
 *   "ai.bytesandbrains.composite.child_count" and STRING attribute
 *   "ai.bytesandbrains.composite.child_types" (comma-joined denotations).
 *
 * Ownership.   The recorder owns every module, slot, call and value
 * handle; they die with bb_recorder_free. bb_recorder_build hands the model
 * to the caller (free it with bb_model_free); afterwards the recorder only
 * accepts bb_recorder_free. Strings passed in are copied. Not thread-safe.
 */
#ifndef BB_RECORDER_H
#define BB_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/ir.h"
#include "bb/meta.h"
#include "bb/opsets.h"
#include "bb/plugin.h"
#include "bb/status.h"
#include "bb/types.h"

/* The keys the recorder adds to the spec's (one spelling: bb/meta.h). */
#define BB_REC_META_PORT BB_META_PORT
#define BB_REC_META_NET_OUT_PREFIX BB_META_NET_OUT_PREFIX
#define BB_REC_META_NET_IN_PREFIX BB_META_NET_IN_PREFIX
#define BB_REC_META_SLOT_ROLE_PREFIX BB_META_SLOT_ROLE_PREFIX
#define BB_REC_META_SLOT_ID_PREFIX BB_META_SLOT_ID_PREFIX

#define BB_RECORDER_PRODUCER "bytesandbrains"
#define BB_RECORDER_PRODUCER_VERSION "0.9.0"
/* ai.onnx version the recorder imports: the catalog's (bb/opsets.h). */
#define BB_RECORDER_ONNX_VERSION BB_ONNX_OPSET_VERSION

typedef struct bb_recorder bb_recorder;
typedef struct bb_module bb_module;
typedef struct bb_rec bb_rec;   /* one recording: a module's body or bootstrap ("g") */
typedef struct bb_slot bb_slot; /* a component slot of a module */
typedef struct bb_call bb_call; /* a sub-module call being recorded */

/* A recorded value: a small handle, passed by value. `name` is the value's
 * name when it was made (bb_rec_output may rename it later; the recorder
 * always resolves the current name through `id`). g == NULL marks an
 * invalid value (what a failed call returns). */
typedef struct bb_val {
    const char *name;
    const bb_type_node *type;
    bb_rec *g;
    uint32_t id;
} bb_val;

#define BB_VAL_NONE ((bb_val){NULL, NULL, NULL, 0})
static inline bool bb_val_ok(bb_val v)
{
    return v.g != NULL;
}

/* ---- recorder ------------------------------------------------------------- */

/* domain: the user domain of every module ("user.app" when NULL).
 * Returns new, or NULL on out-of-memory. */
bb_recorder *bb_recorder_new(const char *domain);
void bb_recorder_free(bb_recorder *r);
/* The first recording error (BB_OK when none); copies it into err. */
int bb_recorder_error(const bb_recorder *r, bb_error *err);
/* Finish: checks calls and scopes, stamps derived metadata, builds the
 * top-level graph calling root. *out is new (caller frees with
 * bb_model_free); on error *out is NULL and err holds the first error.
 * Only one build per recorder. */
int bb_recorder_build(bb_recorder *r, bb_module *root, bb_model **out, bb_error *err);
/* Build and save to path (bb_model_save_file). */
int bb_recorder_write(bb_recorder *r, bb_module *root, const char *path, bb_error *err);

/* ---- modules -------------------------------------------------------------- */

/* A module in the recorder's domain (bb_rec_module_in: another domain).
 * A second module with the same (domain, name) is an error (NULL). */
bb_module *bb_rec_module(bb_recorder *r, const char *name);
bb_module *bb_rec_module_in(bb_recorder *r, const char *domain, const char *name);
/* A peer-class module: its name is the class (DESIGN.md). */
bb_module *bb_rec_class_module(bb_recorder *r, const char *class_name);
const char *bb_module_name(const bb_module *m);
/* The class of a class module, else NULL. */
const char *bb_module_class(const bb_module *m);
/* The body recording / the bootstrap recording (created on first use). */
bb_rec *bb_module_body(bb_module *m);
bb_rec *bb_module_bootstrap(bb_module *m);
/* The module a recording belongs to. */
bb_module *bb_rec_module_of(const bb_rec *g);
bb_recorder *bb_rec_recorder(const bb_rec *g);

/* ---- component slots (IR_AND_DSL.md Part 3) ------------------------------------ */

/* A generic placeholder: to be bound at compile time (function.attribute). */
bb_slot *bb_rec_generic(bb_module *m, bb_role role, const char *slot_name);
/* A concrete component with default construction state (attribute_proto):
 * json_config is JSON text ("{}" when NULL; must parse), weights is
 * optional (deep-copied into .t). */
bb_slot *bb_rec_concrete(bb_module *m, bb_role role, const char *slot_name,
                         const char *type_name, const char *json_config,
                         const bb_tensor_proto *weights);
/* Record this concrete's role ops under its own atomic opset domain
 * (stamps original_op). */
int bb_slot_set_atomic_domain(bb_slot *s, const char *domain);
/* Put graph (deep-copied) into this concrete's construction state, as
 * AttributeProto.g next to its JSON: a model that trains an ONNX graph
 * (nn::Onnx) travels inside the program that binds it. */
int bb_slot_set_graph(bb_slot *s, const bb_graph *graph);
const char *bb_slot_name(const bb_slot *s);
bb_role bb_slot_role(const bb_slot *s);

/* ---- ports, scopes -------------------------------------------------------------- */

/* A local input formal (type NULL = ANY). The same name twice returns the
 * same value. */
bb_val bb_rec_input(bb_rec *g, const char *name, const bb_type_node *type);
/* A local output port carrying v. */
int bb_rec_output(bb_rec *g, const char *name, bb_val v);
/* A network output: records wire.Send [value, peers] (see the header). */
int bb_rec_net_out(bb_rec *g, const char *port, bb_val peers, bb_val value);
/* A value wired in by the compiler from the net_out of `port` in another
 * class (see the header). type NULL = ANY. */
bb_val bb_rec_lookup_output(bb_rec *g, const char *port, const bb_type_node *type);

/* with_module: stamp module_instance on the nodes recorded in between. */
int bb_rec_scope_begin(bb_rec *g, const char *name);
int bb_rec_scope_end(bb_rec *g);

/* ---- sub-module calls ----------------------------------------------------------- */

/* Begin a call of child from g; bind inputs by name, then bb_call_build
 * appends the call node; outputs are fetched by name (before or after
 * build). Names are checked against the child's ports at recorder build. */
bb_call *bb_rec_call(bb_rec *g, bb_module *child);
int bb_call_input(bb_call *c, const char *name, bb_val v);
int bb_call_build(bb_call *c);
bb_val bb_call_output(bb_call *c, const char *name);

/* ---- the generic op recorder -------------------------------------------------------- */

/* An attribute to put on a recorded node. Only the field of `type` is read. */
typedef struct bb_rec_attr {
    const char *name;
    bb_attr_type type; /* INT, FLOAT, STRING, INTS, FLOATS, TENSOR, GRAPH, TYPE_PROTO */
    int64_t i;
    float f;
    const char *s;
    const int64_t *ints;
    const float *floats;
    size_t count; /* of ints / floats */
    const bb_tensor_proto *t;
    const bb_graph *g;
    const bb_type_proto *tp;
} bb_rec_attr;

#define BB_RA_INT(nm, v) ((bb_rec_attr){.name = (nm), .type = BB_ATTR_INT, .i = (v)})
#define BB_RA_FLOAT(nm, v) ((bb_rec_attr){.name = (nm), .type = BB_ATTR_FLOAT, .f = (v)})
#define BB_RA_STRING(nm, v) ((bb_rec_attr){.name = (nm), .type = BB_ATTR_STRING, .s = (v)})

/* An optional input left out: recorded as "" (trailing ones dropped). */
#define BB_VAL_OMIT ((bb_val){"", NULL, NULL, UINT32_MAX})

/* Record one node. domain NULL = the slot's domain (role domain or atomic
 * domain; NULL slot + NULL domain is an error). Op types of the reserved
 * domains (ai.onnx, ai.bytesandbrains.*) must be in the catalogs. out[i]
 * receives a fresh value of out_types[i] (NULL type = ANY); out may be NULL
 * when n_out == 0. Returns BB_OK or the recorder's (first) error code. */
int bb_rec_op(bb_rec *g, bb_slot *slot, const char *domain, const char *op_type,
              const bb_val *in, size_t n_in, const bb_rec_attr *attrs, size_t n_attrs,
              const bb_type_node *const *out_types, bb_val *out, size_t n_out);

/* ---- ai.bytesandbrains.composite ------------------------------------------------------ */

bb_val bb_rec_bundle(bb_rec *g, const bb_val *parts, size_t n);
int bb_rec_unbundle(bb_rec *g, bb_val composite, const bb_type_node *const *part_types,
                    size_t n, bb_val *out);

/* ---- ai.onnx (on a Backend slot; opset BB_ONNX_OPSET_VERSION signatures) -------
 * Output types: the first input's tensor leaf for shape/elementwise ops,
 * tensor_bool for comparisons, tensor_i64 for ArgMax, the `to` / `dtype`
 * leaf for Cast / Zeros / Ones, BB_TYPE_TENSOR otherwise. Optional inputs
 * take BB_VAL_OMIT. */
#define BB__ONNX_UNARY(X) \
    X(neg, "Neg") X(abs, "Abs") X(sqrt, "Sqrt") X(exp, "Exp") X(log, "Log") \
    X(relu, "Relu") X(sigmoid, "Sigmoid") X(tanh, "Tanh") X(identity, "Identity") \
    X(global_average_pool, "GlobalAveragePool")
#define BB__ONNX_BINARY(X) \
    X(add, "Add") X(sub, "Sub") X(mul, "Mul") X(div, "Div") X(pow, "Pow") \
    X(matmul, "MatMul") X(dot, "Dot") X(equal, "Equal") X(greater, "Greater") \
    X(less, "Less") X(reshape, "Reshape")
#define BB__ONNX_DECL1(fn, op) bb_val bb_onnx_##fn(bb_rec *g, bb_slot *backend, bb_val x);
#define BB__ONNX_DECL2(fn, op) \
    bb_val bb_onnx_##fn(bb_rec *g, bb_slot *backend, bb_val a, bb_val b);
BB__ONNX_UNARY(BB__ONNX_DECL1)
BB__ONNX_BINARY(BB__ONNX_DECL2)
#undef BB__ONNX_DECL1
#undef BB__ONNX_DECL2

bb_val bb_onnx_argmax(bb_rec *g, bb_slot *backend, bb_val data, int64_t axis, int64_t keepdims);
bb_val bb_onnx_flatten(bb_rec *g, bb_slot *backend, bb_val x, int64_t axis);
bb_val bb_onnx_where(bb_rec *g, bb_slot *backend, bb_val cond, bb_val x, bb_val y);
bb_val bb_onnx_gemm(bb_rec *g, bb_slot *backend, bb_val a, bb_val b, bb_val c, float alpha,
                    float beta, int64_t trans_a, int64_t trans_b);
bb_val bb_onnx_softmax(bb_rec *g, bb_slot *backend, bb_val x, int64_t axis);
bb_val bb_onnx_leaky_relu(bb_rec *g, bb_slot *backend, bb_val x, float alpha);
/* approximate: "none" or "tanh" (NULL = attribute absent). */
bb_val bb_onnx_gelu(bb_rec *g, bb_slot *backend, bb_val x, const char *approximate);
/* perm may be NULL (reverse). */
bb_val bb_onnx_transpose(bb_rec *g, bb_slot *backend, bb_val x, const int64_t *perm,
                         size_t n_perm);
bb_val bb_onnx_concat(bb_rec *g, bb_slot *backend, const bb_val *xs, size_t n, int64_t axis);
/* n_out outputs into out; split (sizes) may be BB_VAL_OMIT, then
 * num_outputs = n_out is recorded. */
int bb_onnx_split(bb_rec *g, bb_slot *backend, bb_val x, bb_val split, int64_t axis,
                  bb_val *out, size_t n_out);
bb_val bb_onnx_slice(bb_rec *g, bb_slot *backend, bb_val data, bb_val starts, bb_val ends,
                     bb_val axes, bb_val steps);
bb_val bb_onnx_squeeze(bb_rec *g, bb_slot *backend, bb_val data, bb_val axes);
bb_val bb_onnx_unsqueeze(bb_rec *g, bb_slot *backend, bb_val data, bb_val axes);
/* to: a bb_dtype. */
bb_val bb_onnx_cast(bb_rec *g, bb_slot *backend, bb_val x, int32_t to);
/* axes: an int64 tensor value or BB_VAL_OMIT (all axes). */
bb_val bb_onnx_reduce_sum(bb_rec *g, bb_slot *backend, bb_val data, bb_val axes,
                          int64_t keepdims);
bb_val bb_onnx_reduce_mean(bb_rec *g, bb_slot *backend, bb_val data, bb_val axes,
                           int64_t keepdims);
bb_val bb_onnx_reduce_max(bb_rec *g, bb_slot *backend, bb_val data, bb_val axes,
                          int64_t keepdims);
bb_val bb_onnx_reduce_min(bb_rec *g, bb_slot *backend, bb_val data, bb_val axes,
                          int64_t keepdims);
bb_val bb_onnx_batch_normalization(bb_rec *g, bb_slot *backend, bb_val x, bb_val scale,
                                   bb_val bias, bb_val mean, bb_val var, float epsilon,
                                   float momentum);
bb_val bb_onnx_layer_normalization(bb_rec *g, bb_slot *backend, bb_val x, bb_val scale,
                                   bb_val bias, int64_t axis, float epsilon);

/* Conv / pool geometry; NULL arrays (count 0) leave the attribute out. */
typedef struct bb_onnx_window {
    const int64_t *kernel_shape;
    size_t n_kernel_shape;
    const int64_t *strides;
    size_t n_strides;
    const int64_t *pads;
    size_t n_pads;
    const int64_t *dilations;
    size_t n_dilations;
    int64_t group; /* Conv only; 0 = attribute absent */
} bb_onnx_window;

/* win may be NULL for Conv (pools need kernel_shape). */
bb_val bb_onnx_conv(bb_rec *g, bb_slot *backend, bb_val x, bb_val w, bb_val bias,
                    const bb_onnx_window *win);
bb_val bb_onnx_max_pool(bb_rec *g, bb_slot *backend, bb_val x, const bb_onnx_window *win);
bb_val bb_onnx_average_pool(bb_rec *g, bb_slot *backend, bb_val x,
                            const bb_onnx_window *win);
/* shape: an int64 tensor value; dtype: a bb_dtype. */
bb_val bb_onnx_zeros(bb_rec *g, bb_slot *backend, bb_val shape, int32_t dtype);
bb_val bb_onnx_ones(bb_rec *g, bb_slot *backend, bb_val shape, int32_t dtype);
/* value is deep-copied into the `value` attribute. */
bb_val bb_onnx_constant(bb_rec *g, bb_slot *backend, const bb_tensor_proto *value);
bb_val bb_onnx_gather(bb_rec *g, bb_slot *backend, bb_val data, bb_val indices, int64_t axis);
bb_val bb_onnx_scatter(bb_rec *g, bb_slot *backend, bb_val data, bb_val indices,
                       bb_val updates, int64_t axis);
/* Branch / body graphs are deep-copied into the attributes; outputs are
 * typed ANY. */
int bb_onnx_if(bb_rec *g, bb_slot *backend, bb_val cond, const bb_graph *then_branch,
               const bb_graph *else_branch, bb_val *out, size_t n_out);
int bb_onnx_loop(bb_rec *g, bb_slot *backend, bb_val max_trip, bb_val cond,
                 const bb_val *carried, size_t n_carried, const bb_graph *body, bb_val *out,
                 size_t n_out);

/* ---- ai.bytesandbrains.role.* (on a slot of the matching role) -----------------------
 * Ports carry the catalog types (BB_TYPE_TENSOR placeholders, CommandId,
 * ...). Optional outputs: pass NULL to leave them out when the catalog
 * allows it. */

/* role.model */
bb_val bb_role_model_forward(bb_rec *g, bb_slot *model, bb_val input);
bb_val bb_role_model_backward(bb_rec *g, bb_slot *model, bb_val grad);
bb_val bb_role_model_step(bb_rec *g, bb_slot *model, bb_val grads);
bb_val bb_role_model_evaluate(bb_rec *g, bb_slot *model, bb_val input, bb_val target);
bb_val bb_role_model_apply_delta(bb_rec *g, bb_slot *model, bb_val delta);
bb_val bb_role_model_load_parameters(bb_rec *g, bb_slot *model, bb_val params);
bb_val bb_role_model_params(bb_rec *g, bb_slot *model);
/* epochs <= 0: attribute absent (catalog default 1). */
int bb_role_model_train(bb_rec *g, bb_slot *model, bb_val trigger, int64_t epochs,
                        bb_val *params, bb_val *num_samples);
int bb_role_model_evaluate_metrics(bb_rec *g, bb_slot *model, bb_val trigger, bb_val *loss,
                                   bb_val *accuracy);
/* role.aggregator; metadata may be BB_VAL_OMIT. */
bb_val bb_role_aggregator_contribute(bb_rec *g, bb_slot *agg, bb_val contribution,
                                     bb_val metadata);
/* Returns the result; *metadata receives the metadata output (NULL: only
 * the result is recorded when the catalog marks metadata optional). */
bb_val bb_role_aggregator_aggregate(bb_rec *g, bb_slot *agg, bb_val trigger, bb_val *metadata);
bb_val bb_role_aggregator_current_tensor(bb_rec *g, bb_slot *agg, bb_val trigger);
/* role.compressor (Codec slots) */
bb_val bb_role_compressor_train_codebook(bb_rec *g, bb_slot *codec, bb_val training);
bb_val bb_role_compressor_compress(bb_rec *g, bb_slot *codec, bb_val t);
bb_val bb_role_compressor_decompress(bb_rec *g, bb_slot *codec, bb_val code);
/* role.data_loader (DataSource slots); labels NULL: only the batch. */
int bb_role_data_loader_next_batch(bb_rec *g, bb_slot *data, bb_val *batch, bb_val *labels);
bb_val bb_role_data_loader_reset(bb_rec *g, bb_slot *data, bb_val trigger);
bb_val bb_role_data_loader_on_data_loaded(bb_rec *g, bb_slot *data);
/* role.index */
bb_val bb_role_index_add(bb_rec *g, bb_slot *index, bb_val vec);
bb_val bb_role_index_search(bb_rec *g, bb_slot *index, bb_val query, int64_t k);
bb_val bb_role_index_remove(bb_rec *g, bb_slot *index, bb_val id);
bb_val bb_role_index_train(bb_rec *g, bb_slot *index, bb_val samples);
/* role.peer_selector: of_class = the class the peers are drawn from (NULL:
 * the sampling node's own class). */
bb_val bb_role_peer_selector_sample(bb_rec *g, bb_slot *selector, int64_t n,
                                    const char *of_class);
bb_val bb_role_peer_selector_current_view(bb_rec *g, bb_slot *selector, const char *of_class);
/* Tag the peers another op produced (a selector op of its own domain
 * recorded with bb_rec_op, e.g. Select with params "near_key") with the
 * class they are drawn from, as Sample / CurrentView do: stamps the
 * producing node's peer_class and tags the value. Returns peers (or
 * BB_VAL_NONE and a recording error: not the output of a node of g, empty
 * or NULL of_class). */
bb_val bb_rec_of_class(bb_rec *g, bb_val peers, const char *of_class);

/* ---- ai.bytesandbrains.syscall ------------------------------------------------------- */

bb_val bb_sys_pulse(bb_rec *g);
bb_val bb_sys_on_trigger(bb_rec *g, bb_val trigger);
bb_val bb_sys_threshold(bb_rec *g, const bb_val *inputs, size_t n_inputs, int64_t n);
bb_val bb_sys_interval(bb_rec *g, int64_t period_ns);
bb_val bb_sys_event_source(bb_rec *g, int64_t kind);
bb_val bb_sys_after(bb_rec *g, bb_val trigger, int64_t delay_ns);
bb_val bb_sys_limit_acquire(bb_rec *g, bb_val trigger, const char *name, int64_t n);
int bb_sys_limit_release(bb_rec *g, bb_val trigger, const char *name);
bb_val bb_sys_any(bb_rec *g, const bb_val *inputs, size_t n_inputs, const char *group);
bb_val bb_sys_gate(bb_rec *g, bb_val value, bb_val trigger);
bb_val bb_sys_serialize_enqueue(bb_rec *g, bb_val value, const char *queue);
/* type: the dequeued value's type (NULL = ANY). */
bb_val bb_sys_serialize_dequeue(bb_rec *g, bb_val trigger, const char *queue,
                                const bb_type_node *type);
bb_val bb_sys_correlate_tag(bb_rec *g, bb_val trigger);
int bb_sys_hold_stash(bb_rec *g, bb_val value, const char *slot);
bb_val bb_sys_hold_flush(bb_rec *g, bb_val trigger, const char *slot,
                         const bb_type_node *type);
int bb_sys_app_emit(bb_rec *g, bb_val value, const char *name);
int bb_sys_app_notify(bb_rec *g, bb_val trigger, const char *name);
int bb_sys_record(bb_rec *g, bb_val value, const char *name);
int bb_sys_incr_metric(bb_rec *g, bb_val trigger, const char *name, int64_t delta);
/* phase: 1 Shutdown, 2 Snapshot. */
bb_val bb_sys_lifecycle_phase(bb_rec *g, int64_t phase);
bb_val bb_sys_clock(bb_rec *g, bb_val trigger);
bb_val bb_sys_rng_u64(bb_rec *g, bb_val trigger);
bb_val bb_sys_sleep(bb_rec *g, bb_val trigger, int64_t duration_ns);
bb_val bb_sys_deadline_match(bb_rec *g, bb_val then, bb_val timeout);
bb_val bb_sys_pass_through(bb_rec *g, bb_val value);
int bb_sys_tee(bb_rec *g, bb_val value, bb_val *out, size_t fanout);
/* A constant tensor (deep-copied into the `value` attribute). */
bb_val bb_sys_constant(bb_rec *g, const bb_tensor_proto *value);

/* ---- ai.bytesandbrains.wire ----------------------------------------------------------
 * network: an optional Protocol slot the op is recorded on (stamps its
 * concrete_type/instance, as Part 9's network_server); NULL = engine-native.
 * port: optional logical port name for pairing (see the header). Out
 * pointers may be NULL. */
int bb_wire_send(bb_rec *g, bb_slot *network, const char *port, bb_val data, bb_val dest);
/* quorum 0: attribute absent (every peer must answer). deadline_ns 0:
 * attribute absent (bbc's derive_wire_deadlines fills it in); else how
 * long the batch waits for answers. */
int bb_wire_send_req_batched(bb_rec *g, bb_slot *network, const char *port, bb_val data,
                             bb_val dest, int64_t quorum, int64_t deadline_ns, bb_val *req_id,
                             bb_val *responses);
/* dest may be BB_VAL_OMIT: reply to the requester named by req_id. */
int bb_wire_send_resp(bb_rec *g, bb_slot *network, bb_val data, bb_val dest, bb_val req_id);
int bb_wire_recv(bb_rec *g, bb_slot *network, const char *port,
                 const bb_type_node *payload_type, bb_val *trigger, bb_val *payload);
int bb_wire_recv_req(bb_rec *g, bb_slot *network, const char *port,
                     const bb_type_node *payload_type, bb_val *trigger, bb_val *payload,
                     bb_val *req_id);
int bb_wire_recv_resp_batched(bb_rec *g, bb_slot *network, bb_val req_id, bb_val *trigger,
                              bb_val *responses);

/* ---- ai.bytesandbrains.address_book --------------------------------------------------- */

int bb_addrbook_insert(bb_rec *g, bb_val peer, bb_val address);
int bb_addrbook_insert_many(bb_rec *g, bb_val peer, bb_val addresses);
bb_val bb_addrbook_lookup(bb_rec *g, bb_val peer);

#endif
