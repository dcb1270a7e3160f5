/* SPDX-License-Identifier: MIT */
/*
 * check_browser.c - the pure rules behind browser clients: which origins
 * server.cors-origins allows (http/cors.h) and gzip'ed answers
 * (http/encode.h): when Accept-Encoding allows gzip, and that what is
 * compressed, whole or streamed in any window size, inflates back to the
 * same bytes.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/alloc.h"
#include "http/cors.h"
#include "http/encode.h"

START_TEST(test_origins_are_matched_exactly_and_star_allows_any)
{
    const char *list = "http://app.example:5173 , https://ops.example";
    ck_assert_int_eq(pulse_cors_judge(list, NULL, "h:1"), PULSE_CORS_NONE);
    ck_assert_int_eq(pulse_cors_judge(list, "http://app.example:5173", "h:1"), PULSE_CORS_ALLOWED);
    ck_assert_int_eq(pulse_cors_judge(list, "https://ops.example", "h:1"), PULSE_CORS_ALLOWED);
    /* Scheme, host and port all count; no prefix or suffix match. */
    ck_assert_int_eq(pulse_cors_judge(list, "http://app.example", "h:1"), PULSE_CORS_REFUSED);
    ck_assert_int_eq(pulse_cors_judge(list, "https://app.example:5173", "h:1"), PULSE_CORS_REFUSED);
    ck_assert_int_eq(pulse_cors_judge(list, "http://app.example:51730", "h:1"), PULSE_CORS_REFUSED);
    ck_assert_int_eq(pulse_cors_judge(list, "https://ops.example.evil", "h:1"), PULSE_CORS_REFUSED);
    ck_assert_int_eq(pulse_cors_judge(list, "null", "h:1"), PULSE_CORS_REFUSED);
    ck_assert_int_eq(pulse_cors_judge(list, "", "h:1"), PULSE_CORS_REFUSED);
    ck_assert_int_eq(pulse_cors_judge("*", "null", "h:1"), PULSE_CORS_ALLOWED);
    ck_assert_int_eq(pulse_cors_judge("https://a.example,*", "http://b.example", "h:1"), PULSE_CORS_ALLOWED);
    /* Empty: CORS off, every foreign origin refused. */
    ck_assert_int_eq(pulse_cors_judge("", "http://app.example:5173", "h:1"), PULSE_CORS_REFUSED);
    ck_assert_int_eq(pulse_cors_judge(NULL, "http://app.example:5173", "h:1"), PULSE_CORS_REFUSED);
    ck_assert(!pulse_cors_enabled(""));
    ck_assert(!pulse_cors_enabled(" , "));
    ck_assert(!pulse_cors_enabled(NULL));
    ck_assert(pulse_cors_enabled("*"));
}
END_TEST

START_TEST(test_the_servers_own_origin_is_same_origin_whatever_the_list)
{
    ck_assert_int_eq(pulse_cors_judge("", "http://127.0.0.1:8080", "127.0.0.1:8080"), PULSE_CORS_SAME);
    ck_assert_int_eq(pulse_cors_judge("", "http://LocalHost:8080", "localhost:8080"), PULSE_CORS_SAME);
    ck_assert_int_eq(pulse_cors_judge("", "http://127.0.0.1:8081", "127.0.0.1:8080"), PULSE_CORS_REFUSED);
    ck_assert_int_eq(pulse_cors_judge("", "https://127.0.0.1:8080", "127.0.0.1:8080"), PULSE_CORS_REFUSED);
    ck_assert_int_eq(pulse_cors_judge("", "http://127.0.0.1:8080", NULL), PULSE_CORS_REFUSED);
    /* An HTTPS server's own pages send https://; http:// is another origin. */
    ck_assert_int_eq(pulse_cors_judge_scheme("", "https://127.0.0.1:8080", "127.0.0.1:8080", true), PULSE_CORS_SAME);
    ck_assert_int_eq(pulse_cors_judge_scheme("", "http://127.0.0.1:8080", "127.0.0.1:8080", true), PULSE_CORS_REFUSED);
}
END_TEST

START_TEST(test_origin_lists_are_checked_for_shape)
{
    char err[256];
    static const char *const good[] = {"",
                                       "*",
                                       "http://a.example",
                                       "https://a.example:8443",
                                       "http://localhost:5173, http://127.0.0.1:3000",
                                       "http://[::1]:8080"};
    static const char *const bad[] = {
        "a.example",        "http://a.example/", "http://a.example/x",      "ftp://a.example",
        "http://A.example", "http://a.example:", "http://a.example:123456", "http://",
        "*, nope"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ck_assert_msg(pulse_cors_check_origins("server.cors-origins", good[i], err, sizeof err) == PULSE_OK,
                      "refused %s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_msg(pulse_cors_check_origins("server.cors-origins", bad[i], err, sizeof err) == PULSE_INVALID,
                      "accepted %s", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "server.cors-origins"));
    }
    ck_assert_int_eq(pulse_cors_check_switch("server.cors-credentials", "on", err, sizeof err), PULSE_OK);
    ck_assert_int_eq(pulse_cors_check_switch("server.cors-credentials", "true", err, sizeof err), PULSE_INVALID);
}
END_TEST

