/*
 * io.c — bb/io.h: whole buffers out to a descriptor, whole files in.
 */
#include "bb/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *errstr(int e, char *buf, size_t cap)
{
    return strerror_r(e, buf, cap); /* GNU variant: returns the text */
}

int bb_read_file(const char *path, size_t max_bytes, uint8_t **out, size_t *out_len,
                 bb_error *err)
{
    char eb[128];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return bb_error_set(err, BB_EIO, "%s: cannot open: %s", path, errstr(e, eb, sizeof eb));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return bb_error_set(err, BB_EIO, "%s: cannot stat: %s", path, errstr(e, eb, sizeof eb));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return bb_error_set(err, BB_EIO, "%s: is a directory, not a file", path);
    }
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > max_bytes) {
        close(fd);
        return bb_error_set(err, BB_ELIMIT, "%s: file is %lld bytes, over the %zu-byte limit",
                            path, (long long)st.st_size, max_bytes);
    }
    /* Regular files: read what fstat promised (and notice growth); other
     * files (pipes): grow until EOF or the limit. */
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 64 * 1024;
    size_t len = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory reading %zu bytes", path, cap);
    }
    for (;;) {
        if (len == cap) {
            if (cap > max_bytes) {
                free(buf);
                close(fd);
                return bb_error_set(err, BB_ELIMIT, "%s: more than %zu bytes, over the limit",
                                    path, max_bytes);
            }
            size_t ncap = cap * 2 > max_bytes + 1 ? max_bytes + 1 : cap * 2;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                close(fd);
                return bb_error_set(err, BB_ENOMEM, "%s: out of memory", path);
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0) {
            int e = errno;
            if (e == EINTR)
                continue;
            free(buf);
            close(fd);
            return bb_error_set(err, BB_EIO, "%s: read failed at byte %zu: %s", path, len,
                                errstr(e, eb, sizeof eb));
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    if (len > max_bytes) {
        free(buf);
        return bb_error_set(err, BB_ELIMIT, "%s: more than %zu bytes, over the limit", path,
                            max_bytes);
    }
    buf[len] = '\0'; /* room is left: the buffer grows before a read fills it */
    *out = buf;
    *out_len = len;
    return BB_OK;
}

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
