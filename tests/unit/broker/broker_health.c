/* SPDX-License-Identifier: MIT */
/*
 * broker_health.c - part of check_broker: storage failures and what they
 * fence, in-process healing of a fenced partition, a publish that fails on
 * one of its partitions, and the metrics families that report all this.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/broker_int.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "meta/meta.h"
#include "storage/batch.h"
#include "common/fsio.h"
#include "storage/snapshot.h"
#include "faultio.h"
#include "localtest.h"
#include "brokertest.h"

/* ---- metrics ---------------------------------------------------------- */

START_TEST(test_metrics_expose_the_documented_families)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record recs[3] = {rec_kv(NULL, "a", 0), rec_kv(NULL, "b", 0), rec_kv(NULL, "c", 0)};
    struct pulse_offset_pair offs[3];
    struct pulse_cursor c = cur("m", 0, 1);
    struct pulse_buf out;
    char err[256];
    char *text;

    create_topic(b, "m", 1);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "m", recs, 3, offs, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "cons", &c, 1, err, sizeof err), PULSE_OK);
    pulse_broker_note_fetched(b, "m", 2, 100);
    pulse_buf_init(&out, 1 << 20);
    ck_assert_int_eq(pulse_broker_metrics(b, &out), PULSE_OK);
    ck_assert_int_eq(pulse_buf_append_u8(&out, 0), PULSE_OK);
    text = (char *)out.data;
    const char *want[] = {
        "# TYPE pulse_fsync_total counter\n",
        "# TYPE pulse_fsync_duration_seconds histogram\n",
        "pulse_fsync_duration_seconds_bucket{le=\"+Inf\"} ",
        "pulse_fsync_duration_seconds_count ",
        "pulse_partition_high_watermark{topic=\"m\",partition=\"0\"} 3\n",
        "pulse_partition_log_start_offset{topic=\"m\",partition=\"0\"} 0\n",
        "pulse_partition_size_bytes{topic=\"m\",partition=\"0\"} ",
        "pulse_published_records_total{topic=\"m\"} 3\n",
        "pulse_published_bytes_total{topic=\"m\"} ",
        "pulse_fetched_records_total{topic=\"m\"} 2\n",
        "pulse_fetched_bytes_total{topic=\"m\"} 100\n",
        "pulse_consumer_lag{consumer=\"cons\",topic=\"m\",partition=\"0\"} 2\n",
        "# TYPE pulse_recovery_truncated_bytes_total counter\n",
        "pulse_recovery_duration_seconds ",
        "pulse_retention_segments_deleted_total 0\n",
        "pulse_compaction_passes_total 0\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(text, want[i]) != NULL, "missing: %s", want[i]);
    ck_assert_ptr_null(strstr(text, "pulse_fsync_total 0\n"));
    pulse_buf_fini(&out);
    pulse_broker_close(b);
}
END_TEST

/* ---- storage failures and group commit -------------------------------- */

START_TEST(test_failed_sync_fails_the_publish_and_fences_only_that_partition)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_publish_record rec0 = rec_kv(NULL, "x", 0);
    struct pulse_publish_record rec1 = rec_kv(NULL, "y", 1);
    struct pulse_offset_pair off;
    char err[256];

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 2);
    faultio_fail_nth(fio, FAULTIO_FDATASYNC, 1, EIO);
    /* Never acknowledged: the only sync of these bytes failed. */
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec0, 1, &off, err, sizeof err), PULSE_FENCED);
    ck_assert_int_eq(hw_of(b, "t", 0), 0);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec0, 1, &off, err, sizeof err), PULSE_FENCED);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec1, 1, &off, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(hw_of(b, "t", 1), 1);
    pulse_broker_close(b);
    faultio_destroy(fio);

    /* Restart recovers: the partition takes writes again. */
    b = open_default(NULL);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec0, 1, &off, err, sizeof err), PULSE_OK);
    pulse_broker_close(b);
}
END_TEST

/* A publisher that keeps going through a fence: every acknowledged
 * (offset, value) pair is recorded. */
#define HEAL_MAX_ACKS 4096

struct heal_pub {
    struct pulse_broker *b;
    int id;
    atomic_bool *stop;
    int64_t offsets[HEAL_MAX_ACKS];
    char values[HEAL_MAX_ACKS][32];
    size_t acked;
    size_t fenced;
    size_t other; /* any failure but FENCED */
};

