/* SPDX-License-Identifier: MIT */
/* check_compact.c - log compaction on real partition logs: which records
 * survive, sparse batches that read and verify, reads that skip removed
 * offsets, the untouched active segment, the gain gate, deleted segments,
 * no tombstone resurrection, no timestamp wrap, progress past the key cap,
 * passes over an unchanged log that read nothing, readers that keep the
 * old bytes, and a seeded random model test with reopens. */
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

#define SEG 1024

/* A posix io that counts the bytes pread through it. */
static _Atomic uint64_t bytes_read;
static struct pulse_io counting;

static ssize_t counting_pread(const struct pulse_io *io, int fd, void *buf, size_t n, off_t off)
{
    const struct pulse_io *posix = pulse_io_posix();
    ssize_t got = posix->pread(posix, fd, buf, n, off);
    (void)io;
    if (got > 0)
        atomic_fetch_add(&bytes_read, (uint64_t)got);
    return got;
}

static const struct pulse_io *counting_io(void)
{
    counting = *pulse_io_posix();
    counting.pread = counting_pread;
    return &counting;
}

/* Runs passes until one commits nothing; returns the number of passes. */
static int converge(struct pulse_compact *comp, struct pulse_plog *plog, const struct pulse_compact_config *cfg,
                    int64_t now, int max_passes)
{
    for (int i = 1; i <= max_passes; i++) {
        struct pulse_compact_result res;
        ck_assert_int_eq(pulse_compact_run(comp, plog, cfg, now, &res), PULSE_OK);
        if (res.segments_rewritten == 0 && res.segments_deleted == 0 && res.segments_scanned == 0)
            return i;
    }
    return max_passes + 1;
}

static size_t nsegments(struct pulse_plog *plog)
{
    struct pulse_plog_stats st;
    pulse_plog_get_stats(plog, &st);
    return st.segments;
}

static void active_info(struct pulse_plog *plog, struct pulse_segment_info *out)
{
    struct pulse_segment_info *segs = NULL;
    size_t n = 0;
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    *out = segs[n - 1];
    pulse_free(segs);
}

static uint8_t *file_bytes(const char *dir, int64_t base, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%020" PRId64 ".log", dir, base);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = pulse_malloc(sz > 0 ? (size_t)sz : 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(fread(p, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *len = (size_t)sz;
    return p;
}

