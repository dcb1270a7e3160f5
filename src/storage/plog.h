/* SPDX-License-Identifier: MIT */
/*
 * plog.h - one partition log: a directory of segment files (storage contract
 * sections 2, 4, 5, 7, 8; docs/Storage.md).
 *
 * The engine knows nothing of topics, HTTP or LevelDB: it is given a
 * directory and a struct pulse_plog_config, and serves appends, reads,
 * syncs, trims and stats.
 *
 * Offsets and visibility
 *   log start  - the first offset still stored (advances on trim);
 *   log end    - LEO: the offset the next appended record will get; counts
 *                bytes written to the page cache but maybe not yet durable;
 *   high watermark (HW) - the end of the durable log. Readers never see an
 *                record at or past HW, so nothing a crash can take back is
 *                ever served, and no offset is handed out twice.
 *
 * Concurrency
 *   Appends serialize on the writer lock. Readers never take it: they read a
 *   published bound (HW and the durable byte end) with acquire loads, and the
 *   segment list under a short separate lock, holding a reference on a
 *   segment while they pread from it. Segment files are append-only, so
 *   bytes below a published bound never change under a reader.
 *
 * Durability
 *   pulse_plog_append_async writes a batch into the page cache and returns
 *   its offsets without waiting. pulse_plog_wait_durable / pulse_plog_sync
 *   are group commit: one fdatasync covers every batch written before it
 *   started; concurrent waiters share it (leader/follower: whoever finds no
 *   sync running runs one, the others wait for it and re-check).
 *   pulse_plog_append is append_async + the wait that the sync mode asks for:
 *   every-write waits for durability; interval returns at once and syncs
 *   inline only when the interval has elapsed.
 *   A write that fails for lack of space (ENOSPC, EDQUOT) is cut back and
 *   refused with PULSE_NOSPACE; nothing else changes, and appends succeed
 *   again once there is room. Any other failed write, and every failed
 *   fdatasync, fences the log: every later append and every waiter gets
 *   PULSE_FENCED until the log is reopened, by pulse_plog_reopen in process
 *   or by a restart (recovery decides what survived). A failed write is cut
 *   back to the durable size first.
 *
 * Checkpoints
 *   The snapshot file is the log's durable checkpoint: it names the active
 *   segment and how much of it was durable, which is what tells recovery a
 *   damaged tail of acknowledged data (kept as corruption, its offsets never
 *   given out again) from a torn write (cut). It is rewritten at rotation,
 *   trim and close, and by pulse_plog_checkpoint, which the owner calls
 *   after its syncs: at most once per checkpoint_interval_ms, and only when
 *   the durable end moved. Data that became durable less than that before a
 *   crash is proven by nothing but itself: if the crash also damaged it,
 *   and nothing valid follows, it is cut as a torn tail.
 *
 * Epochs
 *   pulse_plog_reopen discards every byte that was not durable when the log
 *   fenced, and offsets from the durable end on are given out again. Each
 *   reopen starts a new epoch. An append made in epoch E (as
 *   pulse_plog_append_async reports it) is durable exactly when HW reached
 *   its end while the epoch was still E: then the reopen that ended E kept
 *   it (everything below the last HW of an epoch keeps its offsets through
 *   the reopen); otherwise it was discarded, and HW passing its end later
 *   means other data. pulse_plog_fate applies the rule. The epoch
 *   moves before HW does, under sync_lock, so a reader of HW and then the
 *   epoch never takes the new HW for the old epoch's.
 */
#ifndef PULSE_STORAGE_PLOG_H
#define PULSE_STORAGE_PLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_buf;
struct pulse_fdcache;
struct pulse_io;
struct pulse_plog;

enum pulse_sync_mode {
    PULSE_SYNC_EVERY_WRITE = 0, /* acknowledge only after fdatasync */
    PULSE_SYNC_INTERVAL = 1     /* acknowledge after write; fsync at most every sync_interval_ms */
};

