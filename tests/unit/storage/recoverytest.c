/* SPDX-License-Identifier: MIT */
/*
 * recoverytest.c - the helpers check_recovery's files share
 * (recoverytest.h): logs built and reopened through the faulty io, whole
 * directory images saved and restored, what recovery recorded as damage,
 * and everything observable about a log captured for comparison.
 */
#include "recoverytest.h"

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

struct faultio *g_fio;

struct pulse_plog *open_rec(const char *dir, uint64_t seg, uint32_t interval, struct pulse_plog_recovery *rec)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pt_cfg(&cfg, seg, interval, faultio_io(g_fio));
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, rec), PULSE_OK);
    return plog;
}

/* Appends batches of `recs` records with value lengths varying by id. */
void fill(struct pulse_plog *plog, uint64_t *id, int batches, uint32_t recs, size_t vlen)
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

void expect_ids(struct pulse_plog *plog, uint64_t n)
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

void img_load(struct image *img, const char *path)
{
    long long n = pt_file_size(path);
    img->exists = n >= 0;
    img->len = n > 0 ? (size_t)n : 0;
    img->data = pulse_malloc(img->len + 1);
    if (img->len > 0)
        pt_read_file(path, 0, img->data, img->len);
}

void img_store(const struct image *img, const char *path)
{
    unlink(path);
    if (!img->exists)
        return;
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, img->data, img->len), (ssize_t)img->len);
    close(fd);
}

void img_free(struct image *img)
{
    pulse_free(img->data);
}

/* Removes what recovery leaves after finding damage (the record and the
 * forensic copies), so that every run of a loop starts from the same files. */
void forget_damage(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/damage' '%s/forensics'", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Files in dir/forensics. */
int forensic_copies(const char *dir)
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
struct pulse_damage *read_record(const char *dir, size_t *n)
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
void expect_offsets(struct pulse_plog *plog, const int64_t *want, size_t n, bool skips_damaged)
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
void append_expect(struct pulse_plog *plog, int64_t want_base)
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
long long build_log(const char *dir, int n, uint32_t interval, struct image *snap_before_last, int pos_of)
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
void reopen_expect_cut(const char *dir, long long cut_from, long long size)
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

void run_init(struct run *r, const char *dir)
{
    r->dir = dir;
    pt_path(r->logp, sizeof r->logp, dir, 0, "log");
    pt_path(r->idxp, sizeof r->idxp, dir, 0, "index");
    snprintf(r->snapp, sizeof r->snapp, "%s/snapshot", dir);
    img_load(&r->log, r->logp);
    img_load(&r->idx, r->idxp);
}

void run_reset(struct run *r, const struct image *snap)
{
    img_store(&r->log, r->logp);
    img_store(&r->idx, r->idxp);
    if (snap != NULL)
        img_store(snap, r->snapp);
    else
        unlink(r->snapp);
    forget_damage(r->dir);
}

void run_fini(struct run *r)
{
    img_free(&r->log);
    img_free(&r->idx);
}

void capture(struct pulse_plog *plog, struct state *s)
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

void state_free(struct state *s)
{
    pulse_free(s->segs);
    pulse_free(s->entries);
    pt_log_free(&s->recs);
}

void state_eq(const struct state *a, const struct state *b)
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
uint64_t build_multi(const char *dir)
{
    uint64_t id = 0;
    struct pulse_plog *plog = open_rec(dir, 4096, 500, NULL);
    fill(plog, &id, 45, 2, 120);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    return id;
}

void copy_dir_files(const char *from, const char *to)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -p '%s'/* '%s'/", to, from, to);
    ck_assert_int_eq(system(cmd), 0);
}

/* The inode number of path (a replaced file gets a new one), 0 if none. */
ino_t inode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_ino : 0;
}
