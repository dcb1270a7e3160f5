/* SPDX-License-Identifier: MIT */
/*
 * segment.c - segment files, their sparse index file, and the scan that
 * rebuilds an index from the data for recovery, walking the file with the
 * one batch iterator of segscan.h (storage contract sections 2, 4, 7).
 *
 * Files are opened with O_CREAT and never O_TRUNC: reopening a log must never
 * lose its tail. Data is only ever written with pwrite at an explicit
 * position (plog.c); nothing here depends on a file position.
 *
 * The index file is a flat array of 8-byte entries. Entry i is written at
 * byte 8*i when the writer adds it, and flushed together with the data by
 * the log's sync, so an index on disk is at most a few entries behind its
 * data. It is only a hint: recovery checks every entry against the data it
 * points at and rewrites the file whole when it had to rebuild it.
 *
 * Every descriptor comes from the log's descriptor cache and is pinned only
 * while a function here (or its caller) uses it; see fdcache.h.
 */
#include "storage/segment.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/crc32c.h"
#include "common/debug.h"
#include "common/log.h"
#include "storage/batch.h"
#include "common/fsio.h"
#include "storage/plog.h"

char *pulse_segment_path(const char *dir, int64_t base, const char *ext)
{
    size_t need = strlen(dir) + 1 + 20 + 1 + strlen(ext) + 1;
    char *p = pulse_malloc(need);
    if (p == NULL)
        return NULL;
    snprintf(p, need, "%s/%020" PRId64 ".%s", dir, base, ext);
    return p;
}

/* "<20 digits>" at name: the number, or -1 when a character is not a
 * digit or the number passes INT64_MAX. */