#define PULSE_PLOG_DEFAULT_SEGMENT_BYTES (512ull * 1024 * 1024)
#define PULSE_PLOG_MIN_SEGMENT_BYTES 1024ull
/* Index positions are 32-bit: a segment must stay below 2 GiB. */
#define PULSE_PLOG_MAX_SEGMENT_BYTES (2ull * 1024 * 1024 * 1024 - 1)
#define PULSE_PLOG_DEFAULT_INDEX_INTERVAL 4096u

/* Called after every fdatasync of the log with its duration; for metrics.
 * Thread: whichever thread ran the sync. Must not call back into the plog. */
typedef void (*pulse_plog_sync_observer_fn)(void *arg, int64_t duration_us, bool ok);

struct pulse_plog_config {
    uint64_t segment_max_bytes;    /* roll when the active segment would pass this */
    uint32_t index_interval_bytes; /* an index entry per this many bytes of data */
    enum pulse_sync_mode sync_mode;
    uint32_t sync_interval_ms; /* interval mode only */
    const struct pulse_io *io; /* NULL = pulse_io_posix() */
    /* The descriptor cache the segments' files are opened through
     * (fdcache.h), shared by every log of a broker; it must outlive the
     * log. NULL = a private one of PULSE_FDCACHE_DEFAULT_CAPACITY. */
    struct pulse_fdcache *fdcache;
    pulse_plog_sync_observer_fn sync_observer; /* nullable */
    void *sync_observer_arg;
    /* pulse_plog_checkpoint writes the snapshot at most this often (0: at
     * every call where the durable end moved). */
    uint32_t checkpoint_interval_ms;
    /* The log's offsets have no gaps: every batch starts where the one
     * before it ended, in the same segment or across segments (nothing is
     * ever compacted away). The owner knows this (the broker sets it for
     * cleanup=delete topics); the engine cannot tell it from the files.
     * Recovery then takes a gap for lost data and records it as a missing
     * range (a sealed segment deleted or cut at a batch boundary; see
     * docs/Storage.md "The log end never goes back"), and readers take a
     * batch that does not follow on for suspect (its CRC is checked). */
    bool contiguous;
};

/* Fills cfg with the defaults: 512 MiB segments, 4096-byte index interval,
 * every-write, 1000 ms interval, posix io, no observer, 1000 ms between
 * checkpoints, not contiguous. */
void pulse_plog_config_init(struct pulse_plog_config *cfg);

/* What recovery did when the log was opened (docs/Storage.md "Recovery"). */
struct pulse_plog_recovery {
    bool used_snapshot;          /* the snapshot fast path was taken */
    uint32_t segments;           /* segments found */
    uint32_t indexes_rebuilt;    /* index files rebuilt from data */
    uint64_t truncated_bytes;    /* torn-tail bytes cut from the active segment */
    uint32_t corrupt_segments;   /* segments holding damaged bytes (found now or before) */
    uint32_t damaged_ranges;     /* damaged or missing ranges known after the open */
    uint64_t damaged_bytes;      /* bytes inside damaged ranges */
    uint32_t new_damaged_ranges; /* of those, found by this open (logged at error level) */
    uint32_t forensic_copies;    /* segment files copied to forensics/ */
    int64_t leo_raised;          /* offsets the log end was raised past the last valid batch */
    uint32_t temp_files_removed; /* .tmp-* leftovers deleted */
    /* Nothing needed syncing: the snapshot proved the active segment
     * durable as it is and no file was made (recover.c proven_synced). */
    bool sync_skipped;
    int64_t elapsed_us;
    /* Snapshot version 2 (recover.c): sealed segments restored from their
     * snapshot record (no batch header inside them read), and whether the
     * active segment's index prefix below the checkpoint was taken on the
     * snapshot's CRC of it. */
    uint32_t seals_trusted;
    bool active_index_trusted;
};

/*
 * Opens (creating if missing) the log in dir, running recovery: the snapshot
 * fast path when the snapshot matches the files, else the full scan.
 * rec_out (nullable) reports what recovery did.
 * On failure *plog_out is untouched. PULSE_INVALID for a bad config.
 * Thread: any; the caller must not open one directory twice.
 */
