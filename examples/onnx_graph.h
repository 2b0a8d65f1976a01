/*
 * onnx_graph.h — building a plain ONNX inference graph in C (the kind
 * torch.onnx.export writes: a main graph of ai.onnx ops with initializers)
 * with libbbir's IR, and the CNN of examples/cnn on top of it. The CNN
 * recorder, the nn::Onnx tests and the benchmarks share it. Header-only,
 * like record_main.h: each examples/NAME/ directory builds into its own
 * program.
 *
 *   og g;  og_begin(&g, "mlp");
 *   og_input(&g, "x", 2, (int64_t[]){-1, 784});          -1: the batch ("N")
 *   og_param(&g, "fc.weight", 2, (int64_t[]){128, 784}, w);
 *   og_node(&g, "Gemm", "fc", "x,fc.weight,fc.bias", "h");
 *   og_output(&g, "h", 2, (int64_t[]){-1, 128});
 *   og_save(&g, 17, "mlp.onnx", &err);  og_end(&g);
 *
 * An allocation failure is remembered (g.oom) and reported by og_save /
 * og_model.
 */
#ifndef BB_EXAMPLES_ONNX_GRAPH_H
#define BB_EXAMPLES_ONNX_GRAPH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "bb/arena.h"
#include "bb/ir.h"
#include "bb/model_io.h"

typedef struct og {
    bb_model *m;     /* owns the arena */
    bb_graph *g;
    bool oom;
} og;

static inline void og_begin(og *o, const char *name)
{
    o->m = bb_model_new();
    o->g = o->m ? bb_graph_new(o->m->arena, name) : NULL;
    o->oom = !o->g;
    if (o->m)
        o->m->graph = o->g;
}

static inline void og_end(og *o)
{
    bb_model_free(o->m);
    o->m = NULL;
    o->g = NULL;
}

static inline bb_type_proto *og__type(og *o, int32_t dtype, uint32_t ndim, const int64_t *dims)
{
    bb_type_proto *t = bb_type_proto_tensor(o->m->arena, dtype);
    if (!t || !dims)
        return t;
    t->has_shape = true;
    for (uint32_t d = 0; d < ndim; d++) {
        bb_dim *dm = BB_VEC_PUSH(o->m->arena, &t->shape);
        if (!dm)
            return NULL;
        memset(dm, 0, sizeof *dm);
        dm->has_value = dims[d] >= 0;
        dm->value = dims[d] >= 0 ? dims[d] : 0;
        dm->param = dims[d] >= 0 ? NULL : bb_arena_strdup(o->m->arena, "N");
    }
    return t;
}

/* A graph input of f32; dims NULL: no shape; a dim of -1: the batch "N". */
static inline void og_input(og *o, const char *name, uint32_t ndim, const int64_t *dims)
{
    if (o->oom)
        return;
    bb_type_proto *t = og__type(o, BB_DT_FLOAT, ndim, dims);
    bb_value_info *vi = t ? bb_value_info_new(o->m->arena, name, t) : NULL;
    bb_value_info **slot = vi ? BB_VEC_PUSH(o->m->arena, &o->g->inputs) : NULL;
    if (slot)
        *slot = vi;
    o->oom = !slot;
}

/* A graph output of f32 of shape dims (a dim of -1: the batch "N"). */
static inline void og_output(og *o, const char *name, uint32_t ndim, const int64_t *dims)
{
    if (o->oom)
        return;
    bb_type_proto *t = og__type(o, BB_DT_FLOAT, ndim, dims);
    bb_value_info *vi = t ? bb_value_info_new(o->m->arena, name, t) : NULL;
    bb_value_info **slot = vi ? BB_VEC_PUSH(o->m->arena, &o->g->outputs) : NULL;
    if (slot)
        *slot = vi;
    o->oom = !slot;
}

