/* SPDX-License-Identifier: MIT */
/*
 * recover.c - full scan and snapshot fast path (storage contract sections 7
 * and 8; docs/Storage.md "Recovery").
 *
 * Method.
 *   1. Delete every .tmp-* file: a temp file is only ever renamed into place
 *      after it was synced, so one that is still a temp is garbage.
 *   2. List *.log in name order (20-digit names sort as offsets).
 *   3. Fast path when the snapshot decodes and names the last segment as the
 *      active one with a size the file still reaches. Each segment's index
 *      is checked entry by entry against the batch headers it points at; the
 *      bytes from the last good entry to the end are decoded and
 *      CRC-verified. Anything else is the full scan: every batch of every
 *      segment is decoded and CRC-verified, and each index is rebuilt and
 *      compared with the file.
 *   4. The active segment is cut at the end of its last valid batch: a torn
 *      or corrupt tail is what a crash mid-write leaves, and no
 *      acknowledged batch can be behind it because acknowledgement waits for
 *      the fdatasync that would have made those bytes whole.
 *   5. A sealed segment cannot be cut (later segments hold newer data and
 *      offsets must never be reused), so a bad batch inside one ends that
 *      segment's readable range there; the offsets from it to the next
 *      segment's base are unreadable. That is logged as an error naming the
 *      file and byte position, and counted in corrupt_segments.
 *   6. Everything kept is fdatasynced before the log opens with HW = LEO,
 *      since after a process crash the page cache may hold bytes the disk
 *      does not.
 *   Segments are recovered one at a time, each one's files opened through
 *   the descriptor cache and closed again when it is done (the active one's
 *   stay cached), so a log of any number of segments recovers within a few
 *   descriptors.
 */
