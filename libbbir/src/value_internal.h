/*
 * value_internal.h — helpers shared by value.c (the value model) and
 * value_wire.c (its wire codec). Not public.
 */
#ifndef BB_VALUE_INTERNAL_H
#define BB_VALUE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

struct bb_buffer;
/* bb_buffer_new without zeroing, for decoders that overwrite every byte. */
struct bb_buffer *bb__buffer_new_uninit(size_t len);

struct bb_value;
struct bb_type_node;
/* bb_value_tensor_wrap for a decoder that has checked everything already:
 * type is dtype's tensor leaf, data[0..nbytes) lies in buf, aligned, and
 * nbytes is what the shape needs. */
struct bb_value *bb__value_tensor_checked(const struct bb_type_node *type, int32_t dtype,
                                          uint32_t ndim, const int64_t *dims,
                                          struct bb_buffer *buf, uint8_t *data, size_t nbytes);

#endif
