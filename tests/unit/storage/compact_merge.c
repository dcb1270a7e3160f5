/* SPDX-License-Identifier: MIT */
/*
 * compact_merge.c - part of check_compact: small segments: grouping and
 * merging, byte and time budgets, the index's offset span, readers in a
 * merged-away segment, failed directory syncs and renames of a commit.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/log.h"
#include "storage/batch.h"
#include "storage/compact.h"
#include "common/fsio.h"
#include "storage/index.h"
#include "storage/plog.h"
#include "storage/plog_edit.h"
#include "storage/segment.h"

#include "compacttest.h"
#include "compactcases.h"

/* ---- small segments: grouping, merging, budgets ------------------------ */

/* Opens dir with segments of seg_bytes in interval sync mode (no fdatasync
 * per append: the churn tests append thousands of records); the caller
 * syncs before each pass, which maps only the durable log. */
static struct pulse_plog *open_fast(const char *dir, uint64_t seg_bytes, const struct pulse_io *io)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pulse_plog_config_init(&cfg);
    cfg.segment_max_bytes = seg_bytes;
    cfg.index_interval_bytes = 256;
    cfg.sync_mode = PULSE_SYNC_INTERVAL;
    cfg.sync_interval_ms = 3600u * 1000u;
    cfg.io = io;
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    return plog;
}

static void sealed_stats(struct pulse_plog *plog, size_t *n_out, uint64_t *bytes_out, uint64_t *max_out)
{
    struct pulse_segment_info *segs = NULL;
    size_t n = 0;
    uint64_t bytes = 0, max = 0;
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    for (size_t i = 0; i + 1 < n; i++) {
        bytes += segs[i].size_bytes;
        if (segs[i].size_bytes > max)
            max = segs[i].size_bytes;
    }
    pulse_free(segs);
    *n_out = n - 1;
    *bytes_out = bytes;
    if (max_out != NULL)
        *max_out = max;
}

/* Encoded size of the record ct_append writes for key (>= 0) at offset,
 * with pad filler bytes: what it costs inside a rewritten batch. */
static uint64_t ct_record_bytes(int key, int64_t offset, size_t pad)
{
    char k[32], v[32];
    int kl = snprintf(k, sizeof k, "key-%d", key);
    int vl = snprintf(v, sizeof v, "o%" PRId64, offset);
    return 4 + 1 + 4 + 4 + 4 + (uint64_t)kl + 4 + (uint64_t)vl + pad + 4;
}

/* Asserts that every keyed record of the sealed segments is the newest of
 * its key: a pass over everything left nothing stale behind. */
static void sealed_holds_only_newest(struct pulse_plog *plog, const int64_t *newest)
{
    struct pulse_segment_info active;
    struct ct_reads rs;

    active_info(plog, &active);
    ct_read_all(plog, pulse_plog_log_start(plog), &rs);
    for (size_t i = 0; i < rs.n && rs.r[i].offset < active.base_offset; i++)
        if (rs.r[i].key >= 0)
            ck_assert_int_eq(rs.r[i].offset, newest[rs.r[i].key]);
    ct_reads_free(&rs);
}

/*
 * The issue this answers: with 4 KiB segments a compacted topic grew to
 * thousands of segments, because a pass looked at 4 segments and never
 * merged what survived. Under key churn (200 keys rewritten at random, a
 * pass after every 16 segments' worth of appends) every pass must leave
 * the sealed part holding nothing but the newest record of each key, in at
 * most 2 * ceil(live bytes / segment size) + 1 segments: whole segments are
 * grouped in order, so two neighbours that stay apart hold more than one
 * segment together (next-fit packing: optimal for groups of adjacent whole
 * segments, but it can leave bins part full). A segment with nothing to
 * drop keeps its batches, up to one header per record: hence the factor 2
 * on the live bytes. The figures are printed.
 */
