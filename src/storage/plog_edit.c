/* SPDX-License-Identifier: MIT */
/*
 * plog_edit.c - the log applies the edits its maintenance jobs describe
 * (plog_edit.h): capturing the list, trimming a prefix, removing garbage
 * segments, and swapping rewritten or merged segments in (storage contract
 * section 8; docs/Storage.md "Retention", "Compaction").
 *
 * Every edit runs under the writer lock from its check to its last file
 * step: the list only changes under it, so what the check found is what
 * the file steps act on, and an append never lands in a segment being
 * replaced (only sealed segments are edited). The list lock is taken
 * inside it for the list change alone, so readers wait for no I/O.
 *
 * Crash safety of a rewrite (one segment). The job's temps (never a ".log"
 * suffix, so recovery never takes them for a segment, and the ".tmp-"
 * prefix makes recovery delete them) are synced before the edit. Then:
 * rename data over the segment, rename index over its index, fsync the
 * directory. A crash before the first rename leaves the old files; after
 * both, the new ones; in between, new data with the old index, whose
 * entries recovery checks one by one against the batch headers and
 * rebuilds when they do not match. Readers holding the old segment keep
 * its inode (retired descriptor) until they release it: the swap installs
 * a new struct pulse_segment and drops the list's reference on the old one.
 * A failure after the first rename fences the log: the list no longer
 * describes the files, and the reopen's recovery reads them as they are.
 *
 * Crash safety of a merge (segments F < S2 < ... < Sn, next base E).
 * Renaming the merged file over F while S2..Sn still exist would leave two
 * files holding the same offsets; removing S2..Sn first would lose their
 * records if the rename never happened. So the merged data takes an
 * intermediate name that recovery recognises and rolls forward:
 *   1. (the job) write and fdatasync both temps;
 *   2. rename the data temp to "<F>-<E>.merge" and fsync the directory
 *      (compact_merge_after_marker). From here the merge is decided: the
 *      file is complete and durable before any segment it replaces is
 *      touched, and its name says which offsets it covers;
 *   3. unlink S2..Sn, each index before its data
 *      (compact_merge_between_unlinks after the first), fsync the directory
 *      (compact_merge_before_renames): the removals must be durable before
 *      F's name changes meaning, or a crash could keep the new F beside an
 *      old S2;
 *   4. rename the index temp over F.index (compact_merge_between_renames),
 *      rename "<F>-<E>.merge" over F.log (compact_merge_before_dir_fsync),
 *      fsync the directory;
 *   5. install one segment struct spanning [F, E) in place of the n. A
 *      reader holding one of the old segments keeps its inode; when it
 *      finds nothing more there it continues at its offset in whichever
 *      segment holds that offset now (plog.c, next_segment), so it never
 *      skips what moved into F.
 * Recovery (recover.c, finish_merges, before it lists the segments): a
 * "<F>-<E>.merge" file that verifies whole, with F.log present, is rolled
 * forward: every segment with a base in (F, E) is removed, the directory
 * fsynced, F.index removed (the scan rebuilds it) and the merge file
 * renamed over F.log. A crash before step 2's rename leaves the old files
 * and a temp recovery deletes; from step 2 to before the rename in step 4
 * recovery finishes the merge; after it, the directory already is the
 * merged state. No crash point loses a record or leaves an offset in two
 * files. A merge file that does not verify (damaged on disk after its
 * fdatasync) is left alone and reported: nothing is removed on the
 * strength of bytes that do not check out.
 * A failure after step 2 (a rename, unlink or fsync error) fences the log:
 * the directory then describes a merge in progress while the list
 * describes the old files; the reopen's recovery finishes the merge.
 */
#include "storage/plog_edit.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/debug.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "storage/index.h"
#include "common/fsio.h"
#include "storage/plog_int.h"
#include "storage/segment.h"
#include "storage/segscan.h"

const char *pulse_plog_dir(const struct pulse_plog *plog)
{
    return plog->dir;
}

const struct pulse_plog_config *pulse_plog_get_config(const struct pulse_plog *plog)
{
    return &plog->cfg;
}

