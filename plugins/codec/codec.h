/*
 * codec.h — internal interface of the codec plugin: four Codecs (ROLES.md
 * Part 5) behind one component shell.
 *
 *   codec.c        the shell: config, the ops (TrainCodebook, Compress,
 *                  Decompress, DecompressBatch), the snapshot frame, the
 *                  component types and the plugin entry
 *   frame.c        the self-describing header every u8 code starts with,
 *                  and its bounded reader
 *   f16.c          codec::F16            tensor_f32 -> tensor_f16
 *   int8_affine.c  codec::Int8Affine     tensor_f32 -> tensor_u8
 *   topk.c         codec::TopK           tensor_f32 -> tensor_u8
 *   pq.c           codec::ProductQuantization  tensor_f32 -> tensor_u8
 *                  (its k-means in kmeans.c)
 *
 * A kind is a table of functions over an instance whose first member is
 * the shell's `codec`. Codes arrive from the wire: every decode checks
 * lengths, counts and indices against the code's own size and against
 * max_elements before it allocates, and refuses the code naming the byte
 * offset or the element.
 */
#ifndef BB_CODEC_INTERNAL_H
#define BB_CODEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bb/bytes.h>
#include <bb/plugin.h>
#include <bb/uvarint.h>

#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_type.h"

typedef struct codec codec;

typedef struct codec_kind {
    const char *type_name;
    const bb_type_node *code_type; /* the Out storage (Compress's output) */
    size_t size;                   /* of the instance struct; `codec` comes first */
    const bb_config_decl *config;  /* the kind's keys, CODEC_COMMON_DECLS included */
    uint32_t n_config;
    /* Reads the kind's own config keys. */
    int (*init)(codec *c, const bbp_config *cfg, uint64_t seed, bb_error *err);
    void (*fini)(codec *c);        /* NULL: nothing to free */
    /* TrainCodebook; NULL: there is nothing to fit (the op only answers). */
    int (*train)(codec *c, const bb_value *samples, bb_error *err);
    /* t is an f32 tensor of at most max_elements elements (checked). */
    int (*encode)(codec *c, const bb_value *t, bb_value **code, bb_error *err);
    /* code is any value off the wire. */
    int (*decode)(const codec *c, const bb_value *code, bb_value **t, bb_error *err);
    /* The state a snapshot keeps; NULL: stateless. load must consume all
     * of r or fail. */
    void (*save)(const codec *c, bb_writer *w);
    int (*load)(codec *c, bb_reader *r, bb_error *err);
} codec_kind;

struct codec {
    const codec_kind *kind;
    char who[160];         /* "codec::TopK at slot 'codec'" */
    uint64_t max_elements; /* largest tensor encoded or decoded */
    uint64_t changes;      /* TrainCodebooks so far: the CommandId it answers */
};

/* The config key every codec has (codec.c reads it). */
#define CODEC_COMMON_DECLS                                                                    \
    {"max_elements", "int", "67108864",                                                       \
     "largest tensor (in elements) Compress accepts and Decompress produces; a code that "    \
     "claims more is refused before anything is allocated"}
#define CODEC_COMMON_DECL_COUNT 1

/* ---- the shell (codec.c) ----------------------------------------------------------- */
int codec_create(const codec_kind *k, const bb_create_args *a, void **out, bb_error *err);
void codec_destroy(void *inst);
bb_dispatch_result codec_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                  bb_value **outputs, bb_error *err);
int codec_snapshot(void *inst, uint8_t **out, size_t *out_len, bb_error *err);
int codec_restore(void *inst, const uint8_t *data, size_t len, bb_error *err);
/* The role opset and the atomic one, with Out = tensor_u8 / tensor_f16. */
#define CODEC_N_OPSETS 2
extern const bb_opset_decl CODEC_OPSETS_U8[CODEC_N_OPSETS], CODEC_OPSETS_F16[CODEC_N_OPSETS];

/* A kind's component type, in the kind's file:
 *   CODEC_COMPONENT(CODEC_TYPE_F16, "codec::F16", F16_KIND, F16_CONFIG, CODEC_OPSETS_F16,
 *                   "doc")
 * (config: the kind's bb_config_decl array, the one its codec_kind names). */
