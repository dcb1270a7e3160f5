/* SPDX-License-Identifier: MIT */
/* check_common.c - CRC32C check values and path agreement, buffer caps,
 * status tables, allocation failure hook. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/crc32c.h"
#include "common/endian.h"
#include "common/log.h"
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

/* The definition, one bit at a time: the oracle for the fast paths. */
static uint32_t crc_bitwise(uint32_t crc, const uint8_t *p, size_t len)
{
    crc = ~crc;
    while (len-- > 0) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
}

static void fill_random(uint8_t *p, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rand_r(seed);
}

/* Every length 0..4096 at four alignments: the table path, one hardware
 * stream, three streams (whose blocks of 256 B and 4 KiB start at lengths
 * 768 and 12 KiB) and the dispatcher agree, and the combine of every split
 * of the buffer gives the whole's CRC. */
START_TEST(test_crc32c_paths_and_combine_agree_at_every_length)
{
    static const size_t offs[] = {0, 1, 3, 7};
    unsigned seed = 777;
    uint8_t *buf = malloc(4096 + 8);
    ck_assert_ptr_nonnull(buf);
    fill_random(buf, 4096 + 8, &seed);
    for (size_t len = 0; len <= 4096; len++) {
        for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++) {
            const uint8_t *p = buf + offs[o];
            uint32_t init = (uint32_t)rand_r(&seed);
            uint32_t want = pulse_crc32c_sw(init, p, len);
            ck_assert_msg(pulse_crc32c(init, p, len) == want, "len %zu off %zu", len, offs[o]);
            if (pulse_crc32c_hw_available()) {
                ck_assert_msg(pulse_crc32c_hw(init, p, len) == want, "hw len %zu off %zu", len, offs[o]);
                ck_assert_msg(pulse_crc32c_hw3(init, p, len) == want, "hw3 len %zu off %zu", len, offs[o]);
            }
        }
        if (len % 61 == 0)
            ck_assert_uint_eq(pulse_crc32c_sw(0, buf + 1, len), crc_bitwise(0, buf + 1, len));
        size_t cut = len == 0 ? 0 : (size_t)rand_r(&seed) % (len + 1);
        uint32_t a = pulse_crc32c(0, buf, cut);
        uint32_t b = pulse_crc32c(0, buf + cut, len - cut);
        ck_assert_msg(pulse_crc32c_combine(a, b, len - cut) == pulse_crc32c(0, buf, len), "len %zu cut %zu", len, cut);
    }
    free(buf);
}
END_TEST

/* Lengths of several three-stream rounds of both block sizes, odd
 * alignments and an odd remainder, and combines over megabytes. */
START_TEST(test_crc32c_paths_and_combine_agree_on_big_lengths)
{
    static const size_t lens[] = {3 * 4096, 3 * 4096 + 767,  3 * 4096 * 2 + 3 * 256 + 5,
                                  100003,   (size_t)1 << 20, ((size_t)3 << 20) + 11};
    const size_t max = ((size_t)3 << 20) + 11 + 8;
    unsigned seed = 4242;
    uint8_t *buf = malloc(max);
    ck_assert_ptr_nonnull(buf);
    fill_random(buf, max, &seed);
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        for (size_t off = 0; off < 8; off += 5) {
            const uint8_t *p = buf + off;
            uint32_t want = pulse_crc32c_sw(0xabcdef01u, p, lens[i]);
            ck_assert_uint_eq(pulse_crc32c(0xabcdef01u, p, lens[i]), want);
            if (pulse_crc32c_hw_available()) {
                ck_assert_uint_eq(pulse_crc32c_hw(0xabcdef01u, p, lens[i]), want);
                ck_assert_uint_eq(pulse_crc32c_hw3(0xabcdef01u, p, lens[i]), want);
            }
            size_t cut = lens[i] / 3 + 1;
            uint32_t a = pulse_crc32c(0xabcdef01u, p, cut);
            ck_assert_uint_eq(pulse_crc32c_combine(a, pulse_crc32c(0, p + cut, lens[i] - cut), lens[i] - cut), want);
        }
    }
    ck_assert_uint_eq(pulse_crc32c_sw(0, buf, 100003), crc_bitwise(0, buf, 100003));
    free(buf);
}
END_TEST

/* Shifts beyond the tables (2^32 bytes and more) agree with the tabled ones:
 * appending n zero bytes and then m is appending n + m. */
START_TEST(test_crc32c_combine_of_huge_lengths_composes)
{
    if (sizeof(size_t) < 8)
        return;
    const size_t g = (size_t)1 << 31;
    uint32_t c = 0x12345678u;
    ck_assert_uint_eq(pulse_crc32c_combine(pulse_crc32c_combine(c, 0, g), 0, g), pulse_crc32c_combine(c, 0, 2 * g));
    ck_assert_uint_eq(pulse_crc32c_combine(pulse_crc32c_combine(c, 0, 2 * g + 5), 0, 3 * g + 1),
                      pulse_crc32c_combine(c, 0, 5 * g + 6));
    ck_assert_uint_eq(pulse_crc32c_combine(c, 0, 0), c);
    ck_assert_uint_ne(pulse_crc32c_combine(c, 0, 2 * g), c);
}
END_TEST

/* Patching a CRC for changed bytes equals recomputing it, at every place and
 * size of the change; and a CRC that was wrong stays wrong by as much. */