static void churn_converges(uint64_t seg)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = open_fast(dir, seg, NULL);
    struct ct_model m = {0};
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    const int nkeys = 200;
    const size_t pad = 30;
    uint64_t written = 0, next_pass = 16 * seg;
    size_t nsealed = 0, peak = 0;
    uint64_t sealed_bytes = 0, max_size = 0, live = 0;
    int64_t *newest = pulse_calloc((size_t)nkeys, sizeof *newest);
    unsigned rs = 12345;

    ck_assert_ptr_nonnull(newest);
    for (int k = 0; k < nkeys; k++)
        newest[k] = -1;
    ct_cfg(&cfg);
    cfg.max_pass_ms = 0;
    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    while (written < 256 * seg) {
        int key = (int)(rand_r(&rs) % (unsigned)nkeys);
        int64_t off = ct_append(plog, &m, key, false, CT_T0, pad);
        if (newest[key] >= 0)
            live -= ct_record_bytes(key, newest[key], pad);
        newest[key] = off;
        live += ct_record_bytes(key, off, pad);
        written += PULSE_BATCH_HEADER_SIZE + ct_record_bytes(key, off, pad);
        if (written >= next_pass) {
            struct pulse_compact_result res;
            next_pass += 16 * seg;
            ck_assert_int_eq(pulse_plog_sync(plog), PULSE_OK);
            ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, CT_T0, &res), PULSE_OK);
            ck_assert(!res.budget_reached);
            sealed_stats(plog, &nsealed, &sealed_bytes, &max_size);
            sealed_holds_only_newest(plog, newest);
            ck_assert_uint_le(sealed_bytes, 2 * live);
            ck_assert_uint_le(nsealed, 2 * ((sealed_bytes + seg - 1) / seg) + 1);
            ck_assert_uint_le(max_size, seg);
            if (nsealed > peak)
                peak = nsealed;
        }
    }
    ck_assert_int_eq(pulse_plog_sync(plog), PULSE_OK);
    ck_assert_int_lt(converge(comp, plog, &cfg, CT_T0, 10), 10);
    ct_check_model(plog, &m, nkeys);
    sealed_stats(plog, &nsealed, &sealed_bytes, NULL);
    fprintf(stderr,
            "churn with %" PRIu64 "-byte segments: %" PRIu64 " segments' worth appended, at most %zu sealed "
            "after a pass, %zu sealed (%" PRIu64 " bytes) at the end for %" PRIu64 " live bytes\n",
            seg, written / seg, peak, nsealed, sealed_bytes, live);
    sealed_holds_only_newest(plog, newest);
    ck_assert_uint_le(sealed_bytes, 2 * live);
    ck_assert_uint_le(nsealed, 2 * ((sealed_bytes + seg - 1) / seg) + 1);
    /* A restart agrees. */
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = ct_open(dir, seg);
    ct_check_model(plog, &m, nkeys);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pulse_free(newest);
    ct_model_free(&m);
    pt_cleanup(dir);
}

START_TEST(test_tiny_segments_under_key_churn_stay_close_to_the_live_size)
{
    churn_converges(1024);
    churn_converges(4096);
}
END_TEST

/* Sealed segments that each keep one large unique record and drop three
 * small superseded ones (the active segment holds the newest keys): every
 * one is rewritten alone, none can merge. Returns how many are sealed. */
static size_t build_unmergeable(struct pulse_plog *plog, struct ct_model *m, int nsegs)
{
    size_t nsealed = 0;
    uint64_t bytes = 0;
    for (int s = 0; s < nsegs; s++) {
        ct_append(plog, m, -1, false, CT_T0, 600);
        for (int k = 0; k < 3; k++)
            ct_append(plog, m, k, false, CT_T0, 0);
    }
    for (int k = 0; k < 3; k++)
        ct_append(plog, m, k, false, CT_T0, 0);
    sealed_stats(plog, &nsealed, &bytes, NULL);
    return nsealed;
}

/* Copies every sealed segment file's bytes, oldest first. */
static void snapshot_files(const char *dir, struct pulse_plog *plog, uint8_t **bufs, size_t *lens, int64_t *bases,
                           size_t n)
{
    struct pulse_segment_info *segs = NULL;
    size_t got = 0;
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &got), PULSE_OK);
    ck_assert_uint_eq(got, n + 1);
    for (size_t i = 0; i < n; i++) {
        pulse_free(bufs[i]);
        bases[i] = segs[i].base_offset;
        bufs[i] = file_bytes(dir, bases[i], &lens[i]);
    }
    pulse_free(segs);
}

static bool file_same(const char *dir, int64_t base, const uint8_t *buf, size_t len)
{
    size_t l = 0;
    uint8_t *now = file_bytes(dir, base, &l);
    bool same = l == len && memcmp(now, buf, len) == 0;
    pulse_free(now);
    return same;
}

