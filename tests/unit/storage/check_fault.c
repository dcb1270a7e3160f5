/* SPDX-License-Identifier: MIT */
/*
 * check_fault.c - durability under injected failures (tests/lib/faultio):
 * group commit shares fdatasyncs and never acknowledges before one covers
 * the batch; a write that finds the device full is cut back and refused
 * while the log keeps accepting appends; any other failed write, and a
 * failed sync, fences the log, returns IO once and FENCED after, never
 * advances HW; pulse_plog_reopen brings a fenced log back in process; a
 * simulated power cut keeps every acknowledged batch.
 */
#include "plogtest.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "faultio.h"
#include "common/fsio.h"

struct env {
    char *dir;
    struct faultio *fio;
    struct pulse_plog *plog;
    struct pulse_plog_config cfg;
};

static void env_open(struct env *e, uint64_t seg, enum pulse_sync_mode mode)
{
    memset(e, 0, sizeof *e);
    e->dir = pt_tmpdir();
    e->fio = faultio_create();
    ck_assert_ptr_nonnull(e->fio);
    pt_cfg(&e->cfg, seg, 4096, faultio_io(e->fio));
    e->cfg.sync_mode = mode;
    e->cfg.sync_interval_ms = 3600 * 1000;
    ck_assert_int_eq(pulse_plog_open(e->dir, &e->cfg, &e->plog, NULL), PULSE_OK);
}

static void env_close(struct env *e)
{
    (void)pulse_plog_close(e->plog);
    faultio_destroy(e->fio);
    pt_cleanup(e->dir);
}

/* Reopens the directory with the plain POSIX io and returns the log. */
static struct pulse_plog *reopen_posix(const char *dir, uint64_t seg, struct pulse_plog_recovery *rec)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pt_cfg(&cfg, seg, 4096, NULL);
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, rec), PULSE_OK);
    return plog;
}

static pulse_status_t append_one(struct pulse_plog *plog, uint64_t id, uint32_t n, int64_t *base)
{
    struct pulse_buf b;
    pulse_buf_init(&b, 1 << 20);
    pt_batch(&b, id, n, 64, 0);
    pulse_status_t st = pulse_plog_append(plog, b.data, b.len, base);
    pulse_buf_fini(&b);
    return st;
}

struct gc_arg {
    struct env *e;
    int thread;
    int appends;
    atomic_int *violations;
};

static void *gc_worker(void *p)
{
    struct gc_arg *a = p;
    struct pulse_buf b;
    char path[512];
    pt_path(path, sizeof path, a->e->dir, 0, "log");
    pulse_buf_init(&b, 1 << 20);
    for (int i = 0; i < a->appends; i++) {
        int64_t base = -1;
        struct pulse_slice sl;
        pt_batch(&b, (uint64_t)a->thread * 100000 + (uint64_t)i, 1, 64, 0);
        if (pulse_plog_append(a->e->plog, b.data, b.len, &base) != PULSE_OK) {
            atomic_fetch_add(a->violations, 1);
            continue;
        }
        /* Acknowledged: an fdatasync must already cover the whole batch. */
        if (pulse_plog_slice(a->e->plog, base, 1, false, &sl) != PULSE_OK || sl.len == 0 ||
            faultio_synced_size(a->e->fio, path) < sl.pos + sl.len || pulse_plog_high_watermark(a->e->plog) <= base)
            atomic_fetch_add(a->violations, 1);
    }
    pulse_buf_fini(&b);
    return NULL;
}

static atomic_int observed_ok;

static void observer(void *arg, int64_t us, bool ok)
{
    (void)arg;
    (void)us;
    if (ok)
        atomic_fetch_add(&observed_ok, 1);
}

START_TEST(test_concurrent_appenders_share_fdatasyncs_and_none_is_acked_before_its_sync)
{
    struct env e;
    enum { THREADS = 8, APPENDS = 200 };
    pthread_t th[THREADS];
    struct gc_arg args[THREADS];
    atomic_int violations;
    atomic_init(&violations, 0);
    atomic_init(&observed_ok, 0);
    memset(&e, 0, sizeof e);
    e.dir = pt_tmpdir();
    e.fio = faultio_create();
    pt_cfg(&e.cfg, 1 << 24, 4096, faultio_io(e.fio));
    e.cfg.sync_observer = observer;
    ck_assert_int_eq(pulse_plog_open(e.dir, &e.cfg, &e.plog, NULL), PULSE_OK);
    /* A disk that takes a while per sync, so appenders really overlap. */
    faultio_set_sync_delay_us(e.fio, 500);
    unsigned long before = faultio_count(e.fio, FAULTIO_FDATASYNC);
    for (int i = 0; i < THREADS; i++) {
        args[i] = (struct gc_arg){&e, i, APPENDS, &violations};
        ck_assert_int_eq(pthread_create(&th[i], NULL, gc_worker, &args[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    unsigned long syncs = faultio_count(e.fio, FAULTIO_FDATASYNC) - before;
    ck_assert_int_eq(atomic_load(&violations), 0);
    ck_assert_int_eq(pulse_plog_log_end(e.plog), THREADS * APPENDS);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), THREADS * APPENDS);
    ck_assert_uint_lt(syncs, THREADS * APPENDS / 2);
    ck_assert_uint_gt(syncs, 0);
    struct pulse_plog_stats st;
    pulse_plog_get_stats(e.plog, &st);
    ck_assert_uint_eq(st.syncs, (uint64_t)atomic_load(&observed_ok));
    /* Every record is there exactly once. */
    struct pt_log l = {0};
    pt_read_all(e.plog, 0, 1 << 20, &l);
    ck_assert_uint_eq(l.n, THREADS * APPENDS);
    pt_log_free(&l);
    env_close(&e);
}
END_TEST

START_TEST(test_failed_fdatasync_fences_the_log_and_hw_does_not_advance)
{
    struct env e;
    int64_t base;
    env_open(&e, 1 << 20, PULSE_SYNC_EVERY_WRITE);
    ck_assert_int_eq(append_one(e.plog, 0, 3, &base), PULSE_OK);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 3);
    faultio_fail_nth(e.fio, FAULTIO_FDATASYNC, 1, EIO);
    ck_assert_int_eq(append_one(e.plog, 3, 3, &base), PULSE_IO);
    ck_assert(pulse_plog_fenced(e.plog));
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 3);
    unsigned long syncs = faultio_count(e.fio, FAULTIO_FDATASYNC);
    /* Sticky: never retried, every later call is refused. */
    ck_assert_int_eq(append_one(e.plog, 6, 1, &base), PULSE_FENCED);
    ck_assert_int_eq(pulse_plog_sync(e.plog), PULSE_FENCED);
    ck_assert_int_eq(pulse_plog_wait_durable(e.plog, 6), PULSE_FENCED);
    ck_assert_uint_eq(faultio_count(e.fio, FAULTIO_FDATASYNC), syncs);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 3);
    struct pulse_slice sl;
    ck_assert_int_eq(pulse_plog_slice(e.plog, 3, 1, false, &sl), PULSE_OK);
    ck_assert_uint_eq(sl.len, 0);
    ck_assert_int_eq(pulse_plog_close(e.plog), PULSE_FENCED);
    e.plog = NULL;
    /* Recovery decides: the acknowledged batch is there. */
    struct pulse_plog *plog = reopen_posix(e.dir, 1 << 20, NULL);
    ck_assert_int_ge(pulse_plog_log_end(plog), 3);
    ck_assert(!pulse_plog_fenced(plog));
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    env_close(&e);
}
END_TEST