pulse_status_t pulse_plog_open(const char *dir, const struct pulse_plog_config *cfg, struct pulse_plog **plog_out,
                               struct pulse_plog_recovery *rec_out);

/*
 * Syncs what is written, writes the snapshot (unless fenced, or the file
 * already says the durable state) and frees the log. No other call may be
 * running or follow. Slices handed out earlier stay valid (their
 * descriptors are the caller's). NULL is a no-op.
 * Returns the status of the final sync/snapshot; the log is freed anyway.
 */
pulse_status_t pulse_plog_close(struct pulse_plog *plog);

/*
 * Appends one encoded batch (pulse_batch_encode). The log rewrites its
 * baseOffset with the next offset and patches its CRC, so batch is
 * modified. The batch is verified first: a batch that does not decode is
 * refused with PULSE_INVALID and nothing is written. The caller must not
 * change batch during the call (the CRC patch relies on the verified bytes).
 * batch may also hold several batches back to back (an append unit): they
 * get consecutive offsets with no other append between them and go to disk
 * in one write, which is how a caller keeps records whose timestamps span
 * more than one batch's int32 delta contiguous. (A crash that tears that
 * write keeps a prefix of whole batches; none of it was acknowledged.)
 * Rolls to a new segment first when the batch would not fit the active one
 * (a batch larger than segment_max_bytes gets a segment of its own).
 * *base_out gets the batch's first offset; its records occupy
 * [base, base + recordCount) (sparse batches cannot be appended).
 * Returns once the sync mode is satisfied (see the file comment).
 * PULSE_FENCED after an earlier failure; PULSE_NOSPACE when the write found
 * the device full (nothing was written, the log is not fenced);
 * PULSE_IO / PULSE_NOSPACE when the sync failed, PULSE_IO when the write
 * failed otherwise (the log is fenced from then on).
 * Thread: any. Locks: writer lock (not held while waiting for a sync).
 */
pulse_status_t pulse_plog_append(struct pulse_plog *plog, uint8_t *batch, size_t len, int64_t *base_out);

/* Like pulse_plog_append but never waits for a sync, whatever the mode.
 * *end_out (nullable) gets base + recordCount and *epoch_out (nullable) the
 * epoch the batch was written in: the batch is durable once
 * pulse_plog_fate(plog, *epoch_out, *end_out) says so. The caller must not
 * acknowledge it before that (every-write) or must sync itself. */
pulse_status_t pulse_plog_append_async(struct pulse_plog *plog, uint8_t *batch, size_t len, int64_t *base_out,
                                       int64_t *end_out, uint64_t *epoch_out);

/* What became of an append (see "Epochs"). */
enum pulse_plog_fate {
    PULSE_PLOG_PENDING = 0, /* not durable yet; it may still become so */
    PULSE_PLOG_DURABLE,     /* durable, and it stays in the log */
    PULSE_PLOG_LOST         /* it never will be: its epoch ended (or is ending:
                               the log is fenced) before HW reached its end */
};

/* The fate of the append that pulse_plog_append_async placed in epoch
 * epoch, ending at end. An epoch more than PULSE_PLOG_EPOCHS_KEPT (16)
 * reopens old is no longer remembered and counts as lost.
 * Thread: any. Locks: sync_lock, briefly. */
enum pulse_plog_fate pulse_plog_fate(struct pulse_plog *plog, uint64_t epoch, int64_t end);

/* Blocks until HW >= end_offset, running the fdatasync itself if no other
 * thread is (group commit). PULSE_OK, or PULSE_FENCED if the log failed
 * before those bytes were durable. end_offset beyond the log end is
 * PULSE_INVALID. Thread: any. */
pulse_status_t pulse_plog_wait_durable(struct pulse_plog *plog, int64_t end_offset);

