/*
 * bb/io.h — writing whole buffers to file descriptors: the key file, a
 * saved model and bbd's snapshot file all write through it.
 */
#ifndef BB_IO_H
#define BB_IO_H

#include <stddef.h>

/* Write the n bytes at p to fd, going on after short writes and EINTR.
 * 0 when every byte was written, else -1 with errno set (EIO when write
 * returned 0: no progress). */
int bb_write_all(int fd, const void *p, size_t n);

#endif
