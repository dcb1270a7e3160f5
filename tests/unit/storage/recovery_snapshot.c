/* SPDX-License-Identifier: MIT */
/*
 * recovery_snapshot.c - part of check_recovery: the snapshot fast path
 * reaches the full scan's state, bad snapshots are discarded, a torn delta
 * tail after a good snapshot is cut, and the durable-end checkpoint: what
 * it proves, and when it is written.
 */
#include "plogtest.h"

#include <dirent.h>
#include <errno.h>

#include "faultio.h"
#include "storage/damage.h"
#include "common/fsio.h"
#include "storage/plog_int.h"
#include "storage/segment.h"
#include "storage/snapshot.h"
#include "common/clock.h"
#include "storage/index.h"
#include "recoverytest.h"

START_TEST(test_snapshot_fast_path_reaches_the_same_state_as_the_full_scan)
{
    char *dir = pt_tmpdir();
    char dir2[600], p[700];
    struct pulse_plog_recovery r1, r2;
    struct state s1, s2;
    uint64_t n = build_multi(dir);
    snprintf(dir2, sizeof dir2, "%s2", dir);
    copy_dir_files(dir, dir2);
    snprintf(p, sizeof p, "%s/snapshot", dir2);
    ck_assert_int_eq(unlink(p), 0);

    struct pulse_plog *a = open_rec(dir, 4096, 500, &r1);
    struct pulse_plog *b = open_rec(dir2, 4096, 500, &r2);
    ck_assert(r1.used_snapshot);
    ck_assert(!r2.used_snapshot);
    ck_assert_uint_gt(r1.segments, 3);
    ck_assert_uint_eq(r1.segments, r2.segments);
    ck_assert_uint_eq(r1.indexes_rebuilt, 0);
    ck_assert_uint_eq(r2.indexes_rebuilt, 0);
    capture(a, &s1);
    capture(b, &s2);
    ck_assert_int_eq(s1.leo, (int64_t)n);
    ck_assert_uint_eq(s1.recs.n, n);
    state_eq(&s1, &s2);
    state_free(&s1);
    state_free(&s2);
    /* And they stay equal after more appends. */
    uint64_t id1 = n, id2 = n;
    fill(a, &id1, 7, 2, 120);
    fill(b, &id2, 7, 2, 120);
    capture(a, &s1);
    capture(b, &s2);
    state_eq(&s1, &s2);
    state_free(&s1);
    state_free(&s2);
    ck_assert_int_eq(pulse_plog_close(a), PULSE_OK);
    ck_assert_int_eq(pulse_plog_close(b), PULSE_OK);
    /* rm the copy */
    snprintf(p, sizeof p, "rm -rf '%s'", dir2);
    ck_assert_int_eq(system(p), 0);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_bad_snapshot_is_discarded_for_the_full_scan)
{
    char *dir = pt_tmpdir();
    char snapp[600];
    uint64_t n = build_multi(dir);
    struct image good;
    struct pulse_snapshot snap;
    snprintf(snapp, sizeof snapp, "%s/snapshot", dir);
    img_load(&good, snapp);
    /* Version 2 (snapshot.h): the 64-byte head and a record per sealed segment. */
    ck_assert_uint_gt(good.len, PULSE_SNAPSHOT_V2_HEAD);
    ck_assert_int_eq(pulse_snapshot_decode(good.data, good.len, &snap), PULSE_OK);
    uint8_t *raw = pulse_malloc(good.len + 1);
    ck_assert_ptr_nonnull(raw);
    for (int variant = 0; variant < 6; variant++) {
        struct image bad = {raw, good.len, true};
        memcpy(raw, good.data, good.len);
        switch (variant) {
        case 0: /* garbage */
            for (size_t i = 0; i < good.len; i++)
                raw[i] = (uint8_t)(i * 37 + 11);
            break;
        case 1: /* wrong crc */
            raw[20] ^= 0x01;
            break;
        case 2: /* short file */
            bad.len = good.len - 1;
            break;
        case 3: { /* valid CRC, but names another active segment (version 1) */
            struct pulse_snapshot s = snap;
            s.active_base = 0;
            pulse_snapshot_encode(&s, raw);
            bad.len = PULSE_SNAPSHOT_SIZE;
            break;
        }
        case 4: { /* claims more bytes than the active file has (version 1) */
            struct pulse_snapshot s = snap;
            s.active_size += 1000;
            pulse_snapshot_encode(&s, raw);
            bad.len = PULSE_SNAPSHOT_SIZE;
            break;
        }
        default: /* one byte longer than its records */
            raw[good.len] = 0;
            bad.len = good.len + 1;
            break;
        }
        img_store(&bad, snapp);
        struct pulse_plog_recovery rec;
        struct pulse_plog *plog = open_rec(dir, 4096, 500, &rec);
        ck_assert_msg(!rec.used_snapshot, "variant %d", variant);
        ck_assert_int_eq(pulse_plog_log_end(plog), (int64_t)n);
        expect_ids(plog, n);
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    }
    /* Control: the good snapshot is used. */
    img_store(&good, snapp);
    struct pulse_plog_recovery rec;
    struct pulse_plog *plog = open_rec(dir, 4096, 500, &rec);
    ck_assert(rec.used_snapshot);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    img_free(&good);
    pulse_free(raw);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_torn_batch_after_a_valid_snapshot_is_truncated_by_the_delta_scan)
{
    char *dir = pt_tmpdir();
    char logp[512];
    uint64_t n = build_multi(dir); /* snapshot written at close */
    struct pulse_snapshot snap;
    ck_assert_int_eq(pulse_snapshot_read(pulse_io_posix(), dir, &snap), PULSE_OK);
    /* Append three more batches and "crash" without a close. */
    struct faultio *fio = faultio_create();
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pt_cfg(&cfg, 1 << 20, 500, faultio_io(fio));
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    uint64_t id = n;
    fill(plog, &id, 3, 2, 120);
    faultio_crash(fio);
    (void)pulse_plog_close(plog);
    faultio_destroy(fio);
    pt_path(logp, sizeof logp, dir, snap.active_base, "log");
    long long size = pt_file_size(logp);
    pt_truncate(logp, size - 5);

    struct pulse_plog_recovery rec;
    plog = open_rec(dir, 4096, 500, &rec);
    ck_assert(rec.used_snapshot);
    ck_assert_uint_gt(rec.truncated_bytes, 0);
    ck_assert_int_eq(pulse_plog_log_end(plog), (int64_t)n + 4);
    expect_ids(plog, n + 4);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* A log opened with a checkpoint interval (and the test's io). */
static struct pulse_plog *open_ckpt(const char *dir, uint32_t interval_ms)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pt_cfg(&cfg, 1 << 20, 1 << 20, faultio_io(g_fio));
    cfg.checkpoint_interval_ms = interval_ms;
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    return plog;
}

/* The running log's checkpoint (pulse_plog_checkpoint, which the broker's
 * syncer calls) proves the last batch durable as soon as it is written,
 * before any close: a flipped byte anywhere in that batch is then kept as
 * corruption and its offsets are never given out again, where without the
 * checkpoint (the test above) it is cut. */
START_TEST(test_checkpoint_proves_a_last_batch_durable_so_its_damage_is_kept)
{
    char *dir = pt_tmpdir();
    struct image ckpt;
    struct run r;
    struct pulse_slice sl;
    uint64_t id = 0;
    int64_t due = 0;
    int64_t want[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13};
    char snapp[600];
    struct pulse_plog *plog = open_ckpt(dir, 0);

    fill(plog, &id, 6, 2, 100);
    ck_assert_int_eq(pulse_plog_checkpoint(plog, &due), PULSE_OK);
    ck_assert_int_eq(due, INT64_MAX);
    snprintf(snapp, sizeof snapp, "%s/snapshot", dir);
    img_load(&ckpt, snapp); /* as a crash right now would leave it */
    ck_assert(ckpt.exists);
    ck_assert_int_eq(pulse_plog_slice(plog, 10, 1, false, &sl), PULSE_OK);
    long long last = (long long)sl.pos;
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    run_init(&r, dir);
    for (long long at = last; at < (long long)r.log.len; at += 7) {
        struct pulse_plog_recovery rec;
        run_reset(&r, &ckpt);
        uint8_t x = (uint8_t)(r.log.data[at] ^ 0xFF);
        pt_patch(r.logp, at, &x, 1);
        plog = open_rec(dir, 1 << 20, 1 << 20, &rec);
        ck_assert_int_eq(pt_file_size(r.logp), (long long)r.log.len); /* kept, not cut */
        ck_assert_uint_eq(rec.truncated_bytes, 0);
        ck_assert_uint_eq(rec.new_damaged_ranges, 1);
        ck_assert_int_eq(pulse_plog_log_end(plog), 12);
        append_expect(plog, 12);
        expect_offsets(plog, want, 12, true);
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    }
    run_fini(&r);
    img_free(&ckpt);
    pt_cleanup(dir);
}
END_TEST

/* pulse_plog_checkpoint writes only when the durable state moved, at most
 * once per interval, and says when the one it owes falls due. */
START_TEST(test_checkpoint_is_written_when_the_durable_end_moved_at_most_once_per_interval)
{
    char *dir = pt_tmpdir();
    char snapp[600];
    uint64_t id = 0;
    int64_t due = 0;
    struct pulse_snapshot snap;
    struct pulse_plog *plog = open_ckpt(dir, 300);
    ino_t ino;

    snprintf(snapp, sizeof snapp, "%s/snapshot", dir);
    fill(plog, &id, 1, 2, 100);
    /* The first one is written at once. */
    ck_assert_int_eq(pulse_plog_checkpoint(plog, &due), PULSE_OK);
    ck_assert_int_eq(due, INT64_MAX);
    ck_assert_int_eq(pulse_snapshot_read(pulse_io_posix(), dir, &snap), PULSE_OK);
    ck_assert_int_eq(snap.leo, 2);
    ino = inode_of(snapp);
    /* Nothing moved: nothing written, nothing owed. */
    ck_assert_int_eq(pulse_plog_checkpoint(plog, &due), PULSE_OK);
    ck_assert_int_eq(due, INT64_MAX);
    ck_assert_uint_eq(inode_of(snapp), ino);
    /* Moved, but within the interval: owed, due later. */
    fill(plog, &id, 1, 2, 100);
    int64_t t0 = pulse_clock_mono_us();
    ck_assert_int_eq(pulse_plog_checkpoint(plog, &due), PULSE_OK);
    ck_assert_int_gt(due, t0);
    ck_assert_int_le(due, t0 + 300 * 1000);
    ck_assert_uint_eq(inode_of(snapp), ino);
    ck_assert_int_eq(pulse_snapshot_read(pulse_io_posix(), dir, &snap), PULSE_OK);
    ck_assert_int_eq(snap.leo, 2);
    /* Once due, it is written, describing the durable end. */
    while (pulse_clock_mono_us() < due)
        usleep(10 * 1000);
    ck_assert_int_eq(pulse_plog_checkpoint(plog, &due), PULSE_OK);
    ck_assert_int_eq(due, INT64_MAX);
    ck_assert_uint_ne(inode_of(snapp), ino);
    ck_assert_int_eq(pulse_snapshot_read(pulse_io_posix(), dir, &snap), PULSE_OK);
    ck_assert_int_eq(snap.leo, 4);
    ck_assert_int_eq(snap.active_base, 0);
    char logp[512];
    pt_path(logp, sizeof logp, dir, 0, "log");
    ck_assert_int_eq(snap.active_size, pt_file_size(logp));
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

TCase *recovery_snapshot_tcase(void)
{
    TCase *tc = tcase_create("snapshot");

    tcase_set_timeout(tc, 600);

    tcase_add_test(tc, test_checkpoint_proves_a_last_batch_durable_so_its_damage_is_kept);
    tcase_add_test(tc, test_checkpoint_is_written_when_the_durable_end_moved_at_most_once_per_interval);
    tcase_add_test(tc, test_snapshot_fast_path_reaches_the_same_state_as_the_full_scan);
    tcase_add_test(tc, test_bad_snapshot_is_discarded_for_the_full_scan);
    tcase_add_test(tc, test_torn_batch_after_a_valid_snapshot_is_truncated_by_the_delta_scan);
    return tc;
}