START_TEST(test_crc32c_patch_equals_recomputation)
{
    unsigned seed = 99;
    uint8_t msg[3000], old[64], repl[64];
    fill_random(msg, sizeof msg, &seed);
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = 1 + (size_t)rand_r(&seed) % sizeof msg;
        size_t n = (size_t)rand_r(&seed) % (sizeof repl + 1);
        if (n > len)
            n = len;
        size_t at = (size_t)rand_r(&seed) % (len - n + 1);
        uint32_t before = pulse_crc32c(0, msg, len);
        memcpy(old, msg + at, n);
        fill_random(repl, n, &seed);
        memcpy(msg + at, repl, n);
        uint32_t after = pulse_crc32c(0, msg, len);
        ck_assert_msg(pulse_crc32c_patch(before, old, repl, n, len - at - n) == after, "len %zu at %zu n %zu", len, at,
                      n);
        ck_assert_uint_eq(pulse_crc32c_patch(before ^ 0x10u, old, repl, n, len - at - n), after ^ 0x10u);
    }
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

/* A status carries the cause a caller several layers up must name: a
 * permission problem is not "input/output error". */
START_TEST(test_errno_maps_to_the_status_that_names_it)
{
    ck_assert_int_eq(pulse_status_from_errno(ENOSPC), PULSE_NOSPACE);
    ck_assert_int_eq(pulse_status_from_errno(EDQUOT), PULSE_NOSPACE);
    ck_assert_int_eq(pulse_status_from_errno(EMFILE), PULSE_NOFILE);
    ck_assert_int_eq(pulse_status_from_errno(ENOMEM), PULSE_NOMEM);
    ck_assert_int_eq(pulse_status_from_errno(EACCES), PULSE_ACCESS);
    ck_assert_int_eq(pulse_status_from_errno(EPERM), PULSE_ACCESS);
    ck_assert_str_eq(pulse_status_message(pulse_status_from_errno(EACCES)), "permission denied");
    ck_assert_int_eq(pulse_status_from_errno(EIO), PULSE_IO);
}
END_TEST

/* Runs fn with stderr sent to a temporary file; returns the text written
 * (static storage). Check forks each test, so the redirect dies with it. */
static const char *capture_stderr(void (*fn)(void))
{
    static char text[1 << 20];
    char path[] = "/tmp/check_common_log.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    ck_assert_int_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    fn();
    fflush(stderr);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    ck_assert_int_ge(n, 0);
    text[n] = '\0';
    close(fd);
    unlink(path);
    return text;
}

static size_t count_lines(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static void flood(void)
{
    pulse_log_set_level(PULSE_LOG_INFO);
    /* 10,000 identical warnings in a burst, and 3 of another kind. */
    for (int i = 0; i < 10000; i++)
        PULSE_WARN_RL("disk full %d", 7);
    for (int i = 0; i < 3; i++)
        PULSE_WARN_RL("other warning");
    pulse_log_flush_limited();
}

START_TEST(test_repeated_warnings_are_rate_limited_with_a_count)
{
    const char *text = capture_stderr(flood);
    ck_assert_uint_eq(count_lines(text, "level=warn disk full 7\n"), PULSE_LOG_BURST);
    ck_assert_uint_eq(count_lines(text, "level=warn other warning\n"), 3);
    ck_assert_msg(strstr(text, "repeated 9995 more times") != NULL, "%s", text);
    ck_assert_msg(strstr(text, ": disk full 7\n") != NULL, "%s", text);
    ck_assert_uint_lt(count_lines(text, "\n"), 20);
}
END_TEST

static void two_seconds(void)
{
    pulse_log_set_level(PULSE_LOG_INFO);
    for (int i = 0; i < 8; i++)
        pulse_log_limited(PULSE_LOG_ERROR, "key", "burst one");
    usleep(1100 * 1000);
    /* A new second: the count of the first is reported, and a few lines of
     * the second get through again. */
    for (int i = 0; i < 8; i++)
        pulse_log_limited(PULSE_LOG_ERROR, "key", "burst two");
}

START_TEST(test_rate_limit_window_reopens_after_a_second_and_reports_the_count_first)
{
    const char *text = capture_stderr(two_seconds);
    ck_assert_uint_eq(count_lines(text, "level=error burst one\n"), PULSE_LOG_BURST);
    ck_assert_uint_eq(count_lines(text, "level=error burst two\n"), PULSE_LOG_BURST);
    const char *rep = strstr(text, "repeated 3 more times");
    ck_assert_ptr_nonnull(rep);
    ck_assert(rep < strstr(text, "burst two"));
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
    tcase_add_test(tc, test_crc32c_paths_and_combine_agree_at_every_length);
    tcase_add_test(tc, test_crc32c_paths_and_combine_agree_on_big_lengths);
    tcase_add_test(tc, test_crc32c_combine_of_huge_lengths_composes);
    tcase_add_test(tc, test_crc32c_patch_equals_recomputation);
    tcase_add_test(tc, test_buf_refuses_to_grow_past_its_cap);
    tcase_add_test(tc, test_buf_big_endian_appends);
    tcase_add_test(tc, test_alloc_fail_after_n_returns_null);
    tcase_add_test(tc, test_status_tables_name_every_status);
    tcase_add_test(tc, test_errno_maps_to_the_status_that_names_it);
    tcase_add_test(tc, test_repeated_warnings_are_rate_limited_with_a_count);
    tcase_add_test(tc, test_rate_limit_window_reopens_after_a_second_and_reports_the_count_first);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
