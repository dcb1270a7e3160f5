/* SPDX-License-Identifier: MIT */
/*
 * check_snapshot_v2.c - the snapshot's version 2 records (snapshot.h) and
 * the recovery that trusts them (recover.c restore_by_record, active_trust):
 * a sealed segment whose files are as recorded is restored without reading
 * its batch headers; anything that changed its files (a damaged, cut or
 * extended index or data file, a compaction's rewrite, a retention trim, a
 * stale snapshot put back) is not trusted and is checked the old way; a
 * version 1 file is still read. Every test reads the whole log back: what
 * recovery trusted must serve exactly the records that were written.
 */
#include "compacttest.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "common/endian.h"
#include "common/fsio.h"
#include "storage/index.h"
#include "storage/snapshot.h"

#define SEG 4096u
#define NBATCH 60u
#define PER 4u    /* records per batch */
#define VLEN 100u /* value bytes */

static struct pulse_plog *open_log(const char *dir, uint32_t interval, struct pulse_plog_recovery *rec)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;

    pt_cfg(&cfg, SEG, interval, NULL);
    cfg.contiguous = true; /* as the broker opens a topic that is not compacted */
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, rec), PULSE_OK);
    return plog;
}

/* NBATCH batches of PER records (ids = offsets), in segments of SEG bytes,
 * then a clean close (which writes the snapshot). Returns the records. */
static uint64_t build(const char *dir, uint32_t interval)
{
    struct pulse_buf b;
    struct pulse_plog *plog = open_log(dir, interval, NULL);
    uint64_t id = 0;

    pulse_buf_init(&b, 1 << 20);
    for (uint32_t i = 0; i < NBATCH; i++) {
        int64_t base = -1;
        pt_batch(&b, id, PER, VLEN, 1000 + (int64_t)i);
        ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
        ck_assert_int_eq(base, (int64_t)id);
        id += PER;
    }
    pulse_buf_fini(&b);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    return id;
}

/* Reads the log from its start, one batch per read (so every batch is
 * found through the index), and checks that exactly the records [0, n)
 * outside [gap_lo, gap_hi) come back, each at its offset. */
static void expect_records(struct pulse_plog *plog, uint64_t n, uint64_t gap_lo, uint64_t gap_hi)
{
    struct pt_log l = {0};
    size_t k = 0;

    pt_read_all(plog, pulse_plog_log_start(plog), 1, &l);
    for (uint64_t id = 0; id < n; id++) {
        if (id >= gap_lo && id < gap_hi)
            continue;
        ck_assert_uint_lt(k, l.n);
        ck_assert_int_eq(l.offs[k], (int64_t)id);
        ck_assert_uint_eq(l.ids[k], id);
        k++;
    }
    ck_assert_uint_eq(k, l.n);
    pt_log_free(&l);
    ck_assert_int_eq(pulse_plog_log_end(plog), (int64_t)n);
}

static void expect_all(struct pulse_plog *plog, uint64_t n)
{
    struct pulse_plog_stats stats;

    expect_records(plog, n, 0, 0);
    pulse_plog_get_stats(plog, &stats);
    ck_assert_uint_eq(stats.damaged_ranges, 0);
}

/* The bases of the segment files, oldest first (at most cap). */
static size_t list_bases(const char *dir, int64_t *bases, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    size_t n = 0;

    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)) != NULL) {
        long long b;
        char ext[8];
        if (sscanf(de->d_name, "%20lld.%3s", &b, ext) == 2 && strcmp(ext, "log") == 0 && n < cap)
            bases[n++] = b;
    }
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && bases[j - 1] > bases[j]; j--) {
            int64_t t = bases[j];
            bases[j] = bases[j - 1];
            bases[j - 1] = t;
        }
    return n;
}

static void read_snapshot(const char *dir, struct pulse_snapshot *snap, struct pulse_snapshot_ext *ext)
{
    ck_assert_int_eq(pulse_snapshot_read_ext(pulse_io_posix(), dir, snap, ext), PULSE_OK);
}

/* A snapshot file's bytes, to put back later. */
struct image_v2 {
    uint8_t *data;
    size_t len;
};

