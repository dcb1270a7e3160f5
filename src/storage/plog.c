/* SPDX-License-Identifier: MIT */
/*
 * plog.c - the partition log: append, group commit, reads, rotation, trim
 * (storage contract sections 1, 2, 4, 5, 8; docs/Storage.md).
 *
 * Design.
 *   Appends take the writer lock, give the batch the next offset, pwrite it
 *   at the explicit end of the active segment, add an index entry when due,
 *   and only then publish the new written end and LEO. Nothing a reader can
 *   see moves here: readers are bounded by HW and by each segment's durable
 *   byte end, both published by a sync.
 *
 *   Group commit: a waiter that finds no sync running becomes the leader. It
 *   captures (active segment, written end, LEO) under the writer lock, drops
 *   the lock, fdatasyncs the data file (and the index file when it has new
 *   entries), then publishes durable end and HW under sync_lock and wakes
 *   everyone. Appends that landed during the fdatasync are covered by the
 *   next leader, so N concurrent appenders share far fewer than N syncs.
 *
 *   Rotation fdatasyncs the old segment under the writer lock before the new
 *   file exists, so HW can never pass the end of a segment that is not on
 *   disk; the new file's directory entry is fsynced before anything in it
 *   can be acknowledged. The new segment is opened before the old one gives
 *   anything up, so a failed open leaves the log as it was.
 *
 *   Damage (docs/Storage.md "Corruption"): the log holds the damaged and
 *   missing ranges recovery found, as an immutable set that readers take a
 *   reference on. Slices never include damaged bytes and only skip offsets
 *   before their first batch, reporting them. A read whose CRC check meets
 *   damage nobody knew, or whose walk meets a batch header that cannot be
 *   right (batch_plausible), learns it with the recovery rule, publishes
 *   a new set, records it in the damage record and reads on past it.
 *
 *   Failure fencing: a failed pwrite or fdatasync sets fenced (sticky, under
 *   sync_lock so that no leader can publish HW after it) and cuts the active
 *   file back to its durable size, so a short write leaves no half batch. An
 *   fdatasync is never retried: after a failed one the kernel may have
 *   dropped the dirty pages and a retry would report success over lost data.
 */
#include "storage/plog.h"

#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/crc32c.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/debug.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "storage/batch.h"
#include "storage/fdcache.h"
#include "common/fsio.h"
#include "storage/plog_int.h"
#include "storage/recover.h"
#include "storage/segment.h"
#include "storage/segscan.h"
#include "storage/snapshot.h"

void pulse_plog_config_init(struct pulse_plog_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->segment_max_bytes = PULSE_PLOG_DEFAULT_SEGMENT_BYTES;
    cfg->index_interval_bytes = PULSE_PLOG_DEFAULT_INDEX_INTERVAL;
    cfg->sync_mode = PULSE_SYNC_EVERY_WRITE;
    cfg->sync_interval_ms = 1000;
    cfg->io = NULL;
    cfg->fdcache = NULL;
    cfg->sync_observer = NULL;
    cfg->sync_observer_arg = NULL;
    cfg->checkpoint_interval_ms = 1000;
    cfg->contiguous = false;
}

static void store_max_u64(_Atomic uint64_t *a, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (cur < v && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_release, memory_order_relaxed))
        ;
}

static void store_max_i64(_Atomic int64_t *a, int64_t v)
{
    int64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (cur < v && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_release, memory_order_relaxed))
        ;
}

static void store_max_size(_Atomic size_t *a, size_t v)
{
    size_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (cur < v && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_release, memory_order_relaxed))
        ;
}

/* The active segment. Caller holds wlock (or is the only user). */
static struct pulse_segment *active_seg(struct pulse_plog *plog)
{
    PULSE_ASSERT(plog->nsegs >= 1); /* a log always has its active segment */
    return plog->segs[plog->nsegs - 1];
}

static void observe(struct pulse_plog *plog, int64_t t0, bool ok)
{
    if (plog->cfg.sync_observer != NULL)
        plog->cfg.sync_observer(plog->cfg.sync_observer_arg, pulse_clock_mono_us() - t0, ok);
}

/* Sets fenced (under sync_lock, so that no sync leader publishes HW after
 * it) and wakes the waiters. Returns the durable size of seg (nullable) as
 * of the fence: it cannot grow any more. */
static uint64_t set_fenced(struct pulse_plog *plog, struct pulse_segment *seg, const char *who, const char *what)
{
    uint64_t durable = 0;

    pthread_mutex_lock(&plog->sync_lock);
    if (!atomic_load(&plog->fenced)) {
        atomic_store(&plog->fenced, true);
        PULSE_ERROR("%s %s: fenced after a failed %s; appends are refused until the log is reopened", who, plog->dir,
                    what);
    }
    if (seg != NULL)
        durable = atomic_load_explicit(&seg->durable_size, memory_order_relaxed);
    pthread_cond_broadcast(&plog->sync_cond);
    pthread_mutex_unlock(&plog->sync_lock);
    return durable;
}

void pulse_plog_fence(struct pulse_plog *plog, const char *who, const char *what)
{
    (void)set_fenced(plog, NULL, who, what);
}

/*
 * Fences the log after a failed write or sync. Caller holds wlock. When
 * truncate is set (a write failed), the active file is cut back to its
 * durable size so no partial batch stays behind. The cut comes after the
 * fence, outside sync_lock: from the fence on no leader publishes, so the
 * durable size read with it is final, and a leader still in its fdatasync
 * only syncs bytes nobody will count.
 */
static void fence_locked(struct pulse_plog *plog, struct pulse_segment *seg, const char *what, bool truncate)
{
    uint64_t durable = set_fenced(plog, seg, "plog", what);
    int fd;

    if (!truncate || seg == NULL)
        return;
    /* Should the cut fail, pulse_plog_reopen cuts again before anything
     * else touches the file. */
    if (pulse_segment_pin(seg, &fd) == PULSE_OK) {
        if (plog->io->ftruncate(plog->io, fd, (off_t)durable) < 0) {
            int err = errno;
            PULSE_ERROR("plog: ftruncate %s to %" PRIu64 " failed: %s", seg->log_path, durable, strerror(err));
        }
        pulse_segment_unpin(seg);
    }
    atomic_store_explicit(&seg->size, durable, memory_order_release);
}

/*
 * Takes back an append whose write failed for lack of space (contract
 * section 5, "Full disk"). Caller holds wlock. Every byte from pos on was
 * written by this append alone: seg->size (the writer's end, and the target
 * any sync leader captures) is still pos, so no fdatasync ever covered them,
 * and nothing published (size, next offset, LEO, an index entry) points at
 * them yet. Cutting the file back to pos restores it exactly, appends queued
 * before this one stay where they are (their sync is still to come), and the
 * log keeps accepting appends: a later one succeeds once space returns.
 * Only if the cut itself fails is the tail unknown; the log then fences as
 * for any other failed write. Returns why (the caller's status).
 */
static pulse_status_t undo_write_locked(struct pulse_plog *plog, struct pulse_segment *seg, int fd, uint64_t pos,
                                        pulse_status_t why)
{
    if (plog->io->ftruncate(plog->io, fd, (off_t)pos) < 0) {
        int err = errno;
        PULSE_ERROR("plog: ftruncate %s to %" PRIu64 " after a failed write failed: %s", seg->log_path, pos,
                    strerror(err));
        fence_locked(plog, seg, "write", true);
    }
    return why;
}

/*
 * The durable state as a snapshot: HW, the active segment and its durable
 * size, read together under sync_lock. A rotation in between (seg is then
 * the sealed one) gives a state that is just as true: the old segment
 * durable whole, HW at the new base. False when the log is fenced (its
 * state is about to change) or the state cannot be a snapshot.
 * Locks: list_lock, then sync_lock, briefly.
 */
static bool durable_state(struct pulse_plog *plog, struct pulse_snapshot *snap)
{
    struct pulse_segment *seg;
    bool ok;

    pthread_mutex_lock(&plog->list_lock);
    seg = plog->segs[plog->nsegs - 1];
    pulse_segment_acquire(seg);
    pthread_mutex_unlock(&plog->list_lock);
    pthread_mutex_lock(&plog->sync_lock);
    ok = !atomic_load(&plog->fenced);
    snap->leo = atomic_load(&plog->hw);
    snap->active_base = seg->base;
    snap->active_size = (int64_t)atomic_load(&seg->durable_size);
    snap->active_next = snap->leo;
    pthread_mutex_unlock(&plog->sync_lock);
    pulse_segment_release(seg);
    /* Cannot happen unfenced: rotation publishes HW = new base. */
    return ok && snap->leo >= snap->active_base;
}

static bool snap_equal(const struct pulse_snapshot *a, const struct pulse_snapshot *b)
{
    return a->leo == b->leo && a->active_base == b->active_base && a->active_size == b->active_size &&
           a->active_next == b->active_next;
}

/*
 * Fills snap's version 2 fields for its active segment seg: the data
 * file's inode and the CRC32C of the index entries below activeSize (in
 * memory they are the ones the index file holds; recovery checks the file
 * against the CRC). Continues the CRC of the previous snapshot of the same
 * segment. Left zero (nothing vouched for) when the file cannot be pinned.
 * Caller holds snap_lock.
 */
static void active_part(struct pulse_plog *plog, struct pulse_segment *seg, const struct pulse_snapshot *snap,
                        struct pulse_snapshot_ext *ext)
{
    struct pulse_file_id id;
    size_t n = 0;
    uint32_t crc = 0;
    int fd;

    if (pulse_segment_pin(seg, &fd) != PULSE_OK)
        return;
    bool ok = plog->io->file_id(plog->io, fd, &id) == 0;
    pulse_segment_unpin(seg);
    if (!ok)
        return;
    if (plog->act_seg == seg && plog->act_base == seg->base) {
        n = plog->act_n;
        crc = plog->act_crc;
    }
    pthread_mutex_lock(&seg->index_lock);
    while (n < seg->index.n && n < UINT32_MAX && seg->index.entries[n].rel_pos < (uint64_t)snap->active_size) {
        uint8_t raw[PULSE_INDEX_ENTRY_SIZE];
        pulse_index_encode_entry(&seg->index.entries[n], raw);
        crc = pulse_crc32c(crc, raw, sizeof raw);
        n++;
    }
    pthread_mutex_unlock(&seg->index_lock);
    plog->act_seg = seg;
    plog->act_base = seg->base;
    plog->act_n = n;
    plog->act_crc = crc;
    ext->active_ino = id.ino;
    ext->active_index_n = (uint32_t)n;
    ext->active_index_crc = crc;
    /* May be newer than the durable prefix (a later append not yet
     * synced): an overestimate only keeps data longer and makes a time
     * lookup read one segment more, never less. */
    ext->active_max_ts = atomic_load_explicit(&seg->max_ts, memory_order_relaxed);
}

/*
 * The version 2 parts of the snapshot of state snap: the records of the
 * segments below its active one (pulse_segment_describe, once per
 * segment), oldest first, in ext->seals (pulse_free), and the active
 * segment's part. *complete_out is false when a sealed segment
 * got no record (it is then checked entry by entry at the next open).
 * Caller holds snap_lock; I/O (a stat and an fstat per segment described
 * for the first time) happens under it.
 */
static pulse_status_t snapshot_parts(struct pulse_plog *plog, const struct pulse_snapshot *snap,
                                     struct pulse_snapshot_ext *ext, bool *complete_out)
{
    struct pulse_segment **segs;
    struct pulse_snapshot_seal *seals;
    size_t n, m = 0;

    *complete_out = true;
    pthread_mutex_lock(&plog->list_lock);
    n = plog->nsegs;
    segs = pulse_malloc(n * sizeof *segs);
    for (size_t i = 0; segs != NULL && i < n; i++) {
        segs[i] = plog->segs[i];
        pulse_segment_acquire(segs[i]);
    }
    pthread_mutex_unlock(&plog->list_lock);
    seals = pulse_calloc(n, sizeof *seals);
    if (segs == NULL || seals == NULL) {
        if (segs != NULL)
            for (size_t i = 0; i < n; i++)
                pulse_segment_release(segs[i]);
        pulse_free(segs);
        pulse_free(seals);
        return PULSE_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        struct pulse_segment *seg = segs[i];
        if (seg->base == snap->active_base)
            active_part(plog, seg, snap, ext);
        if (seg->base >= snap->active_base)
            continue;
        if (!seg->have_seal && m < PULSE_SNAPSHOT_MAX_SEALS)
            seg->have_seal = pulse_segment_describe(seg, &seg->seal) == PULSE_OK;
        if (seg->have_seal && m < PULSE_SNAPSHOT_MAX_SEALS) {
            /* Its offsets end where the next listed segment begins (a
             * compaction may have removed the one after it). */
            seg->seal.next = segs[i + 1]->base;
            seals[m++] = seg->seal;
        } else {
            *complete_out = false;
        }
    }
    for (size_t i = 0; i < n; i++)
        pulse_segment_release(segs[i]);
    pulse_free(segs);
    ext->seals = seals;
    ext->nseals = m;
    return PULSE_OK;
}

