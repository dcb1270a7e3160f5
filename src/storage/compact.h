/* SPDX-License-Identifier: MIT */
/*
 * compact.h - log compaction of a partition log (storage contract section 8,
 * "Compaction"; docs/Storage.md "Compaction").
 *
 * One call is one bounded, incremental pass over one log: it maps each key
 * to its newest occurrence over the whole log (every sealed segment plus the
 * durable prefix of the active one), then walks the sealed segments oldest
 * first from where the previous pass stopped, until the pass has evaluated
 * max_bytes_per_pass bytes of them or run for max_pass_ms. Keyless records
 * and the newest record of each key survive, at their offsets, re-encoded
 * into sparse-offset batches (PULSE_BATCH_FLAG_SPARSE). Adjacent segments
 * whose survivors fit one segment (the log's segment_max_bytes) are merged
 * into one file named by the first one's base. The pass reads and writes
 * outside every lock of the log; what it decides it hands the log as an
 * edit of its segment list (plog_edit.h): REMOVE for a segment with no
 * survivor, REPLACE for a rewrite (copy and swap: temp files written and
 * synced here, renamed by the log under its writer lock, directory fsync)
 * or a merge (through a "<first>-<end>.merge" file that recovery
 * completes). The active segment, the log end, the high watermark and the
 * snapshot are never touched.
 *
 * State between passes lives in a struct pulse_compact (one per log): where
 * the next pass starts, which slice of the key space it maps when the log
 * holds more distinct keys than max_keys, and a fingerprint of what the last
 * pass saw, so that a pass over an unchanged, already compacted log reads
 * nothing.
 */
#ifndef PULSE_STORAGE_COMPACT_H
#define PULSE_STORAGE_COMPACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_plog;
struct pulse_compact;

#define PULSE_COMPACT_DEFAULT_TOMBSTONE_RETENTION_MS (24ll * 3600 * 1000)
#define PULSE_COMPACT_DEFAULT_MIN_GAIN_RATIO 0.1
#define PULSE_COMPACT_DEFAULT_MAX_KEYS ((size_t)1 << 18)
#define PULSE_COMPACT_DEFAULT_MAX_BYTES_PER_PASS (1024ull * 1024 * 1024)
#define PULSE_COMPACT_DEFAULT_MAX_PASS_MS 5000
#define PULSE_COMPACT_DEFAULT_BATCH_RECORDS 1000u
#define PULSE_COMPACT_DEFAULT_BATCH_BYTES (1024u * 1024u)

struct pulse_compact_config {
    int64_t tombstone_retention_ms; /* a newest tombstone older than this may go */
    double min_gain_ratio;          /* rewrite only if it shrinks a segment by this share */
    size_t max_keys;                /* cap on the dedupe map's entries (>= 1) */
    uint64_t max_bytes_per_pass;    /* sealed bytes evaluated per pass (>= 1); at least one segment */
    int64_t max_pass_ms;            /* no segment is started after this long; 0 = no time bound */
    uint32_t batch_max_records;     /* records per rewritten batch (>= 1) */
    uint32_t batch_max_bytes;       /* bytes per rewritten batch, header included (before compression) */
    unsigned codec;                 /* PULSE_BATCH_CODEC_* of rewritten batches (the topic's compression) */
};

/* What one pass did. reclaimed bytes = bytes_before - bytes_after. */
struct pulse_compact_result {
    uint32_t segments_scanned;     /* sealed segments evaluated for a rewrite */
    uint32_t segments_rewritten;   /* rewrites committed (a merge counts once) */
    uint32_t segments_merged;      /* segments merged into an earlier one (files removed) */
    uint32_t segments_deleted;     /* segments whose every record was dropped */
    uint32_t skipped_by_gain_gate; /* rewrites discarded by the gain gate */
    bool budget_reached;           /* stopped at max_bytes_per_pass or max_pass_ms;
                                      the next pass continues from there */
    uint64_t bytes_before;         /* size of the evaluated segments before */
    uint64_t bytes_after;          /* and after the pass */
    int64_t duration_us;
};

/* Fills cfg with the defaults above (24 h tombstone retention, gain 0.1,
 * 1<<18 keys, 1 GiB / 5 s per pass, 1000 records / 1 MiB per batch, no
 * compression). With a codec, or a segment that holds compressed batches,
 * the gain gate compares the plain size of what survives with the plain
 * size of the whole segment, since the stored sizes do not compare. */
void pulse_compact_config_init(struct pulse_compact_config *cfg);

/*
 * Creates the per-log compaction state. *out is owned by the caller and
 * freed with pulse_compact_destroy. PULSE_NOMEM.
 * Thread: any. One state belongs to one log; do not share it between logs.
 */
pulse_status_t pulse_compact_create(struct pulse_compact **out);

/* Frees the state. NULL is a no-op. */
void pulse_compact_destroy(struct pulse_compact *comp);

/*
 * Runs one pass on plog with the state comp (see the file comment). now_ms is
 * the wall-clock time tombstone expiry is measured against. out (nullable)
 * reports what the pass did; it is filled on failure too, with what was
 * committed before the failure.
 *
 * Statuses: PULSE_OK (also when there was nothing to do); PULSE_INVALID for
 * a bad config; PULSE_FENCED when the log is fenced; PULSE_IO/PULSE_NOSPACE
 * for a failed temp write, sync, rename, unlink or directory fsync (temps
 * are removed; what was committed before stays committed, and a failure
 * between the renames leaves files that recovery accepts; a failed
 * directory fsync fences the log, since it is never retried, and so does
 * any failure after a rewrite's first rename (the list no longer describes
 * the files) or part way through a merge, whose reopening lets recovery
 * finish the merge: see plog_edit.h); PULSE_NOMEM;
 * PULSE_TOO_LARGE when even the finest key slice does not fit max_keys.
 * Corrupt batches are not an error: a segment holding one is left untouched.
 *
 * Thread: the log's maintenance thread; never two passes on one log at once,
 * and not concurrently with pulse_plog_trim of the same log (retention and
 * compaction share one maintenance loop). Appends, syncs, reads,
 * checkpoints (the syncer) and an in-process reopen (the heal thread) may
 * run meanwhile: every commit checks under the writer lock that the
 * segments it replaces are still listed (a reopen lists new ones) and does
 * nothing otherwise. Locks: takes the segment-list lock briefly to capture the
 * segment list (pulse_plog_capture), and the writer lock (then the list
 * lock inside it) only inside pulse_plog_apply, for each commit or deletion
 * (a merge holds it for its renames, unlinks and three directory fsyncs);
 * no lock is held while reading or writing temp files. May block on disk
 * I/O for up to about max_pass_ms plus one commit.
 */
pulse_status_t pulse_compact_run(struct pulse_compact *comp, struct pulse_plog *plog,
                                 const struct pulse_compact_config *cfg, int64_t now_ms,
                                 struct pulse_compact_result *out);

/*
 * A one-off pass with fresh state: pulse_compact_create, pulse_compact_run,
 * pulse_compact_destroy. It always starts at the oldest sealed segment,
 * cannot skip an unchanged log, and past the key cap only ever compacts the
 * first key slice, so a maintenance loop should keep a struct pulse_compact
 * per log and call pulse_compact_run instead.
 * Same statuses, thread and lock rules as pulse_compact_run.
 */
pulse_status_t pulse_compact_pass(struct pulse_plog *plog, const struct pulse_compact_config *cfg, int64_t now_ms,
                                  struct pulse_compact_result *out);

#endif
