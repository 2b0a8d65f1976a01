/*
 * snapshot_file.h — the engine snapshot on disk (DESIGN.md: snapshot on
 * SIGTERM to the state dir, restore on start).
 *
 * File layout (little-endian):
 *   0  "BBDSNAP\0"     magic
 *   8  u32 version      1
 *   12 u32 reserved     0
 *   16 u64 length       of the engine snapshot bytes that follow
 *   24 u64 checksum     FNV-1a-64 of those bytes
 *   32 ...              bb_engine_snapshot() output
 * Written atomically (temporary file path.tmp, fsync, rename, fsync of the
 * directory), so a crash mid-write leaves the previous snapshot intact;
 * the temporary file such a crash leaves is removed at the next start.
 * Read back as untrusted input: size-capped before allocating, and a bad
 * magic, version, length or checksum is an error naming the file.
 */
#ifndef BBD_HOST_SNAPSHOT_FILE_H
#define BBD_HOST_SNAPSHOT_FILE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/status.h"

#define BBD_SNAPSHOT_HEADER_LEN 32

/* A write killed before its rename leaves path.tmp behind (never read:
 * the previous snapshot is intact). Remove it; removed gets its name when
 * there was one ("" when not), so the caller can say so. BB_EIO names it
 * when it cannot be removed. */
int bbd_snapshot_remove_leftover(const char *path, char removed[PATH_MAX], bb_error *err);
int bbd_snapshot_write(const char *path, const uint8_t *data, size_t len, bb_error *err);
/* *out is malloc'd (caller frees). BB_ENOTFOUND when path does not exist;
 * BB_ELIMIT over max_bytes; BB_EDECODE for a damaged file. */
int bbd_snapshot_read(const char *path, size_t max_bytes, uint8_t **out, size_t *out_len,
                      bb_error *err);

#endif