START_TEST(test_enospc_on_write_is_refused_and_the_log_keeps_accepting_appends)
{
    struct env e;
    int64_t base;
    char p[512];
    env_open(&e, 1 << 20, PULSE_SYNC_EVERY_WRITE);
    ck_assert_int_eq(append_one(e.plog, 0, 2, &base), PULSE_OK);
    pt_path(p, sizeof p, e.dir, 0, "log");
    long long size = pt_file_size(p);
    faultio_fail_nth(e.fio, FAULTIO_PWRITE, 1, ENOSPC);
    ck_assert_int_eq(append_one(e.plog, 2, 2, &base), PULSE_NOSPACE);
    ck_assert(!pulse_plog_fenced(e.plog));
    ck_assert_int_eq(pt_file_size(p), size);
    ck_assert_int_eq(pulse_plog_log_end(e.plog), 2);
    /* Space is back: the next append gets the offsets the refused one
     * would have had (nobody was ever told about them). */
    ck_assert_int_eq(append_one(e.plog, 2, 2, &base), PULSE_OK);
    ck_assert_int_eq(base, 2);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 4);
    struct pt_log l = {0};
    pt_read_all(e.plog, 0, 1 << 20, &l);
    ck_assert_uint_eq(l.n, 4);
    for (size_t i = 0; i < l.n; i++) {
        ck_assert_int_eq(l.offs[i], (int64_t)i);
        ck_assert_uint_eq(l.ids[i], i);
    }
    pt_log_free(&l);
    ck_assert_int_eq(pulse_plog_close(e.plog), PULSE_OK);
    e.plog = NULL;
    env_close(&e);
}
END_TEST

START_TEST(test_short_write_on_a_full_device_is_cut_back_and_earlier_unsynced_appends_stay)
{
    struct env e;
    struct pulse_buf b;
    int64_t base = -1, end = 0;
    char p[512];
    env_open(&e, 1 << 20, PULSE_SYNC_EVERY_WRITE);
    ck_assert_int_eq(append_one(e.plog, 0, 2, &base), PULSE_OK);
    /* Written, not yet synced: a publisher is waiting for it. */
    pulse_buf_init(&b, 1 << 20);
    pt_batch(&b, 2, 2, 64, 0);
    ck_assert_int_eq(pulse_plog_append_async(e.plog, b.data, b.len, &base, &end, NULL), PULSE_OK);
    ck_assert_int_eq(end, 4);
    pulse_buf_fini(&b);
    pt_path(p, sizeof p, e.dir, 0, "log");
    long long size = pt_file_size(p);
    /* 10 bytes land, then the device is full. */
    faultio_short_write_nth(e.fio, 1, 10, ENOSPC);
    ck_assert_int_eq(append_one(e.plog, 4, 2, &base), PULSE_NOSPACE);
    ck_assert(!pulse_plog_fenced(e.plog));
    /* Cut back to where this append began, not to the durable size. */
    ck_assert_int_eq(pt_file_size(p), size);
    ck_assert_int_eq(pulse_plog_wait_durable(e.plog, end), PULSE_OK);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 4);
    ck_assert_uint_ge(faultio_synced_size(e.fio, p), (uint64_t)size);
    ck_assert_int_eq(append_one(e.plog, 4, 2, &base), PULSE_OK);
    ck_assert_int_eq(base, 4);
    ck_assert_int_eq(pulse_plog_close(e.plog), PULSE_OK);
    e.plog = NULL;
    struct pulse_plog_recovery rec;
    struct pulse_plog *plog = reopen_posix(e.dir, 1 << 20, &rec);
    ck_assert_uint_eq(rec.truncated_bytes, 0);
    ck_assert_int_eq(pulse_plog_log_end(plog), 6);
    struct pt_log l = {0};
    pt_read_all(plog, 0, 1 << 20, &l);
    ck_assert_uint_eq(l.n, 6);
    for (size_t i = 0; i < l.n; i++)
        ck_assert_uint_eq(l.ids[i], i);
    pt_log_free(&l);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    env_close(&e);
}
END_TEST