static struct image_v2 save_snapshot(const char *dir)
{
    struct image_v2 im = {NULL, 0};
    ck_assert_int_eq(
        pulse_io_read_file(pulse_io_posix(), dir, PULSE_SNAPSHOT_NAME, PULSE_SNAPSHOT_MAX_FILE, &im.data, &im.len), 0);
    return im;
}

static void put_back(const char *dir, struct image_v2 *im)
{
    ck_assert_int_eq(pulse_io_replace_file(pulse_io_posix(), dir, PULSE_SNAPSHOT_NAME, im->data, im->len), 0);
    pulse_free(im->data);
    im->data = NULL;
}

/* Sets path's modification time back to what st says (a change that leaves
 * no trace in the file's times, as bit rot does). */
static void restore_mtime(const char *path, const struct stat *st)
{
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

START_TEST(test_a_clean_reopen_trusts_every_sealed_record)
{
    char *dir = pt_tmpdir();
    uint64_t n = build(dir, 256);
    int64_t bases[64];
    size_t nb = list_bases(dir, bases, 64);
    struct pulse_snapshot snap;
    struct pulse_snapshot_ext ext;
    struct pulse_plog_recovery rec;

    ck_assert_uint_ge(nb, 5);
    read_snapshot(dir, &snap, &ext);
    ck_assert_int_eq(ext.version, PULSE_SNAPSHOT_VERSION_2);
    ck_assert_uint_eq(ext.nseals, nb - 1);
    ck_assert_uint_gt(ext.active_index_n, 1);
    for (size_t i = 0; i < ext.nseals; i++)
        ck_assert_int_eq(ext.seals[i].base, bases[i]);
    pulse_free(ext.seals);
    struct pulse_plog *plog = open_log(dir, 256, &rec);
    ck_assert(rec.used_snapshot);
    ck_assert_uint_eq(rec.seals_trusted, nb - 1);
    ck_assert(rec.active_index_trusted);
    ck_assert_uint_eq(rec.indexes_rebuilt, 0);
    expect_all(plog, n);
    /* Newest timestamps and time lookups as after the full scan. */
    struct pulse_segment_info *segs = NULL;
    size_t ns = 0;
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &ns), PULSE_OK);
    ck_assert_uint_eq(ns, nb);
    for (size_t i = 0; i + 1 < ns; i++) {
        /* The last batch before the next base: its last record's time. */
        int64_t last_batch = (segs[i + 1].base_offset - 1) / PER;
        ck_assert_int_eq(segs[i].max_timestamp, 1000 + last_batch + PER - 1);
    }
    pulse_free(segs);
    int64_t off = -1;
    /* Batch i's records carry 1000 + i .. 1000 + i + 3: the first record
     * at 1020 is the last of batch 17. */
    ck_assert_int_eq(pulse_plog_offset_for_time(plog, 1000 + 20, &off), PULSE_OK);
    ck_assert_int_eq(off, 17 * PER + 3);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* Entry 2 of the first sealed index moved one byte into its batch: still
 * sorted and decodable, only the index CRC tells. */
START_TEST(test_a_damaged_sealed_index_entry_is_not_trusted)
{
    char *dir = pt_tmpdir();
    char p[600];
    uint64_t n = build(dir, 256);
    uint8_t e[8];
    struct pulse_plog_recovery rec;

    pt_path(p, sizeof p, dir, 0, "index");
    ck_assert_int_ge(pt_file_size(p), 4 * 8);
    pt_read_file(p, 2 * 8, e, sizeof e);
    e[7] ^= 0x01; /* relativePosition + or - 1 */
    pt_patch(p, 2 * 8, e, sizeof e);
    struct pulse_plog *plog = open_log(dir, 256, &rec);
    expect_all(plog, n);
    ck_assert(rec.used_snapshot);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 2);
    ck_assert_uint_eq(rec.indexes_rebuilt, 1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* The close wrote the rebuilt index's record: all trusted again. */
    plog = open_log(dir, 256, &rec);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 1);
    expect_all(plog, n);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* The same entry damaged in the active segment's index, inside the prefix
 * the snapshot vouches for. */