/* Writes snap (version 2, with its sealed records) and remembers it.
 * Caller holds snap_lock. */
static pulse_status_t put_snapshot(struct pulse_plog *plog, const struct pulse_snapshot *snap)
{
    struct pulse_snapshot_ext ext = {.version = PULSE_SNAPSHOT_VERSION_2};
    bool complete = false;
    pulse_status_t st = snapshot_parts(plog, snap, &ext, &complete);

    if (st == PULSE_OK)
        st = pulse_snapshot_write_ext(plog->io, plog->dir, snap, &ext);
    pulse_free(ext.seals);
    if (st == PULSE_OK) {
        plog->last_snap = *snap;
        plog->last_snap_us = pulse_clock_mono_us();
        plog->snap_owed = !complete;
        atomic_store(&plog->snap_hw, snap->leo);
    }
    return st;
}

pulse_status_t pulse_plog_snapshot_locked(struct pulse_plog *plog)
{
    struct pulse_snapshot snap;
    pulse_status_t st = PULSE_FENCED;

    pthread_mutex_lock(&plog->snap_lock);
    if (durable_state(plog, &snap))
        st = put_snapshot(plog, &snap);
    pthread_mutex_unlock(&plog->snap_lock);
    return st;
}

/* Appends seg to the list. Caller holds wlock. */
static pulse_status_t list_push(struct pulse_plog *plog, struct pulse_segment *seg)
{
    pthread_mutex_lock(&plog->list_lock);
    if (plog->nsegs == plog->cap) {
        size_t ncap = plog->cap == 0 ? 8 : plog->cap * 2;
        struct pulse_segment **ns = pulse_realloc(plog->segs, ncap * sizeof *ns);
        if (ns == NULL) {
            pthread_mutex_unlock(&plog->list_lock);
            return PULSE_NOMEM;
        }
        plog->segs = ns;
        plog->cap = ncap;
    }
    plog->segs[plog->nsegs++] = seg;
    pthread_mutex_unlock(&plog->list_lock);
    return PULSE_OK;
}

/*
 * Pins one file of a segment and fdatasyncs it. A failed pin (out of
 * descriptors) syncs nothing and leaves *sync_failed false: the caller must
 * not fence for it. A failed fdatasync sets *sync_failed (and is logged).
 */
static pulse_status_t pin_and_sync(struct pulse_plog *plog, struct pulse_fdc_file *f, bool *sync_failed)
{
    int fd;
    pulse_status_t st = pulse_fdc_pin(f, &fd);

    if (st != PULSE_OK)
        return st;
    if (plog->io->fdatasync(plog->io, fd) < 0) {
        int err = errno;
        PULSE_ERROR("plog: fdatasync %s failed: %s", f->path, strerror(err));
        *sync_failed = true;
        st = pulse_status_from_errno(err);
    }
    pulse_fdc_unpin(f);
    return st;
}

/*
 * Undoes the files a failed rotation created, so that a later restart does
 * not take an empty newer segment for the active one while the old segment
 * keeps receiving appends (their offsets would then lie past the new
 * segment's base). The name is new (its base is the log end, above every
 * existing segment), so whatever holds it now was created by this rotation.
 * Returns false when that cannot be made durable; the caller fences then.
 */
static bool unmake_segment(struct pulse_plog *plog, int64_t base)
{
    char *paths[2] = {pulse_segment_path(plog->dir, base, "index"), pulse_segment_path(plog->dir, base, "log")};
    bool ok = paths[0] != NULL && paths[1] != NULL;
    bool removed = false;

    for (int i = 0; i < 2 && ok; i++) {
        if (plog->io->unlink(plog->io, paths[i]) == 0)
            removed = true;
        else if (errno != ENOENT) {
            PULSE_ERROR("plog: unlink %s after a failed rotation failed: %s", paths[i], strerror(errno));
            ok = false;
        }
    }
    /* Nothing created (the usual EMFILE case): nothing to make durable, and
     * no descriptor to spare for the directory anyway. */
    if (ok && removed && plog->io->fsync_dir(plog->io, plog->dir) < 0) {
        PULSE_ERROR("plog: fsync directory %s failed: %s", plog->dir, strerror(errno));
        ok = false;
    }
    pulse_free(paths[0]);
    pulse_free(paths[1]);
    return ok;
}

/*
 * Seals the active segment and starts a new one at LEO (contract section 5).
 * Caller holds wlock.
 *
 * The new segment is opened before anything of the old one is given up (its
 * index file stays open), so a failed open (EMFILE, ENOSPC) leaves the old
 * segment active and the log usable: the append that needed the rotation is
 * refused with that status (PULSE_NOFILE, PULSE_NOSPACE) and the next one
 * tries again. Only a failed fdatasync, or failing to undo a half-made
 * segment, fences.
 */
static pulse_status_t rotate_locked(struct pulse_plog *plog)
{
    struct pulse_segment *old = active_seg(plog);
    struct pulse_segment *seg = NULL;
    int64_t leo = atomic_load_explicit(&plog->leo, memory_order_relaxed);
    size_t idx_n = old->index_written;
    int64_t t0 = pulse_clock_mono_us();
    bool failed = false;
    pulse_status_t st = PULSE_OK;

    /* The old segment must be on disk before HW may pass its end, and before
     * a newer segment exists: recovery treats every segment but the last as
     * complete. */
    st = pin_and_sync(plog, &old->data, &failed);
    if (st == PULSE_OK && idx_n > atomic_load(&old->index_synced))
        st = pin_and_sync(plog, &old->idx, &failed);
    if (st != PULSE_OK) {
        if (failed) {
            observe(plog, t0, false);
            fence_locked(plog, old, "fdatasync", false);
        }
        goto out;
    }
    observe(plog, t0, true);
    atomic_fetch_add(&plog->syncs, 1);
    store_max_size(&old->index_synced, idx_n);
    /* Synced: its descriptors may go back to the cache. */
    pulse_fdc_clean(&old->data, old->dirty_ticket);
    pulse_fdc_clean(&old->idx, old->idx_dirty_ticket);
    pthread_mutex_lock(&plog->sync_lock);
    if (!atomic_load(&plog->fenced)) {
        store_max_u64(&old->durable_size, atomic_load_explicit(&old->size, memory_order_relaxed));
        store_max_i64(&plog->hw, leo);
        atomic_store(&plog->last_sync_us, pulse_clock_mono_us());
        pthread_cond_broadcast(&plog->sync_cond);
    }
    pthread_mutex_unlock(&plog->sync_lock);

    st = pulse_segment_open(plog->io, plog->fdcache, plog->dir, leo, true, &seg);
    if (st != PULSE_OK) {
        PULSE_ERROR_RL("plog %s: cannot start segment %020" PRId64 " (%s); segment %020" PRId64
                       " stays active and the append is refused",
                       plog->dir, leo, pulse_status_message(st), old->base);
        if (!unmake_segment(plog, leo))
            fence_locked(plog, NULL, "cleanup of a failed rotation", false);
        goto out;
    }
    /* The new name must be durable before its first byte is acknowledged. */
    if (plog->io->fsync_dir(plog->io, plog->dir) < 0) {
        int err = errno;
        PULSE_ERROR("plog: fsync directory %s failed: %s", plog->dir, strerror(err));
        fence_locked(plog, NULL, "directory fsync", false);
        st = pulse_status_from_errno(err);
        goto out;
    }
    st = list_push(plog, seg);
    if (st != PULSE_OK) {
        pulse_segment_release(seg);
        seg = NULL;
        if (!unmake_segment(plog, leo))
            fence_locked(plog, NULL, "cleanup of a failed rotation", false);
        goto out;
    }
    seg = NULL;
    /* Sealed now: the index file is not written again. */
    pulse_segment_close_index(old);
    PULSE_INFO("plog %s: rolled to segment %020" PRId64 " (previous %" PRIu64 " bytes)", plog->dir, leo,
               atomic_load(&old->size));
    /* Best effort (see pulse_plog_snapshot_locked). */
    (void)pulse_plog_snapshot_locked(plog);
out:
    pulse_segment_release(seg);
    return st;
}

/*
 * Checks a buffer of one or more consecutive contiguous batches (an append
 * unit) outside any lock: pure CPU work on the caller's bytes, walked with
 * the one batch iterator (segscan.h) over the buffer, every batch verified
 * and the first that is not whole and valid ending the walk; the unit's
 * offsets are not numbered yet, so they mean nothing. Fills the unit's
 * record count and newest timestamp.
 */
static pulse_status_t verify_unit(const uint8_t *buf, size_t len, uint64_t *records_out, int64_t *max_ts_out)
{
    struct pulse_segscan sc;
    struct pulse_segscan_item it;
    uint64_t records = 0;
    int64_t max_ts = INT64_MIN;
    pulse_status_t st = PULSE_OK;

    if (buf == NULL || len == 0)
        return PULSE_INVALID;
    pulse_segscan_init_mem(&sc, buf, len, PULSE_SEGSCAN_STOP | PULSE_SEGSCAN_ANY_ORDER);
    /* (NOMEM, inflating a compressed batch to verify it, is no verdict on
     * the unit: it is passed on as such.) */
    while ((st = pulse_segscan_next(&sc, &it)) == PULSE_OK && it.kind == PULSE_SEGSCAN_BATCH) {
        if ((it.hdr.flags & PULSE_BATCH_FLAG_SPARSE) != 0)
            break;
        records += it.hdr.record_count;
        if (it.hdr.first_timestamp > max_ts)
            max_ts = it.hdr.first_timestamp;
        if (it.hdr.last_timestamp > max_ts)
            max_ts = it.hdr.last_timestamp;
    }
    if (st == PULSE_OK && it.kind != PULSE_SEGSCAN_END)
        st = PULSE_INVALID; /* damage, or a sparse batch: only compaction writes those */
    pulse_segscan_fini(&sc);
    if (st == PULSE_OK) {
        *records_out = records;
        *max_ts_out = max_ts;
    }
    return st;
}

/* Gives each batch of a verified unit its base offset, consecutively. The
 * unit passed verify_unit in this call, so every stored CRC is known right
 * and pulse_batch_set_base_offset patches it instead of a third pass over
 * the bytes (encode, verify, number). */
static void number_unit(uint8_t *buf, size_t len, int64_t base)
{
    struct pulse_segscan sc;
    struct pulse_segscan_item it;

    pulse_segscan_init_mem(&sc, buf, len, PULSE_SEGSCAN_TRUST | PULSE_SEGSCAN_ANY_ORDER);
    while (pulse_segscan_next(&sc, &it) == PULSE_OK && it.kind == PULSE_SEGSCAN_BATCH) {
        pulse_batch_set_base_offset(buf + it.pos, (size_t)(it.end - it.pos), base);
        base += it.hdr.record_count;
    }
    pulse_segscan_fini(&sc);
}

/*
 * The segment an append of len bytes and records records at offset base
 * goes to, rolling first when it would not fit the active one (contract
 * section 5); a batch bigger than a whole segment still gets an empty
 * segment of its own. The second test keeps relative offsets within the
 * index's 32 bits. Caller holds wlock.
 */
static pulse_status_t segment_for(struct pulse_plog *plog, size_t len, uint64_t records, int64_t base,
                                  struct pulse_segment **seg_out)
{
    struct pulse_segment *seg = active_seg(plog);
    uint64_t pos = atomic_load_explicit(&seg->size, memory_order_relaxed);
    pulse_status_t st;

    if (pos > 0 && (pos + len > plog->cfg.segment_max_bytes || (uint64_t)(base - seg->base) + records > UINT32_MAX)) {
        st = rotate_locked(plog);
        if (st != PULSE_OK)
            return st;
        seg = active_seg(plog);
    }
    *seg_out = seg;
    return PULSE_OK;
}

/*
 * Writes the numbered unit at pos of seg (data file pinned as fd). A full
 * device refuses this append only (the write is taken back); any other
 * failure fences. Caller holds wlock.
 */
