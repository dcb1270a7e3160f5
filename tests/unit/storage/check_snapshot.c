/* SPDX-License-Identifier: MIT */
/*
 * check_snapshot.c - the 40-byte snapshot (storage contract section 8):
 * exact byte layout, strict decoding of hostile bytes, durable replace.
 */
#include "plogtest.h"

#include <errno.h>

#include "common/crc32c.h"
#include "faultio.h"
#include "common/fsio.h"
#include "storage/snapshot.h"

START_TEST(test_snapshot_bytes_follow_the_contract_layout)
{
    struct pulse_snapshot s = {0x0102030405060708LL, 0x1112131415161718LL, 0x2122232425262728LL, 0x0102030405060708LL};
    uint8_t raw[PULSE_SNAPSHOT_SIZE];
    pulse_snapshot_encode(&s, raw);
    ck_assert_uint_eq(raw[0], 0x53);
    ck_assert_uint_eq(raw[1], 0x01);
    ck_assert_uint_eq(raw[2], 0);
    ck_assert_uint_eq(raw[3], 0);
    ck_assert_uint_eq(pulse_get_be32(raw + 4), pulse_crc32c(0, raw + 8, 32));
    ck_assert_uint_eq(pulse_get_be64(raw + 8), 0x0102030405060708ULL);
    ck_assert_uint_eq(pulse_get_be64(raw + 16), 0x1112131415161718ULL);
    ck_assert_uint_eq(pulse_get_be64(raw + 24), 0x2122232425262728ULL);
    ck_assert_uint_eq(pulse_get_be64(raw + 32), 0x0102030405060708ULL);
    struct pulse_snapshot back;
    ck_assert_int_eq(pulse_snapshot_decode(raw, sizeof raw, &back), PULSE_CORRUPT); /* base > next */
    s.active_base = 5;
    pulse_snapshot_encode(&s, raw);
    ck_assert_int_eq(pulse_snapshot_decode(raw, sizeof raw, &back), PULSE_OK);
    ck_assert_int_eq(back.leo, s.leo);
    ck_assert_int_eq(back.active_base, 5);
    ck_assert_int_eq(back.active_size, s.active_size);
    ck_assert_int_eq(back.active_next, s.active_next);
}
END_TEST

START_TEST(test_snapshot_decode_rejects_every_single_byte_change)
{
    struct pulse_snapshot s = {1000, 900, 4096, 1000}, back;
    uint8_t raw[PULSE_SNAPSHOT_SIZE];
    pulse_snapshot_encode(&s, raw);
    ck_assert_int_eq(pulse_snapshot_decode(raw, sizeof raw, &back), PULSE_OK);
    for (size_t i = 0; i < sizeof raw; i++) {
        for (int bit = 0; bit < 8; bit++) {
            raw[i] ^= (uint8_t)(1u << bit);
            ck_assert_int_eq(pulse_snapshot_decode(raw, sizeof raw, &back), PULSE_CORRUPT);
            raw[i] ^= (uint8_t)(1u << bit);
        }
    }
    ck_assert_int_eq(pulse_snapshot_decode(raw, sizeof raw - 1, &back), PULSE_CORRUPT);
    ck_assert_int_eq(pulse_snapshot_decode(raw, 0, &back), PULSE_CORRUPT);
    /* Fields that are incoherent although the CRC is right. */
    struct pulse_snapshot bad[] = {{1000, 900, 4096, 999}, {-1, -5, 0, -1}, {10, 2, -1, 10}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pulse_snapshot_encode(&bad[i], raw);
        ck_assert_int_eq(pulse_snapshot_decode(raw, sizeof raw, &back), PULSE_CORRUPT);
    }
}
END_TEST

