/* SPDX-License-Identifier: MIT */
/*
 * check_lost.c - data that is gone or cannot be right, and the offsets it
 * held (docs/Storage.md "The log end never goes back", "Reading around
 * damage"): a batch header whose base offset cannot be right is learned by
 * the first read that meets it (never taken for the end of the data), a
 * lost or shortened sealed segment of a contiguous log and segments lost
 * beside their snapshot become missing ranges, the index file of a lost
 * segment keeps its offsets, and pulse_plog_raise_end records what an
 * owner proves was handed out.
 *
 * Every case damages or removes real files between a close and an open.
 */
#include "plogtest.h"

#include <dirent.h>

#include "faultio.h"
#include "storage/damage.h"
#include "common/fsio.h"

/* Syncs are skipped (what recovery decides is under test, not fsync). */
static struct faultio *g_fio;

static struct pulse_plog *open_log(const char *dir, uint64_t seg, uint32_t interval, bool contiguous,
                                   struct pulse_plog_recovery *rec)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pt_cfg(&cfg, seg, interval, faultio_io(g_fio));
    cfg.contiguous = contiguous;
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, rec), PULSE_OK);
    return plog;
}

/* Appends n batches of 2 records whose ids are the offsets they get. */
static void fill(struct pulse_plog *plog, int n)
{
    struct pulse_buf b;
    pulse_buf_init(&b, 1 << 20);
    for (int i = 0; i < n; i++) {
        int64_t want = pulse_plog_log_end(plog), base = -1;
        pt_batch(&b, (uint64_t)want, 2, 100, 1000 + want);
        ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
        ck_assert_int_eq(base, want);
    }
    pulse_buf_fini(&b);
}

static void flip_at(const char *path, long long pos, uint8_t mask)
{
    uint8_t x;
    pt_read_file(path, pos, &x, 1);
    x ^= mask;
    pt_patch(path, pos, &x, 1);
}

static void rm_file(const char *dir, int64_t base, const char *ext)
{
    char p[600];
    pt_path(p, sizeof p, dir, base, ext);
    ck_assert_int_eq(unlink(p), 0);
}

static void rm_named(const char *dir, const char *name)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    ck_assert_int_eq(unlink(p), 0);
}

static void copy_tree(const char *from, const char *to)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", to, from, to);
    ck_assert_int_eq(system(cmd), 0);
}

/* The damage record of dir: *n entries (0 when there is none). */
static struct pulse_damage *read_record(const char *dir, size_t *n)
{
    struct pulse_damage *d = NULL;
    pulse_status_t st = pulse_damage_read(pulse_io_posix(), dir, &d, n);
    if (st == PULSE_NOT_FOUND)
        *n = 0;
    else
        ck_assert_int_eq(st, PULSE_OK);
    return d;
}

/* The record holds exactly one range: offsets [from, to), with or without
 * damaged bytes. */
