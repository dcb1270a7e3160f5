/* SPDX-License-Identifier: MIT */
/*
 * check_fastpub.c - the JSON fast path against jansson: publish bodies
 * parsed without it. (Fetched records written without jansson are
 * checked against it in tests/unit/common/check_text.c.)
 *
 * The property that makes the fast path safe: whenever it accepts a body,
 * jansson (with the gateway's flags) accepts the same bytes, and the records
 * are identical - same keys, values (byte for byte, null vs empty),
 * partitions and timestamps. It is checked on generated bodies, on every
 * truncation and on byte flips of them, and a few shapes are pinned to each
 * side of the line.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "http/fastpub.h"

/* Reference: what the jansson path makes of a body restricted to the
 * fields the fast path knows. Returns the records or NULL (rejected or
 * outside the subset). */
static json_t *ref_parse(const uint8_t *body, size_t len)
{
    json_error_t e;
    json_t *doc = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
    if (doc == NULL)
        return NULL;
    if (!json_is_object(doc) || json_object_size(doc) != 1 || !json_is_array(json_object_get(doc, "records"))) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

static void expect_same(const uint8_t *body, size_t len, const struct pulse_publish_record *recs, size_t n)
{
    json_t *doc = ref_parse(body, len);
    ck_assert_msg(doc != NULL, "fast path accepted a body jansson rejects: %.*s", (int)(len > 200 ? 200 : len),
                  (const char *)body);
    json_t *arr = json_object_get(doc, "records");
    ck_assert_uint_eq(json_array_size(arr), n);
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        ck_assert(json_is_object(o));
        json_t *k = json_object_get(o, "key");
        json_t *v = json_object_get(o, "value");
        json_t *p = json_object_get(o, "partition");
        json_t *t = json_object_get(o, "timestamp");
        ck_assert_ptr_nonnull(v);
        if (k == NULL || json_is_null(k)) {
            ck_assert_ptr_null(recs[i].key);
        } else {
            ck_assert(json_is_string(k));
            ck_assert_ptr_nonnull(recs[i].key); /* "" is not null */
            ck_assert_uint_eq(recs[i].key_len, json_string_length(k));
            ck_assert_int_eq(memcmp(recs[i].key, json_string_value(k), json_string_length(k)), 0);
        }
        if (json_is_null(v)) {
            ck_assert_ptr_null(recs[i].value);
        } else {
            ck_assert(json_is_string(v));
            ck_assert_ptr_nonnull(recs[i].value);
            ck_assert_uint_eq(recs[i].value_len, json_string_length(v));
            ck_assert_int_eq(memcmp(recs[i].value, json_string_value(v), json_string_length(v)), 0);
        }
        if (p == NULL) {
            ck_assert_int_eq(recs[i].partition, -1);
        } else {
            ck_assert(json_is_integer(p));
            ck_assert_int_eq(recs[i].partition, json_integer_value(p));
        }
        if (t == NULL) {
            ck_assert(!recs[i].has_timestamp);
        } else {
            ck_assert(json_is_integer(t));
            ck_assert(recs[i].has_timestamp);
            ck_assert_int_eq(recs[i].timestamp, json_integer_value(t));
        }
        json_t *h = json_object_get(o, "headers");
        if (h == NULL || json_is_null(h)) {
            ck_assert_uint_eq(recs[i].header_count, 0);
        } else {
            /* The slow path's headers: in the body's order, names and
             * values byte for byte. */
            ck_assert(json_is_object(h));
            ck_assert_uint_eq(recs[i].header_count, json_object_size(h));
            ck_assert(recs[i].header_count == 0 || recs[i].headers != NULL);
            size_t j = 0;
            const char *hk;
            json_t *hv;
            json_object_foreach(h, hk, hv)
            {
                const struct pulse_header *got = &recs[i].headers[j++];
                ck_assert(json_is_string(hv));
                ck_assert_uint_eq(got->key_len, strlen(hk));
                ck_assert_int_eq(memcmp(got->key, hk, got->key_len), 0);
                ck_assert_ptr_nonnull(got->value);
                ck_assert_uint_eq(got->value_len, json_string_length(hv));
                ck_assert_int_eq(memcmp(got->value, json_string_value(hv), got->value_len), 0);
            }
        }
        /* The fast path knows no other member. */
        size_t known = 1 + (k != NULL) + (p != NULL) + (t != NULL) + (h != NULL);
        ck_assert_uint_eq(json_object_size(o), known);
    }
    json_decref(doc);
}

