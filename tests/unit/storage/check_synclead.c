/* SPDX-License-Identifier: MIT */
/*
 * check_synclead.c - the group commit led by an appender
 * (pulse_plog_try_sync): a thread that finds no sync running runs one
 * itself and covers everyone who wrote before it; one that finds a sync
 * running gets PULSE_BUSY at once and waits for nothing; nothing is ever
 * acknowledged before an fdatasync covers it, which a simulated power cut
 * (tests/lib/faultio: files cut to their synced size) checks; a failed
 * fdatasync reaches every waiter of that flush.
 */
#include "plogtest.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "faultio.h"
#include "common/clock.h"
#include "storage/plog_int.h"

struct env {
    char *dir;
    struct faultio *fio;
    struct pulse_plog *plog;
    struct pulse_plog_config cfg;
};

static void env_open(struct env *e)
{
    memset(e, 0, sizeof *e);
    e->dir = pt_tmpdir();
    e->fio = faultio_create();
    ck_assert_ptr_nonnull(e->fio);
    pt_cfg(&e->cfg, 1 << 24, 4096, faultio_io(e->fio));
    ck_assert_int_eq(pulse_plog_open(e->dir, &e->cfg, &e->plog, NULL), PULSE_OK);
}

static void env_close(struct env *e)
{
    (void)pulse_plog_close(e->plog);
    faultio_destroy(e->fio);
    pt_cleanup(e->dir);
}

static int64_t append_async(struct pulse_plog *plog, uint64_t id, pulse_status_t *st)
{
    struct pulse_buf b;
    int64_t base = -1, end = -1;
    pulse_buf_init(&b, 1 << 20);
    pt_batch(&b, id, 1, 64, 0);
    *st = pulse_plog_append_async(plog, b.data, b.len, &base, &end, NULL);
    pulse_buf_fini(&b);
    return end;
}

START_TEST(test_try_sync_leads_when_no_sync_runs_and_covers_every_earlier_append)
{
    struct env e;
    pulse_status_t st;
    env_open(&e);
    unsigned long before = faultio_count(e.fio, FAULTIO_FDATASYNC);
    int64_t end1 = append_async(e.plog, 0, &st);
    ck_assert_int_eq(st, PULSE_OK);
    int64_t end2 = append_async(e.plog, 1, &st);
    ck_assert_int_eq(st, PULSE_OK);
    int64_t end3 = append_async(e.plog, 2, &st);
    ck_assert_int_eq(st, PULSE_OK);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 0);
    /* The first appender leads: one fdatasync covers all three. */
    ck_assert_int_eq(pulse_plog_try_sync(e.plog, end1), PULSE_OK);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), end3);
    ck_assert_uint_eq(faultio_count(e.fio, FAULTIO_FDATASYNC) - before, 1);
    /* Already covered: no second sync. */
    ck_assert_int_eq(pulse_plog_try_sync(e.plog, end2), PULSE_OK);
    ck_assert_uint_eq(faultio_count(e.fio, FAULTIO_FDATASYNC) - before, 1);
    ck_assert_int_eq(pulse_plog_try_sync(e.plog, end3 + 1), PULSE_INVALID);
    env_close(&e);
}
END_TEST

/* Holds the first fdatasync until the test lets it go. */
struct gate {
    atomic_int entered;
    atomic_bool open;
};

static void gate_hook(void *arg)
{
    struct gate *g = arg;
    atomic_fetch_add(&g->entered, 1);
    int64_t t0 = pulse_clock_mono_us();
    while (!atomic_load(&g->open) && pulse_clock_mono_us() - t0 < 10 * 1000 * 1000)
        usleep(1000);
}

struct syncer_arg {
    struct pulse_plog *plog;
    int64_t end;
    pulse_status_t st;
};

static void *sync_thread(void *p)
{
    struct syncer_arg *a = p;
    a->st = pulse_plog_wait_durable(a->plog, a->end);
    return NULL;
}

static void wait_entered(struct gate *g, int n)
{
    int64_t t0 = pulse_clock_mono_us();
    while (atomic_load(&g->entered) < n) {
        ck_assert_int_lt(pulse_clock_mono_us() - t0, 10 * 1000 * 1000);
        usleep(1000);
    }
}