static int64_t parse_digits(const char *name)
{
    uint64_t v = 0;

    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(name[i] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    return (int64_t)v;
}

bool pulse_segment_parse_file_name(const char *name, const char *ext, int64_t *base_out)
{
    size_t n = strlen(name);
    int64_t v;

    if (n != 20 + 1 + strlen(ext) || name[20] != '.' || strcmp(name + 21, ext) != 0)
        return false;
    v = parse_digits(name);
    if (v < 0)
        return false;
    *base_out = v;
    return true;
}

bool pulse_segment_parse_name(const char *name, int64_t *base_out)
{
    return pulse_segment_parse_file_name(name, "log", base_out);
}

#define MERGE_SUFFIX ".merge"
#define MERGE_NAME_LEN (20 + 1 + 20 + sizeof MERGE_SUFFIX - 1)

char *pulse_segment_merge_path(const char *dir, int64_t first, int64_t end)
{
    size_t need = strlen(dir) + MERGE_NAME_LEN + 2;
    char *s = pulse_malloc(need);

    if (s != NULL)
        snprintf(s, need, "%s/%020" PRId64 "-%020" PRId64 "%s", dir, first, end, MERGE_SUFFIX);
    return s;
}

bool pulse_segment_parse_merge_name(const char *name, int64_t *first_out, int64_t *end_out)
{
    int64_t first, end;

    if (strlen(name) != MERGE_NAME_LEN || name[20] != '-' || strcmp(name + 41, MERGE_SUFFIX) != 0)
        return false;
    first = parse_digits(name);
    end = parse_digits(name + 21);
    if (first < 0 || end <= first)
        return false;
    *first_out = first;
    *end_out = end;
    return true;
}

char *pulse_segment_temp_path(const char *dir, const char *who, int64_t base, const char *ext)
{
    size_t need = strlen(dir) + strlen(who) + strlen(ext) + 40;
    char *s = pulse_malloc(need);

    if (s != NULL)
        snprintf(s, need, "%s/.tmp-%s-%020" PRId64 ".%s.tmp", dir, who, base, ext);
    return s;
}

/* Opens path with O_CREAT (never O_TRUNC) and hands the descriptor to f. */
static pulse_status_t create_file(struct pulse_fdc_file *f, const struct pulse_io *io, const char *path)
{
    /* No O_TRUNC, ever: a reopened segment keeps every byte it had. */
    int fd = io->open(io, path, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd < 0) {
        int err = errno;
        PULSE_ERROR_RL("segment: open %s failed: %s", path, strerror(err));
        return pulse_status_from_errno(err);
    }
    pulse_fdc_adopt(f, fd);
    return PULSE_OK;
}

pulse_status_t pulse_segment_open(const struct pulse_io *io, struct pulse_fdcache *cache, const char *dir, int64_t base,
                                  bool create, struct pulse_segment **seg_out)
{
    struct pulse_segment *seg = NULL;
    pulse_status_t st = PULSE_OK;

    seg = pulse_calloc(1, sizeof *seg);
    if (seg == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    seg->io = io;
    seg->base = base;
    atomic_init(&seg->refs, 1);
    pthread_mutex_init(&seg->index_lock, NULL);
    pulse_index_init(&seg->index);
    atomic_init(&seg->size, 0);
    atomic_init(&seg->durable_size, 0);
    atomic_init(&seg->next_offset, base);
    atomic_init(&seg->max_ts, INT64_MIN);
    atomic_init(&seg->index_synced, 0);
    seg->log_path = pulse_segment_path(dir, base, "log");
    seg->index_path = pulse_segment_path(dir, base, "index");
    pulse_fdc_file_init(&seg->data, cache, io, seg->log_path);
    pulse_fdc_file_init(&seg->idx, cache, io, seg->index_path);
    if (seg->log_path == NULL || seg->index_path == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    if (create) {
        st = pulse_segment_create_files(seg);
        if (st != PULSE_OK)
            goto out;
    }
    *seg_out = seg;
    seg = NULL;
out:
    pulse_segment_release(seg);
    return st;
}

void pulse_segment_set_bounds(struct pulse_segment *seg, const struct pulse_segment_bounds *b)
{
    /* Offsets from the base within what the index's 32-bit relative
     * offsets address; the index's last entry within the data. */
    PULSE_ASSERT(b->next_offset >= seg->base && b->next_offset - seg->base <= (int64_t)UINT32_MAX);
    PULSE_ASSERT(b->since_entry == UINT64_MAX || b->since_entry <= b->size);
    seg->index_written = seg->index.n;
    atomic_store_explicit(&seg->index_synced, seg->index.n, memory_order_relaxed);
    atomic_store_explicit(&seg->size, b->size, memory_order_relaxed);
    atomic_store_explicit(&seg->durable_size, b->size, memory_order_relaxed);
    atomic_store_explicit(&seg->next_offset, b->next_offset, memory_order_relaxed);
    atomic_store_explicit(&seg->max_ts, b->max_ts, memory_order_relaxed);
    seg->since_entry = b->since_entry;
}

pulse_status_t pulse_segment_copy_index(struct pulse_segment *seg, const struct pulse_index *idx)
{
    pulse_status_t st = PULSE_OK;

    pthread_mutex_lock(&seg->index_lock);
    pulse_index_truncate(&seg->index, 0);
    for (size_t i = 0; i < idx->n && st == PULSE_OK; i++)
        st = pulse_index_append(&seg->index, idx->entries[i].rel_offset, idx->entries[i].rel_pos);
    if (st != PULSE_OK)
        pulse_index_truncate(&seg->index, 0);
    pthread_mutex_unlock(&seg->index_lock);
    return st;
}

pulse_status_t pulse_segment_create_files(struct pulse_segment *seg)
{
    pulse_status_t st = create_file(&seg->data, seg->io, seg->log_path);
    if (st == PULSE_OK)
        st = create_file(&seg->idx, seg->io, seg->index_path);
    return st;
}

pulse_status_t pulse_segment_pin(struct pulse_segment *seg, int *fd_out)
{
    return pulse_fdc_pin(&seg->data, fd_out);
}

void pulse_segment_unpin(struct pulse_segment *seg)
{
    pulse_fdc_unpin(&seg->data);
}

pulse_status_t pulse_segment_file_size(struct pulse_segment *seg, uint64_t *size_out)
{
    int fd;
    pulse_status_t st = pulse_segment_pin(seg, &fd);

    if (st != PULSE_OK)
        return st;
    if (seg->io->fsize(seg->io, fd, size_out) < 0) {
        int err = errno;
        PULSE_ERROR("segment: fstat %s failed: %s", seg->log_path, strerror(err));
        st = pulse_status_from_errno(err);
    }
    pulse_segment_unpin(seg);
    return st;
}

pulse_status_t pulse_segment_retire(struct pulse_segment *seg)
{
    pulse_status_t st = pulse_fdc_retire(&seg->data);
    /* Readers never need the index file: the table is in memory. */
    if (st == PULSE_OK)
        pulse_fdc_close_idle(&seg->idx);
    return st;
}

void pulse_segment_unretire(struct pulse_segment *seg)
{
    pulse_fdc_unretire(&seg->data);
}

void pulse_segment_close_files(struct pulse_segment *seg)
{
    pulse_fdc_close_idle(&seg->data);
    pulse_fdc_close_idle(&seg->idx);
}

void pulse_segment_close_index(struct pulse_segment *seg)
{
    pulse_fdc_close_idle(&seg->idx);
}

void pulse_segment_acquire(struct pulse_segment *seg)
{
    unsigned refs = atomic_fetch_add_explicit(&seg->refs, 1, memory_order_relaxed);
    PULSE_ASSERT(refs >= 1); /* only a holder of a reference may take another */
}

void pulse_segment_release(struct pulse_segment *seg)
{
    if (seg == NULL)
        return;
    unsigned refs = atomic_fetch_sub_explicit(&seg->refs, 1, memory_order_acq_rel);
    PULSE_ASSERT(refs >= 1);
    if (refs != 1)
        return;
    pulse_fdc_file_fini(&seg->data);
    pulse_fdc_file_fini(&seg->idx);
    pulse_index_fini(&seg->index);
    pthread_mutex_destroy(&seg->index_lock);
    pulse_free(seg->log_path);
    pulse_free(seg->index_path);
    pulse_free(seg);
}

pulse_status_t pulse_segment_index_add(struct pulse_segment *seg, uint32_t rel_offset, uint32_t rel_pos)
{
    struct pulse_index_entry e = {rel_offset, rel_pos};
    uint8_t raw[PULSE_INDEX_ENTRY_SIZE];
    size_t slot;
    int ifd;
    pulse_status_t st;

    st = pulse_fdc_pin(&seg->idx, &ifd);
    if (st != PULSE_OK)
        return st;
    pthread_mutex_lock(&seg->index_lock);
    st = pulse_index_append(&seg->index, rel_offset, rel_pos);
    slot = seg->index.n - 1;
    pthread_mutex_unlock(&seg->index_lock);
    if (st != PULSE_OK)
        goto out;
    pulse_index_encode_entry(&e, raw);
    if (pulse_io_pwrite_all(seg->io, ifd, raw, sizeof raw, (off_t)slot * PULSE_INDEX_ENTRY_SIZE, NULL) < 0) {
        int err = errno;
        PULSE_WARN_RL("segment: pwrite %s failed: %s", seg->index_path, strerror(err));
        /* Take the entry back: the table must not point at data the
         * caller is about to cut. A partial entry left in the file sits
         * past index_written, where the next entry overwrites it (and
         * recovery checks every entry anyway), so cutting it is tidiness. */
        pthread_mutex_lock(&seg->index_lock);
        pulse_index_truncate(&seg->index, slot);
        pthread_mutex_unlock(&seg->index_lock);
        (void)seg->io->ftruncate(seg->io, ifd, (off_t)slot * PULSE_INDEX_ENTRY_SIZE);
        st = pulse_status_from_errno(err);
        goto out;
    }
    seg->index_written = slot + 1;
    /* Unsynced bytes: the descriptor stays open until a sync covers them. */
    seg->idx_dirty_ticket = pulse_fdc_dirty(&seg->idx);
out:
    pulse_fdc_unpin(&seg->idx);
    return st;
}

/* The walk start of entry i of seg's table (entries [0, i] exist), or of
 * the segment's start for i == SIZE_MAX. Caller holds index_lock. */
static void start_at(const struct pulse_segment *seg, size_t i, struct pulse_segscan_start *out)
{
    const struct pulse_index *idx = &seg->index;

    *out = (struct pulse_segscan_start){0, seg->base, UINT64_MAX, INT64_MAX, false};
    if (i == SIZE_MAX)
        return;
    out->pos = idx->entries[i].rel_pos;
    out->base = seg->base + (int64_t)idx->entries[i].rel_offset;
    out->named = true;
    if (i + 1 < idx->n) {
        out->end = idx->entries[i + 1].rel_pos;
        out->limit = seg->base + (int64_t)idx->entries[i + 1].rel_offset;
    }
}

void pulse_segment_lookup(struct pulse_segment *seg, int64_t offset, struct pulse_segscan_start *out)
{
    int64_t rel = offset - seg->base;

    if (rel > (int64_t)UINT32_MAX)
        rel = UINT32_MAX;
    pthread_mutex_lock(&seg->index_lock);
    size_t k = rel >= 0 ? pulse_index_rank(&seg->index, (uint32_t)rel) : 0;
    start_at(seg, k - 1, out); /* k == 0: SIZE_MAX, the segment's start */
    pthread_mutex_unlock(&seg->index_lock);
}

void pulse_segment_entry_before(struct pulse_segment *seg, uint64_t pos, size_t back, struct pulse_segscan_start *out)
{
    pthread_mutex_lock(&seg->index_lock);
    size_t k = pulse_index_rank_pos(&seg->index, pos);
    start_at(seg, k > back ? k - 1 - back : SIZE_MAX, out);
    pthread_mutex_unlock(&seg->index_lock);
}

pulse_status_t pulse_segment_rewrite_index(struct pulse_segment *seg)
{
    uint8_t *raw = NULL;
    size_t n = seg->index.n;
    size_t len = 0;
    int ifd = -1;
    pulse_status_t st = PULSE_OK;

    st = pulse_fdc_pin(&seg->idx, &ifd);
    if (st != PULSE_OK)
        return st;
    raw = pulse_index_encode(&seg->index, &len);
    if (raw == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    /* Written in place rather than via rename: a crash halfway leaves an
     * index that fails validation, and recovery rebuilds it again. */
    if (pulse_io_pwrite_all(seg->io, ifd, raw, len, 0, NULL) < 0) {
        int err = errno;
        PULSE_ERROR("segment: pwrite %s failed: %s", seg->index_path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    if (seg->io->ftruncate(seg->io, ifd, (off_t)len) < 0) {
        int err = errno;
        PULSE_ERROR("segment: ftruncate %s failed: %s", seg->index_path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    if (seg->io->fdatasync(seg->io, ifd) < 0) {
        int err = errno;
        PULSE_ERROR("segment: fdatasync %s failed: %s", seg->index_path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    seg->index_written = n;
    atomic_store_explicit(&seg->index_synced, n, memory_order_release);
out:
    pulse_fdc_unpin(&seg->idx);
    pulse_free(raw);
    return st;
}

static int64_t batch_max_ts(const struct pulse_batch_header *hdr)
{
    return hdr->first_timestamp > hdr->last_timestamp ? hdr->first_timestamp : hdr->last_timestamp;
}

/* ---- time lookups (pulse_segment_time_seek) -------------------------- */

/* The header of the batch at pos, if one below bound parses. */
static pulse_status_t header_at(struct pulse_segment *seg, int fd, uint64_t pos, uint64_t bound,
                                struct pulse_batch_header *hdr)
{
    uint8_t raw[PULSE_BATCH_HEADER_SIZE];

    if (pos + PULSE_BATCH_HEADER_SIZE > bound)
        return PULSE_EOF;
    ssize_t got = pulse_io_pread_all(seg->io, fd, raw, sizeof raw, (off_t)pos);
    if (got < 0) {
        int err = errno;
        PULSE_ERROR("segment: pread %s at %" PRIu64 " failed: %s", seg->log_path, pos, strerror(err));
        return pulse_status_from_errno(err);
    }
    if ((size_t)got < sizeof raw || pulse_batch_parse_header(raw, (size_t)(bound - pos), hdr) != PULSE_OK)
        return PULSE_EOF; /* torn or damaged: the walk ends here */
    return PULSE_OK;
}

/* Entry i of seg's index (false past its end), read under index_lock. */
static bool entry_at(struct pulse_segment *seg, size_t i, struct pulse_index_entry *out)
{
    bool ok;

    pthread_mutex_lock(&seg->index_lock);
    ok = i < seg->index.n;
    if (ok)
        *out = seg->index.entries[i];
    pthread_mutex_unlock(&seg->index_lock);
    return ok;
}

/* The first index entry (of the first n) whose batch reaches ts, n when
 * none does: a binary search, one header read per probe. */
static pulse_status_t first_entry_reaching(struct pulse_segment *seg, int fd, int64_t ts, uint64_t bound, size_t n,
                                           size_t *out)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        struct pulse_index_entry e;
        struct pulse_batch_header hdr;
        pulse_status_t st = entry_at(seg, mid, &e) ? header_at(seg, fd, e.rel_pos, bound, &hdr) : PULSE_EOF;
        if (st != PULSE_OK && st != PULSE_EOF)
            return st;
        /* An entry past the durable bytes counts as reaching ts: the walk
         * from the one before it stops at the bound. */
        if (st == PULSE_EOF || batch_max_ts(&hdr) >= ts)
            hi = mid;
        else
            lo = mid + 1;
    }
    *out = lo;
    return PULSE_OK;
}

pulse_status_t pulse_segment_time_seek(struct pulse_segment *seg, int64_t ts, uint64_t bound, int64_t *base_out)
{
    struct pulse_index_entry e = {0, 0};
    size_t n, k = 0;
    int fd = -1;
    pulse_status_t st = pulse_segment_pin(seg, &fd);

    if (st != PULSE_OK)
        return st;
    pthread_mutex_lock(&seg->index_lock);
    n = seg->index.n;
    pthread_mutex_unlock(&seg->index_lock);
    st = first_entry_reaching(seg, fd, ts, bound, n, &k);
    if (st != PULSE_OK)
        goto out;
    /* The batch sought lies after the entry before k (whose batch does not
     * reach ts) and at or before entry k's. Entry 0, when there is one, is
     * at position 0; with no index, walk from the start. */
    if (k > 0 && !entry_at(seg, k - 1, &e))
        e = (struct pulse_index_entry){0, 0};
    for (uint64_t pos = k > 0 ? e.rel_pos : 0;;) {
        struct pulse_batch_header hdr;
        st = header_at(seg, fd, pos, bound, &hdr);
        if (st != PULSE_OK)
            goto out;
        if (batch_max_ts(&hdr) >= ts) {
            *base_out = hdr.base_offset;
            goto out;
        }
        pos += pulse_batch_total_size(&hdr);
    }
out:
    pulse_segment_unpin(seg);
    return st;
}

/* Pins seg's index file (until pulse_fdc_unpin) and gives its descriptor
 * and size. On failure nothing stays pinned: PULSE_NOFILE, PULSE_IO
 * (logged). */
static pulse_status_t pin_index(struct pulse_segment *seg, int *ifd_out, uint64_t *size_out)
{
    int ifd;
    pulse_status_t st = pulse_fdc_pin(&seg->idx, &ifd);

    if (st != PULSE_OK)
        return st;
    if (seg->io->fsize(seg->io, ifd, size_out) < 0) {
        int err = errno;
        PULSE_ERROR("segment: fstat %s failed: %s", seg->index_path, strerror(err));
        pulse_fdc_unpin(&seg->idx);
        return pulse_status_from_errno(err);
    }
    *ifd_out = ifd;
    return PULSE_OK;
}

/* Whether the header at pos (below file_size) names offset want; *hdr
 * gets it. A failed read is an error status. */
static pulse_status_t header_names(struct pulse_segment *seg, int fd, uint64_t pos, uint64_t file_size, int64_t want,
                                   struct pulse_batch_header *hdr, bool *ok_out)
{
    uint8_t hraw[PULSE_BATCH_HEADER_SIZE];
    ssize_t got;

    *ok_out = false;
    if (pos + PULSE_BATCH_HEADER_SIZE > file_size)
        return PULSE_OK;
    got = pulse_io_pread_all(seg->io, fd, hraw, sizeof hraw, (off_t)pos);
    if (got < 0) {
        int err = errno;
        PULSE_ERROR("segment: pread %s failed: %s", seg->log_path, strerror(err));
        return pulse_status_from_errno(err);
    }
    *ok_out = (size_t)got == sizeof hraw && pulse_batch_parse_header(hraw, file_size - pos, hdr) == PULSE_OK &&
              hdr->base_offset == want;
    return PULSE_OK;
}

pulse_status_t pulse_segment_load_index(struct pulse_segment *seg, uint64_t file_size, bool *clean_out,
                                        int64_t *max_ts_io, struct pulse_segment_trust *trust)
{
    uint8_t *raw = NULL;
    uint64_t isize = 0;
    bool clean = false;
    int64_t max_ts = *max_ts_io;
    int fd = -1, ifd = -1;
    pulse_status_t st = PULSE_OK;

    st = pin_index(seg, &ifd, &isize);
    if (st != PULSE_OK)
        return st;
    st = pulse_segment_pin(seg, &fd);
    if (st != PULSE_OK) {
        fd = -1;
        goto out;
    }
    /* An index can never need more than one entry per batch header of data. */
    if (isize > (file_size / PULSE_BATCH_HEADER_SIZE + 1) * PULSE_INDEX_ENTRY_SIZE)
        isize = (file_size / PULSE_BATCH_HEADER_SIZE + 1) * PULSE_INDEX_ENTRY_SIZE;
    raw = pulse_malloc(isize > 0 ? (size_t)isize : 1);
    if (raw == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    ssize_t got = pulse_io_pread_all(seg->io, ifd, raw, (size_t)isize, 0);
    if (got < 0) {
        int err = errno;
        PULSE_ERROR("segment: pread %s failed: %s", seg->index_path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    st = pulse_index_decode(&seg->index, raw, (size_t)got, &clean);
    if (st != PULSE_OK)
        goto out;
    {
        uint64_t full = 0;
        if (seg->io->fsize(seg->io, ifd, &full) == 0 && full != (uint64_t)got)
            clean = false;
    }
    /* The first batch of a segment always has an entry at position 0. Its
     * offset is 0 unless compaction removed the segment's first records
     * (then it is the first survivor's); the header check below verifies it
     * either way. */
    if (seg->index.n > 0 && seg->index.entries[0].rel_pos != 0) {
        pulse_index_truncate(&seg->index, 0);
        clean = false;
    }
    /* A prefix the snapshot vouches for (the bytes the checkpoint's table
     * encoded, of the same data file) needs no header read inside it: the
     * first and last of it are still checked, and the scan resumes at the
     * last one. */
    size_t skip_to = 0;
    if (trust != NULL && trust->n > 1 && seg->index.n >= trust->n &&
        pulse_crc32c(0, raw, (size_t)trust->n * PULSE_INDEX_ENTRY_SIZE) == trust->crc) {
        skip_to = trust->n - 1;
        trust->used = true;
    }
    /* Every entry must point at a batch header carrying its offset: this is
     * what catches an index left over from before a compaction or pointing
     * into the middle of a batch. */
    for (size_t i = 0; i < seg->index.n; i++) {
        const struct pulse_index_entry *e = &seg->index.entries[i];
        struct pulse_batch_header hdr;
        bool ok = false;

        if (i > 0 && i < skip_to)
            continue;
        st = header_names(seg, fd, e->rel_pos, file_size, seg->base + (int64_t)e->rel_offset, &hdr, &ok);
        if (st != PULSE_OK)
            goto out;
        if (!ok && i > 0 && i <= skip_to) {
            /* The vouched prefix does not hold here: check all of it. */
            skip_to = 0;
            trust->used = false;
            i = 0; /* entry 0 passed; resume at 1 */
            continue;
        }
        if (!ok) {
            pulse_index_truncate(&seg->index, i);
            clean = false;
            break;
        }
        if (batch_max_ts(&hdr) > max_ts)
            max_ts = batch_max_ts(&hdr);
    }
    /* The batches inside the vouched prefix were not read: their newest
     * timestamp is the snapshot's (records may carry timestamps out of
     * order, so the ends alone do not give it). */
    if (trust != NULL && trust->used && trust->max_ts > max_ts)
        max_ts = trust->max_ts;
    *clean_out = clean;
    *max_ts_io = max_ts;
out:
    if (fd >= 0)
        pulse_segment_unpin(seg);
    pulse_fdc_unpin(&seg->idx);
    pulse_free(raw);
    return st;
}

/* ---- the snapshot's record of a sealed segment -------------------------- */

static int64_t mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + (int64_t)st->st_mtim.tv_nsec;
}

pulse_status_t pulse_segment_describe(struct pulse_segment *seg, struct pulse_snapshot_seal *out)
{
    struct pulse_file_id id;
    struct stat sb;
    uint8_t *raw;
    size_t len = 0;
    int fd;
    pulse_status_t st = pulse_segment_pin(seg, &fd);

    if (st != PULSE_OK)
        return st;
    if (seg->io->file_id(seg->io, fd, &id) < 0 || seg->io->stat(seg->io, seg->log_path, false, &sb) < 0) {
        int err = errno;
        pulse_segment_unpin(seg);
        PULSE_WARN("segment: cannot describe %s for the snapshot: %s", seg->log_path, strerror(err));
        return err == ENOENT ? PULSE_BUSY : pulse_status_from_errno(err);
    }
    pulse_segment_unpin(seg);
    /* Another file under the path (a swap in progress), or not the bytes
     * this segment holds: no record. */
    if ((uint64_t)sb.st_ino != id.ino || (uint64_t)sb.st_dev != id.dev ||
        (uint64_t)sb.st_size != atomic_load(&seg->size))
        return PULSE_BUSY;
    pthread_mutex_lock(&seg->index_lock);
    raw = pulse_index_encode(&seg->index, &len);
    pthread_mutex_unlock(&seg->index_lock);
    if (raw == NULL)
        return PULSE_NOMEM;
    *out = (struct pulse_snapshot_seal){
        .base = seg->base,
        .next = atomic_load(&seg->next_offset),
        .log_size = (uint64_t)sb.st_size,
        .log_ino = id.ino,
        .log_mtime_ns = mtime_ns(&sb),
        .max_ts = atomic_load(&seg->max_ts),
        .index_size = (uint32_t)len,
        .index_crc = pulse_crc32c(0, raw, len),
    };
    pulse_free(raw);
    return len > UINT32_MAX ? PULSE_BUSY : PULSE_OK;
}

/* Reads the whole index file of seg when it is want bytes long: *raw_out
 * (pulse_free) or NULL when its size differs. */
static pulse_status_t read_index_file(struct pulse_segment *seg, uint32_t want, uint8_t **raw_out)
{
    uint64_t isize = 0;
    uint8_t *raw = NULL;
    int ifd;
    pulse_status_t st = pin_index(seg, &ifd, &isize);

    *raw_out = NULL;
    if (st != PULSE_OK)
        return st;
    if (isize != want)
        goto out;
    raw = pulse_malloc(want > 0 ? want : 1);
    if (raw == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    ssize_t got = pulse_io_pread_all(seg->io, ifd, raw, want, 0);
    if (got < 0) {
        int err = errno;
        PULSE_ERROR("segment: pread %s failed: %s", seg->index_path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    if ((size_t)got == want) {
        *raw_out = raw;
        raw = NULL;
    }
out:
    pulse_fdc_unpin(&seg->idx);
    pulse_free(raw);
    return st;
}

/* The headers at the first and last entries of seg's table name their
 * offsets inside a file of size bytes. */
static pulse_status_t ends_check_out(struct pulse_segment *seg, uint64_t size, bool *ok_out)
{
    const struct pulse_index_entry *e[2] = {&seg->index.entries[0], &seg->index.entries[seg->index.n - 1]};
    struct pulse_batch_header hdr;
    int fd;
    pulse_status_t st = pulse_segment_pin(seg, &fd);

    *ok_out = false;
    if (st != PULSE_OK)
        return st;
    for (int k = 0; k < 2; k++) {
        st = header_names(seg, fd, e[k]->rel_pos, size, seg->base + (int64_t)e[k]->rel_offset, &hdr, ok_out);
        if (st != PULSE_OK || !*ok_out)
            break;
    }
    pulse_segment_unpin(seg);
    return st;
}

pulse_status_t pulse_segment_restore_sealed(struct pulse_segment *seg, const struct pulse_snapshot_seal *seal,
                                            bool *ok_out)
{
    struct stat sb;
    uint8_t *raw = NULL;
    bool clean = false;
    pulse_status_t st;

    *ok_out = false;
    if (seg->io->stat(seg->io, seg->log_path, false, &sb) < 0 || (uint64_t)sb.st_size != seal->log_size ||
        (uint64_t)sb.st_ino != seal->log_ino || mtime_ns(&sb) != seal->log_mtime_ns || seal->index_size == 0)
        return PULSE_OK;
    st = read_index_file(seg, seal->index_size, &raw);
    if (st != PULSE_OK || raw == NULL || pulse_crc32c(0, raw, seal->index_size) != seal->index_crc)
        goto out;
    st = pulse_index_decode(&seg->index, raw, seal->index_size, &clean);
    if (st != PULSE_OK || !clean || seg->index.entries[0].rel_pos != 0)
        goto out;
    st = ends_check_out(seg, seal->log_size, ok_out);
out:
    if (!*ok_out)
        pulse_index_truncate(&seg->index, 0);
    pulse_free(raw);
    return st;
}

/* A new entry at the end of out->flaws, or NULL when out of memory. */
static struct pulse_segment_flaw *push_flaw(struct pulse_segment_scan *out, size_t *cap)
{
    if (out->nflaws == *cap) {
        size_t ncap = *cap == 0 ? 4 : *cap * 2;
        struct pulse_segment_flaw *nf = pulse_realloc(out->flaws, ncap * sizeof *nf);
        if (nf == NULL)
            return NULL;
        out->flaws = nf;
        *cap = ncap;
    }
    return &out->flaws[out->nflaws++];
}

/* Records a damaged range [it->pos, it->end) in out->flaws or the tail. */
static pulse_status_t note_flaw(struct pulse_segment_scan *out, size_t *cap, const struct pulse_segscan_item *it)
{
    struct pulse_segment_flaw *f;

    if (it->tail) {
        f = &out->tail_flaw;
        out->tail = true;
        out->tail_unresolved = it->unresolved;
    } else {
        f = push_flaw(out, cap);
        if (f == NULL)
            return PULSE_NOMEM;
    }
    f->pos = it->pos;
    f->end = it->end;
    f->from = it->from;
    f->to = it->tail ? it->from : it->next_base;
    f->torn = it->torn;
    memcpy(f->problem, it->problem, sizeof f->problem);
    return PULSE_OK;
}

/* Records the offsets a valid batch at it->pos skips over in a contiguous
 * log, [expect, its base), as a range without bytes: they were handed out
 * (the batch was numbered after them) but nothing holds them. */
static pulse_status_t note_gap(struct pulse_segment_scan *out, size_t *cap, const struct pulse_segscan_item *it,
                               int64_t expect)
{
    struct pulse_segment_flaw *f = push_flaw(out, cap);

    if (f == NULL)
        return PULSE_NOMEM;
    memset(f, 0, sizeof *f);
    f->pos = f->end = it->pos;
    f->from = expect;
    f->to = it->hdr.base_offset;
    snprintf(f->problem, sizeof f->problem,
             "batch base offset %" PRId64 " does not follow the previous offset %" PRId64 " in a contiguous log",
             it->hdr.base_offset, expect - 1);
    return PULSE_OK;
}

pulse_status_t pulse_segment_scan(struct pulse_segment *seg, uint64_t pos, int64_t expect_offset, int64_t limit_offset,
                                  uint64_t file_size, uint32_t interval, uint64_t since_entry, int64_t max_ts,
                                  const struct pulse_damage *hints, size_t nhints, bool contiguous,
                                  struct pulse_segment_scan *out)
{
    struct pulse_segscan sc;
    struct pulse_segscan_item it;
    size_t cap = 0;
    pulse_status_t st = PULSE_OK;

    int fd;

    memset(out, 0, sizeof *out);
    out->end_pos = pos;
    out->next_offset = expect_offset;
    st = pulse_segment_pin(seg, &fd);
    if (st != PULSE_OK)
        return st;
    pulse_segscan_init(&sc, seg->io, fd, seg->log_path, seg->base, file_size, pos, expect_offset, limit_offset, 0);
    pulse_segscan_set_hints(&sc, hints, nhints);
    for (;;) {
        st = pulse_segscan_next(&sc, &it);
        if (st != PULSE_OK || it.kind == PULSE_SEGSCAN_END)
            break;
        if (it.kind == PULSE_SEGSCAN_DAMAGE) {
            st = note_flaw(out, &cap, &it);
            if (st != PULSE_OK || it.tail)
                break;
            /* The range owns its offsets: what follows starts after it. */
            out->end_pos = it.end;
            out->next_offset = it.next_base;
            /* Readers looking up an offset after the damage should land
             * past it: the first valid batch gets an entry. */
            since_entry = UINT64_MAX;
            continue;
        }
        if (contiguous && it.hdr.base_offset > out->next_offset) {
            st = note_gap(out, &cap, &it, out->next_offset);
            if (st != PULSE_OK)
                break;
            since_entry = UINT64_MAX; /* as after damage */
        }
        if (seg->index.n == 0 || since_entry >= interval) {
            pthread_mutex_lock(&seg->index_lock);
            st = pulse_index_append(&seg->index, (uint32_t)(it.hdr.base_offset - seg->base), (uint32_t)it.pos);
            pthread_mutex_unlock(&seg->index_lock);
            if (st != PULSE_OK)
                break;
            since_entry = 0;
        }
        since_entry += it.end - it.pos;
        if (batch_max_ts(&it.hdr) > max_ts)
            max_ts = batch_max_ts(&it.hdr);
        out->end_pos = it.end;
        out->next_offset = it.last_offset + 1;
    }
    pulse_segscan_fini(&sc);
    pulse_segment_unpin(seg);
    if (st != PULSE_OK) {
        pulse_free(out->flaws);
        memset(out, 0, sizeof *out);
        return st;
    }
    out->max_ts = max_ts;
    out->since_entry = since_entry;
    return PULSE_OK;
}

pulse_status_t pulse_segment_index_claim(struct pulse_segment *seg, uint64_t file_size, uint64_t end_pos,
                                         int64_t next_offset, int64_t *claim_out)
{
    uint8_t raw[PULSE_INDEX_ENTRY_SIZE];
    uint8_t hraw[PULSE_BATCH_HEADER_SIZE];
    struct pulse_index_entry e;
    struct pulse_batch_header hdr;
    uint64_t isize = 0;
    int64_t claim = next_offset;
    int ifd = -1, fd = -1;
    ssize_t got = 0;
    pulse_status_t st;

    st = pin_index(seg, &ifd, &isize);
    if (st != PULSE_OK)
        return st;
    if (isize >= PULSE_INDEX_ENTRY_SIZE)
        got = pulse_io_pread_all(seg->io, ifd, raw, sizeof raw,
                                 (off_t)(isize / PULSE_INDEX_ENTRY_SIZE - 1) * PULSE_INDEX_ENTRY_SIZE);
    if (got < 0) {
        int err = errno;
        PULSE_ERROR("segment: pread %s failed: %s", seg->index_path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    if ((size_t)got < sizeof raw)
        goto out;
    pulse_index_decode_entry(raw, &e);
    int64_t base = seg->base + (int64_t)e.rel_offset;
    uint64_t epos = e.rel_pos;
    /* An entry inside the surviving data says nothing new. One pointing
     * at or past the end of the file names a batch none of whose bytes
     * reached it: never durable nor visible, so its offsets may go to the
     * next appends (and an entry damaged into a large position claims
     * nothing). One whose offset the bytes between could not have held is
     * itself damaged. */
    if (epos < end_pos || epos >= file_size || base < next_offset ||
        (uint64_t)(base - next_offset) > (epos - end_pos) / PULSE_RECORD_MIN_SIZE)
        goto out;
    claim = base + 1;
    if (epos + PULSE_BATCH_HEADER_SIZE > file_size || pulse_segment_pin(seg, &fd) != PULSE_OK) {
        fd = -1;
        goto out;
    }
    /* The record count of a header still there that names the entry's
     * offset: whole (its batch fits in the file) or torn by the crash (it
     * runs past the end, which is how a cut-off write looks). The codec's
     * header check bounds the count by the batch length it claims. */
    if (pulse_io_pread_all(seg->io, fd, hraw, sizeof hraw, (off_t)epos) == (ssize_t)sizeof hraw &&
        pulse_batch_parse_header(hraw, (size_t)(file_size - epos), &hdr) != PULSE_CORRUPT && hdr.base_offset == base)
        claim = base + (int64_t)hdr.record_count;
out:
    if (fd >= 0)
        pulse_segment_unpin(seg);
    pulse_fdc_unpin(&seg->idx);
    if (st == PULSE_OK)
        *claim_out = claim;
    return st;
}

pulse_status_t pulse_segment_orphan_claim(const struct pulse_io *io, const char *dir, int64_t base, bool contiguous,
                                          int64_t *claim_out)
{
    char *path = pulse_segment_path(dir, base, "index");
    uint8_t raw[2 * PULSE_INDEX_ENTRY_SIZE];
    struct pulse_index_entry prev = {0, 0}, last;
    uint64_t isize = 0;
    int64_t claim = base;
    int fd = -1;
    pulse_status_t st = PULSE_OK;

    if (path == NULL)
        return PULSE_NOMEM;
    fd = io->open(io, path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0 || io->fsize(io, fd, &isize) < 0) {
        int err = errno;
        PULSE_ERROR("segment: cannot read %s: %s", path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    isize -= isize % PULSE_INDEX_ENTRY_SIZE;
    if (isize == 0)
        goto out;
    size_t want = isize >= sizeof raw ? sizeof raw : PULSE_INDEX_ENTRY_SIZE;
    if (pulse_io_pread_all(io, fd, raw, want, (off_t)(isize - want)) != (ssize_t)want) {
        int err = errno;
        PULSE_ERROR("segment: pread %s failed: %s", path, strerror(err));
        st = PULSE_IO;
        goto out;
    }
    pulse_index_decode_entry(raw + want - PULSE_INDEX_ENTRY_SIZE, &last);
    if (want == sizeof raw)
        pulse_index_decode_entry(raw, &prev);
    /* Entries grow in both fields, a position fits a segment, and in a
     * contiguous log the records between two entries need at least their
     * minimum size each: an entry damaged itself claims nothing. */
    bool plausible = last.rel_pos < PULSE_PLOG_MAX_SEGMENT_BYTES &&
                     (want == PULSE_INDEX_ENTRY_SIZE ||
                      (last.rel_offset > prev.rel_offset && last.rel_pos > prev.rel_pos));
    if (plausible && contiguous)
        plausible = last.rel_offset - prev.rel_offset <= (last.rel_pos - prev.rel_pos) / PULSE_RECORD_MIN_SIZE;
    if (plausible)
        claim = base + (int64_t)last.rel_offset + 1;
out:
    if (fd >= 0)
        io->close(io, fd);
    pulse_free(path);
    if (st == PULSE_OK)
        *claim_out = claim;
    return st;
}
