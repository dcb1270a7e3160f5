/* SPDX-License-Identifier: MIT */
/*
 * check_textscan.c - the fast scanners of common/text.h against the plain
 * definitions they replace: UTF-8 validation against jansson and against a
 * byte-at-a-time validator, the one-pass measure and the escaper against
 * jansson's dump, the plain-string scanner of the publish fast path, the
 * integer formatter against printf and the shortest-digits search for reals
 * against trying every precision. The inputs are hostile on purpose:
 * invalid and truncated UTF-8, surrogates, overlong forms, code points past
 * U+10FFFF, NUL and every control byte, placed at every position around the
 * sixteen-byte steps of the scanners.
 */
#include <check.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/text.h"

/* ---- references: the definitions, one byte at a time -------------------- */

static bool ref_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        size_t need;
        uint32_t cp;
        if (b < 0x80) {
            i++;
            continue;
        }
        if (b >= 0xC2 && b <= 0xDF) {
            need = 1;
            cp = b & 0x1Fu;
        } else if (b >= 0xE0 && b <= 0xEF) {
            need = 2;
            cp = b & 0x0Fu;
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3;
            cp = b & 0x07u;
        } else {
            return false;
        }
        if (n - i - 1 < need)
            return false;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3Fu);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += need + 1;
    }
    return true;
}

static size_t ref_escaped_len(const uint8_t *p, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
            len += 2;
        else if (c < 0x20)
            len += 6;
        else
            len += 1;
    }
    return len;
}

/* jansson's compact text of the string, or NULL when jansson refuses it
 * (not UTF-8). */
