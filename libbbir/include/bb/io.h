/*
 * bb/io.h — whole files in and out: a model file, a bbsim scenario and any
 * other bounded input are read through bb_read_file.
 */
#ifndef BB_IO_H
#define BB_IO_H

#include <stddef.h>
#include <stdint.h>

#include "bb/status.h"

/* Read the whole file at path into *out (malloc'd, one byte longer than
 * *out_len and NUL-terminated, so text can be parsed in place). A file
 * larger than max_bytes is refused (BB_ELIMIT) before it is read, a pipe
 * as soon as it passes the limit; BB_EIO names the path and the errno. */
int bb_read_file(const char *path, size_t max_bytes, uint8_t **out, size_t *out_len,
                 bb_error *err);

#endif