START_TEST(test_only_the_newest_record_of_each_key_survives)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    struct ct_reads rs;
    int seen[10] = {0};

    for (int round = 0; round < 5; round++)
        for (int k = 0; k < 10; k++)
            ct_append(plog, &m, k, false, CT_T0 + round, 0);
    for (int i = 0; i < 12; i++)
        ct_append(plog, &m, -1, false, CT_T0 + 10, 0); /* pushes the last keyed round out of the active */
    ct_append(plog, &m, -1, false, CT_T0 + 11, 400);
    ct_append(plog, &m, -1, false, CT_T0 + 11, 400);
    ct_append(plog, &m, -1, false, CT_T0 + 11, 400);
    ck_assert_uint_gt(nsegments(plog), 4);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    ck_assert_int_lt(converge(comp, plog, &cfg, CT_T0, 20), 20);
    ct_check_model(plog, &m, 10);
    ct_read_all(plog, 0, &rs);
    for (size_t i = 0; i < rs.n; i++)
        if (rs.r[i].key >= 0)
            seen[rs.r[i].key]++;
    for (int k = 0; k < 10; k++)
        ck_assert_int_eq(seen[k], 1); /* exactly one copy: the newest */
    ck_assert_uint_gt(rs.sparse_batches, 0);
    ct_reads_free(&rs);
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* The same after a reopen (recovery accepts the sparse segments). */
    plog = ct_open(dir, SEG);
    ct_check_model(plog, &m, 10);
    ck_assert_int_eq(ct_append(plog, NULL, 3, false, CT_T0, 0), m.recs[m.n - 1].offset + 1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_long_keys_are_deduplicated_like_short_ones)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog;
    struct ct_model m = {0};
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    struct ct_reads rs;
    int seen[10] = {0};

    ct_key_pad = 40;
    plog = ct_open(dir, SEG);
    for (int round = 0; round < 4; round++)
        for (int k = 0; k < 10; k++)
            ct_append(plog, &m, k, round == 3 && k == 4, CT_T0, 0);
    for (int i = 0; i < 3; i++)
        ct_append(plog, &m, -1, false, CT_T0, 600);
    ct_cfg(&cfg);
    cfg.max_keys = 4; /* also splits the key space */
    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    for (int i = 0; i < 60; i++)
        ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, CT_T0 + 2 * CT_DAY_MS, NULL), PULSE_OK);
    ct_check_model(plog, &m, 10);
    ct_read_all(plog, 0, &rs);
    for (size_t i = 0; i < rs.n; i++)
        if (rs.r[i].key >= 0)
            seen[rs.r[i].key]++;
    for (int k = 0; k < 10; k++)
        ck_assert_int_eq(seen[k], k == 4 ? 0 : 1); /* key 4's expired tombstone went too */
    ct_reads_free(&rs);
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_keyless_records_are_never_deduplicated)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;
    struct ct_reads rs;
    size_t keyless = 0;

    for (int i = 0; i < 40; i++)
        ct_append(plog, &m, i % 3 == 0 ? -1 : 7, false, CT_T0, 0);
    ct_append(plog, &m, -1, false, CT_T0, 500);
    ct_append(plog, &m, -1, false, CT_T0, 500);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_gt(res.segments_rewritten + res.segments_deleted, 0);
    ct_read_all(plog, 0, &rs);
    for (size_t i = 0; i < rs.n; i++)
        keyless += rs.r[i].key < 0;
    ck_assert_uint_eq(keyless, 14 + 2);
    ct_check_model(plog, &m, 8);
    ct_reads_free(&rs);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_read_of_a_removed_offset_starts_at_the_next_survivor)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_buf b;
    struct pulse_slice sl;
    struct pulse_batch_iter it;
    struct pulse_record_view rec;

    /* offsets 0..9: keys 0..9; 10..19: keys 0..9 again (newest). */
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 10; k++)
            ct_append(plog, &m, k, false, CT_T0, 0);
    ct_append(plog, &m, -1, false, CT_T0, 0); /* offset 20, keyless */
    ct_append(plog, &m, -1, false, CT_T0, 500);
    ct_append(plog, &m, -1, false, CT_T0, 500);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, NULL), PULSE_OK);
    pulse_buf_init(&b, 1 << 20);
    /* Offsets 0..9 are gone: a read at 3 starts at 10, the next survivor. */
    ck_assert_int_eq(pulse_plog_read(plog, 3, 1 << 16, &b, &sl), PULSE_OK);
    ck_assert_uint_gt(sl.len, 0);
    ck_assert_int_eq(pulse_batch_iter_init(&it, b.data, b.len), PULSE_OK);
    int64_t first = -1;
    while (pulse_batch_iter_next(&it, &rec) == PULSE_OK) {
        if (rec.offset >= 3) {
            first = rec.offset;
            break;
        }
    }
    ck_assert_int_eq(first, 10);
    pulse_buf_fini(&b);
    ct_check_model(plog, &m, 10);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

/* Base of the oldest segment file in dir. */
static int64_t first_base(const char *dir)
{
    struct pulse_plog *plog = ct_open(dir, SEG);
    int64_t base = pulse_plog_log_start(plog);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    return base;
}