/* Bodies the fast path took with at least one header (the generator must
 * reach them). */
static int fast_with_headers;

/* Runs the fast path; when it accepts, checks it against the reference. */
static int check_body(const uint8_t *body, size_t len)
{
    struct pulse_publish_record *recs = NULL;
    struct pulse_header *hdrs = NULL;
    size_t n = 0;
    pulse_status_t st = pulse_fastpub_parse(body, len, 10000, &recs, &n, &hdrs);
    ck_assert(st == PULSE_OK || st == PULSE_INVALID);
    if (st == PULSE_OK) {
        expect_same(body, len, recs, n);
        for (size_t i = 0; i < n; i++) {
            if (recs[i].header_count > 0) {
                fast_with_headers++;
                break;
            }
        }
    }
    pulse_free(recs);
    pulse_free(hdrs);
    return st == PULSE_OK;
}

static int check_str(const char *s)
{
    return check_body((const uint8_t *)s, strlen(s));
}

START_TEST(test_the_common_shape_takes_the_fast_path_with_identical_records)
{
    ck_assert(check_str("{\"records\":[{\"value\":\"abc\"}]}"));
    ck_assert(check_str(" {\n\"records\" : [ {\"key\":\"user-42\",\"value\":\"x\"} , {\"value\":null,\"key\":\"k\"},"
                        "{\"value\":\"\",\"partition\":1,\"timestamp\":1764400000000}\t] }\r\n"));
    ck_assert(check_str("{\"records\":[{\"key\":null,\"value\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}]}"));
}
END_TEST

