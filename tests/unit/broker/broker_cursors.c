/* SPDX-License-Identifier: MIT */
/*
 * broker_cursors.c - part of check_broker: cursor reads and commits, and the
 * committer: concurrent commits share one metadata write, a commit racing a
 * topic delete never lands, drain completes queued admin work.
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

/* The asynchronous cursor reads complete exactly once: inline in this
 * backend (before the call returns, on the caller's thread), and - when a
 * test delays them as a remote backend would answer - later, from the
 * committer, with the same results. */
START_TEST(test_cursor_reads_complete_once_inline_or_later)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_cursor c = {.partition = 1, .offset = 2};
    struct pulse_cursor got;
    struct pulse_cursor *list = NULL;
    char **names = NULL;
    size_t n = 0, nn = 0;
    struct async_done d;
    char err[256];
    struct pulse_publish_record r3[3] = {rec_kv(NULL, "a", 1), rec_kv(NULL, "b", 1), rec_kv(NULL, "c", 1)};
    struct pulse_offset_pair o3[3];

    create_topic(b, "t", 2);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", r3, 3, o3, err, sizeof err), PULSE_OK);
    memcpy(c.topic, "t", 2);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "reader", &c, 1, err, sizeof err), PULSE_OK);
    for (int round = 0; round < 2; round++) {
        async_init(&d);
        memset(&got, 0, sizeof got);
        ck_assert_int_eq(pulse_broker_cursor_get_async(b, "reader", "t", 1, &got, async_done_fn, &d), PULSE_OK);
        ck_assert_int_eq(pulse_broker_cursor_list_async(b, "reader", &list, &n, async_done_fn, &d), PULSE_OK);
        ck_assert_int_eq(pulse_broker_consumer_list_async(b, &names, &nn, async_done_fn, &d), PULSE_OK);
        if (round == 0) /* inline: all three came before their calls returned */
            ck_assert_int_eq(d.calls, 3);
        else /* delayed: none can have come yet */
            ck_assert_int_eq(d.calls, 0);
        async_wait(&d, 3);
        ck_assert_int_eq(d.st, PULSE_OK);
        ck_assert_int_eq(got.offset, 2);
        ck_assert_int_eq(got.high_watermark, 3);
        ck_assert_int_eq(got.lag, 1);
        ck_assert_uint_eq(n, 1);
        ck_assert_int_eq(list[0].offset, 2);
        ck_assert_uint_eq(nn, 1);
        ck_assert_str_eq(names[0], "reader");
        pulse_free(list);
        pulse_broker_names_free(names, nn);
        /* Refused at submission: no callback. */
        ck_assert_int_eq(pulse_broker_cursor_get_async(b, "bad/name", "t", 1, &got, async_done_fn, &d),
                         PULSE_INVALID_NAME);
        ck_assert_int_eq(pulse_broker_cursor_get(b, "reader", "t", 0, &got), PULSE_CURSOR_NOT_FOUND);
        ck_assert_int_eq(d.calls, 3);
        setenv("PULSE_FAILPOINT_DELAY", "cursor_read:300", 1);
    }
    unsetenv("PULSE_FAILPOINT_DELAY");
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_cursor_commit_checks_range_and_is_all_or_none)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record recs[3] = {rec_kv(NULL, "a", 0), rec_kv(NULL, "b", 0), rec_kv(NULL, "c", 1)};
    struct pulse_offset_pair offs[3];
    struct pulse_cursor cs[3];
    struct pulse_cursor got;
    struct pulse_cursor *list = NULL;
    char **names = NULL;
    size_t n = 0;
    char err[256];

    create_topic(b, "t", 2);
    create_topic(b, "a", 1);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", recs, 3, offs, err, sizeof err), PULSE_OK);

    cs[0] = cur("t", 0, 3); /* above HW 2 */
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", cs, 1, err, sizeof err), PULSE_RANGE);
    cs[0] = cur("t", 0, -1);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", cs, 1, err, sizeof err), PULSE_RANGE);
    cs[0] = cur("t", 2, 0);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", cs, 1, err, sizeof err), PULSE_PARTITION_NOT_FOUND);
    cs[0] = cur("x", 0, 0);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", cs, 1, err, sizeof err), PULSE_TOPIC_NOT_FOUND);
    cs[0] = cur("t", 0, 0);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "__c", cs, 1, err, sizeof err), PULSE_INVALID_NAME);

    /* One bad cursor: none lands. */
    cs[0] = cur("t", 0, 2);
    cs[1] = cur("t", 1, 1);
    cs[2] = cur("t", 1, 5);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", cs, 3, err, sizeof err), PULSE_RANGE);
    ck_assert_ptr_nonnull(strstr(err, "cursors[2]: "));
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "t", 0, &got), PULSE_CURSOR_NOT_FOUND);

    cs[2] = cur("a", 0, 0);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", cs, 3, err, sizeof err), PULSE_OK);
    pulse_broker_close(b);

    b = open_default(NULL);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "t", 0, &got), PULSE_OK);
    ck_assert_int_eq(got.offset, 2);
    ck_assert_int_eq(got.high_watermark, 2);
    ck_assert_int_eq(got.lag, 0);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "x", 0, &got), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "t", 9, &got), PULSE_PARTITION_NOT_FOUND);

    cs[0] = cur("t", 0, 0);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "d", cs, 1, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(pulse_broker_cursor_list(b, "c", &list, &n), PULSE_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(list[0].topic, "a");
    ck_assert_str_eq(list[1].topic, "t");
    ck_assert_uint_eq(list[1].partition, 0);
    ck_assert_uint_eq(list[2].partition, 1);
    ck_assert_int_eq(list[2].offset, 1);
    ck_assert_int_eq(list[2].high_watermark, 1);
    pulse_free(list);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "d", "t", 0, &got), PULSE_OK);
    ck_assert_int_eq(got.lag, 2);

    ck_assert_int_eq(pulse_broker_consumer_list(b, &names, &n), PULSE_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(names[0], "c");
    ck_assert_str_eq(names[1], "d");
    pulse_broker_names_free(names, n);
    ck_assert_int_eq(pulse_broker_consumer_delete(b, "c"), PULSE_OK);
    ck_assert_int_eq(pulse_broker_consumer_delete(b, "c"), PULSE_OK);
    ck_assert_int_eq(pulse_broker_cursor_list(b, "c", &list, &n), PULSE_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(pulse_broker_consumer_list(b, &names, &n), PULSE_OK);
    ck_assert_uint_eq(n, 1);
    pulse_broker_names_free(names, n);
    pulse_broker_close(b);
}
END_TEST

/* ---- the committer ---------------------------------------------------- */

#define GROUP_THREADS 12

struct group_commit {
    struct pulse_broker *b;
    pthread_barrier_t *start;
    int id;
    pulse_status_t st;
    char err[256];
};

static void *group_committer(void *arg)
{
    struct group_commit *g = arg;
    char consumer[32];
    /* Thread 0 asks for an offset past the high watermark (1): refused. */
    struct pulse_cursor c = cur("gc", 0, g->id == 0 ? 5 : 1);

    snprintf(consumer, sizeof consumer, "c%d", g->id);
    pthread_barrier_wait(g->start);
    g->st = pulse_broker_cursor_commit(g->b, consumer, &c, 1, g->err, sizeof g->err);
    return NULL;
}

START_TEST(test_concurrent_cursor_commits_share_one_synced_metadata_write)
{
    struct pulse_broker *b;
    struct pulse_publish_record rec = rec_kv(NULL, "v", 0);
    struct pulse_offset_pair off;
    struct group_commit g[GROUP_THREADS];
    pthread_t th[GROUP_THREADS];
    pthread_barrier_t start;
    struct pulse_cursor got;
    char err[256];
    uint64_t before;

    /* A slow metadata disk: each group write takes 50 ms, so every commit
     * that arrives meanwhile queues for the next one. */
    setenv("PULSE_FAILPOINT_DELAY", "cursor_commit_write:50", 1);
    b = open_default(NULL);
    create_topic(b, "gc", 1);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "gc", &rec, 1, &off, err, sizeof err), PULSE_OK);
    before = pulse_meta_sync_writes(pulse_local_of(b)->meta);
    pthread_barrier_init(&start, NULL, GROUP_THREADS);
    for (int i = 0; i < GROUP_THREADS; i++) {
        g[i] = (struct group_commit){.b = b, .start = &start, .id = i, .st = PULSE_OK};
        ck_assert_int_eq(pthread_create(&th[i], NULL, group_committer, &g[i]), 0);
    }
    for (int i = 0; i < GROUP_THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    uint64_t writes = pulse_meta_sync_writes(pulse_local_of(b)->meta) - before;

    /* The refused commit failed alone, with its own reason... */
    ck_assert_int_eq(g[0].st, PULSE_RANGE);
    ck_assert_ptr_nonnull(strstr(g[0].err, "offset 5"));
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c0", "gc", 0, &got), PULSE_CURSOR_NOT_FOUND);
    /* ...and every other one is stored, */
    for (int i = 1; i < GROUP_THREADS; i++) {
        char consumer[32];
        snprintf(consumer, sizeof consumer, "c%d", i);
        ck_assert_msg(g[i].st == PULSE_OK, "commit %d: %s (%s)", i, pulse_status_name(g[i].st), g[i].err);
        ck_assert_int_eq(pulse_broker_cursor_get(b, consumer, "gc", 0, &got), PULSE_OK);
        ck_assert_int_eq(got.offset, 1);
    }
    /* with far fewer synced writes than commits (one each would be 11). */
    ck_assert_msg(writes >= 1 && writes <= GROUP_THREADS / 3, "%llu sync writes for %d commits",
                  (unsigned long long)writes, GROUP_THREADS - 1);
    pulse_broker_close(b);
    unsetenv("PULSE_FAILPOINT_DELAY");
}
END_TEST