static void expect_record(const char *dir, int64_t from, int64_t to, bool bytes)
{
    size_t n = 0;
    struct pulse_damage *d = read_record(dir, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(d[0].from, from);
    ck_assert_int_eq(d[0].to, to);
    ck_assert_int_eq(pulse_damage_has_bytes(&d[0]), bytes);
    pulse_free(d);
}

/*
 * Reads from 0 to HW with pulse_plog_read: every offset in [0, hw) but
 * [lo, hi) comes back with its own id, and the one read that steps over
 * [lo, hi) says so (skip_damaged as given). A reader that stopped making
 * progress fails here.
 */
static void expect_all_but(struct pulse_plog *plog, int64_t lo, int64_t hi, bool damaged)
{
    struct pulse_buf buf;
    int64_t off = 0, want = 0, hw = pulse_plog_high_watermark(plog);
    int skips = 0;
    pulse_buf_init(&buf, 1 << 24);
    while (off < hw) {
        struct pulse_slice info;
        struct pt_log l = {0};
        pulse_buf_reset(&buf);
        ck_assert_int_eq(pulse_plog_read(plog, off, 600, &buf, &info), PULSE_OK);
        if (info.skip_to > info.skip_from) {
            ck_assert_int_eq(info.skip_from, lo);
            ck_assert_int_eq(info.skip_to, hi);
            ck_assert_int_eq(info.skip_damaged, damaged);
            ck_assert_int_eq(want, lo);
            want = hi;
            skips++;
        }
        pt_decode(buf.data, buf.len, info.start_offset, &l);
        for (size_t i = 0; i < l.n; i++) {
            ck_assert_int_eq(l.offs[i], want);
            ck_assert_uint_eq(l.ids[i], (uint64_t)want);
            want++;
        }
        pt_log_free(&l);
        ck_assert_int_gt(info.next_offset, off);
        off = info.next_offset;
    }
    ck_assert_int_eq(want, hw);
    ck_assert_int_eq(skips, lo < hi ? 1 : 0);
    pulse_buf_fini(&buf);
}

/* Appends one batch and checks the offset it gets. */
static void append_expect(struct pulse_plog *plog, int64_t want)
{
    ck_assert_int_eq(pulse_plog_log_end(plog), want);
    fill(plog, 1);
}

/* The byte position of the batch holding offset. */
static uint64_t batch_pos(struct pulse_plog *plog, int64_t offset)
{
    struct pulse_slice sl;
    ck_assert_int_eq(pulse_plog_slice(plog, offset, 1, false, &sl), PULSE_OK);
    ck_assert_uint_gt(sl.len, 0);
    return sl.pos;
}

/*
 * A flipped byte in the base offset of the 6th of 20 batches (offsets 10,
 * 11), between two index entries, so the snapshot fast path does not read
 * it. Whether the base now points past HW (a reader used to take it for
 * the end of the data and stall at 10 for good) or below the end of the
 * batch before (a reader used to step over offsets 10 and 11 without a
 * word), the first read that meets it, raw slice or verified read, learns
 * it as damage, records it and steps past it saying what it skipped.
 */
START_TEST(test_a_header_that_cannot_be_right_is_learned_by_a_read_never_taken_for_the_end)
{
    static const struct {
        int byte;
        uint8_t mask;
        bool raw_first;
    } cases[] = {
        {10, 0xff, true},  /* base offset far past HW */
        {15, 0x08, false}, /* base offset 10 -> 2, below the previous end */
        {9, 0x01, false},  /* past HW, met by a verified read */
        {15, 0x04, true},  /* 10 -> 14: above the expected offset, under HW */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *dir = pt_tmpdir();
        char logp[600];
        struct pulse_plog_recovery rec;
        struct pulse_plog *plog = open_log(dir, 1 << 20, 1024, c % 2 == 1, NULL);
        fill(plog, 20);
        uint64_t pos = batch_pos(plog, 10);
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
        pt_path(logp, sizeof logp, dir, 0, "log");
        flip_at(logp, (long long)pos + cases[c].byte, cases[c].mask);

        plog = open_log(dir, 1 << 20, 1024, c % 2 == 1, &rec);
        ck_assert(rec.used_snapshot);
        ck_assert_uint_eq(rec.damaged_ranges, 0); /* the fast path did not read it */
        if (cases[c].raw_first) {
            struct pulse_slice sl;
            ck_assert_int_eq(pulse_plog_slice(plog, 10, 1, true, &sl), PULSE_OK);
            ck_assert_uint_gt(sl.len, 0);
            ck_assert_int_ge(sl.fd, 0);
            close(sl.fd);
            ck_assert_int_eq(sl.skip_from, 10);
            ck_assert_int_eq(sl.skip_to, 12);
            ck_assert(sl.skip_damaged);
            ck_assert_int_eq(sl.next_offset, 14);
        }
        expect_all_but(plog, 10, 12, true);
        expect_record(dir, 10, 12, true);
        append_expect(plog, 40);
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);

        /* The next open scans the recorded segment whole and keeps a copy. */
        plog = open_log(dir, 1 << 20, 1024, c % 2 == 1, &rec);
        ck_assert_uint_eq(rec.damaged_ranges, 1);
        ck_assert_uint_eq(rec.new_damaged_ranges, 0);
        ck_assert_uint_eq(rec.forensic_copies, 1);
        expect_all_but(plog, 10, 12, true);
        append_expect(plog, 42);
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
        pt_cleanup(dir);
    }
}
END_TEST

