/* SPDX-License-Identifier: MIT */
/*
 * check_plog_zlib.c - the partition log with compressed batches (codec 1,
 * docs/Format.md 1.8): they are appended, indexed, rolled over, read back
 * and recovered (snapshot fast path and full scan) like plain ones, mixed
 * with plain ones in one log; they take less room; and a compressed batch
 * whose CRC matches but whose stream does not inflate as declared is
 * damage, kept and reported by recovery and never served, not a torn tail
 * cut off with the valid batches after it.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/crc32c.h"
#include "common/endian.h"
#include "plogtest.h"
#include "storage/batch.h"
#include "storage/plog.h"

#define PER_BATCH 10

/* The value of record id: a JSON event whose text carries the id. */
static size_t value_of(uint64_t id, char *out, size_t cap)
{
    return (size_t)snprintf(out, cap,
                            "{\"event\":\"order_placed\",\"order_id\":%llu,\"customer\":\"c-%04llu\",\"currency\":"
                            "\"EUR\",\"items\":[{\"sku\":\"SKU-%llu\",\"qty\":1}],\"channel\":\"web\"}",
                            (unsigned long long)id, (unsigned long long)(id % 97), (unsigned long long)(id % 13));
}

/* Encodes PER_BATCH records with ids first.. into out (reset first). */
static void zbatch(struct pulse_buf *out, uint64_t first, uint16_t flags)
{
    char vals[PER_BATCH][256];
    struct pulse_record_in recs[PER_BATCH];
    memset(recs, 0, sizeof recs);
    for (int i = 0; i < PER_BATCH; i++) {
        recs[i].timestamp = 1000 + (int64_t)first + i;
        recs[i].key_len = PULSE_BATCH_NULL;
        recs[i].value = (const uint8_t *)vals[i];
        recs[i].value_len = (uint32_t)value_of(first + (uint64_t)i, vals[i], sizeof vals[i]);
    }
    pulse_buf_reset(out);
    ck_assert_int_eq(pulse_batch_encode(out, 0, flags, recs, PER_BATCH), PULSE_OK);
}

static struct pulse_plog *open_log(const char *dir)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pt_cfg(&cfg, 4096, 512, NULL);
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    return plog;
}

/* Appends batches [from, to) (batch b holds ids b*PER_BATCH..), the
 * compressed ones where zlib says so; returns the bytes appended. */
static size_t append_range(struct pulse_plog *plog, int from, int to, bool (*zlib_for)(int))
{
    struct pulse_buf b;
    size_t bytes = 0;
    pulse_buf_init(&b, 1 << 20);
    for (int i = from; i < to; i++) {
        int64_t base = -1;
        zbatch(&b, (uint64_t)i * PER_BATCH, zlib_for(i) ? PULSE_BATCH_CODEC_ZLIB : 0);
        ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
        ck_assert_int_eq(base, (int64_t)i * PER_BATCH);
        bytes += b.len;
    }
    pulse_buf_fini(&b);
    return bytes;
}

static bool always(int i)
{
    (void)i;
    return true;
}

static bool never(int i)
{
    (void)i;
    return false;
}

static bool thirds(int i)
{
    return i % 3 != 1;
}

/* Reads everything from offset from with pulse_plog_read and checks that
 * the records are ids from.. in order, count of them; returns how many
 * compressed batches the read saw. skip_*: the one skipped range expected
 * (equal: none). */
static int check_read(struct pulse_plog *plog, int64_t from, int64_t count, int64_t skip_from, int64_t skip_to)
{
    struct pulse_buf buf, scratch;
    int64_t off = from, expect = from, seen = 0;
    int compressed = 0;
    pulse_buf_init(&buf, (size_t)1 << 24);
    pulse_buf_init(&scratch, PULSE_BATCH_INFLATED_MAX);
    for (;;) {
        struct pulse_slice info;
        pulse_buf_reset(&buf);
        ck_assert_int_eq(pulse_plog_read(plog, off, 1000, &buf, &info), PULSE_OK);
        if (info.skip_from != info.skip_to) {
            ck_assert_int_eq(info.skip_from, skip_from);
            ck_assert_int_eq(info.skip_to, skip_to);
            ck_assert(info.skip_damaged);
            expect = skip_to;
        }
        if (info.len == 0 && info.next_offset <= off)
            break;
        for (size_t pos = 0; pos < buf.len;) {
            struct pulse_batch_iter it;
            struct pulse_record_view rv;
            char want[256];
            ck_assert_int_eq(pulse_batch_verify(buf.data + pos, buf.len - pos, NULL, NULL), PULSE_OK);
            ck_assert_int_eq(pulse_batch_iter_open(&it, buf.data + pos, buf.len - pos, &scratch), PULSE_OK);
            compressed += pulse_batch_codec(&it.hdr) == PULSE_BATCH_CODEC_ZLIB;
            while (pulse_batch_iter_next(&it, &rv) == PULSE_OK) {
                if (rv.offset < off)
                    continue;
                ck_assert_int_eq(rv.offset, expect);
                size_t n = value_of((uint64_t)rv.offset, want, sizeof want);
                ck_assert_uint_eq(rv.value_len, n);
                ck_assert(memcmp(rv.value, want, n) == 0);
                expect++;
                seen++;
            }
            pos += it.len;
        }
        off = info.next_offset;
    }
    ck_assert_int_eq(seen, count);
    pulse_buf_fini(&buf);
    pulse_buf_fini(&scratch);
    return compressed;
}