static void *heal_publisher(void *arg)
{
    struct heal_pub *h = arg;
    char err[256];

    for (int i = 0; !atomic_load(h->stop) && h->acked < HEAL_MAX_ACKS; i++) {
        char value[32];
        struct pulse_offset_pair off;
        snprintf(value, sizeof value, "p%d-%d", h->id, i);
        struct pulse_publish_record rec = rec_kv(NULL, value, 0);
        pulse_status_t st = pulse_broker_publish_wait(h->b, "t", &rec, 1, &off, err, sizeof err);
        if (st == PULSE_OK) {
            h->offsets[h->acked] = off.offset;
            memcpy(h->values[h->acked], value, sizeof value);
            h->acked++;
        } else if (st == PULSE_FENCED) {
            h->fenced++;
            usleep(2000);
        } else {
            h->other++;
        }
    }
    return NULL;
}

static bool metrics_have(struct pulse_broker *b, const char *line)
{
    struct pulse_buf m;
    pulse_buf_init(&m, 1 << 24);
    ck_assert_int_eq(pulse_broker_metrics(b, &m), PULSE_OK);
    ck_assert_int_eq(pulse_buf_append(&m, "", 1), PULSE_OK);
    bool found = strstr((const char *)m.data, line) != NULL;
    pulse_buf_fini(&m);
    return found;
}

START_TEST(test_fenced_partition_is_reopened_in_process_with_backoff_and_loses_nothing)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_offset_pair off;
    struct pulse_fenced_partition *fl = NULL;
    size_t nfl = 0;
    char err[256] = "";
    atomic_bool stop;
    static struct heal_pub pubs[2];
    pthread_t th[2];

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.fence_retry_initial_ms = 100;
    cfg.fence_retry_max_ms = 400;
    /* One checkpoint (right after the first sync), then none: the injected
     * failures below are meant for the publishes' syncs and the reopen. */
    cfg.checkpoint_interval_ms = 3600 * 1000;
    b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 2);
    atomic_init(&stop, false);
    for (int i = 0; i < 2; i++) {
        memset(&pubs[i], 0, sizeof pubs[i]);
        pubs[i].b = b;
        pubs[i].id = i;
        pubs[i].stop = &stop;
        ck_assert_int_eq(pthread_create(&th[i], NULL, heal_publisher, &pubs[i]), 0);
    }
    usleep(100 * 1000);
    /* The next fdatasync fails, and so does the first reopen's cut of the
     * bytes it never made durable: the second attempt, after a doubled
     * wait, succeeds. */
    faultio_fail_nth(fio, FAULTIO_FTRUNCATE, 1, EIO);
    faultio_fail_nth(fio, FAULTIO_FDATASYNC, 1, EIO);
    int64_t t0 = pulse_clock_mono_us();
    struct pulse_broker_topic *t = pulse_broker_topic_acquire(pulse_local_of(b), "t");
    while (!pulse_plog_fenced(t->plogs[0])) {
        ck_assert_int_lt(pulse_clock_mono_us() - t0, 5 * 1000 * 1000);
        usleep(1000);
    }
    pulse_broker_topic_release(pulse_local_of(b), t);
    struct pulse_publish_record rec = rec_kv(NULL, "probe", 0);
    /* Fenced for at least 300 ms: 100 ms to the first attempt, which
     * fails, then 200 ms to the second. */
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec, 1, &off, err, sizeof err), PULSE_FENCED);
    ck_assert_msg(strstr(err, "partition 0") != NULL && strstr(err, "fenced") != NULL, "%s", err);
    ck_assert_int_eq(pulse_broker_fenced_list(b, &fl, &nfl), PULSE_OK);
    ck_assert_uint_eq(nfl, 1);
    ck_assert_str_eq(fl[0].topic, "t");
    ck_assert_uint_eq(fl[0].partition, 0);
    pulse_free(fl);
    ck_assert(metrics_have(b, "pulse_partition_fenced{topic=\"t\",partition=\"0\"} 1\n"));
    ck_assert(metrics_have(b, "pulse_partition_fenced{topic=\"t\",partition=\"1\"} 0\n"));
    /* The other partition never stopped. */
    struct pulse_publish_record rec1 = rec_kv(NULL, "other", 1);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec1, 1, &off, err, sizeof err), PULSE_OK);
    /* Back without a restart: one failed attempt, then a reopen. */
    while (!metrics_have(b, "pulse_partition_reopens_total 1\n")) {
        ck_assert_int_lt(pulse_clock_mono_us() - t0, 10 * 1000 * 1000);
        usleep(10 * 1000);
    }
    ck_assert_int_ge(pulse_clock_mono_us() - t0, 300 * 1000); /* 100 ms, then 200 ms */
    ck_assert(metrics_have(b, "pulse_partition_reopen_failures_total 1\n"));
    ck_assert(metrics_have(b, "pulse_partition_fenced{topic=\"t\",partition=\"0\"} 0\n"));
    ck_assert_int_eq(pulse_broker_fenced_list(b, &fl, &nfl), PULSE_OK);
    ck_assert_uint_eq(nfl, 0);
    usleep(200 * 1000);
    atomic_store(&stop, true);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        ck_assert_uint_eq(pubs[i].other, 0);
        ck_assert_uint_gt(pubs[i].acked, 0);
    }
    ck_assert_uint_gt(pubs[0].fenced + pubs[1].fenced, 0);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec, 1, &off, err, sizeof err), PULSE_OK);

    /* Every acknowledged record is at its offset, and no offset was
     * handed out twice. */
    static char values[2 * HEAL_MAX_ACKS + 16][32];
    size_t n = read_values(b, "t", 0, values, 2 * HEAL_MAX_ACKS + 16);
    ck_assert_int_eq((int64_t)n, hw_of(b, "t", 0));
    static bool seen[2 * HEAL_MAX_ACKS + 16];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 2; i++) {
        for (size_t k = 0; k < pubs[i].acked; k++) {
            int64_t o = pubs[i].offsets[k];
            ck_assert_int_lt(o, (int64_t)n);
            ck_assert_msg(!seen[o], "offset %lld acknowledged twice", (long long)o);
            seen[o] = true;
            ck_assert_str_eq(values[o], pubs[i].values[k]);
        }
    }
    pulse_broker_close(b);
    faultio_destroy(fio);

    /* A restart agrees. */
    b = open_default(NULL);
    ck_assert_uint_eq(read_values(b, "t", 0, values, 2 * HEAL_MAX_ACKS + 16), n);
    pulse_broker_close(b);
}
END_TEST