/* Like pulse_plog_wait_durable, but never waits for another thread's
 * sync: when HW is short of end_offset and no sync is running, the caller
 * runs one itself (the leader of a group commit: every batch written
 * before it started is covered, whoever wrote it) and returns its result;
 * when a sync is running it returns PULSE_BUSY at once, having waited for
 * nothing. A caller that gets PULSE_BUSY must see to it that a sync runs
 * after the running one (its leader's target may not cover end_offset):
 * the broker hands the publish to its syncer then. Blocks only on its own
 * fdatasync. PULSE_FENCED, PULSE_INVALID as pulse_plog_wait_durable; a
 * failed sync returns its status and fences, as there.
 * Thread: any. Locks: sync_lock (dropped during the fdatasync), wlock
 * briefly to capture the target. */
pulse_status_t pulse_plog_try_sync(struct pulse_plog *plog, int64_t end_offset);

/* Makes everything written so far durable: wait_durable(log end). */
pulse_status_t pulse_plog_sync(struct pulse_plog *plog);

/* True when bytes are written but not yet durable. Lock-free. */
bool pulse_plog_needs_sync(const struct pulse_plog *plog);

/*
 * Writes the snapshot (see "Checkpoints") when the durable state moved
 * since the last one this process wrote and checkpoint_interval_ms have
 * passed since then; also syncs the active segment's index entries so that
 * its descriptor may be closed again. Does nothing on a fenced log.
 * *due_out (nullable) gets the monotonic time (pulse_clock_mono_us) at
 * which a checkpoint that is owed becomes due, INT64_MAX when none is
 * owed: the caller calls again then. A failed snapshot write is returned
 * (and logged) but changes nothing else; a failed index sync fences.
 * Thread: any; meant for the thread that runs the syncs. Locks: wlock
 * briefly, then snap_lock (list_lock, sync_lock briefly inside it); may
 * block on a few fsyncs, during which appends go on.
 */
pulse_status_t pulse_plog_checkpoint(struct pulse_plog *plog, int64_t *due_out);

/* The reopen count (see "Epochs" above). Lock-free. */
uint64_t pulse_plog_epoch(const struct pulse_plog *plog);

/*
 * Brings a fenced log back in process. Waits for a running sync leader to
 * finish, then under the writer lock: cuts the active segment back to its
 * durable size (bytes past it were never covered by a successful fdatasync,
 * and after a failed one their pages cannot be trusted), runs recovery on
 * the directory as pulse_plog_open does (every byte it keeps is CRC-checked
 * and synced) with the running log's HW and durable size as proof, installs
 * the recovered segments, starts a new epoch and lifts the fence. The proof
 * makes the reopen keep everything that was durable: damage below the
 * durable size is kept as corruption (forensic copy, damage record), never
 * cut as a torn tail, and the log end stays at or above the old HW (offsets
 * past the surviving data become a recorded missing range), so no offset a
 * reader saw is given out again. Readers holding a slice or a segment of
 * the old list finish with the right bytes. rec_out (nullable) reports
 * what recovery did.
 * PULSE_OK: appends are accepted again, at the recovered log end.
 * PULSE_INVALID: the log is not fenced. Any other status (an I/O error of
 * recovery): the log stays fenced, with nothing durable changed (try again
 * later); the never-durable bytes are cut already, and recovery may have
 * written its damage record and forensic copies.
 * Never fsyncs a file whose fdatasync failed with unsynced bytes still in
 * it: those are cut first.
 * Thread: any; one reopen of a log at a time. Locks: sync_lock, then
 * wlock -> snap_lock -> list_lock.
 */
pulse_status_t pulse_plog_reopen(struct pulse_plog *plog, struct pulse_plog_recovery *rec_out);

/*
 * Makes the log end at least min_end, for an owner that holds proof the
 * log's high watermark once reached min_end although the files no longer
 * show it (the broker: a consumer cursor is committed only at or below
 * HW, so the highest committed cursor of a partition proves it). When the
 * log end is below min_end, the offsets [log end, min_end) are recorded as
 * a missing range (damage record, written durably first; skipped by reads
 * and reported like any other, logged at error level), and the log end and
 * HW move to min_end, so that those offsets are never handed out again.
 * *raised_out (nullable) gets how many offsets were skipped (0 when the
 * log end already reached min_end: nothing changes then).
 * PULSE_FENCED on a fenced log; PULSE_RANGE when min_end is so far past the
 * active segment's base that its offsets would not fit the 32-bit index;
 * a failed record write (PULSE_IO, PULSE_NOSPACE) changes nothing.
 * Thread: any; meant for the owner right after pulse_plog_open. It syncs
 * whatever was appended first. Locks: wlock, then list_lock and sync_lock
 * briefly; blocks on a sync and on the record's write.
 */