static pulse_status_t write_unit(struct pulse_plog *plog, struct pulse_segment *seg, int fd, const uint8_t *batch,
                                 size_t len, uint64_t pos)
{
    size_t done = 0;
    int err;
    pulse_status_t st;

    if (pulse_io_pwrite_all(plog->io, fd, batch, len, (off_t)pos, &done) >= 0)
        return PULSE_OK;
    err = errno;
    st = pulse_status_from_errno(err);
    if (st == PULSE_NOSPACE) {
        /* A full disk is expected to pass: refuse this append only. */
        PULSE_WARN_RL("plog: pwrite %s at %" PRIu64 " failed after %zu of %zu bytes: %s; append refused, "
                      "the log keeps accepting appends",
                      seg->log_path, pos, done, len, strerror(err));
        return undo_write_locked(plog, seg, fd, pos, st);
    }
    PULSE_ERROR("plog: pwrite %s at %" PRIu64 " failed after %zu of %zu bytes: %s", seg->log_path, pos, done, len,
                strerror(err));
    fence_locked(plog, seg, "write", true);
    return st;
}

/*
 * The index entry of a unit just written at pos (at base), when one is due:
 * one entry at most per unit, at its first batch (entries must point at
 * batch boundaries, and the unit's start is one). A failure that leaves the
 * table as it was takes the data back too; any other fences. Caller holds
 * wlock.
 */
static pulse_status_t index_unit(struct pulse_plog *plog, struct pulse_segment *seg, int fd, int64_t base, uint64_t pos)
{
    pulse_status_t st;

    if (seg->index.n > 0 && seg->since_entry < plog->cfg.index_interval_bytes)
        return PULSE_OK;
    st = pulse_segment_index_add(seg, (uint32_t)(base - seg->base), (uint32_t)pos);
    if (st == PULSE_NOSPACE || st == PULSE_NOMEM || st == PULSE_NOFILE)
        return undo_write_locked(plog, seg, fd, pos, st);
    if (st != PULSE_OK) {
        fence_locked(plog, seg, "index write", true);
        return st;
    }
    seg->since_entry = 0;
    return PULSE_OK;
}

/* Publishes a unit written at pos of seg: the new end is visible only once
 * its bytes exist. Caller holds wlock. */
static void publish_unit(struct pulse_plog *plog, struct pulse_segment *seg, size_t len, uint64_t pos, int64_t end,
                         int64_t max_ts)
{
    seg->since_entry += len;
    if (max_ts > atomic_load_explicit(&seg->max_ts, memory_order_relaxed))
        atomic_store_explicit(&seg->max_ts, max_ts, memory_order_relaxed);
    /* Unsynced bytes: the descriptor stays open until a sync covers them
     * (see fdcache.h); the ticket tells that sync what it covered. */
    seg->dirty_ticket = pulse_fdc_dirty(&seg->data);
    /* A unit holds at least one record: the log end only grows, so no
     * offset is handed out twice. */
    PULSE_ASSERT(end > atomic_load_explicit(&plog->leo, memory_order_relaxed) && end > seg->base);
    atomic_store_explicit(&seg->size, pos + len, memory_order_release);
    atomic_store_explicit(&seg->next_offset, end, memory_order_release);
    atomic_store_explicit(&plog->leo, end, memory_order_release);
}

pulse_status_t pulse_plog_append_async(struct pulse_plog *plog, uint8_t *batch, size_t len, int64_t *base_out,
                                       int64_t *end_out, uint64_t *epoch_out)
{
    struct pulse_segment *seg = NULL;
    uint64_t records = 0;
    int64_t max_ts = INT64_MIN;
    int64_t base = 0;
    uint64_t pos;
    bool locked = false, pinned = false;
    int fd = -1;
    pulse_status_t st;

    if (atomic_load(&plog->fenced))
        return PULSE_FENCED;
    st = verify_unit(batch, len, &records, &max_ts);
    if (st != PULSE_OK)
        goto out;
    if (len > PULSE_PLOG_MAX_SEGMENT_BYTES || records > UINT32_MAX) {
        st = PULSE_TOO_LARGE;
        goto out;
    }
    pthread_mutex_lock(&plog->wlock);
    locked = true;
    if (atomic_load(&plog->fenced)) {
        st = PULSE_FENCED;
        goto out;
    }
    base = atomic_load_explicit(&plog->leo, memory_order_relaxed);
    st = segment_for(plog, len, records, base, &seg);
    /* Out of descriptors: refused before anything is written. */
    if (st == PULSE_OK)
        st = pulse_segment_pin(seg, &fd);
    if (st != PULSE_OK)
        goto out;
    pinned = true;
    pos = atomic_load_explicit(&seg->size, memory_order_relaxed);
    number_unit(batch, len, base);
    st = write_unit(plog, seg, fd, batch, len, pos);
    if (st == PULSE_OK)
        st = index_unit(plog, seg, fd, base, pos);
    if (st != PULSE_OK)
        goto out;
    publish_unit(plog, seg, len, pos, base + (int64_t)records, max_ts);
    *base_out = base;
    if (end_out != NULL)
        *end_out = base + (int64_t)records;
    /* Under wlock, which a reopen holds while it moves the epoch: this is
     * the epoch the bytes were written in. */
    if (epoch_out != NULL)
        *epoch_out = atomic_load(&plog->epoch);
out:
    if (pinned)
        pulse_segment_unpin(seg);
    if (locked)
        pthread_mutex_unlock(&plog->wlock);
    return st;
}

/*
 * Runs one fdatasync as the group-commit leader. Called and returns with
 * sync_lock held; drops it while syncing. gather: first let appenders that
 * the previous sync released write again (a waiter that was woken); a
 * leader that appended itself just now has nothing to gather.
 */
static pulse_status_t lead_sync(struct pulse_plog *plog, bool gather)
{
    struct pulse_segment *seg;
    uint64_t target_size;
    uint64_t ticket;
    int64_t target_leo;
    int64_t t0;
    int rc;
    int fd = -1;
    int err = 0;
    const char *failed_path = NULL;
    pulse_status_t st = PULSE_OK;

    plog->syncing = true;
    pthread_mutex_unlock(&plog->sync_lock);

    /* Let appenders that the previous sync just released write their next
     * batches before we pick our target: on a machine with fewer cores than
     * appenders they are runnable but not running yet, and a leader that
     * starts at once covers only itself. */
    if (gather)
        sched_yield();
    pthread_mutex_lock(&plog->wlock);
    seg = active_seg(plog);
    pulse_segment_acquire(seg);
    target_size = atomic_load_explicit(&seg->size, memory_order_relaxed);
    target_leo = atomic_load_explicit(&plog->leo, memory_order_relaxed);
    ticket = seg->dirty_ticket;
    pthread_mutex_unlock(&plog->wlock);

    /* A dirty file is held open, so this is a cache hit; if it fails
     * (out of descriptors) nothing was synced and nothing is fenced. */
    st = pulse_segment_pin(seg, &fd);
    if (st != PULSE_OK) {
        pthread_mutex_lock(&plog->sync_lock);
        plog->syncing = false;
        pthread_cond_broadcast(&plog->sync_cond);
        pulse_segment_release(seg);
        return st;
    }

    /* Outside the writer lock: appends keep landing while we wait, and the
     * next leader covers them in one go.
     * Only the data file is synced here. The active segment's index is
     * derived data: recovery checks every entry against the batch it points
     * at and rebuilds whatever is missing or wrong from the (synced) data, so
     * syncing it on every commit would double the fsyncs of small batches
     * (an entry lands every index-interval bytes) for nothing recovery needs.
     * It is synced when the segment is sealed and when the log closes. */
    t0 = pulse_clock_mono_us();
    rc = plog->io->fdatasync(plog->io, fd);
    if (rc < 0) {
        err = errno;
        failed_path = seg->log_path;
    }
    observe(plog, t0, rc == 0);
    pulse_segment_unpin(seg);

    pthread_mutex_lock(&plog->sync_lock);
    plog->syncing = false;
    if (rc < 0) {
        PULSE_ERROR("plog: fdatasync %s failed: %s", failed_path, strerror(err));
        if (!atomic_load(&plog->fenced)) {
            atomic_store(&plog->fenced, true);
            PULSE_ERROR("plog %s: fenced after a failed fdatasync; appends are refused until the log is reopened",
                        plog->dir);
        }
        st = pulse_status_from_errno(err);
    } else if (atomic_load(&plog->fenced)) {
        st = PULSE_FENCED;
    } else {
        atomic_fetch_add(&plog->syncs, 1);
        store_max_u64(&seg->durable_size, target_size);
        store_max_i64(&plog->hw, target_leo);
        atomic_store(&plog->last_sync_us, pulse_clock_mono_us());
        /* Unless written again meanwhile, its descriptor may be closed. */
        pulse_fdc_clean(&seg->data, ticket);
    }
    pthread_cond_broadcast(&plog->sync_cond);
    pulse_segment_release(seg);
    return st;
}

/*
 * Makes [.., end_offset) durable, leading a sync when none runs. wait: a
 * sync already running is waited for (and the loop goes on until the
 * target is covered); without it the caller gets PULSE_BUSY at once, since
 * that sync's leader, or the next one, covers its bytes. A waiter that was
 * woken gathers before it leads; a caller that did not wait appended just
 * now and has nothing to gather.
 */
static pulse_status_t sync_to(struct pulse_plog *plog, int64_t end_offset, bool wait)
{
    pulse_status_t st = PULSE_OK;

    if (end_offset > atomic_load_explicit(&plog->leo, memory_order_acquire))
        return PULSE_INVALID;
    pthread_mutex_lock(&plog->sync_lock);
    for (;;) {
        if (atomic_load_explicit(&plog->hw, memory_order_acquire) >= end_offset) {
            st = PULSE_OK;
            break;
        }
        if (atomic_load(&plog->fenced)) {
            st = PULSE_FENCED;
            break;
        }
        if (plog->syncing) {
            if (!wait) {
                st = PULSE_BUSY;
                break;
            }
            pthread_cond_wait(&plog->sync_cond, &plog->sync_lock);
            continue;
        }
        /* Without wait our bytes were written before we took sync_lock,
         * so the target the leader captures covers them: one pass ends
         * the loop. */
        st = lead_sync(plog, wait);
        if (st != PULSE_OK)
            break;
    }
    pthread_mutex_unlock(&plog->sync_lock);
    return st;
}

pulse_status_t pulse_plog_wait_durable(struct pulse_plog *plog, int64_t end_offset)
{
    return sync_to(plog, end_offset, true);
}

pulse_status_t pulse_plog_try_sync(struct pulse_plog *plog, int64_t end_offset)
{
    return sync_to(plog, end_offset, false);
}

pulse_status_t pulse_plog_sync(struct pulse_plog *plog)
{
    return pulse_plog_wait_durable(plog, atomic_load_explicit(&plog->leo, memory_order_acquire));
}

pulse_status_t pulse_plog_append(struct pulse_plog *plog, uint8_t *batch, size_t len, int64_t *base_out)
{
    int64_t base = 0, end = 0;
    uint64_t epoch = 0;
    pulse_status_t st;
    enum pulse_plog_fate fate;

    st = pulse_plog_append_async(plog, batch, len, &base, &end, &epoch);
    if (st != PULSE_OK)
        return st;
    if (plog->cfg.sync_mode == PULSE_SYNC_EVERY_WRITE) {
        st = pulse_plog_wait_durable(plog, end);
    } else {
        /* Interval mode acknowledges after the write; whoever appends once
         * the interval has passed pays for the sync. */
        int64_t since = pulse_clock_mono_us() - atomic_load(&plog->last_sync_us);
        if (since >= (int64_t)plog->cfg.sync_interval_ms * 1000)
            st = pulse_plog_wait_durable(plog, end);
    }
    /* Whatever the wait said, the epoch rule decides (see "Epochs" in
     * plog.h): after a reopen HW may pass the end of a batch that the
     * reopen discarded, and a batch durable before a reopen stays so. */
    fate = pulse_plog_fate(plog, epoch, end);
    if (fate == PULSE_PLOG_DURABLE)
        st = PULSE_OK;
    else if (fate == PULSE_PLOG_LOST && st == PULSE_OK)
        st = PULSE_FENCED;
    if (st == PULSE_OK)
        *base_out = base;
    return st;
}

enum pulse_plog_fate pulse_plog_fate(struct pulse_plog *plog, uint64_t epoch, int64_t end)
{
    enum pulse_plog_fate fate;
    uint64_t cur;

