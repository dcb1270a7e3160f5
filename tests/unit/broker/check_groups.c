/* SPDX-License-Identifier: MIT */
/*
 * check_groups.c - the local backend's consumer groups (groups.c) through
 * the seam: the assignment is even and sticky and moves a partition only
 * after its owner acknowledged losing it; a commit in flight holds its
 * partitions back; fences refuse commits of a partition not owned or of
 * an old generation and store nothing; the syncer's tick removes members
 * whose lease ran out with nobody calling; and many members joining,
 * fetching, committing and leaving at once keep every partition with at
 * most one owner. Run it under TSan too (.ci/extra): the syncer, the
 * committer and the callers all touch the group table.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/local.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "brokertest.h"

/* check_broker's broker, with leases as short as 10 ms allowed. */
static struct pulse_broker *open_broker(void)
{
    struct pulse_broker_config cfg;

    test_config(&cfg);
    cfg.group_lease_min_ms = 10;
    return open_cfg(&cfg, NULL);
}

static void publish(struct pulse_broker *b, const char *topic, int32_t partition, int n)
{
    for (int i = 0; i < n; i++) {
        struct pulse_publish_record rec;
        struct pulse_offset_pair off;
        memset(&rec, 0, sizeof rec);
        rec.value = (const uint8_t *)"v";
        rec.value_len = 1;
        rec.partition = partition;
        ck_assert_int_eq(pulse_broker_publish_wait(b, topic, &rec, 1, &off, NULL, 0), PULSE_OK);
    }
}

static void join(struct pulse_broker *b, const char *group, const char *topic, int64_t lease_ms,
                 struct pulse_group_view *v)
{
    const char *topics[] = {topic};
    struct pulse_group_join_spec spec = {topics, 1, lease_ms, false};
    char err[256] = "";
    pulse_status_t st = pulse_broker_group_join(b, group, &spec, v, err, sizeof err);
    ck_assert_msg(st == PULSE_OK, "join: %s (%s)", pulse_status_name(st), err);
}

/* Heartbeats m; returns how many partitions it owns (the view in *v when
 * v is not NULL, else freed). */
static size_t beat(struct pulse_broker *b, const char *group, const char *m, struct pulse_group_view *v)
{
    struct pulse_group_view tmp;
    ck_assert_int_eq(pulse_broker_group_heartbeat(b, group, m, &tmp), PULSE_OK);
    size_t n = tmp.nparts;
    if (v != NULL)
        *v = tmp;
    else
        pulse_group_view_fini(&tmp);
    return n;
}

static bool has(const struct pulse_group_view *v, uint32_t p)
{
    for (size_t i = 0; i < v->nparts; i++)
        if (v->parts[i].partition == p)
            return true;
    return false;
}

START_TEST(test_assignment_is_even_sticky_and_waits_for_the_owner)
{
    struct pulse_broker *b = open_broker();
    enum { PARTS = 12, MEMBERS = 5 };
    struct pulse_group_view v[MEMBERS];
    char ids[MEMBERS][PULSE_GROUP_MEMBER_ID_MAX + 1];
    create_topic(b, "t", PARTS);
    for (int k = 0; k < MEMBERS; k++) {
        struct pulse_group_view before[MEMBERS];
        join(b, "g", "t", 10000, &v[k]);
        memcpy(ids[k], v[k].member_id, sizeof ids[k]);
        pulse_group_view_fini(&v[k]);
        /* Before anyone else calls, the newcomer owns only free partitions:
         * none, once the first member holds them all. */
        if (k > 0) {
            ck_assert_uint_eq(beat(b, "g", ids[k], NULL), 0);
            for (int i = 0; i < k; i++)
                before[i] = (struct pulse_group_view){0};
        }
        for (int i = 0; i < k; i++)
            (void)beat(b, "g", ids[i], &before[i]); /* their acknowledgement */
        size_t total = 0, lo = PARTS, hi = 0;
        for (int i = 0; i <= k; i++) {
            (void)beat(b, "g", ids[i], &v[i]);
            total += v[i].nparts;
            lo = v[i].nparts < lo ? v[i].nparts : lo;
            hi = v[i].nparts > hi ? v[i].nparts : hi;
            ck_assert_uint_eq(v[i].npending, 0);
        }
        ck_assert_uint_eq(total, PARTS);
        ck_assert_uint_le(hi - lo, 1);
        /* Sticky: an old member kept only partitions it had. */
        for (int i = 0; i < k; i++) {
            for (size_t j = 0; j < v[i].nparts; j++)
                ck_assert(has(&before[i], v[i].parts[j].partition));
            pulse_group_view_fini(&before[i]);
        }
        for (int i = 0; i <= k; i++)
            pulse_group_view_fini(&v[i]);
    }
    pulse_broker_close(b);
}
END_TEST

