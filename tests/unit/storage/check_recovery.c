/* SPDX-License-Identifier: MIT */
/*
 * check_recovery.c - recovery on really damaged files (storage contract
 * sections 7 and 8): torn tails at every byte, flipped bytes everywhere in
 * the last batch, snapshot fast path equal to the full scan, bad snapshots,
 * a torn delta tail after a good snapshot, missing/short/wrong indexes, a
 * corrupt sealed segment, leftover temp files.
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

/* These tests check what recovery decides, not that fsync reaches the
 * disk (check_fault does that): syncs are skipped to keep the exhaustive
 * loops fast. */
static struct faultio *g_fio;

static struct pulse_plog *open_rec(const char *dir, uint64_t seg, uint32_t interval, struct pulse_plog_recovery *rec)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pt_cfg(&cfg, seg, interval, faultio_io(g_fio));
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, rec), PULSE_OK);
    return plog;
}

/* Appends batches of `recs` records with value lengths varying by id. */
static void fill(struct pulse_plog *plog, uint64_t *id, int batches, uint32_t recs, size_t vlen)
{
    struct pulse_buf b;
    int64_t base;
    pulse_buf_init(&b, 1 << 22);
    for (int i = 0; i < batches; i++) {
        pt_batch(&b, *id, recs, vlen + (*id % 5) * 7, 1000 + (int64_t)*id);
        ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
        ck_assert_int_eq(base, (int64_t)*id);
        *id += recs;
    }
    pulse_buf_fini(&b);
}

static void expect_ids(struct pulse_plog *plog, uint64_t n)
{
    struct pt_log l = {0};
    pt_read_all(plog, 0, 700, &l);
    ck_assert_uint_eq(l.n, n);
    for (size_t i = 0; i < l.n; i++) {
        ck_assert_int_eq(l.offs[i], (int64_t)i);
        ck_assert_uint_eq(l.ids[i], i);
    }
    pt_log_free(&l);
}

/* Whole-file image helpers. */
struct image {
    uint8_t *data;
    size_t len;
    bool exists;
};

static void img_load(struct image *img, const char *path)
{
    long long n = pt_file_size(path);
    img->exists = n >= 0;
    img->len = n > 0 ? (size_t)n : 0;
    img->data = pulse_malloc(img->len + 1);
    if (img->len > 0)
        pt_read_file(path, 0, img->data, img->len);
}

static void img_store(const struct image *img, const char *path)
{
    unlink(path);
    if (!img->exists)
        return;
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, img->data, img->len), (ssize_t)img->len);
    close(fd);
}

static void img_free(struct image *img)
{
    pulse_free(img->data);
}

/* Removes what recovery leaves after finding damage (the record and the
 * forensic copies), so that every run of a loop starts from the same files. */