/* Bytes of the segment files of dir (bases are multiples of PER_BATCH);
 * *files_out (nullable) gets their number. */
static long long dir_log_bytes(const char *dir, int *files_out)
{
    long long total = 0;
    int files = 0;
    for (int64_t base = 0; base < 100000; base += PER_BATCH) {
        char path[PATH_MAX];
        pt_path(path, sizeof path, dir, base, "log");
        long long n = pt_file_size(path);
        if (n >= 0) {
            total += n;
            files++;
        }
    }
    if (files_out != NULL)
        *files_out = files;
    return total;
}

START_TEST(test_compressed_batches_append_read_roll_and_recover)
{
    char *dir = pt_tmpdir();
    char *pdir = pt_tmpdir();
    struct pulse_plog *plog = open_log(dir);
    struct pulse_plog *plain = open_log(pdir);
    append_range(plog, 0, 60, always);
    append_range(plain, 0, 60, never);
    ck_assert_int_eq(pulse_plog_log_end(plog), 600);
    ck_assert_int_gt(check_read(plog, 0, 600, 0, 0), 0);
    ck_assert_int_eq(check_read(plog, 237, 363, 0, 0) > 0, 1);
    /* Several segments (4 KiB each), and well under half the bytes. */
    int files = 0;
    long long zbytes = dir_log_bytes(dir, &files);
    ck_assert_int_gt(files, 2);
    ck_assert_int_lt(zbytes * 2, dir_log_bytes(pdir, NULL));
    /* Recovery: the snapshot fast path, then a full scan. */
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = open_log(dir);
    ck_assert_int_eq(pulse_plog_log_end(plog), 600);
    check_read(plog, 0, 600, 0, 0);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    char snap[PATH_MAX];
    snprintf(snap, sizeof snap, "%s/snapshot", dir);
    ck_assert_int_eq(unlink(snap), 0);
    plog = open_log(dir);
    ck_assert_int_eq(pulse_plog_log_end(plog), 600);
    check_read(plog, 0, 600, 0, 0);
    /* Appends go on after the recovered end. */
    append_range(plog, 60, 70, always);
    check_read(plog, 590, 110, 0, 0);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ck_assert_int_eq(pulse_plog_close(plain), PULSE_OK);
    pt_cleanup(dir);
    pt_cleanup(pdir);
}
END_TEST

START_TEST(test_mixed_plain_and_compressed_batches_read_in_order)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = open_log(dir);
    append_range(plog, 0, 30, thirds);
    int z = check_read(plog, 0, 300, 0, 0);
    ck_assert_int_eq(z, 20);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = open_log(dir);
    ck_assert_int_eq(check_read(plog, 0, 300, 0, 0), 20);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* A read that keeps the plain records (pulse_plog_read_plain) ends its
 * slice before a batch that would take them past the buffer's max, and the
 * next read goes on from there: a chunk of highly compressed batches never
 * holds more plain bytes than its max, and no offset is lost. */
