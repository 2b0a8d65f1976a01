/*
 * pb_scan.h — bounds-checked walk of protobuf wire data against a
 * protobuf-c schema (internal to libbbir).
 *
 * protobuf-c's unpack recurses without limit and reports no position, so
 * untrusted bytes go through bb__pb_scan first: it checks every tag,
 * varint, length and wire type against the buffer and the generated
 * descriptors, bounds message nesting (BB__PB_MAX_MSG_DEPTH) and GraphProto
 * nesting (BB_MODEL_MAX_GRAPH_DEPTH), and reports the first problem as
 * "<name>: <what is wrong> at byte N" with BB_EPARSE (malformed), BB_ETRUNC
 * (data ends early) or BB_ELIMIT (a length or nesting over a limit).
 * Bytes that pass are safe to hand to protobuf_c_message_unpack.
 */
#ifndef BB__PB_SCAN_H
#define BB__PB_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "bb/model_io.h"

/* Any message nesting (types inside types, graphs inside attributes) is
 * bounded too: each graph level costs 3 message levels (graph, node,
 * attribute), so this leaves room for types inside the deepest graph. */
#define BB__PB_MAX_MSG_DEPTH (4 * BB_MODEL_MAX_GRAPH_DEPTH)

/* Scan buf[0..len) as one message of type d. name prefixes messages; what
 * names the expected content ("an ONNX model") in "not <what>" messages
 * (empty input, text, bytes without any known field). Returns BB_OK or the
 * status it filled err with (err may be NULL). */
int bb__pb_scan(const uint8_t *buf, size_t len, const char *name,
                const ProtobufCMessageDescriptor *d, const char *what, bb_error *err);

#endif