    pthread_mutex_lock(&plog->sync_lock);
    cur = atomic_load(&plog->epoch);
    if (epoch == cur) {
        /* Fenced and short of HW: no sync publishes any more in this
         * epoch, and the reopen that ends it cuts everything past HW. */
        if (atomic_load(&plog->hw) >= end)
            fate = PULSE_PLOG_DURABLE;
        else
            fate = atomic_load(&plog->fenced) ? PULSE_PLOG_LOST : PULSE_PLOG_PENDING;
    } else {
        const struct pulse_plog_epoch_end *e = &plog->ended[epoch % PULSE_PLOG_EPOCHS_KEPT];
        /* An epoch too old to be remembered counts as lost: it is only
         * known that it ended. */
        fate = epoch < cur && e->epoch == epoch && e->hw >= end ? PULSE_PLOG_DURABLE : PULSE_PLOG_LOST;
    }
    pthread_mutex_unlock(&plog->sync_lock);
    return fate;
}

bool pulse_plog_needs_sync(const struct pulse_plog *plog)
{
    return atomic_load_explicit(&plog->leo, memory_order_acquire) >
           atomic_load_explicit(&plog->hw, memory_order_acquire);
}

int64_t pulse_plog_high_watermark(const struct pulse_plog *plog)
{
    int64_t hw = atomic_load_explicit(&plog->hw, memory_order_acquire);

    /* HW is read first: the log end falls only at a reopen, and then never
     * below the HW it replaces, so HW never passes it. */
    PULSE_ASSERT(hw <= atomic_load_explicit(&plog->leo, memory_order_acquire));
    return hw;
}

int64_t pulse_plog_log_start(const struct pulse_plog *plog)
{
    return atomic_load_explicit(&plog->log_start, memory_order_acquire);
}

int64_t pulse_plog_log_end(const struct pulse_plog *plog)
{
    return atomic_load_explicit(&plog->leo, memory_order_acquire);
}

bool pulse_plog_fenced(const struct pulse_plog *plog)
{
    return atomic_load(&plog->fenced);
}

uint64_t pulse_plog_epoch(const struct pulse_plog *plog)
{
    return atomic_load(&plog->epoch);
}

/*
 * Syncs the index entries the active segment got so far and marks its
 * index file clean, so that the descriptor cache may close it again (a
 * file with unsynced bytes is never closed: fdcache.h). The commit path
 * leaves the active index unsynced (see lead_sync); without this it would
 * stay open until the segment is sealed. A failed fdatasync fences the
 * log, as for any other file of it (never retried). Locks: wlock briefly,
 * not held during the sync.
 */
static pulse_status_t sync_active_index(struct pulse_plog *plog)
{
    struct pulse_segment *seg;
    size_t n;
    uint64_t ticket;
    bool failed = false;
    pulse_status_t st;

    pthread_mutex_lock(&plog->wlock);
    seg = active_seg(plog);
    n = seg->index_written;
    ticket = seg->idx_dirty_ticket;
    if (n > atomic_load(&seg->index_synced))
        pulse_segment_acquire(seg);
    else
        seg = NULL;
    pthread_mutex_unlock(&plog->wlock);
    if (seg == NULL)
        return PULSE_OK;
    st = pin_and_sync(plog, &seg->idx, &failed);
    if (st == PULSE_OK) {
        store_max_size(&seg->index_synced, n);
        pulse_fdc_clean(&seg->idx, ticket);
    } else if (failed) {
        pulse_plog_fence(plog, "plog", "index fdatasync");
    }
    pulse_segment_release(seg);
    return st;
}

pulse_status_t pulse_plog_checkpoint(struct pulse_plog *plog, int64_t *due_out)
{
    struct pulse_snapshot snap;
    int64_t now = pulse_clock_mono_us();
    int64_t due = INT64_MAX;
    bool moved;
    pulse_status_t st = PULSE_OK;

    /* The durable end moves with HW (a sync publishes both; a rotation and
     * a reopen write or keep a snapshot of their own). */
    if (atomic_load(&plog->hw) == atomic_load(&plog->snap_hw))
        goto out;
    pthread_mutex_lock(&plog->snap_lock);
    moved = durable_state(plog, &snap) && !snap_equal(&snap, &plog->last_snap);
    if (moved)
        due = plog->last_snap_us + (int64_t)plog->cfg.checkpoint_interval_ms * 1000;
    pthread_mutex_unlock(&plog->snap_lock);
    if (!moved || now < due)
        goto out;
    due = INT64_MAX;
    /* Not needed for the proof (recovery checks the index against the
     * snapshot's CRC of its prefix, or entry by entry), but it lets that
     * CRC match after a crash, and this is the one place that releases
     * the active index descriptor. */
    (void)sync_active_index(plog);
    pthread_mutex_lock(&plog->snap_lock);
    if (durable_state(plog, &snap) && !snap_equal(&snap, &plog->last_snap))
        st = put_snapshot(plog, &snap);
    pthread_mutex_unlock(&plog->snap_lock);
out:
    if (due_out != NULL)
        *due_out = due;
    return st;
}

/* ---- damaged ranges --------------------------------------------------- */

/* A set of n ranges, one reference, entries uninitialised. NULL on OOM. */
static struct pulse_damage_set *dset_new(size_t n)
{
    struct pulse_damage_set *s = pulse_malloc(sizeof *s + n * sizeof s->r[0]);
    if (s == NULL)
        return NULL;
    atomic_init(&s->refs, 1);
    s->n = n;
    return s;
}

static void dset_release(struct pulse_damage_set *s)
{
    if (s == NULL)
        return;
    unsigned refs = atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel);
    PULSE_ASSERT(refs >= 1);
    if (refs == 1)
        pulse_free(s);
}

/* The log's current set, with a reference. */
static struct pulse_damage_set *dset_get(struct pulse_plog *plog)
{
    struct pulse_damage_set *s;

    pthread_mutex_lock(&plog->list_lock);
    s = plog->damage;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&plog->list_lock);
    return s;
}

/* A set holding the ranges recovery found; res->damage is freed. NULL on
 * out of memory. */
static struct pulse_damage_set *dset_from(struct pulse_recover_result *res)
{
    struct pulse_damage_set *s = dset_new(res->ndamage);
    if (s != NULL && res->ndamage > 0)
        memcpy(s->r, res->damage, res->ndamage * sizeof res->damage[0]);
    pulse_free(res->damage);
    res->damage = NULL;
    res->ndamage = 0;
    return s;
}

/* The first range of segment seg_base that keeps bytes ending after pos
 * (its ranges are in byte order, as they are in offset order), or NULL. */
static const struct pulse_damage *dset_bytes_from(const struct pulse_damage_set *s, int64_t seg_base, uint64_t pos)
{
    for (size_t i = 0; i < s->n; i++) {
        const struct pulse_damage *r = &s->r[i];
        if (r->seg_base == seg_base && pulse_damage_has_bytes(r) && r->end > pos)
            return r;
    }
    return NULL;
}

/* True when some range holds offsets in [lo, hi). */
static bool dset_between(const struct pulse_damage_set *s, int64_t lo, int64_t hi)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->r[i].to > s->r[i].from && s->r[i].from < hi && s->r[i].to > lo)
            return true;
    return false;
}

/* Fills the skip fields of out with the ranges that meet [lo, hi). */
static void dset_skipped(const struct pulse_damage_set *s, int64_t lo, int64_t hi, struct pulse_slice *out)
{
    out->skip_from = out->skip_to = lo;
    out->skip_damaged = false;
    for (size_t i = 0; i < s->n; i++) {
        const struct pulse_damage *r = &s->r[i];
        if (r->to <= r->from || r->from >= hi || r->to <= lo)
            continue;
        if (out->skip_to == out->skip_from)
            out->skip_from = r->from > lo ? r->from : lo;
        out->skip_to = r->to < hi ? r->to : hi;
        out->skip_damaged = out->skip_damaged || pulse_damage_has_bytes(r);
    }
}

/* ---- reads ------------------------------------------------------------ */

/* The index of the first listed segment whose base is greater than
 * offset (nsegs when none). Caller holds list_lock. */
