/* SPDX-License-Identifier: MIT */
/*
 * check_plog.c - the partition log's append/read/rotation/trim rules on the
 * real file system: offsets, layout, sparse index, rotation boundaries,
 * slice bounds, CRC-checked reads, trim under readers, interval mode.
 */
#include "plogtest.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>

#include "storage/fdcache.h"
#include "storage/plog_int.h"
#include "storage/segment.h"
#include "storage/snapshot.h"

static struct pulse_plog *open_log(const char *dir, uint64_t seg, uint32_t interval)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pt_cfg(&cfg, seg, interval, NULL);
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    return plog;
}

/* Appends n batches of recs records each; ids continue from *next_id. */
static void append_n(struct pulse_plog *plog, int batches, uint32_t recs, size_t vlen, uint64_t *next_id)
{
    struct pulse_buf b;
    pulse_buf_init(&b, 1 << 24);
    for (int i = 0; i < batches; i++) {
        int64_t base = -1;
        size_t len = pt_batch(&b, *next_id, recs, vlen, 1000 + (int64_t)*next_id);
        int64_t leo = pulse_plog_log_end(plog);
        ck_assert_int_eq(pulse_plog_append(plog, b.data, len, &base), PULSE_OK);
        ck_assert_int_eq(base, leo);
        *next_id += recs;
    }
    pulse_buf_fini(&b);
}

static void check_all(struct pulse_plog *plog, uint64_t first_id, uint64_t n, uint64_t max_bytes)
{
    struct pt_log l = {0};
    pt_read_all(plog, pulse_plog_log_start(plog), max_bytes, &l);
    ck_assert_uint_eq(l.n, n);
    for (size_t i = 0; i < l.n; i++) {
        ck_assert_int_eq(l.offs[i], pulse_plog_log_start(plog) + (int64_t)i);
        ck_assert_uint_eq(l.ids[i], first_id + i);
    }
    pt_log_free(&l);
}