#define RACE_THREADS 4

struct delete_race {
    struct pulse_broker *b;
    int id;
    atomic_bool *stop;
    _Atomic int64_t *deleted_at; /* mono us when the delete returned; 0 before */
    int ok;
    int gone;
    int late_ok; /* started after the delete returned, yet stored */
    pulse_status_t bad;
};

static void *race_committer(void *arg)
{
    struct delete_race *d = arg;
    char consumer[32];
    char err[256];
    struct pulse_cursor c = cur("doomed", 0, 0);

    snprintf(consumer, sizeof consumer, "r%d", d->id);
    while (!atomic_load(d->stop)) {
        int64_t deleted_before = atomic_load(d->deleted_at);
        pulse_status_t st = pulse_broker_cursor_commit(d->b, consumer, &c, 1, err, sizeof err);
        if (st == PULSE_OK) {
            d->ok++;
            if (deleted_before != 0)
                d->late_ok++;
        } else if (st == PULSE_TOPIC_NOT_FOUND) {
            d->gone++;
        } else {
            d->bad = st;
        }
    }
    return NULL;
}

/* Cursors the metadata store holds for topic under consumer (read from the
 * store itself, not through the broker's filter of live topics). */
static size_t stored_cursors_of(struct pulse_broker *b, const char *consumer, const char *topic)
{
    struct pulse_meta_cursor *mc = NULL;
    size_t n = 0, k = 0;

    ck_assert_int_eq(pulse_meta_cursor_list(pulse_local_of(b)->meta, consumer, &mc, &n), PULSE_OK);
    for (size_t i = 0; i < n; i++)
        k += strcmp(mc[i].topic, topic) == 0;
    pulse_free(mc);
    return k;
}

