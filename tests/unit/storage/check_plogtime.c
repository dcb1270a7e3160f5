/* SPDX-License-Identifier: MIT */
/*
 * check_plogtime.c - positions by time (pulse_plog_offset_for_time and
 * pulse_segment_time_seek): the first record at or after a timestamp,
 * found through the segments' newest timestamps, the sparse index and
 * batch headers, then one verified read; across many segments, with a
 * sparse and a dense index, after a reopen (index loaded from its file),
 * before everything (the log start) and after everything (the high
 * watermark). Every answer is compared with a scan of every record.
 */
#include "plogtest.h"

#define BATCHES 200
#define PER_BATCH 4
#define RECORDS (BATCHES * PER_BATCH)

/* Record o's timestamp as append_all writes it. */
static int64_t ts_of(int64_t o)
{
    return 1000 + 10 * (o / PER_BATCH) + o % PER_BATCH;
}

/* The first offset at or after ts by brute force; RECORDS when none. */
static int64_t expected(int64_t ts)
{
    for (int64_t o = 0; o < RECORDS; o++)
        if (ts_of(o) >= ts)
            return o;
    return RECORDS;
}

static struct pulse_plog *open_log(const char *dir, uint64_t seg, uint32_t interval)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pt_cfg(&cfg, seg, interval, NULL);
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    return plog;
}

static void append_all(struct pulse_plog *plog)
{
    struct pulse_buf b;
    pulse_buf_init(&b, 1 << 20);
    for (int i = 0; i < BATCHES; i++) {
        int64_t base = -1;
        size_t len = pt_batch(&b, (uint64_t)i * PER_BATCH, PER_BATCH, 40, ts_of((int64_t)i * PER_BATCH));
        ck_assert_int_eq(pulse_plog_append(plog, b.data, len, &base), PULSE_OK);
        ck_assert_int_eq(base, (int64_t)i * PER_BATCH);
    }
    pulse_buf_fini(&b);
}

static void check_every_time(struct pulse_plog *plog)
{
    for (int64_t ts = 900; ts <= ts_of(RECORDS - 1) + 20; ts += 3) {
        int64_t off = -1;
        ck_assert_int_eq(pulse_plog_offset_for_time(plog, ts, &off), PULSE_OK);
        ck_assert_msg(off == expected(ts), "ts %lld: got %lld, want %lld", (long long)ts, (long long)off,
                      (long long)expected(ts));
    }
}

static int segments_of(struct pulse_plog *plog)
{
    struct pulse_plog_stats s;
    pulse_plog_get_stats(plog, &s);
    return (int)s.segments;
}

START_TEST(test_first_record_at_or_after_a_time_across_segments)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = open_log(dir, 4096, 256);
    append_all(plog);
    ck_assert_int_gt(segments_of(plog), 5);
    check_every_time(plog);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_time_lookup_with_an_index_entry_per_batch_and_one_segment)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = open_log(dir, 1 << 20, 1);
    append_all(plog);
    ck_assert_int_eq(segments_of(plog), 1);
    check_every_time(plog);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_time_lookup_after_reopen_uses_the_loaded_index)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = open_log(dir, 4096, 512);
    append_all(plog);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = open_log(dir, 4096, 512);
    check_every_time(plog);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_time_lookup_on_an_empty_log_is_its_end)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = open_log(dir, 4096, 256);
    int64_t off = -1;
    ck_assert_int_eq(pulse_plog_offset_for_time(plog, 0, &off), PULSE_OK);
    ck_assert_int_eq(off, 0);
    ck_assert_int_eq(pulse_plog_offset_for_time(plog, INT64_MAX, &off), PULSE_OK);
    ck_assert_int_eq(off, 0);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

static Suite *plogtime_suite(void)
{
    Suite *s = suite_create("plogtime");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_first_record_at_or_after_a_time_across_segments);
    tcase_add_test(tc, test_time_lookup_with_an_index_entry_per_batch_and_one_segment);
    tcase_add_test(tc, test_time_lookup_after_reopen_uses_the_loaded_index);
    tcase_add_test(tc, test_time_lookup_on_an_empty_log_is_its_end);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    pulse_log_set_level(PULSE_LOG_ERROR);
    SRunner *sr = srunner_create(plogtime_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
