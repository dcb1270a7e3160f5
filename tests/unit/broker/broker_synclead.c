/* SPDX-License-Identifier: MIT */
/*
 * broker_synclead.c - who makes a publish durable (broker.c): a lone
 * one-partition publish is synced and completed on the publishing thread
 * before pulse_broker_publish returns; a failed fdatasync of such an
 * inline sync fails every publish that waited on it; with many client
 * connections and slow syncs the syncer's group commit serves them
 * instead (pulse_broker_note_clients), unless syncs are fast; a sync pass that
 * finds many partitions unsynced runs their fdatasyncs side by side on
 * the sync pool (storage.sync-threads).
 *
 * The fdatasync of these tests is the POSIX one wrapped (struct pulse_io
 * is a table of functions): it can hold a sync in flight, fail it, and
 * count how many run at once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "brokertest.h"
#include "common/clock.h"
#include "common/fsio.h"

static struct pulse_io wrapped;
static atomic_int inflight, max_inflight, calls;
static atomic_bool hold, fail_held;
static atomic_int held;
static atomic_uint sleep_us;
static atomic_bool instant; /* report success at once (a device whose flushes cost nothing) */

static int wrapped_fdatasync(const struct pulse_io *io, int fd)
{
    (void)io;
    atomic_fetch_add(&calls, 1);
    int now = atomic_fetch_add(&inflight, 1) + 1;
    for (int m = atomic_load(&max_inflight); now > m && !atomic_compare_exchange_weak(&max_inflight, &m, now);)
        ;
    if (atomic_load(&hold)) {
        /* The first sync to come is held until the test lets it go. */
        atomic_store(&hold, false);
        atomic_store(&held, 1);
        int64_t t0 = pulse_clock_mono_us();
        while (atomic_load(&held) == 1 && pulse_clock_mono_us() - t0 < 10 * 1000 * 1000)
            usleep(1000);
        atomic_fetch_sub(&inflight, 1);
        if (atomic_load(&fail_held)) {
            errno = EIO;
            return -1;
        }
        return pulse_io_posix()->fdatasync(pulse_io_posix(), fd);
    }
    if (atomic_load(&sleep_us) > 0)
        usleep(atomic_load(&sleep_us));
    int rc = atomic_load(&instant) ? 0 : pulse_io_posix()->fdatasync(pulse_io_posix(), fd);
    atomic_fetch_sub(&inflight, 1);
    return rc;
}

static void wrap_io(struct pulse_broker_config *cfg)
{
    wrapped = *pulse_io_posix();
    wrapped.fdatasync = wrapped_fdatasync;
    atomic_init(&inflight, 0);
    atomic_init(&max_inflight, 0);
    atomic_init(&calls, 0);
    atomic_init(&hold, false);
    atomic_init(&fail_held, false);
    atomic_init(&held, 0);
    atomic_init(&sleep_us, 0);
    atomic_init(&instant, false);
    cfg->io = &wrapped;
}

struct seen {
    atomic_bool called;
    atomic_int st;
    pthread_t thread;
    atomic_bool returned_first; /* publish had returned when it came */
    atomic_bool returned;
};

static void seen_cb(void *arg, pulse_status_t st)
{
    struct seen *s = arg;
    s->thread = pthread_self();
    atomic_store(&s->returned_first, atomic_load(&s->returned));
    atomic_store(&s->st, (int)st);
    atomic_store(&s->called, true);
}

static void seen_init(struct seen *s)
{
    memset(s, 0, sizeof *s);
    atomic_init(&s->called, false);
    atomic_init(&s->st, -1);
    atomic_init(&s->returned_first, false);
    atomic_init(&s->returned, false);
}

static void seen_wait(struct seen *s)
{
    int64_t t0 = pulse_clock_mono_us();
    while (!atomic_load(&s->called)) {
        ck_assert_int_lt(pulse_clock_mono_us() - t0, 10 * 1000 * 1000);
        usleep(1000);
    }
}

/* The hand-offs publisher -> syncer -> publisher cost more than the
 * fdatasync at one connection: a lone publish syncs on its own thread and
 * is completed there, before pulse_broker_publish returns. */
START_TEST(test_lone_publish_is_synced_and_completed_on_the_publishing_thread)
{
    struct pulse_broker_config cfg;
    struct pulse_offset_pair off;
    char err[256] = "";
    test_config(&cfg);
    wrap_io(&cfg);
    /* No checkpoint wakes the syncer (whose pass could sync first). */
    cfg.checkpoint_interval_ms = 600000;
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 1);
    for (int i = 0; i < 3; i++) {
        struct seen s;
        bool pending = false;
        seen_init(&s);
        struct pulse_publish_record rec = rec_kv(NULL, "v", 0);
        ck_assert_int_eq(pulse_broker_publish(b, "t", &rec, 1, &off, seen_cb, &s, &pending, err, sizeof err), PULSE_OK);
        atomic_store(&s.returned, true);
        ck_assert(pending);
        ck_assert_msg(atomic_load(&s.called), "publish %d returned before it was completed", i);
        ck_assert(!atomic_load(&s.returned_first));
        ck_assert(pthread_equal(s.thread, pthread_self()));
        ck_assert_int_eq(atomic_load(&s.st), PULSE_OK);
        ck_assert_int_eq(off.offset, i);
        /* Completed only once durable. */
        ck_assert_int_ge(hw_of(b, "t", 0), i + 1);
    }
    ck_assert_int_ge(atomic_load(&calls), 3);
    pulse_broker_close(b);
}
END_TEST