START_TEST(test_enospc_on_the_index_write_takes_back_the_data_and_the_entry)
{
    struct env e;
    int64_t base;
    char p[512], ip[512];
    /* A new segment per append: each append's first write is its data, the
     * second its index entry (the first batch of a segment always gets
     * one). */
    env_open(&e, 1024, PULSE_SYNC_EVERY_WRITE);
    ck_assert_int_eq(append_one(e.plog, 0, 8, &base), PULSE_OK);
    ck_assert_int_eq(append_one(e.plog, 8, 8, &base), PULSE_OK);
    pt_path(p, sizeof p, e.dir, 8, "log");
    pt_path(ip, sizeof ip, e.dir, 8, "index");
    long long size = pt_file_size(p);
    long long isize = pt_file_size(ip);
    ck_assert_int_eq(isize, 8);
    /* Fill the segment so the next append rolls: that one's data write
     * lands in the new segment and its index write fails. */
    faultio_fail_nth(e.fio, FAULTIO_PWRITE, 2, ENOSPC);
    ck_assert_int_eq(append_one(e.plog, 16, 8, &base), PULSE_NOSPACE);
    ck_assert(!pulse_plog_fenced(e.plog));
    ck_assert_int_eq(pt_file_size(p), size);
    pt_path(p, sizeof p, e.dir, 16, "log");
    pt_path(ip, sizeof ip, e.dir, 16, "index");
    ck_assert_int_eq(pt_file_size(p), 0);
    ck_assert_int_eq(pt_file_size(ip), 0);
    ck_assert_int_eq(append_one(e.plog, 16, 8, &base), PULSE_OK);
    ck_assert_int_eq(base, 16);
    ck_assert_int_eq(pt_file_size(ip), 8);
    ck_assert_int_eq(pulse_plog_close(e.plog), PULSE_OK);
    e.plog = NULL;
    struct pulse_plog_recovery rec;
    struct pulse_plog *plog = reopen_posix(e.dir, 1024, &rec);
    ck_assert_uint_eq(rec.truncated_bytes, 0);
    ck_assert_uint_eq(rec.indexes_rebuilt, 0);
    struct pt_log l = {0};
    pt_read_all(plog, 0, 1 << 20, &l);
    ck_assert_uint_eq(l.n, 24);
    for (size_t i = 0; i < l.n; i++)
        ck_assert_uint_eq(l.ids[i], i);
    pt_log_free(&l);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    env_close(&e);
}
END_TEST

START_TEST(test_eio_on_write_still_fences_and_cuts_to_the_durable_size)
{
    struct env e;
    int64_t base;
    char p[512];
    env_open(&e, 1 << 20, PULSE_SYNC_EVERY_WRITE);
    ck_assert_int_eq(append_one(e.plog, 0, 2, &base), PULSE_OK);
    pt_path(p, sizeof p, e.dir, 0, "log");
    long long size = pt_file_size(p);
    faultio_short_write_nth(e.fio, 1, 10, EIO);
    ck_assert_int_eq(append_one(e.plog, 2, 2, &base), PULSE_IO);
    ck_assert(pulse_plog_fenced(e.plog));
    ck_assert_int_eq(pt_file_size(p), size);
    ck_assert_int_eq(append_one(e.plog, 2, 2, &base), PULSE_FENCED);
    ck_assert_int_eq(pulse_plog_close(e.plog), PULSE_FENCED);
    e.plog = NULL;
    env_close(&e);
}
END_TEST

/* The batch the reopen cuts had an index entry (one per batch here): the
 * entry goes with it, so its offsets are given to the next append, not
 * taken for offsets handed out (they never were visible or durable). */
START_TEST(test_reopen_cuts_the_index_entries_of_the_batches_it_cuts)
{
    struct env e;
    struct pulse_buf b;
    int64_t base, end;
    env_open(&e, 1 << 20, PULSE_SYNC_EVERY_WRITE);
    (void)pulse_plog_close(e.plog);
    e.cfg.index_interval_bytes = 64;
    ck_assert_int_eq(pulse_plog_open(e.dir, &e.cfg, &e.plog, NULL), PULSE_OK);
    for (uint64_t i = 0; i < 4; i++)
        ck_assert_int_eq(append_one(e.plog, i * 3, 3, &base), PULSE_OK);
    pulse_buf_init(&b, 1 << 20);
    pt_batch(&b, 1000, 3, 64, 0);
    ck_assert_int_eq(pulse_plog_append_async(e.plog, b.data, b.len, &base, &end, NULL), PULSE_OK);
    pulse_buf_fini(&b);
    faultio_fail_nth(e.fio, FAULTIO_FDATASYNC, 1, EIO);
    ck_assert_int_eq(pulse_plog_wait_durable(e.plog, end), PULSE_IO);
    struct pulse_plog_recovery rec;
    ck_assert_int_eq(pulse_plog_reopen(e.plog, &rec), PULSE_OK);
    ck_assert_int_eq(rec.leo_raised, 0);
    ck_assert_uint_eq(rec.damaged_ranges, 0);
    ck_assert_int_eq(pulse_plog_log_end(e.plog), 12);
    ck_assert_int_eq(append_one(e.plog, 12, 3, &base), PULSE_OK);
    ck_assert_int_eq(base, 12);
    ck_assert_int_eq(pulse_plog_close(e.plog), PULSE_OK);
    e.plog = NULL;
    env_close(&e);
}
END_TEST

