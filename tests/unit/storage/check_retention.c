/* SPDX-License-Identifier: MIT */
/* check_retention.c - the retention plan (pure) and its application to a real
 * partition log: whole sealed segments, oldest first, never the active one,
 * offsets unchanged, reads below the new start begin at it, and a slice taken
 * before the trim still reads the deleted segment's bytes. */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "storage/batch.h"
#include "storage/plog.h"
#include "storage/retention.h"

static struct pulse_segment_info seg(int64_t base, uint64_t size, int64_t max_ts, bool active)
{
    struct pulse_segment_info s = {
        .base_offset = base, .next_offset = base + 10, .size_bytes = size, .max_timestamp = max_ts, .active = active};
    return s;
}

START_TEST(test_plan_never_removes_the_active_segment)
{
    struct pulse_segment_info segs[] = {seg(0, 100, 1, true)};
    struct pulse_retention_policy pol = {.max_age_ms = 1, .max_bytes = 1};
    ck_assert_uint_eq(pulse_retention_plan(segs, 1, &pol, 1000000), 0);
}
END_TEST

START_TEST(test_plan_by_time_removes_only_an_expired_prefix)
{
    /* now = 10000, max age 1000 -> cutoff 9000 */
    struct pulse_segment_info segs[] = {seg(0, 100, 5000, false), seg(10, 100, 9500, false), seg(20, 100, 100, false),
                                        seg(30, 100, 9999, true)};
    struct pulse_retention_policy pol = {.max_age_ms = 1000, .max_bytes = 0};
    /* The third segment is old but sits behind a young one: only a prefix goes. */
    ck_assert_uint_eq(pulse_retention_plan(segs, 4, &pol, 10000), 1);
}
END_TEST

START_TEST(test_plan_by_time_keeps_a_record_exactly_max_age_old)
{
    struct pulse_segment_info segs[] = {seg(0, 100, 9000, false), seg(10, 100, 9999, true)};
    struct pulse_retention_policy pol = {.max_age_ms = 1000, .max_bytes = 0};
    ck_assert_uint_eq(pulse_retention_plan(segs, 2, &pol, 10000), 0);
    ck_assert_uint_eq(pulse_retention_plan(segs, 2, &pol, 10001), 1);
}
END_TEST

START_TEST(test_plan_by_size_counts_the_active_segment_in_the_total)
{
    struct pulse_segment_info segs[] = {seg(0, 100, 1, false), seg(10, 100, 1, false), seg(20, 100, 1, false),
                                        seg(30, 150, 1, true)};
    struct pulse_retention_policy pol = {.max_age_ms = 0, .max_bytes = 260};
    /* total 450: drop 100 -> 350, drop 100 -> 250 <= 260 */
    ck_assert_uint_eq(pulse_retention_plan(segs, 4, &pol, 0), 2);
    pol.max_bytes = 100; /* cannot get under it: all sealed go, active stays */
    ck_assert_uint_eq(pulse_retention_plan(segs, 4, &pol, 0), 3);
    pol.max_bytes = 450; /* exactly at the limit: nothing */
    ck_assert_uint_eq(pulse_retention_plan(segs, 4, &pol, 0), 0);
}
END_TEST

START_TEST(test_plan_takes_the_larger_of_both_limits)
{
    struct pulse_segment_info segs[] = {seg(0, 100, 10, false), seg(10, 100, 10, false), seg(20, 100, 5000, false),
                                        seg(30, 100, 5000, true)};
    struct pulse_retention_policy pol = {.max_age_ms = 1000, .max_bytes = 350};
    ck_assert_uint_eq(pulse_retention_plan(segs, 4, &pol, 5500), 2);
    pol.max_bytes = 150;
    ck_assert_uint_eq(pulse_retention_plan(segs, 4, &pol, 5500), 3);
}
END_TEST

START_TEST(test_plan_with_both_limits_off_removes_nothing)
{
    struct pulse_segment_info segs[] = {seg(0, 100, 0, false), seg(10, 100, 0, true)};
    struct pulse_retention_policy pol = {0, 0};
    ck_assert_uint_eq(pulse_retention_plan(segs, 2, &pol, INT64_MAX / 2), 0);
}
END_TEST

/* ---- against a real log ---------------------------------------------- */

static char dir[256];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/pulse-retention-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static int64_t append_one(struct pulse_plog *plog, int64_t ts, size_t value_len)
{
    uint8_t value[2048];
    memset(value, 'v', sizeof value);
    struct pulse_record_in rec = {
        .timestamp = ts, .key = NULL, .key_len = PULSE_BATCH_NULL, .value = value, .value_len = (uint32_t)value_len};
    struct pulse_buf b;
    pulse_buf_init(&b, 1 << 20);
    ck_assert_int_eq(pulse_batch_encode(&b, 0, 0, &rec, 1), PULSE_OK);
    int64_t base = -1;
    ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
    pulse_buf_fini(&b);
    return base;
}

