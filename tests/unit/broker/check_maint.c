/* SPDX-License-Identifier: MIT */
/*
 * check_maint.c - the broker's maintenance thread: retention trims whole old
 * segments of cleanup=delete topics (by size and by age), a fetch below the
 * new log start begins at it, offsets never move, a retention change takes
 * effect at the next pass, compacted topics are compacted rather than
 * trimmed, the thread really runs on its interval and stops on close, and a
 * long pass holds only the topic it works on: a delete of that topic waits
 * for it without holding up cursor commits, creates or other deletes.
 */
#include <check.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/broker_int.h"
#include "broker/maint.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "storage/batch.h"
#include "faultio.h"
#include "localtest.h"

static char tmpdir[256];

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void setup(void)
{
    pulse_log_set_level(PULSE_LOG_ERROR);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/check_maint.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static struct pulse_broker *open_broker_io(int64_t retention_interval_ms, int64_t compaction_interval_ms,
                                           const struct pulse_io *io)
{
    struct pulse_broker_config cfg;
    pulse_broker_config_init(&cfg);
    cfg.io = io;
    cfg.data_dir = tmpdir;
    cfg.retention_interval_ms = retention_interval_ms;
    cfg.compaction_interval_ms = compaction_interval_ms;
    cfg.compaction_tombstone_retention_ms = 0;
    cfg.compaction_min_gain_ratio = 0.0;
    struct pulse_broker *b = NULL;
    char err[256] = "";
    pulse_status_t st = pulse_broker_open(&cfg, &b, NULL, err, sizeof err);
    ck_assert_msg(st == PULSE_OK, "open: %s (%s)", pulse_status_name(st), err);
    return b;
}

static struct pulse_broker *open_broker(int64_t retention_interval_ms, int64_t compaction_interval_ms)
{
    return open_broker_io(retention_interval_ms, compaction_interval_ms, NULL);
}

static void create(struct pulse_broker *b, const char *name, int cleanup, int64_t retention_ms, int64_t retention_bytes)
{
    struct pulse_topic_spec spec = {.name = name,
                                    .partitions = 1,
                                    .cleanup = cleanup,
                                    .retention_ms = retention_ms,
                                    .retention_bytes = retention_bytes,
                                    .segment_bytes = 1024};
    char err[256] = "";
    pulse_status_t st = pulse_broker_topic_create(b, &spec, NULL, err, sizeof err);
    ck_assert_msg(st == PULSE_OK, "create: %s (%s)", pulse_status_name(st), err);
}

/* One publish of one record: key (nullable), value, explicit timestamp
 * (< 0: the broker's clock). Returns its offset. */
static int64_t publish(struct pulse_broker *b, const char *topic, const char *key, const char *value, int64_t ts)
{
    struct pulse_publish_record r;
    memset(&r, 0, sizeof r);
    r.partition = -1;
    r.key = (const uint8_t *)key;
    r.key_len = key ? strlen(key) : 0;
    r.value = (const uint8_t *)value;
    r.value_len = value ? strlen(value) : 0;
    if (ts >= 0) {
        r.has_timestamp = true;
        r.timestamp = ts;
    }
    struct pulse_offset_pair off;
    char err[256] = "";
    pulse_status_t st = pulse_broker_publish_wait(b, topic, &r, 1, &off, err, sizeof err);
    ck_assert_msg(st == PULSE_OK, "publish: %s (%s)", pulse_status_name(st), err);
    return off.offset;
}

static struct pulse_partition_stats stats_of(struct pulse_broker *b, const char *topic)
{
    struct pulse_topic_info *info = NULL;
    ck_assert_int_eq(pulse_broker_topic_get(b, topic, true, &info), PULSE_OK);
    struct pulse_partition_stats s = info->stats[0];
    pulse_topic_info_free(info);
    return s;
}

/* Values of every record from offset, in order, as "offset=value" lines. */
static void read_all(struct pulse_broker *b, const char *topic, int64_t from, struct pulse_buf *out)
{
    int64_t off = from;
    for (;;) {
        struct pulse_buf data;
        struct pulse_slice info;
        pulse_buf_init(&data, 1 << 24);
        ck_assert_int_eq(log_read(b, topic, 0, off, 1 << 20, &data, &info), PULSE_OK);
        if (data.len == 0) {
            pulse_buf_fini(&data);
            break;
        }
        size_t pos = 0;
        while (pos < data.len) {
            struct pulse_batch_iter it;
            struct pulse_record_view rv;
            ck_assert_int_eq(pulse_batch_iter_init(&it, data.data + pos, data.len - pos), PULSE_OK);
            while (pulse_batch_iter_next(&it, &rv) == PULSE_OK) {
                if (rv.offset < info.start_offset)
                    continue;
                pulse_buf_printf(out, "%lld=%.*s;", (long long)rv.offset, rv.value ? (int)rv.value_len : 4,
                                 rv.value ? (const char *)rv.value : "null");
            }
            pos += pulse_batch_total_size(&it.hdr);
        }
        off = info.next_offset;
        pulse_buf_fini(&data);
    }
    pulse_buf_append_u8(out, 0);
}

static const char big[] = "0123456789012345678901234567890123456789012345678901234567890123456789"
                          "0123456789012345678901234567890123456789012345678901234567890123456789"
                          "0123456789012345678901234567890123456789012345678901234567890123456789"
                          "0123456789012345678901234567890123456789012345678901234567890123456789"
                          "0123456789012345678901234567890123456789012345678901234567890123456789";

START_TEST(test_retention_by_size_trims_old_segments_and_fetch_starts_at_log_start)
{
    struct pulse_broker *b = open_broker(0, 0);
    create(b, "logs", PULSE_CLEANUP_DELETE, 0, 2048);
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(publish(b, "logs", NULL, big, -1), i);
    struct pulse_partition_stats before = stats_of(b, "logs");
    ck_assert_uint_gt(before.segments, 4);
    ck_assert_uint_gt(before.size_bytes, 2048);

    pulse_broker_maint_retention_pass(pulse_local_of(b)->maint);

    struct pulse_partition_stats after = stats_of(b, "logs");
    ck_assert_uint_le(after.size_bytes, 2048);
    ck_assert_int_gt(after.log_start_offset, 0);
    ck_assert_int_eq(after.high_watermark, 20);
    /* Offsets never move: a fetch from 0 starts at the new log start and
     * returns the records with their original offsets. */
    struct pulse_slice sl;
    ck_assert_int_eq(log_slice(b, "logs", 0, 0, 1 << 20, &sl), PULSE_OK);
    ck_assert_int_eq(sl.start_offset, after.log_start_offset);
    struct pulse_buf got;
    pulse_buf_init(&got, 1 << 20);
    read_all(b, "logs", 0, &got);
    char want[64];
    snprintf(want, sizeof want, "%lld=0123", (long long)after.log_start_offset);
    ck_assert_ptr_nonnull(strstr((const char *)got.data, want));
    /* Nothing below the log start comes back. */
    ck_assert_ptr_eq(strstr((const char *)got.data, want), (const char *)got.data);
    pulse_buf_fini(&got);
    /* Appends continue at the old end. */
    ck_assert_int_eq(publish(b, "logs", NULL, "after", -1), 20);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_retention_by_age_uses_record_timestamps_and_patch_applies_next_pass)
{
    struct pulse_broker *b = open_broker(0, 0);
    create(b, "aged", PULSE_CLEANUP_DELETE, 0, 0); /* no limits yet */
    int64_t now = pulse_clock_wall_ms();
    /* Ten old records (two days ago), then ten fresh ones. */
    for (int i = 0; i < 10; i++)
        publish(b, "aged", NULL, big, now - 2 * 86400000LL);
    for (int i = 0; i < 10; i++)
        publish(b, "aged", NULL, big, now);
    pulse_broker_maint_retention_pass(pulse_local_of(b)->maint);
    ck_assert_int_eq(stats_of(b, "aged").log_start_offset, 0); /* retention off */

    ck_assert_int_eq(pulse_broker_topic_set_retention(b, "aged", 86400000LL, -1, NULL), PULSE_OK);
    pulse_broker_maint_retention_pass(pulse_local_of(b)->maint);
    struct pulse_partition_stats s = stats_of(b, "aged");
    /* Every segment holding only old records is gone, nothing fresh is. */
    ck_assert_int_ge(s.log_start_offset, 8);
    ck_assert_int_le(s.log_start_offset, 10);
    ck_assert_int_eq(s.high_watermark, 20);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_the_thread_trims_on_its_interval_and_the_trim_survives_restart)
{
    struct pulse_broker *b = open_broker(20, 0);
    create(b, "auto", PULSE_CLEANUP_DELETE, 0, 1500);
    for (int i = 0; i < 12; i++)
        publish(b, "auto", NULL, big, -1);
    int64_t start = 0;
    /* Bounded wait for the background pass (not a timing assertion: the
     * bound only keeps a broken thread from hanging the test). */
    for (int i = 0; i < 500 && start == 0; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        start = stats_of(b, "auto").log_start_offset;
    }
    ck_assert_int_gt(start, 0);
    pulse_broker_close(b);
    b = open_broker(0, 0);
    ck_assert_int_ge(stats_of(b, "auto").log_start_offset, start);
    ck_assert_int_eq(stats_of(b, "auto").high_watermark, 12);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_retention_leaves_compacted_topics_to_compaction)
{
    struct pulse_broker *b = open_broker(0, 0);
    create(b, "table", PULSE_CLEANUP_COMPACT, 1, 1024);
    for (int i = 0; i < 12; i++)
        publish(b, "table", "k", big, 1);
    pulse_broker_maint_retention_pass(pulse_local_of(b)->maint);
    ck_assert_int_eq(stats_of(b, "table").log_start_offset, 0);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_compaction_pass_keeps_the_newest_value_of_each_key_at_its_offset)
{
    struct pulse_broker *b = open_broker(0, 0);
    create(b, "table", PULSE_CLEANUP_COMPACT, 0, 0);
    char v[300];
    /* keys a..d updated in turn, 40 records over many 1 KiB segments */
    for (int i = 0; i < 40; i++) {
        char key[2] = {(char)('a' + i % 4), 0};
        snprintf(v, sizeof v, "%s-%02d-%.200s", key, i, big);
        ck_assert_int_eq(publish(b, "table", key, v, -1), i);
    }
    /* A tombstone for d (offset 40) and a keyless record (41). */
    ck_assert_int_eq(publish(b, "table", "d", NULL, -1), 40);
    ck_assert_int_eq(publish(b, "table", NULL, "keyless", -1), 41);
    struct pulse_partition_stats before = stats_of(b, "table");

    for (int pass = 0; pass < 20; pass++)
        pulse_broker_maint_compaction_pass(pulse_local_of(b)->maint);

    struct pulse_partition_stats after = stats_of(b, "table");
    ck_assert_uint_lt(after.size_bytes, before.size_bytes);
    ck_assert_int_eq(after.high_watermark, 42);
    struct pulse_buf got;
    pulse_buf_init(&got, 1 << 20);
    read_all(b, "table", 0, &got);
    const char *s = (const char *)got.data;
    /* Newest values survive at their original offsets... */
    ck_assert_ptr_nonnull(strstr(s, "36=a-36"));
    ck_assert_ptr_nonnull(strstr(s, "37=b-37"));
    ck_assert_ptr_nonnull(strstr(s, "38=c-38"));
    ck_assert_ptr_nonnull(strstr(s, "41=keyless"));
    /* ...and older ones are gone from the compacted (sealed) part. */
    ck_assert_ptr_null(strstr(s, "0=a-00"));
    ck_assert_ptr_null(strstr(s, "1=b-01"));
    ck_assert_ptr_null(strstr(s, "3=d-03"));
    pulse_buf_fini(&got);

    struct pulse_buf m;
    pulse_buf_init(&m, 1 << 20);
    ck_assert_int_eq(pulse_broker_metrics(b, &m), PULSE_OK);
    pulse_buf_append_u8(&m, 0);
    ck_assert_ptr_nonnull(strstr((const char *)m.data, "pulse_compaction_passes_total 20"));
    ck_assert_ptr_null(strstr((const char *)m.data, "pulse_compaction_bytes_reclaimed_total 0\n"));
    pulse_buf_fini(&m);
    pulse_broker_close(b);
}
END_TEST

/* ---- a long pass holds one topic ------------------------------------ */

/* The compaction thread's disk is slow: every fdatasync it makes (the
 * rewritten segments) first sleeps SLOW_SYNC_MS, so one pass over a topic
 * with many superseded segments takes seconds, for real, while every other
 * thread's syncs stay fast. */
#define SLOW_SYNC_MS 300

struct slow_pass {
    struct pulse_broker *b;
    pthread_t thread;
    atomic_bool started; /* thread is set (by the thread itself) */
    atomic_bool in_pass; /* the pass reached its first slow sync */
    _Atomic int64_t start_us;
    _Atomic int64_t end_us;
};

static void slow_sync_hook(void *arg)
{
    struct slow_pass *sp = arg;
    if (!atomic_load(&sp->started) || !pthread_equal(pthread_self(), sp->thread))
        return;
    atomic_store(&sp->in_pass, true);
    usleep(SLOW_SYNC_MS * 1000);
}

static void *slow_pass_main(void *arg)
{
    struct slow_pass *sp = arg;
    sp->thread = pthread_self();
    atomic_store(&sp->started, true);
    atomic_store(&sp->start_us, pulse_clock_mono_us());
    pulse_broker_maint_compaction_pass(pulse_local_of(sp->b)->maint);
    atomic_store(&sp->end_us, pulse_clock_mono_us());
    return NULL;
}

struct timed_op {
    struct pulse_broker *b;
    const char *name;
    pulse_status_t st;
    _Atomic int64_t end_us;
};

static void async_done(void *arg, pulse_status_t st)
{
    struct timed_op *op = arg;
    op->st = st;
    atomic_store(&op->end_us, pulse_clock_mono_us());
}

/* The delete's end is taken in its completion, on the admin thread, not
 * when a waiting caller gets to run again: on a busy machine the admin
 * thread may finish the create queued behind it before then. */
static void *delete_main(void *arg)
{
    struct timed_op *op = arg;
    pulse_status_t st = pulse_broker_topic_delete_async(op->b, op->name, async_done, op);
    if (st != PULSE_OK) {
        op->st = st;
        atomic_store(&op->end_us, pulse_clock_mono_us());
    }
    while (atomic_load(&op->end_us) == 0)
        usleep(1000);
    return NULL;
}

START_TEST(test_a_delete_waiting_behind_a_long_compaction_blocks_no_other_request)
{
    struct faultio *fio = faultio_create();
    ck_assert_ptr_nonnull(fio);
    struct pulse_broker *b = open_broker_io(0, 0, faultio_io(fio));
    char v[300];
    char err[256];

    /* "cmp": 60 records over 1 KiB segments of about three; every third
     * has a key of its own (it survives), the others rewrite two keys, so
     * each sealed segment keeps one record and is rewritten (fdatasync),
     * not just deleted. "other" and "zzz": bystanders. */
    create(b, "cmp", PULSE_CLEANUP_COMPACT, 0, 0);
    create(b, "other", PULSE_CLEANUP_DELETE, 0, 0);
    create(b, "zzz", PULSE_CLEANUP_DELETE, 0, 0);
    for (int i = 0; i < 60; i++) {
        char key[16];
        snprintf(key, sizeof key, i % 3 == 0 ? "u%d" : "a%d", i % 3 == 0 ? i : i % 2);
        snprintf(v, sizeof v, "%s-%02d-%.200s", key, i, big);
        publish(b, "cmp", key, v, -1);
    }
    publish(b, "other", NULL, "x", -1);

    struct slow_pass sp = {.b = b};
    faultio_set_sync_hook(fio, slow_sync_hook, &sp);
    pthread_t pass_thread;
    ck_assert_int_eq(pthread_create(&pass_thread, NULL, slow_pass_main, &sp), 0);
    while (!atomic_load(&sp.in_pass)) {
        ck_assert_msg(atomic_load(&sp.end_us) == 0, "the compaction pass ended without rewriting a segment");
        usleep(1000);
    }

    /* The pass holds "cmp": its delete must wait for it... */
    struct timed_op del = {.b = b, .name = "cmp"};
    pthread_t del_thread;
    ck_assert_int_eq(pthread_create(&del_thread, NULL, delete_main, &del), 0);
    struct pulse_topic_info *info = NULL;
    while (pulse_broker_topic_get(b, "cmp", false, &info) == PULSE_OK) {
        pulse_topic_info_free(info);
        info = NULL;
        usleep(1000);
    }
    /* ...and a create of the same name waits behind the delete. */
    struct pulse_topic_spec spec = {.name = "cmp",
                                    .partitions = 1,
                                    .cleanup = PULSE_CLEANUP_COMPACT,
                                    .retention_ms = 0,
                                    .retention_bytes = 0,
                                    .segment_bytes = 1024};
    struct timed_op recreate = {.b = b, .name = "cmp"};
    ck_assert_int_eq(pulse_broker_topic_create_async(b, &spec, NULL, async_done, &recreate, err, sizeof err), PULSE_OK);

    /* Meanwhile unrelated admin work goes through at once. */
    int64_t t0 = pulse_clock_mono_us();
    struct pulse_cursor c;
    memset(&c, 0, sizeof c);
    snprintf(c.topic, sizeof c.topic, "other");
    c.offset = 1;
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "reader", &c, 1, err, sizeof err), PULSE_OK);
    int64_t t1 = pulse_clock_mono_us();
    create(b, "fresh", PULSE_CLEANUP_DELETE, 0, 0);
    int64_t t2 = pulse_clock_mono_us();
    /* The pass has not reached "zzz"; it holds no reference to it. */
    ck_assert_int_eq(pulse_broker_topic_delete(b, "zzz"), PULSE_OK);
    int64_t t3 = pulse_clock_mono_us();

    ck_assert_int_eq(pthread_join(del_thread, NULL), 0);
    ck_assert_int_eq(pthread_join(pass_thread, NULL), 0);
    pulse_broker_drain(b);
    int64_t pass_us = atomic_load(&sp.end_us) - atomic_load(&sp.start_us);
    int64_t delete_us = atomic_load(&del.end_us) - t0;
    ck_assert_int_eq(del.st, PULSE_OK);
    ck_assert_int_eq(recreate.st, PULSE_OK);
    /* Order: the unrelated work all finished before the delete did, which
     * had to wait for the pass to let go of "cmp"; the recreate only after
     * the delete. Margins: the slow pass lasts many SLOW_SYNC_MS. */
    ck_assert_int_ge(pass_us, 2 * SLOW_SYNC_MS * 1000);
    ck_assert_msg(t3 < atomic_load(&del.end_us),
                  "commit, create and delete of other topics ended %lld us after the waiting delete",
                  (long long)(t3 - atomic_load(&del.end_us)));
    ck_assert_msg((t1 - t0) * 4 < delete_us, "the commit took %lld us; the delete behind the pass %lld us",
                  (long long)(t1 - t0), (long long)delete_us);
    ck_assert_msg((t2 - t1) * 4 < delete_us, "the create took %lld us; the delete behind the pass %lld us",
                  (long long)(t2 - t1), (long long)delete_us);
    ck_assert_msg((t3 - t2) * 4 < delete_us, "the other delete took %lld us; the one behind the pass %lld us",
                  (long long)(t3 - t2), (long long)delete_us);
    ck_assert_int_ge(atomic_load(&recreate.end_us), atomic_load(&del.end_us));
    ck_assert_int_eq(stats_of(b, "cmp").high_watermark, 0);
    pulse_broker_close(b);
    faultio_destroy(fio);
}
END_TEST

