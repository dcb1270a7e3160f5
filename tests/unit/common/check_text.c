/* SPDX-License-Identifier: MIT */
/*
 * check_text.c - the text encodings (common/text.h) and the record's JSON
 * text (common/record.h): base64 against RFC 4648's vectors and strictness,
 * UTF-8 against jansson's own check, and the record text against the object
 * jansson builds and dumps for the same record, byte for byte, on random
 * records full of the bytes JSON treats specially and of repeated, invalid
 * and NUL-holding header names; the streamed writer against the whole text
 * in windows down to the smallest that must progress.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/record.h"
#include "common/text.h"

/* ---- base64 ------------------------------------------------------------- */

START_TEST(test_base64_matches_rfc4648_vectors)
{
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < 7; i++) {
        char out[16];
        size_t n = strlen(plain[i]);
        ck_assert_uint_eq(pulse_text_b64_len(n), strlen(enc[i]));
        pulse_text_b64_encode((const uint8_t *)plain[i], n, out);
        ck_assert_str_eq(out, enc[i]);
        uint8_t *dec = NULL;
        size_t dlen = 0;
        ck_assert_int_eq(pulse_text_b64_decode(enc[i], strlen(enc[i]), &dec, &dlen), PULSE_OK);
        ck_assert_uint_eq(dlen, n);
        ck_assert(memcmp(dec, plain[i], n) == 0);
        pulse_free(dec);
    }
}
END_TEST

START_TEST(test_base64_round_trips_every_byte_value)
{
    uint8_t data[300];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7 + 3);
    for (size_t n = 0; n <= sizeof data; n += 1) {
        char enc[401];
        pulse_text_b64_encode(data, n, enc);
        uint8_t *dec = NULL;
        size_t dlen = 0;
        ck_assert_int_eq(pulse_text_b64_decode(enc, strlen(enc), &dec, &dlen), PULSE_OK);
        ck_assert_uint_eq(dlen, n);
        ck_assert(n == 0 || memcmp(dec, data, n) == 0);
        pulse_free(dec);
    }
}
END_TEST

START_TEST(test_bad_base64_is_refused)
{
    static const char *const bad[] = {"Zg=", "Z", "Zm9v!", "Zm 9v", "=Zg=", "Zg==Zg==", "Zh==", "Zm9=", "Zg==="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *dec = NULL;
        size_t dlen = 0;
        ck_assert_msg(pulse_text_b64_decode(bad[i], strlen(bad[i]), &dec, &dlen) == PULSE_INVALID, "accepted %s",
                      bad[i]);
    }
    /* padding is required: "Zm8" (for "fo") is refused */
    uint8_t *dec = NULL;
    size_t dlen = 0;
    ck_assert_int_eq(pulse_text_b64_decode("Zm8", 3, &dec, &dlen), PULSE_INVALID);
    ck_assert_int_eq(pulse_text_b64_decode("YQ", 2, &dec, &dlen), PULSE_INVALID);
}
END_TEST

START_TEST(test_base64_in_windows_is_the_whole_text)
{
    uint8_t data[100];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 31 + 1);
    for (size_t n = 0; n <= sizeof data; n++) {
        char whole[160];
        pulse_text_b64_encode(data, n, whole);
        for (size_t room = 4; room < 20; room++) {
            uint8_t got[160];
            size_t at = 0, o = 0;
            while (at < n) {
                size_t k = pulse_text_b64_encode_some(data, n, &at, got + o, room);
                ck_assert_uint_gt(k, 0);
                ck_assert_uint_le(k, room);
                o += k;
            }
            ck_assert_uint_eq(o, strlen(whole));
            ck_assert(memcmp(got, whole, o) == 0);
        }
    }
}
END_TEST

/* ---- UTF-8 and strings -------------------------------------------------- */

