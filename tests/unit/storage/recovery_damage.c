/* SPDX-License-Identifier: MIT */
/*
 * recovery_damage.c - part of check_recovery: indexes missing, short, wrong
 * or past the end of their file, a corrupt sealed segment, rot a read finds,
 * the damage record (round trip, unreadable, left alone once known),
 * leftover temp files, a length field naming a later batch.
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

/* Damages the index of segment `base` in one of several ways. */
static void damage_index(const char *dir, int64_t base, int how)
{
    char p[512];
    pt_path(p, sizeof p, dir, base, "index");
    long long n = pt_file_size(p);
    ck_assert_int_ge(n, 16);
    switch (how) {
    case 0:
        ck_assert_int_eq(unlink(p), 0);
        break;
    case 1: /* cut mid-entry */
        pt_truncate(p, n - 3);
        break;
    case 2: /* cut by a whole entry */
        pt_truncate(p, n - 8);
        break;
    case 3: { /* entry 1 points into the middle of a batch */
        uint8_t raw[4];
        pt_read_file(p, 12, raw, 4);
        pulse_put_be32(raw, pulse_get_be32(raw) + 9);
        pt_patch(p, 12, raw, 4);
        break;
    }
    case 4: { /* entry 1 claims the wrong offset for its batch */
        uint8_t raw[4];
        pt_read_file(p, 8, raw, 4);
        pulse_put_be32(raw, pulse_get_be32(raw) + 1);
        pt_patch(p, 8, raw, 4);
        break;
    }
    default: { /* entries out of order */
        uint8_t raw[16];
        pt_read_file(p, 0, raw, 16);
        uint8_t sw[16];
        memcpy(sw, raw + 8, 8);
        memcpy(sw + 8, raw, 8);
        pt_patch(p, 0, sw, 16);
        break;
    }
    }
}

START_TEST(test_missing_short_or_wrong_index_is_rebuilt_and_reads_stay_correct)
{
    char *dir = pt_tmpdir();
    char dir2[600], cmd[1300];
    uint64_t n = build_multi(dir);
    snprintf(dir2, sizeof dir2, "%s-ref", dir);
    copy_dir_files(dir, dir2);
    struct state ref;
    struct pulse_plog *plog = open_rec(dir2, 4096, 500, NULL);
    capture(plog, &ref);
    int64_t active = ref.segs[ref.nsegs - 1].base_offset;
    int64_t sealed = ref.segs[1].base_offset;
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    for (int with_snap = 0; with_snap < 2; with_snap++) {
        for (int how = 0; how < 6; how++) {
            char p[700];
            snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -rp '%s' '%s'", dir, dir2, dir);
            ck_assert_int_eq(system(cmd), 0);
            if (!with_snap) {
                snprintf(p, sizeof p, "%s/snapshot", dir);
                ck_assert_int_eq(unlink(p), 0);
            }
            damage_index(dir, sealed, how);
            damage_index(dir, active, how);
            struct pulse_plog_recovery rec;
            struct state s;
            plog = open_rec(dir, 4096, 500, &rec);
            ck_assert_msg(rec.indexes_rebuilt >= 2, "how %d snap %d rebuilt %u", how, with_snap, rec.indexes_rebuilt);
            ck_assert_int_eq(rec.used_snapshot, with_snap);
            capture(plog, &s);
            state_eq(&ref, &s);
            ck_assert_uint_eq(s.recs.n, n);
            state_free(&s);
            ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
            /* The rebuilt files are used as they are next time. */
            plog = open_rec(dir, 4096, 500, &rec);
            ck_assert_uint_eq(rec.indexes_rebuilt, 0);
            ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
        }
    }
    state_free(&ref);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir2);
    ck_assert_int_eq(system(cmd), 0);
    pt_cleanup(dir);
}
END_TEST

static void flip_at(const char *path, long long pos, uint8_t mask)
{
    uint8_t x;
    pt_read_file(path, pos, &x, 1);
    x ^= mask;
    pt_patch(path, pos, &x, 1);
}