/* Waits until partition p of topic has written its first durable-end
 * checkpoint (its snapshot file), so that a test counting or failing I/O
 * afterwards meets no checkpoint write of the syncer in between. */
static void wait_checkpointed(const char *topic, int32_t p)
{
    char rel[200];
    int64_t t0 = pulse_clock_mono_us();

    snprintf(rel, sizeof rel, "topics/%.64s/%d/snapshot", topic, (int)p);
    while (!path_exists(rel)) {
        ck_assert_msg(pulse_clock_mono_us() - t0 < 5 * 1000 * 1000, "no checkpoint for %s", rel);
        usleep(1000);
    }
}

/* Fences partition p of topic with a failed fdatasync (the publish that
 * meets it answers PULSE_FENCED). */
static void fence_partition(struct pulse_broker *b, struct faultio *fio, const char *topic, int32_t p)
{
    struct pulse_publish_record rec = rec_kv(NULL, "fence", p);
    struct pulse_offset_pair off;
    char err[256];

    faultio_fail_nth(fio, FAULTIO_FDATASYNC, 1, EIO);
    ck_assert_int_eq(pulse_broker_publish_wait(b, topic, &rec, 1, &off, err, sizeof err), PULSE_FENCED);
}

/* A heal pass holds a reference on the topic it is looking at and no
 * other, so a delete of another topic never waits for a reopen attempt
 * (here made slow on purpose) of this one. */
START_TEST(test_heal_pass_holds_one_topic_at_a_time)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_broker_topic *t;

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.fence_retry_initial_ms = 10;
    cfg.fence_retry_max_ms = 10000;
    b = open_cfg(&cfg, NULL);
    create_topic(b, "a", 1);
    create_topic(b, "z", 1);
    setenv("PULSE_FAILPOINT_DELAY", "heal_attempt:2500", 1);
    fence_partition(b, fio, "a", 0);
    int64_t t0 = pulse_clock_mono_us();
    /* The first attempt on a/0 is due after 10 ms and then sleeps. */
    usleep(300 * 1000);
    t = pulse_broker_topic_acquire(pulse_local_of(b), "a");
    ck_assert(pulse_plog_fenced(t->plogs[0]));
    pulse_broker_topic_release(pulse_local_of(b), t);
    int64_t t1 = pulse_clock_mono_us();
    ck_assert_int_eq(pulse_broker_topic_delete(b, "z"), PULSE_OK);
    int64_t waited = pulse_clock_mono_us() - t1;
    ck_assert_msg(waited < 1200 * 1000, "the delete of z waited %lld ms for a reopen attempt on a",
                  (long long)(waited / 1000));
    /* Still inside the attempt on a, or the comparison proves nothing. */
    ck_assert_int_lt(pulse_clock_mono_us() - t0, 2500 * 1000);
    pulse_broker_close(b);
    unsetenv("PULSE_FAILPOINT_DELAY");
    faultio_destroy(fio);
}
END_TEST