START_TEST(test_pass_stops_at_its_byte_budget_and_the_next_continues)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;
    uint8_t *bufs[16] = {0};
    size_t lens[16], n, done = 0;
    int64_t bases[16];

    n = build_unmergeable(plog, &m, 12);
    ck_assert_uint_ge(n, 9);
    ck_assert_uint_le(n, 16);
    snapshot_files(dir, plog, bufs, lens, bases, n);
    ct_cfg(&cfg);
    cfg.max_bytes_per_pass = 3 * SEG; /* each sealed segment is between SEG/2 and SEG */
    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    while (done < n) {
        ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, CT_T0, &res), PULSE_OK);
        ck_assert_uint_le(res.bytes_before, cfg.max_bytes_per_pass);
        ck_assert_uint_ge(res.segments_scanned, 3);
        ck_assert_uint_le(res.segments_scanned, 5);
        ck_assert_uint_eq(res.segments_rewritten, res.segments_scanned);
        ck_assert(res.budget_reached == (done + res.segments_scanned < n));
        /* This pass rewrote exactly the segments after the previous one's
         * and left every other file as it was. */
        for (size_t i = 0; i < n; i++) {
            bool in_window = i >= done && i < done + res.segments_scanned;
            ck_assert_msg(file_same(dir, bases[i], bufs[i], lens[i]) != in_window, "segment %zu", i);
        }
        done += res.segments_scanned;
        snapshot_files(dir, plog, bufs, lens, bases, n);
        ct_check_model(plog, &m, 3);
    }
    ck_assert_uint_eq(done, n);
    /* A whole cycle is done: the next pass finds nothing to do. */
    ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_rewritten + res.segments_deleted + res.segments_merged, 0);
    for (size_t i = 0; i < n; i++)
        pulse_free(bufs[i]);
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

/* A posix io whose fdatasync takes 20 ms while armed: a pass that commits
 * anything takes at least that long. */
static atomic_bool slow_armed;
static struct pulse_io slow;

static int slow_fdatasync(const struct pulse_io *io, int fd)
{
    const struct pulse_io *posix = pulse_io_posix();
    (void)io;
    if (atomic_load(&slow_armed)) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return posix->fdatasync(posix, fd);
}

