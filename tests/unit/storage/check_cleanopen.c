/* SPDX-License-Identifier: MIT */
/*
 * check_cleanopen.c - what an open and a close of a log cost in syncs and
 * snapshot writes (recover.c proven_synced, plog.c close_snapshot_locked),
 * counted through the faulty io:
 *   - after a clean close, an open syncs nothing (no fdatasync, no
 *     directory fsync) and says so in its report, and a close of the
 *     untouched log writes no snapshot and syncs nothing;
 *   - a close after appends still syncs and writes the snapshot, and the
 *     next open trusts it;
 *   - after a crash that left bytes past the last checkpoint (a child
 *     process appends without syncing and exits without closing), the open
 *     syncs the data file and the directory as before, and a power loss
 *     after that open keeps every record it counted;
 *   - a snapshot that is stale (older than the file) or an index file that
 *     recovery has to create (of the active or of a sealed segment) takes
 *     the syncing path too.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "plogtest.h"

#include "faultio.h"

#define VLEN 64

static uint64_t seg_bytes = 1 << 20; /* 1024: a segment every few batches */

static struct pulse_plog *open_log(const char *dir, const struct pulse_io *io, enum pulse_sync_mode mode,
                                   struct pulse_plog_recovery *rec)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pt_cfg(&cfg, seg_bytes, 256, io);
    cfg.sync_mode = mode;
    cfg.sync_interval_ms = 3600 * 1000; /* interval mode: never by itself */
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, rec), PULSE_OK);
    return plog;
}

/* Appends n batches of 2 records, ids from first_id; every-write waits. */
static void append_n(struct pulse_plog *plog, uint64_t first_id, int n)
{
    struct pulse_buf b;
    pulse_buf_init(&b, 1 << 16);
    for (int i = 0; i < n; i++) {
        int64_t base = -1;
        size_t len = pt_batch(&b, first_id + (uint64_t)i * 2, 2, VLEN, 1000);
        ck_assert_int_eq(pulse_plog_append(plog, b.data, len, &base), PULSE_OK);
    }
    pulse_buf_fini(&b);
}

static int64_t hw_of(struct pulse_plog *plog)
{
    return pulse_plog_high_watermark(plog);
}

/* A log with 10 durable batches (20 records), closed cleanly. */
static void make_clean_log(const char *dir)
{
    struct pulse_plog *plog = open_log(dir, NULL, PULSE_SYNC_EVERY_WRITE, NULL);
    append_n(plog, 0, 10);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
}

static unsigned long syncs(struct faultio *fio)
{
    return faultio_count(fio, FAULTIO_FDATASYNC) + faultio_count(fio, FAULTIO_FSYNC) +
           faultio_count(fio, FAULTIO_FSYNC_DIR);
}

START_TEST(test_open_after_a_clean_close_syncs_nothing_and_close_writes_nothing)
{
    char *dir = pt_tmpdir();
    struct faultio *fio = faultio_create();
    struct pulse_plog_recovery rec;
    struct pt_log got = {0};

    make_clean_log(dir);
    struct pulse_plog *plog = open_log(dir, faultio_io(fio), PULSE_SYNC_EVERY_WRITE, &rec);
    ck_assert_uint_eq(syncs(fio), 0);
    ck_assert(rec.used_snapshot);
    ck_assert(rec.sync_skipped);
    ck_assert_int_eq(hw_of(plog), 20);
    pt_read_all(plog, 0, 1 << 20, &got);
    ck_assert_uint_eq(got.n, 20);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* Nothing moved: no sync, no snapshot rewrite (a rename), no write. */
    ck_assert_uint_eq(syncs(fio), 0);
    ck_assert_uint_eq(faultio_count(fio, FAULTIO_RENAME), 0);
    ck_assert_uint_eq(faultio_count(fio, FAULTIO_PWRITE), 0);
    pt_log_free(&got);
    faultio_destroy(fio);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_close_after_appends_writes_the_snapshot_the_next_open_trusts)
{
    char *dir = pt_tmpdir();
    struct faultio *fio = faultio_create();
    struct pulse_plog_recovery rec;

    make_clean_log(dir);
    struct pulse_plog *plog = open_log(dir, faultio_io(fio), PULSE_SYNC_EVERY_WRITE, &rec);
    append_n(plog, 20, 5);
    unsigned long renames = faultio_count(fio, FAULTIO_RENAME);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ck_assert_uint_eq(faultio_count(fio, FAULTIO_RENAME), renames + 1); /* the snapshot */

    struct faultio *fio2 = faultio_create();
    plog = open_log(dir, faultio_io(fio2), PULSE_SYNC_EVERY_WRITE, &rec);
    ck_assert(rec.sync_skipped);
    ck_assert_uint_eq(syncs(fio2), 0);
    ck_assert_int_eq(hw_of(plog), 30);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    faultio_destroy(fio2);
    faultio_destroy(fio);
    pt_cleanup(dir);
}
END_TEST

/* In a child: opens the log in interval mode (no sync of its own), appends
 * 4 batches into the page cache and exits without closing, as a killed
 * process would. */
static void crash_with_unsynced_appends(const char *dir)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct pulse_plog *plog = open_log(dir, NULL, PULSE_SYNC_INTERVAL, NULL);
        struct pulse_buf b;
        pulse_buf_init(&b, 1 << 16);
        for (int i = 0; i < 4; i++) {
            int64_t base = -1;
            size_t len = pt_batch(&b, 100 + (uint64_t)i * 2, 2, VLEN, 1000);
            if (pulse_plog_append_async(plog, b.data, len, &base, NULL, NULL) != PULSE_OK)
                _exit(2);
        }
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