/* What the heal thread keeps about a fenced partition (since when, failed
 * attempts, backoff) belongs to that topic object: a topic created again
 * whose log happens to get the old log's address starts afresh. The test
 * puts a new topic object over the fenced log's very address, which an
 * allocator may do for a recreated topic. */
START_TEST(test_heal_record_is_not_inherited_by_a_new_topic_at_the_old_log_address)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_broker_topic *t, *t2;
    struct pulse_fenced_partition *fl = NULL;
    size_t nfl = 0, i;
    bool found = false;

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.fence_retry_initial_ms = 60000;
    cfg.fence_retry_max_ms = 60000;
    b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 1);
    fence_partition(b, fio, "t", 0);
    usleep(1500 * 1000);
    ck_assert_int_eq(pulse_broker_fenced_list(b, &fl, &nfl), PULSE_OK);
    ck_assert_uint_eq(nfl, 1);
    ck_assert_int_ge(fl[0].fenced_ms, 1000); /* the old topic's record ages */
    pulse_free(fl);

    t = pulse_broker_topic_acquire(pulse_local_of(b), "t");
    t2 = pulse_calloc(1, sizeof *t2);
    ck_assert_ptr_nonnull(t2);
    memcpy(t2->name, t->name, sizeof t2->name);
    t2->uid = atomic_fetch_add(&pulse_local_of(b)->topic_uids, 1) + 1;
    t2->nparts = 1;
    t2->plogs = pulse_calloc(1, sizeof *t2->plogs);
    ck_assert_ptr_nonnull(t2->plogs);
    t2->plogs[0] = t->plogs[0];
    atomic_init(&t2->refs, 1);
    pthread_rwlock_wrlock(&pulse_local_of(b)->map_lock);
    for (i = 0; i < pulse_local_of(b)->ntopics && !found; i++) {
        if (pulse_local_of(b)->topics[i] == t) {
            pulse_local_of(b)->topics[i] = t2;
            found = true;
        }
    }
    pthread_rwlock_unlock(&pulse_local_of(b)->map_lock);
    ck_assert(found);
    i--;
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(pulse_broker_fenced_list(b, &fl, &nfl), PULSE_OK);
        ck_assert_uint_eq(nfl, 1);
        ck_assert_msg(fl[0].fenced_ms < 1400, "the new topic inherited a record fenced %lld ms ago",
                      (long long)fl[0].fenced_ms);
        ck_assert_uint_eq(fl[0].failed_attempts, 0);
        pulse_free(fl);
        usleep(1200 * 1000); /* a heal pass notes the new topic's partition */
    }
    pthread_rwlock_wrlock(&pulse_local_of(b)->map_lock);
    pulse_local_of(b)->topics[i] = t;
    pthread_rwlock_unlock(&pulse_local_of(b)->map_lock);
    while (atomic_load(&t2->refs) > 1)
        usleep(1000);
    t2->plogs[0] = NULL;
    pulse_broker_topic_destroy(t2);
    pulse_broker_topic_release(pulse_local_of(b), t);
    pulse_broker_close(b);
    faultio_destroy(fio);
}
END_TEST

/* A publish spanning partitions whose append fails on one of them (a full
 * disk) keeps what the partitions before it took, and says so: the error
 * names them with their offsets, and every stored record has its offset. */
