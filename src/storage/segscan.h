/* SPDX-License-Identifier: MIT */
/*
 * segscan.h - the one forward iterator over the batches of a segment file,
 * and with it the one rule that separates valid batches from damage
 * (docs/Storage.md "Corruption"). Recovery (segment.c, recover.c) and
 * `pulse-log verify` both walk files with it, so they cannot disagree about
 * where damage starts, where it ends and what follows it.
 *
 * A batch at position q is valid when its header parses, it lies wholly
 * inside the scanned size, pulse_batch_verify accepts it (CRC and record
 * framing), its base offset is at least the expected offset (the end of the
 * previous valid batch, or the start offset), its last offset stays below
 * the limit, and (for a known segment base) its relative offset and q fit
 * the 32-bit index.
 *
 * When the batch at pos is not valid, the iterator looks for the next valid
 * one (a resync) and reports the bytes in between as one damaged range:
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
 * Thread: one iterator is used by one thread; the file must not shrink
 * while it is read. Locks: none.
 */
#ifndef PULSE_STORAGE_SEGSCAN_H
#define PULSE_STORAGE_SEGSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "storage/batch.h"

struct pulse_io;
struct pulse_damage;

#define PULSE_SEGSCAN_RESYNC_BUDGET (1ull << 30)
#define PULSE_SEGSCAN_PROBLEM_MAX 224

struct pulse_segscan {
    const struct pulse_io *io;
    int fd;
    const char *path; /* borrowed, for messages */
    int64_t seg_base; /* < 0 when unknown: no 32-bit index check */
    uint64_t size;    /* bytes considered: [0, size) */
    uint64_t pos;     /* where the next item starts */
    int64_t expect;   /* a batch's base offset must be at least this */
    int64_t limit;    /* and its last offset below this */
    bool seen_batch;  /* a valid batch came before (for messages) */
    const struct pulse_damage *hints; /* borrowed, sorted by pos; nullable */
    size_t nhints;
    uint8_t *buf; /* read window: bytes [buf_pos, buf_pos + buf_len) */
    size_t cap;
    uint64_t buf_pos;
    size_t buf_len;
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
    /* BATCH */
    const uint8_t *batch; /* end - pos bytes; valid until the next call */
    struct pulse_batch_header hdr;
    int64_t last_offset;
    /* DAMAGE */
    int64_t from;       /* the expected offset at pos: the first one lost */
    int64_t next_base;  /* not a tail: the first offset after the damage (the
                           base of the valid batch at end, or a recorded end) */
    bool tail;          /* nothing valid follows: end == size */
    bool torn;          /* the batch at pos runs past size (how a cut-off write looks) */
    bool unresolved;    /* (tail) the resync budget ran out before the end */
    char problem[PULSE_SEGSCAN_PROBLEM_MAX]; /* what is wrong at pos */
};

/* Starts at pos of the file fd (size bytes are considered). expect and
 * limit bound the offsets as described above; hints (nullable, sorted by
 * pos) are damaged ranges found before. Nothing is read yet. */
void pulse_segscan_init(struct pulse_segscan *sc, const struct pulse_io *io, int fd, const char *path,
                        int64_t seg_base, uint64_t size, uint64_t pos, int64_t expect, int64_t limit);
void pulse_segscan_set_hints(struct pulse_segscan *sc, const struct pulse_damage *hints, size_t n);
void pulse_segscan_fini(struct pulse_segscan *sc);

/* The next item. PULSE_OK with *it filled (kind END at the end), or
 * PULSE_IO (logged) / PULSE_NOMEM when reading itself failed. After a BATCH
 * the expected offset becomes its last offset + 1, after a DAMAGE that is
 * not a tail it becomes next_base (the range owns the offsets up to it). */
pulse_status_t pulse_segscan_next(struct pulse_segscan *sc, struct pulse_segscan_item *it);

#endif