START_TEST(test_accept_encoding_allows_gzip_unless_refused)
{
    ck_assert(pulse_encode_accepts_gzip("gzip"));
    ck_assert(pulse_encode_accepts_gzip("gzip, deflate, br"));
    ck_assert(pulse_encode_accepts_gzip("br;q=1.0, GZIP;q=0.5"));
    ck_assert(pulse_encode_accepts_gzip("x-gzip"));
    ck_assert(pulse_encode_accepts_gzip("*"));
    ck_assert(!pulse_encode_accepts_gzip(NULL));
    ck_assert(!pulse_encode_accepts_gzip(""));
    ck_assert(!pulse_encode_accepts_gzip("identity"));
    ck_assert(!pulse_encode_accepts_gzip("deflate, br"));
    ck_assert(!pulse_encode_accepts_gzip("gzip;q=0"));
    ck_assert(!pulse_encode_accepts_gzip("gzip; q=0.0, identity"));
    ck_assert(!pulse_encode_accepts_gzip("gzipped"));
}
END_TEST

/* Inflates a gzip member; the plain length. */
static size_t inflate_all(const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    ck_assert_int_eq(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    ck_assert_int_eq(inflate(&z, Z_FINISH), Z_STREAM_END);
    ck_assert_uint_eq(z.avail_in, 0);
    size_t n = cap - z.avail_out;
    inflateEnd(&z);
    return n;
}

/* JSON-like text that compresses (repeats) with some noise in it. */
static void fill_text(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)((i % 97 == 0) ? 'a' + rand_r(&seed) % 26 : "{\"offset\":12,\"value\":\"x\"},"[i % 26]);
}

START_TEST(test_a_gzipped_answer_inflates_to_the_same_bytes)
{
    size_t sizes[] = {0, 1, 1024, 70000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        uint8_t *plain = pulse_malloc(n + 1);
        uint8_t *back = pulse_malloc(n + 64);
        fill_text(plain, n, 7);
        uint8_t *gz = NULL;
        size_t gz_len = 0;
        ck_assert_int_eq(pulse_encode_gzip(plain, n, &gz, &gz_len), PULSE_OK);
        ck_assert(gz_len >= 18 && gz[0] == 0x1f && gz[1] == 0x8b);
        if (n >= 1024)
            ck_assert_uint_lt(gz_len, n / 2);
        ck_assert_uint_eq(inflate_all(gz, gz_len, back, n + 64), n);
        ck_assert(n == 0 || memcmp(plain, back, n) == 0);
        pulse_free(gz);
        pulse_free(plain);
        pulse_free(back);
    }
}
END_TEST

struct src {
    const uint8_t *p;
    size_t len, at;
    unsigned seed;
    bool fail_at_half;
};

/* Gives the text in pieces of random sizes, as the JSON fetch does. */
static ssize_t src_read(void *arg, uint8_t *out, size_t max)
{
    struct src *s = arg;
    if (s->fail_at_half && s->at >= s->len / 2)
        return -2;
    if (s->at == s->len)
        return -1;
    size_t n = 1 + (size_t)rand_r(&s->seed) % max;
    if (n > s->len - s->at)
        n = s->len - s->at;
    memcpy(out, s->p + s->at, n);
    s->at += n;
    return (ssize_t)n;
}

START_TEST(test_a_streamed_gzip_answer_is_the_whole_text_in_any_window)
{
    size_t n = 300000;
    uint8_t *plain = pulse_malloc(n);
    uint8_t *back = pulse_malloc(n + 64);
    fill_text(plain, n, 3);
    size_t windows[] = {1, 7, 512, 32768};
    for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
        struct src s = {plain, n, 0, 5, false};
        struct pulse_gzip_stream *gz = pulse_gzip_stream_create(src_read, &s);
        ck_assert_ptr_nonnull(gz);
        struct pulse_buf_like {
            uint8_t *p;
            size_t len;
        } out = {pulse_malloc(n + 1024), 0};
        uint8_t block[32768];
        ssize_t got;
        while ((got = pulse_gzip_stream_read(gz, block, windows[w])) > 0) {
            ck_assert_uint_le((size_t)got, windows[w]);
            ck_assert_uint_le(out.len + (size_t)got, n + 1024);
            memcpy(out.p + out.len, block, (size_t)got);
            out.len += (size_t)got;
        }
        ck_assert_int_eq(got, -1);
        ck_assert_int_eq(pulse_gzip_stream_read(gz, block, windows[w]), -1); /* stays ended */
        ck_assert_uint_eq(inflate_all(out.p, out.len, back, n + 64), n);
        ck_assert(memcmp(plain, back, n) == 0);
        pulse_gzip_stream_destroy(gz);
        pulse_free(out.p);
    }
    /* A source that fails ends the stream with an error, not a short member. */
    struct src s = {plain, n, 0, 9, true};
    struct pulse_gzip_stream *gz = pulse_gzip_stream_create(src_read, &s);
    uint8_t block[4096];
    ssize_t got;
    while ((got = pulse_gzip_stream_read(gz, block, sizeof block)) > 0)
        ;
    ck_assert_int_eq(got, -2);
    pulse_gzip_stream_destroy(gz);
    pulse_gzip_stream_destroy(NULL);
    pulse_free(plain);
    pulse_free(back);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("browser");
    TCase *tc = tcase_create("cors");
    tcase_add_test(tc, test_origins_are_matched_exactly_and_star_allows_any);
    tcase_add_test(tc, test_the_servers_own_origin_is_same_origin_whatever_the_list);
    tcase_add_test(tc, test_origin_lists_are_checked_for_shape);
    suite_add_tcase(s, tc);
    tc = tcase_create("gzip");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_accept_encoding_allows_gzip_unless_refused);
    tcase_add_test(tc, test_a_gzipped_answer_inflates_to_the_same_bytes);
    tcase_add_test(tc, test_a_streamed_gzip_answer_is_the_whole_text_in_any_window);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