START_TEST(test_utf8_check_agrees_with_jansson)
{
    static const char *const samples[] = {"",
                                          "plain",
                                          "\xc3\xa9",
                                          "\xe2\x80\xa8",
                                          "\xf0\x9f\x98\x80",
                                          "\xc0\xaf",
                                          "\xe0\x80\xaf",
                                          "\xed\xa0\x80",
                                          "\xf4\x90\x80\x80",
                                          "\xf5\x80\x80\x80",
                                          "\xff",
                                          "\xc3",
                                          "a\xe2\x82",
                                          "\x7f",
                                          "\xc2\x80",
                                          "\xef\xbf\xbf"};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        size_t n = strlen(samples[i]);
        json_t *s = json_stringn(n > 0 ? samples[i] : "", n);
        ck_assert_msg(pulse_text_utf8_valid((const uint8_t *)samples[i], n) == (s != NULL), "sample %zu", i);
        json_decref(s);
    }
    /* NUL is a valid code point (jansson takes it with an explicit length). */
    ck_assert(pulse_text_utf8_valid((const uint8_t *)"a\0b", 3));
}
END_TEST

START_TEST(test_json_strings_are_escaped_as_jansson_escapes_them)
{
    uint8_t all[128];
    for (size_t i = 0; i < sizeof all; i++)
        all[i] = (uint8_t)i;
    struct pulse_buf out;
    pulse_buf_init(&out, 4096);
    ck_assert_int_eq(pulse_text_json_append_string(&out, all, sizeof all), PULSE_OK);
    json_t *s = json_stringn((const char *)all, sizeof all);
    char *want = json_dumps(s, JSON_COMPACT | JSON_ENCODE_ANY);
    ck_assert_uint_eq(out.len, strlen(want));
    ck_assert(memcmp(out.data, want, out.len) == 0);
    ck_assert_uint_eq(pulse_text_json_escaped_len(all, sizeof all) + 2, out.len);
    free(want); /* jansson's allocation */
    json_decref(s);
    pulse_buf_fini(&out);
}
END_TEST

/* ---- records against jansson ------------------------------------------- */

/* Records built here: headers are an array walked by array_header_next. */
struct test_record {
    struct pulse_record rec;
    struct pulse_header hdrs[4];
};

static bool array_header_next(const struct pulse_record *rec, size_t *pos, struct pulse_header *out)
{
    const struct pulse_header *h = rec->headers;
    if (*pos >= rec->header_count)
        return false;
    *out = h[(*pos)++];
    return true;
}

/* The reference: the record object built and dumped with jansson, as the
 * API did before it wrote the text itself. */
static json_t *ref_bytes(const uint8_t *p, size_t len)
{
    return json_stringn(len > 0 ? (const char *)p : "", len);
}

static json_t *ref_value(const uint8_t *p, size_t len)
{
    if (p == NULL)
        return json_null();
    json_t *val = ref_bytes(p, len);
    if (val == NULL) {
        char *b64 = pulse_malloc(pulse_text_b64_len(len) + 1);
        pulse_text_b64_encode(p, len, b64);
        val = json_string(b64);
        pulse_free(b64);
    }
    return val;
}

static char *ref_record(const struct pulse_record *rec)
{
    json_t *obj = json_pack("{s:I,s:I}", "offset", (json_int_t)rec->offset, "timestamp", (json_int_t)rec->timestamp);
    const uint8_t *ps[2] = {rec->key, rec->value};
    size_t ls[2] = {rec->key_len, rec->value_len};
    const char *names[2] = {"key", "value"};
    const char *names64[2] = {"key_base64", "value_base64"};
    for (int i = 0; i < 2; i++) {
        json_t *str = ps[i] == NULL ? json_null() : ref_bytes(ps[i], ls[i]);
        json_object_set_new(obj, str != NULL ? names[i] : names64[i], str != NULL ? str : ref_value(ps[i], ls[i]));
    }
    json_t *headers = json_object();
    size_t pos = 0;
    struct pulse_header h;
    while (rec->header_count > 0 && rec->header_next(rec, &pos, &h)) {
        json_t *val = ref_value(h.value, h.value_len);
        if (h.key_len > 0 && memchr(h.key, 0, h.key_len) == NULL)
            (void)json_object_setn_new(headers, (const char *)h.key, h.key_len, val);
        else
            json_decref(val);
    }
    json_object_set_new(obj, "headers", headers);
    char *text = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    return text;
}

