/* SPDX-License-Identifier: MIT */
/*
 * segscan.h - the one forward iterator over the batches of a segment file
 * or of a buffer of batches, and with it the one rule that separates valid
 * batches from damage (docs/Storage.md "Corruption"). Every walk over
 * batches in src/storage and src/tools uses it: recovery (segment.c,
 * recover.c, and the check of an interrupted merge), the log's reads
 * (plog.c: the slice walk, the CRC check of what a read returns, the
 * location of damage a read meets, the check of an append unit),
 * compaction (compact.c), and pulse-log's dump and verify. So they cannot
 * disagree about where damage starts, where it ends and what follows it.
 *
 * A batch at position q is valid when its header parses, it lies wholly
 * inside the scanned size, pulse_batch_verify accepts it (CRC and record
 * framing), its base offset is at least the expected offset (the end of the
 * previous valid batch, or the start offset), its last offset stays below
 * the limit, and (for a known segment base) its relative offset and q fit
 * the 32-bit index; and a batch at the index entry a walk started from
 * (pulse_segscan_init_at) is the batch that entry names.
 *
 * Modes (the mode argument, flags or-ed together; 0 is recovery's: the
 * whole rule above, and a resync past damage):
 *   PULSE_SEGSCAN_TRUST     the batch at the scan position is judged by its
 *                           header alone (magic, version, flags, counts,
 *                           length within the scanned size, offsets); its
 *                           records and CRC are not read. For bytes below a
 *                           published bound, which were verified when they
 *                           were written or recovered, where the caller
 *                           only needs to know where batches are (the
 *                           log's slice walk, which trusts the index for
 *                           where to start). A sparse batch is still read
 *                           and verified whole: its last offset is only
 *                           known from its records. pulse_segscan_verify
 *                           verifies one batch of such a walk on demand.
 *   PULSE_SEGSCAN_STOP      the first damage ends the walk: it is reported
 *                           as one DAMAGE item from its position to the end
 *                           of the scanned size (tail and unresolved set:
 *                           nothing after it was looked at), then END.
 *   PULSE_SEGSCAN_ANY_ORDER base offsets are not checked at all (neither
 *                           against each other, nor the limit, nor the
 *                           32-bit index): for a file or buffer whose
 *                           offsets mean nothing to the caller (pulse-log
 *                           dump, a unit of batches not yet numbered).
 *
 * When the batch at pos is not valid (and the mode is not STOP), the
 * iterator looks for the next valid one (a resync) and reports the bytes in
 * between as one damaged range; resync candidates are always judged by the
 * whole rule, whatever the mode:
 *   1. a range the caller already knows (hints) that starts at pos ends
 *      where it ended before, if a valid batch starts there (this keeps
 *      recovery repeatable when more data was appended after the damage);
 *   2. else, when the header at pos still parses, its length field names
 *      the next batch: it is taken if that batch is valid, unless a valid
 *      batch starts earlier from which valid batches run exactly onto it
 *      (a flipped bit in the length field can name a later batch; the
 *      intact ones between must not be swallowed);
 *   3. else every later position is tried in order, and the first valid
 *      batch wins.
 * When none is found the damage runs to the end of the scanned size: a
 * *tail*. Whether a tail is a torn write (cut off) or corruption (kept) is
 * not decided here: that needs to know what was durable (recover.c).
 *
 * A resync spends at most PULSE_SEGSCAN_RESYNC_BUDGET bytes of CRC work on
 * candidates; past it the search stops and the rest is reported as an
 * unresolved tail, which recovery keeps rather than cuts.
 *
 * Known limit: step 3 may take a complete, valid batch image stored inside
 * a record value of the damaged batch for the next batch. Step 2 avoids
 * that whenever the damaged batch's length field survived, unless such an
 * image (or a run of them) ends exactly where the damaged batch ends.
 *
 * Sources. pulse_segscan_init walks a file through a descriptor, reading it
 * through one window buffer (the file must not shrink while it is read).
 * pulse_segscan_init_mem walks a buffer of batches in memory, such as what
 * pulse_plog_read returned: nothing is copied, items point into the buffer,
 * and no call can fail.
 *
 * Thread: one iterator is used by one thread. Locks: none.
 */
#ifndef PULSE_STORAGE_SEGSCAN_H
#define PULSE_STORAGE_SEGSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/status.h"
#include "storage/batch.h"

struct pulse_io;
struct pulse_damage;

#define PULSE_SEGSCAN_RESYNC_BUDGET (1ull << 30)
#define PULSE_SEGSCAN_PROBLEM_MAX 224