START_TEST(test_try_sync_never_waits_for_a_running_sync)
{
    struct env e;
    struct gate g;
    pthread_t th;
    pulse_status_t st;
    env_open(&e);
    atomic_init(&g.entered, 0);
    atomic_init(&g.open, false);
    struct syncer_arg a = {e.plog, append_async(e.plog, 0, &st), PULSE_OK};
    faultio_set_sync_hook(e.fio, gate_hook, &g);
    ck_assert_int_eq(pthread_create(&th, NULL, sync_thread, &a), 0);
    wait_entered(&g, 1);
    /* A sync is in flight and does not cover this append: BUSY at once. */
    int64_t end = append_async(e.plog, 1, &st);
    ck_assert_int_eq(st, PULSE_OK);
    int64_t t0 = pulse_clock_mono_us();
    ck_assert_int_eq(pulse_plog_try_sync(e.plog, end), PULSE_BUSY);
    ck_assert_int_lt(pulse_clock_mono_us() - t0, 1000 * 1000);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 0);
    faultio_set_sync_hook(e.fio, NULL, NULL);
    atomic_store(&g.open, true);
    pthread_join(th, NULL);
    ck_assert_int_eq(a.st, PULSE_OK);
    /* The next one covers it. */
    ck_assert_int_eq(pulse_plog_try_sync(e.plog, end), PULSE_OK);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), end);
    env_close(&e);
}
END_TEST

/* Appenders that lead when they can and wait otherwise; every
 * acknowledged record is remembered with its offset. */
enum { THREADS = 6, MAX_APPENDS = 400 };

struct lead_arg {
    struct env *e;
    int thread;
    atomic_int *violations;
    atomic_int *acks;
    atomic_int *led;
    int64_t offs[MAX_APPENDS];
    uint64_t ids[MAX_APPENDS];
    int n;
};

static void *lead_worker(void *p)
{
    struct lead_arg *a = p;
    char path[512];
    pt_path(path, sizeof path, a->e->dir, 0, "log");
    for (int i = 0; i < MAX_APPENDS; i++) {
        pulse_status_t st;
        uint64_t id = (uint64_t)a->thread * 100000 + (uint64_t)i;
        int64_t end = append_async(a->e->plog, id, &st);
        if (st != PULSE_OK)
            break; /* the power cut */
        st = pulse_plog_try_sync(a->e->plog, end);
        if (st == PULSE_OK)
            atomic_fetch_add(a->led, 1);
        if (st == PULSE_BUSY)
            st = pulse_plog_wait_durable(a->e->plog, end);
        if (st != PULSE_OK)
            break;
        /* Acknowledged: an fdatasync must already cover the whole batch. */
        struct pulse_slice sl;
        if (pulse_plog_slice(a->e->plog, end - 1, 1, false, &sl) != PULSE_OK || sl.len == 0 ||
            faultio_synced_size(a->e->fio, path) < sl.pos + sl.len)
            atomic_fetch_add(a->violations, 1);
        a->offs[a->n] = end - 1;
        a->ids[a->n] = id;
        a->n++;
        atomic_fetch_add(a->acks, 1);
    }
    return NULL;
}

/* The power cut comes from the sync observer, right after an fdatasync
 * returned and before its leader publishes HW: no other fdatasync of the
 * log is running then (one leader at a time), so the cut never races with
 * a sync in flight, which faultio could not model. */
static struct faultio *cut_fio;
static atomic_int *cut_acks;
static atomic_bool cut_done;

static void cut_observer(void *arg, int64_t us, bool ok)
{
    (void)arg;
    (void)us;
    if (ok && atomic_load(cut_acks) >= THREADS * MAX_APPENDS / 2 && !atomic_exchange(&cut_done, true))
        faultio_crash(cut_fio);
}

START_TEST(test_concurrent_leaders_acknowledge_only_durable_records_and_a_power_cut_keeps_them)
{
    static struct lead_arg args[THREADS];
    struct env e;
    pthread_t th[THREADS];
    atomic_int violations, acks, led;
    atomic_init(&violations, 0);
    atomic_init(&acks, 0);
    atomic_init(&led, 0);
    atomic_init(&cut_done, false);
    memset(&e, 0, sizeof e);
    e.dir = pt_tmpdir();
    e.fio = faultio_create();
    ck_assert_ptr_nonnull(e.fio);
    cut_fio = e.fio;
    cut_acks = &acks;
    pt_cfg(&e.cfg, 1 << 24, 4096, faultio_io(e.fio));
    e.cfg.sync_observer = cut_observer;
    ck_assert_int_eq(pulse_plog_open(e.dir, &e.cfg, &e.plog, NULL), PULSE_OK);
    faultio_set_sync_delay_us(e.fio, 300);
    for (int i = 0; i < THREADS; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].e = &e;
        args[i].thread = i;
        args[i].violations = &violations;
        args[i].acks = &acks;
        args[i].led = &led;
        ck_assert_int_eq(pthread_create(&th[i], NULL, lead_worker, &args[i]), 0);
    }
    /* The observer cuts the power half way: unsynced bytes are lost, and
     * every call after it fails. */
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    ck_assert(atomic_load(&cut_done));
    ck_assert_int_eq(atomic_load(&violations), 0);
    ck_assert_int_gt(atomic_load(&acks), 0);
    ck_assert_int_gt(atomic_load(&led), 0);
    (void)pulse_plog_close(e.plog);
    e.plog = NULL;

    /* After the cut: every acknowledged record is there, at its offset. */
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pt_cfg(&cfg, 1 << 24, 4096, NULL);
    ck_assert_int_eq(pulse_plog_open(e.dir, &cfg, &plog, NULL), PULSE_OK);
    struct pt_log l = {0};
    pt_read_all(plog, 0, 1 << 20, &l);
    size_t missing = 0;
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < args[t].n; i++) {
            int64_t off = args[t].offs[i];
            missing += (off < 0 || (size_t)off >= l.n || l.offs[off] != off || l.ids[off] != args[t].ids[i]) ? 1 : 0;
        }
    }
    ck_assert_uint_eq(missing, 0);
    pt_log_free(&l);
    (void)pulse_plog_close(plog);
    faultio_destroy(e.fio);
    pt_cleanup(e.dir);
}
END_TEST

