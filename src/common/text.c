/* SPDX-License-Identifier: MIT */
/*
 * text.c - see text.h. Base64 is written out here rather than borrowed so
 * that decoding is strict (the API answers 400 for bad base64 instead of
 * storing garbage) and bounded by the input length; the escaper copies
 * runs of bytes that stand for themselves with one memcpy, which is what
 * keeps a JSON fetch of large text values cheap.
 */
#include "common/text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"

/* ---- sixteen bytes at a time ------------------------------------------- */

/*
 * The scanners below skip what needs no work sixteen bytes a step: each
 * asks how many of the next sixteen bytes lead without needing a look
 * (plain16: ASCII that JSON copies as it is; copy16: bytes JSON copies as
 * they are, UTF-8 included). Either may answer fewer than there are (the
 * byte-wise path after it then takes the plain bytes too), never more.
 * SSE2 (every x86-64) answers exactly; elsewhere two 64-bit words answer
 * "all sixteen" or 0 (Sean Anderson's "Bit Twiddling Hacks": haszero and
 * hasless, exact for "some byte of the word" with n <= 128).
 */
#if defined(__SSE2__)
#include <emmintrin.h>

static inline size_t lead_of(unsigned mask)
{
    return mask == 0 ? 16 : (size_t)__builtin_ctz(mask);
}

static inline size_t plain16(const uint8_t *p)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    /* Signed: below 0x20 takes the bytes from 0x80 up as well. */
    __m128i m = _mm_or_si128(_mm_cmplt_epi8(x, _mm_set1_epi8(0x20)),
                             _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                                          _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
    return lead_of((unsigned)_mm_movemask_epi8(m));
}

static inline size_t copy16(const uint8_t *p)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    /* Unsigned below 0x20: min(x, 0x1f) == x. */
    __m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x1f)), x);
    __m128i m = _mm_or_si128(ctl, _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                                               _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
    return lead_of((unsigned)_mm_movemask_epi8(m));
}
#else
#define W_ONES 0x0101010101010101ull
#define W_HIGHS 0x8080808080808080ull

static inline uint64_t load_word(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

static inline uint64_t has_zero(uint64_t w)
{
    return (w - W_ONES) & ~w & W_HIGHS;
}

static inline uint64_t has_below(uint64_t w, uint8_t n)
{
    return (w - W_ONES * n) & ~w & W_HIGHS;
}

/* Some byte of w is one JSON escapes: below 0x20, '"' or '\\'. */
static inline uint64_t needs_escape(uint64_t w)
{
    return has_below(w, 0x20) | has_zero(w ^ (W_ONES * '"')) | has_zero(w ^ (W_ONES * '\\'));
}

static inline size_t plain16(const uint8_t *p)
{
    uint64_t a = load_word(p);
    uint64_t b = load_word(p + 8);
    return ((a | b) & W_HIGHS) == 0 && (needs_escape(a) | needs_escape(b)) == 0 ? 16 : 0;
}

static inline size_t copy16(const uint8_t *p)
{
    return (needs_escape(load_word(p)) | needs_escape(load_word(p + 8))) == 0 ? 16 : 0;
}
#endif

/* Whether s[0, 16) is all ASCII (exactly). */
static inline bool ascii16(const uint8_t *s)
{
    uint64_t a, b;
    memcpy(&a, s, sizeof a);
    memcpy(&b, s + 8, sizeof b);
    return ((a | b) & 0x8080808080808080ull) == 0;
}

/* ---- UTF-8 ------------------------------------------------------------ */

/* The length of the valid sequence at s[0, n) (s[0] >= 0x80), or 0. */
static size_t utf8_seq(const uint8_t *s, size_t n)
{
    uint8_t b = s[0];
    size_t need;
    uint32_t cp;
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
        return 0;
    }
    if (n - 1 < need)
        return 0;
    for (size_t k = 1; k <= need; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[k] & 0x3Fu);
    }
    if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return need + 1;
}