static size_t rand_bytes(uint8_t *out, size_t cap, unsigned *seed)
{
    static const char *const pieces[] = {"a",    "Z9",       "\"",           "\\",
                                         "/",    "\x01",     "\x1f",         "\b\f\n\r\t",
                                         "\x7f", "\xc3\xa9", "\xe2\x80\xa8", "\xf0\x9f\x98\x80",
                                         "\xff", "\xc0\xaf", "\xed\xa0\x80", "\0",
                                         " "};
    size_t n = 0;
    /* Long buffers get many pieces: runs, escapes and base64 groups that
     * straddle the windows of a streamed write. */
    int k = rand_r(seed) % (cap >= 256 ? 80 : 7);
    for (int i = 0; i < k; i++) {
        size_t which = (size_t)rand_r(seed) % (sizeof pieces / sizeof pieces[0]);
        size_t len = which == 15 ? 1 : strlen(pieces[which]);
        if (n + len > cap)
            break;
        memcpy(out + n, pieces[which], len);
        n += len;
    }
    return n;
}

/* A random record (key, value and headers of up to max_len bytes each);
 * its bytes live in pool until the next call. */
static void random_record(unsigned *seed, struct test_record *t, size_t max_len)
{
    static uint8_t pool[12][512];
    int slot = 0;
    ck_assert_uint_le(max_len, sizeof pool[0]);
    struct pulse_record *rec = &t->rec;
    memset(t, 0, sizeof *t);
    rec->offset = rand_r(seed) % 1000000;
    rec->timestamp = 1764400000000 + rand_r(seed) % 1000;
    if (rand_r(seed) % 5 != 0) {
        rec->key = pool[slot];
        rec->key_len = rand_bytes(pool[slot++], max_len, seed);
    }
    if (rand_r(seed) % 5 != 0) {
        rec->value = pool[slot];
        rec->value_len = rand_bytes(pool[slot++], max_len, seed);
    }
    uint32_t nh = (uint32_t)(rand_r(seed) % 5);
    for (uint32_t h = 0; h < nh; h++) {
        struct pulse_header *hd = &t->hdrs[h];
        hd->key = pool[slot];
        hd->key_len = rand_r(seed) % 3 == 0 ? 1 : rand_bytes(pool[slot], max_len, seed);
        if (hd->key_len == 1)
            pool[slot][0] = (uint8_t)('a' + rand_r(seed) % 2); /* repeated names */
        slot++;
        if (rand_r(seed) % 4 != 0) {
            hd->value = pool[slot];
            hd->value_len = rand_bytes(pool[slot++], max_len, seed);
        }
    }
    rec->header_count = nh;
    rec->header_next = nh > 0 ? array_header_next : NULL;
    rec->headers = t->hdrs;
}

START_TEST(test_record_text_matches_jansson_byte_for_byte)
{
    unsigned seed = 4242;
    struct pulse_buf out;
    pulse_buf_init(&out, 1 << 20);
    for (int round = 0; round < 8000; round++) {
        struct test_record t;
        random_record(&seed, &t, 32);
        pulse_buf_reset(&out);
        ck_assert_int_eq(pulse_record_json_append(&out, &t.rec), PULSE_OK);
        char *want = ref_record(&t.rec);
        ck_assert_ptr_nonnull(want);
        ck_assert_msg(out.len == strlen(want) && memcmp(out.data, want, out.len) == 0, "got %.*s want %s", (int)out.len,
                      (const char *)out.data, want);
        free(want); /* jansson's allocation */
    }
    pulse_buf_fini(&out);
}
END_TEST

/* Many headers take the hashed path of the name table: the same text. */
START_TEST(test_many_repeated_header_names_match_jansson)
{
    static struct pulse_header hdrs[300];
    static char names[300][8];
    unsigned seed = 99;
    for (int round = 0; round < 20; round++) {
        uint32_t n = 17 + (uint32_t)(rand_r(&seed) % 280);
        for (uint32_t i = 0; i < n; i++) {
            int len = snprintf(names[i], sizeof names[i], "h%d", rand_r(&seed) % 40);
            hdrs[i].key = (const uint8_t *)names[i];
            hdrs[i].key_len = (size_t)len;
            hdrs[i].value = rand_r(&seed) % 7 == 0 ? NULL : (const uint8_t *)names[(i * 13) % n];
            hdrs[i].value_len = hdrs[i].value != NULL ? 2 : 0;
        }
        struct pulse_record rec = {
            .offset = 7, .timestamp = 9, .header_count = n, .header_next = array_header_next, .headers = hdrs};
        struct pulse_buf out;
        pulse_buf_init(&out, 1 << 20);
        ck_assert_int_eq(pulse_record_json_append(&out, &rec), PULSE_OK);
        char *want = ref_record(&rec);
        ck_assert_msg(out.len == strlen(want) && memcmp(out.data, want, out.len) == 0, "got %.*s want %s", (int)out.len,
                      (const char *)out.data, want);
        free(want); /* jansson's allocation */
        pulse_buf_fini(&out);
    }
}
END_TEST