static char *jansson_text(const uint8_t *p, size_t n)
{
    json_t *s = json_stringn(n > 0 ? (const char *)p : "", n);
    if (s == NULL)
        return NULL;
    char *text = json_dumps(s, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(s);
    return text;
}

/* Random hostile text: ASCII runs of random length (so the special bytes
 * land everywhere around the sixteen-byte steps) and pieces JSON or UTF-8
 * treat specially. */
static size_t hostile(uint8_t *out, size_t cap, unsigned *seed)
{
    static const char *const pieces[] = {"\"", "\\", "\x01", "\x1f", "\b", "\t", "\n", "\x7f", "\xc3\xa9",
                                         "\xe2\x80\xa8", "\xf0\x9f\x98\x80", "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf",
                                         /* invalid from here */
                                         "\xff", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xed\xbf\xbf",
                                         "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xc3", "\xe2\x82", "\x80",
                                         "\xc2\x20"};
    size_t n = 0;
    int k = rand_r(seed) % 6;
    for (int i = 0; i < k && n < cap; i++) {
        size_t run = (size_t)(rand_r(seed) % 40);
        for (size_t j = 0; j < run && n < cap; j++) {
            out[n] = (uint8_t)('a' + (j + n) % 26);
            n++;
        }
        if (rand_r(seed) % 3 == 0 && n < cap) {
            out[n++] = 0; /* NUL */
            continue;
        }
        /* Mostly valid pieces, so that many texts are valid throughout. */
        size_t which = (size_t)rand_r(seed) % (rand_r(seed) % 4 == 0 ? 24 : 13);
        size_t len = strlen(pieces[which]);
        if (n + len > cap)
            break;
        memcpy(out + n, pieces[which], len);
        n += len;
    }
    return n;
}

/* ---- UTF-8, measure, escape -------------------------------------------- */

START_TEST(test_measure_and_utf8_agree_with_the_definitions_and_jansson)
{
    unsigned seed = 1414;
    static uint8_t buf[512 + 16];
    for (int round = 0; round < 30000; round++) {
        /* At every alignment: the scanners load unaligned words. */
        uint8_t *p = buf + round % 16;
        size_t n = hostile(p, 512, &seed);
        bool want = ref_utf8(p, n);
        ck_assert_msg(pulse_text_utf8_valid(p, n) == want, "round %d", round);
        size_t len = 12345;
        ck_assert_msg(pulse_text_json_measure(p, n, &len) == want, "round %d", round);
        if (want)
            ck_assert_uint_eq(len, ref_escaped_len(p, n));
        else
            ck_assert_uint_eq(len, 12345); /* untouched */
        ck_assert_uint_eq(pulse_text_json_escaped_len(p, n), ref_escaped_len(p, n));
        char *text = jansson_text(p, n);
        ck_assert_msg((text != NULL) == want, "round %d: jansson disagrees on UTF-8", round);
        free(text); /* jansson's allocation */
    }
}
END_TEST

/* A single special byte at every position of texts up to 64 bytes long:
 * the edges of the sixteen-byte steps. */
START_TEST(test_one_special_byte_at_every_position)
{
    static const uint8_t specials[] = {0, 0x01, 0x1f, '"', '\\', '\n', 0x7f, 0x80, 0xc3, 0xff};
    uint8_t buf[64];
    for (size_t n = 1; n <= sizeof buf; n++) {
        for (size_t at = 0; at < n; at++) {
            for (size_t s = 0; s < sizeof specials; s++) {
                memset(buf, 'x', n);
                buf[at] = specials[s];
                bool want = ref_utf8(buf, n);
                size_t len = 0;
                ck_assert(pulse_text_utf8_valid(buf, n) == want);
                ck_assert(pulse_text_json_measure(buf, n, &len) == want);
                if (want)
                    ck_assert_uint_eq(len, ref_escaped_len(buf, n));
                ck_assert_uint_eq(pulse_text_json_escaped_len(buf, n), ref_escaped_len(buf, n));
                size_t end = 99;
                bool plain = pulse_text_json_plain_body(buf, n, &end);
                /* The quote ends the body; anything else special refuses it. */
                ck_assert(plain == (specials[s] == '"'));
                if (plain)
                    ck_assert_uint_eq(end, at);
            }
        }
    }
}
END_TEST

START_TEST(test_escape_in_any_window_is_jansson_text)
{
    unsigned seed = 2718;
    static uint8_t buf[512];
    static uint8_t got[512 * 6 + 2];
    for (int round = 0; round < 4000; round++) {
        size_t n = hostile(buf, sizeof buf, &seed);
        char *want = jansson_text(buf, n);
        if (want == NULL)
            continue; /* not UTF-8: the writers base64 it instead */
        size_t room = PULSE_TEXT_UNIT_MAX + (size_t)(rand_r(&seed) % (round % 2 == 0 ? 8 : 200));
        size_t at = 0, o = 0;
        got[o++] = '"';
        while (at < n) {
            size_t k = pulse_text_json_escape_some(buf, n, &at, got + o, room);
            ck_assert_uint_gt(k, 0);
            ck_assert_uint_le(k, room);
            o += k;
        }
        got[o++] = '"';
        ck_assert_msg(o == strlen(want) && memcmp(got, want, o) == 0, "round %d: got %.*s want %s", round, (int)o,
                      (const char *)got, want);
        free(want); /* jansson's allocation */
    }
}
END_TEST

/* The plain-string scanner against its definition: a quote after strict
 * UTF-8 without escapes or control bytes. */
START_TEST(test_plain_body_matches_its_definition)
{
    unsigned seed = 31337;
    static uint8_t buf[512];
    for (int round = 0; round < 30000; round++) {
        size_t n = hostile(buf, sizeof buf, &seed);
        size_t q = 0;
        while (q < n && buf[q] != '"' && buf[q] != '\\' && buf[q] >= 0x20)
            q++;
        bool want = q < n && buf[q] == '"' && ref_utf8(buf, q);
        size_t end = 0;
        ck_assert_msg(pulse_text_json_plain_body(buf, n, &end) == want, "round %d", round);
        if (want)
            ck_assert_uint_eq(end, q);
    }
}
END_TEST

/* ---- integers ----------------------------------------------------------- */

START_TEST(test_integers_print_as_printf_prints_them)
{
    static const int64_t edges[] = {0,
                                    1,
                                    -1,
                                    9,
                                    10,
                                    -10,
                                    99,
                                    100,
                                    999,
                                    1000,
                                    INT32_MAX,
                                    INT32_MIN,
                                    (int64_t)INT32_MAX + 1,
                                    1764400000000,
                                    INT64_MAX,
                                    INT64_MIN,
                                    INT64_MIN + 1,
                                    INT64_MAX - 1,
                                    999999999999999999,
                                    1000000000000000000};
    char got[PULSE_TEXT_INT_MAX + 1];
    char want[32];
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        size_t n = pulse_text_i64(edges[i], got);
        snprintf(want, sizeof want, "%lld", (long long)edges[i]);
        ck_assert_uint_eq(n, strlen(want));
        ck_assert(memcmp(got, want, n) == 0);
    }
    uint64_t u = UINT64_MAX;
    size_t n = pulse_text_u64(u, got);
    ck_assert_uint_eq(n, 20);
    ck_assert(memcmp(got, "18446744073709551615", 20) == 0);
    /* Every power of ten and its neighbours, and random values. */
    unsigned seed = 7;
    uint64_t p10 = 1;
    for (int k = 0; k < 20; k++, p10 *= 10) {
        for (int d = -1; d <= 1; d++) {
            uint64_t v = p10 + (uint64_t)(int64_t)d;
            n = pulse_text_u64(v, got);
            snprintf(want, sizeof want, "%llu", (unsigned long long)v);
            ck_assert_uint_eq(n, strlen(want));
            ck_assert(memcmp(got, want, n) == 0);
        }
    }
    for (int i = 0; i < 100000; i++) {
        int64_t v = (int64_t)((uint64_t)rand_r(&seed) << 42 ^ (uint64_t)rand_r(&seed) << 21 ^ (uint64_t)rand_r(&seed));
        v >>= rand_r(&seed) % 63;
        n = pulse_text_i64(v, got);
        snprintf(want, sizeof want, "%lld", (long long)v);
        ck_assert_uint_eq(n, strlen(want));
        ck_assert(memcmp(got, want, n) == 0);
    }
}
END_TEST

