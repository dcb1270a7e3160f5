/* SPDX-License-Identifier: MIT */
/*
 * check_waitany.c - the broker's one waiter, pulse_broker_wait_any: a
 * waiter on several positions (partitions of one topic or of several)
 * fires exactly once, when any of them gets data, at its deadline, when a
 * topic of any position is deleted, or at drain; a position with data at
 * hand parks nothing and is named; refused calls hold nothing (a delete
 * and close afterwards finish). The single-partition long-poll
 * (pulse_broker_wait_data) is the case n == 1 and keeps its tests in
 * check_broker (broker_fetch.c). Run it under TSan too (.ci/extra): the syncer completes
 * the waiters.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "broker/broker.h"
#include "broker/local.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "brokertest.h"

static void publish_to(struct pulse_broker *b, const char *topic, int32_t partition)
{
    struct pulse_publish_record rec;
    struct pulse_offset_pair off;
    char err[256] = "";

    memset(&rec, 0, sizeof rec);
    rec.value = (const uint8_t *)"x";
    rec.value_len = 1;
    rec.partition = partition;
    ck_assert_int_eq(pulse_broker_publish_wait(b, topic, &rec, 1, &off, err, sizeof err), PULSE_OK);
}

/* Whether partition p of topic has records at or after offset. */
static bool has_data(struct pulse_broker *b, const char *topic, uint32_t p, int64_t offset)
{
    struct pulse_fetch_pos pos;

    memset(&pos, 0, sizeof pos);
    ck_assert_int_eq(pulse_broker_fetch_probe(b, topic, p, offset, &pos), PULSE_OK);
    return pos.bytes > 0;
}

struct done {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    pulse_status_t st;
};

static void done_fn(void *arg, pulse_status_t st)
{
    struct done *d = arg;

    pthread_mutex_lock(&d->mu);
    d->calls++;
    d->st = st;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static void done_init(struct done *d)
{
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    d->calls = 0;
    d->st = PULSE_OK;
}

static void done_wait(struct done *d)
{
    pthread_mutex_lock(&d->mu);
    while (d->calls < 1)
        pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

static int done_calls(struct done *d)
{
    pthread_mutex_lock(&d->mu);
    int n = d->calls;
    pthread_mutex_unlock(&d->mu);
    return n;
}

static int64_t in_ms(int64_t ms)
{
    return pulse_clock_mono_us() + ms * 1000;
}

START_TEST(test_waiter_on_three_partitions_wakes_when_any_one_gets_data)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_wait_pos pos[3] = {{"t", 0, 0}, {"t", 1, 0}, {"t", 2, 0}};
    struct done d;
    bool parked = false;

    done_init(&d);
    create_topic(b, "t", 3);
    ck_assert_int_eq(pulse_broker_wait_any(b, pos, 3, in_ms(60000), done_fn, &d, &parked, NULL), PULSE_OK);
    ck_assert(parked);
    ck_assert_int_eq(done_calls(&d), 0);
    publish_to(b, "t", 2);
    done_wait(&d);
    ck_assert_int_eq(d.st, PULSE_OK);
    /* The callback does not say which: the caller probes. */
    ck_assert(has_data(b, "t", 2, 0));
    ck_assert(!has_data(b, "t", 0, 0));
    pulse_broker_close(b);
    ck_assert_int_eq(d.calls, 1);
}
END_TEST

START_TEST(test_position_with_data_parks_nothing_and_is_named)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_wait_pos pos[3] = {{"t", 0, 0}, {"t", 1, 1}, {"t", 1, 0}};
    struct done d;
    bool parked = true;
    size_t ready = 99;

    done_init(&d);
    create_topic(b, "t", 2);
    publish_to(b, "t", 1);
    /* p1 has offset 0 only: position 1 (offset 1) waits, position 2 is ready. */
    ck_assert_int_eq(pulse_broker_wait_any(b, pos, 3, in_ms(60000), done_fn, &d, &parked, &ready), PULSE_OK);
    ck_assert(!parked);
    ck_assert_uint_eq(ready, 2);
    pulse_broker_close(b);
    ck_assert_int_eq(d.calls, 0);
}
END_TEST