bool pulse_text_utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        /* ASCII runs sixteen bytes a step. */
        while (n - i >= 16 && ascii16(s + i))
            i += 16;
        if (i == n)
            break;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_seq(s + i, n - i);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

/* ---- base64 ----------------------------------------------------------- */

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t pulse_text_b64_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

/* Writes pulse_text_b64_len(n) characters, without a NUL. */
static void b64_encode_raw(const uint8_t *in, size_t n, char *out)
{
    size_t i = 0;
    size_t o = 0;
    while (i + 3 <= n) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64_alphabet[v >> 18 & 63];
        out[o++] = b64_alphabet[v >> 12 & 63];
        out[o++] = b64_alphabet[v >> 6 & 63];
        out[o++] = b64_alphabet[v & 63];
        i += 3;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = b64_alphabet[v >> 18 & 63];
        out[o++] = b64_alphabet[v >> 12 & 63];
        out[o++] = '=';
        out[o++] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = b64_alphabet[v >> 18 & 63];
        out[o++] = b64_alphabet[v >> 12 & 63];
        out[o++] = b64_alphabet[v >> 6 & 63];
        out[o++] = '=';
    }
}

void pulse_text_b64_encode(const uint8_t *in, size_t n, char *out)
{
    b64_encode_raw(in, n, out);
    out[pulse_text_b64_len(n)] = '\0';
}

size_t pulse_text_b64_encode_some(const uint8_t *p, size_t n, size_t *at, uint8_t *out, size_t room)
{
    size_t groups = room / 4;
    size_t left = n - *at;
    /* Everything when it fits (the padded last group included), else as
     * many whole groups as fit. */
    size_t take = left / 3 < groups ? left : groups * 3;
    size_t len = pulse_text_b64_len(take);
    b64_encode_raw(p + *at, take, (char *)out);
    *at += take;
    return len;
}

static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