START_TEST(test_rewritten_batches_are_sparse_and_verify)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    size_t len = 0, pos = 0, sparse = 0;
    uint8_t *raw;

    for (int r = 0; r < 4; r++)
        for (int k = 0; k < 5; k++)
            ct_append(plog, &m, k, false, CT_T0, 0);
    for (int i = 0; i < 12; i++)
        ct_append(plog, &m, -1, false, CT_T0, 40);
    ct_cfg(&cfg);
    cfg.batch_max_records = 3;
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, NULL), PULSE_OK);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* Walk the first segment file as pulse-log verify would. */
    raw = file_bytes(dir, first_base(dir), &len);
    while (pos < len) {
        struct pulse_batch_header hdr;
        int64_t last = 0;
        ck_assert_int_eq(pulse_batch_verify(raw + pos, len - pos, &hdr, &last), PULSE_OK);
        ck_assert_uint_le(hdr.record_count, 3);
        if (hdr.flags & PULSE_BATCH_FLAG_SPARSE)
            sparse++;
        pos += pulse_batch_total_size(&hdr);
    }
    ck_assert_uint_eq(pos, len);
    ck_assert_uint_gt(sparse, 0);
    pulse_free(raw);
    plog = ct_open(dir, SEG);
    ct_check_model(plog, &m, 5);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_active_segment_is_never_rewritten)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, 4096);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_segment_info before, after;
    uint8_t *b1, *b2;
    size_t l1, l2;

    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 10; k++)
            ct_append(plog, &m, k, false, CT_T0, 100);
    for (int k = 0; k < 10; k++)
        ct_append(plog, &m, k, false, CT_T0, 0); /* duplicates inside the active */
    active_info(plog, &before);
    ck_assert_int_gt(before.base_offset, 0);
    b1 = file_bytes(dir, before.base_offset, &l1);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, NULL), PULSE_OK);
    active_info(plog, &after);
    ck_assert_int_eq(after.base_offset, before.base_offset);
    ck_assert_int_eq(pulse_plog_log_end(plog), m.recs[m.n - 1].offset + 1);
    ck_assert_int_eq(pulse_plog_high_watermark(plog), m.recs[m.n - 1].offset + 1);
    b2 = file_bytes(dir, after.base_offset, &l2);
    ck_assert_uint_eq(l1, l2);
    ck_assert_int_eq(memcmp(b1, b2, l1), 0);
    ct_check_model(plog, &m, 10);
    pulse_free(b1);
    pulse_free(b2);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_gain_gate_leaves_a_segment_that_would_barely_shrink)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;
    uint8_t *b1, *b2;
    size_t l1, l2;

    /* Segment 0: one small superseded record among big unique ones. */
    ct_append(plog, &m, 0, false, CT_T0, 0);
    for (int k = 1; k < 4; k++)
        ct_append(plog, &m, k, false, CT_T0, 200);
    ct_append(plog, &m, 0, false, CT_T0, 500); /* rolls: newest key 0 in segment 1 */
    ct_append(plog, &m, -1, false, CT_T0, 500);
    ct_append(plog, &m, -1, false, CT_T0, 500);
    ck_assert_uint_ge(nsegments(plog), 3);
    b1 = file_bytes(dir, 0, &l1);
    ct_cfg(&cfg);
    cfg.min_gain_ratio = 0.5;
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_ge(res.skipped_by_gain_gate, 1);
    ck_assert_uint_eq(res.segments_rewritten, 0);
    ck_assert_uint_eq(res.bytes_after, res.bytes_before);
    b2 = file_bytes(dir, 0, &l2);
    ck_assert_uint_eq(l1, l2);
    ck_assert_int_eq(memcmp(b1, b2, l1), 0);
    ck_assert_int_eq(ct_count_files(dir, ".tmp-"), 0);
    /* Without the gate the same segment is rewritten. */
    cfg.min_gain_ratio = 0.0;
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_rewritten, 1);
    ck_assert_uint_lt(res.bytes_after, res.bytes_before);
    ct_check_model(plog, &m, 4);
    pulse_free(b1);
    pulse_free(b2);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_segment_with_no_survivors_is_deleted_even_in_the_middle)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;
    struct pulse_segment_info *segs = NULL;
    size_t n = 0;
    int64_t seg1_base;
    char path[512];

    /* Segment 0 keyless (survives), segment 1 keys 0..3 (all superseded
     * later), segment 2 keys 0..3 again, then the active. */
    ct_append(plog, &m, -1, false, CT_T0, 400);
    ct_append(plog, &m, -1, false, CT_T0, 400);
    seg1_base = ct_append(plog, &m, 0, false, CT_T0, 150);
    for (int k = 1; k < 4; k++)
        ct_append(plog, &m, k, false, CT_T0, 150);
    for (int k = 0; k < 4; k++)
        ct_append(plog, &m, k, false, CT_T0, 150);
    ct_append(plog, &m, -1, false, CT_T0, 600);
    ct_append(plog, &m, -1, false, CT_T0, 600);
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    ck_assert_uint_ge(n, 4);
    ck_assert_int_eq(segs[1].base_offset, seg1_base);
    pulse_free(segs);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_deleted, 1);
    snprintf(path, sizeof path, "%s/%020" PRId64 ".log", dir, seg1_base);
    ck_assert_int_ne(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/%020" PRId64 ".index", dir, seg1_base);
    ck_assert_int_ne(access(path, F_OK), 0);
    ck_assert_int_eq(pulse_plog_log_start(plog), 0);
    /* Reading from inside the deleted range skips to the next segment. */
    ct_check_model(plog, &m, 4);
    {
        struct ct_reads rs;
        ct_read_all(plog, seg1_base, &rs);
        ck_assert_uint_gt(rs.n, 0);
        ck_assert_int_gt(rs.r[0].offset, seg1_base + 3);
        ct_reads_free(&rs);
    }
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = ct_open(dir, SEG);
    ct_check_model(plog, &m, 4);
    ck_assert_int_eq(ct_append(plog, NULL, 9, false, CT_T0, 0), m.recs[m.n - 1].offset + 1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_deleting_the_oldest_segment_advances_the_log_start)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;
    int64_t second;

    for (int k = 0; k < 4; k++)
        ct_append(plog, &m, k, false, CT_T0, 150);
    second = ct_append(plog, &m, 0, false, CT_T0, 150);
    for (int k = 1; k < 4; k++)
        ct_append(plog, &m, k, false, CT_T0, 150);
    ct_append(plog, &m, -1, false, CT_T0, 600);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_deleted, 1);
    ck_assert_int_eq(pulse_plog_log_start(plog), second);
    ct_check_model(plog, &m, 4);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = ct_open(dir, SEG);
    ck_assert_int_eq(pulse_plog_log_start(plog), second);
    ct_check_model(plog, &m, 4);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