/* ---- capturing the list ------------------------------------------------ */

pulse_status_t pulse_plog_capture(struct pulse_plog *plog, struct pulse_plog_segref **refs_out, size_t *n_out)
{
    struct pulse_plog_segref *refs;
    size_t n;

    pthread_mutex_lock(&plog->list_lock);
    refs = pulse_calloc(plog->nsegs, sizeof *refs);
    if (refs == NULL) {
        pthread_mutex_unlock(&plog->list_lock);
        return PULSE_NOMEM;
    }
    for (n = 0; n < plog->nsegs; n++) {
        struct pulse_segment *seg = plog->segs[n];
        bool active = n + 1 == plog->nsegs;
        pulse_segment_acquire(seg);
        refs[n].seg = seg;
        refs[n].base = seg->base;
        refs[n].path = seg->log_path;
        /* The active segment contributes its durable prefix only: bytes past
         * it may still be cut by a failed sync. */
        refs[n].size = atomic_load_explicit(active ? &seg->durable_size : &seg->size, memory_order_acquire);
    }
    pthread_mutex_unlock(&plog->list_lock);
    *refs_out = refs;
    *n_out = n;
    return PULSE_OK;
}

void pulse_plog_capture_free(struct pulse_plog_segref *refs, size_t n)
{
    for (size_t i = 0; refs != NULL && i < n; i++)
        pulse_segment_release(refs[i].seg);
    pulse_free(refs);
}

pulse_status_t pulse_plog_segref_scan(const struct pulse_plog_segref *ref, unsigned mode, struct pulse_segscan *sc)
{
    int fd;
    pulse_status_t st = pulse_segment_pin(ref->seg, &fd);

    if (st == PULSE_OK)
        pulse_segscan_init(sc, ref->seg->io, fd, ref->path, ref->base, ref->size, 0, ref->base, INT64_MAX, mode);
    return st;
}

void pulse_plog_segref_unscan(const struct pulse_plog_segref *ref, struct pulse_segscan *sc)
{
    pulse_segscan_fini(sc);
    pulse_segment_unpin(ref->seg);
}

pulse_status_t pulse_plog_segref_file_size(const struct pulse_plog_segref *ref, uint64_t *size_out)
{
    return pulse_segment_file_size(ref->seg, size_out);
}

char *pulse_plog_temp_path(const struct pulse_plog *plog, const char *who, int64_t base, const char *ext)
{
    return pulse_segment_temp_path(plog->dir, who, base, ext);
}

/* ---- list changes (wlock held) ----------------------------------------- */

/* The position of seg among the sealed segments of the list, or SIZE_MAX.
 * Caller holds wlock (the list only changes under it). */
static size_t sealed_at(const struct pulse_plog *plog, const struct pulse_segment *seg)
{
    for (size_t i = 0; i + 1 < plog->nsegs; i++)
        if (plog->segs[i] == seg)
            return i;
    return SIZE_MAX;
}

/* Debug builds: the list after a change still has its active segment, bases
 * strictly increasing, and no segment's offsets reaching into the next. */
static void list_check(const struct pulse_plog *plog)
{
#ifdef PULSE_DEBUG
    PULSE_ASSERT(plog->nsegs >= 1);
    for (size_t i = 0; i + 1 < plog->nsegs; i++) {
        PULSE_ASSERT(plog->segs[i]->base < plog->segs[i + 1]->base);
        PULSE_ASSERT(atomic_load(&plog->segs[i]->next_offset) <= plog->segs[i + 1]->base);
    }
#else
    (void)plog;
#endif
}

/* Takes segs[at, at + n) off the list, copying them to gone (nullable;
 * the list's references move there: the caller releases them) and moves
 * the log start when the first went. Caller holds wlock. */