START_TEST(test_pass_stops_at_its_time_budget_and_the_next_continues)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog;
    struct ct_model m = {0};
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;
    size_t n, done = 0;
    int passes = 0;

    slow = *pulse_io_posix();
    slow.fdatasync = slow_fdatasync;
    plog = ct_open_io(dir, SEG, &slow);
    n = build_unmergeable(plog, &m, 8);
    ct_cfg(&cfg);
    cfg.max_pass_ms = 5;
    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    atomic_store(&slow_armed, true);
    /* The first commit alone outlasts the budget: no pass gets further
     * than the segment after it. */
    while (done < n) {
        ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, CT_T0, &res), PULSE_OK);
        ck_assert_uint_ge(res.segments_scanned, 1);
        ck_assert_uint_le(res.segments_scanned, 2);
        ck_assert(res.budget_reached == (done + res.segments_scanned < n));
        done += res.segments_scanned;
        passes++;
    }
    atomic_store(&slow_armed, false);
    ck_assert_int_ge(passes, (int)(n + 1) / 2);
    ct_check_model(plog, &m, 3);
    {
        size_t nsealed;
        uint64_t bytes;
        sealed_stats(plog, &nsealed, &bytes, NULL);
        ck_assert_uint_eq(nsealed, n); /* each rewritten, none merged */
    }
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_adjacent_small_segments_merge_into_the_first_ones_file)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;
    struct pulse_plog_recovery rec;
    struct pulse_plog_config pcfg;
    struct pulse_segment_info *segs = NULL;
    size_t n = 0, nsealed = 0;
    uint64_t bytes = 0, max = 0;
    char path[512];

    /* Ten rounds of one small keyless record and four keyed ones that the
     * active segment supersedes: only the keyless records survive, and
     * they fit one segment. */
    for (int s = 0; s < 10; s++) {
        ct_append(plog, &m, -1, false, CT_T0, 10);
        for (int k = 0; k < 4; k++)
            ct_append(plog, &m, k, false, CT_T0, 150);
    }
    for (int k = 0; k < 4; k++)
        ct_append(plog, &m, k, false, CT_T0, 0);
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    ck_assert_uint_ge(n, 11);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_rewritten, 1);
    ck_assert_uint_ge(res.segments_merged, 5);
    /* Segments that held no keyless record were deleted outright. */
    ck_assert_uint_eq(res.segments_merged + res.segments_deleted, n - 2);
    sealed_stats(plog, &nsealed, &bytes, &max);
    ck_assert_uint_eq(nsealed, 1);
    ck_assert_uint_le(max, SEG);
    /* The merged file carries the first segment's name; the others are
     * gone, and so is every temp and merge file. */
    ck_assert_int_eq(pulse_plog_log_start(plog), segs[0].base_offset);
    for (size_t i = 0; i + 1 < n; i++) {
        snprintf(path, sizeof path, "%s/%020" PRId64 ".log", dir, segs[i].base_offset);
        ck_assert_int_eq(access(path, F_OK) == 0, i == 0);
        snprintf(path, sizeof path, "%s/%020" PRId64 ".index", dir, segs[i].base_offset);
        ck_assert_int_eq(access(path, F_OK) == 0, i == 0);
    }
    ck_assert_int_eq(ct_count_files(dir, ".tmp-"), 0);
    ct_check_model(plog, &m, 4);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* A full scan (no snapshot) finds the merged index exact and nothing
     * out of range. */
    snprintf(path, sizeof path, "%s/snapshot", dir);
    ck_assert_int_eq(unlink(path), 0);
    pulse_plog_config_init(&pcfg);
    pcfg.segment_max_bytes = SEG;
    pcfg.index_interval_bytes = 256;
    ck_assert_int_eq(pulse_plog_open(dir, &pcfg, &plog, &rec), PULSE_OK);
    ck_assert_uint_eq(rec.indexes_rebuilt, 0);
    ck_assert_uint_eq(rec.corrupt_segments, 0);
    ck_assert_uint_eq(rec.segments, 2);
    ct_check_model(plog, &m, 4);
    ck_assert_int_eq(ct_append(plog, NULL, 0, false, CT_T0, 0), m.recs[m.n - 1].offset + 1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pulse_free(segs);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

/* Writes a segment data file holding one batch of n keyed records at
 * offsets base.. (keys[i], value "o<offset>"). */
static void write_segment_file(const char *dir, int64_t base, const int *keys, size_t n)
{
    struct pulse_record_in recs[8];
    char kb[8][16], vb[8][32];
    struct pulse_buf b;
    char path[512];
    FILE *f;

    ck_assert_uint_le(n, 8);
    memset(recs, 0, sizeof recs);
    for (size_t i = 0; i < n; i++) {
        int kl = snprintf(kb[i], sizeof kb[i], "key-%d", keys[i]);
        int vl = snprintf(vb[i], sizeof vb[i], "o%" PRId64, base + (int64_t)i);
        recs[i].timestamp = CT_T0;
        recs[i].key = (const uint8_t *)kb[i];
        recs[i].key_len = (uint32_t)kl;
        recs[i].value = (const uint8_t *)vb[i];
        recs[i].value_len = (uint32_t)vl;
    }
    pulse_buf_init(&b, 1 << 20);
    ck_assert_int_eq(pulse_batch_encode(&b, base, 0, recs, n), PULSE_OK);
    snprintf(path, sizeof path, "%s/%020" PRId64 ".log", dir, base);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b.data, 1, b.len, f), b.len);
    fclose(f);
    pulse_buf_fini(&b);
}

/* Three tiny segments, the second based at `second`; returns the pass's
 * result. */
static void span_case(int64_t second, struct pulse_compact_result *res)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog;
    struct pulse_compact_config cfg;
    static const int a[] = {0, 1}, b[] = {2, 3}, c[] = {4};

    ck_assert_int_eq(mkdir(dir, 0755), 0);
    write_segment_file(dir, 0, a, 2);
    write_segment_file(dir, second, b, 2);
    write_segment_file(dir, second + 10, c, 1);
    plog = ct_open(dir, SEG);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, res), PULSE_OK);
    ck_assert_int_eq(pulse_plog_log_end(plog), second + 11);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}

