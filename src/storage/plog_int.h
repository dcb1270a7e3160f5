/* SPDX-License-Identifier: MIT */
/*
 * plog_int.h - the inside of struct pulse_plog, for plog.c, its tests and a
 * later compaction module of src/storage. Never included outside
 * src/storage and its unit tests.
 *
 * Lock order: wlock -> list_lock, wlock -> sync_lock; list_lock and
 * sync_lock are never held together, and nothing is waited for (no I/O, no
 * condition wait) while list_lock is held.
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

    /* Serializes appends, rotation, trim and the sync leader's capture of
     * its target. Readers never take it, except once to record damage a
     * read found (plog.c record_damage). */
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
};

/*
 * Fences the log (see plog.h "Durability") because a step outside plog.c
 * failed in a way only a reopen repairs: what (for the log line) names it.
 * Nothing is cut. Idempotent. Thread: any. Locks: takes sync_lock; the
 * caller may hold wlock.
 */
void pulse_plog_fence(struct pulse_plog *plog, const char *who, const char *what);

#endif
