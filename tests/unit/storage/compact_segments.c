/* SPDX-License-Identifier: MIT */
/*
 * compact_segments.c - part of check_compact: what a pass does to segments:
 * sparse rewritten batches that verify, the active segment never rewritten,
 * the gain gate, segments with no survivors deleted, the log start moved,
 * a damaged sealed segment left alone.
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

TCase *compact_segments_tcase(void)
{
    TCase *tc = tcase_create("segments");

    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, test_rewritten_batches_are_sparse_and_verify);
    tcase_add_test(tc, test_active_segment_is_never_rewritten);
    tcase_add_test(tc, test_gain_gate_leaves_a_segment_that_would_barely_shrink);
    tcase_add_test(tc, test_segment_with_no_survivors_is_deleted_even_in_the_middle);
    tcase_add_test(tc, test_deleting_the_oldest_segment_advances_the_log_start);
    tcase_add_test(tc, test_damaged_sealed_segment_is_left_alone_and_tombstones_stay);
    return tc;
}