START_TEST(test_appends_get_contiguous_offsets_and_read_back_byte_identical)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = open_log(dir, 1 << 20, 4096);
    uint64_t id = 0;
    ck_assert_int_eq(pulse_plog_log_end(plog), 0);
    append_n(plog, 20, 5, 100, &id);
    ck_assert_int_eq(pulse_plog_log_end(plog), 100);
    ck_assert_int_eq(pulse_plog_high_watermark(plog), 100);
    ck_assert(!pulse_plog_needs_sync(plog));
    check_all(plog, 0, 100, 1);
    check_all(plog, 0, 100, 1 << 20);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_append_unit_of_several_batches_gets_consecutive_offsets_in_one_write)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = open_log(dir, 1 << 20, 4096);
    uint64_t id = 0;
    append_n(plog, 1, 3, 50, &id); /* offsets 0..2 */

    /* Three batches back to back: 4 + 2 + 5 records, ids 3..13. */
    struct pulse_buf one, unit;
    pulse_buf_init(&one, 1 << 20);
    pulse_buf_init(&unit, 1 << 20);
    const uint32_t counts[3] = {4, 2, 5};
    for (int i = 0; i < 3; i++) {
        size_t len = pt_batch(&one, id, counts[i], 60, 5000 + (int64_t)id);
        ck_assert_int_eq(pulse_buf_append(&unit, one.data, len), PULSE_OK);
        id += counts[i];
    }
    int64_t base = -1, end = -1;
    ck_assert_int_eq(pulse_plog_append_async(plog, unit.data, unit.len, &base, &end, NULL), PULSE_OK);
    ck_assert_int_eq(base, 3);
    ck_assert_int_eq(end, 14);
    ck_assert_int_eq(pulse_plog_wait_durable(plog, end), PULSE_OK);
    check_all(plog, 0, 14, 1 << 20);
    check_all(plog, 0, 14, 1);

    /* A unit whose second batch is damaged is refused whole. */
    unit.data[unit.len - 1] ^= 0x40;
    ck_assert_int_eq(pulse_plog_append_async(plog, unit.data, unit.len, &base, &end, NULL), PULSE_INVALID);
    ck_assert_int_eq(pulse_plog_log_end(plog), 14);

    /* Recovery sees the unit as ordinary batches. */
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = open_log(dir, 1 << 20, 4096);
    ck_assert_int_eq(pulse_plog_log_end(plog), 14);
    check_all(plog, 0, 14, 1);
    append_n(plog, 1, 1, 50, &id);
    check_all(plog, 0, 15, 1 << 20);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pulse_buf_fini(&one);
    pulse_buf_fini(&unit);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_files_are_named_by_20_digit_base_with_index_and_snapshot)
{
    char *dir = pt_tmpdir();
    char p[512];
    struct pulse_plog *plog = open_log(dir, 2048, 4096);
    uint64_t id = 0;
    append_n(plog, 10, 2, 300, &id); /* ~700-byte batches: rolls every 2 */
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_path(p, sizeof p, dir, 0, "log");
    ck_assert_int_gt(pt_file_size(p), 0);
    pt_path(p, sizeof p, dir, 0, "index");
    ck_assert_int_eq(pt_file_size(p), 8);
    pt_path(p, sizeof p, dir, 4, "log");
    ck_assert_int_gt(pt_file_size(p), 0);
    snprintf(p, sizeof p, "%s/00000000000000000004.log", dir);
    ck_assert_int_gt(pt_file_size(p), 0);
    /* Version 2: the head and one record per sealed segment. */
    struct pulse_snapshot snap;
    struct pulse_snapshot_ext ext;
    ck_assert_int_eq(pulse_snapshot_read_ext(pulse_io_posix(), dir, &snap, &ext), PULSE_OK);
    ck_assert_int_eq(ext.version, PULSE_SNAPSHOT_VERSION_2);
    ck_assert_uint_ge(ext.nseals, 2);
    ck_assert_int_lt(ext.seals[ext.nseals - 1].base, snap.active_base);
    snprintf(p, sizeof p, "%s/snapshot", dir);
    ck_assert_int_eq(pt_file_size(p), PULSE_SNAPSHOT_V2_HEAD + ext.nseals * PULSE_SNAPSHOT_SEAL_SIZE);
    pulse_free(ext.seals);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_reopened_log_appends_at_recovered_end_not_at_file_start)
{
    char *dir = pt_tmpdir();
    uint64_t id = 0;
    struct pulse_plog *plog = open_log(dir, 1 << 20, 512);
    append_n(plog, 7, 3, 64, &id);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = open_log(dir, 1 << 20, 512);
    ck_assert_int_eq(pulse_plog_log_end(plog), 21);
    ck_assert_int_eq(pulse_plog_high_watermark(plog), 21);
    append_n(plog, 5, 3, 64, &id);
    check_all(plog, 0, 36, 300);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_index_gets_an_entry_once_interval_bytes_were_appended)
{
    char *dir = pt_tmpdir();
    uint64_t id = 0;
    struct pulse_buf b;
    size_t blen;
    char p[512];
    pulse_buf_init(&b, 1 << 20);
    blen = pt_batch(&b, 0, 1, 300, 0);
    pulse_buf_fini(&b);
    /* Exactly two batches per interval: "at least" means every second
     * batch gets an entry, not every third. */
    struct pulse_plog *plog = open_log(dir, 1 << 20, (uint32_t)(2 * blen));
    append_n(plog, 20, 1, 300, &id);
    struct pulse_segment *seg = plog->segs[0];
    ck_assert_uint_eq(seg->index.n, 10);
    for (size_t i = 0; i < seg->index.n; i++) {
        ck_assert_uint_eq(seg->index.entries[i].rel_offset, i * 2);
        ck_assert_uint_eq(seg->index.entries[i].rel_pos, i * 2 * blen);
    }
    size_t n = seg->index.n;
    uint8_t raw[8 * 64];
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* The file holds the same entries, big-endian. */
    pt_path(p, sizeof p, dir, 0, "index");
    ck_assert_int_eq(pt_file_size(p), (long long)(8 * n));
    pt_read_file(p, 0, raw, 8 * n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(pulse_get_be32(raw + 8 * i), i * 2);
        ck_assert_uint_eq(pulse_get_be32(raw + 8 * i + 4), i * 2 * blen);
    }
    /* A full scan rebuilds exactly the same table. */
    snprintf(p, sizeof p, "%s/snapshot", dir);
    ck_assert_int_eq(unlink(p), 0);
    pt_path(p, sizeof p, dir, 0, "index");
    ck_assert_int_eq(unlink(p), 0);
    plog = open_log(dir, 1 << 20, (uint32_t)(2 * blen));
    seg = plog->segs[0];
    ck_assert_uint_eq(seg->index.n, 10);
    for (size_t i = 0; i < seg->index.n; i++)
        ck_assert_uint_eq(seg->index.entries[i].rel_pos, i * 2 * blen);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_batch_exactly_filling_segment_stays_and_next_batch_rolls)
{
    char *dir = pt_tmpdir();
    struct pulse_buf b;
    int64_t base;
    pulse_buf_init(&b, 1 << 20);
    size_t blen = pt_batch(&b, 0, 1, 200, 0);
    struct pulse_plog *plog = open_log(dir, 4 * blen, 4096);
    for (uint64_t i = 0; i < 5; i++) {
        pt_batch(&b, i, 1, 200, 0);
        ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
        ck_assert_int_eq(base, (int64_t)i);
    }
    struct pulse_segment_info *segs = NULL;
    size_t n = 0;
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(segs[0].base_offset, 0);
    ck_assert_uint_eq(segs[0].size_bytes, 4 * blen);
    ck_assert_int_eq(segs[0].next_offset, 4);
    ck_assert(!segs[0].active);
    ck_assert_int_eq(segs[1].base_offset, 4);
    ck_assert_uint_eq(segs[1].size_bytes, blen);
    ck_assert(segs[1].active);
    ck_assert_int_eq(segs[1].next_offset, 5);
    pulse_free(segs);
    check_all(plog, 0, 5, 1 << 20);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pulse_buf_fini(&b);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_batch_larger_than_segment_gets_a_segment_of_its_own)
{
    char *dir = pt_tmpdir();
    struct pulse_buf b;
    int64_t base;
    struct pulse_plog *plog = open_log(dir, 1024, 4096);
    pulse_buf_init(&b, 1 << 20);
    pt_batch(&b, 0, 1, 100, 0);
    ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
    size_t big = pt_batch(&b, 1, 2, 1500, 0);
    ck_assert_uint_gt(big, 1024);
    ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
    ck_assert_int_eq(base, 1);
    pt_batch(&b, 3, 1, 100, 0);
    ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
    ck_assert_int_eq(base, 3);
    struct pulse_segment_info *segs = NULL;
    size_t n = 0;
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(segs[1].base_offset, 1);
    ck_assert_uint_eq(segs[1].size_bytes, big);
    ck_assert_int_eq(segs[2].base_offset, 3);
    pulse_free(segs);
    check_all(plog, 0, 4, 1);
    /* The same after recovery. */
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = open_log(dir, 1024, 4096);
    check_all(plog, 0, 4, 1 << 20);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pulse_buf_fini(&b);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_slice_never_crosses_a_segment_and_reads_continue_in_the_next)
{
    char *dir = pt_tmpdir();
    uint64_t id = 0;
    struct pulse_plog *plog = open_log(dir, 4096, 512);
    append_n(plog, 40, 4, 100, &id); /* ~ 580-byte batches */
    struct pulse_segment_info *segs = NULL;
    size_t n = 0;
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    ck_assert_uint_gt(n, 3);
    for (size_t i = 0; i + 1 < n; i++) {
        struct pulse_slice sl;
        ck_assert_int_eq(pulse_plog_slice(plog, segs[i].base_offset, 1 << 30, false, &sl), PULSE_OK);
        ck_assert_uint_eq(sl.pos, 0);
        ck_assert_uint_eq(sl.len, segs[i].size_bytes);
        ck_assert_int_eq(sl.next_offset, segs[i + 1].base_offset);
        ck_assert_int_eq(sl.fd, -1);
    }
    pulse_free(segs);
    check_all(plog, 0, 160, 1 << 30);
    /* Random offsets land in the right batch. */
    for (int64_t off = 0; off < 160; off += 7) {
        struct pt_log l = {0};
        struct pulse_buf buf;
        struct pulse_slice info;
        pulse_buf_init(&buf, 1 << 20);
        ck_assert_int_eq(pulse_plog_read(plog, off, 1, &buf, &info), PULSE_OK);
        pt_decode(buf.data, buf.len, off, &l);
        ck_assert_uint_ge(l.n, 1);
        ck_assert_int_eq(l.offs[0], off);
        ck_assert_uint_eq(l.ids[0], (uint64_t)off);
        ck_assert_int_eq(info.next_offset, (off / 4 + 1) * 4);
        pt_log_free(&l);
        pulse_buf_fini(&buf);
    }
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_slice_bounds_below_start_at_hw_and_past_hw)
{
    char *dir = pt_tmpdir();
    uint64_t id = 0;
    struct pulse_slice sl;
    struct pulse_plog *plog = open_log(dir, 2048, 4096);
    append_n(plog, 10, 2, 300, &id);
    size_t removed = 0;
    ck_assert_int_eq(pt_trim_oldest(plog, 1, &removed), PULSE_OK);
    ck_assert_uint_eq(removed, 1);
    int64_t start = pulse_plog_log_start(plog);
    ck_assert_int_eq(start, 4);
    /* Below the start: starts at the start. */
    ck_assert_int_eq(pulse_plog_slice(plog, 0, 1, false, &sl), PULSE_OK);
    ck_assert_int_eq(sl.start_offset, 4);
    ck_assert_int_eq(sl.log_start, 4);
    ck_assert_uint_gt(sl.len, 0);
    /* At HW: empty. */
    ck_assert_int_eq(pulse_plog_slice(plog, 20, 1, false, &sl), PULSE_OK);
    ck_assert_uint_eq(sl.len, 0);
    ck_assert_int_eq(sl.next_offset, 20);
    ck_assert_int_eq(sl.high_watermark, 20);
    /* Past HW: RANGE, bounds still reported. */
    ck_assert_int_eq(pulse_plog_slice(plog, 21, 1, false, &sl), PULSE_RANGE);
    ck_assert_int_eq(sl.high_watermark, 20);
    ck_assert_int_eq(sl.log_start, 4);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_slice_returns_one_whole_batch_even_when_larger_than_max_bytes)
{
    char *dir = pt_tmpdir();
    uint64_t id = 0;
    struct pulse_slice sl;
    struct pulse_plog *plog = open_log(dir, 1 << 20, 4096);
    append_n(plog, 3, 4, 500, &id);
    ck_assert_int_eq(pulse_plog_slice(plog, 5, 10, false, &sl), PULSE_OK);
    ck_assert_uint_gt(sl.len, 10);
    ck_assert_int_eq(sl.start_offset, 5);
    ck_assert_int_eq(sl.next_offset, 8);
    ck_assert_uint_eq(sl.pos, sl.len); /* the second batch */
    /* max_bytes of two batches gives exactly two. */
    ck_assert_int_eq(pulse_plog_slice(plog, 0, 2 * sl.len + 1, false, &sl), PULSE_OK);
    ck_assert_int_eq(sl.next_offset, 8);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_read_never_returns_a_rotted_batch_and_steps_past_it_saying_so)
{
    char *dir = pt_tmpdir();
    uint64_t id = 0;
    char p[512];
    struct pulse_buf buf;
    struct pulse_slice info, sl;
    struct pt_log l = {0};
    struct pulse_plog_recovery rec;
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = open_log(dir, 1 << 20, 4096);
    append_n(plog, 3, 2, 100, &id); /* offsets 0-1, 2-3, 4-5 */
    ck_assert_int_eq(pulse_plog_slice(plog, 2, 1, false, &info), PULSE_OK);
    uint64_t bad_pos = info.pos, bad_end = info.pos + info.len;
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = open_log(dir, 1 << 20, 4096); /* a clean snapshot: the fast path does not read it all */
    /* Rot one record byte of the second batch under the open log. */
    pt_path(p, sizeof p, dir, 0, "log");
    uint8_t x;
    pt_read_file(p, (long long)(bad_pos + 60), &x, 1);
    x ^= 0x40;
    pt_patch(p, (long long)(bad_pos + 60), &x, 1);
    pulse_buf_init(&buf, 1 << 20);
    ck_assert_int_eq(pulse_plog_read(plog, 0, 1 << 20, &buf, &info), PULSE_OK);
    ck_assert_uint_eq(buf.len, info.len);
    ck_assert_int_eq(info.next_offset, 2); /* stopped before the bad batch */
    ck_assert_int_eq(info.skip_to, info.skip_from);
    /* Reading at the bad batch steps past it and says which offsets. */
    pulse_buf_reset(&buf);
    ck_assert_int_eq(pulse_plog_read(plog, 2, 1 << 20, &buf, &info), PULSE_OK);
    pt_decode(buf.data, buf.len, 0, &l);
    ck_assert_uint_eq(l.n, 2);
    ck_assert_int_eq(l.offs[0], 4);
    pt_log_free(&l);
    ck_assert_int_eq(info.skip_from, 2);
    ck_assert_int_eq(info.skip_to, 4);
    ck_assert(info.skip_damaged);
    /* From now on raw slices never hold those bytes either. */
    ck_assert_int_eq(pulse_plog_slice(plog, 0, 1 << 20, false, &sl), PULSE_OK);
    ck_assert_uint_le(sl.pos + sl.len, bad_pos);
    ck_assert_int_eq(pulse_plog_slice(plog, 3, 1 << 20, false, &sl), PULSE_OK);
    ck_assert_uint_eq(sl.pos, bad_end);
    ck_assert_int_eq(sl.skip_from, 3);
    ck_assert_int_eq(sl.skip_to, 4);
    /* It is recorded at once, so the next open, even through the snapshot
     * fast path, scans that segment whole, knows the range and keeps the
     * forensic copy a reader's thread could not afford to make. */
    snprintf(p, sizeof p, "%s/damage", dir);
    ck_assert_int_gt(pt_file_size(p), 0);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cfg(&cfg, 1 << 20, 4096, NULL);
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, &rec), PULSE_OK);
    ck_assert(rec.used_snapshot);
    ck_assert_uint_eq(rec.new_damaged_ranges, 0);
    ck_assert_uint_eq(rec.damaged_ranges, 1);
    ck_assert_uint_eq(rec.forensic_copies, 1);
    ck_assert_int_eq(pulse_plog_log_end(plog), 6);
    pulse_buf_reset(&buf);
    ck_assert_int_eq(pulse_plog_read(plog, 2, 1 << 20, &buf, &info), PULSE_OK);
    ck_assert_int_eq(info.skip_from, 2);
    ck_assert_int_eq(info.skip_to, 4);
    pulse_buf_fini(&buf);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_invalid_or_sparse_batch_is_refused_and_nothing_is_written)
{
    char *dir = pt_tmpdir();
    struct pulse_buf b;
    int64_t base = -7, end = -7;
    struct pulse_plog *plog = open_log(dir, 1 << 20, 4096);
    pulse_buf_init(&b, 1 << 20);
    size_t len = pt_batch(&b, 0, 2, 50, 0);
    b.data[60] ^= 1; /* CRC mismatch */
    ck_assert_int_eq(pulse_plog_append(plog, b.data, len, &base), PULSE_INVALID);
    ck_assert_int_eq(pulse_plog_append(plog, b.data, 30, &base), PULSE_INVALID);
    b.data[60] ^= 1;
    ck_assert_int_eq(pulse_plog_append(plog, b.data, len - 1, &base), PULSE_INVALID);
    /* Trailing garbage after a whole batch is refused too. */
    ck_assert_int_eq(pulse_buf_append_u8(&b, 0), PULSE_OK);
    ck_assert_int_eq(pulse_plog_append(plog, b.data, len + 1, &base), PULSE_INVALID);
    /* A sparse (compacted) batch cannot be appended. */
    {
        struct pulse_record_in recs[2];
        uint8_t v[8] = {0};
        memset(recs, 0, sizeof recs);
        for (int i = 0; i < 2; i++) {
            recs[i].key_len = PULSE_BATCH_NULL;
            recs[i].value = v;
            recs[i].value_len = 8;
            recs[i].offset_delta = (uint32_t)(i * 5);
        }
        pulse_buf_reset(&b);
        ck_assert_int_eq(pulse_batch_encode(&b, 0, PULSE_BATCH_FLAG_SPARSE, recs, 2), PULSE_OK);
        ck_assert_int_eq(pulse_plog_append_async(plog, b.data, b.len, &base, &end, NULL), PULSE_INVALID);
    }
    ck_assert_int_eq(base, -7);
    ck_assert_int_eq(pulse_plog_log_end(plog), 0);
    struct pulse_plog_stats stats;
    pulse_plog_get_stats(plog, &stats);
    ck_assert_uint_eq(stats.size_bytes, 0);
    ck_assert(!stats.fenced);
    pulse_buf_fini(&b);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_config_outside_limits_is_invalid)
{
    char *dir = pt_tmpdir();
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pt_cfg(&cfg, PULSE_PLOG_MIN_SEGMENT_BYTES - 1, 4096, NULL);
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_INVALID);
    pt_cfg(&cfg, PULSE_PLOG_MAX_SEGMENT_BYTES + 1, 4096, NULL);
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_INVALID);
    pt_cfg(&cfg, 1 << 20, 4096, NULL);
    cfg.sync_mode = (enum pulse_sync_mode)7;
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_INVALID);
    ck_assert_ptr_null(plog);
    pt_cfg(&cfg, PULSE_PLOG_MAX_SEGMENT_BYTES, 4096, NULL);
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ck_assert_int_eq(pulse_plog_close(NULL), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_trim_keeps_in_flight_slice_readable_through_its_fd)
{
    char *dir = pt_tmpdir();
    uint64_t id = 0;
    char p[512];
    struct pulse_slice sl;
    struct pulse_plog *plog = open_log(dir, 2048, 4096);
    append_n(plog, 10, 2, 300, &id);
    ck_assert_int_eq(pulse_plog_slice(plog, 0, 1 << 20, true, &sl), PULSE_OK);
    ck_assert_int_ge(sl.fd, 0);
    ck_assert_uint_gt(sl.len, 0);
    uint8_t *before = pulse_malloc(sl.len);
    pt_path(p, sizeof p, dir, 0, "log");
    pt_read_file(p, (long long)sl.pos, before, sl.len);

    size_t removed = 0;
    ck_assert_int_eq(pt_trim_oldest(plog, 2, &removed), PULSE_OK);
    ck_assert_uint_eq(removed, 2);
    ck_assert_int_eq(pt_file_size(p), -1); /* unlinked at once */
    pt_path(p, sizeof p, dir, 0, "index");
    ck_assert_int_eq(pt_file_size(p), -1);
    ck_assert_int_eq(pulse_plog_log_start(plog), 8);

    uint8_t *after = pulse_malloc(sl.len);
    ck_assert_int_eq(pread(sl.fd, after, sl.len, (off_t)sl.pos), (ssize_t)sl.len);
    ck_assert_mem_eq(before, after, sl.len);
    struct pt_log l = {0};
    pt_decode(after, sl.len, 0, &l);
    ck_assert_uint_eq(l.n, 4);
    ck_assert_uint_eq(l.ids[3], 3);
    pt_log_free(&l);
    close(sl.fd);
    pulse_free(before);
    pulse_free(after);

    /* The snapshot was rewritten and a reopen agrees with the trim. */
    check_all(plog, 8, 12, 1 << 20);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    struct pulse_plog_recovery rec;
    struct pulse_plog_config cfg;
    pt_cfg(&cfg, 2048, 4096, NULL);
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, &rec), PULSE_OK);
    ck_assert(rec.used_snapshot);
    ck_assert_int_eq(pulse_plog_log_start(plog), 8);
    check_all(plog, 8, 12, 1 << 20);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* Descriptors this process has open now. */
