/* SPDX-License-Identifier: MIT */
/*
 * segment.h - one segment of a partition log: the data file
 * NNNNNNNNNNNNNNNNNNNN.log, its sparse index NNNNNNNNNNNNNNNNNNNN.index, and
 * the bounds published to lock-free readers (storage contract sections 2, 4).
 *
 * Internal to src/storage: the struct is visible so that plog.c and
 * recover.c can reach the published bounds without a call per field; other
 * layers only see struct pulse_plog.
 *
 * Lifetime: a segment is reference counted. pulse_segment_open returns one
 * reference; the segment list of the log holds one per listed segment;
 * readers hold one while they pread. The last pulse_segment_release closes
 * its descriptors.
 *
 * Descriptors: a segment owns none. Its two files are struct pulse_fdc_file
 * of the log's descriptor cache (fdcache.h), opened on demand: whoever
 * reads or writes a file pins it for the duration (pulse_segment_pin for
 * the data file), so the cache never closes a descriptor under its user,
 * and a sealed segment nobody reads costs no descriptor at all. Its index
 * table lives in memory. Before a segment's path is unlinked (trim,
 * compaction) or replaced (compaction) while others may still hold it,
 * pulse_segment_retire keeps its data descriptor open for them.
 *
 * Locks:
 *   - the log's writer lock guards the writer-only fields (marked W) and the
 *     stores to the atomic bounds;
 *   - index_lock guards index (the writer appends, readers look up);
 *   - atomics are published with release and read with acquire.
 */
#ifndef PULSE_STORAGE_SEGMENT_H
#define PULSE_STORAGE_SEGMENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "storage/fdcache.h"
#include "storage/index.h"
#include "storage/segscan.h"
#include "storage/snapshot.h"

struct pulse_damage;
struct pulse_io;

struct pulse_segment {
    const struct pulse_io *io;
    int64_t base;               /* base offset, from the file name */
    struct pulse_fdc_file data; /* NNN.log, through the cache */
    struct pulse_fdc_file idx;  /* NNN.index, through the cache */
    char *log_path;             /* owned */
    char *index_path;           /* owned */
    atomic_uint refs;

    pthread_mutex_t index_lock;
    struct pulse_index index; /* index_lock */

    _Atomic uint64_t size;         /* written byte end (readable end once sealed) */
    _Atomic uint64_t durable_size; /* readers never read at or past this */
    _Atomic int64_t next_offset;   /* offset after the last batch in the file */
    _Atomic int64_t max_ts;        /* newest record timestamp, INT64_MIN if none */
    _Atomic size_t index_synced;   /* entries known durable in the index file */

    uint64_t since_entry;      /* W: data bytes appended since the last index entry */
    size_t index_written;      /* W: entries written to the index file */
    uint64_t dirty_ticket;     /* W: pulse_fdc_dirty ticket of the last append */
    uint64_t idx_dirty_ticket; /* W: the same for the last index entry written */

    /* The snapshot record of this segment once it is sealed (snapshot.h),
     * computed once (pulse_segment_describe) or restored from the record
     * recovery trusted: the owning log's snap_lock. */
    struct pulse_snapshot_seal seal;
    bool have_seal;
};

/*
 * File names (docs/Storage.md section 2). The one place that formats and
 * parses them: the engine, recovery and pulse-log all use these.
 *   <base>.log, <base>.index      a segment's data and index file; base is
 *                                 its base offset in 20 decimal digits
 *   <first>-<end>.merge           the data of a compaction merge of the
 *                                 segments in [first, end), waiting to be
 *                                 renamed over <first>.log (plog_edit.h)
 *   .tmp-<who>-<base>.<ext>.tmp   a temp file (never a ".log" suffix, and
 *                                 recovery deletes every ".tmp-" file)
 */

/* Formats "<dir>/<base %020>.<ext>" into a new string (pulse_free). NULL on
 * out of memory. */
char *pulse_segment_path(const char *dir, int64_t base, const char *ext);

/* Parses "<20 digits>.<ext>" (ext without its dot: "log", "index"):
 * true, with the base, for such a name whose number fits int64. */
bool pulse_segment_parse_file_name(const char *name, const char *ext, int64_t *base_out);

/* Parses a segment data file name "<20 digits>.log". Returns false for any
 * other name. */
bool pulse_segment_parse_name(const char *name, int64_t *base_out);

/* "<dir>/<first %020>-<end %020>.merge" (pulse_free), NULL on out of memory. */
char *pulse_segment_merge_path(const char *dir, int64_t first, int64_t end);

