/* SPDX-License-Identifier: MIT */
/*
 * plog_int.h - the inside of struct pulse_plog: for the log's own files
 * (plog.c: appends, syncs, reads, reopen; plog_edit.c: the edits of its
 * segment list that maintenance jobs describe), segment.c and recover.c,
 * and their unit tests. Everything else, compaction and retention too,
 * goes through plog.h and plog_edit.h; scripts/check-layers.sh enforces it.
 *
 * Lock order (a lock is only taken while holding locks to its left):
 *
 *   wlock -> snap_lock -> { list_lock | sync_lock | index_lock } -> fdcache mu
 *
 * - wlock, then snap_lock: rotation, trim and close write the snapshot,
 *   and a reopen holds snap_lock over its recovery; the checkpoint
 *   (pulse_plog_checkpoint) takes snap_lock without wlock.
 * - list_lock and sync_lock are never held together, and nothing is
 *   waited for (no I/O, no condition wait) while either is held, except
 *   that sync_cond is waited on with sync_lock.
 * - a segment's index_lock (segment.h) is never held together with
 *   list_lock or sync_lock; the descriptor cache's mutex (fdcache.h) is the
 *   innermost lock of all: the cache is used under any of these, and never
 *   calls back.
 * - I/O may happen under wlock (writes, the rotation's and the reopen's
 *   syncs) and under snap_lock (the snapshot file, and the stat and fstat
 *   of a sealed segment described for the first time: put_snapshot),
 *   never under the others.
 */
#ifndef PULSE_STORAGE_PLOG_INT_H
#define PULSE_STORAGE_PLOG_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/damage.h"
#include "storage/plog.h"
#include "storage/snapshot.h"

struct pulse_fdcache;
struct pulse_segment;

/* Reopens whose final high watermark the log remembers (pulse_plog_fate). */
#define PULSE_PLOG_EPOCHS_KEPT 16u

/* The high watermark an epoch ended with: every append of that epoch whose
 * end is at or below it was durable (and survived the reopen); every other
 * one was discarded. */
struct pulse_plog_epoch_end {
    uint64_t epoch; /* UINT64_MAX: unused slot */
    int64_t hw;
};

/* The damaged and missing ranges of a log (damage.h), sorted by offset.
 * Immutable once published: a change builds a new set and swaps the
 * pointer under list_lock; readers hold a reference while they use it. */
struct pulse_damage_set {
    atomic_uint refs;
    size_t n;
    struct pulse_damage r[];
};

struct pulse_plog {
    char *dir; /* owned */
    struct pulse_plog_config cfg;
    const struct pulse_io *io;
    /* Where the segments' descriptors come from: cfg.fdcache, or one of
     * our own (own_fdcache) when none was given. */
    struct pulse_fdcache *fdcache;
    bool own_fdcache;

    /* Serializes appends, rotation, trim, a reopen, and the brief captures
     * of the sync leader's target and of the checkpoint's index state.
     * Readers never take it, except once to record damage a read found
     * (plog.c record_damage). */
    pthread_mutex_t wlock;

    /* Guards the segment array for readers. Changed only with wlock held
     * too, so the writer may read it (and the active segment, the last one)
     * under wlock alone. Each listed segment holds one reference. */
    pthread_mutex_t list_lock;
    struct pulse_segment **segs;
    size_t nsegs;
    size_t cap;
    struct pulse_damage_set *damage; /* never NULL; one reference held here */

    /* Group commit: at most one leader runs an fdatasync; followers wait on
     * sync_cond. HW, durable sizes and fenced change under sync_lock. */
    pthread_mutex_t sync_lock;
    pthread_cond_t sync_cond;
    bool syncing;

    _Atomic int64_t hw;
    _Atomic int64_t leo;
    _Atomic int64_t log_start;
    atomic_bool fenced;
    /* Bumped by each pulse_plog_reopen, before the fence is lifted and
     * under wlock, so an append made after it reads the new value. */
    _Atomic uint64_t epoch;
    /* sync_lock: ended[e % PULSE_PLOG_EPOCHS_KEPT] is how epoch e ended. */
    struct pulse_plog_epoch_end ended[PULSE_PLOG_EPOCHS_KEPT];
    _Atomic uint64_t syncs;
    _Atomic int64_t last_sync_us; /* monotonic time of the last good sync */

    /* Serializes the writers of the snapshot file and a reopen's recovery
     * (which reads it and removes .tmp-* files); held across that I/O.
     * last_snap is what the file says (all zero when there is none: the
     * state of an empty log, which needs no checkpoint), last written by
     * this process at last_snap_us (monotonic; 0 before). */
    pthread_mutex_t snap_lock;
    struct pulse_snapshot last_snap; /* snap_lock */
    int64_t last_snap_us;            /* snap_lock */
    /* last_snap.leo, for a lock-free look whether HW moved since (a
     * checkpoint pass calls every partition, most of them idle). */
    _Atomic int64_t snap_hw;
    /* snap_lock: the file lacks a sealed record the next write would have
     * (a version 1 file, a segment recovery checked entry by entry, an
     * index it rebuilt), so a clean close writes it even when the durable
     * state did not move. */
    bool snap_owed;
    /* snap_lock: the CRC32C of the first act_n entries of the active
     * segment act_seg (base act_base), carried from one snapshot to the
     * next so a checkpoint only adds the entries appended since. */
    const struct pulse_segment *act_seg;
    int64_t act_base;
    size_t act_n;
    uint32_t act_crc;
};

/*
 * Fences the log (see plog.h "Durability") because a step outside the
 * append path (an edit of plog_edit.c, a sync of the active index) failed
 * in a way only a reopen repairs: who and what (for the log line) name the
 * job and the step. Nothing is cut. Idempotent. Thread: any. Locks: takes
 * sync_lock; the caller may hold wlock.
 */
void pulse_plog_fence(struct pulse_plog *plog, const char *who, const char *what);

/*
 * Writes the snapshot describing the durable state. Caller holds wlock
 * (rotation, trim, close, a raised log end). A failed snapshot write is
 * logged but not fatal: the snapshot is a shortcut and a checkpoint, and a
 * stale or missing one costs a full scan and the proof of the newest data
 * (see pulse_plog_checkpoint). PULSE_FENCED on a fenced log (its state is
 * about to change). Locks: snap_lock, then list_lock and sync_lock briefly.
 */
pulse_status_t pulse_plog_snapshot_locked(struct pulse_plog *plog);

#endif