#define CODEC_COMPONENT(sym, name_, kind_, config_, opsets_, doc_)              \
    static int sym##_create(const bb_create_args *a, void **out, bb_error *err)               \
    {                                                                                         \
        return codec_create(&(kind_), a, out, err);                                          \
    }                                                                                         \
    const bb_component_type sym = {                                                           \
        .struct_size = sizeof(bb_component_type),                                             \
        .abi_major = BB_PLUGIN_ABI_MAJOR,                                                     \
        .abi_minor = BB_PLUGIN_ABI_MINOR,                                                     \
        .type_name = name_,                                                                   \
        .role = BB_ROLE_CODEC,                                                                \
        .doc = doc_,                                                                          \
        .opsets = opsets_,                                                                    \
        .n_opsets = CODEC_N_OPSETS,                                                           \
        .config = config_,                                                                    \
        .n_config = (uint32_t)(sizeof(config_) / sizeof *(config_)),                          \
        .create = sym##_create,                                                               \
        .destroy = codec_destroy,                                                             \
        .dispatch = codec_dispatch,                                                           \
        .snapshot = codec_snapshot,                                                           \
        .restore = codec_restore,                                                             \
    }

extern const bb_component_type CODEC_TYPE_F16, CODEC_TYPE_INT8_AFFINE, CODEC_TYPE_TOPK,
    CODEC_TYPE_PQ;

/* ---- helpers (codec.c) ------------------------------------------------------- */
int codec_oom(const codec *c, bb_error *err);
/* An f32 tensor of at most max_elements elements, else ETYPE / ELIMIT
 * naming op and what it got. */
int codec_check_f32(const codec *c, const char *op, const bb_value *t, bb_error *err);
/* The index of the first non-finite element of v[0..n), or n. */
size_t codec_first_nonfinite(const float *v, size_t n);

/* ---- the code frame (frame.c) ---------------------------------------------------
 * A u8 code is a 1-D tensor_u8:
 *   u8 format ('I' Int8Affine, 'T' TopK, 'P' ProductQuantization)
 *   u8 version (1)
 *   u8 ndim (0..8), then ndim varint dims   the decoded tensor's shape
 *   the kind's payload
 * so a receiver needs no side channel to know the shape, and a code of one
 * kind fed to another is refused by its first byte. */
#define CODEC_FRAME_VERSION 1

typedef enum codec_format {
    CODEC_FMT_INT8 = 'I',
    CODEC_FMT_TOPK = 'T',
    CODEC_FMT_PQ = 'P'
} codec_format;

typedef struct codec_shape {
    uint32_t ndim;
    int64_t dims[BB_MAX_DIMS];
    size_t numel;
} codec_shape;

/* A new 1-D u8 code of header + payload bytes for a tensor of shape
 * (ndim, dims), the header written; w, a fixed writer over the code, is
 * left after it for the payload (exactly payload bytes). NULL on OOM. */
bb_value *codec_frame_begin(codec_format f, uint32_t ndim, const int64_t *dims, size_t payload,
                            bb_writer *w);
/* Checks the code is a 1-D u8 tensor of kind f and reads its header:
 * *shape (numel <= c->max_elements), r positioned after the header. */
int codec_frame_open(const codec *c, const bb_value *code, codec_format f, codec_shape *shape,
                     bb_reader *r, bb_error *err);
/* Reads a (minimal) varint at r (EDECODE naming the offset and what). */
int codec_get_varint(const codec *c, bb_reader *r, const char *what, uint64_t *out,
                     bb_error *err);
/* EDECODE "<who>: malformed code: <what> at byte <offset>" (where r
 * failed, else where it stands). */
int codec_malformed(const codec *c, const bb_reader *r, const char *what, bb_error *err);

/* ---- f16.c ------------------------------------------------------------------------ */
/* IEEE 754 binary16 <-> binary32: round to nearest even; infinities and
 * NaNs kept (a NaN stays a NaN, made quiet); overflow goes to infinity. */
uint16_t codec_f32_to_f16(float f);
float codec_f16_to_f32(uint16_t h);

/* ---- kmeans.c ------------------------------------------------------------------------- */
/* Lloyd's k-means of n points (dimension d, point i at x + i * stride) into
 * k centroids (k x d, row-major), iters iterations, deterministic for a
 * seed. n >= 1; fewer points than centroids repeats points. An emptied
 * centroid moves to the point farthest from its own. BB_OK or BB_ENOMEM. */
int codec_kmeans(const float *x, size_t n, size_t stride, uint32_t d, uint32_t k,
                 uint32_t iters, uint64_t seed, float *centroids);
/* Index of the centroid nearest to v (ties: the lowest index). */
uint32_t codec_nearest(const float *v, const float *centroids, uint32_t k, uint32_t d,
                       float *dist);

#endif
