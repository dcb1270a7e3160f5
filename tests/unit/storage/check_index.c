/* SPDX-License-Identifier: MIT */
/*
 * check_index.c - the sparse index table (storage contract section 4):
 * ordering rule, greatest-entry-at-or-before lookup, on-disk encoding, and
 * decoding of hostile index bytes down to the longest sorted prefix.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/endian.h"
#include "common/log.h"
#include "storage/index.h"
#include "storage/segment.h"

START_TEST(test_entries_must_increase_in_both_offset_and_position)
{
    struct pulse_index idx;
    pulse_index_init(&idx);
    ck_assert_int_eq(pulse_index_append(&idx, 0, 0), PULSE_OK);
    ck_assert_int_eq(pulse_index_append(&idx, 5, 100), PULSE_OK);
    ck_assert_int_eq(pulse_index_append(&idx, 5, 200), PULSE_INVALID);
    ck_assert_int_eq(pulse_index_append(&idx, 6, 100), PULSE_INVALID);
    ck_assert_int_eq(pulse_index_append(&idx, 4, 300), PULSE_INVALID);
    ck_assert_uint_eq(idx.n, 2);
    pulse_index_fini(&idx);
    ck_assert_uint_eq(idx.n, 0);
    pulse_index_fini(&idx); /* twice is fine */
}
END_TEST

START_TEST(test_lookup_finds_the_greatest_entry_at_or_before_the_target)
{
    struct pulse_index idx;
    struct pulse_index_entry e;
    pulse_index_init(&idx);
    ck_assert(!pulse_index_lookup(&idx, 3, &e));
    for (uint32_t i = 0; i < 1000; i++)
        ck_assert_int_eq(pulse_index_append(&idx, i * 10, i * 1000), PULSE_OK);
    for (uint32_t t = 0; t < 10020; t += 3) {
        ck_assert(pulse_index_lookup(&idx, t, &e));
        uint32_t want = t / 10 < 1000 ? t / 10 : 999;
        ck_assert_uint_eq(e.rel_offset, want * 10);
        ck_assert_uint_eq(e.rel_pos, want * 1000);
    }
    pulse_index_truncate(&idx, 0);
    ck_assert_int_eq(pulse_index_append(&idx, 7, 7), PULSE_OK);
    ck_assert(!pulse_index_lookup(&idx, 6, &e));
    ck_assert(pulse_index_lookup(&idx, 7, &e));
    pulse_index_fini(&idx);
}
END_TEST

START_TEST(test_entries_encode_as_two_big_endian_u32)
{
    struct pulse_index_entry e = {0x01020304u, 0xA0B0C0D0u};
    uint8_t raw[8];
    const uint8_t want[8] = {1, 2, 3, 4, 0xA0, 0xB0, 0xC0, 0xD0};
    pulse_index_encode_entry(&e, raw);
    ck_assert_mem_eq(raw, want, 8);
}
END_TEST

START_TEST(test_decode_keeps_the_longest_sorted_prefix_of_whole_entries)
{
    uint8_t raw[8 * 5 + 3];
    struct pulse_index idx;
    bool clean = true;
    for (uint32_t i = 0; i < 5; i++) {
        pulse_put_be32(raw + 8 * i, i * 3);
        pulse_put_be32(raw + 8 * i + 4, i * 300);
    }
    pulse_index_init(&idx);
    ck_assert_int_eq(pulse_index_decode(&idx, raw, 40, &clean), PULSE_OK);
    ck_assert(clean);
    ck_assert_uint_eq(idx.n, 5);
    pulse_index_fini(&idx);
    /* A partial trailing entry is dropped and reported. */
    ck_assert_int_eq(pulse_index_decode(&idx, raw, 43, &clean), PULSE_OK);
    ck_assert(!clean);
    ck_assert_uint_eq(idx.n, 5);
    pulse_index_fini(&idx);
    /* An out-of-order entry ends the prefix. */
    pulse_put_be32(raw + 8 * 3 + 4, 10);
    ck_assert_int_eq(pulse_index_decode(&idx, raw, 40, &clean), PULSE_OK);
    ck_assert(!clean);
    ck_assert_uint_eq(idx.n, 3);
    ck_assert(pulse_index_equal(&idx, &idx));
    pulse_index_fini(&idx);
    ck_assert_int_eq(pulse_index_decode(&idx, raw, 0, &clean), PULSE_OK);
    ck_assert(clean);
    ck_assert_uint_eq(idx.n, 0);
    pulse_index_fini(&idx);
}
END_TEST

START_TEST(test_decode_survives_random_bytes)
{
    unsigned seed = 99;
    uint8_t raw[512];
    for (int iter = 0; iter < 2000; iter++) {
        struct pulse_index idx;
        bool clean;
        size_t len = (size_t)(rand_r(&seed) % sizeof raw);
        for (size_t i = 0; i < len; i++)
            raw[i] = (uint8_t)rand_r(&seed);
        pulse_index_init(&idx);
        ck_assert_int_eq(pulse_index_decode(&idx, raw, len, &clean), PULSE_OK);
        ck_assert_uint_le(idx.n, len / 8);
        int bad = 0;
        for (size_t i = 1; i < idx.n; i++)
            bad += idx.entries[i].rel_offset <= idx.entries[i - 1].rel_offset ||
                   idx.entries[i].rel_pos <= idx.entries[i - 1].rel_pos;
        ck_assert_int_eq(bad, 0);
        pulse_index_fini(&idx);
    }
}
END_TEST