START_TEST(test_a_damaged_active_index_entry_is_not_trusted)
{
    char *dir = pt_tmpdir();
    char p[600];
    uint64_t n = build(dir, 256);
    int64_t bases[64];
    size_t nb = list_bases(dir, bases, 64);
    uint8_t e[8];
    struct pulse_plog_recovery rec;

    pt_path(p, sizeof p, dir, bases[nb - 1], "index");
    ck_assert_int_ge(pt_file_size(p), 4 * 8);
    pt_read_file(p, 2 * 8, e, sizeof e);
    e[7] ^= 0x01;
    pt_patch(p, 2 * 8, e, sizeof e);
    struct pulse_plog *plog = open_log(dir, 256, &rec);
    expect_all(plog, n);
    ck_assert(rec.used_snapshot);
    ck_assert(!rec.active_index_trusted);
    ck_assert_uint_eq(rec.indexes_rebuilt, 1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_a_cut_or_extended_sealed_index_is_not_trusted)
{
    for (int variant = 0; variant < 2; variant++) {
        char *dir = pt_tmpdir();
        char p[600];
        uint64_t n = build(dir, 256);
        struct pulse_plog_recovery rec;

        pt_path(p, sizeof p, dir, 0, "index");
        long long isize = pt_file_size(p);
        if (variant == 0) {
            pt_truncate(p, isize - 8); /* the last entry gone */
        } else {
            /* One more entry, in order, naming a batch that is not there. */
            uint8_t e[8];
            pt_read_file(p, isize - 8, e, sizeof e);
            e[3] += 1;
            e[7] += 1;
            pt_patch(p, isize, e, sizeof e);
        }
        struct pulse_plog *plog = open_log(dir, 256, &rec);
        expect_all(plog, n);
        ck_assert_msg(rec.used_snapshot, "variant %d", variant);
        ck_assert_uint_eq(rec.seals_trusted, rec.segments - 2);
        ck_assert_uint_eq(rec.indexes_rebuilt, 1);
        ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
        pt_cleanup(dir);
    }
}
END_TEST

/* Garbage appended to a sealed data file: its last index entry still
 * checks out, only the file's size (and times) tell. The full check of that
 * segment finds the garbage at startup and keeps it as damage. */
START_TEST(test_an_extended_sealed_log_is_not_trusted)
{
    char *dir = pt_tmpdir();
    char p[600];
    uint64_t n = build(dir, 256);
    uint8_t junk[100];
    struct pulse_plog_recovery rec;

    memset(junk, 0xA5, sizeof junk);
    pt_path(p, sizeof p, dir, 0, "log");
    pt_patch(p, pt_file_size(p), junk, sizeof junk);
    struct pulse_plog *plog = open_log(dir, 256, &rec);
    ck_assert_uint_eq(rec.new_damaged_ranges, 1); /* found at the open, not by a read */
    expect_records(plog, n, 0, 0);
    ck_assert(rec.used_snapshot);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 2);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* The last batch of a sealed data file cut off. With one index entry per
 * 2 KiB the last batches have none, so the index still checks out: only
 * the file's size (and times) tell. Its offsets become a missing range,
 * reported, never served. */
START_TEST(test_a_cut_sealed_log_is_not_trusted)
{
    char *dir = pt_tmpdir();
    char p[600];
    uint64_t n = build(dir, 2048);
    int64_t bases[64];
    size_t nb = list_bases(dir, bases, 64);
    struct pulse_plog_recovery rec;
    struct pulse_buf b;

    ck_assert_uint_ge(nb, 3);
    /* Every batch has the same size: the first segment holds
     * bases[1] / PER of them. */
    pulse_buf_init(&b, 1 << 20);
    size_t one = pt_batch(&b, 0, PER, VLEN, 0);
    pulse_buf_fini(&b);
    pt_path(p, sizeof p, dir, 0, "log");
    ck_assert_int_eq(pt_file_size(p), (long long)(one * (size_t)(bases[1] / PER)));
    pt_truncate(p, pt_file_size(p) - (long long)one);
    struct pulse_plog *plog = open_log(dir, 2048, &rec);
    /* Found at the open and recorded as missing, so reads report them. */
    ck_assert_uint_eq(rec.new_damaged_ranges, 1);
    expect_records(plog, n, (uint64_t)bases[1] - PER, (uint64_t)bases[1]);
    ck_assert(rec.used_snapshot);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 2);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* A whole sealed segment lost (both files) after the snapshot: the one
 * before it still matches its record, but its offsets no longer end where
 * the next segment begins, so it is scanned and the lost offsets are a
 * recorded missing range. */
START_TEST(test_a_segment_lost_after_a_trusted_one_is_found)
{
    char *dir = pt_tmpdir();
    char p[600];
    uint64_t n = build(dir, 256);
    int64_t bases[64];
    size_t nb = list_bases(dir, bases, 64);
    struct pulse_plog_recovery rec;

    ck_assert_uint_ge(nb, 4);
    pt_path(p, sizeof p, dir, bases[2], "index");
    ck_assert_int_eq(unlink(p), 0);
    pt_path(p, sizeof p, dir, bases[2], "log");
    ck_assert_int_eq(unlink(p), 0);
    struct pulse_plog *plog = open_log(dir, 256, &rec);
    ck_assert_uint_eq(rec.new_damaged_ranges, 1);
    expect_records(plog, n, (uint64_t)bases[2], (uint64_t)bases[3]);
    ck_assert(rec.used_snapshot);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 2);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* The restart after it says the same, from the damage record. */
    plog = open_log(dir, 256, &rec);
    ck_assert_uint_eq(rec.damaged_ranges, 1);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 1);
    expect_records(plog, n, (uint64_t)bases[2], (uint64_t)bases[3]);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* A batch header rotted under the last index entry of a sealed segment,
 * the file's times put back: size, inode, times and index all match the
 * record; the header check at the last entry does not. */