START_TEST(test_merge_never_spans_more_offsets_than_the_index_can_address)
{
    struct pulse_compact_result res;

    span_case(1000, &res);
    ck_assert_uint_eq(res.segments_merged, 1);
    /* 2^31 offsets from the first base: the relative offsets of a merged
     * index would not fit. */
    span_case((int64_t)1 << 31, &res);
    ck_assert_uint_eq(res.segments_merged, 0);
    span_case(((int64_t)1 << 31) - 10 - 1, &res);
    ck_assert_uint_eq(res.segments_merged, 1);
}
END_TEST

/* A reader parked in a segment (its pread in flight) while a merge moves
 * that segment and the ones after it into an earlier file: when it finds
 * nothing more there, it must continue in the merged file, not jump to the
 * segment after the merged range. The io hook runs the merge inside the
 * reader's first pread of the segment based at 10. */
static struct pulse_plog *hook_plog;
static atomic_bool hook_armed;
static struct pulse_compact_result hook_res;
static struct pulse_io hooked;

static ssize_t hook_pread(const struct pulse_io *io, int fd, void *buf, size_t n, off_t off)
{
    const struct pulse_io *posix = pulse_io_posix();
    char link[64], target[512];
    ssize_t tl;
    (void)io;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    tl = readlink(link, target, sizeof target - 1);
    if (tl > 0 && atomic_load(&hook_armed)) {
        target[tl] = '\0';
        if (strstr(target, "/00000000000000000010.log") != NULL) {
            struct pulse_compact_config cfg;
            atomic_store(&hook_armed, false);
            ct_cfg(&cfg);
            ck_assert_int_eq(pulse_compact_pass(hook_plog, &cfg, CT_T0, &hook_res), PULSE_OK);
        }
    }
    return posix->pread(posix, fd, buf, n, off);
}

START_TEST(test_reader_in_a_segment_merged_away_does_not_skip_records)
{
    char *dir = pt_tmpdir();
    struct pulse_buf b;
    struct pulse_slice sl;
    struct pulse_batch_iter it;
    struct pulse_record_view rec;
    static const int a[] = {0}, s10[] = {1, 2}, s20[] = {3}, s30[] = {4};
    int64_t first = -1;

    ck_assert_int_eq(mkdir(dir, 0755), 0);
    write_segment_file(dir, 0, a, 1);
    write_segment_file(dir, 10, s10, 2); /* offsets 10, 11; nothing from 12 to 19 */
    write_segment_file(dir, 20, s20, 1);
    write_segment_file(dir, 30, s30, 1); /* the active segment */
    hooked = *pulse_io_posix();
    hooked.pread = hook_pread;
    hook_plog = ct_open_io(dir, SEG, &hooked);
    atomic_store(&hook_armed, true);
    pulse_buf_init(&b, 1 << 20);
    ck_assert_int_eq(pulse_plog_read(hook_plog, 15, 1 << 16, &b, &sl), PULSE_OK);
    ck_assert(!atomic_load(&hook_armed));
    ck_assert_uint_eq(hook_res.segments_merged, 2); /* 0, 10 and 20 are one file now */
    ck_assert_int_eq(pulse_batch_iter_init(&it, b.data, b.len), PULSE_OK);
    while (pulse_batch_iter_next(&it, &rec) == PULSE_OK) {
        if (rec.offset >= 15) {
            first = rec.offset;
            break;
        }
    }
    ck_assert_int_eq(first, 20);
    pulse_buf_fini(&b);
    ck_assert_int_eq(pulse_plog_close(hook_plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* A posix io whose directory fsyncs, or renames, fail while armed. */
static atomic_bool dirsync_armed, rename_armed;
static struct pulse_io failing;

static int failing_fsync_dir(const struct pulse_io *io, const char *dir)
{
    const struct pulse_io *posix = pulse_io_posix();
    (void)io;
    if (atomic_load(&dirsync_armed)) {
        errno = EIO;
        return -1;
    }
    return posix->fsync_dir(posix, dir);
}

static int failing_rename(const struct pulse_io *io, const char *from, const char *to)
{
    const struct pulse_io *posix = pulse_io_posix();
    (void)io;
    if (atomic_load(&rename_armed)) {
        errno = EIO;
        return -1;
    }
    return posix->rename(posix, from, to);
}

static struct pulse_plog *open_failing(const char *dir)
{
    failing = *pulse_io_posix();
    failing.fsync_dir = failing_fsync_dir;
    failing.rename = failing_rename;
    atomic_store(&dirsync_armed, false);
    atomic_store(&rename_armed, false);
    return ct_open_io(dir, SEG, &failing);
}

/* After a failed directory fsync nobody knows which of the pass's renames
 * or unlinks are on disk, and a second fsync could report success over the
 * lost ones: the log fences (never retried), and a reopen recovers from the
 * files as they are, every record where the model says. */
static void dirsync_failure_fences(void (*build)(struct pulse_plog *, struct ct_model *), uint32_t rewritten,
                                   uint32_t deleted)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = open_failing(dir);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;

    build(plog, &m);
    ct_cfg(&cfg);
    atomic_store(&dirsync_armed, true);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, &res), PULSE_IO);
    ck_assert_uint_eq(res.segments_rewritten, rewritten);
    ck_assert_uint_eq(res.segments_deleted, deleted);
    ck_assert(pulse_plog_fenced(plog));
    atomic_store(&dirsync_armed, false);
    ck_assert_int_eq(pulse_plog_reopen(plog, NULL), PULSE_OK);
    ct_check_model(plog, &m, 4);
    ck_assert_int_eq(ct_append(plog, NULL, 9, false, CT_T0, 0), m.recs[m.n - 1].offset + 1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}

/* One sealed segment whose records are all superseded, between two that
 * survive whole (as in test_segment_with_no_survivors_is_deleted...). */
static void build_one_dead(struct pulse_plog *plog, struct ct_model *m)
{
    ct_append(plog, m, -1, false, CT_T0, 400);
    ct_append(plog, m, -1, false, CT_T0, 400);
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 4; k++)
            ct_append(plog, m, k, false, CT_T0, 150);
    ct_append(plog, m, -1, false, CT_T0, 600);
    ct_append(plog, m, -1, false, CT_T0, 600);
}