START_TEST(test_reopen_after_a_failed_fdatasync_keeps_what_was_durable_and_appends_resume)
{
    struct env e;
    struct pulse_buf b;
    int64_t base, end;
    char p[512];
    env_open(&e, 2048, PULSE_SYNC_EVERY_WRITE);
    for (uint64_t i = 0; i < 10; i++)
        ck_assert_int_eq(append_one(e.plog, i * 3, 3, &base), PULSE_OK);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 30);
    ck_assert_int_eq(pulse_plog_reopen(e.plog, NULL), PULSE_INVALID);
    /* A reader holds a descriptor of the first segment across the reopen. */
    struct pulse_slice held;
    ck_assert_int_eq(pulse_plog_slice(e.plog, 0, 1 << 20, true, &held), PULSE_OK);
    ck_assert_int_ge(held.fd, 0);
    /* Written, then the sync that should cover it fails. */
    pulse_buf_init(&b, 1 << 20);
    pt_batch(&b, 1000, 3, 64, 0);
    ck_assert_int_eq(pulse_plog_append_async(e.plog, b.data, b.len, &base, &end, NULL), PULSE_OK);
    ck_assert_int_eq(end, 33);
    pulse_buf_fini(&b);
    uint64_t epoch = pulse_plog_epoch(e.plog);
    faultio_fail_nth(e.fio, FAULTIO_FDATASYNC, 1, EIO);
    ck_assert_int_eq(pulse_plog_wait_durable(e.plog, end), PULSE_IO);
    ck_assert(pulse_plog_fenced(e.plog));
    ck_assert_int_eq(append_one(e.plog, 30, 1, &base), PULSE_FENCED);

    struct pulse_plog_recovery rec;
    ck_assert_int_eq(pulse_plog_reopen(e.plog, &rec), PULSE_OK);
    ck_assert(!pulse_plog_fenced(e.plog));
    ck_assert_uint_eq(pulse_plog_epoch(e.plog), epoch + 1);
    /* What was durable is there; the unsynced batch was cut, so the next
     * offset is the old high watermark. */
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 30);
    ck_assert_int_eq(pulse_plog_log_end(e.plog), 30);
    ck_assert_int_eq(append_one(e.plog, 30, 3, &base), PULSE_OK);
    ck_assert_int_eq(base, 30);
    /* HW passed the discarded append's end, but with other records: only
     * the epoch tells its writer that it never became durable. */
    ck_assert_int_ge(pulse_plog_high_watermark(e.plog), end);
    ck_assert_uint_ne(pulse_plog_epoch(e.plog), epoch);
    struct pt_log l = {0};
    pt_read_all(e.plog, 0, 1 << 20, &l);
    ck_assert_uint_eq(l.n, 33);
    for (size_t i = 0; i < l.n; i++) {
        ck_assert_int_eq(l.offs[i], (int64_t)i);
        ck_assert_uint_eq(l.ids[i], i);
    }
    pt_log_free(&l);
    /* The descriptor taken before the reopen still reads its batches. */
    uint8_t *raw = pulse_malloc(held.len);
    ck_assert_int_eq(pread(held.fd, raw, held.len, (off_t)held.pos), (ssize_t)held.len);
    l = (struct pt_log){0};
    pt_decode(raw, held.len, 0, &l);
    ck_assert_uint_gt(l.n, 0);
    for (size_t i = 0; i < l.n; i++)
        ck_assert_uint_eq(l.ids[i], i);
    pt_log_free(&l);
    pulse_free(raw);
    close(held.fd);
    ck_assert_int_eq(pulse_plog_close(e.plog), PULSE_OK);
    e.plog = NULL;
    /* A restart agrees. */
    struct pulse_plog *plog = reopen_posix(e.dir, 2048, NULL);
    ck_assert_int_eq(pulse_plog_log_end(plog), 33);
    pt_path(p, sizeof p, e.dir, 0, "log");
    ck_assert_int_gt(pt_file_size(p), 0);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    env_close(&e);
}
END_TEST

/* Behind the log's back its durable tail is lost (the file is cut in the
 * middle of batch 2 of 4), then a sync fails. The reopen keeps the offsets
 * readers saw: the running log's HW is proof they were handed out, so the
 * log end stays 8 and the lost ones become a recorded range, skipped by
 * reads and never given to a new record, in this process or after a
 * restart. */
START_TEST(test_reopen_of_a_log_that_lost_durable_bytes_never_hands_their_offsets_out_again)
{
    struct env e;
    struct pulse_plog_recovery rec;
    int64_t base;
    char p[512];
    env_open(&e, 1 << 20, PULSE_SYNC_EVERY_WRITE);
    for (uint64_t i = 0; i < 4; i++)
        ck_assert_int_eq(append_one(e.plog, i * 2, 2, &base), PULSE_OK);
    pt_path(p, sizeof p, e.dir, 0, "log");
    pt_truncate(p, pt_file_size(p) / 2);
    faultio_fail_nth(e.fio, FAULTIO_FDATASYNC, 1, EIO);
    ck_assert_int_eq(append_one(e.plog, 8, 2, &base), PULSE_IO);
    ck_assert_int_eq(pulse_plog_reopen(e.plog, &rec), PULSE_OK);
    ck_assert_uint_eq(rec.truncated_bytes, 0);
    ck_assert_uint_ge(rec.new_damaged_ranges, 1);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 8);
    ck_assert_int_eq(pulse_plog_log_end(e.plog), 8);
    ck_assert_int_eq(append_one(e.plog, 8, 2, &base), PULSE_OK);
    ck_assert_int_eq(base, 8);
    /* Offsets 0..3 survived whole; 4..7 are skipped; 8 and 9 follow. */
    struct pt_log l = {0};
    pt_read_all(e.plog, 0, 1 << 20, &l);
    ck_assert_uint_eq(l.n, 6);
    for (size_t i = 0; i < l.n; i++)
        ck_assert_int_eq(l.offs[i], i < 4 ? (int64_t)i : (int64_t)i + 4);
    pt_log_free(&l);
    env_close(&e);
}
END_TEST

/* The last synced batch of the active segment goes bad on disk (one byte),
 * then a sync fails. The reopen must not take that acknowledged batch for
 * a torn tail: the running log's durable size proves it was synced, so it
 * is kept as corruption (the file keeps every byte), and neither the
 * reopened log nor a restart ever gives offsets 6 and 7 to new records. */