START_TEST(test_a_rotten_header_at_the_last_entry_is_found_at_the_open)
{
    char *dir = pt_tmpdir();
    char p[600], ip[600];
    uint64_t n = build(dir, 256);
    struct stat st;
    uint8_t e[8], hb;
    struct pulse_index_entry ent;
    struct pulse_plog_recovery rec;

    pt_path(p, sizeof p, dir, 0, "log");
    pt_path(ip, sizeof ip, dir, 0, "index");
    ck_assert_int_eq(stat(p, &st), 0);
    pt_read_file(ip, pt_file_size(ip) - 8, e, sizeof e);
    pulse_index_decode_entry(e, &ent);
    pt_read_file(p, ent.rel_pos + 9, &hb, 1); /* inside baseOffset */
    hb ^= 0x40;
    pt_patch(p, ent.rel_pos + 9, &hb, 1);
    restore_mtime(p, &st);
    struct pulse_plog *plog = open_log(dir, 256, &rec);
    ck_assert_uint_eq(rec.new_damaged_ranges, 1); /* found at the open, not by a read */
    expect_records(plog, n, ent.rel_offset, ent.rel_offset + PER);
    ck_assert(rec.used_snapshot);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 2);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* Rot inside a record of a trusted sealed segment (times put back): the
 * open cannot see it, the read does, and never serves those bytes. */