/* The older value of key 0 sits in a segment the gain gate keeps refusing;
 * the expired tombstone must not be dropped while that value exists, or
 * key 0 would come back. */
START_TEST(test_expired_tombstone_is_kept_while_an_older_value_survives)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;
    int64_t now = CT_T0 + 10 * CT_DAY_MS;
    struct ct_reads rs;

    ct_append(plog, &m, 0, false, CT_T0, 0); /* the value that must never come back */
    for (int k = 1; k < 4; k++)
        ct_append(plog, &m, k, false, CT_T0, 250);
    ct_append(plog, &m, 0, true, CT_T0, 0); /* tombstone, segment 1, long expired */
    /* Fills segment 1, so that segment 0 cannot merge into one segment
     * with it: the gain gate alone decides segment 0's fate. */
    ct_append(plog, &m, -1, false, CT_T0, 500);
    ct_append(plog, &m, -1, false, CT_T0, 600);
    ct_append(plog, &m, -1, false, CT_T0, 600);
    ct_cfg(&cfg);
    cfg.min_gain_ratio = 0.9;
    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, now, &res), PULSE_OK);
        ct_check_model(plog, &m, 4);
        ct_read_all(plog, 0, &rs);
        int last_k0 = -1;
        for (size_t j = 0; j < rs.n; j++)
            if (rs.r[j].key == 0)
                last_k0 = rs.r[j].tomb ? 1 : 0;
        ck_assert_int_eq(last_k0, 1); /* the tombstone still hides the value */
        ct_reads_free(&rs);
    }
    /* Once the gate lets segment 0 go, the value goes first, then the
     * tombstone, and key 0 is gone altogether. */
    cfg.min_gain_ratio = 0.0;
    ck_assert_int_lt(converge(comp, plog, &cfg, now, 10), 10);
    ct_read_all(plog, 0, &rs);
    for (size_t j = 0; j < rs.n; j++)
        ck_assert_int_ne(rs.r[j].key, 0);
    ct_reads_free(&rs);
    ct_check_model(plog, &m, 4);
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

/* A bounded pass (one segment) reaches the tombstone's segment before the
 * older value's segment has been rewritten: still no resurrection. */