/* ---- reals -------------------------------------------------------------- */

/* The definition: the first precision that reads back. */
static int ref_digits(double d)
{
    char text[40];
    for (int p = 1; p < 17; p++) {
        snprintf(text, sizeof text, "%.*g", p, d);
        if (strtod(text, NULL) == d)
            return p;
    }
    return 17;
}

static void check_digits(double d)
{
    ck_assert_msg(pulse_text_real_digits(d) == ref_digits(d), "%.17g (%a): %d, want %d", d, d,
                  pulse_text_real_digits(d), ref_digits(d));
}

START_TEST(test_real_digits_are_the_shortest_that_read_back)
{
    static const double edges[] = {0.0,
                                   -0.0,
                                   0.1,
                                   0.2,
                                   0.3,
                                   1.0 / 3,
                                   2.0 / 3,
                                   1e23,
                                   9007199254740993.0,
                                   5e-324,
                                   DBL_MIN,
                                   DBL_MAX,
                                   -DBL_MAX,
                                   DBL_EPSILON,
                                   1e-310,
                                   2.2250738585072009e-308,
                                   123456789012345678.0,
                                   0.1 + 0.2,
                                   100.0,
                                   1e15,
                                   1e16,
                                   1e17,
                                   1e-5,
                                   21.5,
                                   52.520008,
                                   13.404954,
                                   4.35,
                                   2.675,
                                   1.005,
                                   9.999999999999999e22};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        check_digits(edges[i]);
    check_digits(INFINITY);
    unsigned seed = 2026;
    char text[64];
    for (int i = 0; i < 40000; i++) {
        /* Any bit pattern (subnormals included), but no NaN: JSON has none. */
        uint64_t bits = (uint64_t)rand_r(&seed) << 42 ^ (uint64_t)rand_r(&seed) << 21 ^ (uint64_t)rand_r(&seed);
        double d;
        memcpy(&d, &bits, sizeof d);
        if (!isnan(d))
            check_digits(d);
        /* Short decimals as people write them. */
        snprintf(text, sizeof text, "%d.%0*de%d", rand_r(&seed) % 100000, 1 + rand_r(&seed) % 9,
                 rand_r(&seed) % 1000000, rand_r(&seed) % 80 - 40);
        check_digits(strtod(text, NULL));
        check_digits((double)(rand_r(&seed) % 100000) / 100);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("textscan");
    TCase *tc = tcase_create("textscan");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_measure_and_utf8_agree_with_the_definitions_and_jansson);
    tcase_add_test(tc, test_one_special_byte_at_every_position);
    tcase_add_test(tc, test_escape_in_any_window_is_jansson_text);
    tcase_add_test(tc, test_plain_body_matches_its_definition);
    tcase_add_test(tc, test_integers_print_as_printf_prints_them);
    tcase_add_test(tc, test_real_digits_are_the_shortest_that_read_back);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
