/*
 * opsets_internal.h — shared between the catalog files (opsets_*.c) and the
 * lookup code (opsets.c): the catalog objects and the table-building macros.
 *
 * Each catalog file keeps its ops sorted by op_type (strcmp order): the
 * lookups binary-search them and test_opsets checks the order.
 */
#ifndef BB_OPSETS_INTERNAL_H
#define BB_OPSETS_INTERNAL_H

#include "bb/opsets.h"

extern const bb_opset_schema bb__opset_syscall;
extern const bb_opset_schema bb__opset_address_book;
extern const bb_opset_schema bb__opset_wire;
extern const bb_opset_schema bb__opset_composite;
extern const bb_opset_schema bb__opset_role_index;
extern const bb_opset_schema bb__opset_role_model;
extern const bb_opset_schema bb__opset_role_aggregator;
extern const bb_opset_schema bb__opset_role_compressor;
extern const bb_opset_schema bb__opset_role_data_loader;
extern const bb_opset_schema bb__opset_role_peer_selector;
extern const bb_opset_schema bb__opset_onnx;

/* Ports: BB__P(name, TYPE) with TYPE the suffix of a BB_TYPE_* node. */
#define BB__P(nm, ty) {.name = (nm), .type = &BB_TYPE_##ty}
#define BB__P_OPT(nm, ty) {.name = (nm), .type = &BB_TYPE_##ty, .optional = true}
#define BB__P_VAR(nm, ty) {.name = (nm), .type = &BB_TYPE_##ty, .variadic = true}
#define BB__P_VAR_OPT(nm, ty) \
    {.name = (nm), .type = &BB_TYPE_##ty, .optional = true, .variadic = true}

/* Attributes: with a default, required, or optional without default. */
#define BB__A(nm, ty, dflt) {.name = (nm), .type = BB_ATTR_##ty, .default_text = (dflt)}
#define BB__A_REQ(nm, ty) {.name = (nm), .type = BB_ATTR_##ty, .required = true}
#define BB__A_OPT(nm, ty) {.name = (nm), .type = BB_ATTR_##ty}

/* A list expands to "array, count" so it fills a pointer and the count
 * member that follows it; BB__NONE is the empty list. */
#define BB__PORTS(...)                              \
    (const bb_port_decl[]){__VA_ARGS__},            \
        (uint32_t)(sizeof((const bb_port_decl[]){__VA_ARGS__}) / sizeof(bb_port_decl))
#define BB__ATTRS(...)                              \
    (const bb_attr_schema[]){__VA_ARGS__},          \
        (uint32_t)(sizeof((const bb_attr_schema[]){__VA_ARGS__}) / sizeof(bb_attr_schema))
#define BB__NONE NULL, 0

/* One op of the catalog whose domain/version the including file defines as
 * BB__DOM / BB__VER. */
#define BB__OP(type, ins, outs, attrs_, fl, docstr)                          \
    {.domain = BB__DOM, .version = BB__VER, .op_type = (type), .inputs = ins, \
     .outputs = outs, .attrs = attrs_, .flags = (fl), .doc = (docstr)}

#define BB__COUNT(arr) ((uint32_t)(sizeof(arr) / sizeof((arr)[0])))

#endif