static void list_cut(struct pulse_plog *plog, size_t at, size_t n, struct pulse_segment **gone)
{
    struct pulse_segment **segs = plog->segs;

    PULSE_ASSERT(at + n < plog->nsegs); /* never the active segment */
    pthread_mutex_lock(&plog->list_lock);
    if (gone != NULL)
        memcpy(gone, segs + at, n * sizeof *gone);
    memmove(segs + at, segs + at + n, (plog->nsegs - at - n) * sizeof *segs);
    plog->nsegs -= n;
    if (at == 0)
        atomic_store_explicit(&plog->log_start, segs[0]->base, memory_order_release);
    list_check(plog);
    pthread_mutex_unlock(&plog->list_lock);
}

/* Unlinks a path that may already be gone. errno-style: 0 or the error. */
static int unlink_maybe(const struct pulse_io *io, const char *who, const char *path)
{
    if (io->unlink(io, path) < 0 && errno != ENOENT) {
        int err = errno;
        PULSE_ERROR("%s: unlink %s failed: %s", who, path, strerror(err));
        return err;
    }
    return 0;
}

/* fsyncs the log's directory; 0 or the error (logged). */
static int fsync_dir(struct pulse_plog *plog, const char *who)
{
    if (plog->io->fsync_dir(plog->io, plog->dir) < 0) {
        int err = errno;
        PULSE_ERROR("%s: fsync directory %s failed: %s", who, plog->dir, strerror(err));
        return err;
    }
    return 0;
}

/* ---- TRIM ----------------------------------------------------------------- */

/*
 * Unlinks the files of the trimmed segments gone[0..n). Readers holding a
 * reference or a dup()'ed descriptor keep the inode alive and finish with
 * the right bytes: no new reference can appear now the segments are off the
 * list, and one held already gets its data descriptor kept open (retired)
 * first, since the cache could otherwise close it and find no path to
 * reopen. Oldest first, and the index before its data file: a crash part
 * way leaves a prefix removed and, at worst, one data file whose index
 * recovery rebuilds, never an index without its data.
 */
static pulse_status_t unlink_trimmed(struct pulse_plog *plog, struct pulse_segment **gone, size_t n)
{
    pulse_status_t st = PULSE_OK;

    for (size_t i = 0; i < n; i++) {
        int err;
        if (atomic_load(&gone[i]->refs) > 1 && pulse_segment_retire(gone[i]) != PULSE_OK)
            PULSE_WARN("plog: %s is still being read but cannot be kept open; that read may fail", gone[i]->log_path);
        err = unlink_maybe(plog->io, "plog", gone[i]->index_path);
        if (err != 0)
            st = pulse_status_from_errno(err);
        if (plog->io->unlink(plog->io, gone[i]->log_path) < 0) {
            err = errno;
            PULSE_ERROR("plog: unlink %s failed: %s", gone[i]->log_path, strerror(err));
            st = pulse_status_from_errno(err);
        }
        PULSE_INFO("plog %s: trimmed segment %020" PRId64, plog->dir, gone[i]->base);
        if (i == 0 && n > 1)
            pulse_failpoint("plog_trim_mid");
    }
    return st;
}

/* TRIM under wlock: see pulse_plog_apply. The trimmed segments' list
 * references go to *gone_out (*n_out of them): the caller releases them
 * once it let go of the lock (the last release closes descriptors). */
static pulse_status_t apply_trim(struct pulse_plog *plog, int64_t keep_from, struct pulse_segment ***gone_out,
                                 size_t *n_out)
{
    struct pulse_segment **gone = NULL;
    size_t n = 0;
    pulse_status_t st = PULSE_OK;

    /* The segments before the one that starts at keep_from, as planned.
     * When no segment starts there any more (a reopen or a compaction
     * merge changed the list since the caller looked), the first one kept
     * would start earlier and hold offsets the plan never chose: refuse. */
    while (n < plog->nsegs && plog->segs[n]->base < keep_from)
        n++;
    if (n == plog->nsegs || plog->segs[n]->base != keep_from)
        return n > 0 ? PULSE_BUSY : PULSE_OK;
    if (n == 0)
        return PULSE_OK;
    gone = pulse_calloc(n, sizeof *gone);
    if (gone == NULL)
        return PULSE_NOMEM;
    list_cut(plog, 0, n, gone);
    *gone_out = gone;
    *n_out = n;
    st = unlink_trimmed(plog, gone, n);
    {
        int err = fsync_dir(plog, "plog");
        if (err != 0)
            st = pulse_status_from_errno(err);
    }
    /* The snapshot follows the trim so a restart trusts the trimmed state;
     * a failure only costs the next start a full scan. */
    (void)pulse_plog_snapshot_locked(plog);
    return st;
}