/* One publish of one record to "t"; true when it was completed on this
 * thread before pulse_broker_publish returned (the publisher led its
 * sync), false when another thread completed it (the syncer's group). */
static bool publish_led_inline(struct pulse_broker *b, int64_t want_offset)
{
    struct pulse_offset_pair off;
    char err[256] = "";
    struct seen s;
    bool pending = false;
    seen_init(&s);
    struct pulse_publish_record rec = rec_kv(NULL, "v", 0);
    ck_assert_int_eq(pulse_broker_publish(b, "t", &rec, 1, &off, seen_cb, &s, &pending, err, sizeof err), PULSE_OK);
    atomic_store(&s.returned, true);
    ck_assert(pending);
    seen_wait(&s);
    ck_assert_int_eq(atomic_load(&s.st), PULSE_OK);
    ck_assert_int_eq(off.offset, want_offset);
    ck_assert_int_ge(hw_of(b, "t", 0), want_offset + 1);
    bool inline_here = !atomic_load(&s.returned_first) && pthread_equal(s.thread, pthread_self());
    /* Either way completed once: never both here and elsewhere. */
    ck_assert(inline_here || !pthread_equal(s.thread, pthread_self()));
    return inline_here;
}

/* An HTTP worker that blocks in a slow fdatasync holds back the requests of
 * its other connections, which then each pay an fdatasync of their own: with
 * more than one client connection open and slow syncs, a publish goes to
 * the syncer's group commit; with one open again, the publisher leads. */
START_TEST(test_with_many_clients_and_slow_syncs_the_syncer_commits_the_group)
{
    struct pulse_broker_config cfg;
    test_config(&cfg);
    wrap_io(&cfg);
    cfg.checkpoint_interval_ms = 600000;
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 1);
    atomic_store(&sleep_us, 2000); /* 2 ms: a disk, not a cache */
    int64_t at = 0;
    /* No front end has said anything yet: a lone publisher leads, and its
     * syncs teach the broker that they are slow. */
    for (; at < 3; at++)
        ck_assert_msg(publish_led_inline(b, at), "publish %d was not led inline", (int)at);
    pulse_broker_note_clients(b, 8);
    for (int i = 0; i < 3; i++, at++)
        ck_assert_msg(!publish_led_inline(b, at), "publish %d blocked its thread in a slow sync with 8 clients",
                      (int)at);
    pulse_broker_note_clients(b, 1);
    ck_assert(publish_led_inline(b, at));
    atomic_store(&sleep_us, 0);
    pulse_broker_close(b);
}
END_TEST

/* Where a flush costs next to nothing (tmpfs, a write cache with power-loss
 * protection) the hand-offs cost more than blocking: the publisher leads
 * whatever the number of clients. */
START_TEST(test_with_fast_syncs_the_publisher_leads_whatever_the_clients)
{
    struct pulse_broker_config cfg;
    test_config(&cfg);
    wrap_io(&cfg);
    cfg.checkpoint_interval_ms = 600000;
    atomic_store(&instant, true);
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 1);
    pulse_broker_note_clients(b, 32);
    for (int64_t at = 0; at < 3; at++)
        ck_assert_msg(publish_led_inline(b, at), "publish %d was not led inline", (int)at);
    atomic_store(&instant, false);
    pulse_broker_close(b);
}
END_TEST

struct pub_arg {
    struct pulse_broker *b;
    struct seen s;
    struct pulse_offset_pair off;
    char err[256];
    pulse_status_t st;
};

static void *publish_thread(void *p)
{
    struct pub_arg *a = p;
    bool pending = false;
    struct pulse_publish_record rec = rec_kv(NULL, "A", 0);
    a->st = pulse_broker_publish(a->b, "t", &rec, 1, &a->off, seen_cb, &a->s, &pending, a->err, sizeof a->err);
    atomic_store(&a->s.returned, true);
    return NULL;
}

/* An inline sync is a flush other publishes wait on: when its fdatasync
 * fails, the leader's publish and every publish that came while it ran
 * fail (the log is fenced), and nothing becomes visible. */
