/*
 * snapshot_file.c — write and read the snapshot file (see snapshot_file.h).
 */
#include "bbd/host/snapshot_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bb/io.h"
#include "bb/le.h"
#include "bb/types.h"

static const uint8_t MAGIC[8] = {'B', 'B', 'D', 'S', 'N', 'A', 'P', 0};
#define VERSION 1u

static void fsync_dir_of(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* The temporary file a write goes through: path + ".tmp". */
static int tmp_path(const char *path, char tmp[PATH_MAX], bb_error *err)
{
    if ((size_t)snprintf(tmp, PATH_MAX, "%s.tmp", path) >= PATH_MAX)
        return bb_error_set(err, BB_EINVAL, "snapshot path %s is too long", path);
    return BB_OK;
}

int bbd_snapshot_remove_leftover(const char *path, char removed[PATH_MAX], bb_error *err)
{
    removed[0] = '\0';
    char tmp[PATH_MAX];
    int rc = tmp_path(path, tmp, err);
    if (rc)
        return rc;
    if (unlink(tmp) == 0) {
        memcpy(removed, tmp, strlen(tmp) + 1);
        return BB_OK;
    }
    if (errno == ENOENT)
        return BB_OK;
    return bb_error_set(err, BB_EIO, "snapshot %s: cannot remove it: %s", tmp, strerror(errno));
}

int bbd_snapshot_write(const char *path, const uint8_t *data, size_t len, bb_error *err)
{
    char tmp[PATH_MAX];
    int rc = tmp_path(path, tmp, err);
    if (rc)
        return rc;
    uint8_t h[BBD_SNAPSHOT_HEADER_LEN];
    memcpy(h, MAGIC, 8);
    bb_le_put(h + 8, VERSION, 4);
    bb_le_put(h + 12, 0, 4);
    bb_le_put(h + 16, len, 8);
    bb_le_put(h + 24, bb_fnv1a64(data, len), 8);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return bb_error_set(err, BB_EIO, "snapshot %s: %s", tmp, strerror(errno));
    if (bb_write_all(fd, h, sizeof h) || bb_write_all(fd, data, len) || fsync(fd)) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return bb_error_set(err, BB_EIO, "snapshot %s: %s", tmp, strerror(e));
    }
    if (close(fd) || rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return bb_error_set(err, BB_EIO, "snapshot %s: %s", path, strerror(e));
    }
    fsync_dir_of(path);
    return BB_OK;
}

int bbd_snapshot_read(const char *path, size_t max_bytes, uint8_t **out, size_t *out_len,
                      bb_error *err)
{
    *out = NULL;
    *out_len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return bb_error_set(err, errno == ENOENT ? BB_ENOTFOUND : BB_EIO, "snapshot %s: %s",
                            path, strerror(errno));
    struct stat st;
    int rc = BB_OK;
    uint8_t h[BBD_SNAPSHOT_HEADER_LEN];
    uint8_t *buf = NULL;
    uint64_t len = 0;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        rc = bb_error_set(err, BB_EIO, "snapshot %s: not a regular file", path);
        goto done;
    }
    if ((uint64_t)st.st_size < sizeof h ||
        pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h || memcmp(h, MAGIC, 8) != 0) {
        rc = bb_error_set(err, BB_EDECODE, "snapshot %s: not a bbd snapshot (bad header)", path);
        goto done;
    }
    if (bb_le_get(h + 8, 4) != VERSION) {
        rc = bb_error_set(err, BB_EDECODE, "snapshot %s: version %llu, this bbd reads %u", path,
                          (unsigned long long)bb_le_get(h + 8, 4), VERSION);
        goto done;
    }
    len = bb_le_get(h + 16, 8);
    if (len != (uint64_t)st.st_size - sizeof h) {
        rc = bb_error_set(err, BB_EDECODE,
                          "snapshot %s: header says %llu bytes, the file holds %llu", path,
                          (unsigned long long)len,
                          (unsigned long long)((uint64_t)st.st_size - sizeof h));
        goto done;
    }
    if (len > max_bytes) {
        rc = bb_error_set(err, BB_ELIMIT, "snapshot %s: %llu bytes is over the %zu-byte limit",
                          path, (unsigned long long)len, max_bytes);
        goto done;
    }
    if (!(buf = malloc(len ? len : 1))) {
        rc = bb_error_set(err, BB_ENOMEM, "snapshot %s: out of memory", path);
        goto done;
    }
    for (size_t got = 0; got < len;) {
        ssize_t r = pread(fd, buf + got, len - got, (off_t)(sizeof h + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = bb_error_set(err, BB_EIO, "snapshot %s: short read", path);
            goto done;
        }
        got += (size_t)r;
    }
    if (bb_fnv1a64(buf, len) != bb_le_get(h + 24, 8))
        rc = bb_error_set(err, BB_EDECODE, "snapshot %s: checksum mismatch (damaged file)",
                          path);
done:
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *out_len = len;
    return BB_OK;
}