/* ---- REMOVE --------------------------------------------------------------- */

/*
 * Removes one sealed segment whose every record was dropped. A middle
 * segment may go too: sealed segments take their end from the next
 * segment's base, so the previous one's range simply grows, and reads skip
 * forward over the gap. The index goes first, so a crash between the
 * unlinks leaves a data file whose index is rebuilt, never an orphan index.
 * Under wlock; PULSE_BUSY when seg is no longer listed.
 */
static pulse_status_t remove_one(struct pulse_plog *plog, const char *who, struct pulse_segment *seg)
{
    const struct pulse_io *io = plog->io;
    size_t at = sealed_at(plog, seg);
    int err;
    pulse_status_t st;

    if (at == SIZE_MAX)
        return PULSE_BUSY; /* trimmed meanwhile: nothing to do */
    /* Readers holding the segment keep its descriptor (fdcache.h). */
    st = pulse_segment_retire(seg);
    if (st != PULSE_OK)
        return st;
    err = unlink_maybe(io, who, seg->index_path);
    if (err == 0 && io->unlink(io, seg->log_path) < 0) {
        err = errno;
        PULSE_ERROR("%s: unlink %s failed: %s", who, seg->log_path, strerror(err));
    }
    if (err != 0) {
        pulse_segment_unretire(seg); /* still listed, its data file still there */
        return pulse_status_from_errno(err);
    }
    /* The list's reference; readers holding one keep the inode alive, and
     * the job still holds its own. */
    list_cut(plog, at, 1, NULL);
    pulse_segment_release(seg);
    return PULSE_OK;
}

/* ---- REPLACE -------------------------------------------------------------- */

/*
 * The segment that takes the place of the replaced ones: base's files
 * (renamed into place already) opened on demand, with the job's index
 * table and bounds, its index file closed (sealed: its table is complete).
 */
static pulse_status_t open_replacement(struct pulse_plog *plog, int64_t base, const struct pulse_plog_newseg *add,
                                       int64_t next_offset, struct pulse_segment **out)
{
    struct pulse_segment *nseg = NULL;
    pulse_status_t st = pulse_segment_open(plog->io, plog->fdcache, plog->dir, base, false, &nseg);

    if (st == PULSE_OK)
        st = pulse_segment_copy_index(nseg, add->index);
    if (st != PULSE_OK) {
        pulse_segment_release(nseg);
        return st;
    }
    pulse_segment_set_bounds(nseg, &(struct pulse_segment_bounds){
                                       .size = add->size,
                                       .next_offset = next_offset,
                                       .max_ts = add->max_ts,
                                       .since_entry = add->since_entry,
                                   });
    pulse_segment_close_index(nseg);
    *out = nseg;
    return PULSE_OK;
}

/* Puts nseg (its reference moves to the list) at position at in place of
 * the n segments old there, in one step under the list lock (a reader must
 * never see the first one gone and the others not, or the reverse), and
 * drops the list's references on those. Caller holds wlock; readers
 * holding an old segment keep its inode. */
static void list_replace(struct pulse_plog *plog, size_t at, const struct pulse_plog_segref *const *old, size_t n,
                         struct pulse_segment *nseg)
{
    struct pulse_segment **segs = plog->segs;

    PULSE_ASSERT(n >= 1 && at + n < plog->nsegs); /* sealed segments only */
    pthread_mutex_lock(&plog->list_lock);
    segs[at] = nseg;
    memmove(segs + at + 1, segs + at + n, (plog->nsegs - at - n) * sizeof *segs);
    plog->nsegs -= n - 1;
    list_check(plog);
    pthread_mutex_unlock(&plog->list_lock);
    for (size_t k = 0; k < n; k++)
        pulse_segment_release(old[k]->seg);
}