START_TEST(test_rot_in_a_trusted_segment_is_never_served)
{
    char *dir = pt_tmpdir();
    char p[600];
    uint64_t n = build(dir, 256);
    struct stat st;
    uint8_t v;
    struct pulse_plog_recovery rec;
    struct pulse_buf b;

    pt_path(p, sizeof p, dir, 0, "log");
    ck_assert_int_eq(stat(p, &st), 0);
    pulse_buf_init(&b, 1 << 20);
    size_t one = pt_batch(&b, 0, PER, VLEN, 0);
    pulse_buf_fini(&b);
    /* The last value byte of the second batch (offsets 4..7). */
    pt_read_file(p, (long long)(2 * one - 1), &v, 1);
    v ^= 0x01;
    pt_patch(p, (long long)(2 * one - 1), &v, 1);
    restore_mtime(p, &st);
    struct pulse_plog *plog = open_log(dir, 256, &rec);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 1);
    expect_records(plog, n, PER, 2 * PER);
    struct pulse_plog_stats stats;
    pulse_plog_get_stats(plog, &stats);
    ck_assert_uint_eq(stats.damaged_ranges, 1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* The size of every batch build() writes (they are all alike). */
static size_t batch_size(void)
{
    struct pulse_buf b;

    pulse_buf_init(&b, 1 << 20);
    size_t one = pt_batch(&b, 0, PER, VLEN, 0);
    pulse_buf_fini(&b);
    return one;
}

/* Batch k of the first sealed segment (offsets k*PER..) rewritten in place
 * by edit, its file's times put back: size, inode, times and index all
 * match the record, so the open trusts the segment without reading that
 * header. Returns the batch's position. */
static long long edit_sealed_batch(const char *dir, unsigned k, void (*edit)(uint8_t *b, size_t len))
{
    char p[600];
    struct stat st;
    size_t one = batch_size();
    uint8_t *b = pulse_malloc(one);

    ck_assert_ptr_nonnull(b);
    pt_path(p, sizeof p, dir, 0, "log");
    ck_assert_int_eq(stat(p, &st), 0);
    /* With an index interval of 1 every batch has its own entry, and the
     * batch after k is in the same segment, so k's entry is an inner one
     * (the open reads only the headers at the first and last entry of a
     * trusted segment). */
    ck_assert_int_ge(pt_file_size(p), (long long)((k + 2) * one));
    pt_read_file(p, (long long)(k * one), b, one);
    edit(b, one);
    pt_patch(p, (long long)(k * one), b, PULSE_BATCH_HEADER_SIZE); /* the header only */
    restore_mtime(p, &st);
    pulse_free(b);
    return (long long)(k * one);
}

/* A header that names the next batch's offsets, with a CRC to match: a
 * batch other than the one its index entry names, valid on its own (as
 * after two batches of equal size were swapped). */
static void name_next_offsets(uint8_t *b, size_t len)
{
    pulse_batch_set_base_offset(b, len, (int64_t)pulse_get_be64(b + 8) + PER);
    ck_assert_int_eq(pulse_batch_verify(b, len, NULL, NULL), PULSE_OK);
}

/* A reader must not take the edited batch for the one the index names:
 * the read skips exactly its offsets as damaged and records them, and
 * every other record comes back at its offset, once. */
START_TEST(test_a_batch_edited_in_place_in_a_trusted_segment_is_never_served)
{
    char *dir = pt_tmpdir();
    uint64_t n = build(dir, 1);
    struct pulse_plog_recovery rec;
    struct pulse_plog_stats stats;

    edit_sealed_batch(dir, 2, name_next_offsets);
    struct pulse_plog *plog = open_log(dir, 1, &rec);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 1);
    ck_assert_uint_eq(rec.damaged_ranges, 0);
    expect_records(plog, n, 2 * PER, 3 * PER);
    pulse_plog_get_stats(plog, &stats);
    ck_assert_uint_eq(stats.damaged_ranges, 1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* Recorded: the next open knows the segment is damaged. */
    plog = open_log(dir, 1, &rec);
    ck_assert_uint_ge(rec.corrupt_segments, 1);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 2);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* A length field that runs over the next index entry (the CRC no longer
 * matches, but a raw slice does not read bodies). */
static void swallow_next_batch(uint8_t *b, size_t len)
{
    pulse_put_be32(b + 16, (uint32_t)(2 * len - PULSE_BATCH_HEADER_SIZE));
}

START_TEST(test_a_raw_slice_never_serves_a_batch_longer_than_its_index_entry_allows)
{
    char *dir = pt_tmpdir();
    uint64_t n = build(dir, 1);
    struct pulse_plog_recovery rec;
    struct pulse_slice sl;

    long long pos = edit_sealed_batch(dir, 2, swallow_next_batch);
    struct pulse_plog *plog = open_log(dir, 1, &rec);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 1);
    ck_assert_int_eq(pulse_plog_slice(plog, 2 * PER, 1 << 20, false, &sl), PULSE_OK);
    ck_assert_uint_eq(sl.pos, (uint64_t)pos + batch_size());
    ck_assert_int_eq(sl.skip_from, 2 * PER);
    ck_assert_int_eq(sl.skip_to, 3 * PER);
    ck_assert(sl.skip_damaged);
    expect_records(plog, n, 2 * PER, 3 * PER);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* A snapshot from before more appends (same active segment, then after
 * rotations) put back: what it vouches for still holds or is not used. */
START_TEST(test_a_stale_snapshot_put_back_is_safe)
{
    char *dir = pt_tmpdir();
    uint64_t n = build(dir, 256);
    struct image_v2 old = save_snapshot(dir);
    struct pulse_plog_recovery rec;
    struct pulse_buf b;
    struct pulse_plog *plog = open_log(dir, 256, &rec);

    /* One more batch: still the same active segment. */
    pulse_buf_init(&b, 1 << 20);
    int64_t base = -1;
    pt_batch(&b, n, PER, VLEN, 5000);
    ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
    n += PER;
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    put_back(dir, &old);
    plog = open_log(dir, 256, &rec);
    ck_assert(rec.used_snapshot);
    ck_assert(rec.active_index_trusted); /* the old prefix is still the file's */
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 1);
    expect_all(plog, n);
    old = save_snapshot(dir);
    /* Enough batches to rotate: the stale one names a sealed segment as
     * active, and the full scan runs. */
    for (int i = 0; i < 20; i++) {
        pt_batch(&b, n, PER, VLEN, 6000 + i);
        ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
        n += PER;
    }
    pulse_buf_fini(&b);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    put_back(dir, &old);
    plog = open_log(dir, 256, &rec);
    ck_assert(!rec.used_snapshot);
    expect_all(plog, n);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* A trim removes sealed segments and rewrites the snapshot without their
 * records; the snapshot from before the trim put back names segments that
 * are gone, which are simply not looked up. */
START_TEST(test_segments_removed_by_retention_leave_no_trusted_record)
{
    char *dir = pt_tmpdir();
    uint64_t n = build(dir, 256);
    struct image_v2 old = save_snapshot(dir);
    struct pulse_plog_recovery rec;
    struct pulse_snapshot snap;
    struct pulse_snapshot_ext ext;
    size_t removed = 0;
    struct pulse_plog *plog = open_log(dir, 256, &rec);

    ck_assert_int_eq(pt_trim_oldest(plog, 2, &removed), PULSE_OK);
    ck_assert_uint_eq(removed, 2);
    int64_t start = pulse_plog_log_start(plog);
    read_snapshot(dir, &snap, &ext);
    ck_assert_uint_eq(ext.nseals, rec.segments - 3);
    ck_assert_int_eq(ext.seals[0].base, start);
    pulse_free(ext.seals);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    put_back(dir, &old);
    plog = open_log(dir, 256, &rec);
    ck_assert(rec.used_snapshot);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 1);
    ck_assert_int_eq(pulse_plog_log_start(plog), start);
    expect_records(plog, n, 0, (uint64_t)start);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* Compaction rewrites sealed segments (new files under the old names) and
 * now rewrites the snapshot: the next open trusts the new files. The
 * snapshot from before the compaction put back describes the old files:
 * not trusted, and the records read are the compacted ones. */
START_TEST(test_a_compacted_segment_is_recorded_and_a_stale_record_is_not_trusted)
{
    char *dir = pt_tmpdir();
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_compact_result cres;
    struct pulse_plog_recovery rec;
    struct pulse_plog *plog = ct_open(dir, 2048);

    /* Keyless records survive compaction, so rewritten segments remain. */
    for (int i = 0; i < 120; i++)
        ct_append(plog, &m, i % 3 == 0 ? -1 : i % 6, false, CT_T0 + i, 40);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    struct image_v2 old = save_snapshot(dir);
    plog = ct_open(dir, 2048);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0 + 10 * CT_DAY_MS, &cres), PULSE_OK);
    ck_assert_uint_gt(cres.segments_rewritten + cres.segments_deleted, 0);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    struct pulse_plog_config pcfg;
    pulse_plog_config_init(&pcfg);
    pcfg.segment_max_bytes = 2048;
    pcfg.index_interval_bytes = 256;
    plog = NULL;
    ck_assert_int_eq(pulse_plog_open(dir, &pcfg, &plog, &rec), PULSE_OK);
    ck_assert(rec.used_snapshot);
    ck_assert_uint_ge(rec.segments, 3);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 1);
    ct_check_model(plog, &m, 6);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    put_back(dir, &old);
    plog = NULL;
    ck_assert_int_eq(pulse_plog_open(dir, &pcfg, &plog, &rec), PULSE_OK);
    ck_assert(rec.used_snapshot);
    ck_assert_uint_lt(rec.seals_trusted, rec.segments - 1);
    ck_assert_uint_eq(rec.indexes_rebuilt, 0); /* the new index matches the new data */
    ct_check_model(plog, &m, 6);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

