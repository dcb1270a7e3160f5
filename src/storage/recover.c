/* SPDX-License-Identifier: MIT */
/*
 * recover.c - full scan, snapshot fast path, and the corruption rule
 * (storage contract sections 7 and 8; docs/Storage.md "Recovery" and
 * "Corruption").
 *
 * Method.
 *   1. Delete every .tmp-* file: a temp file is only ever renamed into place
 *      after it was synced, so one that is still a temp is garbage.
 *   2. List *.log in name order (20-digit names sort as offsets), and the
 *      *.index files whose .log is gone (read_orphans: a lost segment, whose
 *      index proves offsets); read the snapshot and the damage record
 *      (damage.h). A directory without segment files, or a contiguous log
 *      whose first segment file is lost, gets an empty segment where the
 *      lost offsets start (lost_start).
 *   3. Scan, changing nothing yet. Fast path when the snapshot decodes,
 *      names the last segment as the active one with a size the file still
 *      reaches, and the damage record reads back: a sealed segment whose
 *      files match its record in a version 2 snapshot is restored from its
 *      index file (restore_by_record: no header inside it read, nothing
 *      decoded); every other segment's index is checked entry by entry
 *      against the batch headers it points at (for the active segment, the
 *      prefix the snapshot's CRC vouches for only at its ends:
 *      active_trust) and the bytes from the last good entry on are decoded
 *      and CRC-verified. A segment the record names as holding damaged
 *      bytes is scanned whole.
 *      Otherwise the full scan decodes every batch of every segment. Both
 *      walk the file with the one iterator of segscan.h: bytes that fail
 *      validation but are followed by a valid batch form a damaged range;
 *      failing bytes that run to the end of the file form the tail.
 *   4. Settle (settle_segment: one rule for sealed and active segments).
 *      A damaged range is corruption: it stays in the file, readers are
 *      steered around it, its offsets are reported as skipped. A tail is a
 *      torn write, cut off, only when it starts at or after the segment's
 *      proven-durable end and the record does not already list it: a sealed
 *      segment was fsynced whole before its successor was created, so none
 *      of its bytes can be torn; the active segment is proven durable up to
 *      the snapshot's activeSize when the snapshot names it (the broker's
 *      syncer rewrites it as the durable end moves: pulse_plog_checkpoint),
 *      and on an in-process reopen up to the running log's durable size
 *      (the proof the caller passes). Any other tail is corruption and is
 *      kept like a damaged range. In a contiguous log (plog.h) a sealed
 *      segment that ends before the next one starts, and a batch that
 *      starts after the one before it ended, leave a gap: lost offsets,
 *      recorded as a missing range (settle_gap, pulse_segment_scan).
 *   5. Log end (settle_active). The next offset is the highest of: the end
 *      of the last valid batch; the snapshot's LEO (it was the high
 *      watermark, so readers may have seen everything below it) and on a
 *      reopen the running log's high watermark; every
 *      offset the damage record lists (an earlier recovery proved them);
 *      the index file's claim (pulse_segment_index_claim: an entry past
 *      the surviving data names a batch the writer numbered); and the
 *      claims of lost segments' index files. Offsets
 *      between the last valid batch and that end become a missing range
 *      (or extend a kept tail), so they are recorded and reported too.
 *   6. New damage (not in the record) is logged at error level. A segment
 *      holding a range without a forensic copy (new, or learned by a read
 *      while the log ran) is copied to forensics/ first, then the record is
 *      rewritten, and only then is a torn tail cut or an index rewritten.
 *   7. Everything kept is fdatasynced before the log opens with HW = LEO,
 *      since after a process crash the page cache may hold bytes the disk
 *      does not; and the directory, for the files recovery created. Skipped
 *      when the snapshot proves there is nothing to sync (proven_synced),
 *      as after every clean close: a start of many partitions then makes no
 *      fdatasync at all.
 *   Segment files are opened through the descriptor cache and pinned only
 *   while one step reads or writes them; a sealed segment's are closed once
 *   it is recovered (the active one's stay cached), so a log of any number
 *   of segments recovers within a few descriptors. A merge compaction left
 *   half done is finished before anything is listed (finish_merges).
 *
 * Why damaged bytes stay where they are. Cutting the active segment at the
 * damage would renumber (or lose) the valid batches after it; rewriting the
 * file without the damage would need a second copy of a segment on a disk
 * that may be full and a crash-safe swap of the active file. Keeping the
 * bytes costs nothing: appends continue after the last valid batch (the end
 * of the file, or of the cut torn tail), never inside or before damage, and
 * readers consult the range list (plog.c do_slice) so no damaged byte is
 * ever served. Recovery stays repeatable: a later start scans a recorded
 * segment whole with the same iterator, which finds the same ranges (the
 * record's ranges are passed as hints so that bytes appended since cannot
 * change where a range ends), the record's offsets keep the log end from
 * going back, and the fast path never trusts a recorded segment's index.
 */
#include "storage/recover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "storage/damage.h"
#include "common/fsio.h"
#include "storage/plog.h"
#include "storage/segment.h"
#include "storage/segscan.h"
#include "storage/snapshot.h"

#define FORENSICS_DIR "forensics"
#define COPY_CHUNK (1u << 20)

/* One segment between its scan and the changes recovery makes to it. */
struct seg_work {
    struct pulse_segment_scan scan;
    uint64_t fsize;
    int64_t limit;    /* next segment's base, INT64_MAX for the active one */
    bool index_dirty; /* the rebuilt table differs from the index file */
    bool cut;         /* its tail is torn: cut the file at scan.end_pos */
    bool kept_tail;   /* its tail is corruption: kept as a damaged range */
    bool new_damage;  /* a range without a forensic copy: copy the file first */
};

/* The state of one recovery. */
struct recovery {
    const struct pulse_io *io;
    const char *dir;
    uint32_t interval;
    struct pulse_plog_recovery *rec;
    struct pulse_snapshot snap;
    bool have_snap;
    struct pulse_snapshot_ext ext;      /* its version 2 part (seals owned) */
    const struct pulse_snapshot *proof; /* the running log's checkpoint (reopen), or NULL */
    bool contiguous;                    /* the log's offsets have no gaps (plog.h) */
    /* Step 7 has nothing to do (proven_synced): the files recovery keeps
     * as they are were made durable by the run that wrote them. */
    bool synced;
    /* Index files whose .log is gone (segment.h pulse_segment_orphan_claim):
     * the lowest base among them (INT64_MAX: none) and the highest offset
     * they prove was handed out (-1: none). */
    int64_t orphan_min;
    int64_t orphan_claim;
    struct pulse_damage *known; /* the record as read (sorted) */
    size_t nknown;
    bool known_bad;             /* the record exists but does not decode */
    struct pulse_damage *found; /* the ranges after this recovery */
    size_t nfound;
    size_t capfound;
    int64_t leo;
    int64_t now_ms;
};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Appends v to *arr (n used, cap allocated). */
static pulse_status_t push_base(int64_t **arr, size_t *n, size_t *cap, int64_t v)
{
    if (*n == *cap) {
        size_t ncap = *cap == 0 ? 16 : *cap * 2;
        int64_t *na = pulse_realloc(*arr, ncap * sizeof *na);
        if (na == NULL)
            return PULSE_NOMEM;
        *arr = na;
        *cap = ncap;
    }
    (*arr)[(*n)++] = v;
    return PULSE_OK;
}