START_TEST(test_reopen_keeps_a_damaged_durable_batch_and_never_hands_its_offsets_out_again)
{
    struct env e;
    struct pulse_plog_recovery rec;
    int64_t base;
    char p[512];
    long long size;
    uint8_t x;
    env_open(&e, 1 << 20, PULSE_SYNC_EVERY_WRITE);
    for (uint64_t i = 0; i < 4; i++)
        ck_assert_int_eq(append_one(e.plog, i * 2, 2, &base), PULSE_OK);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 8); /* readers may have seen 0..7 */
    pt_path(p, sizeof p, e.dir, 0, "log");
    size = pt_file_size(p);
    pt_read_file(p, size - 10, &x, 1);
    x ^= 0x40;
    pt_patch(p, size - 10, &x, 1);
    faultio_fail_nth(e.fio, FAULTIO_FDATASYNC, 1, EIO);
    ck_assert_int_eq(append_one(e.plog, 8, 2, &base), PULSE_IO);
    ck_assert_int_eq(pulse_plog_reopen(e.plog, &rec), PULSE_OK);
    /* Only the never-durable batch 8 was cut, by the reopen's first step. */
    ck_assert_int_eq(pt_file_size(p), size);
    ck_assert_uint_eq(rec.truncated_bytes, 0);
    ck_assert_uint_eq(rec.new_damaged_ranges, 1);
    ck_assert_uint_eq(rec.forensic_copies, 1);
    ck_assert_int_eq(pulse_plog_log_end(e.plog), 8);
    ck_assert_int_eq(append_one(e.plog, 8, 2, &base), PULSE_OK);
    ck_assert_int_eq(base, 8);
    ck_assert_int_eq(pulse_plog_close(e.plog), PULSE_OK);
    e.plog = NULL;
    /* A restart never hands out 6 and 7 again either. */
    struct pulse_plog *plog = reopen_posix(e.dir, 1 << 20, &rec);
    ck_assert_int_eq(pulse_plog_log_end(plog), 10);
    ck_assert_uint_eq(rec.truncated_bytes, 0);
    ck_assert_uint_eq(rec.damaged_ranges, 1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    env_close(&e);
}
END_TEST

/* The epoch rule (pulse_plog_fate): an append whose bytes were durable
 * before a fence and a reopen is durable for good; one the reopen
 * discarded never is, even once HW passes its end again with other
 * records appended after the reopen. */
START_TEST(test_fate_keeps_an_append_durable_before_a_reopen_and_never_one_it_discarded)
{
    struct env e;
    struct pulse_buf b;
    int64_t base, end_a, end_b, end_c;
    uint64_t ep_a, ep_b, ep_c;
    env_open(&e, 1 << 20, PULSE_SYNC_EVERY_WRITE);
    pulse_buf_init(&b, 1 << 20);
    pt_batch(&b, 0, 2, 64, 0);
    ck_assert_int_eq(pulse_plog_append_async(e.plog, b.data, b.len, &base, &end_a, &ep_a), PULSE_OK);
    ck_assert_int_eq(pulse_plog_fate(e.plog, ep_a, end_a), PULSE_PLOG_PENDING);
    ck_assert_int_eq(pulse_plog_sync(e.plog), PULSE_OK);
    ck_assert_int_eq(pulse_plog_fate(e.plog, ep_a, end_a), PULSE_PLOG_DURABLE);
    pt_batch(&b, 2, 2, 64, 0);
    ck_assert_int_eq(pulse_plog_append_async(e.plog, b.data, b.len, &base, &end_b, &ep_b), PULSE_OK);
    faultio_fail_nth(e.fio, FAULTIO_FDATASYNC, 1, EIO);
    ck_assert_int_eq(pulse_plog_sync(e.plog), PULSE_IO);
    /* Fenced: B can only be cut now. */
    ck_assert_int_eq(pulse_plog_fate(e.plog, ep_b, end_b), PULSE_PLOG_LOST);
    ck_assert_int_eq(pulse_plog_reopen(e.plog, NULL), PULSE_OK);
    ck_assert_uint_eq(pulse_plog_epoch(e.plog), ep_a + 1);
    ck_assert_int_eq(pulse_plog_fate(e.plog, ep_a, end_a), PULSE_PLOG_DURABLE);
    ck_assert_int_eq(pulse_plog_fate(e.plog, ep_b, end_b), PULSE_PLOG_LOST);
    /* C takes B's offsets and becomes durable: B stays lost. */
    pt_batch(&b, 2, 2, 64, 0);
    ck_assert_int_eq(pulse_plog_append_async(e.plog, b.data, b.len, &base, &end_c, &ep_c), PULSE_OK);
    ck_assert_int_eq(base, 2);
    ck_assert_uint_eq(ep_c, ep_a + 1);
    ck_assert_int_eq(pulse_plog_sync(e.plog), PULSE_OK);
    ck_assert_int_ge(pulse_plog_high_watermark(e.plog), end_b);
    ck_assert_int_eq(pulse_plog_fate(e.plog, ep_b, end_b), PULSE_PLOG_LOST);
    ck_assert_int_eq(pulse_plog_fate(e.plog, ep_c, end_c), PULSE_PLOG_DURABLE);
    ck_assert_int_eq(pulse_plog_fate(e.plog, ep_a, end_a), PULSE_PLOG_DURABLE);
    pulse_buf_fini(&b);
    env_close(&e);
}
END_TEST

START_TEST(test_reopen_after_a_failed_rotation_sync_continues_in_a_new_segment)
{
    struct env e;
    int64_t base;
    env_open(&e, 1024, PULSE_SYNC_EVERY_WRITE);
    ck_assert_int_eq(append_one(e.plog, 0, 8, &base), PULSE_OK); /* ~ 800 bytes */
    /* The next append rolls; the old segment's fdatasync fails. */
    faultio_fail_nth(e.fio, FAULTIO_FDATASYNC, 1, EIO);
    ck_assert_int_eq(append_one(e.plog, 8, 8, &base), PULSE_IO);
    ck_assert(pulse_plog_fenced(e.plog));
    ck_assert_int_eq(pulse_plog_reopen(e.plog, NULL), PULSE_OK);
    for (uint64_t i = 1; i < 5; i++) {
        ck_assert_int_eq(append_one(e.plog, i * 8, 8, &base), PULSE_OK);
        ck_assert_int_eq(base, (int64_t)i * 8);
    }
    struct pulse_plog_stats stats;
    pulse_plog_get_stats(e.plog, &stats);
    ck_assert_uint_eq(stats.segments, 5);
    struct pt_log l = {0};
    pt_read_all(e.plog, 0, 1 << 20, &l);
    ck_assert_uint_eq(l.n, 40);
    for (size_t i = 0; i < l.n; i++)
        ck_assert_uint_eq(l.ids[i], i);
    pt_log_free(&l);
    env_close(&e);
}
END_TEST