START_TEST(test_everything_outside_the_subset_falls_back)
{
    const char *const others[] = {
        "",
        "{}",
        "{\"records\":[]}",
        "{\"records\":[{}]}",
        "{\"records\":[{\"key\":\"k\"}]}",              /* no value */
        "{\"records\":[{\"value\":\"a\\\"b\"}]}",       /* escape */
        "{\"records\":[{\"value\":{\"sku\":\"a1\"}}]}", /* JSON value */
        "{\"records\":[{\"value\":1}]}",
        "{\"records\":[{\"value\":\"a\",\"headers\":{\"h\":1}}]}",                 /* not a string */
        "{\"records\":[{\"value\":\"a\",\"headers\":{\"h\":null}}]}",              /* null header value */
        "{\"records\":[{\"value\":\"a\",\"headers\":{\"h\":\"x\",\"h\":\"y\"}}]}", /* repeated name */
        "{\"records\":[{\"value\":\"a\",\"headers\":{\"h\\n\":\"x\"}}]}",          /* escaped name */
        "{\"records\":[{\"value\":\"a\",\"headers\":[\"h\"]}]}",
        "{\"records\":[{\"value\":\"a\",\"headers\":{},\"headers\":{}}]}",
        "{\"records\":[{\"value\":\"a\",\"headers\":{\"h\":\"x\",}}]}",
        "{\"records\":[{\"value_base64\":\"AAEC\"}]}",
        "{\"records\":[{\"value\":\"a\",\"value\":\"b\"}]}", /* duplicate */
        "{\"records\":[{\"value\":\"a\",\"partition\":-1}]}",
        "{\"records\":[{\"value\":\"a\",\"partition\":01}]}",
        "{\"records\":[{\"value\":\"a\",\"partition\":1.0}]}",
        "{\"records\":[{\"value\":\"a\",\"partition\":2147483648}]}",
        "{\"records\":[{\"value\":\"a\",\"timestamp\":9223372036854775808}]}",
        "{\"records\":[{\"value\":\"a\"}],\"extra\":1}",
        "{\"records\":[{\"value\":\"a\"}]} x",
        "{\"records\":[{\"value\":\"a\"},]}",
        "{\"records\":[{\"value\":\"\xc0\xaf\"}]}",         /* overlong */
        "{\"records\":[{\"value\":\"\xed\xa0\x80\"}]}",     /* surrogate */
        "{\"records\":[{\"value\":\"\xf4\x90\x80\x80\"}]}", /* > U+10FFFF */
        "{\"records\":[{\"value\":\"tab\there\"}]}",        /* control char */
        "[{\"value\":\"a\"}]",
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        ck_assert_msg(!check_str(others[i]), "fast path took: %s", others[i]);
}
END_TEST

START_TEST(test_more_records_than_the_limit_fall_back)
{
    const char *body = "{\"records\":[{\"value\":\"a\"},{\"value\":\"b\"},{\"value\":\"c\"}]}";
    struct pulse_publish_record *recs = NULL;
    size_t n = 0;
    struct pulse_header *hdrs = NULL;
    ck_assert_int_eq(pulse_fastpub_parse((const uint8_t *)body, strlen(body), 2, &recs, &n, &hdrs), PULSE_INVALID);
    ck_assert_int_eq(pulse_fastpub_parse((const uint8_t *)body, strlen(body), 3, &recs, &n, &hdrs), PULSE_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_ptr_null(hdrs);
    pulse_free(recs);
}
END_TEST

/* Random bodies in and around the subset. */
static void rand_string(struct pulse_buf *b, unsigned *seed)
{
    static const char *const pieces[] = {"a",    "user-42", "",        "\xc3\xa9", "\xf0\x9f\x98\x80",
                                         " ",    "\\\"",    "\\u00e9", "\\n",      "x\x01",
                                         "\xff", "{}",      ":",       ","};
    pulse_buf_append_u8(b, '"');
    int n = rand_r(seed) % 6;
    for (int i = 0; i < n; i++) {
        const char *p = pieces[rand_r(seed) % (sizeof pieces / sizeof pieces[0])];
        pulse_buf_append(b, p, strlen(p));
    }
    pulse_buf_append_u8(b, '"');
}

static void rand_ws(struct pulse_buf *b, unsigned *seed)
{
    static const char ws[] = " \t\n\r";
    while (rand_r(seed) % 4 == 0)
        pulse_buf_append_u8(b, (uint8_t)ws[rand_r(seed) % 4]);
}

/* A "headers" member's value: mostly objects of strings, with repeated
 * names, non-string values, null and other shapes mixed in. */
static void rand_headers(struct pulse_buf *b, unsigned *seed)
{
    static const char *const names[] = {"\"t\"", "\"trace-id\"", "\"\"", "\"\xc3\xa9\"", "\"a\\u0000\""};
    static const char *const odd[] = {"null", "[]", "\"x\"", "{\"t\":1}", "{\"t\":null}"};
    int shape = rand_r(seed) % 8;
    if (shape == 0) {
        const char *o = odd[rand_r(seed) % (sizeof odd / sizeof odd[0])];
        pulse_buf_append(b, o, strlen(o));
        return;
    }
    pulse_buf_append_u8(b, '{');
    int n = rand_r(seed) % 4;
    for (int i = 0; i < n; i++) {
        if (i > 0)
            pulse_buf_append_u8(b, ',');
        rand_ws(b, seed);
        const char *name = names[rand_r(seed) % (sizeof names / sizeof names[0])];
        pulse_buf_append(b, name, strlen(name));
        pulse_buf_append_u8(b, ':');
        if (rand_r(seed) % 2 == 0)
            pulse_buf_append(b, "\"v\"", 3);
        else
            rand_string(b, seed);
        rand_ws(b, seed);
    }
    pulse_buf_append_u8(b, '}');
}

static void rand_body(struct pulse_buf *b, unsigned *seed)
{
    static const char *const numbers[] = {"0",    "1",   "42",  "2147483647",    "2147483648",          "-1",
                                          "01",   "1.5", "1e3", "1764400000000", "9223372036854775807", "null",
                                          "\"3\""};
    pulse_buf_reset(b);
    rand_ws(b, seed);
    pulse_buf_append(b, "{\"records\":[", 12);
    int nrec = 1 + rand_r(seed) % 5;
    for (int r = 0; r < nrec; r++) {
        if (r > 0)
            pulse_buf_append_u8(b, ',');
        rand_ws(b, seed);
        pulse_buf_append_u8(b, '{');
        int nf = rand_r(seed) % 5;
        bool value_done = false;
        for (int f = 0; f < nf || !value_done; f++) {
            if (f > 0)
                pulse_buf_append_u8(b, ',');
            rand_ws(b, seed);
            int which = f >= nf ? 1 : rand_r(seed) % 6;
            static const char *const names[] = {"\"key\"",       "\"value\"",   "\"partition\"",
                                                "\"timestamp\"", "\"headers\"", "\"value_base64\""};
            pulse_buf_append(b, names[which], strlen(names[which]));
            rand_ws(b, seed);
            pulse_buf_append_u8(b, ':');
            rand_ws(b, seed);
            if (which == 0 || which == 1) {
                if (rand_r(seed) % 5 == 0)
                    pulse_buf_append(b, "null", 4);
                else
                    rand_string(b, seed);
                value_done = value_done || which == 1;
            } else if (which == 2 || which == 3) {
                const char *num = numbers[rand_r(seed) % (sizeof numbers / sizeof numbers[0])];
                pulse_buf_append(b, num, strlen(num));
            } else if (which == 4) {
                rand_headers(b, seed);
            } else {
                pulse_buf_append(b, "\"AAEC\"", 6);
            }
            rand_ws(b, seed);
        }
        pulse_buf_append_u8(b, '}');
    }
    pulse_buf_append(b, "]}", 2);
    rand_ws(b, seed);
}

START_TEST(test_generated_bodies_agree_with_jansson)
{
    unsigned seed = 20261129;
    struct pulse_buf b;
    pulse_buf_init(&b, 1 << 20);
    int fast = 0;
    for (int i = 0; i < 20000; i++) {
        rand_body(&b, &seed);
        fast += check_body(b.data, b.len);
    }
    /* The generator must reach both sides, or the test proves nothing. */
    ck_assert_int_gt(fast, 500);
    ck_assert_int_gt(fast_with_headers, 30);
    ck_assert_int_lt(fast, 19000);
    pulse_buf_fini(&b);
}
END_TEST

START_TEST(test_truncations_and_byte_flips_never_make_it_accept_a_bad_body)
{
    unsigned seed = 77;
    struct pulse_buf b;
    pulse_buf_init(&b, 1 << 20);
    uint8_t *copy = pulse_malloc(1 << 20);
    for (int i = 0; i < 300; i++) {
        rand_body(&b, &seed);
        for (size_t cut = 0; cut < b.len; cut++)
            check_body(b.data, cut);
        for (int k = 0; k < 40; k++) {
            memcpy(copy, b.data, b.len);
            copy[(size_t)rand_r(&seed) % b.len] ^= (uint8_t)(1u << (rand_r(&seed) % 8));
            check_body(copy, b.len);
        }
    }
    pulse_free(copy);
    pulse_buf_fini(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fastpub");
    TCase *tc = tcase_create("fastpub");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_the_common_shape_takes_the_fast_path_with_identical_records);
    tcase_add_test(tc, test_everything_outside_the_subset_falls_back);
    tcase_add_test(tc, test_more_records_than_the_limit_fall_back);
    tcase_add_test(tc, test_generated_bodies_agree_with_jansson);
    tcase_add_test(tc, test_truncations_and_byte_flips_never_make_it_accept_a_bad_body);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
