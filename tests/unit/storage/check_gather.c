/* SPDX-License-Identifier: MIT */
/*
 * check_gather.c - the bounded gather of pulse_plog_append's group commit
 * (plog.h "Durability"): a leader woken after a sync waits for the
 * appenders that sync released before it picks its target, so one
 * fdatasync covers them all; it waits at most gather_us; a lone appender
 * never waits; and nothing is acknowledged before the fdatasync that
 * covers it (tests/lib/faultio records the size of each file at its last
 * fdatasync, and a simulated power cut keeps only that).
 */
#include "plogtest.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "faultio.h"

#define VLEN 64

struct env {
    char *dir;
    struct faultio *fio;
    struct pulse_plog *plog;
    struct pulse_plog_config cfg;
    size_t batch_len; /* every batch here has one VLEN-byte record */
    char log_path[512];
};

static void env_open(struct env *e, uint32_t gather_us)
{
    struct pulse_buf b;

    memset(e, 0, sizeof *e);
    e->dir = pt_tmpdir();
    e->fio = faultio_create();
    ck_assert_ptr_nonnull(e->fio);
    pt_cfg(&e->cfg, 1 << 24, 4096, faultio_io(e->fio));
    e->cfg.gather_us = gather_us;
    ck_assert_int_eq(pulse_plog_open(e->dir, &e->cfg, &e->plog, NULL), PULSE_OK);
    pulse_buf_init(&b, 1 << 20);
    e->batch_len = pt_batch(&b, 0, 1, VLEN, 0);
    pulse_buf_fini(&b);
    pt_path(e->log_path, sizeof e->log_path, e->dir, 0, "log");
}

static void env_close(struct env *e)
{
    (void)pulse_plog_close(e->plog);
    faultio_destroy(e->fio);
    pt_cleanup(e->dir);
}

/* One every-write append of a one-record batch carrying id. */
static pulse_status_t append1(struct env *e, uint64_t id, int64_t *base)
{
    struct pulse_buf b;
    pulse_status_t st;

    pulse_buf_init(&b, 1 << 20);
    pt_batch(&b, id, 1, VLEN, 0);
    st = pulse_plog_append(e->plog, b.data, b.len, base);
    pulse_buf_fini(&b);
    return st;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static struct pulse_plog_stats stats(struct env *e)
{
    struct pulse_plog_stats s;
    pulse_plog_get_stats(e->plog, &s);
    return s;
}

/* ---- the gather covers the appenders a sync released ----------------- */

struct two {
    struct env *e;
    atomic_bool in_flight;   /* the first fdatasync has started */
    unsigned second_appends; /* appends of the first thread after its first */
    pulse_status_t st1[2], st2;
    int64_t base1[2], base2;
};

/* Holds the first fdatasync until the second thread's append landed, so
 * that sync covers the first thread only and finds the second waiting. */
static void hold_first_sync(void *arg)
{
    struct two *t = arg;

    if (atomic_exchange(&t->in_flight, true))
        return;
    for (int i = 0; i < 5000 && pulse_plog_log_end(t->e->plog) < 2; i++)
        sleep_ms(1);
}

static void *first_thread(void *arg)
{
    struct two *t = arg;

    t->st1[0] = append1(t->e, 1, &t->base1[0]);
    if (t->second_appends > 0) {
        /* Released by the first sync, it comes back late: a leader that
         * did not wait for it would sync without it. */
        sleep_ms(100);
        t->st1[1] = append1(t->e, 3, &t->base1[1]);
    }
    return NULL;
}

static void *second_thread(void *arg)
{
    struct two *t = arg;
    t->st2 = append1(t->e, 2, &t->base2);
    return NULL;
}

/* Runs the two-appender scenario; returns the syncs it took. */
static uint64_t run_two(struct env *e, struct two *t)
{
    pthread_t a, b;

    t->e = e;
    faultio_set_sync_hook(e->fio, hold_first_sync, t);
    ck_assert_int_eq(pthread_create(&a, NULL, first_thread, t), 0);
    for (int i = 0; i < 5000 && !atomic_load(&t->in_flight); i++)
        sleep_ms(1);
    ck_assert(atomic_load(&t->in_flight));
    ck_assert_int_eq(pthread_create(&b, NULL, second_thread, t), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    faultio_set_sync_hook(e->fio, NULL, NULL);
    return stats(e).syncs;
}

START_TEST(test_a_woken_leader_waits_for_the_appender_the_last_sync_released)
{
    struct env e;
    struct two t;

    /* A bound far above the 100 ms the released appender takes to return. */
    env_open(&e, 5 * 1000 * 1000);
    memset(&t, 0, sizeof t);
    t.second_appends = 1;
    uint64_t syncs = run_two(&e, &t);
    ck_assert_int_eq(t.st1[0], PULSE_OK);
    ck_assert_int_eq(t.st1[1], PULSE_OK);
    ck_assert_int_eq(t.st2, PULSE_OK);
    /* Sync 1 covered the first append; the second thread, woken, gathered
     * until the first came back, and sync 2 covered both of their
     * appends. Without the gather it syncs alone and a third sync follows. */
    ck_assert_uint_eq(syncs, 2);
    ck_assert_uint_eq(stats(&e).gathers_waited, 1);
    ck_assert_uint_eq(stats(&e).gathers_timed_out, 0);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 3);
    env_close(&e);
}
END_TEST

START_TEST(test_a_gather_ends_at_its_bound_when_the_released_appender_never_returns)
{
    struct env e;
    struct two t;

    env_open(&e, 20 * 1000);
    memset(&t, 0, sizeof t);
    t.second_appends = 0;
    uint64_t syncs = run_two(&e, &t);
    ck_assert_int_eq(t.st1[0], PULSE_OK);
    ck_assert_int_eq(t.st2, PULSE_OK);
    /* The second thread waited for an append that never came, then synced
     * its own. */
    ck_assert_uint_eq(syncs, 2);
    ck_assert_uint_eq(stats(&e).gathers_waited, 1);
    ck_assert_uint_eq(stats(&e).gathers_timed_out, 1);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 2);
    env_close(&e);
}
END_TEST