pulse_status_t pulse_plog_raise_end(struct pulse_plog *plog, int64_t min_end, int64_t *raised_out);

int64_t pulse_plog_high_watermark(const struct pulse_plog *plog); /* lock-free */
int64_t pulse_plog_log_start(const struct pulse_plog *plog);      /* lock-free */
int64_t pulse_plog_log_end(const struct pulse_plog *plog);        /* lock-free */
bool pulse_plog_fenced(const struct pulse_plog *plog);            /* lock-free */

/*
 * A run of whole batches from one segment file, for zero-copy sends.
 * The first batch may start before the requested offset (readers skip the
 * records below it). A slice never holds damaged bytes and never steps over
 * a damaged or missing range (docs/Storage.md "Corruption") except before
 * its first batch; then skip_from..skip_to says which offsets it skipped.
 */
struct pulse_slice {
    int fd;               /* dup()'ed descriptor of the segment (caller closes) or -1 */
    uint64_t pos;         /* byte position of the first batch in the file */
    uint64_t len;         /* bytes of whole batches; 0 = no data at this offset */
    int64_t start_offset; /* the requested offset, raised to the log start */
    int64_t next_offset;  /* the offset after the last record in the slice;
                             when len == 0: start_offset, or skip_to when
                             the rest of the durable log is a skipped range */
    int64_t log_start;    /* log start and HW as seen by this read */
    int64_t high_watermark;
    int64_t skip_from; /* offsets [skip_from, skip_to) at or after start_offset */
    int64_t skip_to;   /*   that cannot be served; equal when none were skipped */
    bool skip_damaged; /* true: damaged bytes; false: the offsets are missing */
};

/*
 * Finds the batches holding offset and after it, up to max_bytes but at
 * least one whole batch, never past HW and never across a segment boundary.
 * offset < log start starts at the log start; offset == HW gives len 0;
 * offset > HW is PULSE_RANGE (out->log_start and out->high_watermark are
 * still filled). With want_fd, out->fd is a dup() of the segment descriptor
 * that stays readable even if retention deletes the segment meanwhile.
 * Batch bodies are not read (no CRC check): the bytes below the durable
 * size were verified when they were written or recovered. The walk reads
 * the headers from the index entry before offset to the first batch, and
 * from the entry before the last one within max_bytes on; the index gives
 * the positions of the batches in between (a few header reads per slice,
 * not one per batch), never across damaged bytes or a skipped range.
 * Every header walked is judged: one that cannot be right (a base offset
 * below the end of the batch before it, at or past the next segment's
 * base or HW, or, in a contiguous log, jumping over offsets while its CRC
 * fails) is damage, learned as pulse_plog_read learns it, and the slice is
 * found again past it; PULSE_CORRUPT only if that fails.
 * Thread: any. Locks: segment-list lock and sync_lock briefly; learning
 * damage takes the writer lock once.
 */
pulse_status_t pulse_plog_slice(struct pulse_plog *plog, int64_t offset, uint64_t max_bytes, bool want_fd,
                                struct pulse_slice *out);

/*
 * pulse_plog_slice without the descriptor, then the bytes are copied into out
 * (appended) and every batch is CRC-verified. A batch failing verification is
 * never returned: the read stops before it. Damage that recovery did not know
 * (bit rot since) is learned here: it is logged at error level, located with
 * the recovery rule (segscan.h), added to the log's damaged ranges so that
 * every later read (raw slices too) steps around it, and written to the
 * damage record, so the next open scans that segment whole and keeps a
 * forensic copy. When the first batch was the bad one the read is retried
 * past the damage, so a reader is never stuck; PULSE_CORRUPT only if that
 * fails.
 * info (nullable) describes what was returned.
 * Locks: as pulse_plog_slice; learning damage takes the writer lock once.
 */
