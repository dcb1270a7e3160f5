/* SPDX-License-Identifier: MIT */
/*
 * plog_edit.h - changes to a log's segment list that a maintenance job
 * describes and the log applies (leveldb's VersionEdit and
 * VersionSet::LogAndApply). For src/storage's maintenance jobs: compaction
 * (compact.c) and retention (retention.c, through pulse_plog_trim).
 *
 * The log owns its segment list, the files of its listed segments and its
 * locks. A job never touches them: it captures the list (references on the
 * segments and the bytes it may read of each), reads and writes whatever
 * it needs outside every lock, and hands the log an edit:
 *
 *   TRIM     remove every segment below the one whose base is keep_from
 *            (retention: pulse_plog_trim builds this edit);
 *   REMOVE   remove these listed sealed segments (compaction: every record
 *            in them is garbage);
 *   REPLACE  replace these n adjacent listed sealed segments by one new
 *            segment, named by the first one's base, whose data and index
 *            the job wrote to temp files and synced (compaction: a rewrite
 *            when n == 1, a merge when n > 1).
 *
 * pulse_plog_apply validates the edit under the writer lock (the log is
 * not fenced, the segments are still listed (and adjacent, for REPLACE);
 * else nothing is done), then changes the files in the crash-safe order of
 * docs/Storage.md, syncs the directory, changes the list under the list
 * lock, and fences the log whenever a failure leaves the files and the
 * list describing different things. Throughout:
 *   - a segment's data descriptor is retired (segment.h) before its path
 *     is unlinked or replaced, so readers holding the segment keep the old
 *     inode; a failure before the path changed takes it back (unretire);
 *   - every crash window has a failpoint (common/failpoint.h) that the
 *     crash tests arm: plog_trim_mid, compact_between_renames,
 *     compact_before_dir_fsync, compact_merge_after_marker,
 *     compact_merge_between_unlinks, compact_merge_before_renames,
 *     compact_merge_between_renames, compact_merge_before_dir_fsync;
 *   - a new segment gets its bounds from pulse_segment_set_bounds.
 * Recovery finishes a merge that a crash interrupted (recover.c).
 */
#ifndef PULSE_STORAGE_PLOG_EDIT_H
#define PULSE_STORAGE_PLOG_EDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_index;
struct pulse_plog;
struct pulse_plog_config;
struct pulse_segment;
struct pulse_segscan;

/* The directory and the configuration the log was opened with (io filled
 * in). Both live as long as the log. Thread: any. Locks: none. */
const char *pulse_plog_dir(const struct pulse_plog *plog);
const struct pulse_plog_config *pulse_plog_get_config(const struct pulse_plog *plog);

/* ---- capturing the list ----------------------------------------------- */

/* One segment of the list as a job captured it. */
struct pulse_plog_segref {
    struct pulse_segment *seg; /* a reference, opaque to the job: passed back in edits */
    int64_t base;              /* its base offset */
    uint64_t size;             /* the bytes the job may read: a sealed segment's end, the
                                  active one's durable end (bytes past it may still be cut) */
    const char *path;          /* its data file, for messages; lives with the reference */
};

/*
 * The log's segments, oldest first, the active one last (*n_out >= 1):
 * *refs_out (pulse_plog_capture_free) holds a reference on each. Bytes
 * below each size never change under the job (segments are append-only
 * and only an edit replaces a sealed one). PULSE_NOMEM.
 * Thread: any. Locks: the list lock, briefly.
 */
pulse_status_t pulse_plog_capture(struct pulse_plog *plog, struct pulse_plog_segref **refs_out, size_t *n_out);
void pulse_plog_capture_free(struct pulse_plog_segref *refs, size_t n);

/* Starts a walk (segscan.h, in mode) of the captured bytes [0, size) of
 * ref's data file, offsets checked from its base; the file stays pinned
 * until pulse_plog_segref_unscan, which the caller must call after a
 * success. PULSE_NOFILE / PULSE_IO when the file cannot be opened. */
pulse_status_t pulse_plog_segref_scan(const struct pulse_plog_segref *ref, unsigned mode, struct pulse_segscan *sc);
void pulse_plog_segref_unscan(const struct pulse_plog_segref *ref, struct pulse_segscan *sc);

/* The size of ref's data file on disk (longer than ref->size when recovery
 * published only a valid prefix of a sealed segment). */
pulse_status_t pulse_plog_segref_file_size(const struct pulse_plog_segref *ref, uint64_t *size_out);

/* "<dir>/.tmp-<who>-<base>.<ext>.tmp" in the log's directory (pulse_free;
 * NULL when out of memory): recovery deletes such a file, and it never
 * looks like a segment. */