struct done_flag {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    pulse_status_t st;
};

static void on_done(void *arg, pulse_status_t st)
{
    struct done_flag *d = arg;
    pthread_mutex_lock(&d->mu);
    d->st = st;
    d->done = true;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

START_TEST(test_a_commit_in_flight_holds_its_partitions_back)
{
    setenv("PULSE_FAILPOINT_DELAY", "cursor_commit_write:300", 1);
    struct pulse_broker *b = open_broker();
    struct pulse_group_view a, bv, av, cv;
    struct done_flag d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, PULSE_OK};
    char err[256] = "";
    create_topic(b, "t", 2);
    publish(b, "t", 0, 3);
    publish(b, "t", 1, 3);
    join(b, "g", "t", 10000, &a);
    ck_assert_uint_eq(a.nparts, 2);
    struct pulse_group_partition pos[2] = {{"t", 0, 3}, {"t", 1, 3}};
    ck_assert_int_eq(pulse_broker_group_commit_async(b, "g", a.member_id, a.generation, pos, 2, &cv, on_done, &d, err,
                                                     sizeof err),
                     PULSE_OK);
    join(b, "g", "t", 10000, &bv);
    /* A calls while its commit is being written: it keeps both. */
    ck_assert_uint_eq(beat(b, "g", a.member_id, &av), 2);
    ck_assert_uint_eq(beat(b, "g", bv.member_id, NULL), 0);
    pulse_group_view_fini(&av);
    pthread_mutex_lock(&d.mu);
    while (!d.done)
        pthread_cond_wait(&d.cv, &d.mu);
    pthread_mutex_unlock(&d.mu);
    ck_assert_int_eq(d.st, PULSE_OK);
    /* The commit's answer is A's acknowledgement: one partition left. */
    ck_assert_uint_eq(cv.nparts, 1);
    pulse_group_view_fini(&cv);
    ck_assert_uint_eq(beat(b, "g", bv.member_id, NULL), 1);
    struct pulse_cursor c;
    ck_assert_int_eq(pulse_broker_cursor_get(b, "g", "t", 1, &c), PULSE_OK);
    ck_assert_int_eq(c.offset, 3);
    pulse_group_view_fini(&a);
    pulse_group_view_fini(&bv);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_fences_refuse_and_store_nothing)
{
    struct pulse_broker *b = open_broker();
    struct pulse_group_view a, bv, out;
    char err[256] = "";
    create_topic(b, "t", 2);
    publish(b, "t", 0, 5);
    publish(b, "t", 1, 5);
    char ida[PULSE_GROUP_MEMBER_ID_MAX + 1], idb[PULSE_GROUP_MEMBER_ID_MAX + 1];
    join(b, "g", "t", 10000, &a);
    memcpy(ida, a.member_id, sizeof ida);
    pulse_group_view_fini(&a);
    join(b, "g", "t", 10000, &bv);
    memcpy(idb, bv.member_id, sizeof idb);
    pulse_group_view_fini(&bv);
    (void)beat(b, "g", ida, &a);
    (void)beat(b, "g", idb, &bv);
    ck_assert_uint_eq(a.nparts, 1);
    ck_assert_uint_eq(bv.nparts, 1);
    struct pulse_group_partition theirs = {"t", bv.parts[0].partition, 2};
    struct pulse_group_partition mine = {"t", a.parts[0].partition, 2};
    struct pulse_group_partition both[2] = {mine, theirs};
    ck_assert_int_eq(pulse_broker_group_commit(b, "g", a.member_id, a.generation, both, 2, &out, err, sizeof err),
                     PULSE_GROUP_FENCED);
    ck_assert_ptr_nonnull(strstr(err, "does not own"));
    ck_assert_int_eq(pulse_broker_group_commit(b, "g", a.member_id, a.generation - 1, &mine, 1, &out, err, sizeof err),
                     PULSE_GROUP_FENCED);
    ck_assert_int_eq(pulse_broker_group_commit(b, "g", "m-gone-1", a.generation, &mine, 1, &out, err, sizeof err),
                     PULSE_REJOIN);
    struct pulse_cursor c;
    ck_assert_int_eq(pulse_broker_cursor_get(b, "g", "t", mine.partition, &c), PULSE_CURSOR_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_group_commit(b, "g", a.member_id, a.generation, &mine, 1, &out, err, sizeof err),
                     PULSE_OK);
    pulse_group_view_fini(&out);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "g", "t", mine.partition, &c), PULSE_OK);
    ck_assert_int_eq(c.offset, 2);
    pulse_group_view_fini(&a);
    pulse_group_view_fini(&bv);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_the_syncer_removes_expired_members_without_callers)
{
    struct pulse_broker *b = open_broker();
    struct pulse_group_view a;
    create_topic(b, "t", 1);
    join(b, "lonely", "t", 50, &a);
    pulse_group_view_fini(&a);
    struct pulse_buf m;
    pulse_buf_init(&m, 1 << 24);
    ck_assert_int_eq(pulse_broker_metrics(b, &m), PULSE_OK);
    ck_assert_ptr_nonnull(strstr((const char *)m.data, "pulse_group_members{group=\"lonely\"} 1"));
    bool gone = false;
    /* The syncer sleeps at most a second between passes. */
    for (int i = 0; i < 40 && !gone; i++) {
        usleep(50 * 1000);
        pulse_buf_reset(&m);
        ck_assert_int_eq(pulse_broker_metrics(b, &m), PULSE_OK); /* metrics never sweep */
        ck_assert_int_eq(pulse_buf_append_u8(&m, 0), PULSE_OK);
        gone = strstr((const char *)m.data, "group=\"lonely\"") == NULL;
    }
    ck_assert(gone);
    ck_assert_ptr_nonnull(strstr((const char *)m.data, "pulse_group_expired_members_total 1"));
    pulse_buf_fini(&m);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_a_wait_without_positions_ends_at_its_deadline_a_change_or_drain)
{
    struct pulse_broker *b = open_broker();
    struct pulse_group_view a, bv;
    struct done_flag d1 = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, PULSE_OK};
    struct done_flag d2 = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, PULSE_OK};
    struct done_flag d3 = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, PULSE_OK};
    bool parked = false;
    create_topic(b, "t", 1);
    join(b, "g", "t", 10000, &a);
    join(b, "g", "t", 10000, &bv);
    ck_assert_uint_eq(bv.nparts, 0);
    /* B owns nothing: it waits on the group alone, and the syncer's tick
     * ends the wait at its deadline. */
    int64_t t0 = pulse_clock_mono_us();
    ck_assert_int_eq(pulse_broker_group_wait(b, "g", bv.member_id, bv.generation, NULL, 0, t0 + 200 * 1000, on_done,
                                             &d1, &parked),
                     PULSE_OK);
    ck_assert(parked);
    pthread_mutex_lock(&d1.mu);
    while (!d1.done)
        pthread_cond_wait(&d1.cv, &d1.mu);
    pthread_mutex_unlock(&d1.mu);
    int64_t waited = pulse_clock_mono_us() - t0;
    ck_assert_int_ge(waited, 190 * 1000);
    ck_assert_int_lt(waited, 1500 * 1000);
    /* A's parked wait on its partition ends when B leaves (a rebalance),
     * long before its deadline. A was told the generation of B's join. */
    struct pulse_group_view a2;
    (void)beat(b, "g", a.member_id, &a2);
    struct pulse_group_partition pos = {"t", 0, 0};
    t0 = pulse_clock_mono_us();
    ck_assert_int_eq(pulse_broker_group_wait(b, "g", a.member_id, a2.generation, &pos, 1, t0 + 20 * 1000 * 1000,
                                             on_done, &d2, &parked),
                     PULSE_OK);
    ck_assert(parked);
    ck_assert_int_eq(pulse_broker_group_leave(b, "g", bv.member_id), PULSE_OK);
    pthread_mutex_lock(&d2.mu);
    while (!d2.done)
        pthread_cond_wait(&d2.cv, &d2.mu);
    pthread_mutex_unlock(&d2.mu);
    ck_assert_int_lt(pulse_clock_mono_us() - t0, 5 * 1000 * 1000);
    /* A stale generation is not parked: answer at once. */
    struct pulse_group_view av;
    (void)beat(b, "g", a.member_id, &av);
    ck_assert_int_eq(pulse_broker_group_wait(b, "g", a.member_id, a2.generation, &pos, 1, t0 + 20 * 1000 * 1000,
                                             on_done, &d3, &parked),
                     PULSE_OK);
    ck_assert(!parked);
    pulse_group_view_fini(&a2);
    /* Drain ends a parked wait with PULSE_SHUTDOWN. */
    ck_assert_int_eq(pulse_broker_group_wait(b, "g", a.member_id, av.generation, NULL, 0, t0 + 20 * 1000 * 1000,
                                             on_done, &d3, &parked),
                     PULSE_OK);
    ck_assert(parked);
    pulse_broker_drain(b);
    pthread_mutex_lock(&d3.mu);
    while (!d3.done)
        pthread_cond_wait(&d3.cv, &d3.mu);
    pthread_mutex_unlock(&d3.mu);
    ck_assert_int_eq(d3.st, PULSE_SHUTDOWN);
    pulse_group_view_fini(&a);
    pulse_group_view_fini(&av);
    pulse_group_view_fini(&bv);
    pulse_broker_close(b);
}
END_TEST

