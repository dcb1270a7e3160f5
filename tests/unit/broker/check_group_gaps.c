/* SPDX-License-Identifier: MIT */
/*
 * check_group_gaps.c - consumer-group behaviour a review found missing in
 * the first version (groups.c), seen from inside the local backend:
 *
 * - a group fetch's wait ended by something other than data (a rebalance,
 *   its deadline kept by the tick) leaves no data waiter parked on the
 *   syncer's list, holding its topics, until its deadline;
 * - after a start that found topics, partitions are held back for
 *   groups.lease-max (members of the previous run may still be inside
 *   their leases); a start on an empty data directory holds nothing.
 *
 * Run it under TSan too (.ci/extra): cancelling a waiter races the syncer.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/broker_int.h"
#include "broker/local.h"
#include "common/clock.h"
#include "brokertest.h"

static struct pulse_broker *open_broker(int64_t lease_max_ms)
{
    struct pulse_broker_config cfg;

    test_config(&cfg);
    cfg.group_lease_min_ms = 10;
    cfg.group_lease_max_ms = lease_max_ms;
    cfg.group_lease_default_ms = lease_max_ms;
    return open_cfg(&cfg, NULL);
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

/* How many waiters are parked on the syncer's list. */
static size_t parked_waiters(struct pulse_broker *base)
{
    struct pulse_local *b = pulse_local_of(base);
    size_t n = 0;
    pthread_mutex_lock(&b->mu);
    for (struct pulse_broker_waiter *w = b->waiters; w != NULL; w = w->next)
        n++;
    pthread_mutex_unlock(&b->mu);
    return n;
}

static atomic_int woken;

static void on_wake(void *arg, pulse_status_t st)
{
    (void)arg;
    (void)st;
    atomic_fetch_add(&woken, 1);
}

/* A wait of member v over its partitions' ends, 20 s long. */
static void park(struct pulse_broker *b, const struct pulse_group_view *v)
{
    struct pulse_group_partition pos[8];
    bool parked = false;
    ck_assert_uint_le(v->nparts, 8);
    for (size_t i = 0; i < v->nparts; i++) {
        pos[i] = v->parts[i];
        pos[i].offset = hw_of(b, "t", v->parts[i].partition);
    }
    ck_assert_int_eq(pulse_broker_group_wait(b, "g", v->member_id, v->generation, pos, v->nparts,
                                             pulse_clock_mono_us() + 20 * 1000 * 1000, on_wake, NULL, &parked),
                     PULSE_OK);
    ck_assert(parked);
}

START_TEST(test_a_wait_ended_by_a_rebalance_leaves_no_data_waiter_parked)
{
    struct pulse_broker *b = open_broker(300000);
    struct pulse_group_view a, c;
    create_topic(b, "t", 4);
    join(b, "g", "t", 20000, &a);
    ck_assert_uint_eq(a.nparts, 4);
    park(b, &a);
    ck_assert_uint_eq(parked_waiters(b), 1);
    /* A second member joins: a rebalance, which ends A's wait at once ... */
    join(b, "g", "t", 20000, &c);
    ck_assert_int_eq(atomic_load(&woken), 1);
    /* ... and with it the data waiter it had parked over A's partitions. */
    ck_assert_uint_eq(parked_waiters(b), 0);
    /* It was ended, not fired twice: no callback more. */
    usleep(50 * 1000);
    ck_assert_int_eq(atomic_load(&woken), 1);
    pulse_group_view_fini(&a);
    pulse_group_view_fini(&c);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_many_waits_ended_by_rebalances_leave_nothing_parked)
{
    struct pulse_broker *b = open_broker(300000);
    struct pulse_group_view a, c;
    create_topic(b, "t", 4);
    join(b, "g", "t", 20000, &a);
    for (int i = 0; i < 50; i++) {
        struct pulse_group_view v;
        ck_assert_int_eq(pulse_broker_group_heartbeat(b, "g", a.member_id, &v), PULSE_OK);
        park(b, &v);
        join(b, "g", "t", 20000, &c);
        ck_assert_int_eq(pulse_broker_group_leave(b, "g", c.member_id), PULSE_OK);
        pulse_group_view_fini(&c);
        pulse_group_view_fini(&v);
    }
    ck_assert_int_eq(atomic_load(&woken), 50);
    ck_assert_uint_eq(parked_waiters(b), 0);
    pulse_group_view_fini(&a);
    pulse_broker_close(b);
}
END_TEST

/* A wait's callback, with the time it came. */
static atomic_llong woken_at_us;

static void on_wake_at(void *arg, pulse_status_t st)
{
    (void)arg;
    (void)st;
    atomic_store(&woken_at_us, (long long)pulse_clock_mono_us());
}

START_TEST(test_a_start_with_topics_holds_partitions_for_the_longest_lease)
{
    struct pulse_broker *b = open_broker(300);
    struct pulse_group_view v;
    create_topic(b, "t", 4);
    join(b, "g", "t", 300, &v);
    ck_assert_uint_eq(v.nparts, 4); /* a fresh data directory: no hold */
    ck_assert_int_eq(v.hold_ms, 0);
    pulse_group_view_fini(&v);
    pulse_broker_close(b);

    int64_t t0 = pulse_clock_mono_us();
    b = open_broker(300);
    join(b, "g", "t", 300, &v);
    ck_assert_uint_eq(v.nparts, 0);
    ck_assert_uint_eq(v.npending, 4);
    ck_assert(v.hold_ms > 0 && v.hold_ms <= 300);
    /* A wait without partitions parks (the hold is no news) and is woken
     * by the tick when the hold ends, long before its own deadline. */
    bool parked = false;
    ck_assert_int_eq(pulse_broker_group_wait(b, "g", v.member_id, v.generation, NULL, 0, t0 + 5 * 1000 * 1000,
                                             on_wake_at, NULL, &parked),
                     PULSE_OK);
    ck_assert(parked);
    while (atomic_load(&woken_at_us) == 0 && pulse_clock_mono_us() < t0 + 4 * 1000 * 1000)
        usleep(5 * 1000);
    long long at = atomic_load(&woken_at_us);
    ck_assert_msg(at != 0, "the wait was not woken when the hold ended");
    ck_assert_int_ge(at - t0, 300 * 1000);
    /* The hold is over: a member joining now is handed partitions at once
     * (v's lease, as long as the hold, may have run out meanwhile). */
    struct pulse_group_view h;
    join(b, "g", "t", 300, &h);
    ck_assert_uint_ge(h.nparts, 1);
    ck_assert_int_eq(h.hold_ms, 0);
    pulse_group_view_fini(&h);
    pulse_group_view_fini(&v);
    pulse_broker_close(b);
}
END_TEST

static Suite *group_gaps_suite(void)
{
    Suite *s = suite_create("group_gaps");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_a_wait_ended_by_a_rebalance_leaves_no_data_waiter_parked);
    tcase_add_test(tc, test_many_waits_ended_by_rebalances_leave_nothing_parked);
    tcase_add_test(tc, test_a_start_with_topics_holds_partitions_for_the_longest_lease);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(group_gaps_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