static struct pulse_plog *open_small(void)
{
    struct pulse_plog_config cfg;
    pulse_plog_config_init(&cfg);
    cfg.segment_max_bytes = 1024;
    struct pulse_plog *plog = NULL;
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    return plog;
}

START_TEST(test_apply_by_time_trims_old_segments_and_keeps_offsets)
{
    make_dir();
    struct pulse_plog *plog = open_small();
    /* ~600-byte batches: one per 1024-byte segment. Timestamps 1000..1009. */
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(append_one(plog, 1000 + i, 500), i);
    struct pulse_plog_stats before;
    pulse_plog_get_stats(plog, &before);
    ck_assert_uint_eq(before.segments, 10);

    struct pulse_retention_policy pol = {.max_age_ms = 100, .max_bytes = 0};
    struct pulse_retention_result res;
    /* now = 1105: cutoff 1005, segments with ts 1000..1004 go */
    ck_assert_int_eq(pulse_retention_apply(plog, &pol, 1105, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_removed, 5);
    ck_assert_int_eq(res.new_log_start, 5);
    ck_assert_int_eq(pulse_plog_log_start(plog), 5);

    /* Offsets never change; a read below the start begins at it. */
    struct pulse_slice sl;
    ck_assert_int_eq(pulse_plog_slice(plog, 0, 1 << 20, false, &sl), PULSE_OK);
    ck_assert_int_eq(sl.start_offset, 5);
    ck_assert_uint_gt(sl.len, 0);
    ck_assert_int_eq(append_one(plog, 2000, 10), 10);

    /* The trim is durable: a reopen sees the same start. */
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = open_small();
    ck_assert_int_eq(pulse_plog_log_start(plog), 5);
    ck_assert_int_eq(pulse_plog_high_watermark(plog), 11);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    remove_dir();
}
END_TEST

START_TEST(test_apply_by_size_leaves_the_log_within_the_limit)
{
    make_dir();
    struct pulse_plog *plog = open_small();
    for (int i = 0; i < 8; i++)
        append_one(plog, 1000, 500);
    struct pulse_plog_stats st;
    pulse_plog_get_stats(plog, &st);
    uint64_t per = st.size_bytes / st.segments;
    struct pulse_retention_policy pol = {.max_age_ms = 0, .max_bytes = (int64_t)(per * 3)};
    struct pulse_retention_result res;
    ck_assert_int_eq(pulse_retention_apply(plog, &pol, 0, &res), PULSE_OK);
    pulse_plog_get_stats(plog, &st);
    ck_assert_uint_le(st.size_bytes, per * 3);
    ck_assert_uint_eq(st.segments, 3);
    ck_assert_uint_eq(res.segments_removed, 5);
    ck_assert_uint_eq(res.bytes_removed, per * 5);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    remove_dir();
}
END_TEST

struct apply_arg {
    struct pulse_plog *plog;
    struct pulse_retention_policy pol;
    struct pulse_retention_result res;
    pulse_status_t st;
};

static void *apply_main(void *p)
{
    struct apply_arg *a = p;
    a->st = pulse_retention_apply(a->plog, &a->pol, 0, &a->res);
    return NULL;
}

/* The segment list changes between the plan and the trim (here another
 * trim; in a broker, an in-process reopen or a compaction merge): the trim
 * still removes exactly the offsets the plan chose, never the segment that
 * has moved into the planned position. */
START_TEST(test_apply_removes_only_what_it_planned_when_the_list_changes_before_the_trim)
{
    make_dir();
    struct pulse_plog *plog = open_small();
    for (int i = 0; i < 6; i++)
        append_one(plog, 1000, 500);
    struct pulse_plog_stats st;
    pulse_plog_get_stats(plog, &st);
    ck_assert_uint_eq(st.segments, 6);
    uint64_t per = st.size_bytes / st.segments;
    /* The plan: the oldest segment goes (offset 0), offsets from 1 stay. */
    struct apply_arg a = {.plog = plog, .pol = {.max_age_ms = 0, .max_bytes = (int64_t)(per * 5)}};
    pthread_t th;
    ck_assert_int_eq(setenv("PULSE_FAILPOINT_DELAY", "retention_after_plan:400", 1), 0);
    ck_assert_int_eq(pthread_create(&th, NULL, apply_main, &a), 0);
    usleep(150 * 1000); /* the plan is made; its trim waits */
    size_t removed = 0;
    struct pulse_segment_info *segs = NULL;
    size_t n = 0;
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    ck_assert_int_eq(pulse_plog_trim(plog, segs[1].base_offset, &removed), PULSE_OK);
    pulse_free(segs);
    ck_assert_uint_eq(removed, 1);
    pthread_join(th, NULL);
    unsetenv("PULSE_FAILPOINT_DELAY");
    ck_assert_int_eq(a.st, PULSE_OK);
    /* Offset 0 is gone already: nothing else was the plan's to remove. */
    ck_assert_uint_eq(a.res.segments_removed, 0);
    ck_assert_int_eq(pulse_plog_log_start(plog), 1);
    pulse_plog_get_stats(plog, &st);
    ck_assert_uint_eq(st.segments, 5);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    remove_dir();
}
END_TEST

START_TEST(test_a_slice_taken_before_a_trim_still_reads_its_bytes)
{
    make_dir();
    struct pulse_plog *plog = open_small();
    for (int i = 0; i < 4; i++)
        append_one(plog, 1000, 500);
    struct pulse_slice sl;
    ck_assert_int_eq(pulse_plog_slice(plog, 0, 1 << 20, true, &sl), PULSE_OK);
    ck_assert_int_ge(sl.fd, 0);
    uint8_t *before = pulse_malloc(sl.len);
    ck_assert_int_eq(pread(sl.fd, before, sl.len, (off_t)sl.pos), (ssize_t)sl.len);

    struct pulse_retention_policy pol = {.max_age_ms = 1, .max_bytes = 0};
    struct pulse_retention_result res;
    ck_assert_int_eq(pulse_retention_apply(plog, &pol, 1000000, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_removed, 3);

    uint8_t *after = pulse_malloc(sl.len);
    ck_assert_int_eq(pread(sl.fd, after, sl.len, (off_t)sl.pos), (ssize_t)sl.len);
    ck_assert_int_eq(memcmp(before, after, sl.len), 0);
    struct pulse_batch_header hdr;
    ck_assert_int_eq(pulse_batch_verify(after, sl.len, &hdr, NULL), PULSE_OK);
    ck_assert_int_eq(hdr.base_offset, 0);
    close(sl.fd);
    pulse_free(before);
    pulse_free(after);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    remove_dir();
}
END_TEST

START_TEST(test_a_crash_mid_trim_leaves_a_consistent_prefix_removed)
{
    make_dir();
    struct pulse_plog *plog = open_small();
    for (int i = 0; i < 6; i++)
        append_one(plog, 1000 + i, 500);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);

    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("PULSE_FAILPOINT", "plog_trim_mid", 1);
        struct pulse_plog *child = open_small();
        struct pulse_retention_policy pol = {.max_age_ms = 1, .max_bytes = 0};
        (void)pulse_retention_apply(child, &pol, 1000000, NULL); /* exits at the failpoint */
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 99);

    /* The first segment is gone, the second and later are whole. */
    plog = open_small();
    ck_assert_int_eq(pulse_plog_log_start(plog), 1);
    ck_assert_int_eq(pulse_plog_high_watermark(plog), 6);
    struct pulse_buf b;
    pulse_buf_init(&b, 1 << 20);
    int64_t off = 0;
    int seen = 0;
    for (;;) {
        struct pulse_slice info;
        pulse_buf_reset(&b);
        ck_assert_int_eq(pulse_plog_read(plog, off, 1 << 20, &b, &info), PULSE_OK);
        if (b.len == 0)
            break;
        struct pulse_batch_header hdr;
        ck_assert_int_eq(pulse_batch_verify(b.data, b.len, &hdr, NULL), PULSE_OK);
        ck_assert_int_eq(hdr.base_offset, 1 + seen);
        seen++;
        off = info.next_offset;
    }
    ck_assert_int_eq(seen, 5);
    ck_assert_int_eq(append_one(plog, 5000, 10), 6);
    /* No index is left without its data file. */
    char path[512];
    snprintf(path, sizeof path, "%s/00000000000000000000.index", dir);
    ck_assert_int_ne(access(path, F_OK), 0);
    pulse_buf_fini(&b);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    remove_dir();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("retention");
    TCase *plan = tcase_create("plan");
    tcase_add_test(plan, test_plan_never_removes_the_active_segment);
    tcase_add_test(plan, test_plan_by_time_removes_only_an_expired_prefix);
    tcase_add_test(plan, test_plan_by_time_keeps_a_record_exactly_max_age_old);
    tcase_add_test(plan, test_plan_by_size_counts_the_active_segment_in_the_total);
    tcase_add_test(plan, test_plan_takes_the_larger_of_both_limits);
    tcase_add_test(plan, test_plan_with_both_limits_off_removes_nothing);
    suite_add_tcase(s, plan);
    TCase *apply = tcase_create("apply");
    tcase_add_test(apply, test_apply_by_time_trims_old_segments_and_keeps_offsets);
    tcase_add_test(apply, test_apply_by_size_leaves_the_log_within_the_limit);
    tcase_add_test(apply, test_a_slice_taken_before_a_trim_still_reads_its_bytes);
    tcase_add_test(apply, test_apply_removes_only_what_it_planned_when_the_list_changes_before_the_trim);
    tcase_add_test(apply, test_a_crash_mid_trim_leaves_a_consistent_prefix_removed);
    suite_add_tcase(s, apply);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