static void build_one_rewrite(struct pulse_plog *plog, struct ct_model *m)
{
    ck_assert_uint_eq(build_unmergeable(plog, m, 1), 1);
}

START_TEST(test_failed_directory_fsync_after_deletions_fences_the_log)
{
    dirsync_failure_fences(build_one_dead, 0, 1);
}
END_TEST

START_TEST(test_failed_directory_fsync_after_a_rewrite_fences_the_log)
{
    dirsync_failure_fences(build_one_rewrite, 0, 0);
}
END_TEST

/* A commit that fails before it renamed anything gives back the
 * descriptor it kept open for readers (the retirement), so failed passes
 * cannot pile up open files; the log stays usable and unfenced. */
START_TEST(test_commit_that_renamed_nothing_keeps_no_descriptor_open)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = open_failing(dir);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;

    ck_assert_uint_eq(build_unmergeable(plog, &m, 1), 1);
    ct_cfg(&cfg);
    atomic_store(&rename_armed, true);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, &res), PULSE_IO);
    ck_assert_uint_eq(res.segments_rewritten, 0);
    ck_assert(!pulse_plog_fenced(plog));
    {
        struct pulse_plog_segref *refs = NULL;
        size_t n = 0;
        ck_assert_int_eq(pulse_plog_capture(plog, &refs, &n), PULSE_OK);
        ck_assert(!refs[0].seg->data.retired);
        pulse_plog_capture_free(refs, n);
    }
    atomic_store(&rename_armed, false);
    ct_check_model(plog, &m, 3);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_rewritten, 1);
    ct_check_model(plog, &m, 3);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

TCase *compact_merge_tcase(void)
{
    TCase *tc = tcase_create("merge");

    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, test_tiny_segments_under_key_churn_stay_close_to_the_live_size);
    tcase_add_test(tc, test_pass_stops_at_its_byte_budget_and_the_next_continues);
    tcase_add_test(tc, test_pass_stops_at_its_time_budget_and_the_next_continues);
    tcase_add_test(tc, test_adjacent_small_segments_merge_into_the_first_ones_file);
    tcase_add_test(tc, test_merge_never_spans_more_offsets_than_the_index_can_address);
    tcase_add_test(tc, test_reader_in_a_segment_merged_away_does_not_skip_records);
    tcase_add_test(tc, test_failed_directory_fsync_after_deletions_fences_the_log);
    tcase_add_test(tc, test_failed_directory_fsync_after_a_rewrite_fences_the_log);
    tcase_add_test(tc, test_commit_that_renamed_nothing_keeps_no_descriptor_open);
    return tc;
}