/* A rewrite of one segment (see "Crash safety of a rewrite"). *renamed is
 * set once the data temp took the segment's name; *what names the step
 * that failed after that. */
static pulse_status_t replace_one(struct pulse_plog *plog, const char *who, const struct pulse_plog_segref *ref,
                                  size_t at, const struct pulse_plog_newseg *add, bool *renamed, const char **what)
{
    const struct pulse_io *io = plog->io;
    struct pulse_segment *seg = ref->seg;
    struct pulse_segment *nseg = NULL;
    int err;
    pulse_status_t st;

    /* Readers holding the old segment keep its inode through its retired
     * descriptor; a reopen by path would find the new file. */
    st = pulse_segment_retire(seg);
    if (st != PULSE_OK)
        return st;
    if (io->rename(io, add->data_temp, seg->log_path) < 0) {
        err = errno;
        PULSE_ERROR("%s: rename %s -> %s failed: %s", who, add->data_temp, seg->log_path, strerror(err));
        pulse_segment_unretire(seg); /* nothing was swapped */
        return pulse_status_from_errno(err);
    }
    *renamed = true;
    pulse_failpoint("compact_between_renames");
    /* From here on the old struct keeps serving the old inode, whose bytes
     * are a superset of the new file's, so a failure below never makes a
     * read wrong; but the list no longer describes the directory (the path
     * names the new file, the struct the old one): the caller fences. */
    *what = "rename of a rewritten index";
    if (io->rename(io, add->index_temp, seg->index_path) < 0) {
        err = errno;
        PULSE_ERROR("%s: rename %s -> %s failed: %s (the index is rebuilt when the log is reopened)", who,
                    add->index_temp, seg->index_path, strerror(err));
        return pulse_status_from_errno(err);
    }
    pulse_failpoint("compact_before_dir_fsync");
    /* Never retried (see pulse_plog_sync_dir): which name survives a crash
     * is unknown now. */
    *what = "directory fsync";
    err = fsync_dir(plog, who);
    if (err != 0)
        return pulse_status_from_errno(err);
    *what = "segment list update after a rewrite";
    st = open_replacement(plog, seg->base, add, atomic_load(&seg->next_offset), &nseg);
    if (st == PULSE_OK)
        list_replace(plog, at, &ref, 1, nseg);
    return st;
}

/* Takes the retirement of the first n segments back (see merge_files). */
static void unretire_first(const struct pulse_plog_segref *const *refs, size_t n)
{
    for (size_t k = 0; k < n; k++)
        pulse_segment_unretire(refs[k]->seg);
}

/* Logs a failed file step of a merge; returns err. */
static int merge_fail(const char *who, const char *op, const char *path, int err)
{
    PULSE_ERROR("%s: %s %s failed: %s", who, op, path, strerror(err));
    return err;
}

/* Step 3 of a merge: the segments after the first go, then the removals
 * are made durable before the merged file takes the first name (otherwise
 * a crash could keep the new name and lose removals, leaving two files
 * that hold the same offsets). errno-style. */
static int merge_unlink_rest(struct pulse_plog *plog, const char *who, const struct pulse_plog_segref *const *refs,
                             size_t n, const char **what)
{
    const struct pulse_io *io = plog->io;

    *what = "unlink";
    for (size_t k = 1; k < n; k++) {
        const struct pulse_segment *seg = refs[k]->seg;
        if (io->unlink(io, seg->index_path) < 0 && errno != ENOENT)
            return merge_fail(who, "unlink", seg->index_path, errno);
        if (io->unlink(io, seg->log_path) < 0 && errno != ENOENT)
            return merge_fail(who, "unlink", seg->log_path, errno);
        if (k == 1)
            pulse_failpoint("compact_merge_between_unlinks");
    }
    *what = "directory fsync";
    if (io->fsync_dir(io, plog->dir) < 0)
        return merge_fail(who, "fsync directory", plog->dir, errno);
    pulse_failpoint("compact_merge_before_renames");
    return 0;
}

