/* SPDX-License-Identifier: MIT */
/*
 * snapshot.h - the per-partition recovery checkpoint (storage contract
 * section 8; byte layout in docs/Format.md).
 *
 * The file "snapshot" in a partition directory is exactly 40 bytes: magic
 * 0x53, version 0x01, two zero bytes, a big-endian CRC32C over bytes 8..40,
 * then leo, activeBase, activeSize, activeNext as big-endian int64. It is
 * replaced atomically (temp file, fdatasync, rename, directory fsync), so a
 * crash leaves the old or the new checkpoint, never a mix.
 *
 * Thread: any; the caller serializes writers of one directory.
 */
#ifndef PULSE_STORAGE_SNAPSHOT_H
#define PULSE_STORAGE_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_io;

#define PULSE_SNAPSHOT_SIZE 40u
#define PULSE_SNAPSHOT_MAGIC 0x53u
#define PULSE_SNAPSHOT_VERSION 0x01u
#define PULSE_SNAPSHOT_NAME "snapshot"

struct pulse_snapshot {
    int64_t leo;
    int64_t active_base;
    int64_t active_size;
    int64_t active_next;
};

/* Serializes snap into out (40 bytes). */
void pulse_snapshot_encode(const struct pulse_snapshot *snap, uint8_t out[PULSE_SNAPSHOT_SIZE]);

/* Parses hostile bytes. PULSE_CORRUPT unless len is 40 and magic, version,
 * reserved bytes and CRC are right and the fields are coherent
 * (0 <= activeBase <= activeNext == leo, activeSize >= 0). */
pulse_status_t pulse_snapshot_decode(const uint8_t *buf, size_t len, struct pulse_snapshot *snap);

/* Writes dir/snapshot durably via pulse_io_replace_file. PULSE_IO /
 * PULSE_NOSPACE (logged with path and strerror). */
pulse_status_t pulse_snapshot_write(const struct pulse_io *io, const char *dir, const struct pulse_snapshot *snap);

/* Reads dir/snapshot. PULSE_NOT_FOUND when absent, PULSE_CORRUPT when it does
 * not decode, PULSE_IO on a read error. *snap is written on PULSE_OK only. */
pulse_status_t pulse_snapshot_read(const struct pulse_io *io, const char *dir, struct pulse_snapshot *snap);

#endif
