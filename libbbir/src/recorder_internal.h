/*
 * recorder_internal.h — the recorder's bookkeeping, shared by recorder.c
 * (state, slots, ports, the generic node recorder), recorder_ops.c (one
 * thin function per catalog op) and recorder_build.c (finalization).
 *
 * Bookkeeping lives in the recorder's own arena; everything that ends up
 * in the ModelProto (names, nodes, value infos) lives in the model's arena,
 * which bb_recorder_build hands to the caller.
 */
#ifndef BB_RECORDER_INTERNAL_H
#define BB_RECORDER_INTERNAL_H

#include "bb/arena.h"
#include "bb/meta.h"
#include "bb/opsets.h"
#include "bb/recorder.h"

typedef enum rec_val_kind {
    REC_VAL_SITE = 0, /* a node output */
    REC_VAL_INPUT,    /* a g.input formal */
    REC_VAL_NET_IN    /* a lookup_output formal */
} rec_val_kind;

typedef struct rec_value {
    const char *name;          /* current name (model arena) */
    const bb_type_node *type;
    const char *of_class;      /* peer-class tag of a peer vector, or NULL */
    bb_value_info *vi;         /* its value_info entry in the function */
    rec_val_kind kind;
    bool is_port;              /* already carried by a function output */
} rec_value;

typedef struct rec_binding { /* a call's named input or output */
    const char *name;
    uint32_t val;
} rec_binding;

struct bb_call {
    bb_rec *g;
    bb_module *child;
    bb_node *node; /* set by bb_call_build */
    BB_VEC(rec_binding) ins;
    BB_VEC(rec_binding) outs;
};

struct bb_rec {
    bb_recorder *r;
    bb_module *m;
    bb_function *f;
    bool bootstrap;
    BB_VEC(rec_value) vals;
    uint32_t last_site;               /* site_<n> numbering, per function */
    BB_VEC(uint32_t) input_ids;       /* g.input formals in call order */
    BB_VEC(uint32_t) net_in_ids;      /* lookup_output formals in call order */
    BB_VEC(const char *) net_out_ports;
    BB_VEC(const char *) scopes;      /* with_module stack: joined chains */
    BB_VEC(bb_call *) calls;
};

struct bb_slot {
    bb_module *m;
    bb_role role;
    const char *name;
    bool concrete;
    const char *type_name;     /* concrete only */
    uint32_t id;               /* slot_id (generic) or instance (concrete) */
    const char *atomic_domain; /* NULL: record under the role domain */
};

struct bb_module {
    bb_recorder *r;
    const char *domain;
    const char *name;
    const char *klass; /* class module: the class (= name); else NULL */
    bb_rec body;
    bb_rec *boot;
    BB_VEC(bb_slot *) slots;
    uint32_t n_calls;         /* calls recorded so far (module_instance #k) */
    /* build state */
    int visit;                /* 0 new, 1 on stack, 2 done (cycle check) */
    bool reachable;
    const char *derived_class;
    bool class_done;
};

typedef struct rec_instance { /* per TYPE_NAME instance counter */
    const char *type_name;
    uint32_t next;
} rec_instance;

struct bb_recorder {
    bb_arena *arena;  /* bookkeeping */
    bb_model *model;  /* NULL once handed out by build */
    const char *domain;
    bb_error err;     /* the first error; code 0 while none */
    bool built;
    BB_VEC(bb_module *) modules;
    uint32_t next_slot_id;
    BB_VEC(rec_instance) instances;
};

/* ---- shared helpers (recorder.c) ------------------------------------------ */

/* Keep the first error: "<module>[__bootstrap]: <what>: <message>".
 * g may be NULL (then no module prefix). Returns the recorder's first
 * error code (BB_ERECORD unless an earlier error had another code). */
int bb__rec_fail(bb_recorder *r, const bb_rec *g, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Out-of-memory while recording (code BB_ENOMEM). */
int bb__rec_oom(bb_recorder *r, const bb_rec *g, const char *what);
/* BB_OK when g may record now; otherwise the error to return (and, for a
 * built recorder, records one). */
int bb__rec_ready(bb_rec *g, const char *what);

/* The recorder-level node recorder behind bb_rec_op and every DSL call.
 * node_domain is what the node carries; catalog_domain (NULL: same) is
 * where the schema is looked up (differs for an atomic-domain concrete).
 * out_types NULL: the catalog's output port types. Returns the node, or
 * NULL after recording an error. */
typedef struct bb__op_req {
    bb_slot *slot;
    const char *node_domain;
    const char *catalog_domain;
    const char *op_type;
    const bb_val *in;
    size_t n_in;
    const bb_rec_attr *attrs;
    size_t n_attrs;
    const bb_type_node *const *out_types;
    bb_val *out;
    size_t n_out;
    const char *original_op; /* stamp, or NULL */
} bb__op_req;

bb_node *bb__rec_node(bb_rec *g, const bb__op_req *req);

/* Stamp metadata on a recorded node; records OOM. */
int bb__rec_meta(bb_rec *g, bb_node *n, const char *key, const char *value);
/* The value table entry of a handle known to belong to g. */
rec_value *bb__rec_value(bb_rec *g, bb_val v);
/* A new value (site name when name is NULL) with a value_info entry. */
bb_val bb__rec_new_value(bb_rec *g, const char *name, const bb_type_node *type,
                         rec_val_kind kind);
/* Build finalization (recorder_build.c). */
int bb__rec_finalize(bb_recorder *r, bb_module *root);

#endif
