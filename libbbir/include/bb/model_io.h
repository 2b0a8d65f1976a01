/*
 * model_io.h — ModelProto bytes <-> libbbir IR, and a readable text dump.
 *
 * Every input is untrusted: a 0-byte file, a file that is not protobuf, a
 * truncated file or one with absurd lengths gets BB_EPARSE / BB_ETRUNC /
 * BB_ELIMIT and a message naming the file and what is wrong; never a crash.
 * The protobuf-c generated types stay inside model_io.c.
 */
#ifndef BB_MODEL_IO_H
#define BB_MODEL_IO_H

#include <stdint.h>
#include <stdio.h>

#include "bb/ir.h"

/* Largest model file accepted (bytes). */
#define BB_MODEL_MAX_BYTES ((size_t)2 << 30)
/* Deepest nesting of graphs inside attributes (If/Loop bodies). */
#define BB_MODEL_MAX_GRAPH_DEPTH 64

/* Load from a file. *out is new on success (free with bb_model_free). */
int bb_model_load_file(const char *path, bb_model **out, bb_error *err);
/* Load from memory; name is used in error messages ("<name>: ..."). */
int bb_model_load_mem(const void *data, size_t len, const char *name,
                      bb_model **out, bb_error *err);
/* Serialize. *out is malloc'd (caller frees). */
int bb_model_save_mem(const bb_model *m, uint8_t **out, size_t *out_len, bb_error *err);
/* Serialize to path atomically (write temp file, rename). */
int bb_model_save_file(const bb_model *m, const char *path, bb_error *err);
/* Write model bytes buf[0..len) (borrowed) to path the same way: readers
 * see the old file or the new one, never half of one. */
int bb_model_write_file(const char *path, const uint8_t *buf, size_t len, bb_error *err);

/* A single TensorProto (used for .pb tensor files and the tensor wire form). */
int bb_tensor_proto_decode(bb_arena *a, const void *data, size_t len, const char *name,
                           bb_tensor_proto **out, bb_error *err);
/* *out is malloc'd. */
int bb_tensor_proto_encode(const bb_tensor_proto *t, uint8_t **out, size_t *out_len,
                           bb_error *err);

/* Readable text: functions, nodes with inputs/outputs/attributes/metadata,
 * value types and model metadata. Deterministic (golden-testable). */
void bb_model_dump(const bb_model *m, FILE *out);
/* One TypeProto as text ("tensor(float)[N,784]", "opaque(ai.bytesandbrains.PeerId)"),
 * into buf (always NUL-terminated). Returns buf. */
char *bb_type_proto_str(const bb_type_proto *t, char *buf, size_t cap);

/* The model as JSON, the canonical protobuf JSON mapping of its ModelProto
 * (what python's json_format.MessageToDict(m, preserving_proto_field_name=True)
 * gives): proto field names, int64 as strings, bytes as base64, enums by name,
 * absent fields and empty repeated fields omitted. Indented, deterministic. */
void bb_model_dump_json(const bb_model *m, FILE *out);

#endif