START_TEST(test_bounded_pass_never_resurrects_a_deleted_key)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    int64_t now = CT_T0 + 10 * CT_DAY_MS;

    for (int s = 0; s < 3; s++) {
        ct_append(plog, &m, 5, false, CT_T0, 300);
        ct_append(plog, &m, 10 + s, false, CT_T0, 300);
        ct_append(plog, &m, -1, false, CT_T0, 300);
    }
    ct_append(plog, &m, 5, true, CT_T0, 300);
    ct_append(plog, &m, -1, false, CT_T0, 600);
    ct_append(plog, &m, -1, false, CT_T0, 600);
    ct_cfg(&cfg);
    cfg.max_bytes_per_pass = 1; /* one segment per pass */
    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    for (int i = 0; i < 12; i++) {
        ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, now, NULL), PULSE_OK);
        ct_check_model(plog, &m, 20);
    }
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = ct_open(dir, SEG);
    ct_check_model(plog, &m, 20);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_unexpired_tombstone_is_kept)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    struct ct_reads rs;
    size_t tombs = 0;

    ct_append(plog, &m, 0, true, CT_T0, 0);
    ct_append(plog, &m, 1, false, CT_T0, 400);
    ct_append(plog, &m, 1, false, CT_T0, 400);
    ct_append(plog, &m, -1, false, CT_T0, 600);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    converge(comp, plog, &cfg, CT_T0 + CT_DAY_MS, 10); /* exactly the retention: kept */
    ct_read_all(plog, 0, &rs);
    for (size_t j = 0; j < rs.n; j++)
        tombs += rs.r[j].tomb;
    ck_assert_uint_eq(tombs, 1);
    ct_reads_free(&rs);
    /* One millisecond later it expires, and the state notices without any
     * change to the log. */
    converge(comp, plog, &cfg, CT_T0 + CT_DAY_MS + 1, 10);
    ct_read_all(plog, 0, &rs);
    tombs = 0;
    for (size_t j = 0; j < rs.n; j++)
        tombs += rs.r[j].tomb;
    ck_assert_uint_eq(tombs, 0);
    ct_reads_free(&rs);
    ct_check_model(plog, &m, 2);
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_survivors_30_days_apart_are_split_not_wrapped)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, 4096);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;
    struct ct_reads rs;

    for (int i = 0; i < 6; i++) {
        ct_append(plog, &m, -1, false, CT_T0 + i * 30 * CT_DAY_MS, 0);
        ct_append(plog, &m, 1, false, CT_T0, 0); /* duplicates to make the rewrite pay */
    }
    ct_append(plog, &m, -1, false, CT_T0, 500);
    while (nsegments(plog) < 2)
        ct_append(plog, &m, -1, false, CT_T0, 500);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_rewritten, 1);
    ct_read_all(plog, 0, &rs);
    ck_assert_int_le(rs.max_ts_span, INT32_MAX);
    ck_assert_uint_gt(rs.sparse_batches, 0);
    ct_reads_free(&rs);
    /* ct_check_model compares every timestamp with what was appended. */
    ct_check_model(plog, &m, 2);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_more_keys_than_the_cap_still_converge)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, 8192);
    struct ct_model m = {0};
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    struct ct_reads rs;
    int seen[100] = {0};
    uint64_t before, after;
    struct pulse_plog_stats stats;

    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 100; k++)
            ct_append(plog, &m, k, false, CT_T0, 0);
    for (int i = 0; i < 20; i++)
        ct_append(plog, &m, -1, false, CT_T0, 500);
    pulse_plog_get_stats(plog, &stats);
    before = stats.size_bytes;
    ct_cfg(&cfg);
    cfg.max_keys = 8;
    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    for (int i = 0; i < 400; i++)
        ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, CT_T0, NULL), PULSE_OK);
    pulse_plog_get_stats(plog, &stats);
    after = stats.size_bytes;
    ck_assert_uint_lt(after, before);
    ct_check_model(plog, &m, 100);
    ct_read_all(plog, 0, &rs);
    for (size_t i = 0; i < rs.n; i++)
        if (rs.r[i].key >= 0)
            seen[rs.r[i].key]++;
    for (int k = 0; k < 100; k++)
        ck_assert_int_eq(seen[k], 1);
    ct_reads_free(&rs);
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_pass_over_an_unchanged_log_reads_nothing)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open_io(dir, SEG, counting_io());
    struct ct_model m = {0};
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;

    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 6; k++)
            ct_append(plog, &m, k, false, CT_T0, 100);
    ct_append(plog, &m, -1, false, CT_T0, 600);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    atomic_store(&bytes_read, 0);
    ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_gt(res.segments_rewritten + res.segments_deleted, 0);
    ck_assert_uint_gt(atomic_load(&bytes_read), 0);
    /* Nothing changed since: no rewrite, no byte read. */
    atomic_store(&bytes_read, 0);
    ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_rewritten + res.segments_deleted + res.segments_scanned, 0);
    ck_assert_uint_eq(atomic_load(&bytes_read), 0);
    /* New data is noticed. */
    ct_append(plog, &m, 0, false, CT_T0, 0);
    ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_gt(atomic_load(&bytes_read), 0);
    ct_check_model(plog, &m, 6);
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_reader_holding_a_slice_keeps_the_old_bytes)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;
    struct pulse_slice sl;
    uint8_t *before, *after;

    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 3; k++)
            ct_append(plog, &m, k, false, CT_T0, 50);
    ct_append(plog, &m, -1, false, CT_T0, 700);
    ct_append(plog, &m, -1, false, CT_T0, 700);
    ck_assert_int_eq(pulse_plog_slice(plog, 0, 1 << 20, true, &sl), PULSE_OK);
    ck_assert_int_ge(sl.fd, 0);
    before = pulse_malloc(sl.len);
    after = pulse_malloc(sl.len);
    ck_assert_int_eq(pread(sl.fd, before, sl.len, (off_t)sl.pos), (ssize_t)sl.len);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_rewritten, 1);
    ck_assert_int_eq(pread(sl.fd, after, sl.len, (off_t)sl.pos), (ssize_t)sl.len);
    ck_assert_int_eq(memcmp(before, after, sl.len), 0);
    close(sl.fd);
    pulse_free(before);
    pulse_free(after);
    ct_check_model(plog, &m, 3);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_random_model_with_passes_and_reopens)
{
    unsigned seed = (unsigned)time(NULL);
    const char *env = getenv("PULSE_TEST_SEED");
    if (env != NULL)
        seed = (unsigned)strtoul(env, NULL, 10);
    fprintf(stderr, "test_random_model_with_passes_and_reopens: seed %u (PULSE_TEST_SEED)\n", seed);
    srand(seed);

    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    const int nkeys = 40;
    int64_t now = CT_T0;

    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    for (int step = 0; step < 60; step++) {
        int appends = rand() % 40;
        for (int i = 0; i < appends; i++) {
            int r = rand() % 10;
            int key = r == 0 ? -1 : rand() % nkeys;
            bool tomb = key >= 0 && r == 1;
            now += rand() % (3 * 3600 * 1000);
            ct_append(plog, &m, key, tomb, now, (size_t)(rand() % 120));
        }
        ct_cfg(&cfg);
        cfg.tombstone_retention_ms = (int64_t)(rand() % 4) * 3600 * 1000;
        cfg.min_gain_ratio = (rand() % 4) * 0.1;
        cfg.max_keys = rand() % 3 == 0 ? 4 : 1024;
        cfg.max_bytes_per_pass = (uint64_t)(1 + rand() % 4) * SEG / 2;
        cfg.batch_max_records = 1 + (uint32_t)(rand() % 8);
        ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, now, NULL), PULSE_OK);
        ct_check_model(plog, &m, nkeys);
        if (rand() % 6 == 0) {
            ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
            plog = ct_open(dir, SEG);
            ct_check_model(plog, &m, nkeys);
            if (rand() % 2 == 0) {
                pulse_compact_destroy(comp);
                ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
            }
        }
    }
    ck_assert_int_eq(ct_count_files(dir, ".tmp-"), 0);
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_damaged_sealed_segment_is_left_alone_and_tombstones_stay)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;
    struct pulse_plog_recovery rec;
    struct pulse_plog_config pcfg;
    struct ct_reads rs;
    char path[512];
    uint8_t *b1, *b2;
    size_t l1, l2, tombs = 0;
    int64_t now = CT_T0 + 10 * CT_DAY_MS;

    /* Segment 0: duplicates, then a batch that will be damaged. */
    for (int k = 0; k < 3; k++)
        ct_append(plog, &m, k, false, CT_T0, 100);
    ct_append(plog, &m, 0, false, CT_T0, 100);
    ct_append(plog, &m, 7, false, CT_T0, 300);
    /* Segment 1: an expired tombstone alone in the readable log. */
    ct_append(plog, &m, 9, true, CT_T0, 0);
    ct_append(plog, &m, -1, false, CT_T0, 600);
    ct_append(plog, &m, -1, false, CT_T0, 600);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* Flip a byte in the last batch of segment 0 and drop the snapshot so
     * that recovery scans and finds it. */
    b1 = file_bytes(dir, 0, &l1);
    b1[l1 - 10] ^= 0x55;
    snprintf(path, sizeof path, "%s/%020d.log", dir, 0);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b1, 1, l1, f), l1);
    fclose(f);
    snprintf(path, sizeof path, "%s/snapshot", dir);
    unlink(path);
    pulse_plog_config_init(&pcfg);
    pcfg.segment_max_bytes = SEG;
    pcfg.index_interval_bytes = 256;
    ck_assert_int_eq(pulse_plog_open(dir, &pcfg, &plog, &rec), PULSE_OK);
    ck_assert_uint_eq(rec.corrupt_segments, 1);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, now, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_rewritten + res.segments_deleted, 0);
    b2 = file_bytes(dir, 0, &l2);
    ck_assert_uint_eq(l1, l2);
    ck_assert_int_eq(memcmp(b1, b2, l1), 0);
    ct_read_all(plog, 0, &rs);
    for (size_t i = 0; i < rs.n; i++)
        tombs += rs.r[i].tomb;
    ck_assert_uint_eq(tombs, 1);
    ct_reads_free(&rs);
    pulse_free(b1);
    pulse_free(b2);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