/* Modes (see the file comment); 0 is the whole rule with resync. */
#define PULSE_SEGSCAN_TRUST 0x1u
#define PULSE_SEGSCAN_STOP 0x2u
#define PULSE_SEGSCAN_ANY_ORDER 0x4u

/*
 * Where a walk over a segment file starts, as its sparse index says
 * (pulse_segment_lookup, pulse_segment_entry_before): at byte pos, with
 * offset base expected there. With named (an index entry is at pos, rather
 * than the start of a segment without one), the batch there must be the
 * one the entry names: base offset exactly base, ending at or before end
 * and holding no offset at or past limit (the next entry's position and
 * offset; UINT64_MAX and INT64_MAX after the last entry). A batch that is
 * not is damage, whatever its CRC says: the index and the data disagree,
 * and a sealed file edited in place with its times put back is trusted by
 * the snapshot's record (docs/Storage.md "Sealed segments from their
 * records"). The check costs nothing: a walk reads that header anyway.
 */
struct pulse_segscan_start {
    uint64_t pos;
    int64_t base;
    uint64_t end;
    int64_t limit;
    bool named;
};

struct pulse_segscan {
    const struct pulse_io *io;
    int fd;                           /* -1 for a buffer */
    const uint8_t *mem;               /* a buffer scan: its bytes (borrowed); NULL for a file */
    unsigned mode;                    /* PULSE_SEGSCAN_* flags */
    const char *path;                 /* borrowed, for messages */
    int64_t seg_base;                 /* < 0 when unknown: no 32-bit index check */
    uint64_t size;                    /* bytes considered: [0, size) */
    uint64_t pos;                     /* where the next item starts */
    int64_t expect;                   /* a batch's base offset must be at least this */
    int64_t limit;                    /* and its last offset below this */
    bool seen_batch;                  /* a valid batch came before (for messages) */
    const struct pulse_damage *hints; /* borrowed, sorted by pos; nullable */
    size_t nhints;
    uint8_t *buf; /* read window: bytes [buf_pos, buf_pos + buf_len) */
    size_t cap;
    bool borrowed; /* buf is the caller's (pulse_segscan_fill), not freed here */
    uint64_t buf_pos;
    size_t buf_len;
    struct pulse_buf inflated;        /* the records of the last compressed batch verified (batch.h) */
    struct pulse_segscan_start start; /* pulse_segscan_init_at; named false otherwise */
};

enum pulse_segscan_kind {
    PULSE_SEGSCAN_END = 0, /* pos reached size */
    PULSE_SEGSCAN_BATCH,   /* a valid batch at [pos, end) */
    PULSE_SEGSCAN_DAMAGE   /* bytes [pos, end) hold no valid batch */
};

struct pulse_segscan_item {
    enum pulse_segscan_kind kind;
    uint64_t pos;
    uint64_t end;
    /* BATCH (hdr also for DAMAGE when parsed is set) */
    const uint8_t *batch; /* end - pos bytes; a file scan: valid until the next
                             call, NULL for a batch a TRUST walk did not read;
                             a buffer scan: inside the buffer, always set */
    struct pulse_batch_header hdr;
    int64_t last_offset;
    /* DAMAGE */
    int64_t from;                            /* the expected offset at pos: the first one lost */
    int64_t next_base;                       /* not a tail: the first offset after the damage (the
                                                base of the valid batch at end, or a recorded end) */
    bool tail;                               /* nothing valid follows: end == size */
    bool torn;                               /* the batch at pos runs past size (how a cut-off write looks) */
    bool unresolved;                         /* (tail) the resync budget ran out before the end,
                                                or a STOP walk did not look past the damage */
    bool parsed;                             /* the header at pos parsed and its batch lies inside
                                                the scanned size (hdr describes it); its length
                                                then names where the next batch should start */
    bool crc_ok;                             /* (parsed) its CRC matched: its record framing or
                                                its offsets are what is wrong */
    char problem[PULSE_SEGSCAN_PROBLEM_MAX]; /* what is wrong at pos */
};

/* Starts at pos of the file fd (size bytes are considered), in mode
 * (PULSE_SEGSCAN_* flags, 0 for the whole rule). seg_base (< 0: unknown),
 * expect and limit bound the offsets as described above. Nothing is read
 * yet. The caller keeps fd open (and the file at least size bytes long)
 * until pulse_segscan_fini. */
void pulse_segscan_init(struct pulse_segscan *sc, const struct pulse_io *io, int fd, const char *path, int64_t seg_base,
                        uint64_t size, uint64_t pos, int64_t expect, int64_t limit, unsigned mode);