START_TEST(test_waiter_across_topics_wakes_on_the_second_topic)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_wait_pos pos[2] = {{"a", 0, 0}, {"b", 1, 0}};
    struct done d;
    bool parked = false;

    done_init(&d);
    create_topic(b, "a", 1);
    create_topic(b, "b", 2);
    ck_assert_int_eq(pulse_broker_wait_any(b, pos, 2, in_ms(60000), done_fn, &d, &parked, NULL), PULSE_OK);
    ck_assert(parked);
    publish_to(b, "b", 0); /* not a watched partition */
    publish_to(b, "a", 0);
    done_wait(&d);
    ck_assert_int_eq(d.st, PULSE_OK);
    pulse_broker_close(b);
    ck_assert_int_eq(d.calls, 1);
}
END_TEST

START_TEST(test_deadline_fires_once_with_ok_and_no_data)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_wait_pos pos[2] = {{"t", 0, 0}, {"t", 1, 0}};
    struct done d;
    bool parked = false;
    int64_t t0 = pulse_clock_mono_us();

    done_init(&d);
    create_topic(b, "t", 2);
    ck_assert_int_eq(pulse_broker_wait_any(b, pos, 2, in_ms(150), done_fn, &d, &parked, NULL), PULSE_OK);
    ck_assert(parked);
    done_wait(&d);
    ck_assert_int_eq(d.st, PULSE_OK);
    ck_assert_int_ge(pulse_clock_mono_us() - t0, 150 * 1000);
    ck_assert(!has_data(b, "t", 0, 0) && !has_data(b, "t", 1, 0));
    pulse_broker_close(b);
    ck_assert_int_eq(d.calls, 1);
}
END_TEST

START_TEST(test_delete_of_any_topic_answers_topic_not_found_and_lets_the_other_go)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_wait_pos pos[2] = {{"a", 0, 0}, {"b", 0, 0}};
    struct done d;
    bool parked = false;

    done_init(&d);
    create_topic(b, "a", 1);
    create_topic(b, "b", 1);
    ck_assert_int_eq(pulse_broker_wait_any(b, pos, 2, in_ms(60000), done_fn, &d, &parked, NULL), PULSE_OK);
    ck_assert(parked);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "b"), PULSE_OK);
    done_wait(&d);
    ck_assert_int_eq(d.st, PULSE_TOPIC_NOT_FOUND);
    /* The waiter let go of "a" too: its delete and a re-create finish. */
    ck_assert_int_eq(pulse_broker_topic_delete(b, "a"), PULSE_OK);
    create_topic(b, "a", 1);
    pulse_broker_close(b);
    ck_assert_int_eq(d.calls, 1);
}
END_TEST

START_TEST(test_drain_answers_shutdown_and_refuses_new_waiters)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_wait_pos pos[2] = {{"t", 0, 0}, {"t", 1, 0}};
    struct done d;
    bool parked = false;

    done_init(&d);
    create_topic(b, "t", 2);
    ck_assert_int_eq(pulse_broker_wait_any(b, pos, 2, in_ms(60000), done_fn, &d, &parked, NULL), PULSE_OK);
    ck_assert(parked);
    pulse_broker_drain(b);
    ck_assert_int_eq(d.calls, 1);
    ck_assert_int_eq(d.st, PULSE_SHUTDOWN);
    ck_assert_int_eq(pulse_broker_wait_any(b, pos, 2, in_ms(1000), done_fn, &d, &parked, NULL), PULSE_SHUTDOWN);
    pulse_broker_close(b);
    ck_assert_int_eq(d.calls, 1);
}
END_TEST

