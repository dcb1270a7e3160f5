/* SPDX-License-Identifier: MIT */
/*
 * check_recovery.c - recovery on really damaged files (storage contract
 * sections 7 and 8): torn tails at every byte, flipped bytes everywhere in
 * the last batch, snapshot fast path equal to the full scan, bad snapshots,
 * a torn delta tail after a good snapshot, missing/short/wrong indexes, a
 * corrupt sealed segment, leftover temp files.
 */
#include "plogtest.h"

#include <errno.h>

#include "faultio.h"
#include "storage/io.h"
#include "storage/plog_int.h"
#include "storage/segment.h"
#include "storage/snapshot.h"

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

/* Builds a one-segment log of 6 batches (12 records); returns the position
 * where the last batch starts. */
static long long build_six(const char *dir)
{
    uint64_t id = 0;
    struct pulse_plog *plog = open_rec(dir, 1 << 20, 256, NULL);
    fill(plog, &id, 5, 2, 100);
    struct pulse_slice sl;
    fill(plog, &id, 1, 2, 100);
    ck_assert_int_eq(pulse_plog_slice(plog, 10, 1, false, &sl), PULSE_OK);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    return (long long)sl.pos;
}

static void reopen_expect_prefix(const char *dir, long long cut_from, long long size, bool torn)
{
    struct pulse_plog_recovery rec;
    struct pulse_buf b;
    int64_t base;
    struct pulse_plog *plog = open_rec(dir, 1 << 20, 256, &rec);
    char logp[512];
    pt_path(logp, sizeof logp, dir, 0, "log");
    ck_assert_int_eq(pt_file_size(logp), cut_from); /* really cut, not just ignored */
    ck_assert_int_eq(pulse_plog_log_end(plog), 10);
    ck_assert_int_eq(pulse_plog_high_watermark(plog), 10);
    ck_assert_uint_eq(rec.truncated_bytes, (uint64_t)(size - cut_from));
    (void)torn;
    /* The next append takes offset 10 and lands right after batch 5. */
    pulse_buf_init(&b, 1 << 20);
    pt_batch(&b, 10, 2, 100 + (10 % 5) * 7, 0);
    ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
    ck_assert_int_eq(base, 10);
    struct pulse_slice sl;
    ck_assert_int_eq(pulse_plog_slice(plog, 10, 1, false, &sl), PULSE_OK);
    ck_assert_uint_eq(sl.pos, (uint64_t)cut_from);
    pulse_buf_fini(&b);
    expect_ids(plog, 12);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
}

