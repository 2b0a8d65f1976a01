/*
 * bb/io.h — whole files and buffers in and out: the key file, a saved model
 * and bbd's snapshot file write through bb_write_all; a model file, a bbsim
 * scenario and any other bounded input are read through bb_read_file.
 */
#ifndef BB_IO_H
#define BB_IO_H

#include <stddef.h>
#include <stdint.h>

#include "bb/status.h"

/* Write the n bytes at p to fd, going on after short writes and EINTR.
 * 0 when every byte was written, else -1 with errno set (EIO when write
 * returned 0: no progress). */
int bb_write_all(int fd, const void *p, size_t n);

/* Read the whole file at path into *out (malloc'd, one byte longer than
 * *out_len and NUL-terminated, so text can be parsed in place). A file
 * larger than max_bytes is refused (BB_ELIMIT) before it is read, a pipe
 * as soon as it passes the limit; BB_EIO names the path and the errno. */
int bb_read_file(const char *path, size_t max_bytes, uint8_t **out, size_t *out_len,
                 bb_error *err);

#endif