/* A log of several sealed 4 KiB segments; *bases gets the base of every
 * segment (pulse_free), *n their number. Closed cleanly. */
static int64_t build_segments(const char *dir, int64_t **bases, size_t *n)
{
    struct pulse_segment_info *segs = NULL;
    struct pulse_plog *plog = open_log(dir, 4096, 512, true, NULL);
    fill(plog, 45);
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, n), PULSE_OK);
    ck_assert_uint_ge(*n, 4);
    *bases = pulse_calloc(*n, sizeof **bases);
    for (size_t i = 0; i < *n; i++)
        (*bases)[i] = segs[i].base_offset;
    pulse_free(segs);
    int64_t end = pulse_plog_log_end(plog);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    return end;
}

/*
 * In a contiguous log (the broker's cleanup=delete topics) the next
 * segment starts where the one before it ends, so a sealed segment
 * deleted, cut at a batch boundary, or lost with only its index left, is
 * a gap: recovery records it as a missing range (logged, counted, skipped
 * by reads with skip_damaged false), the log end stays, and the next open
 * finds the same range without reporting it as new. A lost first segment
 * leaves its index file, which an empty stand-in segment takes over. A log
 * that is not contiguous (compaction leaves gaps) records nothing.
 */
START_TEST(test_a_lost_or_shortened_segment_of_a_contiguous_log_is_recorded_as_missing)
{
    char *dir = pt_tmpdir();
    char pristine[600], p[700];
    int64_t *b = NULL;
    size_t nb = 0;
    int64_t end = build_segments(dir, &b, &nb);
    snprintf(pristine, sizeof pristine, "%s.pristine", dir);
    copy_tree(dir, pristine);

    for (int how = 0; how < 4; how++) {
        struct pulse_plog_recovery rec;
        struct pulse_plog *plog;
        int64_t lo = b[2], hi = b[3];
        copy_tree(pristine, dir);
        if (how == 0) { /* the whole segment deleted */
            rm_file(dir, b[2], "log");
            rm_file(dir, b[2], "index");
        } else if (how == 1) { /* cut after its first batch */
            pt_path(p, sizeof p, dir, b[2], "log");
            long long size = pt_file_size(p);
            ck_assert_int_gt(size, 0);
            struct pulse_batch_header hdr;
            uint8_t raw[PULSE_BATCH_HEADER_SIZE];
            pt_read_file(p, 0, raw, sizeof raw);
            ck_assert_int_eq(pulse_batch_parse_header(raw, (size_t)size, &hdr), PULSE_OK);
            pt_truncate(p, (long long)pulse_batch_total_size(&hdr));
            lo = b[2] + 2;
        } else if (how == 2) { /* only its index file is left */
            rm_file(dir, b[2], "log");
        } else { /* the first segment lost, its index file left */
            rm_file(dir, b[0], "log");
            lo = b[0];
            hi = b[1];
        }
        plog = open_log(dir, 4096, 512, true, &rec);
        ck_assert_uint_eq(rec.new_damaged_ranges, 1);
        ck_assert_int_eq(pulse_plog_log_end(plog), end);
        ck_assert_int_eq(pulse_plog_log_start(plog), 0);
        expect_all_but(plog, lo, hi, false);
        expect_record(dir, lo, hi, false);
        append_expect(plog, end);
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
        /* Repeatable: the same range, known now. */
        plog = open_log(dir, 4096, 512, true, &rec);
        ck_assert_uint_eq(rec.new_damaged_ranges, 0);
        ck_assert_uint_eq(rec.damaged_ranges, 1);
        expect_all_but(plog, lo, hi, false);
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
        if (how >= 2)
            continue;
        /* Where gaps are normal, a gap is not damage. */
        copy_tree(pristine, dir);
        rm_file(dir, b[2], "log");
        rm_file(dir, b[2], "index");
        plog = open_log(dir, 4096, 512, false, &rec);
        ck_assert_uint_eq(rec.damaged_ranges, 0);
        ck_assert_int_eq(pulse_plog_log_end(plog), end);
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    }
    pulse_free(b);
    snprintf(p, sizeof p, "rm -rf '%s'", pristine);
    ck_assert_int_eq(system(p), 0);
    pt_cleanup(dir);
}
END_TEST

