/* SPDX-License-Identifier: MIT */
/*
 * check_stopclose.c - a stop of many written partitions closes their logs
 * on a pool (pulse_broker_topic_close_all on pulse_syncpool_for) and
 * behaves as one thread closing them in order did: every log is closed
 * exactly once (one snapshot replace each, each snapshot naming the log's
 * end), a close that fails is logged with its partition and cause while
 * every other log still closes, and nothing acknowledged is lost either
 * way. The I/O goes through the faulty I/O layer, which counts the
 * snapshot replaces and fails one of them. Run it under TSan too
 * (.ci/extra).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/broker_int.h"
#include "broker/syncpool.h"
#include "brokertest.h"
#include "common/fsio.h"
#include "common/log.h"
#include "faultio.h"
#include "storage/fdcache.h"
#include "storage/snapshot.h"
#include "plogtest.h"

/* Three topics, 320 partitions: a pool of the closer and 5 more threads. */
#define NTOPICS 3
static const char *const topic_names[NTOPICS] = {"a", "b", "c"};
static const uint32_t topic_parts[NTOPICS] = {64, 128, 128};
#define ALL_PARTS 320u

/* Records in every partition of topic t: each topic's logs end elsewhere. */
static int64_t records_of(int t)
{
    return t + 1;
}

/* A broker on fio whose logs write their snapshot only when they close
 * (no checkpoint comes due within the test). */
static struct pulse_broker *open_on(struct faultio *fio)
{
    struct pulse_broker_config cfg;

    /* The syncs succeed without reaching the disk: what is counted is
     * which logs close, not the device. */
    faultio_set_sync_noop(fio, true);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.checkpoint_interval_ms = 24u * 3600u * 1000u;
    return open_cfg(&cfg, NULL);
}

static void fill_all(struct pulse_broker *b)
{
    static struct pulse_publish_record recs[128];
    struct pulse_offset_pair offs[128];
    char err[256];

    for (int t = 0; t < NTOPICS; t++) {
        create_topic(b, topic_names[t], (int32_t)topic_parts[t]);
        for (int64_t i = 0; i < records_of(t); i++) {
            for (uint32_t p = 0; p < topic_parts[t]; p++)
                recs[p] = rec_kv(NULL, "v", (int32_t)p);
            ck_assert_msg(pulse_broker_publish_wait(b, topic_names[t], recs, topic_parts[t], offs, err, sizeof err) ==
                              PULSE_OK,
                          "publish: %s", err);
        }
    }
}

/* The log end the snapshot of topic/p names, or -1 when it has none. */
static int64_t snapshot_leo(const char *topic, uint32_t p)
{
    struct pulse_snapshot snap;
    char dir[512];

    snprintf(dir, sizeof dir, "%s/topics/%s/%u", tmpdir, topic, p);
    if (pulse_snapshot_read(pulse_io_posix(), dir, &snap) != PULSE_OK)
        return -1;
    return snap.leo;
}

/* Every partition serves its records after a start without the faulty
 * layer, and the start repaired nothing. */
static void check_all_served(void)
{
    struct pulse_broker_open_report rep;
    struct pulse_broker *b = open_default(&rep);

    ck_assert_uint_eq(rep.partitions, ALL_PARTS);
    ck_assert_uint_eq(rep.repaired_partitions, 0);
    for (int t = 0; t < NTOPICS; t++)
        for (uint32_t p = 0; p < topic_parts[t]; p++)
            ck_assert_int_eq(hw_of(b, topic_names[t], p), records_of(t));
    pulse_broker_close(b);
}

START_TEST(test_the_stop_pool_has_a_thread_per_share_up_to_the_bound)
{
    struct pulse_syncpool *pool;

    ck_assert_ptr_null(pulse_syncpool_for(PULSE_BROKER_CLOSE_SHARE - 1, PULSE_BROKER_CLOSE_SHARE,
                                          PULSE_BROKER_CLOSERS)); /* the caller alone */
    pool = pulse_syncpool_for(ALL_PARTS, PULSE_BROKER_CLOSE_SHARE, PULSE_BROKER_CLOSERS);
    ck_assert_ptr_nonnull(pool);
    ck_assert_uint_eq(pulse_syncpool_size(pool), ALL_PARTS / PULSE_BROKER_CLOSE_SHARE + 1);
    ck_assert_uint_gt(pulse_syncpool_size(pool), 2);
    pulse_syncpool_close(pool);
    pool = pulse_syncpool_for(10000, PULSE_BROKER_CLOSE_SHARE, PULSE_BROKER_CLOSERS);
    ck_assert_uint_eq(pulse_syncpool_size(pool), PULSE_BROKER_CLOSERS + 1);
    pulse_syncpool_close(pool);
}
END_TEST