/* Parses "<20 digits>-<20 digits>.merge" with first < end. */
bool pulse_segment_parse_merge_name(const char *name, int64_t *first_out, int64_t *end_out);

/* "<dir>/.tmp-<who>-<base %020>.<ext>.tmp" (pulse_free), NULL on out of
 * memory. */
char *pulse_segment_temp_path(const char *dir, const char *who, int64_t base, const char *ext);

/*
 * The segment with this base in dir, its files opened on demand through
 * cache. With create, both files are opened now (created when missing,
 * never truncated) and handed to the cache; without, nothing is opened
 * (the data file must exist by the time it is pinned). The caller owns one
 * reference. Bounds start at zero; the caller sets them (recovery or
 * rotation). Creating files does not fsync the directory: the caller must,
 * before anything in the segment is acknowledged.
 * PULSE_NOFILE when out of descriptors, PULSE_IO / PULSE_NOSPACE (logged).
 */
pulse_status_t pulse_segment_open(const struct pulse_io *io, struct pulse_fdcache *cache, const char *dir, int64_t base,
                                  bool create, struct pulse_segment **seg_out);

/*
 * The bounds of a segment with data, set in one place
 * (pulse_segment_set_bounds) by whoever makes such a segment: recovery
 * (what its scan kept) and the log's compaction edits (a rewritten or
 * merged segment: plog_edit.c). A segment pulse_segment_open makes starts
 * empty at its base, which is what rotation wants.
 */
struct pulse_segment_bounds {
    uint64_t size;        /* bytes of data: the written end, all of it durable */
    int64_t next_offset;  /* the offset after its last batch, or the next
                             segment's base for a sealed one */
    int64_t max_ts;       /* newest record timestamp, INT64_MIN if none */
    uint64_t since_entry; /* data bytes after the last index entry;
                             UINT64_MAX: the next appended batch gets one */
};

/* Sets seg's bounds, and records every entry of its in-memory index as
 * written and durable in its index file (the caller wrote and synced it).
 * Caller: the only user of seg (not listed yet), or holds the log's writer
 * lock. */
void pulse_segment_set_bounds(struct pulse_segment *seg, const struct pulse_segment_bounds *b);

/* Replaces seg's in-memory index by a copy of idx. PULSE_NOMEM (seg's
 * index is then empty). Locks: index_lock. */
pulse_status_t pulse_segment_copy_index(struct pulse_segment *seg, const struct pulse_index *idx);

/* Opens both files now, creating them when missing (never truncating), and
 * hands them to the cache (see pulse_segment_open with create). */
pulse_status_t pulse_segment_create_files(struct pulse_segment *seg);

/* Pins the data file (see fdcache.h) and gives its descriptor, valid until
 * pulse_segment_unpin. PULSE_NOFILE / PULSE_IO (logged). */
pulse_status_t pulse_segment_pin(struct pulse_segment *seg, int *fd_out);
void pulse_segment_unpin(struct pulse_segment *seg);

/* The data file's size on disk. */
pulse_status_t pulse_segment_file_size(struct pulse_segment *seg, uint64_t *size_out);

/* Keeps the data descriptor open until the last reference goes, and never
 * reopens the path: call before the path is unlinked or replaced while
 * others may hold the segment. On failure (PULSE_NOFILE, PULSE_IO) the
 * caller must leave the path alone. Locks: none of the log's needed. */
pulse_status_t pulse_segment_retire(struct pulse_segment *seg);

/* Takes pulse_segment_retire back, for a caller whose unlink or rename
 * failed before the path changed. */
void pulse_segment_unretire(struct pulse_segment *seg);

/* Closes the segment's descriptors that nobody uses (recovery is done with
 * a sealed segment). */
void pulse_segment_close_files(struct pulse_segment *seg);

void pulse_segment_acquire(struct pulse_segment *seg);
/* Drops a reference; the last one closes the files and frees. NULL ok. */
void pulse_segment_release(struct pulse_segment *seg);

/* Adds an index entry in memory and writes it to the index file at its slot.
 * The index file is then dirty (fdcache.h) under idx_dirty_ticket: the
 * caller cleans it once an fdatasync of it covered the entry.
 * PULSE_IO/PULSE_NOSPACE on a write failure (logged), PULSE_NOMEM,
 * PULSE_INVALID when out of order. On any failure the in-memory table is as
 * it was before the call. Locks: takes index_lock; caller holds the writer
 * lock. */
pulse_status_t pulse_segment_index_add(struct pulse_segment *seg, uint32_t rel_offset, uint32_t rel_pos);