#include "storage/recover.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "storage/compact.h"
#include "storage/io.h"
#include "storage/plog.h"
#include "storage/segment.h"
#include "storage/snapshot.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Removes .tmp-* files and collects segment bases, sorted. */
static pulse_status_t list_dir(const struct pulse_io *io, const char *dir, int64_t **bases_out, size_t *n_out,
                               uint32_t *temps_out)
{
    DIR *d = NULL;
    int64_t *bases = NULL;
    size_t n = 0, cap = 0;
    uint32_t temps = 0;
    pulse_status_t st = PULSE_OK;
    struct dirent *de;

    d = opendir(dir);
    if (d == NULL) {
        int err = errno;
        PULSE_ERROR("recover: opendir %s failed: %s", dir, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    while ((de = readdir(d)) != NULL) {
        int64_t base;
        if (strncmp(de->d_name, ".tmp-", 5) == 0) {
            char path[4096];
            if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path)
                continue;
            if (io->unlink(io, path) < 0) {
                int err = errno;
                PULSE_ERROR("recover: unlink %s failed: %s", path, strerror(err));
                st = pulse_status_from_errno(err);
                goto out;
            }
            PULSE_INFO("recover: removed leftover temp file %s", path);
            temps++;
            continue;
        }
        if (!pulse_segment_parse_name(de->d_name, &base))
            continue;
        if (n == cap) {
            size_t ncap = cap == 0 ? 16 : cap * 2;
            int64_t *nb = pulse_realloc(bases, ncap * sizeof *nb);
            if (nb == NULL) {
                st = PULSE_NOMEM;
                goto out;
            }
            bases = nb;
            cap = ncap;
        }
        bases[n++] = base;
    }
    if (n > 1)
        qsort(bases, n, sizeof *bases, cmp_i64);
    if (temps > 0 && io->fsync_dir(io, dir) < 0) {
        int err = errno;
        PULSE_ERROR("recover: fsync directory %s failed: %s", dir, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    *bases_out = bases;
    bases = NULL;
    *n_out = n;
    *temps_out = temps;
out:
    if (d != NULL)
        closedir(d);
    pulse_free(bases);
    return st;
}

static pulse_status_t file_size(struct pulse_segment *seg, uint64_t *size_out)
{
    return pulse_segment_file_size(seg, size_out);
}

/* fdatasyncs one of the segment's files (data or index). */
static pulse_status_t sync_file(struct pulse_segment *seg, struct pulse_fdc_file *f)
{
    int fd;
    pulse_status_t st = pulse_fdc_pin(f, &fd);

    if (st != PULSE_OK)
        return st;
    if (seg->io->fdatasync(seg->io, fd) < 0) {
        int err = errno;
        PULSE_ERROR("recover: fdatasync %s failed: %s", f->path, strerror(err));
        st = pulse_status_from_errno(err);
    }
    pulse_fdc_unpin(f);
    return st;
}

/* Cuts the data file to len. */
static pulse_status_t cut_file(struct pulse_segment *seg, uint64_t len)
{
    int fd;
    pulse_status_t st = pulse_segment_pin(seg, &fd);

    if (st != PULSE_OK)
        return st;
    if (seg->io->ftruncate(seg->io, fd, (off_t)len) < 0) {
        int err = errno;
        PULSE_ERROR("recover: ftruncate %s failed: %s", seg->log_path, strerror(err));
        st = pulse_status_from_errno(err);
    }
    pulse_segment_unpin(seg);
    return st;
}

/*
 * Recovers one segment. limit is the next segment's base (INT64_MAX for the
 * active one). fast: trust the index entries that check out and decode only
 * from the last of them; trusted_size: for the fast-path active segment, the
 * snapshot's activeSize (entries at or past it are not trusted).
 */
static pulse_status_t recover_segment(struct pulse_segment *seg, bool active, bool fast, uint64_t trusted_size,
                                      int64_t limit, uint32_t interval, struct pulse_plog_recovery *rec)
{
    struct pulse_index disk;
    struct pulse_segment_scan scan;
    uint64_t fsize = 0;
    uint64_t start_pos = 0;
    int64_t start_off = seg->base;
    uint64_t since = UINT64_MAX;
    int64_t max_ts = INT64_MIN;
    bool clean = false;
    bool rewrite = false;
    pulse_status_t st;

    pulse_index_init(&disk);
    st = file_size(seg, &fsize);
    if (st != PULSE_OK)
        goto out;
    /* For the fast-path active segment only entries inside the checkpointed
     * size count (the checkpoint always ends on a batch boundary), so a torn
     * batch past it can contribute neither an entry nor a timestamp. */
    st = pulse_segment_load_index(seg, active && fast && trusted_size < fsize ? trusted_size : fsize, &clean,
                                  &max_ts);
    if (st != PULSE_OK)
        goto out;
    if (active && fast) {
        size_t keep = 0;
        while (keep < seg->index.n && seg->index.entries[keep].rel_pos < trusted_size)
            keep++;
        if (keep < seg->index.n) {
            pulse_index_truncate(&seg->index, keep);
            clean = false;
        }
    }
    if (fast && seg->index.n > 0) {
        /* Resume at the last trusted entry; the scan re-adds it so the
         * interval accounting matches the append path exactly. */
        struct pulse_index_entry last = seg->index.entries[seg->index.n - 1];
        start_pos = last.rel_pos;
        start_off = seg->base + last.rel_offset;
        /* Keep the full table to compare after the scan. */
        for (size_t i = 0; i < seg->index.n; i++) {
            st = pulse_index_append(&disk, seg->index.entries[i].rel_offset, seg->index.entries[i].rel_pos);
            if (st != PULSE_OK)
                goto out;
        }
        pulse_index_truncate(&seg->index, seg->index.n - 1);
    } else {
        /* Full scan: rebuild from nothing, then compare with the file. */
        for (size_t i = 0; i < seg->index.n; i++) {
            st = pulse_index_append(&disk, seg->index.entries[i].rel_offset, seg->index.entries[i].rel_pos);
            if (st != PULSE_OK)
                goto out;
        }
        pulse_index_truncate(&seg->index, 0);
        max_ts = INT64_MIN;
    }
    st = pulse_segment_scan(seg, start_pos, start_off, limit, fsize, interval, since, max_ts, &scan);
    if (st != PULSE_OK)
        goto out;
    /* In the fast path the table may legitimately have grown past what the
     * file held (entries for the tail were not flushed yet); any difference
     * from the file means the file must be rewritten. */
    if (!clean || !pulse_index_equal(&disk, &seg->index))
        rewrite = true;

    if (scan.end_pos < fsize) {
        if (active) {
            PULSE_WARN("recover: %s: %s at byte %" PRIu64 "; truncating %" PRIu64 " bytes of torn tail "
                       "(last valid offset %" PRId64 ")",
                       seg->log_path, scan.stop == PULSE_EOF ? "incomplete batch" : "invalid batch",
                       scan.end_pos, fsize - scan.end_pos, scan.next_offset - 1);
            st = cut_file(seg, scan.end_pos);
            if (st != PULSE_OK)
                goto out;
            rec->truncated_bytes += fsize - scan.end_pos;
            rewrite = true;
        } else {
            PULSE_ERROR("recover: CORRUPT sealed segment %s: %s at byte %" PRIu64 " of %" PRIu64
                        "; serving only its first %" PRIu64 " bytes (offsets %" PRId64 "..%" PRId64
                        " are unreadable); later segments are unaffected. Keep a copy of the file for "
                        "inspection (pulse-log) and restore the lost range from a replica or backup if needed",
                        seg->log_path, scan.stop == PULSE_EOF ? "incomplete batch" : "invalid batch",
                        scan.end_pos, fsize, scan.end_pos, scan.next_offset, limit - 1);
            rec->corrupt_segments++;
        }
    }
    if (active) {
        /* Whatever survived must be on disk before HW = LEO is declared. */
        st = sync_file(seg, &seg->data);
        if (st != PULSE_OK)
            goto out;
    }
    if (rewrite) {
        st = pulse_segment_rewrite_index(seg);
        if (st != PULSE_OK)
            goto out;
        rec->indexes_rebuilt++;
        PULSE_INFO("recover: rebuilt index %s (%zu entries)", seg->index_path, seg->index.n);
    } else {
        seg->index_written = seg->index.n;
        if (active) {
            st = sync_file(seg, &seg->idx);
            if (st != PULSE_OK)
                goto out;
        }
        atomic_store_explicit(&seg->index_synced, seg->index.n, memory_order_relaxed);
    }
    atomic_store_explicit(&seg->size, scan.end_pos, memory_order_relaxed);
    atomic_store_explicit(&seg->durable_size, scan.end_pos, memory_order_relaxed);
    atomic_store_explicit(&seg->next_offset, active ? scan.next_offset : limit, memory_order_relaxed);
    atomic_store_explicit(&seg->max_ts, scan.max_ts, memory_order_relaxed);
    seg->since_entry = scan.since_entry;
out:
    pulse_index_fini(&disk);
    return st;
}

/* Recovers every segment in turn (open, scan, close), then makes created
 * files durable. active_size: the snapshot's, for the fast path. */
static pulse_status_t recover_all(const struct pulse_io *io, const char *dir, struct pulse_segment **segs,
                                  const int64_t *bases, size_t n, bool fast, uint64_t active_size,
                                  uint32_t interval, struct pulse_plog_recovery *rec)
{
    for (size_t i = 0; i < n; i++) {
        bool active = i == n - 1;
        int64_t limit = active ? INT64_MAX : bases[i + 1];
        /* Creates a missing index file. */
        pulse_status_t st = pulse_segment_create_files(segs[i]);
        if (st != PULSE_OK)
            return st;
        st = recover_segment(segs[i], active, fast, active ? active_size : 0, limit, interval, rec);
        if (st != PULSE_OK)
            return st;
        /* A sealed segment's table is complete and in memory; its files
         * reopen on demand. */
        if (!active)
            pulse_segment_close_files(segs[i]);
    }
    /* Files may have been created (fresh log, or a missing index). */
    if (io->fsync_dir(io, dir) < 0) {
        int err = errno;
        PULSE_ERROR("recover: fsync directory %s failed: %s", dir, strerror(err));
        return pulse_status_from_errno(err);
    }
    return PULSE_OK;
}

pulse_status_t pulse_recover_run(const struct pulse_io *io, struct pulse_fdcache *cache, const char *dir,
                                 uint32_t index_interval, struct pulse_recover_result *res,
                                 struct pulse_plog_recovery *rec)
{
    int64_t t0 = pulse_clock_mono_us();
    int64_t *bases = NULL;
    size_t n = 0;
    struct pulse_segment **segs = NULL;
    size_t opened = 0;
    struct pulse_snapshot snap;
    bool have_snap = false;
    bool fast = false;
    uint32_t temps = 0;
    pulse_status_t st;

    memset(rec, 0, sizeof *rec);
    /* A merge of segments that compaction left half done is finished first,
     * so that the listing below sees the merged segment (compact.h). */
    st = pulse_compact_finish_merges(io, dir, rec);
    if (st != PULSE_OK)
        goto out;
    st = list_dir(io, dir, &bases, &n, &temps);
    if (st != PULSE_OK)
        goto out;
    rec->temp_files_removed = temps;
    st = pulse_snapshot_read(io, dir, &snap);
    if (st == PULSE_OK) {
        have_snap = true;
    } else if (st == PULSE_CORRUPT) {
        PULSE_WARN("recover: %s/%s is not a valid snapshot; running the full scan", dir, PULSE_SNAPSHOT_NAME);
    } else if (st != PULSE_NOT_FOUND) {
        goto out;
    }
    st = PULSE_OK;

    if (n == 0) {
        /* A fresh log. If a snapshot survived its segments, start after its
         * LEO rather than hand out offsets it may have acknowledged. */
        int64_t base = have_snap ? snap.leo : 0;
        bases = pulse_malloc(sizeof *bases);
        if (bases == NULL) {
            st = PULSE_NOMEM;
            goto out;
        }
        bases[0] = base;
        n = 1;
    }
    segs = pulse_calloc(n, sizeof *segs);
    if (segs == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    /* No I/O yet: each segment's files are opened when it is recovered. */
    for (opened = 0; opened < n; opened++) {
        st = pulse_segment_open(io, cache, dir, bases[opened], false, &segs[opened]);
        if (st != PULSE_OK)
            goto out;
    }
    /* A fresh log's first segment is created here. */
    st = pulse_segment_create_files(segs[n - 1]);
    if (st != PULSE_OK)
        goto out;
    if (have_snap && snap.active_base == bases[n - 1]) {
        uint64_t asize = 0;
        st = file_size(segs[n - 1], &asize);
        if (st != PULSE_OK)
            goto out;
        fast = (uint64_t)snap.active_size <= asize;
    }
    if (have_snap && !fast)
        PULSE_INFO("recover: %s: snapshot does not match the segment files; running the full scan", dir);
    rec->used_snapshot = fast;
    rec->segments = (uint32_t)n;

    st = recover_all(io, dir, segs, bases, n, fast, fast ? (uint64_t)snap.active_size : 0, index_interval, rec);
    if (st != PULSE_OK)
        goto out;
    res->leo = atomic_load_explicit(&segs[n - 1]->next_offset, memory_order_relaxed);
    res->segs = segs;
    res->n = n;
    segs = NULL;
    rec->elapsed_us = pulse_clock_mono_us() - t0;
    PULSE_INFO("recover: %s: %zu segment(s), log end %" PRId64 ", %s, %" PRIu64 " bytes truncated, %" PRIu32
               " index(es) rebuilt, %" PRIu32 " corrupt sealed segment(s), %" PRId64 " us",
               dir, n, res->leo, fast ? "snapshot fast path" : "full scan", rec->truncated_bytes,
               rec->indexes_rebuilt, rec->corrupt_segments, rec->elapsed_us);
out:
    if (segs != NULL) {
        for (size_t i = 0; i < opened && i < n; i++)
            pulse_segment_release(segs[i]);
        pulse_free(segs);
    }
    pulse_free(bases);
    return st;
}