/* True when the sorted array holds v. */
static bool has_base(const int64_t *arr, size_t n, int64_t v)
{
    return n > 0 && bsearch(&v, arr, n, sizeof *arr, cmp_i64) != NULL;
}

/* Removes .tmp-* files and collects segment bases, sorted, and the bases
 * of index files (*ibases, unsorted). */
static pulse_status_t list_dir(const struct pulse_io *io, const char *dir, int64_t **bases_out, size_t *n_out,
                               int64_t **ibases_out, size_t *ni_out, uint32_t *temps_out)
{
    DIR *d = NULL;
    int64_t *bases = NULL, *ibases = NULL;
    size_t n = 0, cap = 0, ni = 0, icap = 0;
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
        if (pulse_segment_parse_name(de->d_name, &base))
            st = push_base(&bases, &n, &cap, base);
        else if (pulse_segment_parse_file_name(de->d_name, "index", &base))
            st = push_base(&ibases, &ni, &icap, base);
        if (st != PULSE_OK)
            goto out;
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
    *ibases_out = ibases;
    ibases = NULL;
    *ni_out = ni;
    *temps_out = temps;
out:
    if (d != NULL)
        closedir(d);
    pulse_free(bases);
    pulse_free(ibases);
    return st;
}

/*
 * Step 2b: index files whose segment file is gone. Nothing Pulse does
 * leaves one (an index is always removed before its data, and created
 * after it), so each is a lost segment: what it proves was handed out
 * (pulse_segment_orphan_claim) keeps the log end from going back, and its
 * base says where lost offsets start when no segment before it is left.
 * The files stay: they are the evidence, and cost nothing.
 */