/* ---- many members at once ------------------------------------------------ */

#define STRESS_THREADS 6
#define STRESS_ROUNDS 150

struct stress {
    struct pulse_broker *b;
    int id;
    int errors;
};

static void on_done_ignore(void *arg, pulse_status_t st)
{
    (void)arg;
    (void)st;
}

static void *stress_member(void *arg)
{
    struct stress *s = arg;
    struct pulse_group_view v;
    char err[256];
    join(s->b, "busy", "t", 2000, &v);
    for (int r = 0; r < STRESS_ROUNDS; r++) {
        struct pulse_group_view pv;
        pulse_status_t st = pulse_broker_group_poll_async(s->b, "busy", v.member_id, NULL, &pv, on_done_ignore, NULL,
                                                          NULL, 0);
        if (st != PULSE_OK) {
            s->errors += st != PULSE_REJOIN;
            continue;
        }
        st = pulse_broker_group_fetched(s->b, "busy", v.member_id, pv.generation, pv.parts, pv.nparts);
        s->errors += st != PULSE_OK && st != PULSE_GROUP_FENCED;
        if (st == PULSE_OK && pv.nparts > 0) {
            struct pulse_group_view cv;
            st = pulse_broker_group_commit(s->b, "busy", v.member_id, pv.generation, pv.parts, pv.nparts, &cv, err,
                                           sizeof err);
            s->errors += st != PULSE_OK && st != PULSE_GROUP_FENCED;
            if (st == PULSE_OK)
                pulse_group_view_fini(&cv);
        }
        pulse_group_view_fini(&pv);
        if (s->id % 2 == 0 && r == STRESS_ROUNDS / 2) { /* half of them leave and join again */
            ck_assert_int_eq(pulse_broker_group_leave(s->b, "busy", v.member_id), PULSE_OK);
            pulse_group_view_fini(&v);
            join(s->b, "busy", "t", 2000, &v);
        }
    }
    ck_assert_int_eq(pulse_broker_group_leave(s->b, "busy", v.member_id), PULSE_OK);
    pulse_group_view_fini(&v);
    return NULL;
}

