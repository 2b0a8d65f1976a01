/*
 * ir.h — libbbir's in-memory IR: the ONNX ModelProto as plain C structs.
 *
 * Same structure as onnx-ml.proto (model, graph, functions, nodes,
 * attributes, value infos, types, tensors, metadata_props), converted from
 * and to protobuf only at the boundary (model_io.c). Every object lives in
 * the model's arena: passes add, rewrite and drop objects freely and the
 * whole model is freed with bb_model_free.
 *
 * Strings are NUL-terminated and NULL when the proto field was absent.
 * Byte fields (AttributeProto.s, TensorProto.raw_data) are bb_bytes.
 * Sub-messages libbbir does not interpret (training_info, sparse tensors,
 * quantization annotations, device configurations) are kept verbatim as
 * their serialized bytes so a load/save round trip loses nothing.
 */
#ifndef BB_IR_H
#define BB_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/arena.h"
#include "bb/status.h"

/* The IR version bbc writes and accepts by default (ONNX IR v10 adds the
 * NodeProto/FunctionProto fields this project relies on). */
#define BB_FRAMEWORK_IR_VERSION 10

typedef struct bb_bytes {
    uint8_t *data;
    size_t len;
} bb_bytes;

typedef struct bb_kv { /* StringStringEntryProto */
    const char *key;
    const char *value;
} bb_kv;

typedef BB_VEC(bb_kv) bb_kv_list;
typedef BB_VEC(const char *) bb_str_list;

typedef struct bb_opset_id { /* OperatorSetIdProto */
    const char *domain;
    int64_t version;
} bb_opset_id;
typedef BB_VEC(bb_opset_id) bb_opset_list;

/* TensorProto.DataType values (canonical ONNX numbering). */
typedef enum bb_dtype {
    BB_DT_UNDEFINED = 0,
    BB_DT_FLOAT = 1,
    BB_DT_UINT8 = 2,
    BB_DT_INT8 = 3,
    BB_DT_UINT16 = 4,
    BB_DT_INT16 = 5,
    BB_DT_INT32 = 6,
    BB_DT_INT64 = 7,
    BB_DT_STRING = 8,
    BB_DT_BOOL = 9,
    BB_DT_FLOAT16 = 10,
    BB_DT_DOUBLE = 11,
    BB_DT_UINT32 = 12,
    BB_DT_UINT64 = 13,
    BB_DT_COMPLEX64 = 14,
    BB_DT_COMPLEX128 = 15,
    BB_DT_BFLOAT16 = 16,
    BB_DT_FLOAT8E4M3FN = 17,
    BB_DT_FLOAT8E4M3FNUZ = 18,
    BB_DT_FLOAT8E5M2 = 19,
    BB_DT_FLOAT8E5M2FNUZ = 20,
    BB_DT_UINT4 = 21,
    BB_DT_INT4 = 22,
    BB_DT_FLOAT4E2M1 = 23,
    BB_DT_FLOAT8E8M0 = 24,
    BB_DT_UINT2 = 25,
    BB_DT_INT2 = 26,
    BB_DT_MAX = 26
} bb_dtype;

/* Bytes per element; 0 for STRING/UNDEFINED, and for the 4-bit and 2-bit
 * types (which pack two / four per byte: use bb_dtype_nbytes). */
size_t bb_dtype_size(int32_t dtype);
/* Storage bytes of n elements (handles 4-bit and 2-bit packing); SIZE_MAX
 * on overflow. */
size_t bb_dtype_nbytes(int32_t dtype, uint64_t n);
/* "float", "int64", ...; "undefined" for unknown values. */
const char *bb_dtype_name(int32_t dtype);

typedef struct bb_tensor_proto { /* TensorProto */
    const char *name;
    const char *doc_string;
    int32_t data_type;
    BB_VEC(int64_t) dims;
    /* Numeric payload, always normalised to little-endian raw bytes:
     * float_data / int32_data / int64_data / double_data / uint64_data in
     * the file are converted to raw_data on load. */
    bb_bytes raw_data;
    bool has_raw_data;
    BB_VEC(bb_bytes) string_data; /* STRING tensors */
    bool has_segment;
    int64_t segment_begin, segment_end;
    bb_kv_list external_data;
    int32_t data_location; /* 0 DEFAULT, 1 EXTERNAL */
    bool has_data_location;
    bb_kv_list metadata;
} bb_tensor_proto;

typedef enum bb_tp_kind {
    BB_TP_NONE = 0, /* TypeProto with no value set (denotation only) */
    BB_TP_TENSOR,
    BB_TP_SEQUENCE,
    BB_TP_MAP,
    BB_TP_OPTIONAL,
    BB_TP_SPARSE_TENSOR,
    BB_TP_OPAQUE
} bb_tp_kind;