struct appender {
    struct pulse_plog *plog;
    struct ct_model *m;
    atomic_bool done;
};

static void *append_thread(void *arg)
{
    struct appender *a = arg;
    for (int i = 0; i < 400; i++)
        ct_append(a->plog, a->m, i % 7 == 0 ? -1 : i % 13, i % 29 == 0, CT_T0 + i, (size_t)(i % 5) * 60);
    atomic_store(&a->done, true);
    return NULL;
}

START_TEST(test_passes_run_safely_beside_appends_and_reads)
{
    char *dir = pt_tmpdir();
    struct ct_model m = {0};
    struct appender a;
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    pthread_t th;
    int passes = 0;

    a.plog = ct_open(dir, SEG);
    a.m = &m;
    atomic_init(&a.done, false);
    ct_cfg(&cfg);
    cfg.tombstone_retention_ms = 0;
    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    ck_assert_int_eq(pthread_create(&th, NULL, append_thread, &a), 0);
    while (!atomic_load(&a.done) || passes < 3) {
        struct pulse_buf b;
        struct pulse_slice sl;
        ck_assert_int_eq(pulse_compact_run(comp, a.plog, &cfg, CT_T0 + 1000, NULL), PULSE_OK);
        /* A reader racing the swaps always gets whole, valid batches. */
        pulse_buf_init(&b, 1 << 20);
        pulse_status_t st = pulse_plog_read(a.plog, 0, 1 << 16, &b, &sl);
        ck_assert(st == PULSE_OK);
        pulse_buf_fini(&b);
        passes++;
    }
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    converge(comp, a.plog, &cfg, CT_T0 + 1000, 20);
    ct_check_model(a.plog, &m, 13);
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(a.plog), PULSE_OK);
    a.plog = ct_open(dir, SEG);
    ct_check_model(a.plog, &m, 13);
    ck_assert_int_eq(pulse_plog_close(a.plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_bad_config_is_refused)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct pulse_compact_config cfg;

    ct_cfg(&cfg);
    cfg.max_keys = 0;
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, NULL), PULSE_INVALID);
    ct_cfg(&cfg);
    cfg.batch_max_bytes = 10;
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, NULL), PULSE_INVALID);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* ---- the log's edits (plog_edit.h) ---------------------------------------- */