pulse_status_t pulse_text_b64_decode(const char *in, size_t len, uint8_t **out, size_t *out_len)
{
    pulse_status_t st = PULSE_OK;
    uint8_t *buf = NULL;
    size_t data_len = len;

    /* Canonical RFC 4648 only: the length is a multiple of 4 and up to two
     * '=' pad the end, so one text has one meaning. */
    if (len % 4 != 0) {
        st = PULSE_INVALID;
        goto out;
    }
    if (len > 0 && in[len - 1] == '=') {
        data_len--;
        if (in[len - 2] == '=')
            data_len--;
    }
    if (data_len % 4 == 1) {
        st = PULSE_INVALID;
        goto out;
    }
    buf = pulse_malloc(data_len / 4 * 3 + 3);
    if (buf == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    size_t o = 0;
    uint32_t acc = 0;
    unsigned bits = 0;
    for (size_t i = 0; i < data_len; i++) {
        int v = b64_value(in[i]);
        if (v < 0) {
            st = PULSE_INVALID;
            goto out;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    /* Leftover bits must be zero (canonical encoding). */
    if (acc != 0) {
        st = PULSE_INVALID;
        goto out;
    }
    *out = buf;
    *out_len = o;
    buf = NULL;
out:
    pulse_free(buf);
    return st;
}

/* ---- JSON string escaping --------------------------------------------- */

/* What jansson's compact dump writes for byte c: its length, and the text
 * in esc when it is not the byte itself. */
static size_t escape_of(uint8_t c, char esc[PULSE_TEXT_UNIT_MAX])
{
    static const char hex[] = "0123456789ABCDEF";
    char short_form = 0;
    switch (c) {
    case '"':
        short_form = '"';
        break;
    case '\\':
        short_form = '\\';
        break;
    case '\b':
        short_form = 'b';
        break;
    case '\f':
        short_form = 'f';
        break;
    case '\n':
        short_form = 'n';
        break;
    case '\r':
        short_form = 'r';
        break;
    case '\t':
        short_form = 't';
        break;
    default:
        if (c >= 0x20)
            return 1;
        esc[0] = '\\';
        esc[1] = 'u';
        esc[2] = '0';
        esc[3] = '0';
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 15];
        return 6;
    }
    esc[0] = '\\';
    esc[1] = short_form;
    return 2;
}

/* Bytes an escape adds to byte c (0 when c stands for itself): the
 * lengths escape_of gives, less one, for the scanners. */
/* clang-format off */
static const uint8_t escape_extra[256] = {
    5, 5, 5, 5, 5, 5, 5, 5, 1, 1, 1, 5, 1, 1, 5, 5, /* 0x00: \b \t \n \f \r */
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, /* 0x10 */
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x20: '"' */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x30 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x40 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, /* 0x50: '\\' */
};
/* clang-format on */

/* The end of the run of bytes from i that stand for themselves. */
static size_t plain_run_end(const uint8_t *p, size_t i, size_t n)
{
    while (n - i >= 16) {
        size_t k = copy16(p + i);
        i += k;
        if (k < 16)
            break;
    }
    while (i < n && escape_extra[p[i]] == 0)
        i++;
    return i;
}

size_t pulse_text_json_escaped_len(const uint8_t *p, size_t n)
{
    size_t len = n;
    size_t i = plain_run_end(p, 0, n);
    while (i < n) {
        len += escape_extra[p[i]];
        i = plain_run_end(p, i + 1, n);
    }
    return len;
}

bool pulse_text_json_measure(const uint8_t *s, size_t n, size_t *escaped_len)
{
    size_t extra = 0;
    size_t i = 0;
    while (i < n) {
        /* Sixteen bytes a step while nothing needs a look. */
        while (n - i >= 16) {
            size_t k = plain16(s + i);
            i += k;
            if (k < 16)
                break;
        }
        if (i == n)
            break;
        if (s[i] < 0x80) {
            extra += escape_extra[s[i]];
            i++;
            continue;
        }
        size_t k = utf8_seq(s + i, n - i);
        if (k == 0)
            return false;
        i += k;
    }
    *escaped_len = n + extra;
    return true;
}

bool pulse_text_json_plain_body(const uint8_t *s, size_t n, size_t *end)
{
    size_t i = 0;
    for (;;) {
        while (n - i >= 16) {
            size_t k = plain16(s + i);
            i += k;
            if (k < 16)
                break;
        }
        if (i == n)
            return false;
        uint8_t b = s[i];
        if (b == '"') {
            *end = i;
            return true;
        }
        if (b < 0x20 || b == '\\')
            return false;
        if (b < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_seq(s + i, n - i);
        if (k == 0)
            return false;
        i += k;
    }
}

size_t pulse_text_json_escape_some(const uint8_t *p, size_t n, size_t *at, uint8_t *out, size_t room)
{
    size_t i = *at;
    size_t o = 0;
    char esc[PULSE_TEXT_UNIT_MAX];
    while (i < n && o < room) {
        /* A run of bytes that stand for themselves, copied at once (and
         * looked for no further than the room takes). */
        size_t lim = n - i < room - o ? n : i + (room - o);
        size_t end = plain_run_end(p, i, lim);
        memcpy(out + o, p + i, end - i);
        o += end - i;
        i = end;
        if (i == n || o == room)
            break;
        size_t k = escape_of(p[i], esc);
        if (k > room - o)
            break;
        memcpy(out + o, esc, k);
        o += k;
        i++;
    }
    *at = i;
    return o;
}

/* ---- integers ---------------------------------------------------------- */

/* The digits of v into out (room for 20). */
static size_t put_u64(uint64_t v, char *out)
{
    static const char pairs[] = "00010203040506070809101112131415161718192021222324"
                                "25262728293031323334353637383940414243444546474849"
                                "50515253545556575859606162636465666768697071727374"
                                "75767778798081828384858687888990919293949596979899";
    char tmp[PULSE_TEXT_INT_MAX];
    size_t t = sizeof tmp;
    while (v >= 100) {
        unsigned d = (unsigned)(v % 100) * 2;
        v /= 100;
        tmp[--t] = pairs[d + 1];
        tmp[--t] = pairs[d];
    }
    if (v >= 10) {
        tmp[--t] = pairs[v * 2 + 1];
        tmp[--t] = pairs[v * 2];
    } else {
        tmp[--t] = (char)('0' + v);
    }
    memcpy(out, tmp + t, sizeof tmp - t);
    return sizeof tmp - t;
}

size_t pulse_text_u64(uint64_t v, char out[PULSE_TEXT_INT_MAX])
{
    return put_u64(v, out);
}

size_t pulse_text_i64(int64_t v, char out[PULSE_TEXT_INT_MAX])
{
    if (v >= 0)
        return put_u64((uint64_t)v, out);
    out[0] = '-';
    /* -(v + 1) + 1 cannot overflow, INT64_MIN included; at most 19
     * digits follow the sign. */
    return 1 + put_u64((uint64_t)(-(v + 1)) + 1, out + 1);
}

pulse_status_t pulse_text_json_append_string(struct pulse_buf *out, const uint8_t *p, size_t n)
{
    size_t len = pulse_text_json_escaped_len(p, n);
    if (len > SIZE_MAX - 2)
        return PULSE_TOO_LARGE;
    pulse_status_t st = pulse_buf_reserve(out, len + 2);
    if (st != PULSE_OK)
        return st;
    size_t at = 0;
    out->data[out->len++] = '"';
    out->len += pulse_text_json_escape_some(p, n, &at, out->data + out->len, len);
    out->data[out->len++] = '"';
    return PULSE_OK;
}

/* ---- reals -------------------------------------------------------------- */

/* The fewest significant digits (1..17) that print d so it reads back as d,
 * by trying each in turn: the definition, for the cases the shortcut below
 * does not cover. */
static int real_digits_by_trial(double d)
{
    char text[40];
    for (int p = 1; p < 17; p++) {
        snprintf(text, sizeof text, "%.*g", p, d);
        if (strtod(text, NULL) == d)
            return p;
    }
    return 17;
}

/* Significant digits of printf's %g text (at least 1). */
static int significant_digits(const char *text)
{
    int n = 0, zeros = 0;
    bool leading = true;
    for (const char *c = text; *c != '\0' && *c != 'e'; c++) {
        if (*c < '0' || *c > '9')
            continue;
        if (leading && *c == '0')
            continue;
        leading = false;
        if (*c == '0') {
            zeros++;
        } else {
            n += zeros + 1;
            zeros = 0;
        }
    }
    return n > 0 ? n : 1;
}

/*
 * Why one or two tries suffice for a normal d (or zero): a decimal of at
 * most 15 significant digits survives decimal -> double -> 15 digits
 * (DBL_DIG). So if d's 15-digit text t reads back as d, no shorter text
 * of another value can (it would print as itself at 15 digits, not as t),
 * and t with its trailing zeros dropped, q digits, is what %.{p}g prints
 * for every p from q to 15 (d lies within 2^-53 of t, far closer than the
 * next decimal of 15 digits): q is the answer. If t does not read back,
 * no text of 15 digits or fewer does, and only 16 and 17 remain.
 * Subnormals have fewer bits than that argument needs: tried one by one.
 */
int pulse_text_real_digits(double d)
{
    char text[40];
    int cls = fpclassify(d);
    if (cls != FP_NORMAL && cls != FP_ZERO)
        return real_digits_by_trial(d);
    snprintf(text, sizeof text, "%.15g", d);
    if (strtod(text, NULL) == d)
        return significant_digits(text);
    snprintf(text, sizeof text, "%.16g", d);
    return strtod(text, NULL) == d ? 16 : 17;
}