START_TEST(test_cursor_commit_racing_a_delete_is_refused_and_never_stored)
{
    struct pulse_broker *b;
    struct delete_race d[RACE_THREADS];
    pthread_t th[RACE_THREADS];
    atomic_bool stop = false;
    _Atomic int64_t deleted_at = 0;
    struct pulse_cursor c = cur("doomed", 0, 0);
    struct pulse_cursor got;
    char err[256];

    /* Slow group writes widen the window between a commit's validation
     * and its write, where a commit could slip past a delete. */
    setenv("PULSE_FAILPOINT_DELAY", "cursor_commit_write:5", 1);
    b = open_default(NULL);
    create_topic(b, "doomed", 1);
    create_topic(b, "kept", 1);
    for (int i = 0; i < RACE_THREADS; i++) {
        d[i] = (struct delete_race){.b = b, .id = i, .stop = &stop, .deleted_at = &deleted_at};
        ck_assert_int_eq(pthread_create(&th[i], NULL, race_committer, &d[i]), 0);
    }
    /* Let commits land, then delete while they keep coming. */
    while (stored_cursors_of(b, "r0", "doomed") == 0)
        usleep(1000);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "doomed"), PULSE_OK);
    atomic_store(&deleted_at, pulse_clock_mono_us());
    usleep(100 * 1000);
    atomic_store(&stop, true);
    int ok = 0, gone = 0;
    for (int i = 0; i < RACE_THREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(d[i].bad, PULSE_OK);
        ck_assert_int_eq(d[i].late_ok, 0);
        ok += d[i].ok;
        gone += d[i].gone;
    }
    ck_assert_int_gt(ok, 0);
    ck_assert_int_gt(gone, 0);
    /* Nothing of the deleted topic is in the store, for any consumer. */
    for (int i = 0; i < RACE_THREADS; i++) {
        char consumer[32];
        snprintf(consumer, sizeof consumer, "r%d", i);
        ck_assert_uint_eq(stored_cursors_of(b, consumer, "doomed"), 0);
    }
    /* A commit now is refused; a recreated topic of the name has no cursor. */
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "late", &c, 1, err, sizeof err), PULSE_TOPIC_NOT_FOUND);
    ck_assert_uint_eq(stored_cursors_of(b, "late", "doomed"), 0);
    create_topic(b, "doomed", 1);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "r0", "doomed", 0, &got), PULSE_CURSOR_NOT_FOUND);
    pulse_broker_close(b);
    unsetenv("PULSE_FAILPOINT_DELAY");

    b = open_default(NULL);
    for (int i = 0; i < RACE_THREADS; i++) {
        char consumer[32];
        snprintf(consumer, sizeof consumer, "r%d", i);
        ck_assert_uint_eq(stored_cursors_of(b, consumer, "doomed"), 0);
    }
    pulse_broker_close(b);
}
END_TEST