START_TEST(test_refused_calls_get_no_callback_and_hold_nothing)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_wait_pos bad_topic[2] = {{"t", 0, 0}, {"nope", 0, 0}};
    struct pulse_wait_pos bad_part[2] = {{"t", 0, 0}, {"t", 5, 0}};
    struct done d;
    bool parked = false;

    done_init(&d);
    create_topic(b, "t", 1);
    ck_assert_int_eq(pulse_broker_wait_any(b, bad_topic, 0, in_ms(1000), done_fn, &d, &parked, NULL), PULSE_INVALID);
    ck_assert_int_eq(pulse_broker_wait_any(b, bad_topic, PULSE_WAIT_MAX_POSITIONS + 1, in_ms(1000), done_fn, &d,
                                           &parked, NULL),
                     PULSE_INVALID);
    ck_assert_int_eq(pulse_broker_wait_any(b, bad_topic, 1, in_ms(1000), NULL, &d, &parked, NULL), PULSE_INVALID);
    ck_assert_int_eq(pulse_broker_wait_any(b, bad_topic, 2, in_ms(1000), done_fn, &d, &parked, NULL),
                     PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_wait_any(b, bad_part, 2, in_ms(1000), done_fn, &d, &parked, NULL),
                     PULSE_PARTITION_NOT_FOUND);
    /* No reference of "t" was kept by the refused calls: its delete and a
     * re-create under the same name finish. */
    ck_assert_int_eq(pulse_broker_topic_delete(b, "t"), PULSE_OK);
    create_topic(b, "t", 1);
    pulse_broker_close(b);
    ck_assert_int_eq(d.calls, 0);
}
END_TEST

/* Many waiters on overlapping positions, from several threads, while
 * publishers fill the partitions: every waiter fires exactly once. */
#define RACE_WAITERS 64

struct race {
    struct pulse_broker *b;
    struct done d[RACE_WAITERS];
};

static void *race_waiters(void *arg)
{
    struct race *r = arg;
    for (int i = 0; i < RACE_WAITERS; i++) {
        struct pulse_wait_pos pos[2] = {{"t", (uint32_t)(i % 4), 0}, {"t", (uint32_t)((i + 1) % 4), 0}};
        bool parked = false;
        pulse_status_t st = pulse_broker_wait_any(r->b, pos, 2, in_ms(60000), done_fn, &r->d[i], &parked, NULL);
        ck_assert_int_eq(st, PULSE_OK);
        if (!parked)
            done_fn(&r->d[i], PULSE_OK); /* data at hand: count it here */
    }
    return NULL;
}

START_TEST(test_concurrent_waiters_each_fire_exactly_once)
{
    struct race *r = pulse_calloc(1, sizeof *r);
    pthread_t th;

    ck_assert_ptr_nonnull(r);
    r->b = open_default(NULL);
    create_topic(r->b, "t", 4);
    for (int i = 0; i < RACE_WAITERS; i++)
        done_init(&r->d[i]);
    ck_assert_int_eq(pthread_create(&th, NULL, race_waiters, r), 0);
    for (int p = 0; p < 4; p++)
        publish_to(r->b, "t", p);
    pthread_join(th, NULL);
    for (int i = 0; i < RACE_WAITERS; i++)
        done_wait(&r->d[i]);
    pulse_broker_close(r->b);
    for (int i = 0; i < RACE_WAITERS; i++)
        ck_assert_int_eq(r->d[i].calls, 1);
    pulse_free(r);
}
END_TEST

static Suite *waitany_suite(void)
{
    Suite *s = suite_create("waitany");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_waiter_on_three_partitions_wakes_when_any_one_gets_data);
    tcase_add_test(tc, test_position_with_data_parks_nothing_and_is_named);
    tcase_add_test(tc, test_waiter_across_topics_wakes_on_the_second_topic);
    tcase_add_test(tc, test_deadline_fires_once_with_ok_and_no_data);
    tcase_add_test(tc, test_delete_of_any_topic_answers_topic_not_found_and_lets_the_other_go);
    tcase_add_test(tc, test_drain_answers_shutdown_and_refuses_new_waiters);
    tcase_add_test(tc, test_refused_calls_get_no_callback_and_hold_nothing);
    tcase_add_test(tc, test_concurrent_waiters_each_fire_exactly_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(waitany_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