static pulse_status_t read_orphans(struct recovery *rc, const int64_t *bases, size_t n, const int64_t *ibases,
                                   size_t ni)
{
    rc->orphan_min = INT64_MAX;
    rc->orphan_claim = -1;
    for (size_t i = 0; i < ni; i++) {
        int64_t claim;
        if (has_base(bases, n, ibases[i]))
            continue;
        pulse_status_t st = pulse_segment_orphan_claim(rc->io, rc->dir, ibases[i], rc->contiguous, &claim);
        if (st != PULSE_OK)
            return st;
        PULSE_WARN("recover: %s: index file %020" PRId64 ".index has no segment file: segment %020" PRId64
                   " was lost; offsets below %" PRId64 " were handed out",
                   rc->dir, ibases[i], ibases[i], claim);
        rc->orphan_min = ibases[i] < rc->orphan_min ? ibases[i] : rc->orphan_min;
        rc->orphan_claim = claim > rc->orphan_claim ? claim : rc->orphan_claim;
    }
    return PULSE_OK;
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

/* The recorded ranges of segment base that keep bytes: *first and *n. */
static void known_bytes(const struct recovery *rc, int64_t base, size_t *first, size_t *n)
{
    *first = 0;
    *n = 0;
    for (size_t i = 0; i < rc->nknown; i++) {
        if (rc->known[i].seg_base != base || !pulse_damage_has_bytes(&rc->known[i]))
            continue;
        if (*n == 0)
            *first = i;
        (*n)++;
    }
}

/* The recorded entry equal to r (same bytes; for a missing range, same
 * first offset), or NULL. */
static const struct pulse_damage *known_match(const struct recovery *rc, const struct pulse_damage *r)
{
    for (size_t i = 0; i < rc->nknown; i++) {
        const struct pulse_damage *k = &rc->known[i];
        if (k->seg_base == r->seg_base && k->pos == r->pos && k->end == r->end &&
            (pulse_damage_has_bytes(r) || k->from == r->from))
            return k;
    }
    return NULL;
}

/*
 * The fast path for a sealed segment the snapshot has a record of (version
 * 2): when pulse_segment_restore_sealed finds its files as recorded, its
 * index table is the one the record describes (a table the writer built,
 * or an earlier recovery checked, against this very data file), so no
 * batch header inside it is read and nothing is decoded: the segment ends
 * at its file's end, its offsets at the next segment's base, which must be
 * where they ended when the record was written (a gap there was recorded
 * in the damage record when it was first found, and is carried over), its
 * newest timestamp is the record's. *done is false, and
 * nothing is changed, when the record does not match: the caller checks
 * the segment entry by entry as before.
 */
static pulse_status_t restore_by_record(struct recovery *rc, struct pulse_segment *seg, struct seg_work *w, bool *done)
{
    const struct pulse_snapshot_seal *seal = pulse_snapshot_find_seal(rc->ext.seals, rc->ext.nseals, seg->base);
    pulse_status_t st;

    *done = false;
    /* A segment lost after this one moves its limit (the next base): only
     * a scan of its data finds where its offsets really end. */
    if (seal == NULL || seal->log_size != w->fsize || seal->next != w->limit)
        return PULSE_OK;
    st = pulse_segment_restore_sealed(seg, seal, done);
    if (st != PULSE_OK || !*done) {
        if (st == PULSE_OK)
            PULSE_INFO("recover: %s: does not match its snapshot record; checking its index entry by entry",
                       seg->log_path);
        return st;
    }
    w->scan = (struct pulse_segment_scan){
        .end_pos = w->fsize,
        .next_offset = w->limit,
        .max_ts = seal->max_ts,
    };
    w->index_dirty = false;
    seg->seal = *seal;
    seg->have_seal = true;
    rc->rec->seals_trusted++;
    return PULSE_OK;
}

/* What the snapshot vouches for of the active segment's index (version 2):
 * the prefix below activeSize, when the data file is the one it names.
 * trust->n stays 0 otherwise. */
static pulse_status_t active_trust(const struct recovery *rc, struct pulse_segment *seg,
                                   struct pulse_segment_trust *trust)
{
    struct pulse_file_id id;
    int fd;
    pulse_status_t st;

    if (rc->ext.version != PULSE_SNAPSHOT_VERSION_2 || rc->ext.active_index_n == 0 || rc->ext.active_ino == 0)
        return PULSE_OK;
    st = pulse_segment_pin(seg, &fd);
    if (st != PULSE_OK)
        return st;
    if (seg->io->file_id(seg->io, fd, &id) == 0 && id.ino == rc->ext.active_ino) {
        trust->n = rc->ext.active_index_n;
        trust->crc = rc->ext.active_index_crc;
        trust->max_ts = rc->ext.active_max_ts;
    }
    pulse_segment_unpin(seg);
    return PULSE_OK;
}

/*
 * Scans one segment (step 3), changing nothing on disk. fast: trust the
 * index entries that check out and decode only from the last of them;
 * trusted_size: for the fast-path active segment, the snapshot's activeSize
 * (entries at or past it are not trusted).
 */
static pulse_status_t scan_segment(struct recovery *rc, struct pulse_segment *seg, bool active, bool fast,
                                   uint64_t trusted_size, struct seg_work *w)
{
    struct pulse_index disk;
    uint64_t start_pos = 0;
    int64_t start_off = seg->base;
    int64_t max_ts = INT64_MIN;
    size_t hfirst, nhints;
    bool clean = false;
    struct pulse_segment_trust trust = {.n = 0, .crc = 0, .max_ts = INT64_MIN, .used = false};
    pulse_status_t st;

    pulse_index_init(&disk);
    /* Creates a missing index file (the directory is fsynced at the end). */
    st = pulse_segment_create_files(seg);
    if (st == PULSE_OK)
        st = file_size(seg, &w->fsize);
    if (st != PULSE_OK)
        goto out;
    known_bytes(rc, seg->base, &hfirst, &nhints);
    if (nhints > 0)
        fast = false; /* a segment with recorded damage is always scanned whole */
    if (fast && !active) {
        bool done = false;
        st = restore_by_record(rc, seg, w, &done);
        if (st != PULSE_OK || done)
            goto out;
    }
    if (fast && active) {
        st = active_trust(rc, seg, &trust);
        if (st != PULSE_OK)
            goto out;
    }
    /* For the fast-path active segment only entries inside the checkpointed
     * size count (the checkpoint always ends on a batch boundary), so a torn
     * batch past it can contribute neither an entry nor a timestamp. */
    st = pulse_segment_load_index(seg, active && fast && trusted_size < w->fsize ? trusted_size : w->fsize, &clean,
                                  &max_ts, trust.n > 0 ? &trust : NULL);
    if (st != PULSE_OK)
        goto out;
    rc->rec->active_index_trusted = rc->rec->active_index_trusted || trust.used;
    if (active && fast) {
        size_t keep = 0;
        while (keep < seg->index.n && seg->index.entries[keep].rel_pos < trusted_size)
            keep++;
        if (keep < seg->index.n) {
            pulse_index_truncate(&seg->index, keep);
            clean = false;
        }
    }
    /* Keep the table read from the file to compare after the scan. */
    for (size_t i = 0; i < seg->index.n; i++) {
        st = pulse_index_append(&disk, seg->index.entries[i].rel_offset, seg->index.entries[i].rel_pos);
        if (st != PULSE_OK)
            goto out;
    }
    if (fast && seg->index.n > 0) {
        /* Resume at the last trusted entry; the scan re-adds it so the
         * interval accounting matches the append path exactly. */
        struct pulse_index_entry last = seg->index.entries[seg->index.n - 1];
        start_pos = last.rel_pos;
        start_off = seg->base + last.rel_offset;
        pulse_index_truncate(&seg->index, seg->index.n - 1);
    } else {
        /* Full scan: rebuild from nothing, then compare with the file. */
        pulse_index_truncate(&seg->index, 0);
        max_ts = INT64_MIN;
    }
    st = pulse_segment_scan(seg, start_pos, start_off, w->limit, w->fsize, rc->interval, UINT64_MAX, max_ts,
                            nhints > 0 ? &rc->known[hfirst] : NULL, nhints, rc->contiguous, &w->scan);
    if (st != PULSE_OK)
        goto out;
    /* In the fast path the table may legitimately have grown past what the
     * file held (entries for the tail were not flushed yet); any difference
     * from the file means the file must be rewritten. */
    w->index_dirty = !clean || !pulse_index_equal(&disk, &seg->index);
out:
    pulse_index_fini(&disk);
    return st;
}

/* Adds a range to the result, merged with its recorded twin if any (a
 * range without one is new, and counted). A range without a forensic copy
 * yet marks its segment (w, nullable) for one. */
static pulse_status_t add_found(struct recovery *rc, struct seg_work *w, const struct pulse_damage *r, bool *is_new)
{
    const struct pulse_damage *k = known_match(rc, r);
    struct pulse_damage *f;

    if (rc->nfound == rc->capfound) {
        size_t ncap = rc->capfound == 0 ? 8 : rc->capfound * 2;
        struct pulse_damage *nf = pulse_realloc(rc->found, ncap * sizeof *nf);
        if (nf == NULL)
            return PULSE_NOMEM;
        rc->found = nf;
        rc->capfound = ncap;
    }
    f = &rc->found[rc->nfound++];
    *f = *r;
    *is_new = k == NULL;
    if (k != NULL) {
        f->found_ms = k->found_ms;
        f->flags = k->flags;
        if (!pulse_damage_has_bytes(r) && k->to > r->to)
            f->to = k->to;
    } else {
        f->found_ms = rc->now_ms;
        f->flags = 0;
        rc->rec->new_damaged_ranges++;
    }
    if (w != NULL && (f->flags & PULSE_DAMAGE_COPIED) == 0)
        w->new_damage = true;
    return PULSE_OK;
}

static void log_range(const struct recovery *rc, const struct pulse_segment *seg, const struct pulse_damage *r,
                      const char *problem, bool is_new)
{
    if (!is_new) {
        PULSE_INFO("recover: %s: damaged bytes %" PRIu64 "..%" PRIu64 " (offsets %" PRId64 "..%" PRId64
                   ") are already recorded; still skipped",
                   seg->log_path, r->pos, r->end, r->from, r->to);
        return;
    }
    if (pulse_damage_has_bytes(r))
        PULSE_ERROR("recover: CORRUPT %s: bytes %" PRIu64 "..%" PRIu64 " fail validation (%s); offsets %" PRId64
                    "..%" PRId64 " are unreadable and will be skipped; valid data around them is kept. "
                    "The damaged bytes stay in place, a copy of the file goes to %s/" FORENSICS_DIR
                    "/; check the disk, and restore the lost offsets from a replica or backup if they matter",
                    seg->log_path, r->pos, r->end, problem, r->from, r->to, rc->dir);
    else
        PULSE_ERROR(
            "recover: %s: offsets %" PRId64 "..%" PRId64 " were handed out but their data is gone "
            "(%s); they will be skipped and never handed out again. A copy of the file goes to %s/" FORENSICS_DIR "/",
            seg->log_path, r->from, r->to, problem, rc->dir);
}

/* add_found, then the log line. */
static pulse_status_t note_range(struct recovery *rc, struct pulse_segment *seg, struct seg_work *w,
                                 const struct pulse_damage *r, const char *problem)
{
    bool is_new = false;
    pulse_status_t st = add_found(rc, w, r, &is_new);

    if (st == PULSE_OK)
        log_range(rc, seg, r, problem, is_new);
    return st;
}

/* How much of the active segment seg_base a checkpoint proves durable:
 * the snapshot's activeSize, or the running log's durable size on a
 * reopen, when they name that segment; else nothing. */
static uint64_t proven_size(const struct recovery *rc, int64_t seg_base)
{
    uint64_t size = 0;

    if (rc->have_snap && rc->snap.active_base == seg_base)
        size = (uint64_t)rc->snap.active_size;
    if (rc->proof != NULL && rc->proof->active_base == seg_base && (uint64_t)rc->proof->active_size > size)
        size = (uint64_t)rc->proof->active_size;
    return size;
}

/* Step 4 for a sealed segment whose data ends cleanly: in a contiguous
 * log the next segment starts where it ends, so offsets between its end
 * and the next base were handed out and lost (a segment deleted, or cut
 * at a batch boundary), and become a missing range. */
static pulse_status_t settle_gap(struct recovery *rc, struct pulse_segment *seg, struct seg_work *w)
{
    char why[160];

    if (!rc->contiguous || w->scan.next_offset >= w->limit)
        return PULSE_OK;
    struct pulse_damage r = {seg->base, w->scan.end_pos, w->scan.end_pos, w->scan.next_offset, w->limit, 0, 0};
    snprintf(why, sizeof why,
             "the segment ends at offset %" PRId64 " but the next one starts at %" PRId64
             ": a segment lost or cut short",
             w->scan.next_offset, w->limit);
    return note_range(rc, seg, w, &r, why);
}

/* Step 4 for one segment: its damaged ranges, then its tail. */
static pulse_status_t settle_segment(struct recovery *rc, struct pulse_segment *seg, bool active, struct seg_work *w)
{
    const struct pulse_segment_flaw *t = &w->scan.tail_flaw;
    pulse_status_t st;

    for (size_t i = 0; i < w->scan.nflaws; i++) {
        const struct pulse_segment_flaw *f = &w->scan.flaws[i];
        struct pulse_damage r = {seg->base, f->pos, f->end, f->from, f->to, 0, 0};
        st = note_range(rc, seg, w, &r, f->problem);
        if (st != PULSE_OK)
            return st;
    }
    if (!w->scan.tail)
        return active ? PULSE_OK : settle_gap(rc, seg, w);
    /* The one rule: a tail is torn only when nothing proves its bytes were
     * ever durable (sealed segments are durable whole). */
    uint64_t durable = !active ? w->fsize : proven_size(rc, seg->base);
    struct pulse_damage r = {seg->base, t->pos, t->end, t->from, active ? t->from : w->limit, 0, 0};
    if (!w->scan.tail_unresolved && t->pos >= durable && known_match(rc, &r) == NULL) {
        w->cut = true;
        PULSE_WARN("recover: %s: %s at byte %" PRIu64 " (%s); nothing valid follows: cutting %" PRIu64
                   " bytes of torn tail (last valid offset %" PRId64 ")",
                   seg->log_path, t->torn ? "incomplete batch" : "invalid batch", t->pos, t->problem, w->fsize - t->pos,
                   t->from - 1);
        return PULSE_OK;
    }
    w->kept_tail = true;
    if (active)
        return PULSE_OK; /* its end offset is the log end: settle_active adds it */
    return note_range(rc, seg, w, &r, t->problem);
}

/* Step 5: the log end, and the range that covers offsets past the last
 * valid batch of the active segment. */
static pulse_status_t settle_active(struct recovery *rc, struct pulse_segment *seg, struct seg_work *w)
{
    int64_t valid_end = w->scan.next_offset;
    uint64_t end_pos = w->scan.end_pos;
    int64_t claim = valid_end;
    int64_t leo = valid_end;
    const char *why = "the snapshot or the damage record names them";
    pulse_status_t st;

    if (rc->have_snap && rc->snap.leo > leo)
        leo = rc->snap.leo;
    if (rc->proof != NULL && rc->proof->leo > leo)
        leo = rc->proof->leo;
    for (size_t i = 0; i < rc->nknown; i++)
        if (rc->known[i].to > leo)
            leo = rc->known[i].to;
    st = pulse_segment_index_claim(seg, w->fsize, end_pos, valid_end, &claim);
    if (st != PULSE_OK)
        return st;
    if (claim > leo) {
        leo = claim;
        why = "the index names a batch past the surviving data";
    }
    if (rc->orphan_claim > leo) {
        leo = rc->orphan_claim;
        why = "the index file of a lost segment names them";
    }
    rc->leo = leo;
    rc->rec->leo_raised = leo - valid_end;
    if (w->kept_tail) {
        struct pulse_damage r = {seg->base, end_pos, w->fsize, valid_end, leo, 0, 0};
        return note_range(rc, seg, w, &r, w->scan.tail_flaw.problem);
    }
    if (leo == valid_end)
        return PULSE_OK;
    struct pulse_damage r = {seg->base, end_pos, end_pos, valid_end, leo, 0, 0};
    return note_range(rc, seg, w, &r, why);
}

static int cmp_damage(const void *a, const void *b)
{
    const struct pulse_damage *x = a, *y = b;
    if (x->from != y->from)
        return x->from < y->from ? -1 : 1;
    if (x->seg_base != y->seg_base)
        return x->seg_base < y->seg_base ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/*
 * Carries over recorded missing ranges (they cannot be found again: no
 * bytes are left) of segments that still exist, unless a range found now
 * covers their offsets; sorts the result. Recorded byte ranges not found
 * again are dropped: their bytes now verify, or their segment is gone.
 */
static pulse_status_t carry_over(struct recovery *rc, struct pulse_segment **segs, size_t n)
{
    size_t computed = rc->nfound;
    pulse_status_t st;

    for (size_t i = 0; i < rc->nknown; i++) {
        const struct pulse_damage *k = &rc->known[i];
        bool exists = false, covered = false;
        if (pulse_damage_has_bytes(k))
            continue;
        for (size_t s = 0; s < n && !exists; s++)
            exists = segs[s]->base == k->seg_base;
        for (size_t j = 0; j < computed && !covered; j++)
            covered = rc->found[j].from < k->to && k->from < rc->found[j].to;
        if (!exists || covered)
            continue;
        bool is_new;
        st = add_found(rc, NULL, k, &is_new);
        if (st != PULSE_OK)
            return st;
    }
    if (rc->nfound > 1)
        qsort(rc->found, rc->nfound, sizeof *rc->found, cmp_damage);
    return PULSE_OK;
}

/* Field by field: the structs have padding, whose bytes differ between
 * an entry built here and one decoded from the record. */
static bool damage_equal(const struct pulse_damage *a, const struct pulse_damage *b)
{
    return a->seg_base == b->seg_base && a->pos == b->pos && a->end == b->end && a->from == b->from && a->to == b->to &&
           a->found_ms == b->found_ms && a->flags == b->flags;
}

static bool found_equals_known(const struct recovery *rc)
{
    if (rc->known_bad || rc->nfound != rc->nknown)
        return false;
    for (size_t i = 0; i < rc->nfound; i++)
        if (!damage_equal(&rc->found[i], &rc->known[i]))
            return false;
    return true;
}

/*
 * Copies the data file of seg (size bytes) to dir/forensics/<name>.corrupt-
 * <ms>, synced, before recovery changes anything because of the damage.
 * The copy is for people, never read back by Pulse.
 */
static pulse_status_t preserve(struct recovery *rc, struct pulse_segment *seg, uint64_t size)
{
    const struct pulse_io *io = rc->io;
    char fdir[4096], path[4200];
    const char *name = strrchr(seg->log_path, '/');
    uint8_t *buf = NULL;
    int fd = -1, sfd = -1;
    int err = 0;
    pulse_status_t st = PULSE_OK;

    name = name != NULL ? name + 1 : seg->log_path;
    if (snprintf(fdir, sizeof fdir, "%s/%s", rc->dir, FORENSICS_DIR) >= (int)sizeof fdir ||
        snprintf(path, sizeof path, "%s/%s.corrupt-%" PRId64, fdir, name, rc->now_ms) >= (int)sizeof path)
        return PULSE_INVALID;
    if (io->mkdir(io, fdir, 0755) < 0 && errno != EEXIST) {
        err = errno;
        goto out;
    }
    fd = io->open(io, path, O_CREAT | O_EXCL | O_WRONLY, 0644);
    buf = pulse_malloc(COPY_CHUNK);
    if (fd < 0 || buf == NULL) {
        err = fd < 0 ? errno : ENOMEM;
        goto out;
    }
    if (pulse_segment_pin(seg, &sfd) != PULSE_OK) {
        sfd = -1;
        err = EMFILE;
        goto out;
    }
    for (uint64_t done = 0; done < size;) {
        size_t want = size - done < COPY_CHUNK ? (size_t)(size - done) : COPY_CHUNK;
        ssize_t got = pulse_io_pread_all(io, sfd, buf, want, (off_t)done);
        if (got <= 0 || pulse_io_pwrite_all(io, fd, buf, (size_t)got, (off_t)done, NULL) < 0) {
            err = got == 0 ? EIO : errno;
            goto out;
        }
        done += (uint64_t)got;
    }
    if (io->fdatasync(io, fd) < 0 || io->fsync_dir(io, fdir) < 0 || io->fsync_dir(io, rc->dir) < 0)
        err = errno;
out:
    if (sfd >= 0)
        pulse_segment_unpin(seg);
    if (fd >= 0)
        io->close(io, fd);
    pulse_free(buf);
    if (err != 0) {
        PULSE_ERROR("recover: could not keep a forensic copy of %s at %s: %s; the damaged bytes stay in the "
                    "segment file itself",
                    seg->log_path, path, strerror(err));
        if (fd >= 0)
            io->unlink(io, path);
        st = pulse_status_from_errno(err);
    } else {
        PULSE_ERROR("recover: kept a forensic copy of %s (%" PRIu64 " bytes) at %s", seg->log_path, size, path);
        rc->rec->forensic_copies++;
    }
    return st;
}

/* Step 6 and 7 for one segment, after the record is durable. */
static pulse_status_t apply_segment(struct recovery *rc, struct pulse_segment *seg, bool active, struct seg_work *w)
{
    uint64_t keep = w->cut ? w->scan.tail_flaw.pos : w->fsize;
    pulse_status_t st;

    if (w->cut) {
        st = cut_file(seg, keep);
        if (st != PULSE_OK)
            return st;
        rc->rec->truncated_bytes += w->fsize - keep;
        w->index_dirty = true;
    }
    if (active && !(rc->synced && !w->cut)) {
        /* Whatever survived must be on disk before HW = LEO is declared. */
        st = sync_file(seg, &seg->data);
        if (st != PULSE_OK)
            return st;
    }
    if (w->index_dirty) {
        st = pulse_segment_rewrite_index(seg);
        if (st != PULSE_OK)
            return st;
        rc->rec->indexes_rebuilt++;
        PULSE_INFO("recover: rebuilt index %s (%zu entries)", seg->index_path, seg->index.n);
    } else if (active && !rc->synced) {
        st = sync_file(seg, &seg->idx);
        if (st != PULSE_OK)
            return st;
    }
    /* After a kept tail the first appended batch gets an index entry. */
    pulse_segment_set_bounds(seg, &(struct pulse_segment_bounds){
                                      .size = keep,
                                      .next_offset = active ? rc->leo : w->limit,
                                      .max_ts = w->scan.max_ts,
                                      .since_entry = w->kept_tail ? UINT64_MAX : w->scan.since_entry,
                                  });
    /* A sealed segment's table is complete and in memory; its files reopen
     * on demand. */
    if (!active)
        pulse_segment_close_files(seg);
    return PULSE_OK;
}

/* Steps 4 to 7 over every scanned segment. */
static pulse_status_t settle_and_apply(struct recovery *rc, struct pulse_segment **segs, struct seg_work *works,
                                       size_t n)
{
    pulse_status_t st = PULSE_OK;

    for (size_t i = 0; i < n && st == PULSE_OK; i++)
        st = settle_segment(rc, segs[i], i == n - 1, &works[i]);
    if (st == PULSE_OK)
        st = settle_active(rc, segs[n - 1], &works[n - 1]);
    if (st == PULSE_OK)
        st = carry_over(rc, segs, n);
    if (st != PULSE_OK)
        return st;
    /* Forensics before anything is changed because of the damage. */
    for (size_t i = 0; i < n; i++) {
        if (!works[i].new_damage || preserve(rc, segs[i], works[i].fsize) != PULSE_OK)
            continue;
        for (size_t j = 0; j < rc->nfound; j++)
            if (rc->found[j].seg_base == segs[i]->base)
                rc->found[j].flags |= PULSE_DAMAGE_COPIED;
    }
    if (!pulse_damage_valid(rc->found, rc->nfound)) {
        /* Cannot happen: the ranges come from one ordered scan. Refuse to
         * write a record that would not read back. */
        PULSE_ERROR("recover: %s: the damaged ranges found are not in order; not opening the log", rc->dir);
        return PULSE_CORRUPT;
    }
    if (!found_equals_known(rc)) {
        st = pulse_damage_write(rc->io, rc->dir, rc->found, rc->nfound);
        if (st != PULSE_OK) {
            PULSE_ERROR("recover: %s: cannot record the damage found (%s); not opening the log, so that a later "
                        "start finds it again",
                        rc->dir, pulse_status_message(st));
            return st;
        }
    }
    for (size_t i = 0; i < n && st == PULSE_OK; i++)
        st = apply_segment(rc, segs[i], i == n - 1, &works[i]);
    /* Files may have been created (fresh log, or a missing index). */
    if (st == PULSE_OK && !rc->synced && rc->io->fsync_dir(rc->io, rc->dir) < 0) {
        int err = errno;
        PULSE_ERROR("recover: fsync directory %s failed: %s", rc->dir, strerror(err));
        st = pulse_status_from_errno(err);
    }
    return st;
}

/* Fills the counters of rec that describe the damage. */
static void count_damage(struct recovery *rc, struct pulse_segment **segs, size_t n)
{
    for (size_t i = 0; i < rc->nfound; i++) {
        rc->rec->damaged_ranges++;
        rc->rec->damaged_bytes += rc->found[i].end - rc->found[i].pos;
    }
    for (size_t s = 0; s < n; s++) {
        for (size_t i = 0; i < rc->nfound; i++) {
            if (rc->found[i].seg_base == segs[s]->base && pulse_damage_has_bytes(&rc->found[i])) {
                rc->rec->corrupt_segments++;
                break;
            }
        }
    }
}

/* Step 2: the snapshot and the damage record. */
static pulse_status_t read_checkpoints(struct recovery *rc)
{
    pulse_status_t st = pulse_snapshot_read_ext(rc->io, rc->dir, &rc->snap, &rc->ext);

    if (st == PULSE_OK) {
        rc->have_snap = true;
    } else if (st == PULSE_CORRUPT) {
        PULSE_WARN("recover: %s/%s is not a valid snapshot; running the full scan", rc->dir, PULSE_SNAPSHOT_NAME);
    } else if (st != PULSE_NOT_FOUND) {
        return st;
    }
    st = pulse_damage_read(rc->io, rc->dir, &rc->known, &rc->nknown);
    if (st == PULSE_CORRUPT) {
        /* Only a scan of everything can find the damaged bytes again. */
        PULSE_ERROR("recover: %s/%s does not decode; running the full scan and writing it anew (reasons for "
                    "earlier offset gaps are lost)",
                    rc->dir, PULSE_DAMAGE_NAME);
        rc->known_bad = true;
        st = PULSE_OK;
    } else if (st == PULSE_NOT_FOUND) {
        st = PULSE_OK;
    }
    return st;
}

/*
 * Where an empty segment must be created in front of the segment files
 * (first: the lowest base there is, INT64_MAX when there are none), or
 * INT64_MAX when none is needed.
 * A log without segment files gets one: at the lowest base that proves a
 * segment once existed (an orphan index, the snapshot's or the running
 * log's active segment), so that the offsets from there to the log end
 * (settle_active) are recorded as missing rather than left unsaid; else
 * after every offset the damage record names; else at 0 (a new log).
 * In a contiguous log an orphan index below the first segment file is a
 * lost first segment (retention removes an index before its data): an
 * empty segment stands in for it, and the gap after it (settle_gap)
 * records its offsets as missing.
 */
static int64_t lost_start(const struct recovery *rc, int64_t first)
{
    int64_t base = INT64_MAX;

    if (first != INT64_MAX)
        return rc->contiguous && rc->orphan_min < first ? rc->orphan_min : INT64_MAX;
    if (rc->orphan_min != INT64_MAX)
        base = rc->orphan_min;
    if (rc->have_snap && rc->snap.active_base < base)
        base = rc->snap.active_base;
    if (rc->proof != NULL && rc->proof->active_base < base)
        base = rc->proof->active_base;
    if (base != INT64_MAX)
        return base;
    base = 0;
    for (size_t i = 0; i < rc->nknown; i++)
        base = rc->known[i].to > base ? rc->known[i].to : base;
    return base;
}

/* A segment per base, nothing opened yet except the active segment's files
 * (and those of a segment created in front: lost_start). */
static pulse_status_t open_segments(struct recovery *rc, struct pulse_fdcache *cache, int64_t **bases, size_t *n,
                                    struct pulse_segment ***out)
{
    struct pulse_segment **segs;
    pulse_status_t st = PULSE_OK;

    int64_t first = lost_start(rc, *n > 0 ? (*bases)[0] : INT64_MAX);
    bool made = first != INT64_MAX;
    if (made) {
        int64_t *nb = pulse_malloc((*n + 1) * sizeof *nb);
        if (nb == NULL)
            return PULSE_NOMEM;
        nb[0] = first;
        if (*n > 0)
            memcpy(nb + 1, *bases, *n * sizeof *nb);
        pulse_free(*bases);
        *bases = nb;
        (*n)++;
    }
    segs = pulse_calloc(*n, sizeof *segs);
    if (segs == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < *n && st == PULSE_OK; i++)
        st = pulse_segment_open(rc->io, cache, rc->dir, (*bases)[i], false, &segs[i]);
    /* The first segment of a fresh (or emptied) log, or the stand-in of a
     * lost first segment, is created; so are the active one's files. */
    if (st == PULSE_OK && made && *n > 1)
        st = pulse_segment_create_files(segs[0]);
    if (st == PULSE_OK)
        st = pulse_segment_create_files(segs[*n - 1]);
    if (st != PULSE_OK) {
        for (size_t i = 0; i < *n; i++)
            pulse_segment_release(segs[i]);
        pulse_free(segs);
        return st;
    }
    *out = segs;
    return PULSE_OK;
}

/* ---- merges left half done --------------------------------------------- */

/*
 * Whether the merge file at path holds what a merge writes: at least one
 * batch, every batch whole and valid (segscan.h's rule, offsets from first
 * up and all below end), nothing after the last batch. *ok_out is false
 * (and why gets the problem) otherwise; a failure to read it at all is an
 * error status.
 */
static pulse_status_t verify_merge_file(const struct pulse_io *io, const char *path, int64_t first, int64_t end,
                                        bool *ok_out, char *why, size_t why_len)
{
    struct pulse_segscan sc;
    struct pulse_segscan_item it;
    uint64_t fsize = 0;
    size_t batches = 0;
    int fd = io->open(io, path, O_RDONLY, 0);
    pulse_status_t st = PULSE_OK;

    *ok_out = false;
    if (fd < 0 || io->fsize(io, fd, &fsize) < 0) {
        int err = errno;
        PULSE_ERROR("recover: cannot read %s: %s", path, strerror(err));
        if (fd >= 0)
            io->close(io, fd);
        return pulse_status_from_errno(err);
    }
    pulse_segscan_init(&sc, io, fd, path, first, fsize, 0, first, end, PULSE_SEGSCAN_STOP);
    while ((st = pulse_segscan_next(&sc, &it)) == PULSE_OK && it.kind == PULSE_SEGSCAN_BATCH)
        batches++;
    if (st == PULSE_OK && it.kind == PULSE_SEGSCAN_DAMAGE)
        snprintf(why, why_len, "at byte %" PRIu64 ": %s", it.pos, it.problem);
    else if (st == PULSE_OK && batches == 0)
        snprintf(why, why_len, "no batch");
    else
        *ok_out = st == PULSE_OK;
    pulse_segscan_fini(&sc);
    io->close(io, fd);
    return st;
}

/* Unlinks path unless it is already gone. */
static pulse_status_t unlink_if_present(const struct pulse_io *io, const char *path)
{
    if (io->unlink(io, path) < 0 && errno != ENOENT) {
        int err = errno;
        PULSE_ERROR("recover: unlink %s failed: %s", path, strerror(err));
        return pulse_status_from_errno(err);
    }
    return PULSE_OK;
}

/*
 * Rolls one merge forward: removes the segments in (first, end), then the
 * first segment's index (rebuilt by the scan that follows), then renames
 * the merge file over the first segment's data file. Each step is
 * idempotent, so a crash in here is finished by the next open.
 */
static pulse_status_t roll_merge_forward(const struct pulse_io *io, const char *dir, const char *mpath, int64_t first,
                                         int64_t end, const int64_t *bases, size_t nbases)
{
    char *path = NULL;
    uint32_t removed = 0;
    pulse_status_t st = PULSE_OK;

    for (size_t i = 0; i < nbases && st == PULSE_OK; i++) {
        if (bases[i] <= first || bases[i] >= end)
            continue;
        path = pulse_segment_path(dir, bases[i], "index");
        st = path == NULL ? PULSE_NOMEM : unlink_if_present(io, path);
        pulse_free(path);
        path = pulse_segment_path(dir, bases[i], "log");
        if (st == PULSE_OK)
            st = path == NULL ? PULSE_NOMEM : unlink_if_present(io, path);
        pulse_free(path);
        path = NULL;
        removed++;
    }
    /* As in the merge itself (plog_edit.c): removals durable before the
     * rename. */
    if (st == PULSE_OK && io->fsync_dir(io, dir) < 0) {
        int err = errno;
        PULSE_ERROR("recover: fsync directory %s failed: %s", dir, strerror(err));
        st = pulse_status_from_errno(err);
    }
    if (st != PULSE_OK)
        return st;
    pulse_failpoint("compact_finish_merge_before_rename");
    path = pulse_segment_path(dir, first, "index");
    st = path == NULL ? PULSE_NOMEM : unlink_if_present(io, path);
    pulse_free(path);
    path = pulse_segment_path(dir, first, "log");
    if (st == PULSE_OK && path == NULL)
        st = PULSE_NOMEM;
    if (st == PULSE_OK && io->rename(io, mpath, path) < 0) {
        int err = errno;
        PULSE_ERROR("recover: rename %s -> %s failed: %s", mpath, path, strerror(err));
        st = pulse_status_from_errno(err);
    }
    if (st == PULSE_OK && io->fsync_dir(io, dir) < 0) {
        int err = errno;
        PULSE_ERROR("recover: fsync directory %s failed: %s", dir, strerror(err));
        st = pulse_status_from_errno(err);
    }
    if (st == PULSE_OK)
        PULSE_WARN("recover: %s: completed an interrupted compaction merge: %s now holds offsets %" PRId64 "..%" PRId64
                   " (%" PRIu32 " later segment(s) it replaced removed)",
                   dir, path, first, end - 1, removed);
    pulse_free(path);
    return st;
}

/* Collects the merge file names and the segment bases of dir. */
static pulse_status_t scan_for_merges(const char *dir, char ***names_out, size_t *nnames_out, int64_t **bases_out,
                                      size_t *nbases_out)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char **names = NULL;
    int64_t *bases = NULL;
    size_t nn = 0, nb = 0, capn = 0, capb = 0;
    pulse_status_t st = PULSE_OK;

    if (d == NULL) {
        int err = errno;
        PULSE_ERROR("recover: opendir %s failed: %s", dir, strerror(err));
        return pulse_status_from_errno(err);
    }
    while (st == PULSE_OK && (de = readdir(d)) != NULL) {
        int64_t a, b;
        if (pulse_segment_parse_merge_name(de->d_name, &a, &b)) {
            if (nn == capn) {
                capn = capn ? capn * 2 : 4;
                char **nb2 = pulse_realloc(names, capn * sizeof *names);
                if (nb2 == NULL) {
                    st = PULSE_NOMEM;
                    break;
                }
                names = nb2;
            }
            names[nn] = pulse_strdup(de->d_name);
            if (names[nn] == NULL)
                st = PULSE_NOMEM;
            else
                nn++;
        } else if (pulse_segment_parse_name(de->d_name, &a)) {
            if (nb == capb) {
                capb = capb ? capb * 2 : 16;
                int64_t *bb = pulse_realloc(bases, capb * sizeof *bases);
                if (bb == NULL) {
                    st = PULSE_NOMEM;
                    break;
                }
                bases = bb;
            }
            bases[nb++] = a;
        }
    }
    closedir(d);
    if (st != PULSE_OK) {
        for (size_t i = 0; i < nn; i++)
            pulse_free(names[i]);
        pulse_free(names);
        pulse_free(bases);
        return st;
    }
    *names_out = names;
    *nnames_out = nn;
    *bases_out = bases;
    *nbases_out = nb;
    return PULSE_OK;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Step 0: finishes every merge that compaction left half done in dir: a
 * file "<first>-<end>.merge" (plog_edit.c, "Crash safety of a merge";
 * docs/Storage.md "Merging adjacent segments"). Its existence proves that
 * the merged data was complete and synced before any segment it replaces
 * was touched, so the merge is rolled forward: once the file verifies and
 * <first>.log still exists, the segment files with a base in (first, end)
 * are removed, the directory is fsynced, <first>.index is removed (the
 * scan rebuilds it) and the merge file is renamed over <first>.log, then
 * the directory is fsynced again. Every step is idempotent, so a crash in
 * here is finished by the next open. A merge file that does not verify, or
 * whose first segment is missing, is left in place, logged as an error
 * naming it, and counted in rec->corrupt_segments; nothing is removed for
 * it. PULSE_IO/PULSE_NOSPACE for a failed unlink, rename or directory fsync
 * (nothing is lost: the next open retries), PULSE_NOMEM.
 */
static pulse_status_t finish_merges(const struct pulse_io *io, const char *dir, struct pulse_plog_recovery *rec)
{
    char **names = NULL;
    int64_t *bases = NULL;
    size_t nn = 0, nb = 0;
    pulse_status_t st;

    st = scan_for_merges(dir, &names, &nn, &bases, &nb);
    if (st != PULSE_OK || nn == 0)
        goto out;
    qsort(names, nn, sizeof *names, cmp_names);
    for (size_t i = 0; i < nn && st == PULSE_OK; i++) {
        int64_t first = 0, end = 0;
        bool has_first = false, ok = false;
        char why[PULSE_SEGSCAN_PROBLEM_MAX + 40] = "its first segment is missing";
        size_t need = strlen(dir) + strlen(names[i]) + 2;
        char *mpath = pulse_malloc(need);

        if (mpath == NULL) {
            st = PULSE_NOMEM;
            break;
        }
        snprintf(mpath, need, "%s/%s", dir, names[i]);
        (void)pulse_segment_parse_merge_name(names[i], &first, &end);
        for (size_t j = 0; j < nb; j++)
            has_first = has_first || bases[j] == first;
        if (has_first)
            st = verify_merge_file(io, mpath, first, end, &ok, why, sizeof why);
        if (st == PULSE_OK && ok) {
            st = roll_merge_forward(io, dir, mpath, first, end, bases, nb);
        } else if (st == PULSE_OK) {
            /* Never remove data on an unproven file: the segments left keep
             * serving, the offsets only the merge file held are unreadable
             * until an operator restores them. */
            PULSE_ERROR("recover: CORRUPT interrupted compaction merge %s: %s. It is left in place and not "
                        "served; the remaining segment files are kept as they are. Keep a copy of it for "
                        "inspection (pulse-log dump reads it as a segment file)",
                        mpath, why);
            rec->corrupt_segments++;
        }
        pulse_free(mpath);
    }
out:
    for (size_t i = 0; i < nn; i++)
        pulse_free(names[i]);
    pulse_free(names);
    pulse_free(bases);
    return st;
}

/*
 * Whether step 7 has nothing to do: the snapshot names the active segment
 * (fast path) and its durable size is exactly the file's size, no file was
 * created for this recovery (n_listed segment files, each with its index
 * among the listed ones; ibases sorted) and this is an open, not a reopen. The snapshot
 * only ever records a size that a successful fdatasync covered, and a
 * segment's bytes below it are never rewritten in place, so the page cache
 * holds nothing of the data file that the disk lacks; the snapshot's own
 * rename was followed by a directory fsync, which made the entries of the
 * segment files created before it durable too. A clean close leaves every
 * partition so; after a crash only the partitions written since their last
 * checkpoint differ, and those are synced as before. The active index may
 * still hold entries a crash left unsynced: it is derived data that every
 * recovery checks entry by entry against the batches it points at.
 */
static bool proven_synced(const struct recovery *rc, bool fast, uint64_t asize, const int64_t *bases, size_t n,
                          size_t n_listed, const int64_t *ibases, size_t ni)
{
    if (rc->proof != NULL || !fast || n != n_listed || asize != (uint64_t)rc->snap.active_size)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!has_base(ibases, ni, bases[i]))
            return false;
    return true;
}

pulse_status_t pulse_recover_run(const struct pulse_io *io, struct pulse_fdcache *cache, const char *dir,
                                 uint32_t index_interval, bool contiguous, const struct pulse_snapshot *proof,
                                 struct pulse_recover_result *res, struct pulse_plog_recovery *rec)
{
    struct recovery rc = {
        .io = io, .dir = dir, .interval = index_interval, .rec = rec, .proof = proof, .contiguous = contiguous};
    int64_t t0 = pulse_clock_mono_us();
    int64_t *bases = NULL, *ibases = NULL;
    size_t n = 0, ni = 0, n_listed = 0;
    struct pulse_segment **segs = NULL;
    struct seg_work *works = NULL;
    bool fast = false;
    uint32_t temps = 0;
    pulse_status_t st;

    memset(rec, 0, sizeof *rec);
    rc.now_ms = pulse_clock_wall_ms();
    /* A merge of segments that compaction left half done is finished first,
     * so that the listing below sees the merged segment. */
    st = finish_merges(io, dir, rec);
    if (st == PULSE_OK)
        st = list_dir(io, dir, &bases, &n, &ibases, &ni, &temps);
    if (st == PULSE_OK)
        st = read_orphans(&rc, bases, n, ibases, ni);
    if (st == PULSE_OK)
        st = read_checkpoints(&rc);
    n_listed = n;
    if (st == PULSE_OK)
        st = open_segments(&rc, cache, &bases, &n, &segs);
    if (st != PULSE_OK)
        goto out;
    rec->temp_files_removed = temps;
    if (rc.have_snap && rc.snap.active_base == bases[n - 1] && !rc.known_bad) {
        uint64_t asize = 0;
        st = file_size(segs[n - 1], &asize);
        if (st != PULSE_OK)
            goto out;
        fast = (uint64_t)rc.snap.active_size <= asize;
        if (ni > 1)
            qsort(ibases, ni, sizeof *ibases, cmp_i64); /* read_orphans is done with them */
        rc.synced = proven_synced(&rc, fast, asize, bases, n, n_listed, ibases, ni);
    }
    rec->sync_skipped = rc.synced;
    if (rc.have_snap && !fast)
        PULSE_INFO("recover: %s: snapshot does not match the segment files; running the full scan", dir);
    rec->used_snapshot = fast;
    rec->segments = (uint32_t)n;
    works = pulse_calloc(n, sizeof *works);
    if (works == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n && st == PULSE_OK; i++) {
        bool active = i == n - 1;
        works[i].limit = active ? INT64_MAX : bases[i + 1];
        st = scan_segment(&rc, segs[i], active, fast, active && fast ? (uint64_t)rc.snap.active_size : 0, &works[i]);
    }
    if (st == PULSE_OK)
        st = settle_and_apply(&rc, segs, works, n);
    if (st != PULSE_OK)
        goto out;
    count_damage(&rc, segs, n);
    res->leo = rc.leo;
    res->segs = segs;
    res->n = n;
    res->damage = rc.found;
    res->ndamage = rc.nfound;
    res->have_snap = rc.have_snap;
    res->snap = rc.snap;
    res->snap_version = rc.ext.version;
    res->snap_active_index_n = rc.ext.active_index_n;
    segs = NULL;
    rc.found = NULL;
    rec->elapsed_us = pulse_clock_mono_us() - t0;
    /* Debug: a start of many partitions would log a line each. What was
     * repaired or found damaged has its own lines above; the broker logs
     * one summary of the start. */
    PULSE_DEBUG_LOG("recover: %s: %zu segment(s), log end %" PRId64 ", %s, %" PRIu64 " bytes truncated, %" PRIu32
                    " index(es) rebuilt, %" PRIu32 " damaged range(s) (%" PRIu32 " new, %" PRIu64 " bytes), %" PRId64
                    " us",
                    dir, n, res->leo, fast ? "snapshot fast path" : "full scan", rec->truncated_bytes,
                    rec->indexes_rebuilt, rec->damaged_ranges, rec->new_damaged_ranges, rec->damaged_bytes,
                    rec->elapsed_us);
out:
    if (segs != NULL) {
        for (size_t i = 0; i < n; i++)
            pulse_segment_release(segs[i]);
        pulse_free(segs);
    }
    if (works != NULL) {
        for (size_t i = 0; i < n; i++)
            pulse_free(works[i].scan.flaws);
        pulse_free(works);
    }
    pulse_free(rc.known);
    pulse_free(rc.found);
    pulse_free(rc.ext.seals);
    pulse_free(bases);
    pulse_free(ibases);
    return st;
}