START_TEST(test_snapshot_write_then_read_round_trips_and_failed_write_keeps_the_old_one)
{
    char *dir = pt_tmpdir();
    struct faultio *fio = faultio_create();
    const struct pulse_io *io = faultio_io(fio);
    struct pulse_snapshot a = {50, 40, 777, 50}, b = {60, 40, 999, 60}, got;
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    ck_assert_int_eq(pulse_snapshot_read(io, dir, &got), PULSE_NOT_FOUND);
    ck_assert_int_eq(pulse_snapshot_write(io, dir, &a), PULSE_OK);
    ck_assert_int_eq(pulse_snapshot_read(io, dir, &got), PULSE_OK);
    ck_assert_int_eq(got.active_size, 777);
    faultio_fail_nth(fio, FAULTIO_PWRITE, 1, ENOSPC);
    ck_assert_int_eq(pulse_snapshot_write(io, dir, &b), PULSE_NOSPACE);
    faultio_fail_nth(fio, FAULTIO_FSYNC_DIR, 1, EIO);
    ck_assert_int_eq(pulse_snapshot_write(io, dir, &b), PULSE_IO);
    /* The rename happened before the directory fsync failed: the new one
     * is in place, which is also a valid state. */
    ck_assert_int_eq(pulse_snapshot_read(io, dir, &got), PULSE_OK);
    ck_assert_int_eq(got.leo, 60);
    faultio_fail_nth(fio, FAULTIO_RENAME, 1, EIO);
    ck_assert_int_eq(pulse_snapshot_write(io, dir, &a), PULSE_IO);
    ck_assert_int_eq(pulse_snapshot_read(io, dir, &got), PULSE_OK);
    ck_assert_int_eq(got.leo, 60);
    faultio_destroy(fio);
    pt_cleanup(dir);
}
END_TEST

/* The small-file read the snapshot and the damage record share: a file
 * longer than its kind allows is not read (it is corrupt, not a prefix),
 * a missing one is NOT_FOUND. */
START_TEST(test_small_files_are_read_whole_or_refused)
{
    char *dir = pt_tmpdir();
    char path[600];
    uint8_t raw[PULSE_SNAPSHOT_SIZE + 1];
    struct pulse_snapshot a = {50, 40, 777, 50}, got;
    uint8_t *data = NULL;
    size_t len = 0;
    const struct pulse_io *io = pulse_io_posix();

    ck_assert_int_eq(mkdir(dir, 0755), 0);
    errno = 0;
    ck_assert_int_eq(pulse_io_read_file(io, dir, "nothing", 10, &data, &len), -1);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_int_eq(pulse_snapshot_write(io, dir, &a), PULSE_OK);
    ck_assert_int_eq(pulse_io_read_file(io, dir, PULSE_SNAPSHOT_NAME, PULSE_SNAPSHOT_SIZE, &data, &len), 0);
    ck_assert_uint_eq(len, PULSE_SNAPSHOT_SIZE);
    pulse_free(data);
    /* One byte too many: refused unread, and the snapshot is corrupt. */
    pulse_snapshot_encode(&a, raw);
    raw[PULSE_SNAPSHOT_SIZE] = 0;
    snprintf(path, sizeof path, "%s/%s", dir, PULSE_SNAPSHOT_NAME);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(raw, 1, sizeof raw, f), sizeof raw);
    fclose(f);
    errno = 0;
    ck_assert_int_eq(pulse_io_read_file(io, dir, PULSE_SNAPSHOT_NAME, PULSE_SNAPSHOT_SIZE, &data, &len), -1);
    ck_assert_int_eq(errno, EFBIG);
    ck_assert_int_eq(pulse_snapshot_read(io, dir, &got), PULSE_CORRUPT);
    pt_cleanup(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("snapshot");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_snapshot_bytes_follow_the_contract_layout);
    tcase_add_test(tc, test_snapshot_decode_rejects_every_single_byte_change);
    tcase_add_test(tc, test_snapshot_write_then_read_round_trips_and_failed_write_keeps_the_old_one);
    tcase_add_test(tc, test_small_files_are_read_whole_or_refused);
    suite_add_tcase(s, tc);
    return pt_run(s);
}