static bool file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* An edit is checked against the list under the writer lock: segments
 * the list no longer holds (trimmed since the capture), segments not in a
 * row, and the active segment are refused with PULSE_BUSY, and nothing
 * changes, the job's temps included; a malformed edit is PULSE_INVALID. */
START_TEST(test_an_edit_of_segments_the_list_no_longer_holds_changes_nothing)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_plog_segref *refs = NULL;
    struct pulse_index idx;
    struct pulse_plog_edit_result res;
    size_t n = 0, removed = 0;

    for (int i = 0; i < 40; i++)
        ct_append(plog, &m, i % 5, false, CT_T0, 40);
    ck_assert_int_eq(pulse_plog_capture(plog, &refs, &n), PULSE_OK);
    ck_assert_uint_ge(n, 4);
    ck_assert_int_eq(pulse_plog_trim(plog, refs[1].base, &removed), PULSE_OK);
    ck_assert_uint_eq(removed, 1);

    /* Temps a job would have written: they must survive a refused edit. */
    char *dtemp = pulse_plog_temp_path(plog, "test", refs[1].base, "log");
    char *itemp = pulse_plog_temp_path(plog, "test", refs[1].base, "index");
    FILE *f = fopen(dtemp, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    f = fopen(itemp, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    pulse_index_init(&idx);
    struct pulse_plog_newseg add = {dtemp, itemp, &idx, 0, INT64_MIN, 0};
    const struct pulse_plog_segref *gone[1] = {&refs[0]};
    const struct pulse_plog_segref *apart[2] = {&refs[1], &refs[3]};
    const struct pulse_plog_segref *active[1] = {&refs[n - 1]};
    struct pulse_plog_edit edit = {.kind = PULSE_PLOG_EDIT_REMOVE, .who = "test", .segs = gone, .n = 1};

    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_BUSY);
    ck_assert_uint_eq(res.removed, 0);
    edit.kind = PULSE_PLOG_EDIT_REPLACE;
    edit.add = &add;
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_BUSY);
    edit.segs = apart;
    edit.n = 2;
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_BUSY);
    ck_assert(!res.temp_taken);
    edit.segs = active;
    edit.n = 1;
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_BUSY);
    edit.kind = PULSE_PLOG_EDIT_REMOVE;
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_BUSY);
    edit.n = 0;
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_INVALID);
    edit.kind = PULSE_PLOG_EDIT_REPLACE;
    edit.n = 1;
    edit.add = NULL;
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_INVALID);

    ck_assert(file_exists(dtemp));
    ck_assert(file_exists(itemp));
    ck_assert(!pulse_plog_fenced(plog));
    ck_assert_uint_eq(nsegments(plog), n - 1);
    ct_check_model(plog, &m, 5);
    pulse_plog_capture_free(refs, n);
    pulse_index_fini(&idx);
    pulse_free(dtemp);
    pulse_free(itemp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

/* A REMOVE edit of a middle segment: its files go, the log start stays,
 * and what the model says survives reads back (the removed records were
 * the model's garbage: superseded by newer ones of their keys). */
START_TEST(test_a_remove_edit_of_a_middle_segment_takes_its_files_only)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct pulse_plog_segref *refs = NULL;
    size_t n = 0;

    for (int i = 0; i < 40; i++)
        (void)ct_append(plog, NULL, 0, false, CT_T0, 40);
    ck_assert_int_eq(pulse_plog_capture(plog, &refs, &n), PULSE_OK);
    ck_assert_uint_ge(n, 4);
    int64_t start = pulse_plog_log_start(plog);
    char *log1 = pulse_strdup(refs[1].path);
    const struct pulse_plog_segref *mid[1] = {&refs[1]};
    struct pulse_plog_edit edit = {.kind = PULSE_PLOG_EDIT_REMOVE, .who = "test", .segs = mid, .n = 1};
    struct pulse_plog_edit_result res;

    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_OK);
    ck_assert_uint_eq(res.removed, 1);
    ck_assert_int_eq(pulse_plog_sync_dir(plog, "test"), PULSE_OK);
    ck_assert(!file_exists(log1));
    ck_assert_int_eq(pulse_plog_log_start(plog), start);
    ck_assert_uint_eq(nsegments(plog), n - 1);
    /* Removing it again: no longer listed. */
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_BUSY);
    pulse_plog_capture_free(refs, n);
    pulse_free(log1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

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

static Suite *compact_suite(void)
{
    Suite *s = suite_create("compact");
    TCase *tc = tcase_create("compact");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_only_the_newest_record_of_each_key_survives);
    tcase_add_test(tc, test_long_keys_are_deduplicated_like_short_ones);
    tcase_add_test(tc, test_keyless_records_are_never_deduplicated);
    tcase_add_test(tc, test_read_of_a_removed_offset_starts_at_the_next_survivor);
    tcase_add_test(tc, test_rewritten_batches_are_sparse_and_verify);
    tcase_add_test(tc, test_active_segment_is_never_rewritten);
    tcase_add_test(tc, test_gain_gate_leaves_a_segment_that_would_barely_shrink);
    tcase_add_test(tc, test_segment_with_no_survivors_is_deleted_even_in_the_middle);
    tcase_add_test(tc, test_deleting_the_oldest_segment_advances_the_log_start);
    tcase_add_test(tc, test_expired_tombstone_is_kept_while_an_older_value_survives);
    tcase_add_test(tc, test_bounded_pass_never_resurrects_a_deleted_key);
    tcase_add_test(tc, test_unexpired_tombstone_is_kept);
    tcase_add_test(tc, test_survivors_30_days_apart_are_split_not_wrapped);
    tcase_add_test(tc, test_more_keys_than_the_cap_still_converge);
    tcase_add_test(tc, test_pass_over_an_unchanged_log_reads_nothing);
    tcase_add_test(tc, test_reader_holding_a_slice_keeps_the_old_bytes);
    tcase_add_test(tc, test_random_model_with_passes_and_reopens);
    tcase_add_test(tc, test_damaged_sealed_segment_is_left_alone_and_tombstones_stay);
    tcase_add_test(tc, test_passes_run_safely_beside_appends_and_reads);
    tcase_add_test(tc, test_bad_config_is_refused);
    tcase_add_test(tc, test_tiny_segments_under_key_churn_stay_close_to_the_live_size);
    tcase_add_test(tc, test_pass_stops_at_its_byte_budget_and_the_next_continues);
    tcase_add_test(tc, test_pass_stops_at_its_time_budget_and_the_next_continues);
    tcase_add_test(tc, test_adjacent_small_segments_merge_into_the_first_ones_file);
    tcase_add_test(tc, test_merge_never_spans_more_offsets_than_the_index_can_address);
    tcase_add_test(tc, test_reader_in_a_segment_merged_away_does_not_skip_records);
    tcase_add_test(tc, test_failed_directory_fsync_after_deletions_fences_the_log);
    tcase_add_test(tc, test_failed_directory_fsync_after_a_rewrite_fences_the_log);
    tcase_add_test(tc, test_commit_that_renamed_nothing_keeps_no_descriptor_open);
    tcase_add_test(tc, test_an_edit_of_segments_the_list_no_longer_holds_changes_nothing);
    tcase_add_test(tc, test_a_remove_edit_of_a_middle_segment_takes_its_files_only);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(compact_suite());
    int failed;

    pulse_log_set_level(PULSE_LOG_ERROR);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