typedef struct bb_dim { /* TensorShapeProto.Dimension */
    bool has_value;
    int64_t value;     /* dim_value when has_value */
    const char *param; /* dim_param, or NULL */
    const char *denotation;
} bb_dim;

typedef struct bb_type_proto bb_type_proto;
struct bb_type_proto { /* TypeProto */
    bb_tp_kind kind;
    const char *denotation;
    /* TENSOR and SPARSE_TENSOR */
    int32_t elem_type;
    bool has_shape;
    BB_VEC(bb_dim) shape;
    /* SEQUENCE, OPTIONAL: elem; MAP: key_type + elem (value type) */
    bb_type_proto *elem;
    int32_t map_key_type;
    /* OPAQUE */
    const char *opaque_domain;
    const char *opaque_name;
};

typedef struct bb_value_info { /* ValueInfoProto */
    const char *name;
    bb_type_proto *type; /* may be NULL */
    const char *doc_string;
    bb_kv_list metadata;
} bb_value_info;
typedef BB_VEC(bb_value_info *) bb_value_info_list;

typedef enum bb_attr_type { /* AttributeProto.AttributeType */
    BB_ATTR_UNDEFINED = 0,
    BB_ATTR_FLOAT = 1,
    BB_ATTR_INT = 2,
    BB_ATTR_STRING = 3,
    BB_ATTR_TENSOR = 4,
    BB_ATTR_GRAPH = 5,
    BB_ATTR_FLOATS = 6,
    BB_ATTR_INTS = 7,
    BB_ATTR_STRINGS = 8,
    BB_ATTR_TENSORS = 9,
    BB_ATTR_GRAPHS = 10,
    BB_ATTR_SPARSE_TENSOR = 11,
    BB_ATTR_SPARSE_TENSORS = 12,
    BB_ATTR_TYPE_PROTO = 13,
    BB_ATTR_TYPE_PROTOS = 14
} bb_attr_type;

typedef struct bb_graph bb_graph;

typedef struct bb_attr { /* AttributeProto */
    const char *name;
    const char *ref_attr_name;
    const char *doc_string;
    bb_attr_type type;
    float f;
    int64_t i;
    bb_bytes s;
    bool has_s;
    bb_tensor_proto *t;
    bb_graph *g;
    bb_type_proto *tp;
    bb_bytes sparse_tensor; /* serialized SparseTensorProto, verbatim */
    bool has_sparse_tensor;
    BB_VEC(float) floats;
    BB_VEC(int64_t) ints;
    BB_VEC(bb_bytes) strings;
    BB_VEC(bb_tensor_proto *) tensors;
    BB_VEC(bb_graph *) graphs;
    BB_VEC(bb_bytes) sparse_tensors; /* verbatim */
    BB_VEC(bb_type_proto *) type_protos;
} bb_attr;
typedef BB_VEC(bb_attr *) bb_attr_list;

typedef struct bb_node { /* NodeProto */
    const char *name;
    const char *op_type;
    const char *domain; /* NULL and "" both mean ai.onnx */
    const char *overload;
    const char *doc_string;
    bb_str_list inputs;  /* "" marks an omitted optional input */
    bb_str_list outputs;
    bb_attr_list attrs;
    bb_kv_list metadata;
    BB_VEC(bb_bytes) device_configurations; /* verbatim */
} bb_node;
typedef BB_VEC(bb_node *) bb_node_list;

struct bb_graph { /* GraphProto */
    const char *name;
    const char *doc_string;
    bb_node_list nodes;
    BB_VEC(bb_tensor_proto *) initializers;
    BB_VEC(bb_bytes) sparse_initializers;      /* verbatim */
    BB_VEC(bb_bytes) quantization_annotations; /* verbatim */
    bb_value_info_list inputs, outputs, value_info;
    bb_kv_list metadata;
};

typedef struct bb_function { /* FunctionProto */
    const char *name;
    const char *domain;
    const char *overload;
    const char *doc_string;
    bb_str_list inputs, outputs;
    bb_str_list attributes;       /* required attributes: generic slots */
    bb_attr_list attribute_protos; /* defaulted attributes: concrete slots */
    bb_node_list nodes;
    bb_opset_list opset_imports;
    bb_value_info_list value_info;
    bb_kv_list metadata;
} bb_function;
typedef BB_VEC(bb_function *) bb_function_list;

typedef struct bb_model { /* ModelProto */
    bb_arena *arena;
    int64_t ir_version;
    bool has_model_version;
    int64_t model_version;
    const char *producer_name;
    const char *producer_version;
    const char *domain;
    const char *doc_string;
    bb_opset_list opset_imports;
    bb_graph *graph; /* NULL when absent */
    bb_function_list functions;
    bb_kv_list metadata;
    BB_VEC(bb_bytes) training_info; /* verbatim */
    BB_VEC(bb_bytes) configuration; /* verbatim DeviceConfigurationProto */
} bb_model;