START_TEST(test_publish_failing_on_one_partition_says_what_it_stored)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_offset_pair off[6];
    struct pulse_publish_record recs[6];
    static const char *const vals[6] = {"a0", "b0", "c0", "a1", "b1", "c1"};
    char values[8][32];
    char err[256] = "";

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.fence_retry_initial_ms = 60000;
    /* No checkpoint writes between the counted ones below. */
    cfg.checkpoint_interval_ms = 3600 * 1000;
    b = open_cfg(&cfg, NULL);
    create_topic(b, "m", 3);
    for (int32_t p = 0; p < 3; p++) {
        struct pulse_publish_record r = rec_kv(NULL, "warm", p);
        ck_assert_int_eq(pulse_broker_publish_wait(b, "m", &r, 1, off, err, sizeof err), PULSE_OK);
    }
    for (int32_t p = 0; p < 3; p++)
        wait_checkpointed("m", p);
    /* How many pwrites one partition's append takes. */
    unsigned long before = faultio_count(fio, FAULTIO_PWRITE);
    struct pulse_publish_record one = rec_kv(NULL, "warm2", 2);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "m", &one, 1, off, err, sizeof err), PULSE_OK);
    unsigned long per_append = faultio_count(fio, FAULTIO_PWRITE) - before;
    ck_assert_uint_ge(per_append, 1);

    for (int i = 0; i < 6; i++)
        recs[i] = rec_kv(NULL, vals[i], i % 3);
    /* Partition 0's append goes through, partition 1's first write finds
     * the device full. */
    faultio_fail_nth(fio, FAULTIO_PWRITE, per_append + 1, ENOSPC);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "m", recs, 6, off, err, sizeof err), PULSE_NOSPACE);
    ck_assert_msg(strstr(err, "partition 1 ") != NULL && strstr(err, "partitions 0 (offsets 1-2);") != NULL &&
                      strstr(err, "kept") != NULL,
                  "message: %s", err);
    ck_assert_uint_eq(off[0].partition, 0);
    ck_assert_int_eq(off[0].offset, 1);
    ck_assert_int_eq(off[3].offset, 2);
    for (int i = 1; i < 6; i++) {
        if (i == 3)
            continue;
        ck_assert_uint_eq(off[i].partition, (uint32_t)(i % 3));
        ck_assert_int_eq(off[i].offset, -1);
    }
    /* What was stored becomes durable and readable at those offsets. */
    int64_t t0 = pulse_clock_mono_us();
    while (hw_of(b, "m", 0) < 3) {
        ck_assert_int_lt(pulse_clock_mono_us() - t0, 5 * 1000 * 1000);
        usleep(1000);
    }
    ck_assert_uint_eq(read_values(b, "m", 0, values, 8), 3);
    ck_assert_str_eq(values[1], "a0");
    ck_assert_str_eq(values[2], "a1");
    ck_assert_int_eq(hw_of(b, "m", 1), 1);
    ck_assert_int_eq(hw_of(b, "m", 2), 2);
    /* The full disk fenced nothing: the same publish goes through now. */
    ck_assert_int_eq(pulse_broker_publish_wait(b, "m", recs, 6, off, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(off[1].offset, 1);
    pulse_broker_close(b);
    faultio_destroy(fio);
}
END_TEST

/* A partition fenced before a publish starts refuses the whole publish:
 * nothing is appended to its other partitions. */
START_TEST(test_publish_to_a_fenced_partition_stores_nothing_on_the_others)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_broker_topic *t;
    struct pulse_offset_pair off[2];
    struct pulse_publish_record recs[2];
    char err[256] = "";

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.fence_retry_initial_ms = 60000;
    /* The fdatasync failed below must be the publish's, not a checkpoint's. */
    cfg.checkpoint_interval_ms = 3600 * 1000;
    b = open_cfg(&cfg, NULL);
    create_topic(b, "f", 2);
    recs[0] = rec_kv(NULL, "x", 0);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "f", recs, 1, off, err, sizeof err), PULSE_OK);
    wait_checkpointed("f", 0);
    fence_partition(b, fio, "f", 1);
    t = pulse_broker_topic_acquire(pulse_local_of(b), "f");
    int64_t end0 = pulse_plog_log_end(t->plogs[0]);
    recs[1] = rec_kv(NULL, "y", 1);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "f", recs, 2, off, err, sizeof err), PULSE_FENCED);
    ck_assert_msg(strstr(err, "partition 1") != NULL && strstr(err, "nothing of this publish was stored") != NULL,
                  "message: %s", err);
    ck_assert_int_eq(pulse_plog_log_end(t->plogs[0]), end0);
    pulse_broker_topic_release(pulse_local_of(b), t);
    ck_assert_int_eq(hw_of(b, "f", 0), 1);
    pulse_broker_close(b);
    faultio_destroy(fio);
}
END_TEST

TCase *broker_health_tcase(void)
{
    TCase *tc = tcase_create("health");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, test_metrics_expose_the_documented_families);
    tcase_add_test(tc, test_failed_sync_fails_the_publish_and_fences_only_that_partition);
    tcase_add_test(tc, test_fenced_partition_is_reopened_in_process_with_backoff_and_loses_nothing);
    tcase_add_test(tc, test_heal_pass_holds_one_topic_at_a_time);
    tcase_add_test(tc, test_heal_record_is_not_inherited_by_a_new_topic_at_the_old_log_address);
    tcase_add_test(tc, test_publish_failing_on_one_partition_says_what_it_stored);
    tcase_add_test(tc, test_publish_to_a_fenced_partition_stores_nothing_on_the_others);
    return tc;
}
