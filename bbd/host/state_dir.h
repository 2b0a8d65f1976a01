/*
 * state_dir.h — bbd's state directory: created on first start (mode 0700,
 * parents too), and locked for the life of the daemon so two bbd processes
 * never share one node's key, snapshot and control socket.
 *
 * Layout:  node.key       the node's Ed25519 key (bbd keygen, or created)
 *          snapshot.bbs   the last snapshot (snapshot_file.h)
 *          control.sock   the control socket when no --control is given
 *          lock           held with flock(2) while bbd runs
 */
#ifndef BBD_HOST_STATE_DIR_H
#define BBD_HOST_STATE_DIR_H

#include "bb/status.h"

#define BBD_SNAPSHOT_FILE "snapshot.bbs"
#define BBD_KEY_FILE "node.key"
#define BBD_LOCK_FILE "lock"

/* mkdir -p dir (new directories get mode 0700). BB_EIO names the path. */
int bbd_mkdirs(const char *dir, bb_error *err);

/* Create dir if needed and take its lock. *lock_fd gets the held
 * descriptor (close it to release). BB_ESTATE when another process holds
 * it (the message names the directory and that process's pid). */
int bbd_state_dir_lock(const char *dir, int *lock_fd, bb_error *err);

#endif