static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    for (struct dirent *de = readdir(d); de != NULL; de = readdir(d))
        n += de->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory stream itself */
}

static struct pulse_plog *open_cached(const char *dir, struct pulse_fdcache *cache)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pt_cfg(&cfg, 1024, 4096, NULL);
    cfg.fdcache = cache;
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    return plog;
}

START_TEST(test_a_log_of_many_segments_holds_no_more_descriptors_than_its_cache)
{
    char *dir = pt_tmpdir();
    struct pulse_fdcache *cache = NULL;
    struct pulse_fdcache_stats st;
    uint64_t id = 0;
    int before = open_fds();
    ck_assert_int_eq(pulse_fdcache_create(16, &cache), PULSE_OK);
    struct pulse_plog *plog = open_cached(dir, cache);
    /* One 2-record batch of ~700 bytes per 1 KiB segment: 300 segments. */
    append_n(plog, 300, 2, 300, &id);
    struct pulse_plog_stats ps;
    pulse_plog_get_stats(plog, &ps);
    ck_assert_uint_eq(ps.segments, 300);
    ck_assert_int_le(open_fds() - before, 16);
    check_all(plog, 0, 600, 1 << 20);
    pulse_fdcache_get_stats(cache, &st);
    ck_assert_uint_le(st.open, 16);
    ck_assert_uint_gt(st.evictions, 0);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ck_assert_int_eq(open_fds(), before);
    /* Recovery opens, scans and closes each segment in turn. */
    plog = open_cached(dir, cache);
    ck_assert_int_le(open_fds() - before, 16);
    check_all(plog, 0, 600, 1 << 20);
    ck_assert_int_le(open_fds() - before, 16);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pulse_fdcache_destroy(cache);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_a_trimmed_segment_still_held_by_a_reader_reads_right_after_eviction)
{
    char *dir = pt_tmpdir();
    struct pulse_fdcache *cache = NULL;
    uint64_t id = 0;
    size_t removed = 0;
    int fd = -1;
    ck_assert_int_eq(pulse_fdcache_create(16, &cache), PULSE_OK);
    struct pulse_plog *plog = open_cached(dir, cache);
    append_n(plog, 40, 2, 300, &id);
    /* A reader holds segment 0 (as do_slice does between its steps). */
    pthread_mutex_lock(&plog->list_lock);
    struct pulse_segment *held = plog->segs[0];
    pulse_segment_acquire(held);
    pthread_mutex_unlock(&plog->list_lock);
    ck_assert_int_eq(pt_trim_oldest(plog, 1, &removed), PULSE_OK);
    ck_assert_uint_eq(removed, 1);
    char p[512];
    pt_path(p, sizeof p, dir, 0, "log");
    ck_assert_int_eq(pt_file_size(p), -1);
    /* Every other segment goes through the cache meanwhile. */
    check_all(plog, 2, 78, 1 << 20);
    ck_assert_int_eq(pulse_segment_pin(held, &fd), PULSE_OK);
    uint64_t len = atomic_load(&held->durable_size);
    uint8_t *raw = pulse_malloc(len);
    ck_assert_int_eq(pread(fd, raw, len, 0), (ssize_t)len);
    struct pt_log l = {0};
    pt_decode(raw, len, 0, &l);
    ck_assert_uint_eq(l.n, 2);
    ck_assert_uint_eq(l.ids[0], 0);
    ck_assert_uint_eq(l.ids[1], 1);
    pt_log_free(&l);
    pulse_free(raw);
    pulse_segment_unpin(held);
    pulse_segment_release(held);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pulse_fdcache_destroy(cache);
    pt_cleanup(dir);
}
END_TEST

