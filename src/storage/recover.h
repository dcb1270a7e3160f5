/* SPDX-License-Identifier: MIT */
/*
 * recover.h - log recovery at open (storage contract sections 7 and 8).
 *
 * Turns whatever a crash (or a damaged disk) left in a partition directory
 * into a list of segments whose bytes below their published bounds are
 * whole, CRC-valid batches except inside the damaged ranges it reports,
 * with the active segment's torn tail cut off and everything synced.
 * Internal to src/storage (used by plog.c).
 */
#ifndef PULSE_STORAGE_RECOVER_H
#define PULSE_STORAGE_RECOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "storage/snapshot.h"

struct pulse_damage;
struct pulse_fdcache;
struct pulse_io;
struct pulse_segment;
struct pulse_plog_recovery;

struct pulse_recover_result {
    struct pulse_segment **segs; /* owned array, oldest first; the last is active */
    size_t n;
    int64_t leo;
    struct pulse_damage *damage; /* owned array (pulse_free), sorted by offset: */
    size_t ndamage;              /*   damaged and missing ranges of these segments */
    bool have_snap;              /* the snapshot file decoded, and said snap */
    struct pulse_snapshot snap;
    uint8_t snap_version;         /* its version (snapshot.h), 0 without one */
    uint32_t snap_active_index_n; /* version 2: active index entries it vouched for */
};

/*
 * Recovers dir (which must exist): removes .tmp-* leftovers, then takes the
 * snapshot fast path when the snapshot matches the files, else the full
 * scan, classifies what failed validation (docs/Storage.md "Corruption"),
 * keeps a forensic copy of a segment with new damage and records the damage
 * before it changes any file. Creates the first segment of an empty
 * directory. Segment files are opened through cache, on demand, and a
 * sealed segment's are closed again once it is recovered. On PULSE_OK, res
 * holds one reference per segment (the caller releases them and frees segs
 * and damage); rec (never NULL) says what was done. On failure res is
 * untouched.
 * proof (nullable) is what a running log knows of its own durable state
 * (pulse_plog_reopen: HW as leo, the active segment and its durable size),
 * newer than any snapshot on disk: bytes of that segment below its size
 * are never cut as a torn tail (damage there is kept as corruption), and
 * the log end is at least its leo. Decisions are all made before the first
 * file is changed.
 * contiguous (plog.h) says the log's offsets have no gaps: a gap between
 * segments, or between batches, is then recorded as a missing range.
 * Thread: the opener only; nothing else may use dir meanwhile.
 */
pulse_status_t pulse_recover_run(const struct pulse_io *io, struct pulse_fdcache *cache, const char *dir,
                                 uint32_t index_interval, bool contiguous, const struct pulse_snapshot *proof,
                                 struct pulse_recover_result *res, struct pulse_plog_recovery *rec);

#endif