/* The compaction budget settings reach the pass: with a budget of one
 * byte a pass evaluates one segment of the partition (nothing to merge it
 * with), and the next passes go on from there; with the default budget one
 * pass merges what survives of the small segments. */
static uint32_t churn_and_count_after_one_pass(uint64_t budget)
{
    struct pulse_broker_config cfg;
    struct pulse_broker *b = NULL;
    char err[256] = "", v[120];
    uint32_t before, after;

    pulse_broker_config_init(&cfg);
    cfg.data_dir = tmpdir;
    cfg.retention_interval_ms = 0;
    cfg.compaction_interval_ms = 0;
    cfg.compaction_min_gain_ratio = 0.0;
    cfg.compaction_max_bytes_per_pass = budget;
    cfg.compaction_max_pass_ms = 0;
    ck_assert_int_eq(pulse_broker_open(&cfg, &b, NULL, err, sizeof err), PULSE_OK);
    create(b, "churn", PULSE_CLEANUP_COMPACT, 0, 0);
    for (int i = 0; i < 120; i++) {
        char key[2] = {(char)('a' + i % 6), 0};
        snprintf(v, sizeof v, "%s-%03d-%.80s", key, i, big);
        ck_assert_int_eq(publish(b, "churn", key, v, -1), i);
    }
    before = stats_of(b, "churn").segments;
    ck_assert_uint_ge(before, 10);
    pulse_broker_maint_compaction_pass(pulse_local_of(b)->maint);
    after = stats_of(b, "churn").segments;
    ck_assert_uint_le(after, before);
    pulse_broker_close(b);
    return before - after;
}

START_TEST(test_compaction_budget_settings_bound_each_pass)
{
    /* One segment evaluated: at most that one goes (it held only older
     * values), nothing merges. */
    ck_assert_uint_le(churn_and_count_after_one_pass(1), 1);
    teardown();
    setup();
    /* The default: every sealed segment in one pass, the survivors merged
     * into one or two. */
    ck_assert_uint_ge(churn_and_count_after_one_pass(1024ull * 1024 * 1024), 8);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("maint");
    TCase *tc = tcase_create("maint");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_retention_by_size_trims_old_segments_and_fetch_starts_at_log_start);
    tcase_add_test(tc, test_retention_by_age_uses_record_timestamps_and_patch_applies_next_pass);
    tcase_add_test(tc, test_the_thread_trims_on_its_interval_and_the_trim_survives_restart);
    tcase_add_test(tc, test_retention_leaves_compacted_topics_to_compaction);
    tcase_add_test(tc, test_compaction_pass_keeps_the_newest_value_of_each_key_at_its_offset);
    tcase_add_test(tc, test_a_delete_waiting_behind_a_long_compaction_blocks_no_other_request);
    tcase_add_test(tc, test_compaction_budget_settings_bound_each_pass);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