/* Removes every *.log (and with indexes, every *.index) of dir. */
static void rm_segments(const char *dir, bool indexes)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char names[64][64];
    int n = 0;
    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)) != NULL && n < 64) {
        size_t len = strlen(de->d_name);
        if ((len > 4 && strcmp(de->d_name + len - 4, ".log") == 0) ||
            (indexes && len > 6 && strcmp(de->d_name + len - 6, ".index") == 0))
            snprintf(names[n++], sizeof names[0], "%s", de->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++)
        rm_named(dir, names[i]);
}

/*
 * Every segment file lost, the snapshot kept: the offsets it proves were
 * handed out are reported missing from the lowest base that proves a
 * segment existed (an index file left behind, else the snapshot's active
 * segment), instead of the log silently starting at its old end. Reads
 * from 0 say what they skip; appends go on at the old end.
 */
START_TEST(test_segment_files_lost_beside_their_snapshot_leave_their_offsets_missing)
{
    for (int indexes = 0; indexes < 2; indexes++) {
        char *dir = pt_tmpdir();
        int64_t *b = NULL;
        size_t nb = 0;
        struct pulse_plog_recovery rec;
        int64_t end = build_segments(dir, &b, &nb);
        int64_t from = indexes ? b[nb - 1] : 0;
        rm_segments(dir, indexes == 1);
        struct pulse_plog *plog = open_log(dir, 4096, 512, false, &rec);
        ck_assert_uint_eq(rec.new_damaged_ranges, 1);
        ck_assert_int_eq(pulse_plog_log_start(plog), from);
        ck_assert_int_eq(pulse_plog_log_end(plog), end);
        ck_assert_int_eq(pulse_plog_high_watermark(plog), end);
        expect_record(dir, from, end, false);

        struct pulse_buf buf;
        struct pulse_slice info;
        pulse_buf_init(&buf, 1 << 20);
        ck_assert_int_eq(pulse_plog_read(plog, 0, 1 << 20, &buf, &info), PULSE_OK);
        ck_assert_uint_eq(info.len, 0);
        ck_assert_int_eq(info.skip_from, from);
        ck_assert_int_eq(info.skip_to, end);
        ck_assert(!info.skip_damaged);
        ck_assert_int_eq(info.next_offset, end);
        pulse_buf_fini(&buf);
        append_expect(plog, end);
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
        pulse_free(b);
        pt_cleanup(dir);
    }
}
END_TEST

/*
 * The active segment's data file lost after a crash (no snapshot names
 * it): its index file proves a batch was numbered at its last entry, so
 * the log end goes past that entry and the offsets from the segment's
 * base on are a missing range; nothing of them is handed out again. This
 * holds for any log, contiguous or not.
 */
