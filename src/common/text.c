/* SPDX-License-Identifier: MIT */
/*
 * text.c - see text.h. Base64 is written out here rather than borrowed so
 * that decoding is strict (the API answers 400 for bad base64 instead of
 * storing garbage) and bounded by the input length; the escaper copies
 * runs of bytes that stand for themselves with one memcpy, which is what
 * keeps a JSON fetch of large text values cheap.
 */
#include "common/text.h"

#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"

/* ---- UTF-8 ------------------------------------------------------------ */

bool pulse_text_utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
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

size_t pulse_text_json_escaped_len(const uint8_t *p, size_t n)
{
    size_t len = 0;
    char esc[PULSE_TEXT_UNIT_MAX];
    for (size_t i = 0; i < n; i++)
        len += escape_of(p[i], esc);
    return len;
}

size_t pulse_text_json_escape_some(const uint8_t *p, size_t n, size_t *at, uint8_t *out, size_t room)
{
    size_t i = *at;
    size_t o = 0;
    char esc[PULSE_TEXT_UNIT_MAX];
    while (i < n && o < room) {
        size_t k = escape_of(p[i], esc);
        if (k == 1) {
            /* A run of bytes that stand for themselves, copied at once. */
            size_t run = 1;
            while (i + run < n && o + run < room && escape_of(p[i + run], esc) == 1)
                run++;
            memcpy(out + o, p + i, run);
            o += run;
            i += run;
            continue;
        }
        if (k > room - o)
            break;
        memcpy(out + o, esc, k);
        o += k;
        i++;
    }
    *at = i;
    return o;
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
