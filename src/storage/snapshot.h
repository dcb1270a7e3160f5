/* SPDX-License-Identifier: MIT */
/*
 * snapshot.h - the per-partition recovery checkpoint (storage contract
 * section 8; byte layout in docs/Format.md section 3).
 *
 * The file "snapshot" in a partition directory is one of two versions:
 *   - version 1, the contract's layout, exactly 40 bytes: magic 0x53,
 *     version 0x01, two zero bytes, a big-endian CRC32C over bytes 8..40,
 *     then leo, activeBase, activeSize, activeNext as big-endian int64;
 *   - version 2, what this code writes: the same 40 bytes with version
 *     0x02 and the CRC over bytes 8 to the end of the file, then the
 *     active segment's data file identity and a CRC of the prefix of its
 *     index that the checkpoint covers, then one record per sealed segment
 *     (struct pulse_snapshot_seal) that lets recovery trust that segment's
 *     index file after one CRC instead of reading every batch header it
 *     names (recover.c, "sealed records").
 * Both are read; a reader that knows only version 1 (an older Pulse)
 * rejects a version 2 file as corrupt, which the contract answers with the
 * full scan: slower, never wrong.
 * It is replaced atomically (temp file, fdatasync, rename, directory
 * fsync), so a crash leaves the old or the new checkpoint, never a mix.
 *
 * Thread: any; the caller serializes writers of one directory.
 */
#ifndef PULSE_STORAGE_SNAPSHOT_H
#define PULSE_STORAGE_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_io;

#define PULSE_SNAPSHOT_SIZE 40u /* a version 1 file; the common head of both */
#define PULSE_SNAPSHOT_MAGIC 0x53u
#define PULSE_SNAPSHOT_VERSION 0x01u
#define PULSE_SNAPSHOT_VERSION_2 0x02u
#define PULSE_SNAPSHOT_V2_HEAD 72u   /* version 2: bytes before the first seal record */
#define PULSE_SNAPSHOT_SEAL_SIZE 56u /* version 2: bytes per seal record */
/* Version 2 records at most this many sealed segments (older ones get no
 * record and are checked entry by entry), so the file stays under 4 MiB. */
#define PULSE_SNAPSHOT_MAX_SEALS 65536u
#define PULSE_SNAPSHOT_MAX_FILE (PULSE_SNAPSHOT_V2_HEAD + PULSE_SNAPSHOT_MAX_SEALS * PULSE_SNAPSHOT_SEAL_SIZE)
#define PULSE_SNAPSHOT_NAME "snapshot"

/* The contract's fields, in both versions. */
struct pulse_snapshot {
    int64_t leo;
    int64_t active_base;
    int64_t active_size;
    int64_t active_next;
};

/*
 * What proves a sealed segment unchanged since its index was known to
 * match its data: the data file's size, inode and modification time (a
 * rewrite by compaction is a new file, so a new inode; nothing rewrites a
 * sealed file in place), and the index file's size and CRC32C. next is
 * where its offsets ended then (the next segment's base): a segment lost
 * after it changes that, and the gap must be found. max_ts is the
 * segment's newest record timestamp, which recovery would otherwise learn
 * only by reading its batches.
 */
struct pulse_snapshot_seal {
    int64_t base;
    int64_t next;
    uint64_t log_size;
    uint64_t log_ino;
    int64_t log_mtime_ns;
    int64_t max_ts;
    uint32_t index_size;
    uint32_t index_crc;
};

/* What version 2 adds (all zero for a version 1 file). */
struct pulse_snapshot_ext {
    uint8_t version;                   /* as decoded: 1 or 2 (the encoders ignore it) */
    uint64_t active_ino;               /* inode of the active data file; 0: unknown */
    uint32_t active_index_n;           /* entries of the active index below activeSize */
    uint32_t active_index_crc;         /* CRC32C of those entries' 8-byte images */
    int64_t active_max_ts;             /* the active segment's newest record timestamp when written
                                          (INT64_MIN: none); covers at least the vouched entries,
                                          whose batches recovery then does not read */
    struct pulse_snapshot_seal *seals; /* ascending base, all below activeBase */
    size_t nseals;                     /* <= PULSE_SNAPSHOT_MAX_SEALS */
};

/* Serializes snap into out as a version 1 file (40 bytes). Pulse writes
 * version 2; this is for tools and tests that need the old format. */
void pulse_snapshot_encode(const struct pulse_snapshot *snap, uint8_t out[PULSE_SNAPSHOT_SIZE]);

/* Serializes snap and ext as a version 2 file. Returns the bytes
 * (pulse_free) with their count in *len_out, or NULL when out of memory. */
uint8_t *pulse_snapshot_encode_v2(const struct pulse_snapshot *snap, const struct pulse_snapshot_ext *ext,
                                  size_t *len_out);

/* Parses hostile bytes of either version. PULSE_CORRUPT unless magic,
 * version, reserved bytes, length and CRC are right and the fields are
 * coherent (0 <= activeBase <= activeNext == leo, activeSize >= 0; for
 * version 2, records whose ranges [base, next) are in order and do not
 * overlap, below activeBase, index sizes a multiple of 8); PULSE_NOMEM. ext (nullable) gets the
 * version and the version 2 fields; its seals are the caller's to
 * pulse_free (NULL for a version 1 file). */
pulse_status_t pulse_snapshot_decode(const uint8_t *buf, size_t len, struct pulse_snapshot *snap);
pulse_status_t pulse_snapshot_decode_ext(const uint8_t *buf, size_t len, struct pulse_snapshot *snap,
                                         struct pulse_snapshot_ext *ext);

/* Writes dir/snapshot durably via pulse_io_replace_file: pulse_snapshot_write
 * as version 1 (tests, tools), pulse_snapshot_write_ext as version 2.
 * PULSE_IO / PULSE_NOSPACE (logged with path and strerror), PULSE_NOMEM,
 * PULSE_INVALID for more than PULSE_SNAPSHOT_MAX_SEALS records. */
pulse_status_t pulse_snapshot_write(const struct pulse_io *io, const char *dir, const struct pulse_snapshot *snap);
pulse_status_t pulse_snapshot_write_ext(const struct pulse_io *io, const char *dir, const struct pulse_snapshot *snap,
                                        const struct pulse_snapshot_ext *ext);

/* Reads dir/snapshot (either version). PULSE_NOT_FOUND when absent,
 * PULSE_CORRUPT when it does not decode, PULSE_IO on a read error. *snap
 * (and *ext) are written on PULSE_OK only. */
pulse_status_t pulse_snapshot_read(const struct pulse_io *io, const char *dir, struct pulse_snapshot *snap);
pulse_status_t pulse_snapshot_read_ext(const struct pulse_io *io, const char *dir, struct pulse_snapshot *snap,
                                       struct pulse_snapshot_ext *ext);

/* The record of base among n sorted seals, or NULL. */
const struct pulse_snapshot_seal *pulse_snapshot_find_seal(const struct pulse_snapshot_seal *seals, size_t n,
                                                           int64_t base);

#endif