START_TEST(test_waiters_of_a_failed_sync_get_fenced_and_the_leader_gets_io)
{
    struct env e;
    struct pulse_buf b;
    int64_t base, end1, end2;
    env_open(&e, 1 << 20, PULSE_SYNC_EVERY_WRITE);
    pulse_buf_init(&b, 1 << 20);
    pt_batch(&b, 0, 2, 64, 0);
    ck_assert_int_eq(pulse_plog_append_async(e.plog, b.data, b.len, &base, &end1, NULL), PULSE_OK);
    pt_batch(&b, 2, 2, 64, 0);
    ck_assert_int_eq(pulse_plog_append_async(e.plog, b.data, b.len, &base, &end2, NULL), PULSE_OK);
    ck_assert_int_eq(end2, 4);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 0);
    faultio_fail_nth(e.fio, FAULTIO_FDATASYNC, 1, EIO);
    ck_assert_int_eq(pulse_plog_wait_durable(e.plog, end1), PULSE_IO);
    ck_assert_int_eq(pulse_plog_wait_durable(e.plog, end2), PULSE_FENCED);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 0);
    pulse_buf_fini(&b);
    env_close(&e);
}
END_TEST

struct race {
    struct env *e;
    pulse_status_t st;
};

/* Runs inside the leader's fdatasync: another append's write fails now. */
static void fail_write_during_sync(void *arg)
{
    struct race *r = arg;
    int64_t base;
    faultio_set_sync_hook(r->e->fio, NULL, NULL);
    faultio_fail_nth(r->e->fio, FAULTIO_PWRITE, 1, EIO);
    r->st = append_one(r->e->plog, 100, 1, &base);
}

START_TEST(test_a_sync_that_finishes_after_a_fence_does_not_publish_hw)
{
    struct env e;
    struct pulse_buf b;
    int64_t base, end;
    char p[512];
    env_open(&e, 1 << 20, PULSE_SYNC_EVERY_WRITE);
    pulse_buf_init(&b, 1 << 20);
    pt_batch(&b, 0, 2, 64, 0);
    ck_assert_int_eq(pulse_plog_append_async(e.plog, b.data, b.len, &base, &end, NULL), PULSE_OK);
    pulse_buf_fini(&b);
    struct race r = {&e, PULSE_OK};
    faultio_set_sync_hook(e.fio, fail_write_during_sync, &r);
    /* The leader captured [0, end) and is syncing when the failed write
     * fences the log and cuts the file back to its durable size (0). */
    ck_assert_int_eq(pulse_plog_wait_durable(e.plog, end), PULSE_FENCED);
    ck_assert_int_eq(r.st, PULSE_IO);
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 0);
    pt_path(p, sizeof p, e.dir, 0, "log");
    ck_assert_int_eq(pt_file_size(p), 0);
    struct pulse_slice sl;
    ck_assert_int_eq(pulse_plog_slice(e.plog, 0, 1, false, &sl), PULSE_OK);
    ck_assert_uint_eq(sl.len, 0);
    env_close(&e);
}
END_TEST

START_TEST(test_failed_directory_fsync_at_rotation_fences_the_log)
{
    struct env e;
    int64_t base;
    env_open(&e, 1024, PULSE_SYNC_EVERY_WRITE);
    ck_assert_int_eq(append_one(e.plog, 0, 8, &base), PULSE_OK); /* ~ 800 bytes */
    faultio_fail_nth(e.fio, FAULTIO_FSYNC_DIR, 1, EIO);
    ck_assert_int_eq(append_one(e.plog, 8, 8, &base), PULSE_IO);
    ck_assert(pulse_plog_fenced(e.plog));
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 8);
    env_close(&e);
}
END_TEST

/* Appends one batch of n records of 64 bytes; ids continue from *id. */
static pulse_status_t append_ids(struct pulse_plog *plog, uint64_t *id, uint32_t n, int64_t *base)
{
    pulse_status_t st = append_one(plog, *id, n, base);
    if (st == PULSE_OK)
        *id += n;
    return st;
}

/* Reopens dir and checks that ids 0..n-1 come back at offsets 0..n-1. */
static void expect_all_back(const char *dir, uint64_t n)
{
    struct pt_log l = {0};
    struct pulse_plog *plog = reopen_posix(dir, 1024, NULL);
    pt_read_all(plog, 0, 1 << 20, &l);
    ck_assert_uint_eq(l.n, n);
    for (size_t i = 0; i < l.n; i++) {
        ck_assert_int_eq(l.offs[i], (int64_t)i);
        ck_assert_uint_eq(l.ids[i], i);
    }
    pt_log_free(&l);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
}