/*
 * The file steps of a merge of the n listed segments segs (the first one
 * keeps its name) into the synced temps of add, in the crash-safe order of
 * the file comment. *named is set once the data temp is named mpath: from
 * then on a failure leaves work that only recovery finishes (the caller
 * fences). *what names the step that failed.
 */
static pulse_status_t merge_files(struct pulse_plog *plog, const char *who, const struct pulse_plog_segref *const *refs,
                                  size_t n, const struct pulse_plog_newseg *add, const char *mpath, bool *named,
                                  const char **what)
{
    const struct pulse_io *io = plog->io;
    const struct pulse_segment *first = refs[0]->seg;
    int err = 0;

    /* Readers holding the segments keep their descriptors (fdcache.h); a
     * reopen by path would find the merged file or nothing. Before the
     * first rename, so a failure here leaves nothing done. */
    *what = "retire";
    for (size_t k = 0; k < n; k++) {
        pulse_status_t st = pulse_segment_retire(refs[k]->seg);
        if (st != PULSE_OK) {
            unretire_first(refs, k); /* nothing changed: they stay listed */
            return st;
        }
    }
    *what = "rename";
    if (io->rename(io, add->data_temp, mpath) < 0) {
        err = merge_fail(who, "rename", mpath, errno);
        unretire_first(refs, n);
        goto out;
    }
    *named = true;
    *what = "directory fsync";
    if (io->fsync_dir(io, plog->dir) < 0) {
        err = merge_fail(who, "fsync directory", plog->dir, errno);
        goto out;
    }
    pulse_failpoint("compact_merge_after_marker");
    err = merge_unlink_rest(plog, who, refs, n, what);
    if (err != 0)
        goto out;
    *what = "rename";
    if (io->rename(io, add->index_temp, first->index_path) < 0) {
        err = merge_fail(who, "rename", first->index_path, errno);
        goto out;
    }
    pulse_failpoint("compact_merge_between_renames");
    if (io->rename(io, mpath, first->log_path) < 0) {
        err = merge_fail(who, "rename", first->log_path, errno);
        goto out;
    }
    pulse_failpoint("compact_merge_before_dir_fsync");
    *what = "directory fsync";
    if (io->fsync_dir(io, plog->dir) < 0)
        err = merge_fail(who, "fsync directory", plog->dir, errno);
out:
    return err == 0 ? PULSE_OK : pulse_status_from_errno(err);
}

/* A merge of the n segments refs, listed in a row from at (see "Crash
 * safety of a merge"); *renamed and *what as for replace_one. */
static pulse_status_t replace_many(struct pulse_plog *plog, const char *who,
                                   const struct pulse_plog_segref *const *refs, size_t at, size_t n,
                                   const struct pulse_plog_newseg *add, bool *renamed, const char **what)
{
    struct pulse_segment *nseg = NULL;
    int64_t first = refs[0]->seg->base;
    int64_t end = plog->segs[at + n]->base;
    char *mpath = pulse_segment_merge_path(plog->dir, first, end);
    pulse_status_t st;

    if (mpath == NULL)
        return PULSE_NOMEM;
    st = merge_files(plog, who, refs, n, add, mpath, renamed, what);
    if (st == PULSE_OK) {
        *what = "segment open";
        st = open_replacement(plog, first, add, end, &nseg);
    }
    if (st == PULSE_OK)
        list_replace(plog, at, refs, n, nseg);
    if (st != PULSE_OK && *renamed)
        PULSE_ERROR("%s %s: a merge failed at its %s; recovery completes it when the log is reopened", who, plog->dir,
                    *what);
    pulse_free(mpath);
    return st;
}

/* REPLACE under wlock: checks that the segments are listed in a row, then
 * rewrites or merges; fences after a failure that left files and list
 * apart. */