START_TEST(test_a_stop_closes_every_written_log_exactly_once)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker *b = open_on(fio);
    unsigned long renames, dirsyncs;

    fill_all(b);
    renames = faultio_count(fio, FAULTIO_RENAME);
    dirsyncs = faultio_count(fio, FAULTIO_FSYNC_DIR);
    pulse_broker_close(b);
    /* One snapshot replace (rename, directory fsync) per log: a log the
     * pool skipped writes none, one closed twice at once writes two. */
    ck_assert_uint_eq(faultio_count(fio, FAULTIO_RENAME) - renames, ALL_PARTS);
    ck_assert_uint_eq(faultio_count(fio, FAULTIO_FSYNC_DIR) - dirsyncs, ALL_PARTS);
    for (int t = 0; t < NTOPICS; t++)
        for (uint32_t p = 0; p < topic_parts[t]; p++)
            ck_assert_msg(snapshot_leo(topic_names[t], p) == records_of(t), "%s/%u: snapshot leo %lld", topic_names[t],
                          p, (long long)snapshot_leo(topic_names[t], p));
    faultio_destroy(fio);
    check_all_served();
}
END_TEST

/* Topics whose logs a test opened itself (no broker, so nothing but
 * pulse_broker_topic_close_all touches them): topic t has topic_parts[t]
 * partitions, each log holding one batch of 2 records. */
static void hand_topics(struct pulse_broker_topic **topics, const struct pulse_io *io, struct pulse_fdcache *fdc)
{
    struct pulse_plog_config cfg;
    struct pulse_buf b;
    char dir[512];

    pt_cfg(&cfg, 1 << 20, 256, io);
    cfg.fdcache = fdc;
    cfg.checkpoint_interval_ms = 24u * 3600u * 1000u;
    pulse_buf_init(&b, 1 << 16);
    for (int t = 0; t < NTOPICS; t++) {
        topics[t] = pulse_calloc(1, sizeof *topics[t]);
        ck_assert_ptr_nonnull(topics[t]);
        snprintf(topics[t]->name, sizeof topics[t]->name, "%s", topic_names[t]);
        topics[t]->nparts = topic_parts[t];
        topics[t]->plogs = pulse_calloc(topic_parts[t], sizeof *topics[t]->plogs);
        ck_assert_ptr_nonnull(topics[t]->plogs);
        for (uint32_t p = 0; p < topic_parts[t]; p++) {
            int64_t base = -1;
            snprintf(dir, sizeof dir, "%s/topics/%s/%u", tmpdir, topic_names[t], p);
            ck_assert_int_eq(pulse_plog_open(dir, &cfg, &topics[t]->plogs[p], NULL), PULSE_OK);
            size_t len = pt_batch(&b, 0, 2, 16, 1000);
            ck_assert_int_eq(pulse_plog_append(topics[t]->plogs[p], b.data, len, &base), PULSE_OK);
        }
    }
    pulse_buf_fini(&b);
}