struct admin_done {
    atomic_int calls;
    _Atomic int st;
};

static void admin_done_fn(void *arg, pulse_status_t st)
{
    struct admin_done *d = arg;
    atomic_store(&d->st, (int)st);
    atomic_fetch_add(&d->calls, 1);
}

START_TEST(test_drain_completes_queued_admin_work_then_refuses_more)
{
    struct pulse_broker *b;
    struct pulse_cursor c = cur("t", 0, 0);
    struct pulse_topic_spec spec = {"fresh", 2, -1, -1, -1, -1, -1};
    struct pulse_topic_info *info = NULL;
    struct admin_done commit[4], create, del, late;
    char err[4][256];
    char cerr[256];
    int calls;

    memset(commit, 0, sizeof commit);
    memset(&create, 0, sizeof create);
    memset(&del, 0, sizeof del);
    memset(&late, 0, sizeof late);
    /* Each group write takes 300 ms: the work is still queued when the
     * drain starts. */
    setenv("PULSE_FAILPOINT_DELAY", "cursor_commit_write:300", 1);
    b = open_default(NULL);
    create_topic(b, "t", 1);
    create_topic(b, "gone", 1);
    for (int i = 0; i < 4; i++) {
        char consumer[16];
        snprintf(consumer, sizeof consumer, "d%d", i);
        ck_assert_int_eq(pulse_broker_cursor_commit_async(b, consumer, &c, 1, admin_done_fn, &commit[i], err[i],
                                                          sizeof err[i]),
                         PULSE_OK);
    }
    ck_assert_int_eq(pulse_broker_topic_create_async(b, &spec, &info, admin_done_fn, &create, cerr, sizeof cerr),
                     PULSE_OK);
    ck_assert_int_eq(pulse_broker_topic_delete_async(b, "gone", admin_done_fn, &del), PULSE_OK);
    calls = atomic_load(&commit[3].calls);
    ck_assert_int_eq(calls, 0);

    pulse_broker_drain(b);
    /* Everything queued before the drain completed, once and successfully. */
    for (int i = 0; i < 4; i++) {
        int n = atomic_load(&commit[i].calls), st = atomic_load(&commit[i].st);
        ck_assert_msg(n == 1 && st == PULSE_OK, "commit %d: completed %d times, %s", i, n,
                      pulse_status_name((pulse_status_t)st));
    }
    calls = atomic_load(&create.calls);
    int cst = atomic_load(&create.st);
    ck_assert_msg(calls == 1 && cst == PULSE_OK, "create: completed %d times, %s", calls,
                  pulse_status_name((pulse_status_t)cst));
    ck_assert_ptr_nonnull(info);
    ck_assert_str_eq(info->name, "fresh");
    ck_assert_uint_eq(info->partitions, 2);
    pulse_topic_info_free(info);
    calls = atomic_load(&del.calls);
    cst = atomic_load(&del.st);
    ck_assert_msg(calls == 1 && cst == PULSE_OK, "delete: completed %d times, %s", calls,
                  pulse_status_name((pulse_status_t)cst));
    ck_assert(!path_exists("topics/gone"));
    /* New admin work is refused at once, and its callback never comes. */
    ck_assert_int_eq(pulse_broker_cursor_commit_async(b, "d9", &c, 1, admin_done_fn, &late, NULL, 0), PULSE_SHUTDOWN);
    ck_assert_int_eq(pulse_broker_topic_delete_async(b, "t", admin_done_fn, &late), PULSE_SHUTDOWN);
    spec.name = "later";
    ck_assert_int_eq(pulse_broker_topic_create_async(b, &spec, NULL, admin_done_fn, &late, NULL, 0), PULSE_SHUTDOWN);
    ck_assert_int_eq(pulse_broker_topic_set_retention_async(b, "t", 5, -1, NULL, admin_done_fn, &late), PULSE_SHUTDOWN);
    ck_assert_int_eq(pulse_broker_consumer_delete_async(b, "d0", admin_done_fn, &late), PULSE_SHUTDOWN);
    pulse_broker_close(b);
    calls = atomic_load(&late.calls);
    ck_assert_int_eq(calls, 0);
    unsetenv("PULSE_FAILPOINT_DELAY");

    b = open_default(NULL);
    ck_assert_int_eq(hw_of(b, "fresh", 1), 0);
    ck_assert_int_eq(pulse_broker_topic_get(b, "gone", false, &info), PULSE_TOPIC_NOT_FOUND);
    pulse_broker_close(b);
}
END_TEST

TCase *broker_cursors_tcase(void)
{
    TCase *tc = tcase_create("cursors");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, test_cursor_commit_checks_range_and_is_all_or_none);
    tcase_add_test(tc, test_cursor_reads_complete_once_inline_or_later);
    tcase_add_test(tc, test_concurrent_cursor_commits_share_one_synced_metadata_write);
    tcase_add_test(tc, test_cursor_commit_racing_a_delete_is_refused_and_never_stored);
    tcase_add_test(tc, test_drain_completes_queued_admin_work_then_refuses_more);
    return tc;
}