START_TEST(test_the_index_file_of_a_lost_active_segment_keeps_its_offsets)
{
    char *dir = pt_tmpdir();
    char p[700];
    struct pulse_plog_recovery rec;
    int64_t *b = NULL;
    size_t nb = 0;
    uint8_t raw[8];
    (void)build_segments(dir, &b, &nb);
    int64_t active = b[nb - 1];
    pt_path(p, sizeof p, dir, active, "index");
    long long isize = pt_file_size(p);
    ck_assert_int_ge(isize, 8);
    pt_read_file(p, isize - 8, raw, sizeof raw);
    int64_t claim = active + (int64_t)pulse_get_be32(raw) + 1;
    rm_file(dir, active, "log");
    rm_named(dir, "snapshot");

    struct pulse_plog *plog = open_log(dir, 4096, 512, false, &rec);
    ck_assert_int_eq(pulse_plog_log_end(plog), claim);
    ck_assert_uint_eq(rec.new_damaged_ranges, 1);
    expect_record(dir, active, claim, false);
    expect_all_but(plog, active, claim, false);
    append_expect(plog, claim);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pulse_free(b);
    pt_cleanup(dir);
}
END_TEST

/*
 * pulse_plog_raise_end (the broker passes a partition's highest committed
 * cursor): a log end below the proof moves up to it, the offsets between
 * are recorded as missing before anything moves, reads skip them, the
 * next append gets the proven offset, and all of it survives a restart.
 * Without the record and the snapshot, a contiguous log finds the gap in
 * the data again. A proof at or below the log end changes nothing.
 */
START_TEST(test_raise_end_records_the_gap_and_its_offsets_are_never_handed_out)
{
    char *dir = pt_tmpdir();
    struct pulse_plog_recovery rec;
    int64_t raised = -1;
    struct pulse_plog *plog = open_log(dir, 1 << 20, 1024, true, NULL);
    fill(plog, 6);
    ck_assert_int_eq(pulse_plog_raise_end(plog, 12, &raised), PULSE_OK);
    ck_assert_int_eq(raised, 0);
    ck_assert_int_eq(pulse_plog_raise_end(plog, 3, &raised), PULSE_OK);
    ck_assert_int_eq(raised, 0);
    ck_assert_int_eq(pulse_plog_log_end(plog), 12);
    ck_assert_int_eq(pulse_plog_raise_end(plog, 20, &raised), PULSE_OK);
    ck_assert_int_eq(raised, 8);
    ck_assert_int_eq(pulse_plog_log_end(plog), 20);
    ck_assert_int_eq(pulse_plog_high_watermark(plog), 20);
    expect_record(dir, 12, 20, false);
    expect_all_but(plog, 12, 20, false);
    append_expect(plog, 20);
    expect_all_but(plog, 12, 20, false);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);

    plog = open_log(dir, 1 << 20, 1024, true, &rec);
    ck_assert_int_eq(pulse_plog_log_end(plog), 22);
    ck_assert_uint_eq(rec.new_damaged_ranges, 0);
    expect_all_but(plog, 12, 20, false);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);

    rm_named(dir, "damage");
    rm_named(dir, "snapshot");
    plog = open_log(dir, 1 << 20, 1024, true, &rec);
    ck_assert_uint_eq(rec.new_damaged_ranges, 1);
    expect_record(dir, 12, 20, false);
    expect_all_but(plog, 12, 20, false);
    append_expect(plog, 22);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

int main(void)
{
    g_fio = faultio_create();
    faultio_set_sync_noop(g_fio, true);
    Suite *s = suite_create("lost");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_a_header_that_cannot_be_right_is_learned_by_a_read_never_taken_for_the_end);
    tcase_add_test(tc, test_a_lost_or_shortened_segment_of_a_contiguous_log_is_recorded_as_missing);
    tcase_add_test(tc, test_segment_files_lost_beside_their_snapshot_leave_their_offsets_missing);
    tcase_add_test(tc, test_the_index_file_of_a_lost_active_segment_keeps_its_offsets);
    tcase_add_test(tc, test_raise_end_records_the_gap_and_its_offsets_are_never_handed_out);
    suite_add_tcase(s, tc);
    int rc = pt_run(s);
    faultio_destroy(g_fio);
    return rc;
}