START_TEST(test_torn_tail_at_every_byte_of_the_last_batch_is_truncated)
{
    char *dir = pt_tmpdir();
    char logp[512], idxp[512], snapp[512];
    long long last = build_six(dir);
    struct image log, idx, snap;
    pt_path(logp, sizeof logp, dir, 0, "log");
    pt_path(idxp, sizeof idxp, dir, 0, "index");
    snprintf(snapp, sizeof snapp, "%s/snapshot", dir);
    img_load(&log, logp);
    img_load(&idx, idxp);
    img_load(&snap, snapp);
    for (long long cut = last; cut < (long long)log.len; cut++) {
        img_store(&log, logp);
        img_store(&idx, idxp);
        /* Half the runs without the snapshot, half with it (it then
         * claims more than the file holds and is discarded). */
        if (cut % 2 == 0)
            img_store(&snap, snapp);
        else
            unlink(snapp);
        pt_truncate(logp, cut);
        reopen_expect_prefix(dir, last, cut, true);
    }
    img_free(&log);
    img_free(&idx);
    img_free(&snap);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_flipped_byte_anywhere_in_the_last_batch_truncates_to_the_valid_prefix)
{
    char *dir = pt_tmpdir();
    char logp[512], idxp[512], snapp[512];
    long long last = build_six(dir);
    struct image log, idx, snap;
    pt_path(logp, sizeof logp, dir, 0, "log");
    pt_path(idxp, sizeof idxp, dir, 0, "index");
    snprintf(snapp, sizeof snapp, "%s/snapshot", dir);
    img_load(&log, logp);
    img_load(&idx, idxp);
    img_load(&snap, snapp);
    for (long long at = last; at < (long long)log.len; at++) {
        img_store(&log, logp);
        img_store(&idx, idxp);
        /* With the snapshot the fast path re-verifies from the last index
         * entry; without it the full scan runs. Both must cut here. */
        if (at % 2 == 0)
            img_store(&snap, snapp);
        else
            unlink(snapp);
        uint8_t x = (uint8_t)(log.data[at] ^ 0xFF);
        pt_patch(logp, at, &x, 1);
        reopen_expect_prefix(dir, last, (long long)log.len, false);
    }
    img_free(&log);
    img_free(&idx);
    img_free(&snap);
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
            ck_assert_msg(rec.indexes_rebuilt >= 2, "how %d snap %d rebuilt %u", how, with_snap,
                          rec.indexes_rebuilt);
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

START_TEST(test_corrupt_sealed_segment_keeps_its_valid_prefix_and_later_segments_readable)
{
    char *dir = pt_tmpdir();
    char p[600];
    uint64_t n = build_multi(dir);
    struct pulse_plog *plog = open_rec(dir, 4096, 500, NULL);
    struct pulse_segment_info *segs = NULL;
    size_t nsegs = 0;
    struct pulse_slice sl;
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &nsegs), PULSE_OK);
    ck_assert_uint_gt(nsegs, 2);
    int64_t seg1 = segs[1].base_offset;
    int64_t seg2 = segs[2].base_offset;
    /* The batch holding seg1 + 4. */
    ck_assert_int_eq(pulse_plog_slice(plog, seg1 + 4, 1, false, &sl), PULSE_OK);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    int64_t bad_base = seg1 + 4;
    pt_path(p, sizeof p, dir, seg1, "log");
    uint8_t x;
    pt_read_file(p, (long long)sl.pos + 70, &x, 1);
    x ^= 0x10;
    pt_patch(p, (long long)sl.pos + 70, &x, 1);
    snprintf(p, sizeof p, "%s/snapshot", dir);
    unlink(p); /* force the full scan that finds it */

    struct pulse_plog_recovery rec;
    plog = open_rec(dir, 4096, 500, &rec);
    ck_assert_uint_eq(rec.corrupt_segments, 1);
    ck_assert_uint_eq(rec.truncated_bytes, 0);
    ck_assert_int_eq(pulse_plog_log_end(plog), (int64_t)n);
    struct pt_log l = {0};
    pt_read_all(plog, 0, 1 << 20, &l);
    /* Everything but [bad_base, seg2) comes back, in order. */
    ck_assert_uint_eq(l.n, n - (uint64_t)(seg2 - bad_base));
    for (size_t i = 0; i < l.n; i++) {
        int64_t want = (int64_t)i < bad_base ? (int64_t)i : (int64_t)i + (seg2 - bad_base);
        ck_assert_int_eq(l.offs[i], want);
        ck_assert_uint_eq(l.ids[i], (uint64_t)want);
    }
    pt_log_free(&l);
    /* A read inside the lost range continues with the next segment. */
    struct pulse_buf buf;
    struct pulse_slice info;
    pulse_buf_init(&buf, 1 << 20);
    ck_assert_int_eq(pulse_plog_read(plog, bad_base + 1, 1, &buf, &info), PULSE_OK);
    ck_assert_uint_gt(info.len, 0);
    pt_decode(buf.data, buf.len, 0, &l);
    ck_assert_int_eq(l.offs[0], seg2);
    pt_log_free(&l);
    pulse_buf_fini(&buf);
    /* Appends go on at the log end. */
    uint64_t id = n;
    fill(plog, &id, 1, 2, 120);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pulse_free(segs);
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

int main(void)
{
    g_fio = faultio_create();
    faultio_set_sync_noop(g_fio, true);
    Suite *s = suite_create("recovery");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_torn_tail_at_every_byte_of_the_last_batch_is_truncated);
    tcase_add_test(tc, test_flipped_byte_anywhere_in_the_last_batch_truncates_to_the_valid_prefix);
    tcase_add_test(tc, test_snapshot_fast_path_reaches_the_same_state_as_the_full_scan);
    tcase_add_test(tc, test_bad_snapshot_is_discarded_for_the_full_scan);
    tcase_add_test(tc, test_torn_batch_after_a_valid_snapshot_is_truncated_by_the_delta_scan);
    tcase_add_test(tc, test_missing_short_or_wrong_index_is_rebuilt_and_reads_stay_correct);
    tcase_add_test(tc, test_corrupt_sealed_segment_keeps_its_valid_prefix_and_later_segments_readable);
    tcase_add_test(tc, test_leftover_temp_files_are_removed_at_open);
    suite_add_tcase(s, tc);
    int rc = pt_run(s);
    faultio_destroy(g_fio);
    return rc;
}