START_TEST(test_segment_names_are_exactly_20_digits_dot_log)
{
    int64_t base = -1;
    ck_assert(pulse_segment_parse_name("00000000000000000042.log", &base));
    ck_assert_int_eq(base, 42);
    ck_assert(pulse_segment_parse_name("09223372036854775807.log", &base));
    ck_assert_int_eq(base, INT64_MAX);
    ck_assert(!pulse_segment_parse_name("09223372036854775808.log", &base));
    ck_assert(!pulse_segment_parse_name("0000000000000000042.log", &base));
    ck_assert(!pulse_segment_parse_name("00000000000000000042.index", &base));
    ck_assert(!pulse_segment_parse_name("0000000000000000004x.log", &base));
    ck_assert(!pulse_segment_parse_name(".tmp-00000000000000000042.log", &base));
    ck_assert(!pulse_segment_parse_name("snapshot", &base));
    char *p = pulse_segment_path("/d", 7, "index");
    ck_assert_str_eq(p, "/d/00000000000000000007.index");
    pulse_free(p);
}
END_TEST

START_TEST(test_index_and_merge_and_temp_names_have_one_parser)
{
    int64_t base = -1, first = -1, end = -1;
    ck_assert(pulse_segment_parse_file_name("00000000000000000042.index", "index", &base));
    ck_assert_int_eq(base, 42);
    ck_assert(!pulse_segment_parse_file_name("00000000000000000042.log", "index", &base));
    ck_assert(!pulse_segment_parse_file_name("00000000000000000042.indexx", "index", &base));
    ck_assert(!pulse_segment_parse_file_name("0000000000000000004.2index", "index", &base));
    char *p = pulse_segment_merge_path("/d", 3, 17);
    ck_assert_str_eq(p, "/d/00000000000000000003-00000000000000000017.merge");
    ck_assert(pulse_segment_parse_merge_name(p + 3, &first, &end));
    ck_assert_int_eq(first, 3);
    ck_assert_int_eq(end, 17);
    pulse_free(p);
    /* The end must lie past the first; both are offsets within int64. */
    ck_assert(!pulse_segment_parse_merge_name("00000000000000000017-00000000000000000017.merge", &first, &end));
    ck_assert(!pulse_segment_parse_merge_name("00000000000000000003-09223372036854775808.merge", &first, &end));
    ck_assert(!pulse_segment_parse_merge_name("00000000000000000003_00000000000000000017.merge", &first, &end));
    ck_assert(!pulse_segment_parse_merge_name("00000000000000000003-00000000000000000017.log", &first, &end));
    p = pulse_segment_temp_path("/d", "compact", 5, "log");
    ck_assert_str_eq(p, "/d/.tmp-compact-00000000000000000005.log.tmp");
    ck_assert(!pulse_segment_parse_name(p + 3, &base));
    pulse_free(p);
}
END_TEST

START_TEST(test_a_table_encodes_as_its_entries_in_order)
{
    struct pulse_index idx, back;
    size_t len = 99;
    bool clean = false;
    pulse_index_init(&idx);
    pulse_index_init(&back);
    uint8_t *raw = pulse_index_encode(&idx, &len);
    ck_assert_ptr_nonnull(raw);
    ck_assert_uint_eq(len, 0);
    pulse_free(raw);
    for (uint32_t i = 0; i < 100; i++)
        ck_assert_int_eq(pulse_index_append(&idx, i * 3, i * 4096 + 7 * (i > 0)), PULSE_OK);
    raw = pulse_index_encode(&idx, &len);
    ck_assert_uint_eq(len, 100 * PULSE_INDEX_ENTRY_SIZE);
    ck_assert_uint_eq(pulse_get_be32(raw + 8 * 5), 15);
    ck_assert_uint_eq(pulse_get_be32(raw + 8 * 5 + 4), 5 * 4096 + 7);
    ck_assert_int_eq(pulse_index_decode(&back, raw, len, &clean), PULSE_OK);
    ck_assert(clean);
    ck_assert(pulse_index_equal(&idx, &back));
    pulse_free(raw);
    pulse_index_fini(&idx);
    pulse_index_fini(&back);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("index");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_entries_must_increase_in_both_offset_and_position);
    tcase_add_test(tc, test_lookup_finds_the_greatest_entry_at_or_before_the_target);
    tcase_add_test(tc, test_entries_encode_as_two_big_endian_u32);
    tcase_add_test(tc, test_decode_keeps_the_longest_sorted_prefix_of_whole_entries);
    tcase_add_test(tc, test_decode_survives_random_bytes);
    tcase_add_test(tc, test_segment_names_are_exactly_20_digits_dot_log);
    tcase_add_test(tc, test_index_and_merge_and_temp_names_have_one_parser);
    tcase_add_test(tc, test_a_table_encodes_as_its_entries_in_order);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    pulse_log_set_level(PULSE_LOG_OFF);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
