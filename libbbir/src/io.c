/*
 * io.c — bb/io.h.
 */
#include "bb/io.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

int bb_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *at = p;
    while (n) {
        ssize_t w = write(fd, at, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        at += w;
        n -= (size_t)w;
    }
    return 0;
}