/* A waiter of the leader's flush: its batch was written before the flush
 * started, it waits while the flush runs (wait_durable finds it running),
 * and that flush fails. */
struct waiter_arg {
    struct pulse_plog *plog;
    int64_t end;
    atomic_int *waiting;
    pulse_status_t st;
};

static void *waiter_thread(void *p)
{
    struct waiter_arg *a = p;
    atomic_fetch_add(a->waiting, 1);
    a->st = pulse_plog_wait_durable(a->plog, a->end);
    return NULL;
}

START_TEST(test_a_failed_fdatasync_reaches_every_waiter_of_that_flush)
{
    enum { WAITERS = 4 };
    struct env e;
    pthread_t th[WAITERS];
    struct waiter_arg w[WAITERS];
    atomic_int waiting;
    pulse_status_t st;
    env_open(&e);
    atomic_init(&waiting, 0);
    /* The leader's batch and those of the waiters, all written before the
     * flush, so that it covers (and would acknowledge) every one. */
    struct syncer_arg lead = {e.plog, append_async(e.plog, 0, &st), PULSE_OK};
    for (int i = 0; i < WAITERS; i++) {
        w[i] = (struct waiter_arg){e.plog, append_async(e.plog, (uint64_t)i + 1, &st), &waiting, PULSE_OK};
        ck_assert_int_eq(st, PULSE_OK);
    }
    faultio_fail_nth(e.fio, FAULTIO_FDATASYNC, 1, EIO);
    /* Hold the leader between taking the lead and its fdatasync: it
     * captures its target under the writer lock. */
    pthread_mutex_lock(&e.plog->wlock);
    pthread_t lt;
    ck_assert_int_eq(pthread_create(&lt, NULL, sync_thread, &lead), 0);
    int64_t t0 = pulse_clock_mono_us();
    for (bool syncing = false; !syncing;) {
        ck_assert_int_lt(pulse_clock_mono_us() - t0, 10 * 1000 * 1000);
        pthread_mutex_lock(&e.plog->sync_lock);
        syncing = e.plog->syncing;
        pthread_mutex_unlock(&e.plog->sync_lock);
        usleep(1000);
    }
    for (int i = 0; i < WAITERS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, waiter_thread, &w[i]), 0);
    /* One that tries to lead meanwhile: the flush is running. */
    ck_assert_int_eq(pulse_plog_try_sync(e.plog, w[WAITERS - 1].end), PULSE_BUSY);
    while (atomic_load(&waiting) < WAITERS && pulse_clock_mono_us() - t0 < 10 * 1000 * 1000)
        usleep(1000);
    usleep(50 * 1000); /* let them block on the flush */
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 0);
    pthread_mutex_unlock(&e.plog->wlock);
    pthread_join(lt, NULL);
    for (int i = 0; i < WAITERS; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(lead.st, PULSE_IO);
    for (int i = 0; i < WAITERS; i++)
        ck_assert_msg(w[i].st == PULSE_FENCED, "waiter %d: %s", i, pulse_status_name(w[i].st));
    ck_assert_int_eq(pulse_plog_try_sync(e.plog, w[0].end), PULSE_FENCED);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 0);
    env_close(&e);
}
END_TEST

static Suite *synclead_suite(void)
{
    Suite *s = suite_create("synclead");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_try_sync_leads_when_no_sync_runs_and_covers_every_earlier_append);
    tcase_add_test(tc, test_try_sync_never_waits_for_a_running_sync);
    tcase_add_test(tc, test_concurrent_leaders_acknowledge_only_durable_records_and_a_power_cut_keeps_them);
    tcase_add_test(tc, test_a_failed_fdatasync_reaches_every_waiter_of_that_flush);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(synclead_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