/* ---- construction (all objects come from m->arena) ---------------------- */

/* Returns new (own arena), or NULL on out-of-memory. */
bb_model *bb_model_new(void);
void bb_model_free(bb_model *m);

/* Intern a copy of s in the model's arena (NULL stays NULL). */
const char *bb_model_str(bb_model *m, const char *s);

bb_graph *bb_graph_new(bb_arena *a, const char *name);
bb_function *bb_model_add_function(bb_model *m, const char *domain, const char *name);
/* Appends a node to f; domain/op_type are copied. */
bb_node *bb_function_add_node(bb_model *m, bb_function *f, const char *domain,
                              const char *op_type);
bb_node *bb_graph_add_node(bb_arena *a, bb_graph *g, const char *domain,
                           const char *op_type);
bb_node *bb_node_new(bb_arena *a, const char *domain, const char *op_type);

/* Lists: copy the string into the arena and append. 0 or BB_ENOMEM. */
int bb_str_list_push(bb_arena *a, bb_str_list *l, const char *s);
/* Index of s in l, or -1. */
long bb_str_list_find(const bb_str_list *l, const char *s);

/* metadata_props: set replaces an existing key; get returns NULL if absent. */
int bb_kv_set(bb_arena *a, bb_kv_list *l, const char *key, const char *value);
const char *bb_kv_get(const bb_kv_list *l, const char *key);
bool bb_kv_remove(bb_kv_list *l, const char *key);

int bb_opset_list_add(bb_arena *a, bb_opset_list *l, const char *domain, int64_t version);
/* Version imported for domain ("" and "ai.onnx" are the same), or -1. */
int64_t bb_opset_list_version(const bb_opset_list *l, const char *domain);

/* Attributes on a node. Each returns the new attribute or NULL (OOM). */
bb_attr *bb_node_add_attr(bb_arena *a, bb_node *n, const char *name, bb_attr_type type);
bb_attr *bb_node_set_attr_int(bb_arena *a, bb_node *n, const char *name, int64_t v);
bb_attr *bb_node_set_attr_float(bb_arena *a, bb_node *n, const char *name, float v);
bb_attr *bb_node_set_attr_string(bb_arena *a, bb_node *n, const char *name, const char *v);
bb_attr *bb_node_set_attr_ints(bb_arena *a, bb_node *n, const char *name,
                               const int64_t *v, size_t count);
const bb_attr *bb_node_attr(const bb_node *n, const char *name);
/* Value of an INT attribute, or dflt when absent / of another type. */
int64_t bb_node_attr_int(const bb_node *n, const char *name, int64_t dflt);
float bb_node_attr_float(const bb_node *n, const char *name, float dflt);
/* STRING attribute as a NUL-terminated arena string, or dflt. */
const char *bb_node_attr_string(const bb_node *n, const char *name, const char *dflt);

bb_value_info *bb_value_info_new(bb_arena *a, const char *name, bb_type_proto *type);
/* Find a value_info by name in a list, or NULL. */
bb_value_info *bb_value_info_find(const bb_value_info_list *l, const char *name);

bb_type_proto *bb_type_proto_tensor(bb_arena *a, int32_t elem_type);
bb_type_proto *bb_type_proto_opaque(bb_arena *a, const char *domain, const char *name);
bb_type_proto *bb_type_proto_sequence(bb_arena *a, bb_type_proto *elem);
bool bb_type_proto_equal(const bb_type_proto *x, const bb_type_proto *y);

bb_function *bb_model_find_function(const bb_model *m, const char *domain,
                                    const char *name, const char *overload);

/* Deep copies into arena a (which may be another model's arena). */
bb_tensor_proto *bb_tensor_proto_clone(bb_arena *a, const bb_tensor_proto *t);
bb_type_proto *bb_type_proto_clone(bb_arena *a, const bb_type_proto *t);
bb_attr *bb_attr_clone(bb_arena *a, const bb_attr *at);
bb_node *bb_node_clone(bb_arena *a, const bb_node *n);
bb_graph *bb_graph_clone(bb_arena *a, const bb_graph *g);
bb_value_info *bb_value_info_clone(bb_arena *a, const bb_value_info *vi);
bb_function *bb_function_clone(bb_arena *a, const bb_function *f);
/* Returns new, or NULL on OOM. */
bb_model *bb_model_clone(const bb_model *m);

/* True when the domain names ai.onnx (NULL, "" or "ai.onnx"). */
bool bb_domain_is_onnx(const char *domain);

#endif
