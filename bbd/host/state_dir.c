/*
 * state_dir.c — create and lock the state directory (see state_dir.h).
 */
#include "bbd/host/state_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int bbd_mkdirs(const char *dir, bb_error *err)
{
    char buf[PATH_MAX];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf)
        return bb_error_set(err, BB_EINVAL, "directory path '%.200s' is empty or too long", dir);
    memcpy(buf, dir, n + 1);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return bb_error_set(err, BB_EIO, "cannot create directory %s: %s", buf,
                                strerror(errno));
        *p = c;
        if (!c)
            break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return bb_error_set(err, BB_EIO, "%s is not a directory", dir);
    return BB_OK;
}

int bbd_state_dir_lock(const char *dir, int *lock_fd, bb_error *err)
{
    int rc = bbd_mkdirs(dir, err);
    if (rc)
        return bb_error_prefix(err, "state directory");
    /* it holds the node key and (by default) the control socket: the
     * owner's only, also when it was made by hand with a looser mode */
    struct stat st;
    if (stat(dir, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 077) &&
        chmod(dir, 0700) != 0)
        return bb_error_set(err, BB_EIO, "state directory %s: cannot make it 0700: %s", dir,
                            strerror(errno));
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, BBD_LOCK_FILE) >= sizeof path)
        return bb_error_set(err, BB_EINVAL, "state directory path %s is too long", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return bb_error_set(err, BB_EIO, "state directory lock %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "";
        ssize_t k = pread(fd, pid, sizeof pid - 1, 0);
        pid[k > 0 ? k : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        return bb_error_set(err, BB_ESTATE, "state directory %s is in use by another bbd%s%s%s",
                            dir, *pid ? " (pid " : "", pid, *pid ? ")" : "");
    }
    char line[32];
    int len = snprintf(line, sizeof line, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)len, 0) != len) {
        /* the pid is only a hint for the message above */
    }
    *lock_fd = fd;
    return BB_OK;
}
