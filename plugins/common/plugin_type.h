/*
 * plugin_type.h — the boilerplate every standard plugin shares: the ABI
 * header fields of a bb_component_type and the one exported entry symbol.
 *
 *   static const bb_component_type T = {BBP_TYPE_ABI, .type_name = ..., ...};
 *   BBP_PLUGIN_ENTRY("agg", TYPES)   (TYPES: an array of type pointers)
 */
#ifndef BBP_PLUGIN_TYPE_H
#define BBP_PLUGIN_TYPE_H

#include <bb/plugin.h>

#define BBP_TYPE_ABI                                                                   \
    .struct_size = sizeof(bb_component_type), .abi_major = BB_PLUGIN_ABI_MAJOR,        \
    .abi_minor = BB_PLUGIN_ABI_MINOR

#define BBP_COUNT(arr) ((uint32_t)(sizeof(arr) / sizeof *(arr)))

#define BBP_PLUGIN_ENTRY(plugin_name, type_list)                                         \
    static const bb_plugin_info BBP_INFO = {                                           \
        .struct_size = sizeof(bb_plugin_info),                                         \
        .abi_major = BB_PLUGIN_ABI_MAJOR,                                              \
        .abi_minor = BB_PLUGIN_ABI_MINOR,                                              \
        .name = plugin_name,                                                           \
        .version = "1.0",                                                              \
        .types = type_list,                                                            \
        .n_types = BBP_COUNT(type_list),                                               \
        .value_layout = BB_PLUGIN_VALUE_LAYOUT,                                        \
    };                                                                                 \
    BB_PLUGIN_EXPORT const bb_plugin_info *bb_plugin_entry(void) { return &BBP_INFO; }

#endif