/* A version 1 snapshot (what an older Pulse wrote) is still the fast
 * path, with every entry checked; the next clean close writes version 2
 * even though nothing moved, and the open after it trusts the records. */
START_TEST(test_a_version_1_snapshot_is_read_and_replaced)
{
    char *dir = pt_tmpdir();
    uint64_t n = build(dir, 256);
    struct pulse_snapshot snap;
    struct pulse_snapshot_ext ext;
    struct pulse_plog_recovery rec;

    read_snapshot(dir, &snap, &ext);
    pulse_free(ext.seals);
    ck_assert_int_eq(pulse_snapshot_write(pulse_io_posix(), dir, &snap), PULSE_OK);
    read_snapshot(dir, &snap, &ext);
    ck_assert_int_eq(ext.version, PULSE_SNAPSHOT_VERSION);
    struct pulse_plog *plog = open_log(dir, 256, &rec);
    ck_assert(rec.used_snapshot);
    ck_assert_uint_eq(rec.seals_trusted, 0);
    ck_assert(!rec.active_index_trusted);
    ck_assert(rec.sync_skipped);
    expect_all(plog, n);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    read_snapshot(dir, &snap, &ext);
    ck_assert_int_eq(ext.version, PULSE_SNAPSHOT_VERSION_2);
    pulse_free(ext.seals);
    plog = open_log(dir, 256, &rec);
    ck_assert_uint_eq(rec.seals_trusted, rec.segments - 1);
    ck_assert(rec.active_index_trusted);
    expect_all(plog, n);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* Timestamps out of order inside the active segment's vouched prefix
 * (records published with their own timestamp): recovery reads only the
 * prefix's first and last batches, so the newest timestamp must come from
 * the snapshot, or the segment would later be sealed with too old a one
 * and time retention would delete records younger than its limit. */
START_TEST(test_the_newest_timestamp_of_a_vouched_prefix_survives_a_reopen)
{
    char *dir = pt_tmpdir();
    struct pulse_buf b;
    struct pulse_plog_recovery rec;
    struct pulse_plog *plog = open_log(dir, 256, NULL);
    struct pulse_segment_info *segs = NULL;
    size_t n = 0;
    uint64_t id = 0;
    int64_t base = -1;
    const int64_t ts[6] = {2000, 9000, 2001, 2002, 2003, 2004};

    pulse_buf_init(&b, 1 << 20);
    for (int i = 0; i < 6; i++) {
        pt_batch(&b, id, PER, VLEN, ts[i]);
        ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
        id += PER;
    }
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = open_log(dir, 256, &rec);
    ck_assert(rec.used_snapshot);
    ck_assert(rec.active_index_trusted); /* the batch stamped 9000 was not read */
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_ge(segs[0].max_timestamp, 9000 + (int64_t)PER - 1);
    pulse_free(segs);
    pulse_buf_fini(&b);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* The codec: a round trip, and every way a version 2 file can be wrong. */
START_TEST(test_version_2_round_trips_and_rejects_bad_bytes)
{
    struct pulse_snapshot_seal seals[2] = {{0, 100, 4096, 77, 123456789, 1000, 48, 0xdeadbeef},
                                           {100, 200, 2048, 78, 123456790, 2000, 16, 0x01020304}};
    struct pulse_snapshot s = {300, 200, 512, 300}, back;
    struct pulse_snapshot_ext x = {2, 79, 3, 0xcafe, 4242, seals, 2}, bx;
    size_t len = 0;
    uint8_t *raw = pulse_snapshot_encode_v2(&s, &x, &len);

    ck_assert_ptr_nonnull(raw);
    ck_assert_uint_eq(len, PULSE_SNAPSHOT_V2_HEAD + 2 * PULSE_SNAPSHOT_SEAL_SIZE);
    ck_assert_int_eq(pulse_snapshot_decode_ext(raw, len, &back, &bx), PULSE_OK);
    ck_assert_int_eq(back.leo, 300);
    ck_assert_int_eq(back.active_size, 512);
    ck_assert_int_eq(bx.version, 2);
    ck_assert_uint_eq(bx.active_ino, 79);
    ck_assert_uint_eq(bx.active_index_n, 3);
    ck_assert_uint_eq(bx.active_index_crc, 0xcafe);
    ck_assert_int_eq(bx.active_max_ts, 4242);
    ck_assert_uint_eq(bx.nseals, 2);
    ck_assert_mem_eq(&bx.seals[1], &seals[1], sizeof seals[1]);
    pulse_free(bx.seals);
    /* Any flipped byte fails the CRC (or the magic, version, reserved). */
    for (size_t i = 0; i < len; i++) {
        raw[i] ^= 0x10;
        ck_assert_int_eq(pulse_snapshot_decode(raw, len, &back), PULSE_CORRUPT);
        raw[i] ^= 0x10;
    }
    ck_assert_int_eq(pulse_snapshot_decode(raw, len - 1, &back), PULSE_CORRUPT);
    ck_assert_int_eq(pulse_snapshot_decode(raw, PULSE_SNAPSHOT_SIZE, &back), PULSE_CORRUPT);
    pulse_free(raw);
    /* Records out of order or overlapping, empty, or not below the active
     * segment. */
    seals[1].base = 50;
    raw = pulse_snapshot_encode_v2(&s, &x, &len);
    ck_assert_int_eq(pulse_snapshot_decode(raw, len, &back), PULSE_CORRUPT);
    pulse_free(raw);
    seals[1].base = 100;
    seals[1].next = 100;
    raw = pulse_snapshot_encode_v2(&s, &x, &len);
    ck_assert_int_eq(pulse_snapshot_decode(raw, len, &back), PULSE_CORRUPT);
    pulse_free(raw);
    seals[1].next = 201;
    raw = pulse_snapshot_encode_v2(&s, &x, &len);
    ck_assert_int_eq(pulse_snapshot_decode(raw, len, &back), PULSE_CORRUPT);
    pulse_free(raw);
    seals[1].next = 200;
    seals[1].index_size = 17;
    raw = pulse_snapshot_encode_v2(&s, &x, &len);
    ck_assert_int_eq(pulse_snapshot_decode(raw, len, &back), PULSE_CORRUPT);
    pulse_free(raw);
    /* A version this code does not know. */
    seals[1].index_size = 16;
    raw = pulse_snapshot_encode_v2(&s, &x, &len);
    raw[1] = 3;
    ck_assert_int_eq(pulse_snapshot_decode(raw, len, &back), PULSE_CORRUPT);
    pulse_free(raw);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("snapshot_v2");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_version_2_round_trips_and_rejects_bad_bytes);
    tcase_add_test(tc, test_a_clean_reopen_trusts_every_sealed_record);
    tcase_add_test(tc, test_a_damaged_sealed_index_entry_is_not_trusted);
    tcase_add_test(tc, test_a_damaged_active_index_entry_is_not_trusted);
    tcase_add_test(tc, test_a_cut_or_extended_sealed_index_is_not_trusted);
    tcase_add_test(tc, test_an_extended_sealed_log_is_not_trusted);
    tcase_add_test(tc, test_a_cut_sealed_log_is_not_trusted);
    tcase_add_test(tc, test_a_segment_lost_after_a_trusted_one_is_found);
    tcase_add_test(tc, test_a_rotten_header_at_the_last_entry_is_found_at_the_open);
    tcase_add_test(tc, test_rot_in_a_trusted_segment_is_never_served);
    tcase_add_test(tc, test_a_batch_edited_in_place_in_a_trusted_segment_is_never_served);
    tcase_add_test(tc, test_a_raw_slice_never_serves_a_batch_longer_than_its_index_entry_allows);
    tcase_add_test(tc, test_a_stale_snapshot_put_back_is_safe);
    tcase_add_test(tc, test_segments_removed_by_retention_leave_no_trusted_record);
    tcase_add_test(tc, test_a_compacted_segment_is_recorded_and_a_stale_record_is_not_trusted);
    tcase_add_test(tc, test_a_version_1_snapshot_is_read_and_replaced);
    tcase_add_test(tc, test_the_newest_timestamp_of_a_vouched_prefix_survives_a_reopen);
    suite_add_tcase(s, tc);
    return pt_run(s);
}