START_TEST(test_failed_open_at_rotation_keeps_the_old_segment_active_and_the_log_usable)
{
    static const struct {
        int err;
        pulse_status_t st;
    } cases[] = {{EMFILE, PULSE_NOFILE}, {ENOSPC, PULSE_NOSPACE}};
    for (size_t c = 0; c < 2; c++) {
        /* nth 1: the data file cannot be opened; nth 2: it was created but
         * its index cannot be, and the half-made segment must go. */
        for (unsigned long nth = 1; nth <= 2; nth++) {
            struct env e;
            int64_t base = -1;
            uint64_t id = 0;
            char p[512];
            env_open(&e, 1024, PULSE_SYNC_EVERY_WRITE);
            (void)pulse_plog_close(e.plog);
            e.cfg.index_interval_bytes = 64; /* the small append below needs an index entry */
            ck_assert_int_eq(pulse_plog_open(e.dir, &e.cfg, &e.plog, NULL), PULSE_OK);
            ck_assert_int_eq(append_ids(e.plog, &id, 8, &base), PULSE_OK); /* ~ 760 bytes */
            faultio_fail_nth(e.fio, FAULTIO_OPEN, nth, cases[c].err);
            ck_assert_int_eq(append_ids(e.plog, &id, 8, &base), cases[c].st); /* needs a new segment */
            ck_assert(!pulse_plog_fenced(e.plog));
            ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 8);
            pt_path(p, sizeof p, e.dir, 8, "log");
            ck_assert_int_eq(pt_file_size(p), -1);
            pt_path(p, sizeof p, e.dir, 8, "index");
            ck_assert_int_eq(pt_file_size(p), -1);
            /* A batch that still fits goes to the old segment, index entry
             * and all (its index file must still be open). */
            ck_assert_int_eq(append_ids(e.plog, &id, 1, &base), PULSE_OK);
            ck_assert_int_eq(base, 8);
            /* Once the open works again, so does the rotation. */
            ck_assert_int_eq(append_ids(e.plog, &id, 8, &base), PULSE_OK);
            ck_assert_int_eq(base, 9);
            ck_assert_int_eq(pulse_plog_close(e.plog), PULSE_OK);
            e.plog = NULL;
            expect_all_back(e.dir, id);
            env_close(&e);
        }
    }
}
END_TEST

/* The lowest descriptor number open() would hand out now. */
static int lowest_free_fd(void)
{
    int fd = open("/dev/null", O_RDONLY);
    if (fd >= 0)
        close(fd);
    return fd;
}

/*
 * In a child process: a real RLIMIT_NOFILE leaves room for `spare` more
 * descriptors when the log must roll. Exit status 0 when everything held,
 * else the number of the step that failed.
 */
static int rlimit_child(const char *dir, int spare)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    struct rlimit old, low;
    int64_t base = -1;
    uint64_t id = 0;
    pulse_status_t st;

    pt_cfg(&cfg, 1024, 64, NULL);
    if (pulse_plog_open(dir, &cfg, &plog, NULL) != PULSE_OK || append_ids(plog, &id, 8, &base) != PULSE_OK)
        return 10;
    if (getrlimit(RLIMIT_NOFILE, &old) != 0)
        return 11;
    low = old;
    low.rlim_cur = (rlim_t)(lowest_free_fd() + spare);
    if (setrlimit(RLIMIT_NOFILE, &low) != 0)
        return 12;
    st = append_ids(plog, &id, 8, &base);
    if (st != PULSE_NOFILE)
        return 20 + (int)st;
    if (pulse_plog_fenced(plog) || pulse_plog_high_watermark(plog) != 8)
        return 13;
    if (append_ids(plog, &id, 1, &base) != PULSE_OK || base != 8)
        return 14;
    if (setrlimit(RLIMIT_NOFILE, &old) != 0)
        return 15;
    if (append_ids(plog, &id, 8, &base) != PULSE_OK || base != 9)
        return 16;
    return pulse_plog_close(plog) == PULSE_OK && id == 17 ? 0 : 17;
}

START_TEST(test_descriptor_limit_at_rotation_refuses_the_append_without_fencing)
{
    for (int spare = 0; spare <= 1; spare++) {
        char *dir = pt_tmpdir();
        int status = 0;
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
            _exit(rlimit_child(dir, spare));
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "spare %d: child status %d", spare,
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        expect_all_back(dir, 17);
        pt_cleanup(dir);
    }
}
END_TEST

START_TEST(test_failed_snapshot_write_does_not_fence_the_log)
{
    struct env e;
    int64_t base;
    env_open(&e, 1024, PULSE_SYNC_EVERY_WRITE);
    ck_assert_int_eq(append_one(e.plog, 0, 8, &base), PULSE_OK);
    faultio_fail_nth(e.fio, FAULTIO_RENAME, 1, EIO);
    ck_assert_int_eq(append_one(e.plog, 8, 8, &base), PULSE_OK); /* rotation */
    ck_assert(!pulse_plog_fenced(e.plog));
    ck_assert_int_eq(pulse_plog_high_watermark(e.plog), 16);
    char p[512];
    snprintf(p, sizeof p, "%s/.tmp-snapshot", e.dir);
    ck_assert_int_eq(pt_file_size(p), -1); /* the temp file was removed */
    ck_assert_int_eq(pulse_plog_close(e.plog), PULSE_OK);
    e.plog = NULL;
    env_close(&e);
}
END_TEST

START_TEST(test_power_cut_keeps_every_acknowledged_batch_and_drops_unsynced_tail)
{
    struct env e;
    struct pulse_buf b;
    int64_t base, end;
    env_open(&e, 4096, PULSE_SYNC_EVERY_WRITE);
    for (uint64_t i = 0; i < 30; i++)
        ck_assert_int_eq(append_one(e.plog, i * 3, 3, &base), PULSE_OK);
    pulse_buf_init(&b, 1 << 20);
    pt_batch(&b, 90, 3, 64, 0);
    ck_assert_int_eq(pulse_plog_append_async(e.plog, b.data, b.len, &base, &end, NULL), PULSE_OK);
    pulse_buf_fini(&b);
    faultio_crash(e.fio);
    (void)pulse_plog_close(e.plog);
    e.plog = NULL;

    struct pulse_plog *plog = reopen_posix(e.dir, 4096, NULL);
    ck_assert_int_eq(pulse_plog_log_end(plog), 90);
    struct pt_log l = {0};
    pt_read_all(plog, 0, 1 << 20, &l);
    ck_assert_uint_eq(l.n, 90);
    for (size_t i = 0; i < l.n; i++) {
        ck_assert_int_eq(l.offs[i], (int64_t)i);
        ck_assert_uint_eq(l.ids[i], i);
    }
    pt_log_free(&l);
    /* The next offset continues right after the acknowledged ones. */
    ck_assert_int_eq(append_one(plog, 90, 1, &base), PULSE_OK);
    ck_assert_int_eq(base, 90);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    env_close(&e);
}
END_TEST

