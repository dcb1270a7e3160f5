/* SPDX-License-Identifier: MIT */
/* check_common.c - CRC32C check values and path agreement, buffer caps,
 * status tables, allocation failure hook. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/crc32c.h"
#include "common/endian.h"
#include "common/status.h"

START_TEST(test_crc32c_check_value_is_e3069283)
{
    ck_assert_uint_eq(pulse_crc32c(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(pulse_crc32c_sw(0, "123456789", 9), 0xE3069283u);
    if (pulse_crc32c_hw_available())
        ck_assert_uint_eq(pulse_crc32c_hw(0, "123456789", 9), 0xE3069283u);
}
END_TEST

START_TEST(test_crc32c_of_32_zero_bytes_matches_rfc3720)
{
    uint8_t z[32] = {0};
    ck_assert_uint_eq(pulse_crc32c_sw(0, z, sizeof z), 0x8A9136AAu);
    ck_assert_uint_eq(pulse_crc32c(0, z, sizeof z), 0x8A9136AAu);
}
END_TEST

START_TEST(test_crc32c_hardware_and_table_paths_agree_on_random_data)
{
    if (!pulse_crc32c_hw_available())
        return;
    unsigned seed = 12345;
    uint8_t buf[4096 + 16];
    for (int iter = 0; iter < 20000; iter++) {
        size_t off = (size_t)(rand_r(&seed) % 16);
        size_t len = (size_t)(rand_r(&seed) % 4096);
        for (size_t i = 0; i < len; i++)
            buf[off + i] = (uint8_t)rand_r(&seed);
        uint32_t init = (uint32_t)rand_r(&seed);
        ck_assert_uint_eq(pulse_crc32c_hw(init, buf + off, len), pulse_crc32c_sw(init, buf + off, len));
    }
}
END_TEST

START_TEST(test_crc32c_continues_across_chunks)
{
    const char *s = "hello, segmented world";
    size_t n = strlen(s);
    uint32_t whole = pulse_crc32c(0, s, n);
    for (size_t cut = 0; cut <= n; cut++)
        ck_assert_uint_eq(pulse_crc32c(pulse_crc32c(0, s, cut), s + cut, n - cut), whole);
}
END_TEST

START_TEST(test_buf_refuses_to_grow_past_its_cap)
{
    struct pulse_buf b;
    pulse_buf_init(&b, 10);
    ck_assert_int_eq(pulse_buf_append(&b, "0123456789", 10), PULSE_OK);
    ck_assert_int_eq(pulse_buf_append(&b, "x", 1), PULSE_TOO_LARGE);
    ck_assert_uint_eq(b.len, 10);
    ck_assert_int_eq(memcmp(b.data, "0123456789", 10), 0);
    pulse_buf_fini(&b);
}
END_TEST

START_TEST(test_buf_big_endian_appends)
{
    struct pulse_buf b;
    pulse_buf_init(&b, 64);
    ck_assert_int_eq(pulse_buf_append_be16(&b, 0x0102), PULSE_OK);
    ck_assert_int_eq(pulse_buf_append_be32(&b, 0x03040506), PULSE_OK);
    ck_assert_int_eq(pulse_buf_append_be64(&b, 0x0708090a0b0c0d0eull), PULSE_OK);
    static const uint8_t want[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
    ck_assert_uint_eq(b.len, sizeof want);
    ck_assert_int_eq(memcmp(b.data, want, sizeof want), 0);
    ck_assert_uint_eq(pulse_get_be64(b.data + 6), 0x0708090a0b0c0d0eull);
    ck_assert_int_eq(pulse_buf_printf(&b, "%d-%s", 42, "x"), PULSE_OK);
    ck_assert_uint_eq(b.len, sizeof want + 4);
    pulse_buf_fini(&b);
}
END_TEST

START_TEST(test_alloc_fail_after_n_returns_null)
{
    pulse_alloc_fail_after(2);
    void *a = pulse_malloc(8);
    void *b = pulse_malloc(8);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_null(b);
    struct pulse_buf buf;
    pulse_buf_init(&buf, 100);
    ck_assert_int_eq(pulse_buf_append(&buf, "x", 1), PULSE_NOMEM);
    pulse_alloc_fail_after(0);
    pulse_free(a);
    pulse_buf_fini(&buf);
}
END_TEST

START_TEST(test_status_tables_name_every_status)
{
    for (int i = 0; i < PULSE_STATUS_COUNT; i++) {
        ck_assert_ptr_nonnull(pulse_status_name((pulse_status_t)i));
        ck_assert_ptr_nonnull(pulse_status_message((pulse_status_t)i));
    }
    ck_assert_str_eq(pulse_status_name(PULSE_FENCED), "FENCED");
    ck_assert_str_eq(pulse_status_name((pulse_status_t)9999), "UNKNOWN");
}
END_TEST

START_TEST(test_status_from_errno_tells_descriptor_limits_from_io_errors)
{
    ck_assert_int_eq(pulse_status_from_errno(EMFILE), PULSE_NOFILES);
    ck_assert_int_eq(pulse_status_from_errno(ENFILE), PULSE_NOFILES);
    ck_assert_int_eq(pulse_status_from_errno(ENOSPC), PULSE_NOSPACE);
    ck_assert_int_eq(pulse_status_from_errno(EIO), PULSE_IO);
    ck_assert_str_eq(pulse_status_message(PULSE_NOFILES), "too many open files");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("common");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_crc32c_check_value_is_e3069283);
    tcase_add_test(tc, test_crc32c_of_32_zero_bytes_matches_rfc3720);
    tcase_add_test(tc, test_crc32c_hardware_and_table_paths_agree_on_random_data);
    tcase_add_test(tc, test_crc32c_continues_across_chunks);
    tcase_add_test(tc, test_buf_refuses_to_grow_past_its_cap);
    tcase_add_test(tc, test_buf_big_endian_appends);
    tcase_add_test(tc, test_alloc_fail_after_n_returns_null);
    tcase_add_test(tc, test_status_tables_name_every_status);
    tcase_add_test(tc, test_status_from_errno_tells_descriptor_limits_from_io_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