START_TEST(test_records_written_in_small_windows_match_the_whole_text)
{
    unsigned seed = 777;
    struct pulse_buf whole;
    uint8_t streamed[8192];
    pulse_buf_init(&whole, 1 << 20);
    for (int round = 0; round < 3000; round++) {
        struct test_record t;
        random_record(&seed, &t, 300);
        pulse_buf_reset(&whole);
        ck_assert_int_eq(pulse_record_json_append(&whole, &t.rec), PULSE_OK);
        size_t size = 0, hlen = 0;
        ck_assert_int_eq(pulse_record_json_size(&t.rec, &size, &hlen), PULSE_OK);
        ck_assert_uint_eq(size, whole.len);
        ck_assert_uint_lt(whole.len, sizeof streamed);
        /* Windows from the smallest that must progress up to 40 bytes. */
        struct pulse_record_json w;
        ck_assert_int_eq(pulse_record_json_begin(&w, &t.rec), PULSE_OK);
        ck_assert_uint_eq(w.headers != NULL ? w.headers_len : 0, hlen);
        size_t got = 0;
        bool done = false;
        while (!done) {
            size_t room = PULSE_RECORD_JSON_WRITE_MIN + (size_t)rand_r(&seed) % 35;
            size_t n = pulse_record_json_write(&w, streamed + got, room, &done);
            ck_assert(n > 0 || done);
            ck_assert_uint_le(n, room);
            got += n;
            ck_assert_uint_le(got, whole.len);
        }
        pulse_record_json_end(&w);
        ck_assert_msg(got == whole.len && memcmp(streamed, whole.data, got) == 0, "streamed %.*s whole %.*s", (int)got,
                      (const char *)streamed, (int)whole.len, (const char *)whole.data);
    }
    pulse_buf_fini(&whole);
}
END_TEST

/* Every allocation failure of the writer is PULSE_NOMEM, never a crash or
 * a leak (LeakSanitizer in make check). */
START_TEST(test_allocation_failures_are_nomem)
{
    /* Few short headers need no allocation (they are rendered inside the
     * writer); many take the hashed name table and a rendered object on
     * the heap, which is what fails here. */
    static struct pulse_header hdrs[40];
    static char names[40][8];
    for (int i = 0; i < 40; i++) {
        int len = snprintf(names[i], sizeof names[i], "h%d", i % 30);
        hdrs[i] = (struct pulse_header){(const uint8_t *)names[i], (size_t)len, (const uint8_t *)"value", 5};
    }
    struct pulse_record rec = {
        .offset = 1, .timestamp = 2, .header_count = 40, .header_next = array_header_next, .headers = hdrs};
    bool done = false;
    int nomem = 0;
    for (unsigned long n = 1; !done && n < 100; n++) {
        struct pulse_buf out;
        pulse_buf_init(&out, 1 << 20);
        pulse_alloc_fail_after(n);
        pulse_status_t st = pulse_record_json_append(&out, &rec);
        pulse_alloc_fail_after(0);
        ck_assert(st == PULSE_OK || st == PULSE_NOMEM);
        nomem += st == PULSE_NOMEM;
        done = st == PULSE_OK;
        pulse_buf_fini(&out);
    }
    ck_assert(done);
    ck_assert_int_gt(nomem, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("text");
    TCase *tc = tcase_create("text");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_base64_matches_rfc4648_vectors);
    tcase_add_test(tc, test_base64_round_trips_every_byte_value);
    tcase_add_test(tc, test_bad_base64_is_refused);
    tcase_add_test(tc, test_base64_in_windows_is_the_whole_text);
    tcase_add_test(tc, test_utf8_check_agrees_with_jansson);
    tcase_add_test(tc, test_json_strings_are_escaped_as_jansson_escapes_them);
    tcase_add_test(tc, test_record_text_matches_jansson_byte_for_byte);
    tcase_add_test(tc, test_many_repeated_header_names_match_jansson);
    tcase_add_test(tc, test_records_written_in_small_windows_match_the_whole_text);
    tcase_add_test(tc, test_allocation_failures_are_nomem);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