/* ---- a lone appender ------------------------------------------------- */

struct burst {
    struct env *e;
    int id;
};

static void *burst_thread(void *arg)
{
    struct burst *b = arg;
    int64_t base;
    ck_assert_int_eq(append1(b->e, (uint64_t)b->id, &base), PULSE_OK);
    return NULL;
}

START_TEST(test_a_lone_appender_never_waits_and_a_stale_group_costs_one_bound)
{
    struct env e;
    pthread_t th[4];
    struct burst b[4];
    int64_t base;

    env_open(&e, PULSE_PLOG_GATHER_US);
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(append1(&e, (uint64_t)i, &base), PULSE_OK);
    ck_assert_uint_eq(stats(&e).syncs, 200);
    ck_assert_uint_eq(stats(&e).gathers_waited, 0);

    /* A burst of four appenders that then go away: the last sync may
     * leave a group estimate behind that the lone appender cannot meet. */
    faultio_set_sync_delay_us(e.fio, 2000);
    for (int i = 0; i < 4; i++) {
        b[i].e = &e;
        b[i].id = 1000 + i;
        ck_assert_int_eq(pthread_create(&th[i], NULL, burst_thread, &b[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    faultio_set_sync_delay_us(e.fio, 0);
    uint64_t waited = stats(&e).gathers_waited;
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(append1(&e, (uint64_t)(2000 + i), &base), PULSE_OK);
    /* At most its first sync waits (for appenders that are gone, up to
     * the bound); the group it then measures is itself. */
    ck_assert_uint_le(stats(&e).gathers_waited - waited, 1);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 404);
    env_close(&e);
}
END_TEST

/* ---- durability ------------------------------------------------------ */

#define APPENDERS 8
#define PER_THREAD 40

struct dur {
    struct env *e;
    int t;
    int64_t acked[PER_THREAD];
    uint64_t ids[PER_THREAD];
    unsigned n;
    unsigned early; /* acknowledged while the file's synced size fell short */
};

/* The power cut comes from the sync observer, right after an fdatasync
 * returned and before its leader publishes HW (no other fdatasync runs
 * then), once half of the appends were acknowledged. */
static struct faultio *cut_fio;
static atomic_int cut_acks;
static atomic_bool cut_done;

static void cut_observer(void *arg, int64_t us, bool ok)
{
    (void)arg;
    (void)us;
    if (ok && atomic_load(&cut_acks) >= APPENDERS * PER_THREAD / 2 && !atomic_exchange(&cut_done, true))
        faultio_crash(cut_fio);
}

static void *dur_thread(void *arg)
{
    struct dur *d = arg;

    for (int i = 0; i < PER_THREAD; i++) {
        int64_t base = -1;
        uint64_t id = (uint64_t)(d->t * PER_THREAD + i);
        if (append1(d->e, id, &base) != PULSE_OK)
            break; /* the power is cut */
        /* One segment of equal batches: this batch ends at byte
         * (base + 1) * batch_len, which its fdatasync must have covered. */
        if (faultio_synced_size(d->e->fio, d->e->log_path) < (uint64_t)(base + 1) * d->e->batch_len)
            d->early++;
        d->acked[d->n] = base;
        d->ids[d->n++] = id;
        atomic_fetch_add(&cut_acks, 1);
    }
    return NULL;
}

START_TEST(test_gathered_appends_are_acknowledged_only_after_their_fdatasync)
{
    static struct dur d[APPENDERS];
    struct env e;
    pthread_t th[APPENDERS];
    unsigned acked = 0, early = 0;

    memset(&e, 0, sizeof e);
    e.dir = pt_tmpdir();
    e.fio = faultio_create();
    ck_assert_ptr_nonnull(e.fio);
    cut_fio = e.fio;
    atomic_init(&cut_acks, 0);
    atomic_init(&cut_done, false);
    pt_cfg(&e.cfg, 1 << 24, 4096, faultio_io(e.fio));
    e.cfg.sync_observer = cut_observer;
    ck_assert_int_eq(e.cfg.gather_us, PULSE_PLOG_GATHER_US);
    ck_assert_int_eq(pulse_plog_open(e.dir, &e.cfg, &e.plog, NULL), PULSE_OK);
    pt_path(e.log_path, sizeof e.log_path, e.dir, 0, "log");
    {
        struct pulse_buf b;
        pulse_buf_init(&b, 1 << 20);
        e.batch_len = pt_batch(&b, 0, 1, VLEN, 0);
        pulse_buf_fini(&b);
    }
    faultio_set_sync_delay_us(e.fio, 300);
    memset(d, 0, sizeof d);
    for (int i = 0; i < APPENDERS; i++) {
        d[i].e = &e;
        d[i].t = i;
        ck_assert_int_eq(pthread_create(&th[i], NULL, dur_thread, &d[i]), 0);
    }
    for (int i = 0; i < APPENDERS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < APPENDERS; i++) {
        acked += d[i].n;
        early += d[i].early;
    }
    ck_assert(atomic_load(&cut_done));
    ck_assert_uint_eq(early, 0);
    ck_assert_uint_ge(acked, APPENDERS * PER_THREAD / 2);
    (void)pulse_plog_close(e.plog);

    /* After the cut: every acknowledged record is there, at its offset. */
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    struct pt_log l = {0};
    size_t missing = 0;
    pt_cfg(&cfg, 1 << 24, 4096, NULL);
    ck_assert_int_eq(pulse_plog_open(e.dir, &cfg, &plog, NULL), PULSE_OK);
    pt_read_all(plog, 0, 1 << 20, &l);
    for (int t = 0; t < APPENDERS; t++) {
        for (unsigned i = 0; i < d[t].n; i++) {
            int64_t off = d[t].acked[i];
            missing += (off < 0 || (size_t)off >= l.n || l.offs[off] != off || l.ids[off] != d[t].ids[i]) ? 1 : 0;
        }
    }
    ck_assert_uint_eq(missing, 0);
    pt_log_free(&l);
    (void)pulse_plog_close(plog);
    faultio_destroy(e.fio);
    pt_cleanup(e.dir);
}
END_TEST

static Suite *gather_suite(void)
{
    Suite *s = suite_create("gather");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_a_woken_leader_waits_for_the_appender_the_last_sync_released);
    tcase_add_test(tc, test_a_gather_ends_at_its_bound_when_the_released_appender_never_returns);
    tcase_add_test(tc, test_a_lone_appender_never_waits_and_a_stale_group_costs_one_bound);
    tcase_add_test(tc, test_gathered_appends_are_acknowledged_only_after_their_fdatasync);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gather_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