static size_t first_base_after(const struct pulse_plog *plog, int64_t offset)
{
    size_t lo = 0, hi = plog->nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (plog->segs[mid]->base <= offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * The segment to read after seg, which held nothing at or after offset: the
 * next one in the list. If seg is no longer listed, the list changed since
 * the reader found it: compaction may have merged seg and the segments
 * after it into an earlier file (plog_edit.c, "Crash safety of a merge"), so the segment
 * after seg's base could lie past records that now live in that file. Look
 * offset up again instead; each lookup lands on a listed segment, so this
 * cannot loop. Returns an acquired reference or NULL.
 */
static struct pulse_segment *next_segment(struct pulse_plog *plog, struct pulse_segment *seg, int64_t offset)
{
    struct pulse_segment *next = NULL;
    size_t i;

    pthread_mutex_lock(&plog->list_lock);
    i = first_base_after(plog, seg->base);
    if (i > 0 && plog->segs[i - 1] == seg) {
        next = i < plog->nsegs ? plog->segs[i] : NULL; /* still listed: the one after it */
    } else if (plog->nsegs > 0) {
        i = first_base_after(plog, offset);
        next = plog->segs[i == 0 ? 0 : i - 1]; /* the one holding offset now */
    }
    if (next != NULL)
        pulse_segment_acquire(next);
    pthread_mutex_unlock(&plog->list_lock);
    return next;
}

/* The next segment's base (the offset limit of seg), INT64_MAX for the
 * active one (or a segment no longer listed: its limit is unknown). */
static int64_t segment_limit(struct pulse_plog *plog, const struct pulse_segment *seg)
{
    int64_t limit = INT64_MAX;

    pthread_mutex_lock(&plog->list_lock);
    size_t i = first_base_after(plog, seg->base);
    if (i > 0 && plog->segs[i - 1] == seg && i < plog->nsegs)
        limit = plog->segs[i]->base;
    pthread_mutex_unlock(&plog->list_lock);
    return limit;
}

/* The segment holding offset (greatest base <= offset, else the first).
 * Returns an acquired reference or NULL. */
static struct pulse_segment *find_segment(struct pulse_plog *plog, int64_t offset)
{
    struct pulse_segment *seg = NULL;

    pthread_mutex_lock(&plog->list_lock);
    if (plog->nsegs > 0) {
        size_t i = first_base_after(plog, offset);
        seg = plog->segs[i == 0 ? 0 : i - 1];
        pulse_segment_acquire(seg);
    }
    pthread_mutex_unlock(&plog->list_lock);
    return seg;
}

/* Pins the data file of seg (an acquired reference, or NULL) into *fd_out.
 * Returns seg, or NULL when seg was NULL or the pin failed (*st_out says
 * why; the reference is released then). */
static struct pulse_segment *pin_or_drop(struct pulse_segment *seg, int *fd_out, pulse_status_t *st_out)
{
    pulse_status_t st;

    if (seg == NULL)
        return NULL;
    st = pulse_segment_pin(seg, fd_out);
    if (st != PULSE_OK) {
        pulse_segment_release(seg);
        *st_out = st;
        return NULL;
    }
    return seg;
}

static void unpin_release(struct pulse_segment *seg)
{
    if (seg == NULL)
        return;
    pulse_segment_unpin(seg);
    pulse_segment_release(seg);
}

/* The state of one slice being built. */
struct slicer {
    struct pulse_plog *plog;
    struct pulse_damage_set *set; /* a reference */
    int64_t hw;
    uint64_t max_bytes;
    int64_t offset;     /* records wanted from here */
    int64_t next;       /* the offset after the slice so far */
    int64_t first_base; /* base offset of the first batch taken */
    uint64_t first_pos;
    uint64_t len;
    uint64_t bad_pos; /* a batch that cannot be right (CORRUPT) */
    bool done;        /* nothing more may join the slice */
    /* A read (pulse_plog_read) gives the buffer its bytes go to: the walk
     * fills it from the first batch taken on (fill_ahead), filled bytes of
     * the fill_cap it reserved there. */
    struct pulse_buf *fill;
    uint64_t filled;
    uint64_t fill_cap;
    bool strode; /* a raw slice's walk moved over batches by the index */
    /* Until the batch at the index entry the stride moved to (stride_pos)
     * is judged sound, the slice as it was before (pre_len, pre_next) is
     * all that may be served: an entry that disagrees with the data would
     * otherwise end the slice mid-batch. */
    bool unconfirmed;
    uint64_t stride_pos;
    uint64_t pre_len;
    int64_t pre_next;
};

/* The high watermark now, read under sync_lock: a sync publishes a
 * segment's durable size and HW together under it, so every batch that
 * lies below a durable size read before this call ends below this HW. */
static int64_t hw_now(struct pulse_plog *plog)
{
    int64_t hw;

    pthread_mutex_lock(&plog->sync_lock);
    hw = atomic_load_explicit(&plog->hw, memory_order_relaxed);
    pthread_mutex_unlock(&plog->sync_lock);
    return hw;
}

/*
 * What the log knows beyond the scan's own rule about a batch its walk met
 * inside the durable bytes of a segment (header only), where expect is the
 * lowest offset the batch may start at: false when the header cannot be
 * right (damage, which the caller learns: docs/Storage.md "Reading around
 * damage"): a base offset at or past HW (nothing below a durable size can
 * lie there), or, in a contiguous log, a base offset that jumps over
 * offsets no known range holds while the batch fails its check. (Offsets
 * below expect or past the segment's limit the scan itself refuses.)
 * *at_end is set for a base offset at or past the HW this read started
 * with, which a sync that ran since made durable.
 */
static bool batch_plausible(struct slicer *sl, struct pulse_segscan *sc, const struct pulse_segscan_item *it,
                            int64_t expect, bool *at_end)
{
    bool ok = false;

    *at_end = false;
    if (it->hdr.base_offset >= sl->hw) {
        *at_end = true;
        return it->hdr.base_offset < hw_now(sl->plog);
    }
    if (sl->plog->cfg.contiguous && it->hdr.base_offset > expect &&
        !dset_between(sl->set, expect, it->hdr.base_offset)) {
        (void)pulse_segscan_verify(sc, it, &ok); /* a failed read counts as a failed check */
        return ok;
    }
    return true;
}

/* A batch the walk cannot serve (damage, or a header that cannot be
 * right) at pos: the slice ends before it. PULSE_CORRUPT when it comes
 * first; sl->bad_pos names it. */
static pulse_status_t walk_bad(struct slicer *sl, struct pulse_segment *seg, uint64_t pos)
{
    PULSE_ERROR_RL("plog: %s: invalid batch at byte %" PRIu64 "; not serving past it", seg->log_path, pos);
    sl->bad_pos = pos;
    sl->done = true;
    return sl->len > 0 ? PULSE_OK : PULSE_CORRUPT;
}

/*
 * For a read: once the walk took the first batch of the slice (it), reads
 * the bytes the slice may span from there (max_bytes, or that one batch
 * when it is larger, within the durable bound and the room sl->fill has)
 * into sl->fill, past its length, and lets the scan find the remaining
 * headers in them instead of reading each one. The first read stops after
 * the header of the last batch the index places within that span: that
 * batch usually runs past it (then nothing past the slice is read but its
 * header), and when it does not, fill_more reads the rest. The caller only
 * takes the slice's length. When the buffer cannot take the span nothing
 * is filled and the read copies the slice itself afterwards. PULSE_IO when
 * the read fails.
 */
static pulse_status_t fill_ahead(struct slicer *sl, struct pulse_segscan *sc, const struct pulse_segscan_item *it,
                                 struct pulse_segment *seg, uint64_t bound)
{
    struct pulse_buf *out = sl->fill;
    uint64_t n = sl->max_bytes > it->end - it->pos ? sl->max_bytes : it->end - it->pos;
    struct pulse_segscan_start last;
    uint64_t first_n;

    if (n > bound - it->pos)
        n = bound - it->pos;
    if (n > SIZE_MAX || pulse_buf_reserve(out, (size_t)n) != PULSE_OK)
        return PULSE_OK;
    pulse_segment_entry_before(seg, it->pos + n, 0, &last);
    first_n = n;
    if (last.pos >= it->end && last.pos - it->pos + PULSE_BATCH_HEADER_SIZE < n)
        first_n = last.pos - it->pos + PULSE_BATCH_HEADER_SIZE;
    pulse_status_t st = pulse_segscan_fill(sc, it->pos, out->data + out->len, (size_t)first_n);
    if (st == PULSE_OK) {
        sl->filled = first_n;
        sl->fill_cap = n;
    }
    return st;
}

/* For a read whose walk reached the end of what fill_ahead read while a
 * further batch may still join the slice: reads the rest of the span into
 * the buffer, right after the bytes filled so far. */
static pulse_status_t fill_more(struct slicer *sl, struct pulse_segscan *sc)
{
    if (sl->fill == NULL || sl->filled >= sl->fill_cap ||
        sc->pos + PULSE_BATCH_HEADER_SIZE > sl->first_pos + sl->fill_cap ||
        sc->pos + PULSE_BATCH_HEADER_SIZE <= sl->first_pos + sl->filled)
        return PULSE_OK;
    pulse_status_t st = pulse_segscan_fill(sc, sl->first_pos + sl->filled, sl->fill->data + sl->fill->len + sl->filled,
                                           (size_t)(sl->fill_cap - sl->filled));
    if (st == PULSE_OK)
        sl->filled = sl->fill_cap;
    return st;
}

/*
 * For a raw slice (no buffer to find headers in): once the walk took the
 * slice's first batch, moves it over the batches that the index shows lie
 * wholly within max_bytes (up to the entry before the last one at or
 * before the slice's byte limit) instead of reading each of their
 * headers, so a slice of n batches costs a few header reads rather than
 * n. The batches stepped over were verified when they were written or
 * recovered, as every batch of the walk is (TRUST), and the index, which
 * points at batch starts only, is what the walk already trusts for where
 * to start. Nothing is stepped over that the walk would have stopped at:
 * the target lies below the durable bound and its offset below HW, and no
 * damaged bytes and no skipped range lie between. The walk goes on at the
 * target, judging the headers from there as before.
 */
static void stride(struct slicer *sl, struct pulse_segment *seg, struct pulse_segscan *sc, uint64_t bound)
{
    struct pulse_segscan_start e;

    sl->strode = true;
    if (sl->len >= sl->max_bytes)
        return;
    uint64_t limit = bound - sl->first_pos > sl->max_bytes ? sl->first_pos + sl->max_bytes : bound;
    const struct pulse_damage *dr = dset_bytes_from(sl->set, seg->base, sc->pos);
    if (dr != NULL && dr->pos < limit)
        limit = dr->pos; /* the slice ends there anyway */
    pulse_segment_entry_before(seg, limit, 1, &e);
    if (e.pos <= sc->pos || e.base <= sc->expect || e.base >= sl->hw || dset_between(sl->set, sl->next, e.base))
        return;
    sl->unconfirmed = true;
    sl->stride_pos = e.pos;
    sl->pre_len = sl->len;
    sl->pre_next = sl->next;
    sl->len += e.pos - sc->pos;
    sl->next = e.base;
    pulse_segscan_seek_at(sc, &e);
}

/*
 * Adds the batches of seg (data file pinned as fd) at and after sl->offset
 * to the slice, walking headers (segscan.h, TRUST: the bytes below the
 * durable size were verified when written or recovered) from the index
 * entry before it, stepping over damaged bytes while the slice is empty and
 * stopping at them (and at any skipped range) once it is not. PULSE_CORRUPT
 * when a batch that cannot be right (unknown damage) comes first;
 * sl->bad_pos names it.
 */
static pulse_status_t walk_segment(struct slicer *sl, struct pulse_segment *seg, int fd)
{
    uint64_t bound = atomic_load_explicit(&seg->durable_size, memory_order_acquire);
    struct pulse_segscan_start start;
    struct pulse_segscan sc;
    struct pulse_segscan_item it;
    pulse_status_t st = PULSE_OK;

    pulse_segment_lookup(seg, sl->offset, &start);
    const struct pulse_damage *dr = dset_bytes_from(sl->set, seg->base, start.pos);
    /* The durable end is always a batch boundary, so a batch that claims to
     * run past it is damaged, not incomplete: the scan calls it damage. So
     * is a batch at the index entry that is not the one the entry names
     * (its header is read anyway). */
    pulse_segscan_init_at(&sc, seg->io, fd, seg->log_path, seg->base, bound, &start, segment_limit(sl->plog, seg),
                          PULSE_SEGSCAN_TRUST | PULSE_SEGSCAN_STOP);
    while (!sl->done && sc.pos + PULSE_BATCH_HEADER_SIZE <= bound) {
        int64_t expect = sc.expect;
        bool at_end = false;

        if (dr != NULL && dr->pos <= sc.pos) {
            /* Damaged bytes (recover.c) are never part of a slice. */
            sl->done = sl->len > 0;
            pulse_segscan_seek(&sc, dr->end, dr->to > expect ? dr->to : expect);
            dr = dset_bytes_from(sl->set, seg->base, sc.pos);
            continue;
        }
        if ((st = fill_more(sl, &sc)) != PULSE_OK)
            break;
        st = pulse_segscan_next(&sc, &it);
        if (st != PULSE_OK || it.kind == PULSE_SEGSCAN_END)
            break;
        if (it.kind == PULSE_SEGSCAN_DAMAGE || !batch_plausible(sl, &sc, &it, expect, &at_end)) {
            st = walk_bad(sl, seg, it.pos);
            break;
        }
        if (it.pos == sl->stride_pos)
            sl->unconfirmed = false;
        if (at_end) {
            sl->done = true;
            break;
        }
        if (it.last_offset < sl->offset)
            continue;
        /* A skipped range between the slice and this batch: the next read
         * starts there and reports it. */
        if (sl->len > 0 &&
            (dset_between(sl->set, sl->next, it.hdr.base_offset) || sl->len + (it.end - it.pos) > sl->max_bytes)) {
            sl->done = true;
            break;
        }
        if (sl->len == 0) {
            sl->first_pos = it.pos;
            sl->first_base = it.hdr.base_offset;
            if (sl->fill != NULL && (st = fill_ahead(sl, &sc, &it, seg, bound)) != PULSE_OK)
                break;
        }
        sl->len += it.end - it.pos;
        sl->next = it.last_offset + 1;
        if (sl->fill == NULL && !sl->strode)
            stride(sl, seg, &sc, bound);
    }
    if (sl->unconfirmed) {
        /* The batch at the stride's entry was never judged sound: end the
         * slice where it was before the stride, a boundary the walk saw. */
        sl->unconfirmed = false;
        sl->len = sl->pre_len;
        sl->next = sl->pre_next;
        sl->done = true;
    }
    pulse_segscan_fini(&sc);
    return st;
}

/* Fills out's position fields once the walk is over. */
static void slice_finish(const struct slicer *sl, pulse_status_t st, struct pulse_slice *out)
{
    if (st == PULSE_OK || st == PULSE_RANGE) {
        out->pos = sl->first_pos;
        out->len = sl->len;
        out->next_offset = sl->len > 0 ? sl->next : out->start_offset;
    }
    if (st == PULSE_OK && out->start_offset < sl->hw) {
        int64_t first = sl->len == 0 ? sl->hw : sl->first_base > out->start_offset ? sl->first_base : out->start_offset;
        dset_skipped(sl->set, out->start_offset, first, out);
        if (sl->len == 0 && out->skip_to > out->skip_from)
            out->next_offset = out->skip_to;
    }
}

/*
 * The slice for offset, with the reference on its segment handed to the
 * caller in *seg_out, its data file pinned (*fd_out until the caller's
 * pulse_segment_unpin): when len > 0, or with PULSE_CORRUPT when an invalid
 * batch header at *bad_pos of that segment came first (else NULL).
 * fill (nullable, a read's buffer): *filled gets how many bytes from the
 * slice's first batch on the walk put past fill's length (fill_ahead);
 * the slice's bytes are there when that is at least its length.
 */
static pulse_status_t do_slice(struct pulse_plog *plog, int64_t offset, uint64_t max_bytes, struct pulse_slice *out,
                               struct pulse_segment **seg_out, int *fd_out, uint64_t *bad_pos, struct pulse_buf *fill,
                               uint64_t *filled)
{
    struct pulse_segment *seg = NULL;
    struct slicer sl = {.plog = plog, .max_bytes = max_bytes, .bad_pos = UINT64_MAX, .fill = fill};
    int fd = -1;
    int64_t ls;
    pulse_status_t st = PULSE_OK;

    memset(out, 0, sizeof *out);
    out->fd = -1;
    sl.set = dset_get(plog);
    /* HW first: everything below it was published before it. */
    sl.hw = atomic_load_explicit(&plog->hw, memory_order_acquire);
    ls = atomic_load_explicit(&plog->log_start, memory_order_acquire);
    out->log_start = ls;
    out->high_watermark = sl.hw;
    if (offset > sl.hw) {
        st = PULSE_RANGE;
        goto out;
    }
    if (offset < ls)
        offset = ls;
    out->start_offset = offset;
    if (offset >= sl.hw)
        goto out;
    seg = pin_or_drop(find_segment(plog, offset), &fd, &st);
    if (seg != NULL && seg->base > offset) {
        /* A trim raced with us: the log now starts later. */
        offset = seg->base;
        out->start_offset = offset;
        out->log_start = offset;
    }
    sl.offset = sl.next = offset;
    while (seg != NULL && offset < sl.hw) {
        st = walk_segment(&sl, seg, fd);
        if (sl.len > 0 || sl.done || st != PULSE_OK)
            break;
        /* Nothing at or after offset here (compaction removed it, damage
         * ends the segment): go on with the next segment. */
        struct pulse_segment *nseg = next_segment(plog, seg, offset);
        unpin_release(seg);
        seg = pin_or_drop(nseg, &fd, &st);
    }
out:
    slice_finish(&sl, st, out);
    *bad_pos = sl.bad_pos;
    if (filled != NULL)
        *filled = sl.filled;
    *seg_out = NULL;
    if ((st == PULSE_OK && sl.len > 0) || (st == PULSE_CORRUPT && sl.bad_pos != UINT64_MAX)) {
        *seg_out = seg; /* with its pin */
        *fd_out = fd;
        seg = NULL;
    }
    unpin_release(seg);
    dset_release(sl.set);
    return st;
}

/* ---- damage found by a read ------------------------------------------- */

/* True when r overlaps a range of s, in offsets or in bytes. */
static bool dset_clashes(const struct pulse_damage_set *s, const struct pulse_damage *r)
{
    for (size_t m = 0; m < s->n; m++) {
        const struct pulse_damage *o = &s->r[m];
        if ((o->from < r->to && r->from < o->to) || (o->seg_base == r->seg_base && o->pos < r->end && r->pos < o->end))
            return true;
    }
    return false;
}

/* Adds the ranges in add (sorted, n of them) that overlap nothing known
 * to the log's set. Returns how many were added. Locks: list_lock. */
static size_t dset_merge(struct pulse_plog *plog, const struct pulse_damage *add, size_t n)
{
    struct pulse_damage_set *old, *s;
    size_t k = 0, added = 0;

    pthread_mutex_lock(&plog->list_lock);
    old = plog->damage;
    s = dset_new(old->n + n);
    if (s != NULL) {
        size_t i = 0;
        for (size_t j = 0; j < n; j++) {
            if (dset_clashes(old, &add[j]))
                continue;
            while (i < old->n && old->r[i].from <= add[j].from)
                s->r[k++] = old->r[i++];
            s->r[k++] = add[j];
            added++;
        }
        while (i < old->n)
            s->r[k++] = old->r[i++];
        s->n = k;
        if (added > 0) {
            plog->damage = s;
            s = old;
        }
    }
    pthread_mutex_unlock(&plog->list_lock);
    dset_release(s);
    return added;
}

/*
 * Records the log's ranges in the damage record, so that the next open
 * scans the damaged segment whole even on the snapshot fast path, never
 * hands out its offsets again, and keeps a forensic copy then (a copy of a
 * whole segment is too slow for a reader's thread). Under the writer lock:
 * it serializes writers of the record, and each writes the current set, so
 * the last one written holds every range learned so far.
 */
static void record_damage(struct pulse_plog *plog)
{
    struct pulse_damage_set *set;

    pthread_mutex_lock(&plog->wlock);
    set = dset_get(plog);
    if (pulse_damage_write(plog->io, plog->dir, set->r, set->n) != PULSE_OK)
        PULSE_ERROR("plog %s: the damage just found could not be recorded; reads skip it until the log is closed, "
                    "and the next start finds it again only if it scans that far",
                    plog->dir);
    dset_release(set);
    pthread_mutex_unlock(&plog->wlock);
}

/* One damaged range the segscan item describes, with its end offset. */
static struct pulse_damage range_of(const struct pulse_segment *seg, const struct pulse_segscan_item *it, int64_t limit,
                                    int64_t hw)
{
    struct pulse_damage r = {seg->base,
                             it->pos,
                             it->end,
                             it->from,
                             it->tail ? (limit != INT64_MAX ? limit : hw) : it->next_base,
                             pulse_clock_wall_ms(),
                             0};
    if (r.to < r.from)
        r.to = r.from;
    return r;
}

/*
 * A read met a batch at pos of seg (data file pinned as fd) that fails
 * validation and is in no known range: locate the damage with the recovery
 * rule, from the index entry before it up to pos, and publish it (*record:
 * the caller must record_damage once it let go of the pin). Returns true
 * when a range now covers pos, so the read can be retried past it.
 */
static bool learn_damage(struct pulse_plog *plog, struct pulse_segment *seg, int fd, uint64_t pos, bool *record)
{
    struct pulse_damage_set *set = dset_get(plog);
    struct pulse_damage found[8];
    struct pulse_segscan sc;
    struct pulse_segscan_item it;
    struct pulse_segscan_start start;
    size_t n = 0, hfirst = 0, nh = 0;
    uint64_t bound;
    int64_t hw, limit = segment_limit(plog, seg);
    bool covered = false;

    pthread_mutex_lock(&plog->sync_lock);
    bound = atomic_load_explicit(&seg->durable_size, memory_order_relaxed);
    hw = atomic_load_explicit(&plog->hw, memory_order_relaxed);
    pthread_mutex_unlock(&plog->sync_lock);
    if (hw > atomic_load_explicit(&seg->next_offset, memory_order_acquire))
        hw = atomic_load_explicit(&seg->next_offset, memory_order_acquire);
    /* Every valid batch below the durable size read together with that HW
     * ends below it: a batch beyond it is damage, as the read judged. */
    if (hw < limit)
        limit = hw;
    pulse_segment_entry_before(seg, pos, 0, &start);
    for (size_t i = 0; i < set->n; i++) {
        if (set->r[i].seg_base == seg->base && nh++ == 0)
            hfirst = i;
    }
    pulse_segscan_init_at(&sc, seg->io, fd, seg->log_path, seg->base, bound, &start, limit, 0);
    pulse_segscan_set_hints(&sc, nh > 0 ? &set->r[hfirst] : NULL, nh);
    while (n < sizeof found / sizeof found[0] && pulse_segscan_next(&sc, &it) == PULSE_OK &&
           it.kind != PULSE_SEGSCAN_END && it.pos <= pos) {
        if (it.kind != PULSE_SEGSCAN_DAMAGE)
            continue;
        struct pulse_damage r = range_of(seg, &it, limit, hw);
        covered = covered || (it.pos <= pos && pos < it.end);
        if (dset_clashes(set, &r))
            continue; /* known already (another reader learned it) */
        PULSE_ERROR("plog: CORRUPT %s: bytes %" PRIu64 "..%" PRIu64 " fail validation (%s); offsets %" PRId64
                    "..%" PRId64 " are skipped from now on and recorded; the next start keeps a forensic copy of "
                    "the file; check the disk",
                    seg->log_path, r.pos, r.end, it.problem, r.from, r.to);
        found[n++] = r;
    }
    pulse_segscan_fini(&sc);
    dset_release(set);
    *record = n > 0 && dset_merge(plog, found, n) > 0;
    return covered;
}

/* Appends the plain records of the compressed batch item it (just
 * verified by sc) to plain; nothing for a plain batch. */
static pulse_status_t keep_plain(const struct pulse_segscan *sc, const struct pulse_segscan_item *it,
                                 struct pulse_buf *plain)
{
    const uint8_t *p;
    size_t n;
    if (plain == NULL || pulse_batch_codec(&it->hdr) == PULSE_BATCH_CODEC_NONE)
        return PULSE_OK;
    if (!pulse_segscan_plain(sc, it, &p, &n))
        return PULSE_INVALID; /* (a STOP walk verifies every batch: never) */
    return pulse_buf_append(plain, p, n);
}

/* One attempt of pulse_plog_read. *bad_seg (pinned, *bad_fd) and *bad_pos
 * name a batch that failed validation (the caller learns it), if any.
 * plain (nullable): pulse_plog_read_plain's. */
static pulse_status_t read_once(struct pulse_plog *plog, int64_t offset, uint64_t max_bytes, struct pulse_buf *out,
                                struct pulse_buf *plain, struct pulse_slice *sl, struct pulse_segment **bad_seg,
                                int *bad_fd, uint64_t *bad_pos)
{
    struct pulse_segment *seg = NULL;
    struct pulse_segscan sc;
    struct pulse_segscan_item it;
    size_t old_len = out->len, old_plain = plain != NULL ? plain->len : 0;
    uint64_t good = 0, filled = 0;
    int64_t next;
    int fd = -1;
    pulse_status_t st;

    *bad_seg = NULL;
    st = do_slice(plog, offset, max_bytes, sl, &seg, &fd, bad_pos, out, &filled);
    if (st == PULSE_CORRUPT) {
        *bad_seg = seg;
        *bad_fd = fd;
        return st;
    }
    if (st != PULSE_OK || sl->len == 0)
        goto out;
    next = sl->start_offset;
    if (sl->len > SIZE_MAX) {
        st = PULSE_TOO_LARGE;
        goto out;
    }
    st = pulse_buf_reserve(out, (size_t)sl->len);
    if (st != PULSE_OK)
        goto out;
    if (filled < sl->len) {
        /* What the walk did not read already (all of it when it read none). */
        size_t rest = (size_t)(sl->len - filled);
        ssize_t got = pulse_io_pread_all(seg->io, fd, out->data + out->len + filled, rest, (off_t)(sl->pos + filled));
        if (got < 0 || (size_t)got != rest) {
            int err = got < 0 ? errno : EIO;
            PULSE_ERROR("plog: pread %s at %" PRIu64 " failed: %s", seg->log_path, sl->pos, strerror(err));
            st = pulse_status_from_errno(err);
            goto out;
        }
    }
    /* Never hand out a batch that fails its CRC: stop before it. */
    pulse_segscan_init_mem(&sc, out->data + out->len, (size_t)sl->len, PULSE_SEGSCAN_STOP);
    while (pulse_segscan_next(&sc, &it) == PULSE_OK && it.kind == PULSE_SEGSCAN_BATCH) {
        st = keep_plain(&sc, &it, plain);
        if (st == PULSE_TOO_LARGE && good > 0) {
            /* Its plain records would pass plain's max: the slice ends
             * before this batch, and the next read starts with it. */
            st = PULSE_OK;
            break;
        }
        if (st != PULSE_OK)
            break;
        good = it.end;
        next = it.last_offset + 1;
    }
    pulse_segscan_fini(&sc);
    if (st != PULSE_OK)
        goto out;
    if (it.kind == PULSE_SEGSCAN_DAMAGE) {
        PULSE_ERROR_RL("plog: %s: batch at byte %" PRIu64 " fails verification; not serving it", seg->log_path,
                       sl->pos + good);
        *bad_pos = sl->pos + good;
        *bad_seg = seg; /* with its pin */
        *bad_fd = fd;
        seg = NULL;
    }
    if (good == 0) {
        st = PULSE_CORRUPT;
        goto out;
    }
    out->len += (size_t)good;
    sl->len = good;
    sl->next_offset = next;
out:
    if (st != PULSE_OK) {
        out->len = old_len;
        if (plain != NULL)
            plain->len = old_plain;
    }
    unpin_release(seg);
    return st;
}

/*
 * Learns the damage a read met at bad_pos of bad (pinned; the pin and the
 * reference are given up here) and records it. True when a range now
 * covers bad_pos, so the read can be tried again past it.
 */
static bool learn_and_record(struct pulse_plog *plog, struct pulse_segment *bad, int bad_fd, uint64_t bad_pos)
{
    bool learned, record = false;

    learned = learn_damage(plog, bad, bad_fd, bad_pos, &record);
    unpin_release(bad);
    if (record)
        record_damage(plog);
    return learned;
}

pulse_status_t pulse_plog_slice(struct pulse_plog *plog, int64_t offset, uint64_t max_bytes, bool want_fd,
                                struct pulse_slice *out)
{
    struct pulse_segment *seg = NULL;
    int sfd = -1;
    uint64_t bad_pos;
    pulse_status_t st;

    /* A batch that cannot be right is learned as damage and the slice is
     * tried again past it (as pulse_plog_read does), so that no reader,
     * raw or not, ever stalls in front of it. Each retry follows a newly
     * learned range; the bound is a guard. */
    for (int attempt = 0;; attempt++) {
        st = do_slice(plog, offset, max_bytes, out, &seg, &sfd, &bad_pos, NULL, NULL);
        if (st != PULSE_CORRUPT || seg == NULL)
            break;
        bool learned = learn_and_record(plog, seg, sfd, bad_pos);
        seg = NULL;
        if (!learned || attempt >= 16)
            break;
    }
    if (st != PULSE_OK)
        goto out;
    /* The dup is the caller's: it keeps the inode readable whatever the
     * cache or retention do with the segment afterwards. */
    if (want_fd && seg != NULL) {
        int fd = fcntl(sfd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) {
            int err = errno;
            PULSE_ERROR_RL("plog: dup of %s failed: %s", seg->log_path, strerror(err));
            st = pulse_status_from_errno(err);
            goto out;
        }
        out->fd = fd;
    }
out:
    unpin_release(seg);
    return st;
}

pulse_status_t pulse_plog_read(struct pulse_plog *plog, int64_t offset, uint64_t max_bytes, struct pulse_buf *out,
                               struct pulse_slice *info)
{
    return pulse_plog_read_plain(plog, offset, max_bytes, out, NULL, info);
}

pulse_status_t pulse_plog_read_plain(struct pulse_plog *plog, int64_t offset, uint64_t max_bytes, struct pulse_buf *out,
                                     struct pulse_buf *plain, struct pulse_slice *info)
{
    struct pulse_slice sl;
    pulse_status_t st;

    /* Each retry happens only after a new range was learned, and a learned
     * range is never learned again, so this ends; the bound is a guard. */
    for (int attempt = 0;; attempt++) {
        struct pulse_segment *bad = NULL;
        uint64_t bad_pos = UINT64_MAX;
        int bad_fd = -1;
        bool learned = false;

        st = read_once(plog, offset, max_bytes, out, plain, &sl, &bad, &bad_fd, &bad_pos);
        if (bad != NULL)
            learned = learn_and_record(plog, bad, bad_fd, bad_pos);
        if (st != PULSE_CORRUPT || !learned || attempt >= 16)
            break;
    }
    if (info != NULL && (st == PULSE_OK || st == PULSE_RANGE)) {
        sl.fd = -1;
        *info = sl;
    }
    return st;
}

/* ---- a proven log end ------------------------------------------------- */

/* Writes the damage record with the log's ranges plus r (which lies past
 * all of them). Caller holds wlock (the writers of the record serialize on
 * it). Nothing is published. */
static pulse_status_t record_with(struct pulse_plog *plog, const struct pulse_damage *r)
{
    struct pulse_damage_set *set = dset_get(plog);
    struct pulse_damage *all = pulse_calloc(set->n + 1, sizeof *all);
    pulse_status_t st = PULSE_NOMEM;

    if (all != NULL) {
        if (set->n > 0)
            memcpy(all, set->r, set->n * sizeof *all);
        all[set->n] = *r;
        st = pulse_damage_valid(all, set->n + 1) ? pulse_damage_write(plog->io, plog->dir, all, set->n + 1)
                                                 : PULSE_INVALID;
    }
    pulse_free(all);
    dset_release(set);
    return st;
}

pulse_status_t pulse_plog_raise_end(struct pulse_plog *plog, int64_t min_end, int64_t *raised_out)
{
    struct pulse_segment *seg;
    int64_t leo = 0;
    bool locked = false;
    pulse_status_t st = PULSE_OK;

    if (raised_out != NULL)
        *raised_out = 0;
    /* HW moves to min_end below, so whatever is appended must be durable
     * first; the sync runs without wlock (its leader takes it), so an
     * append that slips in between sends us round again. */
    for (int attempt = 0; st == PULSE_OK; attempt++) {
        if (min_end <= pulse_plog_log_end(plog))
            return PULSE_OK;
        st = pulse_plog_sync(plog);
        if (st != PULSE_OK)
            return st;
        pthread_mutex_lock(&plog->wlock);
        locked = true;
        leo = atomic_load_explicit(&plog->leo, memory_order_relaxed);
        if (atomic_load(&plog->fenced) || leo == atomic_load(&plog->hw) || min_end <= leo)
            break;
        pthread_mutex_unlock(&plog->wlock);
        locked = false;
        if (attempt >= 8)
            st = PULSE_BUSY;
    }
    if (st != PULSE_OK || min_end <= leo)
        goto out;
    if (atomic_load(&plog->fenced)) {
        st = PULSE_FENCED;
        goto out;
    }
    seg = active_seg(plog);
    if (min_end - seg->base > (int64_t)UINT32_MAX) {
        PULSE_ERROR("plog %s: cannot raise the log end from %" PRId64 " to %" PRId64 ": past what segment %020" PRId64
                    " can index",
                    plog->dir, leo, min_end, seg->base);
        st = PULSE_RANGE;
        goto out;
    }
    /* Nothing is unsynced (leo == HW): the written end is the durable one,
     * and the next batch will be written there. */
    uint64_t end = atomic_load_explicit(&seg->size, memory_order_relaxed);
    struct pulse_damage r = {seg->base, end, end, leo, min_end, pulse_clock_wall_ms(), 0};
    /* Durable first: a crash after it keeps the log end (recovery counts
     * the record's offsets as handed out), and a failed write changes
     * nothing. */
    st = record_with(plog, &r);
    if (st != PULSE_OK) {
        PULSE_ERROR("plog %s: cannot record offsets %" PRId64 "..%" PRId64 " as missing (%s); the log end stays at "
                    "%" PRId64,
                    plog->dir, leo, min_end, pulse_status_message(st), leo);
        goto out;
    }
    (void)dset_merge(plog, &r, 1);
    PULSE_ERROR("plog %s: offsets %" PRId64 "..%" PRId64 " were handed out (their high watermark was reached) but "
                "the log holds nothing for them; they are recorded as missing, skipped by fetches, and never "
                "handed out again",
                plog->dir, leo, min_end);
    /* The next batch gets an index entry, as after damage. */
    seg->since_entry = UINT64_MAX;
    atomic_store_explicit(&seg->next_offset, min_end, memory_order_release);
    atomic_store_explicit(&plog->leo, min_end, memory_order_release);
    pthread_mutex_lock(&plog->sync_lock);
    store_max_i64(&plog->hw, min_end);
    pthread_cond_broadcast(&plog->sync_cond);
    pthread_mutex_unlock(&plog->sync_lock);
    if (raised_out != NULL)
        *raised_out = min_end - leo;
    /* Best effort (see pulse_plog_snapshot_locked): the record is the proof. */
    (void)pulse_plog_snapshot_locked(plog);
out:
    if (locked)
        pthread_mutex_unlock(&plog->wlock);
    return st;
}

void pulse_plog_get_stats(struct pulse_plog *plog, struct pulse_plog_stats *out)
{
    memset(out, 0, sizeof *out);
    out->high_watermark = pulse_plog_high_watermark(plog);
    out->log_end = pulse_plog_log_end(plog);
    out->log_start = pulse_plog_log_start(plog);
    out->syncs = atomic_load(&plog->syncs);
    out->fenced = pulse_plog_fenced(plog);
    pthread_mutex_lock(&plog->list_lock);
    out->segments = (uint32_t)plog->nsegs;
    for (size_t i = 0; i < plog->nsegs; i++)
        out->size_bytes += atomic_load_explicit(&plog->segs[i]->size, memory_order_acquire);
    /* Ranges of trimmed segments are gone with them. */
    for (size_t i = 0; i < plog->damage->n; i++) {
        const struct pulse_damage *r = &plog->damage->r[i];
        if (plog->nsegs > 0 && r->seg_base >= plog->segs[0]->base) {
            out->damaged_ranges++;
            out->damaged_bytes += r->end - r->pos;
        }
    }
    pthread_mutex_unlock(&plog->list_lock);
}

pulse_status_t pulse_plog_list_segments(struct pulse_plog *plog, struct pulse_segment_info **out, size_t *n_out)
{
    struct pulse_segment_info *arr = NULL;
    size_t n;
    pulse_status_t st = PULSE_OK;
    int64_t hw = pulse_plog_high_watermark(plog);

    pthread_mutex_lock(&plog->list_lock);
    n = plog->nsegs;
    arr = pulse_calloc(n > 0 ? n : 1, sizeof *arr);
    if (arr == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        struct pulse_segment *seg = plog->segs[i];
        arr[i].base_offset = seg->base;
        arr[i].active = i == n - 1;
        arr[i].next_offset = arr[i].active ? hw : plog->segs[i + 1]->base;
        arr[i].size_bytes = atomic_load_explicit(&seg->size, memory_order_acquire);
        arr[i].max_timestamp = atomic_load_explicit(&seg->max_ts, memory_order_relaxed);
    }
out:
    pthread_mutex_unlock(&plog->list_lock);
    if (st == PULSE_OK) {
        *out = arr;
        *n_out = n;
    }
    return st;
}

static void plog_free(struct pulse_plog *plog)
{
    if (plog == NULL)
        return;
    for (size_t i = 0; i < plog->nsegs; i++)
        pulse_segment_release(plog->segs[i]);
    pulse_free(plog->segs);
    dset_release(plog->damage);
    if (plog->own_fdcache)
        pulse_fdcache_destroy(plog->fdcache);
    pthread_mutex_destroy(&plog->wlock);
    pthread_mutex_destroy(&plog->list_lock);
    pthread_mutex_destroy(&plog->sync_lock);
    pthread_mutex_destroy(&plog->snap_lock);
    pthread_cond_destroy(&plog->sync_cond);
    pulse_free(plog->dir);
    pulse_free(plog);
}

/* Whether the snapshot file recovery read lacks what the next write would
 * record (see snap_owed): the next clean close then writes it, even for a
 * log whose durable state did not move. */
static bool snapshot_owed(const struct pulse_recover_result *res, const struct pulse_plog_recovery *rec)
{
    if (!res->have_snap)
        return false; /* the durable state differs from none, unless the log is empty */
    if (res->snap_version != PULSE_SNAPSHOT_VERSION_2)
        return true;
    return rec->seals_trusted + 1 < res->n || rec->indexes_rebuilt > 0 ||
           (res->snap_active_index_n > 1 && !rec->active_index_trusted);
}

pulse_status_t pulse_plog_open(const char *dir, const struct pulse_plog_config *cfg, struct pulse_plog **plog_out,
                               struct pulse_plog_recovery *rec_out)
{
    struct pulse_plog *plog = NULL;
    struct pulse_recover_result res = {.segs = NULL};
    struct pulse_plog_recovery rec;
    const struct pulse_io *io;
    pulse_status_t st = PULSE_OK;

    if (dir == NULL || cfg == NULL || plog_out == NULL || dir[0] == '\0' ||
        cfg->segment_max_bytes < PULSE_PLOG_MIN_SEGMENT_BYTES ||
        cfg->segment_max_bytes > PULSE_PLOG_MAX_SEGMENT_BYTES ||
        (cfg->sync_mode != PULSE_SYNC_EVERY_WRITE && cfg->sync_mode != PULSE_SYNC_INTERVAL)) {
        st = PULSE_INVALID;
        goto out;
    }
    io = cfg->io != NULL ? cfg->io : pulse_io_posix();
    plog = pulse_calloc(1, sizeof *plog);
    if (plog == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    pthread_mutex_init(&plog->wlock, NULL);
    pthread_mutex_init(&plog->list_lock, NULL);
    pthread_mutex_init(&plog->sync_lock, NULL);
    pthread_mutex_init(&plog->snap_lock, NULL);
    pthread_cond_init(&plog->sync_cond, NULL);
    for (size_t i = 0; i < PULSE_PLOG_EPOCHS_KEPT; i++)
        plog->ended[i].epoch = UINT64_MAX;
    plog->cfg = *cfg;
    plog->cfg.io = io;
    plog->io = io;
    plog->dir = pulse_strdup(dir);
    if (plog->dir == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    plog->fdcache = cfg->fdcache;
    if (plog->fdcache == NULL) {
        st = pulse_fdcache_create(PULSE_FDCACHE_DEFAULT_CAPACITY, &plog->fdcache);
        if (st != PULSE_OK)
            goto out;
        plog->own_fdcache = true;
    }
    if (pulse_io_mkdir_p(io, dir, 0755) < 0) {
        int err = errno;
        PULSE_ERROR("plog: mkdir -p %s failed: %s", dir, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    st = pulse_recover_run(io, plog->fdcache, dir, cfg->index_interval_bytes, cfg->contiguous, NULL, &res, &rec);
    if (st != PULSE_OK)
        goto out;
    plog->segs = res.segs;
    plog->nsegs = res.n;
    plog->cap = res.n;
    res.segs = NULL;
    /* What the snapshot file says: a checkpoint is owed once the durable
     * state differs. Without one, only an empty log needs no proof. */
    if (res.have_snap)
        plog->last_snap = res.snap;
    plog->snap_owed = snapshot_owed(&res, &rec);
    atomic_init(&plog->snap_hw, plog->last_snap.leo);
    plog->damage = dset_from(&res);
    if (plog->damage == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    /* Recovery synced everything it kept: all of it is durable. */
    atomic_init(&plog->hw, res.leo);
    atomic_init(&plog->leo, res.leo);
    atomic_init(&plog->log_start, plog->segs[0]->base);
    atomic_init(&plog->fenced, false);
    atomic_init(&plog->epoch, 0);
    atomic_init(&plog->syncs, 0);
    atomic_init(&plog->last_sync_us, pulse_clock_mono_us());
    if (rec_out != NULL)
        *rec_out = rec;
    *plog_out = plog;
    plog = NULL;
out:
    plog_free(plog);
    return st;
}

/*
 * Cuts the active segment's index file to the entries of batches below
 * durable. Entries of the batches the reopen cuts away name offsets that
 * were never durable nor visible: left in the file, recovery would take
 * them for proof that those offsets were handed out (recover.c, "the log
 * end") and skip them instead of giving them to the next appends.
 */
static pulse_status_t cut_index_to_durable(struct pulse_plog *plog, struct pulse_segment *seg, uint64_t durable)
{
    uint64_t isize = 0;
    size_t keep = 0;
    int ifd;
    pulse_status_t st;

    pthread_mutex_lock(&seg->index_lock);
    while (keep < seg->index.n && seg->index.entries[keep].rel_pos < durable)
        keep++;
    pthread_mutex_unlock(&seg->index_lock);
    st = pulse_fdc_pin(&seg->idx, &ifd);
    if (st != PULSE_OK)
        return st;
    if (plog->io->fsize(plog->io, ifd, &isize) == 0 && isize > (uint64_t)keep * PULSE_INDEX_ENTRY_SIZE &&
        plog->io->ftruncate(plog->io, ifd, (off_t)keep * PULSE_INDEX_ENTRY_SIZE) < 0) {
        int err = errno;
        PULSE_ERROR("plog: ftruncate %s failed: %s", seg->index_path, strerror(err));
        st = pulse_status_from_errno(err);
    }
    pulse_fdc_unpin(&seg->idx);
    return st;
}

/* Step 1 of a reopen: cuts the active segment (and its index) back to its
 * durable size. Caller holds wlock; the log is fenced and no sync leader
 * runs. */
static pulse_status_t cut_to_durable_locked(struct pulse_plog *plog)
{
    struct pulse_segment *seg = active_seg(plog);
    uint64_t durable = atomic_load_explicit(&seg->durable_size, memory_order_acquire);
    uint64_t fsize = 0;
    int fd;
    pulse_status_t st = pulse_segment_pin(seg, &fd);

    if (st != PULSE_OK)
        return st;
    if (plog->io->fsize(plog->io, fd, &fsize) < 0) {
        int err = errno;
        PULSE_ERROR("plog: fstat %s failed: %s", seg->log_path, strerror(err));
        st = pulse_status_from_errno(err);
    } else if (fsize > durable && plog->io->ftruncate(plog->io, fd, (off_t)durable) < 0) {
        int err = errno;
        PULSE_ERROR("plog: ftruncate %s to %" PRIu64 " failed: %s", seg->log_path, durable, strerror(err));
        st = pulse_status_from_errno(err);
    } else if (fsize > durable) {
        PULSE_WARN("plog %s: reopen cut %" PRIu64 " bytes that were never durable from %s", plog->dir, fsize - durable,
                   seg->log_path);
    }
    pulse_segment_unpin(seg);
    if (st == PULSE_OK)
        st = cut_index_to_durable(plog, seg, durable);
    return st;
}

/* Step 3 of a reopen: installs what recovery found and lifts the fence.
 * Caller holds wlock. Takes res's segments and the damage set; *old_out and
 * *nold_out get the previous list (the caller releases it outside the
 * locks). */
static void install_recovered_locked(struct pulse_plog *plog, struct pulse_recover_result *res,
                                     struct pulse_damage_set *damage, struct pulse_segment ***old_out, size_t *nold_out)
{
    pthread_mutex_lock(&plog->list_lock);
    *old_out = plog->segs;
    *nold_out = plog->nsegs;
    plog->segs = res->segs;
    plog->nsegs = res->n;
    plog->cap = res->n;
    /* What this recovery found replaces what the log knew (it read the
     * record the log wrote, so nothing is forgotten). */
    dset_release(plog->damage);
    plog->damage = damage;
    atomic_store_explicit(&plog->log_start, plog->segs[0]->base, memory_order_release);
    pthread_mutex_unlock(&plog->list_lock);
    res->segs = NULL;
    res->n = 0;
    pthread_mutex_lock(&plog->sync_lock);
    /* The epoch ends with the HW it reached (no sync published since the
     * fence): its appends up to there are durable and kept (recovery was
     * given them as proof), the rest are discarded. The new epoch starts
     * before HW moves, so that whoever reads HW and then the epoch never
     * pairs the new HW with the old epoch (see "Epochs" in plog.h). */
    uint64_t epoch = atomic_load(&plog->epoch);
    plog->ended[epoch % PULSE_PLOG_EPOCHS_KEPT].epoch = epoch;
    plog->ended[epoch % PULSE_PLOG_EPOCHS_KEPT].hw = atomic_load(&plog->hw);
    atomic_store(&plog->epoch, epoch + 1);
    /* Recovery synced everything it kept, as at open: HW = LEO. HW only
     * grows: the old HW was recovery's floor. */
    atomic_store_explicit(&plog->leo, res->leo, memory_order_release);
    atomic_store_explicit(&plog->hw, res->leo, memory_order_release);
    atomic_store(&plog->last_sync_us, pulse_clock_mono_us());
    atomic_store(&plog->fenced, false);
    pthread_cond_broadcast(&plog->sync_cond);
    pthread_mutex_unlock(&plog->sync_lock);
}

/* What the running log proves about its files, for recovery: HW and the
 * durable size of the active segment, both covered by a successful
 * fdatasync. Caller holds wlock; the log is fenced, so neither moves. */
static void running_proof(struct pulse_plog *plog, struct pulse_snapshot *proof)
{
    struct pulse_segment *seg = active_seg(plog);

    pthread_mutex_lock(&plog->sync_lock);
    proof->leo = atomic_load(&plog->hw);
    proof->active_base = seg->base;
    proof->active_size = (int64_t)atomic_load(&seg->durable_size);
    proof->active_next = proof->leo;
    pthread_mutex_unlock(&plog->sync_lock);
}

pulse_status_t pulse_plog_reopen(struct pulse_plog *plog, struct pulse_plog_recovery *rec_out)
{
    struct pulse_recover_result res = {.segs = NULL};
    struct pulse_damage_set *damage = NULL;
    struct pulse_plog_recovery rec;
    struct pulse_snapshot proof;
    struct pulse_segment **old = NULL;
    size_t nold = 0;
    bool snap_locked = false;
    pulse_status_t st = PULSE_OK;

    if (!atomic_load(&plog->fenced))
        return PULSE_INVALID;
    /* No leader starts once the log is fenced (wait_durable checks first);
     * one that started before may still be in its fdatasync. It publishes
     * nothing now, but it must be done with the files before they change. */
    pthread_mutex_lock(&plog->sync_lock);
    while (plog->syncing)
        pthread_cond_wait(&plog->sync_cond, &plog->sync_lock);
    pthread_mutex_unlock(&plog->sync_lock);

    pthread_mutex_lock(&plog->wlock);
    /* Another reopen may have ended the fence while we waited. */
    if (!atomic_load(&plog->fenced)) {
        st = PULSE_INVALID;
        goto out;
    }
    running_proof(plog, &proof);
    st = cut_to_durable_locked(plog);
    if (st != PULSE_OK)
        goto out;
    /* Step 2: the same recovery as at open, on the files as they are now,
     * with what the running log proves: every byte of the active segment
     * below its durable size was synced and may have been acknowledged, so
     * damage there is corruption, kept and recorded, never a torn tail to
     * cut; and offsets below HW were visible, so the log end stays at or
     * above it (those past the surviving data become a recorded missing
     * range). Recovery decides everything before it changes a file, and
     * with this proof it never cuts below it. The snapshot writers wait
     * (recovery reads the snapshot and removes temp files). */
    pthread_mutex_lock(&plog->snap_lock);
    snap_locked = true;
    st = pulse_recover_run(plog->io, plog->fdcache, plog->dir, plog->cfg.index_interval_bytes, plog->cfg.contiguous,
                           &proof, &res, &rec);
    if (st != PULSE_OK)
        goto out;
    damage = dset_from(&res);
    if (damage == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    install_recovered_locked(plog, &res, damage, &old, &nold);
    /* New segment structs: the next snapshot computes their parts anew. */
    plog->act_seg = NULL;
    plog->snap_owed = true;
    PULSE_WARN("plog %s: reopened after a fence; log end %" PRId64 ", %" PRIu64 " bytes truncated by recovery",
               plog->dir, res.leo, rec.truncated_bytes);
    if (rec_out != NULL)
        *rec_out = rec;
out:
    if (snap_locked)
        pthread_mutex_unlock(&plog->snap_lock);
    pthread_mutex_unlock(&plog->wlock);
    for (size_t i = 0; i < res.n; i++)
        pulse_segment_release(res.segs[i]);
    pulse_free(res.segs);
    pulse_free(res.damage);
    for (size_t i = 0; i < nold; i++) {
        /* A reader still holding an old segment reads the same file as the
         * new one, until a trim or a compaction of the new list removes
         * the path: keep its descriptor. Best effort: should that fail,
         * the cache refuses to reopen the path once it names another file
         * (fdcache.h), so the reader gets an error, never other bytes. */
        if (atomic_load(&old[i]->refs) > 1)
            (void)pulse_segment_retire(old[i]);
        pulse_segment_release(old[i]);
    }
    pulse_free(old);
    return st;
}

/* The snapshot of a clean close: written only when the durable state
 * differs from what the file says (an idle log keeps its file, so a stop of
 * many idle partitions writes nothing). Caller holds wlock; the log is
 * synced. */
static pulse_status_t close_snapshot_locked(struct pulse_plog *plog)
{
    struct pulse_snapshot snap;
    pulse_status_t st = PULSE_FENCED;

    pthread_mutex_lock(&plog->snap_lock);
    if (durable_state(plog, &snap))
        st = snap_equal(&snap, &plog->last_snap) && !plog->snap_owed ? PULSE_OK : put_snapshot(plog, &snap);
    pthread_mutex_unlock(&plog->snap_lock);
    return st;
}

pulse_status_t pulse_plog_close(struct pulse_plog *plog)
{
    pulse_status_t st = PULSE_OK;

    if (plog == NULL)
        return PULSE_OK;
    if (!atomic_load(&plog->fenced) && pulse_plog_needs_sync(plog))
        st = pulse_plog_sync(plog);
    if (st == PULSE_OK && !atomic_load(&plog->fenced)) {
        pthread_mutex_lock(&plog->wlock);
        /* The commit path leaves the active index unsynced (see
         * lead_sync); a clean close makes it durable so the next open's
         * fast path finds it whole. */
        struct pulse_segment *seg = active_seg(plog);
        if (seg->index_written > atomic_load(&seg->index_synced)) {
            bool failed = false;
            if (pin_and_sync(plog, &seg->idx, &failed) == PULSE_OK) {
                store_max_size(&seg->index_synced, seg->index_written);
                pulse_fdc_clean(&seg->idx, seg->idx_dirty_ticket);
            } else {
                PULSE_WARN("plog: index %s not synced at close (the next open rebuilds it)", seg->index_path);
            }
        }
        st = close_snapshot_locked(plog);
        pthread_mutex_unlock(&plog->wlock);
    }
    if (st == PULSE_OK && atomic_load(&plog->fenced))
        st = PULSE_FENCED;
    plog_free(plog);
    return st;
}