static pulse_status_t apply_replace(struct pulse_plog *plog, const struct pulse_plog_edit *edit,
                                    struct pulse_plog_edit_result *res)
{
    const char *what = "rename";
    size_t at = sealed_at(plog, edit->segs[0]->seg);
    pulse_status_t st;

    if (at == SIZE_MAX || at + edit->n >= plog->nsegs)
        return PULSE_BUSY;
    for (size_t k = 1; k < edit->n; k++)
        if (plog->segs[at + k] != edit->segs[k]->seg)
            return PULSE_BUSY;
    if (edit->n == 1)
        st = replace_one(plog, edit->who, edit->segs[0], at, edit->add, &res->temp_taken, &what);
    else
        st = replace_many(plog, edit->who, edit->segs, at, edit->n, edit->add, &res->temp_taken, &what);
    if (st != PULSE_OK && res->temp_taken)
        pulse_plog_fence(plog, edit->who, what);
    return st;
}

/* ---- applying ------------------------------------------------------------- */

static bool edit_valid(const struct pulse_plog_edit *edit)
{
    if (edit->who == NULL)
        return false;
    switch (edit->kind) {
    case PULSE_PLOG_EDIT_TRIM:
        return true;
    case PULSE_PLOG_EDIT_REMOVE:
        return edit->segs != NULL && edit->n > 0;
    case PULSE_PLOG_EDIT_REPLACE:
        return edit->segs != NULL && edit->n > 0 && edit->add != NULL && edit->add->index != NULL;
    }
    return false;
}

pulse_status_t pulse_plog_apply(struct pulse_plog *plog, const struct pulse_plog_edit *edit,
                                struct pulse_plog_edit_result *res)
{
    struct pulse_plog_edit_result r = {0, false};
    struct pulse_segment **gone = NULL;
    pulse_status_t st = PULSE_OK;

    if (!edit_valid(edit)) {
        st = PULSE_INVALID;
        goto out;
    }
    pthread_mutex_lock(&plog->wlock);
    if (atomic_load(&plog->fenced)) {
        st = PULSE_FENCED;
    } else if (edit->kind == PULSE_PLOG_EDIT_TRIM) {
        st = apply_trim(plog, edit->keep_from, &gone, &r.removed);
    } else if (edit->kind == PULSE_PLOG_EDIT_REMOVE) {
        for (size_t k = 0; k < edit->n && st == PULSE_OK; k++) {
            st = remove_one(plog, edit->who, edit->segs[k]->seg);
            r.removed += st == PULSE_OK;
        }
    } else {
        st = apply_replace(plog, edit, &r);
    }
    /* A removed or rewritten segment changes the snapshot's sealed records
     * (snapshot.h): rewrite it so the next start trusts the new files
     * without checking them entry by entry. Best effort, as after a trim:
     * a stale record only fails to match (recover.c). */
    if (st == PULSE_OK && edit->kind != PULSE_PLOG_EDIT_TRIM &&
        (r.removed > 0 || edit->kind == PULSE_PLOG_EDIT_REPLACE))
        (void)pulse_plog_snapshot_locked(plog);
    pthread_mutex_unlock(&plog->wlock);
    for (size_t i = 0; gone != NULL && i < r.removed; i++)
        pulse_segment_release(gone[i]);
    pulse_free(gone);
out:
    if (res != NULL)
        *res = r;
    return st;
}

pulse_status_t pulse_plog_sync_dir(struct pulse_plog *plog, const char *who)
{
    int err = fsync_dir(plog, who);

    if (err == 0)
        return PULSE_OK;
    pulse_plog_fence(plog, who, "directory fsync");
    return pulse_status_from_errno(err);
}

pulse_status_t pulse_plog_trim(struct pulse_plog *plog, int64_t keep_from, size_t *removed_out)
{
    struct pulse_plog_edit edit = {.kind = PULSE_PLOG_EDIT_TRIM, .who = "plog", .keep_from = keep_from};
    struct pulse_plog_edit_result res;
    pulse_status_t st = pulse_plog_apply(plog, &edit, &res);

    if (removed_out != NULL)
        *removed_out = res.removed;
    return st;
}
