/* SPDX-License-Identifier: MIT */
/*
 * recovery_tail.c - part of check_recovery: the active segment's tail: torn
 * at every byte, flipped bytes in the last batch with and without a
 * snapshot that covers it, damage in a middle batch, an index or snapshot
 * naming offsets the data lost (never handed out again).
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

START_TEST(test_torn_tail_at_every_byte_of_the_last_batch_is_truncated)
{
    char *dir = pt_tmpdir();
    struct image snap5;
    struct run r;
    /* One index entry only (the first batch): nothing names the last. */
    long long last = build_log(dir, 6, 1 << 20, &snap5, 5);
    run_init(&r, dir);
    for (long long cut = last; cut < (long long)r.log.len; cut++) {
        /* Half the runs with the snapshot taken before the last batch (it
         * proves nothing about it), half without (full scan). */
        run_reset(&r, cut % 2 == 0 ? &snap5 : NULL);
        pt_truncate(r.logp, cut);
        reopen_expect_cut(dir, last, cut);
    }
    run_fini(&r);
    img_free(&snap5);
    pt_cleanup(dir);
}
END_TEST

/* Damage at the very end of the active segment, in a batch that no
 * checkpoint covers (here the snapshot was taken before it, or is gone; in
 * a running broker, data younger than storage.checkpoint-interval): nothing
 * but the damaged bytes themselves could prove it durable, so it is cut as
 * a torn tail. docs/Storage.md "Torn tail or corruption" names this window;
 * the test below shows the checkpoint closing it. */
START_TEST(test_flipped_byte_in_a_last_batch_no_checkpoint_covers_is_cut_as_torn)
{
    char *dir = pt_tmpdir();
    struct image snap5;
    struct run r;
    long long last = build_log(dir, 6, 1 << 20, &snap5, 5);
    run_init(&r, dir);
    for (long long at = last; at < (long long)r.log.len; at++) {
        run_reset(&r, at % 2 == 0 ? &snap5 : NULL);
        uint8_t x = (uint8_t)(r.log.data[at] ^ 0xFF);
        pt_patch(r.logp, at, &x, 1);
        reopen_expect_cut(dir, last, (long long)r.log.len);
    }
    run_fini(&r);
    img_free(&snap5);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_damaged_last_batch_the_snapshot_covers_is_kept_and_its_offsets_never_reused)
{
    char *dir = pt_tmpdir();
    struct image snap;
    struct run r;
    int64_t want[13] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13};
    long long last = build_log(dir, 6, 256, NULL, 5);
    run_init(&r, dir);
    img_load(&snap, r.snapp); /* written at the clean close: covers batch 5 */
    for (long long at = last; at < (long long)r.log.len; at += 3) {
        struct pulse_plog_recovery rec;
        run_reset(&r, at % 2 == 0 ? &snap : NULL);
        if (at % 2 != 0)
            continue; /* without the snapshot nothing proves it durable: the test above */
        uint8_t x = (uint8_t)(r.log.data[at] ^ 0xFF);
        pt_patch(r.logp, at, &x, 1);
        struct pulse_plog *plog = open_rec(dir, 1 << 20, 256, &rec);
        ck_assert_int_eq(pt_file_size(r.logp), (long long)r.log.len); /* kept, not cut */
        ck_assert_uint_eq(rec.truncated_bytes, 0);
        ck_assert_uint_eq(rec.new_damaged_ranges, 1);
        ck_assert_int_eq(pulse_plog_log_end(plog), 12);
        append_expect(plog, 12); /* after the damage, never over it */
        expect_offsets(plog, want, 12, true);
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
        ck_assert_int_eq(forensic_copies(dir), 1);
        /* Again, through the fast path: the same log, nothing new. */
        plog = open_rec(dir, 1 << 20, 256, &rec);
        ck_assert_uint_eq(rec.new_damaged_ranges, 0);
        ck_assert_uint_eq(rec.damaged_ranges, 1);
        ck_assert_int_eq(pulse_plog_log_end(plog), 14);
        expect_offsets(plog, want, 12, true);
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
        ck_assert_int_eq(forensic_copies(dir), 1);
    }
    run_fini(&r);
    img_free(&snap);
    pt_cleanup(dir);
}
END_TEST