static void forget_damage(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/damage' '%s/forensics'", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Files in dir/forensics. */
static int forensic_copies(const char *dir)
{
    char p[700];
    int n = 0;
    snprintf(p, sizeof p, "%s/forensics", dir);
    DIR *d = opendir(p);
    if (d == NULL)
        return 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
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

/* Reads [from, HW) and checks that exactly the ids in want[0..n) come back
 * at their own offsets (id == offset here), and that every offset missing
 * from want was reported as skipped by the read that stepped over it. */
static void expect_offsets(struct pulse_plog *plog, const int64_t *want, size_t n, bool skips_damaged)
{
    struct pulse_buf buf;
    int64_t off = 0, prev_end = 0;
    size_t got = 0;
    pulse_buf_init(&buf, 1 << 24);
    for (;;) {
        struct pulse_slice info;
        struct pt_log l = {0};
        pulse_buf_reset(&buf);
        ck_assert_int_eq(pulse_plog_read(plog, off, 700, &buf, &info), PULSE_OK);
        if (info.skip_to > info.skip_from) {
            ck_assert_int_eq(info.skip_from, prev_end);
            ck_assert_int_eq(info.skip_damaged, skips_damaged);
            prev_end = info.skip_to;
        }
        pt_decode(buf.data, buf.len, info.start_offset, &l);
        for (size_t i = 0; i < l.n; i++) {
            ck_assert_uint_lt(got, n);
            ck_assert_int_eq(l.offs[i], want[got]);
            ck_assert_uint_eq(l.ids[i], (uint64_t)want[got]);
            /* Nothing was stepped over without saying so. */
            ck_assert_int_eq(l.offs[i], prev_end);
            prev_end = l.offs[i] + 1;
            got++;
        }
        pt_log_free(&l);
        if (info.next_offset == off)
            break;
        ck_assert_int_gt(info.next_offset, off);
        off = info.next_offset;
    }
    ck_assert_uint_eq(got, n);
    ck_assert_int_eq(off, pulse_plog_high_watermark(plog));
    pulse_buf_fini(&buf);
}

/* Appends one batch of 2 records with ids equal to the offsets it must get. */
static void append_expect(struct pulse_plog *plog, int64_t want_base)
{
    struct pulse_buf b;
    int64_t base = -1;
    pulse_buf_init(&b, 1 << 20);
    pt_batch(&b, (uint64_t)want_base, 2, 100, 0);
    ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
    ck_assert_int_eq(base, want_base);
    pulse_buf_fini(&b);
}

/* Builds a one-segment log of n batches of 2 records (ids = offsets) with
 * this index interval, closed cleanly. snap_before_last (nullable) gets
 * the snapshot as it was before the last batch: it does not cover that
 * batch, as after a crash while it was being written. Returns the position
 * where batch `pos_of` starts. */
static long long build_log(const char *dir, int n, uint32_t interval, struct image *snap_before_last, int pos_of)
{
    uint64_t id = 0;
    char snapp[600];
    struct pulse_slice sl;
    struct pulse_plog *plog = open_rec(dir, 1 << 20, interval, NULL);
    fill(plog, &id, n - 1, 2, 100);
    if (snap_before_last != NULL) {
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
        snprintf(snapp, sizeof snapp, "%s/snapshot", dir);
        img_load(snap_before_last, snapp);
        plog = open_rec(dir, 1 << 20, interval, NULL);
    }
    fill(plog, &id, 1, 2, 100);
    ck_assert_int_eq(pulse_plog_slice(plog, 2 * pos_of, 1, false, &sl), PULSE_OK);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    return (long long)sl.pos;
}

/* After a torn last batch: cut back to it, offsets go on from 10. */
static void reopen_expect_cut(const char *dir, long long cut_from, long long size)
{
    struct pulse_plog_recovery rec;
    struct pulse_plog *plog = open_rec(dir, 1 << 20, 1 << 20, &rec);
    char logp[512];
    pt_path(logp, sizeof logp, dir, 0, "log");
    ck_assert_int_eq(pt_file_size(logp), cut_from); /* really cut, not just ignored */
    ck_assert_int_eq(pulse_plog_log_end(plog), 10);
    ck_assert_int_eq(pulse_plog_high_watermark(plog), 10);
    ck_assert_uint_eq(rec.truncated_bytes, (uint64_t)(size - cut_from));
    ck_assert_uint_eq(rec.damaged_ranges, 0);
    /* The next append takes offset 10 and lands right after batch 5. */
    append_expect(plog, 10);
    struct pulse_slice sl;
    ck_assert_int_eq(pulse_plog_slice(plog, 10, 1, false, &sl), PULSE_OK);
    ck_assert_uint_eq(sl.pos, (uint64_t)cut_from);
    expect_ids(plog, 12);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ck_assert_int_eq(forensic_copies(dir), 0);
}

/* Runs damage(dir, logp, i) for i in [from, to) on a fresh copy of the
 * log's files each time (snapshot: the given image, or none), then check. */
struct run {
    const char *dir;
    struct image log, idx;
    char logp[512], idxp[512], snapp[600];
};

static void run_init(struct run *r, const char *dir)
{
    r->dir = dir;
    pt_path(r->logp, sizeof r->logp, dir, 0, "log");
    pt_path(r->idxp, sizeof r->idxp, dir, 0, "index");
    snprintf(r->snapp, sizeof r->snapp, "%s/snapshot", dir);
    img_load(&r->log, r->logp);
    img_load(&r->idx, r->idxp);
}

static void run_reset(struct run *r, const struct image *snap)
{
    img_store(&r->log, r->logp);
    img_store(&r->idx, r->idxp);
    if (snap != NULL)
        img_store(snap, r->snapp);
    else
        unlink(r->snapp);
    forget_damage(r->dir);
}

static void run_fini(struct run *r)
{
    img_free(&r->log);
    img_free(&r->idx);
}

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

/* Everything observable about a log. */
struct state {
    int64_t leo, hw, start;
    struct pulse_segment_info *segs;
    size_t nsegs;
    struct pulse_index_entry *entries;
    size_t nentries;
    struct pt_log recs;
};

static void capture(struct pulse_plog *plog, struct state *s)
{
    memset(s, 0, sizeof *s);
    s->leo = pulse_plog_log_end(plog);
    s->hw = pulse_plog_high_watermark(plog);
    s->start = pulse_plog_log_start(plog);
    ck_assert_int_eq(pulse_plog_list_segments(plog, &s->segs, &s->nsegs), PULSE_OK);
    size_t total = 0;
    for (size_t i = 0; i < plog->nsegs; i++)
        total += plog->segs[i]->index.n;
    s->entries = pulse_calloc(total + 1, sizeof *s->entries);
    for (size_t i = 0; i < plog->nsegs; i++)
        for (size_t j = 0; j < plog->segs[i]->index.n; j++)
            s->entries[s->nentries++] = plog->segs[i]->index.entries[j];
    pt_read_all(plog, 0, 1000, &s->recs);
}

static void state_free(struct state *s)
{
    pulse_free(s->segs);
    pulse_free(s->entries);
    pt_log_free(&s->recs);
}

static void state_eq(const struct state *a, const struct state *b)
{
    ck_assert_int_eq(a->leo, b->leo);
    ck_assert_int_eq(a->hw, b->hw);
    ck_assert_int_eq(a->start, b->start);
    ck_assert_uint_eq(a->nsegs, b->nsegs);
    for (size_t i = 0; i < a->nsegs; i++) {
        ck_assert_int_eq(a->segs[i].base_offset, b->segs[i].base_offset);
        ck_assert_int_eq(a->segs[i].next_offset, b->segs[i].next_offset);
        ck_assert_uint_eq(a->segs[i].size_bytes, b->segs[i].size_bytes);
        ck_assert_int_eq(a->segs[i].max_timestamp, b->segs[i].max_timestamp);
        ck_assert_int_eq(a->segs[i].active, b->segs[i].active);
    }
    ck_assert_uint_eq(a->nentries, b->nentries);
    for (size_t i = 0; i < a->nentries; i++) {
        ck_assert_uint_eq(a->entries[i].rel_offset, b->entries[i].rel_offset);
        ck_assert_uint_eq(a->entries[i].rel_pos, b->entries[i].rel_pos);
    }
    ck_assert_uint_eq(a->recs.n, b->recs.n);
    for (size_t i = 0; i < a->recs.n; i++) {
        ck_assert_int_eq(a->recs.offs[i], b->recs.offs[i]);
        ck_assert_uint_eq(a->recs.ids[i], b->recs.ids[i]);
    }
}

/* A multi-segment log, closed cleanly (snapshot written). */
static uint64_t build_multi(const char *dir)
{
    uint64_t id = 0;
    struct pulse_plog *plog = open_rec(dir, 4096, 500, NULL);
    fill(plog, &id, 45, 2, 120);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    return id;
}

static void copy_dir_files(const char *from, const char *to)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -p '%s'/* '%s'/", to, from, to);
    ck_assert_int_eq(system(cmd), 0);
}

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
    uint8_t raw[PULSE_SNAPSHOT_SIZE + 1];
    snprintf(snapp, sizeof snapp, "%s/snapshot", dir);
    img_load(&good, snapp);
    ck_assert_uint_eq(good.len, PULSE_SNAPSHOT_SIZE);
    ck_assert_int_eq(pulse_snapshot_decode(good.data, good.len, &snap), PULSE_OK);
    for (int variant = 0; variant < 6; variant++) {
        struct image bad = {raw, PULSE_SNAPSHOT_SIZE, true};
        memcpy(raw, good.data, PULSE_SNAPSHOT_SIZE);
        switch (variant) {
        case 0: /* garbage */
            for (size_t i = 0; i < PULSE_SNAPSHOT_SIZE; i++)
                raw[i] = (uint8_t)(i * 37 + 11);
            break;
        case 1: /* wrong crc */
            raw[20] ^= 0x01;
            break;
        case 2: /* short file */
            bad.len = PULSE_SNAPSHOT_SIZE - 1;
            break;
        case 3: { /* valid CRC, but names another active segment */
            struct pulse_snapshot s = snap;
            s.active_base = 0;
            pulse_snapshot_encode(&s, raw);
            break;
        }
        case 4: { /* claims more bytes than the active file has */
            struct pulse_snapshot s = snap;
            s.active_size += 1000;
            pulse_snapshot_encode(&s, raw);
            break;
        }
        default: /* longer than 40 bytes */
            raw[PULSE_SNAPSHOT_SIZE] = 0;
            bad.len = PULSE_SNAPSHOT_SIZE + 1;
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

/* The inode number of path (a replaced file gets a new one), 0 if none. */
static ino_t inode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_ino : 0;
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

int main(void)
{
    g_fio = faultio_create();
    faultio_set_sync_noop(g_fio, true);
    Suite *s = suite_create("recovery");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_torn_tail_at_every_byte_of_the_last_batch_is_truncated);
    tcase_add_test(tc, test_flipped_byte_in_a_last_batch_no_checkpoint_covers_is_cut_as_torn);
    tcase_add_test(tc, test_checkpoint_proves_a_last_batch_durable_so_its_damage_is_kept);
    tcase_add_test(tc, test_checkpoint_is_written_when_the_durable_end_moved_at_most_once_per_interval);
    tcase_add_test(tc, test_index_entry_past_the_end_of_the_file_claims_no_offsets);
    tcase_add_test(tc, test_known_damage_leaves_the_record_file_alone_at_the_next_open);
    tcase_add_test(tc, test_damaged_last_batch_the_snapshot_covers_is_kept_and_its_offsets_never_reused);
    tcase_add_test(tc, test_flipped_byte_in_a_middle_batch_of_the_active_segment_keeps_every_later_batch);
    tcase_add_test(tc, test_index_naming_a_lost_batch_keeps_its_offsets_from_being_handed_out_again);
    tcase_add_test(tc, test_snapshot_log_end_above_the_surviving_data_is_never_handed_out_again);
    tcase_add_test(tc, test_snapshot_fast_path_reaches_the_same_state_as_the_full_scan);
    tcase_add_test(tc, test_bad_snapshot_is_discarded_for_the_full_scan);
    tcase_add_test(tc, test_torn_batch_after_a_valid_snapshot_is_truncated_by_the_delta_scan);
    tcase_add_test(tc, test_missing_short_or_wrong_index_is_rebuilt_and_reads_stay_correct);
    tcase_add_test(tc, test_corrupt_sealed_segment_keeps_every_valid_batch_and_later_segments_readable);
    tcase_add_test(tc, test_leftover_temp_files_are_removed_at_open);
    tcase_add_test(tc, test_torn_write_after_a_kept_damaged_tail_is_cut_at_the_recorded_end);
    tcase_add_test(tc, test_rot_a_read_finds_at_the_end_keeps_its_offsets_across_a_restart);
    tcase_add_test(tc, test_damage_record_round_trips_and_refuses_anything_else);
    tcase_add_test(tc, test_unreadable_damage_record_sends_recovery_to_the_full_scan);
    tcase_add_test(tc, test_length_field_naming_a_later_batch_keeps_the_intact_batch_between);
    suite_add_tcase(s, tc);
    int rc = pt_run(s);
    faultio_destroy(g_fio);
    return rc;
}