char *pulse_plog_temp_path(const struct pulse_plog *plog, const char *who, int64_t base, const char *ext);

/* ---- edits -------------------------------------------------------------- */

enum pulse_plog_edit_kind { PULSE_PLOG_EDIT_TRIM = 1, PULSE_PLOG_EDIT_REMOVE, PULSE_PLOG_EDIT_REPLACE };

/* The segment a REPLACE installs: its files as synced temps. */
struct pulse_plog_newseg {
    const char *data_temp;           /* the data, fdatasynced */
    const char *index_temp;          /* its index file (pulse_index_encode of index), fdatasynced */
    const struct pulse_index *index; /* the table index_temp holds (copied) */
    uint64_t size;                   /* bytes of data */
    int64_t max_ts;                  /* newest record timestamp, INT64_MIN if none */
    uint64_t since_entry;            /* data bytes after the last index entry */
};

struct pulse_plog_edit {
    enum pulse_plog_edit_kind kind;
    const char *who;                             /* the job, for log lines and the fence's message */
    int64_t keep_from;                           /* TRIM: the base of the first segment kept */
    const struct pulse_plog_segref *const *segs; /* REMOVE, REPLACE: as captured, */
    size_t n;                                    /*   oldest first, never the active one */
    const struct pulse_plog_newseg *add;         /* REPLACE */
};

struct pulse_plog_edit_result {
    size_t removed;  /* TRIM, REMOVE: segments removed from the list (and their files) */
    bool temp_taken; /* REPLACE: the data temp was renamed (it is no longer the
                        caller's to delete, even when the edit failed after) */
};

/*
 * Applies edit (see the file comment). res (nullable) says what was done,
 * on failure too.
 *
 * TRIM (pulse_plog_trim's contract, plog.h): the segments before the one
 * based at keep_from leave the list, then their files go (index before
 * data, oldest first; a segment still read keeps its descriptor), the
 * directory is fsynced and the snapshot rewritten. A keep_from at or before
 * the log start removes nothing; one that no listed segment starts at any
 * more is PULSE_BUSY (the list changed since the plan: nothing is done).
 * A failed unlink or directory fsync is returned; the segments are off the
 * list anyway.
 *
 * REMOVE: each segment in turn, oldest first: retired, its index then its
 * data file unlinked, then off the list (the log start moves when it was
 * the first). PULSE_BUSY when one is no longer listed; a failed unlink
 * leaves that segment listed and retired no more, and stops. The directory
 * is NOT fsynced: the caller calls pulse_plog_sync_dir once for all its
 * removals (a removal a crash undoes brings back only garbage records).
 *
 * REPLACE: with n == 1, the data temp is renamed over the segment's data
 * file, the index temp over its index file, the directory fsynced, and a
 * new segment struct with the new bounds takes the old one's place. With
 * n > 1 (a merge of segments F..Sn, E the base of the segment after them):
 * the data temp is renamed to "<F>-<E>.merge" and the directory fsynced
 * (from here the merge is decided), S2..Sn are unlinked (each index before
 * its data), the directory fsynced, the index temp renamed over F.index,
 * the merge file over F.log, the directory fsynced, and one segment
 * spanning [F, E) takes the n places. PULSE_BUSY (nothing done) when the
 * segments are no longer listed in a row. Any failure after the first
 * rename fences the log (the reopen's recovery reads the files as they
 * are, and finishes a merge); before it, nothing changed. The temps not
 * renamed stay the caller's to delete (res->temp_taken).
 *
 * PULSE_FENCED on a fenced log (nothing done); PULSE_IO / PULSE_NOSPACE /
 * PULSE_NOFILE for failed file steps (logged); PULSE_NOMEM; PULSE_INVALID
 * for a malformed edit.
 * Thread: one maintenance job per log (edits of one log never run
 * concurrently with each other). Locks: the writer lock for the whole
 * edit (its renames, unlinks and directory fsyncs: appends wait), the
 * list lock inside it for the list change; the snapshot lock for TRIM's
 * snapshot.
 */
pulse_status_t pulse_plog_apply(struct pulse_plog *plog, const struct pulse_plog_edit *edit,
                                struct pulse_plog_edit_result *res);

/*
 * Makes the removals of REMOVE edits durable: one directory fsync. A
 * failure fences the log (who names the job in the log line): an fsync is
 * never retried, since after a failed one the directory's state on disk is
 * unknown and a second one may report success over lost entries; the
 * reopen's recovery reads the directory as it really is.
 * Thread: the job that applied the edits. Locks: none (no list change).
 */
pulse_status_t pulse_plog_sync_dir(struct pulse_plog *plog, const char *who);

#endif