START_TEST(test_corrupt_sealed_segment_keeps_every_valid_batch_and_later_segments_readable)
{
    char *dir = pt_tmpdir();
    char p[600];
    uint64_t n = build_multi(dir);
    struct pulse_plog *plog = open_rec(dir, 4096, 500, NULL);
    struct pulse_segment_info *segs = NULL;
    size_t nsegs = 0;
    struct pulse_slice mid, last;
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &nsegs), PULSE_OK);
    ck_assert_uint_gt(nsegs, 2);
    int64_t seg1 = segs[1].base_offset;
    int64_t seg2 = segs[2].base_offset;
    /* The batch holding seg1 + 4 (valid batches follow it in its segment)
     * and the segment's last batch (nothing valid follows it there). */
    ck_assert_int_eq(pulse_plog_slice(plog, seg1 + 4, 1, false, &mid), PULSE_OK);
    ck_assert_int_eq(pulse_plog_slice(plog, seg2 - 1, 1, false, &last), PULSE_OK);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    int64_t bad_base = seg1 + 4, last_base = seg2 - 2;
    ck_assert_int_gt(last_base, bad_base + 2);
    pt_path(p, sizeof p, dir, seg1, "log");
    long long size = pt_file_size(p);
    flip_at(p, (long long)mid.pos + 70, 0x10);
    flip_at(p, (long long)last.pos + 70, 0x10);
    snprintf(p, sizeof p, "%s/snapshot", dir);
    unlink(p); /* force the full scan that finds it */

    struct pulse_plog_recovery rec;
    plog = open_rec(dir, 4096, 500, &rec);
    ck_assert_uint_eq(rec.corrupt_segments, 1);
    ck_assert_uint_eq(rec.new_damaged_ranges, 2);
    ck_assert_uint_eq(rec.truncated_bytes, 0);
    ck_assert_int_eq(pulse_plog_log_end(plog), (int64_t)n);
    pt_path(p, sizeof p, dir, seg1, "log");
    ck_assert_int_eq(pt_file_size(p), size); /* a sealed segment is never cut */
    /* Everything but the two damaged batches comes back, in order. */
    int64_t *want = pulse_calloc(n, sizeof *want);
    size_t nw = 0;
    for (int64_t o = 0; o < (int64_t)n; o++)
        if (!(o >= bad_base && o < bad_base + 2) && !(o >= last_base && o < seg2))
            want[nw++] = o;
    expect_offsets(plog, want, nw, true);
    pulse_free(want);
    /* A read inside the damaged tail continues with the next segment. */
    struct pulse_buf buf;
    struct pulse_slice info;
    struct pt_log l = {0};
    pulse_buf_init(&buf, 1 << 20);
    ck_assert_int_eq(pulse_plog_read(plog, last_base + 1, 1, &buf, &info), PULSE_OK);
    ck_assert_uint_gt(info.len, 0);
    ck_assert_int_eq(info.skip_from, last_base + 1);
    ck_assert_int_eq(info.skip_to, seg2);
    pt_decode(buf.data, buf.len, 0, &l);
    ck_assert_int_eq(l.offs[0], seg2);
    pt_log_free(&l);
    pulse_buf_fini(&buf);
    /* Appends go on at the log end. */
    uint64_t id = n;
    fill(plog, &id, 1, 2, 120);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ck_assert_int_eq(forensic_copies(dir), 1);
    pulse_free(segs);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_torn_write_after_a_kept_damaged_tail_is_cut_at_the_recorded_end)
{
    char *dir = pt_tmpdir();
    struct run r;
    struct image snap;
    struct pulse_plog_recovery rec;
    static const int64_t want[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    long long last = build_log(dir, 6, 256, NULL, 5);
    run_init(&r, dir);
    flip_at(r.logp, last + 70, 0x08); /* the snapshot covers it: kept */
    struct pulse_plog *plog = open_rec(dir, 1 << 20, 256, &rec);
    ck_assert_int_eq(pulse_plog_log_end(plog), 12);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    img_load(&snap, r.snapp);
    img_free(&r.idx);
    img_load(&r.idx, r.idxp);
    /* An append after it, torn by a power cut: the data file keeps part of
     * it, the snapshot and the index are as they were before it. */
    plog = open_rec(dir, 1 << 20, 256, &rec);
    append_expect(plog, 12);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    img_store(&snap, r.snapp);
    img_store(&r.idx, r.idxp);
    pt_truncate(r.logp, (long long)r.log.len + 30);
    plog = open_rec(dir, 1 << 20, 256, &rec);
    ck_assert_int_eq(pt_file_size(r.logp), (long long)r.log.len); /* cut where the damage ended */
    ck_assert_uint_eq(rec.truncated_bytes, 30);
    ck_assert_uint_eq(rec.new_damaged_ranges, 0);
    ck_assert_int_eq(pulse_plog_log_end(plog), 12);
    expect_offsets(plog, want, 10, true);
    append_expect(plog, 12);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    img_free(&snap);
    run_fini(&r);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_rot_a_read_finds_at_the_end_keeps_its_offsets_across_a_restart)
{
    char *dir = pt_tmpdir();
    struct run r;
    struct pulse_buf buf;
    struct pulse_slice info;
    struct pulse_plog_recovery rec;
    long long last = build_log(dir, 6, 256, NULL, 5);
    run_init(&r, dir);
    struct pulse_plog *plog = open_rec(dir, 1 << 20, 256, &rec);
    flip_at(r.logp, last + 70, 0x04); /* rots while the log runs */
    pulse_buf_init(&buf, 1 << 20);
    ck_assert_int_eq(pulse_plog_read(plog, 10, 1 << 20, &buf, &info), PULSE_OK);
    ck_assert_uint_eq(info.len, 0);
    ck_assert_int_eq(info.skip_from, 10);
    ck_assert_int_eq(info.skip_to, 12);
    ck_assert_int_eq(info.next_offset, 12);
    /* A crash before anything else is appended or the snapshot rewritten:
     * the tail is not cut and its offsets are not handed out again. */
    (void)pulse_plog_close(plog);
    unlink(r.snapp);
    plog = open_rec(dir, 1 << 20, 256, &rec);
    ck_assert_int_eq(pt_file_size(r.logp), (long long)r.log.len);
    ck_assert_int_eq(pulse_plog_log_end(plog), 12);
    ck_assert_uint_eq(rec.forensic_copies, 1);
    append_expect(plog, 12);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pulse_buf_fini(&buf);
    run_fini(&r);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_damage_record_round_trips_and_refuses_anything_else)
{
    struct pulse_damage d[3] = {{0, 100, 200, 4, 6, 7, PULSE_DAMAGE_COPIED},
                                {0, 300, 300, 8, 9, 7, 0},
                                {50, 0, 10, 50, 52, 8, 0}};
    struct pulse_damage *out = NULL;
    size_t n = 0;
    struct pulse_buf b;
    pulse_buf_init(&b, 1 << 20);
    ck_assert_int_eq(pulse_damage_encode(d, 3, &b), PULSE_OK);
    ck_assert_uint_eq(b.len, PULSE_DAMAGE_HEADER_SIZE + 3 * PULSE_DAMAGE_ENTRY_SIZE);
    ck_assert_int_eq(pulse_damage_decode(b.data, b.len, &out, &n), PULSE_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(memcmp(out, d, sizeof d), 0);
    pulse_free(out);
    /* Every single flipped bit is refused (CRC, or a header check). */
    for (size_t i = 0; i < b.len * 8; i++) {
        b.data[i / 8] ^= (uint8_t)(1u << (i % 8));
        ck_assert_int_eq(pulse_damage_decode(b.data, b.len, &out, &n), PULSE_CORRUPT);
        b.data[i / 8] ^= (uint8_t)(1u << (i % 8));
    }
    ck_assert_int_eq(pulse_damage_decode(b.data, b.len - 1, &out, &n), PULSE_CORRUPT);
    /* Coherent bytes with a good CRC but entries out of order, overlapping
     * or with an unknown flag are refused too, and never written. */
    struct pulse_damage bad[4][2] = {
        {{0, 300, 400, 8, 9, 0, 0}, {0, 100, 200, 4, 6, 0, 0}},
        {{0, 100, 200, 4, 6, 0, 0}, {0, 150, 250, 6, 7, 0, 0}},
        {{0, 100, 200, 4, 6, 0, 0}, {0, 300, 400, 5, 7, 0, 0}},
        {{0, 100, 200, 4, 6, 0, 2}, {0, 300, 400, 6, 7, 0, 0}},
    };
    for (int k = 0; k < 4; k++) {
        pulse_buf_reset(&b);
        ck_assert_int_eq(pulse_damage_encode(bad[k], 2, &b), PULSE_OK);
        ck_assert_int_eq(pulse_damage_decode(b.data, b.len, &out, &n), PULSE_CORRUPT);
        ck_assert(!pulse_damage_valid(bad[k], 2));
    }
    pulse_buf_fini(&b);
}
END_TEST

START_TEST(test_unreadable_damage_record_sends_recovery_to_the_full_scan)
{
    char *dir = pt_tmpdir();
    struct run r;
    struct pulse_plog_recovery rec;
    char p[700];
    static const int64_t want[] = {0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13};
    long long bad = build_log(dir, 7, 256, NULL, 3);
    run_init(&r, dir);
    flip_at(r.logp, bad + 70, 0x02);
    unlink(r.snapp);
    struct pulse_plog *plog = open_rec(dir, 1 << 20, 256, &rec);
    ck_assert_uint_eq(rec.new_damaged_ranges, 1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK); /* a snapshot again */
    snprintf(p, sizeof p, "%s/damage", dir);
    pt_patch(p, 20, "garbage", 7);
    plog = open_rec(dir, 1 << 20, 256, &rec);
    ck_assert(!rec.used_snapshot);
    ck_assert_uint_eq(rec.damaged_ranges, 1);
    expect_offsets(plog, want, 12, true);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    size_t n = 0;
    struct pulse_damage *d = read_record(dir, &n); /* written anew */
    ck_assert_uint_eq(n, 1);
    pulse_free(d);
    run_fini(&r);
    pt_cleanup(dir);
}
END_TEST

/* Clearing the record when the file is already gone still fsyncs the
 * directory: the removal that made it go may not be durable yet (a crash
 * between an unlink and its directory fsync), and a power cut would bring
 * the stale record back. */
START_TEST(test_clearing_an_absent_damage_record_still_syncs_the_directory)
{
    char *dir = pt_tmpdir();
    const struct pulse_io *io = faultio_io(g_fio);
    unsigned long before = faultio_count(g_fio, FAULTIO_FSYNC_DIR);
    ck_assert_int_eq(pulse_damage_write(io, dir, NULL, 0), PULSE_OK);
    ck_assert_uint_eq(faultio_count(g_fio, FAULTIO_FSYNC_DIR), before + 1);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_leftover_temp_files_are_removed_at_open)
{
    char *dir = pt_tmpdir();
    char p[600];
    uint64_t n = build_multi(dir);
    const char *names[] = {".tmp-snapshot", ".tmp-compact-00000000000000000000.log"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        int fd = open(p, O_CREAT | O_WRONLY, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "junk", 4), 4);
        close(fd);
    }
    struct pulse_plog_recovery rec;
    struct pulse_plog *plog = open_rec(dir, 4096, 500, &rec);
    ck_assert_uint_eq(rec.temp_files_removed, 2);
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        ck_assert_int_eq(pt_file_size(p), -1);
    }
    expect_ids(plog, n);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* A bit flipped in one batch's length field can make it name the batch
 * after its successor (equal batches of 256 bytes: batchLen 0xCC becomes
 * 0x1CC). The intact successor between them must not be swallowed by the
 * damaged range: only offset 3 is lost. */
START_TEST(test_length_field_naming_a_later_batch_keeps_the_intact_batch_between)
{
    char *dir = pt_tmpdir();
    struct pulse_plog_recovery rec;
    struct pulse_buf b;
    struct pulse_plog *plog = open_rec(dir, 1 << 20, 1 << 20, NULL);
    char logp[512], snapp[600];
    int64_t base;
    uint8_t x;

    pulse_buf_init(&b, 1 << 20);
    for (uint64_t id = 0; id < 8; id++) {
        /* 52 header + 25 record overhead + 179 value = 256 bytes. */
        ck_assert_uint_eq(pt_batch(&b, id, 1, 179, 1000), 256);
        ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
        ck_assert_int_eq(base, (int64_t)id);
    }
    pulse_buf_fini(&b);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_path(logp, sizeof logp, dir, 0, "log");
    snprintf(snapp, sizeof snapp, "%s/snapshot", dir);
    unlink(snapp); /* the full scan */
    /* batchLen of batch 3 is 0x000000CC; flip bit 0 of its third byte:
     * 0x000001CC = 204 + 256, which names the start of batch 5. */
    pt_read_file(logp, 3 * 256 + 18, &x, 1);
    ck_assert_uint_eq(x, 0);
    x ^= 1;
    pt_patch(logp, 3 * 256 + 18, &x, 1);
    plog = open_rec(dir, 1 << 20, 1 << 20, &rec);
    ck_assert_uint_eq(rec.new_damaged_ranges, 1);
    /* Only offset 3 is damaged: batch 4 is whole and CRC-valid. */
    static const int64_t want[] = {0, 1, 2, 4, 5, 6, 7};
    expect_offsets(plog, want, 7, true);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* An index entry naming a position at or past the end of the data file
 * (none of that batch's bytes reached the disk, or the entry itself is
 * damaged) proves nothing was handed out there: it must not raise the log
 * end, however plausible its offset looks. */
START_TEST(test_index_entry_past_the_end_of_the_file_claims_no_offsets)
{
    char *dir = pt_tmpdir();
    struct pulse_plog_recovery rec;
    struct run r;
    uint8_t raw[PULSE_INDEX_ENTRY_SIZE];
    long long last = build_log(dir, 6, 256, NULL, 5);
    (void)last;
    run_init(&r, dir);
    run_reset(&r, NULL);
    /* Offset 112 at 100000 bytes past the end: 100 offsets in 100000
     * bytes would fit the plausibility rule. */
    struct pulse_index_entry e = {112, (uint32_t)(r.log.len + 100000)};
    pulse_index_encode_entry(&e, raw);
    pt_patch(r.idxp, (long long)r.idx.len, raw, sizeof raw);
    struct pulse_plog *plog = open_rec(dir, 1 << 20, 256, &rec);
    ck_assert_int_eq(pulse_plog_log_end(plog), 12);
    ck_assert_int_eq(rec.leo_raised, 0);
    ck_assert_uint_eq(rec.damaged_ranges, 0);
    append_expect(plog, 12);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    run_fini(&r);
    pt_cleanup(dir);
}
END_TEST

/* Once recovery recorded the damage it found, the next open finds the same
 * and leaves the record file as it is (it used to compare the entries with
 * their padding bytes, and rewrote the record at every open). */
START_TEST(test_known_damage_leaves_the_record_file_alone_at_the_next_open)
{
    char *dir = pt_tmpdir();
    struct pulse_plog_recovery rec;
    char damp[600];
    long long bad = build_log(dir, 7, 256, NULL, 3);
    char logp[512];
    uint8_t x;
    pt_path(logp, sizeof logp, dir, 0, "log");
    pt_read_file(logp, bad + 60, &x, 1);
    x ^= 0xFF;
    pt_patch(logp, bad + 60, &x, 1);
    snprintf(damp, sizeof damp, "%s/snapshot", dir);
    unlink(damp); /* the full scan finds it */
    struct pulse_plog *plog = open_rec(dir, 1 << 20, 256, &rec);
    ck_assert_uint_eq(rec.new_damaged_ranges, 1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    snprintf(damp, sizeof damp, "%s/damage", dir);
    ino_t ino = inode_of(damp);
    ck_assert_uint_ne(ino, 0);
    for (int i = 0; i < 2; i++) {
        plog = open_rec(dir, 1 << 20, 256, &rec);
        ck_assert_uint_eq(rec.new_damaged_ranges, 0);
        ck_assert_uint_eq(rec.damaged_ranges, 1);
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
        ck_assert_uint_eq(inode_of(damp), ino);
    }
    pt_cleanup(dir);
}
END_TEST

TCase *recovery_damage_tcase(void)
{
    TCase *tc = tcase_create("damage");

    tcase_set_timeout(tc, 600);

    tcase_add_test(tc, test_index_entry_past_the_end_of_the_file_claims_no_offsets);
    tcase_add_test(tc, test_known_damage_leaves_the_record_file_alone_at_the_next_open);
    tcase_add_test(tc, test_missing_short_or_wrong_index_is_rebuilt_and_reads_stay_correct);
    tcase_add_test(tc, test_corrupt_sealed_segment_keeps_every_valid_batch_and_later_segments_readable);
    tcase_add_test(tc, test_leftover_temp_files_are_removed_at_open);
    tcase_add_test(tc, test_clearing_an_absent_damage_record_still_syncs_the_directory);
    tcase_add_test(tc, test_torn_write_after_a_kept_damaged_tail_is_cut_at_the_recorded_end);
    tcase_add_test(tc, test_rot_a_read_finds_at_the_end_keeps_its_offsets_across_a_restart);
    tcase_add_test(tc, test_damage_record_round_trips_and_refuses_anything_else);
    tcase_add_test(tc, test_unreadable_damage_record_sends_recovery_to_the_full_scan);
    tcase_add_test(tc, test_length_field_naming_a_later_batch_keeps_the_intact_batch_between);
    return tc;
}