START_TEST(test_interval_mode_power_cut_keeps_everything_below_hw)
{
    struct env e;
    int64_t base;
    env_open(&e, 2048, PULSE_SYNC_INTERVAL);
    for (uint64_t i = 0; i < 20; i++)
        ck_assert_int_eq(append_one(e.plog, i * 2, 2, &base), PULSE_OK);
    ck_assert_int_eq(pulse_plog_sync(e.plog), PULSE_OK);
    int64_t hw = pulse_plog_high_watermark(e.plog);
    ck_assert_int_eq(hw, 40);
    for (uint64_t i = 20; i < 30; i++)
        ck_assert_int_eq(append_one(e.plog, i * 2, 2, &base), PULSE_OK);
    faultio_crash(e.fio);
    (void)pulse_plog_close(e.plog);
    e.plog = NULL;
    struct pulse_plog *plog = reopen_posix(e.dir, 2048, NULL);
    ck_assert_int_ge(pulse_plog_log_end(plog), hw);
    struct pt_log l = {0};
    pt_read_all(plog, 0, 1 << 20, &l);
    ck_assert_uint_ge(l.n, (size_t)hw);
    for (size_t i = 0; i < l.n; i++)
        ck_assert_uint_eq(l.ids[i], i);
    pt_log_free(&l);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    env_close(&e);
}
END_TEST

START_TEST(test_replace_file_removes_its_temp_and_keeps_the_old_file_on_failure)
{
    char *dir = pt_tmpdir();
    struct faultio *fio = faultio_create();
    const struct pulse_io *io = faultio_io(fio);
    char p[512];
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    ck_assert_int_eq(pulse_io_replace_file(io, dir, "f", "old", 3), 0);
    faultio_fail_nth(fio, FAULTIO_FDATASYNC, 1, EIO);
    errno = 0;
    ck_assert_int_eq(pulse_io_replace_file(io, dir, "f", "new!", 4), -1);
    ck_assert_int_eq(errno, EIO);
    snprintf(p, sizeof p, "%s/.tmp-f", dir);
    ck_assert_int_eq(pt_file_size(p), -1);
    snprintf(p, sizeof p, "%s/f", dir);
    char got[8] = {0};
    pt_read_file(p, 0, got, 3);
    ck_assert_str_eq(got, "old");
    ck_assert_int_eq(pt_file_size(p), 3);
    /* pwrite_all loops over short writes and reports what landed. */
    int fd = open(p, O_RDWR);
    size_t done = 0;
    faultio_short_write_nth(fio, 1, 2, 0);
    ck_assert_int_eq(pulse_io_pwrite_all(io, fd, "abcdef", 6, 0, &done), 0);
    ck_assert_uint_eq(done, 6);
    faultio_short_write_nth(fio, 1, 2, ENOSPC);
    ck_assert_int_eq(pulse_io_pwrite_all(io, fd, "ghijkl", 6, 0, &done), -1);
    ck_assert_int_eq(errno, ENOSPC);
    ck_assert_uint_eq(done, 2);
    char buf[8] = {0};
    ck_assert_int_eq(pulse_io_pread_all(io, fd, buf, 7, 0), 6);
    ck_assert_str_eq(buf, "ghcdef");
    close(fd);
    faultio_destroy(fio);
    pt_cleanup(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fault");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_concurrent_appenders_share_fdatasyncs_and_none_is_acked_before_its_sync);
    tcase_add_test(tc, test_failed_fdatasync_fences_the_log_and_hw_does_not_advance);
    tcase_add_test(tc, test_enospc_on_write_is_refused_and_the_log_keeps_accepting_appends);
    tcase_add_test(tc, test_short_write_on_a_full_device_is_cut_back_and_earlier_unsynced_appends_stay);
    tcase_add_test(tc, test_enospc_on_the_index_write_takes_back_the_data_and_the_entry);
    tcase_add_test(tc, test_eio_on_write_still_fences_and_cuts_to_the_durable_size);
    tcase_add_test(tc, test_reopen_after_a_failed_fdatasync_keeps_what_was_durable_and_appends_resume);
    tcase_add_test(tc, test_reopen_cuts_the_index_entries_of_the_batches_it_cuts);
    tcase_add_test(tc, test_reopen_of_a_log_that_lost_durable_bytes_never_hands_their_offsets_out_again);
    tcase_add_test(tc, test_reopen_keeps_a_damaged_durable_batch_and_never_hands_its_offsets_out_again);
    tcase_add_test(tc, test_fate_keeps_an_append_durable_before_a_reopen_and_never_one_it_discarded);
    tcase_add_test(tc, test_reopen_after_a_failed_rotation_sync_continues_in_a_new_segment);
    tcase_add_test(tc, test_waiters_of_a_failed_sync_get_fenced_and_the_leader_gets_io);
    tcase_add_test(tc, test_a_sync_that_finishes_after_a_fence_does_not_publish_hw);
    tcase_add_test(tc, test_failed_directory_fsync_at_rotation_fences_the_log);
    tcase_add_test(tc, test_failed_open_at_rotation_keeps_the_old_segment_active_and_the_log_usable);
    tcase_add_test(tc, test_descriptor_limit_at_rotation_refuses_the_append_without_fencing);
    tcase_add_test(tc, test_failed_snapshot_write_does_not_fence_the_log);
    tcase_add_test(tc, test_power_cut_keeps_every_acknowledged_batch_and_drops_unsynced_tail);
    tcase_add_test(tc, test_interval_mode_power_cut_keeps_everything_below_hw);
    tcase_add_test(tc, test_replace_file_removes_its_temp_and_keeps_the_old_file_on_failure);
    suite_add_tcase(s, tc);
    return pt_run(s);
}