/* The active segment's index file holds entries no fdatasync covered (the
 * commit path syncs only the data file): the cache must not close it, or
 * a write-back error could go with the descriptor and the sync at the
 * segment's sealing would go through a fresh one. The checkpoint syncs it,
 * and from then on it may be closed like any idle file. */
START_TEST(test_active_index_with_unsynced_entries_stays_open_until_a_checkpoint_syncs_it)
{
    char *dir = pt_tmpdir();
    char *other = pt_tmpdir();
    struct pulse_fdcache *cache = NULL;
    uint64_t id = 0, oid = 0;
    ck_assert_int_eq(pulse_fdcache_create(16, &cache), PULSE_OK);
    struct pulse_plog *plog = open_cached(dir, cache);
    struct pulse_plog *churn = open_cached(other, cache);
    append_n(plog, 1, 2, 100, &id); /* the first batch: an index entry */
    struct pulse_segment *seg = plog->segs[plog->nsegs - 1];
    ck_assert_uint_eq(seg->index_written, 1);
    ck_assert_uint_eq(atomic_load(&seg->index_synced), 0);
    /* 40 segments of another log go through the 16-file cache. */
    append_n(churn, 40, 2, 300, &oid);
    check_all(churn, 0, 80, 1 << 20);
    ck_assert_int_ge(seg->idx.fd, 0);
    ck_assert(seg->idx.dirty);
    ck_assert_int_eq(pulse_plog_checkpoint(plog, NULL), PULSE_OK);
    ck_assert_uint_eq(atomic_load(&seg->index_synced), 1);
    ck_assert(!seg->idx.dirty);
    check_all(churn, 0, 80, 1 << 20);
    ck_assert_int_eq(seg->idx.fd, -1);
    /* Appends go on through a reopened index file. */
    append_n(plog, 3, 2, 3000, &id);
    check_all(plog, 0, 8, 1 << 20);
    ck_assert_int_eq(pulse_plog_close(churn), PULSE_OK);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pulse_fdcache_destroy(cache);
    pt_cleanup(other);
    pt_cleanup(dir);
}
END_TEST