/* Finds where to start decoding for offset: the greatest index entry at
 * or before it, or position 0 and the segment base when none (the batch
 * there starts at that offset, and no batch after it starts lower), with
 * what the entry says of its batch (struct pulse_segscan_start, for
 * pulse_segscan_init_at). Locks: index_lock briefly. */
void pulse_segment_lookup(struct pulse_segment *seg, int64_t offset, struct pulse_segscan_start *out);

/* The same for byte pos: the greatest index entry at or before it (back
 * 0), or the back-th entry before that one; position 0 and the segment's
 * base (not named) when there is none. */
void pulse_segment_entry_before(struct pulse_segment *seg, uint64_t pos, size_t back, struct pulse_segscan_start *out);

/*
 * Where the first batch whose maximum timestamp (the larger of its first
 * and last record's) is at or after ts may start, for a time lookup
 * (pulse_plog_offset_for_time): a binary search over the sparse index,
 * reading the 52-byte batch header each probed entry points at, finds the
 * first entry whose batch reaches ts; then the headers of the batches from
 * the entry before it are walked (at most an index interval of bytes and
 * one batch) to the first batch that reaches ts. Reads only headers below
 * bound (the durable size), never a record, and checks no CRC: the answer
 * is where to start reading, and the read verifies what it serves.
 * The search assumes batch timestamps do not decrease along the segment
 * (true for records the broker stamps); where they do, the answer is a
 * batch reaching ts, not necessarily the first one. *base_out gets that
 * batch's base offset; PULSE_EOF when no batch below bound reaches ts
 * (or a header that cannot be parsed ends the walk); PULSE_IO, PULSE_NOFILE.
 * Cost: about log2(entries) + interval/batch-size small preads.
 * Locks: index_lock briefly per probe (never across I/O); pins the data
 * file for the duration.
 */
pulse_status_t pulse_segment_time_seek(struct pulse_segment *seg, int64_t ts, uint64_t bound, int64_t *base_out);

/* Writes the in-memory index over the index file whole, cuts the file to
 * its length and fdatasyncs it. Used after recovery rebuilt an index. */
pulse_status_t pulse_segment_rewrite_index(struct pulse_segment *seg);

/* Closes the index file of a sealed segment whose index is complete and
 * durable, unless someone uses it; the in-memory table stays and serves
 * lookups (only the active segment still appends entries). */
void pulse_segment_close_index(struct pulse_segment *seg);

/* A prefix of an index file that a snapshot vouches for (the active
 * segment's entries below activeSize: snapshot.h active_index_n/_crc). */
struct pulse_segment_trust {
    uint32_t n;     /* entries */
    uint32_t crc;   /* CRC32C of their 8*n bytes */
    int64_t max_ts; /* the newest timestamp among their batches (snapshot.h active_max_ts) */
    bool used;      /* out: the file's prefix matched, its inner entries were not read */
};

/* Loads the index file into seg->index (which must be empty), keeping only
 * the prefix of entries that are sorted, lie below file_size and point at a
 * batch header whose base offset is base + relativeOffset. *clean_out tells
 * whether the whole file was accepted. With trust (nullable) whose n
 * entries' bytes match its CRC, only the first and the last of those n
 * entries have their headers read (and every entry after them, as
 * without). *max_ts_io is raised to the newest timestamp of the headers
 * read. PULSE_IO/PULSE_NOMEM. */
pulse_status_t pulse_segment_load_index(struct pulse_segment *seg, uint64_t file_size, bool *clean_out,
                                        int64_t *max_ts_io, struct pulse_segment_trust *trust);

/*
 * Describes sealed segment seg for the snapshot (struct
 * pulse_snapshot_seal): its data file's size, inode and modification time,
 * the size and CRC32C of the image of its in-memory index table (which is
 * what its index file holds: a sealed segment's file was written, rebuilt
 * or renamed into place from that table) and its newest timestamp. The
 * inode comes from the pinned descriptor and must match a stat of the
 * path, so a path a compaction has just renamed over is never described
 * with the old table: PULSE_BUSY then (the swap writes a snapshot of its
 * own). PULSE_IO, PULSE_NOFILE, PULSE_NOMEM. Locks: index_lock briefly;
 * pins the data file.
 */
pulse_status_t pulse_segment_describe(struct pulse_segment *seg, struct pulse_snapshot_seal *out);

/*
 * Recovery of sealed segment seg from its snapshot record, without reading
 * the batch headers its index names: *ok_out is true, and seg->index (which
 * must be empty) holds the index file's table, only when the data file's
 * size, inode and modification time and the index file's size and CRC32C
 * are the recorded ones, the table decodes whole with its first entry at
 * position 0, and the batch headers at its first and last entries carry
 * their offsets and fit in the file. Otherwise *ok_out is false, seg->index
 * is empty and the caller checks the segment entry by entry. Two small
 * preads of the data file and one read of the index file, whatever the
 * segment's size. PULSE_IO, PULSE_NOFILE, PULSE_NOMEM.
 */