START_TEST(test_close_all_closes_each_log_once_and_answers_the_first_failure_in_order)
{
    struct faultio *fio = faultio_create();
    struct pulse_fdcache *fdc = NULL;
    struct pulse_broker_topic *topics[NTOPICS];
    unsigned long renames;

    faultio_set_sync_noop(fio, true);
    ck_assert_int_eq(pulse_fdcache_create(64, &fdc), PULSE_OK);
    hand_topics(topics, faultio_io(fio), fdc);
    renames = faultio_count(fio, FAULTIO_RENAME);
    /* Two closes fail, b/100 after b/40 in (topic, partition) order; the
     * pool may meet them in either order, the answer is b/40's. */
    faultio_fail_path(fio, FAULTIO_RENAME, "*/topics/b/100/snapshot", ENOSPC);
    faultio_fail_path(fio, FAULTIO_FSYNC_DIR, "*/topics/b/40", EIO);
    ck_assert_int_eq(pulse_broker_topic_close_all(topics, NTOPICS), PULSE_IO);
    /* Every log closed by the pool (none left for a destroy), each once. */
    ck_assert_uint_eq(faultio_count(fio, FAULTIO_RENAME) - renames, ALL_PARTS);
    for (int t = 0; t < NTOPICS; t++) {
        for (uint32_t p = 0; p < topic_parts[t]; p++) {
            int64_t leo = snapshot_leo(topic_names[t], p);
            ck_assert_ptr_null(topics[t]->plogs[p]);
            ck_assert_msg(t == 1 && p == 100 ? leo != 2 : leo == 2, "%s/%u: snapshot leo %lld", topic_names[t], p,
                          (long long)leo);
        }
        pulse_free(topics[t]->plogs);
        pulse_free(topics[t]);
    }
    pulse_fdcache_destroy(fdc);
    faultio_destroy(fio);
}
END_TEST

/* Closes b with stderr sent to a file; returns what was logged (static). */
static const char *close_logged(struct pulse_broker *b)
{
    static char text[1 << 16];
    char path[512];
    int saved = dup(STDERR_FILENO);
    int fd;
    ssize_t n;

    snprintf(path, sizeof path, "%s/stderr.txt", tmpdir);
    fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_ge(saved, 0);
    fflush(stderr);
    ck_assert_int_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    pulse_log_set_level(PULSE_LOG_WARN);
    pulse_broker_close(b);
    fflush(stderr);
    ck_assert_int_eq(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    n = pread(fd, text, sizeof text - 1, 0);
    ck_assert_int_ge(n, 0);
    text[n] = '\0';
    close(fd);
    close(saved);
    unlink(path);
    return text;
}

static size_t count_of(const char *text, const char *needle)
{
    size_t n = 0;

    for (const char *at = text; (at = strstr(at, needle)) != NULL; at++)
        n++;
    return n;
}

START_TEST(test_a_failed_close_is_logged_with_its_cause_and_the_others_close)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker *b = open_on(fio);
    unsigned long renames;
    const char *text;

    fill_all(b);
    renames = faultio_count(fio, FAULTIO_RENAME);
    /* b/77's snapshot cannot be put in place. */
    faultio_fail_path(fio, FAULTIO_RENAME, "*/topics/b/77/snapshot", EIO);
    text = close_logged(b);
    ck_assert_msg(count_of(text, "topic b partition 77: close: input/output error") == 1, "logged: %s", text);
    ck_assert_msg(count_of(text, ": close: ") == 1, "logged: %s", text);
    ck_assert_msg(count_of(text, "/topics/b/77/snapshot failed: Input/output error") == 1, "logged: %s", text);
    /* Every log was closed once, the failed one included. */
    ck_assert_uint_eq(faultio_count(fio, FAULTIO_RENAME) - renames, ALL_PARTS);
    for (int t = 0; t < NTOPICS; t++) {
        for (uint32_t p = 0; p < topic_parts[t]; p++) {
            bool failed = t == 1 && p == 77;
            int64_t leo = snapshot_leo(topic_names[t], p);
            ck_assert_msg(failed ? leo != records_of(t) : leo == records_of(t), "%s/%u: snapshot leo %lld",
                          topic_names[t], p, (long long)leo);
        }
    }
    faultio_destroy(fio);
    /* The failed snapshot cost nothing acknowledged: its records were
     * synced before it, and the next start recovers without it. */
    check_all_served();
}
END_TEST

static Suite *stopclose_suite(void)
{
    Suite *s = suite_create("stopclose");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_the_stop_pool_has_a_thread_per_share_up_to_the_bound);
    tcase_add_test(tc, test_close_all_closes_each_log_once_and_answers_the_first_failure_in_order);
    tcase_add_test(tc, test_a_stop_closes_every_written_log_exactly_once);
    tcase_add_test(tc, test_a_failed_close_is_logged_with_its_cause_and_the_others_close);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(stopclose_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
