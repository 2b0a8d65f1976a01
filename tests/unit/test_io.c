/*
 * test_io.c — bb/io.h: bb_write_all writes every byte or says why not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bb/io.h"

/* 3 MiB to a file, read back byte for byte. */
static void test_write_all_file(void **state)
{
    (void)state;
    size_t n = 3u << 20;
    uint8_t *data = malloc(n), *back = malloc(n);
    assert_non_null(data);
    assert_non_null(back);
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)(i * 131 + (i >> 12));
    FILE *f = tmpfile();
    assert_non_null(f);
    int fd = fileno(f);
    assert_int_equal(bb_write_all(fd, data, n), 0);
    assert_int_equal(bb_write_all(fd, data, 0), 0); /* nothing to write is success */
    assert_int_equal(lseek(fd, 0, SEEK_END), (off_t)n);
    assert_int_equal(pread(fd, back, n, 0), (ssize_t)n);
    assert_memory_equal(back, data, n);
    fclose(f);
    free(data);
    free(back);
}

/* A write that cannot complete is -1 with the kernel's errno. */
static void test_write_all_errors(void **state)
{
    (void)state;
    uint8_t byte = 7;
    errno = 0;
    assert_int_equal(bb_write_all(-1, &byte, 1), -1);
    assert_int_equal(errno, EBADF);

    /* a full non-blocking pipe: the bytes that fit go in, then EAGAIN */
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
    size_t n = (size_t)fcntl(p[1], F_GETPIPE_SZ) + 4096;
    uint8_t *data = calloc(1, n);
    assert_non_null(data);
    errno = 0;
    assert_int_equal(bb_write_all(p[1], data, n), -1);
    assert_int_equal(errno, EAGAIN);
    free(data);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_all_file),
        cmocka_unit_test(test_write_all_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