/* Trim takes the base offset of the first segment to keep and checks it
 * under the writer lock: a plan made on a list that has changed since is
 * refused rather than applied to other segments. */
START_TEST(test_trim_removes_the_segments_below_the_planned_base_or_nothing)
{
    char *dir = pt_tmpdir();
    uint64_t id = 0;
    size_t removed = 9;
    struct pulse_segment_info *segs = NULL;
    size_t n = 0;
    struct pulse_plog *plog = open_log(dir, 2048, 4096);
    append_n(plog, 8, 2, 300, &id);
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    ck_assert_uint_ge(n, 4);
    /* Not a segment's base (as after a merge swallowed it): refused. */
    ck_assert_int_eq(pulse_plog_trim(plog, segs[2].base_offset + 1, &removed), PULSE_BUSY);
    ck_assert_uint_eq(removed, 0);
    ck_assert_int_eq(pulse_plog_log_start(plog), 0);
    ck_assert_int_eq(pulse_plog_trim(plog, segs[2].base_offset, &removed), PULSE_OK);
    ck_assert_uint_eq(removed, 2);
    ck_assert_int_eq(pulse_plog_log_start(plog), segs[2].base_offset);
    /* The same plan again: already done, nothing more goes. */
    ck_assert_int_eq(pulse_plog_trim(plog, segs[1].base_offset, &removed), PULSE_OK);
    ck_assert_uint_eq(removed, 0);
    ck_assert_int_eq(pulse_plog_trim(plog, segs[2].base_offset, &removed), PULSE_OK);
    ck_assert_uint_eq(removed, 0);
    check_all(plog, (uint64_t)segs[2].base_offset, 16 - (uint64_t)segs[2].base_offset, 1 << 20);
    pulse_free(segs);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_trim_never_removes_the_active_segment)
{
    char *dir = pt_tmpdir();
    uint64_t id = 0;
    size_t removed = 9;
    struct pulse_plog *plog = open_log(dir, 2048, 4096);
    ck_assert_int_eq(pt_trim_oldest(plog, 5, &removed), PULSE_OK);
    ck_assert_uint_eq(removed, 0);
    append_n(plog, 6, 2, 300, &id);
    ck_assert_int_eq(pt_trim_oldest(plog, 100, &removed), PULSE_OK);
    ck_assert_uint_eq(removed, 2);
    struct pulse_plog_stats st;
    pulse_plog_get_stats(plog, &st);
    ck_assert_uint_eq(st.segments, 1);
    ck_assert_int_eq(st.log_start, 8);
    ck_assert_int_eq(st.log_end, 12);
    check_all(plog, 8, 4, 1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_interval_mode_publishes_records_only_at_the_next_sync)
{
    char *dir = pt_tmpdir();
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    struct pulse_buf b;
    int64_t base;
    struct pulse_slice sl;
    pt_cfg(&cfg, 1 << 20, 4096, NULL);
    cfg.sync_mode = PULSE_SYNC_INTERVAL;
    cfg.sync_interval_ms = 3600 * 1000; /* never elapses during the test */
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    pulse_buf_init(&b, 1 << 20);
    for (int i = 0; i < 3; i++) {
        pt_batch(&b, (uint64_t)i * 2, 2, 40, 0);
        ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
        ck_assert_int_eq(base, i * 2);
    }
    ck_assert_int_eq(pulse_plog_log_end(plog), 6);
    ck_assert_int_eq(pulse_plog_high_watermark(plog), 0);
    ck_assert(pulse_plog_needs_sync(plog));
    ck_assert_int_eq(pulse_plog_slice(plog, 0, 1 << 20, false, &sl), PULSE_OK);
    ck_assert_uint_eq(sl.len, 0);
    ck_assert_int_eq(pulse_plog_sync(plog), PULSE_OK);
    ck_assert_int_eq(pulse_plog_high_watermark(plog), 6);
    ck_assert(!pulse_plog_needs_sync(plog));
    check_all(plog, 0, 6, 1 << 20);
    ck_assert_int_eq(pulse_plog_wait_durable(plog, 7), PULSE_INVALID);
    /* Interval 0: every append syncs inline. */
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    cfg.sync_interval_ms = 0;
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    pt_batch(&b, 6, 2, 40, 0);
    ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
    ck_assert_int_eq(pulse_plog_high_watermark(plog), 8);
    pulse_buf_fini(&b);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_segments_track_newest_timestamp_for_retention)
{
    char *dir = pt_tmpdir();
    struct pulse_buf b;
    int64_t base;
    struct pulse_plog *plog = open_log(dir, 2048, 4096);
    pulse_buf_init(&b, 1 << 20);
    int64_t ts[] = {5000, 9000, 7000, 100, 200};
    for (int i = 0; i < 5; i++) {
        pt_batch(&b, (uint64_t)i, 1, 600, ts[i]);
        ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
    }
    struct pulse_segment_info *segs = NULL;
    size_t n = 0;
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(segs[0].max_timestamp, 9000);
    ck_assert_int_eq(segs[1].max_timestamp, 200);
    pulse_free(segs);
    /* Recovery by full scan finds the same. */
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    char p[512];
    snprintf(p, sizeof p, "%s/snapshot", dir);
    unlink(p);
    plog = open_log(dir, 2048, 4096);
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    ck_assert_int_eq(segs[0].max_timestamp, 9000);
    ck_assert_int_eq(segs[1].max_timestamp, 200);
    pulse_free(segs);
    pulse_buf_fini(&b);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plog");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_appends_get_contiguous_offsets_and_read_back_byte_identical);
    tcase_add_test(tc, test_files_are_named_by_20_digit_base_with_index_and_snapshot);
    tcase_add_test(tc, test_reopened_log_appends_at_recovered_end_not_at_file_start);
    tcase_add_test(tc, test_index_gets_an_entry_once_interval_bytes_were_appended);
    tcase_add_test(tc, test_batch_exactly_filling_segment_stays_and_next_batch_rolls);
    tcase_add_test(tc, test_batch_larger_than_segment_gets_a_segment_of_its_own);
    tcase_add_test(tc, test_slice_never_crosses_a_segment_and_reads_continue_in_the_next);
    tcase_add_test(tc, test_slice_bounds_below_start_at_hw_and_past_hw);
    tcase_add_test(tc, test_slice_returns_one_whole_batch_even_when_larger_than_max_bytes);
    tcase_add_test(tc, test_read_never_returns_a_rotted_batch_and_steps_past_it_saying_so);
    tcase_add_test(tc, test_invalid_or_sparse_batch_is_refused_and_nothing_is_written);
    tcase_add_test(tc, test_config_outside_limits_is_invalid);
    tcase_add_test(tc, test_trim_keeps_in_flight_slice_readable_through_its_fd);
    tcase_add_test(tc, test_trim_never_removes_the_active_segment);
    tcase_add_test(tc, test_interval_mode_publishes_records_only_at_the_next_sync);
    tcase_add_test(tc, test_segments_track_newest_timestamp_for_retention);
    tcase_add_test(tc, test_append_unit_of_several_batches_gets_consecutive_offsets_in_one_write);
    tcase_add_test(tc, test_a_log_of_many_segments_holds_no_more_descriptors_than_its_cache);
    tcase_add_test(tc, test_a_trimmed_segment_still_held_by_a_reader_reads_right_after_eviction);
    tcase_add_test(tc, test_active_index_with_unsynced_entries_stays_open_until_a_checkpoint_syncs_it);
    tcase_add_test(tc, test_trim_removes_the_segments_below_the_planned_base_or_nothing);
    suite_add_tcase(s, tc);
    return pt_run(s);
}