static atomic_bool stress_stop;

/* Reads the group while it changes: never a partition owned by a member
 * the group does not list, never more owned than there are. */
static void *stress_observer(void *arg)
{
    struct pulse_broker *b = arg;
    while (!atomic_load(&stress_stop)) {
        struct pulse_group_info *info = NULL;
        if (pulse_broker_group_describe(b, "busy", &info) != PULSE_OK)
            continue;
        uint32_t owned = 0;
        for (size_t i = 0; i < info->nmembers; i++)
            owned += info->members[i].nparts;
        ck_assert_uint_le(owned, info->nparts);
        for (size_t i = 0; i < info->nparts; i++) {
            bool listed = info->parts[i].owner[0] == '\0';
            for (size_t j = 0; !listed && j < info->nmembers; j++)
                listed = strcmp(info->parts[i].owner, info->members[j].member_id) == 0;
            ck_assert(listed);
        }
        pulse_group_info_free(info);
    }
    return NULL;
}

START_TEST(test_many_members_at_once_keep_the_table_consistent)
{
    struct pulse_broker *b = open_broker();
    pthread_t th[STRESS_THREADS], obs;
    struct stress s[STRESS_THREADS];
    create_topic(b, "t", 8);
    for (int p = 0; p < 8; p++)
        publish(b, "t", p, 2);
    atomic_store(&stress_stop, false);
    ck_assert_int_eq(pthread_create(&obs, NULL, stress_observer, b), 0);
    for (int i = 0; i < STRESS_THREADS; i++) {
        s[i] = (struct stress){b, i, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, stress_member, &s[i]), 0);
    }
    for (int i = 0; i < STRESS_THREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(s[i].errors, 0);
    }
    atomic_store(&stress_stop, true);
    pthread_join(obs, NULL);
    char **names = NULL;
    size_t n = 0;
    ck_assert_int_eq(pulse_broker_group_list(b, &names, &n), PULSE_OK);
    ck_assert_uint_eq(n, 0); /* everyone left: the group is forgotten */
    pulse_broker_names_free(names, n);
    pulse_broker_close(b);
}
END_TEST

static Suite *groups_suite(void)
{
    Suite *s = suite_create("groups");
    TCase *tc = tcase_create("groups");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_assignment_is_even_sticky_and_waits_for_the_owner);
    tcase_add_test(tc, test_a_commit_in_flight_holds_its_partitions_back);
    tcase_add_test(tc, test_fences_refuse_and_store_nothing);
    tcase_add_test(tc, test_the_syncer_removes_expired_members_without_callers);
    tcase_add_test(tc, test_a_wait_without_positions_ends_at_its_deadline_a_change_or_drain);
    tcase_add_test(tc, test_many_members_at_once_keep_the_table_consistent);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(groups_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