/* An initializer of dtype holding a copy of data (numel x element size). */
static inline void og_tensor(og *o, const char *name, int32_t dtype, uint32_t ndim,
                             const int64_t *dims, const void *data)
{
    if (o->oom)
        return;
    bb_arena *a = o->m->arena;
    bb_tensor_proto *t = bb_arena_calloc(a, 1, sizeof *t);
    bb_tensor_proto **slot = t ? BB_VEC_PUSH(a, &o->g->initializers) : NULL;
    size_t n = 1;
    for (uint32_t d = 0; d < ndim; d++)
        n *= (size_t)dims[d];
    if (!slot || !(t->name = bb_arena_strdup(a, name))) {
        o->oom = true;
        return;
    }
    *slot = t;
    t->data_type = dtype;
    t->has_raw_data = true;
    t->raw_data.len = n * bb_dtype_size(dtype);
    t->raw_data.data = bb_arena_memdup(a, data, t->raw_data.len ? t->raw_data.len : 1);
    for (uint32_t d = 0; d < ndim && t->raw_data.data; d++) {
        int64_t *dv = BB_VEC_PUSH(a, &t->dims);
        if (!dv) {
            o->oom = true;
            return;
        }
        *dv = dims[d];
    }
    o->oom = !t->raw_data.data;
}

static inline void og_param(og *o, const char *name, uint32_t ndim, const int64_t *dims,
                            const float *data)
{
    og_tensor(o, name, BB_DT_FLOAT, ndim, dims, data);
}

static inline void og_ints(og *o, const char *name, uint32_t n, const int64_t *v)
{
    int64_t dim = n;
    og_tensor(o, name, BB_DT_INT64, 1, &dim, v);
}

/* Append a comma-separated name list ("" entries stay: omitted inputs). */
static inline bool og__names(og *o, bb_str_list *l, const char *csv)
{
    char buf[256];
    for (const char *p = csv; p && *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n >= sizeof buf)
            return false;
        memcpy(buf, p, n);
        buf[n] = 0;
        if (bb_str_list_push(o->m->arena, l, buf))
            return false;
        p = end ? end + 1 : NULL;
        if (end && !*p && bb_str_list_push(o->m->arena, l, "")) /* a trailing "," */
            return false;
    }
    return true;
}

/* A node op(inputs) -> outputs named name; attributes go on the result. */
static inline bb_node *og_node(og *o, const char *op, const char *name, const char *inputs,
                               const char *outputs)
{
    if (o->oom)
        return NULL;
    bb_node *n = bb_graph_add_node(o->m->arena, o->g, NULL, op);
    if (!n || !(n->name = bb_arena_strdup(o->m->arena, name)) || !og__names(o, &n->inputs, inputs) ||
        !og__names(o, &n->outputs, outputs)) {
        o->oom = true;
        return NULL;
    }
    return n;
}

static inline void og_attr_int(og *o, bb_node *n, const char *name, int64_t v)
{
    if (n && !bb_node_set_attr_int(o->m->arena, n, name, v))
        o->oom = true;
}

static inline void og_attr_float(og *o, bb_node *n, const char *name, float v)
{
    if (n && !bb_node_set_attr_float(o->m->arena, n, name, v))
        o->oom = true;
}

static inline void og_attr_ints(og *o, bb_node *n, const char *name, uint32_t k,
                                const int64_t *v)
{
    if (n && !bb_node_set_attr_ints(o->m->arena, n, name, v, k))
        o->oom = true;
}

static inline void og_attr_string(og *o, bb_node *n, const char *name, const char *v)
{
    if (n && !bb_node_set_attr_string(o->m->arena, n, name, v))
        o->oom = true;
}

/* The model around the graph: IR version 8, ai.onnx at opset. NULL on OOM
 * (borrowed: og_end frees it). */
static inline bb_model *og_model(og *o, int64_t opset)
{
    if (o->oom || bb_opset_list_add(o->m->arena, &o->m->opset_imports, "", opset))
        return NULL;
    o->m->ir_version = 8;
    o->m->producer_name = bb_model_str(o->m, "bytesandbrains");
    return o->m->producer_name ? o->m : NULL;
}

static inline int og_save(og *o, int64_t opset, const char *path, bb_error *err)
{
    bb_model *m = og_model(o, opset);
    if (!m)
        return bb_error_set(err, BB_ENOMEM, "out of memory building graph %s",
                            o->g && o->g->name ? o->g->name : "");
    return bb_model_save_file(m, path, err);
}

/* ---- deterministic weights -------------------------------------------------------- */

/* Normal draws from a 64-bit LCG (Box-Muller): the same weights everywhere. */
static inline double og_normal(uint64_t *s)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
        u[i] = ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* He-normal weights for a layer with fan_in inputs (relu follows it). */
static inline void og_he(float *w, size_t n, size_t fan_in, uint64_t *s)
{
    double sd = sqrt(2.0 / (double)(fan_in ? fan_in : 1));
    for (size_t i = 0; i < n; i++)
        w[i] = (float)(sd * og_normal(s));
}

#endif