/* pulse_segscan_init at start->pos expecting start->base, and with
 * start->named the batch there is judged against its index entry too
 * (struct pulse_segscan_start). */
void pulse_segscan_init_at(struct pulse_segscan *sc, const struct pulse_io *io, int fd, const char *path,
                           int64_t seg_base, uint64_t size, const struct pulse_segscan_start *start, int64_t limit,
                           unsigned mode);

/*
 * Starts at the first byte of the len bytes of batches at buf, in mode.
 * Offsets are only checked for order (the first batch may start anywhere;
 * each later one must start after the one before it ends) unless mode has
 * PULSE_SEGSCAN_ANY_ORDER. buf must stay unchanged until the walk is over;
 * items point into it. pulse_segscan_next never fails on a buffer. The way
 * to walk the batches of a read (pulse_plog_read), whose every batch is
 * whole and verified already:
 *
 *     pulse_segscan_init_mem(&sc, buf.data, buf.len, PULSE_SEGSCAN_TRUST | PULSE_SEGSCAN_STOP);
 *     while (pulse_segscan_next(&sc, &it) == PULSE_OK && it.kind == PULSE_SEGSCAN_BATCH)
 *         ... pulse_batch_iter_init(&bi, it.batch, it.end - it.pos) and its records ...
 *     pulse_segscan_fini(&sc);
 *
 * and, for bytes nobody verified yet, mode PULSE_SEGSCAN_STOP: the walk
 * then ends with a DAMAGE item at the first batch that is not whole and
 * valid.
 */
void pulse_segscan_init_mem(struct pulse_segscan *sc, const uint8_t *buf, size_t len, unsigned mode);

/* hints (nullable, sorted by pos) are damaged ranges found before (used by
 * the resync, step 1). */
void pulse_segscan_set_hints(struct pulse_segscan *sc, const struct pulse_damage *hints, size_t n);

/*
 * Reads bytes [pos, pos + len) of the file (len <= size - pos) into dst,
 * the caller's memory, and makes them the scan's window: headers and
 * batches inside it are taken from there and never read again. For a
 * walk whose caller wants the bytes too (the log's read: its TRUST walk
 * finds where the slice starts, fills the caller's buffer from there, and
 * finds the remaining batch headers in what it read rather than with a
 * pread each). dst must stay until pulse_segscan_fini or the next fill;
 * a later need outside it reads into a window of the scan's own.
 * PULSE_IO (logged) when the read fails or comes up short; the window is
 * then unchanged. Not for a buffer scan (PULSE_INVALID).
 */
pulse_status_t pulse_segscan_fill(struct pulse_segscan *sc, uint64_t pos, uint8_t *dst, size_t len);

/* Frees the read window. The iterator may be started again with _init. */
void pulse_segscan_fini(struct pulse_segscan *sc);

/* Moves the scan to pos, where a batch starting at or after offset expect
 * (nothing below it) is due: a caller that knows the bytes in between
 * (a damaged range it steps over) skips them. */
void pulse_segscan_seek(struct pulse_segscan *sc, uint64_t pos, int64_t expect);

/* The same to an index entry (pulse_segment_entry_before): the batch there
 * must also be the one the entry names, as at pulse_segscan_init_at. */
void pulse_segscan_seek_at(struct pulse_segscan *sc, const struct pulse_segscan_start *start);

/* The next item. PULSE_OK with *it filled (kind END at the end), or
 * PULSE_IO (logged) / PULSE_NOMEM when reading itself failed. After a BATCH
 * the expected offset becomes its last offset + 1, after a DAMAGE that is
 * not a tail it becomes next_base (the range owns the offsets up to it). */
pulse_status_t pulse_segscan_next(struct pulse_segscan *sc, struct pulse_segscan_item *it);

/*
 * The plain records section of the compressed batch of it, the BATCH item
 * the last pulse_segscan_next returned: what its verification inflated
 * (*p, *n; borrowed until the next call on sc). false when the batch is
 * not compressed or the walk judged it by its header (TRUST).
 */
bool pulse_segscan_plain(const struct pulse_segscan *sc, const struct pulse_segscan_item *it, const uint8_t **p,
                         size_t *n);

/* Verifies whole (CRC and record framing) the batch of a BATCH item that a
 * TRUST walk returned: *ok_out says whether it verifies. PULSE_IO / NOMEM
 * (a file scan) when it cannot be read. The item's batch pointer, and
 * those of earlier items, may be stale afterwards. */
pulse_status_t pulse_segscan_verify(struct pulse_segscan *sc, const struct pulse_segscan_item *it, bool *ok_out);

#endif