pulse_status_t pulse_segment_restore_sealed(struct pulse_segment *seg, const struct pulse_snapshot_seal *seal,
                                            bool *ok_out);

/* A damaged range a scan found, with what was wrong at its start. */
struct pulse_segment_flaw {
    uint64_t pos; /* damaged bytes [pos, end) (none for a gap: pos == end) */
    uint64_t end;
    int64_t from; /* the offsets they held: [from, to) */
    int64_t to;
    bool torn; /* the batch at pos ran past the end of the file */
    char problem[PULSE_SEGSCAN_PROBLEM_MAX];
};

/* What a scan found. */
struct pulse_segment_scan {
    uint64_t end_pos;                 /* end of the last valid batch (or the start position) */
    int64_t next_offset;              /* offset after the last valid batch's last record */
    int64_t max_ts;                   /* max of the timestamps seen, and of the input */
    uint64_t since_entry;             /* bytes since the last index entry at end_pos */
    struct pulse_segment_flaw *flaws; /* owned (pulse_free): damage that valid batches follow */
    size_t nflaws;
    /* The tail: bytes from end_pos to file_size in which no valid batch
     * was found. Whether it is a torn write or corruption is the caller's
     * decision (recover.c). */
    bool tail;
    struct pulse_segment_flaw tail_flaw; /* pos = end_pos, end = file_size, from = next_offset */
    bool tail_unresolved;                /* the resync search gave up (segscan.h) */
};

/*
 * Walks the batches from byte pos up to file_size with the one iterator of
 * segscan.h (same validity rule, same resync), starting with expect_offset
 * and keeping offsets below limit_offset. Every valid batch that is first
 * in the index, comes at least interval bytes after the previous entry, or
 * is the first after damage or a gap gets an in-memory index entry
 * (since_entry carries the count in; pass UINT64_MAX to force an entry for
 * the first batch). hints (nullable, sorted by pos) are damaged ranges of
 * this file recorded earlier. With contiguous (a log whose offsets have no
 * gaps: plog.h), a valid batch whose base offset lies above the expected
 * one also yields a flaw without bytes (pos == end, the offsets it skips
 * over), since nothing but lost data leaves such a gap. Returns PULSE_OK
 * with *out filled (free out->flaws), or PULSE_IO/PULSE_NOMEM for a
 * failure of the scan itself (not of the data). Changes no file.
 */
pulse_status_t pulse_segment_scan(struct pulse_segment *seg, uint64_t pos, int64_t expect_offset, int64_t limit_offset,
                                  uint64_t file_size, uint32_t interval, uint64_t since_entry, int64_t max_ts,
                                  const struct pulse_damage *hints, size_t nhints, bool contiguous,
                                  struct pulse_segment_scan *out);

/*
 * The offsets the index file says were handed out past the surviving data:
 * when its last entry points at or past end_pos (data that did not survive)
 * but inside the file (an entry at or past file_size names a batch none of
 * whose bytes reached it), and is plausible (the bytes
 * between end_pos and its position could hold the offsets from next_offset
 * up to it, at PULSE_RECORD_MIN_SIZE bytes each), *claim_out gets the
 * offset after that batch: its base plus the record count of a header
 * there that names that base and whose batch fits in the file, else
 * base + 1. Otherwise *claim_out = next_offset. Reads the index file;
 * PULSE_IO.
 */
pulse_status_t pulse_segment_index_claim(struct pulse_segment *seg, uint64_t file_size, uint64_t end_pos,
                                         int64_t next_offset, int64_t *claim_out);

/*
 * What the index file of a lost segment (its .log is gone, its .index is
 * not: nothing Pulse does leaves that, since an index is always removed
 * before its data) proves: the segment existed, so the offsets below base
 * were handed out, and its last entry names a batch the writer numbered,
 * so the offsets up to that batch's base were too. *claim_out gets the
 * offset after that batch's base (base itself for an empty index, or a
 * last entry that is not plausible: not above the one before it, past a
 * segment's size, or, with contiguous, naming more offsets than the bytes
 * before it could hold at PULSE_RECORD_MIN_SIZE each). Reads dir's
 * <base>.index; PULSE_IO (logged), PULSE_NOMEM.
 */
pulse_status_t pulse_segment_orphan_claim(const struct pulse_io *io, const char *dir, int64_t base, bool contiguous,
                                          int64_t *claim_out);

#endif