START_TEST(test_a_failed_inline_fdatasync_fails_every_publish_that_waited_on_it)
{
    enum { OTHERS = 3 };
    static struct pub_arg lead;
    struct seen others[OTHERS];
    struct pulse_offset_pair off[OTHERS];
    struct pulse_broker_config cfg;
    char err[OTHERS][256];
    test_config(&cfg);
    wrap_io(&cfg);
    cfg.fence_retry_initial_ms = 60000; /* the heal thread stays out of it */
    cfg.fence_retry_max_ms = 60000;
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 1);
    memset(&lead, 0, sizeof lead);
    lead.b = b;
    seen_init(&lead.s);
    atomic_store(&fail_held, true);
    atomic_store(&hold, true);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, publish_thread, &lead), 0);
    int64_t t0 = pulse_clock_mono_us();
    while (atomic_load(&held) == 0) {
        ck_assert_int_lt(pulse_clock_mono_us() - t0, 10 * 1000 * 1000);
        usleep(1000);
    }
    /* The leader is in its fdatasync; these find it running. */
    for (int i = 0; i < OTHERS; i++) {
        bool pending = false;
        seen_init(&others[i]);
        struct pulse_publish_record rec = rec_kv(NULL, "B", 0);
        ck_assert_int_eq(pulse_broker_publish(b, "t", &rec, 1, &off[i], seen_cb, &others[i], &pending, err[i],
                                              sizeof err[i]),
                         PULSE_OK);
        ck_assert(pending);
    }
    usleep(50 * 1000); /* the syncer waits on the held flush meanwhile */
    for (int i = 0; i < OTHERS; i++)
        ck_assert(!atomic_load(&others[i].called));
    atomic_store(&held, 2);
    pthread_join(th, NULL);
    ck_assert_int_eq(lead.st, PULSE_OK);
    seen_wait(&lead.s);
    ck_assert_int_eq(atomic_load(&lead.s.st), PULSE_FENCED);
    for (int i = 0; i < OTHERS; i++) {
        seen_wait(&others[i]);
        ck_assert_msg(atomic_load(&others[i].st) == PULSE_FENCED, "publish %d: %s", i,
                      pulse_status_name(atomic_load(&others[i].st)));
        ck_assert_msg(strstr(err[i], "fenced") != NULL, "%s", err[i]);
    }
    ck_assert_int_eq(hw_of(b, "t", 0), 0);
    pulse_broker_close(b);
}
END_TEST

/* 16 partitions written by one publish: their fdatasyncs run side by side
 * on the pool, not one after another on the syncer (1 thread: in turn). */
START_TEST(test_a_sync_pass_runs_many_partitions_fdatasyncs_side_by_side)
{
    enum { PARTS = 16 };
    struct pulse_publish_record recs[PARTS];
    struct pulse_offset_pair off[PARTS];
    char err[256] = "";
    static const uint32_t pools[] = {4, 1};
    for (size_t k = 0; k < 2; k++) {
        uint32_t threads = pools[k];
        struct pulse_broker_config cfg;
        struct async_done d;
        bool pending = false;
        test_config(&cfg);
        wrap_io(&cfg);
        cfg.sync_threads = threads;
        struct pulse_broker *b = open_cfg(&cfg, NULL);
        if (threads == 4)
            create_topic(b, "t", PARTS);
        for (int i = 0; i < PARTS; i++)
            recs[i] = rec_kv(NULL, "v", i);
        atomic_store(&sleep_us, 20 * 1000);
        atomic_store(&max_inflight, 0);
        async_init(&d);
        ck_assert_int_eq(pulse_broker_publish(b, "t", recs, PARTS, off, async_done_fn, &d, &pending, err, sizeof err),
                         PULSE_OK);
        ck_assert(pending);
        async_wait(&d, 1);
        ck_assert_int_eq(d.st, PULSE_OK);
        for (int i = 0; i < PARTS; i++)
            ck_assert_int_ge(hw_of(b, "t", (uint32_t)i), 1);
        if (threads > 1)
            ck_assert_int_ge(atomic_load(&max_inflight), 2);
        else
            ck_assert_int_eq(atomic_load(&max_inflight), 1);
        ck_assert_int_le(atomic_load(&max_inflight), (int)threads);
        atomic_store(&sleep_us, 0);
        pulse_broker_close(b);
    }
}
END_TEST

TCase *broker_synclead_tcase(void)
{
    TCase *tc = tcase_create("synclead");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_lone_publish_is_synced_and_completed_on_the_publishing_thread);
    tcase_add_test(tc, test_a_failed_inline_fdatasync_fails_every_publish_that_waited_on_it);
    tcase_add_test(tc, test_a_sync_pass_runs_many_partitions_fdatasyncs_side_by_side);
    tcase_add_test(tc, test_with_many_clients_and_slow_syncs_the_syncer_commits_the_group);
    tcase_add_test(tc, test_with_fast_syncs_the_publisher_leads_whatever_the_clients);
    return tc;
}