pulse_status_t pulse_plog_read(struct pulse_plog *plog, int64_t offset, uint64_t max_bytes, struct pulse_buf *out,
                               struct pulse_slice *info);

/*
 * pulse_plog_read that also keeps what verifying the compressed batches
 * inflated, so a reader of their records does not inflate them again: for
 * each compressed batch appended to out, in order, its plain records
 * section (the length the batch declares; pulse_batch_iter_open_plain) is
 * appended to plain. The read ends before a batch whose plain records
 * would take plain past its max (pulse_buf_init), unless it is the first:
 * a caller gives plain a max of at least PULSE_BATCH_INFLATED_MAX, which
 * bounds what a chunk of highly compressed batches holds. On failure
 * neither buffer changes. PULSE_NOMEM when plain cannot grow.
 */
pulse_status_t pulse_plog_read_plain(struct pulse_plog *plog, int64_t offset, uint64_t max_bytes, struct pulse_buf *out,
                                     struct pulse_buf *plain, struct pulse_slice *info);

/*
 * Positions by time: the offset of the first record whose timestamp is at
 * or after ts (ms since the epoch), below HW; HW when there is none yet
 * (the position a reader waits at for such a record). Never below the log
 * start. How (the cost, in order):
 *   1. the first segment whose newest timestamp reaches ts: memory only
 *      (each segment keeps its max timestamp);
 *   2. in it, pulse_segment_time_seek: a binary search over the sparse
 *      index by the max timestamp of the batch each entry points at, then
 *      a walk over batch headers (log2(entries) + a few 52-byte preads);
 *   3. one pulse_plog_read of the batch found (CRC-verified), whose records
 *      are scanned for the first at or after ts.
 * Exact when timestamps do not decrease along the log (records stamped by
 * the broker); with producer timestamps out of order it is a record at or
 * after ts that no earlier batch by the search's judgement reaches, as
 * with any index of batch maxima. The errors of pulse_plog_read.
 * Thread: any. Locks: list_lock briefly, then those of the reads.
 */
pulse_status_t pulse_plog_offset_for_time(struct pulse_plog *plog, int64_t ts, int64_t *offset_out);

struct pulse_plog_stats {
    int64_t log_start;
    int64_t high_watermark;
    int64_t log_end;
    uint64_t size_bytes; /* all segment data files */
    uint32_t segments;
    uint64_t syncs; /* fdatasyncs done since open */
    bool fenced;
    uint32_t damaged_ranges; /* damaged or missing ranges still in the log */
    uint64_t damaged_bytes;  /* bytes inside them */
};

void pulse_plog_get_stats(struct pulse_plog *plog, struct pulse_plog_stats *out);

/* One segment as seen by retention. */
struct pulse_segment_info {
    int64_t base_offset;
    int64_t next_offset; /* next segment's base, or HW for the active one */
    uint64_t size_bytes;
    int64_t max_timestamp; /* newest record timestamp, INT64_MIN if empty */
    bool active;
};

/* Lists the segments oldest first; *out is allocated (pulse_free). */
pulse_status_t pulse_plog_list_segments(struct pulse_plog *plog, struct pulse_segment_info **out, size_t *n_out);

/*
 * Retention's edit of the list (plog_edit.h, PULSE_PLOG_EDIT_TRIM): deletes
 * the sealed segments before the one whose base offset is
 * keep_from (a base_offset from pulse_plog_list_segments), advances the log
 * start to keep_from, rewrites the snapshot. The check is made under the
 * writer lock: when no listed segment starts at keep_from any more (a
 * reopen or a compaction merge changed the list since it was read),
 * nothing is deleted and PULSE_BUSY is returned (list and plan again); a
 * keep_from at or before the log start deletes nothing. Readers holding a
 * slice or a segment reference finish with correct bytes (the inode lives
 * until they let go). *removed_out gets how many were deleted.
 * Locks: writer lock.
 */
pulse_status_t pulse_plog_trim(struct pulse_plog *plog, int64_t keep_from, size_t *removed_out);

#endif