START_TEST(test_a_read_keeping_plain_records_ends_before_their_max)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = open_log(dir);
    struct pulse_buf out, plain;
    struct pulse_slice info;
    append_range(plog, 0, 6, always);

    pulse_buf_init(&out, SIZE_MAX);
    pulse_buf_init(&plain, SIZE_MAX);
    ck_assert_int_eq(pulse_plog_read_plain(plog, 0, 1 << 20, &out, &plain, &info), PULSE_OK);
    ck_assert_int_eq(info.next_offset, 6 * PER_BATCH);
    size_t cap = plain.len / 6 * 3 / 2; /* room for one batch's, not two */

    int64_t at = 0;
    int reads = 0;
    while (at < 6 * PER_BATCH) {
        pulse_buf_reset(&out);
        pulse_buf_fini(&plain);
        pulse_buf_init(&plain, cap);
        ck_assert_int_eq(pulse_plog_read_plain(plog, at, 1 << 20, &out, &plain, &info), PULSE_OK);
        ck_assert_uint_le(plain.len, cap);
        ck_assert_int_gt((int)out.len, 0);
        ck_assert_int_eq(info.next_offset, at + PER_BATCH); /* one batch, none skipped */
        at = info.next_offset;
        reads++;
    }
    ck_assert_int_eq(reads, 6);
    pulse_buf_fini(&out);
    pulse_buf_fini(&plain);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

/* Replaces the stream of the compressed batch at byte pos of path by one
 * that inflates to fewer bytes than declared, keeping every length and
 * making the CRC match again. */
static void spoil_stream(const char *path, long long pos)
{
    FILE *f = fopen(path, "r+b");
    uint8_t hdr[PULSE_BATCH_HEADER_SIZE + 4];
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, pos, SEEK_SET), 0);
    ck_assert_uint_eq(fread(hdr, 1, sizeof hdr, f), sizeof hdr);
    ck_assert_uint_eq(pulse_get_be16(hdr + 2) & PULSE_BATCH_FLAG_CODEC_MASK, PULSE_BATCH_CODEC_ZLIB);
    uint32_t blen = pulse_get_be32(hdr + 16);
    uint8_t *b = pulse_calloc(1, PULSE_BATCH_HEADER_SIZE + blen);
    ck_assert_ptr_nonnull(b);
    memcpy(b, hdr, sizeof hdr);
    /* A valid deflate stream of a few bytes, padded with zeros: bytes
     * after the stream (and a short inflate) - CRC-valid, still invalid. */
    z_stream z;
    memset(&z, 0, sizeof z);
    ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)"short";
    z.avail_in = 5;
    z.next_out = b + PULSE_BATCH_HEADER_SIZE + 4;
    z.avail_out = blen - 4;
    ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    deflateEnd(&z);
    pulse_put_be32(b + 4, pulse_crc32c(0, b + 8, PULSE_BATCH_HEADER_SIZE + blen - 8));
    ck_assert_int_eq(fseek(f, pos, SEEK_SET), 0);
    ck_assert_uint_eq(fwrite(b, 1, PULSE_BATCH_HEADER_SIZE + blen, f), PULSE_BATCH_HEADER_SIZE + blen);
    ck_assert_int_eq(fclose(f), 0);
    pulse_free(b);
}

START_TEST(test_crc_valid_but_invalid_compressed_batch_is_damage_not_a_torn_tail)
{
    char *dir = pt_tmpdir();
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    struct pulse_buf b;
    char path[PATH_MAX], snap[PATH_MAX];
    long long pos = 0;

    pt_cfg(&cfg, 1 << 20, 512, NULL);
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    pulse_buf_init(&b, 1 << 20);
    for (int i = 0; i < 5; i++) {
        int64_t base;
        zbatch(&b, (uint64_t)i * PER_BATCH, PULSE_BATCH_CODEC_ZLIB);
        if (i < 2)
            pos += (long long)b.len;
        ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
    }
    pulse_buf_fini(&b);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* Batch 2 (offsets 20..29) spoiled; the snapshot goes too, so that
     * recovery scans every byte. */
    pt_path(path, sizeof path, dir, 0, "log");
    spoil_stream(path, pos);
    snprintf(snap, sizeof snap, "%s/snapshot", dir);
    ck_assert_int_eq(unlink(snap), 0);
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    /* Not cut off: the valid batches after it are kept and served. */
    ck_assert_int_eq(pulse_plog_log_end(plog), 50);
    check_read(plog, 0, 40, 20, 30);
    /* Recovery wrote the damage record. */
    char dmg[PATH_MAX];
    snprintf(dmg, sizeof dmg, "%s/damage", dir);
    ck_assert_int_gt(pt_file_size(dmg), 0);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plog_zlib");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_compressed_batches_append_read_roll_and_recover);
    tcase_add_test(tc, test_mixed_plain_and_compressed_batches_read_in_order);
    tcase_add_test(tc, test_a_read_keeping_plain_records_ends_before_their_max);
    tcase_add_test(tc, test_crc_valid_but_invalid_compressed_batch_is_damage_not_a_torn_tail);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
