/* SPDX-License-Identifier: MIT */
/*
 * check_positions.c - the one parser of positions and position lists
 * (http/positions.h): names, offsets and times; lists sorted by partition,
 * each partition once, within the topic and the cap; refusals of anything
 * else, hostile text included; the writer's text parses back to itself
 * (event ids are resumed from it).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/positions.h"

static struct pulse_pos pos_of(const char *s)
{
    struct pulse_pos p = {PULSE_POS_OFFSET, -1};
    ck_assert_msg(pulse_pos_parse(s, strlen(s), &p) == PULSE_OK, "parse %s", s);
    return p;
}

static void refused(const char *s)
{
    struct pulse_pos p;
    ck_assert_msg(pulse_pos_parse(s, strlen(s), &p) == PULSE_INVALID, "%s must be refused", s);
}

START_TEST(test_positions_are_names_offsets_or_times)
{
    ck_assert_int_eq(pos_of("earliest").kind, PULSE_POS_EARLIEST);
    ck_assert_int_eq(pos_of("latest").kind, PULSE_POS_LATEST);
    struct pulse_pos p = pos_of("12");
    ck_assert(p.kind == PULSE_POS_OFFSET && p.value == 12);
    p = pos_of("0");
    ck_assert(p.kind == PULSE_POS_OFFSET && p.value == 0);
    p = pos_of("1764446400000ms");
    ck_assert(p.kind == PULSE_POS_TIME && p.value == 1764446400000);
    p = pos_of("9223372036854775807");
    ck_assert(p.kind == PULSE_POS_OFFSET && p.value == INT64_MAX);
}
END_TEST

START_TEST(test_anything_else_is_refused)
{
    const char *bad[] = {"",
                         "-1",
                         "+1",
                         " 1",
                         "1 ",
                         "1.5",
                         "0x10",
                         "Earliest",
                         "latest ",
                         "ms",
                         "12s",
                         "12 ms",
                         "9223372036854775808",
                         "99999999999999999999",
                         "1ms2",
                         "earliest,",
                         "\xff"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused(bad[i]);
    /* The length, not a NUL, ends the text. */
    struct pulse_pos p;
    ck_assert_int_eq(pulse_pos_parse("12\0"
                                     "3",
                                     4, &p),
                     PULSE_INVALID);
    ck_assert_int_eq(pulse_pos_parse("123", 2, &p), PULSE_OK);
    ck_assert_int_eq(p.value, 12);
}
END_TEST

START_TEST(test_lists_are_sorted_with_each_partition_once)
{
    struct pulse_pos_entry e[8];
    size_t n = 0;
    char err[256];
    ck_assert_int_eq(pulse_pos_list_parse("3:latest,0:12,2:1764446400000ms", 4, e, 8, &n, err, sizeof err), PULSE_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert(e[0].partition == 0 && e[0].pos.kind == PULSE_POS_OFFSET && e[0].pos.value == 12);
    ck_assert(e[1].partition == 2 && e[1].pos.kind == PULSE_POS_TIME);
    ck_assert(e[2].partition == 3 && e[2].pos.kind == PULSE_POS_LATEST);

    ck_assert_int_eq(pulse_pos_list_parse("0:1,0:2", 4, e, 8, &n, err, sizeof err), PULSE_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "twice"));
    ck_assert_int_eq(pulse_pos_list_parse("4:0", 4, e, 8, &n, err, sizeof err), PULSE_PARTITION_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err, "no partition 4"));
    ck_assert_int_eq(pulse_pos_list_parse("0:1,1:1,2:1", 4, e, 2, &n, err, sizeof err), PULSE_INVALID);
    const char *bad[] = {
        "", ",", "0:1,", ",0:1", "0", "0:", ":1", "a:1", "0:x", "0:1;1:2", "-1:0", "0::1", "99999999999999999999:0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pulse_status_t st = pulse_pos_list_parse(bad[i], 4, e, 8, &n, err, sizeof err);
        ck_assert_msg(st == PULSE_INVALID || st == PULSE_PARTITION_NOT_FOUND, "\"%s\" must be refused", bad[i]);
    }
}
END_TEST

START_TEST(test_written_lists_parse_back_to_themselves)
{
    uint32_t parts[3] = {0, 5, 255};
    int64_t offs[3] = {0, 42, INT64_MAX};
    char text[PULSE_POS_LIST_TEXT_MAX(3)];
    size_t len = pulse_pos_list_format(parts, offs, 3, text, sizeof text);
    ck_assert_str_eq(text, "0:0,5:42,255:9223372036854775807");
    ck_assert_uint_eq(len, strlen(text));
    struct pulse_pos_entry e[3];
    size_t n = 0;
    char err[128];
    ck_assert_int_eq(pulse_pos_list_parse(text, 256, e, 3, &n, err, sizeof err), PULSE_OK);
    ck_assert_uint_eq(n, 3);
    for (size_t i = 0; i < 3; i++)
        ck_assert(e[i].partition == parts[i] && e[i].pos.kind == PULSE_POS_OFFSET && e[i].pos.value == offs[i]);
    /* A buffer too small cuts at a whole entry, never inside one. */
    char small[12];
    pulse_pos_list_format(parts, offs, 3, small, sizeof small);
    ck_assert_str_eq(small, "0:0,5:42");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("positions");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_positions_are_names_offsets_or_times);
    tcase_add_test(tc, test_anything_else_is_refused);
    tcase_add_test(tc, test_lists_are_sorted_with_each_partition_once);
    tcase_add_test(tc, test_written_lists_parse_back_to_themselves);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