/* One flipped byte of batch 3 of 7 (offsets 6 and 7): everything after it
 * survives, offsets go on from 14, the range is skipped and reported. */
static void check_middle_damage(const char *dir, const struct run *r, bool with_snap)
{
    static const int64_t want[15] = {0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15};
    struct pulse_plog_recovery rec;
    struct pulse_slice sl;
    struct pulse_plog *plog = open_rec(dir, 1 << 20, 256, &rec);
    ck_assert_int_eq(pulse_plog_log_end(plog), 14);
    ck_assert_uint_eq(rec.truncated_bytes, 0);
    ck_assert_int_eq(pt_file_size(r->logp), (long long)r->log.len);
    append_expect(plog, 14);
    /* Without a snapshot the full scan found the damage. With one, the
     * fast path found it if it broke the header an index entry points at;
     * otherwise the first read that meets it learns it. Either way reads
     * step over it and say so. */
    if (!with_snap)
        ck_assert_uint_eq(rec.new_damaged_ranges, 1);
    else
        ck_assert_uint_le(rec.new_damaged_ranges, 1);
    expect_offsets(plog, want, 14, true);
    /* Raw slices never hold the damaged bytes: one from 0 stops before
     * them, one from inside them starts after them and says so. */
    ck_assert_int_eq(pulse_plog_slice(plog, 0, 1 << 20, false, &sl), PULSE_OK);
    ck_assert_int_eq(sl.next_offset, 6);
    ck_assert_int_eq(pulse_plog_slice(plog, 7, 1 << 20, false, &sl), PULSE_OK);
    ck_assert_int_eq(sl.skip_from, 7);
    ck_assert_int_eq(sl.skip_to, 8);
    ck_assert(sl.skip_damaged);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* The next start (a full scan if a read learned it, the fast path with
     * the record otherwise) reaches the same state and finds nothing new. */
    plog = open_rec(dir, 1 << 20, 256, &rec);
    ck_assert_int_eq(pulse_plog_log_end(plog), 16);
    ck_assert_uint_eq(rec.damaged_ranges, 1);
    expect_offsets(plog, want, 14, true);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    size_t n = 0;
    struct pulse_damage *d = read_record(dir, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(d[0].from, 6);
    ck_assert_int_eq(d[0].to, 8);
    pulse_free(d);
    ck_assert_int_eq(forensic_copies(dir), 1);
    plog = open_rec(dir, 1 << 20, 256, &rec);
    ck_assert_uint_eq(rec.new_damaged_ranges, 0);
    ck_assert_uint_eq(rec.forensic_copies, 0);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
}

START_TEST(test_flipped_byte_in_a_middle_batch_of_the_active_segment_keeps_every_later_batch)
{
    char *dir = pt_tmpdir();
    struct image snap;
    struct run r;
    long long bad = build_log(dir, 7, 256, NULL, 3);
    long long bad_end;
    {
        struct pulse_plog *plog = open_rec(dir, 1 << 20, 256, NULL);
        struct pulse_slice sl;
        ck_assert_int_eq(pulse_plog_slice(plog, 8, 1, false, &sl), PULSE_OK);
        bad_end = (long long)sl.pos;
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    }
    run_init(&r, dir);
    img_load(&snap, r.snapp);
    for (long long at = bad; at < bad_end; at++) {
        for (int with_snap = 0; with_snap < 2; with_snap++) {
            run_reset(&r, with_snap ? &snap : NULL);
            uint8_t x = (uint8_t)(r.log.data[at] ^ 0xFF);
            pt_patch(r.logp, at, &x, 1);
            check_middle_damage(dir, &r, with_snap);
        }
    }
    run_fini(&r);
    img_free(&snap);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_index_naming_a_lost_batch_keeps_its_offsets_from_being_handed_out_again)
{
    char *dir = pt_tmpdir();
    struct run r;
    struct pulse_plog_recovery rec;
    /* An index entry for every batch, the last one's included. */
    long long last = build_log(dir, 6, 256, NULL, 5);
    run_init(&r, dir);
    run_reset(&r, NULL);
    pt_truncate(r.logp, last + PULSE_BATCH_HEADER_SIZE + 10); /* its header survives */
    struct pulse_plog *plog = open_rec(dir, 1 << 20, 256, &rec);
    ck_assert_int_eq(pt_file_size(r.logp), last);   /* torn: cut */
    ck_assert_int_eq(pulse_plog_log_end(plog), 12); /* the header's two records */
    ck_assert_int_eq(rec.leo_raised, 2);
    append_expect(plog, 12);
    static const int64_t want[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13};
    expect_offsets(plog, want, 12, false);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* The cut index no longer names it; the record keeps the proof. */
    run_reset(&r, NULL);
    pt_truncate(r.logp, last + 20); /* inside the header: only offset 10 is proven */
    plog = open_rec(dir, 1 << 20, 256, &rec);
    ck_assert_int_eq(pulse_plog_log_end(plog), 11);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    snprintf(r.snapp, sizeof r.snapp, "%s/snapshot", dir);
    unlink(r.snapp);
    plog = open_rec(dir, 1 << 20, 256, &rec);
    ck_assert_int_eq(pulse_plog_log_end(plog), 11);
    ck_assert_uint_eq(rec.damaged_ranges, 1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    run_fini(&r);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_snapshot_log_end_above_the_surviving_data_is_never_handed_out_again)
{
    char *dir = pt_tmpdir();
    struct run r;
    struct image snap;
    struct pulse_plog_recovery rec;
    struct pulse_slice sl;
    struct pulse_buf buf;
    long long last = build_log(dir, 6, 1 << 20, NULL, 5);
    run_init(&r, dir);
    img_load(&snap, r.snapp);
    /* The file loses its last batch whole (at a batch boundary): no damaged
     * byte is left, but the snapshot says offsets 10 and 11 were visible. */
    pt_truncate(r.logp, last);
    struct pulse_plog *plog = open_rec(dir, 1 << 20, 1 << 20, &rec);
    ck_assert_int_eq(pulse_plog_log_end(plog), 12);
    ck_assert_uint_eq(rec.new_damaged_ranges, 1);
    pulse_buf_init(&buf, 1 << 20);
    ck_assert_int_eq(pulse_plog_read(plog, 10, 1 << 20, &buf, &sl), PULSE_OK);
    ck_assert_uint_eq(sl.len, 0);
    ck_assert_int_eq(sl.skip_from, 10);
    ck_assert_int_eq(sl.skip_to, 12);
    ck_assert(!sl.skip_damaged);
    ck_assert_int_eq(sl.next_offset, 12); /* a reader is not stuck at 10 */
    append_expect(plog, 12);
    static const int64_t want[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13};
    expect_offsets(plog, want, 12, false);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* Without the snapshot the record still proves them. */
    unlink(r.snapp);
    plog = open_rec(dir, 1 << 20, 1 << 20, &rec);
    ck_assert_int_eq(pulse_plog_log_end(plog), 14);
    expect_offsets(plog, want, 12, false);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pulse_buf_fini(&buf);
    img_free(&snap);
    run_fini(&r);
    pt_cleanup(dir);
}
END_TEST

TCase *recovery_tail_tcase(void)
{
    TCase *tc = tcase_create("tail");

    tcase_set_timeout(tc, 600);

    tcase_add_test(tc, test_torn_tail_at_every_byte_of_the_last_batch_is_truncated);
    tcase_add_test(tc, test_flipped_byte_in_a_last_batch_no_checkpoint_covers_is_cut_as_torn);
    tcase_add_test(tc, test_damaged_last_batch_the_snapshot_covers_is_kept_and_its_offsets_never_reused);
    tcase_add_test(tc, test_flipped_byte_in_a_middle_batch_of_the_active_segment_keeps_every_later_batch);
    tcase_add_test(tc, test_index_naming_a_lost_batch_keeps_its_offsets_from_being_handed_out_again);
    tcase_add_test(tc, test_snapshot_log_end_above_the_surviving_data_is_never_handed_out_again);
    return tc;
}