START_TEST(test_open_after_a_crash_past_the_checkpoint_syncs_and_survives_a_power_loss)
{
    char *dir = pt_tmpdir();
    struct faultio *fio = faultio_create();
    struct pulse_plog_recovery rec;
    struct pt_log got = {0};

    make_clean_log(dir);
    crash_with_unsynced_appends(dir);
    struct pulse_plog *plog = open_log(dir, faultio_io(fio), PULSE_SYNC_EVERY_WRITE, &rec);
    /* The snapshot still names the active segment, but at a smaller size:
     * the bytes past it are in the page cache only, so they are synced. */
    ck_assert(rec.used_snapshot);
    ck_assert(!rec.sync_skipped);
    ck_assert_uint_ge(faultio_count(fio, FAULTIO_FDATASYNC), 1);
    ck_assert_uint_ge(faultio_count(fio, FAULTIO_FSYNC_DIR), 1);
    ck_assert_int_eq(hw_of(plog), 28);
    /* The power goes: what the open counted must still be there. */
    faultio_crash(fio);
    (void)pulse_plog_close(plog);
    faultio_destroy(fio);

    plog = open_log(dir, NULL, PULSE_SYNC_EVERY_WRITE, &rec);
    ck_assert_int_eq(hw_of(plog), 28);
    pt_read_all(plog, 0, 1 << 20, &got);
    ck_assert_uint_eq(got.n, 28);
    ck_assert_uint_eq(got.ids[27], 107);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_log_free(&got);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_a_missing_index_file_is_created_and_its_directory_synced)
{
    char *dir = pt_tmpdir();
    struct faultio *fio = faultio_create();
    struct pulse_plog_recovery rec;
    char path[4096];

    make_clean_log(dir);
    pt_path(path, sizeof path, dir, 0, "index");
    ck_assert_int_eq(unlink(path), 0);
    struct pulse_plog *plog = open_log(dir, faultio_io(fio), PULSE_SYNC_EVERY_WRITE, &rec);
    ck_assert(!rec.sync_skipped);
    ck_assert_uint_ge(faultio_count(fio, FAULTIO_FSYNC_DIR), 1);
    ck_assert_int_eq(hw_of(plog), 20);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    faultio_destroy(fio);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_a_missing_index_of_a_sealed_segment_is_created_and_its_directory_synced)
{
    char *dir = pt_tmpdir();
    struct faultio *fio = faultio_create();
    struct pulse_plog_recovery rec;
    char path[4096];

    seg_bytes = 1024;
    make_clean_log(dir);
    pt_path(path, sizeof path, dir, 0, "index");
    ck_assert_int_eq(unlink(path), 0);
    struct pulse_plog *plog = open_log(dir, faultio_io(fio), PULSE_SYNC_EVERY_WRITE, &rec);
    ck_assert_uint_gt(rec.segments, 1);
    ck_assert(!rec.sync_skipped);
    ck_assert_uint_ge(faultio_count(fio, FAULTIO_FSYNC_DIR), 1);
    ck_assert_int_eq(hw_of(plog), 20);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* Everything whole again: the next open syncs nothing. */
    struct faultio *fio2 = faultio_create();
    plog = open_log(dir, faultio_io(fio2), PULSE_SYNC_EVERY_WRITE, &rec);
    ck_assert(rec.sync_skipped);
    ck_assert_uint_eq(syncs(fio2), 0);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    faultio_destroy(fio2);
    faultio_destroy(fio);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_a_stale_snapshot_from_before_the_last_appends_is_not_trusted)
{
    char *dir = pt_tmpdir();
    struct faultio *fio = faultio_create();
    struct pulse_plog_recovery rec;
    char snap[4096], keep[4096];

    make_clean_log(dir);
    /* Keep the snapshot of 20 records, append 5 more cleanly, put it back:
     * the file is now longer than the snapshot says. */
    snprintf(snap, sizeof snap, "%s/snapshot", dir);
    snprintf(keep, sizeof keep, "%s.kept", dir);
    ck_assert_int_eq(link(snap, keep), 0);
    struct pulse_plog *plog = open_log(dir, NULL, PULSE_SYNC_EVERY_WRITE, NULL);
    append_n(plog, 20, 5);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ck_assert_int_eq(rename(keep, snap), 0);

    plog = open_log(dir, faultio_io(fio), PULSE_SYNC_EVERY_WRITE, &rec);
    ck_assert(!rec.sync_skipped);
    ck_assert_uint_ge(faultio_count(fio, FAULTIO_FDATASYNC), 1);
    ck_assert_int_eq(hw_of(plog), 30);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    faultio_destroy(fio);
    pt_cleanup(dir);
}
END_TEST

static Suite *cleanopen_suite(void)
{
    Suite *s = suite_create("cleanopen");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_open_after_a_clean_close_syncs_nothing_and_close_writes_nothing);
    tcase_add_test(tc, test_close_after_appends_writes_the_snapshot_the_next_open_trusts);
    tcase_add_test(tc, test_open_after_a_crash_past_the_checkpoint_syncs_and_survives_a_power_loss);
    tcase_add_test(tc, test_a_missing_index_file_is_created_and_its_directory_synced);
    tcase_add_test(tc, test_a_missing_index_of_a_sealed_segment_is_created_and_its_directory_synced);
    tcase_add_test(tc, test_a_stale_snapshot_from_before_the_last_appends_is_not_trusted);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    pulse_log_set_level(PULSE_LOG_ERROR);
    SRunner *sr = srunner_create(cleanopen_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
