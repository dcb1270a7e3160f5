/* SPDX-License-Identifier: MIT */
/*
 * compact_survivors.c - part of check_compact: which records survive a pass
 * (the newest of each key, every keyless one), reads of a removed offset,
 * tombstones kept while an older value survives and never resurrected,
 * survivors far apart in time, more keys than the cap, a bad config.
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

TCase *compact_survivors_tcase(void)
{
    TCase *tc = tcase_create("survivors");

    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, test_only_the_newest_record_of_each_key_survives);
    tcase_add_test(tc, test_long_keys_are_deduplicated_like_short_ones);
    tcase_add_test(tc, test_keyless_records_are_never_deduplicated);
    tcase_add_test(tc, test_read_of_a_removed_offset_starts_at_the_next_survivor);
    tcase_add_test(tc, test_expired_tombstone_is_kept_while_an_older_value_survives);
    tcase_add_test(tc, test_bounded_pass_never_resurrects_a_deleted_key);
    tcase_add_test(tc, test_unexpired_tombstone_is_kept);
    tcase_add_test(tc, test_survivors_30_days_apart_are_split_not_wrapped);
    tcase_add_test(tc, test_more_keys_than_the_cap_still_converge);
    tcase_add_test(tc, test_bad_config_is_refused);
    return tc;
}
